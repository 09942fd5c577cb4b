//! The `clhip` command line: probe, list, run, report, bench, and the hidden worker.

mod commands;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use clhip::cases::Baseline;
use clhip::expectations::Expectations;
use clhip::output::Journal;
use clhip::plan::{RunOptionsBuilder, WorkerExe};
use clhip::report::{self, ConsoleReporter, RunReport, RunStatus};
use clhip::runner::{self, Planned, Stopped};
use clhip::{mock, pairs, plan, probe};

use commands::outputs::{Outputs, Stdout};
use commands::signals::handle_signals;
use commands::{bench, diff, list, merge, probe as probe_cmd, report as report_cmd};
use commands::{check_expectations, existing_dir, load_matrix, note, parse_timeout};

#[derive(Parser)]
#[command(
    name = "clhip",
    version,
    about = "Conformance and correctness harness for GPU memory interop between OpenCL and HIP"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List OpenCL platforms and devices with what interop depends on, and the HIP and CUDA
    /// runtimes found (or why not).
    Probe(probe_cmd::ProbeArgs),
    /// List the ids of the cases `run` would execute.
    List(list::ListArgs),
    /// Run the case matrix over every pair found and print the support matrix.
    Run(RunArgs),
    /// Render a saved results file: the matrix, Markdown or HTML for reports/, or a baseline.
    Report(report_cmd::ReportArgs),
    /// What changed between two runs (e.g. two ROCm releases): regressions (pass ->
    /// unsupported included), fixes, new and removed cases, grouped by path, with both reasons;
    /// the fingerprints' differences first. Exit 1 on any regression, and when either file is
    /// not a whole, consistent run (as `report` judges it: interrupted, no case run, shards
    /// missing, or contradicting itself).
    Diff(diff::DiffArgs),
    /// Join the results files of a partitioned run's shards (`run --partition`) into one.
    /// Shards of another run (driver, clhip version, seed, filters, case matrix or partition
    /// count) or given twice are refused; a merge that lacks a shard, or holds an incomplete
    /// one, is written marked incomplete, and exits 1.
    Merge(merge::MergeArgs),
    /// Write a standalone reproducer for one case (C, the vendor APIs only, with build.sh and a
    /// README): the case's data from the seed, clhip's calls in clhip's order, clhip's bound.
    /// The case is first shrunk to the smallest size that gives the same outcome through clhip's
    /// workers.
    Repro(ReproArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: bench::BenchWhat,
    },
    /// Runs work items from stdin (internal: started by the runner).
    #[command(name = "__worker", hide = true)]
    Worker {
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        plant: Option<clhip::ops::Plant>,
        #[arg(long, value_delimiter = ',')]
        plant_only: Vec<String>,
        /// Without it, the install the runner named in the environment
        /// (`CLHIP_WORKER_ROCM_PATH`, for a pair of one of several installs), else the default
        /// search.
        #[arg(long)]
        rocm_path: Option<PathBuf>,
    },
    /// Measures one `bench interop` target and reports each measurement on stdout (internal:
    /// started by `bench interop`, one per target).
    #[command(name = "__bench-interop", hide = true)]
    BenchInteropChild {
        #[arg(long)]
        job: String,
    },
    /// Probes the HIP runtime of the one ROCm install `--rocm-path` names (internal: started
    /// by `probe`, one per install, when several are given).
    #[command(name = "__probe-rocm-install", hide = true)]
    ProbeRocmInstall {
        #[arg(long)]
        rocm_path: PathBuf,
    },
    /// Probes the one OpenCL vendor library its environment names (internal: started by
    /// `probe`, one per vendor).
    #[command(name = "__probe-opencl-vendor", hide = true)]
    ProbeOpenclVendor,
    /// Allocates device memory for another process's IPC open, as the worker on its stdin asks
    /// (internal: started by a worker for the IPC path).
    #[command(name = "__ipc-export", hide = true)]
    IpcExport {
        #[arg(long)]
        api: clhip::model::Api,
        #[arg(long)]
        ordinal: usize,
        #[arg(long)]
        rocm_path: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Globs (`*` wildcard) or substrings of case ids; a filter matching nothing is an error.
    filters: Vec<String>,
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

#[derive(clap::Args)]
struct ReproArgs {
    /// The case id (`clhip list` prints them), e.g. `pocl0+host/use-host-ptr/map/handoff/n=4097`.
    case: String,
    /// The run seed the case's data come from (default: a results file's, else the run's default).
    #[arg(long)]
    seed: Option<u64>,
    /// The directory to write repro.c, build.sh and README.md into.
    #[arg(long, short = 'o')]
    output: PathBuf,
    /// A results file that holds the case: its outcome, seed and driver fingerprint go into the
    /// header (without it, the case is run once here, and the fingerprint probed).
    #[arg(long)]
    from: Option<PathBuf>,
    /// Emit the case at its own size, without looking for a smaller one.
    #[arg(long)]
    no_shrink: bool,
    /// `skip-sync`: leave out the sync where the peer takes OpenCL's output, so that the
    /// reproducer shows it catches a stale read.
    #[arg(long)]
    plant: Option<clhip::ops::Plant>,
    /// Per-case time limit in seconds for the runs that shrink.
    #[arg(long, default_value_t = 120.0, value_parser = parse_timeout)]
    timeout: f64,
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Option<PathBuf>,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            // stderr may itself be closed or full; there is nowhere else to say it.
            // An error can quote a file's or a driver's text: shown, never obeyed.
            let _ = writeln!(
                std::io::stderr(),
                "clhip: error: {}",
                clhip::escape::terminal_text(&format!("{e:#}"))
            );
            ExitCode::from(2)
        }
    }
}

