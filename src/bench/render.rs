//! `clhip bench interop` for people: the console tables (medians, and the spread at the
//! pipeline's size) and the Markdown (every cell with its min-max spread). Per pair: the
//! handoff each way by size, the scale bandwidth on the shared memory as a share of the peer's
//! own, the pipeline per iteration against the copy path and the native baseline, and every
//! number at the pipeline's size side by side.

use crate::model::{Outcome, OutcomeKind};

use super::human_bytes;
use super::results::{BenchReport, Measure, PairBench, Row, Settings, Stats, Target, TargetBench};

/// Where a table goes: the console gets medians (spreads only in the summary), Markdown gets
/// `median (min–max)` everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Console,
    Markdown,
}

/// One line of a table: cells under the header, or a target with nothing measured, whose
/// outcome spans the row.
enum Line {
    Cells(Vec<String>),
    Spanning(String, String),
}

struct Table {
    title: String,
    header: Vec<String>,
    lines: Vec<Line>,
}

/// The units a duration is shown in, largest first.
const UNITS: [(f64, &str); 4] = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")];

/// The unit that shows `seconds` with one to three digits before the point (three significant
/// digits at most, so 999.7 µs is shown as 1.00 ms).
fn unit_of(seconds: f64) -> (f64, &'static str) {
    for (scale, name) in UNITS {
        if seconds >= scale * 0.9995 {
            return (scale, name);
        }
    }
    UNITS[UNITS.len() - 1]
}

/// `seconds` in `scale` with three significant digits (at least the units digit).
fn number_in(seconds: f64, scale: f64) -> String {
    let v = seconds / scale;
    if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A duration with its unit: `80.0 ns`, `6.77 µs`, `12.3 ms`, `1.23 s`.
pub fn time(seconds: f64) -> String {
    let (scale, unit) = unit_of(seconds);
    format!("{} {unit}", number_in(seconds, scale))
}

/// `6.77 (4.73–8.36) µs`: the median, and the min and max in the median's unit.
fn time_spread(s: &Stats) -> String {
    let (scale, unit) = unit_of(s.median_s);
    format!(
        "{} ({}–{}) {unit}",
        number_in(s.median_s, scale),
        number_in(s.min_s, scale),
        number_in(s.max_s, scale)
    )
}

/// Bandwidth of a scale pass over `bytes`: every byte read once and written once.
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    2.0 * bytes as f64 / seconds / 1e9
}

/// How a non-pass reads in one line: `crash SIGSEGV`, `fault CUDA_ERROR_ILLEGAL_ADDRESS in
/// cuStreamSynchronize`, `unsupported: device lacks ...`.
pub fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Crash {
            signal: 0,
            signal_name,
            ..
        } => format!("crash ({signal_name} before it finished)"),
        Outcome::Crash { signal_name, .. } => format!("crash {signal_name}"),
        Outcome::Fault { error } => format!("fault {} in {}", error.name, error.call),
        Outcome::Timeout { after_s, .. } => format!("timeout after {after_s:.0} s"),
        other => format!("{} ({})", other.kind().name(), other.reason()),
    }
}

/// A cell with no row: its outcome's kind, short.
fn missing_cell(o: Option<&Outcome>) -> String {
    match o.map(Outcome::kind) {
        None | Some(OutcomeKind::Pass) => "-".into(),
        Some(OutcomeKind::Unsupported) => "unsup".into(),
        Some(k) => k.name().into(),
    }
}

fn shorten(text: &str, style: Style) -> String {
    const MAX: usize = 140;
    if style == Style::Markdown || text.chars().count() <= MAX {
        return text.to_string();
    }
    let cut: String = text.chars().take(MAX - 1).collect();
    format!("{cut}…")
}

/// The outcome of a target with nothing to show in a table, with where its child died.
fn spanning(t: &TargetBench, style: Style) -> String {
    let mut text = outcome_text(&t.outcome);
    if let Some(d) = &t.during {
        text.push_str(&format!(" during {d}"));
    }
    shorten(&text, style)
}

