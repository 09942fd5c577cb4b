//! The bounds device results are held to, and the checks that apply them.
//!
//! Every check compares what the device produced (f32, as read back) with the f64 reference and
//! returns either a [`CheckSummary`] (a pass, with its margin) or a [`Mismatch`] naming the first
//! element out of bound, the got/want pair there, how many elements are out, the largest errors,
//! the bound and its formula with its source. The bounds are the ones the vendors' own test
//! clients use (docs/bounds.md#the-fields-bounds, with their sources); where ours deviate the formula
//! says so.
//!
//! A NaN or infinity in device output is always out of bound, whatever the bound. Errors are
//! reported as they are, so a verdict says `NaN` or `inf` rather than a clamped huge number that
//! could pass for a real (if large) error; a NaN anywhere makes the largest error NaN. The JSON
//! record writes them as `null` ([`Mismatch`] reads that back as NaN).

// A Mismatch is the product of a failed check, built once per case and handed up with `?`;
// boxing it would only move the allocation.
#![allow(clippy::result_large_err)]

use std::fmt;

use num_complex::{Complex32, Complex64};
use serde::{Deserialize, Serialize};

use crate::model::{BIT_EXACT, Mismatch};
use crate::reference::{PipelineReference, Uplo};

/// rocFFT's `type_epsilon` for single precision (clients' accuracy_test.h): looser than f32's
/// machine epsilon because it absorbs the twiddle and butterfly round-off of real FFT kernels.
pub const EPS_FFT_SINGLE: f64 = 3.75e-5;

/// f32 machine epsilon, 2^-23 = 1.19e-7: rocSOLVER clients' eps for complex float.
pub const EPS32: f64 = f32::EPSILON as f64;

/// rocBLAS clients' `sum_error_tolerance<rocblas_float_complex>`: allowed error per summed term.
pub const GEMM_SUM_TOLERANCE: f64 = 1e-4;

/// Allowed ULP distance per component when inputs make every partial sum exact.
pub const GEMM_EXACT_ULPS: u32 = 4;

/// A check that passed, and by how much.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckSummary {
    pub len: usize,
    pub max_abs_err: f64,
    /// Each check's doc says what this is relative to.
    pub max_rel_err: f64,
    pub bound: f64,
    /// The bound as a formula with its source (and, for two-criteria checks, both measurements).
    pub formula: String,
    /// The largest measured/bound ratio over all the check's criteria: below 1 passes. A case
    /// that drifts from 0.01 to 0.9 between driver releases is worth a look before it fails.
    pub worst_ratio: f64,
}

impl fmt::Display for CheckSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} elements within bound, worst err/bound {:.2e}: max abs err {:.3e}, max rel err {:.3e}, bound {:.3e} = {}",
            self.len,
            self.worst_ratio,
            self.max_abs_err,
            self.max_rel_err,
            self.bound,
            self.formula
        )
    }
}

/// `measured / bound` with 0/0 = 0 and x/0 = inf: a zero bound passes only zero error. A NaN
/// stays NaN: no ratio is known for it.
fn ratio(measured: f64, bound: f64) -> f64 {
    if measured == 0.0 {
        0.0
    } else if bound > 0.0 || measured.is_nan() {
        measured / bound
    } else {
        f64::INFINITY
    }
}

/// Whether error `e` should replace `worst` as the largest so far. A NaN beats everything
/// (`f64::max` would silently drop it), so a NaN element is what the largest error reports.
fn is_worse(e: f64, worst: f64) -> bool {
    (e.is_nan() && !worst.is_nan()) || e > worst
}

fn fmt_c32(z: Complex32) -> String {
    format!("({:.8e}, {:.8e})", z.re, z.im)
}

fn fmt_c64(z: Complex64) -> String {
    format!("({:.8e}, {:.8e})", z.re, z.im)
}

fn widen(z: Complex32) -> Complex64 {
    Complex64::new(f64::from(z.re), f64::from(z.im))
}

fn is_finite_c32(z: Complex32) -> bool {
    z.re.is_finite() && z.im.is_finite()
}

