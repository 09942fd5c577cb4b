//! The `clhip` command line: probe, list, run, report, bench, and the hidden worker.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use clhip::cases::{self, Baseline, Matrix};
use clhip::expectations::Expectations;
use clhip::output::{self, Journal, Target};
use clhip::report::{self, ConsoleReporter, RunReport, RunStatus};
use clhip::runner::{self, Planned, RunControl, RunOptions, Stopped};
use clhip::{mock, pairs, probe};

/// The default seed: fixed, so two nightly runs of one build see the same data and a diff of
/// their matrices is a diff of drivers. Pass --seed to vary it.
const DEFAULT_SEED: u64 = 0x5EED;

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
    Probe {
        #[arg(long)]
        json: bool,
        /// A ROCm install to load HIP from, searched alone (default: $ROCM_PATH, /opt/rocm,
        /// /opt/rocm-*, the loader path). Repeat it for several installs: each is probed in a
        /// process of its own and shown as `hip@<version>`.
        #[arg(long, value_parser = existing_dir)]
        rocm_path: Vec<PathBuf>,
    },
    /// List the ids of the cases `run` would execute.
    List {
        /// Globs (`*` wildcard) or substrings of case ids.
        filters: Vec<String>,
        /// Case matrix file (default: the built-in cases/default.toml).
        #[arg(long)]
        cases: Option<PathBuf>,
        /// List for a saved `probe --json` of another machine instead of this one: what a
        /// runner there would execute.
        #[arg(long, conflicts_with = "rocm_path")]
        probe: Option<PathBuf>,
        /// The ROCm installs whose HIP devices to pair (as `run --rocm-path`, repeatable).
        #[arg(long, value_parser = existing_dir)]
        rocm_path: Vec<PathBuf>,
        /// Show each case's expectation from these expectation files (a file or directory),
        /// picked by the probe's fingerprint.
        #[arg(long)]
        expectations: Option<PathBuf>,
        /// Only the pairs of these GPUs, as `run --devices`.
        #[arg(long, value_delimiter = ',')]
        devices: Vec<String>,
    },
    /// Run the case matrix over every pair found and print the support matrix.
    Run(RunArgs),
    /// Render a saved results file: the matrix, Markdown or HTML for reports/, or a baseline.
    Report {
        file: PathBuf,
        #[arg(long)]
        markdown: bool,
        /// The matrix as one self-contained HTML page: colour per outcome, and per cell the
        /// reasons, the worst error against its bound and the kernel log.
        #[arg(long, conflicts_with_all = ["markdown", "baseline", "expectations"])]
        html: bool,
        /// Write the rendering to this file instead of standard output.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// With --html: embed this SVG figure after the matrix (`clhip bench interop --svg`);
        /// repeatable.
        #[arg(long, requires = "html")]
        figure: Vec<PathBuf>,
        /// Print the run's non-passes as a baseline (`case-id,outcome` lines, for --baseline):
        /// what this driver is known to do, so the next run reports only changes.
        #[arg(long, conflicts_with = "markdown")]
        baseline: bool,
        /// Print a starting expectation file (TOML, for --expectations) from the run: one rule
        /// per non-pass, applying to this run's driver and GPU versions.
        #[arg(long, conflicts_with_all = ["markdown", "baseline"])]
        expectations: bool,
    },
    /// What changed between two runs (e.g. two ROCm releases): regressions (pass ->
    /// unsupported included), fixes, new and removed cases, grouped by path, with both reasons;
    /// the fingerprints' differences first. Exit 1 on any regression, and when either file is
    /// not a whole, consistent run (as `report` judges it: interrupted, no case run, shards
    /// missing, or contradicting itself).
    Diff {
        old: PathBuf,
        new: PathBuf,
        #[arg(long)]
        markdown: bool,
        /// As one self-contained HTML page.
        #[arg(long, conflicts_with = "markdown")]
        html: bool,
        /// Write the rendering to this file instead of standard output.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Join the results files of a partitioned run's shards (`run --partition`) into one.
    /// Shards of another run (driver, clhip version, seed, filters, case matrix or partition
    /// count) or given twice are refused; a merge that lacks a shard, or holds an incomplete
    /// one, is written marked incomplete, and exits 1.
    Merge {
        /// The shards' results files.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// The merged results file.
        #[arg(long, short = 'o')]
        output: PathBuf,
    },
    /// Write a standalone reproducer for one case (C, the vendor APIs only, with build.sh and a
    /// README): the case's data from the seed, clhip's calls in clhip's order, clhip's bound.
    /// The case is first shrunk to the smallest size that gives the same outcome through clhip's
    /// workers.
    Repro(ReproArgs),
    /// Many runs' results files across nights, in a store (SQLite): import results files
    /// (directories searched for `*.json`), then show each case's outcome night by night,
    /// flake rates, the first night of each regression and what grew.
    History(clhip::history::HistoryArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
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

#[derive(Subcommand)]
enum BenchWhat {
    /// Time the f64 CPU references (FFT of 4,194,304 points, cgemm, Cholesky).
    Refs,
    /// Time the runner over the cases the filters select: batched against one process per
    /// case, and -j 1, 4 and 8 (per GPU). Where the cases span several GPUs, each setting
    /// also times the first GPU's cases alone, and prints the ratio.
    Runner {
        /// Globs or substrings of case ids (default: every case found).
        filters: Vec<String>,
        /// Only these settings of -j (batched, 64 cases a worker), comma-separated.
        #[arg(long, short = 'j', value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..=256))]
        jobs: Vec<u16>,
        /// Only the pairs of these GPUs, as `run --devices`.
        #[arg(long, value_delimiter = ',')]
        devices: Vec<String>,
        /// Batched settings with a spare worker per runner thread (`on`, as `run
        /// --spare-workers`), without (`off`, as `run`), or each both ways.
        #[arg(long, value_enum, default_value_t = SpareSetting::Off)]
        spare_workers: SpareSetting,
        /// Per-case time limit in seconds.
        #[arg(long, default_value_t = 120.0, value_parser = parse_timeout)]
        timeout: f64,
        #[arg(long, value_parser = existing_dir)]
        rocm_path: Vec<PathBuf>,
    },
    /// What each interop path costs and saves: per pair and path (with each sync the
    /// specification allows on it), the handoff each way and the peer's scale bandwidth on the
    /// shared memory by buffer size, and seed 000's pipeline per iteration against the copy
    /// path and the peer alone. One child process per target, so a path that crashes or hangs
    /// is reported as such and the bench goes on.
    Interop(InteropArgs),
}

#[derive(clap::Args)]
struct InteropArgs {
    /// Globs (`*`) or substrings of target ids (`pocl0+host/copy/finish`,
    /// `nvidia0+cuda0/native`); a picked pair's copy reference and native baseline are always
    /// measured too.
    filters: Vec<String>,
    /// Buffer sizes, comma-separated, binary units (4K = 4096): default 4K, 32K, 256K, 2M,
    /// 16M, 32M, 128M, 512M.
    #[arg(long, value_delimiter = ',', value_parser = parse_bench_size)]
    sizes: Vec<u64>,
    /// Leave out sizes above this.
    #[arg(long, default_value = "512M", value_parser = clhip::bench::parse_size)]
    max_size: u64,
    /// Timed repetitions per measurement.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    reps: u32,
    /// Untimed repetitions before them.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    warmup: u32,
    /// Complex elements of the pipeline's vector: a power of two, at most 4194304 (seed 000's).
    #[arg(long, default_value_t = clhip::generate::SEED_LEN, value_parser = parse_pipeline_len)]
    pipeline_len: usize,
    /// The data seed (as `run --seed`): the pipeline's inputs are its conformance case's.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Time limit per target (one child process) in seconds.
    #[arg(long, default_value_t = 600.0, value_parser = parse_timeout)]
    timeout: f64,
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Option<PathBuf>,
    /// Only the pairs of these GPUs, as `run --devices`.
    #[arg(long, value_delimiter = ',')]
    devices: Vec<String>,
    /// Write the results here (JSON, versioned, with the driver fingerprint).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the Markdown rendering here (every cell with its spread).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write the plot here (SVG, self-contained).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Test-only: a side that does nothing (cl-noop, peer-noop) in every target, to show each
    /// measurement's check sees it.
    #[arg(long, hide = true)]
    plant: Option<clhip::ops::Plant>,
    /// Test-only: the targets of this path die by SIGSEGV after their first size.
    #[arg(long, hide = true)]
    plant_crash: Option<clhip::model::PathKind>,
}

fn parse_bench_size(s: &str) -> Result<u64, String> {
    clhip::bench::parse_size(s).and_then(clhip::bench::check_bench_size)
}

fn parse_pipeline_len(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|e| format!("`{s}` is not a number of elements: {e}"))?;
    if !n.is_power_of_two() || n > clhip::generate::SEED_LEN {
        return Err(format!(
            "`{s}`: the pipeline's FFT takes a power of two up to {}",
            clhip::generate::SEED_LEN
        ));
    }
    Ok(n)
}

#[derive(clap::Args)]
struct RunArgs {
    /// Globs (`*` wildcard) or substrings of case ids; a filter matching nothing is an error.
    filters: Vec<String>,
    #[arg(long, default_value_t = DEFAULT_SEED)]
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

/// Longest per-case limit: a week is already more than any nightly job waits.
const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;
/// Shortest: a worker takes longer than this to start, so less would only time out the harness.
const MIN_TIMEOUT_S: f64 = 0.1;

fn parse_timeout(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .parse()
        .map_err(|e| format!("`{s}` is not a number of seconds: {e}"))?;
    if !(MIN_TIMEOUT_S..=MAX_TIMEOUT_S).contains(&t) {
        return Err(format!(
            "`{s}`: a time limit must be at least {MIN_TIMEOUT_S} s and at most {MAX_TIMEOUT_S} s (a week)"
        ));
    }
    Ok(t)
}

fn existing_dir(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    match std::fs::metadata(&p) {
        Ok(m) if m.is_dir() => Ok(p),
        Ok(_) => Err(format!("{s}: not a directory")),
        Err(e) => Err(format!("{s}: {e}")),
    }
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

/// Standard output that a closed pipe ends quietly (`clhip list | head`) and any other write
/// error (`> /dev/full`) turns into an error: never a panic, never a silent exit 0.
struct Stdout {
    closed: bool,
}

impl Stdout {
    fn new() -> Self {
        Stdout { closed: false }
    }

    fn write(&mut self, text: &str) -> anyhow::Result<()> {
        if self.closed {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        self.closed = !write_quietly_on_closed_pipe(&mut out, text)?;
        Ok(())
    }
}

/// Writes `text` to `out`: `Ok(false)` if the reader has gone (a closed pipe ends the output
/// quietly), an error for any other failure (a full disk must not look like success).
fn write_quietly_on_closed_pipe(out: &mut impl std::io::Write, text: &str) -> anyhow::Result<bool> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("writing to standard output"),
    }
}

/// `-o PATH` of `report` and `diff`, checked before anything is read: never one of the inputs.
fn checked_output(
    output: Option<&Path>,
    inputs: &[(&str, &PathBuf)],
) -> anyhow::Result<Option<Target>> {
    let Some(path) = output else {
        return Ok(None);
    };
    let target = output::check("-o", path)?;
    let inputs: Vec<(&str, &Path)> = inputs.iter().map(|(w, p)| (*w, p.as_path())).collect();
    output::refuse_collisions(&[("-o", &target)], &inputs)?;
    Ok(Some(target))
}

/// A rendering to its `-o` file, else to standard output.
fn emit(text: &str, target: Option<&Target>) -> anyhow::Result<()> {
    match target {
        Some(t) => output::write(t, text.as_bytes()),
        None => Stdout::new().write(text),
    }
}

/// A line on stderr, its control characters (a driver's, a file's) shown as text; a stderr
/// that cannot take it is no reason to fail.
fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{}", clhip::escape::terminal_line(line));
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
        Cmd::Probe { json, rocm_path } => {
            // Before any runtime is loaded: what a driver prints must not land in the JSON.
            let mut out = clhip::child::take_stdout_for_protocol()?;
            let exe = std::env::current_exe().context("locating the clhip binary")?;
            let p = probe::probe_isolating_vendors(&exe, &rocm_path);
            let text = if json {
                format!("{}\n", serde_json::to_string_pretty(&p)?)
            } else {
                clhip::escape::terminal_text(&p.render())
            };
            write_quietly_on_closed_pipe(&mut out, &text)?;
            Ok(probe_exit(&p))
        }
        Cmd::ProbeOpenclVendor => probe::vendor_child_main().map(|()| ExitCode::SUCCESS),
        Cmd::BenchInteropChild { job } => {
            clhip::bench::measure::child_main(&job).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench {
            what: BenchWhat::Interop(args),
        } => bench_interop(args),
        Cmd::List {
            filters,
            cases,
            probe,
            rocm_path,
            expectations,
            devices,
        } => {
            // Inputs first: a bad case file fails before anything is probed.
            let matrix = load_matrix(cases.as_deref())?;
            let probe = match probe {
                Some(f) => load_probe(&f)?,
                None => probe_child(&rocm_path)?,
            };
            let known = expectations
                .as_deref()
                .map(|p| Expectations::load(p, &probe.fingerprint()))
                .transpose()?;
            if let Some(k) = &known {
                let names: Vec<String> = k
                    .files
                    .iter()
                    .map(|f| f.path.display().to_string())
                    .collect();
                note(&format!(
                    "clhip: expectation files that apply: {}",
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                ));
                check_expectations(k, &matrix, &probe)?;
                if names.is_empty() {
                    for line in k.notes() {
                        note(&format!("clhip: {line}"));
                    }
                }
            }
            let mut text = String::new();
            for case in planned_cases(&probe, &matrix, &filters, &devices)? {
                text.push_str(&case.id());
                if let Some(rule) = known.as_ref().and_then(|k| k.rule(&case)) {
                    text.push_str(&format!(
                        "  expect {} ({}: {})",
                        rule.outcome, rule.at, rule.source
                    ));
                }
                text.push('\n');
            }
            Stdout::new().write(&clhip::escape::terminal_text(&text))?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run(args) => run(args),
        Cmd::Repro(args) => repro(args),
        Cmd::History(args) => clhip::history::run(&args),
        Cmd::Report {
            file,
            markdown,
            html,
            output,
            figure,
            baseline,
            expectations,
        } => {
            let mut inputs: Vec<(&str, &PathBuf)> = vec![("results", &file)];
            inputs.extend(figure.iter().map(|f| ("figure", f)));
            let target = checked_output(output.as_deref(), &inputs)?;
            let loaded = report::load(&file)?;
            let r = &loaded.report;
            let mut figures = Vec::new();
            for f in &figure {
                let svg = clhip::input::read_text("a figure", f, clhip::input::FIGURE_LIMIT)?;
                let title = format!(
                    "{}",
                    f.file_name()
                        .map_or(f.display(), |n| Path::new(n).display())
                );
                figures.push(
                    report::Figure::inline(&title, &svg)
                        .map_err(|why| anyhow::anyhow!("{}: {why}", f.display()))?,
                );
            }
            let text = if html {
                report::render_html_with_figures(r, &loaded.problems, &figures)
            } else if expectations {
                Expectations::starting_file(&r.results, &r.fingerprint, &file.display().to_string())
            } else if baseline {
                Baseline::from_results(&r.results, &file.display().to_string()).to_string()
            } else if markdown {
                report::render_markdown(r)
            } else {
                format!(
                    "{}{}\n",
                    report::render_matrix(&r.results),
                    report::closing_line(&r.summary)
                )
            };
            emit(&text, target.as_ref())?;
            for id in &r.stale_baseline {
                note(&format!(
                    "clhip: baseline entry `{id}` matched no case of that run"
                ));
            }
            // An incomplete or inconsistent file is shown, and said to be so.
            for p in &loaded.problems {
                note(&format!("clhip: {p}"));
            }
            Ok(if loaded.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Diff {
            old,
            new,
            markdown,
            html,
            output,
        } => {
            let target = checked_output(output.as_deref(), &[("old", &old), ("new", &new)])?;
            let (a, b) = (report::load(&old)?, report::load(&new)?);
            for p in a.problems.iter().chain(&b.problems) {
                note(&format!("clhip: {p}"));
            }
            let d = report::diff(&a.report, &b.report);
            let text = if html {
                report::render_diff_html(
                    &d,
                    (&old.display().to_string(), &a.report),
                    (&new.display().to_string(), &b.report),
                )
            } else if markdown {
                report::render_diff_markdown(&d)
            } else {
                report::render_diff(&d)
            };
            emit(&text, target.as_ref())?;
            // A side that is not a whole run (interrupted, empty for a broken vendor, missing
            // shards, inconsistent) cannot vouch for "no regressions", as `report` exits 1 on it.
            Ok(
                if d.regressions() > 0 || !a.problems.is_empty() || !b.problems.is_empty() {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                },
            )
        }
        Cmd::Merge { shards, output } => {
            let target = output::check("-o", &output)?;
            let inputs: Vec<(&str, &Path)> =
                shards.iter().map(|p| ("shard", p.as_path())).collect();
            output::refuse_collisions(&[("-o", &target)], &inputs)?;
            let paths: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
            let merged = clhip::merge::merge(&paths)?;
            report::write_json(&merged, &target)?;
            note(&format!(
                "clhip: merged {} shards ({} results) into {}: {}",
                shards.len(),
                merged.results.len(),
                output.display(),
                merged.status.describe()
            ));
            Ok(if merged.status == RunStatus::Complete {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Bench {
            what: BenchWhat::Refs,
        } => {
            let mut text = Vec::new();
            clhip::bench::run_refs(&mut text)?;
            Stdout::new().write(&String::from_utf8_lossy(&text))?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench {
            what:
                BenchWhat::Runner {
                    filters,
                    timeout,
                    rocm_path,
                    jobs,
                    devices,
                    spare_workers,
                },
        } => {
            let probe = probe_child(&rocm_path)?;
            let plan: Vec<Planned> =
                planned_cases(&probe, &Matrix::default_matrix(), &filters, &devices)?
                    .into_iter()
                    .map(|c| {
                        let e = Baseline::unbaselined(&c);
                        plan_item(&probe, c, e)
                    })
                    .collect();
            let (exe, _pinned) = pinned_executable()?;
            let mut opts = RunOptions::new(exe, DEFAULT_SEED);
            opts.timeout = Duration::from_secs_f64(timeout);
            opts.startup_timeout = opts.timeout;
            // Several installs: each pair's environment names its own.
            if let [one] = &rocm_path[..] {
                opts.worker_args
                    .extend(["--rocm-path".to_string(), one.display().to_string()]);
            }
            let jobs: Vec<usize> = jobs.iter().map(|&j| usize::from(j)).collect();
            let spares: &[bool] = match spare_workers {
                SpareSetting::On => &[true],
                SpareSetting::Off => &[false],
                SpareSetting::Both => &[false, true],
            };
            let (configs, notes) = clhip::bench::runner_configs(&jobs, spares);
            for n in notes {
                note(&format!("clhip: bench runner: {n}"));
            }
            let mut text = Vec::new();
            clhip::bench::run_runner(&plan, &opts, &configs, &mut text)?;
            Stdout::new().write(&String::from_utf8_lossy(&text))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `bench runner --spare-workers`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SpareSetting {
    On,
    Off,
    Both,
}

/// What a run of `args` sets out to run, `plan` being every case its filters select.
fn selection<'a>(
    args: &RunArgs,
    matrix: &Matrix,
    plan: impl Iterator<Item = &'a str> + Clone,
) -> report::Selection {
    report::Selection {
        filters: args.filters.clone(),
        devices: args.devices.clone(),
        // Debug covers every field of the parsed matrix, and two clhip versions are never
        // compared: shards of different versions are refused first.
        matrix: report::Selection::hash(format!("{matrix:?}").as_bytes()),
        planned: plan.clone().count(),
        plan: report::Selection::plan_hash(plan),
        shards: args.partition.into_iter().collect(),
    }
}

/// A case as the runner plans it: the environment its worker needs, and the GPU it keeps
/// busy: its device runtime's, else its OpenCL device. One GPU seen by several ROCm installs
/// is one GPU: their cases share its workers.
fn plan_item(probe: &probe::Probe, c: clhip::model::Case, e: clhip::model::Expectation) -> Planned {
    let env = worker_env(probe, &c.pair);
    let gpu = match c.pair.peer.api {
        clhip::model::Api::Host => c.pair.opencl.label.clone(),
        _ => c.pair.peer.label(),
    };
    let mut p = Planned::case(c, e);
    p.env = env;
    p.gpu = gpu;
    p
}

/// `clhip bench interop`: outputs checked first, then the pairs probed, the targets picked and
/// measured one child at a time, the tables printed and the files written. Exit 1 if a
/// target ended in a harness error (a path that crashes or faults is a finding, not a failure
/// of the bench).
fn bench_interop(args: InteropArgs) -> anyhow::Result<ExitCode> {
    use clhip::bench::{interop, plot, render, results};
    let started = SystemTime::now();
    let clock = Instant::now();
    let json = output::check_given("--json", args.json.as_deref())?;
    let markdown = output::check_given("--markdown", args.markdown.as_deref())?;
    let svg = output::check_given("--svg", args.svg.as_deref())?;
    let mut outs = Vec::new();
    outs.extend(json.iter().map(|t| ("--json", t)));
    outs.extend(markdown.iter().map(|t| ("--markdown", t)));
    outs.extend(svg.iter().map(|t| ("--svg", t)));
    let ins: Vec<(&str, &Path)> = args
        .rocm_path
        .iter()
        .map(|p| ("--rocm-path", p.as_path()))
        .collect();
    output::refuse_collisions(&outs, &ins)?;

    let mut sizes = if args.sizes.is_empty() {
        clhip::bench::DEFAULT_SIZES.to_vec()
    } else {
        args.sizes.clone()
    };
    sizes.retain(|&b| b <= args.max_size);
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        bail!(
            "every size is above --max-size {}: nothing to measure",
            args.max_size
        );
    }

    let probe = probe_child(args.rocm_path.as_slice())?;
    let mut pairs = pairs::from_probe(&probe);
    if !args.devices.is_empty() {
        pairs = pairs::select(&probe, pairs, &args.devices)?;
    }
    if pairs.is_empty() {
        bail!(
            "no OpenCL device found, nothing to pair (OpenCL: {}; see `clhip probe`)",
            probe.opencl_status
        );
    }
    let plan: Vec<interop::Planned> = interop::select(&pairs, &args.filters)?
        .into_iter()
        .map(|(pair, target)| {
            let label = pair.opencl.label.clone();
            let max_alloc_bytes = probe
                .cl_device(&label)
                .and_then(|d| match d.max_alloc_bytes {
                    probe::Queried::Value(v) => Some(v),
                    _ => None,
                });
            interop::Planned {
                env: worker_env(&probe, &pair),
                pair,
                target,
                max_alloc_bytes,
            }
        })
        .collect();
    let settings = results::Settings {
        sizes_bytes: sizes,
        reps: args.reps,
        warmup: args.warmup,
        pipeline_len: args.pipeline_len,
        seed: args.seed,
        timeout_s: args.timeout,
    };
    let (exe, _pinned) = pinned_executable()?;
    let opts = interop::Options {
        exe,
        settings: settings.clone(),
        rocm_path: args.rocm_path.clone(),
        plant: args.plant,
        plant_crash: args.plant_crash,
    };
    note(&format!(
        "clhip: bench interop: {} targets; {} timed repetitions after {} warm-up each",
        plan.len(),
        settings.reps,
        settings.warmup
    ));
    let total = plan.len();
    let mut finished = 0;
    let measured = interop::run(&plan, &opts, &mut |t| {
        finished += 1;
        let how = match t.outcome.kind() {
            clhip::model::OutcomeKind::Pass => format!("{} measurements", t.rows.len()),
            _ => render::outcome_text(&t.outcome),
        };
        note(&format!(
            "clhip: [{finished}/{total}] {}: {how}, {:.1} s",
            t.id, t.wall_s
        ));
    })?;
    let report = results::BenchReport {
        schema: results::SCHEMA.to_string(),
        clhip_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: report::rfc3339_utc(started),
        wall_s: clock.elapsed().as_secs_f64(),
        command: std::env::args().collect(),
        fingerprint: probe.fingerprint(),
        settings,
        pairs: measured,
    };
    let printed = Stdout::new().write(&clhip::escape::terminal_text(&render::render_text(&report)));
    // The files are written whatever happened to stdout, each whatever happened to the others.
    let mut written = Written::default();
    if let Some(t) = &json {
        written.record("--json", t, results::write_json(&report, t));
    }
    if let Some(t) = &markdown {
        let text = render::render_markdown(&report);
        written.record("--markdown", t, output::write(t, text.as_bytes()));
    }
    if let Some(t) = &svg {
        let text = plot::render_svg(&report)?;
        written.record("--svg", t, output::write(t, text.as_bytes()));
    }
    written.result()?;
    printed?;
    let harness_errors: Vec<&str> = report
        .pairs
        .iter()
        .flat_map(|p| &p.targets)
        .filter(|t| t.outcome.kind() == clhip::model::OutcomeKind::Error)
        .map(|t| t.id.as_str())
        .collect();
    if harness_errors.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        note(&format!(
            "clhip: harness errors in: {}",
            harness_errors.join(", ")
        ));
        Ok(ExitCode::from(1))
    }
}

fn load_matrix(file: Option<&Path>) -> anyhow::Result<Matrix> {
    Ok(match file {
        Some(f) => Matrix::load(f)?,
        None => Matrix::default_matrix(),
    })
}

/// The matrix expanded over the pairs a probe found, filtered.
fn planned_cases(
    probe: &probe::Probe,
    matrix: &Matrix,
    filters: &[String],
    devices: &[String],
) -> anyhow::Result<Vec<clhip::model::Case>> {
    let mut pairs = pairs::from_probe(probe);
    if !devices.is_empty() {
        pairs = pairs::select(probe, pairs, devices)?;
    }
    if pairs.is_empty() {
        bail!(
            "no OpenCL device found, nothing to pair (OpenCL: {}; see `clhip probe`)",
            probe.opencl_status
        );
    }
    cases::filter(matrix.expand(&pairs), filters)
}

fn load_probe(file: &Path) -> anyhow::Result<probe::Probe> {
    let text = clhip::input::read_text("a probe file", file, clhip::input::PROBE_LIMIT)?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not a `clhip probe --json` file: {e}",
            file.display(),
            e.line(),
            e.column()
        )
    })
}

/// `clhip probe`'s exit status, once all it found is printed: non-zero, naming each vendor and
/// what it did, when a vendor broke while being probed.
fn probe_exit(p: &probe::Probe) -> ExitCode {
    for v in p.broken_vendors() {
        note(&format!("clhip: broken driver: {v}"));
    }
    ExitCode::from(p.exit_status())
}

fn probe_child(rocm_paths: &[PathBuf]) -> anyhow::Result<probe::Probe> {
    let exe = std::env::current_exe().context("locating the clhip binary")?;
    probe::probe_in_child(&exe, rocm_paths)
}

/// Why `case` cannot run on its pair's OpenCL device, from what the probe found: a buffer too
/// big, or an SVM kind the device lacks. The text is the refusal a worker would meet.
fn decided_by_probe(probe: &probe::Probe, case: &clhip::model::Case) -> Option<String> {
    too_big_for_device(probe, case).or_else(|| {
        let dev = probe.cl_device(&case.pair.opencl.label)?;
        match &dev.svm {
            probe::Queried::Value(caps) => clhip::paths::svm_refusal(case.path, caps),
            _ => None,
        }
    })
}

/// Why the device of `case`'s pair cannot hold the case's largest buffer, if it cannot: more
/// than CL_DEVICE_MAX_MEM_ALLOC_SIZE, or all its buffers more than CL_DEVICE_GLOBAL_MEM_SIZE.
fn too_big_for_device(probe: &probe::Probe, case: &clhip::model::Case) -> Option<String> {
    let bytes = cases::case_bytes(case.op, case.n)?;
    let label = &case.pair.opencl.label;
    let dev = probe.cl_device(label)?;
    if let probe::Queried::Value(max) = dev.max_alloc_bytes
        && bytes.buffer > max
    {
        return Some(format!(
            "a {}-byte buffer is more than {label} can allocate at once (CL_DEVICE_MAX_MEM_ALLOC_SIZE {max})",
            bytes.buffer
        ));
    }
    if let probe::Queried::Value(total) = dev.global_mem_bytes
        && bytes.device > total
    {
        return Some(format!(
            "the case's {} bytes of device memory are more than {label} has (CL_DEVICE_GLOBAL_MEM_SIZE {total})",
            bytes.device
        ));
    }
    None
}

/// Each pair's GPU as "model, driver": pairs of equal identity are compared for consistency.
fn gpu_identities(probe: &probe::Probe) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for pair in pairs::from_probe(probe) {
        let identity = match pair.peer.api {
            clhip::model::Api::Host => probe.cl_device(&pair.opencl.label).map(|d| {
                let driver = match &d.driver_version {
                    probe::Queried::Value(v) => v.clone(),
                    _ => String::new(),
                };
                format!("OpenCL {}, driver {driver}", d.name)
            }),
            api => probe
                .device_runtimes()
                .into_iter()
                .find(|rt| rt.api == api && rt.install.map(|i| &i.label) == pair.install.as_ref())
                .and_then(|rt| {
                    // One GPU under two installs is compared across GPUs of one install only.
                    let d = rt
                        .status
                        .devices
                        .iter()
                        .find(|d| d.ordinal == pair.peer.ordinal)?;
                    Some(format!(
                        "{} {}, driver {}{}",
                        d.name,
                        d.arch,
                        d.driver_version,
                        rt.install
                            .map(|i| format!(", {}", i.participant()))
                            .unwrap_or_default()
                    ))
                }),
        };
        if let Some(id) = identity {
            out.insert(pair.id(), id);
        }
    }
    out
}

/// What a worker for `pair` needs in its environment ([`pairs::worker_env`]: its OpenCL vendor
/// library alone, its ROCm install where the run has several), and the label the pair's OpenCL
/// device has in that library.
fn worker_env(probe: &probe::Probe, pair: &clhip::model::Pair) -> Vec<(String, String)> {
    let label = &pair.opencl.label;
    let mut env = pairs::worker_env(probe, pair);
    let local = probe.cl_device(label).and_then(|d| d.icd_label.clone());
    if let Some(local) = local {
        env.push((
            clhip::ops::OPENCL_LABEL_ENV.to_string(),
            format!("{label}={local}"),
        ));
    }
    env
}

/// Where `run` writes its results when no --json is given: the one output directory clhip
/// makes unasked.
const DEFAULT_JSON: &str = "reports/latest.json";

/// The outputs a run writes, checked before anything runs.
struct Outputs {
    json: Target,
    junit: Option<Target>,
    markdown: Option<Target>,
}

impl Outputs {
    fn check(args: &RunArgs) -> anyhow::Result<Self> {
        let json = match &args.json {
            Some(p) => output::check("--json", p)?,
            None => {
                output::check_with("--json", Path::new(DEFAULT_JSON), output::Parent::MayCreate)?
            }
        };
        let junit = output::check_given("--junit", args.junit.as_deref())?;
        let markdown = output::check_given("--markdown", args.markdown.as_deref())?;
        let journal = json.journal_target();
        let mut outs = vec![("--json", &json)];
        outs.extend(journal.iter().map(|t| ("the journal of --json", t)));
        outs.extend(junit.iter().map(|t| ("--junit", t)));
        outs.extend(markdown.iter().map(|t| ("--markdown", t)));
        let mut ins: Vec<(&str, &Path)> = Vec::new();
        ins.extend(args.cases.as_deref().map(|p| ("--cases", p)));
        ins.extend(args.baseline.as_deref().map(|p| ("--baseline", p)));
        ins.extend(args.expectations.as_deref().map(|p| ("--expectations", p)));
        ins.extend(args.rocm_path.iter().map(|p| ("--rocm-path", p.as_path())));
        output::refuse_collisions(&outs, &ins)?;
        Ok(Outputs {
            json,
            junit,
            markdown,
        })
    }

    /// Writes every output, whatever happened to the others. A failed --json is marked apart:
    /// the journal then holds the results and must stay.
    fn write(&self, report: &RunReport) -> Written {
        let mut written = Written::default();
        let json_ok = written.record("--json", &self.json, report::write_json(report, &self.json));
        if let Some(t) = &self.junit {
            written.record("--junit", t, report::write_junit(report, t));
        }
        if let Some(t) = &self.markdown {
            let text = report::render_markdown(report);
            written.record("--markdown", t, output::write(t, text.as_bytes()));
        }
        written.json_failed = !json_ok;
        written
    }
}

/// What became of a command's outputs: each written, or said on stderr why not.
#[derive(Default)]
struct Written {
    failed: Vec<String>,
    json_failed: bool,
}

impl Written {
    /// Says what became of one output; true if it was written.
    fn record(&mut self, what: &str, t: &Target, result: anyhow::Result<()>) -> bool {
        match result {
            Ok(()) => {
                note(&format!("clhip: wrote {}", t.given.display()));
                true
            }
            Err(e) => {
                note(&format!(
                    "clhip: error: {what} {}: not written: {e:#}",
                    t.given.display()
                ));
                self.failed.push(format!("{what} {}", t.given.display()));
                false
            }
        }
    }

    /// An error naming every output that was not written.
    fn result(&self) -> anyhow::Result<()> {
        if self.failed.is_empty() {
            Ok(())
        } else {
            bail!("not written: {}", self.failed.join(", "))
        }
    }
}

/// Ctrl-C and SIGTERM stop the run (a second one ends the process at once); Ctrl-Z stops the
/// workers with the runner, and SIGCONT continues both, the time stopped counting against no
/// case. Workers lead their own process groups, so the terminal's signals reach them only
/// through here.
fn handle_signals(control: Arc<RunControl>) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGTERM, SIGTSTP};
    // SIGHUP (a closed ssh session) ends the run as Ctrl-C does: the results are written.
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGCONT])
            .context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("clhip-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                match sig {
                    SIGINT | SIGTERM | SIGHUP if control.is_interrupted() => {
                        note("clhip: interrupted again: exiting now; the journal keeps what finished");
                        std::process::exit(130);
                    }
                    SIGINT | SIGTERM | SIGHUP => {
                        note("clhip: interrupted: stopping the workers and writing what finished (again to exit at once)");
                        control.interrupt();
                    }
                    SIGTSTP => {
                        control.pause();
                        let _ = signal_hook::low_level::emulate_default_handler(SIGTSTP);
                    }
                    SIGCONT => control.resume(),
                    _ => {}
                }
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}