/// The target every other is compared with, if it was measured.
fn reference(pair: &PairBench, want: impl Fn(Target) -> bool) -> Option<&TargetBench> {
    pair.targets.iter().find(|t| want(t.target))
}

fn is_copy(t: Target) -> bool {
    t.path() == Some(crate::model::PathKind::Copy)
}

/// `3.20x faster`, `1.50x slower`, as `reference / this`.
fn versus(this_s: f64, reference_s: f64) -> String {
    let r = reference_s / this_s;
    let (factor, way) = if r >= 1.0 {
        (r, "faster")
    } else {
        (1.0 / r, "slower")
    };
    if factor < 1.005 {
        return "same".into();
    }
    // Three significant digits, as every time is shown.
    let digits = if factor >= 99.95 {
        0
    } else if factor >= 9.995 {
        1
    } else {
        2
    };
    format!("{factor:.digits$}x {way}")
}

/// A size table over the targets that measure `measure`: each cell what `cell` makes of the
/// row, or the kind of what stopped it.
fn size_table(
    sizes: &[u64],
    title: String,
    targets: &[&TargetBench],
    measure: Measure,
    style: Style,
    cell: &dyn Fn(&TargetBench, &Row) -> String,
) -> Table {
    let mut header = vec!["target".to_string()];
    header.extend(sizes.iter().map(|&b| human_bytes(b)));
    let mut lines = Vec::new();
    for t in targets {
        let name = t.target.name();
        if !t.rows.iter().any(|r| r.measure == measure) {
            lines.push(Line::Spanning(name, spanning(t, style)));
            continue;
        }
        let mut cells = vec![name];
        for &b in sizes {
            cells.push(match t.row(measure, b) {
                Some(r) => cell(t, r),
                None => missing_cell(t.missing(measure, b)),
            });
        }
        lines.push(Line::Cells(cells));
    }
    Table {
        title,
        header,
        lines,
    }
}

fn tables(report: &BenchReport, pair: &PairBench, style: Style) -> Vec<Table> {
    let s = &report.settings;
    let peer = &pair.peer;
    let paths: Vec<&TargetBench> = pair
        .targets
        .iter()
        .filter(|t| t.target != Target::Native)
        .collect();
    let native = reference(pair, |t| t == Target::Native);
    let copy = reference(pair, is_copy);
    let time_cell = |_: &TargetBench, r: &Row| match style {
        Style::Console => time(r.stats.median_s),
        Style::Markdown => time_spread(&r.stats),
    };
    let median_note = match style {
        Style::Console => "median",
        Style::Markdown => "median (min–max)",
    };
    let mut out = vec![
        size_table(
            &s.sizes_bytes,
            format!("handoff OpenCL -> {peer}, {median_note}"),
            &paths,
            Measure::HandoffToPeer,
            style,
            &time_cell,
        ),
        size_table(
            &s.sizes_bytes,
            format!("handoff {peer} -> OpenCL, {median_note}"),
            &paths,
            Measure::HandoffToOpencl,
            style,
            &time_cell,
        ),
    ];
    let share_cell = |t: &TargetBench, r: &Row| {
        let shared = gbps(r.bytes, r.stats.median_s);
        let share = t
            .row(Measure::ScaleOwn, r.bytes)
            .map(|o| 100.0 * o.stats.median_s / r.stats.median_s);
        match (style, share) {
            (Style::Console, Some(p)) => format!("{p:.0}%"),
            (Style::Console, None) => format!("{shared:.1}GB/s"),
            (Style::Markdown, Some(p)) => format!(
                "{p:.0}% ({shared:.1}, {:.1}–{:.1} GB/s)",
                gbps(r.bytes, r.stats.max_s),
                gbps(r.bytes, r.stats.min_s)
            ),
            (Style::Markdown, None) => format!(
                "{shared:.1} GB/s ({:.1}–{:.1})",
                gbps(r.bytes, r.stats.max_s),
                gbps(r.bytes, r.stats.min_s)
            ),
        }
    };
    let mut scale = size_table(
        &s.sizes_bytes,
        format!(
            "{peer}'s scale kernel on the shared memory: % of its bandwidth on its own memory (median pass){}",
            if style == Style::Markdown {
                ", shared GB/s median (min–max)"
            } else {
                ""
            }
        ),
        &paths,
        Measure::ScaleShared,
        style,
        &share_cell,
    );
    let own_cell = |_: &TargetBench, r: &Row| match style {
        Style::Console => format!("{:.1}GB/s", gbps(r.bytes, r.stats.median_s)),
        Style::Markdown => format!(
            "{:.1} GB/s ({:.1}–{:.1})",
            gbps(r.bytes, r.stats.median_s),
            gbps(r.bytes, r.stats.max_s),
            gbps(r.bytes, r.stats.min_s)
        ),
    };
    if let Some(n) = native {
        let own_table = size_table(
            &s.sizes_bytes,
            String::new(),
            &[n],
            Measure::ScaleOwn,
            style,
            &own_cell,
        );
        scale
            .lines
            .extend(own_table.lines.into_iter().map(|l| match l {
                Line::Cells(mut c) => {
                    c[0] = "own memory (native)".into();
                    Line::Cells(c)
                }
                other => other,
            }));
    }
    out.push(scale);
    out.push(pipeline_table(s, pair, copy, native, style));
    // Without handoffs at the pipeline's size the summary would repeat the pipeline table.
    if s.sizes_bytes.contains(&((s.pipeline_len * 8) as u64)) {
        out.push(summary_table(s, pair, copy, style));
    }
    out
}

