//! Shrinking: the smallest size at which clhip's workers still give a case's outcome, found by
//! running the case at smaller sizes; then, for a fail on data, the simplest input that still
//! fails. The run does this through the runner (the caller hands in a function that runs a list
//! of cases, each on its data, in worker processes), never the reproducer. A size or an input
//! that gives another outcome is never taken.

use crate::generate::DataKind;
use crate::model::{Op, Outcome, OutcomeKind};

use super::ReproCase;

/// Runs cases, each on its data, through clhip's workers; their outcomes in order.
pub type RunCases<'a> = dyn FnMut(&[(ReproCase, DataKind)]) -> anyhow::Result<Vec<Outcome>> + 'a;

/// What shrinking found.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The case at the size to emit.
    pub case: ReproCase,
    /// The outcome there.
    pub outcome: Outcome,
    /// Every size tried, with its outcome kind, smallest first.
    pub tried: Vec<(usize, OutcomeKind)>,
}

impl Shrunk {
    /// One line for the header: from what to what, and what was tried.
    pub fn note(&self, from: usize, kind: OutcomeKind) -> String {
        let tried: Vec<String> = self
            .tried
            .iter()
            .map(|(n, k)| format!("n={n} {k}"))
            .collect();
        let tried = if tried.is_empty() {
            "no smaller size exists".to_string()
        } else {
            format!("tried {}", tried.join(", "))
        };
        if self.case.n == from {
            format!(
                "kept n={from}: no smaller size gave `{kind}` through clhip's workers ({tried})"
            )
        } else {
            format!(
                "shrunk from n={from} to n={}, the smallest size that gave `{kind}` through clhip's workers as n={from} did ({tried})",
                self.case.n
            )
        }
    }
}

/// The sizes below `n` that `op` takes, smallest first: powers of two (a vector op's or a
/// matrix's smallest sizes and every power of two in between).
pub fn candidates(op: Op, n: usize) -> Vec<usize> {
    let smallest = match op {
        Op::Fft | Op::Pipeline => 2,
        _ => 1,
    };
    std::iter::successors(Some(smallest), |&k: &usize| k.checked_mul(2))
        .take_while(|&k| k < n)
        .collect()
}

/// The smallest size whose outcome kind is `kind`, the outcome clhip saw at `case.n`. `run`
/// runs a list of cases through clhip's workers and returns their outcomes in order. Sizes are
/// tried in one batch, since each may crash or fault its worker and a fresh one takes over.
pub fn shrink(
    case: &ReproCase,
    kind: OutcomeKind,
    outcome: Outcome,
    run: &mut RunCases,
) -> anyhow::Result<Shrunk> {
    let sizes = candidates(case.op, case.n);
    let cases: Vec<ReproCase> = sizes.iter().map(|&n| case.with_n(n)).collect();
    let outcomes = if cases.is_empty() {
        Vec::new()
    } else {
        let seeded: Vec<(ReproCase, DataKind)> = cases
            .iter()
            .map(|c| (c.clone(), DataKind::Seeded))
            .collect();
        run(&seeded)?
    };
    if outcomes.len() != cases.len() {
        anyhow::bail!(
            "shrinking {case}: {} cases ran, {} results came back",
            cases.len(),
            outcomes.len()
        );
    }
    let tried: Vec<(usize, OutcomeKind)> = sizes
        .iter()
        .zip(&outcomes)
        .map(|(&n, o)| (n, o.kind()))
        .collect();
    let found = cases
        .into_iter()
        .zip(outcomes)
        .find(|(_, o)| o.kind() == kind);
    Ok(match found {
        Some((case, outcome)) => Shrunk {
            case,
            outcome,
            tried,
        },
        None => Shrunk {
            case: case.clone(),
            outcome,
            tried,
        },
    })
}

/// What simplifying the data found.
#[derive(Debug, Clone)]
pub struct SimplerData {
    /// The data to emit: the first simple kind that gave the outcome, else the seeded draw.
    pub kind: DataKind,
    /// The outcome on those data, when simpler than the seeded draw.
    pub outcome: Option<Outcome>,
    /// Every simple kind tried, with its outcome kind, in the order tried.
    pub tried: Vec<(DataKind, OutcomeKind)>,
}

impl SimplerData {
    /// One line for the header: from what to what, and what was tried.
    pub fn note(&self, kind: OutcomeKind) -> String {
        let tried: Vec<String> = self.tried.iter().map(|(d, k)| format!("{d} {k}")).collect();
        let tried = tried.join(", ");
        if self.kind.is_seeded() {
            format!(
                "kept the seeded draw: no simpler input gave `{kind}` through clhip's workers (tried {tried})"
            )
        } else {
            format!(
                "simplified from the seeded draw to {}, the simplest input that gave `{kind}` through clhip's workers as the seeded draw did (tried {tried})",
                self.kind
            )
        }
    }
}

/// Whether `op` has input data to simplify (the handoff's pattern is its check, not data).
pub fn has_data(op: Op) -> bool {
    matches!(op, Op::Fft | Op::Pipeline | Op::Gemm | Op::Cholesky)
}

