//! The [`DeviceRuntime`] of every GPU participant, written once over [`GpuDevice`]: the device
//! made current before each operation, then the shared logic of `memory` and `blas` around the
//! backend's calls. A blanket impl rather than one per backend, so that the two backends do not
//! each carry the same list of forwarding methods.

use std::os::fd::{OwnedFd, RawFd};
use std::rc::Rc;

use num_complex::Complex32;

use super::blas::{Cgemm, Cpotrf, GpuBlas};
use super::memory::{self, GpuMemory};
use crate::model::{ApiError, CaseError, Transpose, Uplo};
use crate::runtimes::device::{
    AllocKind, DeviceAlloc, DeviceInfo, DeviceRuntime, ExportHandle, IpcHandle,
};
use crate::runtimes::vulkan::Broker;
use crate::runtimes::{PeerPtr, PeerRuntime};

/// What a GPU runtime supplies beside its memory and BLAS calls.
pub(crate) trait GpuDevice: super::GpuCore + GpuMemory + GpuBlas + PeerRuntime {
    fn device_info(&self) -> &DeviceInfo;
    /// [`DeviceRuntime::reopen_args_on`].
    fn reopen_arguments(&self, ordinal: usize) -> Vec<String>;
    /// The call [`GpuDevice::can_access_peer`] makes.
    const PEER_ACCESS_CALL: &'static str;
    /// [`DeviceRuntime::can_access_peer`].
    fn can_access_peer(&self, from: usize, to: usize) -> Result<bool, CaseError>;
    /// [`DeviceRuntime::enable_access_from`].
    fn enable_peer_access_from(&mut self, other: usize) -> Result<(), CaseError>;
    /// Record the peer's event after the work enqueued so far on its stream, and wait for it.
    fn record_event_and_wait(&self) -> Result<(), CaseError>;
    /// Wait for all of the device's work: the call's error is a fault left pending, if any.
    fn synchronize_device(&self) -> Result<(), ApiError>;
    /// [`super::known_answer`] on a device buffer of its own.
    fn known_answer_check(&self) -> Result<(), CaseError>;
    /// [`DeviceRuntime::queue_watch`].
    fn stream_watch(&self) -> Option<crate::blocking::QueueWatch> {
        None
    }
    /// Where the peer keeps its Vulkan broker once opened (or why it could not be).
    fn vulkan_slot(&mut self) -> &mut Option<Result<Rc<Broker>, CaseError>>;
}

impl<T: GpuDevice> DeviceRuntime for T {
    fn queue_watch(&self) -> Option<crate::blocking::QueueWatch> {
        self.stream_watch()
    }

    fn info(&self) -> &DeviceInfo {
        self.device_info()
    }

    fn alloc(&mut self, kind: AllocKind, len: usize) -> Result<DeviceAlloc, CaseError> {
        memory::allocate(self, kind, len)
    }

    fn free(&mut self, alloc: DeviceAlloc) {
        memory::release(self, alloc)
    }

    fn export_fd(&mut self, alloc: &DeviceAlloc) -> Result<OwnedFd, CaseError> {
        memory::export_fd(self, alloc)
    }

    fn export_handle(&self) -> ExportHandle {
        T::EXPORT_HANDLE
    }

    fn memcpy(&mut self, dst: usize, src: usize, bytes: usize) -> Result<(), CaseError> {
        self.bind()?;
        self.copy_inferred(dst, src, bytes)
    }

    fn import_cl_memory(
        &mut self,
        addr: usize,
        bytes: usize,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        memory::import_cl_memory(self, addr, bytes, len)
    }

    fn register_host(&mut self, addr: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
        memory::register_host(self, addr, len)
    }

    fn ipc_handle(&mut self, alloc: &DeviceAlloc) -> Result<IpcHandle, CaseError> {
        memory::ipc_handle(self, alloc)
    }

    fn ipc_open(&mut self, handle: &IpcHandle, len: usize) -> Result<DeviceAlloc, CaseError> {
        memory::ipc_open(self, handle, len)
    }

