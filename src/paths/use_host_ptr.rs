//! `use-host-ptr`, `pinned+use-host-ptr`, `device+use-host-ptr`, `managed+use-host-ptr`:
//! clCreateBuffer(CL_MEM_USE_HOST_PTR) over the host's ordinary memory, or over the device
//! runtime's pinned host memory, device allocation (as if it were host memory) or managed
//! memory.

use std::ffi::c_void;
use std::ptr;

use cl3::types::{CL_TRUE, cl_event};
use num_complex::Complex32;

use crate::model::{Api, ApiError, CaseError, PathKind, Phase, SyncMode};
use crate::runtimes::device::{AllocKind, DeviceAlloc};
use crate::runtimes::opencl::{ClEvent, ClMem, ClResultExt, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access};

use super::c::{self, CMem, CWriter};
use super::{
    AcrossGpus, Handover, Made, Memory, Owner, Path, device_peer, guard, no_such_handover,
    release_buffer, wrap_host_ptr,
};

declare_paths! {
    room: UseHostPtr;
    // CL_MEM_USE_HOST_PTR: OpenCL hands the memory over by map/unmap only (OpenCL 3.0 §5.4.2).
    hands_over_only_by: Map;
    /// The host's ordinary memory wrapped by clCreateBuffer(CL_MEM_USE_HOST_PTR).
    UseHostPtr => "use-host-ptr",
    /// The device runtime's pinned host memory (cuMemHostAlloc, hipHostMalloc) wrapped
    /// with CL_MEM_USE_HOST_PTR.
    PinnedUseHostPtr => "pinned+use-host-ptr",
    /// A device allocation (cuMemAlloc, hipMalloc) handed to CL_MEM_USE_HOST_PTR as if it
    /// were host memory (the MI100 notes saw a memory fault: docs/domain.md#the-mi100-notes).
    DeviceUseHostPtr => "device+use-host-ptr",
    /// Managed memory (cuMemAllocManaged, hipMallocManaged) wrapped with USE_HOST_PTR.
    ManagedUseHostPtr => "managed+use-host-ptr",
}

pub(super) struct UseHostPtr;

/// CL_MEM_USE_HOST_PTR over the host's memory or a device runtime's allocation.
#[derive(Debug)]
struct UseHostPtrMemory {
    buffer: *mut c_void,
    host: Option<PeerPtr>,
    alloc: Option<DeviceAlloc>,
}