/// The command line parsed. `--help` and `--version` are printed here, not by clap's exit, so
/// that a standard output that cannot take them (`clhip --help > /dev/full`) is an error, not
/// a silent exit 0.
fn parse_command_line() -> Result<Cli, ExitCode> {
    let e = match Cli::try_parse() {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    let code = ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
    if e.use_stderr() {
        // Usage errors: stderr may itself be closed or full; there is nowhere else to say it.
        let _ = e.print();
        return Err(code);
    }
    let printed = e.print().and_then(|()| std::io::stdout().flush());
    match printed {
        Ok(()) => Err(code),
        // `clhip --help | head` ends quietly, as every other output does.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Err(code),
        Err(err) => {
            let _ = writeln!(
                std::io::stderr(),
                "clhip: error: writing to standard output: {err}"
            );
            Err(ExitCode::from(2))
        }
    }
}

fn real_main() -> anyhow::Result<ExitCode> {
    let cli = match parse_command_line() {
        Ok(cli) => cli,
        Err(code) => return Ok(code),
    };
    match cli.command {
        Cmd::Worker {
            seed,
            plant,
            plant_only,
            rocm_path,
        } => {
            let rocm_path = rocm_path
                .or_else(|| std::env::var_os(pairs::WORKER_ROCM_PATH_ENV).map(PathBuf::from));
            clhip::worker::worker_main(
                seed,
                clhip::worker::Planting {
                    plant,
                    only: plant_only,
                },
                rocm_path,
            )
            .map(|()| ExitCode::SUCCESS)
        }
        Cmd::ProbeRocmInstall { rocm_path } => {
            probe::install_child_main(&rocm_path).map(|()| ExitCode::SUCCESS)
        }
        Cmd::IpcExport {
            api,
            ordinal,
            rocm_path,
        } => clhip::ipc::serve(api, ordinal, rocm_path).map(|()| ExitCode::SUCCESS),
        Cmd::Probe(args) => probe_cmd::probe(args),
        Cmd::ProbeOpenclVendor => probe::vendor_child_main().map(|()| ExitCode::SUCCESS),
        Cmd::BenchInteropChild { job } => {
            clhip::bench::measure::child_main(&job).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench { what } => bench::bench(what),
        Cmd::List(args) => list::list(args),
        Cmd::Run(args) => run(args),
        Cmd::Repro(args) => repro(args),
        Cmd::Report(args) => report_cmd::report(args),
        Cmd::Diff(args) => diff::diff(args),
        Cmd::Merge(args) => merge::merge(args),
    }
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let started = SystemTime::now();
    let clock = Instant::now();
    // Inputs and outputs first: a bad case file, baseline, filter or output path fails before
    // anything runs, and before anything is written.
    let matrix = load_matrix(args.cases.as_deref())?;
    let baseline = match &args.baseline {
        Some(f) => Some(Baseline::load(f)?),
        None => None,
    };
    let mut ins: Vec<(&str, &Path)> = Vec::new();
    ins.extend(args.cases.as_deref().map(|p| ("--cases", p)));
    ins.extend(args.baseline.as_deref().map(|p| ("--baseline", p)));
    ins.extend(args.expectations.as_deref().map(|p| ("--expectations", p)));
    ins.extend(args.rocm_path.iter().map(|p| ("--rocm-path", p.as_path())));
    let outputs = Outputs::check(
        args.json.as_deref(),
        args.junit.as_deref(),
        args.markdown.as_deref(),
        &ins,
    )?;
    let probe = plan::probe_machine(&args.rocm_path)?;
    // Every OpenCL vendor broke in the probe: that is the finding, named, not "no device".
    if args.mock_cases.is_none()
        && pairs::from_probe(&probe).is_empty()
        && !probe.broken_vendors().is_empty()
    {
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
        report.status = RunStatus::NothingRun {
            why: "every OpenCL vendor broke in the probe".into(),
        };
        report.selection = Some(plan::selection(
            &args.filters,
            &args.devices,
            args.partition,
            &matrix,
            std::iter::empty(),
        ));
        outputs.write(&report).result()?;
        return Ok(ExitCode::from(1));
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
    let mut sources = std::collections::HashMap::new();
    let plan: Vec<Planned> = match &args.mock_cases {
        Some(list) => {
            let mut plan =
                mock::planned_mocks(&mock::parse_mock_list(list).map_err(anyhow::Error::msg)?);
            if args.mock_as_cases {
                mock::judge_as_cases(&mut plan, baseline.as_ref().map(|b| &b.known));
            }
            plan
        }
        None => plan::planned_cases(&probe, &matrix, &args.filters, &args.devices)?
            .into_iter()
            .map(|c| {
                let e = match (&baseline, &known) {
                    (Some(b), _) => b.expectation(&c),
                    (None, Some(k)) => k.expectation(&c),
                    (None, None) => Baseline::unbaselined(&c),
                };
                let source = match (&baseline, &known) {
                    (Some(b), _) => b.source_of(&c.id()),
                    (None, Some(k)) => k.rule(&c).map(|r| r.at.clone()),
                    (None, None) => None,
                };
                if let Some(at) = source {
                    sources.insert(c.id(), at);
                }
                plan::plan_item(&probe, c, e)
            })
            .collect(),
    };
    // The whole plan is recorded before the partition takes this shard's share of it: it is
    // what tells shards of one run from strangers, and a merge of every shard from part of one.
    let selection = plan::selection(
        &args.filters,
        &args.devices,
        args.partition,
        &matrix,
        plan.iter().map(|p| p.id.as_str()),
    );
    let plan: Vec<Planned> = plan
        .into_iter()
        .filter(|p| args.partition.is_none_or(|part| part.contains(&p.id)))
        .collect();
    // A stale baseline is how a nightly job goes blind: say which entries expect nothing.
    let mut stale = Vec::new();
    if let (Some(b), Some(file)) = (&baseline, &args.baseline) {
        let every_case = matrix.expand(&pairs::from_probe(&probe));
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
    let plan_position: std::collections::HashMap<String, usize> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.clone(), i))
        .collect();
    // A case whose buffer the device cannot allocate at all is decided here, from the probe,
    // with the same refusal a worker would meet, and costs no worker.
    let (plan, decided) = plan::decide_by_probe(&probe, plan);
    // A plant that reaches no case that runs leaves a clean run, which the caller would read
    // as a check that caught nothing: the same rule as the run's own filters.
    if !args.plant_only.is_empty() {
        let cases = plan.iter().filter_map(|p| p.work.case().cloned()).collect();
        clhip::cases::filter(cases, &args.plant_only).context("--plant-only")?;
    }
    if plan.is_empty() && decided.is_empty() && !args.allow_empty {
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
    let mut journal = Journal::start(&outputs.json, &report::journal_head(&head))?;
    if let Some(j) = &journal {
        note(&format!(
            "clhip: {} cases, seed {}; results are journaled to {} as they land",
            plan.len(),
            args.seed,
            j.path().display()
        ));
    } else {
        note(&format!("clhip: {} cases, seed {}", plan.len(), args.seed));
    }
    let mut console = ConsoleReporter::new(plan.len() + decided.len()).with_sources(sources);
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
    let mut end = runner::run(plan, &opts, &mut on_event)?;
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
    Ok(match report.status {
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
    })
}

/// `clhip repro`: the reproducer made and written ([`clhip::repro::make`]).
fn repro(args: ReproArgs) -> anyhow::Result<ExitCode> {
    let request = clhip::repro::Request {
        case: args.case,
        seed: args.seed,
        output: args.output,
        from: args.from,
        no_shrink: args.no_shrink,
        plant: args.plant,
        timeout_s: args.timeout,
        rocm_path: args.rocm_path,
    };
    let made = clhip::repro::make(&request, &mut |line| note(line))?;
    note(&format!(
        "clhip: wrote the reproducer of {} ({} data) to {} (repro.c, build.sh, README.md)",
        made.case,
        made.data,
        request.output.display()
    ));
    Ok(ExitCode::SUCCESS)
}
