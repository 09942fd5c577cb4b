//! Device and platform queries: raw bytes for the extension queries cl3 does not type, decoded
//! strings and integers, and the device's SVM capabilities.

use opencl3::types::{cl_device_id, cl_platform_id};

use super::error::{ClResultExt, cl_error};
use crate::model::ApiError;

/// Raw bytes of a device query; the caller decodes. Used for extension queries that cl3 does
/// not type (UUID, PCI info, AMD topology, handle-type lists).
pub fn device_bytes(id: cl_device_id, param: u32) -> Result<Vec<u8>, ApiError> {
    cl3::device::get_device_data(id, param).call("clGetDeviceInfo")
}

pub fn device_string(id: cl_device_id, param: u32) -> Result<String, ApiError> {
    device_bytes(id, param).map(|b| c_string(&b))
}

pub fn device_u64(id: cl_device_id, param: u32) -> Result<u64, ApiError> {
    let b = device_bytes(id, param)?;
    Ok(match b.len() {
        1 => b[0] as u64,
        2 => u16::from_ne_bytes([b[0], b[1]]) as u64,
        4 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u64,
        n if n >= 8 => u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        n => {
            let mut e = cl_error("clGetDeviceInfo", 0);
            e.name = "UNEXPECTED_SIZE".into();
            e.detail = format!("param {param:#x} returned {n} bytes");
            return Err(e);
        }
    })
}

pub fn platform_string(id: cl_platform_id, param: u32) -> Result<String, ApiError> {
    cl3::platform::get_platform_data(id, param)
        .call("clGetPlatformInfo")
        .map(|b| c_string(&b))
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_string()
}

/// A device query answering a list of `cl_uint`s (the handle types a device imports).
pub fn device_u32s(id: cl_device_id, param: u32) -> Result<Vec<u32>, ApiError> {
    Ok(device_bytes(id, param)?
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// SVM capability bits (OpenCL 2.0+; 0 on a 1.2 device, where the query itself errors).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SvmCaps {
    pub coarse_grain_buffer: bool,
    pub fine_grain_buffer: bool,
    pub fine_grain_system: bool,
    pub atomics: bool,
}

impl SvmCaps {
    pub fn from_bits(bits: u64) -> Self {
        use cl3::device::*;
        SvmCaps {
            coarse_grain_buffer: bits & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER != 0,
            fine_grain_buffer: bits & CL_DEVICE_SVM_FINE_GRAIN_BUFFER != 0,
            fine_grain_system: bits & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM != 0,
            atomics: bits & CL_DEVICE_SVM_ATOMICS != 0,
        }
    }

    pub fn query(id: cl_device_id) -> Result<Self, ApiError> {
        device_u64(id, cl3::device::CL_DEVICE_SVM_CAPABILITIES).map(Self::from_bits)
    }
}

impl std::fmt::Display for SvmCaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yes = |b: bool| if b { "yes" } else { "no" };
        write!(
            f,
            "coarse buffer {}, fine buffer {}, fine system {}, atomics {}",
            yes(self.coarse_grain_buffer),
            yes(self.fine_grain_buffer),
            yes(self.fine_grain_system),
            yes(self.atomics)
        )
    }
}
