use super::*;
use crate::generate::{
    PAD_C, complex_vec, complex_vec_strategy, hpd_strategy, integer_matrix, matrix,
    non_hpd_strategy, pattern, pow2_size_strategy, size_strategy,
};
use crate::reference::{self, Transpose, fft_forward};
use proptest::prelude::*;
use proptest::sample::Index;

// ---- f32 implementations: what a correct device computes, round-off and all ----

fn twiddle(jk: usize, n: usize) -> Complex32 {
    // Angles in f64, rounded once, as real FFT libraries precompute them.
    let t = -2.0 * std::f64::consts::PI * (jk % n) as f64 / n as f64;
    Complex32::new(t.cos() as f32, t.sin() as f32)
}

/// Iterative radix-2 decimation in time, all arithmetic in f32.
fn fft32_radix2(x: &[Complex32]) -> Vec<Complex32> {
    let n = x.len();
    assert!(n.is_power_of_two());
    let bits = n.trailing_zeros();
    let mut a: Vec<Complex32> = (0..n)
        .map(|i| {
            if bits == 0 {
                x[0]
            } else {
                x[i.reverse_bits() >> (usize::BITS - bits)]
            }
        })
        .collect();
    let mut len = 2;
    while len <= n {
        let tw: Vec<Complex32> = (0..len / 2).map(|j| twiddle(j, len)).collect();
        for start in (0..n).step_by(len) {
            for j in 0..len / 2 {
                let u = a[start + j];
                let v = a[start + j + len / 2] * tw[j];
                a[start + j] = u + v;
                a[start + j + len / 2] = u - v;
            }
        }
        len *= 2;
    }
    a
}

/// O(N^2) DFT in f32 for the lengths radix-2 cannot do.
fn dft32(x: &[Complex32]) -> Vec<Complex32> {
    let n = x.len();
    (0..n)
        .map(|k| {
            x.iter()
                .enumerate()
                .fold(Complex32::new(0.0, 0.0), |s, (j, &v)| {
                    s + v * twiddle(j * k, n)
                })
        })
        .collect()
}

fn fft32(x: &[Complex32]) -> Vec<Complex32> {
    if x.len().is_power_of_two() {
        fft32_radix2(x)
    } else {
        dft32(x)
    }
}

fn pipeline32(a: &[Complex32], b: &[Complex32], scale: f32) -> Vec<f32> {
    let sum: Vec<Complex32> = a.iter().zip(b).map(|(x, y)| x + y).collect();
    fft32(&sum).iter().map(|z| (z * scale).norm()).collect()
}

#[allow(clippy::too_many_arguments)]
fn cgemm32(
    op_a: Transpose,
    op_b: Transpose,
    (m, n, k): (usize, usize, usize),
    alpha: Complex32,
    (a, lda): (&[Complex32], usize),
    (b, ldb): (&[Complex32], usize),
    beta: Complex32,
    (c, ldc): (&[Complex32], usize),
) -> Vec<Complex32> {
    let at = |i: usize, l: usize| match op_a {
        Transpose::None => a[i + l * lda],
        Transpose::Trans => a[l + i * lda],
        Transpose::ConjTrans => a[l + i * lda].conj(),
    };
    let bt = |l: usize, j: usize| match op_b {
        Transpose::None => b[l + j * ldb],
        Transpose::Trans => b[j + l * ldb],
        Transpose::ConjTrans => b[j + l * ldb].conj(),
    };
    let mut out = c.to_vec();
    for j in 0..n {
        for i in 0..m {
            let s = (0..k).fold(Complex32::new(0.0, 0.0), |s, l| s + at(i, l) * bt(l, j));
            let old = if beta == Complex32::new(0.0, 0.0) {
                Complex32::new(0.0, 0.0)
            } else {
                beta * out[i + j * ldc]
            };
            out[i + j * ldc] = alpha * s + old;
        }
    }
    out
}

/// Left-looking Cholesky in f32, LAPACK's conventions (diagonal's real part, 1-based info).
fn cholesky32(uplo: Uplo, n: usize, a: &[Complex32], lda: usize) -> Result<Vec<Complex32>, usize> {
    let read = |i: usize, j: usize| match uplo {
        Uplo::Lower => a[i + j * lda],
        Uplo::Upper => a[j + i * lda].conj(),
    };
    let mut l = vec![Complex32::new(0.0, 0.0); n * n];
    for j in 0..n {
        let d = (0..j).fold(read(j, j).re, |d, p| d - l[j + p * n].norm_sqr());
        // LAPACK's test, NaN included: `d <= 0 || isnan(d)`.
        if d <= 0.0 || d.is_nan() {
            return Err(j + 1);
        }
        let d = d.sqrt();
        l[j + j * n] = Complex32::new(d, 0.0);
        for i in j + 1..n {
            let s = (0..j).fold(read(i, j), |s, p| s - l[i + p * n] * l[j + p * n].conj());
            l[i + j * n] = s / d;
        }
    }
    let mut out = a.to_vec();
    for j in 0..n {
        for i in j..n {
            match uplo {
                Uplo::Lower => out[i + j * lda] = l[i + j * n],
                Uplo::Upper => out[j + i * lda] = l[i + j * n].conj(),
            }
        }
    }
    Ok(out)
}

// ---- corruptions ----

#[derive(Debug, Clone, Copy)]
enum Corruption {
    FlipSign,
    AddDelta,
    /// Bit 22: the top mantissa bit, a 25-50% change.
    FlipMantissaTop,
    /// Bit 30: the top exponent bit: huge, inf/NaN, or tiny.
    FlipExponentTop,
    Nan,
}

fn corruption() -> impl Strategy<Value = (Corruption, bool)> {
    let kind = prop_oneof![
        Just(Corruption::FlipSign),
        Just(Corruption::AddDelta),
        Just(Corruption::FlipMantissaTop),
        Just(Corruption::FlipExponentTop),
        Just(Corruption::Nan),
    ];
    (kind, any::<bool>())
}

fn corrupt_f32(kind: Corruption, x: f32, delta: f32) -> f32 {
    match kind {
        Corruption::FlipSign => -x,
        Corruption::AddDelta => x + delta,
        Corruption::FlipMantissaTop => f32::from_bits(x.to_bits() ^ (1 << 22)),
        Corruption::FlipExponentTop => f32::from_bits(x.to_bits() ^ (1 << 30)),
        Corruption::Nan => f32::NAN,
    }
}

fn corrupt_c32((kind, im): (Corruption, bool), z: Complex32, delta: f32) -> Complex32 {
    if im {
        Complex32::new(z.re, corrupt_f32(kind, z.im, delta))
    } else {
        Complex32::new(corrupt_f32(kind, z.re, delta), z.im)
    }
}

/// How far a corruption moves a value (inf if it makes it non-finite).
fn moved(before: Complex32, after: Complex32) -> f64 {
    if is_finite_c32(after) {
        component_err(after, widen(before))
    } else {
        f64::INFINITY
    }
}

/// First index at or after `start` (cyclically) where a corruption is certain to be out of
/// bound; a sign flip of 0.0 or a mantissa flip of a tiny value would not be a corruption
/// any check could, or should, see.
fn pick(len: usize, start: usize, eligible: impl Fn(usize) -> bool) -> Option<usize> {
    (0..len).map(|o| (start + o) % len).find(|&i| eligible(i))
}

