//! `clhip run`: the case matrix over every pair found, each case in a worker process, the
//! support matrix printed and the results written (JSON, with a journal as results land; JUnit
//! and Markdown where asked).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use clhip::cases::Matrix;
use clhip::expectations::Baseline;
use clhip::expectations::Expectations;
use clhip::output::Journal;
use clhip::plan::{self, RunOptionsBuilder, WorkerExe};
use clhip::probe::Probe;
use clhip::report::{self, ConsoleReporter, RunReport, RunStatus};
use clhip::results::Planned;
use clhip::runner::{self, Stopped};
use clhip::{mock, pairs};

use super::outputs::{Outputs, Stdout};
use super::signals::handle_signals;
use super::{check_expectations, existing_dir, load_matrix, note, parse_timeout};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Globs (`*` wildcard) or substrings of case ids; a filter matching nothing is an error.
    filters: Vec<String>,
    /// The seed every case's data are drawn from: the same seed gives the same data, so a
    /// case rerun (or reproduced) sees what it saw here.
    #[arg(long, default_value_t = plan::DEFAULT_SEED)]
    seed: u64,
    /// Results file (JSON, versioned, with the driver fingerprint) [default:
    /// reports/latest.json, its directory made if missing; a directory you name must exist].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Also write the Markdown rendering here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Case matrix file (default: the built-in cases/default.toml).
    #[arg(long)]
    cases: Option<PathBuf>,
    /// Known non-passes for this driver (`case-id,outcome` lines).
    #[arg(long, conflicts_with = "expectations")]
    baseline: Option<PathBuf>,
    /// Expectation files (a TOML file, or a directory of them such as cases/expectations):
    /// the ones whose `applies` patterns match this run's fingerprint say what is known.
    #[arg(long)]
    expectations: Option<PathBuf>,
    /// Per-case time limit in seconds (more than 0, at most a week). A worker also gets this
    /// long to start its next case. Time the run spends stopped (Ctrl-Z, or SIGSTOP then
    /// SIGCONT) does not count.
    #[arg(long, default_value_t = 120.0, value_parser = parse_timeout)]
    timeout: f64,
    /// Cases per worker process before a fresh one takes over (at least 1).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    cases_per_worker: u32,
    /// Worker processes at once per GPU, 1 to 256. Each has its own device contexts, so a crash
    /// or fault still costs one case; more than one shortens runs where many cases crash or
    /// fault. Each GPU (and each OpenCL device of a host pair) gets its own.
    #[arg(long, short = 'j', default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: u16,
    /// Keep one spare worker per runner thread, its device contexts made, to take over at once
    /// when a crash or fault ends a worker. Off by default: on NVIDIA's driver, which makes
    /// contexts one process at a time, it bought nothing (an H100's full matrix: 67.0 s without,
    /// 67.3 s with at -j 4), and each spare holds a second set of contexts.
    #[arg(long)]
    spare_workers: bool,
    /// A ROCm install (a directory) to load HIP from. Repeat it to run several installs side
    /// by side: each is a participant of its own (`hip@6.3.2`, case ids
    /// `rocm0+hip@6.3.2:0/...`) run by workers of its own, and the matrix gets a comparison
    /// with a column per install.
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Vec<PathBuf>,
    /// Without a terminal (a CI log), print a status line every SECONDS: cases done of the
    /// total, counts by outcome, ETA (0: none). On a terminal the progress bar says it.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    heartbeat: u64,
    /// Exit 0 when the filters and pairs leave no case to run (a nightly job that ran nothing
    /// otherwise fails).
    #[arg(long)]
    allow_empty: bool,
    /// Run a case that came out worse than expected again alone, up to N times: one that then
    /// comes out otherwise is `flaky` (both outcomes kept); one that fails in its batch and
    /// passes alone is bisected for the earlier case it fails only after.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10))]
    retries: u32,
    /// Only the pairs of these GPUs (comma-separated): a device-runtime index (`0`), a UUID
    /// (`GPU-` prefix optional), a PCI bus id, or an OpenCL label (`nvidia1`).
    #[arg(long, value_delimiter = ',')]
    devices: Vec<String>,
    /// Run only shard M of N (`hash:M/N`): a case's shard is a hash of its id, so it does not
    /// change when filters do; `clhip merge` joins the shards' results. The results file
    /// records the shard, the filters and the whole plan, which the merge checks.
    #[arg(long)]
    partition: Option<clhip::partition::Partition>,
    /// Test-only: plant an error in every case (flip-element, skip-sync, bad-pointer) to show
    /// the checks catch it.
    #[arg(long, hide = true)]
    plant: Option<clhip::ops::Plant>,
    /// Test-only: plant only in the cases these globs or substrings of case ids match (one
    /// GPU's copy of one case, to show the consistency flag raised on real hardware).
    #[arg(long, hide = true, requires = "plant", value_delimiter = ',')]
    plant_only: Vec<String>,
    /// Test-only: run these mock actions (segfault,abort,hang,fault,...) instead of the matrix.
    #[arg(long, hide = true)]
    mock_cases: Option<String>,
    /// Test-only: judge the mock actions as cases are (by --baseline, or as unbaselined), not
    /// each by its own kind, to show the run's exit status.
    #[arg(long, hide = true, requires = "mock_cases")]
    mock_as_cases: bool,
}

