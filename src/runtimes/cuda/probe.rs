//! The probe's look at libcuda: its version, whether cuInit takes, and the devices.

use std::ffi::{CStr, c_char, c_int};

use libloading::Library;

use crate::model::Api;
use crate::runtimes::locate::{cuda_candidates, cuda_version, open_first};
use crate::runtimes::runtime_status::{RuntimeStatus, status_line};

use super::discover::discover;

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

/// Load libcuda and read its version and device count.
pub fn probe() -> RuntimeStatus {
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
        match discover() {
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

fn c_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: runtimes return NUL-terminated static strings.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}
