use super::*;
use crate::generate::DataKind;
use crate::model::{FailReason, Mismatch, Outcome};

fn mismatch_of(verdict: Result<String, CaseError>) -> Mismatch {
    match verdict.map_err(CaseError::into_outcome) {
        Err(Outcome::Fail {
            reason: FailReason::Mismatch(m),
        }) => m,
        other => panic!("not a mismatch: {other:?}"),
    }
}

/// The op's verdict is `check_cgemm`'s with K = n on inputs that are not exact: an error of
/// 0.9 times `n * 1e-4 * sqrt(0.5)` passes (above K = 1's bound and far above 4 ULP), 1.1 times
/// fails, named by the peer and the element.
#[test]
fn the_gemm_verdict_holds_c_to_the_k_equals_n_sum_bound() {
    let n = 8;
    let [a, b, c] = [0, 1, 2].map(|k| generate::matrix_of(DataKind::Seeded, 40 + k, n, n));
    let (alpha, beta) = (Complex32::new(1.0, 0.0), Complex32::new(-0.5, 0.25));
    let want = reference::cgemm(
        Transpose::None,
        Transpose::None,
        n,
        n,
        n,
        alpha,
        &a,
        n,
        &b,
        n,
        beta,
        &c,
        n,
    );
    let with_error = |p: usize, err: f64| -> Vec<Complex32> {
        want.iter()
            .enumerate()
            .map(|(i, z)| {
                let re = if i == p { z.re + err } else { z.re };
                Complex32::new(re as f32, z.im as f32)
            })
            .collect()
    };
    let bound = n as f64 * tolerance::GEMM_SUM_TOLERANCE * std::f64::consts::FRAC_1_SQRT_2;
    let what = "cgemm on hip0 read back through OpenCL";
    let got = with_error(19, 0.9 * bound);
    let summary = verdict("hip0", &got, &want, n, n).expect("0.9 of the bound passes");
    let expected = tolerance::check_cgemm(what, &got, &want, n, n, n, n, false).expect("within");
    assert_eq!(summary, expected.to_string());

    let m = mismatch_of(verdict("hip0", &with_error(19, 1.1 * bound), &want, n, n));
    assert_eq!((m.what.as_str(), m.index, m.count), (what, 19, 1));
    assert_eq!(m.bound, bound);
}
