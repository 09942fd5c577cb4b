//! What people and machines read after a run: the JSON results file (the record a matrix diff is
//! made from), support matrices as text and Markdown, JUnit XML for CI, and the live console.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::model::{
    Expectation, Op, Outcome, OutcomeKind, PathKind, SyncMode, Verdict, is_negative_control,
};
use crate::runner::{CaseResult, Event, Work};

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
/// errors; 19 stale reads caught by negative controls (0 unexpected, 0 unexpected passes)`
pub fn closing_line(s: &Summary) -> String {
    format!(
        "{} passed, {} failed, {} faulted, {} crashed, {} timed out, {} unsupported, {} skipped, {} harness errors; {} stale reads caught by negative controls ({} unexpected, {} unexpected passes)",
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
        s.unexpected_pass
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

// ---- files ----

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
    Ok(Loaded { report, problems })
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

/// JUnit XML for CI: one suite per pair (and one for mocks). Agrees with the exit code: an
/// outcome the expectation accepts (a negative control's `fail`, a baseline's known fault) is a
/// success with a note, not a red test. Otherwise `fail` is a failure; `fault`, `crash` and
/// `timeout` are errors; `unsupported` and `skip` are skipped with the reason.
pub fn write_junit(report: &RunReport, target: &crate::output::Target) -> anyhow::Result<()> {
    let junit = junit_report(report);
    let text = junit.to_string().context("encoding JUnit XML")?;
    crate::output::write(target, text.as_bytes())
}

fn junit_report(report: &RunReport) -> quick_junit::Report {
    let mut suites: BTreeMap<String, TestSuite> = BTreeMap::new();
    for r in &report.results {
        let suite_name = group_of(&r.work);
        let suite = suites
            .entry(suite_name.clone())
            .or_insert_with(|| TestSuite::new(suite_name.clone()));
        let mut case = TestCase::new(r.id.clone(), junit_status(r));
        case.set_classname(suite_name);
        if let Ok(time) = Duration::try_from_secs_f64(r.duration_s) {
            case.set_time(time);
        }
        if let Some(note) = accepted_note(r) {
            case.set_system_out(note);
        }
        suite.add_test_case(case);
    }
    let mut junit = quick_junit::Report::new("clhip");
    if let Ok(time) = Duration::try_from_secs_f64(report.wall_s) {
        junit.set_time(time);
    }
    junit.add_test_suites(suites.into_values());
    junit
}

fn junit_status(r: &CaseResult) -> TestCaseStatus {
    let kind = r.outcome.kind();
    let mut status = match kind {
        OutcomeKind::Pass => return TestCaseStatus::success(),
        _ if !r.unexpected() && is_problem(kind) => return TestCaseStatus::success(),
        OutcomeKind::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
        OutcomeKind::Fault | OutcomeKind::Crash | OutcomeKind::Timeout | OutcomeKind::Error => {
            TestCaseStatus::non_success(NonSuccessKind::Error)
        }
        OutcomeKind::Unsupported | OutcomeKind::Skip => TestCaseStatus::skipped(),
    };
    status.set_message(r.outcome.reason()).set_type(kind.name());
    if let Outcome::Crash { stderr_tail, .. } = &r.outcome
        && !stderr_tail.is_empty()
    {
        status.set_description(stderr_tail.clone());
    }
    status
}

/// For a non-pass the expectation accepts: why it is fine, e.g. `expected fail (negative
/// control): ...`.
fn accepted_note(r: &CaseResult) -> Option<String> {
    let kind = r.outcome.kind();
    (is_problem(kind) && !r.unexpected()).then(|| {
        format!(
            "expected {kind} ({}): {}",
            expectation_label(r.expectation),
            r.outcome.reason()
        )
    })
}

// ---- matrices ----

/// The support matrices (one per pair, then mocks) and the list of every non-pass case.
pub fn render_matrix(results: &[CaseResult]) -> String {
    let mut out = render_tables(results);
    let non_pass = non_pass(results);
    if !non_pass.is_empty() {
        let _ = writeln!(out, "needs a look ({}):", non_pass.len());
        for r in non_pass {
            let _ = writeln!(out, "  {}", outcome_line(r));
        }
    }
    if let Some(line) = caught_line(results) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// How bad a kind is, for the cell's "worst": wrong data is worse than any refusal or death,
/// and a clean refusal is the best non-pass (DOMAIN).
/// A harness error outranks them all in a cell: that cell says nothing about the driver.
fn severity(kind: OutcomeKind) -> u8 {
    match kind {
        OutcomeKind::Pass => 0,
        OutcomeKind::Skip => 1,
        OutcomeKind::Unsupported => 2,
        OutcomeKind::Timeout => 3,
        OutcomeKind::Crash => 4,
        OutcomeKind::Fault => 5,
        OutcomeKind::Fail => 6,
        OutcomeKind::Error => 7,
    }
}

fn short_name(kind: OutcomeKind) -> &'static str {
    match kind {
        OutcomeKind::Unsupported => "unsup",
        kind => kind.name(),
    }
}

/// What a cell or listing calls a result: a negative control's stale read is `caught`.
fn label(r: &CaseResult) -> &'static str {
    if r.verdict() == Verdict::CaughtStaleRead {
        "caught"
    } else {
        short_name(r.outcome.kind())
    }
}

/// The mark beside a result: `!` fails the run, `?` asks for a baseline update.
fn mark(r: &CaseResult) -> &'static str {
    match r.verdict() {
        v if v.fails_run() => "!",
        Verdict::UnexpectedPass => "?",
        _ => "",
    }
}

