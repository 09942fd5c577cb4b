//! Discovery: every device with what the probe and the fingerprint record (name, `sm_XY`,
//! UUID, PCI bus id, and the driver and library versions), read without opening a peer.

use std::ffi::{c_char, c_int};

use cudarc::driver::sys as cu;

use super::error::{Status, api_error, call};
use super::load::{LIBCUBLAS, LIBCUDA, LIBCUSOLVER, LIBNVRTC, VendorLib, library_version};
use crate::model::{ApiError, CaseError, Phase};
use crate::runtimes::device::{DeviceInfo, discovery_failure};
use crate::runtimes::locate::cuda_version;
use crate::runtimes::text::{c_buf_string, normalise_pci_bus_id, uuid_string};

pub(super) fn attribute(dev: cu::CUdevice, attr: cu::CUdevice_attribute) -> Result<i32, ApiError> {
    let mut v: c_int = 0;
    // SAFETY: live out-parameter; `dev` came from cuDeviceGet.
    unsafe { call!(cu::cuDeviceGetAttribute(&mut v, attr, dev), "{attr:?}") }?;
    Ok(v)
}

/// cuDeviceGetUuid_v2 where the driver has it (CUDA 11.4+; under MIG it names the instance),
/// else cuDeviceGetUuid. Resolved through our own handle: cudarc's 13.0 bindings carry only
/// `_v2`, and a missing symbol must not panic.
fn device_uuid(driver: &VendorLib, dev: cu::CUdevice) -> Result<String, ApiError> {
    type UuidFn = unsafe extern "C" fn(*mut cu::CUuuid, cu::CUdevice) -> cu::CUresult;
    for name in ["cuDeviceGetUuid_v2", "cuDeviceGetUuid"] {
        // SAFETY: both are `CUresult f(CUuuid*, CUdevice)` in cuda.h.
        if let Ok(f) = unsafe { driver.lib.get::<UuidFn>(name.as_bytes()) } {
            let mut u = cu::CUuuid { bytes: [0; 16] };
            // SAFETY: live out-parameter.
            unsafe { f(&mut u, dev) }.check(name, String::new)?;
            let bytes: Vec<u8> = u.bytes.iter().map(|&b| b as u8).collect();
            return Ok(uuid_string(&bytes));
        }
    }
    Err(api_error(
        "cuDeviceGetUuid",
        0,
        "SYMBOL_NOT_FOUND".into(),
        driver.path.clone(),
    ))
}

/// `13.0 (nvidia 580.159.04)`: the driver API version and, where readable, the kernel
/// module's, which is what a driver engineer calls the driver version.
fn driver_version() -> Result<String, ApiError> {
    let mut v: c_int = 0;
    // SAFETY: live out-parameter.
    unsafe { call!(cu::cuDriverGetVersion(&mut v)) }?;
    let module = std::fs::read_to_string("/sys/module/nvidia/version").unwrap_or_default();
    Ok(match module.trim() {
        "" => cuda_version(v),
        m => format!("{} (nvidia {m})", cuda_version(v)),
    })
}

/// What is the same for every device: read once per discovery.
pub(super) struct Versions {
    driver: String,
    compiler: String,
    blas: String,
    solver: String,
}

impl Versions {
    pub(super) fn read() -> Result<Versions, ApiError> {
        Ok(Versions {
            driver: driver_version()?,
            compiler: library_version(&LIBNVRTC, "NVRTC"),
            blas: library_version(&LIBCUBLAS, "cuBLAS"),
            solver: library_version(&LIBCUSOLVER, "cuSOLVER"),
        })
    }

    /// What a worker's peer needs: the driver, and NVRTC for the kernel cache's key. Not
    /// cuBLAS and cuSOLVER, whose versions only the probe reports: loading them to ask costs
    /// 100 ms per worker on an H200, paid again after every crash or fault.
    pub(super) fn read_for_peer() -> Result<Versions, ApiError> {
        let not_read = "not read by a worker (see the probe)".to_string();
        Ok(Versions {
            driver: driver_version()?,
            compiler: library_version(&LIBNVRTC, "NVRTC"),
            blas: not_read.clone(),
            solver: not_read,
        })
    }
}

/// cuInit(0) and the device count. An error here (no device, a driver/library mismatch, a
/// stub libcuda) is the platform refusing: `unsupported` with the call and its code.
pub(super) fn init_driver() -> Result<usize, CaseError> {
    // SAFETY: plain call; the caller opened libcuda with its symbols checked.
    unsafe { call!(cu::cuInit(0)) }.refused("CUDA driver did not initialise")?;
    let mut n: c_int = 0;
    // SAFETY: live out-parameter.
    unsafe { call!(cu::cuDeviceGetCount(&mut n)) }.refused("CUDA devices could not be counted")?;
    Ok(n.max(0) as usize)
}

pub(super) fn describe(
    driver: &VendorLib,
    ordinal: usize,
    versions: &Versions,
) -> Result<(cu::CUdevice, DeviceInfo), ApiError> {
    let mut dev: cu::CUdevice = 0;
    // SAFETY: live out-parameter.
    unsafe {
        call!(
            cu::cuDeviceGet(&mut dev, ordinal as c_int),
            "ordinal {ordinal}"
        )
    }?;
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer's length is passed.
    unsafe { call!(cu::cuDeviceGetName(name.as_mut_ptr(), 256, dev)) }?;
    let mut bus = [0 as c_char; 64];
    // SAFETY: the buffer's length is passed.
    unsafe { call!(cu::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, dev)) }?;
    let bus = c_buf_string(&bus);
    use cu::CUdevice_attribute as A;
    let major = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let info = DeviceInfo {
        ordinal,
        name: c_buf_string(&name),
        arch: format!("sm_{major}{minor}"),
        uuid: device_uuid(driver, dev)?,
        pci_bus_id: normalise_pci_bus_id(&bus).unwrap_or(bus),
        driver_version: versions.driver.clone(),
        // No part of the CUDA runtime (libcudart) is used: HIP-on-NVIDIA compiles to the
        // driver API; the compiler, BLAS and solver versions say the rest.
        runtime_version: String::new(),
        blas: versions.blas.clone(),
        solver: versions.solver.clone(),
        compiler: versions.compiler.clone(),
    };
    Ok((dev, info))
}

/// Every CUDA device with what the probe and the fingerprint record. `Err` says why none can
/// be listed (library absent, cuInit refused, a query failed). Never panics.
pub fn discover() -> Result<Vec<DeviceInfo>, String> {
    let driver = VendorLib::open(&LIBCUDA).map_err(discovery_failure)?;
    let count = init_driver().map_err(discovery_failure)?;
    let versions = Versions::read().map_err(|e| e.to_string())?;
    (0..count)
        .map(|i| {
            describe(&driver, i, &versions)
                .map(|(_, info)| info)
                .map_err(|e| format!("device {i}: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_bus_ids_normalise_to_opencl_form() {
        assert_eq!(
            normalise_pci_bus_id("0000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(
            normalise_pci_bus_id("00000000:19:00.0").as_deref(),
            Some("0000:19:00.0")
        );
        assert_eq!(normalise_pci_bus_id("garbage"), None);
    }
}
