//! The reproducer's C checks (templates/common.c: check_fft, check_pipeline, check_gemm,
//! check_cholesky, check_exact) held to clhip's bounds at the edge. For each check, the bound
//! at an element is asked of clhip's Rust check (`tolerance`: the bound a planted gross error
//! is reported against), then one element (or, for the normwise criteria, an error spread
//! over many) is planted just over it and just under it. Rust's check must fail the first and
//! pass the second, and so must the C check, compiled with `cc` from the template and fed the
//! same data: a C bound that drifts from Rust's either way (a looser FFT bound, a tighter
//! gemm one) fails here.
//!
//! Without a C compiler the checks are reported ignored, with the reason, never passed.

// Rust's checks return their Mismatch by value (tolerance.rs says why); so do these closures.
#![allow(clippy::result_large_err)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use clhip::model::Mismatch;
use clhip::reference::{self, PipelineReference, Transpose, Uplo};
use clhip::tolerance::{self, CheckSummary};
use libtest_mimic::{Arguments, Failed, Trial};
use num_complex::{Complex32, Complex64};

/// How far from the bound "just over" and "just under" are, relative to it (the Rust edge
/// tests use 1e-3). Where an f32 cannot land that close (a magnitude of order 1), the planted
/// value is the nearest f32 beyond the margin, on the same side.
const EDGE: f64 = 1e-5;

/// The C program: the template's check sections and a `main` that reads one check's data
/// from a file and exits with the check's verdict (0 pass, 1 fail; anything else is the
/// harness's own error).
const HARNESS_MAIN: &str = r#"
static void *slurp(FILE *f, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p || fread(p, 1, bytes, f) != bytes) {
        fprintf(stderr, "harness: short data file\n");
        exit(3);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s CHECK DATA\n", argv[0]);
        return 3;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 3;
    }
    uint64_t n64;
    if (fread(&n64, 8, 1, f) != 1)
        return 3;
    size_t n = (size_t)n64;
    if (!strcmp(argv[1], "fft")) {
        float *got = slurp(f, 8 * n);
        double *want = slurp(f, 16 * n);
        return check_fft("fft", got, want, n);
    }
    if (!strcmp(argv[1], "pipeline")) {
        float *scale = slurp(f, 4), *got = slurp(f, 8 * n);
        double *fft = slurp(f, 16 * n);
        return check_pipeline("pipeline", got, fft, *scale, n);
    }
    if (!strcmp(argv[1], "gemm")) {
        double *beta = slurp(f, 16);
        float *a = slurp(f, 8 * n * n), *b = slurp(f, 8 * n * n), *c = slurp(f, 8 * n * n);
        float *got = slurp(f, 8 * n * n);
        return check_gemm("gemm", got, a, b, c, beta, n);
    }
    if (!strcmp(argv[1], "cholesky")) {
        float *got = slurp(f, 8 * n * n);
        double *want = slurp(f, 16 * n * n);
        return check_cholesky("cholesky", got, want, n);
    }
    if (!strcmp(argv[1], "exact")) {
        float *factor = slurp(f, 4), *got = slurp(f, 8 * n), *input = slurp(f, 8 * n);
        return check_exact("exact", got, input, *factor, n);
    }
    fprintf(stderr, "harness: no check %s\n", argv[1]);
    return 3;
}
"#;

/// Why the C checks cannot run here, if they cannot: no `cc` that runs.
fn no_compiler() -> Option<String> {
    match Command::new("cc").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("`cc --version` exited with {}", o.status)),
        Err(e) => Some(format!("no C compiler: `cc` did not start ({e})")),
    }
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-repro-bounds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The harness, built once: its path, or the compiler's complaint.
fn harness() -> Result<&'static Path, Failed> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let dir = scratch();
        let mut source = String::new();
        for name in [
            "std_includes",
            "check_fft",
            "check_pipeline",
            "check_gemm",
            "check_cholesky",
            "check_exact",
        ] {
            source.push_str(clhip::repro::template_section(name));
        }
        source.push_str(HARNESS_MAIN);
        std::fs::write(dir.join("bounds.c"), source).map_err(|e| e.to_string())?;
        let o = Command::new("cc")
            .args([
                "-std=gnu11",
                "-O2",
                "-Wall",
                "-Werror",
                // reference_cholesky shares check_cholesky's section; the harness needs only
                // the check.
                "-Wno-unused-function",
                "-o",
                "bounds",
                "bounds.c",
                "-lm",
            ])
            .current_dir(&dir)
            .output()
            .map_err(|e| format!("running cc: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "cc failed on the C checks:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Ok(dir.join("bounds"))
    });
    built
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(|e| Failed::from(e.clone()))
}

