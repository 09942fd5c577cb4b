//! clhip and its reproducers make the same API calls in the same order (docs/repro.md,
//! "Calls"): each case runs through clhip's workers with `CLHIP_RECORD_CALLS`, its reproducer
//! is written, built and run with `CLHIP_PRINT_CALLS`, and the two sequences, normalised by
//! `clhip::calls`, must be equal; a difference is reported at its first index with both sides'
//! calls.
//!
//! - `host_cases_on_pocl`: every host case of the default matrix on PoCL.
//! - `cuda_cases_on_pocl_and_a_host_stub`, `hip_cases_on_pocl_and_a_host_stub`: every path,
//!   sync and op of the matrix's cuda (hip) cases the reproducer covers, on PoCL, with CUDA's
//!   (HIP's) libraries replaced by a stub that does on the host what each call asks
//!   (tests/fixtures/gpu-stub): both sides make their real calls, into it.
//! - `cuda_library_error_over_a_pending_fault`, `hip_library_error_over_a_pending_fault`: the
//!   stub fails the gemm's BLAS call and leaves an illegal address pending; clhip's outcome and
//!   the reproducer's exit must both be the fault the device's synchronize reports.
//! - `reuse_skip_one_sync_on_pocl_and_the_stubs`: reuse cases of each peer (the host's, the
//!   CUDA and HIP stubs'), clhip and the reproducer both planted with `skip-one-sync`: both
//!   must fail at crossing 500, and there only, with the same calls.
//! - `cuda_cases_on_this_gpu`: every cuda case the reproducer covers, on this machine's
//!   NVIDIA GPU and OpenCL, the reproducers built by nvcc (`build.sh`). Ignored without
//!   libcuda; `CLHIP_REQUIRE_CUDA=1` makes that a failure.
//!
//! Each needs OpenCL (`CLHIP_REQUIRE_OPENCL=1` makes its absence a failure) and a C compiler
//! (`cc`; nvcc for the GPU run), and is ignored with the reason where one is missing.
//! `CLHIP_EXE` names the clhip binary where the test binary was carried without its build tree;
//! `CLHIP_AGREEMENT_ONLY` (comma-separated globs or substrings of case ids) narrows a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clhip::calls;
use clhip::cases::Matrix;
use clhip::expectations::Baseline;
use clhip::generate::DataKind;
use clhip::model::{Api, Case, ClDeviceRef, Op, Outcome, OutcomeKind, Pair, Peer};
use clhip::ops::Plant;
use clhip::repro::{self, Header, ReproCase};
use clhip::results::Planned;
use clhip::runner::{self, RunOptions};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

const SEED: u64 = 0x5EED;

fn main() {
    let mut args = Arguments::from_args();
    // Each trial runs its cases two at a time; side by side they would only compete.
    args.test_threads = Some(1);
    let trials = vec![
        Trial::ignorable_test("host_cases_on_pocl", host_cases_on_pocl),
        Trial::ignorable_test(
            "cuda_cases_on_pocl_and_a_host_stub",
            cuda_cases_on_pocl_and_a_host_stub,
        ),
        Trial::ignorable_test(
            "hip_cases_on_pocl_and_a_host_stub",
            hip_cases_on_pocl_and_a_host_stub,
        ),
        Trial::ignorable_test(
            "cuda_library_error_over_a_pending_fault",
            cuda_library_error_over_a_pending_fault,
        ),
        Trial::ignorable_test(
            "hip_library_error_over_a_pending_fault",
            hip_library_error_over_a_pending_fault,
        ),
        Trial::ignorable_test(
            "reuse_skip_one_sync_on_pocl_and_the_stubs",
            reuse_skip_one_sync_on_pocl_and_the_stubs,
        ),
        Trial::ignorable_test("cuda_cases_on_this_gpu", cuda_cases_on_this_gpu),
    ];
    libtest_mimic::run(&args, trials).exit();
}

fn clhip_exe() -> PathBuf {
    std::env::var_os("CLHIP_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_clhip")))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-agreement-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Why `tool` cannot be run here, if it cannot.
fn missing(tool: &str) -> Option<String> {
    match Command::new(tool).arg("--version").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("`{tool} --version` exited {}", o.status)),
        Err(e) => Some(format!("no `{tool}` here ({e})")),
    }
}

