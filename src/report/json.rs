//! The results file (the record a matrix diff is made from): the run's model ([`RunReport`],
//! [`RunStatus`], [`Summary`]), writing and loading it, and the head of a run's journal.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::model::{OutcomeKind, Verdict};
use crate::partition::Partition;
use crate::results::CaseResult;

/// The results file format this build writes and reads.
pub const SCHEMA: &str = "clhip-results/1";

/// One run, as written to `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// [`SCHEMA`]; a reader refuses any other.
    pub schema: String,
    pub clhip_version: String,
    /// The commit the clhip that wrote this was built from; `None` in files written before
    /// clhip recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::build_id::BuildId>,
    /// The error planted in the run's cases (`run --plant`), if any: its outcomes are then the
    /// plant's, not the driver's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planted: Option<Planted>,
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
    /// What the run set out to run. Files written before clhip recorded it have none: they
    /// are read as a run of the whole plan whose selection is unknown, which `merge` refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// GPUs lost during the run (`GPU <gpu> lost after <case>: <evidence>`); their cases not
    /// run are `skip`s that say so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_gpus: Vec<String>,
    /// Worker processes the run started: with a host's start throughput (`bench runner`),
    /// the run's start floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_starts: Option<usize>,
    /// The same, by pair kind (`nvidia+cuda`): each kind starts at its own rate.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub worker_starts_by_kind: std::collections::BTreeMap<String, usize>,
    /// Whether each case's footprint is its own: one case per worker (a worker's one-time
    /// set-ups, 74 MiB for Vulkan's loader, land on whichever of its cases needs them first)
    /// and one worker at a time with no spare (the device's memory in use counts every
    /// process on the GPU). `diff` compares footprints only between two such runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub footprint_isolated: bool,
}

/// A run's plant: what it planted, and in which cases (every case where `only` is empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planted {
    pub plant: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
}

impl Planted {
    /// `flip-element`, or `flip-element in cases matching a, b`.
    pub fn describe(&self) -> String {
        if self.only.is_empty() {
            self.plant.clone()
        } else {
            format!("{} in cases matching {}", self.plant, self.only.join(", "))
        }
    }
}

/// What of the case matrix a run set out to run: what tells the shards of one run from
/// strangers (`merge`), and a whole run from part of one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    /// The run's case filters (globs or substrings of case ids), as given.
    pub filters: Vec<String>,
    /// `--devices`, as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// The case matrix the plan was expanded from, as [`Selection::hash`] of its parsed form
    /// (a case file that differs only in comments or layout is the same matrix).
    pub matrix: String,
    /// The whole plan, before any partition: how many cases, and [`Selection::plan_hash`] of
    /// their ids.
    pub planned: usize,
    pub plan: String,
    /// The shards of the plan this file holds, in order: the run's `--partition`, or every
    /// shard a merge joined. Empty for a run of the whole plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<Partition>,
}

impl Selection {
    /// `fnv1a64:` and the hash of `bytes`, in hex.
    pub fn hash(bytes: &[u8]) -> String {
        format!("fnv1a64:{:016x}", crate::hash::fnv1a64(bytes))
    }

