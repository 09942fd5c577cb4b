//! The driver fingerprint: everything a support matrix is conditional on. Validating a new ROCm
//! release is a diff of two matrices with two fingerprints.

use serde::{Deserialize, Serialize};

/// One OpenCL device as the fingerprint records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClDeviceFingerprint {
    pub label: String,
    pub platform_name: String,
    pub platform_version: String,
    pub device_name: String,
    pub device_version: String,
    pub driver_version: String,
    /// cl_khr_device_uuid, where the device has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `domain:bus:device.function`, from whichever PCI query the device has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

/// A device runtime (hip, cuda) as found, or why not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeFingerprint {
    pub api: String,
    /// `loaded`, or `unsupported: <why>`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Name, arch, UUID, PCI bus id and library versions of each device found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<crate::runtimes::device::DeviceInfo>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub opencl: Vec<ClDeviceFingerprint>,
    pub runtimes: Vec<RuntimeFingerprint>,
    /// Kernel module versions (/sys/module/{amdgpu,nvidia}/version) where present.
    pub kernel_modules: Vec<(String, String)>,
    pub host_cpu: String,
    pub os_kernel: String,
}
