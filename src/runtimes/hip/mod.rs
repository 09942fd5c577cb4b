//! The `hip` participant (AMD ROCm): libamdhip64, hiprtc, rocBLAS, rocSOLVER, loaded at run
//! time through [`ffi`].
//!
//! STATUS: loading, version/ABI gating, the symbol check, device discovery and `open`'s
//! refusal on a machine without a device are written and tested (tests/hip_no_device.rs, against
//! Debian's HIP 5.2). The device participant itself (`impl PeerRuntime` / `impl DeviceRuntime`:
//! allocations, kernels through hiprtc, rocBLAS cgemm, rocSOLVER cpotrf, sticky faults) is NOT
//! written: [`HipPeer::open`] stops after the device checks with `Unsupported` saying so, and
//! nothing here is wired into ops or pairs. Nothing in this module has run on AMD hardware.

pub mod ffi;

use std::ffi::c_char;
use std::path::Path;

use crate::model::{Api, ApiError, CaseError};
use crate::probe::uuid_string;
use crate::runtimes::cuda::normalise_pci_bus_id;
use crate::runtimes::device::DeviceInfo;
use crate::runtimes::locate::hip_version;

use ffi::{Group, Hip, LoadError, c_buf_string, hipError_t, hipSuccess};

fn api_error(hip: &Hip, call: &str, rc: hipError_t, detail: String) -> ApiError {
    ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: rc as i64,
        name: hip.error_name(rc),
        detail,
    }
}

fn check(hip: &Hip, call: &str, rc: hipError_t) -> Result<(), ApiError> {
    if rc == hipSuccess {
        Ok(())
    } else {
        Err(api_error(hip, call, rc, String::new()))
    }
}

/// A symbol this code needs that the loaded library lacks: `unsupported`, naming both.
fn lacks(hip: &Hip, name: &str) -> CaseError {
    CaseError::unsupported(format!(
        "{} (HIP {}) lacks {name}",
        hip.path,
        hip_version(hip.version.raw)
    ))
}

/// Open libamdhip64 and refuse, naming every absent symbol, if a core one is missing.
pub fn load(rocm_path: Option<&Path>) -> Result<Hip, CaseError> {
    let hip = Hip::load(rocm_path).map_err(|e| match e {
        LoadError::NotFound(_) => CaseError::unsupported(e.to_string()),
        LoadError::Unusable { .. } => CaseError::unsupported(e.to_string()),
    })?;
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

/// hipGetDeviceCount, with a refusal (hipErrorNoDevice on a machine without GPU) as
/// `Unsupported` carrying the call and its code.
fn device_count(hip: &Hip) -> Result<usize, CaseError> {
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

fn describe(
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
        uuid: uuid_string(&uuid_bytes),
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

/// `rocBLAS 4.2.0... (path)`, or why it is unavailable.
fn library_versions(rocm_path: Option<&Path>, hip: &Hip) -> (String, String, String) {
    let blas = match ffi::open_rocblas(rocm_path) {
        Ok(l) => match l.fns.rocblas_get_version_string {
            Some(f) => format!("rocBLAS {} ({})", ffi::version_string(f), l.path),
            None => format!("rocBLAS ? ({} lacks rocblas_get_version_string)", l.path),
        },
        Err(e) => format!("unavailable: {e}"),
    };
    let solver = match ffi::open_rocsolver(rocm_path) {
        Ok(l) => match l.fns.rocsolver_get_version_string {
            Some(f) => format!("rocSOLVER {} ({})", ffi::version_string(f), l.path),
            None => format!(
                "rocSOLVER ? ({} lacks rocsolver_get_version_string)",
                l.path
            ),
        },
        Err(e) => format!("unavailable: {e}"),
    };
    let compiler = match ffi::open_hiprtc(rocm_path, hip) {
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

/// Every HIP device with what the probe and the fingerprint record, or why none can be listed
/// (library absent, a core symbol absent, hipGetDeviceCount refused). Never panics.
pub fn discover(rocm_path: Option<&Path>) -> Result<Vec<DeviceInfo>, String> {
    let reason = |e: CaseError| match e {
        CaseError::Unsupported {
            error: Some(err), ..
        } => err.to_string(),
        CaseError::Unsupported { reason, .. } => reason,
        other => format!("{other:?}"),
    };
    let hip = load(rocm_path).map_err(reason)?;
    let count = device_count(&hip).map_err(reason)?;
    let (blas, solver, compiler) = library_versions(rocm_path, &hip);
    (0..count)
        .map(|i| {
            describe(&hip, i, &blas, &solver, &compiler)
                .map_err(|e| format!("device {i}: {}", reason(e)))
        })
        .collect()
}

/// One HIP device as the peer of an OpenCL device. NOT a working participant yet: see the
/// module documentation.
#[derive(Debug)]
pub struct HipPeer {
    pub info: DeviceInfo,
    pub hip: Hip,
}

impl HipPeer {
    /// Load the runtime, check the symbols and the device. On a machine without a device this
    /// is `Unsupported` naming hipGetDeviceCount and hipErrorNoDevice (100). With a device it is
    /// still `Unsupported`: the device half is not written.
    pub fn open(ordinal: usize, rocm_path: Option<&Path>) -> Result<HipPeer, CaseError> {
        let hip = load(rocm_path)?;
        let count = device_count(&hip)?;
        if ordinal >= count {
            return Err(CaseError::unsupported(format!(
                "no HIP device {ordinal} ({count} found by {})",
                hip.path
            )));
        }
        let (blas, solver, compiler) = library_versions(rocm_path, &hip);
        let info = describe(&hip, ordinal, &blas, &solver, &compiler)?;
        Err(CaseError::unsupported(format!(
            "HIP device participant not implemented yet ({} {} found, HIP {})",
            info.name,
            info.arch,
            hip_version(hip.version.raw)
        )))
    }
}