/// Fail, fault, crash or timeout: the kinds that need an explanation when accepted.
fn is_problem(kind: OutcomeKind) -> bool {
    severity(kind) >= severity(OutcomeKind::Timeout)
}

/// One cell: every size of one (path, sync, op) on one pair.
#[derive(Default)]
struct Cell {
    total: usize,
    worst: Option<OutcomeKind>,
    worst_label: &'static str,
    worst_count: usize,
    unexpected: bool,
    unexpected_pass: bool,
}

impl Cell {
    fn add(&mut self, r: &CaseResult) {
        let kind = r.outcome.kind();
        self.total += 1;
        self.unexpected |= r.unexpected();
        self.unexpected_pass |= r.verdict() == Verdict::UnexpectedPass;
        match self.worst {
            Some(w) if severity(w) > severity(kind) => {}
            Some(w) if w == kind => self.worst_count += 1,
            _ => {
                self.worst = Some(kind);
                self.worst_label = label(r);
                self.worst_count = 1;
            }
        }
    }

    fn text(&self) -> String {
        match self.worst {
            None => "-".to_string(),
            Some(_) => format!(
                "{} {}/{}{}{}",
                self.worst_label,
                self.worst_count,
                self.total,
                if self.unexpected { " !" } else { "" },
                if self.unexpected_pass { " ?" } else { "" }
            ),
        }
    }
}

/// Rows (path, sync) and columns (op) of one pair; the derived orders are the `ALL` orders.
#[derive(Default)]
struct PairTable {
    rows: BTreeMap<(PathKind, SyncMode), BTreeMap<Op, Cell>>,
}

/// The group a result is shown and reported under: its pair, or `mock`.
fn group_of(work: &Work) -> String {
    match work {
        Work::Case(case) => case.pair.id(),
        Work::Mock(_) => "mock".to_string(),
    }
}

fn render_tables(results: &[CaseResult]) -> String {
    let mut pairs: BTreeMap<String, PairTable> = BTreeMap::new();
    let mut mocks = Vec::new();
    for r in results {
        match &r.work {
            Work::Case(case) => pairs
                .entry(case.pair.id())
                .or_default()
                .rows
                .entry((case.path, case.sync))
                .or_default()
                .entry(case.op)
                .or_default()
                .add(r),
            Work::Mock(_) => mocks.push(r),
        }
    }
    let mut out = String::new();
    for (pair, table) in &pairs {
        out.push_str(&render_pair(pair, table));
        out.push('\n');
    }
    if !mocks.is_empty() {
        out.push_str(&render_mocks(&mocks));
        out.push('\n');
    }
    out
}

