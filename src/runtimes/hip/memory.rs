//! Allocations of every kind, their release, export as a POSIX fd, hipMemcpy, IPC handles and
//! external semaphores.

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr::null_mut;

use num_complex::Complex32;

use crate::model::{CaseError, Phase};
use crate::runtimes::PeerPtr;
use crate::runtimes::device::{AllocKind, DeviceAlloc, IpcHandle};
use crate::runtimes::gpu::GpuCore;

use super::HipPeer;
use super::ffi::{self, Group, Hip, hipError_t};
use super::status::{hip_call, lacks, need};

/// A temporary hipMalloc allocation, freed on every path out of the scope that made it.
pub(super) struct DeviceBuffer {
    pub(super) ptr: *mut c_void,
    free: unsafe extern "C" fn(*mut c_void) -> hipError_t,
}

impl DeviceBuffer {
    pub(super) fn new(hip: &Hip, bytes: usize, what: &str) -> Result<DeviceBuffer, CaseError> {
        let mut ptr: *mut c_void = null_mut();
        // SAFETY: live out-parameter.
        unsafe { hip_call!(hip, hipMalloc(&mut ptr, bytes.max(1)), "{bytes} bytes") }
            .refused(what)?;
        let free = need(hip.fns.hipFree, &hip.path, "hipFree")?;
        Ok(DeviceBuffer { ptr, free })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by hipMalloc on the current device, freed once; the peer that made
        // it (and its library) outlives this scope.
        unsafe { (self.free)(self.ptr) };
    }
}

