//! `clhip bench interop`: what each interop path costs and saves, one child process per
//! target.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use anyhow::bail;

use clhip::plan::{self, WorkerExe};
use clhip::{output, pairs, probe, report};

use super::outputs::{Stdout, Written};
use super::{existing_dir, note, parse_timeout};

#[derive(clap::Args)]
pub struct InteropArgs {
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
    /// Complex elements of the pipeline's vector: a power of two, at most 4194304 (the default).
    #[arg(long, default_value_t = clhip::generate::SEED_LEN, value_parser = parse_pipeline_len)]
    pipeline_len: usize,
    /// The data seed (as `run --seed`): the pipeline's inputs are its conformance case's.
    #[arg(long, default_value_t = plan::DEFAULT_SEED)]
    seed: u64,
    /// Time limit per target (one child process) in seconds.
    #[arg(long, default_value_t = 600.0, value_parser = parse_timeout)]
    timeout: f64,
    /// A ROCm install (a directory) to load HIP from (default: $ROCM_PATH, /opt/rocm,
    /// /opt/rocm-*, the loader path).
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

/// `clhip bench interop`: outputs checked first, then the pairs probed, the targets picked and
/// measured one child at a time, the tables printed and the files written. Exit 1 if a
/// target ended in a harness error (a path that crashes or faults is a finding, not a failure
/// of the bench).
pub fn interop(args: InteropArgs) -> anyhow::Result<ExitCode> {
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

    let probe = plan::probe_machine(args.rocm_path.as_slice())?;
    let mut pairs = pairs::from_probe(&probe);
    // What a path costs on one GPU; a pair across GPUs is the run's to check, not timed here.
    pairs.retain(|p| p.cl_gpu.is_none());
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
                env: plan::worker_env(&probe, &pair),
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
    let exe = WorkerExe::pin()?;
    let opts = interop::Options {
        exe: exe.path().to_path_buf(),
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
        build: Some(clhip::build_id::BuildId::this()),
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