impl RunArgs {
    /// The files the run reads, each with the option that names it: no output may be one.
    fn inputs(&self) -> Vec<(&str, &Path)> {
        let mut ins: Vec<(&str, &Path)> = Vec::new();
        ins.extend(self.cases.as_deref().map(|p| ("--cases", p)));
        ins.extend(self.baseline.as_deref().map(|p| ("--baseline", p)));
        ins.extend(self.expectations.as_deref().map(|p| ("--expectations", p)));
        ins.extend(self.rocm_path.iter().map(|p| ("--rocm-path", p.as_path())));
        ins
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let started = SystemTime::now();
    let clock = Instant::now();
    // Inputs and outputs first: a bad case file, baseline, filter or output path fails before
    // anything runs, and before anything is written.
    let matrix = load_matrix(args.cases.as_deref())?;
    let baseline = match &args.baseline {
        Some(f) => Some(Baseline::load(f)?),
        None => None,
    };
    let outputs = Outputs::check(
        args.json.as_deref(),
        args.junit.as_deref(),
        args.markdown.as_deref(),
        &args.inputs(),
    )?;
    let probe = plan::probe_machine(&args.rocm_path)?;
    // Every OpenCL vendor broke in the probe: that is the finding, named, not "no device".
    if args.mock_cases.is_none()
        && pairs::from_probe(&probe).is_empty()
        && !probe.broken_vendors().is_empty()
    {
        return every_vendor_broke(&args, &matrix, &probe, &outputs, started, clock);
    }
    let known = args
        .expectations
        .as_deref()
        .map(|p| Expectations::load(p, &probe.fingerprint()))
        .transpose()?;
    let mut stale_expectations = Vec::new();
    if let Some(k) = &known {
        for line in k.notes() {
            note(&format!("clhip: {line}"));
        }
        // Mock items are not cases of the matrix: no rule is about them.
        if args.mock_cases.is_none() {
            stale_expectations = check_expectations(k, &matrix, &probe)?;
        }
    }
    // Where each known outcome comes from, for the console to name.
    let mut sources = HashMap::new();
    let items = planned_items(
        &args,
        &probe,
        &matrix,
        baseline.as_ref(),
        known.as_ref(),
        &mut sources,
    )?;
    // The whole plan is recorded before the partition takes this shard's share of it: it is
    // what tells shards of one run from strangers, and a merge of every shard from part of one.
    let selection = plan::selection(
        &args.filters,
        &args.devices,
        args.partition,
        &matrix,
        items.iter().map(|p| p.id.as_str()),
    );
    let items: Vec<Planned> = items
        .into_iter()
        .filter(|p| args.partition.is_none_or(|part| part.contains(&p.id)))
        .collect();
    let stale = stale_baseline(&args, baseline.as_ref(), &matrix, &probe);
    let plan_position: HashMap<String, usize> = items
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.clone(), i))
        .collect();
    // A case whose buffer the device cannot allocate at all is decided here, from the probe,
    // with the same refusal a worker would meet, and costs no worker.
    let (items, decided) = plan::decide_by_probe(&probe, items);
    // A plant that reaches no case that runs leaves a clean run, which the caller would read
    // as a check that caught nothing: the same rule as the run's own filters.
    if !args.plant_only.is_empty() {
        let cases = items
            .iter()
            .filter_map(|p| p.work.case().cloned())
            .collect();
        clhip::cases::filter(cases, &args.plant_only).context("--plant-only")?;
    }
    if items.is_empty() && decided.is_empty() && !args.allow_empty {
        bail!(
            "nothing to run: the filters and the pairs found leave 0 cases (pass --allow-empty if that is intended)"
        );
    }
    for line in pairs::unpaired(&probe) {
        note(&format!("clhip: warning: {line}"));
    }
    let broken_vendors = probe.broken_vendors();
    let fingerprint = probe.fingerprint();
    let exe = WorkerExe::pin()?;
    let opts = RunOptionsBuilder::new(&exe, args.seed, args.timeout)
        .workers(
            args.cases_per_worker as usize,
            usize::from(args.jobs),
            args.spare_workers,
        )
        .retries(args.retries)
        .rocm_paths(&args.rocm_path)
        .plant(args.plant, &args.plant_only)?
        .build();
    handle_signals(opts.control.clone())?;

    let command: Vec<String> = std::env::args().collect();
    let mut head = RunReport::new(
        args.seed,
        command.clone(),
        fingerprint.clone(),
        started,
        0.0,
        Vec::new(),
    );
    head.selection = Some(selection.clone());
    head.planted = planted(&args);
    let mut journal = Journal::start(&outputs.json, &report::journal_head(&head))?;
    if let Some(j) = &journal {
        note(&format!(
            "clhip: {} cases, seed {}; results are journaled to {} as they land",
            items.len(),
            args.seed,
            j.path().display()
        ));
    } else {
        note(&format!("clhip: {} cases, seed {}", items.len(), args.seed));
    }
    let mut console = ConsoleReporter::new(items.len() + decided.len())
        .with_sources(sources)
        .with_heartbeat(Some(Duration::from_secs(args.heartbeat)));
    let mut journal_error = None;
    let mut on_event = |e: &runner::Event| {
        console.on_event(e);
        if let (Some(j), runner::Event::Finished(r)) = (&mut journal, e)
            && let Err(err) = serde_json::to_value(r)
                .map_err(anyhow::Error::from)
                .and_then(|v| j.append(&v))
        {
            journal_error.get_or_insert(err);
        }
    };
    for r in &decided {
        on_event(&runner::Event::Finished(Box::new(r.clone())));
    }
    let mut end = runner::run(items, &opts, &mut on_event)?;
    if !decided.is_empty() {
        // Back into plan order: the decided cases where the matrix put them.
        end.results.extend(decided);
        end.results
            .sort_by_key(|r| plan_position.get(&r.id).copied().unwrap_or(usize::MAX));
    }
    console.finish();
    if let Some(e) = journal_error {
        note(&format!(
            "clhip: warning: the journal missed results: {e:#}"
        ));
    }
    let mut report = RunReport::new(
        args.seed,
        command,
        fingerprint,
        started,
        clock.elapsed().as_secs_f64(),
        end.results,
    );
    report.not_run = end.not_run;
    report.stale_baseline = stale;
    report.stale_baseline.extend(stale_expectations);
    report.broken_vendors = broken_vendors;
    report.selection = Some(selection);
    report.planted = planted(&args);
    report.consistency = clhip::consistency::check(&report.results, &plan::gpu_identities(&probe));
    for line in report.consistency.lines() {
        note(&format!("clhip: {line}"));
    }
    report.status = match &end.stopped {
        None => RunStatus::Complete,
        Some(Stopped::Interrupted) => RunStatus::Interrupted,
        Some(Stopped::Aborted(why)) => RunStatus::Stopped { why: why.clone() },
    };
    let mut stdout = Stdout::new();
    let printed = stdout
        .write(&report::render_matrix(&report.results))
        .and_then(|()| stdout.write(&format!("{}\n", report::closing_line(&report.summary))));
    if !report.stale_baseline.is_empty() {
        note(&format!(
            "clhip: {} baseline entries or expectation globs matched no case (listed in the results file)",
            report.stale_baseline.len()
        ));
    }
    // The results are written whatever happened to stdout, each output whatever happened to
    // the others.
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
    printed?;
    Ok(exit_status(report))
}

