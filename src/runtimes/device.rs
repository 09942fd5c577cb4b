//! The peer interfaces: [`PeerRuntime`], what every peer of OpenCL offers (the host and each GPU
//! participant), and [`DeviceRuntime`], what a GPU participant (cuda, hip) offers beyond it.
//! Paths and ops use only these interfaces, so the two platforms share every line of path, sync
//! and op logic. The two live in one file because each names the other
//! ([`PeerRuntime::as_device`]); `runtimes` re-exports the first.

use std::os::fd::{OwnedFd, RawFd};
use std::rc::Rc;

use num_complex::Complex32;
use serde::{Deserialize, Serialize};

/// What discovery reports about one device ([`DeviceRuntime::info`]): a record of the
/// fingerprint's level, so that the probe and the reports keep it as the runtime wrote it.
pub use crate::fingerprint::DeviceInfo;
use crate::model::{ApiError, CaseError, Peer};
use crate::model::{Transpose, Uplo};
use crate::runtimes::vulkan::Broker;

/// An address the peer can dereference: a host virtual address for the host, a device (or
/// unified) address for a GPU runtime. `len` counts complex f32 elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPtr {
    pub addr: usize,
    pub len: usize,
}

/// What the peer's pattern check found (bit-exact): how many words differ, and the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternCheck {
    pub mismatches: usize,
    pub first: Option<(usize, u32)>,
}

/// The peer side of a pair. Every method acts on memory that a path made reachable; the caller
/// has already passed ownership with the case's sync mode. Work may be asynchronous on a device
/// peer; `synchronize` waits for all of it.
pub trait PeerRuntime {
    fn peer(&self) -> Peer;

    /// The device-runtime half of a GPU peer; `None` for the host.
    fn as_device(&mut self) -> Option<&mut dyn DeviceRuntime> {
        None
    }

    /// Memory the peer owns and OpenCL may wrap with CL_MEM_USE_HOST_PTR.
    fn alloc_host(&mut self, len: usize) -> Result<PeerPtr, CaseError>;
    fn free_host(&mut self, ptr: PeerPtr);

    /// Write the handoff pattern for `seed` over `2 * ptr.len` 32-bit words.
    fn fill_pattern(&mut self, ptr: PeerPtr, seed: u32) -> Result<(), CaseError>;
    fn check_pattern(&mut self, ptr: PeerPtr, seed: u32) -> Result<PatternCheck, CaseError>;

    fn upload(&mut self, ptr: PeerPtr, data: &[Complex32]) -> Result<(), CaseError>;
    fn download(&mut self, ptr: PeerPtr) -> Result<Vec<Complex32>, CaseError>;

    /// x *= s, elementwise.
    fn scale(&mut self, ptr: PeerPtr, s: f32) -> Result<(), CaseError>;
    /// x = (|x|, 0), elementwise.
    fn magnitude(&mut self, ptr: PeerPtr) -> Result<(), CaseError>;

    /// XOR `bit` into 32-bit word `word` (tests plant errors with it).
    fn flip_bit(&mut self, ptr: PeerPtr, word: usize, bit: u32) -> Result<(), CaseError>;

    fn synchronize(&mut self) -> Result<(), CaseError>;
}

/// How the peer allocates memory that a path shares with OpenCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocKind {
    /// cuMemAlloc / hipMalloc.
    Device,
    /// cuMemHostAlloc / hipHostMalloc (hipExtHostAlloc from ROCm 6.3): page-locked host memory.
    PinnedHost,
    /// cuMemAllocManaged / hipMallocManaged.
    Managed,
    /// cuMemCreate / hipMemCreate with a POSIX-fd (CUDA) or dma-buf (ROCm) shareable handle,
    /// reserved and mapped into the peer's address space.
    Exportable,
    /// Memory OpenCL allocated, mapped into the peer through an external-memory import
    /// (hsa_amd_portable_export_dmabuf -> hipImportExternalMemory ->
    /// hipExternalMemoryGetMappedBuffer). `handle` is the external-memory object.
    ImportedExternal,
    /// Another process's `Device` allocation opened with hipIpcOpenMemHandle /
    /// cuIpcOpenMemHandle.
    IpcOpened,
    /// Pageable host memory the caller allocated, page-locked and mapped for the device with
    /// hipHostRegister / cuMemHostRegister: `ptr` is its device pointer
    /// (hipHostGetDevicePointer / cuMemHostGetDevicePointer), `handle` the host address that
    /// `free` unregisters. The memory itself stays the caller's.
    Registered,
}

/// The kind of fd [`DeviceRuntime::export_fd`] gives, which decides how OpenCL must import it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportHandle {
    /// CUDA's POSIX fd: cl_khr_external_memory_opaque_fd.
    OpaqueFd,
    /// ROCm's hipMemExportToShareableHandle gives a dma-buf: cl_khr_external_memory_dma_buf.
    DmaBuf,
}