fn pipeline_table(
    s: &Settings,
    pair: &PairBench,
    copy: Option<&TargetBench>,
    native: Option<&TargetBench>,
    style: Style,
) -> Table {
    let bytes = (s.pipeline_len * 8) as u64;
    let median = |t: Option<&TargetBench>| {
        t.and_then(|t| t.row(Measure::Pipeline, bytes))
            .map(|r| r.stats.median_s)
    };
    let (copy_s, native_s) = (median(copy), median(native));
    let copy_name = copy.map_or("copy".into(), |c| c.target.name());
    let mut lines = Vec::new();
    for t in &pair.targets {
        let name = t.target.name();
        let Some(r) = t.row(Measure::Pipeline, bytes) else {
            let why = match t.missing(Measure::Pipeline, bytes) {
                Some(o) if t.outcome.kind() == OutcomeKind::Pass => {
                    shorten(&outcome_text(o), style)
                }
                _ => spanning(t, style),
            };
            lines.push(Line::Spanning(name, why));
            continue;
        };
        let m = r.stats.median_s;
        lines.push(Line::Cells(vec![
            name,
            time_spread(&r.stats),
            copy_s.map_or("-".into(), |c| versus(m, c)),
            native_s.map_or("-".into(), |n| versus(m, n)),
        ]));
    }
    Table {
        title: format!(
            "pipeline (OpenCL add -> OpenCL FFT -> peer scale -> peer magnitude), {} complex elements, time per iteration, median (min–max)",
            thousands(s.pipeline_len)
        ),
        header: vec![
            "target".into(),
            "per iteration".into(),
            format!("vs {copy_name}"),
            "vs native".into(),
        ],
        lines,
    }
}

