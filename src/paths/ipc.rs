//! `ipc+device-ptr-as-cl-arg`: a device allocation of another process, opened with
//! hipIpcOpenMemHandle / cuIpcOpenMemHandle and passed to OpenCL kernels as an SVM pointer.

use std::ffi::c_void;

use cl3::types::cl_event;

use crate::ipc::Exporter;
use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::device::DeviceAlloc;
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::device_ptr_as_cl_arg::SHARED_ADDRESS_SYNCS;
use super::{AcrossGpus, Handover, Made, Memory, Owner, Path, device_peer};

declare_paths! {
    room: IpcDevicePtr;
    /// A device allocation of another process, opened with hipIpcOpenMemHandle /
    /// cuIpcOpenMemHandle and passed to OpenCL kernels as an SVM pointer (the zero-copy notes §3).
    IpcDevicePtrAsClArg => "ipc+device-ptr-as-cl-arg",
}

pub(super) struct IpcDevicePtr;

/// Another process's allocation opened through IPC; the exporter holds it until released.
#[derive(Debug)]
struct Ipc {
    alloc: DeviceAlloc,
    exporter: Exporter,
}

impl Path for IpcDevicePtr {
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        SHARED_ADDRESS_SYNCS
    }

    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer != Api::Host
    }

    fn shares_one_address(&self) -> bool {
        true
    }

    /// The exporter allocates on OpenCL's GPU and the peer opens the handle on its own, with
    /// lazy peer access: the peer's GPU must reach OpenCL's.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::PeerReachesCl
    }

    fn create(
        &self,
        _session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let dev = device_peer(peer, path)?;
        let exe = std::env::current_exe().map_err(|e| {
            CaseError::unsupported(format!("no path to this executable for the exporter: {e}"))
        })?;
        // The exporter allocates the guard too, from the view's end; this side opens all of it
        // and fills and checks the guard through the opened mapping. Across GPUs the
        // allocation is made on OpenCL's GPU and opened on the peer's.
        let layout = super::guard::Layout::elements(len, false);
        let whole = layout.total() / size_of::<num_complex::Complex32>();
        let exporter_on = match super::cl_gpu() {
            Some(gpu) => dev.reopen_args_on(gpu),
            None => dev.reopen_args(),
        };
        let (exporter, handle) = Exporter::spawn(exe, &exporter_on, whole)?;
        let mut alloc = dev.ipc_open(&handle, whole)?;
        let name = format!("{path}: the exporter's device memory, opened");
        super::guard::record_peer(alloc.ptr.addr, layout, &name);
        alloc.ptr.len = len;
        let p = alloc.ptr;
        Ok(Made {
            cl: ClMem::Svm(p.addr as *mut c_void),
            peer: p,
            memory: Box::new(Ipc { alloc, exporter }),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_cl_is_svm(&self) -> bool {
        true
    }

    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes) = (m.v, m.bytes());
        if c::device_dialect(c, m.path).is_none() {
            return;
        }
        c.uses("ipc");
        c.declare(format!("void *{v}_svm;"));
        c.comment(
            "another process (this program, run again as the exporter) allocates the memory and \
             sends its IPC handle; this one opens it and passes it to OpenCL kernels through \
             clSetKernelArgSVMPointer",
        );
        c.line(&format!(
            "{v}_peer = ipc_open({bytes});\n{v}_svm = (void *)(uintptr_t){v}_peer;"
        ));
        c::poison(c, m, false, true);
    }

    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        if c::device_dialect(c, m.path).is_none() {
            return String::new();
        }
        format!("ipc_close({}_peer);", m.v)
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

impl Memory for Ipc {
    fn what(&self, _path: PathKind) -> &'static str {
        "IPC-opened allocation of the exporter process"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        None
    }

    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr> {
        Some(peer)
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
        _session: &ClSession,
        peer: &mut dyn PeerRuntime,
        first_err: &mut Option<CaseError>,
    ) {
        let Ipc { alloc, exporter } = *self;
        if let Some(d) = peer.as_device() {
            d.free(alloc);
        }
        if let Err(e) = exporter.finish() {
            first_err.get_or_insert(e);
        }
    }
}
