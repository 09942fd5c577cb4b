//! What the peer holds and releases on drop: a temporary device buffer, and the cuBLAS and
//! cuSOLVER handles on its stream. Below the peer (mod.rs), which holds them, and below
//! memory.rs and blas.rs, which make the peer's calls with them.

use std::ptr::null_mut;

use cudarc::cublas::sys as blas;
use cudarc::cusolver::sys as solver;
use cudarc::driver::sys as cu;

use super::error::call;
use super::load::{LIBCUBLAS, LIBCUSOLVER, VendorLib};
use crate::model::{CaseError, Phase};

/// A temporary device allocation, freed on every path out of the scope that made it.
pub(super) struct DeviceBuffer(pub(super) cu::CUdeviceptr);

impl DeviceBuffer {
    pub(super) fn new(bytes: usize, what: &str) -> Result<DeviceBuffer, CaseError> {
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter.
        unsafe { call!(cu::cuMemAlloc_v2(&mut p, bytes.max(1)), "{bytes} bytes") }.refused(what)?;
        Ok(DeviceBuffer(p))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc_v2 in the current context, freed once. Through
        // call! (its error has nowhere to go) so that the free is recorded as the call it is.
        let _ = unsafe { call!(cu::cuMemFree_v2(self.0)) };
    }
}

/// A cuBLAS handle on the peer's stream. Created on the first cgemm: a machine without cuBLAS
/// loses gemm, not the participant.
pub(super) struct BlasHandle {
    pub(super) handle: blas::cublasHandle_t,
    _lib: VendorLib,
}

impl BlasHandle {
    pub(super) fn create(stream: cu::CUstream) -> Result<BlasHandle, CaseError> {
        let lib = VendorLib::open(&LIBCUBLAS)?;
        let mut handle: blas::cublasHandle_t = null_mut();
        // SAFETY: live out-parameter; the primary context is current on this thread.
        unsafe { call!(blas::cublasCreate_v2(&mut handle)) }.refused("cuBLAS initialisation")?;
        let h = BlasHandle { handle, _lib: lib };
        // SAFETY: live handle; cuBLAS's cudaStream_t is the driver's CUstream_st*. Host pointer
        // mode: alpha and beta are read from host memory during the call.
        unsafe {
            call!(blas::cublasSetStream_v2(h.handle, stream.cast())).running()?;
            let host = blas::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST;
            call!(blas::cublasSetPointerMode_v2(h.handle, host)).running()?;
        }
        Ok(h)
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasCreate_v2, destroyed once, before the library is released.
        unsafe { blas::cublasDestroy_v2(self.handle) };
    }
}

/// A cuSOLVER dense handle on the peer's stream, created on the first cpotrf.
pub(super) struct SolverHandle {
    pub(super) handle: solver::cusolverDnHandle_t,
    _lib: VendorLib,
}

impl SolverHandle {
    pub(super) fn create(stream: cu::CUstream) -> Result<SolverHandle, CaseError> {
        let lib = VendorLib::open(&LIBCUSOLVER)?;
        let mut handle: solver::cusolverDnHandle_t = null_mut();
        // SAFETY: live out-parameter; the primary context is current on this thread.
        unsafe { call!(solver::cusolverDnCreate(&mut handle)) }
            .refused("cuSOLVER initialisation")?;
        let h = SolverHandle { handle, _lib: lib };
        // SAFETY: live handle; the same CUstream_st* as the driver's.
        unsafe { call!(solver::cusolverDnSetStream(h.handle, stream.cast())) }.running()?;
        Ok(h)
    }
}

impl Drop for SolverHandle {
    fn drop(&mut self) {
        // SAFETY: created by cusolverDnCreate, destroyed once.
        unsafe { solver::cusolverDnDestroy(self.handle) };
    }
}