/// `max(|Δre|, |Δim|)`, the component-wise error rocFFT and rocBLAS compare: NaN when either
/// component of `got` is NaN (f64::max would silently drop it), inf for an infinite one.
fn component_err(got: Complex32, want: Complex64) -> f64 {
    let d = widen(got) - want;
    if d.re.is_nan() || d.im.is_nan() {
        return f64::NAN;
    }
    d.re.abs().max(d.im.abs())
}

/// `||x||_inf` over components, as rocFFT's norms are.
fn linf(x: &[Complex64]) -> f64 {
    x.iter().fold(0.0, |m, z| m.max(z.re.abs()).max(z.im.abs()))
}

fn length_mismatch(what: &str, got: usize, want: usize) -> Mismatch {
    Mismatch {
        what: what.to_string(),
        index: got.min(want),
        got: format!("{got} elements"),
        want: format!("{want} elements"),
        count: got.abs_diff(want),
        len: want,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        bound: 0.0,
        formula: "output length must equal the reference's".into(),
    }
}

/// A reference with NaN or inf makes every bound meaningless (inf passes everything): that is a
/// harness bug, reported as a failure rather than a pass.
fn nonfinite_reference(what: &str, index: usize, want: String, len: usize) -> Mismatch {
    Mismatch {
        what: what.to_string(),
        index,
        got: "(not compared)".into(),
        want,
        count: 1,
        len,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        bound: 0.0,
        formula: "the f64 reference must be finite (inputs out of the generators' range?)".into(),
    }
}

fn first_nonfinite(want: &[Complex64]) -> Option<usize> {
    want.iter()
        .position(|z| !(z.re.is_finite() && z.im.is_finite()))
}

/// The one comparison every check makes: false for a NaN error, so NaN is never within bound.
fn within(err: f64, bound: f64) -> bool {
    err <= bound
}

/// Walks per-element errors against per-element bounds.
#[derive(Default)]
struct Scan {
    first_bad: Option<usize>,
    bad: usize,
    max_err: f64,
    argmax: usize,
    worst_ratio: f64,
}

impl Scan {
    fn visit(&mut self, i: usize, err: f64, bound: f64) {
        if !within(err, bound) {
            self.bad += 1;
            self.first_bad.get_or_insert(i);
        }
        if is_worse(err, self.max_err) {
            self.max_err = err;
            self.argmax = i;
        }
        self.worst_ratio = self.worst_ratio.max(ratio(err, bound));
    }
}

/// ln-factor of rocFFT's Linf bound, `max(ln N, 1)`. The max is ours: rocFFT's `ln N` is 0 at
/// N = 1 (the identity transform), which would demand bit-exact output from an FFT that may
/// still multiply by a rounded twiddle of 1.
fn ln_factor(n: usize) -> f64 {
    (n as f64).ln().max(1.0)
}

/// `sqrt(max(log2 N, 1))`, rocFFT's L2 factor with the same deviation at N = 1.
fn l2_factor(n: usize) -> f64 {
    (n as f64).log2().max(1.0).sqrt()
}

/// rocFFT's Linf bound for a single-precision transform whose exact result is `reference`:
/// `eps_p * ||ref||_inf * max(ln N, 1)`, eps_p = 3.75e-5, norms over components.
pub fn fft_linf_bound(reference: &[Complex64]) -> f64 {
    EPS_FFT_SINGLE * linf(reference) * ln_factor(reference.len())
}