/// The simplest of [`DataKind::SIMPLE`] on which `case` still gives `kind`, the outcome clhip
/// saw on the seeded draw; the seeded draw if none does. All are run in one batch.
pub fn simplify_data(
    case: &ReproCase,
    kind: OutcomeKind,
    run: &mut RunCases,
) -> anyhow::Result<SimplerData> {
    let tries: Vec<(ReproCase, DataKind)> = DataKind::SIMPLE
        .iter()
        .map(|&d| (case.clone(), d))
        .collect();
    let outcomes = run(&tries)?;
    if outcomes.len() != tries.len() {
        anyhow::bail!(
            "simplifying the data of {case}: {} cases ran, {} results came back",
            tries.len(),
            outcomes.len()
        );
    }
    let tried: Vec<(DataKind, OutcomeKind)> = DataKind::SIMPLE
        .iter()
        .zip(&outcomes)
        .map(|(&d, o)| (d, o.kind()))
        .collect();
    let found = DataKind::SIMPLE
        .into_iter()
        .zip(outcomes)
        .find(|(_, o)| o.kind() == kind);
    Ok(match found {
        Some((d, o)) => SimplerData {
            kind: d,
            outcome: Some(o),
            tried,
        },
        None => SimplerData {
            kind: DataKind::Seeded,
            outcome: None,
            tried,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail() -> Outcome {
        Outcome::Error {
            reason: "stand-in".into(),
        }
    }

    #[test]
    fn candidates_are_the_op_sizes_below_n() {
        assert_eq!(candidates(Op::Fft, 16), [2, 4, 8]);
        assert_eq!(candidates(Op::Handoff, 5), [1, 2, 4]);
        assert_eq!(candidates(Op::Gemm, 1), Vec::<usize>::new());
        assert_eq!(candidates(Op::Pipeline, 2), Vec::<usize>::new());
    }

    #[test]
    fn the_smallest_size_with_the_same_kind_wins_and_others_are_reported() {
        let case = ReproCase::parse("pocl0+host/copy/finish/fft/n=64").unwrap();
        let mut asked = Vec::new();
        // Sizes 2 and 4 pass, 8 and up give the outcome seen.
        let mut run = |cases: &[(ReproCase, DataKind)]| {
            asked.extend(cases.iter().map(|(c, _)| c.n));
            assert!(cases.iter().all(|(_, d)| d.is_seeded()));
            Ok(cases
                .iter()
                .map(|(c, _)| if c.n >= 8 { fail() } else { Outcome::pass() })
                .collect())
        };
        let s = shrink(&case, OutcomeKind::Error, fail(), &mut run).unwrap();
        assert_eq!(asked, [2, 4, 8, 16, 32]);
        assert_eq!(s.case.n, 8);
        let note = s.note(64, OutcomeKind::Error);
        assert!(note.contains("from n=64 to n=8"), "{note}");
        assert!(
            note.contains("n=2 pass") && note.contains("n=32 error"),
            "{note}"
        );
    }

    #[test]
    fn no_smaller_size_keeps_the_case() {
        let case = ReproCase::parse("pocl0+host/copy/finish/fft/n=8").unwrap();
        let mut run = |cases: &[(ReproCase, DataKind)]| Ok(vec![Outcome::pass(); cases.len()]);
        let s = shrink(&case, OutcomeKind::Error, fail(), &mut run).unwrap();
        assert_eq!(s.case.n, 8);
        assert!(s.note(8, OutcomeKind::Error).starts_with("kept n=8"));
        let mut short = |_: &[(ReproCase, DataKind)]| Ok(Vec::new());
        assert!(shrink(&case, OutcomeKind::Error, fail(), &mut short).is_err());
    }

    /// A planted outcome per data kind: the simplest kind that keeps the outcome wins, and a
    /// kind that would change it is never taken.
    #[test]
    fn the_simplest_data_with_the_same_outcome_wins_and_others_are_refused() {
        let case = ReproCase::parse("pocl0+host/copy/finish/fft/n=8").unwrap();
        let with = |fails: &'static [DataKind]| {
            move |cases: &[(ReproCase, DataKind)]| {
                assert!(cases.iter().all(|(c, _)| c.n == 8));
                Ok(cases
                    .iter()
                    .map(|(_, d)| {
                        if fails.contains(d) {
                            fail()
                        } else {
                            Outcome::pass()
                        }
                    })
                    .collect())
            }
        };
        let s = simplify_data(
            &case,
            OutcomeKind::Error,
            &mut with(&[DataKind::Impulse, DataKind::SmallIntegers]),
        )
        .unwrap();
        assert_eq!(s.kind, DataKind::Impulse);
        let note = s.note(OutcomeKind::Error);
        assert!(
            note.contains("to impulse")
                && note.contains("tried ones pass, impulse error, small-integers error"),
            "{note}"
        );
        // Every simple input passes: the fail needs the seeded data, which are kept.
        let s = simplify_data(&case, OutcomeKind::Error, &mut with(&[])).unwrap();
        assert_eq!(s.kind, DataKind::Seeded);
        assert!(s.outcome.is_none());
        assert!(
            s.note(OutcomeKind::Error)
                .starts_with("kept the seeded draw")
        );
        // The same kind is required, not any non-pass.
        let s = simplify_data(&case, OutcomeKind::Fail, &mut with(&[DataKind::Ones])).unwrap();
        assert_eq!(
            s.kind,
            DataKind::Seeded,
            "an error is not the fail clhip saw"
        );
    }
}
