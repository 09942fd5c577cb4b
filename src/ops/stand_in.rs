//! A device peer that is the host, for running a device path's own code (its room's create,
//! handovers and release, and the ops over it) against a real OpenCL where no GPU is: CI's
//! PoCL. Its "kernels" are the host peer's loops. What makes it a device and not the host: it
//! dereferences only addresses it handed out as device pointers, and registered host memory
//! is reached through a device pointer that is another address of the same pages (a second
//! mapping), as on a GPU without unified addressing. A path that gave its peer the host address
//! instead of the device pointer faults here, as it would there.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;

use nix::libc;
use num_complex::Complex32;

use crate::model::{Api, ApiError, CaseError, Peer, Transpose, Uplo};
use crate::runtimes::device::{
    AllocKind, DeviceAlloc, DeviceInfo, DeviceRuntime, ExportHandle, IpcHandle,
};
use crate::runtimes::host::HostPeer;
use crate::runtimes::vulkan::Broker;
use crate::runtimes::{PatternCheck, PeerPtr, PeerRuntime};

/// One host allocation: a memfd mapped once, so that a registration can map it again.
struct Allocation {
    fd: OwnedFd,
    base: usize,
    bytes: usize,
}

/// One registration: the device's own mapping of an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Registration {
    pub host: usize,
    pub device: usize,
    pub bytes: usize,
    mapping: usize,
    mapping_bytes: usize,
}

#[derive(Default)]
pub(super) struct StandIn {
    host: HostPeer,
    info: DeviceInfo,
    allocations: Vec<Allocation>,
    pub registered: Vec<Registration>,
    /// Host addresses unregistered, in order.
    pub unregistered: Vec<usize>,
}

fn refused(what: &str) -> CaseError {
    CaseError::unsupported(format!("the stand-in device has no {what}"))
}

/// Maps `bytes` of `fd` shared, read/write.
fn map(fd: RawFd, bytes: usize) -> Result<usize, CaseError> {
    // SAFETY: a fresh shared mapping of a memfd at least `bytes` long.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(CaseError::Harness(format!(
            "stand-in mmap of {bytes} bytes: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(p as usize)
}

fn unmap(addr: usize, bytes: usize) {
    // SAFETY: a mapping `map` made, unmapped once.
    unsafe { libc::munmap(addr as *mut c_void, bytes) };
}

impl StandIn {
    /// A device dereference of `ptr`: inside a registration's device range, or the fault a GPU
    /// reports for an address it does not map.
    fn reach(&self, ptr: PeerPtr) -> Result<(), CaseError> {
        let end = ptr.addr + ptr.len * size_of::<Complex32>();
        if self
            .registered
            .iter()
            .any(|r| ptr.addr >= r.device && end <= r.device + r.bytes)
        {
            return Ok(());
        }
        Err(CaseError::Fault(ApiError {
            api: Api::Cuda,
            call: "stand-in kernel".into(),
            code: 700,
            name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            detail: format!("{:#x} is no device pointer of the stand-in", ptr.addr),
        }))
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        for r in self.registered.drain(..) {
            unmap(r.mapping, r.mapping_bytes);
        }
        for a in self.allocations.drain(..) {
            unmap(a.base, a.bytes);
        }
    }
}

impl PeerRuntime for StandIn {
    fn peer(&self) -> Peer {
        Peer {
            api: Api::Cuda,
            ordinal: 0,
        }
    }

    fn as_device(&mut self) -> Option<&mut dyn DeviceRuntime> {
        Some(self)
    }

