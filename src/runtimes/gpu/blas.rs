//! cgemm and cpotrf as both platforms' BLAS and LAPACK libraries take them: every size checked
//! against their 32-bit `int` interfaces before any call, and the `info` a factorization leaves
//! in the peer's scratch read back. The backend supplies [`GpuBlas`]: its handles and the call.

use std::ffi::c_int;

use num_complex::Complex32;

use super::GpuCore;
use crate::model::{CaseError, Transpose, Uplo};
use crate::runtimes::PeerPtr;

/// A size the 32-bit BLAS/LAPACK interfaces cannot take: the combination is refused up front.
pub(crate) fn int_arg(what: &str, v: usize) -> Result<c_int, CaseError> {
    c_int::try_from(v)
        .map_err(|_| CaseError::unsupported(format!("{what} = {v} exceeds the 32-bit int API")))
}

/// C = alpha * op(A) * op(B) + beta * C, column-major, with sizes the interfaces take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cgemm {
    pub op_a: Transpose,
    pub op_b: Transpose,
    pub m: c_int,
    pub n: c_int,
    pub k: c_int,
    pub alpha: Complex32,
    pub a: PeerPtr,
    pub lda: c_int,
    pub b: PeerPtr,
    pub ldb: c_int,
    pub beta: Complex32,
    pub c: PeerPtr,
    pub ldc: c_int,
}

impl Cgemm {
    /// [`DeviceRuntime::cgemm`](crate::runtimes::device::DeviceRuntime::cgemm)'s arguments,
    /// refused if a size exceeds `int`.
    pub(crate) fn new(
        (op_a, op_b): (Transpose, Transpose),
        (m, n, k): (usize, usize, usize),
        (alpha, beta): (Complex32, Complex32),
        (a, lda): (PeerPtr, usize),
        (b, ldb): (PeerPtr, usize),
        (c, ldc): (PeerPtr, usize),
    ) -> Result<Cgemm, CaseError> {
        let (m, n, k) = (int_arg("m", m)?, int_arg("n", n)?, int_arg("k", k)?);
        let (lda, ldb, ldc) = (
            int_arg("lda", lda)?,
            int_arg("ldb", ldb)?,
            int_arg("ldc", ldc)?,
        );
        Ok(Cgemm {
            op_a,
            op_b,
            m,
            n,
            k,
            alpha,
            a,
            lda,
            b,
            ldb,
            beta,
            c,
            ldc,
        })
    }

    /// What a refused call carries beside its name.
    pub(crate) fn detail(&self) -> String {
        let Cgemm {
            op_a,
            op_b,
            m,
            n,
            k,
            ..
        } = self;
        format!("m={m} n={n} k={k} {op_a:?} {op_b:?}")
    }
}

/// Cholesky factorization in place of the `n` x `n` matrix at `a`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cpotrf {
    pub uplo: Uplo,
    pub n: c_int,
    pub a: PeerPtr,
    pub lda: c_int,
}

impl Cpotrf {
    pub(crate) fn new(uplo: Uplo, n: usize, a: PeerPtr, lda: usize) -> Result<Cpotrf, CaseError> {
        let (n, lda) = (int_arg("cpotrf n", n)?, int_arg("cpotrf lda", lda)?);
        Ok(Cpotrf { uplo, n, a, lda })
    }

    /// What a refused call carries beside its name.
    pub(crate) fn detail(&self) -> String {
        let Cpotrf { uplo, n, lda, .. } = self;
        format!("n={n} lda={lda} {uplo:?}")
    }
}

/// The BLAS and solver calls of a GPU runtime, on the peer's stream, with their handles made
/// on first use (a machine without the library loses gemm or cholesky, not the participant).
pub(crate) trait GpuBlas: GpuCore {
    fn cgemm_on_stream(&mut self, gemm: &Cgemm) -> Result<(), CaseError>;
    /// The factorization, then LAPACK's `info` ([`read_info`]): 0, or the 1-based order of
    /// the first non-positive leading minor.
    fn cpotrf_on_stream(&mut self, potrf: &Cpotrf) -> Result<i32, CaseError>;
}

/// The `info` a solver call wrote to 4 bytes of the peer's scratch: the copy is ordered after
/// the factorization on the stream, and waits for it.
pub(crate) fn read_info(g: &impl GpuCore) -> Result<i32, CaseError> {
    let mut info: c_int = 0;
    g.copy_out((&raw mut info).cast(), g.scratch() as usize, 4)?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_past_int_are_refused_before_any_call() {
        let p = PeerPtr { addr: 0, len: 0 };
        let one = Complex32::new(1.0, 0.0);
        let ops = (Transpose::None, Transpose::ConjTrans);
        let g = Cgemm::new(ops, (2, 3, 4), (one, one), (p, 5), (p, 6), (p, 7)).unwrap();
        assert_eq!((g.m, g.n, g.k, g.lda, g.ldb, g.ldc), (2, 3, 4, 5, 6, 7));
        assert_eq!(g.detail(), "m=2 n=3 k=4 None ConjTrans");
        let big = c_int::MAX as usize + 1;
        match Cgemm::new(ops, (2, 3, 4), (one, one), (p, 5), (p, big), (p, 7)) {
            Err(CaseError::Unsupported {
                reason,
                error: None,
            }) => assert_eq!(reason, format!("ldb = {big} exceeds the 32-bit int API")),
            other => panic!("{other:?}"),
        }
        let c = Cpotrf::new(Uplo::Upper, 9, p, 10).unwrap();
        assert_eq!(c.detail(), "n=9 lda=10 Upper");
        assert!(Cpotrf::new(Uplo::Lower, big, p, 10).is_err());
    }
}
