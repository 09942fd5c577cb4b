//! Two runs compared as one HTML page (`clhip diff OLD NEW --html`), with the support matrix
//! page's stylesheet, legend and escaping.

use maud::html;

use super::super::diff::{Movement, RunDiff, footprint_heading, grouped, summary_line};
use super::super::json::{RunReport, closing_line};
use super::super::matrix::label;
use super::{LEGEND, kv_table, page, shown};
use crate::footprint::show;

/// `clhip diff OLD NEW --html`: the runs compared, the fingerprints' differences on top, then
/// every case that moved, grouped by path, worst movement first, with both sides' reasons.
/// `old` and `new` name the two files.
pub fn render_diff_html(d: &RunDiff, old: (&str, &RunReport), new: (&str, &RunReport)) -> String {
    let side = |(name, r): (&str, &RunReport)| {
        format!(
            "{name}: started {}, clhip {}, seed {}, {} results; {}",
            r.started_at,
            r.clhip_build(),
            r.seed,
            r.results.len(),
            closing_line(&r.summary)
        )
    };
    // What the runs were asked to do differently comes before what moved.
    let runs: Vec<(String, String)> = [("old".to_string(), side(old)), ("new".into(), side(new))]
        .into_iter()
        .chain(
            d.setup
                .iter()
                .map(|s| (s.what.clone(), format!("{} -> {}", s.old, s.new))),
        )
        .chain([("moved".into(), summary_line(d))])
        .collect();
    let fingerprint_lines = [
        ("fp-old", "old", &d.fingerprint_old),
        ("fp-new", "new", &d.fingerprint_new),
    ];
    let body = html! {
        header { "\n" h1 { "clhip diff" } "\n" (kv_table(&runs)) }
        "\n\n"
        section #fingerprint {
            "\n" h2 { "Fingerprint" } "\n"
            @if d.fingerprint_old.is_empty() && d.fingerprint_new.is_empty() {
                p { "The same on both sides." } "\n"
            } @else {
                table.list {
                    "\n" thead { tr { th { "run" } th { "line" } } } "\n"
                    tbody {
                        "\n"
                        @for (class, run, lines) in fingerprint_lines {
                            @for l in lines {
                                tr class=(class) { td { (run) } td.reason { (shown(l)) } } "\n"
                            }
                        }
                    }
                    "\n"
                }
                "\n"
            }
        }
        "\n\n"
        section #legend {
            "\n" h2 { "Legend" } "\n"
            p {
                "Severity order: pass < skip < unsupported < fault, crash, timeout < fail. A move \
                up is a " b { "regression" } " (red edge, " code { "!" } "), pass -> unsupported \
                (a capability gone) and fault -> fail (a refusal become silent corruption) \
                included; a move down is a " b { "fix" } " (green edge); a move within a level \
                is a change. A negative control flipping between pass and a caught stale read is \
                a race, not a finding."
            }
            "\n"
            ul.legend {
                "\n"
                @for (l, meaning) in LEGEND {
                    li { span.swatch.{ "o-" (l) } { (l) } " " (meaning) } "\n"
                }
            }
            "\n"
        }
        "\n\n"
        @for (path, moved) in grouped(d) {
            section.path {
                "\n" h2 { code { (shown(&path)) } } "\n"
                table.list.diff {
                    "\n"
                    thead { tr { th {} th { "movement" } th { "case" } th { "old" } th { "new" } } }
                    "\n"
                    tbody {
                        "\n"
                        @for m in moved {
                            tr class=(movement_class(m.movement)) data-case=(shown(m.id)) {
                                td { @if m.movement == Movement::Regression { "!" } }
                                td { (m.movement.name()) }
                                td { code { (shown(m.id)) } }
                                @for r in [m.old, m.new] {
                                    td.reason {
                                        @match r {
                                            None => { "-" }
                                            Some(r) => {
                                                span.chip.{ "o-" (label(r)) } { (label(r)) }
                                                " " (shown(&r.outcome.reason()))
                                            }
                                        }
                                    }
                                }
                            }
                            "\n"
                        }
                    }
                    "\n"
                }
                "\n"
            }
            "\n\n"
        }
        @if !d.shown_footprint().is_empty() {
            section #footprint {
                "\n" h2 { "Footprint" } "\n"
                p { (footprint_heading()) "." } "\n"
                table.list.diff {
                    "\n"
                    thead { tr { th {} th { "case" } th { "memory" } th { "old" } th { "new" } } }
                    "\n"
                    tbody {
                        "\n"
                        @for g in d.shown_footprint() {
                            tr.mv-regression data-case=(shown(g.id)) {
                                td { "!" }
                                td { code { (shown(g.id)) } }
                                td { (g.memory.name()) }
                                td { (show(g.old)) }
                                td { (show(g.new)) }
                            }
                            "\n"
                        }
                    }
                    "\n"
                }
                "\n"
            }
            "\n\n"
        }
    };
    page("clhip diff", body)
}

fn movement_class(m: Movement) -> &'static str {
    match m {
        Movement::Regression => "mv-regression",
        Movement::Fix => "mv-fix",
        _ => "mv-other",
    }
}
