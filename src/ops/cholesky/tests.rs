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

const N: usize = 6;

/// The HPD matrix's reference factor and the non-HPD matrix's reference info, as the op makes
/// them, and the factor a correct cpotrf returns in f32.
fn references() -> (Arc<References>, Vec<Complex32>) {
    let hpd = generate::hpd_matrix_of(DataKind::Seeded, 11, N, N);
    let (non_hpd, _) = generate::non_hpd_matrix_of(DataKind::Seeded, 12, N, N);
    let factored = reference::cholesky(Uplo::Lower, N, &hpd, N);
    let want_info = reference::cholesky(Uplo::Lower, N, &non_hpd, N).expect_err("not HPD");
    let factor = factored
        .as_ref()
        .expect("HPD")
        .iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect();
    (Arc::new((factored, want_info)), factor)
}

/// The op's verdict takes its three checks in the order the steps ran, each named by the peer
/// and the input: the HPD matrix's info (before any reference is made), its factor, the non-HPD
/// matrix's info. The summary says the non-HPD info agreed.
#[test]
fn the_cholesky_verdict_checks_info_factor_and_non_hpd_info_in_order() {
    let (refs, factor) = references();
    let want_info = refs.1 as i32;
    assert!(want_info > 0);
    let given = || refs.clone();
    let summary = verdict("hip0", (0, &factor, want_info), given, N, N).expect("right");
    let factor_check = tolerance::check_cholesky(
        "cpotrf factor on hip0 read back through OpenCL",
        &factor,
        refs.0.as_ref().unwrap(),
        Uplo::Lower,
        N,
        N,
    )
    .expect("within bound");
    assert_eq!(
        summary,
        format!("{factor_check}; non-HPD info {want_info} as the reference")
    );

    // A wrong info on the HPD matrix fails first, wrong factor and all, with no reference made.
    let mut wrong_factor = factor.clone();
    wrong_factor[N + 2].re += 1.0;
    let never = || -> Arc<References> { panic!("a reference made after a wrong HPD info") };
    let m = mismatch_of(verdict("hip0", (2, &wrong_factor, want_info), never, N, N));
    assert_eq!(m.what, "cpotrf info on hip0 (HPD input)");
    assert_eq!((m.got.as_str(), m.want.as_str()), ("info = 2", "info = 0"));

    // A wrong factor fails before a wrong non-HPD info.
    let m = mismatch_of(verdict("hip0", (0, &wrong_factor, 0), given, N, N));
    assert_eq!(
        (m.what.as_str(), m.index),
        ("cpotrf factor on hip0 read back through OpenCL", N + 2)
    );

    // A right factor and a wrong non-HPD info.
    let m = mismatch_of(verdict("hip0", (0, &factor, want_info + 1), given, N, N));
    assert_eq!(m.what, "cpotrf info on hip0 (non-HPD input)");
    assert_eq!(m.want, format!("info = {want_info}"));
}