/// Data for the harness: little-endian words, as the C program reads them on this machine.
#[derive(Default)]
struct Data(Vec<u8>);

impl Data {
    fn u64(mut self, x: u64) -> Self {
        self.0.extend(x.to_ne_bytes());
        self
    }
    fn f32s(mut self, xs: &[f32]) -> Self {
        for x in xs {
            self.0.extend(x.to_ne_bytes());
        }
        self
    }
    fn f64s(mut self, xs: &[f64]) -> Self {
        for x in xs {
            self.0.extend(x.to_ne_bytes());
        }
        self
    }
    fn c32s(self, xs: &[Complex32]) -> Self {
        let flat: Vec<f32> = xs.iter().flat_map(|z| [z.re, z.im]).collect();
        self.f32s(&flat)
    }
    fn c64s(self, xs: &[Complex64]) -> Self {
        let flat: Vec<f64> = xs.iter().flat_map(|z| [z.re, z.im]).collect();
        self.f64s(&flat)
    }
}

/// The C check's verdict on `data`: `true` for a pass.
fn c_passes(check: &str, data: Data) -> Result<bool, Failed> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let exe = harness()?;
    let file = exe.with_file_name(format!(
        "{check}-{}.bin",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&file, &data.0).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let o = Command::new(exe)
        .args([check, file.to_str().unwrap_or_default()])
        .output()
        .map_err(|e| format!("running the harness: {e}"))?;
    let _ = std::fs::remove_file(&file);
    match o.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!(
            "the C harness broke ({}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
        .into()),
    }
}

/// The smallest f32 at or above `x`.
fn f32_at_least(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) < x { f.next_up() } else { f }
}

/// The largest f32 at or below `x`.
fn f32_at_most(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) > x { f.next_down() } else { f }
}

/// An f32 whose distance from `want` is just over (`over`) or just under `bound`, on the side
/// `want + bound`: at least `bound * (1 + EDGE)` away, or at most `bound * (1 - EDGE)`.
fn planted(want: f64, bound: f64, over: bool) -> f32 {
    if over {
        f32_at_least(want + bound * (1.0 + EDGE))
    } else {
        f32_at_most(want + bound * (1.0 - EDGE))
    }
}

/// The bound Rust reports a gross error against: what its check holds that element (or that
/// criterion) to.
fn rust_bound(r: Result<CheckSummary, Mismatch>, what: &str) -> Result<Mismatch, Failed> {
    match r {
        Ok(s) => Err(format!("{what}: Rust's check passed a gross error: {s}").into()),
        Err(m) => Ok(m),
    }
}

/// Rust's and C's verdicts on the same data, `over` the bound or under it: both must fail
/// over, both must pass under.
fn both_agree(
    what: &str,
    over: bool,
    rust: Result<CheckSummary, Mismatch>,
    c_pass: bool,
) -> Result<(), Failed> {
    let rust_pass = rust.is_ok();
    let side = if over { "just over" } else { "just under" };
    let detail = match &rust {
        Ok(s) => s.to_string(),
        Err(m) => m.to_string(),
    };
    if rust_pass == over {
        return Err(format!(
            "{what}, {side} the bound: Rust's check {} ({detail})",
            if rust_pass { "passed" } else { "failed" }
        )
        .into());
    }
    if c_pass == over {
        return Err(format!(
            "{what}, {side} clhip's bound: the C check {} where clhip's {} ({detail})",
            if c_pass { "passed" } else { "failed" },
            if rust_pass { "passes" } else { "fails" }
        )
        .into());
    }
    Ok(())
}

