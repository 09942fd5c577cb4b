//! Support matrices as text (one per pair, then mocks), the comparison of several ROCm installs
//! of one run, one-line outcomes and the closing line of counts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::escape::{terminal_line, terminal_text};
use crate::model::{
    Api, Expectation, Op, OutcomeKind, PathKind, SyncMode, Verdict, is_negative_control,
};
use crate::results::{CaseResult, Work};

/// The support matrices (one per pair, then mocks) and the list of every non-pass case, for a
/// terminal: no control character from a results file reaches it as itself.
pub fn render_matrix(results: &[CaseResult]) -> String {
    let mut out = render_tables(results);
    for c in compare_installs(results) {
        out.push_str(&render_comparison(&c));
        out.push('\n');
    }
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
    // Each piece from the results is escaped where it is put in; this catches any that is not.
    terminal_text(&out)
}

/// How bad a kind is, for the cell's "worst": wrong data is worse than any refusal or death,
/// and a clean refusal is the best non-pass (DOMAIN).
/// A harness error outranks them all in a cell: that cell says nothing about the driver.
pub(super) fn severity(kind: OutcomeKind) -> u8 {
    match kind {
        OutcomeKind::Pass => 0,
        OutcomeKind::Warn => 1,
        OutcomeKind::Skip => 2,
        OutcomeKind::Unsupported => 3,
        OutcomeKind::Incomplete => 4,
        OutcomeKind::Timeout => 5,
        OutcomeKind::Crash => 6,
        OutcomeKind::Fault => 7,
        OutcomeKind::Fail => 8,
        OutcomeKind::Error => 9,
    }
}

fn short_name(kind: OutcomeKind) -> &'static str {
    match kind {
        OutcomeKind::Unsupported => "unsup",
        kind => kind.name(),
    }
}

/// What a cell or listing calls a result: a negative control's stale read is `caught`.
pub(super) fn label(r: &CaseResult) -> &'static str {
    if r.verdict() == Verdict::CaughtStaleRead {
        "caught"
    } else {
        short_name(r.outcome.kind())
    }
}

/// The mark beside a result: `!` fails the run, `?` asks for a baseline update.
pub(super) fn mark(r: &CaseResult) -> &'static str {
    match r.verdict() {
        v if v.fails_run() => "!",
        Verdict::UnexpectedPass => "?",
        _ => "",
    }
}

/// Fail, fault, crash or timeout: the kinds that need an explanation when accepted.
pub(super) fn is_problem(kind: OutcomeKind) -> bool {
    severity(kind) >= severity(OutcomeKind::Timeout)
}

/// One cell: every size of one (path, sync, op) on one pair, summed up as its worst outcome.
#[derive(Default)]
pub(super) struct Cell {
    pub(super) total: usize,
    pub(super) worst: Option<OutcomeKind>,
    pub(super) worst_label: &'static str,
    pub(super) worst_count: usize,
    pub(super) unexpected: bool,
    pub(super) unexpected_pass: bool,
}

impl Cell {
    pub(super) fn of(results: &[&CaseResult]) -> Cell {
        let mut cell = Cell::default();
        for r in results {
            cell.add(r);
        }
        cell
    }

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

    pub(super) fn text(&self) -> String {
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

/// Rows (path, sync) and columns (op) of one pair, each cell holding its sizes' results in
/// run order; the derived orders are the `ALL` orders. Every rendering of a matrix (text,
/// Markdown, HTML) groups through this.
#[derive(Default)]
pub(super) struct PairTable<'a> {
    pub(super) rows: BTreeMap<(PathKind, SyncMode), BTreeMap<Op, Vec<&'a CaseResult>>>,
}

impl PairTable<'_> {
    /// The columns: the ops some row has, in `Op::ALL` order.
    pub(super) fn ops(&self) -> Vec<Op> {
        Op::ALL
            .iter()
            .copied()
            .filter(|op| self.rows.values().any(|cells| cells.contains_key(op)))
            .collect()
    }

    pub(super) fn has_negative_control(&self) -> bool {
        self.rows
            .keys()
            .any(|(path, sync)| is_negative_control(*path, *sync))
    }

    fn cells(&self) -> impl Iterator<Item = Cell> + '_ {
        self.rows
            .values()
            .flat_map(|c| c.values())
            .map(|results| Cell::of(results))
    }
}

