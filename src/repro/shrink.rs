//! Shrinking: the smallest size at which clhip's workers still give a case's outcome, found by
//! running the case at smaller sizes. The run does this through the runner (the caller hands in
//! a function that runs a list of cases in worker processes), never the reproducer.

use crate::model::{Op, Outcome, OutcomeKind};

use super::ReproCase;

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
    run: &mut dyn FnMut(&[ReproCase]) -> anyhow::Result<Vec<Outcome>>,
) -> anyhow::Result<Shrunk> {
    let sizes = candidates(case.op, case.n);
    let cases: Vec<ReproCase> = sizes.iter().map(|&n| case.with_n(n)).collect();
    let outcomes = if cases.is_empty() {
        Vec::new()
    } else {
        run(&cases)?
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
        let mut run = |cases: &[ReproCase]| {
            asked.extend(cases.iter().map(|c| c.n));
            Ok(cases
                .iter()
                .map(|c| if c.n >= 8 { fail() } else { Outcome::pass() })
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
        let mut run = |cases: &[ReproCase]| Ok(vec![Outcome::pass(); cases.len()]);
        let s = shrink(&case, OutcomeKind::Error, fail(), &mut run).unwrap();
        assert_eq!(s.case.n, 8);
        assert!(s.note(8, OutcomeKind::Error).starts_with("kept n=8"));
        let mut short = |_: &[ReproCase]| Ok(Vec::new());
        assert!(shrink(&case, OutcomeKind::Error, fail(), &mut short).is_err());
    }
}