/// An IPC memory handle: 64 opaque bytes in both hipIpcMemHandle_t and CUipcMemHandle.
pub type IpcHandle = [u8; 64];

/// One allocation of the peer's, as the peer and OpenCL see it.
#[derive(Debug)]
pub struct DeviceAlloc {
    pub kind: AllocKind,
    /// The address the peer's kernels and libraries use (host address for pinned memory:
    /// it is also device-accessible through UVA).
    pub ptr: PeerPtr,
    /// Runtime-private handle for freeing (VMM: the generic allocation handle).
    pub handle: u64,
    /// Bytes actually allocated (VMM rounds up to the allocation granularity).
    pub bytes: usize,
}

impl DeviceAlloc {
    /// An allocation of `len` elements at `addr` (at least one element's bytes, as every
    /// allocation call here is asked for: a zero-byte allocation is refused by some runtimes).
    pub fn new(kind: AllocKind, addr: usize, len: usize, handle: u64) -> Self {
        DeviceAlloc {
            kind,
            ptr: PeerPtr { addr, len },
            handle,
            bytes: len.max(1) * size_of::<Complex32>(),
        }
    }

    /// Refuse an operation that only allocations of `kind` support (an IPC handle of pinned
    /// memory, a shareable handle of a plain allocation).
    pub fn require(&self, kind: AllocKind, what: &str) -> Result<(), CaseError> {
        if self.kind == kind {
            return Ok(());
        }
        Err(CaseError::unsupported(format!(
            "only {kind:?} allocations have {what}, not {:?}",
            self.kind
        )))
    }
}

/// Why discovery lists no devices (or not one of them), in one line: the refused call and its
/// code where there is one, else the reason.
pub fn discovery_failure(e: CaseError) -> String {
    match e {
        CaseError::Unsupported {
            error: Some(err), ..
        } => err.to_string(),
        CaseError::Unsupported { reason, .. } => reason,
        other => format!("{other:?}"),
    }
}

/// A GPU participant. Asynchronous work goes on one stream; `synchronize` (from
/// [`PeerRuntime`]) waits for all of it, `record_and_wait_event` only for what was enqueued so
/// far, through an event (the `event` sync mode's peer half).
pub trait DeviceRuntime: PeerRuntime {
    fn info(&self) -> &DeviceInfo;

    /// A non-blocking look at the peer's stream (None where the backend has none): how a host
    /// wait on OpenCL tells a peer that will never signal from one that is still working.
    fn queue_watch(&self) -> Option<crate::blocking::QueueWatch> {
        None
    }

    fn alloc(&mut self, kind: AllocKind, len: usize) -> Result<DeviceAlloc, CaseError>;
    fn free(&mut self, alloc: DeviceAlloc);

    /// A POSIX fd for an `Exportable` allocation (cuMemExportToShareableHandle).
    fn export_fd(&mut self, alloc: &DeviceAlloc) -> Result<OwnedFd, CaseError>;

    /// What kind of fd `export_fd` gives.
    fn export_handle(&self) -> ExportHandle;

    /// The runtime's own synchronous copy between two addresses (hipMemcpy / cuMemcpy with
    /// the direction inferred from the pointers). Either may be memory this runtime never
    /// allocated, such as an OpenCL SVM pointer: how the runtime copes is what is under test.
    fn memcpy(&mut self, dst: usize, src: usize, bytes: usize) -> Result<(), CaseError>;

