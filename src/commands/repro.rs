//! `clhip repro`: a standalone C reproducer of one case ([`clhip::repro::make`]).

use std::path::PathBuf;
use std::process::ExitCode;

use super::{existing_dir, note, parse_timeout};

#[derive(clap::Args)]
pub struct ReproArgs {
    /// The case id (`clhip list` prints them), e.g. `pocl0+host/use-host-ptr/map/handoff/n=4097`.
    #[arg(required_unless_present = "all")]
    case: Option<String>,
    /// RUN.json: a reproducer for each kind of non-pass in the run (pair, path, sync, op and
    /// outcome) and a pass per pair and path, each in a directory of its own under -o, with
    /// run-all.sh, which builds and runs them and compares each with clhip's outcome.
    #[arg(long, value_name = "RUN.json", conflicts_with_all = ["case", "from", "seed", "plant"])]
    all: Option<PathBuf>,
    /// The run seed the case's data come from (default: a results file's, else the run's default).
    #[arg(long)]
    seed: Option<u64>,
    /// The directory to write repro.c, build.sh, README.md and ISSUE.md into.
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
    if let Some(from) = args.all {
        return repro_all(clhip::repro::AllRequest {
            from,
            output: args.output,
            no_shrink: args.no_shrink,
            timeout_s: args.timeout,
            rocm_path: args.rocm_path,
        });
    }
    let Some(case) = args.case else {
        anyhow::bail!("clhip repro: give a case id, or --all RUN.json");
    };
    let request = clhip::repro::Request {
        case,
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
        "clhip: wrote the reproducer of {} ({} data) to {} (repro.c, build.sh, README.md, ISSUE.md)",
        made.case,
        made.data,
        request.output.display()
    ));
    Ok(ExitCode::SUCCESS)
}

fn repro_all(request: clhip::repro::AllRequest) -> anyhow::Result<ExitCode> {
    let written = clhip::repro::make_all(&request, &mut |line| note(line))?;
    let refused: Vec<&clhip::repro::Written> = written.iter().filter(|w| w.dir.is_err()).collect();
    for w in &refused {
        if let Err(why) = &w.dir {
            note(&format!("clhip: no reproducer for {}: {why}", w.chosen.id));
        }
    }
    note(&format!(
        "clhip: wrote {} reproducers to {} ({} cases have none, README.md says why); run {}/run-all.sh",
        written.len() - refused.len(),
        request.output.display(),
        refused.len(),
        request.output.display()
    ));
    Ok(ExitCode::SUCCESS)
}
