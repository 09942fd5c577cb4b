//! Finding the device runtimes' libraries at run time. Nothing GPU-related is linked at build
//! time: one binary tests several ROCm installs side by side, and a missing library is an
//! `unsupported` cell with the list of names and paths tried, not a start-up failure.

use std::ffi::{CStr, c_char, c_int};
use std::path::{Path, PathBuf};

use libloading::Library;
use serde::{Deserialize, Serialize};

use crate::model::Api;
use crate::runtimes::device::DeviceInfo;

/// One name or path handed to dlopen, and why it did not load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub candidate: String,
    pub error: String,
}

/// What a runtime search found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimeStatus {
    pub api: Api,
    /// The candidate that loaded, if any.
    pub library: Option<String>,
    /// Every candidate that did not load, in search order.
    pub tried: Vec<Attempt>,
    /// `loaded`, or why the runtime is unusable.
    pub status: String,
    pub runtime_version: Option<String>,
    pub driver_version: Option<String>,
    pub device_count: Option<usize>,
    /// The device-count call's error, e.g. `hipErrorNoDevice (100)` on a machine without GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_error: Option<String>,
    /// What the device runtime reports per device (name, arch, UUID, PCI bus id, library
    /// versions): what pairs a CUDA device with an OpenCL one. Empty where none was found.
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    /// The runtime's companion libraries as found in its own install (ROCm: hiprtc, rocBLAS,
    /// rocSOLVER, HSA), each `name: path` or `name: why not`. Empty where not looked at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<String>,
}

impl RuntimeStatus {
    fn not_found(api: Api, tried: Vec<Attempt>) -> Self {
        let names: Vec<&str> = tried.iter().map(|a| a.candidate.as_str()).collect();
        RuntimeStatus {
            api,
            library: None,
            status: format!(
                "unsupported: library not found (tried {})",
                names.join(", ")
            ),
            tried,
            runtime_version: None,
            driver_version: None,
            device_count: None,
            device_error: None,
            devices: Vec::new(),
            libraries: Vec::new(),
        }
    }
}

/// dlopen each candidate in order; the first that loads wins.
pub fn open_first(candidates: &[String]) -> Result<(Library, String), Vec<Attempt>> {
    let mut tried = Vec::new();
    for c in candidates {
        // SAFETY: loading a vendor runtime runs its initialisers; that is the point.
        match unsafe { Library::new(c) } {
            Ok(lib) => return Ok((lib, c.clone())),
            Err(e) => tried.push(Attempt {
                candidate: c.clone(),
                error: error_chain(&e),
            }),
        }
    }
    Err(tried)
}

/// The file the loader mapped for `lib<stem>.so*`: `libcublas.so` is a symlink to something like
/// `libcublas.so.13.1.0.3`, and the real name is what a fingerprint should carry.
pub fn mapped_file(stem: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let prefix = format!("lib{stem}.so");
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .map(str::to_string)
}

/// libloading's Display says only "dlopen failed"; dlerror()'s text is in the source.
fn error_chain(e: &dyn std::error::Error) -> String {
    match e.source() {
        Some(s) => s.to_string(),
        None => e.to_string(),
    }
}

/// ROCm install roots in the order a user means them: the explicit flag, `ROCM_PATH`, then
/// `/opt/rocm` and versioned `/opt/rocm-*` (newest name last, as ls sorts them).
pub fn rocm_roots(rocm_path: Option<&Path>) -> Vec<PathBuf> {
    // An explicit install is searched alone: comparing two ROCm installs must never silently
    // test whichever one /opt/rocm happens to point at.
    if let Some(p) = rocm_path {
        return vec![p.to_path_buf()];
    }
    let mut roots = Vec::new();
    if let Some(p) = std::env::var_os("ROCM_PATH") {
        roots.push(PathBuf::from(p));
    }
    roots.push(PathBuf::from("/opt/rocm"));
    if let Ok(entries) = std::fs::read_dir("/opt") {
        let mut versioned: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rocm-"))
            })
            .collect();
        versioned.sort();
        roots.extend(versioned);
    }
    roots.dedup();
    roots
}

/// libamdhip64 candidates: sonames 7, 6, 5 under each root's lib/, then the loader path.
pub fn hip_candidates(rocm_path: Option<&Path>) -> Vec<String> {
    const SONAMES: [&str; 3] = ["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"];
    let mut out = Vec::new();
    for root in rocm_roots(rocm_path) {
        for so in SONAMES {
            out.push(root.join("lib").join(so).display().to_string());
        }
    }
    // Only the explicit path when the user named one: comparing two installs must never
    // silently fall back to whatever the loader finds first.
    if rocm_path.is_none() {
        out.extend(SONAMES.iter().map(|s| s.to_string()));
    }
    out
}

