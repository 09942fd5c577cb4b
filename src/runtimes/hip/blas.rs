//! rocBLAS cgemm and rocSOLVER cpotrf, through one rocBLAS handle on the peer's stream, created
//! on first use.

use std::ffi::c_int;
use std::ptr::null_mut;

use num_complex::Complex32;

use crate::model::{Api, ApiError, CaseError, Phase};
use crate::model::{Transpose, Uplo};
use crate::runtimes::PeerPtr;
use crate::runtimes::gpu::GpuCore;

use super::HipPeer;
use super::ffi::{
    self, BlasFns, Hip, OptLib, hipStream_t, rocblas_float_complex, rocblas_handle, rocblas_status,
};
use super::load::{open_blas, open_solver};
use super::status::need;

/// A rocBLAS / rocSOLVER status (rocSOLVER returns rocblas_status) as an [`ApiError`].
fn blas_check(
    call: &str,
    s: rocblas_status,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    if s == ffi::rocblas_status_success {
        return Ok(());
    }
    Err(ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: s as i64,
        name: ffi::rocblas_status_name(s).to_string(),
        detail: detail(),
    })
}

/// The status of a rocBLAS / rocSOLVER operation as the case's outcome. Two statuses of
/// ROCm/rocBLAS rocm-5.7.0 and later are refusals with a reason of their own:
/// rocblas_status_arch_mismatch (15; what rocBLAS makes of hipErrorNoBinaryForGpu, i.e. the
/// library has no code objects for this device) reads `<lib> has no kernels for this
/// architecture (gfx908)`, with the device's arch without its feature flags, and
/// rocblas_status_excluded_from_build (14) says the function was built out. Anything else is a
/// refusal while running (a device fault where the code says so).
fn blas_outcome(
    lib: &str,
    call: &str,
    s: rocblas_status,
    arch: &str,
    detail: impl FnOnce() -> String,
) -> Result<(), CaseError> {
    let Err(e) = blas_check(call, s, detail) else {
        return Ok(());
    };
    let arch = arch.split(':').next().unwrap_or(arch);
    let reason = match s {
        ffi::rocblas_status_arch_mismatch => {
            format!("{lib} has no kernels for this architecture ({arch})")
        }
        ffi::rocblas_status_excluded_from_build => format!("{lib} was built without {call}"),
        _ => return Err(e).running(),
    };
    Err(CaseError::Unsupported {
        reason,
        error: Some(e),
    })
}

/// A size the 32-bit rocBLAS/rocSOLVER interfaces cannot take: refused up front.
fn int_arg(what: &str, v: usize) -> Result<c_int, CaseError> {
    c_int::try_from(v)
        .map_err(|_| CaseError::unsupported(format!("{what} = {v} exceeds the 32-bit int API")))
}

/// A rocBLAS handle on the peer's stream. Created on the first cgemm or cpotrf (rocSOLVER works
/// through a rocBLAS handle): a machine without rocBLAS loses gemm and cholesky, not the
/// participant.
pub(super) struct BlasHandle {
    handle: rocblas_handle,
    lib: OptLib<BlasFns>,
}

impl BlasHandle {
    fn create(hip: &Hip, stream: hipStream_t) -> Result<BlasHandle, CaseError> {
        let lib = open_blas(hip)?;
        let create = need(
            lib.fns.rocblas_create_handle,
            &lib.path,
            "rocblas_create_handle",
        )?;
        let mut handle: rocblas_handle = null_mut();
        // SAFETY: live out-parameter; the peer's device is current on this thread.
        blas_check(
            "rocblas_create_handle",
            unsafe { create(&mut handle) },
            String::new,
        )
        .refused("rocBLAS initialisation")?;
        let h = BlasHandle { handle, lib };
        let set_stream = need(
            h.lib.fns.rocblas_set_stream,
            &h.lib.path,
            "rocblas_set_stream",
        )?;
        let set_mode = need(
            h.lib.fns.rocblas_set_pointer_mode,
            &h.lib.path,
            "rocblas_set_pointer_mode",
        )?;
        // SAFETY: live handle and stream. Host pointer mode: alpha and beta are read from host
        // memory during the call.
        unsafe {
            blas_check(
                "rocblas_set_stream",
                set_stream(h.handle, stream),
                String::new,
            )
            .running()?;
            let host = ffi::rocblas_pointer_mode_host;
            blas_check(
                "rocblas_set_pointer_mode",
                set_mode(h.handle, host),
                String::new,
            )
            .running()?;
        }
        Ok(h)
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        if let Some(destroy) = self.lib.fns.rocblas_destroy_handle {
            // SAFETY: created by rocblas_create_handle, destroyed once, before the library is
            // released.
            unsafe { destroy(self.handle) };
        }
    }
}

impl HipPeer {
    fn blas(&mut self) -> Result<&BlasHandle, CaseError> {
        let (stream, hip) = (self.stream, &self.hip);
        match self
            .blas
            .get_or_insert_with(|| BlasHandle::create(hip, stream))
        {
            Ok(h) => Ok(h),
            Err(e) => Err(e.clone()),
        }
    }

