//! The peer's memory: every allocation kind and how each is freed, the POSIX-fd export of VMM
//! allocations, IPC handles, cuMemcpy between any two addresses, and external semaphores. The
//! `DeviceRuntime` impl in `mod.rs` forwards its memory methods here.

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr::null_mut;

use cudarc::driver::sys as cu;
use num_complex::Complex32;

use super::CudaPeer;
use super::discover::attribute;
use super::error::call;
use crate::model::{CaseError, Phase};
use crate::runtimes::PeerPtr;
use crate::runtimes::device::{AllocKind, DeviceAlloc, IpcHandle};
use crate::runtimes::gpu::GpuCore;

/// A temporary device allocation, freed on every path out of the scope that made it.
pub(super) struct DeviceBuffer(pub(super) cu::CUdeviceptr);

impl DeviceBuffer {
    pub(super) fn new(bytes: usize, what: &str) -> Result<DeviceBuffer, CaseError> {
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter.
        unsafe { call!(cu::cuMemAlloc_v2(&mut p, bytes.max(1)), "{bytes} bytes") }.refused(what)?;
        Ok(DeviceBuffer(p))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc_v2 in the current context, freed once.
        unsafe { cu::cuMemFree_v2(self.0) };
    }
}

impl CudaPeer {
    /// cuMemCreate with a POSIX-fd shareable handle, then reserve, map and open for read/write
    /// by this device. Any step refused undoes the ones before it.
    fn alloc_exportable(&mut self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
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
        let location = cu::CUmemLocation {
            type_: cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.dev,
        };
        let prop = cu::CUmemAllocationProp {
            type_: cu::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            requestedHandleTypes:
                cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            location,
            win32HandleMetaData: null_mut(),
            allocFlags: cu::CUmemAllocationProp_st__bindgen_ty_1 {
                compressionType: 0,
                gpuDirectRDMACapable: 0,
                usage: 0,
                reserved: [0; 4],
            },
        };
        let access = cu::CUmemAccessDesc {
            location,
            flags: cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
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
        let (mut va, mut reserved, mut mapped): (cu::CUdeviceptr, bool, bool) = (0, false, false);
        // SAFETY: each step works on what the previous one made: a reservation of `size`
        // bytes at any address, the `size`-byte allocation mapped at its start, one access
        // descriptor over the mapping.
        let made = unsafe {
            call!(
                cu::cuMemAddressReserve(&mut va, size, 0, 0, 0),
                "{size} bytes"
            )
            .inspect(|()| reserved = true)
            .and_then(|()| call!(cu::cuMemMap(va, size, 0, handle, 0)))
            .inspect(|()| mapped = true)
            .and_then(|()| call!(cu::cuMemSetAccess(va, size, &access, 1)))
        };
        if let Err(e) = made {
            // SAFETY: undo exactly the steps that succeeded, in reverse.
            unsafe {
                if mapped {
                    cu::cuMemUnmap(va, size);
                }
                if reserved {
                    cu::cuMemAddressFree(va, size);
                }
                cu::cuMemRelease(handle);
            }
            return Err(CaseError::Unsupported {
                reason: "mapping a cuMemCreate allocation".into(),
                error: Some(e),
            });
        }
        Ok(DeviceAlloc {
            kind: AllocKind::Exportable,
            ptr: PeerPtr {
                addr: va as usize,
                len,
            },
            handle,
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
        match kind {
            AllocKind::Device => {
                let mut p: cu::CUdeviceptr = 0;
                // SAFETY: live out-parameter.
                unsafe { call!(cu::cuMemAlloc_v2(&mut p, bytes), "{bytes} bytes") }
                    .refused("cuMemAlloc")?;
                Ok(plain(p as usize))
            }
            AllocKind::PinnedHost => {
                // PORTABLE: pinned for every context; DEVICEMAP: mapped into the device's
                // address space (implied under UVA; said so the intent is explicit).
                let flags = cu::CU_MEMHOSTALLOC_PORTABLE | cu::CU_MEMHOSTALLOC_DEVICEMAP;
                let mut p: *mut c_void = null_mut();
                // SAFETY: live out-parameter.
                unsafe { call!(cu::cuMemHostAlloc(&mut p, bytes, flags), "{bytes} bytes") }
                    .refused("cuMemHostAlloc")?;
                Ok(plain(p as usize))
            }
            AllocKind::Managed => {
                let attr = cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY;
                if attribute(self.dev, attr).refused("managed memory query")? == 0 {
                    return Err(CaseError::unsupported("device has no managed memory"));
                }
                // Oversubscribed managed memory can hang the GPU, not only this process:
                // never ask for more than is free on the device now.
                let (mut free, mut total) = (0usize, 0usize);
                // SAFETY: live out-parameters.
                unsafe { call!(cu::cuMemGetInfo_v2(&mut free, &mut total)) }
                    .refused("device memory query")?;
                if bytes > free {
                    return Err(CaseError::unsupported(format!(
                        "managed allocation of {bytes} bytes exceeds the {free} bytes free"
                    )));
                }
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

    pub(super) fn release(&mut self, alloc: DeviceAlloc) {
        if self.bind().is_err() {
            return;
        }
        let (p, size) = (alloc.ptr.addr as cu::CUdeviceptr, alloc.bytes);
        // SAFETY: each kind is released by the calls that pair with its allocation, once.
        let freed = unsafe {
            match alloc.kind {
                AllocKind::Device | AllocKind::Managed => call!(cu::cuMemFree_v2(p)),
                AllocKind::PinnedHost => call!(cu::cuMemFreeHost(alloc.ptr.addr as *mut c_void)),
                AllocKind::Exportable => {
                    let unmapped = call!(cu::cuMemUnmap(p, size));
                    let unreserved = call!(cu::cuMemAddressFree(p, size));
                    let released = call!(cu::cuMemRelease(alloc.handle));
                    unmapped.and(unreserved).and(released)
                }
                AllocKind::IpcOpened => call!(cu::cuIpcCloseMemHandle(p)),
                // Never made on CUDA today (import_cl_memory refuses), but freed the way
                // cuExternalMemoryGetMappedBuffer's documentation says: the mapped buffer with
                // cuMemFree, then the external-memory object.
                AllocKind::ImportedExternal => {
                    let unmapped = call!(cu::cuMemFree_v2(p));
                    let ext = alloc.handle as usize as cu::CUexternalMemory;
                    let destroyed = call!(cu::cuDestroyExternalMemory(ext));
                    unmapped.and(destroyed)
                }
            }
        };
        // The trait gives free no error channel; a failing free is still worth a line in the
        // worker's stderr (after a fault, every call fails with the sticky error).
        if let Err(e) = freed {
            eprintln!(
                "clhip cuda{}: freeing {:?} at {p:#x}: {e}",
                self.ordinal, alloc.kind
            );
        }
    }

    pub(super) fn export_posix_fd(&mut self, alloc: &DeviceAlloc) -> Result<OwnedFd, CaseError> {
        alloc.require(AllocKind::Exportable, "a shareable handle")?;
        self.bind()?;
        let ty = cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        let mut fd: c_int = -1;
        // SAFETY: for the POSIX fd handle type the out-parameter is an int.
        let out = (&raw mut fd).cast();
        unsafe { call!(cu::cuMemExportToShareableHandle(out, alloc.handle, ty, 0)) }
            .refused("exporting a POSIX fd")?;
        if fd < 0 {
            return Err(CaseError::unsupported(
                "cuMemExportToShareableHandle gave no fd",
            ));
        }
        // SAFETY: a fresh fd from the driver, owned by the caller from now on.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// cuMemcpy: with unified addressing the driver infers the direction from the pointers.
    /// Synchronous, and ordered after the peer's stream, which is a blocking stream and so
    /// waits for (and is waited for by) the legacy default stream cuMemcpy runs on.
    ///
    /// An address CUDA did not allocate, register or import is pageable host memory to the
    /// driver, which copies it with the CPU: one the CPU cannot touch kills the process with
    /// SIGSEGV (seen on an H100, driver 580.159.04, with 0x8), not an error code. Only
    /// workers, whose death is an outcome, should hand it such an address.
    pub(super) fn unified_memcpy(
        &mut self,
        dst: usize,
        src: usize,
        bytes: usize,
    ) -> Result<(), CaseError> {
        self.bind()?;
        let (d, s) = (dst as cu::CUdeviceptr, src as cu::CUdeviceptr);
        // SAFETY: none that Rust can give: an address the driver does not know (OpenCL's SVM,
        // say) is accessed from the CPU as host memory. That behaviour is what is under test,
        // in a worker process.
        unsafe { call!(cu::cuMemcpy(d, s, bytes), "{bytes} B {s:#x} -> {d:#x}") }.refused(
            "cuMemcpy refused the addresses (one may be memory CUDA did not allocate or map)",
        )
    }

    pub(super) fn ipc_get_handle(&mut self, alloc: &DeviceAlloc) -> Result<IpcHandle, CaseError> {
        alloc.require(AllocKind::Device, "an IPC handle (cuIpcGetMemHandle)")?;
        self.bind()?;
        let mut h = cu::CUipcMemHandle { reserved: [0; 64] };
        let p = alloc.ptr.addr as cu::CUdeviceptr;
        // SAFETY: live out-parameter; `p` is the base of a cuMemAlloc allocation.
        unsafe { call!(cu::cuIpcGetMemHandle(&mut h, p), "{p:#x}") }
            .refused("cuIpcGetMemHandle")?;
        Ok(h.reserved.map(|c| c as u8))
    }

    pub(super) fn ipc_open_handle(
        &mut self,
        handle: &IpcHandle,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        self.bind()?;
        let h = cu::CUipcMemHandle {
            reserved: handle.map(|b| b as c_char),
        };
        let lazy = cu::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter; the handle is passed by value. A handle from this same
        // process is refused by the driver with an error, not undefined behaviour.
        unsafe { call!(cu::cuIpcOpenMemHandle_v2(&mut p, h, lazy)) }
            .refused("cuIpcOpenMemHandle refused the handle")?;
        Ok(DeviceAlloc::new(AllocKind::IpcOpened, p as usize, len, 0))
    }

    /// cuImportExternalSemaphore with an opaque fd. On success the driver owns the fd (it
    /// closes it when the semaphore is destroyed); on failure the fd stays the caller's. The
    /// caller passes a dup of its own fd, so either way it closes only what it still owns.
    pub(super) fn import_opaque_fd_semaphore(&mut self, fd: RawFd) -> Result<u64, CaseError> {
        if fd < 0 {
            return Err(CaseError::unsupported(format!(
                "no fd to import as a semaphore ({fd})"
            )));
        }
        self.bind()?;
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

    pub(super) fn destroy_external_semaphore(&mut self, sem: u64) {
        if sem == 0 || self.bind().is_err() {
            return;
        }
        let s = sem as usize as cu::CUexternalSemaphore;
        // SAFETY: a handle import_semaphore_fd returned, destroyed once.
        if let Err(e) = unsafe { call!(cu::cuDestroyExternalSemaphore(s)) } {
            eprintln!(
                "clhip cuda{}: destroying semaphore {sem:#x}: {e}",
                self.ordinal
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::pattern;
    use crate::runtimes::PeerRuntime;
    use crate::runtimes::cuda::tests::{bits, gpu_or_skip};
    use crate::runtimes::device::{DeviceRuntime, ExportHandle};

    #[test]
    fn device_allocs_of_every_kind_round_trip() {
        let Some(mut p) = gpu_or_skip("device_allocs_of_every_kind_round_trip") else {
            return;
        };
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
    fn device_ipc_handle_and_refusals() {
        let Some(mut p) = gpu_or_skip("device_ipc_handle_and_refusals") else {
            return;
        };
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

    /// cuMemcpy device -> device, device -> pinned host and back: the data arrives bit for bit.
    #[test]
    fn device_memcpy_round_trips() {
        let Some(mut p) = gpu_or_skip("device_memcpy_round_trips") else {
            return;
        };
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
    fn device_memcpy_from_an_unknown_address_never_succeeds() {
        const TEST: &str = "device_memcpy_from_an_unknown_address_never_succeeds";
        if std::env::var_os("CLHIP_CUDA_MEMCPY_CHILD").is_some() {
            let Some(mut p) = gpu_or_skip(TEST) else {
                return;
            };
            let a = p.alloc(AllocKind::Device, 64).unwrap();
            eprintln!("copying from 0x8");
            let r = p.memcpy(a.ptr.addr, 0x8, 512);
            eprintln!("memcpy from 0x8 -> {r:?}");
            assert!(r.is_err(), "cuMemcpy from 0x8 claimed success");
            return;
        }
        if gpu_or_skip(TEST).is_none() {
            return;
        }
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
