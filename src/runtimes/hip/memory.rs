//! The peer's memory calls: allocations of every kind and their release, export as a POSIX fd,
//! hipMemcpy, IPC handles and external semaphores. What is checked around them, and in which
//! order they are made, is `runtimes/gpu/memory`.

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::ptr::null_mut;

use crate::model::{ApiError, CaseError, Phase};
use crate::runtimes::device::{DeviceAlloc, ExportHandle, IpcHandle};
use crate::runtimes::gpu::memory::{GpuMemory, Optional, map_exportable};

use super::HipPeer;
use super::ffi::{self, Group};
use super::status::{hip_call, lacks};

impl HipPeer {
    /// `Unsupported` naming what this libamdhip64 lacks of `group`, if anything.
    fn require_group(&self, group: Group) -> Result<(), CaseError> {
        let missing = self.hip.missing_in(group);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        Ok(())
    }

    /// hipDeviceGetAttribute of this device; `name` (the attribute's, less its prefix) goes in
    /// the error's detail.
    fn attribute(&self, attr: c_int, name: &str) -> Result<c_int, ApiError> {
        let mut v: c_int = 0;
        // SAFETY: live out-parameter.
        unsafe {
            hip_call!(
                &self.hip,
                hipDeviceGetAttribute(&mut v, attr, self.dev),
                "{name}"
            )
        }?;
        Ok(v)
    }

    /// This device, for VMM allocation properties and access descriptors.
    fn location(&self) -> ffi::hipMemLocation {
        ffi::hipMemLocation {
            type_: ffi::hipMemLocationTypeDevice,
            id: self.dev,
        }
    }
}

/// The signal and wait parameters clhip passes: all zero (a binary semaphore: no fence value;
/// clr refuses any flags). All-zero bytes read the same in ROCm 5's layout and in 6.0's, which
/// added `nvSciSync` (136 and 144 bytes), so one buffer as large as the largest serves both.
const ZERO_SEMAPHORE_PARAMS: [u64; 18] = [0; 18];
const _: () = assert!(
    std::mem::size_of::<ffi::hipExternalSemaphoreSignalParams>() <= 144
        && std::mem::size_of::<ffi::hipExternalSemaphoreWaitParams>() <= 144
        && std::mem::size_of::<ffi::hipExternalSemaphoreSignalParamsV5>() <= 144
        && std::mem::size_of::<ffi::hipExternalSemaphoreWaitParamsV5>() <= 144
);

impl GpuMemory for HipPeer {
    /// hipMemExportToShareableHandle with hipMemHandleTypePosixFileDescriptor gives a dma-buf
    /// fd on ROCm: for cl_khr_external_memory_dma_buf.
    const EXPORT_HANDLE: ExportHandle = ExportHandle::DmaBuf;
    const EXPORT_CALL: &'static str = "hipMemExportToShareableHandle";
    const IPC_GET_CALL: &'static str = "hipIpcGetMemHandle";
    const SEMAPHORE_WAIT_CALL: &'static str = "hipWaitExternalSemaphoresAsync";

    fn require(&self, what: Optional) -> Result<(), CaseError> {
        self.require_group(match what {
            Optional::Ipc => Group::Ipc,
            Optional::ExternalSemaphore => Group::ExternalSemaphore,
            Optional::ExternalMemory => Group::ExternalMemory,
        })
    }

    fn alloc_device(&self, bytes: usize) -> Result<usize, CaseError> {
        let mut p: *mut c_void = null_mut();
        // SAFETY: live out-parameter.
        unsafe { hip_call!(&self.hip, hipMalloc(&mut p, bytes), "{bytes} bytes") }
            .refused("hipMalloc")?;
        Ok(p as usize)
    }

    /// Portable: pinned for every device; Mapped: mapped into the device's address space
    /// (implied on ROCm; said so the intent is explicit). hipExtHostAlloc (optional: same flag
    /// values) where this library exports it, else hipHostMalloc, which every released library
    /// has.
    fn alloc_pinned(&self, bytes: usize) -> Result<usize, CaseError> {
        let hip = &self.hip;
        let flags = ffi::hipHostMallocPortable | ffi::hipHostMallocMapped;
        let mut p: *mut c_void = null_mut();
        let ext = hip.fns.hipExtHostAlloc.is_some();
        // SAFETY: live out-parameter.
        let r = unsafe {
            if ext {
                hip_call!(hip, hipExtHostAlloc(&mut p, bytes, flags), "{bytes} bytes")
            } else {
                hip_call!(hip, hipHostMalloc(&mut p, bytes, flags), "{bytes} bytes")
            }
        };
        r.refused(if ext {
            "hipExtHostAlloc"
        } else {
            "hipHostMalloc"
        })?;
        Ok(p as usize)
    }

