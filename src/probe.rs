//! `clhip probe`: everything interop depends on, per OpenCL platform and device, plus what was
//! found of each device runtime. A query that errors is shown with its error name and the
//! device is still listed: a broken query is itself a finding.
//!
//! The CLI probes each OpenCL vendor library (ICD) in a child process of its own
//! ([`probe_isolating_vendors`]), under a time limit: a driver that crashes, hangs or exits
//! while its platforms are listed becomes a vendor row saying so, and every other vendor is
//! probed as usual.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use serde::{Deserialize, Serialize};

use crate::child::{GroupChild, Line};
use crate::fingerprint::{ClDeviceFingerprint, DeviceFingerprint, Fingerprint, RuntimeFingerprint};
use crate::model::{Api, ApiError};
use crate::runtimes::device::DeviceInfo;
use crate::runtimes::opencl::{self, SvmCaps, VendorLibrary, types::cl_device_id};
use crate::runtimes::runtime_status::RuntimeStatus;
use crate::runtimes::vulkan::{self, VulkanStatus};
use crate::runtimes::{cuda, hip};

/// How long one OpenCL vendor library may take to list its platforms and devices before it is
/// reported as hung and its process group killed. Generous: a GPU driver's first
/// initialisation (firmware load, JIT cache) takes seconds, a hung one takes forever.
pub const VENDOR_PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Overrides [`VENDOR_PROBE_TIMEOUT`], in seconds (tests use a short limit).
pub const VENDOR_TIMEOUT_ENV: &str = "CLHIP_PROBE_VENDOR_TIMEOUT_S";

/// The hidden subcommand that probes the one vendor library its environment names.
pub const VENDOR_CHILD_SUBCOMMAND: &str = "__probe-opencl-vendor";

/// The hidden subcommand that probes the one ROCm install its `--rocm-path` names.
pub const INSTALL_CHILD_SUBCOMMAND: &str = "__probe-rocm-install";

/// Lines of a vendor child's stderr kept for its row, and the length each is cut to.
const STDERR_TAIL_LINES: usize = 8;
const STDERR_LINE_CHARS: usize = 240;

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
    fn show(&self, f: impl Fn(&T) -> String) -> String {
        match self {
            Queried::Value(v) => f(v),
            Queried::Error(e) => format!("error: {e}"),
            Queried::Absent(why) => format!("n/a ({why})"),
        }
    }
}

/// The extensions interop depends on, reported present or absent for every device.
pub const INTEROP_EXTENSIONS: &[&str] = &[
    "cl_khr_external_memory",
    "cl_khr_external_memory_opaque_fd",
    "cl_khr_external_memory_dma_buf",
    "cl_khr_external_semaphore",
    "cl_khr_external_semaphore_opaque_fd",
    "cl_khr_external_semaphore_sync_fd",
    "cl_khr_semaphore",
    "cl_khr_device_uuid",
    "cl_khr_pci_bus_info",
    "cl_amd_device_attribute_query",
    "cl_nv_device_attribute_query",
];

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