/// Single-precision complex FFT output against the f64 reference (rocFFT clients,
/// shared/accuracy_test.h), two criteria:
///
/// - Linf, per element: `max(|Δre|, |Δim|) <= eps_p * ||ref||_inf * max(ln N, 1)`;
/// - L2, whole vector: `||got - ref||_2 / ||ref||_2 <= sqrt(max(log2 N, 1)) * eps_p`;
///
/// eps_p = 3.75e-5; the `max(., 1)` is our deviation so N = 1 is not held to zero error.
///
/// `max_abs_err` is the largest component error; `max_rel_err` is the measured relative L2
/// error. On a Linf failure the index is the first element out of bound; if only the L2
/// criterion fails it is the element with the largest error, and `count` is the number of
/// elements whose error exceeds an even share `L2 budget / sqrt(N)` of it.
pub fn check_fft(
    what: &str,
    got: &[Complex32],
    want: &[Complex64],
) -> Result<CheckSummary, Mismatch> {
    let n = want.len();
    if got.len() != n {
        return Err(length_mismatch(what, got.len(), n));
    }
    if let Some(i) = first_nonfinite(want) {
        return Err(nonfinite_reference(what, i, fmt_c64(want[i]), n));
    }
    let ref_inf = linf(want);
    let ref_l2 = want.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
    let linf_bound = EPS_FFT_SINGLE * ref_inf * ln_factor(n);
    let l2_bound = EPS_FFT_SINGLE * l2_factor(n);

    let mut scan = Scan::default();
    let mut d2 = 0.0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let e = component_err(g, w);
        scan.visit(i, e, linf_bound);
        // A non-finite error carries into the L2 sum, so that criterion cannot pass either.
        d2 += if e.is_finite() {
            (widen(g) - w).norm_sqr()
        } else {
            e
        };
    }
    let l2_rel = ratio(d2.sqrt(), ref_l2);
    let l2_ok = l2_rel <= l2_bound;

    let linf_text = format!(
        "max(|dre|,|dim|) <= eps_p*||ref||_inf*max(ln N,1) with eps_p={EPS_FFT_SINGLE:e}, N={n}, ||ref||_inf={ref_inf:.4e}"
    );
    let l2_text = format!(
        "||got-ref||_2/||ref||_2 = {:.3e} {} sqrt(max(log2 N,1))*eps_p = {l2_bound:.3e}",
        l2_rel,
        if l2_ok { "<=" } else { ">" }
    );
    const SOURCE: &str = "(rocFFT clients shared/accuracy_test.h; max(.,1) ours, for N=1)";

    let mismatch = |index: usize, count: usize, bound: f64, formula: String| Mismatch {
        what: what.to_string(),
        index,
        got: fmt_c32(got[index]),
        want: fmt_c64(want[index]),
        count,
        len: n,
        max_abs_err: scan.max_err,
        max_rel_err: l2_rel,
        bound,
        formula,
    };
    if let Some(first) = scan.first_bad {
        return Err(mismatch(
            first,
            scan.bad,
            linf_bound,
            format!("{linf_text}; L2: {l2_text} {SOURCE}"),
        ));
    }
    if !l2_ok {
        let share = l2_bound * ref_l2 / (n as f64).sqrt();
        let over = got
            .iter()
            .zip(want)
            .filter(|&(&g, &w)| !within(component_err(g, w), share))
            .count();
        return Err(mismatch(
            scan.argmax,
            over,
            l2_bound,
            format!("L2: {l2_text} {SOURCE}; Linf holds"),
        ));
    }
    Ok(CheckSummary {
        len: n,
        max_abs_err: scan.max_err,
        max_rel_err: l2_rel,
        bound: linf_bound,
        formula: format!("{linf_text}; L2: {l2_text} {SOURCE}"),
        worst_ratio: scan.worst_ratio.max(ratio(l2_rel, l2_bound)),
    })
}