    fn has_managed_memory(&self) -> Result<bool, CaseError> {
        let attr = ffi::hipDeviceAttributeManagedMemory;
        let managed = self.attribute(attr, "ManagedMemory");
        Ok(managed.refused("managed memory query")? != 0)
    }

    fn device_memory(&self) -> Result<(usize, usize), CaseError> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: live out-parameters.
        unsafe { hip_call!(&self.hip, hipMemGetInfo(&mut free, &mut total)) }
            .refused("device memory query")?;
        Ok((free, total))
    }

    fn alloc_managed(&self, bytes: usize) -> Result<usize, CaseError> {
        let global = ffi::hipMemAttachGlobal;
        let mut p: *mut c_void = null_mut();
        // SAFETY: live out-parameter.
        unsafe {
            hip_call!(
                &self.hip,
                hipMallocManaged(&mut p, bytes, global),
                "{bytes} bytes"
            )
        }
        .refused("hipMallocManaged")?;
        Ok(p as usize)
    }

    /// hipMemCreate with a POSIX-fd shareable handle (a dma-buf on ROCm), in the generation's
    /// hipMemAllocationProp layout, then reserved, mapped and opened for read/write by this
    /// device.
    fn alloc_exportable(&self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
        self.require_group(Group::Vmm)?;
        if self.hip.version.has_vmm_attribute() {
            // 5.2 has no such attribute (it is 89 from rocm-5.3.0): there hipMemCreate says.
            let attr = ffi::hipDeviceAttributeVirtualMemoryManagementSupported;
            let vmm = self.attribute(attr, "VirtualMemoryManagementSupported");
            if vmm.refused("VMM support query")? == 0 {
                return Err(CaseError::unsupported(
                    "device has no virtual memory management",
                ));
            }
        }
        let location = self.location();
        let prop = ffi::hipMemAllocationProp {
            type_: ffi::hipMemAllocationTypePinned,
            requestedHandleType: ffi::hipMemHandleTypePosixFileDescriptor,
            location,
            win32HandleMetaData: null_mut(),
            allocFlags: ffi::hipMemAllocFlags::default(),
        };
        let prop_v52 = ffi::hipMemAllocationPropV52 {
            compressionType: 0,
            location,
            requestedHandleType: ffi::hipMemHandleTypePosixFileDescriptor,
            type_: ffi::hipMemAllocationTypePinned,
            usage: 0,
            win32HandleMetaData: null_mut(),
        };
        // The layout this library reads (reordered in 5.3.0).
        let prop_ptr: *const c_void = if self.hip.version.legacy_alloc_prop() {
            (&raw const prop_v52).cast()
        } else {
            (&raw const prop).cast()
        };
        let minimum = ffi::hipMemAllocationGranularityMinimum;
        let hip = &self.hip;
        let mut gran = 0usize;
        // SAFETY: live out-parameter; `prop_ptr` points at a live struct of the right layout.
        unsafe {
            hip_call!(
                hip,
                hipMemGetAllocationGranularity(&mut gran, prop_ptr, minimum)
            )
        }
        .refused("VMM allocation granularity")?;
        let size = bytes.next_multiple_of(gran.max(1));
        let mut handle: ffi::hipMemGenericAllocationHandle_t = null_mut();
        // SAFETY: live out-parameter and property struct.
        unsafe {
            hip_call!(
                hip,
                hipMemCreate(&mut handle, size, prop_ptr, 0),
                "{size} bytes"
            )
        }
        .refused("hipMemCreate with a POSIX fd handle type")?;
        map_exportable(self, size, handle as u64, len).refused("mapping a hipMemCreate allocation")
    }

    fn vmm_reserve(&self, size: usize) -> Result<usize, ApiError> {
        let mut va: *mut c_void = null_mut();
        // SAFETY: live out-parameter; a reservation of `size` bytes at any address.
        unsafe {
            hip_call!(
                &self.hip,
                hipMemAddressReserve(&mut va, size, 0, null_mut(), 0),
                "{size} bytes"
            )
        }?;
        Ok(va as usize)
    }

    fn vmm_map(&self, va: usize, size: usize, handle: u64) -> Result<(), ApiError> {
        let (va, handle) = (
            va as *mut c_void,
            handle as ffi::hipMemGenericAllocationHandle_t,
        );
        // SAFETY: the `size`-byte allocation mapped at the start of a `size`-byte reservation.
        unsafe { hip_call!(&self.hip, hipMemMap(va, size, 0, handle, 0)) }
    }

    fn vmm_set_access(&self, va: usize, size: usize) -> Result<(), ApiError> {
        let access = ffi::hipMemAccessDesc {
            location: self.location(),
            flags: ffi::hipMemAccessFlagsProtReadWrite,
        };
        let va = va as *mut c_void;
        // SAFETY: one live access descriptor over the mapping.
        unsafe { hip_call!(&self.hip, hipMemSetAccess(va, size, &access, 1)) }
    }

    fn vmm_unmap(&self, va: usize, size: usize) -> Result<(), ApiError> {
        // SAFETY: a mapping this peer made, unmapped once.
        unsafe { hip_call!(&self.hip, hipMemUnmap(va as *mut c_void, size)) }
    }

    fn vmm_address_free(&self, va: usize, size: usize) -> Result<(), ApiError> {
        // SAFETY: a reservation this peer made, freed once.
        unsafe { hip_call!(&self.hip, hipMemAddressFree(va as *mut c_void, size)) }
    }

    fn vmm_release(&self, handle: u64) -> Result<(), ApiError> {
        let handle = handle as ffi::hipMemGenericAllocationHandle_t;
        // SAFETY: a hipMemCreate handle, released once.
        unsafe { hip_call!(&self.hip, hipMemRelease(handle)) }
    }

    /// Also the mapped buffer of an import: clr's ihipFree (hipamd/src/hip_memory.cpp,
    /// rocm-5.6.0 .. Oct 2024) takes a pointer from hipExternalMemoryGetMappedBuffer as an
    /// interop object, removed from the pointer map and released (the reference
    /// GetMappedBuffer took). Then hipDestroyExternalMemory releases the import's own, and the
    /// mapping goes.
    fn free_device(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: a hipMalloc, hipMallocManaged or mapped external buffer, freed once.
        unsafe { hip_call!(&self.hip, hipFree(addr as *mut c_void)) }
    }

    /// Portable: registered for every device; Mapped: mapped into the device's address space,
    /// so that hipHostGetDevicePointer has a pointer to give.
    fn host_register(&self, addr: usize, bytes: usize) -> Result<(), CaseError> {
        let flags = ffi::hipHostRegisterPortable | ffi::hipHostRegisterMapped;
        let p = addr as *mut c_void;
        // SAFETY: the caller keeps `bytes` at `addr` allocated until it unregisters them.
        unsafe {
            hip_call!(
                &self.hip,
                hipHostRegister(p, bytes, flags),
                "{addr:#x}, {bytes} bytes"
            )
        }
        .refused("hipHostRegister")
    }

    fn host_device_pointer(&self, addr: usize) -> Result<usize, CaseError> {
        let mut d: *mut c_void = null_mut();
        // SAFETY: live out-parameter; flags must be 0.
        unsafe {
            hip_call!(
                &self.hip,
                hipHostGetDevicePointer(&mut d, addr as *mut c_void, 0),
                "{addr:#x}"
            )
        }
        .refused("hipHostGetDevicePointer")?;
        Ok(d as usize)
    }

    fn host_unregister(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: memory host_register registered, unregistered once.
        unsafe { hip_call!(&self.hip, hipHostUnregister(addr as *mut c_void)) }
    }

    fn free_pinned(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: a hipExtHostAlloc or hipHostMalloc allocation, freed once.
        unsafe { hip_call!(&self.hip, hipHostFree(addr as *mut c_void)) }
    }

    fn ipc_close(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: an address hipIpcOpenMemHandle gave, closed once.
        unsafe { hip_call!(&self.hip, hipIpcCloseMemHandle(addr as *mut c_void)) }
    }

    fn destroy_external_memory(&self, handle: u64) -> Result<(), ApiError> {
        let ext = handle as ffi::hipExternalMemory_t;
        // SAFETY: an external-memory object, destroyed once, after its mapped buffer.
        unsafe { hip_call!(&self.hip, hipDestroyExternalMemory(ext)) }
    }

    fn export_shareable_fd(&self, handle: u64) -> Result<RawFd, CaseError> {
        let ty = ffi::hipMemHandleTypePosixFileDescriptor;
        let handle = handle as ffi::hipMemGenericAllocationHandle_t;
        let mut fd: c_int = -1;
        let out: *mut c_void = (&raw mut fd).cast();
        // SAFETY: for the POSIX fd handle type the out-parameter is an int.
        unsafe { hip_call!(&self.hip, hipMemExportToShareableHandle(out, handle, ty, 0)) }
            .refused("exporting a POSIX fd")?;
        Ok(fd)
    }

    fn ipc_get_handle(&self, addr: usize) -> Result<IpcHandle, CaseError> {
        let mut h = ffi::hipIpcMemHandle_t { reserved: [0; 64] };
        let p = addr as *mut c_void;
        // SAFETY: live out-parameter; `p` is the base of a hipMalloc allocation.
        unsafe { hip_call!(&self.hip, hipIpcGetMemHandle(&mut h, p), "{p:?}") }
            .refused("hipIpcGetMemHandle")?;
        Ok(h.reserved.map(|c| c as u8))
    }

    /// hipIpcOpenMemHandle with hipIpcMemLazyEnablePeerAccess, whose value changed in 6.0
    /// (0 -> 0x01) and which clr requires exactly (any other flags: hipErrorInvalidValue). clr
    /// refuses a handle from this same process with hipErrorInvalidContext.
    fn ipc_open_handle(&self, handle: &IpcHandle) -> Result<usize, CaseError> {
        let h = ffi::hipIpcMemHandle_t {
            reserved: handle.map(|b| b as c_char),
        };
        let flags = self.hip.abi.ipc_lazy_enable_peer_access();
        let mut p: *mut c_void = null_mut();
        // SAFETY: live out-parameter; the 64-byte handle is passed by value, as declared.
        unsafe { hip_call!(&self.hip, hipIpcOpenMemHandle(&mut p, h, flags)) }
            .refused("hipIpcOpenMemHandle refused the handle")?;
        Ok(p as usize)
    }

    /// hipImportExternalSemaphore with an opaque fd, in the generation's descriptor layout.
    /// On Linux clr always refuses: hipImportExternalSemaphore (hipamd/src/hip_memory.cpp)
    /// returns hipErrorNotSupported (801) when the device's importExtSemaphore fails, and
    /// ROCm's (roc::NullDevice in rocclr/device/rocm/rocdevice.hpp, inherited by roc::Device;
    /// only PAL, Windows, implements it) is `ShouldNotReachHere(); return false;`.
    /// ShouldNotReachHere is `assert(false && ..)` (rocclr/utils/debug.hpp), a no-op in release
    /// builds: a debug build of clr would abort the process here instead. From rocm-6.0.0 clr
    /// refuses fd 0 first, with hipErrorInvalidValue. The fd stays the caller's on refusal.
    fn import_semaphore(&self, fd: RawFd) -> Result<u64, CaseError> {
        let handle = ffi::hipExternalHandle::from_fd(fd);
        let ty = ffi::hipExternalSemaphoreHandleTypeOpaqueFd;
        let desc = ffi::hipExternalSemaphoreHandleDesc {
            type_: ty,
            handle,
            flags: 0,
            reserved: [0; 16],
        };
        let desc_v5 = ffi::hipExternalSemaphoreHandleDescV5 {
            type_: ty,
            handle,
            flags: 0,
        };
        let desc_ptr: *const c_void = if self.hip.abi.descriptor_has_reserved() {
            (&raw const desc).cast()
        } else {
            (&raw const desc_v5).cast()
        };
        let mut sem: ffi::hipExternalSemaphore_t = null_mut();
        // SAFETY: live out-parameter; the descriptor is the layout this library reads, and for
        // the opaque-fd type only `fd` of the union is read.
        unsafe {
            hip_call!(
                &self.hip,
                hipImportExternalSemaphore(&mut sem, desc_ptr),
                "fd {fd}"
            )
        }
        .refused("hipImportExternalSemaphore refused the fd")?;
        Ok(sem as u64)
    }

    fn destroy_semaphore_handle(&self, sem: u64) -> Result<(), ApiError> {
        let s = sem as ffi::hipExternalSemaphore_t;
        // SAFETY: a handle import_semaphore returned, destroyed once.
        unsafe { hip_call!(&self.hip, hipDestroyExternalSemaphore(s)) }
    }

    /// hipSignalExternalSemaphoresAsync with all-zero parameters (a binary semaphore: no fence
    /// value; clr refuses any flags; see ZERO_SEMAPHORE_PARAMS).
    /// Unreached on Linux while clr refuses every semaphore import (see import_semaphore).
    fn enqueue_signal(&self, sem: u64) -> Result<(), CaseError> {
        let s = sem as ffi::hipExternalSemaphore_t;
        let zeros = ZERO_SEMAPHORE_PARAMS;
        let params: *const c_void = (&raw const zeros).cast();
        // SAFETY: one imported semaphore and parameters of the layout this library reads, live
        // for the call; the stream is this peer's.
        unsafe {
            hip_call!(
                &self.hip,
                hipSignalExternalSemaphoresAsync(&s, params, 1, self.stream),
                "semaphore {s:?}"
            )
        }
        .refused("hipSignalExternalSemaphoresAsync refused the imported semaphore")
    }

    /// hipWaitExternalSemaphoresAsync, as enqueue_signal.
    fn enqueue_wait(&self, sem: u64) -> Result<(), CaseError> {
        let s = sem as ffi::hipExternalSemaphore_t;
        let zeros = ZERO_SEMAPHORE_PARAMS;
        let params: *const c_void = (&raw const zeros).cast();
        // SAFETY: as in enqueue_signal.
        unsafe {
            hip_call!(
                &self.hip,
                hipWaitExternalSemaphoresAsync(&s, params, 1, self.stream),
                "semaphore {s:?}"
            )
        }
        .refused("hipWaitExternalSemaphoresAsync refused the imported semaphore")
    }

    /// hipImportExternalMemory of the opaque fd (hipExternalMemoryDedicated for a dedicated
    /// allocation), then hipExternalMemoryGetMappedBuffer of its first `bytes`. HIP's
    /// documentation, like CUDA's, hands the fd to the runtime on a successful import; clr
    /// (amd::ExternalBuffer, rocclr/device/rocm/rocmemory.cpp interopMapBuffer) keeps it open
    /// and never closes it, so it lives until the worker exits, which is safer than closing an
    /// fd the runtime may still use.
    fn import_memory(
        &self,
        fd: OwnedFd,
        size: u64,
        dedicated: bool,
        bytes: usize,
    ) -> Result<(usize, u64), CaseError> {
        let flags = if dedicated {
            ffi::hipExternalMemoryDedicated
        } else {
            0
        };
        let ext = self.import_external_memory(fd.as_raw_fd(), size, flags, "the opaque fd")?;
        let _ = fd.into_raw_fd();
        let mapped = self.map_external_buffer(ext, 0, bytes)?;
        Ok((mapped, ext as u64))
    }

    /// hipMemcpy with hipMemcpyDefault: the runtime infers the direction from the pointers.
    /// clr's ihipMemcpy (hipamd/src/hip_memory.cpp) looks both up in its own pointer map; when
    /// it knows neither (OpenCL's SVM is in libamdocl64's map, not libamdhip64's) it copies on
    /// the host (ihipHtoHMemcpy: finish the null stream, then memcpy), which works for
    /// host-visible memory and faults the process for memory the CPU cannot reach. That is
    /// what is under test. hipMemcpy runs on the null stream, which this peer's blocking stream
    /// is ordered with.
    fn copy_inferred(&self, dst: usize, src: usize, bytes: usize) -> Result<(), CaseError> {
        let (d, s, kind) = (
            dst as *mut c_void,
            src as *const c_void,
            ffi::hipMemcpyDefault,
        );
        // SAFETY: the runtime checks the addresses against what it knows; what it does with
        // addresses it does not know is the behaviour under test.
        unsafe {
            hip_call!(
                &self.hip,
                hipMemcpy(d, s, bytes, kind),
                "{bytes} B {src:#x} -> {dst:#x}"
            )
        }
        .refused("hipMemcpy refused the addresses (one may be memory HIP did not allocate or map)")
    }

    fn import_cl(&mut self, addr: usize, bytes: usize) -> Result<(usize, u64), CaseError> {
        self.import_cl_dmabuf(addr, bytes)
    }
}
