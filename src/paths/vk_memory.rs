//! `vk-memory+import`: memory a third API exports (Vulkan's vkGetMemoryFdKHR, an opaque fd per
//! importer), imported by OpenCL (cl_khr_external_memory_opaque_fd) and by the peer
//! (cuImportExternalMemory / hipImportExternalMemory).

use std::ffi::c_void;
use std::rc::Rc;

use cl3::types::cl_event;
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::device::{DeviceAlloc, ExportHandle};
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession};
use crate::runtimes::vulkan::{Broker, ExportedMemory};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::vmm_import::IMPORTED_SYNCS;
use super::{
    AcrossGpus, Handover, Made, Memory, Owner, Path, device_peer, import_fd, release_buffer,
};

declare_paths! {
    room: VkMemoryImport;
    // Imported memory: OpenCL acquires it before use and releases it after (cl_khr_external_memory).
    hands_over_only_by: AcquireRelease;
    /// Memory a third API exports (Vulkan's vkGetMemoryFdKHR, an opaque fd per importer),
    /// imported by OpenCL (cl_khr_external_memory_opaque_fd) and by the peer
    /// (cuImportExternalMemory / hipImportExternalMemory): zero copy without either side
    /// exporting anything.
    VkMemoryImport => "vk-memory+import",
}

pub(super) struct VkMemoryImport;

/// Memory the Vulkan broker exported, imported by OpenCL (`buffer`) and by the peer (`alloc`,
/// an ImportedExternal mapping); the broker's own allocation is freed last.
#[derive(Debug)]
struct VkImported {
    buffer: *mut c_void,
    alloc: DeviceAlloc,
    memory: ExportedMemory,
    broker: Rc<Broker>,
}

/// Memory the peer's GPU's Vulkan device exports: one opaque fd imported by the peer, a second
/// by OpenCL (each import owns its fd), both over the broker's one allocation. Anything made
/// before a refusal is undone. OpenCL's import has the allocation's whole size, so that the
/// buffer is the memory object the driver exported, not a part of it.
fn import_vulkan_memory(
    session: &ClSession,
    peer: &mut dyn PeerRuntime,
    len: usize,
) -> Result<(*mut c_void, DeviceAlloc, ExportedMemory, Rc<Broker>), CaseError> {
    let dev = device_peer(peer, PathKind::VkMemoryImport)?;
    let broker = dev.vulkan()?;
    // The broker's memory holds a guard after the view, which the peer maps with it and
    // fills and checks.
    let layout = super::guard::Layout::elements(len, false);
    let whole = layout.total() / size_of::<Complex32>();
    let memory = broker.memory(layout.total() as u64)?;
    let alloc = match broker
        .memory_fd(&memory)
        .and_then(|fd| dev.import_memory_fd(fd, memory.size, memory.dedicated, whole))
    {
        Ok(mut a) => {
            let name = "vk-memory+import: Vulkan memory, imported by the peer";
            super::guard::record_peer(a.ptr.addr, layout, name);
            a.ptr.len = len;
            a
        }
        Err(e) => {
            let note = vulkan_memory_note(&broker, &memory_note(&memory));
            broker.free_memory(memory);
            return Err(e.with_note(&note));
        }
    };
    let imported = broker
        .memory_fd(&memory)
        .and_then(|fd| import_fd(session, fd, ExportHandle::OpaqueFd, memory.size as usize));
    match imported {
        Ok(buffer) => Ok((buffer, alloc, memory, broker)),
        Err(e) => {
            let note = vulkan_memory_note(&broker, &memory_note(&memory));
            dev.free(alloc);
            broker.free_memory(memory);
            Err(e.with_note(&note))
        }
    }
}

fn memory_note(m: &ExportedMemory) -> String {
    format!(
        "{} bytes, {}{}",
        m.size,
        m.memory_type,
        if m.dedicated { ", dedicated" } else { "" }
    )
}

/// Which Vulkan device exported what, for a refusal's reason.
fn vulkan_memory_note(broker: &Broker, memory: &str) -> String {
    format!(
        "exported by Vulkan device {} ({}, {}): {memory}",
        broker.survey.name, broker.survey.driver, broker.survey.uuid
    )
}

impl Path for VkMemoryImport {
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        IMPORTED_SYNCS
    }

    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer != Api::Host
    }

    /// Vulkan exports on the peer's GPU an opaque fd, which OpenCL imports only on a device of
    /// that GPU.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::Refused(
            "Vulkan's opaque fd imports only on a device of the GPU it was exported from",
        )
    }

    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        _path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let (buffer, alloc, memory, broker) = import_vulkan_memory(session, peer, len)?;
        let p = alloc.ptr;
        Ok(Made {
            cl: ClMem::Buffer(buffer),
            peer: p,
            memory: Box::new(VkImported {
                buffer,
                alloc,
                memory,
                broker,
            }),
            // Imported memory starts out owned by its exporter: OpenCL must acquire it.
            owner: Owner::Peer,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    /// `import_vulkan_memory` as C: the broker opened on the peer's GPU, its exportable
    /// memory, one opaque fd imported and mapped by the peer, another imported by OpenCL (of
    /// the allocation's whole size), and the peer's poison.
    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes) = (m.v, m.bytes());
        if c::device_dialect(c, m.path).is_none() {
            return;
        }
        c.uses("vk_memory");
        c.uses("cl_import");
        c.declare(format!("struct vk_memory {v}_vk;"));
        c.declare(format!("struct imported {v}_imported;"));
        c.declare(format!("cl_mem {v}_buf;"));
        c.comment(
            "memory the Vulkan broker exports on the peer's GPU (the Vulkan device of its \
             UUID): one opaque fd imported by the peer, another by OpenCL; imported memory \
             starts out its exporter's",
        );
        c.line(&format!(
            "vk_open();\n\
             vk_memory(&{v}_vk, {bytes});\n\
             peer_import_memory(&{v}_imported, vk_memory_fd(&{v}_vk), {v}_vk.size, {v}_vk.dedicated, {bytes});\n\
             {v}_peer = {v}_imported.p;\n\
             {v}_buf = cl_import_fd(vk_memory_fd(&{v}_vk), {v}_vk.size, CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR);"
        ));
        c::poison(c, m, false, true);
    }

    /// Both importers let go before the exporter frees what they mapped.
    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        if c::device_dialect(c, m.path).is_none() {
            return String::new();
        }
        format!(
            "CHECK(CL, clReleaseMemObject({v}_buf));\npeer_free_imported(&{v}_imported);\nvk_free_memory(&{v}_vk);",
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

impl Memory for VkImported {
    fn what(&self, _path: PathKind) -> &'static str {
        "Vulkan memory imported by OpenCL and the peer"
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
        let VkImported {
            buffer,
            alloc,
            memory,
            broker,
        } = *self;
        // Both importers let go before the exporter frees what they mapped.
        release_buffer(buffer);
        if let Some(d) = peer.as_device() {
            d.free(alloc);
        }
        broker.free_memory(memory);
    }
}