/// Pipeline magnitudes (`|scale * FFT(a + b)|`, computed on the device in f32) against the f64
/// reference, per element:
///
/// `|got_i - ref_i| <= |scale| * sqrt(2) * B_fft + 4 * eps32 * ref_i`
///
/// where `B_fft = eps_p * ||FFT ref||_inf * max(ln N, 1)` is [`check_fft`]'s Linf bound on the
/// unscaled transform (ours, derived from rocFFT's): `||x| - |y|| <= |x - y| <= sqrt(2) *
/// max(|Δre|, |Δim|)` carries the FFT's component bound through the magnitude, and
/// `4 eps32 |ref|` covers the f32 rounding of the add, scale and magnitude stages themselves.
///
/// `bound` is the bound at the reported element (at the worst-ratio element on a pass);
/// `max_rel_err` is relative to the largest reference magnitude.
pub fn check_pipeline(
    what: &str,
    got: &[f32],
    want: &PipelineReference,
    scale: f32,
) -> Result<CheckSummary, Mismatch> {
    let n = want.magnitude.len();
    if got.len() != n {
        return Err(length_mismatch(what, got.len(), n));
    }
    if want.fft.len() != n {
        return Err(length_mismatch(
            &format!("{what} (reference FFT vs reference magnitude)"),
            want.fft.len(),
            n,
        ));
    }
    if let Some(i) = first_nonfinite(&want.fft) {
        return Err(nonfinite_reference(what, i, fmt_c64(want.fft[i]), n));
    }
    let b_fft = fft_linf_bound(&want.fft);
    let abs_term = f64::from(scale).abs() * std::f64::consts::SQRT_2 * b_fft;
    let bound_at = |i: usize| abs_term + 4.0 * EPS32 * want.magnitude[i].abs();

    let mut scan = Scan::default();
    let mut worst = (0.0, 0);
    for (i, (&g, &w)) in got.iter().zip(&want.magnitude).enumerate() {
        let e = (f64::from(g) - w).abs();
        let b = bound_at(i);
        scan.visit(i, e, b);
        let r = ratio(e, b);
        if r > worst.0 {
            worst = (r, i);
        }
    }
    let ref_max = want.magnitude.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let formula = format!(
        "|got-ref| <= |scale|*sqrt(2)*B_fft + 4*eps32*|ref| with scale={scale:e}, B_fft=eps_p*||FFT ref||_inf*max(ln N,1)={b_fft:.4e}, eps_p={EPS_FFT_SINGLE:e}, N={n} (ours, from rocFFT clients shared/accuracy_test.h)"
    );
    if let Some(first) = scan.first_bad {
        return Err(Mismatch {
            what: what.to_string(),
            index: first,
            got: format!("{:.8e}", got[first]),
            want: format!("{:.8e}", want.magnitude[first]),
            count: scan.bad,
            len: n,
            max_abs_err: scan.max_err,
            max_rel_err: ratio(scan.max_err, ref_max),
            bound: bound_at(first),
            formula,
        });
    }
    Ok(CheckSummary {
        len: n,
        max_abs_err: scan.max_err,
        max_rel_err: ratio(scan.max_err, ref_max),
        bound: if n == 0 { abs_term } else { bound_at(worst.1) },
        formula,
        worst_ratio: scan.worst_ratio,
    })
}

/// Distance in units in the last place between two f32 (0 for +0 vs -0). Maps the sign-magnitude
/// bit pattern onto a line where adjacent floats are adjacent integers.
fn ulp_distance(a: f32, b: f32) -> u64 {
    fn key(x: f32) -> i64 {
        let bits = i64::from(x.to_bits() & 0x7FFF_FFFF);
        if x.is_sign_negative() { -bits } else { bits }
    }
    key(a).abs_diff(key(b))
}

