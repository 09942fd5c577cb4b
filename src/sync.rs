//! Sync modes: how ownership of a [`Shared`] passes between OpenCL and the peer. Each function
//! does exactly what the mode under test prescribes for the path, and nothing more, so that a
//! missing sync (mode `none`) is visible as a stale read rather than papered over.

use std::ffi::c_void;
use std::ptr;

use cl3::memory::{CL_MAP_READ, CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION};
use cl3::types::{CL_FALSE, CL_TRUE, cl_event};

use crate::model::{Api, ApiError, CaseError, PathKind, Phase, SyncMode};
use crate::paths::{Backing, Owner, Shared};
use crate::runtimes::opencl::{ClEvent, ClResultExt, ClSession};

/// What the next owner will do with the memory. Writing only lets a copy skip its read and a
/// map use CL_MAP_WRITE_INVALIDATE_REGION.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    fn reads(self) -> bool {
        self != Access::Write
    }

    fn map_flags(self) -> u64 {
        match self {
            Access::Read => CL_MAP_READ,
            Access::Write => CL_MAP_WRITE_INVALIDATE_REGION,
            Access::ReadWrite => CL_MAP_READ | CL_MAP_WRITE,
        }
    }
}

fn wait_list(last: Option<&ClEvent>) -> Vec<cl_event> {
    last.map(|e| vec![e.0]).unwrap_or_default()
}

/// Hand `m` to the peer after OpenCL work whose last command is `last`.
pub fn to_peer(
    s: &ClSession,
    m: &mut Shared,
    sync: SyncMode,
    last: Option<&ClEvent>,
    access: Access,
) -> Result<(), CaseError> {
    let queue = s.queue.get();
    let waits = wait_list(last);
    let (nwait, pwait) = (
        waits.len() as u32,
        if waits.is_empty() {
            ptr::null()
        } else {
            waits.as_ptr()
        },
    );
    match (m.path, sync) {
        (_, SyncMode::None) => {
            // Negative control: start nothing that would order the peer after OpenCL, except
            // the copy path's read, which is the transfer itself (left unwaited).
            if let (PathKind::Copy, Backing::Copy { buffer, staging }) = (m.path, &m.backing)
                && access.reads()
            {
                // SAFETY: non-blocking read into staging, which outlives the queue (release
                // drains it before freeing).
                let ev = unsafe {
                    cl3::command_queue::enqueue_read_buffer(
                        queue,
                        *buffer,
                        CL_FALSE,
                        0,
                        m.bytes(),
                        staging.addr as *mut c_void,
                        nwait,
                        pwait,
                    )
                }
                .call("clEnqueueReadBuffer")
                .running()?;
                drop(ClEvent(ev));
            }
        }
        (PathKind::Copy, SyncMode::Finish | SyncMode::Event) => {
            let Backing::Copy { buffer, staging } = &m.backing else {
                unreachable!("copy path has copy backing")
            };
            if access.reads() {
                // SAFETY: as above; completion is awaited below per the mode.
                let ev = ClEvent(
                    unsafe {
                        cl3::command_queue::enqueue_read_buffer(
                            queue,
                            *buffer,
                            CL_FALSE,
                            0,
                            m.bytes(),
                            staging.addr as *mut c_void,
                            nwait,
                            pwait,
                        )
                    }
                    .call("clEnqueueReadBuffer")
                    .running()?,
                );
                finish_or_wait(s, sync, Some(&ev))?;
            } else {
                // The peer will overwrite staging: OpenCL must be done with it first.
                finish_or_wait(s, sync, last)?;
            }
        }
        (PathKind::ClSvmFine, SyncMode::Finish | SyncMode::Event) => {
            finish_or_wait(s, sync, last)?;
        }
        (PathKind::ClSvmCoarse | PathKind::ClSvmFine, SyncMode::Map) => {
            // SAFETY: blocking map of the whole SVM allocation.
            let ev = unsafe {
                cl3::command_queue::enqueue_svm_map(
                    queue,
                    CL_TRUE,
                    access.map_flags(),
                    m.peer.addr as *mut c_void,
                    m.bytes(),
                    nwait,
                    pwait,
                )
            }
            .call("clEnqueueSVMMap")
            .running()?;
            drop(ClEvent(ev));
        }
        (PathKind::UseHostPtr, SyncMode::Map) => {
            let Backing::UseHostPtr { buffer, host } = &m.backing else {
                unreachable!("use-host-ptr path has its backing")
            };
            let mut mapped: *mut c_void = ptr::null_mut();
            // SAFETY: blocking map of the whole buffer; unmapped in to_cl or release. cl3
            // returns the mapped pointer through `mapped`.
            let ev = unsafe {
                cl3::command_queue::enqueue_map_buffer(
                    queue,
                    *buffer,
                    CL_TRUE,
                    access.map_flags(),
                    0,
                    m.bytes(),
                    &mut mapped,
                    nwait,
                    pwait,
                )
            }
            .call("clEnqueueMapBuffer")
            .running()?;
            drop(ClEvent(ev));
            m.mapped = Some(mapped);
            // OpenCL 1.2 §5.4.2: for USE_HOST_PTR the mapped pointer is derived from host_ptr.
            // Anything else means the peer would be reading a copy it was never told about.
            if mapped as usize != host.addr {
                return Err(CaseError::Broken(ApiError {
                    api: Api::OpenCl,
                    call: "clEnqueueMapBuffer".into(),
                    code: 0,
                    name: "CL_SUCCESS".into(),
                    detail: format!(
                        "mapped {:#x}, not the USE_HOST_PTR address {:#x}",
                        mapped as usize, host.addr
                    ),
                }));
            }
        }
        (path, sync) => unreachable!("sync {sync} on {path} is rejected when cases are built"),
    }
    m.owner = Owner::Peer;
    Ok(())
}

