//! The hidden commands: each the child side of a process clhip starts itself (a worker, a
//! probe of one vendor or install, a bench target, an IPC exporter).

use std::path::PathBuf;
use std::process::ExitCode;

use clhip::{pairs, probe};

#[derive(clap::Args)]
pub struct WorkerArgs {
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
}

pub fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let rocm_path = args
        .rocm_path
        .or_else(|| std::env::var_os(pairs::WORKER_ROCM_PATH_ENV).map(PathBuf::from));
    clhip::worker::worker_main(
        args.seed,
        clhip::worker::Planting {
            plant: args.plant,
            only: args.plant_only,
        },
        rocm_path,
    )
    .map(|()| ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct BenchInteropChildArgs {
    #[arg(long)]
    job: String,
}

pub fn bench_interop_child(args: BenchInteropChildArgs) -> anyhow::Result<ExitCode> {
    clhip::bench::measure::child_main(&args.job).map(|()| ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct ProbeRocmInstallArgs {
    #[arg(long)]
    rocm_path: PathBuf,
}

pub fn probe_rocm_install(args: ProbeRocmInstallArgs) -> anyhow::Result<ExitCode> {
    probe::install_child_main(&args.rocm_path).map(|()| ExitCode::SUCCESS)
}

pub fn probe_opencl_vendor() -> anyhow::Result<ExitCode> {
    probe::vendor_child_main().map(|()| ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct IpcExportArgs {
    #[arg(long)]
    api: clhip::model::Api,
    #[arg(long)]
    ordinal: usize,
    #[arg(long)]
    rocm_path: Option<PathBuf>,
}

pub fn ipc_export(args: IpcExportArgs) -> anyhow::Result<ExitCode> {
    clhip::ipc::serve(args.api, args.ordinal, args.rocm_path).map(|()| ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct ContextsArgs {
    /// The GPU's label in the plan (`cuda0`, `pocl0`).
    #[arg(long)]
    gpu: String,
}

pub fn contexts(args: ContextsArgs) -> anyhow::Result<ExitCode> {
    let rocm_path = std::env::var_os(pairs::WORKER_ROCM_PATH_ENV).map(PathBuf::from);
    let made = clhip::runner::health::contexts_main(&args.gpu, rocm_path)?;
    Ok(if made {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
