//! The OpenCL devices of the loaded ICDs, labelled by vendor family so that a label stays the
//! same across driver releases.

use std::collections::HashMap;

use opencl3::types::{cl_device_id, cl_platform_id};

use super::error::{ClResultExt, cl_error};
use super::query::{device_string, platform_string};
use crate::model::{ApiError, ClDeviceRef};

/// An OpenCL device found through the ICD loader.
#[derive(Debug, Clone)]
pub struct ClDevice {
    pub r: ClDeviceRef,
    pub platform: cl_platform_id,
    pub id: cl_device_id,
    pub platform_name: String,
    pub name: String,
}

// SAFETY: platform and device ids are opaque handles to objects that live as long as the ICD is
// loaded, and the OpenCL API is thread-safe for every query on them (OpenCL 3.0 §A.2).
unsafe impl Send for ClDevice {}
unsafe impl Sync for ClDevice {}

/// The vendor family that prefixes a device label. Derived from the platform name because that
/// is what stays the same across driver releases.
pub fn family(platform_name: &str) -> &'static str {
    let p = platform_name.to_ascii_lowercase();
    if p.contains("portable computing language") || p.contains("pocl") {
        "pocl"
    } else if p.contains("nvidia") {
        "nvidia"
    } else if p.contains("amd accelerated parallel processing") || p.contains("amd") {
        "rocm"
    } else if p.contains("rusticl") {
        "rusticl"
    } else if p.contains("clover") {
        "clover"
    } else if p.contains("intel") {
        "intel"
    } else {
        "cl"
    }
}

/// Every device of every platform, labelled `<family><index within family>`.
pub fn enumerate() -> Result<Vec<ClDevice>, ApiError> {
    let platforms = cl3::platform::get_platform_ids().call("clGetPlatformIDs")?;
    let mut per_family: HashMap<&'static str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (pi, &platform) in platforms.iter().enumerate() {
        let platform_name = platform_string(platform, cl3::platform::CL_PLATFORM_NAME)
            .unwrap_or_else(|e| format!("<{e}>"));
        let fam = family(&platform_name);
        let ids = match cl3::device::get_device_ids(platform, cl3::device::CL_DEVICE_TYPE_ALL) {
            Ok(ids) => ids,
            // A platform with no devices is not an error worth failing enumeration for.
            Err(cl3::error_codes::CL_DEVICE_NOT_FOUND) => Vec::new(),
            Err(code) => return Err(cl_error("clGetDeviceIDs", code)),
        };
        for (di, &id) in ids.iter().enumerate() {
            let k = per_family.entry(fam).or_insert(0);
            let label = format!("{fam}{k}");
            *k += 1;
            let name =
                device_string(id, cl3::device::CL_DEVICE_NAME).unwrap_or_else(|e| format!("<{e}>"));
            out.push(ClDevice {
                r: ClDeviceRef {
                    platform_index: pi,
                    device_index: di,
                    label,
                },
                platform,
                id,
                platform_name: platform_name.clone(),
                name,
            });
        }
    }
    Ok(out)
}

/// For the unit tests marked to need OpenCL (`clhip_test_opencl`, set by build.rs where an ICD
/// is installed): the first OpenCL device. An installed ICD that lists no device fails the test;
/// it is no reason to skip it.
#[cfg(test)]
pub(crate) fn unit_test_device() -> ClDevice {
    test_device().unwrap_or_else(|| {
        panic!("an OpenCL ICD was found when this was built, but no OpenCL device answers")
    })
}

/// For tests: the first OpenCL device, or `None` when no ICD answers. Under
/// `CLHIP_REQUIRE_OPENCL=1` (CI) a missing OpenCL is a test failure, not a skip, so a green run
/// cannot hide a missing install step.
pub fn test_device() -> Option<ClDevice> {
    // Enumerate once per process: test threads run in parallel, and the ICD loader's first
    // initialisation is not safe to race (ocl-icd segfaults).
    static FIRST: std::sync::OnceLock<Result<ClDevice, String>> = std::sync::OnceLock::new();
    let required = std::env::var("CLHIP_REQUIRE_OPENCL").is_ok_and(|v| v == "1");
    let first = FIRST.get_or_init(|| match enumerate() {
        Ok(devices) if !devices.is_empty() => Ok(devices[0].clone()),
        Ok(_) => Err("no OpenCL device".to_string()),
        Err(e) => Err(e.to_string()),
    });
    match first {
        Ok(d) => Some(d.clone()),
        Err(why) => {
            assert!(!required, "CLHIP_REQUIRE_OPENCL=1 but {why}");
            eprintln!("no OpenCL device for this test: {why}");
            None
        }
    }
}