fn required(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// The PoCL device's label, or why there is none (a failure under CLHIP_REQUIRE_OPENCL=1).
fn pocl() -> Result<ClDeviceRef, String> {
    let devices = clhip::runtimes::opencl::enumerate().map_err(|e| e.to_string())?;
    devices
        .iter()
        .find(|d| d.r.label.starts_with("pocl"))
        .map(|d| d.r.clone())
        .ok_or_else(|| {
            let seen: Vec<&str> = devices.iter().map(|d| d.r.label.as_str()).collect();
            format!("no PoCL device (OpenCL lists: {})", seen.join(", "))
        })
}

/// The PoCL device, with a C compiler to build reproducers; or the trial ignored with why
/// (failed where `CLHIP_REQUIRE_OPENCL=1` asks for PoCL). The first enumeration goes through
/// `test_device`, which makes it once for every test thread.
fn pocl_and_cc() -> Result<Result<ClDeviceRef, Completion>, Failed> {
    if clhip::runtimes::opencl::test_device().is_none() {
        return Ok(Err(Completion::ignored_with("no OpenCL device")));
    }
    let pocl = match pocl() {
        Ok(d) => d,
        Err(why) if required("CLHIP_REQUIRE_OPENCL") => {
            return Err(format!("CLHIP_REQUIRE_OPENCL=1 but {why}").into());
        }
        Err(why) => return Ok(Err(Completion::ignored_with(why))),
    };
    if let Some(why) = missing("cc") {
        return Ok(Err(Completion::ignored_with(why)));
    }
    Ok(Ok(pocl))
}

/// How one side of the comparison runs here: the workers' environment, how a reproducer is
/// built, and the environment it runs in.
struct Setup {
    worker_env: Vec<(String, String)>,
    build: Build,
    run_env: Vec<(String, String)>,
    /// Planted in clhip's workers and in the reproducers alike.
    plant: Option<Plant>,
}

enum Build {
    /// `build.sh`, as a person runs it.
    Script,
    /// `cc` against a stub: its headers, the directory of its libraries, the defines and
    /// libraries a reproducer of its API takes.
    Stub {
        include: PathBuf,
        lib: PathBuf,
        defines: &'static [&'static str],
        libs: &'static [&'static str],
    },
}

/// What one case gave on each side.
struct Compared {
    id: String,
    clhip: Outcome,
    /// The reproducer's exit code, or why it did not run.
    repro: Result<i32, String>,
    /// What the reproducer printed.
    printed: String,
    disagreement: Option<calls::Disagreement>,
    /// The compared calls, clhip's (the same as the reproducer's where they agree).
    calls: Vec<String>,
}

/// Runs `cases` through clhip's workers with recording, then each one's reproducer with
/// printing, and compares. The failures, each naming its case, or `Ok` with a summary.
fn agree(name: &str, cases: Vec<Case>, setup: &Setup) -> Result<Vec<Compared>, Failed> {
    assert!(!cases.is_empty(), "{name}: no cases");
    // A narrower run, to look at some cases again: globs or substrings of case ids.
    let only: Vec<String> = std::env::var("CLHIP_AGREEMENT_ONLY")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let cases: Vec<Case> = cases
        .into_iter()
        .filter(|c| {
            only.is_empty()
                || only
                    .iter()
                    .any(|f| clhip::filter::matches_filter(f, &c.id()))
        })
        .collect();
    let dir = scratch(name);
    let recorded = dir.join("recorded");
    let started = Instant::now();
    let mut opts = RunOptions::new(clhip_exe(), SEED);
    opts.jobs = 2;
    opts.timeout = std::time::Duration::from_secs(600);
    opts.worker_env = setup.worker_env.clone();
    opts.worker_env.push((
        calls::RECORD_ENV.to_string(),
        recorded.display().to_string(),
    ));
    if let Some(p) = setup.plant {
        let name = serde_json::to_value(p).map_err(|e| e.to_string())?;
        opts.worker_args.extend([
            "--plant".to_string(),
            name.as_str().unwrap_or_default().to_string(),
        ]);
    }
    let plan: Vec<Planned> = cases
        .iter()
        .map(|c| Planned::case(c.clone(), Baseline::unbaselined(c)))
        .collect();
    let end = runner::run(plan, &opts, &mut |_| {}).map_err(|e| format!("{name}: {e:#}"))?;
    let outcomes: BTreeMap<String, Outcome> =
        end.results.into_iter().map(|r| (r.id, r.outcome)).collect();
    let clhip_s = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    // Two at a time on CI's two cores; more where there are more (a GPU machine's reproducers
    // check a 2048 x 2048 cgemm in double on the CPU).
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let id = case.id();
                    let at = dir.join(format!("repro-{i}"));
                    let printed = at.join("calls");
                    let (repro, stdout) = match reproduce(&id, &at, &printed, setup) {
                        Ok((code, stdout)) => (Ok(code), stdout),
                        Err(why) => (Err(why), String::new()),
                    };
                    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
                    let ours = calls::normalise(&read(&recorded.join(calls::file_name(&id))));
                    let theirs = calls::normalise(&read(&printed));
                    let clhip = outcomes.get(&id).cloned().unwrap_or(Outcome::Error {
                        reason: "not run".into(),
                    });
                    let stopped = stopped(&clhip, &repro);
                    let compared = Compared {
                        disagreement: calls::compare_until_stopped(&ours, &theirs, stopped),
                        clhip,
                        repro,
                        printed: stdout,
                        calls: ours,
                        id,
                    };
                    results.lock().unwrap().push(compared);
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.id.cmp(&b.id));
    eprintln!(
        "{name}: {} cases; clhip's workers {clhip_s:.1} s, reproducers written, built and run {:.1} s",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(results)
}

