//! The `clhip` command line: probe, list, run, report, bench, and the hidden worker.

mod commands;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use clhip::{pairs, probe};

use commands::{bench, diff, list, merge, probe as probe_cmd, report as report_cmd, run};
use commands::{existing_dir, note, parse_timeout};

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
    Run(run::RunArgs),
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
        Cmd::Run(args) => run::run(args),
        Cmd::Repro(args) => repro(args),
        Cmd::Report(args) => report_cmd::report(args),
        Cmd::Diff(args) => diff::diff(args),
        Cmd::Merge(args) => merge::merge(args),
    }
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
