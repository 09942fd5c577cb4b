//! The peer's memory calls: every allocation kind and its release, the POSIX-fd export of VMM
//! allocations, IPC handles, cuMemcpy between any two addresses, and external semaphores. What
//! is checked around them, and in which order they are made, is `runtimes/gpu/memory`.

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::ptr::null_mut;

use cudarc::driver::sys as cu;

use super::CudaPeer;
use super::discover::attribute;
use super::error::call;
use crate::model::{ApiError, CaseError, Phase};
use crate::runtimes::device::{DeviceAlloc, ExportHandle, IpcHandle};
use crate::runtimes::gpu::memory::{GpuMemory, map_exportable};

impl CudaPeer {
    /// This device, for VMM allocation properties and access descriptors.
    fn location(&self) -> cu::CUmemLocation {
        cu::CUmemLocation {
            type_: cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.dev,
        }
    }
}

impl GpuMemory for CudaPeer {
    /// cuMemExportToShareableHandle with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: an opaque
    /// fd, for cl_khr_external_memory_opaque_fd.
    const EXPORT_HANDLE: ExportHandle = ExportHandle::OpaqueFd;
    const EXPORT_CALL: &'static str = "cuMemExportToShareableHandle";
    const IPC_GET_CALL: &'static str = "cuIpcGetMemHandle";
    const SEMAPHORE_WAIT_CALL: &'static str = "cuWaitExternalSemaphoresAsync";

    fn alloc_device(&self, bytes: usize) -> Result<usize, CaseError> {
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter.
        unsafe { call!(cu::cuMemAlloc_v2(&mut p, bytes), "{bytes} bytes") }
            .refused("cuMemAlloc")?;
        Ok(p as usize)
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<usize, CaseError> {
        // PORTABLE: pinned for every context; DEVICEMAP: mapped into the device's address space
        // (implied under UVA; said so the intent is explicit).
        let flags = cu::CU_MEMHOSTALLOC_PORTABLE | cu::CU_MEMHOSTALLOC_DEVICEMAP;
        let mut p: *mut c_void = null_mut();
        // SAFETY: live out-parameter.
        unsafe { call!(cu::cuMemHostAlloc(&mut p, bytes, flags), "{bytes} bytes") }
            .refused("cuMemHostAlloc")?;
        Ok(p as usize)
    }

    fn has_managed_memory(&self) -> Result<bool, CaseError> {
        let attr = cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY;
        Ok(attribute(self.dev, attr).refused("managed memory query")? != 0)
    }

    fn device_memory(&self) -> Result<(usize, usize), CaseError> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: live out-parameters.
        unsafe { call!(cu::cuMemGetInfo_v2(&mut free, &mut total)) }
            .refused("device memory query")?;
        Ok((free, total))
    }

    fn alloc_managed(&self, bytes: usize) -> Result<usize, CaseError> {
        let global = cu::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32;
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter.
        unsafe {
            call!(
                cu::cuMemAllocManaged(&mut p, bytes, global),
                "{bytes} bytes"
            )
        }
        .refused("cuMemAllocManaged")?;
        Ok(p as usize)
    }

    /// cuMemCreate with a POSIX-fd shareable handle, then reserved, mapped and opened for
    /// read/write by this device.
    fn alloc_exportable(&self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
        use cu::CUdevice_attribute as A;
        let vmm = attribute(
            self.dev,
            A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        )
        .refused("VMM support query")?;
        if vmm == 0 {
            return Err(CaseError::unsupported(
                "device has no virtual memory management",
            ));
        }
        let prop = cu::CUmemAllocationProp {
            type_: cu::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            requestedHandleTypes:
                cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            location: self.location(),
            win32HandleMetaData: null_mut(),
            allocFlags: cu::CUmemAllocationProp_st__bindgen_ty_1 {
                compressionType: 0,
                gpuDirectRDMACapable: 0,
                usage: 0,
                reserved: [0; 4],
            },
        };
        let minimum = cu::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM;
        let mut gran = 0usize;
        // SAFETY: live out-parameter and property struct.
        unsafe { call!(cu::cuMemGetAllocationGranularity(&mut gran, &prop, minimum)) }
            .refused("VMM allocation granularity")?;
        let size = bytes.next_multiple_of(gran.max(1));
        let mut handle: cu::CUmemGenericAllocationHandle = 0;
        // SAFETY: live out-parameter and property struct.
        unsafe { call!(cu::cuMemCreate(&mut handle, size, &prop, 0), "{size} bytes") }
            .refused("cuMemCreate with a POSIX fd handle type")?;
        map_exportable(self, size, handle, len).map_err(|e| CaseError::Unsupported {
            reason: "mapping a cuMemCreate allocation".into(),
            error: Some(e),
        })
    }

