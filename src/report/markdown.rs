//! A run as Markdown for committing to `reports/`: what it ran on, the matrices, the comparison
//! of several ROCm installs, every non-pass.

use std::fmt::Write as _;

use crate::fingerprint::Fingerprint;
use crate::model::{Op, OutcomeKind, PathKind};
use crate::results::CaseResult;

use super::json::{RunReport, closing_line};
use super::matrix::{
    Agreement, InstallComparison, accepted_note, caught_line, compare_installs, history, label,
    mark, non_pass, one_line, render_tables, sync_label,
};

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
        let rows: Vec<Vec<String>> = non_pass
            .iter()
            .map(|r| {
                let reason = match accepted_note(r) {
                    Some(note) => note,
                    None => r.outcome.reason(),
                } + &history(r);
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
    if report.consistency.groups > 0 {
        out.push_str("\n## Consistency across identical GPUs\n\n");
        let lines = report.consistency.lines();
        if report.consistency.flagged.is_empty() {
            out.push_str("Every case came out the same on GPUs of the same model and driver.\n");
        }
        for l in lines {
            let _ = writeln!(out, "- {}", one_line(&l));
        }
    }
    if !report.broken_vendors.is_empty() {
        out.push_str("\n## Broken OpenCL drivers\n\nVendor libraries that crashed, hung or exited while being probed; every other vendor ran.\n\n");
        for v in &report.broken_vendors {
            let _ = writeln!(out, "- {}", one_line(v));
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
                .map(|s| code(s))
                .collect::<Vec<_>>()
                .join(", ")
        );
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

/// One GPU's comparison: the rows, then each differing case with every install's outcome and
/// reason.
fn comparison_markdown(c: &InstallComparison) -> String {
    let mut out = format!("\n### {}\n\n", code(&c.pairs));
    let mut header = vec!["", "path", "sync", "op"];
    header.extend(c.installs.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|row| {
            let mut line = vec![
                row.agreement.mark().to_string(),
                row.path.to_string(),
                sync_label(row.path, row.sync),
                row.op.to_string(),
            ];
            line.extend(row.cells.iter().cloned());
            line
        })
        .collect();
    out.push_str(&md_table(&header, &rows));
    let differing: Vec<Vec<String>> = c
        .cases
        .iter()
        .filter(|k| k.agreement == Agreement::Differs)
        .map(|k| {
            let mut line = vec![code(&k.case)];
            line.extend(k.results.iter().map(|r| match r {
                None => "not run".to_string(),
                Some(r) if r.outcome.kind() == OutcomeKind::Pass => label(r).to_string(),
                Some(r) => format!("{}: {}", label(r), one_line(&r.outcome.reason())),
            }));
            line
        })
        .collect();
    if !differing.is_empty() {
        let mut header = vec!["differing case"];
        header.extend(c.installs.iter().map(String::as_str));
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
            .is_some_and(|c| c.op == Op::Placement || c.path == PathKind::ClGpuVa)
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

pub(super) fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let cell = |s: &str| one_line(s).replace('|', "\\|");
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|s| cell(s)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

pub(super) fn code(s: &str) -> String {
    format!("`{s}`")
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