/// Refuses expectation rules that disagree about a case of the matrix on this machine, and
/// warns about each glob that matches none; returns those globs (`file:line `glob``).
fn check_expectations(
    known: &Expectations,
    matrix: &Matrix,
    probe: &probe::Probe,
) -> anyhow::Result<Vec<String>> {
    let every_case = matrix.expand(&pairs::from_probe(probe));
    let stale = known
        .check(&every_case)
        .with_context(|| format!("--expectations {}", known.from.display()))?;
    for s in &stale {
        note(&format!(
            "clhip: warning: expectation {s} matches no case of this matrix on this machine"
        ));
    }
    Ok(stale)
}

/// The executable workers start from: this one, held open for the whole run, so that a
/// rebuild that replaces the file on disk mid-run (`cargo build`) cannot change or remove it.
/// The path `/proc/self/fd/N` names the open file in each child, which inherits it.
fn pinned_executable() -> anyhow::Result<(PathBuf, Option<std::fs::File>)> {
    let exe = std::env::current_exe().context("locating the clhip binary to start workers")?;
    match std::fs::File::open(&exe) {
        Ok(file) => {
            use std::os::fd::AsRawFd as _;
            let pinned = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            if pinned.exists() {
                return Ok((pinned, Some(file)));
            }
            Ok((exe, None))
        }
        Err(_) => Ok((exe, None)),
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
    let outputs = Outputs::check(&args)?;
    let probe = probe_child(&args.rocm_path)?;
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
        report.selection = Some(selection(&args, &matrix, std::iter::empty()));
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
        None => planned_cases(&probe, &matrix, &args.filters, &args.devices)?
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
                plan_item(&probe, c, e)
            })
            .collect(),
    };
    // The whole plan is recorded before the partition takes this shard's share of it: it is
    // what tells shards of one run from strangers, and a merge of every shard from part of one.
    let selection = selection(&args, &matrix, plan.iter().map(|p| p.id.as_str()));
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
    let (plan, decided): (Vec<Planned>, Vec<runner::CaseResult>) = {
        let mut run = Vec::new();
        let mut decided = Vec::new();
        for p in plan {
            match p.work.case().and_then(|c| decided_by_probe(&probe, c)) {
                Some(reason) => decided.push(runner::CaseResult::new(
                    p.id.clone(),
                    p.work.clone(),
                    clhip::model::Outcome::unsupported(reason),
                    p.expectation,
                    0.0,
                )),
                None => run.push(p),
            }
        }
        (run, decided)
    };
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
    let (exe, _pinned) = pinned_executable()?;
    let mut opts = RunOptions::new(exe, args.seed);
    opts.timeout = Duration::from_secs_f64(args.timeout);
    // A worker's start (runtime init, kernel builds) is held to the case limit too: a fixed
    // allowance would let a stopped worker outlast a short --timeout.
    opts.startup_timeout = opts.timeout;
    opts.cases_per_worker = args.cases_per_worker as usize;
    opts.jobs = usize::from(args.jobs);
    opts.retries = args.retries;
    opts.spare_workers = args.spare_workers;
    // Several installs: each pair's environment names its own.
    if let [one] = &args.rocm_path[..] {
        opts.worker_args
            .extend(["--rocm-path".to_string(), one.display().to_string()]);
    }
    if let Some(p) = args.plant {
        let name = serde_json::to_value(p)?;
        opts.worker_args.extend([
            "--plant".to_string(),
            name.as_str().unwrap_or_default().to_string(),
        ]);
        if !args.plant_only.is_empty() {
            opts.worker_args
                .extend(["--plant-only".to_string(), args.plant_only.join(",")]);
        }
    }
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
    report.consistency = clhip::consistency::check(&report.results, &gpu_identities(&probe));
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

