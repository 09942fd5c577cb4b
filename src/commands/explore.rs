//! `clhip explore`: random shapes over the combinations that pass on this machine, for a time
//! budget, every failure shrunk and written as a reproducer ([`clhip::explore`]); the results
//! written as `run`'s are (JSON, with a journal as they land; JUnit and Markdown where asked).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use clhip::explore::{self, found};
use clhip::model::Op;
use clhip::output::{self, Journal};
use clhip::plan::{self, RunOptionsBuilder, WorkerExe};
use clhip::report::{self, RunReport, RunStatus};
use clhip::runner::Stopped;

use super::outputs::{Outputs, Stdout};
use super::signals::handle_signals;
use super::{existing_dir, load_matrix, note, parse_timeout};

/// Where what explore finds goes when no `-o` is given.
const DEFAULT_OUT: &str = "reports/explore";

#[derive(clap::Args)]
pub struct ExploreArgs {
    /// How long to explore, after one calibration case per combination (`30s`, `10m`, `1h`).
    /// Shrinking and the reproducers come after it.
    #[arg(long, value_parser = parse_budget)]
    budget: Duration,
    /// Globs (`*` wildcard) or substrings of the matrix's case ids: the combinations to
    /// explore; a filter matching nothing is an error.
    filters: Vec<String>,
    /// The run seed, which draws the shapes and every case's data [default: today's date (UTC)
    /// as YYYYMMDD, a new seed each night; printed].
    #[arg(long)]
    seed: Option<u64>,
    /// The largest shared buffer a shape may have: bytes, or with KiB, MiB or GiB.
    #[arg(long, default_value = "4MiB", value_parser = parse_bytes)]
    max_bytes: usize,
    /// The ops to explore, comma-separated [default: every op but placement].
    #[arg(long, value_delimiter = ',')]
    ops: Vec<Op>,
    /// Where the case file of the failures (found.toml) and one reproducer per failure
    /// (repro-1/, repro-2/, ...) go [default: reports/explore; a directory you name is made,
    /// but not the directories above it].
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
    /// Results file (JSON, as `run` writes) [default: results.json in the -o directory].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Also write the Markdown rendering here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Case matrix file whose combinations are explored (default: the built-in one).
    #[arg(long)]
    cases: Option<PathBuf>,
    /// Per-case time limit in seconds.
    #[arg(long, default_value_t = 60.0, value_parser = parse_timeout)]
    timeout: f64,
    /// Cases per worker process before a fresh one takes over (at least 1).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    cases_per_worker: u32,
    /// Most sizes tried in shrinking one failure.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    shrink_steps: u32,
    /// Only the pairs of these GPUs (comma-separated), as `run --devices`.
    #[arg(long, value_delimiter = ',')]
    devices: Vec<String>,
    /// A ROCm install (a directory) to load HIP from.
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Option<PathBuf>,
    /// Write no reproducers (the case file and the results still are).
    #[arg(long)]
    no_repro: bool,
    /// Test-only: plant an error in every case (straddle-2mib: a corruption only shapes past
    /// 2 MiB meet), to show that exploring finds and shrinks it.
    #[arg(long, hide = true)]
    plant: Option<clhip::ops::Plant>,
}

/// `30s`, `10m`, `1h 30m`: more than nothing.
fn parse_budget(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("`{s}`: {e} (e.g. 30s, 10m, 1h)"))?;
    if d.is_zero() {
        return Err(format!("`{s}`: a budget must be more than nothing"));
    }
    Ok(d)
}

/// `4MiB`, `512KiB`, `1048576`: at least one complex element, 8 bytes.
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let number: usize = number
        .parse()
        .map_err(|_| format!("`{s}`: expected a number of bytes, e.g. 4MiB or 1048576"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "`{s}`: unknown unit `{other}` (B, KiB, MiB or GiB)"
            ));
        }
    };
    let bytes = number
        .checked_mul(scale)
        .ok_or_else(|| format!("`{s}`: too many bytes"))?;
    if bytes < 8 {
        return Err(format!("`{s}`: less than one complex element (8 bytes)"));
    }
    Ok(bytes)
}

