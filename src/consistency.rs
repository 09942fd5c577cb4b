//! Consistency across identical GPUs: where two GPUs of the same model and driver give
//! different outcomes for the same case, one of them (or its driver state) is suspect: the
//! first thing a fleet operator wants to know. Negative controls race by design (a stale read
//! may or may not be seen), so their differences are counted and set aside, never flagged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::results::CaseResult;

/// One case that came out differently on GPUs that should behave the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inconsistency {
    /// The case without its pair: `cl-svm-fine/finish/fft/n=4096`.
    pub case: String,
    /// The GPU model and driver the pairs share.
    pub gpu: String,
    /// Each pair and the outcome it got.
    pub outcomes: Vec<(String, String)>,
}

/// The consistency check of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consistency {
    /// Flags: cases whose outcome differs between identical GPUs.
    pub flagged: Vec<Inconsistency>,
    /// Negative controls whose outcome differed: expected, not flagged.
    pub control_races: usize,
    /// Groups of two or more identical GPUs compared.
    pub groups: usize,
}

/// One pair's outcome for a case: (pair id, outcome kind, whether a negative control). Cases
/// are keyed by (GPU identity, peer kind | case id without its pair).
type Seen = (String, String, bool);

/// Compares the results of pairs whose GPU identity (`identity`: pair id -> model and driver)
/// is the same. Pairs without an identity (mocks, the host's OpenCL) are not compared.
pub fn check(results: &[CaseResult], identity: &BTreeMap<String, String>) -> Consistency {
    let mut by_case: BTreeMap<(String, String), Vec<Seen>> = BTreeMap::new();
    for r in results {
        let Some(case) = r.work.case() else { continue };
        let pair = case.pair.id();
        let Some(gpu) = identity.get(&pair) else {
            continue;
        };
        let rest = r.id.strip_prefix(&format!("{pair}/")).unwrap_or(&r.id);
        by_case
            .entry((gpu.clone(), format!("{}|{rest}", kind_of_pair(&pair))))
            .or_default()
            .push((
                pair,
                r.outcome.kind().name().to_string(),
                case.is_negative_control(),
            ));
    }
    let mut out = Consistency {
        groups: identity
            .values()
            .fold(BTreeMap::<&String, usize>::new(), |mut m, g| {
                *m.entry(g).or_default() += 1;
                m
            })
            .values()
            .filter(|&&n| n > 1)
            .count(),
        ..Default::default()
    };
    for ((gpu, key), outcomes) in by_case {
        if outcomes.len() < 2 || outcomes.iter().all(|o| o.1 == outcomes[0].1) {
            continue;
        }
        if outcomes.iter().any(|o| o.2) {
            out.control_races += 1;
            continue;
        }
        let case = key
            .split_once('|')
            .map_or(key.clone(), |(_, c)| c.to_string());
        out.flagged.push(Inconsistency {
            case,
            gpu,
            outcomes: outcomes.into_iter().map(|(p, k, _)| (p, k)).collect(),
        });
    }
    out
}

/// `cuda`, `hip` or `host` (`cuda.xgpu` across GPUs): pairs are compared only with pairs of
/// the same kind of peer, and pairs across GPUs only with each other.
fn kind_of_pair(pair: &str) -> String {
    pair.split_once('+')
        .map(|(_, peer)| {
            let (peer, across) = match peer.strip_suffix(crate::model::ACROSS_GPUS) {
                Some(p) => (p, crate::model::ACROSS_GPUS),
                None => (peer, ""),
            };
            format!(
                "{}{across}",
                peer.trim_end_matches(|c: char| c.is_ascii_digit())
            )
        })
        .unwrap_or_default()
}

