//! Device discovery: what the probe and the fingerprint record of each HIP device, read without
//! creating anything on it.

use std::ffi::c_char;
use std::path::Path;

use crate::model::{ApiError, CaseError};
use crate::runtimes::device::{DeviceInfo, discovery_failure};
use crate::runtimes::locate::hip_version;
use crate::runtimes::text::{normalise_pci_bus_id, uuid_string as uuid_text};

use super::ffi::{self, Hip, c_buf_string};
use super::load::{library_versions, load};
use super::status::{api_error, check, lacks};

/// hipGetDeviceCount, with a refusal (hipErrorNoDevice on a machine without GPU) as
/// `Unsupported` carrying the call and its code.
pub(super) fn device_count(hip: &Hip) -> Result<usize, CaseError> {
    hip.device_count().map_err(|rc| CaseError::Unsupported {
        reason: "no HIP device".into(),
        error: Some(api_error(hip, "hipGetDeviceCount", rc, hip.path.clone())),
    })
}

/// gcnArchName through the generation's hipGetDeviceProperties (5.x) /
/// hipGetDevicePropertiesR0600 (6.0+), into a buffer larger than either struct.
fn gcn_arch_name(hip: &Hip, ordinal: i32) -> Result<String, CaseError> {
    let (symbol, offset) = hip.abi.device_props();
    let f = match symbol {
        "hipGetDeviceProperties" => hip.fns.hipGetDeviceProperties,
        _ => hip.fns.hipGetDevicePropertiesR0600,
    }
    .ok_or_else(|| lacks(hip, symbol))?;
    // u64 elements: 8-byte alignment, as the struct has.
    let mut buf = vec![0u64; ffi::DEVICE_PROP_BUFFER / 8];
    // SAFETY: the buffer is larger than every known hipDeviceProp_t layout (1472 bytes at most).
    let rc = unsafe { f(buf.as_mut_ptr().cast(), ordinal) };
    check(hip, symbol, rc).map_err(|e| CaseError::Unsupported {
        reason: "HIP device properties".into(),
        error: Some(e),
    })?;
    // SAFETY: viewing the initialised u64 buffer as bytes.
    let bytes: &[c_char] =
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), ffi::DEVICE_PROP_BUFFER) };
    Ok(c_buf_string(&bytes[offset..offset + 256]))
}

pub(super) fn describe(
    hip: &Hip,
    ordinal: usize,
    blas: &str,
    solver: &str,
    compiler: &str,
) -> Result<DeviceInfo, CaseError> {
    let dev = i32::try_from(ordinal).map_err(|_| CaseError::unsupported("ordinal too large"))?;
    let refused = |what: &str, e: ApiError| CaseError::Unsupported {
        reason: what.to_string(),
        error: Some(e),
    };
    let mut name = [0 as c_char; 256];
    let f = hip
        .fns
        .hipDeviceGetName
        .ok_or_else(|| lacks(hip, "hipDeviceGetName"))?;
    // SAFETY: the buffer's length is passed.
    check(hip, "hipDeviceGetName", unsafe {
        f(name.as_mut_ptr(), 256, dev)
    })
    .map_err(|e| refused("HIP device name", e))?;
    let mut bus = [0 as c_char; 64];
    let f = hip
        .fns
        .hipDeviceGetPCIBusId
        .ok_or_else(|| lacks(hip, "hipDeviceGetPCIBusId"))?;
    // SAFETY: the buffer's length is passed.
    check(hip, "hipDeviceGetPCIBusId", unsafe {
        f(bus.as_mut_ptr(), 64, dev)
    })
    .map_err(|e| refused("HIP PCI bus id", e))?;
    let bus = c_buf_string(&bus);
    let mut uuid = ffi::hipUUID::default();
    let f = hip
        .fns
        .hipDeviceGetUuid
        .ok_or_else(|| lacks(hip, "hipDeviceGetUuid"))?;
    // SAFETY: live out-parameter.
    check(hip, "hipDeviceGetUuid", unsafe { f(&mut uuid, dev) })
        .map_err(|e| refused("HIP device UUID", e))?;
    let uuid_bytes: Vec<u8> = uuid.bytes.iter().map(|&b| b as u8).collect();
    let driver = hip.driver_version().map(hip_version).unwrap_or_default();
    let module = std::fs::read_to_string("/sys/module/amdgpu/version").unwrap_or_default();
    Ok(DeviceInfo {
        ordinal,
        name: c_buf_string(&name),
        arch: gcn_arch_name(hip, dev)?,
        uuid: uuid_text(&uuid_bytes),
        pci_bus_id: normalise_pci_bus_id(&bus).unwrap_or(bus),
        driver_version: match module.trim() {
            "" => driver,
            m => format!("{driver} (amdgpu {m})"),
        },
        runtime_version: format!(
            "{} ({:?}, {})",
            hip_version(hip.version.raw),
            hip.abi,
            hip.path
        ),
        blas: blas.to_string(),
        solver: solver.to_string(),
        compiler: compiler.to_string(),
    })
}

/// Every HIP device with what the probe and the fingerprint record, or why none can be listed
/// (library absent, a core symbol absent, hipGetDeviceCount refused). Never panics.
pub fn discover(rocm_path: Option<&Path>) -> Result<Vec<DeviceInfo>, String> {
    let hip = load(rocm_path).map_err(discovery_failure)?;
    let count = device_count(&hip).map_err(discovery_failure)?;
    let (blas, solver, compiler) = library_versions(&hip);
    (0..count)
        .map(|i| {
            describe(&hip, i, &blas, &solver, &compiler)
                .map_err(|e| format!("device {i}: {}", discovery_failure(e)))
        })
        .collect()
}
