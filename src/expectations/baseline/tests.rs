use std::path::Path;

use super::*;
use crate::cases::Matrix;
use crate::model::{ClDeviceRef, Pair, Peer, SyncMode};

fn pair() -> Pair {
    Pair {
        opencl: ClDeviceRef {
            platform_index: 0,
            device_index: 0,
            label: "pocl0".into(),
        },
        peer: Peer::HOST,
        install: None,
        cl_gpu: None,
    }
}

#[test]
fn baseline_ids_no_case_has_are_reported() {
    let cases = Matrix::default_matrix().expand(&[pair()]);
    let kept = cases[0].id();
    let b = Baseline::parse(
        Path::new("b.csv"),
        &format!("zz/gone,fail\n{kept},fault\naa/renamed,crash\n"),
    )
    .unwrap();
    assert_eq!(b.unmatched(&cases), ["aa/renamed", "zz/gone"]);
    assert_eq!(b.unmatched(&cases[..1]).len(), 2);
    assert_eq!(b.unmatched(&[]).len(), 3);
    assert!(Baseline::default().unmatched(&cases).is_empty());
    // Each entry names its own line as the source of its known outcome.
    assert_eq!(b.source_of(&kept).as_deref(), Some("baseline b.csv:2"));
    assert_eq!(b.source_of("not/listed"), None);
}

#[test]
fn columns_count_characters_and_empty_ids_and_errors_are_refused() {
    let e = Baseline::parse(Path::new("b.csv"), "a/b, FAULT\n").unwrap_err();
    assert_eq!((e.line, e.column), (1, 6), "the F of FAULT: {e}");
    let e = Baseline::parse(Path::new("b.csv"), ",fault\n").unwrap_err();
    assert!(e.message.contains("missing"), "{e}");
    let e = Baseline::parse(Path::new("b.csv"), "a/b,error\n").unwrap_err();
    assert!(e.message.contains("harness"), "{e}");
}

#[test]
fn baseline_parses_and_locates_errors() {
    let b = Baseline::parse(
        Path::new("b.csv"),
        "# known on driver X\npocl0+host/copy/finish/fft/n=4,fault\n",
    )
    .unwrap();
    assert_eq!(
        b.known["pocl0+host/copy/finish/fft/n=4"],
        OutcomeKind::Fault
    );
    let e = Baseline::parse(Path::new("b.csv"), "a,fail\nb,flop\n").unwrap_err();
    assert_eq!((e.line, e.column), (2, 3), "{e}");
    assert!(e.message.contains("flop"), "{e}");
    let e = Baseline::parse(Path::new("b.csv"), "a fail\n").unwrap_err();
    assert!(e.to_string().starts_with("b.csv:1:1: expected"), "{e}");
}

#[test]
fn negative_controls_get_their_expectation() {
    let b = Baseline::default();
    let mut c = Matrix::default_matrix().expand(&[pair()])[0].clone();
    c.sync = SyncMode::None;
    assert_eq!(b.expectation(&c), Expectation::NegativeControl);
    c.sync = SyncMode::Finish;
    assert_eq!(b.expectation(&c), Expectation::Pass);
}

#[test]
fn a_variant_case_round_trips_through_a_baseline_line() {
    let case = Case {
        pair: pair(),
        path: crate::model::PathKind::Copy,
        sync: SyncMode::Finish,
        op: crate::model::Op::Handoff,
        n: 64,
        env: crate::model::EnvVariant::new([("HSA_XNACK", "1"), ("AMD_SERIALIZE_COPY", "3")])
            .unwrap(),
    };
    let result = crate::results::CaseResult::new(
        case.id(),
        crate::results::Work::Case(case.clone()),
        crate::model::Outcome::unsupported("no"),
        Expectation::Pass,
        0.1,
    );
    let text = Baseline::from_results(&[result], "a run");
    // One comma per line: the variant's variables are joined otherwise.
    assert!(
        text.contains(
            "pocl0+host/copy/finish/handoff/n=64/env:AMD_SERIALIZE_COPY=3+HSA_XNACK=1,unsupported\n"
        ),
        "{text}"
    );
    let b = Baseline::parse(Path::new("b.csv"), &text).unwrap();
    assert_eq!(
        b.expectation(&case),
        Expectation::Known(OutcomeKind::Unsupported)
    );
}