/// libcuda is the driver API and ships with the kernel driver, not the toolkit: the loader
/// path is where it lives.
pub fn cuda_candidates() -> Vec<String> {
    vec!["libcuda.so.1".into(), "libcuda.so".into()]
}

type GetIntFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type InitFn = unsafe extern "C" fn(u32) -> c_int;
type CuErrNameFn = unsafe extern "C" fn(c_int, *mut *const c_char) -> c_int;

fn get_int(lib: &Library, symbol: &str) -> Result<i32, String> {
    // SAFETY: the symbol's C signature is `int f(int*)` in hip_runtime_api.h / cuda.h.
    let f =
        unsafe { lib.get::<GetIntFn>(symbol.as_bytes()) }.map_err(|e| format!("{symbol}: {e}"))?;
    let mut v: c_int = 0;
    // SAFETY: `v` is a live out-parameter.
    let rc = unsafe { f(&mut v) };
    if rc == 0 {
        Ok(v)
    } else {
        Err(format!("{symbol} returned {rc}"))
    }
}

/// Load libamdhip64 through the HIP bindings and read what can be read without a device: the
/// file actually mapped, the HIP version and the ABI generation chosen from it, the symbols
/// that library lacks (by group: only `Core` ones take the participant) and the optional ones
/// it does not export (not a defect), the device count or the code hipGetDeviceCount refused
/// with, and hiprtc, rocBLAS, rocSOLVER and HSA as found in the same install. A second
/// libamdhip64 or libhsa-runtime64 in the process makes the status `unsupported: mixed ROCm
/// install: ...`, naming both files.
pub fn probe_hip(rocm_path: Option<&Path>) -> RuntimeStatus {
    use crate::runtimes::hip::{self, ffi};
    let lib = match ffi::Hip::load(rocm_path) {
        Ok(lib) => lib,
        Err(ffi::LoadError::NotFound(tried)) => return RuntimeStatus::not_found(Api::Hip, tried),
        Err(e @ ffi::LoadError::Unusable { .. }) => {
            let mut s = RuntimeStatus::not_found(Api::Hip, Vec::new());
            s.status = format!("unsupported: {e}");
            return s;
        }
    };
    let driver_version = lib.driver_version().map(hip_version);
    let missing = lib.missing();
    let (device_count, device_error) = match lib.device_count() {
        Ok(n) => (Some(n), None),
        Err(rc) => (
            Some(0),
            Some(format!(
                "hipGetDeviceCount returned {} ({rc})",
                lib.error_name(rc)
            )),
        ),
    };
    let mut status = status_line(device_count, &device_error, "HIP");
    let core: Vec<&str> = missing
        .iter()
        .filter(|(g, _)| *g == ffi::Group::Core)
        .map(|(_, n)| *n)
        .collect();
    if !core.is_empty() {
        status = format!("unsupported: lacks {}", core.join(", "));
    }
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|(g, n)| format!("{n} ({g:?})"))
            .collect();
        status.push_str(&format!("; missing symbols: {}", list.join(", ")));
    }
    let optional = lib.optional_absent();
    if !optional.is_empty() {
        status.push_str(&format!("; optional, absent: {}", optional.join(", ")));
    }
    let libraries = hip::install_libraries(&lib);
    if let Some(mixed) = crate::runtimes::hip::install::mixed_now().or_else(|| {
        libraries
            .iter()
            .filter_map(|l| l.split_once(": ").map(|(_, r)| r))
            .find(|r| r.starts_with("mixed ROCm install"))
            .map(str::to_string)
    }) {
        status = format!("unsupported: {mixed}; {status}");
    }
    let mut devices = Vec::new();
    let mut device_error = device_error;
    if device_count.is_some_and(|n| n > 0) && core.is_empty() {
        match hip::discover(rocm_path) {
            Ok(d) => devices = d,
            Err(e) => device_error = Some(e),
        }
    }
    RuntimeStatus {
        api: Api::Hip,
        status,
        library: Some(lib.path.clone()),
        tried: Vec::new(),
        runtime_version: Some(format!(
            "{} (ABI {:?})",
            hip_version(lib.version.raw),
            lib.abi
        )),
        driver_version,
        device_count,
        device_error,
        devices,
        libraries,
    }
}

