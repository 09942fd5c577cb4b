use super::*;
use crate::model::{FailReason, Mismatch, Outcome};

fn mismatch_of(verdict: Result<String, CaseError>) -> Mismatch {
    match verdict.map_err(CaseError::into_outcome) {
        Err(Outcome::Fail {
            reason: FailReason::Mismatch(m),
        }) => m,
        other => panic!("not a mismatch: {other:?}"),
    }
}

/// The reference's magnitudes as the magnitude stage writes them, `(|x|, 0)`, in f32.
fn written(want: &PipelineReference) -> Vec<Complex32> {
    want.magnitude
        .iter()
        .map(|&m| Complex32::new(m as f32, 0.0))
        .collect()
}

/// The magnitude stage writes `(|x|, 0)`: a right magnitude with a non-zero imaginary part
/// is wrong data at that element, and `(|x|, 0)` itself passes.
#[test]
fn a_magnitude_with_an_imaginary_part_is_wrong_data() {
    let n = 64;
    let [a, b] = input_pair(DataKind::Seeded, 3, n);
    let scale = scale_of(n);
    let want = reference::pipeline(&a, &b, scale);
    let mut got = written(&want);
    check_output("magnitudes", &got, &want, scale).expect("(|x|, 0) passes");
    got[9].im = 1e-30;
    let m = match check_output("magnitudes", &got, &want, scale) {
        Err(CaseError::Mismatch(m)) => m,
        other => panic!("not a mismatch: {other:?}"),
    };
    assert_eq!((m.index, m.count, m.got.as_str()), (9, 1, "NaN"));
}

/// The op's verdict is the magnitudes' check: its summary on a pass, its mismatch (named by the
/// peer that scaled) on wrong data.
#[test]
fn the_pipeline_verdict_is_the_magnitude_check_on_what_opencl_read() {
    let n = 64;
    let [a, b] = input_pair(DataKind::Seeded, 5, n);
    let scale = scale_of(n);
    let want = reference::pipeline(&a, &b, scale);
    let got = written(&want);
    let what = "pipeline magnitude (scaled on hip0) read back through OpenCL";
    let summary = verdict("hip0", &got, &want, scale).expect("the f32 magnitudes pass");
    let expected = check_output(what, &got, &want, scale).expect("within bound");
    assert_eq!(summary, expected.to_string());

    let mut wrong = got.clone();
    wrong[17].re += 1.0;
    let m = mismatch_of(verdict("hip0", &wrong, &want, scale));
    assert_eq!((m.what.as_str(), m.index, m.count), (what, 17, 1));
}
