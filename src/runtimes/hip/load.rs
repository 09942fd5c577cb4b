//! libamdhip64 and the optional libraries of its install (hiprtc, rocBLAS, rocSOLVER, HSA) as the
//! participant opens them and the probe lists them: one install per process ([`super::install`]).

use std::path::Path;

use crate::model::CaseError;
use crate::runtimes::locate::hip_version;

use super::ffi::{self, BlasFns, Group, Hip, LoadError, OptLib, RtcFns, SolverFns};

/// Open libamdhip64 and refuse, naming every absent symbol, if a core one is missing.
pub fn load(rocm_path: Option<&Path>) -> Result<Hip, CaseError> {
    let hip = Hip::load(rocm_path).map_err(|e| match e {
        LoadError::NotFound(_) => CaseError::unsupported(e.to_string()),
        LoadError::Unusable { .. } => CaseError::unsupported(e.to_string()),
    })?;
    if let Some(mixed) = super::install::foreign_hsa(&hip.install_dir) {
        return Err(CaseError::unsupported(mixed));
    }
    let core = hip.missing_in(Group::Core);
    if !core.is_empty() {
        return Err(CaseError::unsupported(format!(
            "{} (HIP {}) lacks {}",
            hip.path,
            hip_version(hip.version.raw),
            core.join(", ")
        )));
    }
    Ok(hip)
}

/// `rocBLAS 4.2.0... (path)`, or why it is unavailable (`unavailable: mixed ROCm install: ..`
/// among the reasons), each from the install of `hip`.
pub fn library_versions(hip: &Hip) -> (String, String, String) {
    let blas = match ffi::open_rocblas(hip) {
        Ok(l) => match l.fns.rocblas_get_version_string {
            Some(f) => format!("rocBLAS {} ({})", ffi::version_string(f), l.path),
            None => format!("rocBLAS ? ({} lacks rocblas_get_version_string)", l.path),
        },
        Err(e) => format!("unavailable: {e}"),
    };
    let solver = match ffi::open_rocsolver(hip) {
        Ok(l) => match l.fns.rocsolver_get_version_string {
            Some(f) => format!("rocSOLVER {} ({})", ffi::version_string(f), l.path),
            None => format!(
                "rocSOLVER ? ({} lacks rocsolver_get_version_string)",
                l.path
            ),
        },
        Err(e) => format!("unavailable: {e}"),
    };
    let compiler = match ffi::open_hiprtc(hip) {
        Ok(l) => {
            let (mut a, mut b) = (0, 0);
            match l.fns.hiprtcVersion {
                // SAFETY: live out-parameters.
                Some(f) if unsafe { f(&mut a, &mut b) } == 0 => {
                    format!("hiprtc {a}.{b} ({})", l.path)
                }
                _ => format!("hiprtc ? ({})", l.path),
            }
        }
        Err(e) => format!("unavailable: {e}"),
    };
    (blas, solver, compiler)
}

/// hiprtc, rocBLAS, rocSOLVER and the HSA runtime as found in `hip`'s install, one line each
/// (`rocBLAS: <path>` or `rocBLAS: <why not>`), for the probe. Opening loads them (their
/// initialisers need no device) and calls nothing in them.
pub fn install_libraries(hip: &Hip) -> Vec<String> {
    let line = |what: &str, r: Result<String, String>| match r {
        Ok(path) => format!("{what}: {path}"),
        Err(e) => format!("{what}: {e}"),
    };
    vec![
        line("hiprtc", ffi::open_hiprtc(hip).map(|l| l.path)),
        line("rocBLAS", ffi::open_rocblas(hip).map(|l| l.path)),
        line("rocSOLVER", ffi::open_rocsolver(hip).map(|l| l.path)),
        line("HSA", ffi::open_hsa(hip).map(|l| l.path)),
    ]
}

/// An opened library with every symbol it must have, or `unsupported` naming the library and
/// what it lacks (or why it did not open: the mixed install among them).
fn complete<T>(opened: Result<OptLib<T>, String>) -> Result<OptLib<T>, CaseError> {
    let lib = opened.map_err(CaseError::unsupported)?;
    if !lib.missing.is_empty() {
        return Err(CaseError::unsupported(format!(
            "{} lacks {}",
            lib.path,
            lib.missing.join(", ")
        )));
    }
    Ok(lib)
}

/// librocblas of `hip`'s install with every symbol checked: what the gemm cells (and, through
/// its handle, the cholesky ones) get, or `unsupported` naming the library and what it lacks,
/// or the mixed install.
pub fn open_blas(hip: &Hip) -> Result<OptLib<BlasFns>, CaseError> {
    complete(ffi::open_rocblas(hip))
}

/// libhiprtc (or libamdhip64's own hiprtc) of `hip`'s install with every symbol checked: what
/// the kernel operations need, or `unsupported` naming what is missing or the mixed install.
pub fn open_rtc(hip: &Hip) -> Result<OptLib<RtcFns>, CaseError> {
    complete(ffi::open_hiprtc(hip))
}

/// librocsolver of `hip`'s install, opened on the first cpotrf with every symbol checked.
pub fn open_solver(hip: &Hip) -> Result<OptLib<SolverFns>, CaseError> {
    complete(ffi::open_rocsolver(hip))
}