/// Which side stopped before its last call: clhip's worker died (a crash, a timeout), or the
/// reproducer ended on a refused call (2), a fault (3), a signal, or wrong data it checks on
/// the way (1 where clhip's verdict is not on the case's data: it ended early too).
fn stopped(clhip: &Outcome, repro: &Result<i32, String>) -> calls::Stopped {
    let judged_data = matches!(
        clhip,
        Outcome::Pass { .. }
            | Outcome::Fail {
                reason: clhip::model::FailReason::Mismatch(_)
            }
    );
    calls::Stopped {
        clhip: matches!(clhip, Outcome::Crash { .. } | Outcome::Timeout { .. }),
        repro: match repro {
            Ok(0) => false,
            Ok(1) => !judged_data,
            _ => true,
        },
    }
}

/// Writes, builds and runs `id`'s reproducer in `dir`, its calls printed into `printed`: its
/// exit code and what it printed, or why it did not build or run.
fn reproduce(id: &str, dir: &Path, printed: &Path, setup: &Setup) -> Result<(i32, String), String> {
    let case = ReproCase::parse(id).map_err(|e| format!("{e:#}"))?;
    let header = Header {
        seed: SEED,
        ..Header::default()
    };
    repro::generate(&case, DataKind::Seeded, &header, setup.plant)
        .and_then(|r| r.write(dir))
        .map_err(|e| format!("writing the reproducer: {e:#}"))?;
    let built = match &setup.build {
        Build::Script => Command::new("sh").arg("build.sh").current_dir(dir).output(),
        Build::Stub {
            include,
            lib,
            defines,
            libs,
        } => Command::new("cc")
            .args(["-std=gnu11", "-O1", "-o", "repro", "repro.c"])
            .args(*defines)
            .arg("-I")
            .arg(include)
            .arg("-L")
            .arg(lib)
            .args(*libs)
            .args(["-lOpenCL", "-lm"])
            .current_dir(dir)
            .output(),
    }
    .map_err(|e| format!("building: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "the build failed:\n{}",
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    let ran = Command::new(dir.join("repro"))
        .current_dir(dir)
        .envs(setup.run_env.iter().cloned())
        .env(calls::PRINT_ENV, printed)
        .output()
        .map_err(|e| format!("running: {e}"))?;
    Ok((
        ran.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&ran.stdout).into_owned(),
    ))
}

/// The failures among `results`: a case with no recorded or printed calls, or whose calls
/// differ; each with the case and both sides' outcomes.
fn judge(name: &str, results: &[Compared]) -> Result<(), Failed> {
    // Not the test's verdict (a negative control may race one way in clhip and the other in
    // its reproducer), but what a person running it wants to see beside it.
    for r in results {
        let expected = match r.clhip.kind() {
            OutcomeKind::Pass => Some(0),
            OutcomeKind::Fail => Some(1),
            OutcomeKind::Unsupported => Some(2),
            OutcomeKind::Fault => Some(3),
            _ => None,
        };
        if r.repro.as_ref().ok() != expected.as_ref() {
            eprintln!(
                "{name}: outcomes differ: {}: clhip {}, reproducer exit {:?}",
                r.id,
                r.clhip.kind(),
                r.repro
            );
        }
    }
    let mut failures = Vec::new();
    for r in results {
        let what = match (&r.repro, &r.disagreement) {
            (Err(why), _) => Some(format!("the reproducer did not run: {why}")),
            // Refused on both sides before any compared call (no Vulkan loader here): nothing
            // to compare, and nothing lost.
            _ if r.calls.is_empty() && !refused_alike(r) => {
                Some("clhip recorded no compared call".to_string())
            }
            (_, Some(d)) => Some(d.to_string()),
            (Ok(_), None) => None,
        };
        if let Some(what) = what {
            failures.push(format!(
                "{}: {what} [clhip: {} ({}); reproducer exit {:?}]",
                r.id,
                r.clhip.kind(),
                r.clhip.reason(),
                r.repro
            ));
        }
    }
    if failures.is_empty() {
        let calls: usize = results.iter().map(|r| r.calls.len()).sum();
        eprintln!(
            "{name}: all {} cases agree ({calls} compared calls)",
            results.len()
        );
        Ok(())
    } else {
        Err(format!(
            "{name}: {} of {} cases disagree:\n{}",
            failures.len(),
            results.len(),
            failures.join("\n")
        )
        .into())
    }
}

/// Every host case of the default matrix on PoCL.
fn host_cases_on_pocl() -> Result<Completion, Failed> {
    let label = match pocl_and_cc()? {
        Ok(d) => d.label,
        Err(ignored) => return Ok(ignored),
    };
    let (cases, refused): (Vec<Case>, Vec<Case>) = host_matrix(&label)?
        .into_iter()
        .partition(|c| ReproCase::parse(&c.id()).is_ok_and(|r| repro::check_covered(&r).is_ok()));
    every_op_has_a_reproducer("host_cases_on_pocl", &cases, &refused)?;
    // A case the generator refuses has no calls to compare; it is named, with the refusal,
    // so that a path or op that loses its reproducer shows here (docs/reproducers.md lists
    // what is refused and why).
    for c in &refused {
        let why = match ReproCase::parse(&c.id()) {
            Ok(r) => repro::check_covered(&r).err().map(|e| e.to_string()),
            Err(e) => Some(e.to_string()),
        };
        eprintln!(
            "host_cases_on_pocl: no reproducer: {}",
            why.unwrap_or_default()
        );
    }
    let setup = Setup {
        worker_env: Vec::new(),
        build: Build::Script,
        run_env: Vec::new(),
        plant: None,
    };
    let results = agree("host_cases_on_pocl", cases, &setup)?;
    judge("host_cases_on_pocl", &results)?;
    Ok(Completion::Completed)
}

/// The host cases of the default matrix on the OpenCL device labelled `label`.
fn host_matrix(label: &str) -> Result<Vec<Case>, Failed> {
    let pairs = clhip::pairs::discover().map_err(|e| e.to_string())?;
    Ok(Matrix::default_matrix()
        .expand(&pairs)
        .into_iter()
        .filter(|c| c.pair.peer.api == Api::Host && c.pair.opencl.label == label)
        .collect())
}

/// The cases of the default matrix with a peer of `api` on `opencl`: those whose reproducers
/// clhip writes, and the others.
fn matrix_cases(api: Api, opencl: ClDeviceRef) -> (Vec<Case>, Vec<Case>) {
    let pair = Pair {
        opencl,
        peer: Peer { api, ordinal: 0 },
        install: None,
        cl_gpu: None,
    };
    Matrix::default_matrix()
        .expand(&[pair])
        .into_iter()
        .partition(|c| ReproCase::parse(&c.id()).is_ok_and(|r| repro::check_covered(&r).is_ok()))
}

/// The cases of the default matrix with a peer of `api` whose reproducers clhip writes, on
/// `opencl`.
fn covered_cases(api: Api, opencl: ClDeviceRef) -> Vec<Case> {
    matrix_cases(api, opencl).0
}

/// Every op the matrix runs with this peer has a reproducer on some path: an op refused on
/// every one has lost its C, which comparing the covered cases alone would not show.
fn every_op_has_a_reproducer(name: &str, covered: &[Case], refused: &[Case]) -> Result<(), Failed> {
    let lost: std::collections::BTreeSet<String> = refused
        .iter()
        .filter(|r| !covered.iter().any(|c| c.op == r.op))
        .map(|r| r.op.to_string())
        .collect();
    if lost.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{name}: no reproducer of op {} on any path",
        lost.into_iter().collect::<Vec<_>>().join(", ")
    )
    .into())
}

