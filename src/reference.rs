//! The f64 CPU truth every device result is held to. Inputs are the f32 values the device saw,
//! widened exactly; all arithmetic is f64, whose round-off (~1e-16) is negligible next to the
//! f32 bounds in `tolerance`. Nothing here knows about runtimes, paths or cases.

use std::cell::RefCell;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use faer::linalg::cholesky::llt::factor::LltError;
use faer::{Accum, Mat, Par, Side, c64};
use num_complex::{Complex32, Complex64};
use rustfft::{Fft, FftPlanner};

pub use crate::model::{Transpose, Uplo};

fn widen(z: Complex32) -> Complex64 {
    Complex64::new(f64::from(z.re), f64::from(z.im))
}

/// One planner for the process: FftPlanner caches a plan (twiddles, ~150 ms at 2^22 on a small
/// machine) per length, and plans are `Send + Sync`, so every thread reuses every plan.
static PLANNER: LazyLock<Mutex<FftPlanner<f64>>> = LazyLock::new(|| Mutex::new(FftPlanner::new()));

thread_local! {
    // Kept between calls: a fresh 64 MiB scratch at 2^22 costs ~50 ms of page faults and
    // zeroing per call, about half the transform's own time. Per thread, so FFTs on different
    // threads never contend; it holds the largest size this thread has transformed.
    static SCRATCH: RefCell<Vec<Complex64>> = const { RefCell::new(Vec::new()) };
}

fn plan(n: usize) -> Arc<dyn Fft<f64>> {
    // A poisoned lock means another thread panicked while planning; the cache holds only
    // finished plans, so it is still sound to use.
    PLANNER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .plan_fft_forward(n)
}

/// Plans the forward FFT of length `n` now, so that the first [`fft_forward`] of that length
/// costs only the transform (the runner can call this before it starts timing a case).
pub fn prepare_fft(n: usize) {
    if n > 0 {
        plan(n);
    }
}

/// Forward DFT `X[k] = sum_j x[j] exp(-2 pi i jk/N)`, unnormalised, as rocFFT/clFFT/VkFFT
/// compute it.
pub fn fft_forward(input: &[Complex32]) -> Vec<Complex64> {
    let mut buf: Vec<Complex64> = input.iter().copied().map(widen).collect();
    fft_forward_in_place(&mut buf);
    buf
}

/// [`fft_forward`] on data already in f64.
pub fn fft_forward_in_place(buf: &mut [Complex64]) {
    if buf.is_empty() {
        return;
    }
    let fft = plan(buf.len());
    let need = fft.get_inplace_scratch_len();
    SCRATCH.with_borrow_mut(|scratch| {
        if scratch.len() < need {
            scratch.resize(need, Complex64::new(0.0, 0.0));
        }
        fft.process_with_scratch(buf, &mut scratch[..need]);
    });
}

/// Pipeline stage 1, `a + b`. Exact: the sum of two f32 always fits an f64.
///
/// # Panics
/// If the lengths differ.
pub fn add(a: &[Complex32], b: &[Complex32]) -> Vec<Complex64> {
    assert_eq!(a.len(), b.len(), "add: operand lengths differ");
    a.iter()
        .zip(b)
        .map(|(&x, &y)| widen(x) + widen(y))
        .collect()
}

/// Pipeline stage 3, `s * x`.
pub fn scale(x: &[Complex64], s: f32) -> Vec<Complex64> {
    let s = f64::from(s);
    x.iter().map(|z| z * s).collect()
}

/// Pipeline stage 4, `|x|` (hypot, so no overflow or underflow in the squares).
pub fn magnitude(x: &[Complex64]) -> Vec<f64> {
    x.iter().map(|z| z.norm()).collect()
}

/// The pipeline op's reference (docs/bounds.md#what-clhip-uses): add -> FFT -> scale -> magnitude.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineReference {
    /// `FFT(a + b)`, before scaling: what the FFT stage should produce, and what the magnitude
    /// bound is derived from.
    pub fft: Vec<Complex64>,
    /// `|scale * FFT(a + b)[i]|`.
    pub magnitude: Vec<f64>,
}