/// A run's results as matrices: one table per pair (by pair id), and the mocks apart.
pub(super) struct Grouped<'a> {
    pub(super) pairs: BTreeMap<String, PairTable<'a>>,
    pub(super) mocks: Vec<&'a CaseResult>,
}

pub(super) fn group(results: &[CaseResult]) -> Grouped<'_> {
    let mut pairs: BTreeMap<String, PairTable> = BTreeMap::new();
    let mut mocks = Vec::new();
    for r in results {
        match &r.work {
            Work::Case(case) => pairs
                .entry(case.table())
                .or_default()
                .rows
                .entry((case.path, case.sync))
                .or_default()
                .entry(case.op)
                .or_default()
                .push(r),
            Work::Mock(_) => mocks.push(r),
        }
    }
    Grouped { pairs, mocks }
}

/// The group a result is shown and reported under: its pair (with its environment variant,
/// if any), or `mock`.
pub(super) fn group_of(work: &Work) -> String {
    match work {
        Work::Case(case) => case.table(),
        Work::Mock(_) => "mock".to_string(),
    }
}

pub(super) fn render_tables(results: &[CaseResult]) -> String {
    let Grouped { pairs, mocks } = group(results);
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

/// One pair's matrix as rows of cells, its header first: path, sync, then a column per op.
pub(super) fn pair_grid(table: &PairTable) -> Vec<Vec<String>> {
    let ops = table.ops();
    let mut grid = vec![
        ["path", "sync"]
            .into_iter()
            .map(String::from)
            .chain(ops.iter().map(|op| op.name().to_string()))
            .collect::<Vec<_>>(),
    ];
    for ((path, sync), cells) in &table.rows {
        let mut row = vec![path.to_string(), sync_label(*path, *sync)];
        row.extend(
            ops.iter()
                .map(|op| cells.get(op).map_or("-".into(), |c| Cell::of(c).text())),
        );
        grid.push(row);
    }
    grid
}

/// What the marks of one pair's matrix mean, for those it has.
pub(super) fn pair_notes(table: &PairTable) -> Vec<&'static str> {
    let mut notes = Vec::new();
    if table.has_negative_control() {
        notes.push(
            "* negative control (a required sync left out): `caught` means the check saw the stale read",
        );
    }
    if table.cells().any(|c| c.unexpected) {
        notes.push("! an outcome in the cell is unexpected");
    }
    if table.cells().any(|c| c.unexpected_pass) {
        notes.push("? a known non-pass in the cell now passes: update the baseline");
    }
    notes
}

fn render_pair(pair: &str, table: &PairTable) -> String {
    let mut out = format!("{}\n", terminal_line(pair));
    out.push_str(&align(&pair_grid(table), "  "));
    for note in pair_notes(table) {
        out.push_str(&format!("  {note}\n"));
    }
    out
}

/// The mock results, one row each: the id and its label.
pub(super) fn mock_grid(mocks: &[&CaseResult]) -> Vec<Vec<String>> {
    mocks
        .iter()
        .map(|r| {
            let mark = match mark(r) {
                "" => String::new(),
                m => format!(" {m}"),
            };
            vec![r.id.clone(), format!("{}{mark}", label(r))]
        })
        .collect()
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

/// Whether the installs of a comparison agree on a case (or on every case of a row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Agreement {
    Same,
    /// A negative control that passed on one install and caught its stale read on another:
    /// it races by design, so this says nothing about either install.
    Race,
    Differs,
}

impl Agreement {
    /// `>` the installs differ, `~` a negative control raced, blank they agree.
    pub(super) fn mark(self) -> &'static str {
        match self {
            Agreement::Same => "",
            Agreement::Race => "~",
            Agreement::Differs => ">",
        }
    }
}

/// One case (path, sync, op, size) under each install; `None` where that install has no result
/// for it (filtered, not run, or its device not found).
pub(super) struct ComparedCase<'a> {
    /// The case without its pair: `cl-svm-coarse/map/gemm/n=256`.
    pub case: String,
    pub results: Vec<Option<&'a CaseResult>>,
    pub agreement: Agreement,
}

/// One (path, sync, op) row: each install's cell, as in its own matrix.
pub(super) struct ComparedRow {
    pub path: PathKind,
    pub sync: SyncMode,
    pub op: Op,
    pub cells: Vec<String>,
    /// The worst disagreement among the row's cases.
    pub agreement: Agreement,
}