/// What tells an install apart: the ROCm release its libamdhip64's file name carries
/// (`libamdhip64.so.6.3.60302`: ROCm 6.3.2, as ROCm's packages name it), else the HIP version
/// hipRuntimeGetVersion gave (`5.2.21153`; Debian names its file after that), else `unknown`.
pub fn install_version(runtime: &RuntimeStatus) -> String {
    let from_file = runtime.library.as_deref().and_then(|lib| {
        let name = Path::new(lib).file_name()?.to_str()?;
        let version = name.strip_prefix("libamdhip64.so.")?;
        let parts: Vec<u32> = version
            .split('.')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // ROCM_VERSION encoding (rocm_version.h): major*10000 + minor*100 + patch, whose major
        // and minor must be the file's own: anything else is not that encoding.
        let [major, minor, encoded] = parts[..] else {
            return None;
        };
        (encoded / 10_000 == major && (encoded / 100) % 100 == minor)
            .then(|| format!("{major}.{minor}.{}", encoded % 100))
    });
    from_file
        .or_else(|| {
            let v = runtime
                .runtime_version
                .as_deref()?
                .split_whitespace()
                .next()?;
            v.chars()
                .all(|c| c.is_ascii_digit() || c == '.')
                .then(|| v.to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Labels for installs of these versions, in order: the version, with `~1`, `~2`, ... on every
/// install whose version another one shares.
pub fn install_labels(versions: &[String]) -> Vec<String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    versions
        .iter()
        .map(|v| {
            if versions.iter().filter(|w| *w == v).count() < 2 {
                return v.clone();
            }
            let k = seen.entry(v).or_insert(0);
            *k += 1;
            format!("{v}~{k}")
        })
        .collect()
}

/// The install's own ROCm OpenCL library, if it has one.
fn install_opencl(root: &Path) -> Option<String> {
    let lib = root.join("lib").join(ROCM_OPENCL);
    lib.exists().then(|| lib.display().to_string())
}

/// ROCm's OpenCL runtime, as its ICD files name it.
pub const ROCM_OPENCL: &str = "libamdocl64.so";

fn s(id: cl_device_id, p: u32) -> Queried<String> {
    opencl::device_string(id, p).into()
}

fn u(id: cl_device_id, p: u32) -> Queried<u64> {
    opencl::device_u64(id, p).into()
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Names of cl_khr_external_memory handle types (cl_ext.h).
pub fn memory_handle_name(t: u32) -> String {
    match t {
        0x2060 => "OPAQUE_FD".into(),
        0x2061 => "OPAQUE_WIN32".into(),
        0x2062 => "OPAQUE_WIN32_KMT".into(),
        0x2063 => "D3D11_TEXTURE".into(),
        0x2064 => "D3D11_TEXTURE_KMT".into(),
        0x2065 => "D3D12_HEAP".into(),
        0x2066 => "D3D12_RESOURCE".into(),
        0x2067 => "DMA_BUF".into(),
        0x2069 => "OPAQUE_WIN32_NAME".into(),
        0x2070 => "ANDROID_HARDWARE_BUFFER".into(),
        t => format!("{t:#x}"),
    }
}

/// Names of cl_khr_external_semaphore handle types (cl_ext.h).
pub fn semaphore_handle_name(t: u32) -> String {
    match t {
        0x2055 => "OPAQUE_FD".into(),
        0x2056 => "OPAQUE_WIN32".into(),
        0x2057 => "OPAQUE_WIN32_KMT".into(),
        0x2058 => "SYNC_FD".into(),
        0x2059 => "D3D12_FENCE".into(),
        0x2068 => "OPAQUE_WIN32_NAME".into(),
        t => format!("{t:#x}"),
    }
}

fn handle_list(
    id: cl_device_id,
    param: u32,
    ext: &str,
    has: &dyn Fn(&str) -> bool,
    name: fn(u32) -> String,
) -> Queried<Vec<String>> {
    if !has(ext) {
        return Queried::Absent(format!("no {ext}"));
    }
    opencl::device_bytes(id, param)
        .map(|b| u32s(&b).into_iter().filter(|&t| t != 0).map(name).collect())
        .into()
}

/// PCI location from the KHR query, AMD's topology or NVIDIA's attributes, whichever exists.
fn pci_bus_id(id: cl_device_id, has: &dyn Fn(&str) -> bool) -> (Queried<String>, String) {
    if has("cl_khr_pci_bus_info") {
        let q = opencl::device_bytes(id, 0x410F).and_then(|b| {
            let v = u32s(&b);
            if v.len() >= 4 {
                Ok(format!("{:04x}:{:02x}:{:02x}.{:x}", v[0], v[1], v[2], v[3]))
            } else {
                Err(size_error(b.len()))
            }
        });
        return (q.into(), "CL_DEVICE_PCI_BUS_INFO_KHR".into());
    }
    if has("cl_amd_device_attribute_query") {
        // cl_device_topology_amd: { cl_uint type; char unused[17]; char bus, device, function }
        // with type 1 = PCIe (cl_ext.h). No domain in this query.
        let q = opencl::device_bytes(id, 0x4037).and_then(|b| {
            if b.len() >= 24 && u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) == 1 {
                Ok(format!("0000:{:02x}:{:02x}.{:x}", b[21], b[22], b[23]))
            } else {
                Err(size_error(b.len()))
            }
        });
        return (q.into(), "CL_DEVICE_TOPOLOGY_AMD".into());
    }
    if has("cl_nv_device_attribute_query") {
        let bus = opencl::device_u64(id, 0x4008);
        let slot = opencl::device_u64(id, 0x4009);
        // CL_DEVICE_PCI_DOMAIN_ID_NV is newer than the extension; absent means domain 0.
        let domain = opencl::device_u64(id, 0x400A).unwrap_or(0);
        let q = bus.and_then(|bus| {
            slot.map(|slot| format!("{domain:04x}:{bus:02x}:{:02x}.{:x}", slot >> 3, slot & 7))
        });
        return (q.into(), "CL_DEVICE_PCI_BUS_ID_NV".into());
    }
    (
        Queried::Absent("no PCI query extension".into()),
        String::new(),
    )
}

fn size_error(n: usize) -> ApiError {
    let mut e = opencl::cl_error("clGetDeviceInfo", 0);
    e.name = "UNEXPECTED_SIZE".into();
    e.code = n as i64;
    e
}

fn probe_device(d: &opencl::ClDevice) -> DeviceProbe {
    use cl3::device::*;
    let id = d.id;
    let extensions: Queried<Vec<String>> = opencl::device_string(id, CL_DEVICE_EXTENSIONS)
        .map(|e| e.split_whitespace().map(str::to_string).collect())
        .into();
    let ext_list = match &extensions {
        Queried::Value(v) => v.clone(),
        _ => Vec::new(),
    };
    let has = |e: &str| ext_list.iter().any(|x| x == e);
    let (pci, pci_source) = pci_bus_id(id, &has);
    DeviceProbe {
        label: d.r.label.clone(),
        platform_index: d.r.platform_index,
        device_index: d.r.device_index,
        name: d.name.clone(),
        vendor: s(id, CL_DEVICE_VENDOR),
        device_version: s(id, CL_DEVICE_VERSION),
        driver_version: s(id, CL_DRIVER_VERSION),
        opencl_c_version: s(id, CL_DEVICE_OPENCL_C_VERSION),
        svm: SvmCaps::query(id).into(),
        max_work_group_size: u(id, CL_DEVICE_MAX_WORK_GROUP_SIZE),
        global_mem_bytes: u(id, CL_DEVICE_GLOBAL_MEM_SIZE),
        max_alloc_bytes: u(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE),
        interop_extensions: INTEROP_EXTENSIONS
            .iter()
            .map(|e| (e.to_string(), has(e)))
            .collect(),
        external_memory_import_handle_types: handle_list(
            id,
            0x204F,
            "cl_khr_external_memory",
            &has,
            memory_handle_name,
        ),
        semaphore_types: if has("cl_khr_semaphore") {
            opencl::device_bytes(id, 0x204C)
                .map(|b| {
                    u32s(&b)
                        .into_iter()
                        .map(|t| {
                            if t == 1 {
                                "BINARY".into()
                            } else {
                                format!("{t:#x}")
                            }
                        })
                        .collect()
                })
                .into()
        } else {
            Queried::Absent("no cl_khr_semaphore".into())
        },
        semaphore_import_handle_types: handle_list(
            id,
            0x204D,
            "cl_khr_external_semaphore",
            &has,
            semaphore_handle_name,
        ),
        semaphore_export_handle_types: handle_list(
            id,
            0x204E,
            "cl_khr_external_semaphore",
            &has,
            semaphore_handle_name,
        ),
        uuid: if has("cl_khr_device_uuid") {
            opencl::device_bytes(id, 0x106A)
                .map(|b| uuid_string(&b))
                .into()
        } else {
            Queried::Absent("no cl_khr_device_uuid".into())
        },
        pci_bus_id: pci,
        pci_bus_id_source: pci_source,
        extensions,
        icd_library: None,
        icd_label: None,
    }
}

pub use crate::runtimes::text::uuid_string;

/// Probe everything in this process, OpenCL through whichever vendors the loader finds. Never
/// fails: what cannot be found is reported as such. A vendor that crashes or hangs takes this
/// process with it: the CLI uses [`probe_isolating_vendors`]; this is for tests.
pub fn probe(rocm_path: Option<&Path>) -> Probe {
    let (opencl_status, platforms) = probe_opencl(&mut |_| {}, false);
    Probe {
        opencl_status,
        platforms,
        opencl_vendors: Vec::new(),
        ..probe_rest(hip::probe(rocm_path), Vec::new())
    }
}

/// Probe everything, each OpenCL vendor library in a child process of its own (`exe
/// __probe-opencl-vendor`, under [`VENDOR_PROBE_TIMEOUT`]) that loads only that library.
/// Device labels count each family over all vendors in order, as one process loading every
/// vendor would. CUDA, and HIP of one install, are probed in this process; with several
/// `rocm_paths`, each install is probed in a child of its own (`exe __probe-rocm-install`).
pub fn probe_isolating_vendors(exe: &Path, rocm_paths: &[PathBuf]) -> Probe {
    let limit = vendor_timeout();
    let vendors = opencl::vendor_libraries();
    install_group_reaper();
    // At once: one hung vendor costs one time limit, not one per vendor after it.
    let results: Vec<VendorResult> = std::thread::scope(|scope| {
        let handles: Vec<_> = vendors
            .iter()
            .map(|v| scope.spawn(move || run_vendor_child(exe, v, limit)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| VendorResult {
                    state: VendorState::Failed {
                        error: "the thread probing this vendor panicked".into(),
                    },
                    ..VendorResult::default()
                })
            })
            .collect()
    });
    let (opencl_status, platforms, opencl_vendors) = merge_vendors(&vendors, results);
    let (hip, hip_installs) = match rocm_paths {
        [] => (hip::probe(None), Vec::new()),
        [one] => (hip::probe(Some(one)), Vec::new()),
        several => (
            several_installs(several.len()),
            probe_installs(exe, several, limit),
        ),
    };
    Probe {
        opencl_status,
        platforms,
        opencl_vendors,
        ..probe_rest(hip, hip_installs)
    }
}

/// What `hip` says when every install has its own entry in `hip_installs`.
fn several_installs(n: usize) -> RuntimeStatus {
    RuntimeStatus {
        api: Api::Hip,
        library: None,
        tried: Vec::new(),
        status: format!("{n} ROCm installs, each probed in a process of its own (hip_installs)"),
        runtime_version: None,
        driver_version: None,
        device_count: None,
        device_error: None,
        devices: Vec::new(),
        libraries: Vec::new(),
    }
}

/// Each install probed in a child process of its own, at once, then labelled by version.
fn probe_installs(exe: &Path, roots: &[PathBuf], limit: Duration) -> Vec<HipInstall> {
    install_group_reaper();
    let runtimes: Vec<RuntimeStatus> = std::thread::scope(|scope| {
        let handles: Vec<_> = roots
            .iter()
            .map(|root| scope.spawn(move || run_install_child(exe, root, limit)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let mut s = several_installs(roots.len());
                    s.status = "unsupported: the thread probing this install panicked".into();
                    s
                })
            })
            .collect()
    });
    let versions: Vec<String> = runtimes.iter().map(install_version).collect();
    install_labels(&versions)
        .into_iter()
        .zip(roots.iter().zip(runtimes))
        .map(|(label, (root, runtime))| HipInstall {
            label,
            root: root.clone(),
            opencl_library: install_opencl(root),
            runtime,
        })
        .collect()
}