/// The host stubs of CUDA's and HIP's libraries (tests/fixtures/gpu-stub), carried in this
/// binary.
const STUB_FILES: [(&str, &str); 10] = [
    ("host.h", include_str!("fixtures/gpu-stub/host.h")),
    ("cuda.c", include_str!("fixtures/gpu-stub/cuda.c")),
    ("hip.c", include_str!("fixtures/gpu-stub/hip.c")),
    (
        "include/cuda.h",
        include_str!("fixtures/gpu-stub/include/cuda.h"),
    ),
    (
        "include/nvrtc.h",
        include_str!("fixtures/gpu-stub/include/nvrtc.h"),
    ),
    (
        "include/cublas_v2.h",
        include_str!("fixtures/gpu-stub/include/cublas_v2.h"),
    ),
    (
        "include/cublas_api.h",
        include_str!("fixtures/gpu-stub/include/cublas_api.h"),
    ),
    (
        "include/cusolverDn.h",
        include_str!("fixtures/gpu-stub/include/cusolverDn.h"),
    ),
    (
        "include/rocblas/rocblas.h",
        include_str!("fixtures/gpu-stub/include/rocblas/rocblas.h"),
    ),
    (
        "include/rocsolver/rocsolver.h",
        include_str!("fixtures/gpu-stub/include/rocsolver/rocsolver.h"),
    ),
];

