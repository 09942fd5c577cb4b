//! Sync modes: how ownership of a [`Shared`] passes between OpenCL and the peer. Each function
//! does exactly what the mode under test prescribes for the path, and nothing more, so that a
//! missing sync is visible as a stale read rather than papered over.

use std::ffi::c_void;
use std::ptr;

use cl3::memory::{CL_MAP_READ, CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION};
use cl3::types::{CL_FALSE, CL_TRUE, cl_event};
use num_complex::Complex32;

use crate::model::{Api, ApiError, CaseError, PathKind, Phase, SyncMode};
use crate::paths::{Backing, Owner, Shared};
use crate::runtimes::PeerRuntime;
use crate::runtimes::opencl::{ClEvent, ClResultExt, ClSession, ExternalMemoryFns, cl_error};

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

fn raw_wait(waits: &[cl_event]) -> (u32, *const cl_event) {
    if waits.is_empty() {
        (0, ptr::null())
    } else {
        (waits.len() as u32, waits.as_ptr())
    }
}

/// Hand `m` to the peer after OpenCL work whose last command is `last`.
pub fn to_peer(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync: SyncMode,
    last: Option<&ClEvent>,
    access: Access,
) -> Result<(), CaseError> {
    if m.owner == Owner::Peer {
        return Ok(());
    }
    let waits = wait_list(last);
    match (m.path, sync) {
        (_, SyncMode::Semaphore) => return Err(semaphores(s, peer)),
        (PathKind::Copy, _) => copy_to_peer(s, peer, m, sync, &waits, access)?,
        (PathKind::ClSvmCoarseMemcpy | PathKind::ClSvmFineMemcpy, _) => {
            memcpy_to_peer(s, peer, m, sync, last, access)?
        }
        // Negative control: start nothing that would order the peer after OpenCL.
        (_, SyncMode::None) => {}
        (p, SyncMode::Finish | SyncMode::Event) if p.shares_one_address() => {
            finish_or_wait(s, sync, last)?
        }
        (PathKind::ClSvmCoarse | PathKind::ClSvmFine, SyncMode::Map) => {
            svm_map(s, m, &waits, access)?
        }
        (p, SyncMode::Map) if p.is_use_host_ptr() => map_host_ptr(s, m, &waits, access)?,
        // USE_HOST_PTR without map, imported memory without release: the rule-breaking
        // negative controls finish OpenCL's work and nothing more.
        (p, SyncMode::Finish) if p.is_use_host_ptr() || p == PathKind::VmmFdClImport => {
            s.finish().running()?
        }
        (PathKind::VmmFdClImport, SyncMode::AcquireRelease) => {
            let Backing::Imported { buffer, .. } = &m.backing else {
                unreachable!("the import path has its backing")
            };
            release_external(s, *buffer, &waits)?.wait().running()?;
        }
        (path, sync) => unreachable!("sync {sync} on {path} is rejected when cases are built"),
    }
    m.owner = Owner::Peer;
    Ok(())
}