/// Probe one ROCm install in a child process (`exe __probe-rocm-install --rocm-path ROOT`); never
/// fails: a child that crashes, hangs or answers nothing is the install's status.
fn run_install_child(exe: &Path, root: &Path, limit: Duration) -> RuntimeStatus {
    let mut cmd = Command::new(exe);
    cmd.arg(INSTALL_CHILD_SUBCOMMAND)
        .arg("--rocm-path")
        .arg(root);
    let unusable = |why: String| {
        let mut s = several_installs(1);
        s.status = format!("unsupported: probing {}: {why}", root.display());
        s
    };
    match run_child(cmd, limit) {
        Err(e) => unusable(e),
        Ok(ChildRun {
            seen,
            timed_out,
            status,
        }) => {
            let clean_exit = !timed_out && status.as_ref().is_ok_and(ExitStatus::success);
            let answer = seen.install.clone();
            let last = seen
                .tail
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| format!("; last output: {}", l.trim()))
                .unwrap_or_default();
            let ended = match (&status, timed_out) {
                (_, true) => format!("hung (no exit within {} s)", limit.as_secs_f64()),
                (Ok(st), false) => crate::child::describe(*st),
                (Err(e), false) => format!("{e:#}"),
            };
            match answer {
                Some(runtime) if clean_exit => *runtime,
                // What it answered stands; how its process then ended is said beside it.
                Some(mut runtime) => {
                    runtime.status =
                        format!("{}; the probe process then {ended}{last}", runtime.status);
                    *runtime
                }
                None => {
                    let state = seen.classify(timed_out, status, limit).state;
                    unusable(format!("{state}{last}"))
                }
            }
        }
    }
}

/// The hidden `clhip __probe-rocm-install --rocm-path ROOT` subcommand: probes that install's
/// HIP alone and answers with one protocol line.
pub fn install_child_main(root: &Path) -> anyhow::Result<()> {
    crate::child::die_with_parent("probe");
    let mut protocol = crate::child::take_stdout_for_protocol()?;
    let mut send = |line: &VendorLine| -> anyhow::Result<()> {
        protocol
            .write_all(crate::protocol::line_of(line)?.as_bytes())
            .and_then(|()| protocol.flush())
            .context("writing a protocol line to the parent")
    };
    let _ = send(&VendorLine::Stage(format!(
        "loading libamdhip64 from {}",
        root.display()
    )));
    send(&VendorLine::Install(Box::new(hip::probe(Some(root)))))
}

