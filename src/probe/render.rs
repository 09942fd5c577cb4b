//! The probe as a person reads it (`clhip probe`); `--json` is the records' serde form.

use std::fmt::Write as _;

use super::records::{DeviceProbe, Probe, Queried, VendorState};
use crate::fingerprint::DeviceInfo;
use crate::model::Api;

impl Probe {
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
        (
            "type",
            d.device_type.clone().unwrap_or_else(|| "unknown".into()),
        ),
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
