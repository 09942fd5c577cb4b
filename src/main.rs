//! The `clhip` command line: probe, list, run, report, bench, and the hidden worker.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use clhip::cases::{self, Baseline, Matrix};
use clhip::report::{self, ConsoleReporter, RunReport};
use clhip::runner::{self, Planned, RunAborted, RunOptions};
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
        /// A ROCm install to search first (default: $ROCM_PATH, /opt/rocm, /opt/rocm-*).
        #[arg(long)]
        rocm_path: Option<PathBuf>,
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
        /// The ROCm install whose HIP devices to pair (as `run --rocm-path`).
        #[arg(long)]
        rocm_path: Option<PathBuf>,
    },
    /// Run the case matrix over every pair found and print the support matrix.
    Run(RunArgs),
    /// Render a saved results file: the matrix, Markdown for reports/, or a baseline.
    Report {
        file: PathBuf,
        #[arg(long)]
        markdown: bool,
        /// Print the run's non-passes as a baseline (`case-id,outcome` lines, for --baseline):
        /// what this driver is known to do, so the next run reports only changes.
        #[arg(long, conflicts_with = "markdown")]
        baseline: bool,
    },
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
        #[arg(long)]
        rocm_path: Option<PathBuf>,
    },
    /// Probes the one OpenCL vendor library its environment names (internal: started by
    /// `probe`, one per vendor).
    #[command(name = "__probe-opencl-vendor", hide = true)]
    ProbeOpenclVendor,
    /// Allocates device memory and holds it for another process's IPC open until stdin closes
    /// (internal: started by a worker for the IPC path).
    #[command(name = "__ipc-export", hide = true)]
    IpcExport {
        #[arg(long)]
        api: clhip::model::Api,
        #[arg(long)]
        ordinal: usize,
        #[arg(long)]
        rocm_path: Option<PathBuf>,
        /// Complex f32 elements.
        #[arg(long)]
        len: usize,
    },
}