fn cfg(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---- FFT ----

fn small_fft_input() -> impl Strategy<Value = Vec<Complex32>> {
    size_strategy()
        .prop_filter("debug-sized", |&n| n <= 2048)
        .prop_flat_map(complex_vec_strategy)
}

proptest! {
    #![proptest_config(cfg(48))]

    /// A correct f32 FFT (radix 2, or a direct DFT for other lengths, N = 1 included)
    /// passes both rocFFT criteria.
    #[test]
    fn fft_accepts_f32_roundoff(x in small_fft_input()) {
        let want = fft_forward(&x);
        let s = check_fft("fft", &fft32(&x), &want).map_err(|m| TestCaseError::fail(m.to_string()))?;
        prop_assert!(s.worst_ratio < 1.0);
    }

    /// One corrupted element, found at its index, alone.
    #[test]
    fn fft_rejects_one_corrupted_element(
        x in pow2_size_strategy(11).prop_flat_map(complex_vec_strategy),
        start in any::<Index>(),
        how in corruption(),
    ) {
        let want = fft_forward(&x);
        let mut got = fft32(&x);
        let bound = fft_linf_bound(&want);
        let delta = (10.0 * bound) as f32;
        let Some(i) = pick(got.len(), start.index(got.len()), |i| {
            moved(got[i], corrupt_c32(how, got[i], delta)) > 3.0 * bound
        }) else {
            return Err(TestCaseError::reject("no element this corruption would visibly change"));
        };
        got[i] = corrupt_c32(how, got[i], delta);
        let m = check_fft("fft", &got, &want).err().ok_or_else(|| TestCaseError::fail("accepted"))?;
        prop_assert_eq!(m.index, i);
        prop_assert_eq!(m.count, 1);
        prop_assert!(m.formula.contains("rocFFT"));
    }
}

#[test]
fn fft_of_length_one_is_held_to_a_nonzero_bound() {
    let x = [Complex32::new(0.3, -0.2)];
    let want = fft_forward(&x);
    assert!(fft_linf_bound(&want) > 0.0);
    assert!(check_fft("n=1", &x, &want).is_ok());
    let off = [Complex32::new(0.3 * (1.0 + 2.0 * 3.75e-5), -0.2)];
    assert!(check_fft("n=1", &off, &want).is_err());
}

/// Every element inside the Linf bound, yet too much error overall: the L2 criterion
/// fails alone, and names the element with the largest error.
#[test]
fn fft_l2_criterion_fails_alone_at_the_largest_error() {
    let n = 256;
    let x = vec![Complex32::new(0.25, 0.0); n]; // FFT: one spike of 64 at 0, zeros elsewhere
    let want = fft_forward(&x);
    let lb = fft_linf_bound(&want);
    let mut got: Vec<Complex32> = want
        .iter()
        .map(|z| Complex32::new((z.re + 0.9 * lb) as f32, (z.im - 0.9 * lb) as f32))
        .collect();
    got[77].re = (want[77].re + 0.97 * lb) as f32;
    let m = check_fft("l2", &got, &want).expect_err("L2 must fail");
    assert!(m.formula.starts_with("L2:"), "{}", m.formula);
    assert_eq!(m.index, 77);
    assert!(m.count > 1);
    assert!(m.max_abs_err <= lb);
    assert!(m.max_rel_err > m.bound);
}

#[test]
fn nan_and_inf_are_out_of_any_bound_and_serialize() {
    let x = complex_vec(5, 64);
    let want = fft_forward(&x);
    let mut got = fft32(&x);
    got[9].im = f32::INFINITY;
    got[40].re = f32::NAN;
    let m = check_fft("nan", &got, &want).expect_err("non-finite output");
    assert_eq!((m.index, m.count), (9, 2));
    assert!(m.max_abs_err.is_nan() && m.max_rel_err.is_nan(), "{m}");
    // The run's JSON must read back (serde_json writes NaN as null) and say the same.
    let json = serde_json::to_string(&m).expect("serialize");
    let back: Mismatch = serde_json::from_str(&json).expect("round trip");
    assert_eq!(back.to_string(), m.to_string());
    assert_eq!((back.index, back.count), (m.index, m.count));
    // serde_json's default float parsing may land an ulp off.
    assert!((back.bound - m.bound).abs() <= 1e-15 * m.bound, "{back}");
}

#[test]
fn length_mismatch_is_a_mismatch() {
    let want = fft_forward(&complex_vec(1, 8));
    let m = check_fft("len", &[Complex32::new(0.0, 0.0); 7], &want).expect_err("short");
    assert_eq!((m.index, m.count, m.len), (7, 1, 8));
}

// ---- pipeline ----

fn pipeline_inputs() -> impl Strategy<Value = (Vec<Complex32>, Vec<Complex32>)> {
    pow2_size_strategy(11).prop_flat_map(|n| (complex_vec_strategy(n), complex_vec_strategy(n)))
}

proptest! {
    #![proptest_config(cfg(32))]

    #[test]
    fn pipeline_accepts_f32_roundoff((a, b) in pipeline_inputs(), unit_scale in any::<bool>()) {
        // The runner scales by 1/N; other scales must work too.
        let scale = if unit_scale { 1.0 } else { 1.0 / a.len() as f32 };
        let want = reference::pipeline(&a, &b, scale);
        let got = pipeline32(&a, &b, scale);
        check_pipeline("pipeline", &got, &want, scale).map_err(|m| TestCaseError::fail(m.to_string()))?;
    }

    #[test]
    fn pipeline_rejects_one_corrupted_magnitude(
        (a, b) in pipeline_inputs(),
        start in any::<Index>(),
        (kind, _) in corruption(),
    ) {
        let scale = 1.0 / a.len() as f32;
        let want = reference::pipeline(&a, &b, scale);
        let mut got = pipeline32(&a, &b, scale);
        let worst_bound = want
            .magnitude
            .iter()
            .map(|r| f64::from(scale) * std::f64::consts::SQRT_2 * fft_linf_bound(&want.fft) + 4.0 * EPS32 * r)
            .fold(0.0, f64::max);
        let delta = (10.0 * worst_bound) as f32;
        let Some(i) = pick(got.len(), start.index(got.len()), |i| {
            let c = corrupt_f32(kind, got[i], delta);
            !c.is_finite() || f64::from((c - got[i]).abs()) > 3.0 * worst_bound
        }) else {
            return Err(TestCaseError::reject("no element this corruption would visibly change"));
        };
        got[i] = corrupt_f32(kind, got[i], delta);
        let m = check_pipeline("pipeline", &got, &want, scale).err().ok_or_else(|| TestCaseError::fail("accepted"))?;
        prop_assert_eq!(m.index, i);
        prop_assert_eq!(m.count, 1);
    }
}

// ---- cgemm ----

#[derive(Debug, Clone)]
struct GemmCase {
    op_a: Transpose,
    op_b: Transpose,
    m: usize,
    n: usize,
    k: usize,
    alpha: Complex32,
    beta: Complex32,
    a: Vec<Complex32>,
    lda: usize,
    b: Vec<Complex32>,
    ldb: usize,
    c: Vec<Complex32>,
    ldc: usize,
}

impl GemmCase {
    fn reference(&self) -> Vec<Complex64> {
        reference::cgemm(
            self.op_a, self.op_b, self.m, self.n, self.k, self.alpha, &self.a, self.lda, &self.b,
            self.ldb, self.beta, &self.c, self.ldc,
        )
    }
    fn f32_result(&self) -> Vec<Complex32> {
        cgemm32(
            self.op_a,
            self.op_b,
            (self.m, self.n, self.k),
            self.alpha,
            (&self.a, self.lda),
            (&self.b, self.ldb),
            self.beta,
            (&self.c, self.ldc),
        )
    }
}

fn op() -> impl Strategy<Value = Transpose> {
    prop_oneof![
        Just(Transpose::None),
        Just(Transpose::Trans),
        Just(Transpose::ConjTrans)
    ]
}

/// Shapes shrink together; the matrices come from the runner's seeded generators, so a
/// shrunk shape never disagrees with its data.
fn gemm_case(exact: bool) -> impl Strategy<Value = GemmCase> {
    let scalar = |int: bool| {
        if int {
            (-2i8..=2, -2i8..=2)
                .prop_map(|(r, i)| Complex32::new(r.into(), i.into()))
                .boxed()
        } else {
            (-1.0f32..1.0, -1.0f32..1.0)
                .prop_map(|(r, i)| Complex32::new(r, i))
                .boxed()
        }
    };
    (
        (1usize..12, 1usize..12, 0usize..24, 0usize..3),
        (op(), op()),
        (scalar(exact), scalar(exact), any::<bool>()),
        any::<u64>(),
    )
        .prop_map(
            move |((m, n, k, pad), (op_a, op_b), (alpha, beta, beta_zero), seed)| {
                let draw = if exact { integer_matrix } else { matrix };
                let stored = |op, r, c| {
                    if op == Transpose::None {
                        (r, c)
                    } else {
                        (c, r)
                    }
                };
                let (ar, ac) = stored(op_a, m, k);
                let (br, bc) = stored(op_b, k, n);
                let (lda, ldb, ldc) = (ar.max(1) + pad, br.max(1) + pad, m + pad);
                GemmCase {
                    op_a,
                    op_b,
                    m,
                    n,
                    k,
                    alpha,
                    beta: if beta_zero {
                        Complex32::new(0.0, 0.0)
                    } else {
                        beta
                    },
                    a: draw(seed, ar, ac, lda),
                    lda,
                    b: draw(seed ^ 1, br, bc, ldb),
                    ldb,
                    c: draw(seed ^ 2, m, n, ldc),
                    ldc,
                }
            },
        )
}

proptest! {
    #![proptest_config(cfg(48))]

    #[test]
    fn cgemm_accepts_f32_roundoff(g in gemm_case(false)) {
        check_cgemm("cgemm", &g.f32_result(), &g.reference(), g.m, g.n, g.ldc, g.k, false)
            .map_err(|m| TestCaseError::fail(m.to_string()))?;
    }

    /// Integer inputs: the f32 result is exact, so the 4-ULP check passes with 0 ULP.
    #[test]
    fn cgemm_exact_inputs_are_exact(g in gemm_case(true)) {
        let s = check_cgemm("cgemm", &g.f32_result(), &g.reference(), g.m, g.n, g.ldc, g.k, true)
            .map_err(|m| TestCaseError::fail(m.to_string()))?;
        prop_assert_eq!(s.max_abs_err, 0.0);
    }

    #[test]
    fn cgemm_rejects_one_corrupted_element(
        g in prop_oneof![gemm_case(false), gemm_case(true)],
        exact in any::<bool>(),
        start in any::<Index>(),
        how in corruption(),
    ) {
        // Integer data may also be checked with the absolute bound; not the reverse.
        let exact = exact && g.a.iter().all(|z| z.re.fract() == 0.0) && g.alpha.re.fract() == 0.0
            && g.alpha.im.fract() == 0.0 && g.beta.re.fract() == 0.0 && g.beta.im.fract() == 0.0
            && g.c.iter().all(|z| z.re.fract() == 0.0);
        let want = g.reference();
        let mut got = g.f32_result();
        let abs_bound = g.k.max(1) as f64 * 1e-4 * std::f64::consts::FRAC_1_SQRT_2;
        let in_block = |p: usize| p % g.ldc < g.m && p / g.ldc < g.n;
        let visible = |before: Complex32, after: Complex32| {
            if exact {
                !is_finite_c32(after)
                    || ulp_distance(after.re, before.re).max(ulp_distance(after.im, before.im)) > 4
            } else {
                moved(before, after) > 3.0 * abs_bound
            }
        };
        let delta = (10.0 * abs_bound) as f32;
        let Some(i) = pick(got.len(), start.index(got.len()), |p| {
            in_block(p) && visible(got[p], corrupt_c32(how, got[p], delta))
        }) else {
            return Err(TestCaseError::reject("no element this corruption would visibly change"));
        };
        got[i] = corrupt_c32(how, got[i], delta);
        let m = check_cgemm("cgemm", &got, &want, g.m, g.n, g.ldc, g.k, exact)
            .err().ok_or_else(|| TestCaseError::fail("accepted"))?;
        prop_assert_eq!(m.index, i);
        prop_assert_eq!(m.count, 1);
    }
}

#[test]
fn cgemm_ulp_edge_is_four() {
    let one = Complex32::new(1000.0, -7.0);
    let want = [widen(one)];
    let nudge = |bits: u32| Complex32::new(f32::from_bits(one.re.to_bits() + bits), one.im);
    assert!(check_cgemm("ulp", &[nudge(4)], &want, 1, 1, 1, 3, true).is_ok());
    let m = check_cgemm("ulp", &[nudge(5)], &want, 1, 1, 1, 3, true).expect_err("5 ulp");
    assert_eq!(m.bound, 4.0);
    assert!(m.formula.contains("rocBLAS"));
    assert_eq!(ulp_distance(0.0, -0.0), 0);
    assert_eq!(ulp_distance(f32::from_bits(1), -f32::from_bits(1)), 2);
}

#[test]
fn cgemm_write_into_padding_is_caught() {
    let (m, n, k, ldc) = (3, 2, 4, 5);
    let a = matrix(1, m, k, m);
    let b = matrix(2, k, n, k);
    let c = matrix(3, m, n, ldc);
    let (one, zero) = (Complex32::new(1.0, 0.0), Complex32::new(0.0, 0.0));
    let want = reference::cgemm(
        Transpose::None,
        Transpose::None,
        m,
        n,
        k,
        one,
        &a,
        m,
        &b,
        k,
        zero,
        &c,
        ldc,
    );
    let mut got = cgemm32(
        Transpose::None,
        Transpose::None,
        (m, n, k),
        one,
        (&a, m),
        (&b, k),
        zero,
        (&c, ldc),
    );
    assert!(check_cgemm("pad", &got, &want, m, n, ldc, k, false).is_ok());
    assert_eq!(got[ldc + m], PAD_C);
    got[ldc + m] = Complex32::new(0.0, 0.0);
    let mm = check_cgemm("pad", &got, &want, m, n, ldc, k, false).expect_err("padding written");
    assert_eq!((mm.index, mm.count, mm.bound), (ldc + m, 1, 0.0));
    assert!(mm.formula.contains("padding"), "{}", mm.formula);
}

// ---- cholesky ----

fn uplo() -> impl Strategy<Value = Uplo> {
    prop_oneof![Just(Uplo::Lower), Just(Uplo::Upper)]
}

proptest! {
    #![proptest_config(cfg(32))]

    #[test]
    fn cholesky_accepts_f32_roundoff(a in hpd_strategy(1..48usize, 0..3usize), uplo in uplo()) {
        let want = reference::cholesky(uplo, a.rows, &a.data, a.lda).map_err(|i| TestCaseError::fail(format!("ref info {i}")))?;
        let got = cholesky32(uplo, a.rows, &a.data, a.lda).map_err(|i| TestCaseError::fail(format!("f32 info {i}")))?;
        let s = check_cholesky("potrf", &got, &want, uplo, a.rows, a.lda).map_err(|m| TestCaseError::fail(m.to_string()))?;
        prop_assert!(s.worst_ratio < 1.0);
        check_info("info", 0, 0).map_err(|m| TestCaseError::fail(m.to_string()))?;
    }

    #[test]
    fn cholesky_rejects_one_corrupted_element(
        a in hpd_strategy(1..48usize, 0..3usize),
        uplo in uplo(),
        start in any::<Index>(),
        how in corruption(),
    ) {
        let want = reference::cholesky(uplo, a.rows, &a.data, a.lda).map_err(|i| TestCaseError::fail(format!("ref info {i}")))?;
        let mut got = cholesky32(uplo, a.rows, &a.data, a.lda).map_err(|i| TestCaseError::fail(format!("f32 info {i}")))?;
        let (n, lda) = (a.rows, a.lda);
        let in_triangle = |p: usize| {
            let (i, j) = (p % lda, p / lda);
            i < n && j < n && match uplo { Uplo::Lower => i >= j, Uplo::Upper => i <= j }
        };
        let fro = (0..got.len()).filter(|&p| in_triangle(p)).map(|p| want[p].norm_sqr()).sum::<f64>().sqrt();
        let budget = n as f64 * EPS32 * fro;
        let delta = (10.0 * budget) as f32;
        let Some(i) = pick(got.len(), start.index(got.len()), |p| {
            let after = corrupt_c32(how, got[p], delta);
            in_triangle(p) && (!is_finite_c32(after) || (widen(after) - widen(got[p])).norm() > 3.0 * budget)
        }) else {
            return Err(TestCaseError::reject("no element this corruption would visibly change"));
        };
        got[i] = corrupt_c32(how, got[i], delta);
        let m = check_cholesky("potrf", &got, &want, uplo, n, lda).err().ok_or_else(|| TestCaseError::fail("accepted"))?;
        prop_assert_eq!(m.index, i);
        prop_assert!(m.formula.contains("rocSOLVER"));
    }

    /// The generator's info, the reference's and an f32 factorization's all agree, and
    /// check_info tells a wrong one apart.
    #[test]
    fn non_hpd_info_agrees_everywhere(m in non_hpd_strategy(1..40usize, 0..3usize), uplo in uplo()) {
        let (n, lda) = (m.matrix.rows, m.matrix.lda);
        prop_assert_eq!(reference::cholesky(uplo, n, &m.matrix.data, lda).err(), Some(m.info));
        let got = cholesky32(uplo, n, &m.matrix.data, lda).err().ok_or_else(|| TestCaseError::fail("f32 factored"))?;
        check_info("info", got as i64, m.info).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(check_info("info", 0, m.info).is_err());
        prop_assert!(check_info("info", m.info as i64 + 1, m.info).is_err());
    }
}

#[test]
fn check_info_explains_negative_info() {
    let m = check_info("info", -4, 0).expect_err("invalid argument");
    assert!(m.got.contains("argument 4"), "{}", m.got);
}

/// A factor that never arrived (the input matrix read back unchanged) is caught, with the
/// first wrong element named and most of the triangle counted.
#[test]
fn stale_cholesky_output_is_caught() {
    let n = 16;
    let a = crate::generate::hpd_matrix(4, n, n);
    let want = reference::cholesky(Uplo::Lower, n, &a, n).expect("HPD");
    let m = check_cholesky("stale", &a, &want, Uplo::Lower, n, n).expect_err("stale");
    assert_eq!(m.index, 0);
    assert!(m.count > n * (n + 1) / 4, "{}", m.count);
}

// ---- bit-exact ----

proptest! {
    #![proptest_config(cfg(64))]

    #[test]
    fn exact_u32_finds_a_single_bit_flip(seed in any::<u32>(), words in 1usize..5000, start in any::<Index>(), bit in 0u32..32) {
        let want = pattern(seed, words);
        let mut got = want.clone();
        prop_assert!(check_exact_u32("handoff", &got, &want).is_ok());
        let i = start.index(words);
        got[i] ^= 1 << bit;
        let m = check_exact_u32("handoff", &got, &want).err().ok_or_else(|| TestCaseError::fail("accepted"))?;
        prop_assert_eq!((m.index, m.count, m.max_abs_err), (i, 1, 1.0));
    }

    #[test]
    fn exact_c32_finds_a_single_bit_flip(x in complex_vec_strategy(1..3000usize), start in any::<Index>(), bit in 0u32..32, im in any::<bool>()) {
        let mut got = x.clone();
        let i = start.index(x.len());
        let flip = |v: f32| f32::from_bits(v.to_bits() ^ (1 << bit));
        if im { got[i].im = flip(got[i].im) } else { got[i].re = flip(got[i].re) }
        let m = check_exact_c32("copy", &got, &x).err().ok_or_else(|| TestCaseError::fail("accepted"))?;
        prop_assert_eq!((m.index, m.count), (i, 1));
    }
}

#[test]
fn stale_handoff_is_counted_as_mostly_wrong() {
    let m = check_exact_u32("stale", &pattern(1, 4096), &pattern(2, 4096)).expect_err("stale");
    assert!(m.count > 4000 && m.max_abs_err > 16.0, "{m}");
}

// ---- at the seed's size (release builds; ~10 s in debug, so ignored there) ----

#[test]
#[cfg_attr(debug_assertions, ignore = "4M-point FFTs: run with --release")]
fn fft_and_pipeline_at_four_million_points() {
    let n = crate::generate::SEED_LEN;
    let a = complex_vec(1, n);
    let b = complex_vec(2, n);
    let want = fft_forward(&a);
    let mut got = fft32_radix2(&a);
    let s = check_fft("4M", &got, &want).expect("genuine f32 round-off");
    println!("4M radix-2 f32 FFT: {s}");
    assert!(s.worst_ratio < 0.5, "{s}");
    let i = 3_000_001;
    got[i].re = -got[i].re + if got[i].re >= 0.0 { -1.0 } else { 1.0 };
    let m = check_fft("4M", &got, &want).expect_err("corrupted");
    assert_eq!((m.index, m.count), (i, 1));

    let scale = 1.0 / n as f32;
    let want = reference::pipeline(&a, &b, scale);
    let mut got = pipeline32(&a, &b, scale);
    let s = check_pipeline("4M pipeline", &got, &want, scale).expect("genuine f32 round-off");
    println!("4M f32 pipeline: {s}");
    got[12345] *= 1.5;
    let m = check_pipeline("4M pipeline", &got, &want, scale).expect_err("corrupted");
    assert_eq!((m.index, m.count), (12345, 1));
}

// ---- every bound at its edge ----
//
// Each bound is written out again below from its documented formula, with the constants as
// literals, so that a loosened formula or constant in the code is caught rather than
// followed. Errors are planted on elements whose reference is zero (or, where the bound
// depends on the element, in the f64 reference itself), so that f32 rounding moves the
// planted error by ~1e-7 of itself, far below the 1e-3 margin; each test still asserts
// which side of the bound the error actually landed on.

/// Relative distance of a planted error from its bound.
const EDGE: f64 = 1e-3;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// `target` as f32, asserting that rounding left it on the same side of `bound`.
fn planted(target: f64, bound: f64) -> f32 {
    let x = target as f32;
    assert_eq!(
        f64::from(x) > bound,
        target > bound,
        "{target:e} rounded to {x:e} across {bound:e}"
    );
    x
}

/// `eps_p * ||ref||_inf * max(ln N, 1)`, eps_p = 3.75e-5 (rocFFT accuracy_test.h).
fn fft_linf_by_formula(want: &[Complex64]) -> f64 {
    let inf = want
        .iter()
        .fold(0.0f64, |m, z| m.max(z.re.abs()).max(z.im.abs()));
    3.75e-5 * inf * (want.len() as f64).ln().max(1.0)
}

/// `sqrt(max(log2 N, 1)) * eps_p` (rocFFT accuracy_test.h).
fn fft_l2_by_formula(n: usize) -> f64 {
    (n as f64).log2().max(1.0).sqrt() * 3.75e-5
}

/// `(0.5, -0.25)` at even indices, zero at odd ones: `||ref||_inf = 0.5` whatever is planted
/// at an odd index, and the reference's energy is spread so that one element at the Linf
/// bound stays inside the L2 bound. Returns the reference and its exact f32 copy.
fn fft_edge_vectors(n: usize) -> (Vec<Complex64>, Vec<Complex32>) {
    let want: Vec<Complex64> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                Complex64::new(0.5, -0.25)
            } else {
                Complex64::new(0.0, 0.0)
            }
        })
        .collect();
    let got = want
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    (want, got)
}