    fn vmm_reserve(&self, size: usize) -> Result<usize, ApiError> {
        let mut va: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter; a reservation of `size` bytes at any address.
        unsafe {
            call!(
                cu::cuMemAddressReserve(&mut va, size, 0, 0, 0),
                "{size} bytes"
            )
        }?;
        Ok(va as usize)
    }

    fn vmm_map(&self, va: usize, size: usize, handle: u64) -> Result<(), ApiError> {
        // SAFETY: the `size`-byte allocation mapped at the start of a `size`-byte reservation.
        unsafe { call!(cu::cuMemMap(va as cu::CUdeviceptr, size, 0, handle, 0)) }
    }

    fn vmm_set_access(&self, va: usize, size: usize) -> Result<(), ApiError> {
        let access = cu::CUmemAccessDesc {
            location: self.location(),
            flags: cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: one live access descriptor over the mapping.
        unsafe { call!(cu::cuMemSetAccess(va as cu::CUdeviceptr, size, &access, 1)) }
    }

    fn vmm_unmap(&self, va: usize, size: usize) -> Result<(), ApiError> {
        // SAFETY: a mapping this peer made, unmapped once.
        unsafe { call!(cu::cuMemUnmap(va as cu::CUdeviceptr, size)) }
    }

    fn vmm_address_free(&self, va: usize, size: usize) -> Result<(), ApiError> {
        // SAFETY: a reservation this peer made, freed once.
        unsafe { call!(cu::cuMemAddressFree(va as cu::CUdeviceptr, size)) }
    }

    fn vmm_release(&self, handle: u64) -> Result<(), ApiError> {
        // SAFETY: a cuMemCreate handle, released once.
        unsafe { call!(cu::cuMemRelease(handle)) }
    }

    /// PORTABLE: registered for every context; DEVICEMAP: mapped into the device's address
    /// space, so that cuMemHostGetDevicePointer has a pointer to give. No alignment is
    /// required of `addr` or `bytes` (CUDA 4.1 and later).
    fn host_register(&self, addr: usize, bytes: usize) -> Result<(), CaseError> {
        let flags = cu::CU_MEMHOSTREGISTER_PORTABLE | cu::CU_MEMHOSTREGISTER_DEVICEMAP;
        let p = addr as *mut c_void;
        // SAFETY: the caller keeps `bytes` at `addr` allocated until it unregisters them.
        unsafe {
            call!(
                cu::cuMemHostRegister_v2(p, bytes, flags),
                "{addr:#x}, {bytes} bytes"
            )
        }
        .refused("cuMemHostRegister")
    }

    fn host_device_pointer(&self, addr: usize) -> Result<usize, CaseError> {
        let mut d: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter; flags must be 0.
        unsafe {
            call!(
                cu::cuMemHostGetDevicePointer_v2(&mut d, addr as *mut c_void, 0),
                "{addr:#x}"
            )
        }
        .refused("cuMemHostGetDevicePointer")?;
        Ok(d as usize)
    }

    fn host_unregister(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: memory host_register registered, unregistered once.
        unsafe { call!(cu::cuMemHostUnregister(addr as *mut c_void)) }
    }

    fn free_device(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: a cuMemAlloc, cuMemAllocManaged or mapped external buffer, freed once.
        unsafe { call!(cu::cuMemFree_v2(addr as cu::CUdeviceptr)) }
    }

    fn free_pinned(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: a cuMemHostAlloc allocation, freed once.
        unsafe { call!(cu::cuMemFreeHost(addr as *mut c_void)) }
    }

    fn ipc_close(&self, addr: usize) -> Result<(), ApiError> {
        // SAFETY: an address cuIpcOpenMemHandle gave, closed once.
        unsafe { call!(cu::cuIpcCloseMemHandle(addr as cu::CUdeviceptr)) }
    }

    /// Never needed on CUDA today (import_cl_memory refuses), but there for the release of an
    /// imported buffer all the same.
    fn destroy_external_memory(&self, handle: u64) -> Result<(), ApiError> {
        let ext = handle as usize as cu::CUexternalMemory;
        // SAFETY: an external-memory object, destroyed once, after its mapped buffer.
        unsafe { call!(cu::cuDestroyExternalMemory(ext)) }
    }

    fn export_shareable_fd(&self, handle: u64) -> Result<RawFd, CaseError> {
        let ty = cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        let mut fd: c_int = -1;
        // SAFETY: for the POSIX fd handle type the out-parameter is an int.
        let out = (&raw mut fd).cast();
        unsafe { call!(cu::cuMemExportToShareableHandle(out, handle, ty, 0)) }
            .refused("exporting a POSIX fd")?;
        Ok(fd)
    }

    fn ipc_get_handle(&self, addr: usize) -> Result<IpcHandle, CaseError> {
        let mut h = cu::CUipcMemHandle { reserved: [0; 64] };
        let p = addr as cu::CUdeviceptr;
        // SAFETY: live out-parameter; `p` is the base of a cuMemAlloc allocation.
        unsafe { call!(cu::cuIpcGetMemHandle(&mut h, p), "{p:#x}") }
            .refused("cuIpcGetMemHandle")?;
        Ok(h.reserved.map(|c| c as u8))
    }

    fn ipc_open_handle(&self, handle: &IpcHandle) -> Result<usize, CaseError> {
        let h = cu::CUipcMemHandle {
            reserved: handle.map(|b| b as c_char),
        };
        let lazy = cu::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter; the handle is passed by value. A handle from this same
        // process is refused by the driver with an error, not undefined behaviour.
        unsafe { call!(cu::cuIpcOpenMemHandle_v2(&mut p, h, lazy)) }
            .refused("cuIpcOpenMemHandle refused the handle")?;
        Ok(p as usize)
    }

    /// cuImportExternalSemaphore with an opaque fd. On success the driver owns the fd (it
    /// closes it when the semaphore is destroyed); on failure the fd stays the caller's.
    fn import_semaphore(&self, fd: RawFd) -> Result<u64, CaseError> {
        let desc = cu::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
            type_: cu::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
            handle: cu::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 { fd },
            flags: 0,
            reserved: [0; 16],
        };
        let mut sem: cu::CUexternalSemaphore = null_mut();
        // SAFETY: live out-parameter and descriptor; for the opaque-fd type only `fd` of the
        // handle union is read.
        unsafe { call!(cu::cuImportExternalSemaphore(&mut sem, &desc), "fd {fd}") }
            .refused("cuImportExternalSemaphore refused the fd")?;
        Ok(sem as usize as u64)
    }

