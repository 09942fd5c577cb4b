//! Paths: how memory owned by one API becomes addressable by the other. A [`Shared`] is one
//! allocation made through one path, with the view each side uses: a kernel argument for
//! OpenCL and a [`PeerPtr`] for the peer. Passing ownership between the two is `sync`'s job.

use std::ffi::c_void;
use std::ptr;

use cl3::memory::{CL_MEM_READ_WRITE, CL_MEM_SVM_FINE_GRAIN_BUFFER, CL_MEM_USE_HOST_PTR};
use num_complex::Complex32;

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::rc::Rc;

use cl3::types::cl_mem_properties;

use crate::ipc::Exporter;
use crate::model::{CaseError, PathKind, Phase};
use crate::runtimes::device::{AllocKind, DeviceAlloc, DeviceRuntime, ExportHandle};
use crate::runtimes::opencl::{ClArg, ClEvent, ClMem, ClResultExt, ClSession, SvmCaps, cl_error};
use crate::runtimes::vulkan::{Broker, ExportedMemory};
use crate::runtimes::{PeerPtr, PeerRuntime};

/// What new memory holds before a case writes it: a quiet-NaN word, so that a consumer whose
/// producer did nothing reads data that fails every check (a NaN is out of every bound and no
/// handoff pattern is this word everywhere). Without it a reused allocation could still hold an
/// earlier case's correct result, and a no-op would pass.
pub const POISON_WORD: u32 = 0x7FF4_DEAD;

/// [`POISON_WORD`] as complex elements, for the peer's upload.
pub fn poison_vec(len: usize) -> Vec<Complex32> {
    let nan = f32::from_bits(POISON_WORD);
    vec![Complex32::new(nan, nan); len]
}

thread_local! {
    /// Test-only (the `stale-correct` plant): what the next new memory holds before its
    /// poison fill.
    static STALE: std::cell::Cell<Option<Vec<Complex32>>> = const { std::cell::Cell::new(None) };
}

/// The `stale-correct` plant: the next [`Shared::create`] on this thread finds `data` in its
/// new memory, left there before the poison fill, as an identical earlier case's result would
/// be in a reused allocation.
pub fn plant_stale(data: Vec<Complex32>) {
    STALE.set(Some(data));
}

/// Which side may touch the memory now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    OpenCl,
    Peer,
}

