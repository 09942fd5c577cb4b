//! The probe's records, as `clhip probe --json` writes them and runs read them back: what was
//! found of each OpenCL platform and device, each vendor library, each device runtime and
//! install, and the host. Every field added later has a serde default, so older probe files
//! still load.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::{Api, ApiError};
use crate::runtimes::opencl::{self, SvmCaps};
use crate::runtimes::runtime_status::RuntimeStatus;
use crate::runtimes::vulkan::VulkanStatus;

/// The result of one query: its value, its error, or why it was not asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Queried<T> {
    Value(T),
    Error(String),
    /// Not asked: the extension that defines the query is absent.
    Absent(String),
}

impl<T> From<Result<T, ApiError>> for Queried<T> {
    fn from(r: Result<T, ApiError>) -> Self {
        match r {
            Ok(v) => Queried::Value(v),
            Err(e) => Queried::Error(format!("{} ({})", e.name, e.code)),
        }
    }
}

impl<T: std::fmt::Debug> Queried<T> {
    pub(super) fn show(&self, f: impl Fn(&T) -> String) -> String {
        match self {
            Queried::Value(v) => f(v),
            Queried::Error(e) => format!("error: {e}"),
            Queried::Absent(why) => format!("n/a ({why})"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceProbe {
    pub label: String,
    pub platform_index: usize,
    pub device_index: usize,
    pub name: String,
    pub vendor: Queried<String>,
    pub device_version: Queried<String>,
    pub driver_version: Queried<String>,
    pub opencl_c_version: Queried<String>,
    pub svm: Queried<SvmCaps>,
    pub max_work_group_size: Queried<u64>,
    pub global_mem_bytes: Queried<u64>,
    pub max_alloc_bytes: Queried<u64>,
    pub interop_extensions: BTreeMap<String, bool>,
    pub external_memory_import_handle_types: Queried<Vec<String>>,
    pub semaphore_types: Queried<Vec<String>>,
    pub semaphore_import_handle_types: Queried<Vec<String>>,
    pub semaphore_export_handle_types: Queried<Vec<String>>,
    pub uuid: Queried<String>,
    /// `domain:bus:device.function`, from whichever query the device has.
    pub pci_bus_id: Queried<String>,
    pub pci_bus_id_source: String,
    pub extensions: Queried<Vec<String>>,
    /// The vendor library (ICD) the device came from, as listed in `OCL_ICD_FILENAMES` or its
    /// `.icd` file; a worker loads only this one ([`Probe::icd_env`]). `None` in a probe that
    /// loaded every vendor in one process, and in probe files older than this field.
    #[serde(default)]
    pub icd_library: Option<String>,
    /// The device's label in a process that loads only `icd_library` (under [`Probe::icd_env`]),
    /// where families are counted within that vendor alone: `pocl0` for a device the probe
    /// calls `pocl1` because another PoCL vendor came first. `None` where `icd_library` is.
    #[serde(default)]
    pub icd_label: Option<String>,
    /// `CL_DEVICE_TYPE` by name (`CPU`, `GPU`, `ACCELERATOR`, `CUSTOM`, `+` between two). `None`
    /// where the query failed, and in probe files older than this field.
    #[serde(default)]
    pub device_type: Option<String>,
}

impl DeviceProbe {
    /// Whether the device is the host's CPU (PoCL's): a case on it with the host peer uses no
    /// GPU, so no GPU driver's kernel line is its doing.
    pub fn is_cpu(&self) -> bool {
        self.device_type.as_deref() == Some("CPU")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlatformProbe {
    pub index: usize,
    pub name: Queried<String>,
    pub vendor: Queried<String>,
    pub version: Queried<String>,
    pub devices: Vec<DeviceProbe>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Probe {
    /// `ok`, or why no platform could be listed (loader missing, no ICD).
    pub opencl_status: String,
    pub platforms: Vec<PlatformProbe>,
    /// Every OpenCL vendor library probed, in its own process, with what became of it. Empty
    /// in a probe that loaded every vendor in one process, and in older probe files.
    #[serde(default)]
    pub opencl_vendors: Vec<VendorProbe>,
    /// HIP as found: the one install (`--rocm-path`, else the default search). With several
    /// installs, only a line saying so: each is in `hip_installs`.
    pub hip: RuntimeStatus,
    /// With two or more `--rocm-path`: each install in the order given, with its label.
    /// Empty with one install or none (and in older probe files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hip_installs: Vec<HipInstall>,
    pub cuda: RuntimeStatus,
    /// The Vulkan broker's view: loader, instance, and each physical device with its UUID and
    /// what it exports. Empty (status "") in probe files older than the broker.
    #[serde(default)]
    pub vulkan: VulkanStatus,
    pub host_cpu: String,
    pub os_kernel: String,
    pub kernel_modules: Vec<(String, String)>,
}

/// One of several ROCm installs of a run (`--rocm-path A --rocm-path B`): a participant of its
/// own, `hip@<label>`, probed in a process of its own and run by workers of its own. Two
/// libamdhip64 in one process would share whichever HSA runtime loaded first: the mixed install
/// the guard refuses.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HipInstall {
    /// The install's version (`6.3.2`), with `~1`, `~2` where installs share one: what case ids
    /// (`rocm0+hip@6.3.2:0/...`), matrix columns and the fingerprint call it.
    pub label: String,
    /// The directory given to `--rocm-path`, as given: what its workers load HIP from.
    pub root: PathBuf,
    /// The install's own ROCm OpenCL (`<root>/lib/libamdocl64.so`), where it has one: a worker
    /// for a pair of this install and a ROCm OpenCL device loads it in place of the registered
    /// one, so that OpenCL and HIP share this install's HSA runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opencl_library: Option<String>,
    pub runtime: RuntimeStatus,
}

impl HipInstall {
    /// `hip@6.3.2`.
    pub fn participant(&self) -> String {
        crate::model::participant(Api::Hip, &self.label)
    }
}

/// A device runtime as a participant: CUDA, HIP, or HIP from one of several installs.
#[derive(Debug, Clone, Copy)]
pub struct DeviceRuntime<'a> {
    pub api: Api,
    /// The install, when the run has several.
    pub install: Option<&'a HipInstall>,
    pub status: &'a RuntimeStatus,
}

impl DeviceRuntime<'_> {
    /// `cuda`, `hip`, `hip@6.3.2`.
    pub fn name(&self) -> String {
        self.install
            .map_or_else(|| self.api.name().to_string(), HipInstall::participant)
    }

    /// How case ids spell its device `ordinal`: `hip0`, `hip@6.3.2:0`.
    pub fn device_label(&self, ordinal: usize) -> String {
        match self.install {
            Some(i) => format!("{}:{ordinal}", i.participant()),
            None => format!("{}{ordinal}", self.api.name()),
        }
    }
}

/// `clhip probe`'s exit status when it printed all it found and a vendor broke in it.
pub const BROKEN_VENDOR_EXIT: u8 = 1;

/// What became of one OpenCL vendor library's probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VendorProbe {
    /// As listed: a path or a soname.
    pub library: String,
    /// `OCL_ICD_FILENAMES`, `OCL_ICD_VENDORS`, or the `.icd` file that names the library.
    pub listed_in: String,
    /// Flattened: `"state": "crashed", "signal": "SIGSEGV", "during": "in clGetPlatformIDs"`.
    #[serde(flatten)]
    pub state: VendorState,
    /// How many platforms it answered with (also counted when it then died at exit).
    pub platforms: usize,
    /// The last lines the vendor's process printed on stderr and stdout, oldest first.
    pub stderr_tail: Vec<String>,
}

/// A vendor library's probe outcome. `during` names the call in flight ("in clGetPlatformIDs").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum VendorState {
    /// Answered with at least one platform.
    Ok,
    /// Answered that it has no platform (not loadable, or no device): reported, not broken.
    NoPlatform { error: String },
    /// Killed by a signal.
    Crashed { signal: String, during: String },
    /// No answer within the time limit; its process group was killed.
    Hung { limit_s: f64, during: String },
    /// Exited without answering (a driver calling exit() inside a call).
    Exited { status: String, during: String },
    /// The probe itself failed: the child could not be started or answered garbage.
    Failed { error: String },
}

impl VendorState {
    /// Whether this is a finding against the driver (crashed, hung, exited, unreadable).
    pub fn is_broken(&self) -> bool {
        !matches!(self, VendorState::Ok | VendorState::NoPlatform { .. })
    }
}

impl std::fmt::Display for VendorState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VendorState::Ok => write!(f, "ok"),
            VendorState::NoPlatform { error } => write!(f, "no platform: {error}"),
            VendorState::Crashed { signal, during } => write!(f, "crashed: {signal} {during}"),
            VendorState::Hung { limit_s, during } => {
                write!(f, "hung: no answer within {limit_s} s {during}")
            }
            VendorState::Exited { status, during } => {
                write!(f, "exited: {status} {during}, without an answer")
            }
            VendorState::Failed { error } => write!(f, "failed: {error}"),
        }
    }
}