/// One API's stub: its source, the library it builds into `lib/` (and the other names it is
/// installed under there), the defines it and the reproducers take, the reproducers' -l.
struct Stub {
    api: Api,
    source: &'static str,
    library: &'static str,
    aliases: &'static [&'static str],
    defines: &'static [&'static str],
    libs: &'static [&'static str],
}

const CUDA_STUB: Stub = Stub {
    api: Api::Cuda,
    source: "cuda.c",
    library: "libcuda.so",
    aliases: &[
        "libcuda.so.1",
        "libnvrtc.so",
        "libcublas.so",
        "libcusolver.so",
    ],
    defines: &[],
    libs: &["-lcuda", "-lnvrtc", "-lcublas", "-lcusolver"],
};

/// HIP 5.2 (the version of Debian's headers it is built against): hiprtc inside libamdhip64.
const HIP_STUB: Stub = Stub {
    api: Api::Hip,
    source: "hip.c",
    library: "libamdhip64.so.5",
    aliases: &[
        "libamdhip64.so",
        "libhiprtc.so",
        "librocblas.so",
        "librocblas.so.0",
        "librocsolver.so",
        "librocsolver.so.0",
    ],
    defines: &["-D__HIP_PLATFORM_AMD__"],
    libs: &["-lamdhip64", "-lrocblas", "-lrocsolver"],
};

/// `stub` built into `dir/lib` under its names, with the headers in `dir/include`; why not,
/// if the build failed (`Ok(Err)`: the HIP headers are not installed).
fn build_stub(dir: &Path, stub: &Stub) -> Result<Result<(), String>, Failed> {
    let io = |e: std::io::Error| Failed::from(e.to_string());
    for (name, text) in STUB_FILES {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).map_err(io)?;
        std::fs::write(path, text).map_err(io)?;
    }
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).map_err(io)?;
    let o = Command::new("cc")
        .args([
            "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I", "include",
        ])
        .args(stub.defines)
        .arg("-o")
        .arg(lib.join(stub.library))
        .args([stub.source, "-lm"])
        .current_dir(dir)
        .output()
        .map_err(io)?;
    if !o.status.success() {
        let log = String::from_utf8_lossy(&o.stderr).into_owned();
        if stub.api == Api::Hip && log.contains("hip/hip_runtime_api.h") {
            return Ok(Err(
                "no HIP headers to build the HIP stub against (Debian: libamdhip64-dev)".into(),
            ));
        }
        return Err(format!("the {} stub did not build:\n{log}", stub.api.name()).into());
    }
    for alias in stub.aliases {
        std::os::unix::fs::symlink(stub.library, lib.join(alias)).map_err(io)?;
    }
    Ok(Ok(()))
}

/// `cases` with one case per path, sync and op: the smallest size the matrix gives it.
fn smallest_of_each(cases: Vec<Case>) -> Vec<Case> {
    let mut by_kind: BTreeMap<String, Case> = BTreeMap::new();
    for c in cases {
        let kind = format!("{}/{}/{}", c.path, c.sync, c.op);
        match by_kind.get(&kind) {
            Some(have) if have.n <= c.n => {}
            _ => {
                by_kind.insert(kind, c);
            }
        }
    }
    by_kind.into_values().collect()
}

