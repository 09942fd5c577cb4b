//! The `clhip` command line: its arguments, and which command each runs. Each command, with
//! its own arguments, is a file of `commands/`.

mod commands;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use commands::{bench, diff, explore, internal, list, merge, probe, report, repro, run};

#[derive(Parser)]
#[command(
    name = "clhip",
    version,
    about = "Conformance and correctness harness for GPU memory interop between OpenCL and HIP"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// When to colour help and usage errors: auto (on a terminal, unless NO_COLOR is set),
    /// always or never. clhip's own output is plain text.
    #[arg(long, global = true, value_name = "WHEN", default_value_t = clap::ColorChoice::Auto)]
    color: clap::ColorChoice,
}

/// `--color` as the command line gives it, read before clap parses it (clap's colours are set
/// before parsing); `NO_COLOR` (any value) makes `auto` `never`.
fn color_choice() -> clap::ColorChoice {
    use clap::ValueEnum as _;
    let mut args = std::env::args().skip(1).take_while(|a| a != "--");
    let mut given = None;
    while let Some(a) = args.next() {
        let value = match a.strip_prefix("--color") {
            Some("") => args.next(),
            Some(v) => v.strip_prefix('=').map(str::to_string),
            None => None,
        };
        if let Some(v) = value {
            given = clap::ColorChoice::from_str(&v, true).ok();
        }
    }
    match given.unwrap_or(clap::ColorChoice::Auto) {
        clap::ColorChoice::Auto if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) => {
            clap::ColorChoice::Never
        }
        choice => choice,
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// List OpenCL platforms and devices with what interop depends on, and the HIP and CUDA
    /// runtimes found (or why not).
    Probe(probe::ProbeArgs),
    /// List the ids of the cases `run` would execute.
    List(list::ListArgs),
    /// Run the case matrix over every pair found and print the support matrix.
    Run(Box<run::RunArgs>),
    /// Random shapes (odd sizes, sizes past a page or 2 MiB) over the combinations that pass
    /// here, for a time budget; each failure shrunk to its smallest size, listed with an id
    /// `run` takes, and written as a reproducer.
    Explore(explore::ExploreArgs),
    /// Render a saved results file: the matrix, Markdown or HTML for reports/, or a baseline.
    Report(report::ReportArgs),
    /// What changed between two runs (e.g. two ROCm releases): first how the runs were set up
    /// differently (seed, build, plant, case selection, flags) and the fingerprints'
    /// differences, then the counts, the regressions (pass -> unsupported included), and the
    /// fixes, new, removed and not-selected cases grouped by path, with both reasons (`--only
    /// regressions` shows one kind). Exit 1 on any regression, and when either file is
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
    Repro(repro::ReproArgs),
    /// Many runs' results files across nights, in a store (SQLite): import results files
    /// (directories searched for `*.json`), then show each case's outcome night by night,
    /// flake rates, the first night of each regression and what grew.
    History(clhip::history::HistoryArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: bench::BenchWhat,
    },
    /// Runs work items from stdin (internal: started by the runner).
    #[command(name = "__worker", hide = true)]
    Worker(internal::WorkerArgs),
    /// Measures one `bench interop` target and reports each measurement on stdout (internal:
    /// started by `bench interop`, one per target).
    #[command(name = "__bench-interop", hide = true)]
    BenchInteropChild(internal::BenchInteropChildArgs),
    /// Probes the HIP runtime of the one ROCm install `--rocm-path` names (internal: started
    /// by `probe`, one per install, when several are given).
    #[command(name = "__probe-rocm-install", hide = true)]
    ProbeRocmInstall(internal::ProbeRocmInstallArgs),
    /// Probes the one OpenCL vendor library its environment names (internal: started by
    /// `probe`, one per vendor).
    #[command(name = "__probe-opencl-vendor", hide = true)]
    ProbeOpenclVendor,
    /// Allocates device memory for another process's IPC open, as the worker on its stdin asks
    /// (internal: started by a worker for the IPC path).
    #[command(name = "__ipc-export", hide = true)]
    IpcExport(internal::IpcExportArgs),
    /// Makes one pair's contexts and exits: 0 if it could (internal: a GPU's health check,
    /// and the worker start `bench runner` times).
    #[command(name = "__contexts", hide = true)]
    Contexts(internal::ContextsArgs),
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
    // The version names the commit built (build.rs), which clap's derive cannot compute.
    let version: &'static str = Box::leak(clhip::build_id::version_line().into_boxed_str());
    let parsed = Cli::command()
        .version(version)
        .color(color_choice())
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let e = match parsed {
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
        Cmd::Probe(args) => probe::probe(args),
        Cmd::List(args) => list::list(args),
        Cmd::Run(args) => run::run(*args),
        Cmd::Explore(args) => explore::explore(args),
        Cmd::Report(args) => report::report(args),
        Cmd::Diff(args) => diff::diff(args),
        Cmd::Merge(args) => merge::merge(args),
        Cmd::Repro(args) => repro::repro(args),
        Cmd::History(args) => clhip::history::run(&args),
        Cmd::Bench { what } => bench::bench(what),
        Cmd::Worker(args) => internal::worker(args),
        Cmd::BenchInteropChild(args) => internal::bench_interop_child(args),
        Cmd::ProbeRocmInstall(args) => internal::probe_rocm_install(args),
        Cmd::ProbeOpenclVendor => internal::probe_opencl_vendor(),
        Cmd::IpcExport(args) => internal::ipc_export(args),
        Cmd::Contexts(args) => internal::contexts(args),
    }
}
