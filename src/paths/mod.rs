//! Paths: how memory owned by one API becomes addressable by the other. A [`Shared`] is one
//! allocation made through one path, with the view each side uses: a kernel argument for
//! OpenCL and a [`PeerPtr`] for the peer.
//!
//! Each path family is one room of this folder, implementing [`Path`]: the syncs it takes with
//! which peer, how it allocates, how its memory is handed to the peer and back to OpenCL, how
//! it is freed, and the C its reproducer contains, side by side. What every path shares (the
//! poison, the owner, the semaphore handovers of `sync`) is here; `model` keeps only the
//! names.
//!
//! Adding a path is one room and rows in cases/: the room's [`declare_paths!`] block names its
//! paths, and build.rs makes `PathKind`, the rooms' `mod` lines and [`room`] from the blocks,
//! in the order of cases/paths.toml (docs/paths.md, "Adding a path").

mod across;
mod buffer;
pub(crate) mod c;
pub mod guard;

/// A room's declaration of the paths it implements, at the top of its file:
///
/// ```text
/// declare_paths! {
///     room: UseHostPtr;            // the room's type, a `Path`
///     hands_over_only_by: Map;     // optional: the one sync OpenCL may hand over with
///     pass_note_is_a_finding;      // optional: a pass's note is a finding (cl-gpu-va)
///     /// What the path is (the doc of its `PathKind` variant).
///     UseHostPtr => "use-host-ptr",
/// }
/// ```
///
/// build.rs reads the block line by line (one item a line) to make `PathKind` and [`room`];
/// the compiler checks it here again: the room is a [`Path`], each variant a `PathKind`, the
/// handover a `SyncMode`.
macro_rules! declare_paths {
    (
        room: $room:ident;
        $(hands_over_only_by: $sync:ident;)?
        $(pass_note_is_a_finding;)?
        $($(#[doc = $doc:literal])+ $variant:ident => $name:literal,)+
    ) => {
        /// This room, as [`room`](crate::paths::room) hands it out for each of its paths.
        pub(super) const ROOM: &dyn crate::paths::Path = &$room;
        const _: &[crate::model::PathKind] = &[$(crate::model::PathKind::$variant,)+];
        $(const _: crate::model::SyncMode = crate::model::SyncMode::$sync;)?
    };
}

// The rooms' `mod` lines and `room()`, made by build.rs.
include!(concat!(env!("OUT_DIR"), "/rooms.rs"));

use std::ffi::c_void;
use std::ptr;

use cl3::memory::{CL_MEM_READ_WRITE, CL_MEM_USE_HOST_PTR};
use cl3::types::{cl_event, cl_mem_properties};
use num_complex::Complex32;

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

use crate::model::{Api, CaseError, PathKind, Phase, SyncMode};
use crate::runtimes::device::{DeviceRuntime, ExportHandle};
use crate::runtimes::opencl::{ClEvent, ClMem, ClResultExt, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access, SemaphoreFault, SemaphoreLink};

pub use across::AcrossGpus;
pub(crate) use across::{cl_gpu, reach_across};
pub use buffer::{DeviceBuffer, written_as_asked};
pub use svm::{svm_null, svm_refusal};

use c::{CMem, CWriter};

/// What new memory holds before a case writes it: a quiet-NaN word, so that a consumer whose
/// producer did nothing reads data that fails every check (a NaN is out of every bound and no
/// handoff pattern is this word everywhere). Without it a reused allocation could still hold an
/// earlier case's correct result, and a no-op would pass.
pub const POISON_WORD: u32 = 0x7FF4_DEAD;

/// [`POISON_WORD`] as complex elements, for the peer's upload.
pub fn poison_vec(len: usize) -> Vec<Complex32> {
    let nan = f32::from_bits(POISON_WORD);
    vec![Complex32::new(nan, nan); len]
}

thread_local! {
    /// Test-only (the `stale-correct` plant): what the next new memory holds before its
    /// poison fill.
    static STALE: std::cell::Cell<Option<Vec<Complex32>>> = const { std::cell::Cell::new(None) };
}

/// The `stale-correct` plant: the next [`Shared::create`] on this thread finds `data` in its
/// new memory, left there before the poison fill, as an identical earlier case's result would
/// be in a reused allocation.
pub fn plant_stale(data: Vec<Complex32>) {
    STALE.set(Some(data));
}

/// Which side may touch the memory now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    OpenCl,
    Peer,
}

/// One path family: everything clhip knows and does about its paths, in one room.
pub(crate) trait Path: Sync {
    /// The sync modes that mean something on `path` for this peer (see [`PathFacts::syncs`]).
    fn syncs(&self, path: PathKind, peer: Api) -> &'static [SyncMode];

    /// Which peers `path` exists for.
    fn applies_to(&self, path: PathKind, peer: Api) -> bool;

    /// Both sides dereference the one allocation in place, with no map, copy or import to hand
    /// over: ordering (finish, event) is all a sync can do there.
    fn shares_one_address(&self) -> bool {
        false
    }

    /// The SVM `path` allocates for OpenCL: fine-grain (`Some(true)`), coarse-grain
    /// (`Some(false)`), or none of its own. A device that lacks it refuses the case, decided
    /// from the probe without a worker, in the words a worker's allocation would use.
    fn svm_fine_grain(&self, _path: PathKind) -> Option<bool> {
        None
    }

    /// What `path` needs with OpenCL on one GPU and this peer on another. A room that does
    /// not say is not run across GPUs.
    fn across_gpus(&self, _path: PathKind, _peer: Api) -> AcrossGpus {
        AcrossGpus::Refused("its room does not say how its memory would reach another GPU")
    }

    /// Allocate through `path`. A combination the device lacks, or that a call refuses, is
    /// `Unsupported` with the capability or the call and its code; anything made before a
    /// refusal is undone.
    fn create(
        &self,
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Made, CaseError>;

    /// Whether the reproducer generator can write this room's paths as C (its `c_*` methods
    /// are written), for the peers each path applies to.
    fn c_reproducible(&self) -> bool {
        false
    }

    /// Whether OpenCL kernels take the reproducer's allocation as an SVM pointer (`<v>_svm`)
    /// rather than a buffer (`<v>_buf`).
    fn c_cl_is_svm(&self) -> bool {
        false
    }

    /// The C of [`Path::create`] and its poison.
    fn c_create(&self, c: &mut dyn CWriter, m: &CMem) {
        c.refuse(format!(
            "the reproducer generator has no C for path {}",
            m.path
        ));
    }

    /// The C that frees what [`Path::c_create`] made, once both sides let go.
    fn c_release(&self, c: &mut dyn CWriter, m: &CMem) -> String {
        c.refuse(format!(
            "the reproducer generator has no C for path {}",
            m.path
        ));
        String::new()
    }

    /// The C of [`Memory::to_peer`].
    fn c_to_peer(
        &self,
        c: &mut dyn CWriter,
        m: &mut CMem,
        sync: SyncMode,
        _last: Option<&str>,
        _access: Access,
    ) {
        c::no_such_handover(c, m.path, sync);
    }

    /// The C of [`Memory::to_cl`]; the event the next OpenCL command must wait on, if any.
    fn c_to_cl(&self, c: &mut dyn CWriter, m: &mut CMem, sync: SyncMode) -> Option<String> {
        c::no_such_handover(c, m.path, sync);
        None
    }
}

/// What each path's room says about it, asked of a [`PathKind`].
pub trait PathFacts: Copy {
    /// The sync modes that mean something on this path for this peer. A case file naming a
    /// sync no path of its group takes is rejected. Some listed modes break a rule on purpose:
    /// see [`crate::model::Case::is_negative_control`]. Each room says why its modes are
    /// the ones listed.
    fn syncs(self, peer: Api) -> &'static [SyncMode];
    /// Every sync this path takes for any peer (what a case file is validated against).
    fn any_syncs(self) -> Vec<SyncMode>;
    /// Which peers a path exists for.
    fn applies_to(self, peer: Api) -> bool;
    /// See [`Path::shares_one_address`].
    fn shares_one_address(self) -> bool;
    /// OpenCL's object is another API's export imported with cl_khr_external_memory, which
    /// OpenCL must acquire before use and release after: the room declares
    /// `hands_over_only_by: AcquireRelease`.
    fn is_imported(self) -> bool;
    /// OpenCL's object is a CL_MEM_USE_HOST_PTR buffer over the peer's memory, handed over
    /// by map/unmap only: the room declares `hands_over_only_by: Map`.
    fn is_use_host_ptr(self) -> bool;
    /// Whether the reproducer generator covers this path on a pair with `peer`.
    fn has_reproducer(self, peer: Api) -> bool;
    /// See [`Path::across_gpus`].
    fn across_gpus(self, peer: Api) -> AcrossGpus;
}

impl PathFacts for PathKind {
    fn syncs(self, peer: Api) -> &'static [SyncMode] {
        room(self).syncs(self, peer)
    }

    fn any_syncs(self) -> Vec<SyncMode> {
        let mut all: Vec<SyncMode> = [Api::Host, Api::Cuda, Api::Hip]
            .iter()
            .flat_map(|&a| self.syncs(a).iter().copied())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    fn applies_to(self, peer: Api) -> bool {
        room(self).applies_to(self, peer)
    }

    fn shares_one_address(self) -> bool {
        room(self).shares_one_address()
    }

    fn is_imported(self) -> bool {
        self.only_handed_over_by() == Some(SyncMode::AcquireRelease)
    }

    fn is_use_host_ptr(self) -> bool {
        self.only_handed_over_by() == Some(SyncMode::Map)
    }

    fn has_reproducer(self, peer: Api) -> bool {
        room(self).c_reproducible() && self.applies_to(peer)
    }

    fn across_gpus(self, peer: Api) -> AcrossGpus {
        room(self).across_gpus(self, peer)
    }
}

/// What a room's `create` made.
pub(crate) struct Made {
    /// What OpenCL kernels take.
    pub cl: ClMem,
    /// What the peer dereferences.
    pub peer: PeerPtr,
    pub memory: Box<dyn Memory>,
    /// Imported memory starts out owned by its exporter: OpenCL must acquire it.
    pub owner: Owner,
}

/// What one room's allocation holds, and how it is handed over and freed.
pub(crate) trait Memory: std::fmt::Debug {
    /// What the memory is, for a fault's placement.
    fn what(&self, path: PathKind) -> &'static str;

    /// What OpenCL allocated of it (which OpenCL poisons).
    fn cl_owned(&self) -> Option<ClMem>;

    /// What the peer allocated of it (which the peer poisons), `peer` being what it
    /// dereferences.
    fn peer_owned(&self, peer: PeerPtr) -> Option<PeerPtr>;

    /// The OpenCL buffer of an imported path.
    fn imported_buffer(&self) -> Option<*mut c_void> {
        None
    }

    /// The USE_HOST_PTR buffer a live mapping is of.
    fn mapped_buffer(&self) -> Option<*mut c_void> {
        None
    }

    /// Hand the memory to the peer under `sync` (any but `semaphore`, which every path
    /// shares), after OpenCL work whose last command is `last` (`waits`).
    fn to_peer(
        &self,
        h: &mut Handover<'_>,
        sync: SyncMode,
        last: Option<&ClEvent>,
        waits: &[cl_event],
        access: Access,
    ) -> Result<(), CaseError>;

    /// Hand the memory back to OpenCL under `sync` (any but `semaphore`), the peer's work
    /// done as the mode says; the events OpenCL's next command waits on.
    fn to_cl(&self, h: &mut Handover<'_>, sync: SyncMode) -> Result<Vec<ClEvent>, CaseError>;

    /// Free it all, both sides idle and mappings undone; the first error is kept.
    fn release(
        self: Box<Self>,
        session: &ClSession,
        peer: &mut dyn PeerRuntime,
        first_err: &mut Option<CaseError>,
    );
}

/// One handover of a [`Shared`]: both sides, the memory's views, and its live mappings.
pub(crate) struct Handover<'a> {
    pub s: &'a ClSession,
    pub peer: &'a mut dyn PeerRuntime,
    pub path: PathKind,
    pub len: usize,
    pub cl: ClMem,
    pub peer_ptr: PeerPtr,
    /// A live clEnqueueMapBuffer mapping (USE_HOST_PTR).
    pub mapped: &'a mut Option<*mut c_void>,
    /// A live clEnqueueSVMMap of the allocation.
    pub svm_mapped: &'a mut bool,
}

impl Handover<'_> {
    pub(crate) fn bytes(&self) -> usize {
        self.len * size_of::<Complex32>()
    }

    pub(crate) fn cl_svm_ptr(&self) -> *mut c_void {
        match self.cl {
            ClMem::Svm(p) => p,
            ClMem::Buffer(_) => ptr::null_mut(),
        }
    }
}

/// One allocation reachable from both sides through `path`.
#[derive(Debug)]
pub struct Shared {
    pub path: PathKind,
    /// Complex f32 elements.
    pub len: usize,
    /// What OpenCL kernels take.
    pub cl: ClMem,
    /// What the peer dereferences (while it owns the memory).
    pub peer: PeerPtr,
    pub(crate) memory: Box<dyn Memory>,
    pub(crate) owner: Owner,
    /// A live clEnqueueMapBuffer mapping (USE_HOST_PTR), to unmap.
    pub(crate) mapped: Option<*mut c_void>,
    /// A live clEnqueueSVMMap of this allocation, to unmap.
    pub(crate) svm_mapped: bool,
    /// The semaphore that orders this memory's handovers under the `semaphore` sync, made at
    /// the first one.
    pub(crate) semaphore: Option<SemaphoreLink>,
    /// The guard zones of its allocations, checked before they are freed.
    pub(crate) guards: Vec<guard::Guard>,
}

pub(crate) fn device_peer(
    peer: &mut dyn PeerRuntime,
    path: PathKind,
) -> Result<&mut dyn DeviceRuntime, CaseError> {
    let label = peer.peer().label();
    peer.as_device().ok_or_else(|| {
        CaseError::unsupported(format!(
            "path {path} needs a device runtime; {label} has none"
        ))
    })
}

/// The peer as a device runtime, for a handover that needs one.
pub(crate) fn device_of(
    peer: &mut dyn PeerRuntime,
    path: PathKind,
) -> Result<&mut dyn DeviceRuntime, CaseError> {
    peer.as_device()
        .ok_or_else(|| CaseError::unsupported(format!("path {path} needs a device runtime")))
}

/// clCreateBuffer over memory the peer allocated (CL_MEM_USE_HOST_PTR).
pub(crate) fn wrap_host_ptr(
    session: &ClSession,
    addr: usize,
    bytes: usize,
) -> Result<*mut c_void, CaseError> {
    // SAFETY: the caller keeps `addr` live for `bytes` until release, which frees the buffer
    // first.
    unsafe {
        cl3::memory::create_buffer(
            session.context.get(),
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            bytes,
            addr as *mut c_void,
        )
    }
    .call("clCreateBuffer(CL_MEM_USE_HOST_PTR)")
    .refused("OpenCL would not wrap the peer's memory")
}

/// cl_khr_external_memory: import the peer's fd (an opaque fd from CUDA, a dma-buf from
/// ROCm) as a buffer of this device.
pub(crate) fn import_fd(
    session: &ClSession,
    fd: OwnedFd,
    kind: ExportHandle,
    bytes: usize,
) -> Result<*mut c_void, CaseError> {
    // cl_khr_external_memory (OpenCL-Headers cl_ext.h).
    const CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR: cl_mem_properties = 0x2060;
    const CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR: cl_mem_properties = 0x2067;
    const CL_MEM_DEVICE_HANDLE_LIST_KHR: cl_mem_properties = 0x2051;
    const CL_MEM_DEVICE_HANDLE_LIST_END_KHR: cl_mem_properties = 0;
    let (handle_type, ext, type_name) = match kind {
        ExportHandle::OpaqueFd => (
            CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR,
            "cl_khr_external_memory_opaque_fd",
            "CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR",
        ),
        ExportHandle::DmaBuf => (
            CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR,
            "cl_khr_external_memory_dma_buf",
            "CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR",
        ),
    };
    for ext in ["cl_khr_external_memory", ext] {
        if !session.has_extension(ext) {
            return Err(CaseError::unsupported(format!(
                "device lacks {ext}, so OpenCL has no way to import the peer's fd"
            )));
        }
    }
    let props: [cl_mem_properties; 6] = [
        handle_type,
        fd.as_raw_fd() as cl_mem_properties,
        CL_MEM_DEVICE_HANDLE_LIST_KHR,
        session.device.id as cl_mem_properties,
        CL_MEM_DEVICE_HANDLE_LIST_END_KHR,
        0,
    ];
    // SAFETY: a zero-terminated property list; no host pointer.
    let buffer = unsafe {
        cl3::memory::create_buffer_with_properties(
            session.context.get(),
            props.as_ptr(),
            CL_MEM_READ_WRITE,
            bytes,
            ptr::null_mut(),
        )
    }
    .call(&format!("clCreateBufferWithProperties({type_name})"))
    .map_err(|e| {
        session.import_refusal(
            e,
            "OpenCL would not import the peer's fd",
            ("CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR", 0x204F),
            (type_name, handle_type as u32),
        )
    })?;
    // A successful import hands the fd to the implementation, as in Vulkan's external-memory
    // model that cl_khr_external_memory follows; closing it here could close the driver's.
    let _ = fd.into_raw_fd();
    Ok(buffer)
}

pub(crate) fn release_buffer(b: *mut c_void) {
    crate::calls::record("clReleaseMemObject");
    // SAFETY: the caller owns this buffer and is done with it; OpenCL defers the release until
    // queued commands using it are done.
    unsafe {
        let _ = cl3::memory::release_mem_object(b);
    }
}

/// Blocking map of a whole SVM allocation for the peer.
pub(crate) fn svm_map(
    h: &mut Handover<'_>,
    waits: &[cl_event],
    access: Access,
) -> Result<(), CaseError> {
    let (n, w) = sync::raw_wait(waits);
    // SAFETY: blocking map of the whole SVM allocation.
    let ev = unsafe {
        cl3::command_queue::enqueue_svm_map(
            h.s.queue.get(),
            cl3::types::CL_TRUE,
            access.map_flags(),
            h.cl_svm_ptr(),
            h.bytes(),
            n,
            w,
        )
    }
    .call("clEnqueueSVMMap")
    .running()?;
    drop(ClEvent(ev));
    *h.svm_mapped = true;
    Ok(())
}

pub(crate) fn svm_unmap(h: &mut Handover<'_>) -> Result<ClEvent, CaseError> {
    // SAFETY: unmapping what svm_map mapped.
    let ev = unsafe {
        cl3::command_queue::enqueue_svm_unmap(h.s.queue.get(), h.cl_svm_ptr(), 0, ptr::null())
    }
    .call("clEnqueueSVMUnmap")
    .running()?;
    *h.svm_mapped = false;
    Ok(ClEvent(ev))
}

/// The refusal of a handover no case makes: cases are built from the path's syncs.
pub(crate) fn no_such_handover(path: PathKind, sync: SyncMode) -> CaseError {
    CaseError::Harness(format!(
        "sync {sync} on {path} is rejected when cases are built"
    ))
}

/// Whether the `semaphore` sync means something on `path`: both sides' device work on the
/// one allocation in place (see [`PathFacts::syncs`]).
fn semaphore_orders(path: PathKind) -> bool {
    path.shares_one_address() || path.is_imported()
}

/// The handovers of a path whose two sides dereference the one allocation in place
/// ([`Path::shares_one_address`]), OpenCL to the peer: ordering is all a sync can do.
pub(crate) fn shared_address_to_peer(
    h: &Handover<'_>,
    sync: SyncMode,
    last: Option<&ClEvent>,
) -> Result<(), CaseError> {
    match sync {
        // Negative control: start nothing that would order the peer after OpenCL.
        SyncMode::None => Ok(()),
        SyncMode::Finish | SyncMode::Event => sync::finish_or_wait(h.s, sync, last),
        other => Err(no_such_handover(h.path, other)),
    }
}

/// [`shared_address_to_peer`], the peer to OpenCL: the peer's work is complete (`to_cl`
/// waited per the mode), and commands enqueued from now on see it.
pub(crate) fn shared_address_to_cl(
    h: &Handover<'_>,
    sync: SyncMode,
) -> Result<Vec<ClEvent>, CaseError> {
    match sync {
        SyncMode::None | SyncMode::Finish | SyncMode::Event => Ok(Vec::new()),
        other => Err(no_such_handover(h.path, other)),
    }
}

/// The handovers of imported memory (cl_khr_external_memory), OpenCL to the peer: released to
/// its exporter under `acquire-release`; under `finish`, a rule-breaking negative control,
/// OpenCL's work is finished and nothing more.
pub(crate) fn imported_to_peer(
    h: &Handover<'_>,
    buffer: *mut c_void,
    sync: SyncMode,
    waits: &[cl_event],
) -> Result<(), CaseError> {
    match sync {
        SyncMode::None => Ok(()),
        SyncMode::Finish => h.s.finish().running(),
        SyncMode::AcquireRelease => sync::release_external(h.s, buffer, waits)?.wait().running(),
        other => Err(no_such_handover(h.path, other)),
    }
}

/// [`imported_to_peer`], the peer to OpenCL: acquired from its exporter under
/// `acquire-release`.
pub(crate) fn imported_to_cl(
    h: &Handover<'_>,
    buffer: *mut c_void,
    sync: SyncMode,
) -> Result<Vec<ClEvent>, CaseError> {
    match sync {
        SyncMode::None | SyncMode::Finish => Ok(Vec::new()),
        SyncMode::AcquireRelease => Ok(vec![sync::acquire_external(h.s, buffer, &[])?]),
        other => Err(no_such_handover(h.path, other)),
    }
}

impl Shared {
    pub fn bytes(&self) -> usize {
        self.len * size_of::<Complex32>()
    }

    /// The OpenCL buffer of an imported path (another API's export), which OpenCL acquires
    /// before use and releases after.
    pub(crate) fn imported_buffer(&self) -> Option<*mut c_void> {
        self.memory.imported_buffer()
    }

    /// The SVM pointer OpenCL kernels take (null for a buffer object).
    pub(crate) fn cl_svm_ptr(&self) -> *mut c_void {
        match self.cl {
            ClMem::Svm(p) => p,
            ClMem::Buffer(_) => ptr::null_mut(),
        }
    }

    /// Allocate through `path` (its room's `create`), announce and poison it.
    pub fn create(
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
    ) -> Result<Self, CaseError> {
        Self::create_across(session, peer, path, len, None)
    }

    /// [`Shared::create`] for a pair whose OpenCL device is on GPU `cl_gpu` (as the peer's
    /// runtime numbers it) where that is not the peer's GPU: what the path needs across the
    /// two ([`AcrossGpus`]) is checked and set up first, and the room learns `cl_gpu` through
    /// [`cl_gpu`] while it creates.
    pub fn create_across(
        session: &mut ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        len: usize,
        cl_gpu: Option<usize>,
    ) -> Result<Self, CaseError> {
        if let Some(gpu) = cl_gpu {
            reach_across(peer, path, gpu)?;
        }
        across::set_cl_gpu(cl_gpu);
        let (made, guards) = guard::collect(|| room(path).create(session, peer, path, len));
        across::set_cl_gpu(None);
        let made = made?;
        let shared = Shared {
            path,
            len,
            cl: made.cl,
            peer: made.peer,
            memory: made.memory,
            owner: made.owner,
            mapped: None,
            svm_mapped: false,
            semaphore: None,
            guards,
        };
        shared.announce();
        if let Some(stale) = STALE.take()
            && let Err(e) = shared.leave_stale(session, peer, &stale)
        {
            let _ = shared.release(session, peer);
            return Err(e);
        }
        let poisoned = shared
            .poison(session, peer)
            .and_then(|()| guard::fill(session, peer, &shared.guards));
        match poisoned {
            Ok(()) => Ok(shared),
            Err(e) => {
                let _ = shared.release(session, peer);
                Err(e)
            }
        }
    }

    /// Tells a watching parent where this memory lies, so that a page fault that kills the
    /// process can still be placed in (or near) it.
    fn announce(&self) {
        let what = self.memory.what(self.path);
        let bytes = self.bytes() as u64;
        crate::fault::announce(crate::fault::BufferSpan {
            name: format!("{} shared memory ({what})", self.path),
            addr: self.peer.addr as u64,
            bytes,
        });
        let svm = self.cl_svm_ptr() as u64;
        if svm != 0 && svm != self.peer.addr as u64 {
            crate::fault::announce(crate::fault::BufferSpan {
                name: format!("{} OpenCL SVM", self.path),
                addr: svm,
                bytes,
            });
        }
    }

    /// Fills every allocation behind this memory with [`POISON_WORD`] through the API that
    /// allocated it, and waits for both sides: the case's own steps and syncs start after it.
    /// Memory a side only borrows is left to its owner: OpenCL does not fill a raw device
    /// pointer or imported memory it has not acquired, and the peer does not write memory it
    /// reaches only through an address OpenCL handed out (`cl-gpu-va`, SVM), which it may be
    /// unable to touch at all: that is what those cases find out.
    fn poison(&self, session: &ClSession, peer: &mut dyn PeerRuntime) -> Result<(), CaseError> {
        if let Some(mem) = self.memory.cl_owned() {
            session
                .fill(mem, self.bytes(), POISON_WORD)
                .and_then(|()| session.finish())
                .refused("OpenCL would not fill new memory with the poison pattern")?;
        }
        if let Some(p) = self.memory.peer_owned(self.peer) {
            peer.upload(p, &poison_vec(p.len))?;
            peer.synchronize()?;
        }
        Ok(())
    }

    /// The `stale-correct` plant: `data` written into every allocation the poison fill then
    /// covers, through the same side, as a reused allocation holds an earlier case's result.
    fn leave_stale(
        &self,
        session: &ClSession,
        peer: &mut dyn PeerRuntime,
        data: &[Complex32],
    ) -> Result<(), CaseError> {
        if let Some(mem) = self.memory.cl_owned() {
            let bytes = std::mem::size_of_val(data).min(self.bytes());
            let src = data.as_ptr().cast::<c_void>();
            let queue = session.queue.get();
            // SAFETY: blocking copies of at most the allocation's size from a live slice.
            let ev = unsafe {
                match mem {
                    ClMem::Buffer(b) => cl3::command_queue::enqueue_write_buffer(
                        queue,
                        b,
                        cl3::types::CL_TRUE,
                        0,
                        bytes,
                        src,
                        0,
                        ptr::null(),
                    )
                    .call("clEnqueueWriteBuffer"),
                    ClMem::Svm(p) => cl3::command_queue::enqueue_svm_mem_cpy(
                        queue,
                        cl3::types::CL_TRUE,
                        p,
                        src,
                        bytes,
                        0,
                        ptr::null(),
                    )
                    .call("clEnqueueSVMMemcpy"),
                }
            }
            .refused("OpenCL would not write the planted stale data")?;
            drop(ClEvent(ev));
        }
        if let Some(p) = self.memory.peer_owned(self.peer) {
            peer.upload(p, &data[..p.len.min(data.len())])?;
            peer.synchronize()?;
        }
        Ok(())
    }

    /// Wait for both sides to let go (whatever the sync mode under test did), undo any mapping
    /// or acquisition, check the guard zones ([`guard`]), and free. Errors here are reported
    /// but cannot change a verdict already reached; an overwritten guard fails a case that
    /// had passed.
    pub fn release(self, session: &ClSession, peer: &mut dyn PeerRuntime) -> Result<(), CaseError> {
        let queue = session.queue.get();
        let mut first_err = session.finish().running().err();
        if let Err(e) = peer.synchronize() {
            first_err.get_or_insert(e);
        }
        if let (Some(mapped), Some(buffer)) = (self.mapped, self.memory.mapped_buffer()) {
            // SAFETY: `mapped` came from clEnqueueMapBuffer on this buffer.
            let r = unsafe {
                cl3::command_queue::enqueue_unmap_mem_object(queue, buffer, mapped, 0, ptr::null())
            }
            .call("clEnqueueUnmapMemObject");
            match r {
                Ok(ev) => drop(ClEvent(ev)),
                Err(e) => {
                    first_err.get_or_insert(CaseError::Broken(e));
                }
            }
        }
        // An SVM allocation still mapped must be unmapped before it is freed.
        if self.svm_mapped {
            // SAFETY: mapped by to_peer on this queue.
            let unmapped = unsafe {
                cl3::command_queue::enqueue_svm_unmap(queue, self.cl_svm_ptr(), 0, ptr::null())
            }
            .call("clEnqueueSVMUnmap");
            if let Ok(ev) = unmapped {
                drop(ClEvent(ev));
            }
        }
        // Imported memory acquired by OpenCL goes back to its exporter before it is freed.
        if let (Owner::OpenCl, Some(buffer)) = (self.owner, self.imported_buffer())
            && let Err(e) = sync::release_external(session, buffer, &[])
        {
            first_err.get_or_insert(e);
        }
        if let Err(e) = session.finish().running() {
            first_err.get_or_insert(e);
        }
        // Both sides are idle and nothing is mapped: what lies past each view now is what the
        // case left there.
        if first_err.is_none()
            && let Err(e) = guard::check(session, peer, &self.guards)
        {
            first_err = Some(e);
        }
        // Both sides are idle: the semaphore can go before the memory it ordered.
        if let Some(link) = self.semaphore {
            link.release(peer);
        }
        self.memory.release(session, peer, &mut first_err);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Hand `m` to the peer after OpenCL work whose last command is `last`. Each handover does
/// exactly what the mode under test prescribes for the path, and nothing more, so that a
/// missing sync is visible as a stale read rather than papered over.
pub fn to_peer(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync: SyncMode,
    last: Option<&ClEvent>,
    access: Access,
) -> Result<(), CaseError> {
    to_peer_with(s, peer, m, sync, last, access, None)
}

/// [`to_peer`], with a semaphore fault planted (tests only) when `fault` is given.
pub fn to_peer_with(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync: SyncMode,
    last: Option<&ClEvent>,
    access: Access,
    fault: Option<SemaphoreFault>,
) -> Result<(), CaseError> {
    if m.owner == Owner::Peer {
        return Ok(());
    }
    let waits = sync::wait_list(last);
    if sync == SyncMode::Semaphore {
        let imported = m.imported_buffer();
        let path = m.path;
        sync::semaphore_to_peer(
            s,
            peer,
            &mut m.semaphore,
            path,
            semaphore_orders(path),
            imported,
            &waits,
            fault,
        )?;
    } else {
        let mut h = Handover {
            s,
            peer,
            path: m.path,
            len: m.len,
            cl: m.cl,
            peer_ptr: m.peer,
            mapped: &mut m.mapped,
            svm_mapped: &mut m.svm_mapped,
        };
        m.memory.to_peer(&mut h, sync, last, &waits, access)?;
    }
    m.owner = Owner::Peer;
    Ok(())
}

/// Hand `m` back to OpenCL after the peer's work. Returns the events the next OpenCL command
/// must wait on.
pub fn to_cl(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync: SyncMode,
) -> Result<Vec<ClEvent>, CaseError> {
    if m.owner == Owner::OpenCl {
        return Ok(Vec::new());
    }
    // The peer's half: its work must be done before OpenCL may touch the memory. Under
    // `semaphore` the peer's signal on its stream orders OpenCL after it, with no host wait.
    match sync {
        SyncMode::None | SyncMode::Semaphore => {}
        SyncMode::Event => peer
            .as_device()
            .map_or(Ok(()), |d| d.record_and_wait_event())?,
        _ => peer.synchronize()?,
    }
    let mut events = Vec::new();
    if sync == SyncMode::Semaphore {
        let imported = m.imported_buffer();
        let path = m.path;
        events.extend(sync::semaphore_to_cl(
            s,
            peer,
            &mut m.semaphore,
            path,
            semaphore_orders(path),
            imported,
        )?);
    } else {
        let mut h = Handover {
            s,
            peer,
            path: m.path,
            len: m.len,
            cl: m.cl,
            peer_ptr: m.peer,
            mapped: &mut m.mapped,
            svm_mapped: &mut m.svm_mapped,
        };
        events.extend(m.memory.to_cl(&mut h, sync)?);
    }
    m.owner = Owner::OpenCl;
    Ok(events)
}

#[cfg(test)]
mod tests;
