//! The driver fingerprint a run records, from the probe.

use super::records::{Probe, Queried};
use crate::fingerprint::{ClDeviceFingerprint, DeviceInfo, Fingerprint, RuntimeFingerprint};
use crate::model::Api;
use crate::runtimes::runtime_status::RuntimeStatus;

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
                .map(|d| DeviceInfo {
                    ordinal: d.index,
                    name: d.name.clone(),
                    arch: d.device_type.clone(),
                    uuid: d.uuid.clone(),
                    driver_version: d.driver.clone(),
                    runtime_version: d.api_version.clone(),
                    ..DeviceInfo::default()
                })
                .collect(),
        })
    }
}

/// The `schema` tag of `clhip probe --json`; a reader refuses a file with another one. Files
/// from before the tag have none, and are read as this one.
pub const PROBE_SCHEMA: &str = "clhip-probe/1";

/// `clhip probe --json`: the probe, with its schema tag and the fingerprint lines that
/// expectation files' `[applies] fingerprint` globs are matched against.
#[derive(serde::Serialize)]
pub struct ProbeJson<'a> {
    pub schema: &'static str,
    pub fingerprint_lines: Vec<String>,
    #[serde(flatten)]
    pub probe: &'a Probe,
}

impl Probe {
    /// The probe as `clhip probe --json` writes it.
    pub fn to_json(&self) -> ProbeJson<'_> {
        ProbeJson {
            schema: PROBE_SCHEMA,
            fingerprint_lines: self.fingerprint().lines(),
            probe: self,
        }
    }

    /// The probe's text with its fingerprint lines after it, as `clhip probe` prints it.
    pub fn render_with_fingerprint(&self) -> String {
        let mut out = self.render();
        out.push_str(
            "\nFingerprint lines (what an expectation file's `[applies] fingerprint` globs match):\n",
        );
        for line in self.fingerprint().lines() {
            out.push_str("  ");
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}