/// The whole pipeline on the inputs the device saw.
///
/// # Panics
/// If `a` and `b` differ in length.
pub fn pipeline(a: &[Complex32], b: &[Complex32], scale_by: f32) -> PipelineReference {
    let mut fft = add(a, b);
    fft_forward_in_place(&mut fft);
    let magnitude = magnitude(&scale(&fft, scale_by));
    PipelineReference { fft, magnitude }
}

/// Smallest slice that holds a `rows x cols` column-major matrix with leading dimension `ld`:
/// BLAS does not require the last column's padding to exist.
fn min_len(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        ld * (cols - 1) + rows
    }
}

fn check_operand(name: &str, x: &[Complex32], rows: usize, cols: usize, ld: usize) {
    assert!(
        ld >= rows.max(1),
        "{name}: leading dimension {ld} < max(1, {rows})"
    );
    assert!(
        x.len() >= min_len(rows, cols, ld),
        "{name}: {} elements cannot hold {rows}x{cols} with ld {ld}",
        x.len()
    );
}

/// `op(X)` as an explicit `rows x cols` f64 matrix; `X` is stored as BLAS stores it (`rows x
/// cols` for `None`, `cols x rows` otherwise). Materialising costs O(size), next to O(mnk).
fn op_matrix(op: Transpose, x: &[Complex32], ld: usize, rows: usize, cols: usize) -> Mat<c64> {
    Mat::from_fn(rows, cols, |i, j| match op {
        Transpose::None => widen(x[i + j * ld]),
        Transpose::Trans => widen(x[j + i * ld]),
        Transpose::ConjTrans => widen(x[j + i * ld]).conj(),
    })
}

/// `C := alpha op(A) op(B) + beta C` with BLAS column-major semantics: `op(A)` is `m x k`,
/// `op(B)` is `k x n`, `C` is `m x n` with leading dimension `ldc`. Returns all of `c` widened,
/// with the `m x n` block replaced and the padding rows `m..ldc` as they came in, which is what
/// a correct cgemm leaves in device memory. With `beta == 0`, `C` is not read (BLAS: NaN in `C`
/// must not propagate).
///
/// # Panics
/// On argument errors BLAS would reject (`lda < max(1, rows of stored A)`, slices too short).
#[allow(clippy::too_many_arguments)] // the BLAS signature, argument for argument
pub fn cgemm(
    op_a: Transpose,
    op_b: Transpose,
    m: usize,
    n: usize,
    k: usize,
    alpha: Complex32,
    a: &[Complex32],
    lda: usize,
    b: &[Complex32],
    ldb: usize,
    beta: Complex32,
    c: &[Complex32],
    ldc: usize,
) -> Vec<Complex64> {
    let (a_rows, a_cols) = if op_a == Transpose::None {
        (m, k)
    } else {
        (k, m)
    };
    let (b_rows, b_cols) = if op_b == Transpose::None {
        (k, n)
    } else {
        (n, k)
    };
    check_operand("cgemm A", a, a_rows, a_cols, lda);
    check_operand("cgemm B", b, b_rows, b_cols, ldb);
    check_operand("cgemm C", c, m, n, ldc);

    let mut out: Vec<Complex64> = c.iter().copied().map(widen).collect();
    if m == 0 || n == 0 {
        return out;
    }
    let beta = widen(beta);
    let mut acc = if beta == c64::new(0.0, 0.0) {
        Mat::zeros(m, n)
    } else {
        Mat::from_fn(m, n, |i, j| beta * out[i + j * ldc])
    };
    if k > 0 {
        let op_a = op_matrix(op_a, a, lda, m, k);
        let op_b = op_matrix(op_b, b, ldb, k, n);
        faer::linalg::matmul::matmul(
            acc.as_mut(),
            Accum::Add,
            op_a.as_ref(),
            op_b.as_ref(),
            widen(alpha),
            Par::rayon(0),
        );
    }
    for j in 0..n {
        for i in 0..m {
            out[i + j * ldc] = acc[(i, j)];
        }
    }
    out
}