    /// Map memory OpenCL allocated (an SVM pointer of `bytes`) into this runtime through the
    /// platform's dma-buf export and the runtime's external-memory import. `len` is the
    /// element count the returned allocation's pointer carries. Free the result with `free`.
    fn import_cl_memory(
        &mut self,
        addr: usize,
        bytes: usize,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError>;

    /// Register `len` elements of pageable host memory at `addr` with the runtime, mapped for
    /// the device (hipHostRegister / cuMemHostRegister, portable and mapped), with the device
    /// pointer the device dereferences (hipHostGetDevicePointer / cuMemHostGetDevicePointer).
    /// `free` unregisters it; the caller frees the memory after.
    fn register_host(&mut self, addr: usize, len: usize) -> Result<DeviceAlloc, CaseError>;

    /// The IPC handle of a `Device` allocation (hipIpcGetMemHandle / cuIpcGetMemHandle).
    fn ipc_handle(&mut self, alloc: &DeviceAlloc) -> Result<IpcHandle, CaseError>;

    /// Open another process's IPC handle (hipIpcOpenMemHandle / cuIpcOpenMemHandle with
    /// lazy peer access). Free the result with `free`, which closes it.
    fn ipc_open(&mut self, handle: &IpcHandle, len: usize) -> Result<DeviceAlloc, CaseError>;

    /// Import an external semaphore from an opaque fd (hipImportExternalSemaphore /
    /// cuImportExternalSemaphore); returns the runtime's semaphore handle.
    fn import_semaphore_fd(&mut self, fd: RawFd) -> Result<u64, CaseError>;
    fn destroy_semaphore(&mut self, sem: u64);
    /// Enqueue a signal of an imported semaphore on the peer's stream, after its work so far
    /// (cuSignalExternalSemaphoresAsync / hipSignalExternalSemaphoresAsync).
    fn signal_semaphore(&mut self, sem: u64) -> Result<(), CaseError>;
    /// Enqueue a wait for an imported semaphore on the peer's stream: later work waits for its
    /// signal (cuWaitExternalSemaphoresAsync / hipWaitExternalSemaphoresAsync).
    fn wait_semaphore(&mut self, sem: u64) -> Result<(), CaseError>;
    /// The call `wait_semaphore` makes, for a case to name where it may hang.
    fn semaphore_wait_call(&self) -> &'static str;
    /// Enqueue busy work of `iters` steps per thread on the peer's stream: later work waits
    /// behind it (the wrong-semaphore plant's hold-back).
    fn spin(&mut self, iters: u32) -> Result<(), CaseError>;

    /// Import memory another API exported as an opaque fd (`size` bytes, `dedicated` as it
    /// was allocated), its first `len` elements mapped (cuImportExternalMemory +
    /// cuExternalMemoryGetMappedBuffer / the hip calls). The import owns the fd once it
    /// accepts it. Free the result with `free`.
    fn import_memory_fd(
        &mut self,
        fd: OwnedFd,
        size: u64,
        dedicated: bool,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError>;

    /// The Vulkan broker on this device's GPU (the Vulkan device of the same UUID), opened on
    /// first use and kept with the peer for the worker's life.
    fn vulkan(&mut self) -> Result<Rc<Broker>, CaseError>;

    /// Command-line arguments that open this same device in another clhip process
    /// (`--api hip --ordinal 0 [--rocm-path DIR]`), for the IPC exporter.
    fn reopen_args(&self) -> Vec<String>;

    /// [`DeviceRuntime::reopen_args`] for another device of this runtime: the IPC exporter of
    /// a pair across GPUs allocates on OpenCL's GPU.
    fn reopen_args_on(&self, ordinal: usize) -> Vec<String>;

    /// Whether this runtime's device `from` can reach device `to`'s memory
    /// (cuDeviceCanAccessPeer, hipDeviceCanAccessPeer); ordinals as the run numbers them.
    fn can_access_peer(&mut self, from: usize, to: usize) -> Result<bool, CaseError>;

    /// The call [`DeviceRuntime::can_access_peer`] makes, for a refusal to name.
    fn peer_access_call(&self) -> &'static str;

    /// Let device `other`'s kernels reach this peer's allocations (cuCtxEnablePeerAccess in
    /// `other`'s primary context, hipDeviceEnablePeerAccess with `other` current). Access
    /// enabled before is no error.
    fn enable_access_from(&mut self, other: usize) -> Result<(), CaseError>;

    /// Record an event after the work enqueued so far and wait for it on the host.
    fn record_and_wait_event(&mut self) -> Result<(), CaseError>;

    /// C = alpha * op(A) * op(B) + beta * C, column-major, complex f32 (cuBLAS/rocBLAS cgemm).
    #[allow(clippy::too_many_arguments)]
    fn cgemm(
        &mut self,
        op_a: Transpose,
        op_b: Transpose,
        m: usize,
        n: usize,
        k: usize,
        alpha: Complex32,
        a: PeerPtr,
        lda: usize,
        b: PeerPtr,
        ldb: usize,
        beta: Complex32,
        c: PeerPtr,
        ldc: usize,
    ) -> Result<(), CaseError>;

    /// Cholesky factorization in place (cuSOLVER cpotrf / rocSOLVER cpotrf). Returns LAPACK's
    /// `info` (0, or the 1-based order of the first non-positive leading minor), read back from
    /// the device after the call.
    fn cpotrf(&mut self, uplo: Uplo, n: usize, a: PeerPtr, lda: usize) -> Result<i32, CaseError>;

    /// Run a known-answer kernel: does the device still compute after a fault or a crash?
    fn health_check(&mut self) -> Result<(), CaseError>;

    /// A device fault left pending in the context (CUDA's and HIP's are sticky: every later
    /// call fails with it). Asked after each case, so that a fault a library reported under
    /// another name (CUBLAS_STATUS_EXECUTION_FAILED) is called a fault, and the worker stops.
    fn sticky_fault(&mut self) -> Option<ApiError>;

    /// Bytes in use on the whole device now, by every process: total - free from
    /// cuMemGetInfo / hipMemGetInfo (a case's footprint).
    fn memory_in_use(&mut self) -> Result<u64, CaseError>;
}
