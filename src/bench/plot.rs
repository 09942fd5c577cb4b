//! The `clhip bench interop` plot as one self-contained SVG (`--svg`), for each pair: the
//! handoff OpenCL -> peer against the buffer size per target (log-log), and a bar per target
//! of the pipeline's time per iteration, copy and native among them. Points and bars are
//! medians; whiskers span the first to the third quartile, so one outlier on a busy machine
//! does not flatten the chart (min and max are in each point's tooltip and in the tables). A
//! target with nothing to draw says why in place of its bar.
//!
//! Written as SVG text by hand rather than with a plotting crate: two charts of lines, bars
//! and labels are a few hundred lines, while plotters and its kin bring font rasterising and a
//! dozen crates for a file that must also embed as is in the HTML report (no external font,
//! script or stylesheet, nothing to fetch).

use std::fmt::Write as _;

use super::human_bytes;
use super::render::{outcome_text, time};
use super::results::{BenchReport, Measure, PairBench, Target, TargetBench};

const WIDTH: f64 = 980.0;
/// The line chart's plot area inside its panel.
const LEFT: f64 = 70.0;
const PLOT_W: f64 = 600.0;
const PLOT_H: f64 = 300.0;
/// Where the legend starts, right of the plot.
const LEGEND_X: f64 = LEFT + PLOT_W + 30.0;
/// The bar chart's label column and bar row height.
const LABEL_W: f64 = 250.0;
const BAR_ROW: f64 = 22.0;
const BAR_W: f64 = 560.0;

/// Tableau 10: distinct in print and for the common colour-vision deficiencies; past ten
/// targets the lines repeat them dashed.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];
const NATIVE_COLOUR: &str = "#333333";

/// Text as SVG character data or an attribute value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The colour and dash pattern of the `i`-th target of a pair.
fn style(i: usize, target: Target) -> (&'static str, &'static str) {
    if target == Target::Native {
        return (NATIVE_COLOUR, "");
    }
    let dash = if i >= PALETTE.len() { "6 3" } else { "" };
    (PALETTE[i % PALETTE.len()], dash)
}

/// The whole plot: every pair's two charts, stacked.
pub fn render_svg(report: &BenchReport) -> String {
    let mut body = String::new();
    let mut y = 10.0;
    for pair in &report.pairs {
        y = pair_panels(&mut body, report, pair, y);
    }
    if report.pairs.is_empty() {
        text(&mut body, 20.0, 30.0, "start", "", "no pair was measured");
        y = 50.0;
    }
    let height = y.ceil();
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n<title>clhip bench interop</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n"
    )
}

fn text(out: &mut String, x: f64, y: f64, anchor: &str, extra: &str, content: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\"{extra}>{}</text>",
        escape(content)
    );
}

fn line(out: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, extra: &str) {
    let _ = writeln!(
        out,
        "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\"{extra}/>"
    );
}

/// Draws one pair's charts from height `top`; returns where the next panel starts.
fn pair_panels(out: &mut String, report: &BenchReport, pair: &PairBench, top: f64) -> f64 {
    let styles: Vec<(&TargetBench, (&str, &str))> = pair
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| (t, style(i, t.target)))
        .collect();
    let after_lines = handoff_chart(out, report, pair, &styles, top);
    pipeline_chart(out, report, pair, &styles, after_lines + 20.0)
}

/// Decades of milliseconds that hold every value: (lowest exponent, highest exponent).
fn decades(values_ms: impl Iterator<Item = f64>) -> (i32, i32) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values_ms.filter(|v| *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (-2, 1);
    }
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (a, b.max(a + 1))
}

