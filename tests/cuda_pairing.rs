//! The CUDA device beside the OpenCL devices the probe lists, for pairing: here rather than
//! in `runtimes::cuda`, because the runtimes sit below the probe and never import it. Without
//! libcuda the test is reported ignored, unless CLHIP_REQUIRE_CUDA=1 says a GPU is expected.

#[macro_use]
mod support;

use clhip::probe::{Queried, probe};
use clhip::runtimes::cuda::CudaPeer;
use clhip::runtimes::device::DeviceRuntime;
use clhip::runtimes::locate::{cuda_candidates, open_first};

/// The same gate as the unit tests' in `runtimes::cuda`: ignored without libcuda, and a libcuda
/// that loads but cannot open device 0 is a failure, not a skip.
fn gpu(test: &str) -> CudaPeer {
    if let Err(tried) = open_first(&cuda_candidates()) {
        let tried: Vec<&str> = tried.iter().map(|a| a.candidate.as_str()).collect();
        support::ignore(
            "CLHIP_REQUIRE_CUDA",
            format!("no libcuda (tried {})", tried.join(", ")),
        );
    }
    match CudaPeer::open(0) {
        Ok(p) => p,
        Err(e) => panic!("{test}: libcuda loads but open(0) failed: {e:?}"),
    }
}

/// Prints cuDeviceGetUuid beside OpenCL's CL_DEVICE_UUID_KHR and PCI bus ids, for pairing.
fn device_uuid_matches_opencl() {
    let p = gpu("device_uuid_matches_opencl");
    let probe = probe(None);
    let info = p.info();
    eprintln!(
        "cuda: uuid {} pci {} ({})",
        info.uuid, info.pci_bus_id, info.name
    );
    let mut same = None;
    for d in probe.platforms.iter().flat_map(|pl| pl.devices.iter()) {
        eprintln!(
            "opencl {}: uuid {:?} pci {:?} ({})",
            d.label, d.uuid, d.pci_bus_id, d.name
        );
        if d.pci_bus_id == Queried::Value(info.pci_bus_id.clone()) {
            same = Some(d.uuid.clone());
        }
    }
    eprintln!("cuda.devices (probe json): {:?}", probe.cuda.devices);
    match same {
        Some(u) => eprintln!(
            "same PCI device: OpenCL uuid {u:?} vs CUDA {} -> {}",
            info.uuid,
            if u == Queried::Value(info.uuid.clone()) {
                "AGREE"
            } else {
                "DIFFER"
            }
        ),
        None => eprintln!("no OpenCL device at PCI {}", info.pci_bus_id),
    }
}

tests!(device_uuid_matches_opencl);