/// The run's plant, for its results: `none` is the control run of a plant, no plant at all.
fn planted(args: &RunArgs) -> Option<clhip::report::Planted> {
    let plant = args.plant.filter(|p| *p != clhip::ops::Plant::None)?;
    let name = serde_json::to_value(plant).ok()?.as_str()?.to_string();
    Some(clhip::report::Planted {
        plant: name,
        only: args.plant_only.clone(),
    })
}

/// The run when every OpenCL vendor broke in the probe: nothing run, each vendor named, the
/// results file written saying so; exit 1.
fn every_vendor_broke(
    args: &RunArgs,
    matrix: &Matrix,
    probe: &Probe,
    outputs: &Outputs,
    started: SystemTime,
    clock: Instant,
) -> anyhow::Result<ExitCode> {
    for v in probe.broken_vendors() {
        note(&format!("clhip: broken driver: {v}"));
    }
    let mut report = RunReport::new(
        args.seed,
        std::env::args().collect(),
        probe.fingerprint(),
        started,
        clock.elapsed().as_secs_f64(),
        Vec::new(),
    );
    report.broken_vendors = probe.broken_vendors();
    report.planted = planted(args);
    report.status = RunStatus::NothingRun {
        why: "every OpenCL vendor broke in the probe".into(),
    };
    report.selection = Some(plan::selection(
        &args.filters,
        &args.devices,
        args.partition,
        matrix,
        std::iter::empty(),
    ));
    outputs.write(&report).result()?;
    Ok(ExitCode::from(1))
}

