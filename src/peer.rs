//! Opening a case's peer participant (host, cuda, hip) with its known-answer check: what a
//! worker does on a pair's first case, and what the IPC exporter process does at its start.
//! Below `ops` and `ipc`, so neither has to import the other.
//!
//! A device peer is also held to the GPU the runner's probe saw under its ordinal
//! ([`PEER_GPUS_ENV`]): an ordinal means another GPU in a worker whose runtime numbers its
//! devices otherwise (a `HIP_VISIBLE_DEVICES` it was given, a mapping gone wrong), and a peer
//! on the wrong GPU would make every verdict of a pair across GPUs a verdict on one GPU.

use crate::model::{Api, CaseError, Peer};
use crate::runtimes::PeerRuntime;
use crate::runtimes::device::DeviceInfo;
use crate::runtimes::host::HostPeer;

/// Set by the runner for a worker: each device-runtime device the worker may open (its pair's
/// peer, and the GPU of the OpenCL device of a pair across GPUs), by its label in the run, with
/// the UUID and PCI bus id the probe saw: `cuda1=<uuid>|<pci bus id>;cuda0=...`.
pub const PEER_GPUS_ENV: &str = "CLHIP_PEER_GPUS";

/// One GPU as the probe saw it: a device's label in the run, its UUID and PCI bus id (either
/// may be empty where the runtime reports none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedGpu {
    pub label: String,
    pub uuid: String,
    pub pci_bus_id: String,
}

impl ExpectedGpu {
    /// `label` as `info` describes it.
    pub fn of(label: String, info: &DeviceInfo) -> Self {
        ExpectedGpu {
            label,
            uuid: info.uuid.clone(),
            pci_bus_id: info.pci_bus_id.clone(),
        }
    }
}

/// The value of [`PEER_GPUS_ENV`] for `gpus`.
pub fn peer_gpus_value(gpus: &[ExpectedGpu]) -> String {
    gpus.iter()
        .map(|g| format!("{}={}|{}", g.label, g.uuid, g.pci_bus_id))
        .collect::<Vec<_>>()
        .join(";")
}

/// The GPU [`PEER_GPUS_ENV`] (`value`) names `label`: `None` where the runner named none (a
/// worker started by hand, a test), an error where the value is no such list.
pub fn expected_gpu(value: Option<&str>, label: &str) -> Result<Option<ExpectedGpu>, String> {
    let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    for entry in value.split(';') {
        let parsed = entry
            .split_once('=')
            .and_then(|(l, id)| id.split_once('|').map(|(u, p)| (l, u, p)));
        let Some((l, uuid, pci)) = parsed else {
            return Err(format!(
                "{PEER_GPUS_ENV}: `{entry}` is not `<label>=<uuid>|<pci bus id>`"
            ));
        };
        if l.trim() == label {
            return Ok(Some(ExpectedGpu {
                label: label.to_string(),
                uuid: uuid.trim().to_string(),
                pci_bus_id: pci.trim().to_string(),
            }));
        }
    }
    Ok(None)
}

/// Why `got` is not the GPU `want` names, if it is not: a UUID or PCI bus id that both sides
/// know and that differs. A peer on the wrong GPU is the harness's own error.
pub fn wrong_gpu(want: &ExpectedGpu, got: &DeviceInfo) -> Option<CaseError> {
    let uuid = |s: &str| s.trim().trim_start_matches("GPU-").to_ascii_lowercase();
    let pci = |s: &str| {
        crate::runtimes::text::normalise_pci_bus_id(s).unwrap_or_else(|| s.trim().to_lowercase())
    };
    let differs = |a: &str, b: &str| !a.is_empty() && !b.is_empty() && a != b;
    let uuid_differs = differs(&uuid(&want.uuid), &uuid(&got.uuid));
    let pci_differs = differs(&pci(&want.pci_bus_id), &pci(&got.pci_bus_id));
    (uuid_differs || pci_differs).then(|| {
        CaseError::Harness(format!(
            "a peer on the wrong GPU: {} opened {} (UUID {}, PCI bus id {}), not the GPU the \
             probe saw as {} (UUID {}, PCI bus id {})",
            want.label, got.name, got.uuid, got.pci_bus_id, want.label, want.uuid, want.pci_bus_id
        ))
    })
}

/// Open a peer and, for a device, run its known-answer check. Also what the IPC exporter
/// process opens its device with.
pub fn open_peer(
    api: Api,
    ordinal: usize,
    rocm_path: Option<&std::path::Path>,
) -> Result<Box<dyn PeerRuntime>, CaseError> {
    open_peer_instead(api, ordinal, ordinal, rocm_path)
}

/// [`open_peer`] of `ordinal`, that opens device `instead` (the `wrong-gpu` plant: a peer that
/// silently opens another GPU than it was asked for), held to the GPU of `ordinal`.
pub fn open_peer_instead(
    api: Api,
    ordinal: usize,
    instead: usize,
    rocm_path: Option<&std::path::Path>,
) -> Result<Box<dyn PeerRuntime>, CaseError> {
    crate::trace::timed(&format!("open peer {}", api.name()), || {
        open_checked(api, ordinal, instead, rocm_path)
    })
}

