//! A GPU participant's memory, written once: which calls each allocation kind takes and how it
//! is released, what is checked before an export, an IPC handle or a semaphore, and the undoing
//! of a half-made VMM mapping. The backend supplies [`GpuMemory`]: one API call a method (cuda:
//! the driver API; hip: libamdhip64), with its own refusal text beside the call.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;

use num_complex::Complex32;

use super::GpuCore;
use crate::model::{ApiError, CaseError};
use crate::runtimes::device::{AllocKind, DeviceAlloc, ExportHandle, IpcHandle};
use crate::runtimes::vulkan::Broker;
use crate::runtimes::{PeerPtr, PeerRuntime};

/// Symbols a runtime may lack: HIP loads them as optional groups; CUDA's driver API has them
/// all, so its [`GpuMemory::require`] is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Optional {
    Ipc,
    ExternalSemaphore,
    ExternalMemory,
}

/// The memory calls of a GPU runtime. Addresses are `usize` and handles `u64`, as
/// [`DeviceAlloc`] keeps them; the backend casts to its own types. Calls whose failure is a
/// refusal of the combination return `CaseError` with the backend's words; calls whose failure
/// the caller weighs (a release, an undo) return the `ApiError`.
pub(crate) trait GpuMemory: GpuCore {
    /// What kind of fd [`GpuMemory::export_shareable_fd`] gives.
    const EXPORT_HANDLE: ExportHandle;
    /// The call behind `export_shareable_fd`, named when it gives no fd.
    const EXPORT_CALL: &'static str;
    /// The call behind `ipc_get_handle`, named when an allocation has no IPC handle.
    const IPC_GET_CALL: &'static str;
    /// The call behind `enqueue_wait`, named when a case may hang behind it.
    const SEMAPHORE_WAIT_CALL: &'static str;

    /// Refuse, before any call, what the loaded library does not export.
    fn require(&self, _what: Optional) -> Result<(), CaseError> {
        Ok(())
    }

