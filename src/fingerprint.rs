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

/// One device of a device runtime (CUDA, HIP, the Vulkan broker's view), as discovery reports
/// it: the one record the runtime fills in, the probe file keeps and the fingerprint of a run
/// records. It lives here, below the runtimes, so that reading a report needs no runtime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// `sm_90`, `gfx908`.
    pub arch: String,
    /// 8-4-4-4-12 hex, as OpenCL's cl_khr_device_uuid prints it.
    pub uuid: String,
    /// `domain:bus:device.function`, lower-case hex.
    pub pci_bus_id: String,
    pub driver_version: String,
    pub runtime_version: String,
    /// Version of the BLAS and solver libraries actually loaded, and where from.
    pub blas: String,
    pub solver: String,
    pub compiler: String,
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
    pub devices: Vec<DeviceInfo>,
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

impl Fingerprint {
    /// The fingerprint as `key: value` lines, what expectation files match their `applies`
    /// globs against: `hip version: 6.3.42133`, `hip device 0 arch: gfx908:sramecc+:xnack-`,
    /// `opencl rocm0 driver: 3635.0 (HSA1.1,LC)`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for d in &self.opencl {
            let l = &d.label;
            out.push(format!(
                "opencl {l} platform: {} {}",
                d.platform_name, d.platform_version
            ));
            out.push(format!("opencl {l} device: {}", d.device_name));
            out.push(format!("opencl {l} version: {}", d.device_version));
            out.push(format!("opencl {l} driver: {}", d.driver_version));
        }
        for r in &self.runtimes {
            let a = &r.api;
            out.push(format!("{a} status: {}", r.status));
            if let Some(lib) = &r.library {
                out.push(format!("{a} library: {lib}"));
            }
            if let Some(v) = &r.version {
                out.push(format!("{a} version: {v}"));
            }
            for d in &r.devices {
                let k = d.ordinal;
                out.push(format!("{a} device {k} name: {}", d.name));
                out.push(format!("{a} device {k} arch: {}", d.arch));
                out.push(format!("{a} device {k} driver: {}", d.driver_version));
                for (what, v) in [
                    ("blas", &d.blas),
                    ("solver", &d.solver),
                    ("compiler", &d.compiler),
                ] {
                    if !v.is_empty() {
                        out.push(format!("{a} device {k} {what}: {v}"));
                    }
                }
            }
        }
        for (m, v) in &self.kernel_modules {
            out.push(format!("kernel module {m}: {v}"));
        }
        out.push(format!("host cpu: {}", self.host_cpu));
        out.push(format!("os kernel: {}", self.os_kernel));
        out
    }
}

#[cfg(test)]
mod tests;
