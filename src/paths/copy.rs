//! `copy`: each side has its own memory; data crosses by explicit read/write through host
//! staging memory.

use std::ffi::c_void;
use std::ptr;

use cl3::types::{CL_FALSE, cl_event};
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, Phase, SyncMode};
use crate::runtimes::device::{AllocKind, DeviceAlloc};
use crate::runtimes::opencl::{ClEvent, ClMem, ClResultExt, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access};

use super::c::{self, CMem, CWriter};
use super::{AcrossGpus, Handover, Made, Memory, Owner, Path, guard, release_buffer};

declare_paths! {
    room: CopyPath;
    /// Each side has its own memory; data crosses by explicit read/write through the host.
    Copy => "copy",
}

pub(super) struct CopyPath;

/// A device buffer, the host memory data is staged through, and the peer's own memory (for a
/// device peer; the host peer works on the staging memory itself).
#[derive(Debug)]
struct CopyMemory {
    buffer: *mut c_void,
    staging: PeerPtr,
    peer_mem: Option<DeviceAlloc>,
}

impl Path for CopyPath {
    /// The data cross in copies the host waits for: no map (there is no shared allocation to
    /// map) and no semaphore (there is no device work left to order).
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        &[SyncMode::Finish, SyncMode::Event, SyncMode::None]
    }

    fn applies_to(&self, _path: PathKind, _peer: Api) -> bool {
        true
    }

    /// Each side copies into and out of its own memory through the host: any two GPUs.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::Runs
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        _path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let bytes = len * size_of::<Complex32>();
        let label = peer.peer().label();
        let buffer = guard::cl_buffer(session, bytes, "copy path's OpenCL buffer")?;
        let staging = match guard::alloc_host(peer, len, "copy path's host staging memory") {
            Ok(s) => s,
            Err(e) => {
                release_buffer(buffer);
                return Err(e);
            }
        };
        let peer_mem = match peer.as_device() {
            Some(d) => match guard::alloc_device(
                d,
                AllocKind::Device,
                len,
                &format!("copy path's {label} device memory"),
            ) {
                Ok(a) => Some(a),
                Err(e) => {
                    guard::free_host(peer, staging);
                    release_buffer(buffer);
                    return Err(e);
                }
            },
            None => None,
        };
        let peer_ptr = peer_mem.as_ref().map_or(staging, |a| a.ptr);
        Ok(Made {
            cl: ClMem::Buffer(buffer),
            peer: peer_ptr,
            memory: Box::new(CopyMemory {
                buffer,
                staging,
                peer_mem,
            }),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes, len) = (m.v, m.bytes(), m.len.clone());
        c.comment("copy: an OpenCL buffer; data crosses through host staging memory");
        c.declare(format!("cl_mem {v}_buf;"));
        c.declare(format!("uint64_t {v}_staging;"));
        c.uses("host_alloc");
        c.line(&format!(
            "CHECK(CL, ({v}_buf = clCreateBuffer(context, CL_MEM_READ_WRITE, {bytes}, NULL, &err), err));\n{v}_staging = host_alloc({len});"
        ));
        match c.dialect() {
            Some(d) => {
                c.declare(d.decl.replace("{p}", &format!("{v}_dev")));
                let alloc = d.call(d.alloc, &format!("&{v}_dev"), &bytes);
                let addr = d.addr.replace("{p}", &format!("{v}_dev"));
                c.line(&format!("{alloc}\n{v}_peer = {addr};"));
            }
            None => c.line(&format!("{v}_peer = {v}_staging;")),
        }
        c::poison(c, m, true, true);
    }

    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        let v = m.v;
        let mut l = format!(
            "CHECK(CL, clReleaseMemObject({v}_buf));\nCALL(free((void *)(uintptr_t){v}_staging));"
        );
        if let Some(d) = c.dialect() {
            l.push('\n');
            l.push_str(&d.call(d.free, &format!("{v}_dev"), ""));
        }
        l
    }

    /// copy_to_peer: a non-blocking read into staging, waited for per the mode.
    fn c_to_peer(
        &self,
        c: &mut dyn CWriter,
        m: &mut CMem,
        sync: SyncMode,
        last: Option<&str>,
        access: Access,
    ) {
        let v = m.v;
        if access.reads() {
            let ev = c.event("read");
            c.declare(format!("cl_event {ev};"));
            c.line(&format!(
                "CHECK(CL, clEnqueueReadBuffer(queue, {v}_buf, CL_FALSE, 0, {}, (void *)(uintptr_t){v}_staging, {}, &{ev}));",
                m.bytes(),
                c::waits(last)
            ));
            if sync != SyncMode::None {
                c::finish_or_wait(c, sync, Some(&ev));
            }
        } else if sync != SyncMode::None {
            c::finish_or_wait(c, sync, None);
        }
        if c.dialect().is_some() {
            c.line(&format!(
                "peer_upload({v}_peer, (void *)(uintptr_t){v}_staging, {});",
                m.bytes()
            ));
        }
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        let v = m.v;
        let mut ready = None;
        if c.dialect().is_some() {
            c.line(&format!(
                "peer_download({v}_peer, (void *)(uintptr_t){v}_staging, {});",
                m.bytes()
            ));
        }
        let ev = c.event("written");
        c.declare(format!("cl_event {ev};"));
        c.line(&format!(
            "CHECK(CL, clEnqueueWriteBuffer(queue, {v}_buf, CL_FALSE, 0, {}, (void *)(uintptr_t){v}_staging, 0, NULL, &{ev}));",
            m.bytes()
        ));
        match sync {
            SyncMode::Finish => c.line("CHECK(CL, clFinish(queue));"),
            SyncMode::Event => {
                c.line(&format!("CHECK(CL, clWaitForEvents(1, &{ev}));"));
                ready = Some(ev);
            }
            _ => {}
        }
        ready
    }
}

