//! A baseline: the known outcome per case id for one driver, as deqp-runner writes it
//! (`case-id,outcome` lines). It turns a driver's known non-passes into expected ones; a case
//! it does not list passed on that driver.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::cases::{InputError, column_of};
use crate::model::{Case, Expectation, OutcomeKind};

/// Known outcomes per case id for one driver (deqp-runner's baseline: `case-id,outcome`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    pub known: HashMap<String, OutcomeKind>,
    /// The file it was read from, and each listed id's line there, to name as the source.
    pub file: PathBuf,
    pub lines: HashMap<String, usize>,
}

impl Baseline {
    pub fn load(file: &Path) -> Result<Self, InputError> {
        let text = crate::input::read_text("a baseline", file, crate::input::BASELINE_LIMIT)?;
        Self::parse(file, &text)
    }

    pub fn parse(file: &Path, text: &str) -> Result<Self, InputError> {
        let mut known = HashMap::new();
        let mut lines = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |column: usize, message: String| InputError {
                file: file.to_path_buf(),
                line: i + 1,
                column,
                message,
            };
            let Some((id, outcome)) = line.split_once(',') else {
                return Err(at(1, "expected `case-id,outcome`".into()));
            };
            let kind: OutcomeKind = outcome.trim().parse().map_err(|e: String| {
                // The outcome's first character, past the comma and any spaces.
                let after = raw.find(',').map_or(0, |c| c + 1);
                let start = after + (raw[after..].len() - raw[after..].trim_start().len());
                at(column_of(raw, start), e)
            })?;
            if kind == OutcomeKind::Pass {
                return Err(at(
                    1,
                    "a baseline lists non-passes only; remove this line".into(),
                ));
            }
            if kind == OutcomeKind::Error {
                return Err(at(
                    column_of(raw, raw.find(',').map_or(0, |c| c + 1)),
                    "`error` is the harness's own failure, never a driver's known outcome".into(),
                ));
            }
            if id.trim().is_empty() {
                return Err(at(1, "a case id is missing before the comma".into()));
            }
            if known.insert(id.trim().to_string(), kind).is_some() {
                return Err(at(1, format!("case `{}` is listed twice", id.trim())));
            }
            lines.insert(id.trim().to_string(), i + 1);
        }
        Ok(Baseline {
            known,
            file: file.to_path_buf(),
            lines,
        })
    }

    /// Where this baseline's known outcome for `id` is written: `baseline b.csv:3`.
    pub fn source_of(&self, id: &str) -> Option<String> {
        let line = self.lines.get(id)?;
        Some(format!("baseline {}:{line}", self.file.display()))
    }

    /// A baseline text from a run: every non-pass that is not already expected by its nature
    /// (a negative control's fail), `unsupported` and `skip` included, in run order, with a
    /// header naming the source. A case the baseline does not list passed on that driver, so
    /// a later run that cannot do it any more (pass -> unsupported) is a regression. Harness
    /// errors are never a driver's known behaviour and are left out.
    pub fn from_results(results: &[crate::results::CaseResult], source: &str) -> String {
        let mut out = format!("# known outcomes, from {source}\n");
        for r in results {
            let kind = r.outcome.kind();
            let control = r.work.case().is_some_and(Case::is_negative_control);
            let known = !matches!(kind, OutcomeKind::Pass | OutcomeKind::Error);
            if known && !(control && kind == OutcomeKind::Fail) {
                out.push_str(&format!("{},{}\n", r.id, kind));
            }
        }
        out
    }

    /// Ids this baseline lists that no case of `cases` has, sorted: a case renamed, removed or
    /// left out by a filter, whose entry now expects nothing. The runner warns about them.
    pub fn unmatched(&self, cases: &[Case]) -> Vec<String> {
        let planned: HashSet<String> = cases.iter().map(Case::id).collect();
        let mut out: Vec<String> = self
            .known
            .keys()
            .filter(|id| !planned.contains(*id))
            .cloned()
            .collect();
        out.sort();
        out
    }

    /// What this baseline expects of `case`: its listed outcome, else a negative control's
    /// latitude, else a pass (the baseline's driver passed it).
    pub fn expectation(&self, case: &Case) -> Expectation {
        match self.known.get(&case.id()) {
            Some(kind) => Expectation::Known(*kind),
            None if case.is_negative_control() => Expectation::NegativeControl,
            None => Expectation::Pass,
        }
    }

    /// What a run with no baseline expects of `case`: nothing is known to have passed before.
    pub fn unbaselined(case: &Case) -> Expectation {
        if case.is_negative_control() {
            Expectation::NegativeControl
        } else {
            Expectation::Unbaselined
        }
    }
}

#[cfg(test)]
mod tests;