    fn destroy_semaphore_handle(&self, sem: u64) -> Result<(), ApiError> {
        let s = sem as usize as cu::CUexternalSemaphore;
        // SAFETY: a handle import_semaphore returned, destroyed once.
        unsafe { call!(cu::cuDestroyExternalSemaphore(s)) }
    }

    fn enqueue_signal(&self, sem: u64) -> Result<(), CaseError> {
        let s = sem as usize as cu::CUexternalSemaphore;
        // SAFETY: all zero is a binary semaphore's signal: no fence value, no flags.
        let params: cu::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = unsafe { std::mem::zeroed() };
        // SAFETY: one imported semaphore and its parameters, live for the call; the stream is
        // this peer's.
        unsafe {
            call!(
                cu::cuSignalExternalSemaphoresAsync(&s, &params, 1, self.stream),
                "semaphore {sem:#x}"
            )
        }
        .refused("cuSignalExternalSemaphoresAsync refused the imported semaphore")
    }

    fn enqueue_wait(&self, sem: u64) -> Result<(), CaseError> {
        let s = sem as usize as cu::CUexternalSemaphore;
        // SAFETY: all zero is a binary semaphore's wait: no fence value, no flags.
        let params: cu::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = unsafe { std::mem::zeroed() };
        // SAFETY: as in enqueue_signal.
        unsafe {
            call!(
                cu::cuWaitExternalSemaphoresAsync(&s, &params, 1, self.stream),
                "semaphore {sem:#x}"
            )
        }
        .refused("cuWaitExternalSemaphoresAsync refused the imported semaphore")
    }

