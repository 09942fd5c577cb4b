//! `vmm-fd+cl-import`: a VMM allocation exported as a POSIX fd (CUDA) or dma-buf (ROCm) and
//! imported by OpenCL (cl_khr_external_memory_opaque_fd / _dma_buf).

use std::ffi::c_void;

use cl3::types::cl_event;

use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::device::{AllocKind, DeviceAlloc};
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::{
    AcrossGpus, Handover, Made, Memory, Owner, Path, device_peer, import_fd, release_buffer,
};

declare_paths! {
    room: VmmImport;
    // Imported memory: OpenCL acquires it before use and releases it after (cl_khr_external_memory).
    hands_over_only_by: AcquireRelease;
    /// A VMM allocation exported as a POSIX fd (CUDA) or dma-buf (ROCm) and imported by
    /// OpenCL (cl_khr_external_memory_opaque_fd / _dma_buf).
    VmmFdClImport => "vmm-fd+cl-import",
}

pub(super) struct VmmImport;

/// A VMM allocation exported as an fd and imported as an OpenCL buffer.
#[derive(Debug)]
struct Imported {
    buffer: *mut c_void,
    alloc: DeviceAlloc,
}

/// The syncs of imported memory: acquire/release around OpenCL's use (as Khronos's CTS
/// `test_vulkan` does), the semaphore with them, and `finish` without them, which breaks the
/// rule on purpose (a negative control).
pub(super) const IMPORTED_SYNCS: &[SyncMode] = &[
    SyncMode::AcquireRelease,
    SyncMode::Semaphore,
    SyncMode::Finish,
    SyncMode::None,
];

impl Path for VmmImport {
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        IMPORTED_SYNCS
    }

    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer != Api::Host
    }

    /// CUDA's export is an opaque fd, which imports only on a device of the GPU it came from
    /// (cl_khr_external_memory, as Vulkan, matches device UUIDs). ROCm's is a dma-buf, which
    /// the kernel shares between devices: OpenCL says whether it imports one of another GPU.
    fn across_gpus(&self, _path: PathKind, peer: Api) -> AcrossGpus {
        match peer {
            Api::Hip => AcrossGpus::Runs,
            _ => AcrossGpus::Refused(
                "an opaque fd imports only on a device of the GPU it was exported from",
            ),
        }
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let dev = device_peer(peer, path)?;
        let name = format!("{path}: {} exportable memory", dev.peer().label());
        let alloc = super::guard::alloc_device(dev, AllocKind::Exportable, len, &name)?;
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
        let p = alloc.ptr;
        Ok(Made {
            cl: ClMem::Buffer(buffer),
            peer: PeerPtr { addr: p.addr, len },
            memory: Box::new(Imported { buffer, alloc }),
            // Imported memory starts out owned by its exporter: OpenCL must acquire it.
            owner: Owner::Peer,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    /// `create` as C: the VMM allocation (templates' `vmm_alloc`: the VMM check, granularity,
    /// create, reserve, map, access), its fd, OpenCL's import of the fd, and the peer's poison
    /// (OpenCL does not fill memory it has not acquired).
    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes) = (m.v, m.bytes());
        let Some(d) = c::device_dialect(c, m.path) else {
            return;
        };
        c.uses("vmm");
        c.uses("cl_import");
        c.declare(format!("struct vmm {v}_vmm;"));
        c.declare(format!("cl_mem {v}_buf;"));
        c.comment(
            "a VMM allocation exported as a POSIX fd, which OpenCL imports \
             (cl_khr_external_memory); imported memory starts out its exporter's",
        );
        c.line(&format!(
            "vmm_alloc(&{v}_vmm, {bytes});\n\
             {v}_buf = cl_import_fd(vmm_export(&{v}_vmm), {v}_vmm.size, {});\n\
             {v}_peer = {v}_vmm.va;",
            d.vmm_export
        ));
        c::poison(c, m, false, true);
    }

    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        if c::device_dialect(c, m.path).is_none() {
            return String::new();
        }
        format!(
            "CHECK(CL, clReleaseMemObject({v}_buf));
vmm_free(&{v}_vmm);",
            v = m.v
        )
    }

    fn c_to_peer(
        &self,
        c: &mut dyn CWriter,
        m: &mut CMem,
        sync: SyncMode,
        last: Option<&str>,
        _access: Access,
    ) {
        c::imported_to_peer(c, m, sync, last);
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        c::imported_to_cl(c, m, sync)
    }
}

impl Memory for Imported {
    fn what(&self, _path: PathKind) -> &'static str {
        "exported allocation imported by OpenCL"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        None
    }

    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr> {
        Some(peer)
    }

    fn imported_buffer(&self) -> Option<*mut c_void> {
        Some(self.buffer)
    }

    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        _last: Option<&ClEvent>,
        waits: &[cl_event],
        _access: Access,
    ) -> Result<(), CaseError> {
        super::imported_to_peer(h, self.buffer, sync, waits)
    }

    fn to_cl(&self, h: &mut Handover<'_>, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        super::imported_to_cl(h, self.buffer, sync)
    }

    fn release(
        self: Box<Self>,
        _session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        release_buffer(self.buffer);
        if let Some(d) = peer.as_device() {
            d.free(self.alloc);
        }
    }
}
