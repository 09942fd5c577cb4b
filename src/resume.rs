//! Resuming a run from its journal (`run --resume NAME.partial`): what the dead run had
//! finished, which cases were running when it died, and whether the run now asked for is the
//! same run (seed, cases, flags, driver fingerprint).
//!
//! The journal ([`crate::output::Journal`]) holds a head line, then one line per case start
//! (`{"started": ID}`) and one per result. A case started with no result after it was running
//! when the run died: it becomes `incomplete`, and is not run again unless asked for; one that
//! was incomplete twice in a row is never run again.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::model::{Outcome, OutcomeKind};
use crate::output::StartLine;
use crate::report::{RunReport, Selection};
use crate::results::CaseResult;

/// What the journal's reason for an in-flight case says.
pub const DIED_DURING: &str = "the run died during this case";

/// What a run must share with the journal it resumes, beyond its selection and fingerprint:
/// the seed and each flag that changes what a case does or how it is judged, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeKey {
    pub seed: u64,
    pub flags: BTreeMap<String, String>,
}

/// A journal as read for a resume.
#[derive(Debug)]
pub struct Journaled {
    pub path: PathBuf,
    pub head: RunReport,
    pub key: Option<ResumeKey>,
    /// The last result of each case, in the order the cases first finished.
    pub results: Vec<CaseResult>,
    /// Cases started with no result after their start, in the order they started.
    pub in_flight: Vec<String>,
    /// Per case, how many of its latest results in a row are `incomplete`.
    pub incomplete_in_a_row: HashMap<String, u32>,
}

#[derive(Deserialize)]
struct Head {
    schema: String,
    report: RunReport,
    #[serde(default)]
    resume: Option<ResumeKey>,
}

/// Reads the journal `path`. A last line cut short (the death that left the journal) is
/// dropped; any other bad line is an error naming the file and line.
pub fn read(path: &Path) -> anyhow::Result<Journaled> {
    let text = crate::input::read_text("a journal", path, crate::input::RESULTS_LIMIT)?;
    read_text(path, &text)
}

pub fn read_text(path: &Path, text: &str) -> anyhow::Result<Journaled> {
    let shown = path.display();
    let mut lines = text.lines();
    let head: Head = match lines.next().map(serde_json::from_str::<Head>) {
        Some(Ok(h)) if h.schema == crate::output::JOURNAL_SCHEMA => h,
        Some(Ok(h)) => bail!(
            "{shown}: journal schema `{}` is not supported (this clhip reads `{}`)",
            h.schema,
            crate::output::JOURNAL_SCHEMA
        ),
        Some(Err(e)) => bail!(
            "{shown}:1:{}: not a clhip journal (`NAME.partial`): {e}",
            e.column()
        ),
        None => bail!("{shown}: empty: not a clhip journal"),
    };
    let rest: Vec<&str> = lines.collect();
    let mut results: Vec<CaseResult> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut started: Vec<String> = Vec::new();
    let mut in_a_row: HashMap<String, u32> = HashMap::new();
    for (i, line) in rest.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if let Ok(s) = serde_json::from_str::<StartLine>(line) {
            started.retain(|id| *id != s.started);
            started.push(s.started);
            continue;
        }
        let r: CaseResult = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(_) if i + 1 == rest.len() => break,
            Err(e) => bail!("{shown}:{}:{}: {e}", i + 2, e.column()),
        };
        started.retain(|id| *id != r.id);
        let streak = in_a_row.entry(r.id.clone()).or_insert(0);
        if r.outcome.kind() == OutcomeKind::Incomplete {
            *streak += 1;
        } else {
            *streak = 0;
        }
        match at.get(&r.id) {
            Some(&k) => results[k] = r,
            None => {
                at.insert(r.id.clone(), results.len());
                results.push(r);
            }
        }
    }
    in_a_row.retain(|_, n| *n > 0);
    Ok(Journaled {
        path: path.to_path_buf(),
        head: head.report,
        key: head.resume,
        results,
        in_flight: started,
        incomplete_in_a_row: in_a_row,
    })
}

impl Journaled {
    /// Refuses a run that is not the journal's: another seed, another case set, other flags,
    /// another driver. Every difference is named.
    pub fn check_same_run(
        &self,
        key: &ResumeKey,
        selection: &Selection,
        fingerprint: &Fingerprint,
    ) -> anyhow::Result<()> {
        let mut diffs = Vec::new();
        if self.head.seed != key.seed {
            diffs.push(format!(
                "the seed: {} in the journal, {} now",
                self.head.seed, key.seed
            ));
        }
        match &self.key {
            None => {
                diffs.push("the flags: the journal records none (written by an older clhip)".into())
            }
            Some(was) => {
                let names: std::collections::BTreeSet<&String> =
                    was.flags.keys().chain(key.flags.keys()).collect();
                for name in names {
                    let (a, b) = (was.flags.get(name), key.flags.get(name));
                    if a != b {
                        diffs.push(format!(
                            "{name}: {} in the journal, {} now",
                            a.map_or("(not given)", String::as_str),
                            b.map_or("(not given)", String::as_str)
                        ));
                    }
                }
            }
        }
        match &self.head.selection {
            None => diffs.push("the case set: the journal records none".into()),
            Some(was) => {
                if was.filters != selection.filters {
                    diffs.push(format!(
                        "the filters: {:?} in the journal, {:?} now",
                        was.filters, selection.filters
                    ));
                }
                if was.devices != selection.devices {
                    diffs.push(format!(
                        "--devices: {:?} in the journal, {:?} now",
                        was.devices, selection.devices
                    ));
                }
                if was.shards != selection.shards {
                    diffs.push("--partition differs".into());
                }
                if was.matrix != selection.matrix {
                    diffs.push(format!(
                        "the case matrix: {} in the journal, {} now",
                        was.matrix, selection.matrix
                    ));
                }
                if was.plan != selection.plan || was.planned != selection.planned {
                    diffs.push(format!(
                        "the cases: {} planned in the journal ({}), {} now ({})",
                        was.planned, was.plan, selection.planned, selection.plan
                    ));
                }
            }
        }
        if &self.head.fingerprint != fingerprint {
            let before = self.head.fingerprint.lines();
            let after = fingerprint.lines();
            let gone: Vec<&String> = before.iter().filter(|l| !after.contains(l)).collect();
            let new: Vec<&String> = after.iter().filter(|l| !before.contains(l)).collect();
            diffs.push(format!(
                "the driver fingerprint: journal's {gone:?}, now {new:?}"
            ));
        }
        if !diffs.is_empty() {
            bail!(
                "{}: not resumed: this run is not the one the journal holds; differing: {}",
                self.path.display(),
                diffs.join("; ")
            );
        }
        Ok(())
    }