/// Everything but OpenCL, around HIP as probed.
fn probe_rest(hip: RuntimeStatus, hip_installs: Vec<HipInstall>) -> Probe {
    Probe {
        opencl_status: String::new(),
        platforms: Vec::new(),
        opencl_vendors: Vec::new(),
        hip,
        hip_installs,
        cuda: cuda::probe(),
        vulkan: vulkan::probe(),
        host_cpu: host_cpu(),
        os_kernel: read_trim("/proc/sys/kernel/osrelease"),
        kernel_modules: kernel_modules(),
    }
}

/// `clhip probe`'s exit status when it printed all it found and a vendor broke in it.
pub const BROKEN_VENDOR_EXIT: u8 = 1;

/// Probe from a child process (`exe probe --json`). The harness's parent process never loads a
/// GPU driver: a driver that crashes while being enumerated must not take the run with it, and
/// a driver that lets one process at a time hold the GPU (exclusive compute mode) must not be
/// held by the parent while the workers need it. A probe that exits [`BROKEN_VENDOR_EXIT`]
/// has still answered; the broken vendors are in its answer.
pub fn probe_in_child(exe: &Path, rocm_paths: &[PathBuf]) -> anyhow::Result<Probe> {
    let mut cmd = Command::new(exe);
    cmd.args(["probe", "--json"]);
    for p in rocm_paths {
        cmd.arg("--rocm-path").arg(p);
    }
    // SIGTERM, not SIGKILL: the probe process then kills its vendor children's process groups
    // before it dies.
    crate::child::dies_with_parent(&mut cmd, Signal::SIGTERM);
    let out = cmd
        .output()
        .with_context(|| format!("starting {} probe", exe.display()))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let err = match err.trim() {
        "" => "it printed nothing on stderr",
        e => e,
    };
    let broken_vendor_exit = out.status.code() == Some(BROKEN_VENDOR_EXIT.into());
    if !out.status.success() && !broken_vendor_exit {
        anyhow::bail!("the probe process failed ({}): {err}", out.status);
    }
    let probe: Probe =
        serde_json::from_slice(&out.stdout).context("reading the probe process's JSON")?;
    if broken_vendor_exit && probe.broken_vendors().is_empty() {
        anyhow::bail!(
            "the probe process failed ({}), naming no broken vendor: {err}",
            out.status
        );
    }
    Ok(probe)
}

/// The platforms of whichever vendors the loader loads in this process. `stage` hears each
/// call before it is made, so a parent watching a vendor child can name the call it died in.
fn probe_opencl(stage: &mut dyn FnMut(&str), one_vendor: bool) -> (String, Vec<PlatformProbe>) {
    stage("clGetPlatformIDs");
    let platforms = match cl3::platform::get_platform_ids() {
        Ok(p) => p,
        Err(code) => {
            let e = opencl::cl_error("clGetPlatformIDs", code);
            let hint = if code == cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED {
                " (no OpenCL ICD loader: install ocl-icd-libopencl1 and an ICD, e.g. pocl-opencl-icd)"
            } else if code == -1001 && one_vendor {
                " (the loader could not load this library, or it has no platform)"
            } else if code == -1001 {
                " (the loader found no ICD: check /etc/OpenCL/vendors or OCL_ICD_VENDORS)"
            } else {
                ""
            };
            return (format!("unsupported: {e}{hint}"), Vec::new());
        }
    };
    stage("clGetDeviceIDs");
    let devices = opencl::enumerate().unwrap_or_default();
    let mut out = Vec::new();
    for (i, &p) in platforms.iter().enumerate() {
        use cl3::platform::*;
        stage("clGetPlatformInfo");
        let ps = |param| -> Queried<String> { opencl::platform_string(p, param).into() };
        let mut platform = PlatformProbe {
            index: i,
            name: ps(CL_PLATFORM_NAME),
            vendor: ps(CL_PLATFORM_VENDOR),
            version: ps(CL_PLATFORM_VERSION),
            devices: Vec::new(),
        };
        for d in devices.iter().filter(|d| d.r.platform_index == i) {
            stage(&format!("clGetDeviceInfo on {}", d.r.label));
            platform.devices.push(probe_device(d));
        }
        out.push(platform);
    }
    ("ok".into(), out)
}

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

/// One protocol line of a vendor child, after [`crate::protocol::PROTOCOL_PREFIX`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum VendorLine {
    /// The call about to be made.
    Stage(String),
    Answer {
        opencl_status: String,
        platforms: Vec<PlatformProbe>,
    },
    /// A ROCm install child's answer.
    Install(Box<RuntimeStatus>),
}

#[derive(Debug, Default)]
struct VendorResult {
    state: VendorState,
    platforms: Vec<PlatformProbe>,
    stderr_tail: Vec<String>,
}

impl Default for VendorState {
    fn default() -> Self {
        VendorState::Failed {
            error: "not probed".into(),
        }
    }
}

