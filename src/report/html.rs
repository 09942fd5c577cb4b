//! The support matrix as one self-contained HTML file (`clhip report RUN.json --html`), and two
//! runs compared (`clhip diff OLD NEW --html`). Inline CSS only: no script, font, image or link
//! to anything outside the file, so it opens offline, attached to a bug, years later. Every cell
//! says its outcome in words as well as in colour, so it reads in black and white print too.
//! Every string that comes from a results file is escaped: a driver's reason can hold `<`.

use std::fmt::Write as _;

use crate::model::{BIT_EXACT, Expectation, FailReason, Outcome, Verdict, is_negative_control};
use crate::results::CaseResult;

use super::diff::{Movement, RunDiff, grouped, summary_line};
use super::figure::Figure;
use super::json::{RunReport, RunStatus, closing_line};
use super::markdown::{fingerprint_rows, is_measurement, shell_words};
use super::matrix::{
    Agreement, Cell, Grouped, InstallComparison, PairTable, compare_installs, expectation_label,
    group, is_problem, label, mark, rerun_notes, severity,
};

/// What each label means, in legend order; its colour is the `o-LABEL` class.
const LEGEND: [(&str, &str); 9] = [
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
.o-error { --c: #424242; --e: #212121; color: #fff; }
.o-none { --c: #fff; --e: #bbb; }
td.cell, .swatch, .chip { background: var(--c); }
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
    let mut out = head(&format!("clhip results, {}", report.started_at));
    out.push_str("<header>\n<h1>clhip results</h1>\n");
    let status = match report.status {
        RunStatus::Complete => report.status.describe(),
        _ => format!(
            "{} ({} cases not run)",
            report.status.describe(),
            report.not_run.len()
        ),
    };
    kv_table(
        &mut out,
        &[
            ("started".into(), report.started_at.clone()),
            ("clhip".into(), report.clhip_version.clone()),
            ("seed".into(), report.seed.to_string()),
            ("wall".into(), format!("{:.1} s", report.wall_s)),
            ("command".into(), shell_words(&report.command)),
            ("status".into(), status),
            ("result".into(), closing_line(&report.summary)),
        ],
    );
    if !problems.is_empty() {
        out.push_str("<div class=\"problems\"><p>This file is not a complete, consistent record of a run:</p>\n<ul>\n");
        for p in problems {
            let _ = writeln!(out, "<li>{}</li>", esc(p));
        }
        out.push_str("</ul></div>\n");
    }
    out.push_str("</header>\n\n<section id=\"fingerprint\">\n<h2>Fingerprint</h2>\n");
    // The Markdown report's rows: (component, value).
    let rows: Vec<(String, String)> = fingerprint_rows(&report.fingerprint)
        .into_iter()
        .map(|mut row| {
            let value = row.pop().unwrap_or_default();
            (row.join(" "), value)
        })
        .collect();
    kv_table(&mut out, &rows);
    out.push_str("</section>\n\n");
    legend(&mut out);

    let Grouped { pairs, mocks } = group(&report.results);
    let mut next_note = 1;
    for (pair, table) in &pairs {
        render_pair(&mut out, pair, table, &mut next_note);
    }
    if !mocks.is_empty() {
        out.push_str("<section class=\"mocks\">\n<h2>mock</h2>\n<table class=\"list\">\n<thead><tr><th>case</th><th>outcome</th><th>reason</th></tr></thead>\n<tbody>\n");
        for r in &mocks {
            let _ = writeln!(
                out,
                "<tr><td><code>{}</code></td><td><span class=\"chip o-{}\">{}{}</span></td><td class=\"reason\">{}</td></tr>",
                esc(&r.id),
                label(r),
                label(r),
                pad(mark(r)),
                esc(&r.outcome.reason())
            );
        }
        out.push_str("</tbody>\n</table>\n</section>\n");
    }
    for c in compare_installs(&report.results) {
        render_comparison(&mut out, &c);
    }
    for f in figures {
        let _ = writeln!(
            out,
            "<section class=\"figure\">\n<h2>{}</h2>\n{}\n</section>",
            esc(&f.title),
            f.svg
        );
    }
    tail_sections(&mut out, report);
    out.push_str("</body>\n</html>\n");
    out
}

/// One GPU as the run's ROCm installs saw it: one column per install, rows marked where the
/// installs differ (`>`) or a negative control raced (`~`), then the differing cases' reasons.
fn render_comparison(out: &mut String, c: &InstallComparison<'_>) {
    let _ = writeln!(
        out,
        "<section class=\"installs\">\n<h2>Across ROCm installs: <code>{}</code></h2>\n<p>{}. <code>&gt;</code> marks a row whose outcomes differ between the installs, <code>~</code> a negative control that passed on one and caught its stale read on another.</p>\n<table class=\"matrix\">\n<thead><tr><th></th><th>path</th><th>sync</th><th>op</th>{}</tr></thead>\n<tbody>",
        esc(&c.pairs),
        esc(&c.summary()),
        c.installs
            .iter()
            .map(|i| format!("<th>{}</th>", esc(i)))
            .collect::<String>()
    );
    for row in &c.rows {
        let cells: String = row
            .cells
            .iter()
            .map(|text| {
                // The cell's text starts with its worst outcome's label, which names its colour.
                let kind = text.split_whitespace().next().unwrap_or("none");
                let kind = if kind
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
                {
                    kind
                } else {
                    "none"
                };
                format!("<td class=\"cell o-{kind}\">{}</td>", esc(text))
            })
            .collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{cells}</tr>",
            esc(row.agreement.mark()),
            esc(&row.path.to_string()),
            esc(&row.sync.to_string()),
            esc(&row.op.to_string())
        );
    }
    out.push_str("</tbody>\n</table>\n");
    let differing: Vec<_> = c
        .cases
        .iter()
        .filter(|k| k.agreement == Agreement::Differs)
        .collect();
    if !differing.is_empty() {
        out.push_str("<ul class=\"notes\">\n");
        for k in differing {
            let per_install: Vec<String> = c
                .installs
                .iter()
                .zip(&k.results)
                .map(|(install, r)| match r {
                    None => format!("{}: not run", esc(install)),
                    Some(r) => format!(
                        "{}: <span class=\"chip o-{}\">{}</span> {}",
                        esc(install),
                        label(r),
                        label(r),
                        esc(&r.outcome.reason())
                    ),
                })
                .collect();
            let _ = writeln!(
                out,
                "<li><code>{}</code>: {}</li>",
                esc(&k.case),
                per_install.join("; ")
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn render_pair(out: &mut String, pair: &str, table: &PairTable, next_note: &mut usize) {
    let ops = table.ops();
    let _ = writeln!(
        out,
        "<section class=\"pair\" id=\"pair-{}\">\n<h2>{}</h2>",
        esc(pair),
        esc(pair)
    );
    out.push_str("<table class=\"matrix\">\n<thead><tr><th>path</th><th>sync</th>");
    for op in &ops {
        let _ = write!(out, "<th>{op}</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    // Notes are numbered across the whole page, so a printed "see 12" is unambiguous.
    let mut notes = Vec::new();
    for ((path, sync), cells) in &table.rows {
        let control = is_negative_control(*path, *sync);
        let _ = write!(
            out,
            "<tr{}><th><code>{path}</code></th><th><code>{sync}</code>{}</th>",
            if control { " class=\"control\"" } else { "" },
            if control {
                "<abbr title=\"negative control: a sync the specification requires is left out\">*</abbr>"
            } else {
                ""
            }
        );
        for op in &ops {
            let Some(results) = cells.get(op) else {
                out.push_str("<td class=\"cell o-none empty\">-</td>");
                continue;
            };
            let key = format!("{pair}/{path}/{sync}/{op}");
            let cell = Cell::of(results);
            let entries = entries(results);
            let note = needs_note(results).then(|| {
                let n = *next_note;
                *next_note += 1;
                notes.push((n, format!("{path} / {sync} / {op}"), entries.clone()));
                n
            });
            let mut classes = format!("cell o-{}", cell.worst_label);
            if cell.unexpected {
                classes.push_str(" unexpected");
            }
            if cell.unexpected_pass {
                classes.push_str(" unexpected-pass");
            }
            let _ = write!(
                out,
                "<td class=\"{classes}\" data-cell=\"{}\" title=\"{}\"><div class=\"worst\">{}",
                esc(&key),
                esc_attr(&cell_title(
                    &format!("{path} / {sync} / {op}"),
                    &cell,
                    &entries
                )),
                esc(&cell.text()),
            );
            if let Some(n) = note {
                let _ = write!(
                    out,
                    " <sup class=\"ref\"><a href=\"#note-{n}\">{n}</a></sup>"
                );
            }
            out.push_str("</div>");
            sizes(out, results);
            out.push_str("</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    if !notes.is_empty() {
        let _ = writeln!(
            out,
            "<h3>Notes on {}</h3>\n<ol class=\"notes\" start=\"{}\">",
            esc(pair),
            notes[0].0
        );
        for (n, place, entries) in &notes {
            let _ = writeln!(
                out,
                "<li id=\"note-{n}\"><code>{}</code>",
                esc(&format!("{pair} / {place}"))
            );
            for e in entries {
                entry_html(out, e);
            }
            out.push_str("</li>\n");
        }
        out.push_str("</ol>\n");
    }
    out.push_str("</section>\n\n");
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
fn sizes(out: &mut String, results: &[&CaseResult]) {
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
    out.push_str("<div class=\"sizes\">");
    for (l, _, mut ns) in by_label.iter().cloned() {
        ns.sort_unstable();
        let ns: Vec<String> = ns.iter().map(usize::to_string).collect();
        if by_label.len() == 1 {
            let _ = write!(out, "<span class=\"sz\">n = {}</span>", ns.join(", "));
        } else {
            let _ = write!(out, "<span class=\"sz\">{l}: {}</span>", ns.join(", "));
        }
    }
    out.push_str("</div>");
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

fn entry_html(out: &mut String, Entry { sizes, story: e }: &Entry) {
    let _ = write!(
        out,
        "<div class=\"entry o-{}\"><span class=\"mono\">{}</span> <span class=\"lbl\">{}{}</span>",
        e.label,
        esc(&sizes_text(sizes)),
        e.label,
        pad(e.mark)
    );
    if !e.reason.is_empty() {
        let _ = write!(out, ": <span class=\"reason\">{}</span>", esc(&e.reason));
    }
    if let Some(b) = &e.bound {
        let _ = write!(out, "<div class=\"bound\">{}</div>", esc(b));
    }
    for x in &e.extra {
        let _ = write!(out, "<div class=\"extra\">{}</div>", esc(x));
    }
    if !e.kernel_log.is_empty() {
        let _ = write!(
            out,
            "<div class=\"extra\">kernel log:</div><pre class=\"kmsg\">{}</pre>",
            esc(&e.kernel_log.join("\n"))
        );
    }
    out.push_str("</div>\n");
}

fn pad(mark: &str) -> String {
    if mark.is_empty() {
        String::new()
    } else {
        format!(" {mark}")
    }
}

fn legend(out: &mut String) {
    out.push_str("<section id=\"legend\">\n<h2>Legend</h2>\n<ul class=\"legend\">\n");
    for (l, meaning) in LEGEND {
        let _ = writeln!(
            out,
            "<li><span class=\"swatch o-{l}\" data-legend=\"{l}\">{l}</span> {meaning}</li>"
        );
    }
    out.push_str(
        "</ul>\n<p>A cell is one path, sync and op over every size run: it shows the worst \
         outcome, how many sizes had it and how many ran (<code>fail 1/3</code>), and the sizes \
         by outcome. Rows in italics on a striped ground, their sync marked <code>*</code>, are \
         <b>negative controls</b>: a sync the specification requires is left out, so a \
         <code>caught</code> stale read shows the check works and a <code>pass</code> means the \
         driver happened to be coherent. <code>!</code> and a solid red frame: an outcome that \
         fails the run; <code>?</code> and a dashed frame: a known non-pass now passes (update \
         the baseline). A number beside the outcome is a note below the table with the reasons, \
         the worst error against its bound and the kernel log; hovering over the cell shows the \
         same.</p>\n</section>\n\n",
    );
}

/// What the Markdown report lists after its matrices: caught stale reads, consistency, broken
/// vendors, stale baseline entries.
fn tail_sections(out: &mut String, report: &RunReport) {
    if report.summary.caught > 0 {
        let _ = writeln!(
            out,
            "<p>{} negative controls caught their stale read (each one's mismatch is in its cell's note).</p>",
            report.summary.caught
        );
    }
    if report.consistency.groups > 0 {
        out.push_str("<section>\n<h2>Consistency across identical GPUs</h2>\n<ul>\n");
        if report.consistency.flagged.is_empty() {
            out.push_str(
                "<li>Every case came out the same on GPUs of the same model and driver.</li>\n",
            );
        }
        for l in report.consistency.lines() {
            let _ = writeln!(out, "<li class=\"reason\">{}</li>", esc(&l));
        }
        out.push_str("</ul>\n</section>\n");
    }
    if !report.broken_vendors.is_empty() {
        out.push_str("<section>\n<h2>Broken OpenCL drivers</h2>\n<p>Vendor libraries that crashed, hung or exited while being probed; every other vendor ran.</p>\n<ul>\n");
        for v in &report.broken_vendors {
            let _ = writeln!(out, "<li class=\"reason\">{}</li>", esc(v));
        }
        out.push_str("</ul>\n</section>\n");
    }
    if !report.stale_baseline.is_empty() {
        let _ = writeln!(
            out,
            "<p>{} baseline entries matched no case of the run: {}.</p>",
            report.stale_baseline.len(),
            report
                .stale_baseline
                .iter()
                .map(|s| format!("<code>{}</code>", esc(s)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// `clhip diff OLD NEW --html`: the runs compared, the fingerprints' differences on top, then
/// every case that moved, grouped by path, worst movement first, with both sides' reasons.
/// `old` and `new` name the two files.
pub fn render_diff_html(d: &RunDiff, old: (&str, &RunReport), new: (&str, &RunReport)) -> String {
    let mut out = head("clhip diff");
    out.push_str("<header>\n<h1>clhip diff</h1>\n");
    let side = |(name, r): (&str, &RunReport)| {
        format!(
            "{name}: started {}, clhip {}, seed {}, {} results; {}",
            r.started_at,
            r.clhip_version,
            r.seed,
            r.results.len(),
            closing_line(&r.summary)
        )
    };
    kv_table(
        &mut out,
        &[
            ("old".into(), side(old)),
            ("new".into(), side(new)),
            ("moved".into(), summary_line(d)),
        ],
    );
    out.push_str("</header>\n\n<section id=\"fingerprint\">\n<h2>Fingerprint</h2>\n");
    if d.fingerprint_old.is_empty() && d.fingerprint_new.is_empty() {
        out.push_str("<p>The same on both sides.</p>\n");
    } else {
        out.push_str(
            "<table class=\"list\">\n<thead><tr><th>run</th><th>line</th></tr></thead>\n<tbody>\n",
        );
        for (class, run, lines) in [
            ("fp-old", "old", &d.fingerprint_old),
            ("fp-new", "new", &d.fingerprint_new),
        ] {
            for l in lines {
                let _ = writeln!(
                    out,
                    "<tr class=\"{class}\"><td>{run}</td><td class=\"reason\">{}</td></tr>",
                    esc(l)
                );
            }
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("</section>\n\n");
    out.push_str(
        "<section id=\"legend\">\n<h2>Legend</h2>\n<p>Severity order: pass &lt; skip &lt; \
         unsupported &lt; fault, crash, timeout &lt; fail. A move up is a <b>regression</b> \
         (red edge, <code>!</code>), pass -&gt; unsupported (a capability gone) and fault -&gt; \
         fail (a refusal become silent corruption) included; a move down is a <b>fix</b> (green \
         edge); a move within a level is a change. A negative control flipping between pass and \
         a caught stale read is a race, not a finding.</p>\n<ul class=\"legend\">\n",
    );
    for (l, meaning) in LEGEND {
        let _ = writeln!(
            out,
            "<li><span class=\"swatch o-{l}\">{l}</span> {meaning}</li>"
        );
    }
    out.push_str("</ul>\n</section>\n\n");
    for (path, moved) in grouped(d) {
        let _ = writeln!(
            out,
            "<section class=\"path\">\n<h2><code>{}</code></h2>\n<table class=\"list diff\">\n<thead><tr><th></th><th>movement</th><th>case</th><th>old</th><th>new</th></tr></thead>\n<tbody>",
            esc(&path)
        );
        for m in moved {
            let class = match m.movement {
                Movement::Regression => "mv-regression",
                Movement::Fix => "mv-fix",
                _ => "mv-other",
            };
            let _ = write!(
                out,
                "<tr class=\"{class}\" data-case=\"{}\"><td>{}</td><td>{}</td><td><code>{}</code></td>",
                esc(m.id),
                if m.movement == Movement::Regression {
                    "!"
                } else {
                    ""
                },
                m.movement.name(),
                esc(m.id)
            );
            for r in [m.old, m.new] {
                match r {
                    None => out.push_str("<td class=\"reason\">-</td>"),
                    Some(r) => {
                        let _ = write!(
                            out,
                            "<td class=\"reason\"><span class=\"chip o-{}\">{}</span> {}</td>",
                            label(r),
                            label(r),
                            esc(&r.outcome.reason())
                        );
                    }
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n</section>\n\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(title)
    )
}

fn kv_table(out: &mut String, rows: &[(String, String)]) {
    out.push_str("<table class=\"kv\">\n");
    for (k, v) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td class=\"reason\">{}</td></tr>",
            esc(k),
            esc(v)
        );
    }
    out.push_str("</table>\n");
}

/// Text for an element's content or a quoted attribute: no markup, no control character.
fn esc(s: &str) -> String {
    crate::escape::html_text(s)
}

/// An attribute value that keeps its line breaks (a tooltip's lines).
fn esc_attr(s: &str) -> String {
    esc(s).replace('\n', "&#10;")
}

#[cfg(test)]
mod tests;