fn handoff_chart(
    out: &mut String,
    report: &BenchReport,
    pair: &PairBench,
    styles: &[(&TargetBench, (&str, &str))],
    top: f64,
) -> f64 {
    let sizes = &report.settings.sizes_bytes;
    text(
        out,
        LEFT,
        top + 16.0,
        "start",
        " font-size=\"14\" font-weight=\"bold\"",
        &format!(
            "{}: handoff OpenCL -> {} (median, whisker from first to third quartile; log-log)",
            pair.pair, pair.peer
        ),
    );
    let plot_top = top + 30.0;
    let plot_bottom = plot_top + PLOT_H;
    let drawn: Vec<&(&TargetBench, (&str, &str))> = styles
        .iter()
        .filter(|(t, _)| t.rows.iter().any(|r| r.measure == Measure::HandoffToPeer))
        .collect();
    let values = drawn.iter().flat_map(|(t, _)| {
        t.rows
            .iter()
            .filter(|r| r.measure == Measure::HandoffToPeer)
            .flat_map(|r| [r.stats.q1_s * 1e3, r.stats.q3_s * 1e3])
    });
    let (lo, hi) = decades(values);
    let (smallest, largest) = (
        sizes.iter().min().copied().unwrap_or(1).max(1) as f64,
        sizes.iter().max().copied().unwrap_or(2).max(2) as f64,
    );
    let span = (largest.log2() - smallest.log2()).max(1.0);
    let x_of = |bytes: u64| {
        LEFT + 20.0 + (PLOT_W - 40.0) * ((bytes as f64).log2() - smallest.log2()) / span
    };
    let y_of = |v_ms: f64| {
        let v = v_ms.max(10f64.powi(lo));
        plot_bottom - PLOT_H * (v.log10() - f64::from(lo)) / f64::from(hi - lo)
    };
    let _ = writeln!(
        out,
        "<rect x=\"{LEFT}\" y=\"{plot_top:.1}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"#999\"/>"
    );
    for e in lo..=hi {
        let y = y_of(10f64.powi(e));
        line(out, (LEFT, y), (LEFT + PLOT_W, y), "#e5e5e5", "");
        text(
            out,
            LEFT - 6.0,
            y + 4.0,
            "end",
            "",
            &time(10f64.powi(e) / 1e3),
        );
    }
    for &b in sizes {
        let x = x_of(b);
        line(out, (x, plot_top), (x, plot_bottom), "#f0f0f0", "");
        text(out, x, plot_bottom + 16.0, "middle", "", &human_bytes(b));
    }
    text(
        out,
        LEFT + PLOT_W / 2.0,
        plot_bottom + 34.0,
        "middle",
        "",
        "buffer size",
    );
    if drawn.is_empty() {
        text(
            out,
            LEFT + PLOT_W / 2.0,
            plot_top + PLOT_H / 2.0,
            "middle",
            "",
            "no handoff was measured",
        );
    }
    for (t, (colour, dash)) in &drawn {
        let mut rows: Vec<_> = t
            .rows
            .iter()
            .filter(|r| r.measure == Measure::HandoffToPeer)
            .collect();
        rows.sort_by_key(|r| r.bytes);
        let points: Vec<String> = rows
            .iter()
            .map(|r| format!("{:.1},{:.1}", x_of(r.bytes), y_of(r.stats.median_s * 1e3)))
            .collect();
        let dash_attr = if dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{dash}\"")
        };
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash_attr}><title>{}</title></polyline>",
            points.join(" "),
            escape(&t.id)
        );
        for r in rows {
            let x = x_of(r.bytes);
            line(
                out,
                (x, y_of(r.stats.q1_s * 1e3)),
                (x, y_of(r.stats.q3_s * 1e3)),
                colour,
                "",
            );
            let _ = writeln!(
                out,
                "<circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"><title>{}</title></circle>",
                y_of(r.stats.median_s * 1e3),
                escape(&format!(
                    "{} at {}: {} ({} to {})",
                    t.id,
                    human_bytes(r.bytes),
                    time(r.stats.median_s),
                    time(r.stats.min_s),
                    time(r.stats.max_s)
                ))
            );
        }
    }
    // Legend: every path target, drawn or not, so a missing line is explained.
    let mut y = plot_top + 6.0;
    for (t, (colour, dash)) in styles.iter().filter(|(t, _)| t.target != Target::Native) {
        let has_line = drawn.iter().any(|(d, _)| d.id == t.id);
        if has_line {
            let extra = if dash.is_empty() {
                " stroke-width=\"3\"".to_string()
            } else {
                format!(" stroke-width=\"3\" stroke-dasharray=\"{dash}\"")
            };
            line(out, (LEGEND_X, y), (LEGEND_X + 22.0, y), colour, &extra);
            text(out, LEGEND_X + 28.0, y + 4.0, "start", "", &t.target.name());
        } else {
            text(
                out,
                LEGEND_X + 28.0,
                y + 4.0,
                "start",
                " fill=\"#888\"",
                &format!("{}: {}", t.target.name(), t.outcome.kind().name()),
            );
        }
        y += 16.0;
    }
    (plot_bottom + 40.0).max(y)
}

