//! Pair discovery: which OpenCL device works with which participant. The host pairs with every
//! OpenCL device; device runtimes pair with the OpenCL device that is the same physical GPU,
//! matched by UUID or PCI bus id, never by name (names differ between the APIs).

use crate::model::{ApiError, ClDeviceRef, Pair, Peer};
use crate::probe::Probe;
use crate::runtimes::opencl;

/// Every pair on this machine, in OpenCL enumeration order.
pub fn discover() -> Result<Vec<Pair>, ApiError> {
    let devices = opencl::enumerate()?;
    Ok(devices
        .into_iter()
        .map(|d| Pair {
            opencl: d.r,
            peer: Peer::HOST,
        })
        .collect())
}

/// The pairs a probe found (what the CLI uses: its probe runs in a child process).
pub fn from_probe(probe: &Probe) -> Vec<Pair> {
    probe
        .platforms
        .iter()
        .flat_map(|p| &p.devices)
        .map(|d| Pair {
            opencl: ClDeviceRef {
                platform_index: d.platform_index,
                device_index: d.device_index,
                label: d.label.clone(),
            },
            peer: Peer::HOST,
        })
        .collect()
}
