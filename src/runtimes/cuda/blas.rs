//! cuBLAS and cuSOLVER: the peer's cgemm and cpotrf, through handles (`handles`) created on
//! first use.

use std::ffi::c_int;

use cudarc::cublas::sys as blas;
use cudarc::cusolver::sys as solver;
use num_complex::Complex32;

use super::CudaPeer;
use super::error::call;
use super::handles::{BlasHandle, DeviceBuffer, SolverHandle};
use crate::model::{CaseError, Phase};
use crate::model::{Transpose, Uplo};
use crate::runtimes::gpu::blas::{Cgemm, Cpotrf, GpuBlas, read_info};

fn cu_complex(z: Complex32) -> blas::cuComplex {
    blas::cuComplex { x: z.re, y: z.im }
}

impl CudaPeer {
    fn blas(&mut self) -> Result<blas::cublasHandle_t, CaseError> {
        let stream = self.stream;
        match self.blas.get_or_insert_with(|| {
            crate::trace::timed("cuBLAS handle", || BlasHandle::create(stream))
        }) {
            Ok(h) => Ok(h.handle),
            Err(e) => Err(e.clone()),
        }
    }

    fn solver(&mut self) -> Result<solver::cusolverDnHandle_t, CaseError> {
        let stream = self.stream;
        match self.solver.get_or_insert_with(|| {
            crate::trace::timed("cuSOLVER handle", || SolverHandle::create(stream))
        }) {
            Ok(h) => Ok(h.handle),
            Err(e) => Err(e.clone()),
        }
    }
}

impl GpuBlas for CudaPeer {
    fn cgemm_on_stream(&mut self, gemm: &Cgemm) -> Result<(), CaseError> {
        let op = |t: Transpose| match t {
            Transpose::None => blas::cublasOperation_t::CUBLAS_OP_N,
            Transpose::Trans => blas::cublasOperation_t::CUBLAS_OP_T,
            Transpose::ConjTrans => blas::cublasOperation_t::CUBLAS_OP_C,
        };
        let (m, n, k) = (gemm.m, gemm.n, gemm.k);
        let (lda, ldb, ldc) = (gemm.lda, gemm.ldb, gemm.ldc);
        let (ta, tb) = (op(gemm.op_a), op(gemm.op_b));
        let h = self.blas()?;
        let (alpha, beta) = (cu_complex(gemm.alpha), cu_complex(gemm.beta));
        let (a, b, c) = (
            gemm.a.addr as *const _,
            gemm.b.addr as *const _,
            gemm.c.addr as *mut _,
        );
        // SAFETY: column-major operands at the addresses the path handed over; with host
        // pointer mode cuBLAS reads alpha and beta before returning.
        unsafe {
            call!(
                blas::cublasCgemm_v2(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc),
                "{}",
                gemm.detail()
            )
        }
        .running()
    }