fn cuda_cases_on_pocl_and_a_host_stub() -> Result<Completion, Failed> {
    stub_cases("cuda_cases_on_pocl_and_a_host_stub", &CUDA_STUB)
}

fn hip_cases_on_pocl_and_a_host_stub() -> Result<Completion, Failed> {
    stub_cases("hip_cases_on_pocl_and_a_host_stub", &HIP_STUB)
}

/// Every (path, sync, op) of the matrix's cases with a peer of `stub.api` that the reproducer
/// covers, at the smallest size the matrix gives it, on PoCL with the stub as the peer's
/// libraries: a case's calls depend on its size only through the FFT's passes, which the host
/// cases hold at every size, and the stub does a 2048 x 2048 cgemm on one core.
fn stub_cases(name: &str, stub: &Stub) -> Result<Completion, Failed> {
    let (pocl, setup) = match stub_setup(stub, &[])? {
        Ok(s) => s,
        Err(ignored) => return Ok(ignored),
    };
    let (covered, refused) = matrix_cases(stub.api, pocl);
    every_op_has_a_reproducer(name, &covered, &refused)?;
    let cases = smallest_of_each(covered);
    let results = agree(name, cases, &setup)?;
    // The stub does what each call asks: the cases must come out as on a working device, so
    // that a case cut short by a refusal cannot pass as agreeing on a few calls. Except what
    // PoCL cannot do: import memory or semaphores (it has neither cl_khr_external_memory nor
    // cl_khr_external_semaphore), nor is there a Vulkan driver here; such a case must be
    // refused on both sides alike, after the same calls.
    let cut_short: Vec<String> = results
        .iter()
        .filter(|r| {
            let ran = matches!(r.clhip, Outcome::Pass { .. } | Outcome::Fail { .. })
                && matches!(r.repro, Ok(0 | 1));
            let refused_as_it_must = needs_imports(&r.id) && refused_alike(r);
            !(ran || refused_as_it_must)
        })
        .map(|r| {
            format!(
                "{}: clhip {}: {}; reproducer {:?}",
                r.id,
                r.clhip.kind(),
                r.clhip.reason(),
                r.repro
            )
        })
        .collect();
    judge(name, &results)?;
    if !cut_short.is_empty() {
        return Err(format!(
            "{name}: cases that did not run to their verdict on the stub:\n{}",
            cut_short.join("\n")
        )
        .into());
    }
    Ok(Completion::Completed)
}

/// A case whose path imports memory or whose sync imports semaphores.
fn needs_imports(id: &str) -> bool {
    use clhip::paths::PathFacts;
    ReproCase::parse(id).is_ok_and(|c| {
        c.path.is_imported()
            || c.sync == clhip::model::SyncMode::Semaphore
            || c.path == clhip::model::PathKind::ClDmabufHipImport
    })
}

/// clhip's `unsupported` and the reproducer's exit 2, printing clhip's reason as its own up to
/// its details in parentheses (which clhip may add to, and which name places each side looked
/// in: a worker's ROCm root is not the reproducer's).
fn refused_alike(r: &Compared) -> bool {
    let said = r
        .printed
        .lines()
        .find_map(|l| l.strip_prefix("UNSUPPORTED: "))
        .map(|l| l.split(" (").next().unwrap_or(l));
    matches!((&r.clhip, said), (Outcome::Unsupported { reason, .. }, Some(said))
        if r.repro == Ok(2) && reason.starts_with(said))
}

fn cuda_library_error_over_a_pending_fault() -> Result<Completion, Failed> {
    pending_fault_case(
        "cuda_library_error_over_a_pending_fault",
        &CUDA_STUB,
        "cublasCgemm",
        "cuCtxSynchronize",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
    )
}

fn hip_library_error_over_a_pending_fault() -> Result<Completion, Failed> {
    pending_fault_case(
        "hip_library_error_over_a_pending_fault",
        &HIP_STUB,
        "rocblas_cgemm",
        "hipDeviceSynchronize",
        "hipErrorIllegalAddress",
    )
}

