//! Case-file input that a person (or a fuzzer) may write: the parser never panics, every error
//! names file:line:column, and every case it accepts allocates byte counts that fit the
//! harness's limits, so that no impossible size reaches a worker.

use std::path::Path;

use clhip::cases::{Limits, Matrix, case_bytes, check_size, max_size};
use clhip::expectations::Baseline;
use clhip::model::{Api, ClDeviceRef, Op, Pair, PathKind, Peer, SyncMode};
use proptest::prelude::*;

const FILE: &str = "fuzz.toml";

fn pairs() -> Vec<Pair> {
    let cl = ClDeviceRef {
        platform_index: 0,
        device_index: 0,
        label: "pocl0".into(),
    };
    [
        Peer::HOST,
        Peer {
            api: Api::Cuda,
            ordinal: 0,
        },
        Peer {
            api: Api::Hip,
            ordinal: 0,
        },
    ]
    .into_iter()
    .map(|peer| Pair {
        opencl: cl.clone(),
        peer,
        install: None,
        cl_gpu: None,
    })
    .collect()
}

/// Parse, and hold the result to the contract: an error is located inside the text; an
/// accepted matrix has only sizes every op of their group takes, and so do its cases.
fn check_parse(text: &str) -> Result<(), TestCaseError> {
    let limits = Limits::HARNESS;
    match Matrix::parse(Path::new(FILE), text) {
        Err(e) => {
            let lines = text.split('\n').count();
            prop_assert!(
                e.line >= 1 && e.line <= lines,
                "line {} of {lines}: {e}",
                e.line
            );
            prop_assert!(e.column >= 1, "{e}");
            let prefix = format!("{FILE}:{}:{}: ", e.line, e.column);
            prop_assert!(e.to_string().starts_with(&prefix), "{e}");
            prop_assert!(!e.message.is_empty());
        }
        Ok(m) => {
            for g in &m.groups {
                for &op in &g.ops {
                    for &n in &g.sizes {
                        prop_assert!(check_size(op, n, &limits).is_ok(), "{op} n={n}");
                    }
                }
            }
            for case in m.expand(&pairs()) {
                let b = case_bytes(case.op, case.n);
                prop_assert!(b.is_some(), "{}: byte count overflows", case.id());
                let b = b.unwrap_or_else(|| unreachable!());
                prop_assert!(b.buffer <= limits.max_buffer, "{}: {b:?}", case.id());
                prop_assert!(b.total() <= limits.max_total, "{}: {b:?}", case.id());
                // Kernels index with u32: element counts, and handoff's 2 words per element.
                let elements = if case.op.is_matrix() {
                    (case.n as u128) * (case.n as u128)
                } else {
                    case.n as u128
                };
                let words = if case.op == Op::Handoff {
                    2 * elements
                } else {
                    elements
                };
                prop_assert!(words <= u32::MAX as u128, "{}", case.id());
            }
        }
    }
    Ok(())
}

/// Sizes as TOML would spell them: small, near every limit, and the extremes of i64 and u64
/// (TOML integers are i64, so the u64 ones are the parser's to refuse).
fn size_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        // Mostly sizes some op takes, so that files are accepted often enough to test that.
        8 => (0u32..23).prop_map(|k| (1u64 << k).to_string()),
        2 => (1u64..5000).prop_map(|n| n.to_string()),
        1 => (0u32..64).prop_map(|k| (1u128 << k).to_string()),
        1 => (0u32..64, -2i64..=2).prop_map(|(k, d)| ((1i128 << k) + d as i128).to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => Just(u64::MAX.to_string()),
        1 => Just(i64::MAX.to_string()),
        1 => Just(i64::MIN.to_string()),
        1 => Just("2305843009213693953".to_string()),
        1 => Just("0".to_string()),
        1 => Just("1.5".to_string()),
        1 => Just("\"4\"".to_string()),
        1 => Just("0x10".to_string()),
    ]
}

fn name_of<T: Copy + std::fmt::Debug + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> BoxedStrategy<String> {
    prop_oneof![
        12 => proptest::sample::select(all).prop_map(move |v| name(v).to_string()),
        1 => "[a-z+-]{0,12}",
    ]
    .boxed()
}

fn quoted_list(items: Vec<String>) -> String {
    let q: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", q.join(", "))
}