impl Consistency {
    /// One line per flag, and one saying what was set aside.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .flagged
            .iter()
            .map(|f| {
                let o: Vec<String> = f
                    .outcomes
                    .iter()
                    .map(|(p, k)| format!("{p}: {k}"))
                    .collect();
                format!(
                    "inconsistent across identical GPUs ({}): {}: {}",
                    f.gpu,
                    f.case,
                    o.join(", ")
                )
            })
            .collect();
        if self.control_races > 0 {
            out.push(format!(
                "{} negative controls differed across identical GPUs: they race by design and are not counted",
                self.control_races
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Api, Case, ClDeviceRef, Expectation, Op, Outcome, Pair, PathKind, Peer, SyncMode,
    };
    use crate::results::Work;

    fn on(gpu: usize, path: PathKind, sync: SyncMode, outcome: Outcome) -> CaseResult {
        let case = Case {
            pair: Pair {
                opencl: ClDeviceRef {
                    platform_index: 0,
                    device_index: gpu,
                    label: format!("nvidia{gpu}"),
                },
                peer: Peer {
                    api: Api::Cuda,
                    ordinal: gpu,
                },
                install: None,
                cl_gpu: None,
            },
            path,
            sync,
            op: Op::Handoff,
            n: 4097,
            env: Default::default(),
        };
        CaseResult::new(
            case.id(),
            Work::Case(case),
            outcome,
            Expectation::Unbaselined,
            0.1,
        )
    }

    fn two_h200() -> BTreeMap<String, String> {
        ["nvidia0+cuda0", "nvidia1+cuda1"]
            .into_iter()
            .map(|p| (p.to_string(), "NVIDIA H200, driver 580.159.04".to_string()))
            .collect()
    }

    #[test]
    fn identical_gpus_that_agree_raise_nothing_and_one_planted_difference_one_flag() {
        let fail = || Outcome::unsupported("x");
        let mut results = Vec::new();
        for gpu in 0..2 {
            results.push(on(gpu, PathKind::Copy, SyncMode::Finish, Outcome::pass()));
            results.push(on(gpu, PathKind::ClSvmFine, SyncMode::Finish, fail()));
        }
        let clean = check(&results, &two_h200());
        assert_eq!(clean.flagged, []);
        assert_eq!(clean.groups, 1);
        // GPU 1 given a corrupting plant for one case.
        results[2] = on(
            1,
            PathKind::Copy,
            SyncMode::Finish,
            Outcome::mismatch(crate::model::Mismatch {
                what: "planted".into(),
                index: 0,
                got: "0".into(),
                want: "1".into(),
                count: 1,
                len: 1,
                max_abs_err: 1.0,
                max_rel_err: 1.0,
                bound: 0.0,
                formula: crate::model::BIT_EXACT.into(),
            }),
        );
        let planted = check(&results, &two_h200());
        assert_eq!(planted.flagged.len(), 1, "{:?}", planted.flagged);
        assert_eq!(planted.flagged[0].case, "copy/finish/handoff/n=4097");
        assert!(
            planted.lines()[0].contains("nvidia1+cuda1: fail"),
            "{:?}",
            planted.lines()
        );
    }

    #[test]
    fn negative_controls_that_race_are_set_aside_and_said_so() {
        let results = vec![
            on(0, PathKind::Copy, SyncMode::None, Outcome::pass()),
            on(
                1,
                PathKind::Copy,
                SyncMode::None,
                Outcome::unsupported("stale"),
            ),
        ];
        let c = check(&results, &two_h200());
        assert_eq!(c.flagged, []);
        assert_eq!(c.control_races, 1);
        assert!(c.lines()[0].contains("race by design"));
        // Different GPUs are not compared at all.
        let mut mixed = two_h200();
        mixed.insert(
            "nvidia1+cuda1".into(),
            "NVIDIA H100, driver 580.159.04".into(),
        );
        assert_eq!(check(&results, &mixed).control_races, 0);
    }

    fn on_peer(gpu: usize, api: Api, outcome: Outcome) -> CaseResult {
        let mut r = on(gpu, PathKind::Copy, SyncMode::Finish, outcome);
        let Work::Case(case) = &mut r.work else {
            unreachable!("on() builds a case")
        };
        case.pair.peer.api = api;
        r.id = case.id();
        r
    }

    fn identical(n: usize) -> BTreeMap<String, String> {
        (0..n)
            .flat_map(|g| [format!("nvidia{g}+cuda{g}"), format!("nvidia{g}+hip{g}")])
            .map(|p| (p, "NVIDIA H200, driver 580.159.04".to_string()))
            .collect()
    }

    #[test]
    fn one_gpu_of_three_that_differs_is_flagged() {
        let mut results: Vec<CaseResult> = (0..3)
            .map(|g| on(g, PathKind::Copy, SyncMode::Finish, Outcome::pass()))
            .collect();
        assert_eq!(check(&results, &identical(3)).flagged, []);
        results[2] = on(
            2,
            PathKind::Copy,
            SyncMode::Finish,
            Outcome::unsupported("planted"),
        );
        let c = check(&results, &identical(3));
        assert_eq!(c.flagged.len(), 1, "{:?}", c.flagged);
        assert_eq!(c.flagged[0].outcomes.len(), 3);
    }

    #[test]
    fn a_model_seen_once_is_no_group() {
        let mut identity = BTreeMap::new();
        identity.insert("nvidia0+cuda0".to_string(), "NVIDIA H200".to_string());
        identity.insert("nvidia1+cuda1".to_string(), "NVIDIA H100".to_string());
        assert_eq!(check(&[], &identity).groups, 0);
        identity.insert("nvidia2+cuda2".to_string(), "NVIDIA H100".to_string());
        assert_eq!(check(&[], &identity).groups, 1);
    }

    #[test]
    fn pairs_with_different_peers_are_not_compared() {
        assert_eq!(kind_of_pair("nvidia0+cuda12"), "cuda");
        assert_eq!(kind_of_pair("rocm1+hip1"), "hip");
        assert_eq!(kind_of_pair("pocl0+host"), "host");
        assert_eq!(kind_of_pair("nvidia0+cuda1.xgpu"), "cuda.xgpu");
        // The same GPU model, one driven through CUDA and one through HIP: their outcomes
        // differ for reasons of the peer API, not of the GPU.
        let results = vec![
            on_peer(0, Api::Cuda, Outcome::pass()),
            on_peer(1, Api::Hip, Outcome::unsupported("no HIP interop")),
        ];
        let c = check(&results, &identical(2));
        assert_eq!(c.flagged, [], "{:?}", c.flagged);
        // The check does compare them once the peers agree.
        let results = vec![
            on_peer(0, Api::Hip, Outcome::pass()),
            on_peer(1, Api::Hip, Outcome::unsupported("no HIP interop")),
        ];
        assert_eq!(check(&results, &identical(2)).flagged.len(), 1);
    }
}