impl Memory for CopyMemory {
    fn what(&self, _path: PathKind) -> &'static str {
        "the peer's copy-path memory"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Buffer(self.buffer))
    }

    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr> {
        Some(peer)
    }

    /// OpenCL to peer: read the buffer into host staging (waited on per the mode; not at all
    /// under `none`), then, for a device peer, upload staging into the peer's memory.
    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        _last: Option<&ClEvent>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        let CopyMemory {
            buffer,
            staging,
            peer_mem,
        } = self;
        let s = h.s;
        if access.reads() {
            let (n, w) = sync::raw_wait(waits);
            // SAFETY: non-blocking read into staging, which outlives the queue (release drains
            // it before freeing).
            let ev = ClEvent(
                unsafe {
                    cl3::command_queue::enqueue_read_buffer(
                        s.queue.get(),
                        *buffer,
                        CL_FALSE,
                        0,
                        h.bytes(),
                        staging.addr as *mut c_void,
                        n,
                        w,
                    )
                }
                .call("clEnqueueReadBuffer")
                .running()?,
            );
            if sync != SyncMode::None {
                sync::finish_or_wait(s, sync, Some(&ev))?;
            }
        } else if sync != SyncMode::None {
            // The peer will overwrite staging: OpenCL must be done with it first.
            sync::finish_or_wait(s, sync, None)?;
        }
        if let Some(dst) = peer_mem {
            // SAFETY: staging is live host memory of len elements; under `none` it may still
            // be being written by OpenCL, which is the race that control exists to show.
            let host =
                unsafe { std::slice::from_raw_parts(staging.addr as *const Complex32, h.len) };
            h.peer.upload(dst.ptr, host)?;
        }
        Ok(())
    }

    /// Peer to OpenCL: for a device peer download into staging, then write the buffer (waited
    /// on per the mode; under `none` the peer may scribble on staging during the write).
    fn to_cl(&self, h: &mut Handover<'_>, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        let CopyMemory {
            buffer,
            staging,
            peer_mem,
        } = self;
        let s = h.s;
        if let Some(src) = peer_mem {
            let data = h.peer.download(src.ptr)?;
            // SAFETY: staging holds len elements and does not overlap `data`.
            unsafe {
                ptr::copy_nonoverlapping(data.as_ptr(), staging.addr as *mut Complex32, h.len);
            }
        }
        // SAFETY: non-blocking write from staging, which outlives the queue.
        let ev = ClEvent(
            unsafe {
                cl3::command_queue::enqueue_write_buffer(
                    s.queue.get(),
                    *buffer,
                    CL_FALSE,
                    0,
                    h.bytes(),
                    staging.addr as *const c_void,
                    0,
                    ptr::null(),
                )
            }
            .call("clEnqueueWriteBuffer")
            .running()?,
        );
        match sync {
            SyncMode::Finish => {
                s.finish().running()?;
                Ok(Vec::new())
            }
            SyncMode::Event => {
                ev.wait().running()?;
                Ok(vec![ev])
            }
            _ => Ok(Vec::new()),
        }
    }

    fn release(
        self: Box<Self>,
        _session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        release_buffer(self.buffer);
        guard::free_host(peer, self.staging);
        if let (Some(a), Some(d)) = (self.peer_mem, peer.as_device()) {
            d.free(a);
        }
    }
}
