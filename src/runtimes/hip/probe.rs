//! The probe's look at a HIP install, made without a device where there is none.

use std::path::Path;

use crate::model::Api;
use crate::runtimes::locate::hip_version;
use crate::runtimes::runtime_status::{RuntimeStatus, status_line};

use super::discover::discover;
use super::ffi;
use super::install;
use super::load::install_libraries;

/// Load libamdhip64 through the HIP bindings and read what can be read without a device: the
/// file actually mapped, the HIP version and the ABI generation chosen from it, the symbols
/// that library lacks (by group: only `Core` ones take the participant) and the optional ones
/// it does not export (not a defect), the device count or the code hipGetDeviceCount refused
/// with, and hiprtc, rocBLAS, rocSOLVER and HSA as found in the same install. A second
/// libamdhip64 or libhsa-runtime64 in the process makes the status `unsupported: mixed ROCm
/// install: ...`, naming both files.
pub fn probe(rocm_path: Option<&Path>) -> RuntimeStatus {
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
    let libraries = install_libraries(&lib);
    if let Some(mixed) = install::mixed_now().or_else(|| {
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
        match discover(rocm_path) {
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