/// Hand `m` back to OpenCL after the peer's work. Returns the events the next OpenCL command
/// must wait on.
pub fn to_cl(s: &ClSession, m: &mut Shared, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
    let queue = s.queue.get();
    let mut events = Vec::new();
    match (m.path, sync) {
        (PathKind::Copy, _) => {
            let Backing::Copy { buffer, staging } = &m.backing else {
                unreachable!("copy path has copy backing")
            };
            // SAFETY: non-blocking write from staging, which outlives the queue.
            let ev = ClEvent(
                unsafe {
                    cl3::command_queue::enqueue_write_buffer(
                        queue,
                        *buffer,
                        CL_FALSE,
                        0,
                        m.bytes(),
                        staging.addr as *const c_void,
                        0,
                        ptr::null(),
                    )
                }
                .call("clEnqueueWriteBuffer")
                .running()?,
            );
            match sync {
                SyncMode::Finish => s.finish().running()?,
                SyncMode::Event => {
                    ev.wait().running()?;
                    events.push(ev);
                }
                // Negative control: the peer may scribble on staging while the write runs.
                _ => {}
            }
        }
        (_, SyncMode::None) => {}
        (PathKind::ClSvmFine, SyncMode::Finish | SyncMode::Event) => {
            // Fine-grain buffer SVM: host writes are visible to commands enqueued after them.
        }
        (PathKind::ClSvmCoarse | PathKind::ClSvmFine, SyncMode::Map) => {
            // SAFETY: unmapping what to_peer mapped.
            let ev = unsafe {
                cl3::command_queue::enqueue_svm_unmap(
                    queue,
                    m.peer.addr as *mut c_void,
                    0,
                    ptr::null(),
                )
            }
            .call("clEnqueueSVMUnmap")
            .running()?;
            events.push(ClEvent(ev));
        }
        (PathKind::UseHostPtr, SyncMode::Map) => {
            let Backing::UseHostPtr { buffer, .. } = &m.backing else {
                unreachable!("use-host-ptr path has its backing")
            };
            if let Some(mapped) = m.mapped.take() {
                // SAFETY: `mapped` came from clEnqueueMapBuffer on this buffer.
                let ev = unsafe {
                    cl3::command_queue::enqueue_unmap_mem_object(
                        queue,
                        *buffer,
                        mapped,
                        0,
                        ptr::null(),
                    )
                }
                .call("clEnqueueUnmapMemObject")
                .running()?;
                events.push(ClEvent(ev));
            }
        }
        (path, sync) => unreachable!("sync {sync} on {path} is rejected when cases are built"),
    }
    m.owner = Owner::OpenCl;
    Ok(events)
}

fn finish_or_wait(s: &ClSession, sync: SyncMode, ev: Option<&ClEvent>) -> Result<(), CaseError> {
    match (sync, ev) {
        (SyncMode::Event, Some(ev)) => ev.wait().running(),
        _ => s.finish().running(),
    }
}

/// The first OpenCL command after a handover waits on these.
pub fn raw(events: &[ClEvent]) -> Vec<cl_event> {
    events.iter().map(|e| e.0).collect()
}