fn rel_l2(got: &[Complex32], want: &[Complex64]) -> f64 {
    let d2: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (widen(g) - w).norm_sqr())
        .sum();
    let r2: f64 = want.iter().map(|z| z.norm_sqr()).sum();
    (d2 / r2).sqrt()
}

const FFT_EDGE_SIZES: [usize; 3] = [2, 8, 1 << 16];

#[test]
fn fft_linf_bound_edge() {
    for n in FFT_EDGE_SIZES {
        let (want, exact) = fft_edge_vectors(n);
        let bound = fft_linf_by_formula(&want);
        let i = (n / 2) | 1; // odd: its reference is zero
        for over in [true, false] {
            let target = bound * if over { 1.0 + EDGE } else { 1.0 - EDGE };
            let mut got = exact.clone();
            got[i].im = -planted(target, bound);
            assert!(
                rel_l2(&got, &want) < fft_l2_by_formula(n),
                "L2 must hold, N={n}"
            );
            let r = check_fft("edge", &got, &want);
            if over {
                let m = r.expect_err("just over the Linf bound");
                assert_eq!((m.index, m.count), (i, 1), "N={n}: {m}");
                assert!(close(m.bound, bound), "N={n}: {} vs {bound:e}", m.bound);
                assert!(!m.formula.starts_with("L2:"), "{}", m.formula);
            } else {
                let s = r.unwrap_or_else(|m| panic!("just under, N={n}: {m}"));
                assert!(
                    s.worst_ratio > 1.0 - 2.0 * EDGE && s.worst_ratio < 1.0,
                    "{s}"
                );
            }
        }
    }
}

