//! The results file (the record a matrix diff is made from): the run's model ([`RunReport`],
//! [`RunStatus`], [`Summary`]), writing and loading it, and the head of a run's journal.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::model::{OutcomeKind, Verdict};
use crate::results::CaseResult;

/// The results file format this build writes and reads.
pub const SCHEMA: &str = "clhip-results/1";

/// One run, as written to `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// [`SCHEMA`]; a reader refuses any other.
    pub schema: String,
    pub clhip_version: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub wall_s: f64,
    pub seed: u64,
    pub command: Vec<String>,
    pub fingerprint: Fingerprint,
    pub results: Vec<CaseResult>,
    pub summary: Summary,
    /// Whether the run got to the end of its plan.
    #[serde(default)]
    pub status: RunStatus,
    /// Planned cases with no result (an interrupted or stopped run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
    /// Baseline entries that match no case of the matrix on this machine: expectations that
    /// no longer look at anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_baseline: Vec<String>,
    /// OpenCL vendor libraries that crashed, hung or exited while being probed: findings in
    /// themselves, and a non-zero exit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken_vendors: Vec<String>,
    /// Cases whose outcome differs between GPUs of the same model and driver.
    #[serde(default)]
    pub consistency: crate::consistency::Consistency,
}

/// How a run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum RunStatus {
    /// Every planned case has a result.
    #[default]
    Complete,
    /// Still running, or the runner died: a journal's state.
    InProgress,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// Workers kept failing to start.
    Stopped { why: String },
}

impl RunStatus {
    pub fn describe(&self) -> String {
        match self {
            RunStatus::Complete => "complete".into(),
            RunStatus::InProgress => {
                "incomplete: the run was still going, or its runner died".into()
            }
            RunStatus::Interrupted => "incomplete: interrupted".into(),
            RunStatus::Stopped { why } => format!("incomplete: stopped ({why})"),
        }
    }
}

impl RunReport {
    pub fn new(
        seed: u64,
        command: Vec<String>,
        fingerprint: Fingerprint,
        started: SystemTime,
        wall_s: f64,
        results: Vec<CaseResult>,
    ) -> Self {
        RunReport {
            schema: SCHEMA.to_string(),
            clhip_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: rfc3339_utc(started),
            wall_s,
            seed,
            command,
            fingerprint,
            summary: Summary::of(&results),
            results,
            status: RunStatus::Complete,
            not_run: Vec::new(),
            stale_baseline: Vec::new(),
            broken_vendors: Vec::new(),
            consistency: Default::default(),
        }
    }
}

/// Counts per outcome kind and per verdict. `fail` counts wrong data outside negative
/// controls; the stale reads negative controls exist to catch are `caught`, so that a clean run
/// never reads "19 failed".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub total: usize,
    pub pass: usize,
    pub fail: usize,
    #[serde(default)]
    pub caught: usize,
    pub fault: usize,
    pub crash: usize,
    pub timeout: usize,
    pub unsupported: usize,
    pub skip: usize,
    #[serde(default)]
    pub error: usize,
    /// Results that fail the run: regressions and harness errors.
    pub unexpected: usize,
    /// Known non-passes that now pass (or got better): the baseline needs an update.
    #[serde(default)]
    pub unexpected_pass: usize,
    /// Cases whose reruns came out otherwise (`--retries`).
    #[serde(default)]
    pub flaky: usize,
}

impl Summary {
    pub fn of(results: &[CaseResult]) -> Summary {
        let mut s = Summary::default();
        for r in results {
            s.total += 1;
            let verdict = r.verdict();
            if verdict == Verdict::CaughtStaleRead {
                s.caught += 1;
            } else {
                *s.slot(r.outcome.kind()) += 1;
            }
            s.unexpected += usize::from(verdict.fails_run());
            s.unexpected_pass += usize::from(verdict == Verdict::UnexpectedPass);
            s.flaky += usize::from(verdict == Verdict::Flaky);
        }
        s
    }

    /// Results of `kind`, caught stale reads included in `fail`.
    pub fn count(&self, kind: OutcomeKind) -> usize {
        match kind {
            OutcomeKind::Pass => self.pass,
            OutcomeKind::Fail => self.fail + self.caught,
            OutcomeKind::Fault => self.fault,
            OutcomeKind::Crash => self.crash,
            OutcomeKind::Timeout => self.timeout,
            OutcomeKind::Unsupported => self.unsupported,
            OutcomeKind::Skip => self.skip,
            OutcomeKind::Error => self.error,
        }
    }