fn open_checked(
    api: Api,
    ordinal: usize,
    instead: usize,
    rocm_path: Option<&std::path::Path>,
) -> Result<Box<dyn PeerRuntime>, CaseError> {
    let mut opened: Box<dyn PeerRuntime> = match api {
        Api::Host => Box::new(HostPeer),
        Api::Cuda => Box::new(crate::runtimes::cuda::CudaPeer::open(instead)?),
        Api::Hip => Box::new(crate::runtimes::hip::HipPeer::open(instead, rocm_path)?),
        Api::OpenCl => {
            return Err(CaseError::unsupported(format!(
                "the {} participant is not available in this build",
                api.name()
            )));
        }
    };
    let label = Peer { api, ordinal }.label();
    if let Some(d) = opened.as_device() {
        // Before the known-answer check: on the wrong GPU a passing check means nothing.
        let listed = std::env::var(PEER_GPUS_ENV).ok();
        let want = expected_gpu(listed.as_deref(), &label).map_err(CaseError::Harness)?;
        if let Some(e) = want.and_then(|w| wrong_gpu(&w, d.info())) {
            return Err(e);
        }
        crate::trace::timed("known-answer check", || d.health_check())
            .map_err(|e| unfit(&label, e))?;
    }
    Ok(opened)
}

/// A device that failed its known-answer check: the case is skipped, not run on it.
pub fn unfit(label: &str, e: CaseError) -> CaseError {
    CaseError::Skip(format!(
        "{label} failed its known-answer check at worker start: {}",
        e.into_outcome().reason()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str, pci: &str) -> DeviceInfo {
        DeviceInfo {
            name: "NVIDIA H200".into(),
            uuid: uuid.into(),
            pci_bus_id: pci.into(),
            ..Default::default()
        }
    }

    const A: (&str, &str) = ("d78e3cea-a814-2c56-42f3-4ff7810337c8", "0000:00:06.0");
    const B: (&str, &str) = ("9641a40c-7217-be29-fd01-f6f75e33669e", "0000:00:07.0");

    #[test]
    fn the_runner_s_list_names_each_gpu_by_its_label() {
        let list = peer_gpus_value(&[
            ExpectedGpu::of("cuda1".into(), &gpu(B.0, B.1)),
            ExpectedGpu::of("cuda0".into(), &gpu(A.0, A.1)),
        ]);
        assert_eq!(list, format!("cuda1={}|{};cuda0={}|{}", B.0, B.1, A.0, A.1));
        let b = expected_gpu(Some(&list), "cuda1").unwrap().unwrap();
        assert_eq!((b.uuid.as_str(), b.pci_bus_id.as_str()), B);
        assert_eq!(expected_gpu(Some(&list), "cuda2"), Ok(None));
        assert_eq!(expected_gpu(None, "cuda1"), Ok(None));
        // HIP reports no UUID on some installs: the PCI bus id alone.
        let hip = expected_gpu(Some("hip3=|0000:c3:00.0"), "hip3")
            .unwrap()
            .unwrap();
        assert_eq!(hip.uuid, "");
        let err = expected_gpu(Some("cuda1"), "cuda1").unwrap_err();
        assert!(
            err.contains("`cuda1` is not `<label>=<uuid>|<pci bus id>`"),
            "{err}"
        );
    }

    #[test]
    fn a_peer_on_the_wrong_gpu_is_a_harness_error_naming_both() {
        let want = ExpectedGpu::of("cuda1".into(), &gpu(B.0, B.1));
        assert!(wrong_gpu(&want, &gpu(B.0, B.1)).is_none());
        // As nvidia-smi spells them: `GPU-` prefix, upper case, an 8-digit PCI domain.
        let smi = format!("GPU-{}", B.0.to_uppercase());
        assert!(wrong_gpu(&want, &gpu(&smi, "00000000:00:07.0")).is_none());
        match wrong_gpu(&want, &gpu(A.0, A.1)) {
            Some(CaseError::Harness(reason)) => {
                assert!(
                    reason.starts_with("a peer on the wrong GPU: cuda1 opened"),
                    "{reason}"
                );
                assert!(reason.contains(A.1) && reason.contains(B.1), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // One of the two differing is enough; a side that reports nothing is not compared.
        assert!(wrong_gpu(&want, &gpu(B.0, A.1)).is_some());
        assert!(wrong_gpu(&want, &gpu("", A.1)).is_some());
        assert!(wrong_gpu(&want, &gpu("", B.1)).is_none());
        let pci_only = ExpectedGpu::of("hip3".into(), &gpu("", "0000:c3:00.0"));
        assert!(
            wrong_gpu(
                &pci_only,
                &gpu("ffffffff-0000-0000-0000-000000000000", "0000:c4:00.0")
            )
            .is_some()
        );
    }
}