    fn import_semaphore_fd(&mut self, fd: RawFd) -> Result<u64, CaseError> {
        memory::import_semaphore_fd(self, fd)
    }

    fn destroy_semaphore(&mut self, sem: u64) {
        memory::destroy_semaphore(self, sem)
    }

    fn signal_semaphore(&mut self, sem: u64) -> Result<(), CaseError> {
        memory::signal_semaphore(self, sem)
    }

    fn wait_semaphore(&mut self, sem: u64) -> Result<(), CaseError> {
        memory::wait_semaphore(self, sem)
    }

    fn semaphore_wait_call(&self) -> &'static str {
        T::SEMAPHORE_WAIT_CALL
    }

    fn spin(&mut self, iters: u32) -> Result<(), CaseError> {
        super::spin(self, iters)
    }

    fn import_memory_fd(
        &mut self,
        fd: OwnedFd,
        size: u64,
        dedicated: bool,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        memory::import_memory_fd(self, fd, size, dedicated, len)
    }

    fn vulkan(&mut self) -> Result<Rc<Broker>, CaseError> {
        let uuid = self.device_info().uuid.clone();
        memory::vulkan(self.vulkan_slot(), &uuid)
    }

    fn reopen_args(&self) -> Vec<String> {
        self.reopen_arguments(self.peer().ordinal)
    }

    fn reopen_args_on(&self, ordinal: usize) -> Vec<String> {
        self.reopen_arguments(ordinal)
    }

    fn can_access_peer(&mut self, from: usize, to: usize) -> Result<bool, CaseError> {
        GpuDevice::can_access_peer(self, from, to)
    }

    fn peer_access_call(&self) -> &'static str {
        T::PEER_ACCESS_CALL
    }

    fn enable_access_from(&mut self, other: usize) -> Result<(), CaseError> {
        self.enable_peer_access_from(other)?;
        // Enabling made `other` current; the peer's own device is what every later call of
        // this peer expects.
        self.bind()
    }

    fn record_and_wait_event(&mut self) -> Result<(), CaseError> {
        self.bind()?;
        self.record_event_and_wait()
    }

    fn cgemm(
        &mut self,
        op_a: Transpose,
        op_b: Transpose,
        m: usize,
        n: usize,
        k: usize,
        alpha: Complex32,
        a: PeerPtr,
        lda: usize,
        b: PeerPtr,
        ldb: usize,
        beta: Complex32,
        c: PeerPtr,
        ldc: usize,
    ) -> Result<(), CaseError> {
        self.bind()?;
        let gemm = Cgemm::new(
            (op_a, op_b),
            (m, n, k),
            (alpha, beta),
            (a, lda),
            (b, ldb),
            (c, ldc),
        )?;
        self.cgemm_on_stream(&gemm)
    }

    fn cpotrf(&mut self, uplo: Uplo, n: usize, a: PeerPtr, lda: usize) -> Result<i32, CaseError> {
        self.bind()?;
        let potrf = Cpotrf::new(uplo, n, a, lda)?;
        self.cpotrf_on_stream(&potrf)
    }

    fn health_check(&mut self) -> Result<(), CaseError> {
        self.bind()?;
        self.known_answer_check()
    }

    fn sticky_fault(&mut self) -> Option<ApiError> {
        if self.bind().is_err() {
            return None;
        }
        match self.synchronize_device() {
            Err(e) if e.is_device_fault() => Some(e),
            _ => None,
        }
    }

    fn memory_in_use(&mut self) -> Result<u64, CaseError> {
        self.bind()?;
        let (free, total) = self.device_memory()?;
        Ok(u64::try_from(total.saturating_sub(free)).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::ffi::c_void;

    use super::*;
    use crate::model::{Api, Phase};
    use crate::runtimes::gpu::memory::{Optional, map_exportable};
    use crate::runtimes::gpu::{GpuCore, Kernels, Launch, gpu_peer_runtime};

    /// A backend that records each raw call by name and fails the one named `fail` (with a
    /// device fault's name when `fault`), so that the order of the shared logic's calls and its
    /// refusals show without a GPU.
    #[derive(Default)]
    struct Fake {
        ordinal: usize,
        info: DeviceInfo,
        calls: RefCell<Vec<&'static str>>,
        fail: &'static str,
        fault: bool,
        lacks: Option<Optional>,
        managed: bool,
        free_bytes: usize,
        vulkan: Option<Result<Rc<Broker>, CaseError>>,
        /// The address host_unregister was given.
        unregistered: RefCell<Option<usize>>,
        /// Two GPUs that cannot reach each other's memory.
        apart: bool,
    }

    impl Fake {
        fn failing(call: &'static str) -> Fake {
            Fake {
                fail: call,
                ..Fake::default()
            }
        }

        fn call(&self, name: &'static str) -> Result<(), ApiError> {
            self.calls.borrow_mut().push(name);
            if self.fail != name {
                return Ok(());
            }
            let code = if self.fault {
                "CUDA_ERROR_ILLEGAL_ADDRESS"
            } else {
                "CUDA_ERROR_INVALID_VALUE"
            };
            Err(ApiError {
                api: Api::Cuda,
                call: name.into(),
                code: 1,
                name: code.into(),
                detail: String::new(),
            })
        }

        fn refused(&self, name: &'static str) -> Result<(), CaseError> {
            self.call(name).refused(name)
        }

        fn calls(&self) -> Vec<&'static str> {
            self.calls.borrow().clone()
        }

        fn sync(&self) -> Result<(), CaseError> {
            self.refused("sync")
        }
    }

    impl GpuCore for Fake {
        type Function = ();

        fn bind(&self) -> Result<(), CaseError> {
            self.call("bind").running()
        }

        fn kernels(&self) -> Result<&Kernels<()>, CaseError> {
            Err(CaseError::unsupported("no kernels"))
        }

        fn launch_blocks(&self, _: Launch<()>) -> Result<(), CaseError> {
            self.refused("launch")
        }

        fn copy_in(&self, _: usize, _: *const c_void, _: usize) -> Result<(), CaseError> {
            self.refused("copy_in")
        }

        fn copy_out(&self, _: *mut c_void, _: usize, _: usize) -> Result<(), CaseError> {
            self.refused("copy_out")
        }

        fn scratch(&self) -> u64 {
            0
        }
    }

    gpu_peer_runtime!(Fake, Api::Cuda);

    impl GpuMemory for Fake {
        const EXPORT_HANDLE: ExportHandle = ExportHandle::OpaqueFd;
        const EXPORT_CALL: &'static str = "fakeExport";
        const IPC_GET_CALL: &'static str = "fakeIpcGet";
        const SEMAPHORE_WAIT_CALL: &'static str = "fakeWait";

        fn require(&self, what: Optional) -> Result<(), CaseError> {
            match self.lacks {
                Some(lacking) if lacking == what => Err(CaseError::unsupported("lacks it")),
                _ => Ok(()),
            }
        }

        fn alloc_device(&self, _: usize) -> Result<usize, CaseError> {
            self.refused("alloc_device").map(|()| 0x1000)
        }

        fn alloc_pinned(&self, _: usize) -> Result<usize, CaseError> {
            self.refused("alloc_pinned").map(|()| 0x2000)
        }

        fn has_managed_memory(&self) -> Result<bool, CaseError> {
            self.refused("has_managed_memory").map(|()| self.managed)
        }

        fn device_memory(&self) -> Result<(usize, usize), CaseError> {
            self.refused("device_memory")
                .map(|()| (self.free_bytes, self.free_bytes + 4096))
        }

        fn alloc_managed(&self, _: usize) -> Result<usize, CaseError> {
            self.refused("alloc_managed").map(|()| 0x3000)
        }

        fn alloc_exportable(&self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
            self.refused("create")?;
            let size = bytes.next_multiple_of(4096);
            map_exportable(self, size, 7, len).refused("mapping")
        }

        fn vmm_reserve(&self, _: usize) -> Result<usize, ApiError> {
            self.call("vmm_reserve").map(|()| 0x4000)
        }

        fn vmm_map(&self, _: usize, _: usize, _: u64) -> Result<(), ApiError> {
            self.call("vmm_map")
        }

        fn vmm_set_access(&self, _: usize, _: usize) -> Result<(), ApiError> {
            self.call("vmm_set_access")
        }

        fn vmm_unmap(&self, _: usize, _: usize) -> Result<(), ApiError> {
            self.call("vmm_unmap")
        }

        fn vmm_address_free(&self, _: usize, _: usize) -> Result<(), ApiError> {
            self.call("vmm_address_free")
        }

        fn vmm_release(&self, _: u64) -> Result<(), ApiError> {
            self.call("vmm_release")
        }

        fn host_register(&self, _: usize, _: usize) -> Result<(), CaseError> {
            self.refused("host_register")
        }

        fn host_device_pointer(&self, _: usize) -> Result<usize, CaseError> {
            self.refused("host_device_pointer").map(|()| 0x8000)
        }

        fn host_unregister(&self, addr: usize) -> Result<(), ApiError> {
            *self.unregistered.borrow_mut() = Some(addr);
            self.call("host_unregister")
        }

        fn free_device(&self, _: usize) -> Result<(), ApiError> {
            self.call("free_device")
        }

        fn free_pinned(&self, _: usize) -> Result<(), ApiError> {
            self.call("free_pinned")
        }

        fn ipc_close(&self, _: usize) -> Result<(), ApiError> {
            self.call("ipc_close")
        }

        fn destroy_external_memory(&self, _: u64) -> Result<(), ApiError> {
            self.call("destroy_external_memory")
        }

        fn export_shareable_fd(&self, _: u64) -> Result<RawFd, CaseError> {
            self.refused("export").map(|()| -1)
        }

        fn ipc_get_handle(&self, _: usize) -> Result<IpcHandle, CaseError> {
            self.refused("ipc_get").map(|()| [1; 64])
        }

        fn ipc_open_handle(&self, _: &IpcHandle) -> Result<usize, CaseError> {
            self.refused("ipc_open").map(|()| 0x5000)
        }

        fn import_semaphore(&self, _: RawFd) -> Result<u64, CaseError> {
            self.refused("import_semaphore").map(|()| 9)
        }

        fn destroy_semaphore_handle(&self, _: u64) -> Result<(), ApiError> {
            self.call("destroy_semaphore")
        }

        fn enqueue_signal(&self, _: u64) -> Result<(), CaseError> {
            self.refused("signal_semaphore")
        }

        fn enqueue_wait(&self, _: u64) -> Result<(), CaseError> {
            self.refused("wait_semaphore")
        }

        fn import_memory(
            &self,
            _: OwnedFd,
            _: u64,
            _: bool,
            _: usize,
        ) -> Result<(usize, u64), CaseError> {
            self.refused("import_memory").map(|()| (0x7000, 6))
        }

        fn copy_inferred(&self, _: usize, _: usize, _: usize) -> Result<(), CaseError> {
            self.refused("copy_inferred")
        }

        fn import_cl(&mut self, _: usize, _: usize) -> Result<(usize, u64), CaseError> {
            self.refused("import_cl").map(|()| (0x6000, 8))
        }
    }

    impl GpuBlas for Fake {
        fn cgemm_on_stream(&mut self, _: &Cgemm) -> Result<(), CaseError> {
            self.refused("cgemm")
        }

        fn cpotrf_on_stream(&mut self, _: &Cpotrf) -> Result<i32, CaseError> {
            self.refused("cpotrf").map(|()| 0)
        }
    }

    impl GpuDevice for Fake {
        fn device_info(&self) -> &DeviceInfo {
            &self.info
        }

        fn reopen_arguments(&self, ordinal: usize) -> Vec<String> {
            vec![ordinal.to_string()]
        }

        const PEER_ACCESS_CALL: &'static str = "fakeCanAccessPeer";

        fn can_access_peer(&self, _from: usize, _to: usize) -> Result<bool, CaseError> {
            self.refused("can_access_peer")?;
            Ok(!self.apart)
        }

        fn enable_peer_access_from(&mut self, _other: usize) -> Result<(), CaseError> {
            self.refused("enable_peer_access_from")
        }

        fn record_event_and_wait(&self) -> Result<(), CaseError> {
            self.refused("record_event_and_wait")
        }

        fn synchronize_device(&self) -> Result<(), ApiError> {
            self.call("synchronize_device")
        }

        fn known_answer_check(&self) -> Result<(), CaseError> {
            self.refused("known_answer_check")
        }

        fn vulkan_slot(&mut self) -> &mut Option<Result<Rc<Broker>, CaseError>> {
            &mut self.vulkan
        }
    }

    fn reason(r: Result<impl std::fmt::Debug, CaseError>) -> String {
        match r {
            Err(CaseError::Unsupported { reason, .. }) => reason,
            other => panic!("expected unsupported, got {other:?}"),
        }
    }

    /// Registered host memory: the device dereferences the device pointer, and `free`
    /// unregisters the host address; a refused device pointer undoes the registration, and a
    /// refused registration leaves nothing to undo.
    #[test]
    fn registered_host_memory_is_unregistered_by_its_host_address() {
        let mut f = Fake::default();
        let r = f.register_host(0x9000, 10).unwrap();
        let seen = (r.kind, r.ptr.addr, r.ptr.len, r.handle, r.bytes);
        assert_eq!(seen, (AllocKind::Registered, 0x8000, 10, 0x9000, 80));
        let made = ["bind", "host_register", "host_device_pointer"];
        assert_eq!(f.calls(), made);
        f.free(r);
        assert_eq!(f.calls()[3..], ["bind", "host_unregister"]);
        assert_eq!(*f.unregistered.borrow(), Some(0x9000));

        let mut f = Fake::failing("host_device_pointer");
        assert_eq!(reason(f.register_host(0x9000, 10)), "host_device_pointer");
        assert_eq!(f.calls(), [&made[..], &["host_unregister"]].concat());
        assert_eq!(*f.unregistered.borrow(), Some(0x9000));

        let mut f = Fake::failing("host_register");
        assert_eq!(reason(f.register_host(0x9000, 10)), "host_register");
        assert_eq!(f.calls(), ["bind", "host_register"]);
        assert_eq!(*f.unregistered.borrow(), None);
        // Registered memory comes from register_host alone.
        assert!(reason(f.alloc(AllocKind::Registered, 10)).contains("register_host"));
    }

    #[test]
    fn a_refused_mapping_undoes_exactly_the_steps_made() {
        let mut f = Fake::default();
        let a = f.alloc(AllocKind::Exportable, 10).unwrap();
        let made = ["bind", "create", "vmm_reserve", "vmm_map", "vmm_set_access"];
        assert_eq!(f.calls(), made);
        assert_eq!(
            (a.ptr.addr, a.ptr.len, a.handle, a.bytes),
            (0x4000, 10, 7, 4096)
        );
        let undo: [(&str, &[&str]); 3] = [
            ("vmm_reserve", &["vmm_release"]),
            ("vmm_map", &["vmm_address_free", "vmm_release"]),
            (
                "vmm_set_access",
                &["vmm_unmap", "vmm_address_free", "vmm_release"],
            ),
        ];
        for (fail, undone) in undo {
            let mut f = Fake::failing(fail);
            assert_eq!(reason(f.alloc(AllocKind::Exportable, 10)), "mapping");
            let calls = f.calls();
            let at = calls.iter().position(|c| *c == fail).unwrap();
            assert_eq!(calls[at + 1..], *undone, "{fail}");
        }
        // A device fault while mapping is the backend's to call a fault.
        let mut f = Fake {
            fault: true,
            ..Fake::failing("vmm_map")
        };
        assert!(matches!(
            f.alloc(AllocKind::Exportable, 10),
            Err(CaseError::Fault(_))
        ));
    }

    #[test]
    fn each_kind_is_released_by_its_own_calls_in_order() {
        let kinds: [(AllocKind, &[&str]); 6] = [
            (AllocKind::Device, &["free_device"]),
            (AllocKind::Managed, &["free_device"]),
            (AllocKind::PinnedHost, &["free_pinned"]),
            (
                AllocKind::Exportable,
                &["vmm_unmap", "vmm_address_free", "vmm_release"],
            ),
            (AllocKind::IpcOpened, &["ipc_close"]),
            (
                AllocKind::ImportedExternal,
                &["free_device", "destroy_external_memory"],
            ),
        ];
        for (kind, calls) in kinds {
            let mut f = Fake::default();
            f.free(DeviceAlloc::new(kind, 0x1000, 4, 7));
            assert_eq!(f.calls()[1..], *calls, "{kind:?}");
        }
        // A refused step does not keep the later ones from being tried.
        let mut f = Fake::failing("vmm_unmap");
        f.free(DeviceAlloc::new(AllocKind::Exportable, 0x1000, 4, 7));
        let all = ["bind", "vmm_unmap", "vmm_address_free", "vmm_release"];
        assert_eq!(f.calls(), all);
        // No device to make current: nothing is freed.
        let mut f = Fake::failing("bind");
        f.free(DeviceAlloc::new(AllocKind::Device, 0x1000, 4, 0));
        assert_eq!(f.calls(), ["bind"]);
    }

    #[test]
    fn managed_memory_needs_support_and_room() {
        let room = |free_bytes| Fake {
            managed: true,
            free_bytes,
            ..Fake::default()
        };
        let mut f = room(8000);
        let a = f.alloc(AllocKind::Managed, 1000).unwrap();
        let calls = [
            "bind",
            "has_managed_memory",
            "device_memory",
            "alloc_managed",
        ];
        assert_eq!(f.calls(), calls);
        assert_eq!((a.ptr.addr, a.bytes), (0x3000, 8000));
        let mut f = room(7999);
        assert_eq!(
            reason(f.alloc(AllocKind::Managed, 1000)),
            "managed allocation of 8000 bytes exceeds the 7999 bytes free"
        );
        assert!(!f.calls().contains(&"alloc_managed"));
        let mut f = Fake::default();
        let r = f.alloc(AllocKind::Managed, 1000);
        assert_eq!(reason(r), "device has no managed memory");
        let r = f.alloc(AllocKind::IpcOpened, 1);
        assert!(reason(r).starts_with("IpcOpened memory is not allocated"));
    }

    #[test]
    fn exports_handles_and_semaphores_are_refused_before_any_call() {
        let mut f = Fake::default();
        let pinned = DeviceAlloc::new(AllocKind::PinnedHost, 0x2000, 4, 0);
        assert_eq!(
            reason(f.export_fd(&pinned)),
            "only Exportable allocations have a shareable handle, not PinnedHost"
        );
        assert_eq!(
            reason(f.ipc_handle(&pinned)),
            "only Device allocations have an IPC handle (fakeIpcGet), not PinnedHost"
        );
        let r = f.import_semaphore_fd(-1);
        assert_eq!(reason(r), "no fd to import as a semaphore (-1)");
        f.destroy_semaphore(0);
        assert!(f.calls().is_empty(), "{:?}", f.calls());
        // What the library lacks is refused before the device is made current.
        let device = DeviceAlloc::new(AllocKind::Device, 0x1000, 4, 0);
        let mut f = Fake {
            lacks: Some(Optional::Ipc),
            ..Fake::default()
        };
        assert_eq!(reason(f.ipc_handle(&device)), "lacks it");
        assert_eq!(reason(f.ipc_open(&[0; 64], 4)), "lacks it");
        assert!(f.calls().is_empty(), "{:?}", f.calls());
        assert_eq!(f.import_semaphore_fd(3).unwrap(), 9);
        let mut f = Fake {
            lacks: Some(Optional::ExternalSemaphore),
            ..Fake::default()
        };
        assert_eq!(reason(f.import_semaphore_fd(3)), "lacks it");
        assert_eq!(f.ipc_handle(&device).unwrap(), [1; 64]);
        assert_eq!(f.calls(), ["bind", "ipc_get"]);
        // An export that gives no fd is refused naming the call.
        let exportable = DeviceAlloc::new(AllocKind::Exportable, 0x4000, 4, 7);
        let r = Fake::default().export_fd(&exportable);
        assert_eq!(reason(r), "fakeExport gave no fd");
    }

    #[test]
    fn opened_and_imported_memory_carry_the_callers_length() {
        let mut f = Fake::default();
        let a = f.ipc_open(&[0; 64], 512).unwrap();
        assert_eq!(
            (a.kind, a.ptr.addr, a.ptr.len),
            (AllocKind::IpcOpened, 0x5000, 512)
        );
        let a = f.import_cl_memory(0x9000, 4096, 512).unwrap();
        assert_eq!(a.kind, AllocKind::ImportedExternal);
        assert_eq!(
            (a.ptr.addr, a.ptr.len, a.handle, a.bytes),
            (0x6000, 512, 8, 4096)
        );
        assert_eq!(f.calls(), ["bind", "ipc_open", "import_cl"]);
    }

    fn dev_null() -> OwnedFd {
        std::fs::File::open("/dev/null").unwrap().into()
    }

    /// Another API's export is imported as ImportedExternal memory (freed by the mapping, then
    /// the object), refused before any call when the element count overruns the export or the
    /// library lacks the import; semaphore signals and waits are refused likewise.
    #[test]
    fn an_exported_fd_is_imported_as_external_memory_of_the_callers_length() {
        let mut f = Fake::default();
        let a = f.import_memory_fd(dev_null(), 8192, true, 512).unwrap();
        assert_eq!(
            (a.kind, a.ptr.addr, a.ptr.len, a.handle, a.bytes),
            (AllocKind::ImportedExternal, 0x7000, 512, 6, 4096)
        );
        assert_eq!(f.calls(), ["bind", "import_memory"]);
        let r = f.import_memory_fd(dev_null(), 4095, false, 512);
        assert_eq!(reason(r), "4096 bytes do not fit the 4095-byte export");
        let mut f = Fake {
            lacks: Some(Optional::ExternalMemory),
            ..Fake::default()
        };
        assert_eq!(
            reason(f.import_memory_fd(dev_null(), 8192, false, 1)),
            "lacks it"
        );
        let mut f = Fake {
            lacks: Some(Optional::ExternalSemaphore),
            ..Fake::default()
        };
        assert_eq!(
            reason(DeviceRuntime::signal_semaphore(&mut f, 9)),
            "lacks it"
        );
        assert_eq!(reason(DeviceRuntime::wait_semaphore(&mut f, 9)), "lacks it");
        assert!(f.calls().is_empty(), "{:?}", f.calls());
        let mut f = Fake::default();
        DeviceRuntime::signal_semaphore(&mut f, 9).unwrap();
        DeviceRuntime::wait_semaphore(&mut f, 9).unwrap();
        assert_eq!(f.semaphore_wait_call(), "fakeWait");
        assert_eq!(
            f.calls(),
            ["bind", "signal_semaphore", "bind", "wait_semaphore"]
        );
    }

    /// A device's Vulkan broker is opened once, by the device's UUID; without a Vulkan loader,
    /// or with a loader and no driver (CI, whose Vulkan headers bring the loader), that is the
    /// refusal every semaphore and vk-memory case of the device gets, kept and given again
    /// without a second try.
    #[test]
    fn the_vulkan_broker_is_opened_once_by_the_devices_uuid() {
        let mut f = Fake::default();
        f.info.uuid = "01234567-89ab-cdef-0123-456789abcdef".into();
        match f.vulkan() {
            Err(CaseError::Unsupported { reason, .. }) => {
                eprintln!("{reason}");
                let no_loader = reason.starts_with("Vulkan broker: no Vulkan loader: ");
                let no_device = reason.contains(
                    "no Vulkan device has the GPU's UUID 01234567-89ab-cdef-0123-456789abcdef",
                ) || reason.contains("found no physical device");
                // The loader's answer when no driver (ICD) is installed.
                let no_driver =
                    reason.contains("vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER");
                assert!(no_loader || no_device || no_driver, "{reason}");
                assert!(matches!(f.vulkan, Some(Err(_))), "the refusal is kept");
                assert!(
                    matches!(f.vulkan(), Err(CaseError::Unsupported { reason: again, .. }) if again == reason)
                );
            }
            other => panic!("a made-up UUID found a Vulkan device: {other:?}"),
        }
        assert!(f.calls().is_empty(), "{:?}", f.calls());
    }

    #[test]
    fn only_a_device_fault_is_sticky() {
        let mut f = Fake {
            fault: true,
            ..Fake::failing("synchronize_device")
        };
        let e = f.sticky_fault().expect("a fault");
        assert_eq!(e.name, "CUDA_ERROR_ILLEGAL_ADDRESS");
        assert!(Fake::failing("synchronize_device").sticky_fault().is_none());
        assert!(Fake::default().sticky_fault().is_none());
        let mut f = Fake::failing("bind");
        assert!(f.sticky_fault().is_none());
        assert_eq!(f.calls(), ["bind"]);
    }

    #[test]
    fn across_gpus_each_path_gets_what_its_room_needs_and_no_more() {
        use crate::model::PathKind as P;
        use crate::paths::reach_across;
        let on_gpu_1 = |apart| Fake {
            ordinal: 1,
            apart,
            ..Fake::default()
        };
        // OpenCL on cuda0 dereferences cuda1's allocation: asked, enabled, and the peer's own
        // device current again for what follows.
        let mut f = on_gpu_1(false);
        reach_across(&mut f, P::DevicePtrAsClArg, 0).unwrap();
        assert_eq!(
            f.calls(),
            ["can_access_peer", "enable_peer_access_from", "bind"]
        );
        // IPC: asked only; the IPC open enables the access itself.
        let mut f = on_gpu_1(false);
        reach_across(&mut f, P::IpcDevicePtrAsClArg, 0).unwrap();
        assert_eq!(f.calls(), ["can_access_peer"]);
        // Host memory and copies need nothing of the runtime.
        for path in [
            P::Copy,
            P::PinnedUseHostPtr,
            P::ManagedUseHostPtr,
            P::ClSvmCoarseMemcpy,
        ] {
            let mut f = on_gpu_1(true);
            reach_across(&mut f, path, 0).unwrap();
            assert!(f.calls().is_empty(), "{path}: {:?}", f.calls());
        }
        // GPUs that cannot reach each other: unsupported, with the call that said so.
        let mut f = on_gpu_1(true);
        assert_eq!(
            reason(reach_across(&mut f, P::DevicePtrAsClArg, 0)),
            "cuda0 cannot reach cuda1's memory (fakeCanAccessPeer(0, 1) says no), and on \
             device-ptr-as-cl-arg OpenCL's GPU reads the peer's memory"
        );
        assert_eq!(
            reason(reach_across(&mut f, P::IpcDevicePtrAsClArg, 0)),
            "cuda1 cannot reach cuda0's memory (fakeCanAccessPeer(1, 0) says no), and on \
             ipc+device-ptr-as-cl-arg the peer reads memory on OpenCL's GPU"
        );
        assert_eq!(f.calls(), ["can_access_peer", "can_access_peer"]);
        // A path no API maps across GPUs says why, before any call.
        let mut f = on_gpu_1(false);
        let r = reason(reach_across(&mut f, P::ClGpuVa, 0));
        assert!(r.starts_with("cl-gpu-va is not run across GPUs: "), "{r}");
        assert!(f.calls().is_empty());
    }

    #[test]
    fn blas_sizes_are_refused_after_bind_before_the_library() {
        let mut f = Fake::default();
        let (p, one) = (PeerPtr { addr: 0, len: 0 }, Complex32::new(1.0, 0.0));
        let big = i32::MAX as usize + 1;
        assert!(f.cpotrf(Uplo::Lower, big, p, big).is_err());
        let t = Transpose::None;
        let r = f.cgemm(t, t, 1, big, 1, one, p, 1, p, 1, one, p, 1);
        assert_eq!(reason(r), format!("n = {big} exceeds the 32-bit int API"));
        assert_eq!(f.calls(), ["bind", "bind"]);
        assert_eq!(f.cpotrf(Uplo::Lower, 4, p, 4).unwrap(), 0);
        assert_eq!(f.calls()[2..], ["bind", "cpotrf"]);
    }
}
