//! `clhip repro`: a standalone C reproducer of one case ([`clhip::repro::make`]).

use std::path::PathBuf;
use std::process::ExitCode;

use super::{existing_dir, note, parse_timeout};

#[derive(clap::Args)]
pub struct ReproArgs {
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
    /// A ROCm install (a directory) to load HIP from (default: $ROCM_PATH, /opt/rocm,
    /// /opt/rocm-*, the loader path).
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Option<PathBuf>,
}

pub fn repro(args: ReproArgs) -> anyhow::Result<ExitCode> {
    let request = clhip::repro::Request {
        case: args.case,
        seed: args.seed,
        output: args.output,
        from: args.from,
        no_shrink: args.no_shrink,
        plant: args.plant,
        timeout_s: args.timeout,
        rocm_path: args.rocm_path,
        shrunk: None,
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
