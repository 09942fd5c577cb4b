//! `cl-svm-coarse+memcpy`, `cl-svm-fine+memcpy`: SVM for OpenCL; the peer moves data between
//! it and its own memory with its memcpy (hipMemcpy, cuMemcpy) on the SVM pointer, which it
//! never allocated: clr falls back to a host memcpy for pointers it does not know.

use std::ffi::c_void;

use cl3::types::cl_event;
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, SyncMode};
use crate::runtimes::device::{AllocKind, DeviceAlloc};
use crate::runtimes::opencl::{ClEvent, ClMem, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access};

use super::c::{self, CMem, CWriter};
use super::{AcrossGpus, Handover, Made, Memory, Owner, Path, device_of, device_peer, guard};

declare_paths! {
    room: SvmMemcpy;
    /// Coarse-grain SVM for OpenCL; the peer moves data between it and its own memory with
    /// its memcpy (hipMemcpy, cuMemcpy) on the SVM pointer, which it never allocated: clr
    /// falls back to a host memcpy for pointers it does not know.
    ClSvmCoarseMemcpy => "cl-svm-coarse+memcpy",
    /// As `cl-svm-coarse+memcpy`, over fine-grain SVM.
    ClSvmFineMemcpy => "cl-svm-fine+memcpy",
}

pub(super) struct SvmMemcpy;

/// SVM for OpenCL and the peer's own memory, between which the peer's memcpy moves data.
#[derive(Debug)]
struct SvmMemcpyMemory {
    ptr: *mut c_void,
    peer_mem: DeviceAlloc,
}

impl Path for SvmMemcpy {
    fn svm_fine_grain(&self, path: PathKind) -> Option<bool> {
        Some(path == PathKind::ClSvmFineMemcpy)
    }

    /// The data cross in copies the host waits for: no semaphore (there is no device work
    /// left to order).
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        &[
            SyncMode::Finish,
            SyncMode::Event,
            SyncMode::Map,
            SyncMode::None,
        ]
    }

    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer != Api::Host
    }

    /// The peer's own memcpy finds where OpenCL's SVM pointer lives (unified addressing) or
    /// copies through the host: nothing has to be mapped across.
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
        let ptr = guard::svm_alloc(session, path, bytes, true, &format!("{path}: SVM"))?;
        let label = dev.peer().label();
        let peer_mem = match guard::alloc_device(
            dev,
            AllocKind::Device,
            len,
            &format!("{path}: {label} device memory"),
        ) {
            Ok(a) => a,
            Err(e) => {
                guard::svm_free(session, ptr, true);
                return Err(e);
            }
        };
        let p = peer_mem.ptr;
        Ok(Made {
            cl: ClMem::Svm(ptr),
            peer: p,
            memory: Box::new(SvmMemcpyMemory { ptr, peer_mem }),
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
        let decl = d.decl.replace("{p}", &dev);
        let (alloc, addr) = (
            d.call(d.alloc, &format!("&{dev}"), &bytes),
            d.addr.replace("{p}", &dev),
        );
        let fine = m.path == PathKind::ClSvmFineMemcpy;
        c.uses("svm_alloc");
        c.declare(format!("void *{v}_svm;"));
        c.declare(decl);
        c.comment("SVM for OpenCL; the peer's own memory, filled and drained by the peer's memcpy on the SVM pointer");
        c.line(&format!(
            "{v}_svm = svm_alloc({}, {bytes});\n{alloc}\n{v}_peer = {addr};",
            fine as u8
        ));
        c::poison(c, m, true, true);
    }

    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        let v = m.v;
        let Some(d) = c::device_dialect(c, m.path) else {
            return String::new();
        };
        format!(
            "CALL(clSVMFree(context, {v}_svm));\n{}",
            d.call(d.free, &format!("{v}_dev"), "")
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
        match sync {
            SyncMode::Map => c::svm_map(c, m, last, access),
            SyncMode::None => {}
            _ => c::finish_or_wait(c, sync, last),
        }
        if access.reads() {
            c_memcpy(c, m, false);
        }
    }

    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, _sync: SyncMode) -> Option<String> {
        c_memcpy(c, m, true);
        if m.svm_mapped {
            Some(c::svm_unmap(c, m))
        } else {
            None
        }
    }
}

/// The peer's memcpy between the SVM pointer and its own memory, as C.
fn c_memcpy(c: &mut dyn CWriter, m: &CMem, to_svm: bool) {
    let Some(d) = c::device_dialect(c, m.path) else {
        return;
    };
    let (svm, dev) = (
        d.svm_arg.replace("{p}", &format!("{}_svm", m.v)),
        format!("{}_dev", m.v),
    );
    let line = if to_svm {
        d.memcpy(&svm, &dev, &m.bytes())
    } else {
        d.memcpy(&dev, &svm, &m.bytes())
    };
    c.line(&line);
}

impl Memory for SvmMemcpyMemory {
    fn what(&self, _path: PathKind) -> &'static str {
        "peer memory filled by memcpy from SVM"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Svm(self.ptr))
    }

    fn peer_owned(&self, _peer: PeerPtr) -> Option<PeerPtr> {
        Some(self.peer_mem.ptr)
    }

    /// OpenCL to peer: OpenCL's work is waited for per the mode (under `map` the SVM is
    /// mapped and stays mapped until the data comes back), then the peer copies the SVM into
    /// its own memory with its own memcpy. Under `none` the copy races OpenCL's kernel.
    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        last: Option<&ClEvent>,
        _waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError> {
        match sync {
            SyncMode::Map => super::svm_map(h, &sync::wait_list(last), access)?,
            SyncMode::None => {}
            _ => sync::finish_or_wait(h.s, sync, last)?,
        }
        if access.reads() {
            let (dst, svm) = (self.peer_mem.ptr.addr, self.ptr as usize);
            let bytes = h.bytes();
            device_of(h.peer, h.path)?.memcpy(dst, svm, bytes)?;
        }
        Ok(())
    }

    fn to_cl(&self, h: &mut Handover<'_>, _sync: SyncMode) -> Result<Vec<ClEvent>, CaseError> {
        let mut events = Vec::new();
        // The peer's own copy back into OpenCL's SVM; under `map` the allocation is still
        // mapped for it, and unmapped after.
        let (svm, src) = (self.ptr as usize, self.peer_mem.ptr.addr);
        let bytes = h.bytes();
        device_of(h.peer, h.path)?.memcpy(svm, src, bytes)?;
        if *h.svm_mapped {
            events.push(super::svm_unmap(h)?);
        }
        Ok(events)
    }

    fn release(
        self: Box<Self>,
        session: &ClSession,
        peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        guard::svm_free(session, self.ptr, true);
        if let Some(d) = peer.as_device() {
            d.free(self.peer_mem);
        }
    }
}