    /// [`Selection::hash`] of a set of case ids, whatever their order.
    pub fn plan_hash<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
        let mut ids: Vec<&str> = ids.into_iter().collect();
        ids.sort_unstable();
        Self::hash(ids.join("\n").as_bytes())
    }

    /// The shards held, an unpartitioned run's being the one shard `hash:1/1`.
    pub fn held(&self) -> Vec<Partition> {
        if self.shards.is_empty() {
            vec![Partition::WHOLE]
        } else {
            self.shards.clone()
        }
    }

    /// The shards of the plan this file does not hold (none for a whole run).
    pub fn missing(&self) -> Vec<Partition> {
        let held = self.held();
        let of = held.first().map_or(1, |p| p.of);
        Partition::all(of).filter(|p| !held.contains(p)).collect()
    }
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
    /// The run never got to a case: every OpenCL vendor broke in the probe.
    NothingRun { why: String },
    /// A merge of some shards of a run only: these are missing.
    MissingShards { missing: Vec<Partition> },
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
            RunStatus::NothingRun { why } => format!("incomplete: no case ran ({why})"),
            RunStatus::MissingShards { missing } => format!(
                "incomplete: {} {} missing",
                if missing.len() == 1 {
                    "shard"
                } else {
                    "shards"
                },
                missing
                    .iter()
                    .map(Partition::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl RunReport {
    /// `0.1.0 (commit 0123456789ab, dirty)`; a file from before builds were recorded says so.
    pub fn clhip_build(&self) -> String {
        match &self.build {
            Some(b) => format!("{} ({})", self.clhip_version, b.describe()),
            None => format!("{} (commit not recorded)", self.clhip_version),
        }
    }

    /// The run's plant: as recorded, or, in a file from before plants were recorded, as its
    /// command gave it (`--plant X`, `--plant-only A,B`).
    pub fn plant(&self) -> Option<Planted> {
        if self.planted.is_some() {
            return self.planted.clone();
        }
        let value = |flag: &str| {
            let mut args = self.command.iter();
            let mut found = None;
            while let Some(a) = args.next() {
                if a == flag {
                    found = args.next().cloned();
                } else if let Some(v) = a.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
                    found = Some(v.to_string());
                }
            }
            found
        };
        let plant = value("--plant").filter(|p| p != "none")?;
        let only = value("--plant-only")
            .map_or(Vec::new(), |o| o.split(',').map(str::to_string).collect());
        Some(Planted { plant, only })
    }

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
            build: Some(crate::build_id::BuildId::this()),
            planted: None,
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
            selection: None,
            lost_gpus: Vec::new(),
            worker_starts: None,
            worker_starts_by_kind: Default::default(),
            footprint_isolated: false,
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
    /// Passes with a kernel warning.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warn: usize,
    /// Cases the run died during (a resumed run's).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incomplete: usize,
    /// Results that fail the run: regressions and harness errors.
    pub unexpected: usize,
    /// Known non-passes that now pass (or got better): the baseline needs an update.
    #[serde(default)]
    pub unexpected_pass: usize,
    /// Cases whose reruns came out otherwise (`--retries`).
    #[serde(default)]
    pub flaky: usize,
    /// Cases a known-flake rule (`[[flaky]]`) covers that came out a non-pass the rule allows:
    /// how often the known flakes struck.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub known_flaky: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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
            s.known_flaky += usize::from(
                matches!(r.expectation, crate::model::Expectation::KnownFlaky(..))
                    && verdict == Verdict::ExpectedNonPass,
            );
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
            OutcomeKind::Warn => self.warn,
            OutcomeKind::Incomplete => self.incomplete,
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
            OutcomeKind::Warn => &mut self.warn,
            OutcomeKind::Incomplete => &mut self.incomplete,
        }
    }
}

/// `412 passed, 0 failed, 3 faulted, 0 crashed, 0 timed out, 37 unsupported, 0 skipped, 0 harness
/// errors; 19 stale reads caught by negative controls (0 unexpected, 0 unexpected passes,
/// 0 flaky)`
/// Passes with a kernel warning and incomplete cases are named only where there are any.
pub fn closing_line(s: &Summary) -> String {
    let mut rare = String::new();
    if s.warn > 0 {
        rare.push_str(&format!(", {} passed with a kernel warning", s.warn));
    }
    if s.incomplete > 0 {
        rare.push_str(&format!(", {} incomplete", s.incomplete));
    }
    let line = format!(
        "{} passed, {} failed, {} faulted, {} crashed, {} timed out, {} unsupported, {} skipped, {} harness errors{rare}; {} stale reads caught by negative controls ({} unexpected, {} unexpected passes, {} flaky)",
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
    );
    match s.known_flaky {
        0 => line,
        1 => format!("{line}; 1 known flake struck"),
        n => format!("{line}; {n} known flakes struck"),
    }
}

/// `2026-03-21T13:50:07Z`: UTC, whole seconds (a fraction is dropped). An instant humantime
/// cannot write (before 1970 it panics, past 9999 it fails), which only a clock set far wrong
/// gives, is written as the nearest one it can.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let last = UNIX_EPOCH + std::time::Duration::from_secs(253_402_300_799);
    humantime::format_rfc3339_seconds(t.clamp(UNIX_EPOCH, last)).to_string()
}