    /// The `incomplete` results of the cases that were running when the run died.
    pub fn incomplete_results(
        &self,
        planned: &HashMap<String, crate::results::Planned>,
    ) -> Vec<CaseResult> {
        self.in_flight
            .iter()
            .filter_map(|id| planned.get(id))
            .map(|p| {
                let mut r = CaseResult::new(
                    p.id.clone(),
                    p.work.clone(),
                    Outcome::Incomplete {
                        reason: DIED_DURING.into(),
                    },
                    p.expectation,
                    0.0,
                );
                r.kernel_log = Vec::new();
                r
            })
            .collect()
    }
}

/// The journal's results file: `NAME.partial` is `NAME`'s.
pub fn results_path(journal: &Path) -> anyhow::Result<PathBuf> {
    let name = journal
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{}: not a journal's name", journal.display()))?;
    match name.strip_suffix(".partial") {
        Some(stem) if !stem.is_empty() => Ok(journal.with_file_name(stem)),
        _ => bail!(
            "{}: a journal's name ends `.partial` (give --json for a journal of a long name)",
            journal.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::MockAction;
    use crate::model::Expectation;
    use crate::results::Work;

    fn head(seed: u64) -> String {
        let report = RunReport::new(
            seed,
            Vec::new(),
            Fingerprint::default(),
            std::time::UNIX_EPOCH,
            0.0,
            Vec::new(),
        );
        let mut v = crate::report::journal_head(&report);
        v["resume"] = serde_json::to_value(ResumeKey {
            seed,
            flags: [("--timeout".to_string(), "60".to_string())].into(),
        })
        .unwrap();
        v.to_string()
    }

    fn result(id: &str, outcome: Outcome) -> String {
        serde_json::to_string(&CaseResult::new(
            id.into(),
            Work::Mock(MockAction::Pass),
            outcome,
            Expectation::Pass,
            0.1,
        ))
        .unwrap()
    }

    fn incomplete() -> Outcome {
        Outcome::Incomplete {
            reason: DIED_DURING.into(),
        }
    }

    #[test]
    fn the_case_started_with_no_result_is_in_flight_and_incompletes_are_counted_in_a_row() {
        let text = [
            head(7),
            r#"{"started":"a"}"#.into(),
            result("a", Outcome::pass()),
            r#"{"started":"b"}"#.into(),
            result("b", incomplete()),
            result("c", incomplete()),
            result("c", incomplete()),
            result("d", incomplete()),
            result("d", Outcome::pass()),
            r#"{"started":"e"}"#.into(),
            // Cut short by the death that left the journal.
            r#"{"id":"e","wo"#.into(),
        ]
        .join("\n");
        let j = read_text(Path::new("r.json.partial"), &text).unwrap();
        assert_eq!(j.in_flight, ["e"]);
        let ids: Vec<&str> = j.results.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        assert_eq!(
            j.results[3].outcome,
            Outcome::pass(),
            "the latest result is kept"
        );
        let mut streaks: Vec<(&str, u32)> = j
            .incomplete_in_a_row
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        streaks.sort();
        assert_eq!(streaks, [("b", 1), ("c", 2)]);
        // A bad line that is not the last is an error at its line.
        let bad = [head(7), "{nonsense".into(), result("a", Outcome::pass())].join("\n");
        let err = read_text(Path::new("r.json.partial"), &bad)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("r.json.partial:2:"), "{err}");
    }

    #[test]
    fn another_seed_flag_or_driver_is_named() {
        let j = read_text(Path::new("j.partial"), &head(7)).unwrap();
        let mut key = ResumeKey {
            seed: 8,
            flags: [("--timeout".to_string(), "30".to_string())].into(),
        };
        key.flags.insert("--retries".into(), "2".into());
        let selection = j.head.selection.clone().unwrap_or(Selection {
            filters: Vec::new(),
            devices: Vec::new(),
            matrix: String::new(),
            planned: 0,
            plan: String::new(),
            shards: Vec::new(),
        });
        let fp = Fingerprint {
            os_kernel: "6.9".into(),
            ..Default::default()
        };
        let err = j
            .check_same_run(&key, &selection, &fp)
            .unwrap_err()
            .to_string();
        for want in [
            "the seed: 7 in the journal, 8 now",
            "--timeout: 60 in the journal, 30 now",
            "--retries: (not given) in the journal, 2 now",
            "the case set: the journal records none",
            "the driver fingerprint",
        ] {
            assert!(err.contains(want), "no `{want}` in {err}");
        }
        assert_eq!(
            results_path(Path::new("reports/latest.json.partial")).unwrap(),
            Path::new("reports/latest.json")
        );
        assert!(results_path(Path::new("latest.json")).is_err());
    }
}
