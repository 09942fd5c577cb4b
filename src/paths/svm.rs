//! `cl-svm-coarse`, `cl-svm-fine`: clSVMAlloc memory (coarse-grain, or with
//! CL_MEM_SVM_FINE_GRAIN_BUFFER) that the peer uses directly. Also the SVM allocation the
//! `+memcpy` and dma-buf paths make.

use std::ffi::c_void;

use cl3::memory::{CL_MEM_READ_WRITE, CL_MEM_SVM_FINE_GRAIN_BUFFER};
use cl3::types::cl_event;
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession, SvmCaps, cl_error};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::{AcrossGpus, Handover, Made, Memory, Owner, Path, guard};

declare_paths! {
    room: Svm;
    /// clSVMAlloc coarse-grain buffer, used directly by the peer.
    ClSvmCoarse => "cl-svm-coarse",
    /// clSVMAlloc with CL_MEM_SVM_FINE_GRAIN_BUFFER, used directly by the peer.
    ClSvmFine => "cl-svm-fine",
}

pub(super) struct Svm;

#[derive(Debug)]
struct SvmMemory {
    ptr: *mut c_void,
}

/// Whether `path` allocates fine-grain SVM (`Some(true)`), coarse-grain (`Some(false)`), or
/// no SVM of its own: its room says ([`Path::svm_fine_grain`]).
fn svm_fine_grain(path: PathKind) -> Option<bool> {
    super::room(path).svm_fine_grain(path)
}

/// Why a device with `caps` cannot allocate the SVM `path` needs, if it cannot. The runner
/// decides such cases from the probe's capabilities with this same text, without a worker.
pub fn svm_refusal(path: PathKind, caps: &SvmCaps) -> Option<String> {
    let fine = svm_fine_grain(path)?;
    let have = if fine {
        caps.fine_grain_buffer
    } else {
        caps.coarse_grain_buffer
    };
    (!have).then(|| {
        format!(
            "device lacks {} buffer SVM (CL_DEVICE_SVM_CAPABILITIES: {})",
            if fine { "fine-grain" } else { "coarse-grain" },
            caps
        )
    })
}

/// clSVMAlloc, coarse- or fine-grain, after checking the device says it has that kind. Having
/// said so, a NULL is the driver's failure (only a size above CL_DEVICE_MAX_MEM_ALLOC_SIZE,
/// which no device need take, stays unsupported).
pub(super) fn svm_alloc(
    session: &ClSession,
    path: PathKind,
    bytes: usize,
) -> Result<*mut c_void, CaseError> {
    if let Some(reason) = svm_refusal(path, &session.svm) {
        return Err(CaseError::unsupported(reason));
    }
    let fine = svm_fine_grain(path) == Some(true);
    let flags = CL_MEM_READ_WRITE
        | if fine {
            CL_MEM_SVM_FINE_GRAIN_BUFFER
        } else {
            0
        };
    // A NULL is its only failure, so it names itself here rather than through `call`.
    crate::calls::record("clSVMAlloc");
    // SAFETY: valid context; alignment 0 means the device's default.
    unsafe { cl3::memory::svm_alloc(session.context.get(), flags, bytes, 0) }.map_err(|_| {
        let max_alloc = crate::runtimes::opencl::device_u64(
            session.device.id,
            cl3::device::CL_DEVICE_MAX_MEM_ALLOC_SIZE,
        )
        .ok();
        svm_null(fine, bytes, flags, max_alloc)
    })
}

/// What a NULL from clSVMAlloc of `bytes` (`flags`) means on a device that advertises that
/// kind of SVM, whose largest allocation is `max_alloc` (if it answered).
pub fn svm_null(fine: bool, bytes: usize, flags: u64, max_alloc: Option<u64>) -> CaseError {
    let (flag, cap) = if fine {
        (
            "CL_MEM_SVM_FINE_GRAIN_BUFFER",
            "CL_DEVICE_SVM_FINE_GRAIN_BUFFER",
        )
    } else {
        ("coarse-grain", "CL_DEVICE_SVM_COARSE_GRAIN_BUFFER")
    };
    let mut e = cl_error(&format!("clSVMAlloc({flag})"), 0);
    e.name = "NULL".into();
    e.detail = format!("{bytes} bytes, flags {flags:#x}");
    match max_alloc {
        Some(max) if bytes as u64 > max => CaseError::Unsupported {
            reason: format!("SVM allocation above CL_DEVICE_MAX_MEM_ALLOC_SIZE ({max}) refused"),
            error: Some(e),
        },
        _ => crate::runtimes::opencl::refused_although_advertised(
            e,
            &format!("CL_DEVICE_SVM_CAPABILITIES advertises {cap}"),
        ),
    }
}