    fn slot(&mut self, kind: OutcomeKind) -> &mut usize {
        match kind {
            OutcomeKind::Pass => &mut self.pass,
            OutcomeKind::Fail => &mut self.fail,
            OutcomeKind::Fault => &mut self.fault,
            OutcomeKind::Crash => &mut self.crash,
            OutcomeKind::Timeout => &mut self.timeout,
            OutcomeKind::Unsupported => &mut self.unsupported,
            OutcomeKind::Skip => &mut self.skip,
            OutcomeKind::Error => &mut self.error,
        }
    }
}

/// `412 passed, 0 failed, 3 faulted, 0 crashed, 0 timed out, 37 unsupported, 0 skipped, 0 harness
/// errors; 19 stale reads caught by negative controls (0 unexpected, 0 unexpected passes,
/// 0 flaky)`
pub fn closing_line(s: &Summary) -> String {
    format!(
        "{} passed, {} failed, {} faulted, {} crashed, {} timed out, {} unsupported, {} skipped, {} harness errors; {} stale reads caught by negative controls ({} unexpected, {} unexpected passes, {} flaky)",
        s.pass,
        s.fail,
        s.fault,
        s.crash,
        s.timeout,
        s.unsupported,
        s.skip,
        s.error,
        s.caught,
        s.unexpected,
        s.unexpected_pass,
        s.flaky
    )
}

/// `2026-03-21T13:50:07Z`. By hand, to keep a date crate out of the tree for one timestamp.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Writes the report as pretty JSON to a checked output.
pub fn write_json(report: &RunReport, target: &crate::output::Target) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(report).context("encoding the results")?;
    bytes.push(b'\n');
    crate::output::write(target, &bytes)
}

/// A results file as read back, with anything that makes it less than a complete, consistent
/// record of a run: `report` shows these and exits non-zero.
#[derive(Debug)]
pub struct Loaded {
    pub report: RunReport,
    pub problems: Vec<String>,
}

/// Reads a results file (or the `.partial` journal of a run that did not finish), naming the
/// file and the line and column of anything wrong with it. The summary is recomputed from the
/// results: a stored one that disagrees is a problem, never trusted.
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut report = match text.lines().next().map(serde_json::from_str::<JournalHead>) {
        Some(Ok(head)) if head.schema == crate::output::JOURNAL_SCHEMA => {
            read_journal(path, &text, head.report)?
        }
        _ => parse_results(path, &text)?,
    };
    let mut problems = Vec::new();
    if report.status != RunStatus::Complete {
        problems.push(format!(
            "{}: {} ({} results, {} cases not run)",
            path.display(),
            report.status.describe(),
            report.results.len(),
            report.not_run.len()
        ));
    }
    let recomputed = Summary::of(&report.results);
    // Outcome counts only: what counts as unexpected follows the reader's semantics, which
    // may be newer than the writer's, and is recomputed anyway.
    let counts = |s: &Summary| {
        let mut c: Vec<usize> = OutcomeKind::ALL.iter().map(|k| s.count(*k)).collect();
        c.push(s.total);
        c
    };
    if counts(&report.summary) != counts(&recomputed) {
        problems.push(format!(
            "{}: inconsistent: the stored summary ({}) is not what its {} results say ({}); showing the results",
            path.display(),
            closing_line(&report.summary),
            report.results.len(),
            closing_line(&recomputed)
        ));
    }
    report.summary = recomputed;
    problems.extend(contradictions(path, &report));
    if !report.broken_vendors.is_empty() {
        problems.push(format!(
            "{}: {} OpenCL vendor libraries broke in the probe: {}",
            path.display(),
            report.broken_vendors.len(),
            report.broken_vendors.join("; ")
        ));
    }
    Ok(Loaded { report, problems })
}