/// One GPU (an OpenCL device and a device ordinal) as several ROCm installs of one run saw it.
pub(super) struct InstallComparison<'a> {
    /// The pairs' ids with the install as a glob (`rocm0+hip@*:0`): with `/*` after it, the
    /// filter that selects these cases in `clhip list` and `clhip run`.
    pub pairs: String,
    /// `hip@6.3.2`, `hip@7.0.0`: one column each, in the run's order.
    pub installs: Vec<String>,
    pub rows: Vec<ComparedRow>,
    pub cases: Vec<ComparedCase<'a>>,
}

impl InstallComparison<'_> {
    pub(super) fn count(&self, a: Agreement) -> usize {
        self.cases.iter().filter(|c| c.agreement == a).count()
    }

    /// `1 of 4 cases differ between the installs; 1 negative control raced (...)`.
    pub(super) fn summary(&self) -> String {
        let mut line = format!(
            "{} of {} cases differ between the installs",
            self.count(Agreement::Differs),
            self.cases.len()
        );
        let races = self.count(Agreement::Race);
        if races > 0 {
            let _ = write!(
                line,
                "; {races} negative controls passed on one and caught their stale read on \
                 another: they race by design and are not counted"
            );
        }
        line
    }
}

fn agreement(case: &crate::model::Case, results: &[Option<&CaseResult>]) -> Agreement {
    let labels: Vec<&str> = results.iter().map(|r| r.map_or("-", label)).collect();
    if labels.iter().all(|l| *l == labels[0]) {
        Agreement::Same
    } else if case.is_negative_control() && labels.iter().all(|l| ["pass", "caught"].contains(l)) {
        Agreement::Race
    } else {
        Agreement::Differs
    }
}

/// The comparisons of a run with several ROCm installs: one per GPU that two or more installs
/// ran cases on. Empty for a run of one install (its pairs carry no install).
pub(super) fn compare_installs(results: &[CaseResult]) -> Vec<InstallComparison<'_>> {
    type Gpu = (String, Api, usize);
    // Per GPU: the installs in the run's order, and each case's result per install.
    type Seen<'a> = (
        Vec<String>,
        BTreeMap<(PathKind, SyncMode, Op, usize), BTreeMap<String, &'a CaseResult>>,
    );
    let mut gpus: BTreeMap<Gpu, Seen<'_>> = BTreeMap::new();
    for r in results {
        let Some(case) = r.work.case() else { continue };
        let p = &case.pair;
        // Installs are compared in the plain environment; a variant's cases are in each
        // install's own table.
        if p.install.is_none() || !case.env.is_empty() {
            continue;
        }
        let (installs, cases) = gpus
            .entry((p.opencl.label.clone(), p.peer.api, p.peer.ordinal))
            .or_default();
        let column = p.participant();
        if !installs.contains(&column) {
            installs.push(column.clone());
        }
        cases
            .entry((case.path, case.sync, case.op, case.n))
            .or_default()
            .insert(column, r);
    }
    gpus.into_iter()
        .filter(|(_, (installs, _))| installs.len() > 1)
        .map(|((cl, api, ordinal), (installs, by_case))| {
            let mut rows: BTreeMap<(PathKind, SyncMode, Op), (Vec<Cell>, Agreement)> =
                BTreeMap::new();
            let mut cases = Vec::new();
            for ((path, sync, op, n), per_install) in by_case {
                let results: Vec<Option<&CaseResult>> = installs
                    .iter()
                    .map(|i| per_install.get(i).copied())
                    .collect();
                let Some(case) = results.iter().flatten().find_map(|r| r.work.case()) else {
                    continue;
                };
                let agreement = agreement(case, &results);
                let (cells, row_agreement) = rows.entry((path, sync, op)).or_insert_with(|| {
                    (
                        installs.iter().map(|_| Cell::default()).collect(),
                        Agreement::Same,
                    )
                });
                for (cell, r) in cells.iter_mut().zip(&results) {
                    if let Some(r) = r {
                        cell.add(r);
                    }
                }
                *row_agreement = (*row_agreement).max(agreement);
                cases.push(ComparedCase {
                    case: format!("{path}/{sync}/{op}/n={n}"),
                    results,
                    agreement,
                });
            }
            InstallComparison {
                pairs: format!("{cl}+{}@*:{ordinal}", api.name()),
                installs,
                rows: rows
                    .into_iter()
                    .map(|((path, sync, op), (cells, agreement))| ComparedRow {
                        path,
                        sync,
                        op,
                        cells: cells.iter().map(Cell::text).collect(),
                        agreement,
                    })
                    .collect(),
                cases,
            }
        })
        .collect()
}