    /// cuImportExternalMemory of an opaque fd (CUDA_EXTERNAL_MEMORY_DEDICATED for a dedicated
    /// allocation, as the exporter made it), then cuExternalMemoryGetMappedBuffer of its first
    /// `bytes`. On a successful import the driver owns the fd (CUDA's documentation: "ownership
    /// of the file descriptor is transferred to the CUDA driver"); a refused mapping destroys
    /// the import, which closes it.
    fn import_memory(
        &self,
        fd: OwnedFd,
        size: u64,
        dedicated: bool,
        bytes: usize,
    ) -> Result<(usize, u64), CaseError> {
        let raw = fd.as_raw_fd();
        let desc = cu::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
            type_: cu::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            handle: cu::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 { fd: raw },
            size,
            flags: if dedicated {
                cu::CUDA_EXTERNAL_MEMORY_DEDICATED
            } else {
                0
            },
            reserved: [0; 16],
        };
        let mut ext: cu::CUexternalMemory = null_mut();
        // SAFETY: live out-parameter and descriptor; for the opaque-fd type only `fd` of the
        // handle union is read.
        unsafe {
            call!(
                cu::cuImportExternalMemory(&mut ext, &desc),
                "opaque fd {raw}, {size} bytes, dedicated {dedicated}"
            )
        }
        .refused("cuImportExternalMemory refused the opaque fd")?;
        let _ = fd.into_raw_fd();
        let buffer = cu::CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
            offset: 0,
            size: bytes as u64,
            flags: 0,
            reserved: [0; 16],
        };
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter, a live import and its buffer descriptor.
        let mapped = unsafe {
            call!(
                cu::cuExternalMemoryGetMappedBuffer(&mut p, ext, &buffer),
                "{bytes} bytes at offset 0"
            )
        };
        if let Err(e) = mapped {
            // SAFETY: the import made above, destroyed once.
            let _ = unsafe { call!(cu::cuDestroyExternalMemory(ext)) };
            return Err(e).refused("cuExternalMemoryGetMappedBuffer refused the import");
        }
        Ok((p as usize, ext as usize as u64))
    }

    /// cuMemcpy: with unified addressing the driver infers the direction from the pointers.
    /// Synchronous, and ordered after the peer's stream, which is a blocking stream and so
    /// waits for (and is waited for by) the legacy default stream cuMemcpy runs on.
    ///
    /// An address CUDA did not allocate, register or import is pageable host memory to the
    /// driver, which copies it with the CPU: one the CPU cannot touch kills the process with
    /// SIGSEGV (seen on an H100, driver 580.159.04, with 0x8), not an error code. Only
    /// workers, whose death is an outcome, should hand it such an address.
    fn copy_inferred(&self, dst: usize, src: usize, bytes: usize) -> Result<(), CaseError> {
        let (d, s) = (dst as cu::CUdeviceptr, src as cu::CUdeviceptr);
        // SAFETY: none that Rust can give: an address the driver does not know (OpenCL's SVM,
        // say) is accessed from the CPU as host memory. That behaviour is what is under test,
        // in a worker process.
        unsafe { call!(cu::cuMemcpy(d, s, bytes), "{bytes} B {s:#x} -> {d:#x}") }.refused(
            "cuMemcpy refused the addresses (one may be memory CUDA did not allocate or map)",
        )
    }

    fn import_cl(&mut self, _addr: usize, _bytes: usize) -> Result<(usize, u64), CaseError> {
        Err(CaseError::unsupported(
            "no export of OpenCL memory reaches CUDA: the dma-buf export \
             (hsa_amd_portable_export_dmabuf) is ROCm's HSA runtime",
        ))
    }
}

#[cfg(test)]
mod tests {
    use num_complex::Complex32;