fn vendor_timeout() -> Duration {
    std::env::var(VENDOR_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        // try_: a limit too large for a Duration (1e300) falls back to the default, never panics.
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(VENDOR_PROBE_TIMEOUT)
}

/// The hidden `clhip __probe-opencl-vendor` subcommand: probes whichever vendor library its
/// environment lets the loader see (the parent sets [`opencl::single_vendor_env`]) and answers
/// on stdout with protocol lines: the call about to be made, then the platforms.
pub fn vendor_child_main() -> anyhow::Result<()> {
    crate::child::die_with_parent("probe");
    let mut protocol = crate::child::take_stdout_for_protocol()?;
    let mut send = |line: &VendorLine| -> anyhow::Result<()> {
        protocol
            .write_all(crate::protocol::line_of(line)?.as_bytes())
            .and_then(|()| protocol.flush())
            .context("writing a protocol line to the parent")
    };
    // A stage line that cannot be written means the parent is gone; the answer would fail too.
    let (opencl_status, platforms) = probe_opencl(
        &mut |stage| {
            let _ = send(&VendorLine::Stage(stage.to_string()));
        },
        true,
    );
    send(&VendorLine::Answer {
        opencl_status,
        platforms,
    })
}

/// Process groups of vendor children now running, for [`install_group_reaper`]'s handler
/// (0: free slot). Atomics, because a signal handler may read them.
static LIVE_GROUPS: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

extern "C" fn kill_live_groups_and_die(sig: std::ffi::c_int) {
    // Only async-signal-safe calls here: atomic loads, kill(2), sigaction(2), raise(3).
    for g in &LIVE_GROUPS {
        let pgid = g.load(Ordering::SeqCst);
        if pgid > 0 {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
    if let Ok(sig) = Signal::try_from(sig) {
        // SAFETY: restoring the default disposition of the signal being handled, then raising
        // it again, so the process dies of it as it would have without this handler.
        unsafe {
            let _ = nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl);
        }
        let _ = nix::sys::signal::raise(sig);
    }
}

/// On SIGTERM, SIGINT or SIGHUP, kill the vendor children's process groups before dying: they
/// lead groups of their own (so a hung driver and any helper it forked can be killed as one),
/// so neither a Ctrl-C nor a kill of this process would reach a helper otherwise. Only where
/// the signal has its default disposition: a process that handles it already keeps its handler.
fn install_group_reaper() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let action = SigAction::new(
            SigHandler::Handler(kill_live_groups_and_die),
            SaFlags::empty(),
            SigSet::empty(),
        );
        for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            // SAFETY: the handler only makes async-signal-safe calls (see above).
            match unsafe { sigaction(sig, &action) } {
                Ok(old) if !matches!(old.handler(), SigHandler::SigDfl) => {
                    // SAFETY: puts back exactly what was installed before.
                    let _ = unsafe { sigaction(sig, &old) };
                }
                _ => {}
            }
        }
    });
}

