//! A run as Markdown for committing to `reports/`: what it ran on, the matrices, the comparison
//! of several ROCm installs, every non-pass.

use std::fmt::{self, Write as _};

use crate::escape::{markdown_code, markdown_text};
use crate::fingerprint::Fingerprint;
use crate::model::{Op, OutcomeKind};
use crate::results::CaseResult;

use super::json::{RunReport, closing_line};
use super::matrix::{
    Agreement, InstallComparison, accepted_note, caught_line, compare_installs, history, label,
    mark, non_pass, sync_label,
};

/// A piece of Markdown, made only from escaped text ([`Md::text`]), code spans ([`Md::code`])
/// or the report's own markup ([`Md::markup`]): a string from a results file cannot reach a
/// page as markup, HTML or a control character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Md(String);

impl Md {
    /// Plain text, on one line, every character with a meaning in Markdown escaped.
    pub(super) fn text(s: &str) -> Md {
        Md(markdown_text(s))
    }

    /// An inline code span that nothing in `s` can end early.
    pub(super) fn code(s: &str) -> Md {
        Md(markdown_code(s))
    }

    /// Markup the report writes itself, never from a results file.
    pub(super) fn markup(s: &'static str) -> Md {
        Md(s.to_string())
    }
}

impl fmt::Display for Md {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The matrix as Markdown tables, a pair each (rows path and sync, a column per op, each cell
/// its worst outcome and count over its sizes, as the terminal's), then the mocks'.
fn matrix_tables(results: &[CaseResult]) -> String {
    let super::matrix::Grouped { pairs, mocks } = super::matrix::group(results);
    let mut out = String::new();
    for (pair, table) in &pairs {
        let grid = super::matrix::pair_grid(table);
        let row = |r: &Vec<String>| r.iter().map(|c| Md::text(c)).collect::<Vec<Md>>();
        out.push_str(&format!("\n### {}\n\n", code(pair)));
        out.push_str(&md_table(
            &row(&grid[0]),
            &grid[1..].iter().map(row).collect::<Vec<_>>(),
        ));
        let notes = super::matrix::pair_notes(table);
        if !notes.is_empty() {
            out.push('\n');
            for note in notes {
                out.push_str(&format!("{}  \n", Md::markup(note)));
            }
        }
    }
    if !mocks.is_empty() {
        out.push_str("\n### mock\n\n");
        let rows: Vec<Vec<Md>> = super::matrix::mock_grid(&mocks)
            .iter()
            .map(|r| r.iter().map(|c| Md::text(c)).collect())
            .collect();
        out.push_str(&md_table(&[Md::text("case"), Md::text("outcome")], &rows));
    }
    out
}

/// A run for committing to `reports/`: what it ran on, the matrices, and every non-pass.
pub fn render_markdown(report: &RunReport) -> String {
    let mut out = String::from("# clhip results\n\n");
    let t = |s: &str| Md::text(s);
    let mut rows = vec![
        vec![t("started"), t(&report.started_at)],
        vec![t("clhip"), t(&report.clhip_build())],
        vec![t("seed"), t(&report.seed.to_string())],
        vec![t("wall"), t(&format!("{:.1} s", report.wall_s))],
        vec![t("command"), code(&shell_words(&report.command))],
        vec![t("result"), t(&closing_line(&report.summary))],
    ];
    if let Some(p) = report.plant() {
        rows.insert(2, vec![t("planted"), t(&p.describe())]);
    }
    out.push_str(&md_table(&[Md::markup(""), Md::markup("")], &rows));
    out.push_str("\n## Fingerprint\n\n");
    let rows: Vec<Vec<Md>> = fingerprint_rows(&report.fingerprint)
        .iter()
        .map(|row| row.iter().map(|cell| t(cell)).collect())
        .collect();
    out.push_str(&md_table(&[t("component"), t("value")], &rows));
    out.push_str("\n## Matrix\n");
    out.push_str(&matrix_tables(&report.results));
    let comparisons = compare_installs(&report.results);
    if !comparisons.is_empty() {
        out.push_str(
            "\n## Across ROCm installs\n\nEach GPU as the run's ROCm installs saw it: one column \
             per install, each cell the worst outcome over the sizes and its count. `>` marks a \
             row whose outcomes differ between the installs; `~` a negative control that passed \
             on one and caught its stale read on another, which it may do by design.\n",
        );
        for c in &comparisons {
            out.push_str(&comparison_markdown(c));
        }
    }

    let non_pass = non_pass(&report.results);
    if !non_pass.is_empty() {
        out.push_str(
            "\n## Needs a look\n\n`!` marks an outcome that fails the run, `?` a known non-pass that now passes.\n\n",
        );
        let rows: Vec<Vec<Md>> = non_pass
            .iter()
            .map(|r| {
                let reason = match accepted_note(r) {
                    Some(note) => note,
                    None => r.outcome.reason(),
                } + &history(r);
                vec![
                    Md::text(mark(r)),
                    Md::text(label(r)),
                    code(&r.id),
                    Md::text(&reason),
                ]
            })
            .collect();
        out.push_str(&md_table(
            &[
                Md::markup(""),
                Md::text("outcome"),
                Md::text("case"),
                Md::text("reason"),
            ],
            &rows,
        ));
    }
    if let Some(line) = caught_line(&report.results) {
        let _ = writeln!(out, "\n{line}.");
    }
    if report.consistency.groups > 0 {
        out.push_str("\n## Consistency across identical GPUs\n\n");
        let lines = report.consistency.lines();
        if report.consistency.flagged.is_empty() {
            out.push_str("Every case came out the same on GPUs of the same model and driver.\n");
        }
        for l in lines {
            let _ = writeln!(out, "- {}", Md::text(&l));
        }
    }
    if !report.broken_vendors.is_empty() {
        out.push_str("\n## Broken OpenCL drivers\n\nVendor libraries that crashed, hung or exited while being probed; every other vendor ran.\n\n");
        for v in &report.broken_vendors {
            let _ = writeln!(out, "- {}", Md::text(v));
        }
    }
    if !report.lost_gpus.is_empty() {
        out.push_str("\n## Lost GPUs\n\nNo case started on these GPUs after the evidence; their cases not run are `skip`s that say so. The other GPUs ran to the end.\n\n");
        for g in &report.lost_gpus {
            let _ = writeln!(out, "- {}", Md::text(g));
        }
    }
    if !report.stale_baseline.is_empty() {
        let _ = writeln!(
            out,
            "\n{} baseline entries matched no case of the run: {}.",
            report.stale_baseline.len(),
            report
                .stale_baseline
                .iter()
                .map(|s| code(s).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out.push_str(&footprint_markdown(&report.results));
    let measured = measured(&report.results);
    if !measured.is_empty() {
        out.push_str(
            "\n## Placement and addresses\n\nWhat passing cases measured or learned: where the \
             shared memory lives (placement), and where a buffer's device address came from \
             (cl-gpu-va).\n\n",
        );
        let rows: Vec<Vec<Md>> = measured
            .iter()
            .map(|r| vec![code(&r.id), Md::text(&r.outcome.reason())])
            .collect();
        out.push_str(&md_table(&[Md::text("case"), Md::text("note")], &rows));
    }
    out
}

/// Cases shown in the footprint table.
const FOOTPRINT_ROWS: usize = 10;

/// The cases whose crossing added the most memory, host or device, with the worker's peak and
/// the device memory in use after set-up; nothing where no case was measured.
fn footprint_markdown(results: &[CaseResult]) -> String {
    use crate::footprint::show;
    let mut measured: Vec<(&CaseResult, &crate::footprint::Footprint)> = results
        .iter()
        .filter_map(|r| Some((r, r.footprint.as_ref()?)))
        .collect();
    if measured.is_empty() {
        return String::new();
    }
    let most = |f: &crate::footprint::Footprint| {
        f.host_growth()
            .unwrap_or(0)
            .max(f.device_growth().unwrap_or(0))
    };
    // Largest first; equal ones in the run's order.
    measured.sort_by_key(|(_, f)| std::cmp::Reverse(most(f)));
    let bytes = |b: Option<u64>| b.map_or(Md::markup("-"), |b| Md::text(&show(b)));
    let rows: Vec<Vec<Md>> = measured
        .iter()
        .take(FOOTPRINT_ROWS)
        .map(|(r, f)| {
            vec![
                code(&r.id),
                bytes(f.host_growth()),
                bytes(f.host_peak),
                bytes(f.device_growth()),
                bytes(f.device_after_setup),
            ]
        })
        .collect();
    let mut out = format!(
        "\n## Footprint\n\nThe {} of {} measured cases whose crossing added the most memory: host \
         growth is the worker's peak resident memory during the crossing less its resident memory \
         before it; device growth is the GPU's memory in use after set-up less before it (the \
         whole GPU's, other processes included); `-` where nothing was measured (a host peer \
         has no device memory).\n\n",
        rows.len(),
        measured.len()
    );
    let header = [
        "case",
        "host growth",
        "worker peak",
        "device growth",
        "device in use after set-up",
    ]
    .map(Md::text);
    out.push_str(&md_table(&header, &rows));
    out
}

/// One GPU's comparison: the rows, then each differing case with every install's outcome and
/// reason.
fn comparison_markdown(c: &InstallComparison) -> String {
    let mut out = format!("\n### {}\n\n", code(&c.pairs));
    let installs = c.installs.iter().map(|i| Md::text(i));
    let mut header = vec![
        Md::markup(""),
        Md::text("path"),
        Md::text("sync"),
        Md::text("op"),
    ];
    header.extend(installs.clone());
    let rows: Vec<Vec<Md>> = c
        .rows
        .iter()
        .map(|row| {
            let mut line = vec![
                Md::text(row.agreement.mark()),
                Md::text(&row.path.to_string()),
                Md::text(&sync_label(row.path, row.sync)),
                Md::text(&row.op.to_string()),
            ];
            line.extend(row.cells.iter().map(|cell| Md::text(cell)));
            line
        })
        .collect();
    out.push_str(&md_table(&header, &rows));
    let differing: Vec<Vec<Md>> = c
        .cases
        .iter()
        .filter(|k| k.agreement == Agreement::Differs)
        .map(|k| {
            let mut line = vec![code(&k.case)];
            line.extend(k.results.iter().map(|r| match r {
                None => Md::text("not run"),
                Some(r) if r.outcome.kind() == OutcomeKind::Pass => Md::text(label(r)),
                Some(r) => Md::text(&format!("{}: {}", label(r), r.outcome.reason())),
            }));
            line
        })
        .collect();
    if !differing.is_empty() {
        let mut header = vec![Md::text("differing case")];
        header.extend(installs);
        out.push('\n');
        out.push_str(&md_table(&header, &differing));
    }
    let _ = writeln!(out, "\n{}.", c.summary());
    out
}

fn measured(results: &[CaseResult]) -> Vec<&CaseResult> {
    results.iter().filter(|r| is_measurement(r)).collect()
}

/// A pass whose note is a finding in itself (a placement's bandwidths, where a device address
/// came from), not only a summary of the check.
pub(super) fn is_measurement(r: &CaseResult) -> bool {
    r.outcome.kind() == OutcomeKind::Pass
        && r.work
            .case()
            .is_some_and(|c| c.op == Op::Placement || c.path.pass_note_is_a_finding())
}

pub(super) fn fingerprint_rows(f: &Fingerprint) -> Vec<Vec<String>> {
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
                    .filter(|p| !p.is_empty())
                    .map(|p| format!("; PCI {p}"))
                    .unwrap_or_default(),
                d.uuid
                    .as_ref()
                    .filter(|u| !u.is_empty())
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
            // A field the device has not (the host's PCI bus id) is left out, not shown empty.
            let labelled = |label: &str, v: &str| {
                if v.is_empty() {
                    String::new()
                } else {
                    format!("{label} {v}")
                }
            };
            rows.push(vec![
                format!("{}{}", r.api, d.ordinal),
                [
                    d.name.as_str(),
                    d.arch.as_str(),
                    &labelled("PCI", &d.pci_bus_id),
                    &labelled("UUID", &d.uuid),
                    &labelled("driver", &d.driver_version),
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

/// A GFM table of escaped cells; a `|` in a cell (a code span's) is escaped for the table.
pub(super) fn md_table(header: &[Md], rows: &[Vec<Md>]) -> String {
    let row = |cells: &[Md]| {
        let cells: Vec<String> = cells.iter().map(|c| c.0.replace('|', "\\|")).collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = row(header);
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for r in rows {
        out.push_str(&row(r));
    }
    out
}

pub(super) fn code(s: &str) -> Md {
    Md::code(s)
}

/// The argv as one could paste it into a shell.
pub(super) fn shell_words(argv: &[String]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_a_device_has_not_is_left_out_not_shown_empty() {
        use crate::fingerprint::{DeviceInfo, RuntimeFingerprint};
        let host = DeviceInfo {
            ordinal: 0,
            name: "cpu".into(),
            ..Default::default()
        };
        let f = Fingerprint {
            runtimes: vec![RuntimeFingerprint {
                api: "host".into(),
                status: "loaded".into(),
                devices: vec![host.clone()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let rows = fingerprint_rows(&f);
        assert_eq!(rows[1], ["host0", "cpu"], "{rows:?}");
        let gpu = DeviceInfo {
            pci_bus_id: "0000:c1:00.0".into(),
            uuid: "GPU-1".into(),
            ..host
        };
        let f = Fingerprint {
            runtimes: vec![RuntimeFingerprint {
                devices: vec![gpu],
                ..f.runtimes[0].clone()
            }],
            ..f
        };
        assert_eq!(
            fingerprint_rows(&f)[1][1],
            "cpu; PCI 0000:c1:00.0; UUID GPU-1"
        );
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

    /// The cells of a GFM table row: split at each `|` with no backslash before it (GFM's
    /// `\|`, whatever comes before the backslash).
    fn cells(row: &str) -> usize {
        let separators = row
            .char_indices()
            .filter(|&(i, c)| c == '|' && !row[..i].ends_with('\\'))
            .count();
        separators - 1
    }

    #[test]
    fn strings_from_a_results_file_are_text_never_markup() {
        use crate::model::{Op, Outcome, PathKind, Peer, SyncMode};
        use crate::report::tests::{pair, result, sample_report};
        let mut report = sample_report();
        let hostile = "<script>alert(1)</script> | ![x](https://x.example/i.png) `code`\n| a | b |\n\x1b[2J\u{202e}";
        let evil = pair("evil`|```0", Peer::HOST);
        let mut r = result(
            &evil,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Fft,
            64,
            Outcome::unsupported(hostile),
        );
        r.kernel_log = vec!["<img src=x onerror=alert(1)>".into()];
        report.results.push(r);
        report.broken_vendors = vec![format!("libevil.so: {hostile}")];
        report.lost_gpus = vec![format!("GPU cuda0 lost after x: {hostile}")];
        report.fingerprint.os_kernel = hostile.into();
        let md = render_markdown(&report);
        assert!(md.contains("## Lost GPUs\n"), "{md}");
        let lower = md.to_ascii_lowercase();
        for markup in ["<script", "<img", "![x](http"] {
            assert!(!lower.contains(markup), "{markup} in {md}");
        }
        let raw: Vec<char> = md
            .chars()
            .filter(|&c| crate::escape::is_control(c) && c != '\n')
            .collect();
        assert_eq!(raw, Vec::<char>::new());
        // Every row of every table has its header's cells.
        let mut width = None;
        for line in md.lines() {
            if !line.starts_with('|') {
                width = None;
                continue;
            }
            let n = cells(line);
            match width {
                None => width = Some(n),
                Some(w) => assert_eq!(n, w, "{line}"),
            }
        }
        let row = md
            .lines()
            .find(|l| l.starts_with('|') && l.contains("evil"))
            .expect("the hostile case is listed");
        assert!(
            row.contains("````evil`\\|```0+host/copy/finish/fft/n=64````"),
            "{row}"
        );
        assert!(
            row.contains(r"&lt;script&gt;alert(1)&lt;/script&gt; \| !\[x\](https://x.example/i.png) \`code\` / \| a \| b \| / \x1b\[2J\u{202e}"),
            "{row}"
        );
        // The matrix's tables: the hostile pair's name is code in its heading, not markup.
        let block = &md[md.find("## Matrix").expect("the matrix")..];
        assert!(block.contains("\n### ````evil`|```0+host````\n"), "{block}");
    }
}
