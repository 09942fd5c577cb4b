//! `host-ptr+svm-memcpy`, `host-ptr-unaligned+svm-memcpy`: coarse-grain SVM for OpenCL, the
//! host's plain memory for the peer, and clEnqueueSVMMemcpy between the two, both ways. SVM
//! copies to and from a plain host pointer were a crash on ROCm (ROCm/ROCclr#14: from
//! posix_memalign memory into clSVMAlloc memory; docs/paths.md). The unaligned twin's host
//! memory starts 8 bytes past a page boundary: clEnqueueSVMMemcpy takes any host pointer.

use std::ffi::c_void;

use cl3::types::{CL_FALSE, cl_event};
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, Phase, SyncMode};
use crate::runtimes::opencl::{ClEvent, ClMem, ClResultExt, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access};

use super::c::{self, CMem, CWriter};
use super::guard;
use super::{Handover, Made, Memory, Owner, Path, no_such_handover};

declare_paths! {
    room: HostSvmMemcpy;
    /// Coarse-grain SVM for OpenCL and the host's plain, page-aligned memory for the peer;
    /// data cross by clEnqueueSVMMemcpy between the two.
    HostPtrSvmMemcpy => "host-ptr+svm-memcpy",
    /// As `host-ptr+svm-memcpy`, the host memory starting one element (8 bytes) past a page
    /// boundary.
    HostPtrUnalignedSvmMemcpy => "host-ptr-unaligned+svm-memcpy",
}

pub(super) struct HostSvmMemcpy;

/// OpenCL's SVM and the host memory the copies fill and drain.
#[derive(Debug)]
struct HostSvmMemory {
    svm: *mut c_void,
    /// The host allocation, page-aligned; the peer's range lies in it.
    host: PeerPtr,
}

/// Elements the peer's range starts past the host allocation's page-aligned start.
fn offset(path: PathKind) -> usize {
    match path {
        PathKind::HostPtrUnalignedSvmMemcpy => 1,
        _ => 0,
    }
}

/// clEnqueueSVMMemcpy of the case's bytes, not blocking, after `waits`.
fn svm_copy(
    h: &Handover<'_>,
    dst: usize,
    src: usize,
    waits: &[cl_event],
) -> Result<ClEvent, CaseError> {
    let (n, w) = sync::raw_wait(waits);
    // SAFETY: both ranges hold the case's bytes until release, which drains the queue before
    // it frees either.
    let ev = unsafe {
        cl3::command_queue::enqueue_svm_mem_cpy(
            h.s.queue.get(),
            CL_FALSE,
            dst as *mut c_void,
            src as *const c_void,
            h.bytes(),
            n,
            w,
        )
    }
    .call("clEnqueueSVMMemcpy")
    .running()?;
    Ok(ClEvent(ev))
}

