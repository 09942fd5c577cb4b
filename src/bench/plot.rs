//! The `clhip bench interop` plot as one self-contained SVG (`--svg`), for each pair: the
//! handoff OpenCL -> peer against the buffer size per target (log-log), and a bar per target
//! of the pipeline's time per iteration, copy and native among them. Points and bars are
//! medians; whiskers span the first to the third quartile, so one outlier on a busy machine
//! does not flatten the chart (min and max are in the tables). A target with nothing to draw
//! says why in place of its bar, and in the legend in place of its line.
//!
//! Drawn with plotters' SVG backend, without its font features: text is written as SVG
//! `<text>` elements, so no font is read or rasterised. The file loads nothing from elsewhere,
//! and the HTML report embeds it as is.

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::human_bytes;
use super::render::{outcome_text, time};
use super::results::{BenchReport, Measure, PairBench, Target, TargetBench};

const WIDTH: u32 = 980;
/// The handoff chart's height (title, plot and size labels) and its legend's width, right of it.
const HANDOFF_H: u32 = 400;
const LEGEND_W: u32 = 270;
/// The pipeline chart: its target-name column, one row per target, and the room under the rows
/// for the time axis.
const LABEL_W: u32 = 250;
const BAR_ROW: u32 = 22;
const BARS_EXTRA: u32 = 80;
const GAP: u32 = 20;
/// A chart's title line.
const TITLE_H: u32 = 30;

const FONT: &str = "sans-serif";

/// Tableau 10: distinct in print and for the common colour-vision deficiencies; past ten
/// targets the lines repeat them dashed.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];
const NATIVE_COLOUR: RGBColor = RGBColor(0x33, 0x33, 0x33);
const MUTED: RGBColor = RGBColor(0x88, 0x88, 0x88);
const GRID: RGBColor = RGBColor(0xe5, 0xe5, 0xe5);

/// A target's colour, and whether its line is dashed.
type Style = (RGBColor, bool);

/// A target's handoffs to the peer, by size: (bytes, [q1, median, q3] in milliseconds).
type Handoffs = Vec<(u64, [f64; 3])>;

/// The style of the `i`-th target of a pair.
fn style(i: usize, target: Target) -> Style {
    if target == Target::Native {
        return (NATIVE_COLOUR, false);
    }
    (PALETTE[i % PALETTE.len()], i >= PALETTE.len())
}

/// Text of `px` pixels (plotters writes a font size of the given size / 1.24).
fn font(px: f64) -> TextStyle<'static> {
    TextStyle::from((FONT, px * 1.24).into_font())
}

fn title_font() -> TextStyle<'static> {
    TextStyle::from((FONT, 14.0 * 1.24).into_font().style(FontStyle::Bold))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawError = DrawingAreaErrorKind<std::io::Error>;
type Drawn = Result<(), DrawError>;

/// A chart's title, left-aligned over the whole width of `area`; returns the area below it.
fn titled<'a>(area: &Area<'a>, title: String) -> Result<Area<'a>, DrawError> {
    area.draw(&Text::new(title, (10, 8), title_font()))?;
    Ok(area.split_vertically(TITLE_H).1)
}

/// The whole plot: every pair's two charts, stacked.
pub fn render_svg(report: &BenchReport) -> anyhow::Result<String> {
    let heights: Vec<(u32, u32)> = report
        .pairs
        .iter()
        .map(|p| (handoff_height(p), pipeline_height(p)))
        .collect();
    let height = if heights.is_empty() {
        50
    } else {
        GAP / 2 + heights.iter().map(|(h, p)| h + p + GAP).sum::<u32>()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        draw(&root, report, &heights)
            .and_then(|()| root.present())
            .map_err(|e| anyhow!("drawing the bench plot: {e}"))?;
    }
    Ok(svg)
}

