//! `clhip bench refs`: how long the CPU side of a case takes (input generation and the f64
//! references), so that a slow case can be blamed on the right machine. The pipeline's 4,194,304
//! point FFT is the one that matters: it runs once per pipeline/fft case.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Context;
use num_complex::Complex32;

use crate::generate::{self, SEED_LEN};
use crate::reference::{self, Transpose, Uplo};

/// First call and steady-state timings of one reference.
struct Timing {
    what: String,
    first: Duration,
    steady: Vec<Duration>,
}

impl Timing {
    /// Times `f` once cold, then `runs` more times. `f`'s result is returned to the caller
    /// (and so cannot be optimised away).
    fn measure<T>(what: impl Into<String>, runs: usize, mut f: impl FnMut() -> T) -> (Self, T) {
        let t = Instant::now();
        let mut last = f();
        let first = t.elapsed();
        let mut steady = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            last = f();
            steady.push(t.elapsed());
        }
        steady.sort();
        let timing = Timing {
            what: what.into(),
            first,
            steady,
        };
        (timing, last)
    }

    fn median(&self) -> Option<Duration> {
        self.steady.get(self.steady.len() / 2).copied()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Times the CPU references and prints a table to `out`:
/// - input generation for the pipeline's vector (4,194,304 complex f32);
/// - the f64 reference FFT at that size: planning (twiddles), then the first call (f32 -> f64
///   conversion, scratch allocation, transform) apart from the median of 5 steady-state calls;
/// - cgemm at n = 512 and cholesky at n = 1024 (and the HPD input it needs).
///
pub fn run_refs(out: &mut dyn Write) -> anyhow::Result<()> {
    let mut rows = Vec::new();

    let (t, input) = Timing::measure(format!("generate::complex_vec n={SEED_LEN}"), 5, || {
        generate::complex_vec(0, SEED_LEN)
    });
    rows.push(t);

    // Planning is process-wide and cached: this row is ~0 if this process already planned
    // 2^22. The FFT itself runs on a fresh thread so its first call includes the per-thread
    // scratch allocation, as a worker's first case does.
    let (t, ()) = Timing::measure(
        format!("reference::prepare_fft n={SEED_LEN} (plan)"),
        0,
        || reference::prepare_fft(SEED_LEN),
    );
    rows.push(t);
    let fft = std::thread::scope(|s| {
        s.spawn(|| {
            let (t, y) = Timing::measure(format!("reference::fft_forward n={SEED_LEN}"), 5, || {
                reference::fft_forward(&input)
            });
            (t, y.len())
        })
        .join()
    });
    let (t, len) = fft.map_err(|_| anyhow::anyhow!("reference FFT thread panicked"))?;
    anyhow::ensure!(len == SEED_LEN, "reference FFT returned {len} points");
    rows.push(t);
    drop(input);

    let n = 512;
    let a = generate::matrix(1, n, n, n);
    let b = generate::matrix(2, n, n, n);
    let c = vec![Complex32::new(0.0, 0.0); n * n];
    let (one, zero) = (Complex32::new(1.0, 0.0), Complex32::new(0.0, 0.0));
    let (t, _) = Timing::measure(format!("reference::cgemm n={n}"), 3, || {
        reference::cgemm(
            Transpose::None,
            Transpose::None,
            n,
            n,
            n,
            one,
            &a,
            n,
            &b,
            n,
            zero,
            &c,
            n,
        )
    });
    rows.push(t);

    let n = 1024;
    let (t, hpd) = Timing::measure(format!("generate::hpd_matrix n={n}"), 1, || {
        generate::hpd_matrix(3, n, n)
    });
    rows.push(t);
    let (t, factor) = Timing::measure(format!("reference::cholesky n={n}"), 3, || {
        reference::cholesky(Uplo::Lower, n, &hpd, n)
    });
    factor.map_err(|info| anyhow::anyhow!("generated HPD matrix did not factor: info {info}"))?;
    rows.push(t);

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    writeln!(
        out,
        "CPU references ({threads} hardware threads, rayon pool {})",
        rayon_threads()
    )
    .context("writing bench table")?;
    writeln!(
        out,
        "{:<40} {:>12} {:>12} {:>12}",
        "step", "first call", "median", "min"
    )?;
    for r in &rows {
        let median = r.median().map_or_else(|| "-".into(), ms);
        let min = r.steady.first().copied().map_or_else(|| "-".into(), ms);
        writeln!(
            out,
            "{:<40} {:>12} {:>12} {:>12}",
            r.what,
            ms(r.first),
            median,
            min
        )?;
    }
    writeln!(
        out,
        "median and min over the calls after the first: 5 for generation and FFT, 3 for cgemm and cholesky, 1 for hpd_matrix"
    )?;
    Ok(())
}

/// faer's `Par::rayon(0)` uses rayon's global pool: what cgemm and cholesky get.
fn rayon_threads() -> usize {
    faer::Par::rayon(0).degree()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo test --release --lib bench -- --ignored --nocapture` prints the table.
    #[test]
    #[ignore = "a benchmark: run in release with --ignored --nocapture"]
    fn print_reference_timings() {
        let mut out = Vec::new();
        run_refs(&mut out).expect("bench");
        let text = String::from_utf8(out).expect("utf-8");
        print!("{text}");
        assert!(text.contains("fft_forward"));
    }
}
