//! `clhip probe`: everything interop depends on, per OpenCL platform and device, plus what was
//! found of each device runtime. A query that errors is shown with its error name and the
//! device is still listed: a broken query is itself a finding.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fingerprint::{ClDeviceFingerprint, Fingerprint, RuntimeFingerprint};
use crate::model::ApiError;
use crate::runtimes::locate::{self, RuntimeStatus};
use crate::runtimes::opencl::{self, SvmCaps, types::cl_device_id};

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
    pub hip: RuntimeStatus,
    pub cuda: RuntimeStatus,
    pub host_cpu: String,
    pub os_kernel: String,
    pub kernel_modules: Vec<(String, String)>,
}

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
    }
}

/// 16 bytes as the canonical 8-4-4-4-12 hex form that nvidia-smi and rocm-smi print.
pub fn uuid_string(b: &[u8]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    if h.len() != 32 {
        return h;
    }
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Probe everything. Never fails: what cannot be found is reported as such.
pub fn probe(rocm_path: Option<&Path>) -> Probe {
    let (opencl_status, platforms) = probe_opencl();
    Probe {
        opencl_status,
        platforms,
        hip: locate::probe_hip(rocm_path),
        cuda: locate::probe_cuda(),
        host_cpu: host_cpu(),
        os_kernel: read_trim("/proc/sys/kernel/osrelease"),
        kernel_modules: kernel_modules(),
    }
}

/// Probe from a child process (`exe probe --json`). The harness's parent process never loads a
/// GPU driver: a driver that crashes while being enumerated must not take the run with it, and
/// a driver that lets one process at a time hold the GPU (exclusive compute mode) must not be
/// held by the parent while the workers need it.
pub fn probe_in_child(exe: &Path, rocm_path: Option<&Path>) -> anyhow::Result<Probe> {
    use anyhow::Context as _;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["probe", "--json"]);
    if let Some(p) = rocm_path {
        cmd.arg("--rocm-path").arg(p);
    }
    let out = cmd
        .output()
        .with_context(|| format!("starting {} probe", exe.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "the probe process failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("reading the probe process's JSON")
}

fn probe_opencl() -> (String, Vec<PlatformProbe>) {
    let platforms = match cl3::platform::get_platform_ids() {
        Ok(p) => p,
        Err(code) => {
            let e = opencl::cl_error("clGetPlatformIDs", code);
            let hint = if code == cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED {
                " (no OpenCL ICD loader: install ocl-icd-libopencl1 and an ICD, e.g. pocl-opencl-icd)"
            } else if code == -1001 {
                " (the loader found no ICD: check /etc/OpenCL/vendors or OCL_ICD_VENDORS)"
            } else {
                ""
            };
            return (format!("unsupported: {e}{hint}"), Vec::new());
        }
    };
    let devices = opencl::enumerate().unwrap_or_default();
    let out = platforms
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            use cl3::platform::*;
            let ps = |param| -> Queried<String> { opencl::platform_string(p, param).into() };
            PlatformProbe {
                index: i,
                name: ps(CL_PLATFORM_NAME),
                vendor: ps(CL_PLATFORM_VENDOR),
                version: ps(CL_PLATFORM_VERSION),
                devices: devices
                    .iter()
                    .filter(|d| d.r.platform_index == i)
                    .map(probe_device)
                    .collect(),
            }
        })
        .collect();
    ("ok".into(), out)
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

impl Probe {
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
            devices: r.devices.clone(),
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
            runtimes: vec![runtime(&self.hip), runtime(&self.cuda)],
            kernel_modules: self.kernel_modules.clone(),
            host_cpu: self.host_cpu.clone(),
            os_kernel: self.os_kernel.clone(),
        }
    }

    /// What a person reads.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "OpenCL: {}", self.opencl_status);
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
        for r in [&self.hip, &self.cuda] {
            let _ = writeln!(o, "{}: {}", r.api.name(), r.status);
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
                let twin = crate::pairs::same_gpu(d, &cl).map_or(
                    "no OpenCL device (UUID and PCI bus id match none)".into(),
                    |t| t.label.clone(),
                );
                let _ = writeln!(
                    o,
                    "    device {}{}: {} ({})",
                    r.api.name(),
                    d.ordinal,
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
        let _ = writeln!(o, "host: {} | Linux {}", self.host_cpu, self.os_kernel);
        for (m, v) in &self.kernel_modules {
            let _ = writeln!(o, "  module {m} {v}");
        }
        o
    }
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
mod tests {
    use super::*;

    #[test]
    fn uuid_is_canonical() {
        let b: Vec<u8> = (0..16).collect();
        assert_eq!(uuid_string(&b), "00010203-0405-0607-0809-0a0b0c0d0e0f");
    }

    #[test]
    fn handle_names_follow_cl_ext_h() {
        assert_eq!(memory_handle_name(0x2060), "OPAQUE_FD");
        assert_eq!(memory_handle_name(0x2067), "DMA_BUF");
        assert_eq!(semaphore_handle_name(0x2058), "SYNC_FD");
        assert_eq!(memory_handle_name(0x1234), "0x1234");
    }

    #[test]
    fn probe_lists_an_opencl_device_with_svm_caps() {
        if crate::runtimes::opencl::test_device().is_none() {
            return;
        }
        let p = probe(None);
        assert_eq!(p.opencl_status, "ok");
        let d = &p.platforms.iter().flat_map(|p| &p.devices).next().unwrap();
        assert!(matches!(d.svm, Queried::Value(_) | Queried::Error(_)));
        let text = p.render();
        assert!(text.contains("SVM"), "{text}");
        let json = serde_json::to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(v["platforms"][0]["devices"][0]["label"].is_string());
        assert!(v["hip"]["status"].is_string() && v["cuda"]["status"].is_string());
    }
}
