//! `registered+use-host-ptr`, `registered-unaligned+use-host-ptr`: pageable host memory the
//! program allocated itself, registered with the peer's runtime (hipHostRegister /
//! cuMemHostRegister, mapped), wrapped by clCreateBuffer(CL_MEM_USE_HOST_PTR), and used by the
//! peer's kernels through the registration's device pointer (hipHostGetDevicePointer /
//! cuMemHostGetDevicePointer). A kernel on hipHostRegister'd memory faulted with "Page not
//! present" on ROCm 3.9 (ROCm/HIP#2189; docs/paths.md). The unaligned twin registers a range
//! that starts one element (8 bytes) past a page boundary: neither runtime asks the range to be
//! aligned, and CL_MEM_USE_HOST_PTR takes any pointer.

use std::ffi::c_void;

use cl3::types::cl_event;
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::device::DeviceAlloc;
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::use_host_ptr::{
    c_host_ptr_to_cl, c_host_ptr_to_peer, host_ptr_to_cl, host_ptr_to_peer, map_at,
};
use super::{Handover, Made, Memory, Owner, Path, device_peer, release_buffer, wrap_host_ptr};

declare_paths! {
    room: Registered;
    // CL_MEM_USE_HOST_PTR: OpenCL hands the memory over by map/unmap only (OpenCL 3.0 §5.4.2).
    hands_over_only_by: Map;
    /// Pageable host memory, page-aligned, registered with the peer (cuMemHostRegister,
    /// hipHostRegister) and wrapped with CL_MEM_USE_HOST_PTR; the peer's kernels use the
    /// registration's device pointer.
    RegisteredUseHostPtr => "registered+use-host-ptr",
    /// As `registered+use-host-ptr`, the registered range starting one element (8 bytes) past
    /// a page boundary.
    RegisteredUnalignedUseHostPtr => "registered-unaligned+use-host-ptr",
}

pub(super) struct Registered;

/// Host memory of the program's own, its registration with the peer, and OpenCL's buffer over
/// the registered range.
#[derive(Debug)]
struct RegisteredMemory {
    buffer: *mut c_void,
    /// The allocation, page-aligned; the registered range lies in it.
    host: PeerPtr,
    /// The registered range's host address: what OpenCL wraps, and what a map must give back.
    addr: usize,
    /// The peer's registration: its device pointer, and the host address `free` unregisters.
    registration: DeviceAlloc,
}

/// Elements the registered range starts past the allocation's page-aligned start.
fn offset(path: PathKind) -> usize {
    match path {
        PathKind::RegisteredUnalignedUseHostPtr => 1,
        _ => 0,
    }
}

impl Path for Registered {
    /// As every CL_MEM_USE_HOST_PTR path: map, and `finish` without it (a negative control).
    /// No semaphore: the handover is the map, not device work to order.
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        &[SyncMode::Map, SyncMode::Finish, SyncMode::None]
    }

    /// Registration is a device runtime's: the host peer has none.
    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer != Api::Host
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let bytes = len * size_of::<Complex32>();
        device_peer(peer, path)?;
        let skip = offset(path);
        let host = super::guard::alloc_host(peer, len + skip, "registered host memory")?;
        let dev = device_peer(peer, path)?;
        let addr = host.addr + skip * size_of::<Complex32>();
        let registration = match dev.register_host(addr, len) {
            Ok(r) => r,
            Err(e) => {
                dev.free_host(super::guard::host_whole(host));
                return Err(e);
            }
        };
        let buffer = match wrap_host_ptr(session, addr, bytes) {
            Ok(b) => b,
            Err(e) => {
                dev.free(registration);
                dev.free_host(super::guard::host_whole(host));
                return Err(e);
            }
        };
        let peer_ptr = registration.ptr;
        Ok(Made {
            cl: ClMem::Buffer(buffer),
            peer: peer_ptr,
            memory: Box::new(RegisteredMemory {
                buffer,
                host,
                addr,
                registration,
            }),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let Some(d) = c::device_dialect(c, m.path) else {
            return;
        };
        let Some(calls) = registration_calls(c, d.tag) else {
            return;
        };
        let (v, bytes, len, tag) = (m.v, m.bytes(), &m.len, d.tag);
        let dev = format!("{v}_dev");
        c.declare(format!("uint64_t {v}_host;"));
        c.declare(format!("void *{v}_reg;"));
        c.declare(d.decl.replace("{p}", &dev));
        c.declare(format!("cl_mem {v}_buf;"));
        c.uses("host_alloc");
        c.comment(
            "pageable host memory of the program's own, registered with the peer and mapped; \
             OpenCL wraps it, the peer's kernels use the registration's device pointer",
        );
        let (alloc, reg) = match offset(m.path) {
            0 => (format!("host_alloc({len})"), format!("{v}_host")),
            skip => (
                format!("host_alloc({len} + {skip})"),
                format!("{v}_host + 8 * {skip}"),
            ),
        };
        c.line(&format!("{v}_host = {alloc};"));
        c.line(&format!("{v}_reg = (void *)(uintptr_t)({reg});"));
        c.line(&format!(
            "CHECK({tag}, {}({v}_reg, {bytes}, {}));",
            calls.register, calls.flags
        ));
        c.line(&format!(
            "CHECK({tag}, {}(&{dev}, {v}_reg, 0));",
            calls.device_pointer
        ));
        c.line(&format!(
            "CHECK(CL, ({v}_buf = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, {bytes}, {v}_reg, &err), err));"
        ));
        c.line(&format!("{v}_peer = {};", d.addr.replace("{p}", &dev)));
        c::poison(c, m, true, true);
    }

    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        let v = m.v;
        let Some(d) = c::device_dialect(c, m.path) else {
            return String::new();
        };
        let Some(calls) = registration_calls(c, d.tag) else {
            return String::new();
        };
        format!(
            "CHECK(CL, clReleaseMemObject({v}_buf));\nCHECK({}, {}({v}_reg));\nCALL(free((void *)(uintptr_t){v}_host));",
            d.tag, calls.unregister
        )
    }

    fn c_to_peer(
        &self,
        c: &mut dyn CWriter,
        m: &mut CMem,
        sync: SyncMode,
        last: Option<&str>,
        access: Access,
    ) {
        // The map gives back the registered host address, not the device pointer.
        let want = format!("(uintptr_t){}_reg", m.v);
        c_host_ptr_to_peer(c, m, sync, last, access, &want);
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        c_host_ptr_to_cl(c, m, sync)
    }
}

