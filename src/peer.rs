//! Opening a case's peer participant (host, cuda, hip) with its known-answer check: what a
//! worker does on a pair's first case, and what the IPC exporter process does at its start.
//! Below `ops` and `ipc`, so neither has to import the other.

use crate::model::{Api, CaseError};
use crate::runtimes::PeerRuntime;
use crate::runtimes::host::HostPeer;

/// Open a peer and, for a device, run its known-answer check. Also what the IPC exporter
/// process opens its device with.
pub fn open_peer(
    api: Api,
    ordinal: usize,
    rocm_path: Option<&std::path::Path>,
) -> Result<Box<dyn PeerRuntime>, CaseError> {
    crate::trace::timed(&format!("open peer {}", api.name()), || {
        open_checked(api, ordinal, rocm_path)
    })
}

fn open_checked(
    api: Api,
    ordinal: usize,
    rocm_path: Option<&std::path::Path>,
) -> Result<Box<dyn PeerRuntime>, CaseError> {
    let mut opened: Box<dyn PeerRuntime> = match api {
        Api::Host => Box::new(HostPeer),
        Api::Cuda => Box::new(crate::runtimes::cuda::CudaPeer::open(ordinal)?),
        Api::Hip => Box::new(crate::runtimes::hip::HipPeer::open(ordinal, rocm_path)?),
        Api::OpenCl => {
            return Err(CaseError::unsupported(format!(
                "the {} participant is not available in this build",
                api.name()
            )));
        }
    };
    let label = opened.peer().label();
    if let Some(d) = opened.as_device() {
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