/// A gemm whose BLAS call fails (`library_call`, told by `CLHIP_STUB_FAIL`) and leaves an
/// illegal address pending on the device: clhip's outcome is the fault `sync` reports after
/// the case, and the reproducer must exit 3 (fault), naming both the failed call and `sync`,
/// not 2 (the library's refusal) as it would if it stopped at the first error.
fn pending_fault_case(
    name: &str,
    stub: &Stub,
    library_call: &str,
    sync: &str,
    fault: &str,
) -> Result<Completion, Failed> {
    let env = [("CLHIP_STUB_FAIL".to_string(), library_call.to_string())];
    let (pocl, setup) = match stub_setup(stub, &env)? {
        Ok(s) => s,
        Err(ignored) => return Ok(ignored),
    };
    let cases: Vec<Case> = smallest_of_each(covered_cases(stub.api, pocl))
        .into_iter()
        .filter(|c| c.id().contains("/copy/finish/gemm/"))
        .collect();
    let results = agree(name, cases, &setup)?;
    judge(name, &results)?;
    let [r] = &results[..] else {
        return Err(format!("{name}: {} cases, not one copy/finish/gemm", results.len()).into());
    };
    match &r.clhip {
        Outcome::Fault { error } if error.call == sync && error.name == fault => {}
        other => {
            return Err(format!(
                "{name}: {}: clhip gave {} {}, not the fault {sync} reports",
                r.id,
                other.kind(),
                other.reason()
            )
            .into());
        }
    }
    let names_both = r.printed.contains(&format!("{library_call}("))
        && r.printed.contains(&format!("{sync}() returned {fault}"));
    if r.repro != Ok(3) || !names_both {
        return Err(format!(
            "{name}: {}: the reproducer exited {:?}, not 3 (fault) naming {library_call} and {sync}; it printed:\n{}",
            r.id, r.repro, r.printed
        )
        .into());
    }
    Ok(Completion::Completed)
}

/// PoCL and `stub` built as the peer's libraries, each side's environment with `env` added;
/// or the trial ignored with why it cannot run here.
fn stub_setup(
    stub: &Stub,
    env: &[(String, String)],
) -> Result<Result<(ClDeviceRef, Setup), Completion>, Failed> {
    let pocl = match pocl_and_cc()? {
        Ok(d) => d,
        Err(ignored) => return Ok(Err(ignored)),
    };
    let dir = scratch(&format!("{}-stub", stub.api.name()));
    if let Err(why) = build_stub(&dir, stub)? {
        return Ok(Err(Completion::ignored_with(why)));
    }
    let lib = dir.join("lib");
    let library_path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", lib.display()),
        _ => lib.display().to_string(),
    };
    let mut run_env = vec![("LD_LIBRARY_PATH".to_string(), library_path)];
    run_env.extend(env.iter().cloned());
    let mut worker_env = match stub.api {
        // cudarc finds libcuda by the loader's path; clhip's HIP, by its ROCm root.
        Api::Hip => vec![(
            clhip::pairs::WORKER_ROCM_PATH_ENV.to_string(),
            dir.display().to_string(),
        )],
        _ => run_env[..1].to_vec(),
    };
    worker_env.extend(env.iter().cloned());
    // The stub's "kernels" are kept out of the kernel cache people use.
    worker_env.push((
        "CLHIP_KERNEL_CACHE".to_string(),
        dir.join("kernels").display().to_string(),
    ));
    let setup = Setup {
        worker_env,
        build: Build::Stub {
            include: dir.join("include"),
            lib,
            defines: stub.defines,
            libs: stub.libs,
        },
        run_env,
        plant: None,
    };
    Ok(Ok((pocl, setup)))
}