/// A device peer's registration calls, as C.
struct RegistrationCalls {
    register: &'static str,
    flags: &'static str,
    device_pointer: &'static str,
    unregister: &'static str,
}

/// The registration calls of the peer whose CHECK tag is `tag`. The shared dialects spell
/// allocations; registration is this room's alone, so its spelling stays here.
fn registration_calls(c: &mut dyn CWriter, tag: &str) -> Option<RegistrationCalls> {
    match tag {
        "CU" => Some(RegistrationCalls {
            register: "cuMemHostRegister",
            flags: "CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP",
            device_pointer: "cuMemHostGetDevicePointer",
            unregister: "cuMemHostUnregister",
        }),
        "HIP" => Some(RegistrationCalls {
            register: "hipHostRegister",
            flags: "hipHostRegisterPortable | hipHostRegisterMapped",
            device_pointer: "hipHostGetDevicePointer",
            unregister: "hipHostUnregister",
        }),
        other => {
            c.refuse(format!(
                "the reproducer generator has no host-registration calls for the {other} peer"
            ));
            None
        }
    }
}

impl Memory for RegisteredMemory {
    fn what(&self, _path: PathKind) -> &'static str {
        "pageable host memory registered with the peer, under CL_MEM_USE_HOST_PTR"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Buffer(self.buffer))
    }

    /// The peer poisons through its device pointer, as its kernels reach the memory.
    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr> {
        Some(peer)
    }

    fn mapped_buffer(&self) -> Option<*mut c_void> {
        Some(self.buffer)
    }

    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        _last: Option<&ClEvent>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        host_ptr_to_peer(h, sync, |h| self.map(h, waits, access))
    }

    fn to_cl(&self, h: &mut Handover<'_>, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        host_ptr_to_cl(h, self.buffer, sync)
    }

    fn release(
        self: Box<Self>,
        _session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        // The buffer goes first (the runtime may still reference the memory), then the
        // registration, then the memory.
        release_buffer(self.buffer);
        if let Some(d) = peer.as_device() {
            d.free(self.registration);
        }
        super::guard::free_host(peer, self.host);
    }
}

impl RegisteredMemory {
    /// Blocking map of the whole buffer for the peer. OpenCL maps a CL_MEM_USE_HOST_PTR buffer
    /// at the host pointer it wraps (OpenCL 1.2 §5.4.2), here the registered range, whose
    /// device pointer the peer then uses: a map anywhere else means the peer's pointer is not
    /// to the memory OpenCL handed over.
    fn map(
        &self,
        h: &mut Handover<'_>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        let want = self.addr;
        map_at(h, self.buffer, waits, access, want, |mapped| {
            format!("mapped {mapped:#x}, not the registered USE_HOST_PTR address {want:#x}")
        })
    }
}