impl Path for HostSvmMemcpy {
    /// The data cross in OpenCL's own copies: `finish` or `event` waits for the copy into the
    /// host memory before the host reads it, `none` does not (the negative control). No map:
    /// the host never touches the SVM. No semaphore: the host has none.
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        &[SyncMode::Finish, SyncMode::Event, SyncMode::None]
    }

    /// The host's memory: a device peer's kernels could not use it.
    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer == Api::Host
    }

    fn svm_fine_grain(&self, _path: PathKind) -> Option<bool> {
        Some(false)
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let bytes = len * size_of::<Complex32>();
        let svm = guard::svm_alloc(session, path, bytes, true, &format!("{path} SVM"))?;
        let skip = offset(path);
        let host = match guard::alloc_host(peer, len + skip, "host memory of the SVM copies") {
            Ok(h) => h,
            Err(e) => {
                guard::svm_free(session, svm, true);
                return Err(e);
            }
        };
        let range = PeerPtr {
            addr: host.addr + skip * size_of::<Complex32>(),
            len,
        };
        Ok(Made {
            cl: ClMem::Svm(svm),
            peer: range,
            memory: Box::new(HostSvmMemory { svm, host }),
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
        let (v, bytes, len) = (m.v, m.bytes(), &m.len);
        c.uses("svm_alloc");
        c.uses("host_alloc");
        c.declare(format!("void *{v}_svm;"));
        c.declare(format!("uint64_t {v}_host;"));
        c.comment("coarse-grain SVM for OpenCL; plain host memory for the host, filled and drained by clEnqueueSVMMemcpy");
        let (alloc, range) = match offset(m.path) {
            0 => (format!("host_alloc({len})"), format!("{v}_host")),
            skip => (
                format!("host_alloc({len} + {skip})"),
                format!("{v}_host + 8 * {skip}"),
            ),
        };
        c.line(&format!(
            "{v}_svm = svm_alloc(0, {bytes});\n{v}_host = {alloc};\n{v}_peer = {range};"
        ));
        c::poison(c, m, true, true);
    }

    fn c_release(&self, _c: &mut dyn CWriter, m: &CMem) -> String {
        let v = m.v;
        format!("CALL(clSVMFree(context, {v}_svm));\nCALL(free((void *)(uintptr_t){v}_host));")
    }

    fn c_to_peer(
        &self,
        c: &mut dyn CWriter,
        m: &mut CMem,
        sync: SyncMode,
        last: Option<&str>,
        access: Access,
    ) {
        let copied = access.reads().then(|| {
            let ev = c.event("copied");
            c.declare(format!("cl_event {ev};"));
            c.line(&format!(
                "CHECK(CL, clEnqueueSVMMemcpy(queue, CL_FALSE, (void *)(uintptr_t){}_peer, {}_svm, {}, {}, &{ev}));",
                m.v,
                m.v,
                m.bytes(),
                c::waits(last)
            ));
            ev
        });
        match sync {
            SyncMode::None => {}
            SyncMode::Finish => c.line("CHECK(CL, clFinish(queue));"),
            SyncMode::Event => c::finish_or_wait(c, sync, copied.as_deref().or(last)),
            other => c::no_such_handover(c, m.path, other),
        }
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, _sync: SyncMode) -> Option<String> {
        let ev = c.event("copied");
        c.declare(format!("cl_event {ev};"));
        c.line(&format!(
            "CHECK(CL, clEnqueueSVMMemcpy(queue, CL_FALSE, {}_svm, (void *)(uintptr_t){}_peer, {}, 0, NULL, &{ev}));",
            m.v,
            m.v,
            m.bytes()
        ));
        Some(ev)
    }
}

impl Memory for HostSvmMemory {
    fn what(&self, _path: PathKind) -> &'static str {
        "host memory filled and drained by clEnqueueSVMMemcpy"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Svm(self.svm))
    }

    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr> {
        Some(peer)
    }

    /// OpenCL to the host: OpenCL copies the SVM into the host memory after its work (when the
    /// host will read it), then the mode waits for that copy, or under `none` does not.
    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        last: Option<&ClEvent>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        let copied = if access.reads() {
            Some(svm_copy(h, h.peer_ptr.addr, self.svm as usize, waits)?)
        } else {
            None
        };
        match sync {
            // Negative control: the host goes on while the copy may still be running.
            SyncMode::None => Ok(()),
            SyncMode::Finish => h.s.finish().running(),
            SyncMode::Event => match copied {
                Some(ev) => ev.wait().running(),
                None => sync::finish_or_wait(h.s, sync, last),
            },
            other => Err(no_such_handover(h.path, other)),
        }
    }

    /// The host to OpenCL: the host's work is done (it is synchronous); OpenCL copies its
    /// memory into the SVM, and OpenCL's next command waits for the copy.
    fn to_cl(&self, h: &mut Handover<'_>, _sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        Ok(vec![svm_copy(h, self.svm as usize, h.peer_ptr.addr, &[])?])
    }

    fn release(
        self: Box<Self>,
        session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        guard::svm_free(session, self.svm, true);
        guard::free_host(peer, self.host);
    }
}