impl Default for VendorState {
    fn default() -> Self {
        VendorState::Failed {
            error: "not probed".into(),
        }
    }
}

impl Probe {
    /// The device runtimes as participants, in pairing order: CUDA, then HIP (each install of
    /// several, in the order given).
    pub fn device_runtimes(&self) -> Vec<DeviceRuntime<'_>> {
        let mut out = vec![DeviceRuntime {
            api: Api::Cuda,
            install: None,
            status: &self.cuda,
        }];
        if self.hip_installs.is_empty() {
            out.push(DeviceRuntime {
                api: Api::Hip,
                install: None,
                status: &self.hip,
            });
        }
        out.extend(self.hip_installs.iter().map(|i| DeviceRuntime {
            api: Api::Hip,
            install: Some(i),
            status: &i.runtime,
        }));
        out
    }

    /// The install a pair's `install` label names.
    pub fn hip_install(&self, label: &str) -> Option<&HipInstall> {
        self.hip_installs.iter().find(|i| i.label == label)
    }

    /// The OpenCL vendor libraries that crashed, hung, exited or answered garbage while being
    /// probed, one line each: library, where it was listed, what happened, its last words.
    pub fn broken_vendors(&self) -> Vec<String> {
        self.opencl_vendors
            .iter()
            .filter(|v| v.state.is_broken())
            .map(|v| {
                let mut line = format!(
                    "OpenCL vendor library {} (listed in {}): {}",
                    v.library, v.listed_in, v.state
                );
                if let Some(last) = v.stderr_tail.iter().rev().find(|l| !l.trim().is_empty()) {
                    let _ = write!(line, "; last output: {}", last.trim());
                }
                line
            })
            .collect()
    }

    /// `clhip probe`'s exit status once it has printed this: [`BROKEN_VENDOR_EXIT`] when a
    /// vendor crashed, hung, exited or answered garbage while being probed, else 0.
    pub fn exit_status(&self) -> u8 {
        if self.broken_vendors().is_empty() {
            0
        } else {
            BROKEN_VENDOR_EXIT
        }
    }

    /// The OpenCL device the run labels `label` (`nvidia0`), if the probe found it.
    pub fn cl_device(&self, label: &str) -> Option<&DeviceProbe> {
        self.platforms
            .iter()
            .flat_map(|p| &p.devices)
            .find(|d| d.label == label)
    }

    /// The environment under which a process's ICD loader loads only the vendor library that
    /// OpenCL device `opencl_label` came from, so that a broken vendor beside it cannot take
    /// the process down. `None` when the label is unknown or the probe did not record the
    /// library (a probe that loaded every vendor at once, or an older probe file).
    pub fn icd_env(&self, opencl_label: &str) -> Option<Vec<(String, String)>> {
        self.cl_device(opencl_label)?
            .icd_library
            .as_deref()
            .map(opencl::single_vendor_env)
    }
}
