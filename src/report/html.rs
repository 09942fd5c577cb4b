//! The support matrix as one self-contained HTML file (`clhip report RUN.json --html`), and two
//! runs compared (`clhip diff OLD NEW --html`). Inline CSS only: no script, font, image or link
//! to anything outside the file, so it opens offline, attached to a bug, years later. Every cell
//! says its outcome in words as well as in colour, so it reads in black and white print too.
//!
//! The pages are maud templates, which escape every value they are given: a driver's reason,
//! a case id or a fingerprint line that holds `<` stays text. What goes in as markup is this
//! file's stylesheet and a figure's SVG, which `figure.rs` wrote anew from a whitelist. Text
//! from a results file also has its control characters shown as text ([`shown`]). Line breaks
//! between rows keep the page's source (and its snapshots) readable line by line.

use std::fmt::Write as _;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::model::{BIT_EXACT, Expectation, FailReason, Outcome, Verdict, is_negative_control};
use crate::model::{Op, PathKind, SyncMode};
use crate::results::CaseResult;

use super::figure::Figure;
use super::json::{RunReport, RunStatus, closing_line};
use super::markdown::{fingerprint_rows, is_measurement, shell_words};
use super::matrix::{
    Agreement, Cell, Grouped, InstallComparison, PairTable, compare_installs, expectation_label,
    group, group_of, is_problem, label, mark, one_line, rerun_notes, severity,
};