/// Every element inside the Linf bound, the L2 norm of the error just over or under its
/// bound; the error is spread over all zero-reference elements, largest at `k`.
#[test]
fn fft_l2_bound_edge() {
    for n in FFT_EDGE_SIZES {
        let (want, exact) = fft_edge_vectors(n);
        let linf = fft_linf_by_formula(&want);
        let l2 = fft_l2_by_formula(n);
        let ref_l2 = want.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
        let k = n - 1;
        let weight = |j: usize| if j == k { 1.25 } else { 1.0 };
        let sum_w2: f64 = (1..n).step_by(2).map(|j| 2.0 * weight(j) * weight(j)).sum();
        for over in [true, false] {
            let target = l2 * ref_l2 * if over { 1.0 + EDGE } else { 1.0 - EDGE };
            let e = target / sum_w2.sqrt();
            assert!(1.25 * e < 0.9 * linf, "N={n}: setup must keep Linf");
            let mut got = exact.clone();
            for j in (1..n).step_by(2) {
                let x = (weight(j) * e) as f32;
                got[j] = Complex32::new(x, -x);
            }
            let measured = rel_l2(&got, &want);
            assert_eq!(measured > l2, over, "N={n}: planted {measured:e} vs {l2:e}");
            let r = check_fft("edge", &got, &want);
            if over {
                let m = r.expect_err("just over the L2 bound");
                assert!(m.formula.starts_with("L2:"), "N={n}: {}", m.formula);
                assert_eq!(m.index, k, "N={n}: {m}");
                assert!(close(m.bound, l2), "N={n}: {} vs {l2:e}", m.bound);
                assert!(m.count >= 1 && m.max_rel_err > m.bound, "{m}");
            } else {
                let s = r.unwrap_or_else(|m| panic!("just under, N={n}: {m}"));
                assert!(
                    s.worst_ratio > 1.0 - 2.0 * EDGE && s.worst_ratio < 1.0,
                    "{s}"
                );
            }
        }
    }
}

