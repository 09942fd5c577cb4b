//! `clhip probe`: everything interop depends on, per OpenCL platform and device, plus what was
//! found of each device runtime. A query that errors is shown with its error name and the
//! device is still listed: a broken query is itself a finding.
//!
//! The CLI probes each OpenCL vendor library (ICD) in a child process of its own
//! ([`probe_isolating_vendors`]), under a time limit: a driver that crashes, hangs or exits
//! while its platforms are listed becomes a vendor row saying so, and every other vendor is
//! probed as usual.
//!
//! The rooms: `records` (what a probe file holds, with serde), `queries` (the OpenCL queries of
//! one device), `isolation` (the probe's children, through `crate::child`, and how each ended),
//! `vendors` and `installs` (the vendor-library and ROCm-install children, parent and child
//! side), `merge` (the vendors' answers as one probe), `render` (what a person reads) and
//! `fingerprint` (what a run records of the probe). This file is the entry.

mod fingerprint;
mod installs;
mod isolation;
mod merge;
mod queries;
mod records;
mod render;
mod vendors;

use std::path::{Path, PathBuf};

pub use self::fingerprint::{PROBE_SCHEMA, ProbeJson};
pub use self::installs::{
    INSTALL_CHILD_SUBCOMMAND, ROCM_OPENCL, install_child_main, install_labels, install_version,
};
use self::installs::{probe_installs, several_installs};
pub use self::isolation::probe_in_child;
use self::isolation::{VendorResult, install_group_reaper};
use self::merge::merge_vendors;
use self::queries::probe_opencl;
pub use self::queries::{
    INTEROP_EXTENSIONS, memory_handle_name, semaphore_handle_name, uuid_string,
};
pub use self::records::{
    BROKEN_VENDOR_EXIT, DeviceProbe, DeviceRuntime, HipInstall, PlatformProbe, Probe, Queried,
    VendorProbe, VendorState,
};
pub use self::render::same_gpu;
pub use self::vendors::{
    VENDOR_CHILD_SUBCOMMAND, VENDOR_PROBE_TIMEOUT, VENDOR_TIMEOUT_ENV, vendor_child_main,
};
use self::vendors::{run_vendor_child, vendor_timeout};
use crate::runtimes::opencl;
use crate::runtimes::runtime_status::RuntimeStatus;
use crate::runtimes::{cuda, hip, vulkan};

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

#[cfg(test)]
mod tests;
