//! `sub-buffer+use-host-ptr`: the case's memory is a sub-buffer (clCreateSubBuffer) at a
//! non-zero origin of a CL_MEM_USE_HOST_PTR buffer over the host's memory; the host works on
//! the same bytes at that offset. The origin is one CL_DEVICE_MEM_BASE_ADDR_ALIGN, the least a
//! sub-buffer's origin may be past zero (a misaligned one is CL_MISALIGNED_SUB_BUFFER_OFFSET).
//! OpenCL's kernels then take a buffer whose first byte is not its allocation's, and a map
//! must give back the host address at the origin.

use std::ffi::c_void;

use cl3::types::cl_event;
use num_complex::Complex32;

use crate::model::{Api, ApiError, CaseError, PathKind, Phase, SyncMode};
use crate::runtimes::opencl::{ClEvent, ClMem, ClResultExt, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::use_host_ptr::{
    c_host_ptr_to_cl, c_host_ptr_to_peer, host_ptr_to_cl, host_ptr_to_peer, map_at,
};
use super::{Handover, Made, Memory, Owner, Path, release_buffer, wrap_host_ptr};

declare_paths! {
    room: SubBuffer;
    // CL_MEM_USE_HOST_PTR: OpenCL hands the memory over by map/unmap only (OpenCL 3.0 §5.4.2).
    hands_over_only_by: Map;
    /// A sub-buffer (clCreateSubBuffer) at a non-zero origin, one CL_DEVICE_MEM_BASE_ADDR_ALIGN
    /// in, of a CL_MEM_USE_HOST_PTR buffer over the host's memory.
    SubBufferUseHostPtr => "sub-buffer+use-host-ptr",
}

pub(super) struct SubBuffer;

/// The parent buffer over the host allocation, and the sub-buffer the case uses.
#[derive(Debug)]
struct SubBufferMemory {
    parent: *mut c_void,
    sub: *mut c_void,
    host: PeerPtr,
    /// Bytes from the allocation's start to the sub-buffer's.
    origin: usize,
}

/// CL_DEVICE_MEM_BASE_ADDR_ALIGN, which the device gives in bits, as bytes.
fn base_align_bytes(session: &ClSession) -> Result<usize, CaseError> {
    let bits = crate::runtimes::opencl::device_u64(
        session.device.id,
        cl3::device::CL_DEVICE_MEM_BASE_ADDR_ALIGN,
    )
    .refused("CL_DEVICE_MEM_BASE_ADDR_ALIGN")?;
    let bytes = (bits / 8) as usize;
    if bytes == 0 || !bytes.is_power_of_two() {
        return Err(CaseError::Broken(ApiError {
            api: Api::OpenCl,
            call: "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)".into(),
            code: 0,
            name: "CL_SUCCESS".into(),
            detail: format!("{bits} bits: no power of two of whole bytes"),
        }));
    }
    Ok(bytes)
}

impl Path for SubBuffer {
    /// As every CL_MEM_USE_HOST_PTR path: map, and `finish` without it (a negative control).
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        &[SyncMode::Map, SyncMode::Finish, SyncMode::None]
    }

    /// The host's memory: OpenCL wraps what the host dereferences.
    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer == Api::Host
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        _path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let bytes = len * size_of::<Complex32>();
        let origin = base_align_bytes(session)?;
        let host = super::guard::alloc_host(
            peer,
            len + origin.div_ceil(size_of::<Complex32>()),
            "host memory under the parent buffer",
        )?;
        let parent = match wrap_host_ptr(session, host.addr, origin + bytes) {
            Ok(b) => b,
            Err(e) => {
                super::guard::free_host(peer, host);
                return Err(e);
            }
        };
        let region = cl3::types::cl_buffer_region {
            origin,
            size: bytes,
        };
        // SAFETY: a region inside the live parent; cl3 passes it by pointer for the call.
        let sub = unsafe {
            cl3::memory::create_sub_buffer(
                parent,
                cl3::memory::CL_MEM_READ_WRITE,
                cl3::memory::CL_BUFFER_CREATE_TYPE_REGION,
                (&raw const region).cast(),
            )
        }
        .call(&format!(
            "clCreateSubBuffer(origin {origin}, {bytes} bytes)"
        ))
        .refused("OpenCL would not make the sub-buffer");
        let sub = match sub {
            Ok(s) => s,
            Err(e) => {
                release_buffer(parent);
                super::guard::free_host(peer, host);
                return Err(e);
            }
        };
        Ok(Made {
            cl: ClMem::Buffer(sub),
            peer: PeerPtr {
                addr: host.addr + origin,
                len,
            },
            memory: Box::new(SubBufferMemory {
                parent,
                sub,
                host,
                origin,
            }),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes, len) = (m.v, m.bytes(), &m.len);
        c.declare(format!("uint64_t {v}_host;"));
        c.declare(format!("cl_mem {v}_parent, {v}_buf;"));
        c.declare(format!("cl_uint {v}_align_bits;"));
        c.declare(format!("size_t {v}_origin;"));
        c.uses("host_alloc");
        c.comment("a sub-buffer one CL_DEVICE_MEM_BASE_ADDR_ALIGN into a CL_MEM_USE_HOST_PTR buffer over host memory");
        c.line(&format!(
            "CHECK(CL, clGetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof {v}_align_bits, &{v}_align_bits, NULL));"
        ));
        c.line(&format!("{v}_origin = {v}_align_bits / 8;"));
        c.line(&format!(
            "{v}_host = host_alloc({len} + ({v}_origin + 7) / 8);"
        ));
        c.line(&format!(
            "CHECK(CL, ({v}_parent = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, {v}_origin + {bytes}, (void *)(uintptr_t){v}_host, &err), err));"
        ));
        c.line(&format!(
            "CHECK(CL, ({v}_buf = clCreateSubBuffer({v}_parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &(cl_buffer_region){{{v}_origin, {bytes}}}, &err), err));"
        ));
        c.line(&format!("{v}_peer = {v}_host + {v}_origin;"));
        c::poison(c, m, true, true);
    }

    fn c_release(&self, _c: &mut dyn CWriter, m: &CMem) -> String {
        let v = m.v;
        format!(
            "CHECK(CL, clReleaseMemObject({v}_buf));\nCHECK(CL, clReleaseMemObject({v}_parent));\nCALL(free((void *)(uintptr_t){v}_host));"
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
        // The sub-buffer maps at the host address at its origin.
        let want = format!("{}_peer", m.v);
        c_host_ptr_to_peer(c, m, sync, last, access, &want);
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        c_host_ptr_to_cl(c, m, sync)
    }
}

impl Memory for SubBufferMemory {
    fn what(&self, _path: PathKind) -> &'static str {
        "host memory under a sub-buffer of a CL_MEM_USE_HOST_PTR buffer"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Buffer(self.sub))
    }

    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr> {
        Some(peer)
    }

    fn mapped_buffer(&self) -> Option<*mut c_void> {
        Some(self.sub)
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
        host_ptr_to_cl(h, self.sub, sync)
    }

    fn release(
        self: Box<Self>,
        _session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        // The sub-buffer holds a reference to its parent; both go before the memory.
        release_buffer(self.sub);
        release_buffer(self.parent);
        super::guard::free_host(peer, self.host);
    }
}

impl SubBufferMemory {
    /// Blocking map of the whole sub-buffer for the host. A sub-buffer of a
    /// CL_MEM_USE_HOST_PTR buffer maps at the parent's host pointer plus its origin (OpenCL
    /// 3.0, clEnqueueMapBuffer): anywhere else, the host would work on a copy it was never
    /// told about.
    fn map(
        &self,
        h: &mut Handover<'_>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        let (want, origin) = (self.host.addr + self.origin, self.origin);
        map_at(h, self.sub, waits, access, want, |mapped| {
            format!(
                "mapped the sub-buffer at {mapped:#x}, not at the host address of its origin {want:#x} (origin {origin})"
            )
        })
    }
}