impl Path for UseHostPtr {
    /// OpenCL may hand USE_HOST_PTR memory over only by map/unmap (OpenCL 3.0 §5.4.2);
    /// `finish` without it breaks that rule on purpose (a negative control). No semaphore:
    /// the handover is the map, not device work to order.
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        &[SyncMode::Map, SyncMode::Finish, SyncMode::None]
    }

    fn applies_to(&self, path: PathKind, peer: Api) -> bool {
        match path {
            PathKind::UseHostPtr => peer == Api::Host,
            _ => peer != Api::Host,
        }
    }

    /// Pinned and managed memory are host memory both GPUs reach (managed memory moves to the
    /// GPU that touches it); a device allocation handed over as host memory is mapped into
    /// OpenCL's GPU by nothing.
    fn across_gpus(&self, path: PathKind, _peer: Api) -> AcrossGpus {
        match path {
            PathKind::DeviceUseHostPtr => AcrossGpus::Refused(
                "a device allocation handed to OpenCL as host memory is mapped into OpenCL's \
                 GPU by nothing",
            ),
            _ => AcrossGpus::Runs,
        }
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let bytes = len * size_of::<Complex32>();
        let (peer_ptr, memory) = match path {
            PathKind::UseHostPtr => {
                let host = guard::alloc_host(peer, len, "host memory under CL_MEM_USE_HOST_PTR")?;
                let buffer = match wrap_host_ptr(session, host.addr, bytes) {
                    Ok(b) => b,
                    Err(e) => {
                        guard::free_host(peer, host);
                        return Err(e);
                    }
                };
                (
                    host,
                    UseHostPtrMemory {
                        buffer,
                        host: Some(host),
                        alloc: None,
                    },
                )
            }
            _ => {
                let kind = match path {
                    PathKind::PinnedUseHostPtr => AllocKind::PinnedHost,
                    PathKind::DeviceUseHostPtr => AllocKind::Device,
                    _ => AllocKind::Managed,
                };
                let dev = device_peer(peer, path)?;
                let name = format!("{path}: {} {kind:?} memory", dev.peer().label());
                let alloc = guard::alloc_device(dev, kind, len, &name)?;
                let buffer = match wrap_host_ptr(session, alloc.ptr.addr, bytes) {
                    Ok(b) => b,
                    Err(e) => {
                        dev.free(alloc);
                        return Err(e);
                    }
                };
                let p = alloc.ptr;
                (
                    p,
                    UseHostPtrMemory {
                        buffer,
                        host: None,
                        alloc: Some(alloc),
                    },
                )
            }
        };
        Ok(Made {
            cl: ClMem::Buffer(memory.buffer),
            peer: peer_ptr,
            memory: Box::new(memory),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes, len) = (m.v, m.bytes(), m.len.clone());
        let use_host = |c: &mut dyn CWriter, host: &str| {
            c.declare(format!("cl_mem {v}_buf;"));
            c.line(&format!(
                "CHECK(CL, ({v}_buf = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, {bytes}, {host}, &err), err));"
            ));
        };
        match m.path {
            PathKind::UseHostPtr => {
                c.declare(format!("uint64_t {v}_host;"));
                c.uses("host_alloc");
                c.line(&format!("{v}_host = host_alloc({len});"));
                use_host(c, &format!("(void *)(uintptr_t){v}_host"));
                c.line(&format!("{v}_peer = {v}_host;"));
            }
            PathKind::PinnedUseHostPtr => {
                let Some(d) = c::device_dialect(c, m.path) else {
                    return;
                };
                let alloc = d.call(d.alloc_pinned, &format!("&{v}_pinned"), &bytes);
                c.declare(format!("void *{v}_pinned;"));
                c.line(&alloc);
                use_host(c, &format!("{v}_pinned"));
                c.line(&format!("{v}_peer = (uintptr_t){v}_pinned;"));
            }
            _ => {
                let Some(d) = c::device_dialect(c, m.path) else {
                    return;
                };
                let dev = format!("{v}_dev");
                let (decl, as_void) = (d.decl.replace("{p}", &dev), d.as_void.replace("{p}", &dev));
                let addr = d.addr.replace("{p}", &dev);
                let alloc = if m.path == PathKind::DeviceUseHostPtr {
                    d.call(d.alloc, &format!("&{dev}"), &bytes)
                } else {
                    d.call(d.alloc_managed, &format!("&{dev}"), &bytes)
                };
                c.declare(decl);
                if m.path == PathKind::DeviceUseHostPtr {
                    c.comment(
                        "a device allocation handed to CL_MEM_USE_HOST_PTR as if it were host memory",
                    );
                }
                c.line(&alloc);
                use_host(c, &as_void);
                c.line(&format!("{v}_peer = {addr};"));
            }
        }
        c::poison(c, m, true, true);
    }

    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        let v = m.v;
        match m.path {
            PathKind::UseHostPtr => format!(
                "CHECK(CL, clReleaseMemObject({v}_buf));\nCALL(free((void *)(uintptr_t){v}_host));"
            ),
            PathKind::PinnedUseHostPtr => {
                let Some(d) = c::device_dialect(c, m.path) else {
                    return String::new();
                };
                format!(
                    "CHECK(CL, clReleaseMemObject({v}_buf));\n{}",
                    d.call(d.free_pinned, &format!("{v}_pinned"), "")
                )
            }
            _ => {
                let Some(d) = c::device_dialect(c, m.path) else {
                    return String::new();
                };
                format!(
                    "CHECK(CL, clReleaseMemObject({v}_buf));\n{}",
                    d.call(d.free, &format!("{v}_dev"), "")
                )
            }
        }
    }

    fn c_to_peer(
        &self,
        c: &mut dyn CWriter,
        m: &mut CMem,
        sync: SyncMode,
        last: Option<&str>,
        access: Access,
    ) {
        let want = format!("{}_peer", m.v);
        c_host_ptr_to_peer(c, m, sync, last, access, &want);
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        c_host_ptr_to_cl(c, m, sync)
    }
}

/// Blocking map of the whole of `buffer` (a CL_MEM_USE_HOST_PTR buffer, or a sub-buffer of
/// one) for the peer, which must come back at `want`: OpenCL 1.2 §5.4.2, for USE_HOST_PTR the
/// mapped pointer is derived from host_ptr. Anything else means the peer would be reading a
/// copy it was never told about; `misplaced` says so from the pointer OpenCL gave.
pub(super) fn map_at(
    h: &mut Handover<'_>,
    buffer: *mut c_void,
    waits: &[cl_event],
    access: Access,
    want: usize,
    misplaced: impl FnOnce(usize) -> String,
) -> Result<(), CaseError> {
    let (n, w) = sync::raw_wait(waits);
    let mut mapped: *mut c_void = ptr::null_mut();
    // SAFETY: blocking map of the whole buffer; unmapped in to_cl or release. cl3 returns the
    // mapped pointer through `mapped`.
    let ev = unsafe {
        cl3::command_queue::enqueue_map_buffer(
            h.s.queue.get(),
            buffer,
            CL_TRUE,
            access.map_flags(),
            0,
            h.bytes(),
            &mut mapped,
            n,
            w,
        )
    }
    .call("clEnqueueMapBuffer")
    .running()?;
    drop(ClEvent(ev));
    *h.mapped = Some(mapped);
    if mapped as usize != want {
        return Err(CaseError::Broken(ApiError {
            api: Api::OpenCl,
            call: "clEnqueueMapBuffer".into(),
            code: 0,
            name: "CL_SUCCESS".into(),
            detail: misplaced(mapped as usize),
        }));
    }
    Ok(())
}

