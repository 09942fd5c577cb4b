use super::*;
use crate::generate::DataKind;
use crate::model::{FailReason, Mismatch, Outcome};

fn rounded(want: &[Complex64]) -> Vec<Complex32> {
    want.iter()
        .map(|z| Complex32::new(z.re as f32, z.im as f32))
        .collect()
}

fn mismatch_of(verdict: Result<String, CaseError>) -> Mismatch {
    match verdict.map_err(CaseError::into_outcome) {
        Err(Outcome::Fail {
            reason: FailReason::Mismatch(m),
        }) => m,
        other => panic!("not a mismatch: {other:?}"),
    }
}

/// The op's verdict is `check_fft`'s on what the peer read: its summary on a pass, its
/// mismatch (named by the peer) on wrong data.
#[test]
fn the_fft_verdict_is_check_fft_on_what_the_peer_read() {
    let input = generate::complex_vec_of(DataKind::Seeded, 7, 64);
    let want = reference::fft_forward(&input);
    let got = rounded(&want);
    let what = "OpenCL FFT output read by hip0";
    let summary = verdict("hip0", &got, &want).expect("the f32-rounded reference passes");
    let expected = tolerance::check_fft(what, &got, &want).expect("within bound");
    assert_eq!(summary, expected.to_string());

    let mut wrong = got.clone();
    wrong[5].im += 1.0;
    let m = mismatch_of(verdict("hip0", &wrong, &want));
    assert_eq!((m.what.as_str(), m.index, m.count), (what, 5, 1));
}
