//! The views as one self-contained HTML page (`clhip history --html OUT`): inline CSS, no
//! script, font, image or link to anything outside the file. Every string from the store (case
//! ids, reasons, fingerprint lines, file names) goes through maud's escaping; each strip cell
//! says its outcome in words in its title, and its mark in text, so colour is never the only
//! sign.

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::model::Verdict;

use super::views::{Entry, History, LEGEND, TIME_FLOOR_S, mark, show_ratio, show_value};

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  margin: 1.5rem; color: #1b1b1b; background: #fff; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.92em; }
h1 { font-size: 1.5rem; margin: 0 0 0.6rem; }
h2 { font-size: 1.2rem; margin: 1.8rem 0 0.6rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; }
table.list th, table.list td { border: 1px solid #bbb; padding: 2px 8px; vertical-align: top; text-align: left; }
table.list thead th { background: #eceff1; }
td.num { text-align: right; white-space: nowrap; }
pre.fp { margin: 0; white-space: pre-wrap; }
.removed { color: #b71c1c; }
.added { color: #1b5e20; }
.problems { border: 2px solid #b71c1c; background: #fff3f3; padding: 0.4rem 0.8rem; }
table.strips td, table.strips th { padding: 0; }
table.strips td.n { width: 1.1em; min-width: 1.1em; text-align: center; font: 11px/1.5 ui-monospace, "DejaVu Sans Mono", Menlo, monospace;
  border: 1px solid #fff; background: var(--c); }
table.strips th.case { text-align: left; font-weight: normal; padding-left: 0.6em; white-space: nowrap; }
table.strips thead th { font-size: 10px; font-weight: normal; color: #666; }
.o-pass { --c: #c8e6c9; }
.o-caught { --c: #bbdefb; }
.o-fail { --c: #ef9a9a; }
.o-fault { --c: #ffcc80; }
.o-crash { --c: #e1bee7; }
.o-timeout { --c: #d7ccc8; }
.o-unsupported { --c: #e0e0e0; }
.o-skip { --c: #f5f5f5; }
.o-error { --c: #424242; color: #fff; }
.o-warn { --c: #dcedc8; }
.o-incomplete { --c: #b0bec5; }
.o-none { --c: #fff; color: #999; }
ul.legend { list-style: none; padding: 0; margin: 0 0 0.6rem; }
ul.legend li { display: inline-block; margin-right: 1.2em; }
ul.legend span.n { display: inline-block; width: 1.3em; text-align: center; font-family: ui-monospace, monospace; background: var(--c); border: 1px solid #aaa; }
"#;

fn class(e: Option<&Entry>) -> &'static str {
    let Some(e) = e else { return "o-none" };
    if e.verdict == Verdict::CaughtStaleRead {
        return "o-caught";
    }
    match e.outcome {
        crate::model::OutcomeKind::Pass => "o-pass",
        crate::model::OutcomeKind::Fail => "o-fail",
        crate::model::OutcomeKind::Fault => "o-fault",
        crate::model::OutcomeKind::Crash => "o-crash",
        crate::model::OutcomeKind::Timeout => "o-timeout",
        crate::model::OutcomeKind::Unsupported => "o-unsupported",
        crate::model::OutcomeKind::Skip => "o-skip",
        crate::model::OutcomeKind::Error => "o-error",
        crate::model::OutcomeKind::Warn => "o-warn",
        crate::model::OutcomeKind::Incomplete => "o-incomplete",
    }
}

fn legend_class(c: char) -> &'static str {
    match c {
        '.' => "o-pass",
        'c' => "o-caught",
        'F' => "o-fail",
        'X' => "o-fault",
        'C' => "o-crash",
        'T' => "o-timeout",
        'u' => "o-unsupported",
        's' => "o-skip",
        'E' => "o-error",
        'w' => "o-warn",
        'i' => "o-incomplete",
        _ => "o-none",
    }
}

/// The page.
pub fn render_html(h: &History) -> String {
    let o = &h.options;
    let title = format!("clhip history: {} runs", h.runs.len());
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (title) }
                @if let (Some(first), Some(last)) = (h.runs.first(), h.runs.last()) {
                    p {
                        "Store " code { (h.store.display()) } ": "
                        (h.runs.len()) " runs, " (first.started_at) " (night 1) to "
                        (last.started_at) " (night " (h.runs.len()) "); " (h.cases) " cases."
                    }
                } @else {
                    p { "No runs in " code { (h.store.display()) } "." }
                }
                @let troubled: Vec<(usize, &String)> = h.runs.iter().enumerate()
                    .flat_map(|(i, r)| r.problems.iter().map(move |p| (i, p))).collect();
                @if !troubled.is_empty() {
                    div.problems {
                        "Runs stored with problems:"
                        ul { @for (i, p) in &troubled { li { "night " (i + 1) ": " (p) } } }
                    }
                }

                h2 { "Regressions" }
                p { "Cases worse from a night on, and on every one of their nights since (at least "
                    (o.stay) "), with the fingerprint lines that changed from their night before." }
                @if h.regressions.is_empty() { p { "None." } } @else {
                    table.list {
                        thead { tr { th { "case" } th { "first bad night" } th { "outcome" }
                            th { "nights since" } th { "reason" } th { "fingerprint change" } } }
                        tbody { @for r in &h.regressions { tr {
                            td { code { (r.case) } }
                            td { (h.night(r.first_bad)) }
                            td { (r.was) " → " (r.became) " (" (r.verdict.name()) ")" }
                            td.num { (r.nights_bad) }
                            td { (r.reason) }
                            td {
                                "night " (r.before + 1) " → " (r.first_bad + 1) ":"
                                @if r.fingerprint_removed.is_empty() && r.fingerprint_added.is_empty() {
                                    " the same"
                                }
                                pre.fp {
                                    @for l in &r.fingerprint_removed { span.removed { "- " (l) } "\n" }
                                    @for l in &r.fingerprint_added { span.added { "+ " (l) } "\n" }
                                }
                            }
                        } } }
                    }
                }
                @if !h.pending.is_empty() {
                    p { "Worse on their last nights, but fewer than " (o.stay)
                        ": a flake or a regression starting, too soon to tell:" }
                    ul { @for p in &h.pending { li {
                        code { (p.case) } ": " (p.was) " → " (p.became) " since night "
                        (p.since + 1) " (" (p.nights) ")"
                    } } }
                }

                h2 { "Flaky over " (h.window_text()) }
                p { "Cases whose outcome changed and changed back; the rate is the share of their nights with a result on which the outcome was not the usual one." }
                @if h.flakes.is_empty() { p { "None." } } @else {
                    table.list {
                        thead { tr { th { "rate" } th { "%" } th { "case" } th { "usual" } th { "nights per outcome" } } }
                        tbody { @for f in &h.flakes { tr {
                            td.num { (f.other) "/" (f.nights) }
                            td.num { (format!("{:.0}", 100.0 * f.rate())) }
                            td { code { (f.case) } }
                            td { (f.usual) }
                            td { (f.counts.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")) }
                        } } }
                    }
                }

                h2 { "Growth" }
                p { "Median of the " (o.window) " nights after a night against the " (o.window)
                    " before it, at least " (o.grow) "x (time: and " (TIME_FLOOR_S)
                    " s more), and still so over the last " (o.window) " nights." }
                @if h.growth.is_empty() { p { "None." } } @else {
                    table.list {
                        thead { tr { th { "case" } th { "measure" } th { "from night" } th { "before" }
                            th { "after" } th { "ratio" } th { "last " (o.window) } } }
                        tbody { @for g in &h.growth { tr {
                            td { code { (g.case) } }
                            td { (g.measure) }
                            td { (h.night(g.night)) }
                            td.num { (show_value(&g.measure, g.before)) }
                            td.num { (show_value(&g.measure, g.after)) }
                            td.num { (show_ratio(g.before, g.after)) }
                            td.num { (show_value(&g.measure, g.latest)) }
                        } } }
                    }
                }

                h2 { "Night by night over " (h.window_text()) }
                p { "Cases not as expected on any of these nights, or listed above." }
                ul.legend { @for (c, what) in LEGEND { li { span.n.(legend_class(*c)) { (c) } " " (what) } } }
                @if h.strips.is_empty() { p { "None." } } @else {
                    table.strips {
                        thead { tr {
                            @for i in h.window_start..h.runs.len() {
                                th { @if (i + 1) % 5 == 0 { (i + 1) } }
                            }
                            th {}
                        } }
                        tbody { @for s in &h.strips { tr {
                            @for (k, e) in s.nights.iter().enumerate() {
                                @let night = h.window_start + k;
                                td.n.(class(e.as_ref())) title=(cell_title(h, night, e.as_ref())) {
                                    (e.as_ref().map_or('-', mark))
                                }
                            }
                            th.case { code { (s.case) } }
                        } } }
                    }
                }
            }
        }
    };
    page.into_string()
}

fn cell_title(h: &History, night: usize, e: Option<&Entry>) -> String {
    let what = match e {
        None => "no result".to_string(),
        Some(e) if e.verdict == Verdict::CaughtStaleRead => "caught stale read".to_string(),
        Some(e) => format!("{} ({})", e.outcome, e.verdict.name()),
    };
    format!("{}: {what}", h.night(night))
}