/// The reuse op planted with `skip-one-sync` in clhip's workers and in its reproducers, on the
/// host peer and on the CUDA and HIP stubs, each with a handover by a wait and one by a map:
/// both sides must fail at crossing 500, OpenCL's write read by the peer, and there only, with
/// the same calls (the user event that holds the write back made and waited on in the same
/// place).
fn reuse_skip_one_sync_on_pocl_and_the_stubs() -> Result<Completion, Failed> {
    let name = "reuse_skip_one_sync_on_pocl_and_the_stubs";
    let label = match pocl_and_cc()? {
        Ok(d) => d.label,
        Err(ignored) => return Ok(ignored),
    };
    let pick = |cases: Vec<Case>, ids: &[&str]| -> Vec<Case> {
        cases
            .into_iter()
            .filter(|c| c.op == Op::Reuse && ids.iter().any(|id| c.id().ends_with(id)))
            .collect()
    };
    let host = Setup {
        worker_env: Vec::new(),
        build: Build::Script,
        run_env: Vec::new(),
        plant: Some(Plant::SkipOneSync),
    };
    let mut runs = vec![(
        pick(
            host_matrix(&label)?,
            &["/copy/event/reuse/n=1", "/use-host-ptr/map/reuse/n=1"],
        ),
        host,
    )];
    let mut not_run = Vec::new();
    for stub in [&CUDA_STUB, &HIP_STUB] {
        match stub_setup(stub, &[])? {
            Ok((pocl, mut setup)) => {
                setup.plant = Some(Plant::SkipOneSync);
                let ids = ["/copy/event/reuse/n=1", "/cl-svm-coarse/map/reuse/n=1"];
                runs.push((pick(covered_cases(stub.api, pocl), &ids), setup));
            }
            Err(_) => not_run.push(format!("the {} stub did not build", stub.api.name())),
        }
    }
    let mut failures = Vec::new();
    for (cases, setup) in runs {
        if cases.len() != 2 {
            return Err(format!("{name}: {} reuse cases picked, not 2", cases.len()).into());
        }
        let results = agree(name, cases, &setup)?;
        judge(name, &results)?;
        for r in &results {
            let peer = r.id.split(['+', '/']).nth(1).unwrap_or_default();
            let want = format!(
                "crossing 500 of 2000: pattern written by OpenCL, read by {peer} (the only failing crossing)"
            );
            let clhip_fails_there =
                r.clhip.kind() == OutcomeKind::Fail && r.clhip.reason().starts_with(&want);
            let repro_fails_there =
                r.repro == Ok(1) && r.printed.contains(&format!("FAIL: {want}: "));
            if !(clhip_fails_there && repro_fails_there) {
                failures.push(format!(
                    "{}: want `{want}` on both sides; clhip {}: {}; reproducer exit {:?}, printed:\n{}",
                    r.id,
                    r.clhip.kind(),
                    r.clhip.reason(),
                    r.repro,
                    r.printed.lines().filter(|l| !l.starts_with("-- ")).collect::<Vec<_>>().join("\n")
                ));
            }
        }
    }
    if !failures.is_empty() {
        return Err(format!("{name}:\n{}", failures.join("\n")).into());
    }
    if !not_run.is_empty() {
        return Ok(Completion::ignored_with(format!(
            "the host's cases agree, but {}",
            not_run.join(", ")
        )));
    }
    Ok(Completion::Completed)
}

/// Every cuda case of the matrix the reproducer covers, on this machine's NVIDIA GPU: clhip's
/// workers record, `build.sh` builds each reproducer with nvcc, and it runs with printing.
fn cuda_cases_on_this_gpu() -> Result<Completion, Failed> {
    let require = required("CLHIP_REQUIRE_CUDA");
    let skip = |why: String| -> Result<Completion, Failed> {
        if require {
            Err(format!("CLHIP_REQUIRE_CUDA=1 but {why}").into())
        } else {
            Ok(Completion::ignored_with(why))
        }
    };
    // The GPU pairs come from clhip's own probe (its CUDA and HIP probes run in children of
    // the clhip binary); `pairs::discover` alone knows only the host pairs.
    let probe = match std::process::Command::new(clhip_exe())
        .args(["probe", "--json"])
        .output()
    {
        Ok(out) => match serde_json::from_slice::<clhip::probe::Probe>(&out.stdout) {
            Ok(p) => p,
            Err(e) => return skip(format!("clhip probe --json gave no probe: {e}")),
        },
        Err(e) => return skip(format!("clhip probe did not start: {e}")),
    };
    let pairs = clhip::pairs::from_probe(&probe);
    let Some(pair) = pairs.iter().find(|p| p.peer.api == Api::Cuda) else {
        let seen: Vec<String> = pairs.iter().map(|p| p.id()).collect();
        return skip(format!(
            "no CUDA GPU paired with an OpenCL device (pairs: {})",
            seen.join(", ")
        ));
    };
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    if let Some(why) =
        missing(&nvcc).and_then(|why| missing("/usr/local/cuda/bin/nvcc").map(|_| why))
    {
        return skip(format!("{why} (NVCC names another)"));
    }
    let cases: Vec<Case> = covered_cases(Api::Cuda, pair.opencl.clone())
        .into_iter()
        .map(|c| Case {
            pair: pair.clone(),
            ..c
        })
        .collect();
    let setup = Setup {
        worker_env: Vec::new(),
        build: Build::Script,
        run_env: Vec::new(),
        plant: None,
    };
    let name = "cuda_cases_on_this_gpu";
    let results = agree(name, cases, &setup)?;
    judge(name, &results)?;
    Ok(Completion::Completed)
}