/// Load libcuda and read its version and device count.
pub fn probe_cuda() -> RuntimeStatus {
    let (lib, path) = match open_first(&cuda_candidates()) {
        Ok(x) => x,
        Err(tried) => return RuntimeStatus::not_found(Api::Cuda, tried),
    };
    let driver_version = get_int(&lib, "cuDriverGetVersion").ok().map(cuda_version);
    let name = |rc: c_int| {
        // SAFETY: `CUresult cuGetErrorName(CUresult, const char**)`.
        let f = unsafe { lib.get::<CuErrNameFn>(b"cuGetErrorName") }.ok()?;
        let mut p: *const c_char = std::ptr::null();
        (unsafe { f(rc, &mut p) } == 0).then(|| c_str(p)).flatten()
    };
    // SAFETY: `CUresult cuInit(unsigned int)`.
    let init = unsafe { lib.get::<InitFn>(b"cuInit") }
        .map_err(|e| e.to_string())
        .map(|f| unsafe { f(0) });
    let (device_count, device_error) = match init {
        Ok(0) => count_devices(&lib, "cuDeviceGetCount", name),
        Ok(rc) => (
            None,
            Some(format!(
                "cuInit returned {} ({rc})",
                name(rc).unwrap_or_default()
            )),
        ),
        Err(e) => (None, Some(format!("cuInit: {e}"))),
    };
    // The per-device identity (UUID, PCI bus id, arch, library versions) that pairing needs.
    let mut devices = Vec::new();
    let mut device_error = device_error;
    if device_count.is_some_and(|n| n > 0) {
        match crate::runtimes::cuda::discover() {
            Ok(d) => devices = d,
            Err(e) => device_error = Some(e),
        }
    }
    RuntimeStatus {
        api: Api::Cuda,
        status: status_line(device_count, &device_error, "CUDA"),
        library: Some(path),
        tried: Vec::new(),
        runtime_version: None,
        driver_version,
        device_count,
        device_error,
        devices,
        libraries: Vec::new(),
    }
}

fn count_devices(
    lib: &Library,
    symbol: &str,
    name: impl Fn(c_int) -> Option<String>,
) -> (Option<usize>, Option<String>) {
    // SAFETY: `int f(int*)`.
    let f = match unsafe { lib.get::<GetIntFn>(symbol.as_bytes()) } {
        Ok(f) => f,
        Err(e) => return (None, Some(format!("{symbol}: {e}"))),
    };
    let mut v: c_int = 0;
    // SAFETY: live out-parameter.
    let rc = unsafe { f(&mut v) };
    if rc == 0 {
        (Some(v.max(0) as usize), None)
    } else {
        let n = name(rc).unwrap_or_else(|| "?".into());
        (Some(0), Some(format!("{symbol} returned {n} ({rc})")))
    }
}

fn status_line(count: Option<usize>, err: &Option<String>, what: &str) -> String {
    match (count, err) {
        (Some(n), None) if n > 0 => "loaded".into(),
        (_, Some(e)) => format!("unsupported: no {what} device ({e})"),
        _ => format!("unsupported: no {what} device"),
    }
}

fn c_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: runtimes return NUL-terminated static strings.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// hipRuntimeGetVersion: major*10^7 + minor*10^5 + patch (HIP_VERSION in hip_version.h).
pub fn hip_version(v: i32) -> String {
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

/// cuDriverGetVersion: 1000*major + 10*minor.
pub fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_decode_per_header_encoding() {
        assert_eq!(hip_version(50_221_153), "5.2.21153");
        assert_eq!(hip_version(60_342_134), "6.3.42134");
        assert_eq!(cuda_version(13000), "13.0");
        assert_eq!(cuda_version(12080), "12.8");
    }

    #[test]
    fn an_explicit_rocm_path_is_searched_alone_then_first() {
        let c = hip_candidates(Some(Path::new("/x/rocm-6.2")));
        assert_eq!(c[0], "/x/rocm-6.2/lib/libamdhip64.so.7");
        assert!(c.iter().all(|s| s.starts_with("/x/rocm-6.2/")), "{c:?}");
        let c = hip_candidates(None);
        assert_eq!(c.last().unwrap(), "libamdhip64.so.5");
    }

    #[test]
    fn a_missing_library_lists_every_attempt() {
        let err =
            open_first(&["/nonexistent/libfoo.so.1".into(), "libfoo-nope.so".into()]).unwrap_err();
        assert_eq!(err.len(), 2);
        let s = RuntimeStatus::not_found(Api::Cuda, err);
        assert!(
            s.status
                .contains("tried /nonexistent/libfoo.so.1, libfoo-nope.so"),
            "{}",
            s.status
        );
    }
}