    /// The rocSOLVER table and the rocBLAS handle it works through.
    fn solver(&mut self) -> Result<(ffi::SolverFns, rocblas_handle), CaseError> {
        let hip = &self.hip;
        let fns = match self.solver.get_or_insert_with(|| open_solver(hip)) {
            Ok(l) => l.fns,
            Err(e) => return Err(e.clone()),
        };
        Ok((fns, self.blas()?.handle))
    }

    // DeviceRuntime::cgemm's arguments, handed on as they came.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rocblas_cgemm(
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
    ) -> Result<(), CaseError> {
        self.bind()?;
        let op = |t: Transpose| match t {
            Transpose::None => ffi::rocblas_operation_none,
            Transpose::Trans => ffi::rocblas_operation_transpose,
            Transpose::ConjTrans => ffi::rocblas_operation_conjugate_transpose,
        };
        let (ta, tb) = (op(op_a), op(op_b));
        let (m, n, k) = (int_arg("m", m)?, int_arg("n", n)?, int_arg("k", k)?);
        let (lda, ldb, ldc) = (
            int_arg("lda", lda)?,
            int_arg("ldb", ldb)?,
            int_arg("ldc", ldc)?,
        );
        let blas = self.blas()?;
        let h = blas.handle;
        let gemm = need(blas.lib.fns.rocblas_cgemm, &blas.lib.path, "rocblas_cgemm")?;
        let alpha = rocblas_float_complex {
            x: alpha.re,
            y: alpha.im,
        };
        let beta = rocblas_float_complex {
            x: beta.re,
            y: beta.im,
        };
        let (a, b, c) = (a.addr as *const _, b.addr as *const _, c.addr as *mut _);
        // SAFETY: column-major operands at the addresses the path handed over; with host
        // pointer mode rocBLAS reads alpha and beta before returning.
        let s = unsafe { gemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc) };
        blas_outcome("rocBLAS", "rocblas_cgemm", s, &self.info.arch, || {
            format!("m={m} n={n} k={k} {op_a:?} {op_b:?}")
        })
    }

    pub(super) fn rocsolver_cpotrf(
        &mut self,
        uplo: Uplo,
        n: usize,
        a: PeerPtr,
        lda: usize,
    ) -> Result<i32, CaseError> {
        self.bind()?;
        let fill = match uplo {
            Uplo::Lower => ffi::rocblas_fill_lower,
            Uplo::Upper => ffi::rocblas_fill_upper,
        };
        let (n, lda) = (int_arg("cpotrf n", n)?, int_arg("cpotrf lda", lda)?);
        let (fns, h) = self.solver()?;
        let potrf = need(fns.rocsolver_cpotrf, "librocsolver", "rocsolver_cpotrf")?;
        let a = a.addr as *mut rocblas_float_complex;
        let info_at = self.scratch as *mut ffi::rocblas_int;
        // SAFETY: `a` is n x n column-major with leading dimension lda at the address the path
        // handed over; `info` goes to 4 device bytes of scratch. rocSOLVER allocates its
        // workspace through the rocBLAS handle, on the handle's stream.
        let s = unsafe { potrf(h, fill, n, a, lda, info_at) };
        blas_outcome("rocSOLVER", "rocsolver_cpotrf", s, &self.info.arch, || {
            format!("n={n} lda={lda} {uplo:?}")
        })?;
        // Ordered after the factorization on the stream; the copy waits for it.
        let mut info: c_int = 0;
        self.copy_out((&raw mut info).cast(), self.scratch as usize, 4)?;
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rocBLAS 5.7+ status 15 is a refusal naming the architecture (without feature flags), 14
    /// names the function built out; others stay refusals while running, named per header.
    #[test]
    fn rocblas_arch_mismatch_is_unsupported_naming_the_arch() {
        assert!(blas_outcome("rocBLAS", "rocblas_cgemm", 0, "gfx908", String::new).is_ok());
        match blas_outcome(
            "rocBLAS",
            "rocblas_cgemm",
            15,
            "gfx908:sramecc+:xnack-",
            || "m=4".into(),
        ) {
            Err(CaseError::Unsupported {
                reason,
                error: Some(e),
            }) => {
                assert_eq!(
                    reason,
                    "rocBLAS has no kernels for this architecture (gfx908)"
                );
                assert_eq!(
                    format!("unsupported: {reason}"),
                    "unsupported: rocBLAS has no kernels for this architecture (gfx908)"
                );
                assert_eq!(
                    (e.code, e.name.as_str()),
                    (15, "rocblas_status_arch_mismatch")
                );
                assert_eq!(e.call, "rocblas_cgemm");
            }
            other => panic!("{other:?}"),
        }
        match blas_outcome("rocSOLVER", "rocsolver_cpotrf", 14, "gfx90a", String::new) {
            Err(CaseError::Unsupported {
                reason,
                error: Some(e),
            }) => {
                assert_eq!(reason, "rocSOLVER was built without rocsolver_cpotrf");
                assert_eq!(e.name, "rocblas_status_excluded_from_build");
            }
            other => panic!("{other:?}"),
        }
        match blas_outcome("rocBLAS", "rocblas_cgemm", 3, "gfx908", String::new) {
            Err(CaseError::Unsupported {
                reason,
                error: Some(e),
            }) => {
                assert_eq!(reason, "refused while the case ran");
                assert_eq!(e.name, "rocblas_status_invalid_pointer");
            }
            other => panic!("{other:?}"),
        }
    }
}