/// `(0.5, -0.25)` at even indices, zero at odd ones (as tolerance.rs's edge tests): an error
/// planted at an odd index leaves `||ref||_inf` alone, and is exact in f32.
fn fft_reference(n: usize) -> (Vec<Complex64>, Vec<Complex32>) {
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

const FFT_SIZES: [usize; 3] = [2, 8, 1 << 16];

fn fft_data(got: &[Complex32], want: &[Complex64]) -> Data {
    Data::default().u64(want.len() as u64).c32s(got).c64s(want)
}

/// The Linf criterion: one element's component error just over or under
/// `eps_p * ||ref||_inf * max(ln N, 1)`.
fn fft_linf_edge() -> Result<(), Failed> {
    for n in FFT_SIZES {
        let (want, exact) = fft_reference(n);
        let i = (n / 2) | 1;
        let mut gross = exact.clone();
        gross[i].im = 1.0;
        let m = rust_bound(tolerance::check_fft("fft", &gross, &want), "fft")?;
        let bound = m.bound;
        if bound != tolerance::fft_linf_bound(&want) {
            return Err(
                format!("N={n}: the Linf failure's bound {bound:e} is not fft_linf_bound").into(),
            );
        }
        for over in [true, false] {
            let mut got = exact.clone();
            got[i].im = -planted(0.0, bound, over);
            both_agree(
                &format!("fft Linf, N={n}"),
                over,
                tolerance::check_fft("fft", &got, &want),
                c_passes("fft", fft_data(&got, &want))?,
            )?;
        }
    }
    Ok(())
}

/// The L2 criterion: every element inside the Linf bound, the relative L2 error spread over
/// the zero-reference elements (largest at the last) just over or under
/// `sqrt(max(log2 N, 1)) * eps_p`.
fn fft_l2_edge() -> Result<(), Failed> {
    for n in FFT_SIZES {
        let (want, exact) = fft_reference(n);
        let linf = tolerance::fft_linf_bound(&want);
        let weight = |j: usize| if j == n - 1 { 1.25 } else { 1.0 };
        let spread = |amplitude: f64| {
            let mut got = exact.clone();
            for j in (1..n).step_by(2) {
                let x = (weight(j) * amplitude) as f32;
                got[j] = Complex32::new(x, -x);
            }
            got
        };
        // As much error as Linf allows: over the L2 bound at every size here.
        let gross = spread(0.99 * linf / 1.25);
        let m = rust_bound(tolerance::check_fft("fft", &gross, &want), "fft L2")?;
        if !m.formula.starts_with("L2:") {
            return Err(format!("N={n}: expected an L2 failure: {m}").into());
        }
        let ref_l2 = want.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
        let sum_w2: f64 = (1..n).step_by(2).map(|j| 2.0 * weight(j) * weight(j)).sum();
        for over in [true, false] {
            let target = m.bound * ref_l2 * if over { 1.0 + EDGE } else { 1.0 - EDGE };
            let got = spread(target / sum_w2.sqrt());
            both_agree(
                &format!("fft L2, N={n}"),
                over,
                tolerance::check_fft("fft", &got, &want),
                c_passes("fft", fft_data(&got, &want))?,
            )?;
        }
    }
    Ok(())
}

/// `|got_i - ref_i| <= |scale| sqrt(2) B_fft + 4 eps32 |ref_i|` at a zero magnitude (the
/// absolute term alone) and at a magnitude of 1.25 scale (both terms), for scale 1 and 1/N.
fn pipeline_edge() -> Result<(), Failed> {
    for n in [8, 1 << 16] {
        // FFT(a + b) with exact magnitudes: |(0.75, 1)| = 1.25.
        let fft: Vec<Complex64> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    Complex64::new(0.75, 1.0)
                } else {
                    Complex64::new(0.0, 0.0)
                }
            })
            .collect();
        for scale in [1.0f32, 1.0 / n as f32] {
            let want = PipelineReference {
                fft: fft.clone(),
                magnitude: reference::magnitude(&reference::scale(&fft, scale)),
            };
            let exact: Vec<f32> = want.magnitude.iter().map(|&x| x as f32).collect();
            for at in [(n / 2) | 1, n / 2] {
                let mut gross = exact.clone();
                gross[at] += 1.0;
                let m = rust_bound(
                    tolerance::check_pipeline("pipeline", &gross, &want, scale),
                    "pipeline",
                )?;
                for over in [true, false] {
                    let mut got = exact.clone();
                    got[at] = planted(want.magnitude[at], m.bound, over);
                    let complex: Vec<Complex32> =
                        got.iter().map(|&x| Complex32::new(x, 0.0)).collect();
                    let data = Data::default()
                        .u64(n as u64)
                        .f32s(&[scale])
                        .c32s(&complex)
                        .c64s(&fft);
                    both_agree(
                        &format!("pipeline, N={n}, scale={scale:e}, element {at}"),
                        over,
                        tolerance::check_pipeline("pipeline", &got, &want, scale),
                        c_passes("pipeline", data)?,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// `|dre|, |dim| <= max(K, 1) * 1e-4 * sqrt(0.5)` at an element whose reference is zero (row
/// 0 of A is zero, and so is C's element), for K = N = 5 and 64.
fn gemm_edge() -> Result<(), Failed> {
    for n in [5usize, 64] {
        let small = |i: usize, m: usize, o: i64| (i % m) as f32 - o as f32;
        let a: Vec<Complex32> = (0..n * n)
            .map(|p| {
                if p % n == 0 {
                    Complex32::new(0.0, 0.0)
                } else {
                    Complex32::new(small(p, 7, 3), small(p, 5, 2))
                }
            })
            .collect();
        let b: Vec<Complex32> = (0..n * n)
            .map(|p| Complex32::new(small(p, 5, 2), small(p, 3, 1)))
            .collect();
        let c: Vec<Complex32> = (0..n * n)
            .map(|p| {
                if p % n == 0 {
                    Complex32::new(0.0, 0.0)
                } else {
                    Complex32::new(small(p, 3, 1), small(p, 4, 2))
                }
            })
            .collect();
        let beta = Complex32::new(-0.5, 0.25);
        let want = reference::cgemm(
            Transpose::None,
            Transpose::None,
            n,
            n,
            n,
            Complex32::new(1.0, 0.0),
            &a,
            n,
            &b,
            n,
            beta,
            &c,
            n,
        );
        // Small integers and quarters: every sum is exact in f32 and in the C check's f64.
        let exact: Vec<Complex32> = want
            .iter()
            .map(|z| Complex32::new(z.re as f32, z.im as f32))
            .collect();
        let p = n; // row 0, column 1: a zero reference
        if want[p] != Complex64::new(0.0, 0.0) {
            return Err(format!("n={n}: the planted element's reference is {}", want[p]).into());
        }
        let check =
            |got: &[Complex32]| tolerance::check_cgemm("gemm", got, &want, n, n, n, n, false);
        let mut gross = exact.clone();
        gross[p].im = 1.0;
        let m = rust_bound(check(&gross), "gemm")?;
        for over in [true, false] {
            let mut got = exact.clone();
            got[p].im = -planted(0.0, m.bound, over);
            let data = Data::default()
                .u64(n as u64)
                .f64s(&[f64::from(beta.re), f64::from(beta.im)])
                .c32s(&a)
                .c32s(&b)
                .c32s(&c)
                .c32s(&got);
            both_agree(
                &format!("gemm, K=N={n}"),
                over,
                check(&got),
                c_passes("gemm", data)?,
            )?;
        }
    }
    Ok(())
}

/// `||L_ref - L||_F / ||L_ref||_F <= n eps32` over the lower triangle, the reference the
/// identity factor: the error on one off-diagonal element, then spread over all of them.
fn cholesky_edge() -> Result<(), Failed> {
    for n in [2usize, 64] {
        let lower = |p: usize| p % n >= p / n;
        let want: Vec<Complex64> = (0..n * n)
            .map(|p| {
                if p % n == p / n {
                    Complex64::new(1.0, 0.0)
                } else if lower(p) {
                    Complex64::new(0.0, 0.0)
                } else {
                    // The upper triangle is LAPACK's workspace: neither check reads it.
                    Complex64::new(9.0, 9.0)
                }
            })
            .collect();
        let mut exact: Vec<Complex32> = want
            .iter()
            .map(|z| Complex32::new(z.re as f32, z.im as f32))
            .collect();
        for (p, z) in exact.iter_mut().enumerate() {
            if !lower(p) {
                *z = Complex32::new(-3.0, 1.0);
            }
        }
        let off: Vec<usize> = (0..n * n).filter(|&p| lower(p) && p % n != p / n).collect();
        let k = off[off.len() / 2];
        let check = |got: &[Complex32]| {
            tolerance::check_cholesky("cholesky", got, &want, Uplo::Lower, n, n)
        };
        let mut gross = exact.clone();
        gross[k].re = 1.0;
        let m = rust_bound(check(&gross), "cholesky")?;
        // The bound is relative to ||L_ref||_F over the triangle: sqrt(n) for the identity.
        let budget = m.bound * (n as f64).sqrt();
        let weight = |p: usize| if p == k { 1.25 } else { 1.0 };
        let sum_w2: f64 = off.iter().map(|&p| weight(p) * weight(p)).sum();
        for spread in [false, true] {
            for over in [true, false] {
                let mut got = exact.clone();
                if spread {
                    let e = budget * if over { 1.0 + EDGE } else { 1.0 - EDGE } / sum_w2.sqrt();
                    for &p in &off {
                        got[p].re = (weight(p) * e) as f32;
                    }
                } else {
                    got[k].re = -planted(0.0, budget, over);
                }
                let data = Data::default().u64(n as u64).c32s(&got).c64s(&want);
                both_agree(
                    &format!("cholesky, n={n}, spread={spread}"),
                    over,
                    check(&got),
                    c_passes("cholesky", data)?,
                )?;
            }
        }
    }
    Ok(())
}

/// Bit-exact: the same words pass; one word one ULP off, or a zero of the other sign, fails.
fn exact_edge() -> Result<(), Failed> {
    let n = 33;
    let factor = 2_097_152.0f32;
    let input: Vec<Complex32> = (0..n)
        .map(|i| {
            Complex32::new(
                i as f32 / 16.0 - 0.25,
                if i == 4 { 0.0 } else { 0.5 - i as f32 / 64.0 },
            )
        })
        .collect();
    let want: Vec<Complex32> = input.iter().map(|z| z * factor).collect();
    let data = |got: &[Complex32]| {
        Data::default()
            .u64(n as u64)
            .f32s(&[factor])
            .c32s(got)
            .c32s(&input)
    };
    let check = |got: &[Complex32]| tolerance::check_exact_c32("exact", got, &want);
    both_agree(
        "exact, the same words",
        false,
        check(&want),
        c_passes("exact", data(&want))?,
    )?;
    let mut ulp = want.clone();
    ulp[7].im = ulp[7].im.next_up();
    both_agree(
        "exact, one ULP off",
        true,
        check(&ulp),
        c_passes("exact", data(&ulp))?,
    )?;
    let mut zero = want.clone();
    zero[4].im = -0.0;
    both_agree(
        "exact, -0 for +0",
        true,
        check(&zero),
        c_passes("exact", data(&zero))?,
    )?;
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    type Check = fn() -> Result<(), Failed>;
    let checks: [(&str, Check); 6] = [
        ("c_fft_linf_bound_edge", fft_linf_edge),
        ("c_fft_l2_bound_edge", fft_l2_edge),
        ("c_pipeline_bound_edge", pipeline_edge),
        ("c_gemm_bound_edge", gemm_edge),
        ("c_cholesky_bound_edge", cholesky_edge),
        ("c_exact_edge", exact_edge),
    ];
    let why_not = no_compiler();
    if let Some(why) = &why_not {
        eprintln!("repro_bounds: every C check is ignored: {why}");
    }
    let trials = checks
        .into_iter()
        .map(|(name, check)| match &why_not {
            // Run anyway (`--ignored`), it fails: it cannot vouch for anything.
            Some(why) => {
                let why = why.clone();
                Trial::test(name, move || Err(why.into()))
                    .with_kind("ignored: no C compiler")
                    .with_ignored_flag(true)
            }
            None => Trial::test(name, check),
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