/// `path (sync*)`: a negative control's sync carries its `*`, as in the matrix.
pub(super) fn sync_label(path: PathKind, sync: SyncMode) -> String {
    if is_negative_control(path, sync) {
        format!("{sync}*")
    } else {
        sync.to_string()
    }
}

/// A comparison as text: the rows with a column per install, each differing row marked, then
/// every differing case with each install's outcome.
fn render_comparison(c: &InstallComparison) -> String {
    let mut grid = vec![
        ["", "path", "sync", "op"]
            .into_iter()
            .map(String::from)
            .chain(c.installs.iter().cloned())
            .collect::<Vec<_>>(),
    ];
    for row in &c.rows {
        let mut line = vec![
            row.agreement.mark().to_string(),
            row.path.to_string(),
            sync_label(row.path, row.sync),
            row.op.to_string(),
        ];
        line.extend(row.cells.iter().cloned());
        grid.push(line);
    }
    let mut out = format!("{}: one column per ROCm install\n", terminal_line(&c.pairs));
    out.push_str(&align(&grid, "  "));
    out.push_str("  > the installs' outcomes differ; ~ a negative control raced\n");
    let differing: Vec<&ComparedCase> = c
        .cases
        .iter()
        .filter(|k| k.agreement == Agreement::Differs)
        .collect();
    if !differing.is_empty() {
        out.push_str("  differing cases:\n");
        for k in differing {
            let each: Vec<String> = c
                .installs
                .iter()
                .zip(&k.results)
                .map(|(i, r)| format!("{i} {}", r.map_or("not run", label)))
                .collect();
            let _ = writeln!(
                out,
                "    {}: {}",
                terminal_line(&k.case),
                terminal_line(&each.join(", "))
            );
        }
    }
    let _ = writeln!(out, "  {}", c.summary());
    out
}

