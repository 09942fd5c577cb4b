//! What a search for a device runtime found, as the probe records it: the library that loaded
//! (or every candidate tried), its versions, the device count or why there is none, and each
//! device. hip/ and cuda/ fill it in (`hip::probe`, `cuda::probe`).

use serde::{Deserialize, Serialize};

use crate::model::Api;
use crate::runtimes::device::DeviceInfo;
use crate::runtimes::locate::Attempt;

/// What a runtime search found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimeStatus {
    pub api: Api,
    /// The candidate that loaded, if any.
    pub library: Option<String>,
    /// Every candidate that did not load, in search order.
    pub tried: Vec<Attempt>,
    /// `loaded`, or why the runtime is unusable.
    pub status: String,
    pub runtime_version: Option<String>,
    pub driver_version: Option<String>,
    pub device_count: Option<usize>,
    /// The device-count call's error, e.g. `hipErrorNoDevice (100)` on a machine without GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_error: Option<String>,
    /// What the device runtime reports per device (name, arch, UUID, PCI bus id, library
    /// versions): what pairs a CUDA device with an OpenCL one. Empty where none was found.
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    /// The runtime's companion libraries as found in its own install (ROCm: hiprtc, rocBLAS,
    /// rocSOLVER, HSA), each `name: path` or `name: why not`. Empty where not looked at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<String>,
}

impl RuntimeStatus {
    pub(crate) fn not_found(api: Api, tried: Vec<Attempt>) -> Self {
        let names: Vec<&str> = tried.iter().map(|a| a.candidate.as_str()).collect();
        RuntimeStatus {
            api,
            library: None,
            status: format!(
                "unsupported: library not found (tried {})",
                names.join(", ")
            ),
            tried,
            runtime_version: None,
            driver_version: None,
            device_count: None,
            device_error: None,
            devices: Vec::new(),
            libraries: Vec::new(),
        }
    }
}

pub(crate) fn status_line(count: Option<usize>, err: &Option<String>, what: &str) -> String {
    match (count, err) {
        (Some(n), None) if n > 0 => "loaded".into(),
        (_, Some(e)) => format!("unsupported: no {what} device ({e})"),
        _ => format!("unsupported: no {what} device"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::locate::open_first;

    #[test]
    fn a_missing_library_lists_every_attempt() {
        let err =
            open_first(&["/nonexistent/libfoo.so.1".into(), "libfoo-nope.so".into()]).unwrap_err();
        assert_eq!(err.len(), 2);
        let s = RuntimeStatus::not_found(Api::Cuda, err);
        assert!(
            s.status
                .contains("tried /nonexistent/libfoo.so.1, libfoo-nope.so"),
            "{}",
            s.status
        );
    }
}
