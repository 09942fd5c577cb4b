//! Pairs across GPUs: what a path needs with OpenCL on one GPU and the peer on another
//! (`nvidia0+cuda1.xgpu`), checked and set up before a room creates its memory
//! (docs/paths.md#across-two-gpus).

use crate::model::{CaseError, PathKind};
use crate::runtimes::PeerRuntime;

use super::{PathFacts, device_peer};

/// What a path needs to run with OpenCL on one GPU and its peer on another (a pair across
/// GPUs, `nvidia0+cuda1.xgpu`). A path runs there when what crosses is host memory or a copy,
/// or device memory that an API maps into the other GPU: peer access or IPC. Device memory
/// that nothing maps across is refused, with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcrossGpus {
    /// Nothing more: host memory both GPUs reach, or a copy one runtime makes.
    Runs,
    /// OpenCL's GPU dereferences the peer's device allocation: the peer's runtime lets
    /// OpenCL's GPU reach it (cuCtxEnablePeerAccess, hipDeviceEnablePeerAccess), where the
    /// two GPUs can reach each other at all (cuDeviceCanAccessPeer, hipDeviceCanAccessPeer).
    ClReachesPeer,
    /// The allocation lives on OpenCL's GPU, made there by another process (the IPC
    /// exporter), and the peer opens it on its own GPU, which must reach OpenCL's.
    PeerReachesCl,
    /// Not a case across GPUs, and why.
    Refused(&'static str),
}

thread_local! {
    /// The OpenCL device's GPU of a pair across GPUs, while [`Shared::create_across`] runs
    /// its room's `create`.
    static CL_GPU: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// For a room's `create`: the GPU the case's OpenCL device is on, as the peer's runtime
/// numbers it, when that is another GPU than the peer's (`None` on one GPU).
pub(crate) fn cl_gpu() -> Option<usize> {
    CL_GPU.get()
}

/// Set by [`super::Shared::create_across`] around its room's `create`.
pub(super) fn set_cl_gpu(gpu: Option<usize>) {
    CL_GPU.set(gpu);
}

/// What `path` needs with OpenCL on GPU `cl_gpu` and the peer on its own: a refused path or
/// two GPUs that cannot reach each other is `unsupported`, with the reason and the call that
/// said so; peer access a path needs is enabled.
pub(crate) fn reach_across(
    peer: &mut dyn PeerRuntime,
    path: PathKind,
    cl_gpu: usize,
) -> Result<(), CaseError> {
    let me = peer.peer();
    let name = |ordinal: usize| {
        crate::model::Peer {
            api: me.api,
            ordinal,
        }
        .label()
    };
    // The IPC open maps the exporter's memory into the peer's GPU itself (lazy peer access):
    // only OpenCL's GPU reaching the peer's memory needs access enabled here.
    let (from, to, what, enable) = match path.across_gpus(me.api) {
        AcrossGpus::Runs => return Ok(()),
        AcrossGpus::Refused(why) => {
            return Err(CaseError::unsupported(format!(
                "{path} is not run across GPUs: {why}"
            )));
        }
        AcrossGpus::ClReachesPeer => (
            cl_gpu,
            me.ordinal,
            "OpenCL's GPU reads the peer's memory",
            true,
        ),
        AcrossGpus::PeerReachesCl => (
            me.ordinal,
            cl_gpu,
            "the peer reads memory on OpenCL's GPU",
            false,
        ),
    };
    let dev = device_peer(peer, path)?;
    if !dev.can_access_peer(from, to)? {
        return Err(CaseError::unsupported(format!(
            "{} cannot reach {}'s memory ({}({from}, {to}) says no), and on {path} {what}",
            name(from),
            name(to),
            dev.peer_access_call(),
        )));
    }
    if enable {
        dev.enable_access_from(from)?;
    }
    Ok(())
}