/// `|got - ref| <= |scale| sqrt(2) B_fft + 4 eps32 |ref|` at a zero-magnitude element (the
/// absolute term alone) and at a magnitude of 0.75 (where the relative term dominates).
#[test]
fn pipeline_bound_edge() {
    let eps32 = 2f64.powi(-23);
    for n in [8, 1 << 16] {
        for scale in [1.0, 1.0 / n as f32] {
            let fft = vec![Complex64::new(0.5, -0.25); n];
            let b_fft = 3.75e-5 * 0.5 * (n as f64).ln().max(1.0);
            let abs_term = f64::from(scale) * 2f64.sqrt() * b_fft;
            let bound_for = |r: f64| abs_term + 4.0 * eps32 * r.abs();
            let magnitude: Vec<f64> = (0..n)
                .map(|i| if i % 2 == 0 { 0.75 } else { 0.0 })
                .collect();
            let exact: Vec<f32> = magnitude.iter().map(|&x| x as f32).collect();
            let (z, r) = ((n / 2) | 1, n / 2);
            let plant = |over: bool, at: usize| {
                let f = if over { 1.0 + EDGE } else { 1.0 - EDGE };
                let mut want = PipelineReference {
                    fft: fft.clone(),
                    magnitude: magnitude.clone(),
                };
                let mut got = exact.clone();
                if at == z {
                    got[z] = planted(abs_term * f, abs_term);
                } else {
                    // got stays 0.75; the reference moves: 0.75 - want = f * bound(want).
                    want.magnitude[r] = (0.75 - f * abs_term) / (1.0 + f * 4.0 * eps32);
                }
                let err = (f64::from(got[at]) - want.magnitude[at]).abs();
                assert_eq!(err > bound_for(want.magnitude[at]), over, "N={n} at {at}");
                (got, want)
            };
            for at in [z, r] {
                let (got, want) = plant(true, at);
                let m = check_pipeline("edge", &got, &want, scale)
                    .expect_err("just over the pipeline bound");
                assert_eq!((m.index, m.count), (at, 1), "N={n}, scale={scale}: {m}");
                assert!(close(m.bound, bound_for(want.magnitude[at])), "{m}");

                let (got, want) = plant(false, at);
                let s = check_pipeline("edge", &got, &want, scale)
                    .unwrap_or_else(|m| panic!("just under, N={n}, at {at}: {m}"));
                assert!(
                    s.worst_ratio > 1.0 - 2.0 * EDGE && s.worst_ratio < 1.0,
                    "{s}"
                );
            }
        }
    }
}

