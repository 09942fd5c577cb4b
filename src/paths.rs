//! Paths: how memory owned by one API becomes addressable by the other. A [`Shared`] is one
//! allocation made through one path, with the view each side uses: a kernel argument for
//! OpenCL and a [`PeerPtr`] for the peer. Passing ownership between the two is `sync`'s job.

use std::ffi::c_void;
use std::ptr;

use cl3::memory::{CL_MEM_READ_WRITE, CL_MEM_SVM_FINE_GRAIN_BUFFER, CL_MEM_USE_HOST_PTR};
use num_complex::Complex32;

use crate::model::{CaseError, PathKind, Phase};
use crate::runtimes::opencl::{ClMem, ClResultExt, ClSession, cl_error};
use crate::runtimes::{PeerPtr, PeerRuntime};

/// Which side may touch the memory now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    OpenCl,
    Peer,
}

/// What backs a [`Shared`], for release.
#[derive(Debug)]
pub(crate) enum Backing {
    /// A device buffer and the peer memory data is staged through.
    Copy {
        buffer: *mut c_void,
        staging: PeerPtr,
    },
    Svm {
        ptr: *mut c_void,
    },
    UseHostPtr {
        buffer: *mut c_void,
        host: PeerPtr,
    },
}

/// One allocation reachable from both sides through `path`.
#[derive(Debug)]
pub struct Shared {
    pub path: PathKind,
    /// Complex f32 elements.
    pub len: usize,
    /// What OpenCL kernels take.
    pub cl: ClMem,
    /// What the peer dereferences (while it owns the memory).
    pub peer: PeerPtr,
    pub(crate) backing: Backing,
    pub(crate) owner: Owner,
    /// A live clEnqueueMapBuffer mapping (USE_HOST_PTR), to unmap.
    pub(crate) mapped: Option<*mut c_void>,
}

impl Shared {
    pub fn bytes(&self) -> usize {
        self.len * size_of::<Complex32>()
    }

