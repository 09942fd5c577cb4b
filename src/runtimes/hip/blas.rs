//! rocBLAS cgemm and rocSOLVER cpotrf, through one rocBLAS handle on the peer's stream, created
//! on first use.

use num_complex::Complex32;

use crate::model::{CaseError, Phase};
use crate::model::{Transpose, Uplo};
use crate::runtimes::gpu::blas::{Cgemm, Cpotrf, GpuBlas, read_info};

use super::HipPeer;
use super::ffi::{self, rocblas_float_complex, rocblas_handle, rocblas_status};
use super::handles::{BlasHandle, blas_check};
use super::load::open_solver;
use super::status::need;

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

fn roc_complex(z: Complex32) -> rocblas_float_complex {
    rocblas_float_complex { x: z.re, y: z.im }
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
}

impl GpuBlas for HipPeer {
    fn cgemm_on_stream(&mut self, gemm: &Cgemm) -> Result<(), CaseError> {
        let op = |t: Transpose| match t {
            Transpose::None => ffi::rocblas_operation_none,
            Transpose::Trans => ffi::rocblas_operation_transpose,
            Transpose::ConjTrans => ffi::rocblas_operation_conjugate_transpose,
        };
        let (ta, tb) = (op(gemm.op_a), op(gemm.op_b));
        let (m, n, k) = (gemm.m, gemm.n, gemm.k);
        let (lda, ldb, ldc) = (gemm.lda, gemm.ldb, gemm.ldc);
        let blas = self.blas()?;
        let h = blas.handle;
        let call = need(blas.lib.fns.rocblas_cgemm, &blas.lib.path, "rocblas_cgemm")?;
        let (alpha, beta) = (roc_complex(gemm.alpha), roc_complex(gemm.beta));
        let a = gemm.a.addr as *const rocblas_float_complex;
        let b = gemm.b.addr as *const rocblas_float_complex;
        let c = gemm.c.addr as *mut rocblas_float_complex;
        // SAFETY: column-major operands at the addresses the path handed over; with host
        // pointer mode rocBLAS reads alpha and beta before returning.
        let s = unsafe { call(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc) };
        let arch = &self.info.arch;
        blas_outcome("rocBLAS", "rocblas_cgemm", s, arch, || gemm.detail())
    }

    fn cpotrf_on_stream(&mut self, potrf: &Cpotrf) -> Result<i32, CaseError> {
        let fill = match potrf.uplo {
            Uplo::Lower => ffi::rocblas_fill_lower,
            Uplo::Upper => ffi::rocblas_fill_upper,
        };
        let (fns, h) = self.solver()?;
        let call = need(fns.rocsolver_cpotrf, "librocsolver", "rocsolver_cpotrf")?;
        let Cpotrf { n, lda, .. } = *potrf;
        let a = potrf.a.addr as *mut rocblas_float_complex;
        let info_at = self.scratch as *mut ffi::rocblas_int;
        // SAFETY: `a` is n x n column-major with leading dimension lda at the address the path
        // handed over; `info` goes to 4 device bytes of scratch. rocSOLVER allocates its
        // workspace through the rocBLAS handle, on the handle's stream.
        let s = unsafe { call(h, fill, n, a, lda, info_at) };
        let arch = &self.info.arch;
        blas_outcome("rocSOLVER", "rocsolver_cpotrf", s, arch, || potrf.detail())?;
        read_info(self)
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