fn render_pair(pair: &str, table: &PairTable) -> String {
    let ops: Vec<Op> = Op::ALL
        .iter()
        .copied()
        .filter(|op| table.rows.values().any(|cells| cells.contains_key(op)))
        .collect();
    let mut grid = vec![
        ["path", "sync"]
            .into_iter()
            .map(String::from)
            .chain(ops.iter().map(|op| op.name().to_string()))
            .collect::<Vec<_>>(),
    ];
    for ((path, sync), cells) in &table.rows {
        let sync_label = if is_negative_control(*path, *sync) {
            format!("{sync}*")
        } else {
            sync.to_string()
        };
        let mut row = vec![path.to_string(), sync_label];
        row.extend(
            ops.iter()
                .map(|op| cells.get(op).map_or("-".into(), Cell::text)),
        );
        grid.push(row);
    }

    let mut out = format!("{pair}\n");
    out.push_str(&align(&grid, "  "));
    if table
        .rows
        .keys()
        .any(|(path, sync)| is_negative_control(*path, *sync))
    {
        out.push_str(
            "  * negative control (a required sync left out): `caught` means the check saw the stale read\n",
        );
    }
    if table
        .rows
        .values()
        .flat_map(|c| c.values())
        .any(|c| c.unexpected)
    {
        out.push_str("  ! an outcome in the cell is unexpected\n");
    }
    if table
        .rows
        .values()
        .flat_map(|c| c.values())
        .any(|c| c.unexpected_pass)
    {
        out.push_str("  ? a known non-pass in the cell now passes: update the baseline\n");
    }
    out
}

fn render_mocks(mocks: &[&CaseResult]) -> String {
    let grid: Vec<Vec<String>> = mocks
        .iter()
        .map(|r| {
            let mark = match mark(r) {
                "" => String::new(),
                m => format!(" {m}"),
            };
            vec![r.id.clone(), format!("{}{mark}", label(r))]
        })
        .collect();
    format!("mock\n{}", align(&grid, "  "))
}