    /// Allocate through `path`. A combination the device lacks, or that a call refuses, is
    /// `Unsupported` with the capability or the call and its code.
    pub fn create(
        session: &ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Self, CaseError> {
        let bytes = len * size_of::<Complex32>();
        let ctx = session.context.get();
        let (cl, peer_ptr, backing) = match path {
            PathKind::Copy => {
                // SAFETY: no host pointer; size is non-zero for len >= 1.
                let buffer = unsafe {
                    cl3::memory::create_buffer(ctx, CL_MEM_READ_WRITE, bytes, ptr::null_mut())
                }
                .call("clCreateBuffer")
                .refused("device buffer for the copy path")?;
                let staging = peer.alloc_host(len)?;
                (
                    ClMem::Buffer(buffer),
                    staging,
                    Backing::Copy { buffer, staging },
                )
            }
            PathKind::ClSvmCoarse | PathKind::ClSvmFine => {
                let fine = path == PathKind::ClSvmFine;
                let caps = session.svm;
                let have = if fine {
                    caps.fine_grain_buffer
                } else {
                    caps.coarse_grain_buffer
                };
                if !have {
                    return Err(CaseError::unsupported(format!(
                        "device lacks {} buffer SVM (CL_DEVICE_SVM_CAPABILITIES: {})",
                        if fine { "fine-grain" } else { "coarse-grain" },
                        caps
                    )));
                }
                let flags = CL_MEM_READ_WRITE
                    | if fine {
                        CL_MEM_SVM_FINE_GRAIN_BUFFER
                    } else {
                        0
                    };
                // SAFETY: valid context; alignment 0 means the device's default.
                let p = unsafe { cl3::memory::svm_alloc(ctx, flags, bytes, 0) }.map_err(|_| {
                    let mut e = cl_error("clSVMAlloc", 0);
                    e.name = "NULL".into();
                    e.detail = format!("{bytes} bytes, flags {flags:#x}");
                    CaseError::Unsupported {
                        reason: "SVM allocation refused".into(),
                        error: Some(e),
                    }
                })?;
                (
                    ClMem::Svm(p),
                    PeerPtr {
                        addr: p as usize,
                        len,
                    },
                    Backing::Svm { ptr: p },
                )
            }
            PathKind::UseHostPtr => {
                let host = peer.alloc_host(len)?;
                // SAFETY: `host` is live for `bytes` until release, which frees the buffer first.
                let created = unsafe {
                    cl3::memory::create_buffer(
                        ctx,
                        CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                        bytes,
                        host.addr as *mut c_void,
                    )
                }
                .call("clCreateBuffer(CL_MEM_USE_HOST_PTR)")
                .refused("OpenCL would not wrap the peer's memory");
                let buffer = match created {
                    Ok(b) => b,
                    Err(e) => {
                        peer.free_host(host);
                        return Err(e);
                    }
                };
                (
                    ClMem::Buffer(buffer),
                    host,
                    Backing::UseHostPtr { buffer, host },
                )
            }
        };
        Ok(Shared {
            path,
            len,
            cl,
            peer: peer_ptr,
            backing,
            owner: Owner::OpenCl,
            mapped: None,
        })
    }

    /// Wait for OpenCL to let go (whatever the sync mode under test did), undo any mapping, and
    /// free. Errors here are reported but cannot change a verdict already reached.
    pub fn release(self, session: &ClSession, peer: &mut dyn PeerRuntime) -> Result<(), CaseError> {
        let queue = session.queue.get();
        let mut first_err = session.finish().running().err();
        if let (Some(mapped), Backing::UseHostPtr { buffer, .. }) = (self.mapped, &self.backing) {
            // SAFETY: `mapped` came from clEnqueueMapBuffer on this buffer.
            let r = unsafe {
                cl3::command_queue::enqueue_unmap_mem_object(queue, *buffer, mapped, 0, ptr::null())
            };
            match r {
                Ok(ev) => {
                    let _ = crate::runtimes::opencl::ClEvent(ev);
                }
                Err(code) => {
                    first_err.get_or_insert(CaseError::Broken(cl_error(
                        "clEnqueueUnmapMemObject",
                        code,
                    )));
                }
            }
        }
        // A coarse buffer still mapped for the host must be unmapped before it is freed.
        if let (PathKind::ClSvmCoarse, Owner::Peer, Backing::Svm { ptr }) =
            (self.path, self.owner, &self.backing)
        {
            // SAFETY: mapped by sync::to_peer on this queue.
            if let Ok(ev) =
                unsafe { cl3::command_queue::enqueue_svm_unmap(queue, *ptr, 0, ptr::null()) }
            {
                drop(crate::runtimes::opencl::ClEvent(ev));
            }
        }
        if let Err(e) = session.finish().running() {
            first_err.get_or_insert(e);
        }
        match self.backing {
            Backing::Copy { buffer, staging } => {
                // SAFETY: we own this buffer; the queue is drained.
                unsafe {
                    let _ = cl3::memory::release_mem_object(buffer);
                }
                peer.free_host(staging);
            }
            Backing::Svm { ptr } => {
                // SAFETY: allocated by clSVMAlloc in this context; the queue is drained.
                unsafe {
                    let _ = cl3::memory::svm_free(session.context.get(), ptr);
                }
            }
            Backing::UseHostPtr { buffer, host } => {
                // The buffer goes first: the runtime may still reference the host memory.
                // SAFETY: we own this buffer; the queue is drained.
                unsafe {
                    let _ = cl3::memory::release_mem_object(buffer);
                }
                peer.free_host(host);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A plain device buffer that is not under test: the pipeline's second operand, its read-back,
/// a check kernel's result words. Its transfers are blocking, so they add no sync the case
/// didn't ask for until the moment they are used.
pub struct DeviceBuffer {
    pub mem: *mut c_void,
    pub bytes: usize,
}

impl DeviceBuffer {
    pub fn new(session: &ClSession, bytes: usize) -> Result<Self, CaseError> {
        // SAFETY: no host pointer.
        let mem = unsafe {
            cl3::memory::create_buffer(
                session.context.get(),
                CL_MEM_READ_WRITE,
                bytes.max(4),
                ptr::null_mut(),
            )
        }
        .call("clCreateBuffer")
        .refused("device buffer")?;
        Ok(DeviceBuffer { mem, bytes })
    }

    pub fn with_data<T: Copy>(session: &ClSession, data: &[T]) -> Result<Self, CaseError> {
        let b = Self::new(session, std::mem::size_of_val(data))?;
        b.write(session, data)?;
        Ok(b)
    }

    pub fn arg(&self) -> ClMem {
        ClMem::Buffer(self.mem)
    }

    /// Blocking write of `data` (plain-old-data: u32, f32, Complex32) at offset 0.
    pub fn write<T: Copy>(&self, session: &ClSession, data: &[T]) -> Result<(), CaseError> {
        let bytes = std::mem::size_of_val(data);
        assert!(bytes <= self.bytes, "write past the buffer");
        // SAFETY: blocking write from a live slice within the buffer's size.
        let ev = unsafe {
            cl3::command_queue::enqueue_write_buffer(
                session.queue.get(),
                self.mem,
                cl3::types::CL_TRUE,
                0,
                bytes,
                data.as_ptr() as *const c_void,
                0,
                ptr::null(),
            )
        }
        .call("clEnqueueWriteBuffer")
        .running()?;
        drop(crate::runtimes::opencl::ClEvent(ev));
        Ok(())
    }

    /// Blocking read of `len` elements after all queued work.
    pub fn read<T: Copy + Default>(
        &self,
        session: &ClSession,
        len: usize,
    ) -> Result<Vec<T>, CaseError> {
        let mut out = vec![T::default(); len];
        let bytes = std::mem::size_of_val(out.as_slice());
        assert!(bytes <= self.bytes, "read past the buffer");
        // SAFETY: blocking read into a live vector of exactly `bytes`.
        let ev = unsafe {
            cl3::command_queue::enqueue_read_buffer(
                session.queue.get(),
                self.mem,
                cl3::types::CL_TRUE,
                0,
                bytes,
                out.as_mut_ptr() as *mut c_void,
                0,
                ptr::null(),
            )
        }
        .call("clEnqueueReadBuffer")
        .running()?;
        drop(crate::runtimes::opencl::ClEvent(ev));
        Ok(out)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: we own this buffer. OpenCL defers the release until queued commands using it
        // are done, so dropping with work in flight is safe.
        unsafe {
            let _ = cl3::memory::release_mem_object(self.mem);
        }
    }
}