/// Every measure at the pipeline's size, side by side: what the acceptance compares (32 MiB).
fn summary_table(
    s: &Settings,
    pair: &PairBench,
    copy: Option<&TargetBench>,
    style: Style,
) -> Table {
    let bytes = (s.pipeline_len * 8) as u64;
    let peer = &pair.peer;
    let copy_of = |m: Measure| copy.and_then(|c| c.row(m, bytes)).map(|r| r.stats.median_s);
    let mut lines = Vec::new();
    for t in pair.targets.iter().filter(|t| t.target != Target::Native) {
        let name = t.target.name();
        if !t.rows.iter().any(|r| r.bytes == bytes) {
            lines.push(Line::Spanning(name, spanning(t, style)));
            continue;
        }
        let mut cells = vec![name];
        for m in [
            Measure::HandoffToPeer,
            Measure::HandoffToOpencl,
            Measure::Pipeline,
        ] {
            match t.row(m, bytes) {
                Some(r) => {
                    cells.push(time_spread(&r.stats));
                    cells.push(copy_of(m).map_or("-".into(), |c| versus(r.stats.median_s, c)));
                }
                None => {
                    cells.push(missing_cell(t.missing(m, bytes)));
                    cells.push("-".into());
                }
            }
        }
        let own = t.row(Measure::ScaleOwn, bytes);
        cells.push(match (t.row(Measure::ScaleShared, bytes), own) {
            (Some(r), Some(o)) => format!("{:.0}%", 100.0 * o.stats.median_s / r.stats.median_s),
            (Some(r), None) => format!("{:.1} GB/s", gbps(bytes, r.stats.median_s)),
            (None, _) => missing_cell(t.missing(Measure::ScaleShared, bytes)),
        });
        lines.push(Line::Cells(cells));
    }
    Table {
        title: format!(
            "at {} (the pipeline's vector): median (min–max); \"vs\" against {}",
            human_bytes(bytes),
            copy.map_or("copy".into(), |c| c.target.name())
        ),
        header: vec![
            "target".into(),
            format!("OpenCL -> {peer}"),
            "vs copy".into(),
            format!("{peer} -> OpenCL"),
            "vs copy".into(),
            "pipeline".into(),
            "vs copy".into(),
            "bandwidth".into(),
        ],
        lines,
    }
}

/// `4,194,304`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn settings_line(s: &Settings) -> String {
    format!(
        "{} timed repetitions after {} warm-up (excluded) per measurement; the pipeline also runs one checked iteration first; sizes {}; seed {:#x}",
        s.reps,
        s.warmup,
        s.sizes_bytes
            .iter()
            .map(|&b| human_bytes(b))
            .collect::<Vec<_>>()
            .join(", "),
        s.seed
    )
}

/// Measurements that were not made, one line each, and how each child that died ended.
fn problem_lines(pair: &PairBench) -> Vec<String> {
    let mut out = Vec::new();
    for t in &pair.targets {
        for p in &t.problems {
            let what = match (p.measure, p.bytes) {
                (Some(m), Some(b)) => format!("{} at {}", m.name(), human_bytes(b)),
                (None, Some(b)) => format!("every measure at {}", human_bytes(b)),
                (Some(m), None) => m.name().to_string(),
                (None, None) => "every measure".into(),
            };
            out.push(format!("{}: {what}: {}", t.id, outcome_text(&p.outcome)));
        }
        // How a child died is no problem of one measurement: said once, with where.
        if t.outcome.kind() != OutcomeKind::Pass
            && !t.problems.iter().any(|p| p.outcome == t.outcome)
        {
            let mut line = format!("{}: {}", t.id, outcome_text(&t.outcome));
            if let Some(d) = &t.during {
                line.push_str(&format!(" during {d}"));
            }
            out.push(line);
        }
    }
    out
}