    /// Page-aligned, zeroed, pageable: a memfd's pages, mapped shared.
    fn alloc_host(&mut self, len: usize) -> Result<PeerPtr, CaseError> {
        let bytes = (len.max(1) * size_of::<Complex32>()).next_multiple_of(4096);
        // SAFETY: a NUL-terminated name; the fd is owned from here on.
        let fd = unsafe { libc::memfd_create(c"clhip-stand-in".as_ptr(), 0) };
        if fd < 0 {
            return Err(CaseError::Harness(format!(
                "stand-in memfd_create: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: a fresh fd, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: resizing the memfd just made.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), bytes as libc::off_t) } != 0 {
            return Err(CaseError::Harness("stand-in ftruncate".into()));
        }
        let base = map(fd.as_raw_fd(), bytes)?;
        self.allocations.push(Allocation { fd, base, bytes });
        Ok(PeerPtr { addr: base, len })
    }

    fn free_host(&mut self, ptr: PeerPtr) {
        if let Some(at) = self.allocations.iter().position(|a| a.base == ptr.addr) {
            let a = self.allocations.remove(at);
            unmap(a.base, a.bytes);
        }
    }

    fn fill_pattern(&mut self, ptr: PeerPtr, seed: u32) -> Result<(), CaseError> {
        self.reach(ptr)?;
        self.host.fill_pattern(ptr, seed)
    }

    fn check_pattern(&mut self, ptr: PeerPtr, seed: u32) -> Result<PatternCheck, CaseError> {
        self.reach(ptr)?;
        self.host.check_pattern(ptr, seed)
    }

    fn upload(&mut self, ptr: PeerPtr, data: &[Complex32]) -> Result<(), CaseError> {
        self.reach(ptr)?;
        self.host.upload(ptr, data)
    }

    fn download(&mut self, ptr: PeerPtr) -> Result<Vec<Complex32>, CaseError> {
        self.reach(ptr)?;
        self.host.download(ptr)
    }

    fn scale(&mut self, ptr: PeerPtr, s: f32) -> Result<(), CaseError> {
        self.reach(ptr)?;
        self.host.scale(ptr, s)
    }

    fn magnitude(&mut self, ptr: PeerPtr) -> Result<(), CaseError> {
        self.reach(ptr)?;
        self.host.magnitude(ptr)
    }

    fn flip_bit(&mut self, ptr: PeerPtr, word: usize, bit: u32) -> Result<(), CaseError> {
        self.reach(ptr)?;
        self.host.flip_bit(ptr, word, bit)
    }

    fn synchronize(&mut self) -> Result<(), CaseError> {
        Ok(())
    }
}

impl DeviceRuntime for StandIn {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&mut self, kind: AllocKind, _len: usize) -> Result<DeviceAlloc, CaseError> {
        Err(refused(&format!("{kind:?} allocations")))
    }

    /// Maps the allocation that holds `addr` a second time: the device pointer is `addr`'s
    /// place in that mapping.
    fn register_host(&mut self, addr: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
        let bytes = len.max(1) * size_of::<Complex32>();
        let Some(a) = self
            .allocations
            .iter()
            .find(|a| addr >= a.base && addr + bytes <= a.base + a.bytes)
        else {
            return Err(refused(&format!("host allocation at {addr:#x}")));
        };
        let mapping = map(a.fd.as_raw_fd(), a.bytes)?;
        let device = mapping + (addr - a.base);
        self.registered.push(Registration {
            host: addr,
            device,
            bytes,
            mapping,
            mapping_bytes: a.bytes,
        });
        Ok(DeviceAlloc::new(
            AllocKind::Registered,
            device,
            len,
            addr as u64,
        ))
    }

    fn free(&mut self, alloc: DeviceAlloc) {
        let host = alloc.handle as usize;
        if let Some(at) = self.registered.iter().position(|r| r.host == host) {
            let r = self.registered.remove(at);
            unmap(r.mapping, r.mapping_bytes);
            self.unregistered.push(host);
        }
    }

    fn export_fd(&mut self, _: &DeviceAlloc) -> Result<OwnedFd, CaseError> {
        Err(refused("exports"))
    }

    fn export_handle(&self) -> ExportHandle {
        ExportHandle::OpaqueFd
    }

    fn memcpy(&mut self, _: usize, _: usize, _: usize) -> Result<(), CaseError> {
        Err(refused("memcpy"))
    }

    fn import_cl_memory(&mut self, _: usize, _: usize, _: usize) -> Result<DeviceAlloc, CaseError> {
        Err(refused("imports"))
    }

    fn ipc_handle(&mut self, _: &DeviceAlloc) -> Result<IpcHandle, CaseError> {
        Err(refused("IPC"))
    }

    fn ipc_open(&mut self, _: &IpcHandle, _: usize) -> Result<DeviceAlloc, CaseError> {
        Err(refused("IPC"))
    }

    fn import_semaphore_fd(&mut self, _: RawFd) -> Result<u64, CaseError> {
        Err(refused("semaphores"))
    }

    fn destroy_semaphore(&mut self, _: u64) {}

    fn signal_semaphore(&mut self, _: u64) -> Result<(), CaseError> {
        Err(refused("semaphores"))
    }

    fn wait_semaphore(&mut self, _: u64) -> Result<(), CaseError> {
        Err(refused("semaphores"))
    }

    fn semaphore_wait_call(&self) -> &'static str {
        "stand-in wait"
    }

    fn spin(&mut self, _: u32) -> Result<(), CaseError> {
        Err(refused("spin kernel"))
    }

    fn import_memory_fd(
        &mut self,
        _: OwnedFd,
        _: u64,
        _: bool,
        _: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        Err(refused("imports"))
    }

    fn vulkan(&mut self) -> Result<Rc<Broker>, CaseError> {
        Err(refused("Vulkan"))
    }

    fn reopen_args(&self) -> Vec<String> {
        Vec::new()
    }

    fn reopen_args_on(&self, _ordinal: usize) -> Vec<String> {
        Vec::new()
    }

    // One device: a pair across GPUs never meets the stand-in.
    fn can_access_peer(&mut self, _from: usize, _to: usize) -> Result<bool, CaseError> {
        Ok(false)
    }

    fn peer_access_call(&self) -> &'static str {
        "no peer access (a stand-in of one device)"
    }

    fn enable_access_from(&mut self, _other: usize) -> Result<(), CaseError> {
        Err(CaseError::unsupported(
            "the stand-in device has no other device to reach it",
        ))
    }

    fn record_and_wait_event(&mut self) -> Result<(), CaseError> {
        Ok(())
    }

