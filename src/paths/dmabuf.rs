//! `cl-dmabuf+hip-import`: OpenCL SVM exported as a dma-buf by the HSA runtime
//! (hsa_amd_portable_export_dmabuf) and imported with hipImportExternalMemory. ROCm only.

use std::ffi::c_void;

use cl3::types::cl_event;
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::device::DeviceAlloc;
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::device_ptr_as_cl_arg::SHARED_ADDRESS_SYNCS;
use super::{AcrossGpus, Handover, Made, Memory, Owner, Path, device_peer, guard};

declare_paths! {
    room: ClDmabufImport;
    /// OpenCL SVM exported as a dma-buf by the HSA runtime (hsa_amd_portable_export_dmabuf)
    /// and imported with hipImportExternalMemory (the zero-copy notes' variant A). ROCm only.
    ClDmabufHipImport => "cl-dmabuf+hip-import",
}

pub(super) struct ClDmabufImport;

/// OpenCL SVM mapped into the peer through a dma-buf export and import.
#[derive(Debug)]
struct ClExported {
    ptr: *mut c_void,
    alloc: DeviceAlloc,
}

impl Path for ClDmabufImport {
    /// hsa_amd_portable_export_dmabuf exports coarse-grain SVM (in VRAM on ROCm).
    fn svm_fine_grain(&self, _path: PathKind) -> Option<bool> {
        Some(false)
    }

    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        SHARED_ADDRESS_SYNCS
    }

    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer == Api::Hip
    }

    fn shares_one_address(&self) -> bool {
        true
    }

    /// A dma-buf is the kernel's way to share memory between devices: HIP imports OpenCL's on
    /// its own GPU, or says it cannot.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::Runs
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let bytes = len * size_of::<Complex32>();
        let dev = device_peer(peer, path)?;
        // Coarse-grain SVM: ROCm places it in VRAM, an allocation the HSA runtime knows and
        // can export (fine-grain SVM is system memory).
        // The export is of the allocation from its start, as the path is: a guard after the
        // view only.
        let ptr = guard::svm_alloc(
            session,
            PathKind::ClSvmCoarse,
            bytes,
            false,
            &format!("{path}: OpenCL SVM"),
        )?;
        let alloc = match dev.import_cl_memory(ptr as usize, bytes, len) {
            Ok(a) => a,
            Err(e) => {
                guard::svm_free(session, ptr, false);
                return Err(e);
            }
        };
        let p = alloc.ptr;
        Ok(Made {
            cl: ClMem::Svm(ptr),
            peer: p,
            memory: Box::new(ClExported { ptr, alloc }),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_cl_is_svm(&self) -> bool {
        true
    }

    /// `create` as C: coarse-grain SVM, exported by the HSA runtime as a dma-buf and imported
    /// and mapped by HIP (templates' `dmabuf_import`), and OpenCL's poison (the peer does not
    /// write memory it only imported).
    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes) = (m.v, m.bytes());
        if c::device_dialect(c, m.path).is_none() {
            return;
        }
        c.uses("svm_alloc");
        c.uses("dmabuf");
        c.declare(format!("void *{v}_svm;"));
        c.declare(format!("struct imported {v}_imported;"));
        c.comment(
            "OpenCL's coarse-grain SVM, exported as a dma-buf by the HSA runtime \
             (hsa_amd_portable_export_dmabuf) and imported by HIP",
        );
        c.line(&format!(
            "{v}_svm = svm_alloc(0, {bytes});\n\
             dmabuf_import(&{v}_imported, {v}_svm, {bytes});\n\
             {v}_peer = {v}_imported.p;"
        ));
        c::poison(c, m, true, false);
    }

    /// The importer's mapping goes before the memory it maps.
    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        if c::device_dialect(c, m.path).is_none() {
            return String::new();
        }
        format!(
            "peer_free_imported(&{v}_imported);\nCALL(clSVMFree(context, {v}_svm));",
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
        c::shared_address_to_peer(c, m, sync, last);
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        c::shared_address_to_cl(c, m, sync);
        None
    }
}

impl Memory for ClExported {
    fn what(&self, _path: PathKind) -> &'static str {
        "OpenCL SVM imported by the peer"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Svm(self.ptr))
    }

    fn peer_owned(&self, _peer: PeerPtr) -> Option<PeerPtr> {
        None
    }

    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        last: Option<&ClEvent>,
        _waits: &[cl_event],
        _access: Access,
    ) -> Result<(), CaseError> {
        super::shared_address_to_peer(h, sync, last)
    }

    fn to_cl(&self, h: &mut Handover<'_>, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        super::shared_address_to_cl(h, sync)
    }

    fn release(
        self: Box<Self>,
        session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        // The importer's mapping goes before the memory it maps.
        if let Some(d) = peer.as_device() {
            d.free(self.alloc);
        }
        guard::svm_free(session, self.ptr, false);
    }
}