/// What makes a results file contradict itself beyond its summary: a complete run with cases
/// not run, a case listed twice, a result whose id is not its case's.
fn contradictions(path: &Path, report: &RunReport) -> Vec<String> {
    let mut out = Vec::new();
    if report.status == RunStatus::Complete && !report.not_run.is_empty() {
        out.push(format!(
            "{}: inconsistent: marked complete with {} cases not run",
            path.display(),
            report.not_run.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for r in &report.results {
        if !seen.insert(r.id.as_str()) {
            out.push(format!(
                "{}: inconsistent: case `{}` has more than one result",
                path.display(),
                r.id
            ));
            break;
        }
    }
    if let Some(r) = report
        .results
        .iter()
        .find(|r| r.work.case().is_some_and(|c| c.id() != r.id))
    {
        out.push(format!(
            "{}: inconsistent: result `{}` is for another case ({})",
            path.display(),
            r.id,
            r.work
                .case()
                .map(crate::model::Case::id)
                .unwrap_or_default()
        ));
    }
    out
}

/// [`load`] for callers that need a complete, consistent file, and say why not otherwise.
pub fn load_json(path: &Path) -> anyhow::Result<RunReport> {
    let loaded = load(path)?;
    match loaded.problems.first() {
        None => Ok(loaded.report),
        Some(p) => bail!("{p}"),
    }
}

#[derive(Deserialize)]
struct JournalHead {
    schema: String,
    report: RunReport,
}

/// The journal's lines after its header are one result each; the last may be cut short by
/// the death that left the journal behind, and is dropped.
fn read_journal(path: &Path, text: &str, mut report: RunReport) -> anyhow::Result<RunReport> {
    let lines: Vec<&str> = text.lines().skip(1).collect();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<CaseResult>(line) {
            Ok(r) => report.results.push(r),
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => bail!("{}:{}:{}: {e}", path.display(), i + 2, e.column()),
        }
    }
    report.status = RunStatus::InProgress;
    // The head was written before any result: its summary is of none.
    report.summary = Summary::of(&report.results);
    Ok(report)
}

/// The head of a journal, for [`crate::output::Journal::start`]: the run's description with
/// no results yet.
pub fn journal_head(report: &RunReport) -> serde_json::Value {
    serde_json::json!({ "schema": crate::output::JOURNAL_SCHEMA, "report": report })
}

fn parse_results(path: &Path, text: &str) -> anyhow::Result<RunReport> {
    // The schema first: a newer format should be reported as such, not as a missing field.
    #[derive(Deserialize)]
    struct Head {
        schema: Option<String>,
    }
    let head: Head = serde_json::from_str(text).map_err(|e| located(path, &e))?;
    match head.schema.as_deref() {
        Some(SCHEMA) => {}
        Some(other) => bail!(
            "{}: results schema `{other}` is not supported (this clhip reads `{SCHEMA}`)",
            path.display()
        ),
        None => bail!(
            "{}: no `schema` field: not a clhip results file",
            path.display()
        ),
    }
    serde_json::from_str(text).map_err(|e| located(path, &e))
}

fn located(path: &Path, e: &serde_json::Error) -> anyhow::Error {
    anyhow!("{}:{}:{}: {e}", path.display(), e.line(), e.column())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::report::tests::sample_report;

    #[test]
    fn rfc3339_utc_known_instants() {
        let at = |s: u64| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_774_101_007), "2026-03-21T13:50:07Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("clhip-report-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn json_round_trips_and_replaces_atomically() {
        let dir = scratch_dir("roundtrip");
        let path = dir.join("results.json");
        let report = sample_report();
        std::fs::write(&path, "older report").unwrap();
        write_json(&report, &crate::output::check("--json", &path).unwrap()).unwrap();
        assert_eq!(load_json(&path).unwrap(), report);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn load_json_names_the_file_and_place_and_rejects_other_schemas() {
        let dir = scratch_dir("errors");
        let bad = dir.join("bad.json");
        std::fs::write(
            &bad,
            "{\n  \"schema\": \"clhip-results/1\",\n  \"seed\": x\n}",
        )
        .unwrap();
        let err = load_json(&bad).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:3:", bad.display())), "{err}");

        let newer = dir.join("newer.json");
        std::fs::write(&newer, r#"{"schema": "clhip-results/2", "whatever": 1}"#).unwrap();
        let err = load_json(&newer).unwrap_err().to_string();
        assert!(err.contains("`clhip-results/2` is not supported"), "{err}");

        let err = load_json(&dir.join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
