//! `clhip bench`: the CPU references' speed, the runner's, and each interop path's
//! ([`super::bench_interop`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use clhip::cases::Matrix;
use clhip::expectations::Baseline;
use clhip::plan::{self, RunOptionsBuilder, WorkerExe};
use clhip::results::Planned;

use super::bench_interop::{self, InteropArgs};
use super::outputs::Stdout;
use super::{existing_dir, note, parse_timeout};

#[derive(Subcommand)]
pub enum BenchWhat {
    /// Time the f64 CPU references (FFT of 4,194,304 points, cgemm, Cholesky).
    Refs,
    /// This host's worker-start throughput first: per pair kind, fresh processes that each
    /// make the pair's contexts, 1, 2, 4, 8 and 16 at a time, in starts/s, and the best (what
    /// `run --start-rate` divides a run's worker starts by: its start floor). Then the runner
    /// over the cases the filters select: batched against one process per case, and -j 1, 4
    /// and 8 (per GPU). Where the cases span several GPUs, each setting also times the first
    /// GPU's cases alone, and prints the ratio.
    Runner(RunnerArgs),
    /// What each interop path costs and saves: per pair and path (with each sync the
    /// specification allows on it), the handoff each way and the peer's scale bandwidth on the
    /// shared memory by buffer size, and the pipeline op per iteration against the copy
    /// path and the peer alone. One child process per target, so a path that crashes or hangs
    /// is reported as such and the bench goes on.
    Interop(InteropArgs),
}

#[derive(clap::Args)]
pub struct RunnerArgs {
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
    /// A ROCm install (a directory) to load HIP from; repeat it for several installs side by
    /// side, as `run` does.
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Vec<PathBuf>,
    /// Write the start throughput here (JSON, `clhip-start-rate/1`), for `run --start-rate`.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Measure the start throughput only, not the runner's settings.
    #[arg(long)]
    starts_only: bool,
    /// Starts timed per pair kind and concurrency (at least the concurrency).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=10000))]
    starts: u32,
}

/// `bench runner --spare-workers`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SpareSetting {
    On,
    Off,
    Both,
}

pub fn bench(what: BenchWhat) -> anyhow::Result<ExitCode> {
    match what {
        BenchWhat::Refs => refs(),
        BenchWhat::Runner(args) => runner(args),
        BenchWhat::Interop(args) => bench_interop::interop(args),
    }
}

fn refs() -> anyhow::Result<ExitCode> {
    let mut text = Vec::new();
    clhip::bench::run_refs(&mut text)?;
    Stdout::new().write(&String::from_utf8_lossy(&text))?;
    Ok(ExitCode::SUCCESS)
}

fn runner(args: RunnerArgs) -> anyhow::Result<ExitCode> {
    let save = clhip::output::check_given("--save", args.save.as_deref())?;
    let probe = plan::probe_machine(&args.rocm_path)?;
    let items: Vec<Planned> = plan::planned_cases(
        &probe,
        &Matrix::default_matrix(),
        &args.filters,
        &args.devices,
    )?
    .into_iter()
    .map(|c| {
        let e = Baseline::unbaselined(&c);
        plan::plan_item(&probe, c, e)
    })
    .collect();
    let exe = WorkerExe::pin()?;
    let opts = RunOptionsBuilder::new(&exe, plan::DEFAULT_SEED, args.timeout)
        .rocm_paths(&args.rocm_path)
        .build();
    let jobs: Vec<usize> = args.jobs.iter().map(|&j| usize::from(j)).collect();
    let spares: &[bool] = match args.spare_workers {
        SpareSetting::On => &[true],
        SpareSetting::Off => &[false],
        SpareSetting::Both => &[false, true],
    };
    let (configs, notes) = clhip::bench::runner_configs(&jobs, spares);
    for n in notes {
        note(&format!("clhip: bench runner: {n}"));
    }
    let mut stdout = Stdout::new();
    let mut text = Vec::new();
    let rates = clhip::bench::starts::measure(
        &clhip::bench::starts::kinds_of(&items),
        &opts,
        &clhip::bench::starts::CONCURRENCIES,
        args.starts as usize,
        &mut text,
    );
    // What was measured is shown even when no kind could be.
    stdout.write(&String::from_utf8_lossy(&text))?;
    let rates = rates?;
    if let Some(target) = &save {
        clhip::bench::starts::save(&rates, target)?;
        note(&format!("clhip: wrote {}", target.given.display()));
    }
    if args.starts_only {
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = Vec::new();
    clhip::bench::run_runner(&items, &opts, &configs, &mut text)?;
    stdout.write(&String::from_utf8_lossy(&text))?;
    Ok(ExitCode::SUCCESS)
}