/// Left-aligned columns, two spaces apart, without trailing blanks.
fn align(grid: &[Vec<String>], indent: &str) -> String {
    let columns = grid.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            grid.iter()
                .filter_map(|row| row.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in grid {
        let mut line = indent.to_string();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Every result that needs its reason shown: non-passes other than caught stale reads (those
/// are counted in one line; their reasons are in the results file), and unexpected passes.
fn non_pass(results: &[CaseResult]) -> Vec<&CaseResult> {
    results
        .iter()
        .filter(|r| match r.verdict() {
            Verdict::CaughtStaleRead => false,
            Verdict::UnexpectedPass => true,
            _ => r.outcome.kind() != OutcomeKind::Pass,
        })
        .collect()
}

fn caught_line(results: &[CaseResult]) -> Option<String> {
    let caught = results
        .iter()
        .filter(|r| r.verdict() == Verdict::CaughtStaleRead)
        .count();
    (caught > 0).then(|| {
        format!(
            "{caught} negative controls caught their stale read (each case's mismatch is in the results file)"
        )
    })
}

fn expectation_label(e: Expectation) -> &'static str {
    match e {
        Expectation::Pass => "expected pass",
        Expectation::Unbaselined => "no baseline",
        Expectation::Known(_) => "known",
        Expectation::NegativeControl => "negative control",
    }
}

/// `! crash        mock/segfault/1: worker killed by SIGSEGV (signal 11)`: `!` marks what fails
/// the run, `?` an unexpected pass; an accepted problem says why it is accepted.
pub fn outcome_line(r: &CaseResult) -> String {
    let kind = r.outcome.kind();
    let mark = match mark(r) {
        "" => " ",
        m => m,
    };
    let mut line = format!(
        "{mark} {:<11} {}: {}",
        label(r),
        r.id,
        one_line(&r.outcome.reason())
    );
    if r.verdict() == Verdict::UnexpectedPass {
        let _ = write!(
            line,
            " (unexpected pass: the baseline says {}; update it)",
            match r.expectation {
                Expectation::Known(k) => k.name(),
                _ => "otherwise",
            }
        );
    } else if is_problem(kind) && !r.unexpected() {
        let _ = write!(line, " ({})", expectation_label(r.expectation));
    }
    line
}

fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

// ---- markdown ----

/// A run for committing to `reports/`: what it ran on, the matrices, and every non-pass.
pub fn render_markdown(report: &RunReport) -> String {
    let mut out = String::from("# clhip results\n\n");
    out.push_str(&md_table(
        &["", ""],
        &[
            vec!["started".into(), report.started_at.clone()],
            vec!["clhip".into(), report.clhip_version.clone()],
            vec!["seed".into(), report.seed.to_string()],
            vec!["wall".into(), format!("{:.1} s", report.wall_s)],
            vec!["command".into(), code(&shell_words(&report.command))],
            vec!["result".into(), closing_line(&report.summary)],
        ],
    ));
    out.push_str("\n## Fingerprint\n\n");
    out.push_str(&md_table(
        &["component", "value"],
        &fingerprint_rows(&report.fingerprint),
    ));
    out.push_str("\n## Matrix\n\n```text\n");
    out.push_str(render_tables(&report.results).trim_end());
    out.push_str("\n```\n");

    let non_pass = non_pass(&report.results);
    if !non_pass.is_empty() {
        out.push_str(
            "\n## Needs a look\n\n`!` marks an outcome that fails the run, `?` a known non-pass that now passes.\n\n",
        );
        let rows: Vec<Vec<String>> = non_pass
            .iter()
            .map(|r| {
                let reason = match accepted_note(r) {
                    Some(note) => note,
                    None => r.outcome.reason(),
                };
                vec![
                    mark(r).into(),
                    label(r).into(),
                    code(&r.id),
                    one_line(&reason),
                ]
            })
            .collect();
        out.push_str(&md_table(&["", "outcome", "case", "reason"], &rows));
    }
    if let Some(line) = caught_line(&report.results) {
        let _ = writeln!(out, "\n{line}.");
    }
    let measured = measured(&report.results);
    if !measured.is_empty() {
        out.push_str(
            "\n## Placement and addresses\n\nWhat passing cases measured or learned: where the \
             shared memory lives (placement), and where a buffer's device address came from \
             (cl-gpu-va).\n\n",
        );
        let rows: Vec<Vec<String>> = measured
            .iter()
            .map(|r| vec![code(&r.id), one_line(&r.outcome.reason())])
            .collect();
        out.push_str(&md_table(&["case", "note"], &rows));
    }
    out
}

/// Passes whose note is a finding in itself, not only a summary of the check.
fn measured(results: &[CaseResult]) -> Vec<&CaseResult> {
    results
        .iter()
        .filter(|r| r.outcome.kind() == OutcomeKind::Pass)
        .filter(|r| {
            r.work
                .case()
                .is_some_and(|c| c.op == Op::Placement || c.path == PathKind::ClGpuVa)
        })
        .collect()
}

fn fingerprint_rows(f: &Fingerprint) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for d in &f.opencl {
        rows.push(vec![
            format!("opencl {}", d.label),
            format!(
                "{} ({}); {} ({}); driver {}{}{}",
                d.platform_name,
                d.platform_version,
                d.device_name,
                d.device_version,
                d.driver_version,
                d.pci_bus_id
                    .as_ref()
                    .map(|p| format!("; PCI {p}"))
                    .unwrap_or_default(),
                d.uuid
                    .as_ref()
                    .map(|u| format!("; UUID {u}"))
                    .unwrap_or_default(),
            ),
        ]);
    }
    for r in &f.runtimes {
        let details = [Some(&r.status), r.library.as_ref(), r.version.as_ref()];
        let details: Vec<&str> = details.into_iter().flatten().map(String::as_str).collect();
        rows.push(vec![format!("runtime {}", r.api), details.join("; ")]);
        for d in &r.devices {
            rows.push(vec![
                format!("{}{}", r.api, d.ordinal),
                [
                    d.name.as_str(),
                    d.arch.as_str(),
                    &format!("PCI {}", d.pci_bus_id),
                    &format!("UUID {}", d.uuid),
                    &format!("driver {}", d.driver_version),
                    &d.blas,
                    &d.solver,
                    &d.compiler,
                ]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<&str>>()
                .join("; "),
            ]);
        }
    }
    for (module, version) in &f.kernel_modules {
        rows.push(vec![format!("kernel module {module}"), version.clone()]);
    }
    rows.push(vec!["host cpu".into(), f.host_cpu.clone()]);
    rows.push(vec!["os kernel".into(), f.os_kernel.clone()]);
    rows
}

fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let cell = |s: &str| one_line(s).replace('|', "\\|");
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|s| cell(s)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

fn code(s: &str) -> String {
    format!("`{s}`")
}

/// The argv as one could paste it into a shell.
fn shell_words(argv: &[String]) -> String {
    let quote = |a: &String| {
        if !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c))
        {
            a.clone()
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

// ---- console ----

/// Live progress on stderr: a bar when stderr is a terminal, and one line per non-pass outcome
/// as it lands (only those lines when it is not, so logs stay readable).
pub struct ConsoleReporter {
    bar: Option<ProgressBar>,
}

impl ConsoleReporter {
    pub fn new(total: usize) -> Self {
        let bar = std::io::stderr()
            .is_terminal()
            .then(|| progress_bar(total as u64));
        ConsoleReporter { bar }
    }

    /// The runner's `on_event` callback.
    pub fn on_event(&mut self, event: &Event) {
        match event {
            Event::Started { id, .. } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(id.clone());
                }
            }
            Event::Finished(r) => {
                // Only what needs a look streams; caught stale reads are counted at the end.
                let look = match r.verdict() {
                    Verdict::CaughtStaleRead => false,
                    Verdict::UnexpectedPass => true,
                    _ => r.outcome.kind() != OutcomeKind::Pass,
                };
                if look {
                    self.print(&outcome_line(r));
                }
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
            }
            Event::WorkerLost { pid, after, why } => {
                let after = after.as_deref().unwrap_or("start");
                self.print(&format!("  worker {pid} lost after {after}: {why}"));
            }
        }
    }

    /// Removes the bar; the caller prints the matrix and closing line on stdout.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn print(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            // A closed or full stderr must not stop the run: the results file has it all.
            None => {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "{line}");
            }
        }
    }
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    // A fixed template; should it ever not parse, the default style is fine.
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::{ClDeviceFingerprint, RuntimeFingerprint};
    use crate::mock::MockAction;
    use crate::model::{Api, ApiError, Case, ClDeviceRef, Mismatch, Pair, Peer};

    fn pair(label: &str, peer: Peer) -> Pair {
        Pair {
            opencl: ClDeviceRef {
                platform_index: 0,
                device_index: 0,
                label: label.into(),
            },
            peer,
        }
    }

    fn result(
        pair: &Pair,
        path: PathKind,
        sync: SyncMode,
        op: Op,
        n: usize,
        outcome: Outcome,
    ) -> CaseResult {
        let case = Case {
            pair: pair.clone(),
            path,
            sync,
            op,
            n,
        };
        let expectation = if is_negative_control(path, sync) {
            Expectation::NegativeControl
        } else {
            Expectation::Pass
        };
        CaseResult::new(case.id(), Work::Case(case), outcome, expectation, 0.25)
    }

    fn mismatch(what: &str) -> Outcome {
        Outcome::mismatch(Mismatch {
            what: what.into(),
            index: 3,
            got: "0x00000000".into(),
            want: "0xa5a5a5a5".into(),
            count: 61,
            len: 64,
            max_abs_err: 2.0,
            max_rel_err: 1.0,
            bound: 0.0,
            formula: "bit-exact".into(),
        })
    }

    fn api_error(api: Api, call: &str, code: i64, name: &str) -> ApiError {
        ApiError {
            api,
            call: call.into(),
            code,
            name: name.into(),
            detail: String::new(),
        }
    }

    /// A run with every kind of outcome, on two pairs, plus mocks.
    fn sample_results() -> Vec<CaseResult> {
        use Op::*;
        use PathKind::*;
        use SyncMode::*;
        let pocl = pair("pocl0", Peer::HOST);
        let rocm = pair(
            "rocm0",
            Peer {
                api: Api::Hip,
                ordinal: 0,
            },
        );
        let pass = Outcome::pass;
        let mut results = vec![
            result(&pocl, Copy, Finish, Handoff, 64, pass()),
            result(&pocl, Copy, Finish, Handoff, 4096, pass()),
            result(&pocl, Copy, Finish, Fft, 64, pass()),
            result(
                &pocl,
                Copy,
                Finish,
                Fft,
                4096,
                mismatch("fft output read by host"),
            ),
            result(
                &pocl,
                Copy,
                None,
                Handoff,
                64,
                mismatch("handoff read by host"),
            ),
            result(&pocl, Copy, None, Handoff, 4096, pass()),
            result(&pocl, ClSvmFine, Map, Handoff, 64, pass()),
            result(
                &pocl,
                ClSvmFine,
                Map,
                Pipeline,
                64,
                Outcome::Crash {
                    signal: 11,
                    signal_name: "SIGSEGV".into(),
                    stderr_tail: "pocl: mapping\npocl: fatal".into(),
                    process: String::new(),
                },
            ),
            result(
                &pocl,
                ClSvmFine,
                Map,
                Pipeline,
                4096,
                Outcome::Timeout { after_s: 60.0 },
            ),
            result(
                &pocl,
                UseHostPtr,
                Map,
                Handoff,
                64,
                Outcome::Unsupported {
                    reason: "USE_HOST_PTR refused".into(),
                    error: Some(api_error(
                        Api::OpenCl,
                        "clCreateBuffer",
                        -38,
                        "CL_INVALID_MEM_OBJECT",
                    )),
                },
            ),
            result(
                &rocm,
                ClSvmCoarse,
                Map,
                Gemm,
                256,
                Outcome::Fault {
                    error: api_error(
                        Api::Hip,
                        "hipDeviceSynchronize",
                        700,
                        "hipErrorIllegalAddress",
                    ),
                },
            ),
            result(&rocm, ClSvmCoarse, Map, Gemm, 1024, pass()),
            result(
                &rocm,
                ClSvmCoarse,
                Map,
                Cholesky,
                256,
                Outcome::Skip {
                    reason: "rocSOLVER not loaded".into(),
                },
            ),
        ];
        // A baseline that knows the gemm fault: shown, but accepted.
        results[10].expectation = Expectation::Known(OutcomeKind::Fault);
        // A placement measurement: a pass whose note is the finding.
        results.push(result(
            &rocm,
            ClSvmFine,
            Finish,
            Placement,
            4194304,
            Outcome::Pass {
                note: "scale kernel on 32.0 MiB: shared 18.6 GB/s (3.600 ms/pass), device \
                           memory 1342.2 GB/s (0.050 ms/pass), pinned host memory 25.8 GB/s \
                           (2.600 ms/pass): the shared memory runs at host-memory (PCIe) speed"
                    .into(),
            },
        ));
        for (k, action) in [MockAction::Pass, MockAction::Segfault]
            .into_iter()
            .enumerate()
        {
            results.push(CaseResult::new(
                format!("mock/{action}/{k}"),
                Work::Mock(action),
                if action == MockAction::Pass {
                    pass()
                } else {
                    Outcome::Crash {
                        signal: 11,
                        signal_name: "SIGSEGV".into(),
                        stderr_tail: "mock: writing through 0x8".into(),
                        process: String::new(),
                    }
                },
                Expectation::Known(action.expected_kind()),
                0.001,
            ));
        }
        results
    }

    fn sample_report() -> RunReport {
        let results = sample_results();
        RunReport {
            schema: SCHEMA.into(),
            clhip_version: "0.1.0".into(),
            started_at: "2026-03-21T13:50:07Z".into(),
            wall_s: 75.5,
            seed: 7,
            command: vec![
                "clhip".into(),
                "run".into(),
                "--filter".into(),
                "svm fine".into(),
            ],
            fingerprint: Fingerprint {
                opencl: vec![ClDeviceFingerprint {
                    label: "pocl0".into(),
                    platform_name: "Portable Computing Language".into(),
                    platform_version: "OpenCL 3.0 PoCL 6.0".into(),
                    device_name: "cpu-haswell".into(),
                    device_version: "OpenCL 3.0 PoCL".into(),
                    driver_version: "6.0".into(),
                    uuid: None,
                    pci_bus_id: None,
                }],
                runtimes: vec![
                    RuntimeFingerprint {
                        api: "hip".into(),
                        status: "loaded".into(),
                        library: Some("libamdhip64.so.6".into()),
                        version: Some("6.3.42133".into()),
                        devices: Vec::new(),
                    },
                    RuntimeFingerprint {
                        api: "cuda".into(),
                        status: "unsupported: libcuda.so.1 not found".into(),
                        library: None,
                        version: None,
                        devices: Vec::new(),
                    },
                ],
                kernel_modules: vec![("amdgpu".into(), "6.10.5".into())],
                host_cpu: "AMD EPYC 7V13".into(),
                os_kernel: "Linux 6.8.0".into(),
            },
            summary: Summary::of(&results),
            results,
            status: RunStatus::Complete,
            not_run: Vec::new(),
            stale_baseline: Vec::new(),
            broken_vendors: Vec::new(),
        }
    }

    fn snapshot_settings() -> insta::Settings {
        let mut s = insta::Settings::clone_current();
        // Relative to this file: the crate's top-level snapshots/.
        s.set_snapshot_path("../snapshots");
        s
    }

    #[test]
    fn matrix_snapshot() {
        snapshot_settings().bind(|| {
            insta::assert_snapshot!("matrix", render_matrix(&sample_results()));
        });
    }

    #[test]
    fn markdown_snapshot() {
        snapshot_settings().bind(|| {
            insta::assert_snapshot!("markdown", render_markdown(&sample_report()));
        });
    }

    #[test]
    fn junit_snapshot() {
        let xml = junit_report(&sample_report()).to_string().unwrap();
        snapshot_settings().bind(|| insta::assert_snapshot!("junit", xml));
    }

    #[test]
    fn closing_line_counts_every_kind_and_the_unexpected() {
        let summary = Summary::of(&sample_results());
        snapshot_settings()
            .bind(|| insta::assert_snapshot!("closing_line", closing_line(&summary)));
        assert_eq!(summary.total, 16);
        assert_eq!(summary.count(OutcomeKind::Crash), 2);
        // fft mismatch, svm crash, svm timeout, and (the sample expects a baseline's passes)
        // the refusal and the skip of cases the baseline's driver passed; not the negative
        // control, the known fault or the mock crash.
        assert_eq!(summary.unexpected, 5);
        assert_eq!(summary.caught, 1);
        assert_eq!(summary.fail, 1);
    }

    #[test]
    fn worst_outcome_wins_the_cell() {
        let pocl = pair("pocl0", Peer::HOST);
        let mut cell = Cell::default();
        for outcome in [
            Outcome::pass(),
            Outcome::unsupported("no"),
            Outcome::Timeout { after_s: 1.0 },
            Outcome::Timeout { after_s: 1.0 },
        ] {
            cell.add(&result(
                &pocl,
                PathKind::Copy,
                SyncMode::Finish,
                Op::Fft,
                64,
                outcome,
            ));
        }
        assert_eq!(cell.text(), "timeout 2/4 !");
        cell.add(&result(
            &pocl,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Fft,
            64,
            mismatch("x"),
        ));
        assert_eq!(cell.text(), "fail 1/5 !");
    }

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

    #[test]
    fn shell_words_quote_only_what_needs_it() {
        let argv: Vec<String> = ["clhip", "run", "--filter", "svm fine", "it's"]
            .map(String::from)
            .into();
        assert_eq!(
            shell_words(&argv),
            r"clhip run --filter 'svm fine' 'it'\''s'"
        );
    }
}