/// Writes the report as pretty JSON to a checked output.
pub fn write_json(report: &RunReport, target: &crate::output::Target) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(report).context("encoding the results")?;
    bytes.push(b'\n');
    crate::output::write(target, &bytes)
}

/// A results file as read back, with anything that makes it less than a complete, consistent
/// record of a run ([`judge`]): `report` and `diff` show these and exit non-zero.
#[derive(Debug)]
pub struct Loaded {
    pub report: RunReport,
    pub problems: Vec<String>,
}

/// Reads a results file (or the `.partial` journal of a run that did not finish), naming the
/// file and the line and column of anything wrong with it. The summary is recomputed from the
/// results: a stored one that disagrees is a problem, never trusted.
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let text = crate::input::read_text("a results file", path, crate::input::RESULTS_LIMIT)?;
    load_text(path, &text)
}

/// [`load`] of a file's text already read (`path` names it in errors): for a reader that
/// needs the very bytes it judged, as `history` hashes them.
pub fn load_text(path: &Path, text: &str) -> anyhow::Result<Loaded> {
    let mut report = match text.lines().next().map(serde_json::from_str::<JournalHead>) {
        Some(Ok(head)) if head.schema == crate::output::JOURNAL_SCHEMA => {
            read_journal(path, text, head.report)?
        }
        _ => parse_results(path, text)?,
    };
    check_times(path, &report)?;
    let problems = judge(path, &report);
    report.summary = Summary::of(&report.results);
    Ok(Loaded { report, problems })
}

/// Outcome counts only: what counts as unexpected follows the reader's semantics, which may
/// be newer than the writer's, and is recomputed anyway.
fn summary_counts(s: &Summary) -> Vec<usize> {
    let mut c: Vec<usize> = OutcomeKind::ALL.iter().map(|k| s.count(*k)).collect();
    c.push(s.total);
    c
}

/// Everything that makes a run (read from `path`) less than a whole, consistent record: an
/// incomplete run (interrupted, stopped, never started, missing shards), a vendor that broke in
/// the probe, a file that contradicts itself (its stored summary included). `report` and `diff`
/// both judge their files by it, through [`load`], and exit non-zero on any, naming each.
pub fn judge(path: &Path, report: &RunReport) -> Vec<String> {
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
    if summary_counts(&report.summary) != summary_counts(&recomputed) {
        problems.push(format!(
            "{}: inconsistent: the stored summary ({}) is not what its {} results say ({}); showing the results",
            path.display(),
            closing_line(&report.summary),
            report.results.len(),
            closing_line(&recomputed)
        ));
    }
    problems.extend(contradictions(path, report));
    for lost in &report.lost_gpus {
        problems.push(format!("{}: {lost}", path.display()));
    }
    if !report.broken_vendors.is_empty() {
        problems.push(format!(
            "{}: {} OpenCL vendor libraries broke in the probe: {}",
            path.display(),
            report.broken_vendors.len(),
            report.broken_vendors.join("; ")
        ));
    }
    problems
}