/// Left-aligned columns, two spaces apart, without trailing blanks; each cell escaped for the
/// terminal before it is measured.
fn align(grid: &[Vec<String>], indent: &str) -> String {
    let grid: Vec<Vec<String>> = grid
        .iter()
        .map(|row| row.iter().map(|cell| terminal_line(cell)).collect())
        .collect();
    let grid = &grid[..];
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
pub(super) fn non_pass(results: &[CaseResult]) -> Vec<&CaseResult> {
    results
        .iter()
        .filter(|r| match r.verdict() {
            Verdict::CaughtStaleRead => false,
            Verdict::UnexpectedPass | Verdict::Flaky => true,
            _ => r.outcome.kind() != OutcomeKind::Pass,
        })
        .collect()
}

pub(super) fn caught_line(results: &[CaseResult]) -> Option<String> {
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

pub(super) fn expectation_label(e: Expectation) -> &'static str {
    match e {
        Expectation::Pass => "expected pass",
        Expectation::Unbaselined => "no baseline",
        Expectation::Known(_) => "known",
        Expectation::KnownFlaky(..) => "known flake",
        Expectation::NegativeControl => "negative control",
    }
}

/// For a non-pass the expectation accepts: why it is fine, e.g. `expected fail (negative
/// control): ...`.
pub(super) fn accepted_note(r: &CaseResult) -> Option<String> {
    let kind = r.outcome.kind();
    (is_problem(kind) && !r.unexpected()).then(|| {
        format!(
            "expected {kind} ({}): {}",
            expectation_label(r.expectation),
            r.outcome.reason()
        )
    })
}

/// `! crash        mock/segfault/1: worker killed by SIGSEGV (signal 11)`: `!` marks what fails
/// the run, `?` an unexpected pass; an accepted problem says why it is accepted. One line for
/// a terminal: the reason's and the kernel log's control characters are shown as text.
pub fn outcome_line(r: &CaseResult) -> String {
    outcome_line_from(r, None)
}

/// [`outcome_line`], naming where a known outcome comes from (`x.toml:12`, the rule of an
/// expectation file, or `baseline b.csv`) when the caller knows.
pub fn outcome_line_from(r: &CaseResult, source: Option<&str>) -> String {
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
    let known = match r.expectation {
        Expectation::Known(k) => k.name().to_string(),
        Expectation::KnownFlaky(a, b) => format!("{a} or {b}"),
        _ => "otherwise".to_string(),
    };
    if r.verdict() == Verdict::UnexpectedPass {
        let _ = match source {
            Some(at) => write!(line, " (unexpected pass: {at} says {known}; update it)"),
            None => write!(
                line,
                " (unexpected pass: known {known}; update the baseline or expectation file)"
            ),
        };
    } else if is_problem(kind) && !r.unexpected() {
        let _ = write!(line, " ({}", expectation_label(r.expectation));
        if let (Expectation::Known(_) | Expectation::KnownFlaky(..), Some(at)) =
            (r.expectation, source)
        {
            let _ = write!(line, ": {at}");
        }
        line.push(')');
    } else if let (Expectation::Known(_) | Expectation::KnownFlaky(..), Some(at)) =
        (r.expectation, source)
        && r.unexpected()
    {
        let _ = write!(line, " ({at} says {known})");
    }
    line.push_str(&history(r));
    terminal_line(&line)
}

/// What reruns, the bisection and the kernel log add to a result, as ` [..]` notes.
pub(super) fn history(r: &CaseResult) -> String {
    let mut out = String::new();
    for note in rerun_notes(r) {
        let _ = write!(out, " [{note}]");
    }
    if let Some(first) = r.kernel_log.first() {
        let more = r.kernel_log.len() - 1;
        let _ = write!(
            out,
            " [kernel log: {first}{}]",
            if more > 0 {
                format!(" (+{more} lines)")
            } else {
                String::new()
            }
        );
    }
    out
}

/// What reruns and the bisection found: `flaky: alone it came out pass`, `fails only after X`.
pub(super) fn rerun_notes(r: &CaseResult) -> Vec<String> {
    let mut notes = Vec::new();
    if !r.reruns.is_empty() {
        let kinds: Vec<&str> = r.reruns.iter().map(|o| o.kind().name()).collect();
        let what = if r.verdict() == Verdict::Flaky {
            "flaky"
        } else {
            "again"
        };
        notes.push(format!("{what}: alone it came out {}", kinds.join(", ")));
    }
    if let Some(after) = &r.fails_only_after {
        notes.push(format!("fails only after {after}"));
    }
    notes
}

pub(super) fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Outcome, Peer};
    use crate::report::tests::{mismatch, pair, result};

    #[test]
    fn worst_outcome_wins_the_cell() {
        let pocl = pair("pocl0", Peer::HOST);
        let mut cell = Cell::default();
        for outcome in [
            Outcome::pass(),
            Outcome::unsupported("no"),
            Outcome::timeout(1.0),
            Outcome::timeout(1.0),
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

    /// A driver's text with a terminal escape, an OSC 8 link, a carriage return and a bidi
    /// override, in a pair label, a reason and a kernel log line.
    #[test]
    fn the_terminal_matrix_shows_control_characters_as_text() {
        let evil = pair("evil\x1b[31m0", Peer::HOST);
        let mut r = result(
            &evil,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Fft,
            64,
            Outcome::unsupported("no\x1b[2J\x1b]8;;https://x.example/\x07\u{202e}x\ry"),
        );
        r.kernel_log = vec!["log\x1b[1A".into()];
        let text = render_matrix(std::slice::from_ref(&r));
        let raw: Vec<char> = text
            .chars()
            .filter(|&c| crate::escape::is_control(c) && c != '\n')
            .collect();
        assert_eq!(raw, Vec::<char>::new(), "{text}");
        assert!(text.starts_with("evil\\x1b[31m0+host\n"), "{text}");
        assert!(
            text.contains(r"no\x1b[2J\x1b]8;;https://x.example/\x07\u{202e}x\x0dy"),
            "{text}"
        );
        assert!(text.contains(r"[kernel log: log\x1b[1A]"), "{text}");
        let line = outcome_line(&r);
        assert!(!line.chars().any(crate::escape::is_control), "{line:?}");
    }
}