/// cpotrf: `A = L L^H` (`Uplo::Lower`) or `A = U^H U` (`Uplo::Upper`), reading only that
/// triangle of `a` and only the real part of its diagonal, as LAPACK does. Returns all of `a`
/// widened with the factor written over the chosen triangle; the other triangle and the padding
/// rows are the input's, as LAPACK leaves them.
///
/// `Err(info)`: LAPACK's `info > 0`, the 1-based order of the first leading minor that is not
/// positive definite (a pivot <= 0 or NaN). faer's `NonPositivePivot { index }` is the 0-based
/// column where it stopped, so `info = index + 1` (pinned by a test on hand-made matrices).
/// Which pivot fails is decided in f64; inputs whose pivots are within rounding of zero could
/// legitimately fail at a different step in f32, which is why the generator's non-HPD matrices
/// make the failing pivot about `-n`.
///
/// # Panics
/// If `lda < max(1, n)` or `a` is too short.
pub fn cholesky(
    uplo: Uplo,
    n: usize,
    a: &[Complex32],
    lda: usize,
) -> Result<Vec<Complex64>, usize> {
    check_operand("cpotrf A", a, n, n, lda);
    let mut out: Vec<Complex64> = a.iter().copied().map(widen).collect();
    if n == 0 {
        return Ok(out);
    }
    // faer factors the lower triangle; the upper one is its adjoint.
    let lower = Mat::from_fn(n, n, |i, j| {
        if i < j {
            c64::new(0.0, 0.0)
        } else if i == j {
            c64::new(out[i + i * lda].re, 0.0)
        } else {
            match uplo {
                Uplo::Lower => out[i + j * lda],
                Uplo::Upper => out[j + i * lda].conj(),
            }
        }
    });
    let llt = match lower.llt(Side::Lower) {
        Ok(llt) => llt,
        Err(LltError::NonPositivePivot { index }) => return Err(index + 1),
    };
    let l = llt.L();
    for j in 0..n {
        for i in j..n {
            match uplo {
                Uplo::Lower => out[i + j * lda] = l[(i, j)],
                Uplo::Upper => out[j + i * lda] = l[(i, j)].conj(),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn c(re: f32, im: f32) -> Complex32 {
        Complex32::new(re, im)
    }

    fn naive_dft(x: &[Complex32]) -> Vec<Complex64> {
        let n = x.len();
        (0..n)
            .map(|k| {
                x.iter()
                    .enumerate()
                    .map(|(j, &v)| {
                        // Reduce jk mod n first so the angle stays accurate for large n.
                        let t = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                        widen(v) * Complex64::new(t.cos(), t.sin())
                    })
                    .sum()
            })
            .collect()
    }

    #[test]
    fn fft_matches_the_definition() {
        for n in [1, 2, 3, 5, 8, 12, 17, 64, 100] {
            let x = crate::generate::complex_vec(n as u64, n);
            let got = fft_forward(&x);
            let want = naive_dft(&x);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).norm() < 1e-12 * n as f64, "n={n}: {g} vs {w}");
            }
        }
        // Forward means exp(-i...): a unit impulse at 1 gives X[1] = exp(-2 pi i / N).
        let mut x = vec![c(0.0, 0.0); 4];
        x[1] = c(1.0, 0.0);
        let y = fft_forward(&x);
        assert_relative_eq!(y[1].im, -1.0, epsilon = 1e-15);
        assert!(fft_forward(&[]).is_empty());
    }

    #[test]
    fn pipeline_is_the_composition_of_its_stages() {
        let a = crate::generate::complex_vec(1, 64);
        let b = crate::generate::complex_vec(2, 64);
        let p = pipeline(&a, &b, 0.25);
        let mut f = add(&a, &b);
        fft_forward_in_place(&mut f);
        assert_eq!(p.fft, f);
        for (m, z) in p.magnitude.iter().zip(&f) {
            assert_relative_eq!(*m, 0.25 * z.norm(), max_relative = 1e-15);
        }
        // Parseval on the unscaled transform: sum |X|^2 = N sum |x|^2.
        let e_in: f64 = add(&a, &b).iter().map(|z| z.norm_sqr()).sum();
        let e_out: f64 = p.fft.iter().map(|z| z.norm_sqr()).sum();
        assert_relative_eq!(e_out, 64.0 * e_in, max_relative = 1e-12);
    }

    #[allow(clippy::too_many_arguments)]
    fn naive_cgemm(
        op_a: Transpose,
        op_b: Transpose,
        (m, n, k): (usize, usize, usize),
        alpha: Complex32,
        (a, lda): (&[Complex32], usize),
        (b, ldb): (&[Complex32], usize),
        beta: Complex32,
        (cc, ldc): (&[Complex32], usize),
    ) -> Vec<Complex64> {
        let at = |i: usize, l: usize| match op_a {
            Transpose::None => widen(a[i + l * lda]),
            Transpose::Trans => widen(a[l + i * lda]),
            Transpose::ConjTrans => widen(a[l + i * lda]).conj(),
        };
        let bt = |l: usize, j: usize| match op_b {
            Transpose::None => widen(b[l + j * ldb]),
            Transpose::Trans => widen(b[j + l * ldb]),
            Transpose::ConjTrans => widen(b[j + l * ldb]).conj(),
        };
        let mut out: Vec<Complex64> = cc.iter().copied().map(widen).collect();
        for j in 0..n {
            for i in 0..m {
                let s: Complex64 = (0..k).map(|l| at(i, l) * bt(l, j)).sum();
                let old = if beta == c(0.0, 0.0) {
                    Complex64::new(0.0, 0.0)
                } else {
                    widen(beta) * out[i + j * ldc]
                };
                out[i + j * ldc] = widen(alpha) * s + old;
            }
        }
        out
    }

    #[test]
    fn cgemm_matches_the_blas_definition_for_every_op() {
        use crate::generate::{PAD, matrix};
        use Transpose::*;
        let (m, n, k) = (7, 5, 6);
        let alpha = c(0.5, -1.25);
        for op_a in [None, Trans, ConjTrans] {
            for op_b in [None, Trans, ConjTrans] {
                let (ar, ac) = if op_a == None { (m, k) } else { (k, m) };
                let (br, bc) = if op_b == None { (k, n) } else { (n, k) };
                let a = matrix(1, ar, ac, ar + 2);
                let b = matrix(2, br, bc, br + 1);
                let cc = matrix(3, m, n, m + 3);
                for beta in [c(0.0, 0.0), c(-2.0, 0.5)] {
                    let got = cgemm(
                        op_a,
                        op_b,
                        m,
                        n,
                        k,
                        alpha,
                        &a,
                        ar + 2,
                        &b,
                        br + 1,
                        beta,
                        &cc,
                        m + 3,
                    );
                    let want = naive_cgemm(
                        op_a,
                        op_b,
                        (m, n, k),
                        alpha,
                        (&a, ar + 2),
                        (&b, br + 1),
                        beta,
                        (&cc, m + 3),
                    );
                    assert_eq!(got.len(), cc.len());
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!((g - w).norm() < 1e-12, "{op_a:?}{op_b:?} [{i}] {g} vs {w}");
                    }
                    // Padding rows come back as the sentinel, untouched.
                    assert_eq!(got[m].re, f64::from(PAD));
                }
            }
        }
    }

    #[test]
    fn cgemm_with_beta_zero_ignores_nan_in_c() {
        let a = [c(1.0, 0.0)];
        let b = [c(2.0, 1.0)];
        let cc = [c(f32::NAN, f32::NAN)];
        let got = cgemm(
            Transpose::None,
            Transpose::None,
            1,
            1,
            1,
            c(1.0, 0.0),
            &a,
            1,
            &b,
            1,
            c(0.0, 0.0),
            &cc,
            1,
        );
        assert_eq!(got, vec![Complex64::new(2.0, 1.0)]);
    }

    /// LAPACK's info is 1-based: the order of the first leading minor that is not PD.
    #[test]
    fn cholesky_info_is_lapacks_one_based_index() {
        let l = Uplo::Lower;
        assert_eq!(cholesky(l, 1, &[c(-1.0, 0.0)], 1), Err(1));
        assert_eq!(cholesky(l, 1, &[c(0.0, 0.0)], 1), Err(1));
        assert_eq!(cholesky(l, 1, &[c(f32::NAN, 0.0)], 1), Err(1));
        // diag(1, -1): first minor fine, second not.
        let a = [c(1.0, 0.0), c(0.0, 0.0), c(0.0, 0.0), c(-1.0, 0.0)];
        assert_eq!(cholesky(l, 2, &a, 2), Err(2));
        // [[1, 2], [2, 1]]: det = -3.
        let a = [c(1.0, 0.0), c(2.0, 0.0), c(2.0, 0.0), c(1.0, 0.0)];
        assert_eq!(cholesky(Uplo::Upper, 2, &a, 2), Err(2));
        // 3x3 with the failure at the third minor.
        let a = [
            c(4.0, 0.0),
            c(0.0, 0.0),
            c(0.0, 0.0),
            c(0.0, 0.0),
            c(4.0, 0.0),
            c(0.0, 0.0),
            c(0.0, 0.0),
            c(0.0, 0.0),
            c(-4.0, 0.0),
        ];
        assert_eq!(cholesky(l, 3, &a, 3), Err(3));
    }

    #[test]
    fn cholesky_of_a_hand_made_matrix() {
        // A = L L^H with L = [[2, 0], [1+i, 3]]: A = [[4, 2-2i], [2+2i, 11]].
        // The unread triangle holds garbage (99) that must be neither used nor changed.
        let lower = [c(4.0, 0.0), c(2.0, 2.0), c(99.0, 99.0), c(11.0, 0.0)];
        let got = cholesky(Uplo::Lower, 2, &lower, 2).expect("HPD");
        let want = [
            Complex64::new(2.0, 0.0),
            Complex64::new(1.0, 1.0),
            Complex64::new(99.0, 99.0),
            Complex64::new(3.0, 0.0),
        ];
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).norm() < 1e-14, "{g} vs {w}");
        }
        // Upper: U = L^H = [[2, 1-i], [0, 3]], stored column-major.
        let upper = [c(4.0, 0.0), c(99.0, 99.0), c(2.0, -2.0), c(11.0, 0.0)];
        let got = cholesky(Uplo::Upper, 2, &upper, 2).expect("HPD");
        let want = [
            Complex64::new(2.0, 0.0),
            Complex64::new(99.0, 99.0),
            Complex64::new(1.0, -1.0),
            Complex64::new(3.0, 0.0),
        ];
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).norm() < 1e-14, "{g} vs {w}");
        }
    }

    #[test]
    fn cholesky_reconstructs_generated_hpd_and_reports_generated_info() {
        use crate::generate::{hpd_matrix, non_hpd_matrix};
        let (n, lda) = (40, 43);
        let a = hpd_matrix(9, n, lda);
        for uplo in [Uplo::Lower, Uplo::Upper] {
            let f = cholesky(uplo, n, &a, lda).expect("HPD");
            // L[i][l] for i >= l, from whichever triangle holds the factor.
            let l = |i: usize, j: usize| match uplo {
                Uplo::Lower => f[i + j * lda],
                Uplo::Upper => f[j + i * lda].conj(),
            };
            for j in 0..n {
                for i in j..n {
                    let s: Complex64 = (0..=j).map(|p| l(i, p) * l(j, p).conj()).sum();
                    assert!((s - widen(a[i + j * lda])).norm() < 1e-10 * n as f64);
                }
            }
        }
        for seed in 0..10 {
            let (a, info) = non_hpd_matrix(seed, 12, 12);
            assert_eq!(cholesky(Uplo::Lower, 12, &a, 12), Err(info));
            assert_eq!(cholesky(Uplo::Upper, 12, &a, 12), Err(info));
        }
    }
}