fn pipeline_chart(
    out: &mut String,
    report: &BenchReport,
    pair: &PairBench,
    styles: &[(&TargetBench, (&str, &str))],
    top: f64,
) -> f64 {
    let bytes = (report.settings.pipeline_len * 8) as u64;
    text(
        out,
        LEFT,
        top + 16.0,
        "start",
        " font-size=\"14\" font-weight=\"bold\"",
        &format!(
            "{}: pipeline, time per iteration at {} (median, whisker from first to third quartile)",
            pair.pair,
            human_bytes(bytes)
        ),
    );
    let bars_top = top + 30.0;
    let longest = styles
        .iter()
        .filter_map(|(t, _)| t.row(Measure::Pipeline, bytes))
        .map(|r| r.stats.q3_s)
        .fold(0.0f64, f64::max);
    let x0 = LEFT + LABEL_W;
    let scale = if longest > 0.0 { BAR_W / longest } else { 0.0 };
    for (i, (t, (colour, _))) in styles.iter().enumerate() {
        let y = bars_top + i as f64 * BAR_ROW;
        text(out, x0 - 8.0, y + 15.0, "end", "", &t.target.name());
        match t.row(Measure::Pipeline, bytes) {
            Some(r) => {
                let w = (r.stats.median_s * scale).max(1.0);
                let _ = writeln!(
                    out,
                    "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}</title></rect>",
                    y + 3.0,
                    BAR_ROW - 6.0,
                    escape(&format!(
                        "{}: {} per iteration ({} to {})",
                        t.id,
                        time(r.stats.median_s),
                        time(r.stats.min_s),
                        time(r.stats.max_s)
                    ))
                );
                let mid = y + BAR_ROW / 2.0;
                let (a, b) = (x0 + r.stats.q1_s * scale, x0 + r.stats.q3_s * scale);
                line(out, (a, mid), (b, mid), "#000", "");
                line(out, (a, mid - 4.0), (a, mid + 4.0), "#000", "");
                line(out, (b, mid - 4.0), (b, mid + 4.0), "#000", "");
                text(out, b + 6.0, y + 15.0, "start", "", &time(r.stats.median_s));
            }
            None => {
                let why = t
                    .missing(Measure::Pipeline, bytes)
                    .map_or("not measured".to_string(), outcome_text);
                let short: String = why.chars().take(90).collect();
                text(out, x0, y + 15.0, "start", " fill=\"#888\"", &short);
            }
        }
    }
    bars_top + styles.len() as f64 * BAR_ROW + 20.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_draws_what_was_measured_and_names_what_was_not() {
        let svg = render_svg(&super::super::results::sample_report());
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"));
        // Lines for the two paths with handoffs, bars for the three pipelines.
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("per iteration (").count(), 3);
        assert!(svg.contains(">crash SIGSEGV</text>"), "{svg}");
        assert!(
            svg.contains("device-ptr-as-cl-arg/finish: unsupported"),
            "{svg}"
        );
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    }

    #[test]
    fn text_is_escaped_for_svg() {
        assert_eq!(
            escape("a<b & \"c\">'"),
            "a&lt;b &amp; &quot;c&quot;&gt;&apos;"
        );
    }

    #[test]
    fn decades_cover_every_value_and_never_collapse() {
        assert_eq!(decades([0.05, 3.0].into_iter()), (-2, 1));
        assert_eq!(decades([1.0].into_iter()), (0, 1));
        assert_eq!(decades(std::iter::empty()), (-2, 1));
    }

    #[test]
    fn colours_repeat_dashed_past_the_palette() {
        let t = Target::Path {
            path: crate::model::PathKind::Copy,
            sync: crate::model::SyncMode::Finish,
        };
        assert_eq!(style(0, t), (PALETTE[0], ""));
        assert_eq!(style(10, t), (PALETTE[0], "6 3"));
        assert_eq!(style(3, Target::Native).0, NATIVE_COLOUR);
    }
}