/// cgemm output `C` (`m x n`, leading dimension `ldc`, `k` the inner dimension) against the f64
/// reference from [`crate::reference::cgemm`] (rocBLAS clients' conventions):
///
/// - `exact_inputs` (A, B, C from `generate::integer_matrix`, integer alpha and beta, every
///   partial sum below 2^24): each component within 4 ULP of the reference rounded to f32.
///   rocBLAS clients compare such results exactly; the 4 ULP leave room for a kernel that
///   splits alpha/beta scaling differently. `bound` is 4 (ULP), errors are still reported in
///   absolute terms.
/// - otherwise: each component `|Δ| <= max(k, 1) * 1e-4 * sqrt(0.5)` (rocBLAS
///   `sum_error_tolerance<rocblas_float_complex>` = 1e-4 per summed term, split over the two
///   components). It is absolute: it assumes entries of order 1 (the generators' [-0.5, 0.5])
///   and |alpha|, |beta| of order 1. `max(k, 1)` is ours so that k = 0 (C = beta C) still
///   allows rounding.
///
/// Rows `m..ldc` (and anything else outside the `m x n` block) are padding a cgemm must not
/// write: they must be bit-identical to the reference, which carries the input's padding.
/// Indices are positions in the `ldc`-strided slice. `max_rel_err` is relative to the largest
/// reference component in the block.
#[allow(clippy::too_many_arguments)] // the cgemm shape, as BLAS passes it
pub fn check_cgemm(
    what: &str,
    got: &[Complex32],
    want: &[Complex64],
    m: usize,
    n: usize,
    ldc: usize,
    k: usize,
    exact_inputs: bool,
) -> Result<CheckSummary, Mismatch> {
    if got.len() != want.len() {
        return Err(length_mismatch(what, got.len(), want.len()));
    }
    let ldc = ldc.max(1);
    let in_block = |p: usize| p % ldc < m && p / ldc < n;
    let block_ref_max = want
        .iter()
        .enumerate()
        .filter(|&(p, _)| in_block(p))
        .fold(0.0f64, |a, (_, z)| a.max(z.re.abs()).max(z.im.abs()));
    if !block_ref_max.is_finite() {
        let i = want
            .iter()
            .enumerate()
            .position(|(p, z)| in_block(p) && !(z.re.is_finite() && z.im.is_finite()))
            .unwrap_or(0);
        return Err(nonfinite_reference(what, i, fmt_c64(want[i]), want.len()));
    }
    let abs_bound = k.max(1) as f64 * GEMM_SUM_TOLERANCE * std::f64::consts::FRAC_1_SQRT_2;
    let bound = if exact_inputs {
        f64::from(GEMM_EXACT_ULPS)
    } else {
        abs_bound
    };

    let mut scan = Scan::default();
    let mut max_abs = 0.0f64;
    let mut first_padding_write = None;
    for (p, (&g, &w)) in got.iter().zip(want).enumerate() {
        let abs = component_err(g, w);
        if is_worse(abs, max_abs) {
            max_abs = abs;
        }
        if !in_block(p) {
            // Padding came from an f32 input, so the widened reference is exact: compare bits.
            let same = g.re.to_bits() == (w.re as f32).to_bits()
                && g.im.to_bits() == (w.im as f32).to_bits();
            if !same {
                scan.visit(p, f64::INFINITY, 0.0);
                first_padding_write.get_or_insert(p);
            }
            continue;
        }
        let err = if exact_inputs {
            if is_finite_c32(g) {
                let r = ulp_distance(g.re, w.re as f32).max(ulp_distance(g.im, w.im as f32));
                r as f64
            } else {
                // No ULP distance to an inf or NaN; its absolute error (inf or NaN) fails alike.
                abs
            }
        } else {
            abs
        };
        scan.visit(p, err, bound);
    }
    let formula = if exact_inputs {
        "ulp(got, f32(ref)) <= 4 per component: integer inputs 1..10 make every partial sum exact (rocBLAS clients unit_check convention)".to_string()
    } else {
        format!(
            "|dre|,|dim| <= max(K,1)*1e-4*sqrt(0.5) with K={k} (rocBLAS clients sum_error_tolerance<rocblas_float_complex>; max(K,1) ours)"
        )
    };
    let padding_formula = "rows m..ldc of C are padding: cgemm must leave them bit-identical";
    let max_rel = ratio(max_abs, block_ref_max);
    if let Some(first) = scan.first_bad {
        let (bound, formula) = if first_padding_write == Some(first) {
            (0.0, format!("{padding_formula} (m={m}, n={n}, ldc={ldc})"))
        } else if first_padding_write.is_some() {
            (bound, format!("{formula}; padding rows were written too"))
        } else {
            (bound, formula)
        };
        return Err(Mismatch {
            what: what.to_string(),
            index: first,
            got: fmt_c32(got[first]),
            want: fmt_c64(want[first]),
            count: scan.bad,
            len: want.len(),
            max_abs_err: max_abs,
            max_rel_err: max_rel,
            bound,
            formula,
        });
    }
    Ok(CheckSummary {
        len: want.len(),
        max_abs_err: max_abs,
        max_rel_err: max_rel,
        bound,
        formula,
        worst_ratio: scan.worst_ratio,
    })
}