impl ExploreArgs {
    /// The files the run reads, each with the option that names it: no output may be one.
    fn inputs(&self) -> Vec<(&str, &Path)> {
        let mut ins: Vec<(&str, &Path)> = Vec::new();
        ins.extend(self.cases.as_deref().map(|p| ("--cases", p)));
        ins.extend(self.rocm_path.as_deref().map(|p| ("--rocm-path", p)));
        ins
    }
}

pub fn explore(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    let started = SystemTime::now();
    let clock = Instant::now();
    // Inputs and outputs first: a bad case file, filter or output fails before anything runs.
    let matrix = load_matrix(args.cases.as_deref())?;
    let (seed, whence) = match args.seed {
        Some(s) => (s, "--seed"),
        None => (
            explore::seed::nightly(started)?,
            "today's date, UTC: a new seed each night",
        ),
    };
    let out = out_dir(args.out.as_deref())?;
    let found_file = output::check_dir("-o", &out, &[found::CASE_FILE])?;
    // Made now: the results file and the reproducers go into it.
    match std::fs::create_dir(&out) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(e).with_context(|| format!("-o {}: making it", out.display()));
        }
        _ => {}
    }
    let json = args
        .json
        .clone()
        .unwrap_or_else(|| out.join("results.json"));
    let outputs = Outputs::check(
        Some(&json),
        args.junit.as_deref(),
        args.markdown.as_deref(),
        None,
        &args.inputs(),
    )?;
    let ops: Vec<Op> = if args.ops.is_empty() {
        explore::DEFAULT_OPS.to_vec()
    } else {
        args.ops.clone()
    };
    let probe = plan::probe_machine(args.rocm_path.as_slice())?;
    let mut pairs = clhip::pairs::from_probe(&probe);
    if !args.devices.is_empty() {
        pairs = clhip::pairs::select(&probe, pairs, &args.devices)?;
    }
    if pairs.is_empty() {
        bail!(
            "no OpenCL device found, nothing to pair (OpenCL: {}; see `clhip probe`)",
            probe.opencl_status
        );
    }
    let combinations = explore::combinations(&matrix, &pairs, &args.filters, &ops, args.max_bytes)?;
    if combinations.is_empty() {
        bail!("nothing to explore: the matrix, the filters and --ops leave no combination");
    }
    note(&format!(
        "clhip: explore: seed {seed} ({whence}); `--seed {seed}` draws these shapes again"
    ));
    let fingerprint = probe.fingerprint();
    let exe = WorkerExe::pin()?;
    let opts = RunOptionsBuilder::new(&exe, seed, args.timeout)
        .workers(args.cases_per_worker as usize, 1, false)
        .rocm_paths(args.rocm_path.as_slice())
        .plant(args.plant, &[])?
        .build();
    handle_signals(opts.control.clone())?;

    let command: Vec<String> = std::env::args().collect();
    let head = RunReport::new(
        seed,
        command.clone(),
        fingerprint.clone(),
        started,
        0.0,
        Vec::new(),
    );
    let mut journal = Journal::start(&outputs.json, &report::journal_head(&head))?;
    let mut journal_error = None;
    let mut on_result = |r: &clhip::results::CaseResult| {
        if let Some(j) = &mut journal
            && let Err(err) = serde_json::to_value(r)
                .map_err(anyhow::Error::from)
                .and_then(|v| j.append(&v))
        {
            journal_error.get_or_insert(err);
        }
    };
    let options = explore::Options {
        seed,
        budget: args.budget,
        max_bytes: args.max_bytes,
        shrink_steps: args.shrink_steps as usize,
    };
    let explored = explore::explore(
        &options,
        &probe,
        combinations,
        &opts,
        &mut on_result,
        &mut |line| note(line),
    )?;
    if let Some(e) = journal_error {
        note(&format!(
            "clhip: warning: the journal missed results: {e:#}"
        ));
    }

    // What was found: each failure's reproducer, then the case file that runs them again.
    let mut reproducers: Vec<Result<PathBuf, String>> = Vec::new();
    if !args.no_repro && explored.stopped.is_none() {
        let repro_options = found::ReproOptions {
            seed,
            plant: args.plant,
            timeout_s: args.timeout,
            rocm_path: args.rocm_path.clone(),
            fingerprint: fingerprint.lines(),
        };
        for (k, f) in explored.failures.iter().enumerate() {
            let dir = found::repro_dir(&out, k);
            let made = found::write_reproducer(f, &dir, &repro_options, &mut |line| note(line));
            reproducers.push(made.map(|_| dir).map_err(|e| format!("{e:#}")));
        }
    }
    let case_text = found::case_file(&explored, seed, args.plant).unwrap_or_else(|| {
        format!("# `clhip explore --seed {seed}` found no failure: nothing to run again.\n")
    });
    let case_file_written = found_file.write(&[(found::CASE_FILE, case_text.as_bytes(), 0o666)]);

    let mut report = RunReport::new(
        seed,
        command,
        fingerprint,
        started,
        clock.elapsed().as_secs_f64(),
        explored.results.clone(),
    );
    report.selection = Some(plan::selection(
        &args.filters,
        &args.devices,
        None,
        &matrix,
        explored.results.iter().map(|r| r.id.as_str()),
    ));
    report.status = match &explored.stopped {
        None => RunStatus::Complete,
        Some(Stopped::Interrupted) => RunStatus::Interrupted,
        Some(Stopped::Aborted(why)) => RunStatus::Stopped { why: why.clone() },
    };
    let case_file = out.join(found::CASE_FILE);
    let summary = summary(&explored, seed, &case_file, args.plant, &reproducers);
    let printed = Stdout::new().write(&summary);
    let written = outputs.write(&report);
    match journal {
        Some(j) if written.json_failed => note(&format!(
            "clhip: the results are kept in the journal {} (`clhip report` reads it)",
            j.path().display()
        )),
        Some(j) => j.finish(),
        None => {}
    }
    written.result()?;
    case_file_written.with_context(|| format!("-o {}", out.display()))?;
    printed?;
    Ok(match report.status {
        RunStatus::Interrupted => ExitCode::from(130),
        RunStatus::Stopped { why } => {
            note(&format!("clhip: explore stopped: {why}"));
            ExitCode::from(2)
        }
        _ if report.summary.unexpected == 0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// `-o`, else [`DEFAULT_OUT`] (made, with `reports/` above it, as `run` makes its default).
fn out_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => {
            let p = PathBuf::from(DEFAULT_OUT);
            std::fs::create_dir_all(&p).with_context(|| format!("making {}", p.display()))?;
            Ok(p)
        }
    }
}