fn console_table(t: &Table) -> String {
    let mut widths: Vec<usize> = t.header.iter().map(|h| h.chars().count()).collect();
    for l in &t.lines {
        if let Line::Cells(cells) = l {
            for (w, c) in widths.iter_mut().zip(cells) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let first = widths[0].max(
        t.lines
            .iter()
            .map(|l| match l {
                Line::Spanning(n, _) => n.chars().count(),
                Line::Cells(_) => 0,
            })
            .max()
            .unwrap_or(0),
    );
    widths[0] = first;
    let row = |cells: &[String]| {
        let mut s = String::from("  ");
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                s.push_str(&format!("{c:<w$}"));
            } else {
                s.push_str(&format!("  {c:>w$}"));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = format!("{}\n{}\n", t.title, row(&t.header));
    for l in &t.lines {
        match l {
            Line::Cells(cells) => out.push_str(&row(cells)),
            Line::Spanning(name, text) => out.push_str(&format!("  {name:<first$}  {text}")),
        }
        out.push('\n');
    }
    out
}

/// A table cell or list item: a driver's reason or fingerprint line is text, never markup.
fn markdown_cell(text: &str) -> String {
    crate::escape::markdown_text(text).replace('|', "\\|")
}

fn markdown_table(t: &Table) -> String {
    let mut out = format!("**{}**\n\n", markdown_cell(&t.title));
    let row = |cells: &[String]| {
        format!(
            "| {} |\n",
            cells
                .iter()
                .map(|c| markdown_cell(c))
                .collect::<Vec<_>>()
                .join(" | ")
        )
    };
    out.push_str(&row(&t.header));
    out.push_str(&format!(
        "|{}\n",
        t.header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    ));
    for l in &t.lines {
        match l {
            Line::Cells(cells) => out.push_str(&row(cells)),
            Line::Spanning(name, text) => {
                let mut cells = vec![name.clone(), text.clone()];
                cells.resize(t.header.len(), String::new());
                out.push_str(&row(&cells));
            }
        }
    }
    out.push('\n');
    out
}

/// The console rendering: per pair, the tables, then what could not be measured.
pub fn render_text(report: &BenchReport) -> String {
    let mut out = String::new();
    for pair in &report.pairs {
        out.push_str(&format!(
            "{}: {}\n",
            pair.pair,
            settings_line(&report.settings)
        ));
        if let Some(n) = reference(pair, |t| t == Target::Native) {
            out.push_str(&format!("native: {}\n", n.note));
        }
        out.push('\n');
        for t in tables(report, pair, Style::Console) {
            out.push_str(&console_table(&t));
            out.push('\n');
        }
        let problems = problem_lines(pair);
        if !problems.is_empty() {
            out.push_str("not measured:\n");
            for p in problems {
                out.push_str(&format!("  {}\n", shorten(&p, Style::Console)));
            }
            out.push('\n');
        }
    }
    out
}

/// The Markdown rendering (for reports/): the fingerprint, then per pair every table with
/// each cell's spread, and every measurement not made with its full reason.
pub fn render_markdown(report: &BenchReport) -> String {
    let mut out = String::from("# clhip bench interop\n\n");
    out.push_str(&format!(
        "Started {}, {:.0} s, clhip {}: {}\n\n",
        markdown_cell(&report.started_at),
        report.wall_s,
        markdown_cell(&report.clhip_version),
        crate::escape::markdown_code(&report.command.join(" "))
    ));
    out.push_str(&format!("{}.\n\n", settings_line(&report.settings)));
    out.push_str(
        "Handoff: from the producer's last write done (its kernel finished) to the consumer able to start: the path's sync and any copy it makes, up to the peer's stream idle or the events OpenCL's next command waits for. Bandwidth: one pass of the peer's scale kernel (every element read and written), launch to synchronize, on the shared memory, as a share of the same pass on the peer's own memory. Pipeline: one full round per iteration. Every measurement checks its data (patterns bit-exact, scaled data exact, pipeline within the conformance bound); wrong data is a `fail`, never a time.\n\n",
    );
    out.push_str("## Fingerprint\n\n");
    for l in report.fingerprint.lines() {
        out.push_str(&format!("- {}\n", markdown_cell(&l)));
    }
    out.push('\n');
    for pair in &report.pairs {
        out.push_str(&format!("## {}\n\n", markdown_cell(&pair.pair)));
        if let Some(n) = reference(pair, |t| t == Target::Native) {
            out.push_str(&format!("Native baseline: {}.\n\n", n.note));
        }
        for t in tables(report, pair, Style::Markdown) {
            out.push_str(&markdown_table(&t));
        }
        let problems = problem_lines(pair);
        if !problems.is_empty() {
            out.push_str("**Not measured**\n\n");
            for p in problems {
                out.push_str(&format!("- {}\n", markdown_cell(&p)));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_three_significant_digits_in_their_unit() {
        assert_eq!(time(0.0123), "12.3 ms");
        assert_eq!(time(1.5), "1.50 s");
        assert_eq!(time(0.00123), "1.23 ms");
        assert_eq!(time(0.000_012_3), "12.3 µs");
        assert_eq!(time(0.123), "123 ms");
        assert_eq!(time(8.0e-8), "80.0 ns");
        assert_eq!(time(0.000_999_7), "1.00 ms");
        assert_eq!(time(0.000_999_4), "999 µs");
        assert_eq!(time(1e-12), "0.00 ns");
        let s = Stats::of(vec![4.73e-6, 6.77e-6, 8.36e-6]).unwrap();
        assert_eq!(time_spread(&s), "6.77 (4.73–8.36) µs");
    }

    #[test]
    fn every_target_gets_its_numbers_or_how_it_ended() {
        let report = super::super::results::sample_report();
        let text = render_text(&report);
        // Numbers against copy at the pipeline's size: pinned's pipeline 6 ms vs copy's 12.
        let pinned = text
            .lines()
            .rfind(|l| l.trim_start().starts_with("pinned+use-host-ptr/map"))
            .expect("a summary line for pinned");
        assert!(pinned.contains("2.00x faster"), "{pinned}");
        assert!(
            pinned.contains("2%"),
            "PCIe-speed share of device memory: {pinned}"
        );
        // A child that died, and a path refused everywhere, say so in place of numbers.
        let crashed: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("device+use-host-ptr/map"))
            .collect();
        assert_eq!(crashed.len(), 5, "one line per table: {text}");
        for l in crashed {
            assert!(
                l.ends_with("  crash SIGSEGV during pipeline at 32 MiB"),
                "{l}"
            );
        }
        assert!(
            text.contains("unsupported (refused while the case ran: clEnqueueNDRangeKernel returned CL_INVALID_KERNEL_ARGS (-52))"),
            "{text}"
        );
        assert!(text.contains("native: cuda0 has no FFT in clhip"), "{text}");
        let md = render_markdown(&report);
        assert!(
            md.contains("| device+use-host-ptr/map | crash SIGSEGV during pipeline at 32 MiB |"),
            "{md}"
        );
        assert!(
            md.contains("| copy/finish | 12.0 (10.8–14.4) ms | same | 3.00x slower |"),
            "{md}"
        );
    }

    #[test]
    fn versus_says_which_way() {
        assert_eq!(versus(1.0, 3.2), "3.20x faster");
        assert_eq!(versus(2.0, 1.0), "2.00x slower");
        assert_eq!(versus(1.0, 1.001), "same");
        assert_eq!(versus(1.0, 523.33), "523x faster");
        assert_eq!(versus(1.0, 12.345), "12.3x faster");
        assert_eq!(thousands(4_194_304), "4,194,304");
        assert_eq!(thousands(512), "512");
    }

    #[test]
    fn a_drivers_text_is_text_in_the_markdown() {
        let mut report = super::super::results::sample_report();
        report.fingerprint.os_kernel = "Linux <script>alert(1)</script>\x1b[2J".into();
        report.pairs[0].targets[0].outcome =
            Outcome::unsupported("<img src=x onerror=alert(1)> | `x`\n- \u{202e}");
        let md = render_markdown(&report);
        assert!(!md.contains("<script") && !md.contains("<img"), "{md}");
        assert!(
            md.contains("&lt;img src=x onerror=alert(1)&gt; \\| \\`x\\` / - \\u{202e}"),
            "{md}"
        );
        let raw: Vec<char> = md
            .chars()
            .filter(|&c| crate::escape::is_control(c) && c != '\n')
            .collect();
        assert_eq!(raw, Vec::<char>::new(), "{md}");
    }
}
