//! ROCm installs: each of several (`--rocm-path A --rocm-path B`) probed in a child process of
//! its own, and labelled by its version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use super::isolation::{ChildRun, VendorLine, answer_parent, install_group_reaper, run_child};
use super::records::HipInstall;
use crate::model::Api;
use crate::runtimes::hip;
use crate::runtimes::runtime_status::RuntimeStatus;

/// The hidden subcommand that probes the one ROCm install its `--rocm-path` names.
pub const INSTALL_CHILD_SUBCOMMAND: &str = "__probe-rocm-install";

/// What tells an install apart: the ROCm release its libamdhip64's file name carries
/// (`libamdhip64.so.6.3.60302`: ROCm 6.3.2, as ROCm's packages name it), else the HIP version
/// hipRuntimeGetVersion gave (`5.2.21153`; Debian names its file after that), else `unknown`.
pub fn install_version(runtime: &RuntimeStatus) -> String {
    let from_file = runtime.library.as_deref().and_then(|lib| {
        let name = Path::new(lib).file_name()?.to_str()?;
        let version = name.strip_prefix("libamdhip64.so.")?;
        let parts: Vec<u32> = version
            .split('.')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // ROCM_VERSION encoding (rocm_version.h): major*10000 + minor*100 + patch, whose major
        // and minor must be the file's own: anything else is not that encoding.
        let [major, minor, encoded] = parts[..] else {
            return None;
        };
        (encoded / 10_000 == major && (encoded / 100) % 100 == minor)
            .then(|| format!("{major}.{minor}.{}", encoded % 100))
    });
    from_file
        .or_else(|| {
            let v = runtime
                .runtime_version
                .as_deref()?
                .split_whitespace()
                .next()?;
            v.chars()
                .all(|c| c.is_ascii_digit() || c == '.')
                .then(|| v.to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Labels for installs of these versions, in order: the version, with `~1`, `~2`, ... on every
/// install whose version another one shares.
pub fn install_labels(versions: &[String]) -> Vec<String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    versions
        .iter()
        .map(|v| {
            if versions.iter().filter(|w| *w == v).count() < 2 {
                return v.clone();
            }
            let k = seen.entry(v).or_insert(0);
            *k += 1;
            format!("{v}~{k}")
        })
        .collect()
}

/// The install's own ROCm OpenCL library, if it has one.
fn install_opencl(root: &Path) -> Option<String> {
    let lib = root.join("lib").join(ROCM_OPENCL);
    lib.exists().then(|| lib.display().to_string())
}

/// ROCm's OpenCL runtime, as its ICD files name it.
pub const ROCM_OPENCL: &str = "libamdocl64.so";

/// What `hip` says when every install has its own entry in `hip_installs`.
pub(super) fn several_installs(n: usize) -> RuntimeStatus {
    RuntimeStatus {
        api: Api::Hip,
        library: None,
        tried: Vec::new(),
        status: format!("{n} ROCm installs, each probed in a process of its own (hip_installs)"),
        runtime_version: None,
        driver_version: None,
        device_count: None,
        device_error: None,
        devices: Vec::new(),
        libraries: Vec::new(),
    }
}

/// Each install probed in a child process of its own, at once, then labelled by version.
pub(super) fn probe_installs(exe: &Path, roots: &[PathBuf], limit: Duration) -> Vec<HipInstall> {
    install_group_reaper();
    let runtimes: Vec<RuntimeStatus> = std::thread::scope(|scope| {
        let handles: Vec<_> = roots
            .iter()
            .map(|root| scope.spawn(move || run_install_child(exe, root, limit)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let mut s = several_installs(roots.len());
                    s.status = "unsupported: the thread probing this install panicked".into();
                    s
                })
            })
            .collect()
    });
    let versions: Vec<String> = runtimes.iter().map(install_version).collect();
    install_labels(&versions)
        .into_iter()
        .zip(roots.iter().zip(runtimes))
        .map(|(label, (root, runtime))| HipInstall {
            label,
            root: root.clone(),
            opencl_library: install_opencl(root),
            runtime,
        })
        .collect()
}

/// Probe one ROCm install in a child process (`exe __probe-rocm-install --rocm-path ROOT`); never
/// fails: a child that crashes, hangs or answers nothing is the install's status.
fn run_install_child(exe: &Path, root: &Path, limit: Duration) -> RuntimeStatus {
    let mut cmd = Command::new(exe);
    cmd.arg(INSTALL_CHILD_SUBCOMMAND)
        .arg("--rocm-path")
        .arg(root);
    let unusable = |why: String| {
        let mut s = several_installs(1);
        s.status = format!("unsupported: probing {}: {why}", root.display());
        s
    };
    match run_child(cmd, limit) {
        Err(e) => unusable(e),
        Ok(ChildRun {
            seen,
            timed_out,
            status,
        }) => {
            let clean_exit = !timed_out && status.as_ref().is_ok_and(ExitStatus::success);
            let answer = seen.install.clone();
            let last = seen
                .tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| format!("; last output: {}", l.trim()))
                .unwrap_or_default();
            let ended = match (&status, timed_out) {
                (_, true) => format!("hung (no exit within {} s)", limit.as_secs_f64()),
                (Ok(st), false) => crate::child::describe(*st),
                (Err(e), false) => format!("{e:#}"),
            };
            match answer {
                Some(runtime) if clean_exit => *runtime,
                // What it answered stands; how its process then ended is said beside it.
                Some(mut runtime) => {
                    runtime.status =
                        format!("{}; the probe process then {ended}{last}", runtime.status);
                    *runtime
                }
                None => {
                    let state = seen.classify(timed_out, status, limit).state;
                    unusable(format!("{state}{last}"))
                }
            }
        }
    }
}

/// The hidden `clhip __probe-rocm-install --rocm-path ROOT` subcommand: probes that install's
/// HIP alone and answers with one protocol line.
pub fn install_child_main(root: &Path) -> anyhow::Result<()> {
    let mut send = answer_parent()?;
    let _ = send(&VendorLine::Stage(format!(
        "loading libamdhip64 from {}",
        root.display()
    )));
    send(&VendorLine::Install(Box::new(hip::probe(Some(root)))))
}