#[derive(Subcommand)]
enum BenchWhat {
    /// Time the f64 CPU references (FFT of 4,194,304 points, cgemm, Cholesky).
    Refs,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Globs (`*` wildcard) or substrings of case ids; a filter matching nothing is an error.
    filters: Vec<String>,
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Results file (JSON, versioned, with the driver fingerprint).
    #[arg(long, default_value = "reports/latest.json")]
    json: PathBuf,
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
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Per-case timeout in seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// Cases per worker process before a fresh one takes over.
    #[arg(long, default_value_t = 64)]
    cases_per_worker: usize,
    /// Worker processes at once. Each has its own device contexts, so a crash or fault still
    /// costs one case; more than one shortens runs where many cases crash or fault.
    #[arg(long, short = 'j', default_value_t = 1)]
    jobs: usize,
    #[arg(long)]
    rocm_path: Option<PathBuf>,
    /// Test-only: plant an error in every case (flip-element, skip-sync, bad-pointer) to show
    /// the checks catch it.
    #[arg(long, hide = true)]
    plant: Option<clhip::ops::Plant>,
    /// Test-only: run these mock actions (segfault,abort,hang,fault,...) instead of the matrix.
    #[arg(long, hide = true)]
    mock_cases: Option<String>,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("clhip: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Cmd::Worker {
            seed,
            plant,
            rocm_path,
        } => clhip::worker::worker_main(seed, plant, rocm_path).map(|()| ExitCode::SUCCESS),
        Cmd::IpcExport {
            api,
            ordinal,
            rocm_path,
            len,
        } => clhip::ipc::serve(api, ordinal, rocm_path, len).map(|()| ExitCode::SUCCESS),
        Cmd::Probe { json, rocm_path } => {
            // Before any runtime is loaded: what a driver prints must not land in the JSON.
            let mut out = probe::take_stdout_for_protocol()?;
            let exe = std::env::current_exe().context("locating the clhip binary")?;
            let p = probe::probe_isolating_vendors(&exe, rocm_path.as_deref());
            let text = if json {
                format!("{}\n", serde_json::to_string_pretty(&p)?)
            } else {
                p.render()
            };
            // A closed pipe (`clhip probe | head`) ends the output, not in an error.
            let _ = out.write_all(text.as_bytes());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::ProbeOpenclVendor => probe::vendor_child_main().map(|()| ExitCode::SUCCESS),
        Cmd::List {
            filters,
            cases,
            probe,
            rocm_path,
        } => {
            // Inputs first: a bad case file fails before anything is probed.
            let matrix = load_matrix(cases.as_deref())?;
            let probe = match probe {
                Some(f) => load_probe(&f)?,
                None => probe_child(rocm_path.as_deref())?,
            };
            let mut out = std::io::stdout().lock();
            for case in planned_cases(&probe, &matrix, &filters)? {
                // A closed pipe (`clhip list | head`) ends the listing, not in a panic.
                if writeln!(out, "{}", case.id()).is_err() {
                    break;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run(args) => run(args),
        Cmd::Report {
            file,
            markdown,
            baseline,
        } => {
            let r = report::load_json(&file)?;
            let text = if baseline {
                Baseline::from_results(&r.results, &file.display().to_string()).to_string()
            } else if markdown {
                report::render_markdown(&r)
            } else {
                format!(
                    "{}{}\n",
                    report::render_matrix(&r.results),
                    report::closing_line(&r.summary)
                )
            };
            // A closed pipe (`clhip report FILE | head`) ends the output, not in a panic.
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench {
            what: BenchWhat::Refs,
        } => {
            clhip::bench::run_refs(&mut std::io::stdout())?;
            Ok(ExitCode::SUCCESS)
        }
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
) -> anyhow::Result<Vec<clhip::model::Case>> {
    let pairs = pairs::from_probe(probe);
    if pairs.is_empty() {
        bail!(
            "no OpenCL device found, nothing to pair (OpenCL: {}; see `clhip probe`)",
            probe.opencl_status
        );
    }
    cases::filter(matrix.expand(&pairs), filters)
}

fn load_probe(file: &Path) -> anyhow::Result<probe::Probe> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not a `clhip probe --json` file: {e}",
            file.display(),
            e.line(),
            e.column()
        )
    })
}

fn probe_child(rocm_path: Option<&Path>) -> anyhow::Result<probe::Probe> {
    let exe = std::env::current_exe().context("locating the clhip binary")?;
    probe::probe_in_child(&exe, rocm_path)
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let started = SystemTime::now();
    let clock = Instant::now();
    // Inputs first: a bad case file, baseline or filter fails before anything runs or is written.
    let matrix = load_matrix(args.cases.as_deref())?;
    let baseline = match &args.baseline {
        Some(f) => Baseline::load(f)?,
        None => Baseline::default(),
    };
    let probe = probe_child(args.rocm_path.as_deref())?;
    let plan: Vec<Planned> = match &args.mock_cases {
        Some(list) => {
            mock::planned_mocks(&mock::parse_mock_list(list).map_err(anyhow::Error::msg)?)
        }
        None => planned_cases(&probe, &matrix, &args.filters)?
            .into_iter()
            .map(|c| {
                let e = baseline.expectation(&c);
                Planned::case(c, e)
            })
            .collect(),
    };
    for line in pairs::unpaired(&probe) {
        eprintln!("clhip: warning: {line}");
    }
    let fingerprint = probe.fingerprint();
    let exe = std::env::current_exe().context("locating the clhip binary to start workers")?;
    let mut opts = RunOptions::new(exe, args.seed);
    opts.timeout = Duration::from_secs_f64(args.timeout);
    opts.cases_per_worker = args.cases_per_worker;
    opts.jobs = args.jobs.max(1);
    if let Some(p) = &args.rocm_path {
        opts.worker_args
            .extend(["--rocm-path".to_string(), p.display().to_string()]);
    }
    if let Some(p) = args.plant {
        let name = serde_json::to_value(p)?;
        opts.worker_args.extend([
            "--plant".to_string(),
            name.as_str().unwrap_or_default().to_string(),
        ]);
    }

    eprintln!("clhip: {} cases, seed {}", plan.len(), args.seed);
    let mut console = ConsoleReporter::new(plan.len());
    let (results, aborted) = match runner::run(plan, &opts, &mut |e| console.on_event(e)) {
        Ok(r) => (r, None),
        Err(e) => match e.downcast::<RunAborted>() {
            Ok(a) => (a.completed.clone(), Some(a)),
            Err(e) => return Err(e),
        },
    };
    let report = RunReport::new(
        args.seed,
        std::env::args().collect(),
        fingerprint,
        started,
        clock.elapsed().as_secs_f64(),
        results,
    );
    print!("{}", report::render_matrix(&report.results));
    write_outputs(&report, &args)?;
    console.finish();
    println!("{}", report::closing_line(&report.summary));
    if let Some(a) = aborted {
        bail!("{a}");
    }
    Ok(if report.summary.unexpected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn write_outputs(report: &RunReport, args: &RunArgs) -> anyhow::Result<()> {
    type Writer = fn(&RunReport, &Path) -> anyhow::Result<()>;
    let mut targets: Vec<(&Path, Writer)> = vec![(&args.json, report::write_json)];
    if let Some(p) = &args.junit {
        targets.push((p, report::write_junit));
    }
    if let Some(p) = &args.markdown {
        targets.push((p, |r, p| {
            std::fs::write(p, report::render_markdown(r)).with_context(|| p.display().to_string())
        }));
    }
    for (path, write) in targets {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        write(report, path)?;
        eprintln!("clhip: wrote {}", path.display());
    }
    Ok(())
}