    use super::*;
    use crate::generate::pattern;
    use crate::runtimes::PeerRuntime;
    use crate::runtimes::cuda::tests::{bits, gpu};
    use crate::runtimes::device::{AllocKind, DeviceRuntime};

    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_allocs_of_every_kind_round_trip() {
        let mut p = gpu("device_allocs_of_every_kind_round_trip");
        let data = crate::generate::complex_vec(11, 4099);
        // Every kind is tried and reported before the verdict: one refusal must not hide the
        // others' results.
        let mut failures = Vec::new();
        for kind in [
            AllocKind::Device,
            AllocKind::PinnedHost,
            AllocKind::Managed,
            AllocKind::Exportable,
        ] {
            let one = |p: &mut CudaPeer| -> Result<String, CaseError> {
                let a = p.alloc(kind, data.len())?;
                assert!(a.bytes >= data.len() * 8);
                p.upload(a.ptr, &data)?;
                assert_eq!(p.download(a.ptr)?, data, "{kind:?} copy round trip");
                // The kernels on this kind of memory too, and the host's view of their work.
                p.fill_pattern(a.ptr, 3)?;
                let check = p.check_pattern(a.ptr, 3)?;
                assert_eq!(check.mismatches, 0, "{kind:?}");
                let words = bits(&p.download(a.ptr)?);
                assert_eq!(words, pattern(3, data.len() * 2), "{kind:?} pattern");
                let note = if kind == AllocKind::Exportable {
                    let fd = p.export_fd(&a)?;
                    format!(
                        "{} bytes (granularity-rounded), exported as {fd:?}",
                        a.bytes
                    )
                } else {
                    assert!(p.export_fd(&a).is_err());
                    format!("{} bytes at {:#x}", a.bytes, a.ptr.addr)
                };
                p.free(a);
                Ok(note)
            };
            match one(&mut p) {
                Ok(note) => eprintln!("alloc {kind:?}: ok, {note}"),
                Err(e) => {
                    eprintln!("alloc {kind:?}: {e:?}");
                    failures.push(kind);
                }
            }
        }
        p.health_check().unwrap();
        assert!(failures.is_empty(), "refused or broken: {failures:?}");
    }

    /// Everything on this platform that needs no second process: the opaque-fd export kind,
    /// import_cl_memory's honest refusal, IPC handles only for Device memory, a handle of
    /// 64 bytes that this same process cannot open (the driver refuses; no crash), and a bad
    /// semaphore fd refused.
    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_ipc_handle_and_refusals() {
        let mut p = gpu("device_ipc_handle_and_refusals");
        assert_eq!(p.export_handle(), ExportHandle::OpaqueFd);
        assert_eq!(p.reopen_args(), ["--api", "cuda", "--ordinal", "0"]);
        match p.import_cl_memory(0x1000, 4096, 512) {
            Err(CaseError::Unsupported { reason, .. }) => {
                assert!(
                    reason.contains("hsa_amd_portable_export_dmabuf"),
                    "{reason}"
                )
            }
            other => panic!("expected unsupported, got {other:?}"),
        }
        let len = 4096;
        let a = p.alloc(AllocKind::Device, len).unwrap();
        let h = p.ipc_handle(&a).unwrap();
        assert_eq!(h.len(), 64);
        assert!(h.iter().any(|&b| b != 0), "an all-zero IPC handle");
        match p.ipc_open(&h, len) {
            Err(e) => eprintln!("ipc_open of this process's own handle: {e:?}"),
            Ok(opened) => {
                // Not expected, but not a crash either: say so, and close it.
                eprintln!("ipc_open of this process's own handle was accepted: {opened:?}");
                p.free(opened);
                panic!("cuIpcOpenMemHandle accepted a handle from its own process");
            }
        }
        let pinned = p.alloc(AllocKind::PinnedHost, len).unwrap();
        assert!(matches!(
            p.ipc_handle(&pinned),
            Err(CaseError::Unsupported { error: None, .. })
        ));
        p.free(pinned);
        // /dev/null is an fd, but no semaphore: refused with the driver's error.
        let null = std::fs::File::open("/dev/null").unwrap();
        let r = p.import_semaphore_fd(std::os::fd::AsRawFd::as_raw_fd(&null));
        eprintln!("import_semaphore_fd(/dev/null) -> {r:?}");
        match r {
            Err(CaseError::Unsupported { reason, error }) => {
                assert_eq!(reason, "cuImportExternalSemaphore refused the fd");
                assert!(error.is_some());
            }
            Ok(sem) => {
                p.destroy_semaphore(sem);
                panic!("cuImportExternalSemaphore accepted /dev/null");
            }
            Err(e) => panic!("expected unsupported, got {e:?}"),
        }
        p.free(a);
        p.health_check().unwrap();
    }

