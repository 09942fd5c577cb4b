//! What an exploration found, for people and for `run`: a case file of the shrunk failures
//! (`run --cases found.toml` runs them again by their ids), and a reproducer of each.

use std::path::{Path, PathBuf};

use crate::escape::terminal_line;
use crate::ops::Plant;
use crate::repro::{self, AlreadyShrunk, Made};

use super::{Explored, Failure};

/// The file name of the case file in the output directory.
pub const CASE_FILE: &str = "found.toml";

/// The command that runs `failure`'s shrunk case again from the case file at `case_file`.
pub fn rerun_command(
    failure: &Failure,
    seed: u64,
    case_file: &Path,
    plant: Option<Plant>,
) -> String {
    let plant = plant
        .map(|p| format!(" --plant {}", plant_name(p)))
        .unwrap_or_default();
    format!(
        "clhip run --seed {seed}{plant} --cases {} '{}'",
        case_file.display(),
        failure.shrunk.id
    )
}

/// The failures as a case file of `run`'s format, one group per failure with its shrunk case
/// alone, each commented with what was found and how it was shrunk. None without failures.
pub fn case_file(explored: &Explored, seed: u64, plant: Option<Plant>) -> Option<String> {
    if explored.failures.is_empty() {
        return None;
    }
    let mut t = format!(
        "# Failures `clhip explore --seed {seed}` found, each shrunk to its smallest size. Run one\n\
         # again by its id: clhip run --seed {seed}{} --cases {CASE_FILE} '<id>'\n\
         version = 1\n",
        plant
            .map(|p| format!(" --plant {}", plant_name(p)))
            .unwrap_or_default()
    );
    for (k, f) in explored.failures.iter().enumerate() {
        let c = f.case();
        let comment = |s: &str| format!("# {}\n", terminal_line(s));
        t.push('\n');
        t.push_str("[[group]]\n");
        t.push_str(&comment(&format!(
            "{}: {}",
            f.kind,
            f.shrunk.outcome.reason()
        )));
        t.push_str(&comment(&format!(
            "found as {}{}; {}",
            f.found.id,
            if f.also.is_empty() {
                String::new()
            } else {
                format!(" and {} more cases of this combination", f.also.len())
            },
            f.shrink_note()
        )));
        let name = toml::Value::String(format!("failure {}: {} {}", k + 1, f.kind, f.shrunk.id));
        t.push_str(&format!("name = {name}\n"));
        t.push_str(&format!("paths = [\"{}\"]\n", c.path));
        t.push_str(&format!("syncs = [\"{}\"]\n", c.sync));
        t.push_str(&format!("ops = [\"{}\"]\n", c.op));
        t.push_str(&format!("sizes = [{}]\n", c.n));
    }
    Some(t)
}

fn plant_name(p: Plant) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// How a reproducer is made for each failure.
#[derive(Debug, Clone)]
pub struct ReproOptions {
    pub seed: u64,
    pub plant: Option<Plant>,
    pub timeout_s: f64,
    pub rocm_path: Option<PathBuf>,
    /// The driver fingerprint's lines of this machine.
    pub fingerprint: Vec<String>,
}

/// The directory of failure `k`'s reproducer (0-based) in `dir`.
pub fn repro_dir(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("repro-{}", k + 1))
}

/// Writes `failure`'s reproducer into `dir` with `repro::make`, at its shrunk size, its data
/// still simplified where it is wrong data.
pub fn write_reproducer(
    failure: &Failure,
    dir: &Path,
    o: &ReproOptions,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<Made> {
    let request = repro::Request {
        case: failure.shrunk.id.clone(),
        seed: Some(o.seed),
        output: dir.to_path_buf(),
        from: None,
        no_shrink: false,
        plant: o.plant,
        timeout_s: o.timeout_s,
        rocm_path: o.rocm_path.clone(),
        shrunk: Some(AlreadyShrunk {
            outcome: failure.shrunk.outcome.clone(),
            seen_from: format!("clhip explore --seed {} on this machine", o.seed),
            note: failure.shrink_note(),
            fingerprint: o.fingerprint.clone(),
            fingerprint_from: "probed on this machine by clhip explore".into(),
        }),
    };
    repro::make(&request, say)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Case, ClDeviceRef, Op, Outcome, OutcomeKind, Pair, PathKind, Peer, SyncMode,
    };
    use crate::results::{CaseResult, Work};

    fn result(n: usize, outcome: Outcome) -> CaseResult {
        let case = Case {
            pair: Pair {
                opencl: ClDeviceRef {
                    platform_index: 0,
                    device_index: 0,
                    label: "pocl0".into(),
                },
                peer: Peer::HOST,
                install: None,
                cl_gpu: None,
            },
            path: PathKind::Copy,
            sync: SyncMode::Finish,
            op: Op::Handoff,
            n,
            env: Default::default(),
        };
        CaseResult::new(
            case.id(),
            Work::Case(case),
            outcome,
            crate::model::Expectation::Pass,
            0.0,
        )
    }

    /// The case file parses as a case matrix whose one case per failure is the shrunk case,
    /// and a driver's text in a reason cannot break out of its comment.
    #[test]
    fn the_case_file_is_a_matrix_of_the_shrunk_cases() {
        let fail = Outcome::Error {
            reason: "line one\n[[group]]\npaths = [\"x\"]".into(),
        };
        let failure = Failure {
            combination: 0,
            kind: OutcomeKind::Fail,
            found: result(400_001, fail.clone()),
            also: vec!["x".into()],
            shrunk: result(262_145, fail),
            tried: vec![(262_145, OutcomeKind::Fail)],
            ran_out: false,
        };
        let explored = Explored {
            results: Vec::new(),
            combinations: Vec::new(),
            explored: 1,
            explore_s: 1.0,
            repeats: 0,
            exhausted: false,
            failures: vec![failure.clone()],
            stopped: None,
        };
        let text = case_file(&explored, 7, Some(Plant::Straddle2Mib)).unwrap();
        assert!(text.contains("--plant straddle-2mib"), "{text}");
        let m = crate::cases::Matrix::parse(Path::new(CASE_FILE), &text).unwrap();
        let pair = failure.case().pair.clone();
        let ids: Vec<String> = m.expand(&[pair]).iter().map(Case::id).collect();
        assert_eq!(ids, ["pocl0+host/copy/finish/handoff/n=262145"]);
        assert!(text.contains("from n=400001 to n=262145"), "{text}");
        assert_eq!(
            rerun_command(&failure, 7, Path::new("out/found.toml"), None),
            "clhip run --seed 7 --cases out/found.toml 'pocl0+host/copy/finish/handoff/n=262145'"
        );
        let empty = Explored {
            failures: Vec::new(),
            ..explored
        };
        assert!(case_file(&empty, 7, None).is_none());
    }
}