/// A structurally plausible case file: the shapes a person writes, with random names and sizes.
fn plausible_file() -> impl Strategy<Value = String> {
    // Mostly non-empty lists, and at most two sizes: each is held to every op of its group.
    let list = |s: BoxedStrategy<String>, most: usize| {
        prop_oneof![
            1 => Just(Vec::new()),
            12 => proptest::collection::vec(s, 1..=most),
        ]
    };
    let group = (
        list(name_of(PathKind::ALL, PathKind::name), 3),
        // Every path takes `finish`: weighted so that sync/path mismatches do not refuse most.
        list(
            prop_oneof![
                1 => Just("finish".to_string()),
                1 => name_of(SyncMode::ALL, SyncMode::name),
            ]
            .boxed(),
            2,
        ),
        list(name_of(Op::ALL, Op::name), 2),
        list(size_literal().boxed(), 2),
        any::<bool>(),
    )
        .prop_map(|(paths, syncs, ops, sizes, multiline)| {
            let sep = if multiline { ",\n  " } else { ", " };
            format!(
                "[[group]]\npaths = {}\nsyncs = {}\nops = {}\nsizes = [{}]\n",
                quoted_list(paths),
                quoted_list(syncs),
                quoted_list(ops),
                sizes.join(sep)
            )
        });
    (
        prop_oneof![9 => Just(1i64), 1 => any::<i64>()],
        prop_oneof![
            1 => Just(Vec::new()),
            8 => proptest::collection::vec(group, 1..=2),
        ],
    )
        .prop_map(|(version, groups)| format!("version = {version}\n\n{}", groups.join("\n")))
}

/// Text from TOML's alphabet, multi-byte characters included (spans must not split them).
fn toml_ish_text() -> impl Strategy<Value = String> {
    "[\\[\\]={}\",.a-z0-9_ \\n#+\\-é€😀\\t']{0,300}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn plausible_case_files_never_panic_and_accepted_cases_fit(text in plausible_file()) {
        check_parse(&text)?;
    }

    #[test]
    fn toml_ish_noise_never_panics(text in toml_ish_text()) {
        check_parse(&text)?;
        // Baselines are the other input file: the same promise.
        if let Err(e) = Baseline::parse(Path::new("b.csv"), &text) {
            prop_assert!(e.line >= 1 && e.column >= 1, "{e}");
        }
    }

    #[test]
    fn edits_of_the_shipped_matrix_never_panic(
        at in any::<proptest::sample::Index>(),
        cut in 0usize..40,
        insert in prop_oneof![toml_ish_text(), size_literal()],
    ) {
        let text = clhip::cases::DEFAULT_MATRIX;
        let mut start = at.index(text.len() + 1);
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (start + cut).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let edited = format!("{}{insert}{}", &text[..start], &text[end..]);
        check_parse(&edited)?;
    }

    #[test]
    fn size_arithmetic_never_panics_and_agrees_with_the_check(
        op in proptest::sample::select(Op::ALL),
        n in prop_oneof![
            any::<usize>(),
            Just(usize::MAX),
            Just(0usize),
            (0u32..64).prop_map(|k| 1usize << k),
            (0u32..64).prop_map(|k| (1usize << k).wrapping_add(1)),
        ],
    ) {
        let limits = Limits::HARNESS;
        let bytes = case_bytes(op, n);
        if check_size(op, n, &limits).is_ok() {
            let b = bytes.unwrap_or_else(|| unreachable!("accepted sizes have byte counts"));
            prop_assert!(b.buffer <= limits.max_buffer && b.total() <= limits.max_total);
            prop_assert!(max_size(op, &limits).is_some_and(|max| n <= max), "{op} {n}");
        }
        if let Some(b) = bytes {
            // Checked arithmetic: the counts are what exact arithmetic gives.
            let elements = if op.is_matrix() { n as u128 * n as u128 } else { n as u128 };
            prop_assert_eq!(b.buffer as u128, elements * 8);
            prop_assert!(b.total() >= b.buffer);
        }
    }
}

/// The generator must reach both verdicts, or the properties above hold vacuously.
#[test]
fn the_plausible_generator_reaches_both_verdicts() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = plausible_file();
    let (mut accepted, mut refused, mut cases) = (0, 0, 0);
    for _ in 0..2000 {
        let text = strategy
            .new_tree(&mut runner)
            .expect("the generator draws")
            .current();
        match Matrix::parse(Path::new(FILE), &text) {
            Ok(m) => {
                accepted += 1;
                cases += m.expand(&pairs()).len();
            }
            Err(_) => refused += 1,
        }
    }
    eprintln!("{accepted} accepted ({cases} cases), {refused} refused");
    assert!(
        accepted >= 20 && refused >= 20 && cases >= 20,
        "{accepted} {refused} {cases}"
    );
}
