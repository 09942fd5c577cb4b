//! `cl-gpu-va`: a plain OpenCL buffer whose device address the peer dereferences; the address
//! from a kernel that writes `(ulong)` of its argument (and, as a note, from the query tokens
//! 0x4100/0x4101 when a driver answers them).

use std::ffi::c_void;

use cl3::types::cl_event;
use num_complex::Complex32;

use crate::model::{Api, CaseError, PathKind, Phase, SyncMode};
use crate::runtimes::opencl::{ClArg, ClEvent, ClMem, ClSession, cl_error};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;

use super::c::{self, CMem, CWriter};
use super::device_ptr_as_cl_arg::SHARED_ADDRESS_SYNCS;
use super::{
    AcrossGpus, DeviceBuffer, Handover, Made, Memory, Owner, Path, device_peer, release_buffer,
};

declare_paths! {
    room: ClGpuVa;
    // A pass says where the address came from: reports show it beside the measurements.
    pass_note_is_a_finding;
    /// A plain OpenCL buffer whose device address the peer dereferences (the zero-copy notes' variant B, docs/domain.md#the-zero-copy-notes): the
    /// address from their query tokens 0x4100/0x4101 when a driver answers them, else
    /// from a kernel that writes `(ulong)` of its argument.
    ClGpuVa => "cl-gpu-va",
}

pub(super) struct ClGpuVa;

/// A plain OpenCL buffer whose device address the peer dereferences.
#[derive(Debug)]
struct GpuVa {
    buffer: *mut c_void,
}

/// The zero-copy notes' tokens (docs/domain.md#the-zero-copy-notes), which no header defines: asked, and the answer kept for the report.
const GPU_VA_TOKENS: [(u32, &str); 2] = [
    (0x4100, "CL_MEM_AMD_GPU_VA"),
    (0x4101, "CL_MEM_LINUX_DMA_BUF_FD_KHR"),
];

/// The device address of `buffer`: asked of the driver with those tokens, and read from a
/// kernel that writes `(ulong)` of its argument. The kernel's answer is the one used (it is
/// what the hardware dereferences); a token that answers with something else is reported.
fn buffer_address(session: &mut ClSession, buffer: *mut c_void) -> Result<usize, CaseError> {
    let mut answers = Vec::new();
    let mut token_va = None;
    for (token, name) in GPU_VA_TOKENS {
        match cl3::memory::get_mem_object_data(buffer, token) {
            Err(code) => answers.push(format!(
                "clGetMemObjectInfo({name} {token:#x}) refused: {}",
                cl_error("clGetMemObjectInfo", code).name
            )),
            Ok(bytes) => {
                let value = bytes
                    .get(..8)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map(u64::from_ne_bytes);
                answers.push(format!(
                    "clGetMemObjectInfo({name} {token:#x}) answered {} bytes: {value:#x?}",
                    bytes.len()
                ));
                if token == 0x4100 {
                    token_va = value;
                }
            }
        }
    }
    let out = DeviceBuffer::new(session, 8)?;
    session
        .launch(
            "buffer_address",
            1,
            &[ClArg::Mem(ClMem::Buffer(buffer)), ClArg::Mem(out.arg())],
            &[],
        )
        .refused("the kernel that reads a buffer's address")?;
    let addr = out.read::<u64>(session, 1)?[0];
    if let Some(va) = token_va.filter(|&va| va != addr) {
        answers.push(format!("the token's {va:#x} is not the kernel's {addr:#x}"));
    }
    session.notes.push(format!(
        "device address {addr:#x} from a kernel; {}",
        answers.join("; ")
    ));
    Ok(addr as usize)
}

impl Path for ClGpuVa {
    fn syncs(&self, _path: PathKind, _peer: Api) -> &'static [SyncMode] {
        SHARED_ADDRESS_SYNCS
    }

    fn applies_to(&self, _path: PathKind, peer: Api) -> bool {
        peer != Api::Host
    }

    fn shares_one_address(&self) -> bool {
        true
    }

    /// The address is in OpenCL's GPU's memory, which no API maps into another GPU.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::Refused(
            "the peer would dereference an address of OpenCL's GPU that no API maps into another",
        )
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
        // The peer's address is the buffer's start: a guard after the view only.
        let buffer = super::guard::cl_buffer(session, bytes, "cl-gpu-va: OpenCL buffer")?;
        let addr = match buffer_address(session, buffer) {
            Ok(a) => a,
            Err(e) => {
                release_buffer(buffer);
                return Err(e);
            }
        };
        Ok(Made {
            cl: ClMem::Buffer(buffer),
            peer: PeerPtr { addr, len },
            memory: Box::new(GpuVa { buffer }),
            owner: Owner::OpenCl,
        })
    }

    fn c_reproducible(&self) -> bool {
        true
    }

    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        let (v, bytes) = (m.v, m.bytes());
        c.declare(format!("cl_mem {v}_buf, {v}_va;"));
        c.uses("device_buffer");
        c.launches("buffer_address");
        c.comment("cl-gpu-va: a plain OpenCL buffer; the peer dereferences its device address as a kernel reads it (clhip also asks clGetMemObjectInfo for the tokens 0x4100 and 0x4101, CL_MEM_AMD_GPU_VA and CL_MEM_LINUX_DMA_BUF_FD_KHR, which no header defines: a note; left out)");
        c.line(&format!(
            "CHECK(CL, ({v}_buf = clCreateBuffer(context, CL_MEM_READ_WRITE, {bytes}, NULL, &err), err));\n\
             {v}_va = device_buffer(8, NULL);\n\
             launch(\"buffer_address\", 1, 2, (struct arg[]){{mem({v}_buf), mem({v}_va)}}, 0, NULL);\n\
             CHECK(CL, clEnqueueReadBuffer(queue, {v}_va, CL_TRUE, 0, 8, &{v}_peer, 0, NULL, NULL));\n\
             printf(\"device address of {v}: 0x%llx\\n\", (unsigned long long){v}_peer);"
        ));
        c::poison(c, m, true, false);
    }

    fn c_release(&self, _c: &mut dyn CWriter, m: &CMem) -> String {
        format!("CHECK(CL, clReleaseMemObject({}_buf));", m.v)
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

impl Memory for GpuVa {
    fn what(&self, _path: PathKind) -> &'static str {
        "buffer at its kernel-read device address"
    }

    fn cl_owned(&self) -> Option<ClMem> {
        Some(ClMem::Buffer(self.buffer))
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
        _session: &ClSession,
        _peer: &mut dyn PeerRuntime,
        _first_err: &mut Option<CaseError>,
    ) {
        release_buffer(self.buffer);
    }
}