/// What backs a [`Shared`], for release.
#[derive(Debug)]
pub(crate) enum Backing {
    /// A device buffer, the host memory data is staged through, and the peer's own memory
    /// (for a device peer; the host peer works on the staging memory itself).
    Copy {
        buffer: *mut c_void,
        staging: PeerPtr,
        peer_mem: Option<DeviceAlloc>,
    },
    Svm {
        ptr: *mut c_void,
    },
    /// CL_MEM_USE_HOST_PTR over the host's memory or a device runtime's allocation.
    UseHostPtr {
        buffer: *mut c_void,
        host: Option<PeerPtr>,
        alloc: Option<DeviceAlloc>,
    },
    /// A device allocation OpenCL kernels take as an SVM pointer.
    DeviceArg {
        alloc: DeviceAlloc,
    },
    /// A VMM allocation exported as an fd and imported as an OpenCL buffer.
    Imported {
        buffer: *mut c_void,
        alloc: DeviceAlloc,
    },
    /// SVM for OpenCL and the peer's own memory, between which the peer's memcpy moves data.
    SvmMemcpy {
        ptr: *mut c_void,
        peer_mem: DeviceAlloc,
    },
    /// A plain OpenCL buffer whose device address the peer dereferences.
    GpuVa {
        buffer: *mut c_void,
    },
    /// OpenCL SVM mapped into the peer through a dma-buf export and import.
    ClExported {
        ptr: *mut c_void,
        alloc: DeviceAlloc,
    },
    /// Another process's allocation opened through IPC; the exporter holds it until released.
    Ipc {
        alloc: DeviceAlloc,
        exporter: Exporter,
    },
    /// Memory the Vulkan broker exported, imported by OpenCL (`buffer`) and by the peer
    /// (`alloc`, an ImportedExternal mapping); the broker's own allocation is freed last.
    VkImported {
        buffer: *mut c_void,
        alloc: DeviceAlloc,
        memory: ExportedMemory,
        broker: Rc<Broker>,
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
    /// A live clEnqueueSVMMap of this allocation, to unmap.
    pub(crate) svm_mapped: bool,
    /// The semaphore that orders this memory's handovers under the `semaphore` sync, made at
    /// the first one.
    pub(crate) semaphore: Option<crate::sync::SemaphoreLink>,
}

fn device_peer(
    peer: &mut dyn PeerRuntime,
    path: PathKind,
) -> Result<&mut dyn DeviceRuntime, CaseError> {
    let label = peer.peer().label();
    peer.as_device().ok_or_else(|| {
        CaseError::unsupported(format!(
            "path {path} needs a device runtime; {label} has none"
        ))
    })
}

/// clCreateBuffer over memory the peer allocated (CL_MEM_USE_HOST_PTR).
fn wrap_host_ptr(session: &ClSession, addr: usize, bytes: usize) -> Result<*mut c_void, CaseError> {
    // SAFETY: the caller keeps `addr` live for `bytes` until release, which frees the buffer
    // first.
    unsafe {
        cl3::memory::create_buffer(
            session.context.get(),
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            bytes,
            addr as *mut c_void,
        )
    }
    .call("clCreateBuffer(CL_MEM_USE_HOST_PTR)")
    .refused("OpenCL would not wrap the peer's memory")
}

/// cl_khr_external_memory: import the peer's fd (an opaque fd from CUDA, a dma-buf from
/// ROCm) as a buffer of this device.
fn import_fd(
    session: &ClSession,
    fd: OwnedFd,
    kind: ExportHandle,
    bytes: usize,
) -> Result<*mut c_void, CaseError> {
    // cl_khr_external_memory (OpenCL-Headers cl_ext.h).
    const CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR: cl_mem_properties = 0x2060;
    const CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR: cl_mem_properties = 0x2067;
    const CL_MEM_DEVICE_HANDLE_LIST_KHR: cl_mem_properties = 0x2051;
    const CL_MEM_DEVICE_HANDLE_LIST_END_KHR: cl_mem_properties = 0;
    let (handle_type, ext, type_name) = match kind {
        ExportHandle::OpaqueFd => (
            CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR,
            "cl_khr_external_memory_opaque_fd",
            "CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR",
        ),
        ExportHandle::DmaBuf => (
            CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR,
            "cl_khr_external_memory_dma_buf",
            "CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR",
        ),
    };
    for ext in ["cl_khr_external_memory", ext] {
        if !session.has_extension(ext) {
            return Err(CaseError::unsupported(format!(
                "device lacks {ext}, so OpenCL has no way to import the peer's fd"
            )));
        }
    }
    let props: [cl_mem_properties; 6] = [
        handle_type,
        fd.as_raw_fd() as cl_mem_properties,
        CL_MEM_DEVICE_HANDLE_LIST_KHR,
        session.device.id as cl_mem_properties,
        CL_MEM_DEVICE_HANDLE_LIST_END_KHR,
        0,
    ];
    // SAFETY: a zero-terminated property list; no host pointer.
    let buffer = unsafe {
        cl3::memory::create_buffer_with_properties(
            session.context.get(),
            props.as_ptr(),
            CL_MEM_READ_WRITE,
            bytes,
            ptr::null_mut(),
        )
    }
    .call(&format!("clCreateBufferWithProperties({type_name})"))
    .map_err(|e| {
        session.import_refusal(
            e,
            "OpenCL would not import the peer's fd",
            ("CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR", 0x204F),
            (type_name, handle_type as u32),
        )
    })?;
    // A successful import hands the fd to the implementation, as in Vulkan's external-memory
    // model that cl_khr_external_memory follows; closing it here could close the driver's.
    let _ = fd.into_raw_fd();
    Ok(buffer)
}

/// Memory the peer's GPU's Vulkan device exports: one opaque fd imported by the peer, a second
/// by OpenCL (each import owns its fd), both over the broker's one allocation. Anything made
/// before a refusal is undone. OpenCL's import has the allocation's whole size, so that the
/// buffer is the memory object the driver exported, not a part of it.
fn import_vulkan_memory(
    session: &ClSession,
    peer: &mut dyn PeerRuntime,
    len: usize,
) -> Result<(*mut c_void, DeviceAlloc, ExportedMemory, Rc<Broker>), CaseError> {
    let dev = device_peer(peer, PathKind::VkMemoryImport)?;
    let broker = dev.vulkan()?;
    let bytes = len.max(1) * size_of::<Complex32>();
    let memory = broker.memory(bytes as u64)?;
    let alloc = match broker
        .memory_fd(&memory)
        .and_then(|fd| dev.import_memory_fd(fd, memory.size, memory.dedicated, len))
    {
        Ok(a) => a,
        Err(e) => {
            let note = vulkan_memory_note(&broker, &memory_note(&memory));
            broker.free_memory(memory);
            return Err(e.with_note(&note));
        }
    };
    let imported = broker
        .memory_fd(&memory)
        .and_then(|fd| import_fd(session, fd, ExportHandle::OpaqueFd, memory.size as usize));
    match imported {
        Ok(buffer) => Ok((buffer, alloc, memory, broker)),
        Err(e) => {
            let note = vulkan_memory_note(&broker, &memory_note(&memory));
            dev.free(alloc);
            broker.free_memory(memory);
            Err(e.with_note(&note))
        }
    }
}

fn memory_note(m: &ExportedMemory) -> String {
    format!(
        "{} bytes, {}{}",
        m.size,
        m.memory_type,
        if m.dedicated { ", dedicated" } else { "" }
    )
}

/// Which Vulkan device exported what, for a refusal's reason.
fn vulkan_memory_note(broker: &Broker, memory: &str) -> String {
    format!(
        "exported by Vulkan device {} ({}, {}): {memory}",
        broker.survey.name, broker.survey.driver, broker.survey.uuid
    )
}

fn release_buffer(b: *mut c_void) {
    // SAFETY: the caller owns this buffer and is done with it; OpenCL defers the release until
    // queued commands using it are done.
    unsafe {
        let _ = cl3::memory::release_mem_object(b);
    }
}

/// Whether `path` allocates fine-grain SVM (`Some(true)`), coarse-grain (`Some(false)`), or
/// no SVM of its own.
fn svm_fine_grain(path: PathKind) -> Option<bool> {
    match path {
        PathKind::ClSvmFine | PathKind::ClSvmFineMemcpy => Some(true),
        PathKind::ClSvmCoarse | PathKind::ClSvmCoarseMemcpy => Some(false),
        _ => None,
    }
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
fn svm_alloc(session: &ClSession, path: PathKind, bytes: usize) -> Result<*mut c_void, CaseError> {
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

fn svm_free(session: &ClSession, ptr: *mut c_void) {
    // SAFETY: allocated by clSVMAlloc in this context; the caller has drained the queue.
    unsafe {
        let _ = cl3::memory::svm_free(session.context.get(), ptr);
    }
}

/// Seed 001's tokens, which no header defines: asked, and the answer kept for the report.
const SEED_001_TOKENS: [(u32, &str); 2] = [
    (0x4100, "CL_MEM_AMD_GPU_VA"),
    (0x4101, "CL_MEM_LINUX_DMA_BUF_FD_KHR"),
];

/// The device address of `buffer`: asked of the driver with seed 001's tokens, and read from a
/// kernel that writes `(ulong)` of its argument. The kernel's answer is the one used (it is
/// what the hardware dereferences); a token that answers with something else is reported.
fn buffer_address(session: &mut ClSession, buffer: *mut c_void) -> Result<usize, CaseError> {
    let mut answers = Vec::new();
    let mut token_va = None;
    for (token, name) in SEED_001_TOKENS {
        match cl3::memory::get_mem_object_data(buffer, token) {
            Err(code) => answers.push(format!(
                "clGetMemObjectInfo({name} {token:#x}) refused: {}",
                cl_error("clGetMemObjectInfo", code).name
            )),
            Ok(bytes) => {
                let value = bytes
                    .get(..8)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map(u64::from_ne_bytes);
                answers.push(format!(
                    "clGetMemObjectInfo({name} {token:#x}) answered {} bytes: {value:#x?}",
                    bytes.len()
                ));
                if token == 0x4100 {
                    token_va = value;
                }
            }
        }
    }
    let out = DeviceBuffer::new(session, 8)?;
    session
        .launch(
            "buffer_address",
            1,
            &[ClArg::Mem(ClMem::Buffer(buffer)), ClArg::Mem(out.arg())],
            &[],
        )
        .refused("the kernel that reads a buffer's address")?;
    let addr = out.read::<u64>(session, 1)?[0];
    if let Some(va) = token_va.filter(|&va| va != addr) {
        answers.push(format!("the token's {va:#x} is not the kernel's {addr:#x}"));
    }
    session.notes.push(format!(
        "device address {addr:#x} from a kernel; {}",
        answers.join("; ")
    ));
    Ok(addr as usize)
}

impl Shared {
    pub fn bytes(&self) -> usize {
        self.len * size_of::<Complex32>()
    }

    /// The OpenCL buffer of an imported path (another API's export), which OpenCL acquires
    /// before use and releases after.
    pub(crate) fn imported_buffer(&self) -> Option<*mut c_void> {
        match &self.backing {
            Backing::Imported { buffer, .. } | Backing::VkImported { buffer, .. } => Some(*buffer),
            _ => None,
        }
    }

    /// The SVM pointer OpenCL kernels take (null for a buffer object).
    pub(crate) fn cl_svm_ptr(&self) -> *mut c_void {
        match self.cl {
            ClMem::Svm(p) => p,
            ClMem::Buffer(_) => ptr::null_mut(),
        }
    }

    /// Allocate through `path`. A combination the device lacks, or that a call refuses, is
    /// `Unsupported` with the capability or the call and its code.
    pub fn create(
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Self, CaseError> {
        let bytes = len * size_of::<Complex32>();
        let ctx = session.context.get();
        let mut owner = Owner::OpenCl;
        let (cl, peer_ptr, backing) = match path {
            PathKind::Copy => {
                // SAFETY: no host pointer; size is non-zero for len >= 1.
                let buffer = unsafe {
                    cl3::memory::create_buffer(ctx, CL_MEM_READ_WRITE, bytes, ptr::null_mut())
                }
                .call("clCreateBuffer")
                .refused("device buffer for the copy path")?;
                let staging = peer.alloc_host(len)?;
                let peer_mem = match peer.as_device() {
                    Some(d) => match d.alloc(AllocKind::Device, len) {
                        Ok(a) => Some(a),
                        Err(e) => {
                            peer.free_host(staging);
                            // SAFETY: created above, unused.
                            unsafe {
                                let _ = cl3::memory::release_mem_object(buffer);
                            }
                            return Err(e);
                        }
                    },
                    None => None,
                };
                let peer_ptr = peer_mem.as_ref().map_or(staging, |a| a.ptr);
                (
                    ClMem::Buffer(buffer),
                    peer_ptr,
                    Backing::Copy {
                        buffer,
                        staging,
                        peer_mem,
                    },
                )
            }
            PathKind::ClSvmCoarse | PathKind::ClSvmFine => {
                let p = svm_alloc(session, path, bytes)?;
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
                let buffer = match wrap_host_ptr(session, host.addr, bytes) {
                    Ok(b) => b,
                    Err(e) => {
                        peer.free_host(host);
                        return Err(e);
                    }
                };
                (
                    ClMem::Buffer(buffer),
                    host,
                    Backing::UseHostPtr {
                        buffer,
                        host: Some(host),
                        alloc: None,
                    },
                )
            }
            PathKind::PinnedUseHostPtr
            | PathKind::DeviceUseHostPtr
            | PathKind::ManagedUseHostPtr => {
                let kind = match path {
                    PathKind::PinnedUseHostPtr => AllocKind::PinnedHost,
                    PathKind::DeviceUseHostPtr => AllocKind::Device,
                    _ => AllocKind::Managed,
                };
                let dev = device_peer(peer, path)?;
                let alloc = dev.alloc(kind, len)?;
                let buffer = match wrap_host_ptr(session, alloc.ptr.addr, bytes) {
                    Ok(b) => b,
                    Err(e) => {
                        dev.free(alloc);
                        return Err(e);
                    }
                };
                let p = alloc.ptr;
                (
                    ClMem::Buffer(buffer),
                    p,
                    Backing::UseHostPtr {
                        buffer,
                        host: None,
                        alloc: Some(alloc),
                    },
                )
            }
            PathKind::DevicePtrAsClArg => {
                let alloc = device_peer(peer, path)?.alloc(AllocKind::Device, len)?;
                let p = alloc.ptr;
                (
                    ClMem::Svm(p.addr as *mut c_void),
                    p,
                    Backing::DeviceArg { alloc },
                )
            }
            PathKind::VmmFdClImport => {
                let dev = device_peer(peer, path)?;
                let alloc = dev.alloc(AllocKind::Exportable, len)?;
                let kind = dev.export_handle();
                let imported = dev
                    .export_fd(&alloc)
                    .and_then(|fd| import_fd(session, fd, kind, alloc.bytes));
                let buffer = match imported {
                    Ok(b) => b,
                    Err(e) => {
                        dev.free(alloc);
                        return Err(e);
                    }
                };
                // Imported memory starts out owned by its exporter: OpenCL must acquire it.
                owner = Owner::Peer;
                let p = alloc.ptr;
                (
                    ClMem::Buffer(buffer),
                    PeerPtr { addr: p.addr, len },
                    Backing::Imported { buffer, alloc },
                )
            }
            PathKind::ClSvmCoarseMemcpy | PathKind::ClSvmFineMemcpy => {
                let dev = device_peer(peer, path)?;
                let ptr = svm_alloc(session, path, bytes)?;
                let peer_mem = match dev.alloc(AllocKind::Device, len) {
                    Ok(a) => a,
                    Err(e) => {
                        svm_free(session, ptr);
                        return Err(e);
                    }
                };
                let p = peer_mem.ptr;
                (ClMem::Svm(ptr), p, Backing::SvmMemcpy { ptr, peer_mem })
            }
            PathKind::ClGpuVa => {
                device_peer(peer, path)?;
                // SAFETY: no host pointer.
                let buffer = unsafe {
                    cl3::memory::create_buffer(ctx, CL_MEM_READ_WRITE, bytes, ptr::null_mut())
                }
                .call("clCreateBuffer")
                .refused("device buffer for the GPU-VA path")?;
                let addr = match buffer_address(session, buffer) {
                    Ok(a) => a,
                    Err(e) => {
                        release_buffer(buffer);
                        return Err(e);
                    }
                };
                (
                    ClMem::Buffer(buffer),
                    PeerPtr { addr, len },
                    Backing::GpuVa { buffer },
                )
            }
            PathKind::ClDmabufHipImport => {
                let dev = device_peer(peer, path)?;
                // Coarse-grain SVM: ROCm places it in VRAM, an allocation the HSA runtime
                // knows and can export (fine-grain SVM is system memory).
                let ptr = svm_alloc(session, PathKind::ClSvmCoarse, bytes)?;
                let alloc = match dev.import_cl_memory(ptr as usize, bytes, len) {
                    Ok(a) => a,
                    Err(e) => {
                        svm_free(session, ptr);
                        return Err(e);
                    }
                };
                let p = alloc.ptr;
                (ClMem::Svm(ptr), p, Backing::ClExported { ptr, alloc })
            }
            PathKind::VkMemoryImport => {
                let (buffer, alloc, memory, broker) = import_vulkan_memory(session, peer, len)?;
                // Imported memory starts out owned by its exporter: OpenCL must acquire it.
                owner = Owner::Peer;
                let p = alloc.ptr;
                (
                    ClMem::Buffer(buffer),
                    p,
                    Backing::VkImported {
                        buffer,
                        alloc,
                        memory,
                        broker,
                    },
                )
            }
            PathKind::IpcDevicePtrAsClArg => {
                let dev = device_peer(peer, path)?;
                let exe = std::env::current_exe().map_err(|e| {
                    CaseError::unsupported(format!(
                        "no path to this executable for the exporter: {e}"
                    ))
                })?;
                let (exporter, handle) = Exporter::spawn(exe, &dev.reopen_args(), len)?;
                let alloc = dev.ipc_open(&handle, len)?;
                let p = alloc.ptr;
                (
                    ClMem::Svm(p.addr as *mut c_void),
                    p,
                    Backing::Ipc { alloc, exporter },
                )
            }
        };
        let shared = Shared {
            path,
            len,
            cl,
            peer: peer_ptr,
            backing,
            owner,
            mapped: None,
            svm_mapped: false,
            semaphore: None,
        };
        shared.announce();
        if let Some(stale) = STALE.take()
            && let Err(e) = shared.leave_stale(session, peer, &stale)
        {
            let _ = shared.release(session, peer);
            return Err(e);
        }
        match shared.poison(session, peer) {
            Ok(()) => Ok(shared),
            Err(e) => {
                let _ = shared.release(session, peer);
                Err(e)
            }
        }
    }

    /// Tells a watching parent where this memory lies, so that a page fault that kills the
    /// process can still be placed in (or near) it.
    fn announce(&self) {
        let what = match &self.backing {
            Backing::Copy { .. } => "the peer's copy-path memory",
            Backing::Svm { .. } => match self.path {
                PathKind::ClSvmFine => "fine-grain SVM",
                _ => "coarse-grain SVM",
            },
            Backing::UseHostPtr { .. } => "memory under CL_MEM_USE_HOST_PTR",
            Backing::DeviceArg { .. } => "device allocation passed as an SVM pointer",
            Backing::Imported { .. } => "exported allocation imported by OpenCL",
            Backing::SvmMemcpy { .. } => "peer memory filled by memcpy from SVM",
            Backing::GpuVa { .. } => "buffer at its kernel-read device address",
            Backing::ClExported { .. } => "OpenCL SVM imported by the peer",
            Backing::Ipc { .. } => "IPC-opened allocation of the exporter process",
            Backing::VkImported { .. } => "Vulkan memory imported by OpenCL and the peer",
        };
        let bytes = self.bytes() as u64;
        crate::fault::announce(crate::fault::BufferSpan {
            name: format!("{} shared memory ({what})", self.path),
            addr: self.peer.addr as u64,
            bytes,
        });
        let svm = self.cl_svm_ptr() as u64;
        if svm != 0 && svm != self.peer.addr as u64 {
            crate::fault::announce(crate::fault::BufferSpan {
                name: format!("{} OpenCL SVM", self.path),
                addr: svm,
                bytes,
            });
        }
    }

    /// Fills every allocation behind this memory with [`POISON_WORD`] through the API that
    /// allocated it, and waits for both sides: the case's own steps and syncs start after it.
    /// Memory a side only borrows is left to its owner: OpenCL does not fill a raw device
    /// pointer or imported memory it has not acquired, and the peer does not write memory it
    /// reaches only through an address OpenCL handed out (`cl-gpu-va`, SVM), which it may be
    /// unable to touch at all: that is what those cases find out.
    fn poison(&self, session: &ClSession, peer: &mut dyn PeerRuntime) -> Result<(), CaseError> {
        let (cl_owned, peer_owned) = self.own_allocations();
        if let Some(mem) = cl_owned {
            session
                .fill(mem, self.bytes(), POISON_WORD)
                .and_then(|()| session.finish())
                .refused("OpenCL would not fill new memory with the poison pattern")?;
        }
        if let Some(p) = peer_owned {
            peer.upload(p, &poison_vec(p.len))?;
            peer.synchronize()?;
        }
        Ok(())
    }

    /// The allocations behind this memory that each side made itself (OpenCL's, the peer's):
    /// what [`Shared::poison`] fills, each through its own side.
    fn own_allocations(&self) -> (Option<ClMem>, Option<PeerPtr>) {
        let cl_owned = match &self.backing {
            Backing::Copy { buffer, .. }
            | Backing::UseHostPtr { buffer, .. }
            | Backing::GpuVa { buffer } => Some(ClMem::Buffer(*buffer)),
            Backing::Svm { ptr }
            | Backing::SvmMemcpy { ptr, .. }
            | Backing::ClExported { ptr, .. } => Some(ClMem::Svm(*ptr)),
            Backing::DeviceArg { .. }
            | Backing::Imported { .. }
            | Backing::Ipc { .. }
            | Backing::VkImported { .. } => None,
        };
        let peer_owned = match &self.backing {
            Backing::Copy { .. }
            | Backing::UseHostPtr { .. }
            | Backing::DeviceArg { .. }
            | Backing::Imported { .. }
            | Backing::Ipc { .. }
            | Backing::VkImported { .. } => Some(self.peer),
            Backing::SvmMemcpy { peer_mem, .. } => Some(peer_mem.ptr),
            Backing::Svm { .. } | Backing::GpuVa { .. } | Backing::ClExported { .. } => None,
        };
        (cl_owned, peer_owned)
    }

    /// The `stale-correct` plant: `data` written into every allocation the poison fill then
    /// covers, through the same side, as a reused allocation holds an earlier case's result.
    fn leave_stale(
        &self,
        session: &ClSession,
        peer: &mut dyn PeerRuntime,
        data: &[Complex32],
    ) -> Result<(), CaseError> {
        let (cl_owned, peer_owned) = self.own_allocations();
        if let Some(mem) = cl_owned {
            let bytes = std::mem::size_of_val(data).min(self.bytes());
            let src = data.as_ptr().cast::<c_void>();
            let queue = session.queue.get();
            // SAFETY: blocking copies of at most the allocation's size from a live slice.
            let ev = unsafe {
                match mem {
                    ClMem::Buffer(b) => cl3::command_queue::enqueue_write_buffer(
                        queue,
                        b,
                        cl3::types::CL_TRUE,
                        0,
                        bytes,
                        src,
                        0,
                        ptr::null(),
                    )
                    .call("clEnqueueWriteBuffer"),
                    ClMem::Svm(p) => cl3::command_queue::enqueue_svm_mem_cpy(
                        queue,
                        cl3::types::CL_TRUE,
                        p,
                        src,
                        bytes,
                        0,
                        ptr::null(),
                    )
                    .call("clEnqueueSVMMemcpy"),
                }
            }
            .refused("OpenCL would not write the planted stale data")?;
            drop(ClEvent(ev));
        }
        if let Some(p) = peer_owned {
            peer.upload(p, &data[..p.len.min(data.len())])?;
            peer.synchronize()?;
        }
        Ok(())
    }

    /// Wait for both sides to let go (whatever the sync mode under test did), undo any mapping
    /// or acquisition, and free. Errors here are reported but cannot change a verdict already
    /// reached.
    pub fn release(self, session: &ClSession, peer: &mut dyn PeerRuntime) -> Result<(), CaseError> {
        let queue = session.queue.get();
        let mut first_err = session.finish().running().err();
        if let Err(e) = peer.synchronize() {
            first_err.get_or_insert(e);
        }
        if let (Some(mapped), Backing::UseHostPtr { buffer, .. }) = (self.mapped, &self.backing) {
            // SAFETY: `mapped` came from clEnqueueMapBuffer on this buffer.
            let r = unsafe {
                cl3::command_queue::enqueue_unmap_mem_object(queue, *buffer, mapped, 0, ptr::null())
            };
            match r {
                Ok(ev) => drop(ClEvent(ev)),
                Err(code) => {
                    first_err.get_or_insert(CaseError::Broken(cl_error(
                        "clEnqueueUnmapMemObject",
                        code,
                    )));
                }
            }
        }
        // An SVM allocation still mapped must be unmapped before it is freed.
        if self.svm_mapped {
            // SAFETY: mapped by sync::to_peer on this queue.
            let unmapped = unsafe {
                cl3::command_queue::enqueue_svm_unmap(queue, self.cl_svm_ptr(), 0, ptr::null())
            };
            if let Ok(ev) = unmapped {
                drop(ClEvent(ev));
            }
        }
        // Imported memory acquired by OpenCL goes back to its exporter before it is freed.
        if let (Owner::OpenCl, Some(buffer)) = (self.owner, self.imported_buffer())
            && let Err(e) = crate::sync::release_external(session, buffer, &[])
        {
            first_err.get_or_insert(e);
        }
        if let Err(e) = session.finish().running() {
            first_err.get_or_insert(e);
        }
        // Both sides are idle: the semaphore can go before the memory it ordered.
        if let Some(link) = self.semaphore {
            link.release(peer);
        }
        match self.backing {
            Backing::Copy {
                buffer,
                staging,
                peer_mem,
            } => {
                release_buffer(buffer);
                peer.free_host(staging);
                if let (Some(a), Some(d)) = (peer_mem, peer.as_device()) {
                    d.free(a);
                }
            }
            Backing::Svm { ptr } => svm_free(session, ptr),
            Backing::UseHostPtr {
                buffer,
                host,
                alloc,
            } => {
                // The buffer goes first: the runtime may still reference the memory.
                release_buffer(buffer);
                if let Some(h) = host {
                    peer.free_host(h);
                }
                if let (Some(a), Some(d)) = (alloc, peer.as_device()) {
                    d.free(a);
                }
            }
            Backing::DeviceArg { alloc } => {
                if let Some(d) = peer.as_device() {
                    d.free(alloc);
                }
            }
            Backing::Imported { buffer, alloc } => {
                release_buffer(buffer);
                if let Some(d) = peer.as_device() {
                    d.free(alloc);
                }
            }
            Backing::SvmMemcpy { ptr, peer_mem } => {
                svm_free(session, ptr);
                if let Some(d) = peer.as_device() {
                    d.free(peer_mem);
                }
            }
            Backing::GpuVa { buffer } => release_buffer(buffer),
            Backing::ClExported { ptr, alloc } => {
                // The importer's mapping goes before the memory it maps.
                if let Some(d) = peer.as_device() {
                    d.free(alloc);
                }
                svm_free(session, ptr);
            }
            Backing::Ipc { alloc, exporter } => {
                if let Some(d) = peer.as_device() {
                    d.free(alloc);
                }
                if let Err(e) = exporter.finish() {
                    first_err.get_or_insert(e);
                }
            }
            Backing::VkImported {
                buffer,
                alloc,
                memory,
                broker,
            } => {
                // Both importers let go before the exporter frees what they mapped.
                release_buffer(buffer);
                if let Some(d) = peer.as_device() {
                    d.free(alloc);
                }
                broker.free_memory(memory);
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
        let b = DeviceBuffer { mem, bytes };
        // Poisoned, as shared memory is: a read-back whose kernel never ran must not find an
        // earlier case's result in reused memory. In order on the queue, so no wait is needed.
        session
            .fill(b.arg(), bytes.max(4), POISON_WORD)
            .refused("OpenCL would not fill a new buffer")?;
        Ok(b)
    }

    pub fn with_data<T: Copy>(session: &ClSession, data: &[T]) -> Result<Self, CaseError> {
        let b = Self::new(session, std::mem::size_of_val(data))?;
        b.write(session, data)?;
        Ok(b)
    }

    /// A buffer of the harness's bookkeeping (a check kernel's counters) holding `words`, read
    /// back at once. A driver that drops or garbles the write would otherwise show only later,
    /// as counters that make no sense: what it left there instead is its failure, named by
    /// word (`names`, one per word). Before the case's first step, so the read adds no sync.
    pub fn with_words_read_back(
        session: &ClSession,
        what: &str,
        names: &[&str],
        words: &[u32],
    ) -> Result<Self, CaseError> {
        let b = Self::with_data(session, words)?;
        let read: Vec<u32> = b.read(session, words.len())?;
        written_as_asked(what, names, words, &read).map_err(CaseError::Mismatch)?;
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

    /// Blocking read of `len` elements after all queued work. While the peer's queue is
    /// watched (a semaphore handover is in the case), the host polls instead of blocking.
    pub fn read<T: Copy + Default>(
        &self,
        session: &ClSession,
        len: usize,
    ) -> Result<Vec<T>, CaseError> {
        let mut out = vec![T::default(); len];
        let bytes = std::mem::size_of_val(out.as_slice());
        assert!(bytes <= self.bytes, "read past the buffer");
        let watched = crate::blocking::watching();
        let blocking = if watched {
            cl3::types::CL_FALSE
        } else {
            cl3::types::CL_TRUE
        };
        // SAFETY: a read into a live vector of exactly `bytes`, which is not touched (nor
        // freed: see below) until the read is complete.
        let ev = unsafe {
            cl3::command_queue::enqueue_read_buffer(
                session.queue.get(),
                self.mem,
                blocking,
                0,
                bytes,
                out.as_mut_ptr() as *mut c_void,
                0,
                ptr::null(),
            )
        }
        .call("clEnqueueReadBuffer")
        .running()?;
        let ev = crate::runtimes::opencl::ClEvent(ev);
        if watched && let Err(e) = wait_watching_peer(&ev) {
            // The read may still land one day: its destination must outlive the worker,
            // which exits after this case.
            std::mem::forget(out);
            std::mem::forget(ev);
            return Err(e);
        }
        Ok(out)
    }
}

/// Wait for `ev` while watching the peer's stream ([`crate::blocking::PeerWatch`]).
fn wait_watching_peer(ev: &crate::runtimes::opencl::ClEvent) -> Result<(), CaseError> {
    let mut watch = crate::blocking::PeerWatch::start();
    loop {
        let status =
            cl3::event::get_event_info(ev.0, cl3::event::CL_EVENT_COMMAND_EXECUTION_STATUS)
                .call("clGetEventInfo")
                .running()?;
        match status {
            cl3::info_type::InfoType::Int(s) if s == cl3::event::CL_COMPLETE => return Ok(()),
            cl3::info_type::InfoType::Int(s) if s < 0 => {
                let mut e = crate::runtimes::opencl::cl_error("clEnqueueReadBuffer", s);
                e.detail = "the read's event ended in this error".into();
                return Err(if e.is_device_fault() {
                    CaseError::Fault(e)
                } else {
                    CaseError::Broken(e)
                });
            }
            _ => {}
        }
        watch.check()?;
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// `read`, what a buffer held after clEnqueueWriteBuffer of `wrote`, against `wrote`: the
/// first differing word named (`names`), with what was asked and what was read.
pub fn written_as_asked(
    what: &str,
    names: &[&str],
    wrote: &[u32],
    read: &[u32],
) -> Result<(), Box<crate::model::Mismatch>> {
    let differ = |i: usize| read.get(i) != Some(&wrote[i]);
    let Some(first) = (0..wrote.len()).find(|&i| differ(i)) else {
        return Ok(());
    };
    let name = names.get(first).copied().unwrap_or("word");
    Err(Box::new(crate::model::Mismatch {
        what: format!(
            "{what}, read back after clEnqueueWriteBuffer (word {first} is the {name}): the driver did not write what it was given"
        ),
        index: first,
        got: read
            .get(first)
            .map_or_else(|| "nothing".into(), |w| format!("{w:#010x}")),
        want: format!("{:#010x}", wrote[first]),
        count: (0..wrote.len()).filter(|&i| differ(i)).count(),
        len: wrote.len(),
        max_abs_err: f64::NAN,
        max_rel_err: f64::NAN,
        bound: 0.0,
        formula: crate::model::BIT_EXACT.into(),
    }))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the runner decides from the probe and what a worker's allocation meets are this one
    /// text, so a case decided without a worker reads as it would have from one.
    #[test]
    fn svm_refusal_names_the_missing_kind_for_svm_paths_only() {
        let coarse_only = SvmCaps {
            coarse_grain_buffer: true,
            ..SvmCaps::default()
        };
        let refused = svm_refusal(PathKind::ClSvmFine, &coarse_only).unwrap();
        assert_eq!(
            refused,
            "device lacks fine-grain buffer SVM (CL_DEVICE_SVM_CAPABILITIES: coarse buffer yes, fine buffer no, fine system no, atomics no)"
        );
        assert!(svm_refusal(PathKind::ClSvmFineMemcpy, &coarse_only).is_some());
        assert!(svm_refusal(PathKind::ClSvmCoarse, &coarse_only).is_none());
        assert!(svm_refusal(PathKind::ClSvmCoarseMemcpy, &coarse_only).is_none());
        let none = SvmCaps::default();
        assert!(
            svm_refusal(PathKind::ClSvmCoarse, &none)
                .unwrap()
                .contains("coarse-grain")
        );
        for other in [PathKind::Copy, PathKind::UseHostPtr, PathKind::ClGpuVa] {
            assert_eq!(svm_refusal(other, &none), None, "{other}");
        }
    }

    /// A NULL from clSVMAlloc of a kind the device advertises (svm_refusal let it through) is
    /// the driver's failure, fine- or coarse-grain; only a size the device never promised stays
    /// unsupported.
    #[test]
    fn an_advertised_svm_kind_that_allocates_null_fails() {
        let fail = |e: CaseError| match e.into_outcome() {
            o @ crate::model::Outcome::Fail { .. } => o.reason(),
            other => panic!("not a fail: {other:?}"),
        };
        assert_eq!(
            fail(svm_null(true, 8192, 0x401, Some(1 << 30))),
            "clSVMAlloc(CL_MEM_SVM_FINE_GRAIN_BUFFER) returned NULL (0): 8192 bytes, flags 0x401, although CL_DEVICE_SVM_CAPABILITIES advertises CL_DEVICE_SVM_FINE_GRAIN_BUFFER"
        );
        let coarse = fail(svm_null(false, 8192, 0x1, None));
        assert!(
            coarse.contains("advertises CL_DEVICE_SVM_COARSE_GRAIN_BUFFER"),
            "{coarse}"
        );
        match svm_null(true, 1 << 31, 0x401, Some(1 << 30)) {
            CaseError::Unsupported { reason, error } => {
                assert!(reason.contains("CL_DEVICE_MAX_MEM_ALLOC_SIZE"), "{reason}");
                assert_eq!(error.map(|e| e.name), Some("NULL".into()));
            }
            other => panic!("{other:?}"),
        }
    }
}