fn draw(root: &Area, report: &BenchReport, heights: &[(u32, u32)]) -> Drawn {
    root.fill(&WHITE)?;
    if report.pairs.is_empty() {
        root.draw(&Text::new("no pair was measured", (20, 30), font(12.0)))?;
        return Ok(());
    }
    let (_, mut rest) = root.split_vertically(GAP / 2);
    for (pair, &(handoff_h, pipeline_h)) in report.pairs.iter().zip(heights) {
        let styles: Vec<(&TargetBench, Style)> = pair
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t, style(i, t.target)))
            .collect();
        let (handoff, below) = rest.split_vertically(handoff_h);
        let (pipeline, below) = below.split_vertically(pipeline_h + GAP);
        handoff_chart(&handoff, report, pair, &styles)?;
        pipeline_chart(&pipeline.margin(0, GAP, 0, 0), report, pair, &styles)?;
        rest = below;
    }
    Ok(())
}

/// Path targets: every one is in the legend, drawn or not.
fn legend_rows(pair: &PairBench) -> u32 {
    pair.targets
        .iter()
        .filter(|t| t.target != Target::Native)
        .count() as u32
}

fn handoff_height(pair: &PairBench) -> u32 {
    HANDOFF_H.max(50 + 16 * legend_rows(pair))
}

fn pipeline_height(pair: &PairBench) -> u32 {
    BARS_EXTRA + BAR_ROW * pair.targets.len() as u32
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
    area: &Area,
    report: &BenchReport,
    pair: &PairBench,
    styles: &[(&TargetBench, Style)],
) -> Drawn {
    let area = titled(
        area,
        format!(
            "{}: handoff OpenCL -> {} (median, whisker from first to third quartile; log-log)",
            pair.pair, pair.peer
        ),
    )?;
    let (plot_area, legend) = area.split_horizontally(WIDTH - LEGEND_W);
    let handoffs = |t: &TargetBench| -> Handoffs {
        let mut rows: Vec<_> = t
            .rows
            .iter()
            .filter(|r| r.measure == Measure::HandoffToPeer)
            .map(|r| {
                let s = &r.stats;
                (r.bytes, [s.q1_s * 1e3, s.median_s * 1e3, s.q3_s * 1e3])
            })
            .collect();
        rows.sort_by_key(|(bytes, _)| *bytes);
        rows
    };
    let drawn: Vec<(&TargetBench, Style, Handoffs)> = styles
        .iter()
        .map(|&(t, style)| (t, style, handoffs(t)))
        .filter(|(_, _, rows)| !rows.is_empty())
        .collect();
    let (lo, hi) = decades(
        drawn
            .iter()
            .flat_map(|(_, _, rows)| rows.iter().flat_map(|(_, [q1, _, q3])| [*q1, *q3])),
    );
    let sizes: Vec<f64> = report
        .settings
        .sizes_bytes
        .iter()
        .map(|&b| b.max(1) as f64)
        .collect();
    let smallest = sizes.iter().copied().reduce(f64::min).unwrap_or(1.0);
    let largest = sizes.iter().copied().reduce(f64::max).unwrap_or(2.0);
    let floor = 10f64.powi(lo);
    let decade_points: Vec<f64> = (lo..=hi).map(|e| 10f64.powi(e)).collect();
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (smallest / 1.5..largest * 1.5)
                .log_scale()
                .with_key_points(sizes.clone()),
            (floor..10f64.powi(hi))
                .log_scale()
                .with_key_points(decade_points),
        )?;
    chart
        .configure_mesh()
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .x_labels(sizes.len())
        .x_label_formatter(&|b| human_bytes(b.round() as u64))
        .y_label_formatter(&|ms| time(ms / 1e3))
        .x_desc("buffer size")
        .label_style(font(12.0))
        .axis_desc_style(font(12.0))
        .draw()?;
    if drawn.is_empty() {
        plot_area.draw(&Text::new(
            "no handoff was measured",
            (
                (WIDTH - LEGEND_W) as i32 / 2,
                (HANDOFF_H - TITLE_H) as i32 / 2,
            ),
            font(12.0).pos(Pos::new(HPos::Center, VPos::Center)),
        ))?;
    }
    for (_, (colour, dashed), rows) in &drawn {
        let line = colour.stroke_width(2);
        let points: Vec<(f64, f64)> = rows
            .iter()
            .map(|(bytes, [_, median, _])| (*bytes as f64, median.max(floor)))
            .collect();
        if *dashed {
            chart.draw_series(DashedLineSeries::new(points.clone(), 6, 3, line))?;
        } else {
            chart.draw_series(LineSeries::new(points.clone(), line))?;
        }
        chart.draw_series(rows.iter().map(|(bytes, [q1, _, q3])| {
            let x = *bytes as f64;
            PathElement::new(vec![(x, q1.max(floor)), (x, q3.max(floor))], *colour)
        }))?;
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
    }
    // Legend: every path target, drawn or not, so a missing line is explained.
    let mut y = 20;
    for (t, (colour, dashed)) in styles.iter().filter(|(t, _)| t.target != Target::Native) {
        let at = Pos::new(HPos::Left, VPos::Center);
        if drawn.iter().any(|(d, _, _)| d.id == t.id) {
            let segments: &[(i32, i32)] = if *dashed {
                &[(0, 6), (9, 15), (18, 22)]
            } else {
                &[(0, 22)]
            };
            for &(a, b) in segments {
                legend.draw(&PathElement::new(
                    vec![(a, y), (b, y)],
                    colour.stroke_width(3),
                ))?;
            }
            legend.draw(&Text::new(t.target.name(), (28, y), font(12.0).pos(at)))?;
        } else {
            let why = format!("{}: {}", t.target.name(), t.outcome.kind().name());
            legend.draw(&Text::new(why, (28, y), font(12.0).pos(at).color(&MUTED)))?;
        }
        y += 16;
    }
    Ok(())
}