/// `|Δre|, |Δim| <= max(K, 1) * 1e-4 * sqrt(0.5)` in a 3x2 block with ldc = 5.
#[test]
fn cgemm_bound_edge() {
    let (m, n, ldc) = (3, 2, 5);
    let want: Vec<Complex64> = (0..ldc * n)
        .map(|p| match (p % ldc < m, p % 2) {
            (false, _) => widen(PAD_C),
            (true, 1) => Complex64::new(0.0, 0.0),
            (true, _) => Complex64::new(-1.5, 0.25),
        })
        .collect();
    let exact: Vec<Complex32> = want
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    let p = 2 + ldc; // row 2, column 1: a zero reference
    assert_eq!(want[p], Complex64::new(0.0, 0.0));
    for k in [0, 1, 4096] {
        let bound = (k.max(1) as f64) * 1e-4 * 0.5f64.sqrt();
        for over in [true, false] {
            let mut got = exact.clone();
            got[p].im = -planted(bound * if over { 1.0 + EDGE } else { 1.0 - EDGE }, bound);
            let r = check_cgemm("edge", &got, &want, m, n, ldc, k, false);
            if over {
                let mm = r.expect_err("just over the cgemm bound");
                assert_eq!((mm.index, mm.count), (p, 1), "K={k}: {mm}");
                assert!(close(mm.bound, bound), "K={k}: {mm}");
            } else {
                let s = r.unwrap_or_else(|mm| panic!("just under, K={k}: {mm}"));
                assert!(
                    s.worst_ratio > 1.0 - 2.0 * EDGE && s.worst_ratio < 1.0,
                    "{s}"
                );
            }
        }
    }
}

/// `||ref - got||_F / ||ref||_F <= n eps` over the triangle, with the reference an identity
/// factor: one off-diagonal element carrying the whole error (the index is that element),
/// and the error spread over every off-diagonal element (the index is the largest).
#[test]
fn cholesky_bound_edge() {
    let eps32 = 2f64.powi(-23);
    for (n, uplo, lda) in [
        (2, Uplo::Lower, 3),
        (3, Uplo::Upper, 3),
        (512, Uplo::Upper, 513),
    ] {
        let tri = |p: usize| {
            let (i, j) = (p % lda, p / lda);
            i < n
                && j < n
                && match uplo {
                    Uplo::Lower => i >= j,
                    Uplo::Upper => i <= j,
                }
        };
        let off: Vec<usize> = (0..lda * n)
            .filter(|&p| tri(p) && p % lda != p / lda)
            .collect();
        let want: Vec<Complex64> = (0..lda * n)
            .map(|p| {
                if !tri(p) {
                    Complex64::new(9.0, 9.0) // not checked: LAPACK's workspace
                } else if p % lda == p / lda {
                    Complex64::new(1.0, 0.0)
                } else {
                    Complex64::new(0.0, 0.0)
                }
            })
            .collect();
        let mut exact: Vec<Complex32> = want
            .iter()
            .map(|z| Complex32::new(z.re as f32, z.im as f32))
            .collect();
        for (p, z) in exact.iter_mut().enumerate() {
            if !tri(p) {
                *z = Complex32::new(-3.0, 1.0);
            }
        }
        let bound = n as f64 * eps32;
        let budget = bound * (n as f64).sqrt(); // ||ref||_F = sqrt(n)
        let k = off[off.len() / 2];
        let spread_w = |p: usize| if p == k { 1.25 } else { 1.0 };
        let sum_w2: f64 = off.iter().map(|&p| spread_w(p) * spread_w(p)).sum();
        for spread in [false, true] {
            for over in [true, false] {
                let target = budget * if over { 1.0 + EDGE } else { 1.0 - EDGE };
                let mut got = exact.clone();
                if spread {
                    let e = target / sum_w2.sqrt();
                    for &p in &off {
                        got[p].re = (spread_w(p) * e) as f32;
                    }
                } else {
                    got[k].re = -planted(target, budget);
                }
                let d2: f64 = (0..got.len())
                    .filter(|&p| tri(p))
                    .map(|p| (widen(got[p]) - want[p]).norm_sqr())
                    .sum();
                let rel = (d2 / n as f64).sqrt();
                assert_eq!(
                    rel > bound,
                    over,
                    "n={n} spread={spread}: {rel:e} vs {bound:e}"
                );
                let r = check_cholesky("edge", &got, &want, uplo, n, lda);
                if over {
                    let m = r.expect_err("just over the potrf bound");
                    assert_eq!(m.index, k, "n={n} spread={spread}: {m}");
                    assert!(close(m.bound, bound), "{m}");
                } else {
                    let s = r.unwrap_or_else(|m| panic!("just under, n={n}: {m}"));
                    assert!(
                        s.worst_ratio > 1.0 - 2.0 * EDGE && s.worst_ratio < 1.0,
                        "{s}"
                    );
                }
            }
        }
    }
}

// ---- NaN and infinities in verdicts ----

/// One non-finite component planted at `at`; the verdict names it and says what it is.
fn assert_names_nonfinite(m: &Mismatch, at: usize, x: f32) {
    let text = m.to_string();
    let shown = format!("{x:e}");
    assert_eq!(m.index, at, "{text}");
    assert!(m.got.contains(&shown), "got {} should show {shown}", m.got);
    let max_err = if x.is_nan() { "NaN" } else { "inf" };
    assert!(text.contains(&format!("max abs err {max_err},")), "{text}");
    assert!(!text.contains("e308"), "clamped value in {text}");
    for (what, v) in [
        ("max_abs_err", m.max_abs_err),
        ("max_rel_err", m.max_rel_err),
    ] {
        assert!(
            v.is_nan() || v.is_infinite() || v < 1e300,
            "{what} = {v:e}: a clamped value"
        );
    }
}

#[test]
fn nan_and_inf_print_as_such_in_every_verdict() {
    for x in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let (want, mut got) = fft_edge_vectors(8);
        got[3].re = x;
        let m = check_fft("fft", &got, &want).expect_err("non-finite FFT output");
        assert_names_nonfinite(&m, 3, x);
        assert!(
            m.formula
                .contains(if x.is_nan() { "= NaN >" } else { "= inf >" }),
            "{m}"
        );

        let want = PipelineReference {
            fft: vec![Complex64::new(0.5, 0.0); 8],
            magnitude: vec![0.5; 8],
        };
        let mut got = vec![0.5f32; 8];
        got[5] = x;
        let m = check_pipeline("pipeline", &got, &want, 1.0).expect_err("non-finite");
        assert_names_nonfinite(&m, 5, x);

        for exact_inputs in [false, true] {
            let want = vec![Complex64::new(2.0, -1.0); 6];
            let mut got = vec![Complex32::new(2.0, -1.0); 6];
            got[4].im = x;
            let m = check_cgemm("cgemm", &got, &want, 3, 2, 3, 4, exact_inputs)
                .expect_err("non-finite");
            assert_names_nonfinite(&m, 4, x);
        }

        let want = vec![Complex64::new(1.0, 0.0); 4];
        let mut got = vec![Complex32::new(1.0, 0.0); 4];
        got[1].re = x;
        let m = check_cholesky("potrf", &got, &want, Uplo::Lower, 2, 2).expect_err("non-finite");
        assert_names_nonfinite(&m, 1, x);
        assert!(
            m.formula
                .contains(if x.is_nan() { "= NaN >" } else { "= inf >" }),
            "{m}"
        );

        let want = vec![Complex32::new(1.0, 0.0); 4];
        let mut got = want.clone();
        got[2].im = x;
        let m = check_exact_c32("copy", &got, &want).expect_err("non-finite");
        assert_eq!(m.index, 2);
        assert!(m.to_string().contains(&format!("{x:e}")), "{m}");
    }
}