/// Registers a vendor child's group for the signal handler while it runs; the group lets go of
/// its slot when it is killed, before its leader is reaped.
fn register_group(child: &mut GroupChild) {
    let raw = child.pgid().as_raw();
    let slot = LIVE_GROUPS.iter().position(|g| {
        g.compare_exchange(0, raw, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    if let Some(slot) = slot {
        child.on_kill(move |_| LIVE_GROUPS[slot].store(0, Ordering::SeqCst));
    }
}

/// Probe one vendor library in a child process; never fails, what went wrong is the state.
fn run_vendor_child(exe: &Path, vendor: &VendorLibrary, limit: Duration) -> VendorResult {
    let mut cmd = Command::new(exe);
    cmd.arg(VENDOR_CHILD_SUBCOMMAND)
        .envs(opencl::single_vendor_env(&vendor.library));
    match run_child(cmd, limit) {
        Ok(run) => run.seen.classify(run.timed_out, run.status, limit),
        Err(error) => VendorResult {
            state: VendorState::Failed { error },
            ..VendorResult::default()
        },
    }
}

/// What a probe child said, and how it ended.
struct ChildRun {
    seen: Seen,
    timed_out: bool,
    status: anyhow::Result<ExitStatus>,
}

/// Run a probe child (`cmd`) in a process group of its own until it exits or `limit` passes,
/// then kill the group and read what it said. Err only when it could not be started.
fn run_child(mut cmd: Command, limit: Duration) -> Result<ChildRun, String> {
    // From here on the guard owns the child: every return below kills and reaps it.
    let mut child = match GroupChild::spawn(cmd.stdin(Stdio::null())) {
        Ok(c) => c,
        Err(e) => return Err(format!("cannot start {}: {e}", cmd.get_program().display())),
    };
    register_group(&mut child);
    let (_, rx) = child
        .lines("clhip-probe-reader")
        .map_err(|e| format!("{e:#}"))?;

    let mut seen = Seen::default();
    let deadline = Instant::now() + limit;
    let timed_out = loop {
        seen.take(&rx, Duration::from_millis(20));
        // An error (ECHILD) means there is nothing left to wait for.
        if child.has_exited().unwrap_or(true) {
            break false;
        }
        if Instant::now() >= deadline {
            break true;
        }
    };
    let status = child.kill_and_reap().context("reaping vendor probe");
    // The group is dead, so the pipes close; what was still in them is read now. Bounded, in
    // case something outside the group (a daemon that called setsid) holds them open.
    let drain_until = Instant::now() + Duration::from_secs(1);
    while seen.eofs < 2 {
        let left = drain_until.saturating_duration_since(Instant::now());
        if left.is_zero() || !seen.take(&rx, left) {
            break;
        }
    }
    Ok(ChildRun {
        seen,
        timed_out,
        status,
    })
}

/// What a vendor child has said so far.
#[derive(Default)]
struct Seen {
    stage: Option<String>,
    answer: Option<(String, Vec<PlatformProbe>)>,
    install: Option<Box<RuntimeStatus>>,
    bad_line: Option<String>,
    tail: VecDeque<String>,
    eofs: usize,
}

impl Seen {
    /// Takes what arrives within `wait`; false once both pipes have closed and been read.
    fn take(&mut self, rx: &Receiver<Line>, wait: Duration) -> bool {
        let mut msg = rx.recv_timeout(wait);
        loop {
            match msg {
                Ok(Line::Protocol(line)) => self.protocol(line),
                Ok(Line::Output(line)) => self.stderr(line),
                Ok(Line::Eof) => self.eofs += 1,
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => {
                    // Both readers are done: nothing more will come; do not spin.
                    std::thread::sleep(wait.min(Duration::from_millis(20)));
                    return false;
                }
            }
            msg = match rx.try_recv() {
                Ok(m) => Ok(m),
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            };
        }
    }

    fn protocol(&mut self, line: String) {
        // The child's stdout carries only protocol lines (driver prints go to stderr there);
        // anything else is kept with the driver's output.
        let Some(parsed) = crate::protocol::parse_line::<VendorLine>(&line) else {
            return self.stderr(line);
        };
        match parsed {
            Ok(VendorLine::Stage(s)) => self.stage = Some(s),
            Ok(VendorLine::Answer {
                opencl_status,
                platforms,
            }) => self.answer = Some((opencl_status, platforms)),
            Ok(VendorLine::Install(runtime)) => self.install = Some(runtime),
            Err(e) => {
                self.bad_line
                    .get_or_insert_with(|| format!("unreadable answer ({e}): {line}"));
            }
        }
    }

    fn stderr(&mut self, line: String) {
        if self.tail.len() == STDERR_TAIL_LINES {
            self.tail.pop_front();
        }
        let cut: String = line.chars().take(STDERR_LINE_CHARS).collect();
        self.tail.push_back(cut);
    }

    fn classify(
        self,
        timed_out: bool,
        status: anyhow::Result<ExitStatus>,
        limit: Duration,
    ) -> VendorResult {
        let during = match (&self.answer, &self.stage) {
            (Some(_), _) => "at exit, after answering".to_string(),
            (None, Some(s)) => format!("in {s}"),
            (None, None) => "before its first OpenCL call".to_string(),
        };
        let (answered_status, platforms) = match self.answer {
            Some((s, p)) => (Some(s), p),
            None => (None, Vec::new()),
        };
        let state = if timed_out {
            VendorState::Hung {
                limit_s: limit.as_secs_f64(),
                during,
            }
        } else if let Some(bad) = self.bad_line {
            VendorState::Failed { error: bad }
        } else {
            match status {
                Err(e) => VendorState::Failed {
                    error: format!("{e:#}"),
                },
                Ok(st) => match (st.signal(), answered_status) {
                    (Some(sig), _) => VendorState::Crashed {
                        signal: Signal::try_from(sig)
                            .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string()),
                        during,
                    },
                    (None, Some(s)) if s == "ok" && st.success() => VendorState::Ok,
                    (None, Some(s)) if st.success() => VendorState::NoPlatform {
                        error: s.strip_prefix("unsupported: ").unwrap_or(&s).to_string(),
                    },
                    (None, _) => VendorState::Exited {
                        status: st
                            .code()
                            .map_or_else(|| st.to_string(), |c| format!("exit status {c}")),
                        during,
                    },
                },
            }
        };
        VendorResult {
            state,
            platforms,
            stderr_tail: self.tail.into(),
        }
    }
}

/// One probe's OpenCL part from the vendors' results: platforms renumbered in vendor order,
/// labels counted per family over all vendors (what one process loading them all would call
/// them), each device marked with its library; the overall status; one row per vendor.
fn merge_vendors(
    vendors: &[VendorLibrary],
    results: Vec<VendorResult>,
) -> (String, Vec<PlatformProbe>, Vec<VendorProbe>) {
    let mut platforms = Vec::new();
    let mut rows = Vec::new();
    let mut per_family: BTreeMap<String, usize> = BTreeMap::new();
    for (v, r) in vendors.iter().zip(results) {
        rows.push(VendorProbe {
            library: v.library.clone(),
            listed_in: v.listed_in.clone(),
            state: r.state,
            platforms: r.platforms.len(),
            stderr_tail: r.stderr_tail,
        });
        for mut p in r.platforms {
            let index = platforms.len();
            p.index = index;
            for d in &mut p.devices {
                let family = d
                    .label
                    .trim_end_matches(|c: char| c.is_ascii_digit())
                    .to_string();
                let k = per_family.entry(family.clone()).or_insert(0);
                d.icd_label = Some(std::mem::replace(&mut d.label, format!("{family}{k}")));
                *k += 1;
                d.platform_index = index;
                d.icd_library = Some(v.library.clone());
            }
            platforms.push(p);
        }
    }
    let status = if rows.iter().any(|r| r.state == VendorState::Ok) {
        "ok".to_string()
    } else if rows.is_empty() {
        format!(
            "unsupported: no OpenCL vendor library listed ({}; install an ICD, e.g. \
             pocl-opencl-icd)",
            opencl::no_vendor_reason()
        )
    } else if let Some(VendorState::NoPlatform { error }) =
        rows.iter().map(|r| &r.state).find(|s| !s.is_broken())
    {
        format!("unsupported: {error}")
    } else {
        "unsupported: no OpenCL vendor library answered (see the vendor lines)".to_string()
    };
    (status, platforms, rows)
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default()
}

fn kernel_modules() -> Vec<(String, String)> {
    ["amdgpu", "nvidia"]
        .iter()
        .filter_map(|m| {
            let v = read_trim(&format!("/sys/module/{m}/version"));
            (!v.is_empty()).then(|| (m.to_string(), v))
        })
        .collect()
}

/// The fingerprint's copy of a runtime's device record (field for field: the JSON names are
/// the same, so reports written before the two were separate types still load).
impl From<&DeviceInfo> for DeviceFingerprint {
    fn from(d: &DeviceInfo) -> Self {
        let DeviceInfo {
            ordinal,
            name,
            arch,
            uuid,
            pci_bus_id,
            driver_version,
            runtime_version,
            blas,
            solver,
            compiler,
        } = d.clone();
        DeviceFingerprint {
            ordinal,
            name,
            arch,
            uuid,
            pci_bus_id,
            driver_version,
            runtime_version,
            blas,
            solver,
            compiler,
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

    /// The driver fingerprint a run records.
    pub fn fingerprint(&self) -> Fingerprint {
        let val = |q: &Queried<String>| match q {
            Queried::Value(v) => v.clone(),
            other => other.show(|v| v.clone()),
        };
        let known = |q: &Queried<String>| match q {
            Queried::Value(v) => Some(v.clone()),
            _ => None,
        };
        let runtime = |r: &RuntimeStatus| RuntimeFingerprint {
            api: r.api.name().into(),
            status: r.status.clone(),
            library: r.library.clone(),
            version: r.runtime_version.clone().or(r.driver_version.clone()),
            devices: r.devices.iter().map(DeviceFingerprint::from).collect(),
        };
        Fingerprint {
            opencl: self
                .platforms
                .iter()
                .flat_map(|p| {
                    p.devices.iter().map(move |d| ClDeviceFingerprint {
                        label: d.label.clone(),
                        platform_name: val(&p.name),
                        platform_version: val(&p.version),
                        device_name: d.name.clone(),
                        device_version: val(&d.device_version),
                        driver_version: val(&d.driver_version),
                        uuid: known(&d.uuid),
                        pci_bus_id: known(&d.pci_bus_id),
                    })
                })
                .collect(),
            // HIP first, each install under its participant's name (`hip@6.3.2`).
            runtimes: {
                let (cuda, hip): (Vec<_>, Vec<_>) = self
                    .device_runtimes()
                    .into_iter()
                    .partition(|rt| rt.api == Api::Cuda);
                hip.into_iter().chain(cuda)
            }
            .map(|rt| RuntimeFingerprint {
                api: rt.name(),
                ..runtime(rt.status)
            })
            .chain(self.vulkan_fingerprint())
            .collect(),
            kernel_modules: self.kernel_modules.clone(),
            host_cpu: self.host_cpu.clone(),
            os_kernel: self.os_kernel.clone(),
        }
    }

    /// What a person reads.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "OpenCL: {}", self.opencl_status);
        for v in &self.opencl_vendors {
            let platforms = match v.platforms {
                1 => "1 platform".to_string(),
                n => format!("{n} platforms"),
            };
            let (what, tail) = match &v.state {
                VendorState::Ok => (platforms, false),
                s if s.is_broken() => (format!("BROKEN, {s}"), true),
                s => (s.to_string(), false),
            };
            let _ = writeln!(
                o,
                "  vendor library {} ({}): {what}",
                v.library, v.listed_in
            );
            // A working vendor's chatter is not a finding; a broken one's last words are.
            if tail {
                for line in &v.stderr_tail {
                    let _ = writeln!(o, "      | {line}");
                }
            }
        }
        for p in &self.platforms {
            let _ = writeln!(
                o,
                "  platform {}: {} | {} | {}",
                p.index,
                p.name.show(|v| v.clone()),
                p.vendor.show(|v| v.clone()),
                p.version.show(|v| v.clone())
            );
            for d in &p.devices {
                render_device(&mut o, d);
            }
        }
        let (cuda, hip): (Vec<_>, Vec<_>) = self
            .device_runtimes()
            .into_iter()
            .partition(|rt| rt.api == Api::Cuda);
        if !self.hip_installs.is_empty() {
            let _ = writeln!(o, "hip: {}", self.hip.status);
        }
        for rt in hip.into_iter().chain(cuda) {
            let r = rt.status;
            let _ = writeln!(o, "{}: {}", rt.name(), r.status);
            if let Some(install) = rt.install {
                let _ = writeln!(o, "  install            {}", install.root.display());
                let _ = writeln!(
                    o,
                    "  ROCm OpenCL        {}",
                    install.opencl_library.as_deref().unwrap_or(
                        "none in this install: its workers load the registered one, whose HSA \
                         runtime must be this install's"
                    )
                );
            }
            if let Some(lib) = &r.library {
                let _ = writeln!(o, "  library            {lib}");
            }
            for (k, v) in [
                ("runtime version", &r.runtime_version),
                ("driver version", &r.driver_version),
            ] {
                if let Some(v) = v {
                    let _ = writeln!(o, "  {k:<18} {v}");
                }
            }
            if let Some(n) = r.device_count {
                let _ = writeln!(o, "  devices            {n}");
            }
            let cl: Vec<&DeviceProbe> = self.platforms.iter().flat_map(|p| &p.devices).collect();
            for d in &r.devices {
                let twin = same_gpu(d, &cl).map_or(
                    "no OpenCL device (UUID and PCI bus id match none)".into(),
                    |t| t.label.clone(),
                );
                let _ = writeln!(
                    o,
                    "    device {}: {} ({})",
                    rt.device_label(d.ordinal),
                    d.name,
                    d.arch
                );
                for (k, v) in [
                    ("UUID", &d.uuid),
                    ("PCI bus id", &d.pci_bus_id),
                    ("BLAS", &d.blas),
                    ("solver", &d.solver),
                    ("compiler", &d.compiler),
                    ("pairs with", &twin),
                ] {
                    if !v.is_empty() {
                        let _ = writeln!(o, "      {k:<19} {v}");
                    }
                }
            }
            for a in &r.tried {
                let _ = writeln!(o, "  tried {}: {}", a.candidate, a.error);
            }
        }
        self.render_vulkan(&mut o);
        let _ = writeln!(o, "host: {} | Linux {}", self.host_cpu, self.os_kernel);
        for (m, v) in &self.kernel_modules {
            let _ = writeln!(o, "  module {m} {v}");
        }
        o
    }
}

impl Probe {
    /// The Vulkan driver the semaphore and vk-memory cases ran on, as a runtime of the
    /// fingerprint; nothing for a probe file older than the broker.
    fn vulkan_fingerprint(&self) -> Option<RuntimeFingerprint> {
        let v = &self.vulkan;
        (!v.status.is_empty()).then(|| RuntimeFingerprint {
            api: "vulkan".into(),
            status: v.status.clone(),
            library: v.loader.clone(),
            version: v.instance_version.clone(),
            devices: v
                .devices
                .iter()
                .map(|d| DeviceFingerprint {
                    ordinal: d.index,
                    name: d.name.clone(),
                    arch: d.device_type.clone(),
                    uuid: d.uuid.clone(),
                    driver_version: d.driver.clone(),
                    runtime_version: d.api_version.clone(),
                    ..DeviceFingerprint::default()
                })
                .collect(),
        })
    }

    /// The labels of the OpenCL and device-runtime devices with this UUID.
    fn same_uuid(&self, uuid: &str) -> Vec<String> {
        let uuid = uuid.to_ascii_lowercase();
        let mut out: Vec<String> = self
            .platforms
            .iter()
            .flat_map(|p| &p.devices)
            .filter(|d| value(&d.uuid).as_deref() == Some(uuid.as_str()))
            .map(|d| d.label.clone())
            .collect();
        for rt in self.device_runtimes() {
            out.extend(
                rt.status
                    .devices
                    .iter()
                    .filter(|d| d.uuid.to_ascii_lowercase() == uuid)
                    .map(|d| rt.device_label(d.ordinal)),
            );
        }
        out
    }

    fn render_vulkan(&self, o: &mut String) {
        let v = &self.vulkan;
        if v.status.is_empty() {
            return;
        }
        let _ = writeln!(o, "vulkan: {}", v.status);
        for (k, val) in [("loader", &v.loader), ("instance", &v.instance_version)] {
            if let Some(val) = val {
                let _ = writeln!(o, "  {k:<18} {val}");
            }
        }
        for e in &v.driver_env {
            let _ = writeln!(o, "  {e}");
        }
        let yes = |b: bool| if b { "yes" } else { "no" };
        for d in &v.devices {
            let _ = writeln!(
                o,
                "    device {}: {} ({}, Vulkan {}, {})",
                d.index, d.name, d.device_type, d.api_version, d.driver
            );
            let twins = self.same_uuid(&d.uuid);
            let broker = match (d.refusal(), d.semaphore_refusal(), d.memory_refusal()) {
                (Some(why), _, _) => format!("unusable: {why}"),
                (None, None, None) => "semaphores and memory".into(),
                (None, Some(why), None) => format!("memory only; semaphores: {why}"),
                (None, _, Some(why)) => format!("semaphores only; memory: {why}"),
            };
            for (k, val) in [
                ("UUID", d.uuid.clone()),
                (
                    "external fds",
                    format!(
                        "VK_KHR_external_semaphore_fd {}, VK_KHR_external_memory_fd {}",
                        yes(d.semaphore_fd),
                        yes(d.memory_fd)
                    ),
                ),
                ("timeline semaphores", yes(d.timeline_semaphores).into()),
                ("opaque-fd exports", d.exports_line()),
                ("broker", broker),
                (
                    "pairs with",
                    if twins.is_empty() {
                        "no OpenCL or device-runtime device of this UUID".into()
                    } else {
                        twins.join(", ")
                    },
                ),
            ] {
                let _ = writeln!(o, "      {k:<19} {val}");
            }
        }
        for a in &v.tried {
            let _ = writeln!(o, "  tried {}: {}", a.candidate, a.error);
        }
    }
}

fn value(q: &Queried<String>) -> Option<String> {
    match q {
        Queried::Value(v) => Some(v.to_ascii_lowercase()),
        _ => None,
    }
}

/// The OpenCL device that is the same GPU as `dev`: same UUID, else same PCI bus id.
pub fn same_gpu<'a>(dev: &DeviceInfo, cl: &'a [&'a DeviceProbe]) -> Option<&'a DeviceProbe> {
    let uuid = dev.uuid.to_ascii_lowercase();
    let pci = dev.pci_bus_id.to_ascii_lowercase();
    cl.iter()
        .find(|d| !uuid.is_empty() && value(&d.uuid).as_deref() == Some(uuid.as_str()))
        .or_else(|| {
            cl.iter()
                .find(|d| !pci.is_empty() && value(&d.pci_bus_id).as_deref() == Some(pci.as_str()))
        })
        .copied()
}

fn render_device(o: &mut String, d: &DeviceProbe) {
    let str_ = |q: &Queried<String>| q.show(|v| v.clone());
    let list = |q: &Queried<Vec<String>>| {
        q.show(|v| {
            if v.is_empty() {
                "(none)".into()
            } else {
                v.join(", ")
            }
        })
    };
    let _ = writeln!(o, "    device {}: {}", d.label, d.name);
    let rows: Vec<(&str, String)> = vec![
        ("vendor", str_(&d.vendor)),
        ("device version", str_(&d.device_version)),
        ("driver version", str_(&d.driver_version)),
        ("OpenCL C", str_(&d.opencl_c_version)),
        ("SVM", d.svm.show(|c| c.to_string())),
        (
            "max work-group",
            d.max_work_group_size.show(|v| v.to_string()),
        ),
        (
            "memory",
            format!(
                "{} global, {} max alloc",
                d.global_mem_bytes.show(|v| mib(*v)),
                d.max_alloc_bytes.show(|v| mib(*v))
            ),
        ),
        ("UUID", str_(&d.uuid)),
        (
            "ICD library",
            d.icd_library
                .clone()
                .unwrap_or_else(|| "(not recorded)".into()),
        ),
        (
            "PCI bus id",
            format!("{} {}", str_(&d.pci_bus_id), d.pci_bus_id_source)
                .trim_end()
                .to_string(),
        ),
        (
            "ext. memory import",
            list(&d.external_memory_import_handle_types),
        ),
        ("semaphore types", list(&d.semaphore_types)),
        ("semaphore import", list(&d.semaphore_import_handle_types)),
        ("semaphore export", list(&d.semaphore_export_handle_types)),
    ];
    for (k, v) in rows {
        let _ = writeln!(o, "      {k:<19} {v}");
    }
    let present: Vec<&str> = d
        .interop_extensions
        .iter()
        .filter(|(_, v)| **v)
        .map(|(k, _)| k.as_str())
        .collect();
    let absent: Vec<&str> = d
        .interop_extensions
        .iter()
        .filter(|(_, v)| !**v)
        .map(|(k, _)| k.as_str())
        .collect();
    let _ = writeln!(o, "      {:<19} {}", "interop present", or_none(&present));
    let _ = writeln!(o, "      {:<19} {}", "interop absent", or_none(&absent));
}

fn or_none(v: &[&str]) -> String {
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(" ")
    }
}

fn mib(b: u64) -> String {
    format!("{} MiB", b >> 20)
}

#[cfg(test)]
mod tests;