pub(super) fn svm_free(session: &ClSession, ptr: *mut c_void) {
    crate::calls::record("clSVMFree");
    // SAFETY: allocated by clSVMAlloc in this context; the caller has drained the queue.
    unsafe {
        let _ = cl3::memory::svm_free(session.context.get(), ptr);
    }
}

impl Path for Svm {
    fn svm_fine_grain(&self, path: PathKind) -> Option<bool> {
        Some(path == PathKind::ClSvmFine)
    }

    /// A device peer's kernels work on the allocation in place, so finish/event order them
    /// against OpenCL's, and a semaphore can too. The host may touch coarse SVM only between
    /// map and unmap (OpenCL 3.0 §5.6.1); fine-grain SVM it may touch once OpenCL's work is
    /// done. The host has no semaphores.
    fn syncs(&self, path: PathKind, peer: Api) -> &'static [SyncMode] {
        use SyncMode::*;
        match path {
            _ if peer != Api::Host => &[Finish, Event, Map, Semaphore, None],
            PathKind::ClSvmCoarse => &[Map, None],
            _ => &[Finish, Event, Map, None],
        }
    }

    fn applies_to(&self, _path: PathKind, _peer: Api) -> bool {
        true
    }

    fn shares_one_address(&self) -> bool {
        true
    }

    /// The peer dereferences OpenCL's SVM, which OpenCL maps for its own context's device
    /// alone: nothing maps it into another GPU.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::Refused(
            "the peer would dereference OpenCL's SVM, which OpenCL maps for its own device alone",
        )
    }

    fn create(
        &self,
        session: &mut ClSession,
        _peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let bytes = len * size_of::<Complex32>();
        // clhip places the view in the allocation: a guard before it and after it.
        let p = guard::svm_alloc(session, path, bytes, true, &format!("{path} allocation"))?;
        Ok(Made {
            cl: ClMem::Svm(p),
            peer: PeerPtr {
                addr: p as usize,
                len,
            },
            memory: Box::new(SvmMemory { ptr: p }),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_cl_is_svm(&self) -> bool {
        true
    }

    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes) = (m.v, m.bytes());
        let fine = m.path == PathKind::ClSvmFine;
        c.uses("svm_alloc");
        c.declare(format!("void *{v}_svm;"));
        c.line(&format!(
            "{v}_svm = svm_alloc({}, {bytes});\n{v}_peer = (uintptr_t){v}_svm; /* the peer uses the SVM pointer itself */",
            fine as u8
        ));
        c::poison(c, m, true, false);
    }

    fn c_release(&self, _c: &mut dyn CWriter, m: &CMem) -> String {
        format!("CALL(clSVMFree(context, {}_svm));", m.v)
    }

    fn c_to_peer(
        &self,
        c: &mut dyn CWriter,
        m: &mut CMem,
        sync: SyncMode,
        last: Option<&str>,
        access: Access,
    ) {
        match sync {
            SyncMode::Map => c::svm_map(c, m, last, access),
            _ => c::shared_address_to_peer(c, m, sync, last),
        }
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        match sync {
            // As to_cl: nothing to unmap where the handover out was not a map (a planted skip).
            SyncMode::Map if !m.svm_mapped => None,
            SyncMode::Map => Some(c::svm_unmap(c, m)),
            _ => {
                c::shared_address_to_cl(c, m, sync);
                None
            }
        }
    }
}

impl Memory for SvmMemory {
    fn what(&self, path: PathKind) -> &'static str {
        match path {
            PathKind::ClSvmFine => "fine-grain SVM",
            _ => "coarse-grain SVM",
        }
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Svm(self.ptr))
    }

    fn peer_owned(&self, _peer: PeerPtr) -> Option<PeerPtr> {
        None
    }

    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        last: Option<&ClEvent>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        match sync {
            SyncMode::Map => super::svm_map(h, waits, access),
            _ => super::shared_address_to_peer(h, sync, last),
        }
    }

    fn to_cl(&self, h: &mut Handover<'_>, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        match sync {
            // Nothing to unmap where the handover out was not a map (a planted skip).
            SyncMode::Map if !*h.svm_mapped => Ok(Vec::new()),
            SyncMode::Map => Ok(vec![super::svm_unmap(h)?]),
            _ => super::shared_address_to_cl(h, sync),
        }
    }

    fn release(
        self: Box<Self>,
        session: &ClSession,
        _peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        guard::svm_free(session, self.ptr, true);
    }
}