/// What standard output says: how much was explored, and each failure with the command that
/// runs it again and its reproducer.
fn summary(
    e: &explore::Explored,
    seed: u64,
    case_file: &Path,
    plant: Option<clhip::ops::Plant>,
    reproducers: &[Result<PathBuf, String>],
) -> String {
    let explored_combinations = e.combinations.iter().filter(|c| c.passes()).count();
    let mut t = format!(
        "explored {} cases in {:.1} s ({:.0} a minute) over {explored_combinations} combinations, seed {seed}",
        e.explored,
        e.explore_s,
        e.per_minute()
    );
    if e.repeats > 0 {
        t.push_str(&format!(
            "; {} draws were cases already run, not run again",
            e.repeats
        ));
    }
    if e.exhausted {
        t.push_str(&format!(
            "; exploring ended before the budget: {} draws in a row were cases already run (every shape was)",
            explore::REPEATS_TO_STOP
        ));
    }
    t.push('\n');
    if e.failures.is_empty() {
        t.push_str("no failure found\n");
        return t;
    }
    t.push_str(&format!(
        "{} failures (one per combination and outcome kind), each shrunk:\n",
        e.failures.len()
    ));
    for (k, f) in e.failures.iter().enumerate() {
        t.push_str(&format!(
            "  {}. {} {}\n     {}\n     {}\n     run again: {}\n",
            k + 1,
            f.kind,
            f.shrunk.id,
            clhip::escape::terminal_line(&f.shrunk.outcome.reason()),
            f.shrink_note(),
            found::rerun_command(f, seed, case_file, plant)
        ));
        match reproducers.get(k) {
            Some(Ok(dir)) => t.push_str(&format!(
                "     reproducer: {} (./build.sh && ./repro)\n",
                dir.display()
            )),
            Some(Err(why)) => t.push_str(&format!(
                "     no reproducer: {}\n",
                clhip::escape::terminal_line(why)
            )),
            None => {}
        }
    }
    t
}