/// Hand `m` back to OpenCL after the peer's work. Returns the events the next OpenCL command
/// must wait on.
pub fn to_cl(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync: SyncMode,
) -> Result<Vec<ClEvent>, CaseError> {
    if m.owner == Owner::OpenCl {
        return Ok(Vec::new());
    }
    // The peer's half: its work must be done before OpenCL may touch the memory.
    match sync {
        SyncMode::None => {}
        SyncMode::Event => peer
            .as_device()
            .map_or(Ok(()), |d| d.record_and_wait_event())?,
        _ => peer.synchronize()?,
    }
    let mut events = Vec::new();
    match (m.path, sync) {
        (_, SyncMode::Semaphore) => return Err(semaphores(s, peer)),
        (PathKind::Copy, _) => events.extend(copy_to_cl(s, peer, m, sync)?),
        (PathKind::ClSvmCoarseMemcpy | PathKind::ClSvmFineMemcpy, _) => {
            let Backing::SvmMemcpy { ptr, peer_mem } = &m.backing else {
                unreachable!("memcpy paths have their backing")
            };
            // The peer's own copy back into OpenCL's SVM; under `map` the allocation is still
            // mapped for it, and unmapped after.
            let (svm, src) = (*ptr as usize, peer_mem.ptr.addr);
            device_of(peer, m.path)?.memcpy(svm, src, m.bytes())?;
            if m.svm_mapped {
                events.push(svm_unmap(s, m)?);
            }
        }
        (_, SyncMode::None) => {}
        (p, SyncMode::Finish | SyncMode::Event) if p.shares_one_address() => {
            // SVM and raw device pointers: the peer's work is complete (above), and commands
            // enqueued from now on see it.
        }
        (PathKind::ClSvmCoarse | PathKind::ClSvmFine, SyncMode::Map) => {
            events.push(svm_unmap(s, m)?);
        }
        (p, SyncMode::Map) if p.is_use_host_ptr() => {
            let Backing::UseHostPtr { buffer, .. } = &m.backing else {
                unreachable!("use-host-ptr paths have their backing")
            };
            if let Some(mapped) = m.mapped.take() {
                // SAFETY: `mapped` came from clEnqueueMapBuffer on this buffer.
                let ev = unsafe {
                    cl3::command_queue::enqueue_unmap_mem_object(
                        s.queue.get(),
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
        (p, SyncMode::Finish) if p.is_use_host_ptr() || p == PathKind::VmmFdClImport => {}
        (PathKind::VmmFdClImport, SyncMode::AcquireRelease) => {
            let Backing::Imported { buffer, .. } = &m.backing else {
                unreachable!("the import path has its backing")
            };
            events.push(acquire_external(s, *buffer)?);
        }
        (path, sync) => unreachable!("sync {sync} on {path} is rejected when cases are built"),
    }
    m.owner = Owner::OpenCl;
    Ok(events)
}

fn device_of(
    peer: &mut dyn PeerRuntime,
    path: PathKind,
) -> Result<&mut dyn crate::runtimes::device::DeviceRuntime, CaseError> {
    peer.as_device()
        .ok_or_else(|| CaseError::unsupported(format!("path {path} needs a device runtime")))
}

/// Blocking map of a whole SVM allocation for the peer.
fn svm_map(
    s: &ClSession,
    m: &mut Shared,
    waits: &[cl_event],
    access: Access,
) -> Result<(), CaseError> {
    let (n, w) = raw_wait(waits);
    // SAFETY: blocking map of the whole SVM allocation.
    let ev = unsafe {
        cl3::command_queue::enqueue_svm_map(
            s.queue.get(),
            CL_TRUE,
            access.map_flags(),
            m.cl_svm_ptr(),
            m.bytes(),
            n,
            w,
        )
    }
    .call("clEnqueueSVMMap")
    .running()?;
    drop(ClEvent(ev));
    m.svm_mapped = true;
    Ok(())
}

fn svm_unmap(s: &ClSession, m: &mut Shared) -> Result<ClEvent, CaseError> {
    // SAFETY: unmapping what svm_map mapped.
    let ev = unsafe {
        cl3::command_queue::enqueue_svm_unmap(s.queue.get(), m.cl_svm_ptr(), 0, ptr::null())
    }
    .call("clEnqueueSVMUnmap")
    .running()?;
    m.svm_mapped = false;
    Ok(ClEvent(ev))
}

/// Memcpy paths, OpenCL to peer: OpenCL's work is waited for per the mode (under `map` the
/// SVM is mapped and stays mapped until the data comes back), then the peer copies the SVM
/// into its own memory with its own memcpy. Under `none` the copy races OpenCL's kernel.
fn memcpy_to_peer(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync: SyncMode,
    last: Option<&ClEvent>,
    access: Access,
) -> Result<(), CaseError> {
    match sync {
        SyncMode::Map => svm_map(s, m, &wait_list(last), access)?,
        SyncMode::None => {}
        _ => finish_or_wait(s, sync, last)?,
    }
    let Backing::SvmMemcpy { ptr, peer_mem } = &m.backing else {
        unreachable!("memcpy paths have their backing")
    };
    if access.reads() {
        let (dst, svm) = (peer_mem.ptr.addr, *ptr as usize);
        device_of(peer, m.path)?.memcpy(dst, svm, m.bytes())?;
    }
    Ok(())
}

/// External semaphores. Neither OpenCL we can reach (NVIDIA 580, ROCm, PoCL) exports one, and
/// HIP and CUDA only import: without cl_khr_external_semaphore there is nothing to share. The
/// peer's import is still asked, with an fd that is no semaphore (/dev/null), so that the
/// report says how it answers: ROCm's clr returns hipErrorNotSupported on Linux whatever the
/// fd (hipImportExternalSemaphore in hipamd/src/hip_memory.cpp calls a rocdevice.hpp stub).
/// Always an error: the handshake itself is not driven yet.
fn semaphores(s: &ClSession, peer: &mut dyn PeerRuntime) -> CaseError {
    // cl_khr_external_semaphore: CL_DEVICE_SEMAPHORE_EXPORT_HANDLE_TYPES_KHR, and
    // CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR among them (OpenCL-Headers cl_ext.h).
    const EXPORT_HANDLE_TYPES: u32 = 0x204E;
    const OPAQUE_FD: u32 = 0x2055;
    let lacks = if !s.has_extension("cl_khr_external_semaphore") {
        "the OpenCL device lacks cl_khr_external_semaphore".to_string()
    } else {
        match crate::runtimes::opencl::device_bytes(s.device.id, EXPORT_HANDLE_TYPES) {
            Ok(b) if b.chunks_exact(4).any(|c| c == OPAQUE_FD.to_ne_bytes()) => {
                return CaseError::Skip(
                    "the OpenCL device exports opaque-fd semaphores, but clhip does not drive \
                     the semaphore handshake yet"
                        .into(),
                );
            }
            Ok(_) => "the OpenCL device exports no opaque-fd semaphore \
                      (CL_DEVICE_SEMAPHORE_EXPORT_HANDLE_TYPES_KHR lacks OPAQUE_FD)"
                .to_string(),
            Err(e) => format!("the OpenCL device's semaphore export types: {e}"),
        }
    };
    let Some(dev) = peer.as_device() else {
        return CaseError::unsupported(format!("{lacks}; the peer has no semaphores"));
    };
    let placeholder = match std::fs::File::open("/dev/null") {
        Ok(f) => std::os::fd::OwnedFd::from(f),
        Err(e) => return CaseError::unsupported(format!("{lacks}; /dev/null: {e}")),
    };
    // A successful import owns the fd (CUDA's rule); a refused one leaves it to us.
    let fd = std::os::fd::IntoRawFd::into_raw_fd(placeholder);
    match dev.import_semaphore_fd(fd) {
        Ok(sem) => {
            dev.destroy_semaphore(sem);
            CaseError::unsupported(format!(
                "{lacks}, so there is no semaphore to share (the peer's import accepted \
                 /dev/null as an opaque-fd semaphore)"
            ))
        }
        Err(e) => {
            // SAFETY: the refused import did not take the fd; it is ours to close.
            drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
            match e {
                CaseError::Unsupported { reason, error } => CaseError::Unsupported {
                    reason: format!(
                        "{lacks}, so there is no semaphore to share; the peer's import, given \
                         /dev/null, answers: {reason}"
                    ),
                    error,
                },
                other => other,
            }
        }
    }
}

/// Copy path, OpenCL to peer: read the buffer into host staging (waited on per the mode; not
/// at all under `none`), then, for a device peer, upload staging into the peer's memory.
fn copy_to_peer(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &Shared,
    sync: SyncMode,
    waits: &[cl_event],
    access: Access,
) -> Result<(), CaseError> {
    let Backing::Copy {
        buffer,
        staging,
        peer_mem,
    } = &m.backing
    else {
        unreachable!("copy path has copy backing")
    };
    if access.reads() {
        let (n, w) = raw_wait(waits);
        // SAFETY: non-blocking read into staging, which outlives the queue (release drains it
        // before freeing).
        let ev = ClEvent(
            unsafe {
                cl3::command_queue::enqueue_read_buffer(
                    s.queue.get(),
                    *buffer,
                    CL_FALSE,
                    0,
                    m.bytes(),
                    staging.addr as *mut c_void,
                    n,
                    w,
                )
            }
            .call("clEnqueueReadBuffer")
            .running()?,
        );
        if sync != SyncMode::None {
            finish_or_wait(s, sync, Some(&ev))?;
        }
    } else if sync != SyncMode::None {
        // The peer will overwrite staging: OpenCL must be done with it first.
        finish_or_wait(s, sync, None)?;
    }
    if let Some(dst) = peer_mem {
        // SAFETY: staging is live host memory of m.len elements; under `none` it may still be
        // being written by OpenCL, which is the race that control exists to show.
        let host = unsafe { std::slice::from_raw_parts(staging.addr as *const Complex32, m.len) };
        peer.upload(dst.ptr, host)?;
    }
    Ok(())
}

/// Copy path, peer to OpenCL: for a device peer download into staging, then write the buffer
/// (waited on per the mode; under `none` the peer may scribble on staging during the write).
fn copy_to_cl(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &Shared,
    sync: SyncMode,
) -> Result<Option<ClEvent>, CaseError> {
    let Backing::Copy {
        buffer,
        staging,
        peer_mem,
    } = &m.backing
    else {
        unreachable!("copy path has copy backing")
    };
    if let Some(src) = peer_mem {
        let data = peer.download(src.ptr)?;
        // SAFETY: staging holds m.len elements and does not overlap `data`.
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), staging.addr as *mut Complex32, m.len);
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
        SyncMode::Finish => {
            s.finish().running()?;
            Ok(None)
        }
        SyncMode::Event => {
            ev.wait().running()?;
            Ok(Some(ev))
        }
        _ => Ok(None),
    }
}

fn map_host_ptr(
    s: &ClSession,
    m: &mut Shared,
    waits: &[cl_event],
    access: Access,
) -> Result<(), CaseError> {
    let Backing::UseHostPtr { buffer, .. } = &m.backing else {
        unreachable!("use-host-ptr paths have their backing")
    };
    let (n, w) = raw_wait(waits);
    let mut mapped: *mut c_void = ptr::null_mut();
    // SAFETY: blocking map of the whole buffer; unmapped in to_cl or release. cl3 returns the
    // mapped pointer through `mapped`.
    let ev = unsafe {
        cl3::command_queue::enqueue_map_buffer(
            s.queue.get(),
            *buffer,
            CL_TRUE,
            access.map_flags(),
            0,
            m.bytes(),
            &mut mapped,
            n,
            w,
        )
    }
    .call("clEnqueueMapBuffer")
    .running()?;
    drop(ClEvent(ev));
    m.mapped = Some(mapped);
    // OpenCL 1.2 §5.4.2: for USE_HOST_PTR the mapped pointer is derived from host_ptr. Anything
    // else means the peer would be reading a copy it was never told about.
    if mapped as usize != m.peer.addr {
        return Err(CaseError::Broken(ApiError {
            api: Api::OpenCl,
            call: "clEnqueueMapBuffer".into(),
            code: 0,
            name: "CL_SUCCESS".into(),
            detail: format!(
                "mapped {:#x}, not the USE_HOST_PTR address {:#x}",
                mapped as usize, m.peer.addr
            ),
        }));
    }
    Ok(())
}

fn external_fns(s: &ClSession) -> Result<ExternalMemoryFns, CaseError> {
    ExternalMemoryFns::resolve(s.device.platform).map_err(|e| CaseError::Unsupported {
        reason: "cl_khr_external_memory entry points".into(),
        error: Some(e),
    })
}

/// clEnqueueAcquireExternalMemObjectsKHR: OpenCL takes imported memory from its exporter.
pub fn acquire_external(s: &ClSession, buffer: *mut c_void) -> Result<ClEvent, CaseError> {
    let f = external_fns(s)?;
    let mut ev: cl_event = ptr::null_mut();
    // SAFETY: one imported buffer of this context; the out-event is ours to release.
    let rc = unsafe { (f.acquire)(s.queue.get(), 1, &buffer, 0, ptr::null(), &mut ev) };
    if rc != 0 {
        return Err(CaseError::Broken(cl_error(
            "clEnqueueAcquireExternalMemObjectsKHR",
            rc,
        )));
    }
    Ok(ClEvent(ev))
}

/// clEnqueueReleaseExternalMemObjectsKHR: OpenCL gives imported memory back, after `waits`.
pub fn release_external(
    s: &ClSession,
    buffer: *mut c_void,
    waits: &[cl_event],
) -> Result<ClEvent, CaseError> {
    let f = external_fns(s)?;
    let (n, w) = raw_wait(waits);
    let mut ev: cl_event = ptr::null_mut();
    // SAFETY: as in acquire_external.
    let rc = unsafe { (f.release)(s.queue.get(), 1, &buffer, n, w, &mut ev) };
    if rc != 0 {
        return Err(CaseError::Broken(cl_error(
            "clEnqueueReleaseExternalMemObjectsKHR",
            rc,
        )));
    }
    Ok(ClEvent(ev))
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