fn pipeline_chart(
    area: &Area,
    report: &BenchReport,
    pair: &PairBench,
    styles: &[(&TargetBench, Style)],
) -> Drawn {
    let bytes = (report.settings.pipeline_len * 8) as u64;
    let rows = styles.len();
    // One segment per target, counted from the bottom: the first target's is the top one.
    let segment = |i: usize| rows - 1 - i;
    let longest = styles
        .iter()
        .filter_map(|(t, _)| t.row(Measure::Pipeline, bytes))
        .map(|r| r.stats.q3_s)
        .fold(0.0f64, f64::max);
    let x_end = if longest > 0.0 { longest * 1.15 } else { 1e-3 };
    let names: Vec<String> = styles.iter().map(|(t, _)| t.target.name()).collect();
    let area = titled(
        area,
        format!(
            "{}: pipeline, time per iteration at {} (median, whisker from first to third quartile)",
            pair.pair,
            human_bytes(bytes)
        ),
    )?;
    let mut chart = ChartBuilder::on(&area)
        .margin_right(110)
        .x_label_area_size(30)
        .y_label_area_size(LABEL_W)
        // An integer range holds its end: 0..rows - 1 is `rows` segments.
        .build_cartesian_2d(0.0..x_end, (0..rows.saturating_sub(1)).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .y_labels(rows + 1)
        .x_label_formatter(&|s| if *s == 0.0 { "0".into() } else { time(*s) })
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(k) if *k < rows => names[segment(*k)].clone(),
            _ => String::new(),
        })
        .label_style(font(12.0))
        .draw()?;
    let left_centre = Pos::new(HPos::Left, VPos::Center);
    for (i, (t, (colour, _))) in styles.iter().enumerate() {
        let k = segment(i);
        let mid = SegmentValue::CenterOf(k);
        match t.row(Measure::Pipeline, bytes) {
            Some(r) => {
                let s = &r.stats;
                // At least a sliver, so a bar too short to see still shows it was measured.
                let w = s.median_s.max(x_end / 600.0);
                let mut bar = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(k)),
                        (w, SegmentValue::Exact(k + 1)),
                    ],
                    colour.filled(),
                );
                bar.set_margin(3, 3, 0, 0);
                chart.draw_series([bar])?;
                let whisker = |x: f64| {
                    EmptyElement::at((x, mid.clone()))
                        + PathElement::new(vec![(0, -4), (0, 4)], BLACK)
                };
                chart.draw_series([PathElement::new(
                    vec![(s.q1_s, mid.clone()), (s.q3_s, mid.clone())],
                    BLACK,
                )])?;
                chart.draw_series([whisker(s.q1_s), whisker(s.q3_s)])?;
                chart.draw_series([EmptyElement::at((s.q3_s, mid.clone()))
                    + Text::new(time(s.median_s), (6, 0), font(12.0).pos(left_centre))])?;
            }
            None => {
                let why = t
                    .missing(Measure::Pipeline, bytes)
                    .map_or("not measured".to_string(), outcome_text);
                let short: String = why.chars().take(90).collect();
                let muted = font(12.0).pos(left_centre).color(&MUTED);
                chart.draw_series([
                    EmptyElement::at((0.0, mid)) + Text::new(short, (4, 0), muted)
                ])?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text elements' contents, in order.
    fn texts(svg: &str) -> Vec<&str> {
        placed_texts(svg).into_iter().map(|(_, t)| t).collect()
    }

    /// Each text element's anchor (x, y) and content.
    fn placed_texts(svg: &str) -> Vec<((f64, f64), &str)> {
        svg.split("<text ")
            .skip(1)
            .filter_map(|t| {
                let (attrs, rest) = t.split_once('>')?;
                let attrs = format!(" {attrs}");
                let attr = |name: &str| -> Option<f64> {
                    let value = attrs.split(&format!(" {name}=\"")).nth(1)?;
                    value.split('"').next()?.parse().ok()
                };
                let body = &rest[..rest.find("</text>")?];
                Some(((attr("x")?, attr("y")?), body.trim()))
            })
            .collect()
    }

    /// Whether `values` step evenly, within a pixel.
    fn evenly_spaced(values: &[f64]) -> bool {
        values
            .windows(3)
            .all(|w| ((w[1] - w[0]) - (w[2] - w[1])).abs() <= 1.0)
    }

    /// Each `<tag .../>`'s attributes, as one string each.
    fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
        svg.split(&format!("<{tag} "))
            .skip(1)
            .filter_map(|e| e.split_once('>').map(|(attrs, _)| attrs))
            .collect()
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    #[test]
    fn the_plot_draws_what_was_measured_and_names_what_was_not() {
        let report = super::super::results::sample_report();
        let svg = render_svg(&report).unwrap();
        assert!(svg.starts_with("<svg "), "{}", &svg[..80]);
        assert!(svg.contains(" xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        let texts = texts(&svg);
        let polylines = elements(&svg, "polyline");
        // A line, a whisker and a point per measured size for the two paths with handoffs
        // (copy/finish, pinned+use-host-ptr/map: the first two colours), none for the rest.
        for c in [PALETTE[0], PALETTE[1]] {
            let line = format!("stroke=\"{}\" stroke-width=\"2\"", hex(c));
            assert_eq!(polylines.iter().filter(|p| p.contains(&line)).count(), 1);
            let dot = format!("fill=\"{}\"", hex(c));
            let dots = elements(&svg, "circle");
            assert_eq!(dots.iter().filter(|d| d.contains(&dot)).count(), 1, "{c:?}");
        }
        for c in [PALETTE[2], PALETTE[3]] {
            let line = format!("stroke=\"{}\" stroke-width=\"2\"", hex(c));
            assert!(!polylines.iter().any(|p| p.contains(&line)), "{c:?}");
        }
        // The log-log axes: the size measured, and every decade of milliseconds that holds
        // the handoffs' quartiles (0.36 ms to 3.12 ms: 0.1 ms to 10 ms).
        assert!(texts.contains(&"32 MiB"), "{texts:?}");
        for decade in ["100 µs", "1.00 ms", "10.0 ms"] {
            assert!(texts.contains(&decade), "{decade} not in {texts:?}");
        }
        assert!(texts.contains(&"buffer size"), "{texts:?}");
        // Decades an equal step apart: the time axis is logarithmic.
        let placed = placed_texts(&svg);
        let y_of = |label: &str| placed.iter().find(|(_, t)| *t == label).unwrap().0.1;
        assert!(
            evenly_spaced(&["100 µs", "1.00 ms", "10.0 ms"].map(y_of)),
            "{placed:?}"
        );
        // Bars for the three pipelines, each with its median on its row (right of the name
        // column); the crash and the refusal say why on theirs.
        let bars = elements(&svg, "rect");
        let on_row_of = |name: &str, text: &str| {
            let row = placed
                .iter()
                .find(|((x, _), t)| *t == name && *x < LABEL_W as f64);
            let ((_, y), _) = row.unwrap_or_else(|| panic!("no row {name} in {placed:?}"));
            placed
                .iter()
                .any(|((x, ty), t)| t.starts_with(text) && *x > LABEL_W as f64 && ty == y)
        };
        for (c, name, median) in [
            (PALETTE[0], "copy/finish", "12.0 ms"),
            (PALETTE[1], "pinned+use-host-ptr/map", "6.00 ms"),
            (NATIVE_COLOUR, "native", "4.00 ms"),
        ] {
            let fill = format!("fill=\"{}\"", hex(c));
            assert_eq!(bars.iter().filter(|b| b.contains(&fill)).count(), 1);
            assert!(
                on_row_of(name, median),
                "{name}: {median} not in {placed:?}"
            );
        }
        assert!(on_row_of("device+use-host-ptr/map", "crash SIGSEGV"));
        assert!(on_row_of(
            "device-ptr-as-cl-arg/finish",
            "unsupported (refused"
        ));
        assert!(
            texts.contains(&"device-ptr-as-cl-arg/finish: unsupported"),
            "{texts:?}"
        );
    }

    #[test]
    fn sizes_a_constant_factor_apart_are_an_equal_step_apart() {
        let mut report = super::super::results::sample_report();
        report.settings.sizes_bytes = vec![1 << 20, 4 << 20, 16 << 20, 64 << 20];
        let svg = render_svg(&report).unwrap();
        let placed = placed_texts(&svg);
        let x_of = |label: &str| {
            let found = placed.iter().find(|(_, t)| *t == label);
            found
                .unwrap_or_else(|| panic!("{label} not in {placed:?}"))
                .0
                .0
        };
        let xs = ["1 MiB", "4 MiB", "16 MiB", "64 MiB"].map(x_of);
        assert!(xs[0] < xs[1] && evenly_spaced(&xs), "{xs:?}");
    }

    #[test]
    fn text_is_escaped_for_svg() {
        let mut report = super::super::results::sample_report();
        report.pairs[0].pair = "a<b & \"c\">'".into();
        let svg = render_svg(&report).unwrap();
        assert!(
            svg.contains("a&lt;b &amp; &quot;c&quot;&gt;&apos;"),
            "{svg}"
        );
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn an_empty_report_says_so() {
        let mut report = super::super::results::sample_report();
        report.pairs.clear();
        let svg = render_svg(&report).unwrap();
        assert_eq!(texts(&svg), ["no pair was measured"]);
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
        assert_eq!(style(0, t), (PALETTE[0], false));
        assert_eq!(style(10, t), (PALETTE[0], true));
        assert_eq!(style(3, Target::Native).0, NATIVE_COLOUR);
    }
}