/// `clhip repro`: check the case and the plant first (no run for an id the generator cannot
/// emit), learn the outcome (the results file's, or a run here), shrink through the workers,
/// then write the reproducer.
fn repro(args: ReproArgs) -> anyhow::Result<ExitCode> {
    use clhip::generate::DataKind;
    use clhip::model::{Outcome, OutcomeKind};
    use clhip::repro::{self, Header, ReproCase};
    let case = ReproCase::parse(&args.case)?;
    repro::check_covered(&case)?;
    if let Some(p) = args.plant
        && p != clhip::ops::Plant::SkipSync
    {
        bail!("--plant: only skip-sync has a reproducer, not {p:?}");
    }
    // Before any run: a directory that cannot take the reproducer, or holds the user's own
    // README.md, must not cost a shrink.
    let out_dir = output::check_dir("-o", &args.output, &repro::FILES)?;
    let mut ins: Vec<(&str, &Path)> = Vec::new();
    ins.extend(args.from.as_deref().map(|p| ("--from", p)));
    ins.extend(args.rocm_path.as_deref().map(|p| ("--rocm-path", p)));
    let outs: Vec<(&str, &Target)> = out_dir.files.iter().map(|t| ("-o", t)).collect();
    output::refuse_collisions(&outs, &ins)?;
    let from = args
        .from
        .as_deref()
        .map(|f| report::load(f).map(|l| (f, l.report)))
        .transpose()?;
    let seed = match (&from, args.seed) {
        (Some((f, r)), Some(s)) if r.seed != s => bail!(
            "--seed {s}, but {} was run with seed {}: its outcome is for that seed's data",
            f.display(),
            r.seed
        ),
        (Some((_, r)), _) => r.seed,
        (None, s) => s.unwrap_or(DEFAULT_SEED),
    };
    let mut header = Header {
        seed,
        ..Header::default()
    };
    let mut seen: Option<Outcome> = None;
    if let Some((f, r)) = &from {
        let id = case.to_string();
        let found = r.results.iter().find(|x| x.id == id).with_context(|| {
            format!(
                "{}: no result for case `{id}` in this results file",
                f.display()
            )
        })?;
        seen = Some(found.outcome.clone());
        header.seen_from = format!("{}", f.display());
        header.fingerprint = repro::pair_fingerprint(&r.fingerprint.lines(), &case);
        header.fingerprint_from = format!("the results file {}", f.display());
    }
    // Workers run the case when no file says its outcome, and shrink anything but a pass.
    let seen_pass = seen
        .as_ref()
        .is_some_and(|o| o.kind() == clhip::model::OutcomeKind::Pass);
    let needs_workers = seen.is_none() || !(args.no_shrink || seen_pass);
    let mut emit_case = case.clone();
    let mut emit_data = DataKind::Seeded;
    if needs_workers {
        let probe = probe_child(args.rocm_path.as_slice())?;
        if from.is_none() {
            header.fingerprint = repro::pair_fingerprint(&probe.fingerprint().lines(), &case);
            header.fingerprint_from = "probed on this machine".into();
        }
        let pairs = pairs::from_probe(&probe);
        let Some(pair) = pairs.iter().find(|p| p.id() == case.pair_id()).cloned() else {
            let found: Vec<String> = pairs.iter().map(|p| p.id()).collect();
            bail!(
                "pair {} is not on this machine (pairs found: {}); give --from RUN.json --no-shrink to emit the reproducer without running it",
                case.pair_id(),
                if found.is_empty() {
                    "none".into()
                } else {
                    found.join(", ")
                }
            );
        };
        let (exe, _pinned) = pinned_executable()?;
        let mut opts = RunOptions::new(exe, seed);
        opts.timeout = Duration::from_secs_f64(args.timeout);
        opts.startup_timeout = opts.timeout;
        if let Some(p) = &args.rocm_path {
            opts.worker_args
                .extend(["--rocm-path".to_string(), p.display().to_string()]);
        }
        let env = worker_env(&probe, &pair);
        // Runs repro cases, each on its data, through the workers, as `run` does, and returns
        // their outcomes in order.
        let mut run_cases = |cases: &[(ReproCase, DataKind)]| -> anyhow::Result<Vec<Outcome>> {
            let plan: Vec<Planned> = cases
                .iter()
                .map(|(c, data)| {
                    let real = clhip::model::Case {
                        pair: pair.clone(),
                        path: c.path,
                        sync: c.sync,
                        op: c.op,
                        n: c.n,
                    };
                    let e = Baseline::unbaselined(&real);
                    let mut p = Planned::case(real, e);
                    p.env = env.clone();
                    if !data.is_seeded() {
                        // One plan may hold a case on several data: each its own id.
                        p.id = format!("{} data={data}", p.id);
                        p.data = *data;
                    }
                    p
                })
                .collect();
            let ids: Vec<String> = plan.iter().map(|p| p.id.clone()).collect();
            note(&format!("clhip: running {}", ids.join(", ")));
            let end = runner::run(plan, &opts, &mut |_| {})?;
            ids.iter()
                .map(|id| {
                    end.results
                        .iter()
                        .find(|r| &r.id == id)
                        .map(|r| r.outcome.clone())
                        .with_context(|| format!("no result came back for {id}"))
                })
                .collect()
        };
        let outcome = match seen.clone() {
            Some(o) => o,
            None => {
                let o = run_cases(&[(case.clone(), DataKind::Seeded)])?.remove(0);
                header.seen_from = "a run of this build on this machine".into();
                seen = Some(o.clone());
                o
            }
        };
        let kind = outcome.kind();
        if args.no_shrink {
            header.shrink = "not shrunk (--no-shrink)".into();
            header.data = "not simplified (--no-shrink)".into();
        } else if kind == OutcomeKind::Pass {
            header.shrink = format!("not shrunk: clhip saw a pass at n={}", case.n);
            header.data = "not simplified: clhip saw a pass".into();
        } else {
            let shrunk = repro::shrink(&case, kind, outcome, &mut run_cases)?;
            header.shrink = shrunk.note(case.n, kind);
            if shrunk.case.n != case.n {
                header.seen_from = format!(
                    "{} at n={}; at n={} through clhip's workers here",
                    header.seen_from, case.n, shrunk.case.n
                );
                seen = Some(shrunk.outcome.clone());
            }
            emit_case = shrunk.case;
            // Wrong data may hang on the data: simpler inputs that still fail read better.
            if kind != OutcomeKind::Fail {
                header.data = format!("not simplified: clhip saw `{kind}`, not wrong data");
            } else if repro::has_data(case.op) {
                let simpler = repro::simplify_data(&emit_case, kind, &mut run_cases)?;
                header.data = simpler.note(kind);
                if let Some(o) = simpler.outcome {
                    header.seen_from =
                        format!("{}; on {} data here", header.seen_from, simpler.kind);
                    seen = Some(o);
                }
                emit_data = simpler.kind;
            }
        }
    } else if args.no_shrink {
        header.shrink = "not shrunk (--no-shrink)".into();
        header.data = "not simplified (--no-shrink)".into();
    } else {
        header.shrink = format!("not shrunk: clhip saw a pass at n={}", case.n);
        header.data = "not simplified: clhip saw a pass".into();
    }
    header.seen = seen.map(|o| (o.kind(), o.reason()));
    let reproducer = repro::generate(&emit_case, emit_data, &header, args.plant)?;
    reproducer.write_to(&out_dir)?;
    note(&format!(
        "clhip: wrote the reproducer of {emit_case} ({} data) to {} (repro.c, build.sh, README.md)",
        emit_data,
        args.output.display()
    ));
    Ok(ExitCode::SUCCESS)
}