/// cpotrf's factor against the f64 reference from [`crate::reference::cholesky`] (rocSOLVER
/// clients), over the factor triangle (diagonal included) only:
///
/// `||A_ref - A_got||_F / ||A_ref||_F <= n * eps`, eps = 1.19e-7 (f32 epsilon).
///
/// A normwise criterion has no per-element verdict, so the reported index is the first element
/// whose error alone exceeds the whole budget `n eps ||A_ref||_F`, or failing that the element
/// with the largest error; `count` is the number of elements over an even share of the budget
/// (budget / sqrt(elements in the triangle)). `max_rel_err` is the measured Frobenius ratio;
/// `max_abs_err` the largest element's |Δ| (complex modulus). The other triangle is LAPACK's to
/// leave alone or use as workspace, and is not checked. Indices are positions in the
/// `lda`-strided slice.
pub fn check_cholesky(
    what: &str,
    got: &[Complex32],
    want: &[Complex64],
    uplo: Uplo,
    n: usize,
    lda: usize,
) -> Result<CheckSummary, Mismatch> {
    if got.len() != want.len() {
        return Err(length_mismatch(what, got.len(), want.len()));
    }
    let lda = lda.max(1);
    let triangle = |p: usize| {
        let (i, j) = (p % lda, p / lda);
        i < n
            && j < n
            && match uplo {
                Uplo::Lower => i >= j,
                Uplo::Upper => i <= j,
            }
    };
    let mut d2 = 0.0;
    let mut r2 = 0.0;
    let mut elements = 0usize;
    let mut errs = Vec::with_capacity(n * (n + 1) / 2);
    for (p, (&g, &w)) in got.iter().zip(want).enumerate() {
        if !triangle(p) {
            continue;
        }
        if !(w.re.is_finite() && w.im.is_finite()) {
            return Err(nonfinite_reference(what, p, fmt_c64(w), want.len()));
        }
        let d = widen(g) - w;
        // hypot(inf, NaN) is inf: test for NaN first so a NaN reports as NaN.
        let e = if d.re.is_nan() || d.im.is_nan() {
            f64::NAN
        } else {
            d.norm()
        };
        d2 += e * e;
        r2 += w.norm_sqr();
        elements += 1;
        errs.push((p, e));
    }
    let rel = ratio(d2.sqrt(), r2.sqrt());
    let bound = n.max(1) as f64 * EPS32;
    let max = errs.iter().fold(
        (0.0f64, 0usize),
        |m, &(p, e)| {
            if is_worse(e, m.0) { (e, p) } else { m }
        },
    );
    let formula = format!(
        "||ref-got||_F/||ref||_F = {:.3e} {} n*eps = {bound:.3e} over the {} triangle, n={n}, eps={EPS32:.3e} (rocSOLVER clients)",
        rel,
        if rel <= bound { "<=" } else { ">" },
        match uplo {
            Uplo::Lower => "lower",
            Uplo::Upper => "upper",
        }
    );
    if !within(rel, bound) {
        let budget = bound * r2.sqrt();
        let share = budget / (elements.max(1) as f64).sqrt();
        let index = errs
            .iter()
            .find(|&&(_, e)| !within(e, budget))
            .map_or(max.1, |&(p, _)| p);
        return Err(Mismatch {
            what: what.to_string(),
            index,
            got: fmt_c32(got[index]),
            want: fmt_c64(want[index]),
            count: errs.iter().filter(|&&(_, e)| !within(e, share)).count(),
            len: elements,
            max_abs_err: max.0,
            max_rel_err: rel,
            bound,
            formula,
        });
    }
    Ok(CheckSummary {
        len: elements,
        max_abs_err: max.0,
        max_rel_err: rel,
        bound,
        formula,
        worst_ratio: ratio(rel, bound),
    })
}