/// A NaN in either component of any checked element fails every check, at that element.
/// (For potrf, "checked" is the factor triangle: the other is LAPACK's workspace.)
#[test]
fn nan_anywhere_in_got_fails_every_check() {
    let with_nan = |z: Complex32, im: bool| {
        if im {
            Complex32::new(z.re, f32::NAN)
        } else {
            Complex32::new(f32::NAN, z.im)
        }
    };
    for im in [false, true] {
        let x = complex_vec(7, 16);
        let want = fft_forward(&x);
        let good = fft32(&x);
        let ab = (complex_vec(8, 16), complex_vec(9, 16));
        let pipe_want = reference::pipeline(&ab.0, &ab.1, 1.0 / 16.0);
        let pipe_good = pipeline32(&ab.0, &ab.1, 1.0 / 16.0);
        for i in 0..16 {
            let mut got = good.clone();
            got[i] = with_nan(got[i], im);
            let m = check_fft("fft", &got, &want).expect_err("NaN in FFT output");
            assert_eq!((m.index, m.count), (i, 1));
            assert!(
                m.max_abs_err.is_nan() && m.max_rel_err.is_nan(),
                "L2 too: {m}"
            );

            let mut got = pipe_good.clone();
            got[i] = f32::NAN;
            let m = check_pipeline("pipeline", &got, &pipe_want, 1.0 / 16.0)
                .expect_err("NaN in pipeline output");
            assert_eq!((m.index, m.count), (i, 1));

            let mut got = x.clone();
            got[i] = with_nan(got[i], im);
            let m = check_exact_c32("copy", &got, &x).expect_err("NaN in a copy");
            assert_eq!((m.index, m.count), (i, 1));
        }

        // cgemm: every position of the ldc-strided C, padding rows included.
        let (gm, gn, gk, ldc) = (3, 2, 4, 5);
        for exact_inputs in [false, true] {
            let draw = if exact_inputs { integer_matrix } else { matrix };
            let (a, b, c) = (
                draw(1, gm, gk, gm),
                draw(2, gk, gn, gk),
                draw(3, gm, gn, ldc),
            );
            let (one, zero) = (Complex32::new(1.0, 0.0), Complex32::new(0.0, 0.0));
            let none = Transpose::None;
            let want = reference::cgemm(none, none, gm, gn, gk, one, &a, gm, &b, gk, zero, &c, ldc);
            let good = cgemm32(
                none,
                none,
                (gm, gn, gk),
                one,
                (&a, gm),
                (&b, gk),
                zero,
                (&c, ldc),
            );
            for p in 0..good.len() {
                let mut got = good.clone();
                got[p] = with_nan(got[p], im);
                let mm = check_cgemm("cgemm", &got, &want, gm, gn, ldc, gk, exact_inputs)
                    .expect_err("NaN in cgemm output");
                assert_eq!((mm.index, mm.count), (p, 1), "exact={exact_inputs}");
            }
        }

        // cholesky: every position of the factor triangle, both triangles, lda > n.
        let (n, lda) = (5, 6);
        let a = crate::generate::hpd_matrix(11, n, lda);
        for uplo in [Uplo::Lower, Uplo::Upper] {
            let want = reference::cholesky(uplo, n, &a, lda).expect("HPD");
            let good = cholesky32(uplo, n, &a, lda).expect("HPD");
            for j in 0..n {
                for i in 0..n {
                    let in_tri = match uplo {
                        Uplo::Lower => i >= j,
                        Uplo::Upper => i <= j,
                    };
                    if !in_tri {
                        continue;
                    }
                    let p = i + j * lda;
                    let mut got = good.clone();
                    got[p] = with_nan(got[p], im);
                    let m = check_cholesky("potrf", &got, &want, uplo, n, lda)
                        .expect_err("NaN in the factor");
                    assert_eq!(m.index, p);
                    assert!(m.max_abs_err.is_nan() && m.max_rel_err.is_nan(), "{m}");
                }
            }
        }
    }
}

// ---- the helpers every check's verdict goes through, at their edges ----

#[test]
fn ratio_is_measured_over_bound_with_zero_and_nan_rules() {
    assert_eq!(ratio(0.0, 0.0), 0.0);
    assert_eq!(ratio(0.0, 1.0), 0.0);
    assert_eq!(ratio(3.0, 2.0), 1.5);
    assert_eq!(ratio(1.0, 4.0), 0.25);
    assert_eq!(ratio(1.0, 0.0), f64::INFINITY);
    // A bound of -0.0 is still zero: its ratio must not read as -inf, far within bound.
    assert_eq!(ratio(1.0, -0.0), f64::INFINITY);
    assert!(ratio(f64::NAN, 1.0).is_nan());
    assert!(ratio(f64::NAN, 0.0).is_nan());
}

#[test]
fn is_worse_is_strict_and_nan_beats_everything_once() {
    assert!(is_worse(2.0, 1.0));
    assert!(!is_worse(1.0, 2.0));
    assert!(
        !is_worse(1.0, 1.0),
        "an equal error keeps the first element"
    );
    assert!(is_worse(f64::NAN, 1.0));
    assert!(is_worse(f64::NAN, f64::INFINITY));
    assert!(
        !is_worse(f64::NAN, f64::NAN),
        "the first NaN stays the worst"
    );
    assert!(!is_worse(1.0, f64::NAN));
}

#[test]
fn within_includes_the_bound_and_never_nan() {
    assert!(within(1.0, 2.0));
    assert!(within(2.0, 2.0));
    assert!(!within(2.0, 1.0));
    assert!(!within(f64::NAN, f64::INFINITY));
}

#[test]
fn a_nonfinite_reference_fails_fft_and_pipeline_at_its_index() {
    // One infinite component is enough: it would make the Linf bound infinite.
    let mut want = vec![Complex64::new(1.0, 0.5); 8];
    want[2] = Complex64::new(f64::INFINITY, 0.0);
    let got = vec![Complex32::new(1.0, 0.5); 8];
    let m = check_fft("fft", &got, &want).expect_err("an inf reference");
    assert_eq!((m.index, m.got.as_str()), (2, "(not compared)"));
    let pipeline = PipelineReference {
        fft: want,
        magnitude: vec![1.0; 8],
    };
    let m = check_pipeline("pipeline", &[1.0; 8], &pipeline, 1.0).expect_err("an inf reference");
    assert_eq!((m.index, m.got.as_str()), (2, "(not compared)"));
}

#[test]
fn cgemm_exact_inputs_hold_an_inf_out_of_bound_next_to_f32_max() {
    // +inf is one step from f32::MAX on the line of bit patterns: only the finiteness test
    // keeps it from passing the 4-ULP criterion.
    assert_eq!(ulp_distance(f32::INFINITY, f32::MAX), 1);
    let want = [Complex64::new(f64::from(f32::MAX), 1.0)];
    let exact = |z: Complex32| check_cgemm("exact", &[z], &want, 1, 1, 1, 3, true);
    assert!(exact(Complex32::new(f32::MAX, 1.0)).is_ok());
    let m = exact(Complex32::new(f32::INFINITY, 1.0)).expect_err("inf is not f32::MAX");
    assert_eq!(m.index, 0);
}

#[test]
fn check_info_names_a_zero_info_plainly_and_measures_the_distance() {
    // 0 says "HPD" where the reference found a non-PD minor: no argument was invalid.
    let m = check_info("info", 0, 3).expect_err("0 is not 3");
    assert_eq!(m.got, "info = 0");
    assert_eq!(m.max_abs_err, 3.0);
    let m = check_info("info", 5, 2).expect_err("5 is not 2");
    assert_eq!(m.max_abs_err, 3.0);
}