    fn cgemm(
        &mut self,
        _: Transpose,
        _: Transpose,
        _: usize,
        _: usize,
        _: usize,
        _: Complex32,
        _: PeerPtr,
        _: usize,
        _: PeerPtr,
        _: usize,
        _: Complex32,
        _: PeerPtr,
        _: usize,
    ) -> Result<(), CaseError> {
        Err(refused("BLAS"))
    }

    fn cpotrf(&mut self, _: Uplo, _: usize, _: PeerPtr, _: usize) -> Result<i32, CaseError> {
        Err(refused("solver"))
    }

    fn health_check(&mut self) -> Result<(), CaseError> {
        Ok(())
    }

    fn sticky_fault(&mut self) -> Option<ApiError> {
        None
    }

    fn memory_in_use(&mut self) -> Result<u64, CaseError> {
        // Its "device" memory is host memory: nothing on any device is in use.
        Ok(0)
    }
}

// ---- the registered paths on OpenCL with the stand-in as their peer ----

use crate::model::{Case, Op, Pair, PathKind, SyncMode};
use crate::runtimes::opencl::{ClSession, unit_test_device};

use super::{Plant, handoff};

/// A handoff case of `path` under `sync` between the first OpenCL device and the stand-in,
/// with the session to run it in.
fn registered_case(path: PathKind, sync: SyncMode, n: usize) -> (ClSession, Case) {
    let dev = unit_test_device();
    let case = Case {
        pair: Pair {
            opencl: dev.r.clone(),
            peer: StandIn::default().peer(),
            install: None,
            cl_gpu: None,
        },
        path,
        sync,
        op: Op::Handoff,
        env: Default::default(),
        n,
    };
    let session = ClSession::open(dev).unwrap_or_else(|e| panic!("OpenCL session: {e:?}"));
    (session, case)
}

const REGISTERED: [PathKind; 2] = [
    PathKind::RegisteredUseHostPtr,
    PathKind::RegisteredUnalignedUseHostPtr,
];

/// Both registered paths hand a bit-exact pattern across four times under `map`: OpenCL over
/// the registered range through CL_MEM_USE_HOST_PTR, the peer through the registration's
/// device pointer (another address of the same pages). The range starts on a page, or 8 bytes
/// past one, and is unregistered when the case is done.
#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn registered_memory_crosses_both_ways_under_map() {
    for path in REGISTERED {
        for n in [1, 4097] {
            let (mut s, case) = registered_case(path, SyncMode::Map, n);
            let mut peer = StandIn::default();
            let seen = handoff::handoff(&mut s, &mut peer, &case, 0x5EED, None);
            assert_eq!(
                seen.as_deref(),
                Ok(format!("{} words bit-exact across 4 crossings", 2 * n).as_str()),
                "{}",
                case.id()
            );
            assert!(
                peer.registered.is_empty(),
                "{}: still registered",
                case.id()
            );
            let [host] = peer.unregistered[..] else {
                panic!("{}: unregistered {:?}", case.id(), peer.unregistered);
            };
            let skip = if path == PathKind::RegisteredUnalignedUseHostPtr {
                8
            } else {
                0
            };
            assert_eq!(host % 4096, skip, "{}", case.id());
        }
    }
}

/// The peer-noop plant: the peer skips its kernels on the registered memory. OpenCL then reads
/// the poison where the peer's pattern should be, and the case fails at that crossing.
#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn a_peer_that_skips_its_kernels_on_registered_memory_fails() {
    for path in REGISTERED {
        let (mut s, case) = registered_case(path, SyncMode::Map, 4097);
        let mut peer = StandIn::default();
        match handoff::handoff(&mut s, &mut peer, &case, 0x5EED, Some(Plant::PeerNoop)) {
            Err(CaseError::Mismatch(m)) => {
                assert!(
                    m.what
                        .starts_with("pattern written by cuda0, read by OpenCL"),
                    "{}: {m}",
                    case.id()
                );
                assert_eq!(m.count, 2 * 4097, "{}: {m}", case.id());
            }
            other => panic!("{}: expected a mismatch, got {other:?}", case.id()),
        }
        assert!(peer.registered.is_empty(), "{}", case.id());
    }
}

/// The stand-in bites where a GPU would: its kernels on an address that is no device pointer
/// of its own (the host address of registered memory included) fault.
#[test]
fn the_stand_in_faults_on_an_address_it_did_not_map() {
    let mut peer = StandIn::default();
    let host = peer.alloc_host(1024).unwrap();
    let reg = peer.register_host(host.addr, 1024).unwrap();
    assert_ne!(reg.ptr.addr, host.addr);
    peer.fill_pattern(reg.ptr, 3).unwrap();
    // The host sees the device's writes: one memory, two addresses.
    assert_eq!(peer.host.check_pattern(host, 3).unwrap().mismatches, 0);
    assert!(matches!(
        peer.fill_pattern(host, 3),
        Err(CaseError::Fault(e)) if e.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    ));
    peer.free(reg);
    assert!(matches!(
        peer.check_pattern(host, 3),
        Err(CaseError::Fault(_))
    ));
    assert_eq!(peer.unregistered, [host.addr]);
    peer.free_host(host);
}
