//! `device-ptr-as-cl-arg`: a device allocation (cuMemAlloc, hipMalloc) passed to OpenCL
//! kernels with clSetKernelArgSVMPointer.

use std::ffi::c_void;

use cl3::types::cl_event;

use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::device::{AllocKind, DeviceAlloc};
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::{AcrossGpus, Handover, Made, Memory, Owner, Path, device_peer};

declare_paths! {
    room: DevicePtrAsClArg;
    /// A device allocation passed to OpenCL kernels with clSetKernelArgSVMPointer.
    DevicePtrAsClArg => "device-ptr-as-cl-arg",
}

pub(super) struct DevicePtrAsClArg;

/// A device allocation OpenCL kernels take as an SVM pointer.
#[derive(Debug)]
struct DeviceArg {
    alloc: DeviceAlloc,
}

/// The syncs of a path whose two sides work on one device address in place: ordering
/// (finish, event) and the semaphore, which orders both sides' device work with no host wait.
pub(super) const SHARED_ADDRESS_SYNCS: &[SyncMode] = &[
    SyncMode::Finish,
    SyncMode::Event,
    SyncMode::Semaphore,
    SyncMode::None,
];

impl Path for DevicePtrAsClArg {
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        SHARED_ADDRESS_SYNCS
    }

    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer != Api::Host
    }

    fn shares_one_address(&self) -> bool {
        true
    }

    /// OpenCL's GPU dereferences the peer's allocation: peer access from OpenCL's GPU.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::ClReachesPeer
    }

    fn create(
        &self,
        _session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError> {
        let dev = device_peer(peer, path)?;
        let name = format!("{path}: {} device memory", dev.peer().label());
        let alloc = super::guard::alloc_device(dev, AllocKind::Device, len, &name)?;
        let p = alloc.ptr;
        Ok(Made {
            cl: ClMem::Svm(p.addr as *mut c_void),
            peer: p,
            memory: Box::new(DeviceArg { alloc }),
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
        let Some(d) = c::device_dialect(c, m.path) else {
            return;
        };
        let dev = format!("{v}_dev");
        let (decl, as_void) = (d.decl.replace("{p}", &dev), d.as_void.replace("{p}", &dev));
        let (alloc, addr) = (
            d.call(d.alloc, &format!("&{dev}"), &bytes),
            d.addr.replace("{p}", &dev),
        );
        c.declare(decl);
        c.declare(format!("void *{v}_svm;"));
        c.comment("OpenCL kernels take the device pointer through clSetKernelArgSVMPointer");
        c.line(&format!(
            "{alloc}\n{v}_svm = {as_void};\n{v}_peer = {addr};"
        ));
        c::poison(c, m, false, true);
    }

    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        let Some(d) = c::device_dialect(c, m.path) else {
            return String::new();
        };
        d.call(d.free, &format!("{}_dev", m.v), "")
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

impl Memory for DeviceArg {
    fn what(&self, _path: PathKind) -> &'static str {
        "device allocation passed as an SVM pointer"
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
        _first_err: &mut Option<CaseError>,
    ) {
        if let Some(d) = peer.as_device() {
            d.free(self.alloc);
        }
    }
}