/// What makes a results file contradict itself beyond its summary: a complete run with cases
/// not run, a case listed twice, a result whose id is not its case's, a case outside the shards
/// the file says it holds, a complete run of every shard whose cases are not its plan's.
fn contradictions(path: &Path, report: &RunReport) -> Vec<String> {
    let mut out = Vec::new();
    if report.status == RunStatus::Complete && !report.not_run.is_empty() {
        out.push(format!(
            "{}: inconsistent: marked complete with {} cases not run",
            path.display(),
            report.not_run.len()
        ));
    }
    if let Some(sel) = &report.selection {
        out.extend(selection_contradictions(path, report, sel));
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

fn selection_contradictions(path: &Path, report: &RunReport, sel: &Selection) -> Vec<String> {
    let mut out = Vec::new();
    let held = sel.held();
    if held.iter().any(|p| p.of != held[0].of) {
        out.push(format!(
            "{}: inconsistent: holds shards of different partitions ({})",
            path.display(),
            held.iter()
                .map(Partition::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return out;
    }
    let ids = || {
        report
            .results
            .iter()
            .map(|r| r.id.as_str())
            .chain(report.not_run.iter().map(String::as_str))
    };
    if let Some(id) = ids().find(|id| !held.iter().any(|p| p.contains(id))) {
        out.push(format!(
            "{}: inconsistent: case `{id}` is not in the shards the file holds ({})",
            path.display(),
            held.iter()
                .map(Partition::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Only a complete record of every shard can be held to the whole plan; a shard's own share
    // of it is not recorded.
    if report.status == RunStatus::Complete && sel.missing().is_empty() {
        let count = ids().count();
        if count != sel.planned || Selection::plan_hash(ids()) != sel.plan {
            out.push(format!(
                "{}: inconsistent: marked complete, but its {count} cases are not the {} cases it planned",
                path.display(),
                sel.planned
            ));
        }
    }
    out
}

/// A time no run can have taken (negative; JSON has no NaN or infinity, but a reader's
/// arithmetic might) is a corrupt file, not a number to sum or sort by.
fn check_times(path: &Path, report: &RunReport) -> anyhow::Result<()> {
    let impossible = |s: f64| !(s.is_finite() && s >= 0.0);
    if impossible(report.wall_s) {
        bail!(
            "{}: corrupt: the run's wall_s is {}",
            path.display(),
            report.wall_s
        );
    }
    for r in &report.results {
        if impossible(r.duration_s) {
            bail!(
                "{}: corrupt: result `{}` has duration_s {}",
                path.display(),
                r.id,
                r.duration_s
            );
        }
        for o in std::iter::once(&r.outcome).chain(&r.reruns) {
            if let crate::model::Outcome::Timeout { after_s, .. } = o
                && impossible(*after_s)
            {
                bail!(
                    "{}: corrupt: result `{}` timed out after_s {after_s}",
                    path.display(),
                    r.id
                );
            }
        }
    }
    Ok(())
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
        // A case's start: what a resume learns the case in flight from.
        if serde_json::from_str::<crate::output::StartLine>(line).is_ok() {
            continue;
        }
        match serde_json::from_str::<CaseResult>(line) {
            // A resumed run may record a case again (an incomplete one run once more): the
            // latest result is the case's.
            Ok(r) => match report.results.iter_mut().find(|old| old.id == r.id) {
                Some(old) => *old = r,
                None => report.results.push(r),
            },
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
    use crate::fingerprint::Fingerprint;
    use crate::report::tests::sample_report;

    #[test]
    fn rfc3339_utc_known_instants() {
        let at = |s: u64| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_774_101_007), "2026-03-21T13:50:07Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
        let late = UNIX_EPOCH + Duration::from_millis(1_774_101_007_999);
        assert_eq!(rfc3339_utc(late), "2026-03-21T13:50:07Z");
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(rfc3339_utc(before), "1970-01-01T00:00:00Z");
        let far = UNIX_EPOCH + Duration::from_secs(u64::from(u32::MAX) * 100);
        assert_eq!(rfc3339_utc(far), "9999-12-31T23:59:59Z");
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

    /// A complete run of every case of a 30-case plan, with that plan recorded, or of its
    /// shard `shard` when given.
    fn planned_run(shard: Option<Partition>) -> RunReport {
        let ids: Vec<String> = (0..30).map(|k| format!("mock/pass/{k}")).collect();
        let results = ids
            .iter()
            .filter(|id| shard.is_none_or(|p| p.contains(id)))
            .map(|id| {
                CaseResult::new(
                    id.clone(),
                    crate::results::Work::Mock(crate::mock::MockAction::Pass),
                    crate::model::Outcome::pass(),
                    crate::model::Expectation::Pass,
                    0.01,
                )
            })
            .collect();
        let mut r = RunReport::new(
            7,
            Vec::new(),
            Fingerprint::default(),
            UNIX_EPOCH,
            1.0,
            results,
        );
        r.selection = Some(Selection {
            filters: Vec::new(),
            devices: Vec::new(),
            matrix: Selection::hash(b"matrix"),
            planned: ids.len(),
            plan: Selection::plan_hash(ids.iter().map(String::as_str)),
            shards: shard.into_iter().collect(),
        });
        r
    }

    fn problems(r: &RunReport) -> Vec<String> {
        judge(Path::new("r.json"), r)
    }

    #[test]
    fn a_complete_run_is_held_to_its_plan_and_a_shard_to_its_share() {
        assert_eq!(problems(&planned_run(None)), Vec::<String>::new());
        let of3 = |m| Partition { shard: m, of: 3 };
        assert_eq!(problems(&planned_run(Some(of3(2)))), Vec::<String>::new());

        let mut short = planned_run(None);
        short.results.pop();
        short.summary = Summary::of(&short.results);
        let p = problems(&short);
        assert!(
            p.iter()
                .any(|p| p.contains("its 29 cases are not the 30 cases it planned")),
            "{p:?}"
        );
        // As many cases as planned, but one of them another's.
        let mut swapped = planned_run(None);
        swapped.results[0].id = "mock/pass/99".into();
        let p = problems(&swapped);
        assert!(p.iter().any(|p| p.contains("not the 30 cases")), "{p:?}");
        // A case not run counts as planned: an interrupted run is incomplete, not inconsistent.
        let mut cut = planned_run(None);
        let last = cut.results.pop().unwrap();
        cut.not_run.push(last.id);
        cut.summary = Summary::of(&cut.results);
        cut.status = RunStatus::Interrupted;
        assert_eq!(
            problems(&cut),
            ["r.json: incomplete: interrupted (29 results, 1 cases not run)"]
        );

        let mut stranger = planned_run(Some(of3(1)));
        let foreign = planned_run(Some(of3(2))).results.remove(0);
        stranger.results.push(foreign);
        stranger.summary = Summary::of(&stranger.results);
        let p = problems(&stranger);
        assert!(
            p.iter()
                .any(|p| p.contains("is not in the shards the file holds (hash:1/3)")),
            "{p:?}"
        );
        let mut mixed = planned_run(Some(of3(1)));
        mixed
            .selection
            .as_mut()
            .unwrap()
            .shards
            .push(Partition { shard: 2, of: 2 });
        let p = problems(&mixed);
        assert!(
            p.iter()
                .any(|p| p.contains("holds shards of different partitions")),
            "{p:?}"
        );
    }

    #[test]
    fn a_run_that_got_to_no_case_or_lacks_shards_is_incomplete() {
        let mut nothing = planned_run(None);
        nothing.results.clear();
        nothing.summary = Summary::of(&nothing.results);
        nothing.status = RunStatus::NothingRun {
            why: "every OpenCL vendor broke in the probe".into(),
        };
        nothing.broken_vendors = vec!["libbad.so: crashed: SIGSEGV".into()];
        let p = problems(&nothing);
        assert!(
            p[0].contains("incomplete: no case ran (every OpenCL vendor broke in the probe)"),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|p| p.contains("broke in the probe: libbad.so")),
            "{p:?}"
        );

        let missing = RunStatus::MissingShards {
            missing: vec![Partition { shard: 2, of: 3 }, Partition { shard: 3, of: 3 }],
        };
        assert_eq!(
            missing.describe(),
            "incomplete: shards hash:2/3, hash:3/3 missing"
        );
        let mut two = planned_run(None);
        two.status = missing;
        assert!(problems(&two)[0].contains("shards hash:2/3, hash:3/3 missing"));
    }

    /// Files written before runs recorded their selection still load, as runs of the whole
    /// plan whose selection is unknown: the same problems as before, no new ones. Files that
    /// do record one (runs of this version) are judged by the same rule.
    #[test]
    fn committed_results_without_a_selection_load_as_before() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
        let mut read = 0;
        let mut without = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if path.extension().is_none_or(|e| e != "json") || !text.contains(SCHEMA) {
                continue;
            }
            let loaded = load(&path).unwrap();
            let recorded = text.contains("\"selection\"");
            assert_eq!(
                loaded.report.selection.is_some(),
                recorded,
                "{}",
                path.display()
            );
            without += usize::from(!recorded);
            let expected: Vec<String> = match loaded.report.status {
                RunStatus::Complete => Vec::new(),
                ref s => vec![format!(
                    "{}: {} ({} results, {} cases not run)",
                    path.display(),
                    s.describe(),
                    loaded.report.results.len(),
                    loaded.report.not_run.len()
                )],
            };
            assert_eq!(loaded.problems, expected, "{}", path.display());
            read += 1;
        }
        assert!(read >= 10, "only {read} results files in reports/");
        assert!(
            without >= 10,
            "only {without} results files without a selection in reports/"
        );
    }
}