/// cpotrf's `info` must be LAPACK's: 0 for an HPD matrix, else the 1-based order of the first
/// leading minor that is not positive definite (rocSOLVER clients compare it exactly). A
/// negative value is LAPACK's "argument -info was invalid".
pub fn check_info(what: &str, got_info: i64, want_info: usize) -> Result<CheckSummary, Mismatch> {
    let formula = "info == LAPACK's: 0 if HPD, else 1-based order of the first non-PD leading minor (rocSOLVER clients)";
    if i64::try_from(want_info) == Ok(got_info) {
        return Ok(CheckSummary {
            len: 1,
            max_abs_err: 0.0,
            max_rel_err: 0.0,
            bound: 0.0,
            formula: formula.into(),
            worst_ratio: 0.0,
        });
    }
    let got = if got_info < 0 {
        format!(
            "info = {got_info} (argument {} reported invalid)",
            -got_info
        )
    } else {
        format!("info = {got_info}")
    };
    Err(Mismatch {
        what: what.to_string(),
        index: 0,
        got,
        want: format!("info = {want_info}"),
        count: 1,
        len: 1,
        max_abs_err: (got_info as f64 - want_info as f64).abs(),
        max_rel_err: 0.0,
        bound: 0.0,
        formula: formula.into(),
    })
}

/// Bit-exact comparison for data that must cross unchanged; the formula is
/// [`BIT_EXACT`], which `Mismatch`'s Display knows. `max_abs_err` is the largest
/// number of differing bits in one element (1 = a bit flip, ~half the width = wholly other
/// data, e.g. a stale buffer); `max_rel_err` is that as a fraction of the element's bits.
fn check_bits(
    what: &str,
    len: (usize, usize),
    width_bits: u32,
    differing_bits: impl Fn(usize) -> u32,
    show: impl Fn(usize) -> (String, String),
    formula: &str,
) -> Result<CheckSummary, Mismatch> {
    let (got_len, want_len) = len;
    if got_len != want_len {
        return Err(length_mismatch(what, got_len, want_len));
    }
    let mut first = None;
    let mut count = 0;
    let mut max_bits = 0;
    for i in 0..want_len {
        let d = differing_bits(i);
        if d != 0 {
            count += 1;
            first.get_or_insert(i);
            max_bits = max_bits.max(d);
        }
    }
    let max_abs_err = f64::from(max_bits);
    let max_rel_err = max_abs_err / f64::from(width_bits);
    match first {
        None => Ok(CheckSummary {
            len: want_len,
            max_abs_err,
            max_rel_err,
            bound: 0.0,
            formula: formula.into(),
            worst_ratio: 0.0,
        }),
        Some(index) => {
            let (got, want) = show(index);
            Err(Mismatch {
                what: what.to_string(),
                index,
                got,
                want,
                count,
                len: want_len,
                max_abs_err,
                max_rel_err,
                bound: 0.0,
                formula: formula.into(),
            })
        }
    }
}

/// The handoff pattern (`generate::pattern`), bit for bit. See [`check_bits`] for what the
/// error fields mean here.
pub fn check_exact_u32(what: &str, got: &[u32], want: &[u32]) -> Result<CheckSummary, Mismatch> {
    check_bits(
        what,
        (got.len(), want.len()),
        32,
        |i| (got[i] ^ want[i]).count_ones(),
        |i| (format!("{:#010x}", got[i]), format!("{:#010x}", want[i])),
        BIT_EXACT,
    )
}

/// Complex f32 data that must cross unchanged (an input after a copy or a mapping), bit for
/// bit, NaN payloads and signed zeros included.
pub fn check_exact_c32(
    what: &str,
    got: &[Complex32],
    want: &[Complex32],
) -> Result<CheckSummary, Mismatch> {
    check_bits(
        what,
        (got.len(), want.len()),
        64,
        |i| {
            (got[i].re.to_bits() ^ want[i].re.to_bits()).count_ones()
                + (got[i].im.to_bits() ^ want[i].im.to_bits()).count_ones()
        },
        |i| (fmt_c32(got[i]), fmt_c32(want[i])),
        BIT_EXACT,
    )
}

#[cfg(test)]
mod tests;