/// What each label means, in legend order; its colour is the `o-LABEL` class.
const LEGEND: [(&str, &str); 11] = [
    ("pass", "the data crossed and checked within its bound"),
    (
        "caught",
        "negative control: the check saw the stale read it exists to catch",
    ),
    (
        "fail",
        "wrong data with no error from anyone (silent corruption), or an API that broke after accepting the setup",
    ),
    ("fault", "the API reported a device memory fault"),
    ("crash", "a process of the case died by a signal"),
    ("timeout", "no result within the time limit"),
    (
        "unsup",
        "unsupported: the capability is absent, or a call refused it with an error code",
    ),
    ("skip", "not run, with the reason"),
    (
        "warn",
        "pass, with a kernel warning: the GPU driver logged while it ran",
    ),
    ("incomplete", "the run died during this case"),
    ("error", "the harness's own error: no verdict on the driver"),
];

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  margin: 1.5rem; color: #1b1b1b; background: #fff; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.92em; }
h1 { font-size: 1.5rem; margin: 0 0 0.6rem; }
h2 { font-size: 1.2rem; margin: 1.8rem 0 0.6rem; border-bottom: 1px solid #ccc; }
h3 { font-size: 1rem; margin: 1rem 0 0.4rem; }
table { border-collapse: collapse; }
table.kv th { text-align: left; padding: 1px 14px 1px 0; vertical-align: top; font-weight: 600; white-space: nowrap; }
table.kv td { padding: 1px 0; }
.problems { border: 2px solid #b71c1c; background: #fff3f3; padding: 0.4rem 0.8rem; }
.o-pass { --c: #c8e6c9; --e: #2e7d32; }
.o-caught { --c: #bbdefb; --e: #1565c0; }
.o-fail { --c: #ef9a9a; --e: #b71c1c; }
.o-fault { --c: #ffcc80; --e: #e65100; }
.o-crash { --c: #e1bee7; --e: #6a1b9a; }
.o-timeout { --c: #d7ccc8; --e: #4e342e; }
.o-unsup { --c: #e0e0e0; --e: #616161; }
.o-skip { --c: #f5f5f5; --e: #9e9e9e; }
.o-warn { --c: #e6ee9c; --e: #827717; }
.o-incomplete { --c: #b0bec5; --e: #37474f; }
.o-error { --c: #424242; --e: #212121; color: #fff; }
.o-none { --c: #fff; --e: #bbb; }
td.cell, .swatch, .chip { background: var(--c); }
td.cell.expected { background: repeating-linear-gradient(135deg, var(--c) 0 6px, #fff 6px 12px); }
nav.pairs ul, section.look ul { margin: 0.2rem 0; }
section.look { border: 2px solid #b71c1c; padding: 0.2rem 0.8rem; margin: 0.8rem 0; }
section.look.clear { border-color: #2e7d32; }
.swatch, .chip { display: inline-block; padding: 0 0.4em; border: 1px solid var(--e); border-radius: 3px; white-space: nowrap; }
.swatch { min-width: 4.5em; text-align: center; }
ul.legend { list-style: none; padding: 0; margin: 0; columns: 2 32em; }
ul.legend li { margin: 2px 0; break-inside: avoid; }
table.matrix th, table.matrix td { border: 1px solid #aaa; padding: 3px 6px; vertical-align: top; }
table.matrix thead th { background: #eceff1; text-align: left; }
table.matrix tbody th { text-align: left; font-weight: normal; white-space: nowrap; }
tr.control th { background: repeating-linear-gradient(135deg, #fff 0 5px, #e8e8e8 5px 10px); font-style: italic; }
td.cell { min-width: 7em; }
td.cell .worst { font-weight: 600; white-space: nowrap; }
td.cell .sizes { font-size: 11px; }
td.cell .sz { display: block; white-space: nowrap; }
td.empty { color: #999; text-align: center; }
td.unexpected { outline: 3px solid #b71c1c; outline-offset: -3px; }
td.unexpected-pass { outline: 2px dashed #0d47a1; outline-offset: -2px; }
sup.ref { font-size: 10px; font-weight: normal; }
sup.ref a { color: inherit; }
ol.notes { padding-left: 2.6em; }
ol.notes > li { margin: 0.5rem 0; break-inside: avoid; }
.entry { border-left: 6px solid var(--e); padding: 1px 0 1px 8px; margin: 3px 0; }
.entry .lbl { font-weight: 600; }
.reason { white-space: pre-wrap; overflow-wrap: anywhere; }
.bound, .extra { color: #333; }
pre.kmsg { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; border: 1px solid #ddd; margin: 2px 0; padding: 2px 4px; }
table.list th, table.list td { border: 1px solid #bbb; padding: 3px 6px; vertical-align: top; text-align: left; }
table.list td.reason { max-width: 40em; }
table.diff { width: 100%; }
table.diff td.reason { width: 36%; max-width: none; }
tr.mv-regression td:first-child { border-left: 5px solid #b71c1c; }
tr.mv-fix td:first-child { border-left: 5px solid #2e7d32; }
tr.fp-old td { background: #ffebee; }
tr.fp-new td { background: #e8f5e9; }
@page { size: A4 landscape; margin: 12mm; }
@media print {
  body { margin: 0; font-size: 10px; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  h2 { break-after: avoid; }
  table.matrix tr, table.list tr { break-inside: avoid; }
  sup.ref a { text-decoration: none; }
  td.cell .sizes { font-size: 8px; }
}
"#;

/// `clhip report RUN.json --html`: the run, its fingerprint, a legend, one matrix per pair with
/// a note per cell that needs explaining, then what the Markdown report lists besides.
/// `problems` are what loading found wrong with the file (incomplete, inconsistent): the page
/// says them first, since a reader of the page never sees the command's stderr.
pub fn render_html(report: &RunReport, problems: &[String]) -> String {
    render_html_with_figures(report, problems, &[])
}

/// [`render_html`] with figures after the matrix (the interop bench's plot).
pub fn render_html_with_figures(
    report: &RunReport,
    problems: &[String],
    figures: &[Figure],
) -> String {
    let status = match report.status {
        RunStatus::Complete => report.status.describe(),
        _ => format!(
            "{} ({} cases not run)",
            report.status.describe(),
            report.not_run.len()
        ),
    };
    let mut run = vec![
        ("started".to_string(), report.started_at.clone()),
        ("clhip".into(), report.clhip_build()),
        ("seed".into(), report.seed.to_string()),
        ("wall".into(), format!("{:.1} s", report.wall_s)),
        ("command".into(), shell_words(&report.command)),
        ("status".into(), status),
        ("result".into(), closing_line(&report.summary)),
    ];
    if let Some(p) = report.plant() {
        run.insert(2, ("planted".into(), p.describe()));
    }
    // The Markdown report's rows: (component, value).
    let fingerprint: Vec<(String, String)> = fingerprint_rows(&report.fingerprint)
        .into_iter()
        .map(|mut row| {
            let value = row.pop().unwrap_or_default();
            (row.join(" "), value)
        })
        .collect();
    let Grouped { pairs, mocks } = group(&report.results);
    // Notes are numbered across the whole page, so a printed "see 12" is unambiguous.
    let mut next_note = 1;
    let matrices: Vec<PairMatrix> = pairs
        .iter()
        .map(|(pair, table)| PairMatrix::of(pair, table, &mut next_note))
        .collect();
    let look: Vec<&CaseResult> = report
        .results
        .iter()
        .filter(|r| r.unexpected() || r.verdict() == Verdict::UnexpectedPass)
        .collect();
    let body = html! {
        header {
            "\n" h1 { "clhip results" } "\n"
            (kv_table(&run))
            (needs_a_look(&look))
            (pair_index(&matrices, &look))
            @if !problems.is_empty() {
                div.problems {
                    p { "This file is not a complete, consistent record of a run:" } "\n"
                    ul { "\n" @for p in problems { li { (shown(p)) } "\n" } }
                }
                "\n"
            }
        }
        "\n\n"
        section #fingerprint { "\n" h2 { "Fingerprint" } "\n" (kv_table(&fingerprint)) }
        "\n\n"
        (legend())
        @for m in &matrices { (pair_section(m)) }
        @if !mocks.is_empty() { (mock_section(&mocks)) }
        @for c in compare_installs(&report.results) { (install_section(&c)) }
        @for f in figures {
            section.figure { "\n" h2 { (shown(f.title())) } "\n" (f) "\n" }
            "\n"
        }
        (tail_sections(report))
    };
    page(&results_title(report, &matrices), body)
}

/// The page's title, which a browser's tab and history show: the pairs, the result, when.
fn results_title(report: &RunReport, matrices: &[PairMatrix<'_>]) -> String {
    let mut pairs: Vec<&str> = matrices.iter().map(|m| m.pair).take(3).collect();
    let more = matrices.len().saturating_sub(pairs.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    if pairs.is_empty() {
        pairs.push("no pair");
    }
    format!(
        "clhip: {}{more}: {} ({})",
        pairs.join(", "),
        closing_line(&report.summary),
        report.started_at
    )
}

/// The results that need a look, at the top of the page: each unexpected outcome and each
/// known non-pass that now passes, with its reason, linked to its pair's matrix.
fn needs_a_look(look: &[&CaseResult]) -> Markup {
    html! {
        @if look.is_empty() {
            section.look.clear #look { p { "Nothing needs a look: every outcome is as expected." } }
        } @else {
            section.look #look {
                "\n" p { strong { (look.len()) " need a look" } " (they decide the exit code):" } "\n"
                ul {
                    @for r in look {
                        li {
                            a href={ "#pair-" (shown(&group_of(&r.work))) } { code { (shown(&r.id)) } }
                            ": " span.chip.{ "o-" (r.outcome.kind().name()) } { (r.outcome.kind().name()) }
                            " " span.reason { (shown(&one_line(&r.outcome.reason()))) }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}

/// Links to each pair's matrix, with its number of cases and of those that need a look.
fn pair_index(matrices: &[PairMatrix<'_>], look: &[&CaseResult]) -> Markup {
    html! {
        @if matrices.len() > 1 {
            nav.pairs #pairs {
                "Pairs: "
                @for (i, m) in matrices.iter().enumerate() {
                    @if i > 0 { " · " }
                    @let flagged = look.iter().filter(|r| group_of(&r.work) == m.pair).count();
                    a href={ "#pair-" (shown(m.pair)) } { (shown(m.pair)) }
                    " (" (m.cases()) " cases"
                    @if flagged > 0 { ", " (flagged) " need a look" }
                    ")"
                }
            }
            "\n"
        }
    }
}

/// The mock results, which have no matrix: one row each.
fn mock_section(mocks: &[&CaseResult]) -> Markup {
    html! {
        section.mocks {
            "\n" h2 { "mock" } "\n"
            table.list {
                "\n" thead { tr { th { "case" } th { "outcome" } th { "reason" } } } "\n"
                tbody {
                    "\n"
                    @for r in mocks {
                        tr {
                            td { code { (shown(&r.id)) } }
                            td { span.chip.{ "o-" (label(r)) } { (label(r)) (pad(mark(r))) } }
                            td.reason { (shown(&r.outcome.reason())) }
                        }
                        "\n"
                    }
                }
                "\n"
            }
            "\n"
        }
        "\n"
    }
}

/// One GPU as the run's ROCm installs saw it: one column per install, rows marked where the
/// installs differ (`>`) or a negative control raced (`~`), then the differing cases' reasons.
fn install_section(c: &InstallComparison<'_>) -> Markup {
    let differing: Vec<_> = c
        .cases
        .iter()
        .filter(|k| k.agreement == Agreement::Differs)
        .collect();
    html! {
        section.installs {
            "\n" h2 { "Across ROCm installs: " code { (shown(&c.pairs)) } } "\n"
            p {
                (shown(&c.summary())) ". " code { ">" } " marks a row whose outcomes differ \
                between the installs, " code { "~" } " a negative control that passed on one and \
                caught its stale read on another."
            }
            "\n"
            table.matrix {
                "\n"
                thead {
                    tr {
                        th {} th { "path" } th { "sync" } th { "op" }
                        @for i in &c.installs { th { (shown(i)) } }
                    }
                }
                "\n"
                tbody {
                    "\n"
                    @for row in &c.rows {
                        tr {
                            td { (row.agreement.mark()) }
                            td { (row.path.to_string()) }
                            td { (row.sync.to_string()) }
                            td { (row.op.to_string()) }
                            @for text in &row.cells {
                                td.cell.{ "o-" (cell_colour(text)) } { (shown(text)) }
                            }
                        }
                        "\n"
                    }
                }
                "\n"
            }
            "\n"
            @if !differing.is_empty() {
                ul.notes {
                    "\n"
                    @for k in differing {
                        li {
                            code { (shown(&k.case)) } ": "
                            @for (i, (install, r)) in c.installs.iter().zip(&k.results).enumerate() {
                                @if i > 0 { "; " }
                                (shown(install)) ": "
                                @match r {
                                    None => { "not run" }
                                    Some(r) => {
                                        span.chip.{ "o-" (label(r)) } { (label(r)) }
                                        " " (shown(&r.outcome.reason()))
                                    }
                                }
                            }
                        }
                        "\n"
                    }
                }
                "\n"
            }
        }
        "\n"
    }
}

/// The colour class of a compared cell, from its text, which starts with its worst outcome's
/// label; `none` for anything that is not a label's shape.
fn cell_colour(text: &str) -> &str {
    let kind = text.split_whitespace().next().unwrap_or("none");
    if kind
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
    {
        kind
    } else {
        "none"
    }
}

/// One pair's matrix, its cells' notes numbered: worked out before the page is written, so
/// that the template only shows it.
struct PairMatrix<'t> {
    pair: &'t str,
    ops: Vec<Op>,
    rows: Vec<MatrixRow<'t>>,
}

impl PairMatrix<'_> {
    /// The pair's cases: every size of every cell.
    fn cases(&self) -> usize {
        self.rows
            .iter()
            .flat_map(|r| r.cells.iter().flatten())
            .map(|c| c.cell.total)
            .sum()
    }
}

struct MatrixRow<'t> {
    path: PathKind,
    sync: SyncMode,
    /// One per op; `None` where the row has no case of that op.
    cells: Vec<Option<MatrixCell<'t>>>,
}

struct MatrixCell<'t> {
    /// `pair/path/sync/op`, for tests and scripts to find the cell by.
    key: String,
    /// `path / sync / op`.
    place: String,
    results: &'t [&'t CaseResult],
    cell: Cell,
    entries: Vec<Entry>,
    note: Option<usize>,
}

impl<'t> PairMatrix<'t> {
    fn of(pair: &'t str, table: &'t PairTable<'t>, next_note: &mut usize) -> Self {
        let ops = table.ops();
        let rows = table
            .rows
            .iter()
            .map(|(&(path, sync), cells)| MatrixRow {
                path,
                sync,
                cells: ops
                    .iter()
                    .map(|op| {
                        let results = cells.get(op)?;
                        let note = needs_note(results).then(|| {
                            *next_note += 1;
                            *next_note - 1
                        });
                        Some(MatrixCell {
                            key: format!("{pair}/{path}/{sync}/{op}"),
                            place: format!("{path} / {sync} / {op}"),
                            results,
                            cell: Cell::of(results),
                            entries: entries(results),
                            note,
                        })
                    })
                    .collect(),
            })
            .collect();
        PairMatrix { pair, ops, rows }
    }
}

fn pair_section(m: &PairMatrix<'_>) -> Markup {
    let pair = m.pair;
    let notes: Vec<(usize, &MatrixCell)> = m
        .rows
        .iter()
        .flat_map(|row| row.cells.iter().flatten())
        .filter_map(|c| Some((c.note?, c)))
        .collect();
    html! {
        // An id has no spaces: a variant's table (`pair env:...`) joins them with `-`.
        section.pair id={ "pair-" (shown(&pair.replace(' ', "-"))) } {
            "\n" h2 { (shown(pair)) } "\n"
            table.matrix {
                "\n"
                thead { tr { th { "path" } th { "sync" } @for op in &m.ops { th { (op.to_string()) } } } }
                "\n"
                tbody {
                    "\n"
                    @for row in &m.rows {
                        @let control = is_negative_control(row.path, row.sync);
                        tr class=[control.then_some("control")] {
                            th { code { (row.path.to_string()) } }
                            th {
                                code { (row.sync.to_string()) }
                                @if control {
                                    abbr title="negative control: a sync the specification requires is left out" { "*" }
                                }
                            }
                            @for c in &row.cells {
                                @match c {
                                    None => { td.cell.o-none.empty { "-" } }
                                    Some(c) => { (matrix_cell(c)) }
                                }
                            }
                        }
                        "\n"
                    }
                }
                "\n"
            }
            "\n"
            @if let Some((first, _)) = notes.first() {
                h3 { "Notes on " (shown(pair)) } "\n"
                ol.notes start=(first) {
                    "\n"
                    @for (n, c) in &notes {
                        li id={ "note-" (n) } {
                            code { (shown(&format!("{pair} / {}", c.place))) } "\n"
                            @for e in &c.entries { (entry(e)) }
                        }
                        "\n"
                    }
                }
                "\n"
            }
        }
        "\n\n"
    }
}

/// Whether a cell's worst outcome is a problem its expectation knows (a baseline's fault): it
/// is drawn striped, apart from a new one. A negative control's caught stale read has a colour
/// of its own.
fn expected_problem(cell: &Cell) -> bool {
    cell.worst.is_some_and(is_problem) && !cell.unexpected && cell.worst_label != "caught"
}

/// A cell: its worst outcome and counts, the reference to its note, its sizes by outcome; the
/// note's text as the hover text.
fn matrix_cell(c: &MatrixCell<'_>) -> Markup {
    let cell = &c.cell;
    html! {
        td.cell.{ "o-" (cell.worst_label) }.unexpected[cell.unexpected].unexpected-pass[cell.unexpected_pass]
            .expected[expected_problem(cell)]
            data-cell=(shown(&c.key))
            title=(shown(&cell_title(&c.place, cell, &c.entries))) {
            div.worst {
                (shown(&cell.text()))
                @if let Some(n) = c.note {
                    " " sup.ref { a href={ "#note-" (n) } { (n) } }
                }
            }
            (sizes(c.results))
        }
    }
}

/// A cell needs a note when anything in it is more than a plain pass: a non-pass, a pass the
/// baseline did not expect, or a pass whose note is a measurement.
fn needs_note(results: &[&CaseResult]) -> bool {
    results.iter().any(|r| {
        r.verdict() != Verdict::Pass
            || !r.kernel_log.is_empty()
            || !r.reruns.is_empty()
            || is_measurement(r)
    })
}

/// The sizes of a cell by outcome, worst first; one line of sizes when they all agree.
fn sizes(results: &[&CaseResult]) -> Markup {
    let mut by_label: Vec<(&'static str, u8, Vec<usize>)> = Vec::new();
    for r in results {
        let n = r.work.case().map_or(0, |c| c.n);
        let l = label(r);
        match by_label.iter_mut().find(|(x, ..)| *x == l) {
            Some((.., ns)) => ns.push(n),
            None => by_label.push((l, severity(r.outcome.kind()), vec![n])),
        }
    }
    by_label.sort_by_key(|(_, sev, _)| std::cmp::Reverse(*sev));
    let one_story = by_label.len() == 1;
    let lines = by_label.into_iter().map(|(l, _, mut ns)| {
        ns.sort_unstable();
        let ns: Vec<String> = ns.iter().map(usize::to_string).collect();
        (l, ns.join(", "))
    });
    html! {
        div.sizes {
            @for (l, ns) in lines {
                span.sz { @if one_story { "n = " (ns) } @else { (l) ": " (ns) } }
            }
        }
    }
}

/// One entry of a cell's note: its sizes, outcome, reason, bound, history and kernel log.
fn entry(Entry { sizes, story: e }: &Entry) -> Markup {
    html! {
        div.entry.{ "o-" (e.label) } {
            span.mono { (sizes_text(sizes)) } " " span.lbl { (e.label) (pad(e.mark)) }
            @if !e.reason.is_empty() {
                ": " span.reason { (shown(&e.reason)) }
            }
            @if let Some(b) = &e.bound {
                div.bound { (shown(b)) }
            }
            @for x in &e.extra {
                div.extra { (shown(x)) }
            }
            @if !e.kernel_log.is_empty() {
                div.extra { "kernel log:" }
                pre.kmsg { (shown(&e.kernel_log.join("\n"))) }
            }
        }
        "\n"
    }
}

/// The sizes of a cell that tell one story: the same outcome, reason, bound, history and kernel
/// log. A cell of three sizes refused the same way is one entry, not three.
#[derive(Clone)]
struct Entry {
    sizes: Vec<usize>,
    story: Story,
}

#[derive(Clone, PartialEq)]
struct Story {
    label: &'static str,
    mark: &'static str,
    reason: String,
    bound: Option<String>,
    extra: Vec<String>,
    kernel_log: Vec<String>,
}

fn entries(results: &[&CaseResult]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut sorted = results.to_vec();
    sorted.sort_by_key(|r| r.work.case().map_or(0, |c| c.n));
    for r in sorted {
        let story = story(r);
        let n = r.work.case().map_or(0, |c| c.n);
        match out.iter_mut().find(|e| e.story == story) {
            Some(e) => e.sizes.push(n),
            None => out.push(Entry {
                sizes: vec![n],
                story,
            }),
        }
    }
    out
}

fn story(r: &CaseResult) -> Story {
    let mut extra = Vec::new();
    let kind = r.outcome.kind();
    match r.verdict() {
        Verdict::Regression => extra.push(format!(
            "unexpected ({}): fails the run",
            expectation_label(r.expectation)
        )),
        Verdict::HarnessError => extra.push("a harness error: fails the run".into()),
        Verdict::UnexpectedPass => extra.push(format!(
            "unexpected pass: known {}; update the baseline or expectation file",
            match r.expectation {
                Expectation::Known(k) => k.name(),
                _ => "otherwise",
            }
        )),
        Verdict::ExpectedNonPass if is_problem(kind) => extra.push(format!(
            "expected {kind} ({})",
            expectation_label(r.expectation)
        )),
        _ => {}
    }
    extra.extend(rerun_notes(r));
    Story {
        label: label(r),
        mark: mark(r),
        reason: r.outcome.reason(),
        bound: bound_line(&r.outcome),
        extra,
        kernel_log: r.kernel_log.clone(),
    }
}

/// A mismatch's worst error against its bound, the number a driver engineer looks at first.
fn bound_line(outcome: &Outcome) -> Option<String> {
    let Outcome::Fail {
        reason: FailReason::Mismatch(m),
    } = outcome
    else {
        return None;
    };
    Some(if m.formula == BIT_EXACT {
        "bound: bit-exact, no word may differ".to_string()
    } else {
        let times = if m.bound > 0.0 && (m.max_abs_err / m.bound).is_finite() {
            format!(" ({:.1}x the bound)", m.max_abs_err / m.bound)
        } else {
            String::new()
        };
        format!(
            "worst error {:.3e} against bound {:.3e}{times}; worst relative error {:.3e}; {} of {} elements out of bound; bound = {}",
            m.max_abs_err, m.bound, m.max_rel_err, m.count, m.len, m.formula
        )
    })
}

fn sizes_text(sizes: &[usize]) -> String {
    format!(
        "n={}",
        sizes
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The hover text: the same as the cell's note, as plain lines.
fn cell_title(place: &str, cell: &Cell, entries: &[Entry]) -> String {
    let mut t = format!("{place}: {}", cell.text());
    for Entry { sizes, story: e } in entries {
        let _ = write!(t, "\n\n{} {}{}", sizes_text(sizes), e.label, pad(e.mark));
        if !e.reason.is_empty() {
            let _ = write!(t, ": {}", e.reason);
        }
        for line in e.bound.iter().chain(&e.extra) {
            let _ = write!(t, "\n  {line}");
        }
        if !e.kernel_log.is_empty() {
            t.push_str("\n  kernel log:");
            for line in &e.kernel_log {
                let _ = write!(t, "\n    {line}");
            }
        }
    }
    t
}

fn pad(mark: &str) -> String {
    if mark.is_empty() {
        String::new()
    } else {
        format!(" {mark}")
    }
}

fn legend() -> Markup {
    html! {
        section #legend {
            "\n" h2 { "Legend" } "\n"
            ul.legend {
                "\n"
                @for (l, meaning) in LEGEND {
                    li { span.swatch.{ "o-" (l) } data-legend=(l) { (l) } " " (meaning) }
                    "\n"
                }
            }
            "\n"
            p {
                "A cell is one path, sync and op over every size run: it shows the worst outcome, \
                how many sizes had it and how many ran (" code { "fail 1/3" } "), and the sizes \
                by outcome. Rows in italics on a striped ground, their sync marked " code { "*" }
                ", are " b { "negative controls" } ": a sync the specification requires is left \
                out, so a " code { "caught" } " stale read shows the check works and a "
                code { "pass" } " means the driver happened to be coherent. " code { "!" }
                " and a solid red frame: an outcome that fails the run; " code { "?" } " and a \
                dashed frame: a known non-pass now passes (update the baseline). A number beside \
                the outcome is a note below the table with the reasons, the worst error against \
                its bound and the kernel log; hovering over the cell shows the same."
            }
            "\n"
        }
        "\n\n"
    }
}

/// What the Markdown report lists after its matrices: caught stale reads, consistency, broken
/// vendors, stale baseline entries.
fn tail_sections(report: &RunReport) -> Markup {
    html! {
        @if report.summary.caught > 0 {
            p {
                (report.summary.caught) " negative controls caught their stale read (each one's \
                mismatch is in its cell's note)."
            }
            "\n"
        }
        @if report.consistency.groups > 0 {
            section {
                "\n" h2 { "Consistency across identical GPUs" } "\n"
                ul {
                    "\n"
                    @if report.consistency.flagged.is_empty() {
                        li { "Every case came out the same on GPUs of the same model and driver." }
                        "\n"
                    }
                    @for l in report.consistency.lines() {
                        li.reason { (shown(&l)) } "\n"
                    }
                }
                "\n"
            }
            "\n"
        }
        @if !report.broken_vendors.is_empty() {
            section {
                "\n" h2 { "Broken OpenCL drivers" } "\n"
                p {
                    "Vendor libraries that crashed, hung or exited while being probed; every \
                    other vendor ran."
                }
                "\n"
                ul {
                    "\n"
                    @for v in &report.broken_vendors { li.reason { (shown(v)) } "\n" }
                }
                "\n"
            }
            "\n"
        }
        @if !report.stale_baseline.is_empty() {
            p {
                (report.stale_baseline.len()) " baseline entries matched no case of the run: "
                @for (i, s) in report.stale_baseline.iter().enumerate() {
                    @if i > 0 { ", " }
                    code { (shown(s)) }
                }
                "."
            }
            "\n"
        }
    }
}

/// The whole page: its head with the stylesheet, and `body`.
fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE) "\n"
        html lang="en" {
            "\n"
            head {
                "\n"
                meta charset="utf-8"; "\n"
                meta name="viewport" content="width=device-width, initial-scale=1"; "\n"
                title { (shown(title)) } "\n"
                // CSS is not HTML: entities would break it. It is this file's own constant.
                style { (PreEscaped(STYLE)) } "\n"
            }
            "\n"
            body { "\n" (body) }
            "\n"
        }
        "\n"
    }
    .into_string()
}

fn kv_table(rows: &[(String, String)]) -> Markup {
    html! {
        table.kv {
            "\n"
            @for (k, v) in rows {
                tr { th { (shown(k)) } td.reason { (shown(v)) } } "\n"
            }
        }
        "\n"
    }
}

/// Text from a results file (or a file name) for the template: its control characters shown
/// as text; the template escapes its markup.
fn shown(s: &str) -> String {
    crate::escape::html_template_text(s)
}

mod diff;
pub use diff::render_diff_html;

#[cfg(test)]
mod tests;