#[test]
fn bit_checks_measure_differing_bits_against_the_element_width() {
    let m = check_exact_u32("w", &[0, 0b111], &[0, 0]).expect_err("3 bits differ");
    assert_eq!(
        (m.index, m.count, m.max_abs_err, m.max_rel_err),
        (1, 1, 3.0, 3.0 / 32.0)
    );
    let z = Complex32::new(1.0, 2.0);
    let flipped = Complex32::new(f32::from_bits(1.0f32.to_bits() ^ 1), 2.0);
    let m = check_exact_c32("c", &[flipped], &[z]).expect_err("one bit differs");
    assert_eq!((m.max_abs_err, m.max_rel_err), (1.0, 1.0 / 64.0));
}

/// On a pass, `bound` is the bound at the element of the largest error/bound ratio, the first
/// of equals (element 0 when every element is exact); an empty output passes with the
/// absolute term, zero here (no FFT to bound).
#[test]
fn a_pipeline_pass_reports_the_bound_at_its_worst_element() {
    let n = 8;
    let want = PipelineReference {
        fft: vec![Complex64::new(0.5, -0.25); n],
        magnitude: (0..n).map(|i| 0.25 * (i + 1) as f64).collect(),
    };
    let scale = 1.0;
    let exact: Vec<f32> = want.magnitude.iter().map(|&x| x as f32).collect();
    // The bound at element i, as the check reports it where i alone is out of bound.
    let bound_at = |i: usize| {
        let mut got = exact.clone();
        got[i] += 1.0;
        check_pipeline("worst", &got, &want, scale)
            .expect_err("1.0 off")
            .bound
    };
    assert!(bound_at(0) < bound_at(3) && bound_at(3) < bound_at(n - 1));
    let s = check_pipeline("worst", &exact, &want, scale).expect("exact");
    assert_eq!(s.bound, bound_at(0));
    for worst in [3, n - 1] {
        let mut got = exact.clone();
        got[worst] += (0.5 * bound_at(worst)) as f32;
        got[1] += (0.25 * bound_at(1)) as f32;
        let s = check_pipeline("worst", &got, &want, scale).expect("within bound");
        assert_eq!(s.bound, bound_at(worst), "worst at {worst}");
    }
    let empty = PipelineReference {
        fft: vec![],
        magnitude: vec![],
    };
    let s = check_pipeline("empty", &[], &empty, 1.0).expect("nothing to be wrong");
    assert_eq!((s.len, s.bound), (0, 0.0));
}

/// Columns past `n` are outside the block as much as rows past `m`: a cgemm must leave them
/// bit-identical, so even a 1-ULP change there fails, as padding.
#[test]
fn cgemm_columns_past_n_are_padding_too() {
    let (m, n, ldc) = (2, 1, 2);
    let want: Vec<Complex64> = [0.5, -0.25, 0.75, 0.125]
        .iter()
        .map(|&x| Complex64::new(x, -x))
        .collect();
    let mut got: Vec<Complex32> = want
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    assert!(check_cgemm("cols", &got, &want, m, n, ldc, 4, false).is_ok());
    got[3].re = f32::from_bits(got[3].re.to_bits() + 1);
    let mm = check_cgemm("cols", &got, &want, m, n, ldc, 4, false).expect_err("column 1 written");
    assert_eq!((mm.index, mm.count, mm.bound), (3, 1, 0.0));
    assert!(mm.formula.contains("padding"), "{}", mm.formula);
}

/// A non-finite reference inside the block (in one component) is named at its own index; one
/// in the padding before it is not the block's.
#[test]
fn cgemm_names_the_first_nonfinite_reference_in_the_block() {
    let (m, n, ldc) = (2, 2, 3);
    let mut want = vec![Complex64::new(0.5, 0.25); ldc * n];
    want[2] = Complex64::new(f64::INFINITY, f64::NAN);
    want[4] = Complex64::new(1.0, f64::INFINITY);
    let got: Vec<Complex32> = want
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    let mm = check_cgemm("ref", &got, &want, m, n, ldc, 2, false).expect_err("inf reference");
    assert_eq!(mm.index, 4, "{mm}");
    assert!(
        mm.formula.contains("reference must be finite"),
        "{}",
        mm.formula
    );
    assert_eq!(mm.want, fmt_c64(want[4]));
}

/// The factor triangle is the `n x n` one: elements of columns past `n` (a longer slice) are
/// not checked, whatever they hold, and `len` counts the triangle's elements.
#[test]
fn cholesky_checks_the_n_by_n_triangle_only() {
    let (n, lda) = (2, 2);
    // Upper: [a00 a01; . a11], then a third column that is no part of the factor.
    let mut want = vec![Complex64::new(1.0, 0.0); lda * (n + 1)];
    want[1] = Complex64::new(9.0, 9.0); // below the diagonal: LAPACK's to use
    want[4] = Complex64::new(f64::NAN, 0.0);
    let mut got: Vec<Complex32> = want
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    got[1] = Complex32::new(-3.0, 1.0);
    got[4] = Complex32::new(5.0, 5.0);
    got[5] = Complex32::new(-5.0, 5.0);
    let s = check_cholesky("tri", &got, &want, Uplo::Upper, n, lda).expect("triangle exact");
    assert_eq!((s.len, s.max_abs_err), (3, 0.0));
    got[2].im = 1.0;
    let m = check_cholesky("tri", &got, &want, Uplo::Upper, n, lda).expect_err("a01 wrong");
    assert_eq!((m.index, m.count, m.len), (2, 1, 3));
}

/// A reference element that is infinite in one component is named as a non-finite reference,
/// not compared; an output element of (inf, NaN) reports its error as NaN, not hypot's inf.
#[test]
fn cholesky_names_a_half_infinite_reference_and_a_nan_error() {
    let (n, lda) = (2, 2);
    let mut want = vec![Complex64::new(1.0, 0.0); lda * n];
    want[1] = Complex64::new(0.5, -0.5);
    let exact: Vec<Complex32> = want
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    let mut bad_ref = want.clone();
    bad_ref[1].im = f64::INFINITY;
    let m = check_cholesky("ref", &exact, &bad_ref, Uplo::Lower, n, lda).expect_err("inf ref");
    assert_eq!(m.index, 1);
    assert!(
        m.formula.contains("reference must be finite"),
        "{}",
        m.formula
    );

    let mut got = exact.clone();
    got[1] = Complex32::new(f32::INFINITY, f32::NAN);
    let m = check_cholesky("nan", &got, &want, Uplo::Lower, n, lda).expect_err("(inf, NaN)");
    assert!(m.max_abs_err.is_nan(), "{m}");
}

/// A failing factor counts the elements over an even share of the budget (budget / sqrt of the
/// triangle's element count) and, with none over the whole budget, reports the largest.
#[test]
fn cholesky_counts_the_elements_over_an_even_share_of_the_budget() {
    let (n, lda) = (4, 4);
    let want: Vec<Complex64> = (0..lda * n)
        .map(|p| Complex64::new(if p % lda == p / lda { 1.0 } else { 0.0 }, 0.0))
        .collect();
    let mut got: Vec<Complex32> = want
        .iter()
        .map(|z| Complex32::new(z.re as f32, 0.0))
        .collect();
    // n eps ||ref||_F, with ||ref||_F = 2; 10 elements in the lower triangle.
    let budget = n as f64 * EPS32 * 2.0;
    let share = budget / 10f64.sqrt();
    got[1].re = (0.84 * budget) as f32; // over the share, under the budget
    got[2].re = (0.63 * budget) as f32; // over the share
    got[7].re = (0.9 * share) as f32; // under the share
    let m = check_cholesky("share", &got, &want, Uplo::Lower, n, lda).expect_err("over budget");
    assert_eq!((m.index, m.count, m.len), (1, 2, 10), "{m}");
}