    fn cpotrf_on_stream(&mut self, potrf: &Cpotrf) -> Result<i32, CaseError> {
        let fill = match potrf.uplo {
            Uplo::Lower => solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
            Uplo::Upper => solver::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
        };
        let Cpotrf { n, lda, .. } = *potrf;
        let h = self.solver()?;
        let a = potrf.a.addr as *mut solver::cuComplex;
        let mut lwork: c_int = 0;
        // SAFETY: live out-parameter; `a` is only looked at for its shape.
        unsafe {
            call!(solver::cusolverDnCpotrf_bufferSize(
                h, fill, n, a, lda, &mut lwork
            ))
        }
        .running()?;
        let bytes = lwork.max(1) as usize * size_of::<Complex32>();
        let work = DeviceBuffer::new(bytes, "cpotrf workspace")?;
        let (w, info_at) = (work.0 as *mut solver::cuComplex, self.scratch as *mut c_int);
        // SAFETY: a workspace of `lwork` elements; `info` goes to 4 device bytes of scratch.
        unsafe {
            call!(
                solver::cusolverDnCpotrf(h, fill, n, a, lda, w, lwork, info_at),
                "{}",
                potrf.detail()
            )
        }
        .running()?;
        // `work` is freed when this returns, after the read-back has waited for the factorization.
        read_info(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::PeerRuntime;
    use crate::runtimes::cuda::tests::gpu;
    use crate::runtimes::device::{AllocKind, DeviceAlloc, DeviceRuntime};

    fn gemm_case(p: &mut CudaPeer, n: usize, timed: bool) {
        use crate::generate::matrix;
        let (a, b, c) = (matrix(1, n, n, n), matrix(2, n, n, n), matrix(3, n, n, n));
        let (alpha, beta) = (Complex32::new(0.5, -1.0), Complex32::new(0.25, 0.5));
        let bufs: Vec<DeviceAlloc> = [&a, &b, &c]
            .iter()
            .map(|m| {
                let d = p.alloc(AllocKind::Device, m.len()).unwrap();
                p.upload(d.ptr, m).unwrap();
                d
            })
            .collect();
        let (ta, tb) = (Transpose::ConjTrans, Transpose::None);
        let run = |p: &mut CudaPeer| {
            p.cgemm(
                ta,
                tb,
                n,
                n,
                n,
                alpha,
                bufs[0].ptr,
                n,
                bufs[1].ptr,
                n,
                beta,
                bufs[2].ptr,
                n,
            )
            .unwrap();
        };
        run(p);
        let got = p.download(bufs[2].ptr).unwrap();
        let want = crate::reference::cgemm(ta, tb, n, n, n, alpha, &a, n, &b, n, beta, &c, n);
        crate::tolerance::check_cgemm("cuda cgemm", &got, &want, n, n, n, n, false)
            .unwrap_or_else(|m| panic!("{m}"));
        if timed {
            let reps = 10;
            p.synchronize().unwrap();
            let t = std::time::Instant::now();
            for _ in 0..reps {
                run(p);
            }
            p.synchronize().unwrap();
            let s = t.elapsed().as_secs_f64() / reps as f64;
            let flops = 8.0 * (n as f64).powi(3);
            eprintln!(
                "cgemm n={n}: {:.3} ms, {:.1} TFLOP/s",
                s * 1e3,
                flops / s / 1e12
            );
        }
        for d in bufs {
            p.free(d);
        }
    }

    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_cgemm_matches_the_reference() {
        let mut p = gpu("device_cgemm_matches_the_reference");
        eprintln!("{}", p.info().blas);
        gemm_case(&mut p, 64, false);
        gemm_case(&mut p, 2048, true);
    }

    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_cpotrf_matches_the_reference_and_reports_info() {
        let mut p = gpu("device_cpotrf_matches_the_reference_and_reports_info");
        eprintln!("{}", p.info().solver);
        for (n, lda) in [(64, 70), (2048, 2048)] {
            for uplo in [Uplo::Lower, Uplo::Upper] {
                let a = crate::generate::hpd_matrix(9, n, lda);
                let d = p.alloc(AllocKind::Device, a.len()).unwrap();
                let mut times = Vec::new();
                // The first call of a shape pays for the cuSOLVER handle (first call only) and
                // CUDA's lazy kernel loading; the second is the steady state.
                for _ in 0..2 {
                    p.upload(d.ptr, &a).unwrap();
                    let t = std::time::Instant::now();
                    let info = p.cpotrf(uplo, n, d.ptr, lda).unwrap();
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                    assert_eq!(info, 0);
                }
                let got = p.download(d.ptr).unwrap();
                let want = crate::reference::cholesky(uplo, n, &a, lda).unwrap();
                crate::tolerance::check_cholesky("cuda cpotrf", &got, &want, uplo, n, lda)
                    .unwrap_or_else(|m| panic!("{m}"));
                eprintln!(
                    "cpotrf n={n} {uplo:?}: first {:.3} ms, then {:.3} ms \
                     (workspace alloc, factorization, info read-back)",
                    times[0], times[1]
                );
                p.free(d);
            }
        }
        let (a, want_info) = crate::generate::non_hpd_matrix(4, 300, 300);
        let d = p.alloc(AllocKind::Device, a.len()).unwrap();
        p.upload(d.ptr, &a).unwrap();
        let info = p.cpotrf(Uplo::Lower, 300, d.ptr, 300).unwrap();
        eprintln!("cpotrf non-HPD n=300: info {info}, want {want_info}");
        assert_eq!(info, want_info as i32);
        p.free(d);
    }
}