/// The handover to the peer of memory OpenCL hands over by map alone: `none` starts nothing
/// that would order the peer after OpenCL (a negative control), `finish` finishes OpenCL's
/// work and nothing more (the rule-breaking negative control), `map` maps (`map`).
pub(super) fn host_ptr_to_peer(
    h: &mut Handover<'_>,
    sync: SyncMode,
    map: impl FnOnce(&mut Handover<'_>) -> Result<(), CaseError>,
) -> Result<(), CaseError> {
    match sync {
        SyncMode::None => Ok(()),
        SyncMode::Map => map(h),
        SyncMode::Finish => h.s.finish().running(),
        other => Err(no_such_handover(h.path, other)),
    }
}

/// The handover back to OpenCL: under `map`, the unmap of `buffer` where the peer's handover
/// mapped it; nothing under `none` and `finish`.
pub(super) fn host_ptr_to_cl(
    h: &mut Handover<'_>,
    buffer: *mut c_void,
    sync: SyncMode,
) -> Result<Vec<ClEvent>, CaseError> {
    match sync {
        SyncMode::None | SyncMode::Finish => Ok(Vec::new()),
        SyncMode::Map => {
            let Some(mapped) = h.mapped.take() else {
                return Ok(Vec::new());
            };
            // SAFETY: `mapped` came from clEnqueueMapBuffer on this buffer.
            let ev = unsafe {
                cl3::command_queue::enqueue_unmap_mem_object(
                    h.s.queue.get(),
                    buffer,
                    mapped,
                    0,
                    ptr::null(),
                )
            }
            .call("clEnqueueUnmapMemObject")
            .running()?;
            Ok(vec![ClEvent(ev)])
        }
        other => Err(no_such_handover(h.path, other)),
    }
}

/// [`host_ptr_to_peer`] in C: the map must give back `want` (a C expression of the address).
pub(super) fn c_host_ptr_to_peer(
    c: &mut dyn CWriter,
    m: &mut CMem,
    sync: SyncMode,
    last: Option<&str>,
    access: Access,
    want: &str,
) {
    let v = m.v;
    match sync {
        SyncMode::None => {}
        SyncMode::Map => {
            c.declare(format!("void *{v}_map;"));
            c.line(&format!(
                "CHECK(CL, ({v}_map = clEnqueueMapBuffer(queue, {v}_buf, CL_TRUE, {}, 0, {}, {}, NULL, &err), err));",
                c::map_flags(access),
                m.bytes(),
                c::waits(last)
            ));
            c.uses("map_check");
            c.line(&format!("check_mapped({v}_map, {want});"));
            m.mapped = true;
        }
        SyncMode::Finish => c.line("CHECK(CL, clFinish(queue));"),
        other => c::no_such_handover(c, m.path, other),
    }
}

/// [`host_ptr_to_cl`] in C.
pub(super) fn c_host_ptr_to_cl(
    c: &mut dyn CWriter,
    m: &mut CMem,
    sync: SyncMode,
) -> Option<String> {
    let v = m.v;
    match sync {
        SyncMode::None | SyncMode::Finish => None,
        SyncMode::Map if m.mapped => {
            let ev = c.event("unmapped");
            c.declare(format!("cl_event {ev};"));
            c.line(&format!(
                "CHECK(CL, clEnqueueUnmapMemObject(queue, {v}_buf, {v}_map, 0, NULL, &{ev}));"
            ));
            m.mapped = false;
            Some(ev)
        }
        SyncMode::Map => None,
        other => {
            c::no_such_handover(c, m.path, other);
            None
        }
    }
}

impl Memory for UseHostPtrMemory {
    fn what(&self, _path: PathKind) -> &'static str {
        "memory under CL_MEM_USE_HOST_PTR"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Buffer(self.buffer))
    }

    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr> {
        Some(peer)
    }

    fn mapped_buffer(&self) -> Option<*mut c_void> {
        Some(self.buffer)
    }

    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        _last: Option<&ClEvent>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        host_ptr_to_peer(h, sync, |h| {
            let want = h.peer_ptr.addr;
            map_at(h, self.buffer, waits, access, want, |mapped| {
                format!("mapped {mapped:#x}, not the USE_HOST_PTR address {want:#x}")
            })
        })
    }

    fn to_cl(&self, h: &mut Handover<'_>, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        host_ptr_to_cl(h, self.buffer, sync)
    }

    fn release(
        self: Box<Self>,
        _session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        // The buffer goes first: the runtime may still reference the memory.
        release_buffer(self.buffer);
        if let Some(h) = self.host {
            guard::free_host(peer, h);
        }
        if let (Some(a), Some(d)) = (self.alloc, peer.as_device()) {
            d.free(a);
        }
    }
}