impl HipPeer {
    /// hipMemCreate with a POSIX-fd shareable handle (a dma-buf on ROCm), in the generation's
    /// hipMemAllocationProp layout, then reserve, map and open for read/write by this device.
    /// Any step refused undoes the ones before it.
    fn alloc_exportable(&mut self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
        let missing = self.hip.missing_in(Group::Vmm);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        if self.hip.version.has_vmm_attribute() {
            // 5.2 has no such attribute (it is 89 from rocm-5.3.0): there hipMemCreate says.
            let attr = ffi::hipDeviceAttributeVirtualMemoryManagementSupported;
            let mut vmm: c_int = 0;
            // SAFETY: live out-parameter.
            unsafe {
                hip_call!(
                    &self.hip,
                    hipDeviceGetAttribute(&mut vmm, attr, self.dev),
                    "VirtualMemoryManagementSupported"
                )
            }
            .refused("VMM support query")?;
            if vmm == 0 {
                return Err(CaseError::unsupported(
                    "device has no virtual memory management",
                ));
            }
        }
        let location = ffi::hipMemLocation {
            type_: ffi::hipMemLocationTypeDevice,
            id: self.dev,
        };
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
        let access = ffi::hipMemAccessDesc {
            location,
            flags: ffi::hipMemAccessFlagsProtReadWrite,
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
        let (mut va, mut reserved, mut mapped): (*mut c_void, bool, bool) =
            (null_mut(), false, false);
        // SAFETY: each step works on what the previous one made: a reservation of `size`
        // bytes at any address, the `size`-byte allocation mapped at its start, one access
        // descriptor over the mapping.
        let made = unsafe {
            hip_call!(
                hip,
                hipMemAddressReserve(&mut va, size, 0, null_mut(), 0),
                "{size} bytes"
            )
            .inspect(|()| reserved = true)
            .and_then(|()| hip_call!(hip, hipMemMap(va, size, 0, handle, 0)))
            .inspect(|()| mapped = true)
            .and_then(|()| hip_call!(hip, hipMemSetAccess(va, size, &access, 1)))
        };
        if let Err(e) = made {
            // SAFETY: undo exactly the steps that succeeded, in reverse.
            unsafe {
                if mapped {
                    let _ = hip_call!(hip, hipMemUnmap(va, size));
                }
                if reserved {
                    let _ = hip_call!(hip, hipMemAddressFree(va, size));
                }
                let _ = hip_call!(hip, hipMemRelease(handle));
            }
            if e.is_device_fault() {
                return Err(CaseError::Fault(e));
            }
            return Err(CaseError::Unsupported {
                reason: "mapping a hipMemCreate allocation".into(),
                error: Some(e),
            });
        }
        Ok(DeviceAlloc {
            kind: AllocKind::Exportable,
            ptr: PeerPtr {
                addr: va as usize,
                len,
            },
            handle: handle as u64,
            bytes: size,
        })
    }

    pub(super) fn allocate(
        &mut self,
        kind: AllocKind,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        self.bind()?;
        let bytes = len.max(1) * size_of::<Complex32>();
        let plain = |addr: usize| DeviceAlloc::new(kind, addr, len, 0);
        let hip = &self.hip;
        match kind {
            AllocKind::Device => {
                let mut p: *mut c_void = null_mut();
                // SAFETY: live out-parameter.
                unsafe { hip_call!(hip, hipMalloc(&mut p, bytes), "{bytes} bytes") }
                    .refused("hipMalloc")?;
                Ok(plain(p as usize))
            }
            AllocKind::PinnedHost => {
                // Portable: pinned for every device; Mapped: mapped into the device's address
                // space (implied on ROCm; said so the intent is explicit). hipExtHostAlloc
                // (optional: same flag values) where this library exports it, else
                // hipHostMalloc, which every released library has.
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
                Ok(plain(p as usize))
            }
            AllocKind::Managed => {
                let attr = ffi::hipDeviceAttributeManagedMemory;
                let mut managed: c_int = 0;
                // SAFETY: live out-parameter.
                unsafe {
                    hip_call!(
                        hip,
                        hipDeviceGetAttribute(&mut managed, attr, self.dev),
                        "ManagedMemory"
                    )
                }
                .refused("managed memory query")?;
                if managed == 0 {
                    return Err(CaseError::unsupported("device has no managed memory"));
                }
                // Oversubscribed managed memory can hang the GPU, not only this process:
                // never ask for more than is free on the device now.
                let (mut free, mut total) = (0usize, 0usize);
                // SAFETY: live out-parameters.
                unsafe { hip_call!(hip, hipMemGetInfo(&mut free, &mut total)) }
                    .refused("device memory query")?;
                if bytes > free {
                    return Err(CaseError::unsupported(format!(
                        "managed allocation of {bytes} bytes exceeds the {free} bytes free"
                    )));
                }
                let global = ffi::hipMemAttachGlobal;
                let mut p: *mut c_void = null_mut();
                // SAFETY: live out-parameter.
                unsafe {
                    hip_call!(
                        hip,
                        hipMallocManaged(&mut p, bytes, global),
                        "{bytes} bytes"
                    )
                }
                .refused("hipMallocManaged")?;
                Ok(plain(p as usize))
            }
            AllocKind::Exportable => self.alloc_exportable(bytes, len),
            AllocKind::ImportedExternal | AllocKind::IpcOpened => {
                Err(CaseError::unsupported(format!(
                    "{kind:?} memory is not allocated: it comes from import_cl_memory or ipc_open"
                )))
            }
        }
    }

    pub(super) fn free_alloc(&mut self, alloc: DeviceAlloc) {
        if self.bind().is_err() {
            return;
        }
        let hip = &self.hip;
        let (p, size) = (alloc.ptr.addr as *mut c_void, alloc.bytes);
        // SAFETY: each kind is released by the calls that pair with its allocation, once.
        let freed = unsafe {
            match alloc.kind {
                AllocKind::Device | AllocKind::Managed => hip_call!(hip, hipFree(p)),
                AllocKind::PinnedHost => hip_call!(hip, hipHostFree(p)),
                AllocKind::Exportable => {
                    let handle = alloc.handle as ffi::hipMemGenericAllocationHandle_t;
                    let unmapped = hip_call!(hip, hipMemUnmap(p, size));
                    let unreserved = hip_call!(hip, hipMemAddressFree(p, size));
                    let released = hip_call!(hip, hipMemRelease(handle));
                    unmapped.and(unreserved).and(released)
                }
                // clr's ihipFree (hipamd/src/hip_memory.cpp, rocm-5.6.0 .. Oct 2024) takes a
                // pointer from hipExternalMemoryGetMappedBuffer: an interop object, removed from
                // the pointer map and released (the reference GetMappedBuffer took). Then
                // hipDestroyExternalMemory releases the import's own, and the mapping goes.
                AllocKind::ImportedExternal => {
                    let unmapped = hip_call!(hip, hipFree(p));
                    let ext = alloc.handle as ffi::hipExternalMemory_t;
                    let destroyed = hip_call!(hip, hipDestroyExternalMemory(ext));
                    unmapped.and(destroyed)
                }
                AllocKind::IpcOpened => hip_call!(hip, hipIpcCloseMemHandle(p)),
            }
        };
        // The trait gives free no error channel; a failing free is still worth a line in the
        // worker's stderr (after a fault, every call fails with the sticky error).
        if let Err(e) = freed {
            eprintln!(
                "clhip hip{}: freeing {:?} at {p:?}: {e}",
                self.ordinal, alloc.kind
            );
        }
    }

    pub(super) fn export_posix_fd(&mut self, alloc: &DeviceAlloc) -> Result<OwnedFd, CaseError> {
        alloc.require(AllocKind::Exportable, "a shareable handle")?;
        self.bind()?;
        let ty = ffi::hipMemHandleTypePosixFileDescriptor;
        let handle = alloc.handle as ffi::hipMemGenericAllocationHandle_t;
        let mut fd: c_int = -1;
        let out: *mut c_void = (&raw mut fd).cast();
        // SAFETY: for the POSIX fd handle type the out-parameter is an int.
        unsafe { hip_call!(&self.hip, hipMemExportToShareableHandle(out, handle, ty, 0)) }
            .refused("exporting a POSIX fd")?;
        if fd < 0 {
            return Err(CaseError::unsupported(
                "hipMemExportToShareableHandle gave no fd",
            ));
        }
        // SAFETY: a fresh fd from the runtime, owned by the caller from now on.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// hipMemcpy with hipMemcpyDefault: the runtime infers the direction from the pointers.
    /// clr's ihipMemcpy (hipamd/src/hip_memory.cpp) looks both up in its own pointer map; when
    /// it knows neither (OpenCL's SVM is in libamdocl64's map, not libamdhip64's) it copies on
    /// the host (ihipHtoHMemcpy: finish the null stream, then memcpy), which works for
    /// host-visible memory and faults the process for memory the CPU cannot reach. That is
    /// what is under test. hipMemcpy runs on the null stream, which this peer's blocking stream
    /// is ordered with.
    pub(super) fn memcpy_default(
        &mut self,
        dst: usize,
        src: usize,
        bytes: usize,
    ) -> Result<(), CaseError> {
        self.bind()?;
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

    pub(super) fn ipc_get_handle(&mut self, alloc: &DeviceAlloc) -> Result<IpcHandle, CaseError> {
        alloc.require(AllocKind::Device, "an IPC handle (hipIpcGetMemHandle)")?;
        let missing = self.hip.missing_in(Group::Ipc);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        self.bind()?;
        let mut h = ffi::hipIpcMemHandle_t { reserved: [0; 64] };
        let p = alloc.ptr.addr as *mut c_void;
        // SAFETY: live out-parameter; `p` is the base of a hipMalloc allocation.
        unsafe { hip_call!(&self.hip, hipIpcGetMemHandle(&mut h, p), "{p:?}") }
            .refused("hipIpcGetMemHandle")?;
        Ok(h.reserved.map(|c| c as u8))
    }

    /// hipIpcOpenMemHandle with hipIpcMemLazyEnablePeerAccess, whose value changed in 6.0
    /// (0 -> 0x01) and which clr requires exactly (any other flags: hipErrorInvalidValue). clr
    /// refuses a handle from this same process with hipErrorInvalidContext.
    pub(super) fn ipc_open_handle(
        &mut self,
        handle: &IpcHandle,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        let missing = self.hip.missing_in(Group::Ipc);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        self.bind()?;
        let h = ffi::hipIpcMemHandle_t {
            reserved: handle.map(|b| b as c_char),
        };
        let flags = self.hip.abi.ipc_lazy_enable_peer_access();
        let mut p: *mut c_void = null_mut();
        // SAFETY: live out-parameter; the 64-byte handle is passed by value, as declared.
        unsafe { hip_call!(&self.hip, hipIpcOpenMemHandle(&mut p, h, flags)) }
            .refused("hipIpcOpenMemHandle refused the handle")?;
        Ok(DeviceAlloc::new(AllocKind::IpcOpened, p as usize, len, 0))
    }

    /// hipImportExternalSemaphore with an opaque fd, in the generation's descriptor layout.
    /// On Linux clr always refuses: hipImportExternalSemaphore (hipamd/src/hip_memory.cpp)
    /// returns hipErrorNotSupported (801) when the device's importExtSemaphore fails, and
    /// ROCm's (roc::NullDevice in rocclr/device/rocm/rocdevice.hpp, inherited by roc::Device;
    /// only PAL, Windows, implements it) is `ShouldNotReachHere(); return false;`.
    /// ShouldNotReachHere is `assert(false && ..)` (rocclr/utils/debug.hpp), a no-op in release
    /// builds: a debug build of clr would abort the process here instead. From rocm-6.0.0 clr
    /// refuses fd 0 first, with hipErrorInvalidValue. The fd stays the caller's on refusal.
    pub(super) fn import_semaphore(&mut self, fd: RawFd) -> Result<u64, CaseError> {
        if fd < 0 {
            return Err(CaseError::unsupported(format!(
                "no fd to import as a semaphore ({fd})"
            )));
        }
        let missing = self.hip.missing_in(Group::ExternalSemaphore);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        self.bind()?;
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

    pub(super) fn destroy_external_semaphore(&mut self, sem: u64) {
        if sem == 0 || self.bind().is_err() {
            return;
        }
        let s = sem as ffi::hipExternalSemaphore_t;
        // SAFETY: a handle import_semaphore_fd returned, destroyed once.
        if let Err(e) = unsafe { hip_call!(&self.hip, hipDestroyExternalSemaphore(s)) } {
            eprintln!(
                "clhip hip{}: destroying semaphore {sem:#x}: {e}",
                self.ordinal
            );
        }
    }
}