/// The items the run's filters select (or its mock actions), each with its expectation: the
/// baseline's, else the expectation files', else none; `sources` gets where each known
/// outcome comes from, for the console to name.
fn planned_items(
    args: &RunArgs,
    probe: &Probe,
    matrix: &Matrix,
    baseline: Option<&Baseline>,
    known: Option<&Expectations>,
    sources: &mut HashMap<String, String>,
) -> anyhow::Result<Vec<Planned>> {
    Ok(match &args.mock_cases {
        Some(list) => {
            let mut items =
                mock::planned_mocks(&mock::parse_mock_list(list).map_err(anyhow::Error::msg)?);
            if args.mock_as_cases {
                mock::judge_as_cases(&mut items, baseline.map(|b| &b.known));
            }
            items
        }
        None => plan::planned_cases(probe, matrix, &args.filters, &args.devices)?
            .into_iter()
            .map(|c| {
                let e = match (baseline, known) {
                    (Some(b), _) => b.expectation(&c),
                    (None, Some(k)) => k.expectation(&c),
                    (None, None) => Baseline::unbaselined(&c),
                };
                let source = match (baseline, known) {
                    (Some(b), _) => b.source_of(&c.id()),
                    (None, Some(k)) => k.rule(&c).map(|r| r.at.clone()),
                    (None, None) => None,
                };
                if let Some(at) = source {
                    sources.insert(c.id(), at);
                }
                plan::plan_item(probe, c, e)
            })
            .collect(),
    })
}

/// The baseline's entries that match no case of the matrix on this machine, each warned of:
/// a stale baseline is how a nightly job goes blind.
fn stale_baseline(
    args: &RunArgs,
    baseline: Option<&Baseline>,
    matrix: &Matrix,
    probe: &Probe,
) -> Vec<String> {
    let mut stale = Vec::new();
    if let (Some(b), Some(file)) = (baseline, &args.baseline) {
        let every_case = matrix.expand(&pairs::from_probe(probe));
        stale = b.unmatched(&every_case);
        for id in &stale {
            note(&format!(
                "clhip: warning: baseline {}: `{id}` matches no case of this matrix on this machine",
                file.display()
            ));
        }
        if !stale.is_empty() {
            note(&format!(
                "clhip: warning: {} baseline entries match no case",
                stale.len()
            ));
        }
    }
    stale
}

/// The run's exit status, said on stderr where it is not the verdict: 130 interrupted, 2
/// stopped, 1 for a broken driver or an outcome worse than expected.
fn exit_status(report: RunReport) -> ExitCode {
    match report.status {
        RunStatus::Interrupted => {
            note(&format!(
                "clhip: interrupted: {} finished, {} not run",
                report.results.len(),
                report.not_run.len()
            ));
            ExitCode::from(130)
        }
        RunStatus::Stopped { why } => {
            note(&format!("clhip: run stopped: {why}"));
            ExitCode::from(2)
        }
        _ if !report.broken_vendors.is_empty() => {
            for v in &report.broken_vendors {
                note(&format!("clhip: broken driver: {v}"));
            }
            ExitCode::from(1)
        }
        _ if report.summary.unexpected == 0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}