    /// Pageable host memory registered with cuMemHostRegister, page-aligned and one element
    /// past a page boundary: the device's writes through cuMemHostGetDevicePointer's pointer
    /// are the host's memory, bit for bit, and the host memory outlives its unregistration.
    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn registered_host_memory_is_the_devices_through_its_pointer() {
        let mut p = gpu("registered_host_memory_is_the_devices_through_its_pointer");
        let len = 4097;
        for offset in [0, 1] {
            let host = p.alloc_host(len + 1).unwrap();
            let addr = host.addr + offset * size_of::<Complex32>();
            let r = p.register_host(addr, len).unwrap();
            assert_eq!((r.kind, r.handle), (AllocKind::Registered, addr as u64));
            p.fill_pattern(r.ptr, 9).unwrap();
            p.synchronize().unwrap();
            // SAFETY: `len` elements of the live host allocation at `addr`.
            let seen = unsafe { std::slice::from_raw_parts(addr as *const u32, 2 * len) };
            assert_eq!(seen, &pattern(9, 2 * len)[..], "offset {offset} elements");
            eprintln!(
                "registered at {addr:#x} (offset {offset}): device pointer {:#x}",
                r.ptr.addr
            );
            p.free(r);
            assert_eq!(seen[0], pattern(9, 1)[0], "the memory stays the caller's");
            p.free_host(host);
        }
        p.health_check().unwrap();
    }

    /// cuMemcpy device -> device, device -> pinned host and back: the data arrives bit for bit.
    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_memcpy_round_trips() {
        let mut p = gpu("device_memcpy_round_trips");
        let data = crate::generate::complex_vec(17, 65_537);
        let bytes = data.len() * size_of::<Complex32>();
        let a = p.alloc(AllocKind::Device, data.len()).unwrap();
        let b = p.alloc(AllocKind::Device, data.len()).unwrap();
        let h = p.alloc(AllocKind::PinnedHost, data.len()).unwrap();
        p.upload(a.ptr, &data).unwrap();
        p.memcpy(b.ptr.addr, a.ptr.addr, bytes).unwrap();
        assert_eq!(p.download(b.ptr).unwrap(), data, "device -> device");
        // The kernel's work on the stream is ordered before cuMemcpy on the legacy stream.
        p.fill_pattern(a.ptr, 5).unwrap();
        p.memcpy(h.ptr.addr, a.ptr.addr, bytes).unwrap();
        let want = pattern(5, data.len() * 2);
        assert_eq!(bits(&p.download(h.ptr).unwrap()), want, "device -> pinned");
        p.memcpy(b.ptr.addr, h.ptr.addr, bytes).unwrap();
        assert_eq!(bits(&p.download(b.ptr).unwrap()), want, "pinned -> device");
        eprintln!("memcpy round trips: {bytes} B each way, bit for bit");
        for x in [a, b, h] {
            p.free(x);
        }
        p.health_check().unwrap();
    }

    /// An address CUDA never allocated is, under unified addressing, pageable host memory to
    /// cuMemcpy: the driver copies it with the CPU, so an unmapped one kills the process
    /// (SIGSEGV) rather than returning an error. In a child process; the parent only insists
    /// that the copy did not claim success.
    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_memcpy_from_an_unknown_address_never_succeeds() {
        const TEST: &str = "device_memcpy_from_an_unknown_address_never_succeeds";
        if std::env::var_os("CLHIP_CUDA_MEMCPY_CHILD").is_some() {
            let mut p = gpu(TEST);
            let a = p.alloc(AllocKind::Device, 64).unwrap();
            eprintln!("copying from 0x8");
            let r = p.memcpy(a.ptr.addr, 0x8, 512);
            eprintln!("memcpy from 0x8 -> {r:?}");
            assert!(r.is_err(), "cuMemcpy from 0x8 claimed success");
            return;
        }
        gpu(TEST);
        let (status, text) = crate::runtimes::run_test_in_child(
            &format!("runtimes::cuda::memory::tests::{TEST}"),
            "CLHIP_CUDA_MEMCPY_CHILD",
        );
        eprintln!("child: {status:?}\n{text}");
        assert!(text.contains("copying from 0x8"), "{text}");
        // Either the driver refused (the child passed) or the CPU copy faulted: both are
        // honest; a copy that "succeeded" fails the child's assertion and this one.
        let refused = status.success() && text.contains("memcpy from 0x8 -> Err");
        let crashed = std::os::unix::process::ExitStatusExt::signal(&status).is_some();
        assert!(refused || crashed, "{text}");
    }
}