    fn alloc_device(&self, bytes: usize) -> Result<usize, CaseError>;
    /// Page-locked host memory, mapped into the device's address space.
    fn alloc_pinned(&self, bytes: usize) -> Result<usize, CaseError>;
    fn has_managed_memory(&self) -> Result<bool, CaseError>;
    /// Bytes free on the device now, and its total (cuMemGetInfo / hipMemGetInfo).
    fn device_memory(&self) -> Result<(usize, usize), CaseError>;
    fn alloc_managed(&self, bytes: usize) -> Result<usize, CaseError>;
    /// An `Exportable` allocation of at least `bytes` with a POSIX-fd shareable handle: the
    /// backend's VMM check, allocation properties, granularity and create, then
    /// [`map_exportable`].
    fn alloc_exportable(&self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError>;

    /// A reservation of `size` bytes of address space, anywhere.
    fn vmm_reserve(&self, size: usize) -> Result<usize, ApiError>;
    fn vmm_map(&self, va: usize, size: usize, handle: u64) -> Result<(), ApiError>;
    /// Read/write access for this device over the mapping.
    fn vmm_set_access(&self, va: usize, size: usize) -> Result<(), ApiError>;
    fn vmm_unmap(&self, va: usize, size: usize) -> Result<(), ApiError>;
    fn vmm_address_free(&self, va: usize, size: usize) -> Result<(), ApiError>;
    fn vmm_release(&self, handle: u64) -> Result<(), ApiError>;

    /// Page-lock `bytes` of pageable host memory at `addr` and map them for the device.
    fn host_register(&self, addr: usize, bytes: usize) -> Result<(), CaseError>;
    /// The device pointer of registered host memory at `addr`.
    fn host_device_pointer(&self, addr: usize) -> Result<usize, CaseError>;
    fn host_unregister(&self, addr: usize) -> Result<(), ApiError>;

    fn free_device(&self, addr: usize) -> Result<(), ApiError>;
    fn free_pinned(&self, addr: usize) -> Result<(), ApiError>;
    fn ipc_close(&self, addr: usize) -> Result<(), ApiError>;
    fn destroy_external_memory(&self, handle: u64) -> Result<(), ApiError>;

    /// The POSIX fd of a VMM allocation handle, as the call wrote it (negative: none).
    fn export_shareable_fd(&self, handle: u64) -> Result<RawFd, CaseError>;
    fn ipc_get_handle(&self, addr: usize) -> Result<IpcHandle, CaseError>;
    /// Another process's `Device` allocation, opened with lazy peer access; its address.
    fn ipc_open_handle(&self, handle: &IpcHandle) -> Result<usize, CaseError>;
    /// An external semaphore from an opaque fd; its handle.
    fn import_semaphore(&self, fd: RawFd) -> Result<u64, CaseError>;
    fn destroy_semaphore_handle(&self, sem: u64) -> Result<(), ApiError>;
    /// Enqueues a signal of an imported binary semaphore on the peer's stream, after the work
    /// enqueued before it.
    fn enqueue_signal(&self, sem: u64) -> Result<(), CaseError>;
    /// Enqueues a wait for an imported binary semaphore on the peer's stream: the work
    /// enqueued after it runs once the semaphore is signalled.
    fn enqueue_wait(&self, sem: u64) -> Result<(), CaseError>;
    /// Another API's memory, exported as an opaque fd of `size` bytes (`dedicated`: allocated
    /// for one resource), imported and mapped as a buffer of its first `bytes`: the mapped
    /// address and the external-memory object. The import owns `fd` once it accepts it; a
    /// refused one closes it.
    fn import_memory(
        &self,
        fd: OwnedFd,
        size: u64,
        dedicated: bool,
        bytes: usize,
    ) -> Result<(usize, u64), CaseError>;

    /// The runtime's synchronous copy, the direction inferred from the pointers
    /// ([`DeviceRuntime::memcpy`](crate::runtimes::device::DeviceRuntime::memcpy)).
    fn copy_inferred(&self, dst: usize, src: usize, bytes: usize) -> Result<(), CaseError>;
    /// Memory OpenCL allocated (an SVM pointer of `bytes`) mapped into this runtime through an
    /// external-memory import: the mapped address and the external-memory object.
    fn import_cl(&mut self, addr: usize, bytes: usize) -> Result<(usize, u64), CaseError>;
}

pub(crate) fn allocate(
    g: &impl GpuMemory,
    kind: AllocKind,
    len: usize,
) -> Result<DeviceAlloc, CaseError> {
    g.bind()?;
    let bytes = len.max(1) * size_of::<Complex32>();
    let plain = |addr: usize| DeviceAlloc::new(kind, addr, len, 0);
    match kind {
        AllocKind::Device => Ok(plain(g.alloc_device(bytes)?)),
        AllocKind::PinnedHost => Ok(plain(g.alloc_pinned(bytes)?)),
        AllocKind::Managed => {
            if !g.has_managed_memory()? {
                return Err(CaseError::unsupported("device has no managed memory"));
            }
            // Oversubscribed managed memory can hang the GPU, not only this process: never ask
            // for more than is free on the device now.
            let (free, _) = g.device_memory()?;
            if bytes > free {
                return Err(CaseError::unsupported(format!(
                    "managed allocation of {bytes} bytes exceeds the {free} bytes free"
                )));
            }
            Ok(plain(g.alloc_managed(bytes)?))
        }
        AllocKind::Exportable => g.alloc_exportable(bytes, len),
        AllocKind::ImportedExternal | AllocKind::IpcOpened | AllocKind::Registered => {
            Err(CaseError::unsupported(format!(
                "{kind:?} memory is not allocated: it comes from import_cl_memory, ipc_open or \
                 register_host"
            )))
        }
    }
}

/// Reserve `size` bytes of address space, map the VMM allocation `handle` at its start and open
/// it for read/write by this device. Any step refused undoes the ones before it and releases
/// `handle`; the refusal is the backend's to word.
pub(crate) fn map_exportable(
    g: &impl GpuMemory,
    size: usize,
    handle: u64,
    len: usize,
) -> Result<DeviceAlloc, ApiError> {
    let (mut va, mut reserved, mut mapped) = (0, false, false);
    let made = g
        .vmm_reserve(size)
        .map(|at| {
            va = at;
            reserved = true;
        })
        .and_then(|()| g.vmm_map(va, size, handle))
        .inspect(|()| mapped = true)
        .and_then(|()| g.vmm_set_access(va, size));
    if let Err(e) = made {
        // Undo exactly the steps that succeeded, in reverse; their own errors add nothing.
        if mapped {
            let _ = g.vmm_unmap(va, size);
        }
        if reserved {
            let _ = g.vmm_address_free(va, size);
        }
        let _ = g.vmm_release(handle);
        return Err(e);
    }
    Ok(sized(AllocKind::Exportable, va, len, handle, size))
}

/// An allocation of `bytes` the runtime decided (a VMM granularity, an import's size), unlike
/// [`DeviceAlloc::new`]'s.
fn sized(kind: AllocKind, addr: usize, len: usize, handle: u64, bytes: usize) -> DeviceAlloc {
    DeviceAlloc {
        kind,
        ptr: PeerPtr { addr, len },
        handle,
        bytes,
    }
}

/// OpenCL's allocation at `addr`, imported; `len` is the element count its pointer carries.
pub(crate) fn import_cl_memory(
    g: &mut impl GpuMemory,
    addr: usize,
    bytes: usize,
    len: usize,
) -> Result<DeviceAlloc, CaseError> {
    let (mapped, ext) = g.import_cl(addr, bytes)?;
    Ok(sized(AllocKind::ImportedExternal, mapped, len, ext, bytes))
}

/// Host memory at `addr` registered and mapped for the device, with its device pointer; a
/// registration whose device pointer is refused is undone.
pub(crate) fn register_host(
    g: &impl GpuMemory,
    addr: usize,
    len: usize,
) -> Result<DeviceAlloc, CaseError> {
    g.bind()?;
    let bytes = len.max(1) * size_of::<Complex32>();
    g.host_register(addr, bytes)?;
    match g.host_device_pointer(addr) {
        Ok(device) => Ok(DeviceAlloc::new(
            AllocKind::Registered,
            device,
            len,
            addr as u64,
        )),
        Err(e) => {
            let _ = g.host_unregister(addr);
            Err(e)
        }
    }
}

/// Each kind released by the calls that pair with its allocation, once.
pub(crate) fn release<G: GpuMemory + PeerRuntime>(g: &G, alloc: DeviceAlloc) {
    if g.bind().is_err() {
        return;
    }
    let (p, size) = (alloc.ptr.addr, alloc.bytes);
    let freed = match alloc.kind {
        AllocKind::Device | AllocKind::Managed => g.free_device(p),
        AllocKind::PinnedHost => g.free_pinned(p),
        AllocKind::Exportable => {
            let unmapped = g.vmm_unmap(p, size);
            let unreserved = g.vmm_address_free(p, size);
            let released = g.vmm_release(alloc.handle);
            unmapped.and(unreserved).and(released)
        }
        AllocKind::IpcOpened => g.ipc_close(p),
        // The registration goes; the host memory is the caller's to free.
        AllocKind::Registered => g.host_unregister(alloc.handle as usize),
        // The mapped buffer is freed as device memory, then the external-memory object is
        // destroyed (cuExternalMemoryGetMappedBuffer's documentation; clr's ihipFree).
        AllocKind::ImportedExternal => {
            let unmapped = g.free_device(p);
            let destroyed = g.destroy_external_memory(alloc.handle);
            unmapped.and(destroyed)
        }
    };
    // The trait gives free no error channel; a failing free is still worth a line in the
    // worker's stderr (after a fault, every call fails with the sticky error).
    if let Err(e) = freed {
        eprintln!(
            "clhip {}: freeing {:?} at {p:#x}: {e}",
            g.peer().label(),
            alloc.kind
        );
    }
}

pub(crate) fn export_fd<G: GpuMemory>(g: &G, alloc: &DeviceAlloc) -> Result<OwnedFd, CaseError> {
    alloc.require(AllocKind::Exportable, "a shareable handle")?;
    g.bind()?;
    let fd = g.export_shareable_fd(alloc.handle)?;
    if fd < 0 {
        return Err(CaseError::unsupported(format!(
            "{} gave no fd",
            G::EXPORT_CALL
        )));
    }
    // SAFETY: a fresh fd from the runtime, owned by the caller from now on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn ipc_handle<G: GpuMemory>(g: &G, alloc: &DeviceAlloc) -> Result<IpcHandle, CaseError> {
    let what = format!("an IPC handle ({})", G::IPC_GET_CALL);
    alloc.require(AllocKind::Device, &what)?;
    g.require(Optional::Ipc)?;
    g.bind()?;
    g.ipc_get_handle(alloc.ptr.addr)
}

pub(crate) fn ipc_open(
    g: &impl GpuMemory,
    handle: &IpcHandle,
    len: usize,
) -> Result<DeviceAlloc, CaseError> {
    g.require(Optional::Ipc)?;
    g.bind()?;
    let addr = g.ipc_open_handle(handle)?;
    Ok(DeviceAlloc::new(AllocKind::IpcOpened, addr, len, 0))
}

/// The fd stays the caller's when the import is refused; the caller passes a dup of its own.
pub(crate) fn import_semaphore_fd(g: &impl GpuMemory, fd: RawFd) -> Result<u64, CaseError> {
    if fd < 0 {
        return Err(CaseError::unsupported(format!(
            "no fd to import as a semaphore ({fd})"
        )));
    }
    g.require(Optional::ExternalSemaphore)?;
    g.bind()?;
    g.import_semaphore(fd)
}

pub(crate) fn signal_semaphore(g: &impl GpuMemory, sem: u64) -> Result<(), CaseError> {
    g.require(Optional::ExternalSemaphore)?;
    g.bind()?;
    g.enqueue_signal(sem)
}

pub(crate) fn wait_semaphore(g: &impl GpuMemory, sem: u64) -> Result<(), CaseError> {
    g.require(Optional::ExternalSemaphore)?;
    g.bind()?;
    g.enqueue_wait(sem)
}

/// Another API's opaque-fd export of `size` bytes, its first `len` elements mapped; freed as
/// any imported memory is (the mapping, then the external-memory object).
pub(crate) fn import_memory_fd(
    g: &impl GpuMemory,
    fd: OwnedFd,
    size: u64,
    dedicated: bool,
    len: usize,
) -> Result<DeviceAlloc, CaseError> {
    g.require(Optional::ExternalMemory)?;
    g.bind()?;
    let bytes = len.max(1) * size_of::<Complex32>();
    if bytes as u64 > size {
        return Err(CaseError::unsupported(format!(
            "{bytes} bytes do not fit the {size}-byte export"
        )));
    }
    let (mapped, ext) = g.import_memory(fd, size, dedicated, bytes)?;
    Ok(sized(AllocKind::ImportedExternal, mapped, len, ext, bytes))
}

/// The Vulkan broker of `uuid`'s GPU, opened into `slot` on first use; a refusal is kept and
/// given again, as a library's.
pub(crate) fn vulkan(
    slot: &mut Option<Result<Rc<Broker>, CaseError>>,
    uuid: &str,
) -> Result<Rc<Broker>, CaseError> {
    slot.get_or_insert_with(|| Broker::open(uuid).map(Rc::new))
        .clone()
}

pub(crate) fn destroy_semaphore<G: GpuMemory + PeerRuntime>(g: &G, sem: u64) {
    if sem == 0 || g.bind().is_err() {
        return;
    }
    if let Err(e) = g.destroy_semaphore_handle(sem) {
        eprintln!(
            "clhip {}: destroying semaphore {sem:#x}: {e}",
            g.peer().label()
        );
    }
}
