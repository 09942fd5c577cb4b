//! What changed between two runs: `clhip diff OLD.json NEW.json`, the release comparison (ROCm
//! 6.3.2 against 7.0). Cases are matched by id. A case that moves up the severity order (pass <
//! skip < unsupported < fault, crash, timeout < fail) is a regression, pass -> unsupported (a
//! capability that disappeared) included; one that moves down is a fix; a move within one level
//! (a fault that now crashes) is a change. A negative control's pass <-> stale read is a race
//! by design and counts as neither. A harness error on the new side is a regression: the new
//! run cannot vouch for the case. A case the new run planned but did not get to (interrupted)
//! is `not run`, not removed. The fingerprints' differences come first. Whether either file is
//! a whole run is [`super::judge`]'s to say, as for `report`.
//!
//! Footprints are a regression of their own kind: a case whose crossing took more host or
//! device memory in the new run than [`crate::footprint::grew`] allows over the old is listed
//! as `footprint`, whatever its outcome did, and fails the diff as a regression does.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::footprint::{GROWTH_RULE, Memory, grew, show};
use crate::model::Verdict;
use crate::results::CaseResult;

use crate::escape::{terminal_line, terminal_text};

use super::json::RunReport;
use super::markdown::{Md, code, md_table};
use super::matrix::one_line;

/// How one case moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Movement {
    Regression,
    Change,
    Fix,
    New,
    Removed,
    /// In the old run, and planned in the new one but never run there (it was interrupted).
    NotRun,
    /// A negative control that flipped between pass and caught: not evidence of anything.
    Race,
}

impl Movement {
    pub(super) fn name(self) -> &'static str {
        match self {
            Movement::Regression => "regression",
            Movement::Change => "changed",
            Movement::Fix => "fix",
            Movement::New => "new",
            Movement::Removed => "removed",
            Movement::NotRun => "not run",
            Movement::Race => "race (negative control)",
        }
    }
}

/// One case that differs between the runs.
#[derive(Debug, Clone)]
pub struct Moved<'a> {
    pub id: &'a str,
    pub movement: Movement,
    pub old: Option<&'a CaseResult>,
    pub new: Option<&'a CaseResult>,
}

/// A case whose memory grew past the footprint rule between the runs.
#[derive(Debug, Clone)]
pub struct Growth<'a> {
    pub id: &'a str,
    pub memory: Memory,
    /// The crossing's growth in each run, in bytes.
    pub old: u64,
    pub new: u64,
}

/// The differences between two runs.
#[derive(Debug)]
pub struct RunDiff<'a> {
    /// Fingerprint lines only the old run has, and only the new one.
    pub fingerprint_old: Vec<String>,
    pub fingerprint_new: Vec<String>,
    pub moved: Vec<Moved<'a>>,
    /// Footprint regressions, in the new run's order.
    pub footprint: Vec<Growth<'a>>,
    /// Whether both runs measured any footprint (older results files have none), each case's
    /// its own ([`RunReport::footprint_isolated`]).
    pub footprints_compared: bool,
    /// Both runs measured footprints, but not each case's alone: not compared, and said so.
    pub footprints_not_isolated: bool,
}

impl RunDiff<'_> {
    /// Outcome regressions; footprint regressions are [`RunDiff::footprint_regressions`].
    pub fn regressions(&self) -> usize {
        self.count(Movement::Regression)
    }

    pub fn footprint_regressions(&self) -> usize {
        self.footprint.len()
    }

    /// Whether the diff should fail (exit 1): a regression of either kind.
    pub fn fails(&self) -> bool {
        self.regressions() > 0 || self.footprint_regressions() > 0
    }

    pub fn count(&self, m: Movement) -> usize {
        self.moved.iter().filter(|c| c.movement == m).count()
    }
}

/// The runs' differences, case by case, in the new run's order (removed cases last).
pub fn diff<'a>(old: &'a RunReport, new: &'a RunReport) -> RunDiff<'a> {
    let old_lines = old.fingerprint.lines();
    let new_lines = new.fingerprint.lines();
    let olds: BTreeMap<&str, &CaseResult> =
        old.results.iter().map(|r| (r.id.as_str(), r)).collect();
    let news: BTreeMap<&str, &CaseResult> =
        new.results.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut moved = Vec::new();
    let mut footprint = Vec::new();
    let isolated = old.footprint_isolated && new.footprint_isolated;
    for n in &new.results {
        if let Some(o) = olds.get(n.id.as_str())
            && isolated
        {
            footprint.extend(growths(o, n));
        }
        let movement = match olds.get(n.id.as_str()) {
            None => Some(Movement::New),
            Some(o) => movement(o, n),
        };
        if let Some(movement) = movement {
            moved.push(Moved {
                id: &n.id,
                movement,
                old: olds.get(n.id.as_str()).copied(),
                new: Some(n),
            });
        }
    }
    let not_run: std::collections::BTreeSet<&str> =
        new.not_run.iter().map(String::as_str).collect();
    for o in &old.results {
        if !news.contains_key(o.id.as_str()) {
            moved.push(Moved {
                id: &o.id,
                movement: if not_run.contains(o.id.as_str()) {
                    Movement::NotRun
                } else {
                    Movement::Removed
                },
                old: Some(o),
                new: None,
            });
        }
    }
    RunDiff {
        fingerprint_old: old_lines
            .iter()
            .filter(|l| !new_lines.contains(l))
            .cloned()
            .collect(),
        fingerprint_new: new_lines
            .iter()
            .filter(|l| !old_lines.contains(l))
            .cloned()
            .collect(),
        moved,
        footprint,
        footprints_compared: measured(old) && measured(new) && isolated,
        footprints_not_isolated: measured(old) && measured(new) && !isolated,
    }
}

fn measured(r: &RunReport) -> bool {
    r.results.iter().any(|r| r.footprint.is_some())
}

/// The memories of one case that grew past the rule from `old` to `new`.
fn growths<'a>(old: &CaseResult, new: &'a CaseResult) -> Vec<Growth<'a>> {
    let (Some(a), Some(b)) = (&old.footprint, &new.footprint) else {
        return Vec::new();
    };
    [Memory::Host, Memory::Device]
        .into_iter()
        .filter_map(|memory| {
            let (old, new_bytes) = (memory.growth(a)?, memory.growth(b)?);
            grew(old, new_bytes).then_some(Growth {
                id: &new.id,
                memory,
                old,
                new: new_bytes,
            })
        })
        .collect()
}

fn movement(old: &CaseResult, new: &CaseResult) -> Option<Movement> {
    let (a, b) = (old.outcome.kind(), new.outcome.kind());
    if a == b {
        return None;
    }
    let control = |r: &CaseResult| {
        matches!(r.verdict(), Verdict::CaughtStaleRead | Verdict::Pass)
            && r.work
                .case()
                .is_some_and(crate::model::Case::is_negative_control)
    };
    if control(old) && control(new) {
        return Some(Movement::Race);
    }
    Some(match (a.severity(), b.severity()) {
        (_, None) => Movement::Regression,
        (None, Some(_)) => Movement::Fix,
        (Some(x), Some(y)) if y > x => Movement::Regression,
        (Some(x), Some(y)) if y < x => Movement::Fix,
        _ => Movement::Change,
    })
}

/// The path a case is grouped under (`mock` for mocks).
fn group(m: &Moved) -> String {
    m.new
        .or(m.old)
        .and_then(|r| r.work.case())
        .map_or_else(|| "mock".to_string(), |c| c.path.to_string())
}

fn side(r: Option<&CaseResult>) -> (String, String) {
    match r {
        None => ("-".into(), String::new()),
        Some(r) => (
            r.outcome.kind().name().into(),
            one_line(&r.outcome.reason()),
        ),
    }
}

pub(super) fn summary_line(d: &RunDiff) -> String {
    // Only a new run that was cut short has cases not run: the usual line stays as it was.
    let not_run = match d.count(Movement::NotRun) {
        0 => String::new(),
        n => format!(", {n} not run in the new run"),
    };
    // Runs that measured no footprint (files from before footprints) keep the usual line.
    let footprint = if d.footprints_compared || !d.footprint.is_empty() {
        format!(", {} footprint regressions", d.footprint_regressions())
    } else if d.footprints_not_isolated {
        // Two identical runs of the full H200 matrix, batched at -j 8, differed in 280
        // cases' footprints: a worker's one-time set-ups and its neighbours on the GPU.
        ", footprints not compared (a run compares them with --cases-per-worker 1 -j 1)".to_string()
    } else {
        String::new()
    };
    format!(
        "{} regressions, {} fixes, {} changed, {} new, {} removed{not_run}, {} negative-control races{footprint}",
        d.count(Movement::Regression),
        d.count(Movement::Fix),
        d.count(Movement::Change),
        d.count(Movement::New),
        d.count(Movement::Removed),
        d.count(Movement::Race)
    )
}

/// The heading over the footprint regressions: the rule they broke, and what is compared.
pub(super) fn footprint_heading() -> String {
    format!(
        "footprint: memory a case's crossing added (host: peak resident - resident before; device: in use after set-up - before), flagged when {GROWTH_RULE}"
    )
}

/// `host 1.2 MiB -> 65.2 MiB`.
pub(super) fn growth_text(g: &Growth) -> String {
    format!("{} {} -> {}", g.memory.name(), show(g.old), show(g.new))
}

/// For a terminal: the fingerprint diff, then the moved cases grouped by path, worst first.
/// Every string from the two files is shown on its own line with its control characters as
/// text.
pub fn render_diff(d: &RunDiff) -> String {
    let mut out = String::from("fingerprint:\n");
    if d.fingerprint_old.is_empty() && d.fingerprint_new.is_empty() {
        out.push_str("  the same\n");
    }
    for l in &d.fingerprint_old {
        let _ = writeln!(out, "  - {}", terminal_line(l));
    }
    for l in &d.fingerprint_new {
        let _ = writeln!(out, "  + {}", terminal_line(l));
    }
    for (path, moved) in grouped(d) {
        let _ = writeln!(out, "\n{}", terminal_line(&path));
        for m in moved {
            let (ok, or) = side(m.old);
            let (nk, nr) = side(m.new);
            let mark = if m.movement == Movement::Regression {
                "!"
            } else {
                " "
            };
            let _ = writeln!(
                out,
                "{mark} {:<11} {}: {ok} -> {nk}",
                m.movement.name(),
                terminal_line(m.id)
            );
            if !or.is_empty() {
                let _ = writeln!(out, "      was: {}", terminal_line(&or));
            }
            if !nr.is_empty() {
                let _ = writeln!(out, "      now: {}", terminal_line(&nr));
            }
        }
    }
    if !d.footprint.is_empty() {
        let _ = writeln!(out, "\n{}", footprint_heading());
        for g in &d.footprint {
            let _ = writeln!(
                out,
                "! footprint   {}: {}",
                terminal_line(g.id),
                growth_text(g)
            );
        }
    }
    let _ = writeln!(out, "\n{}", summary_line(d));
    // Each piece from the files is escaped where it is put in; this catches any that is not.
    terminal_text(&out)
}

/// For reports/: the same as Markdown tables.
pub fn render_diff_markdown(d: &RunDiff) -> String {
    let mut out = String::from("# clhip diff\n\n## Fingerprint\n\n");
    if d.fingerprint_old.is_empty() && d.fingerprint_new.is_empty() {
        out.push_str("The same on both sides.\n");
    } else {
        let rows: Vec<Vec<Md>> = d
            .fingerprint_old
            .iter()
            .map(|l| vec![Md::text("old"), Md::text(l)])
            .chain(
                d.fingerprint_new
                    .iter()
                    .map(|l| vec![Md::text("new"), Md::text(l)]),
            )
            .collect();
        out.push_str(&md_table(&[Md::text("run"), Md::text("line")], &rows));
    }
    let _ = writeln!(out, "\n{}.", summary_line(d));
    for (path, moved) in grouped(d) {
        let _ = writeln!(out, "\n## {}\n", code(&path));
        let rows: Vec<Vec<Md>> = moved
            .iter()
            .map(|m| {
                let (ok, or) = side(m.old);
                let (nk, nr) = side(m.new);
                vec![
                    Md::text(if m.movement == Movement::Regression {
                        "!"
                    } else {
                        ""
                    }),
                    Md::text(m.movement.name()),
                    code(m.id),
                    Md::text(&with_reason(&ok, &or)),
                    Md::text(&with_reason(&nk, &nr)),
                ]
            })
            .collect();
        let header = ["", "movement", "case", "old", "new"].map(Md::text);
        out.push_str(&md_table(&header, &rows));
    }
    if !d.footprint.is_empty() {
        let _ = writeln!(out, "\n## Footprint\n\n{}.\n", footprint_heading());
        let rows: Vec<Vec<Md>> = d
            .footprint
            .iter()
            .map(|g| {
                vec![
                    Md::text("!"),
                    code(g.id),
                    Md::text(g.memory.name()),
                    Md::text(&show(g.old)),
                    Md::text(&show(g.new)),
                ]
            })
            .collect();
        let header = ["", "case", "memory", "old", "new"].map(Md::text);
        out.push_str(&md_table(&header, &rows));
    }
    out
}

/// `fail: reason`, or the outcome alone when there is no reason (a pass without a note).
fn with_reason(kind: &str, reason: &str) -> String {
    if reason.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {reason}")
    }
}

pub(super) fn grouped<'d, 'a>(d: &'d RunDiff<'a>) -> BTreeMap<String, Vec<&'d Moved<'a>>> {
    let mut by_path: BTreeMap<String, Vec<&Moved>> = BTreeMap::new();
    for m in &d.moved {
        by_path.entry(group(m)).or_default().push(m);
    }
    for moved in by_path.values_mut() {
        moved.sort_by_key(|m| m.movement);
    }
    by_path
}

#[cfg(test)]
mod tests {
    use super::super::tests::{pair, result, sample_report, under};
    use super::*;
    use crate::model::{Api, ApiError, Op, Outcome, PathKind, Peer, SyncMode};

    fn fault() -> Outcome {
        Outcome::Fault {
            error: ApiError {
                api: Api::Cuda,
                call: "cuStreamSynchronize".into(),
                code: 700,
                name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                detail: String::new(),
            },
        }
    }

    fn run(results: Vec<CaseResult>) -> RunReport {
        let mut r = sample_report();
        r.results = results;
        r
    }

    #[test]
    fn regressions_fixes_lost_capabilities_and_corruption_are_told_apart() {
        let p = pair(
            "nvidia0",
            Peer {
                api: Api::Cuda,
                ordinal: 0,
            },
        );
        let c = |path, op, outcome| result(&p, path, SyncMode::Finish, op, 64, outcome);
        let old = run(vec![
            c(PathKind::Copy, Op::Handoff, Outcome::pass()),
            c(PathKind::ClSvmCoarse, Op::Handoff, fault()),
            c(PathKind::ClSvmFine, Op::Handoff, Outcome::pass()),
            c(PathKind::DeviceUseHostPtr, Op::Handoff, fault()),
            c(PathKind::ManagedUseHostPtr, Op::Handoff, Outcome::pass()),
        ]);
        let mut new = run(vec![
            // A pass that is now refused: a capability that disappeared.
            c(PathKind::Copy, Op::Handoff, Outcome::unsupported("gone")),
            // A fault that is now wrong data: silent corruption, worse.
            c(
                PathKind::ClSvmCoarse,
                Op::Handoff,
                super::super::tests::mismatch("x"),
            ),
            c(PathKind::ClSvmFine, Op::Handoff, Outcome::pass()),
            // A fault that now passes.
            c(PathKind::DeviceUseHostPtr, Op::Handoff, Outcome::pass()),
            c(PathKind::PinnedUseHostPtr, Op::Handoff, Outcome::pass()),
        ]);
        new.fingerprint.os_kernel = "Linux 9.9".into();
        let d = diff(&old, &new);
        let by_id = |path: PathKind| {
            d.moved
                .iter()
                .find(|m| {
                    m.new
                        .or(m.old)
                        .and_then(|r| r.work.case())
                        .is_some_and(|c| c.path == path)
                })
                .map(|m| m.movement)
        };
        assert_eq!(by_id(PathKind::Copy), Some(Movement::Regression));
        assert_eq!(by_id(PathKind::ClSvmCoarse), Some(Movement::Regression));
        assert_eq!(by_id(PathKind::ClSvmFine), None);
        assert_eq!(by_id(PathKind::DeviceUseHostPtr), Some(Movement::Fix));
        assert_eq!(by_id(PathKind::PinnedUseHostPtr), Some(Movement::New));
        assert_eq!(by_id(PathKind::ManagedUseHostPtr), Some(Movement::Removed));
        assert_eq!(d.regressions(), 2);
        assert_eq!(d.fingerprint_new, ["os kernel: Linux 9.9"]);
        let text = render_diff(&d);
        assert!(
            text.contains(
                "! regression  nvidia0+cuda0/copy/finish/handoff/n=64: pass -> unsupported"
            ),
            "{text}"
        );
        assert!(text.contains("  + os kernel: Linux 9.9"), "{text}");
        let md = render_diff_markdown(&d);
        assert!(md.contains("| ! | regression |"), "{md}");
        assert!(md.contains("2 regressions, 1 fixes"), "{md}");
    }

    #[test]
    fn a_variants_case_is_diffed_apart_from_its_plain_twin() {
        let p = pair(
            "rocm0",
            Peer {
                api: Api::Hip,
                ordinal: 0,
            },
        );
        let c = |outcome| {
            result(
                &p,
                PathKind::Copy,
                SyncMode::Finish,
                Op::Handoff,
                4097,
                outcome,
            )
        };
        let sdma = [("HSA_ENABLE_SDMA", "0")];
        let old = run(vec![c(Outcome::pass()), under(c(Outcome::pass()), &sdma)]);
        let new = run(vec![c(Outcome::pass()), under(c(fault()), &sdma)]);
        let d = diff(&old, &new);
        assert_eq!(d.regressions(), 1);
        assert_eq!(
            d.moved[0].id,
            "rocm0+hip0/copy/finish/handoff/n=4097/env:HSA_ENABLE_SDMA=0"
        );
        let text = render_diff(&d);
        assert!(
            text.contains(
                "! regression  rocm0+hip0/copy/finish/handoff/n=4097/env:HSA_ENABLE_SDMA=0: pass -> fault"
            ),
            "{text}"
        );
        // A variant the new run no longer has is removed, not matched to the plain case.
        let plain_only = run(vec![c(Outcome::pass())]);
        let d = diff(&old, &plain_only);
        assert_eq!(d.count(Movement::Removed), 1);
        assert_eq!(d.regressions(), 0);
    }

    fn measured(mut r: CaseResult, host: (u64, u64), device: Option<(u64, u64)>) -> CaseResult {
        r.footprint = Some(crate::footprint::Footprint {
            host_before: host.0,
            host_peak: Some(host.0 + host.1),
            device_before: device.map(|d| d.0),
            device_after_setup: device.map(|d| d.0 + d.1),
        });
        r
    }

    #[test]
    fn memory_grown_past_the_rule_is_a_footprint_regression_of_its_own() {
        const MIB: u64 = 1 << 20;
        let p = pair(
            "nvidia0",
            Peer {
                api: Api::Cuda,
                ordinal: 0,
            },
        );
        let c = |path| result(&p, path, SyncMode::Finish, Op::Fft, 4096, Outcome::pass());
        let old = run(vec![
            measured(
                c(PathKind::Copy),
                (500 * MIB, 2 * MIB),
                Some((400 * MIB, MIB)),
            ),
            measured(
                c(PathKind::ClSvmCoarse),
                (900 * MIB, 2 * MIB),
                Some((400 * MIB, 32 * MIB)),
            ),
            measured(c(PathKind::ClSvmFine), (500 * MIB, 4 * MIB), None),
            c(PathKind::DeviceUseHostPtr),
        ]);
        let mut old = old;
        old.footprint_isolated = true;
        let new = run(vec![
            // Host: 2 MiB -> 66 MiB, past both; the worker's history (host_before) moved too,
            // which is not the case's.
            measured(
                c(PathKind::Copy),
                (700 * MIB, 66 * MIB),
                Some((400 * MIB, MIB)),
            ),
            // Device: a staging copy per buffer, 32 -> 64 MiB.
            measured(
                c(PathKind::ClSvmCoarse),
                (900 * MIB, 2 * MIB),
                Some((400 * MIB, 64 * MIB)),
            ),
            // Doubled, but by 4 MiB: noise.
            measured(c(PathKind::ClSvmFine), (500 * MIB, 8 * MIB), None),
            // Not measured in the old run: nothing to compare.
            measured(c(PathKind::DeviceUseHostPtr), (500 * MIB, 900 * MIB), None),
        ]);
        // Batched runs (a case's footprint not its own) are not compared, and say so.
        let d = diff(&old, &new);
        assert!(
            d.footprint.is_empty() && !d.fails(),
            "batched: not compared"
        );
        assert!(
            summary_line(&d).ends_with(
                ", footprints not compared (a run compares them with --cases-per-worker 1 -j 1)"
            ),
            "{}",
            summary_line(&d)
        );
        let mut new = new;
        new.footprint_isolated = true;
        let d = diff(&old, &new);
        assert_eq!(d.regressions(), 0, "no outcome moved");
        let flagged: Vec<(&str, Memory)> = d.footprint.iter().map(|g| (g.id, g.memory)).collect();
        assert_eq!(
            flagged,
            [
                ("nvidia0+cuda0/copy/finish/fft/n=4096", Memory::Host),
                (
                    "nvidia0+cuda0/cl-svm-coarse/finish/fft/n=4096",
                    Memory::Device
                ),
            ]
        );
        assert!(d.fails(), "a footprint regression fails the diff");
        let text = render_diff(&d);
        assert!(
            text.contains(
                "! footprint   nvidia0+cuda0/copy/finish/fft/n=4096: host 2.0 MiB -> 66.0 MiB"
            ),
            "{text}"
        );
        assert!(
            text.contains("flagged when new > 1.5 x old and new - old > 16 MiB"),
            "{text}"
        );
        assert!(text.contains(", 2 footprint regressions"), "{text}");
        let md = render_diff_markdown(&d);
        assert!(
            md.contains("| ! | `nvidia0+cuda0/cl-svm-coarse/finish/fft/n=4096` | device | 32.0 MiB | 64.0 MiB |"),
            "{md}"
        );
        // The same runs the other way round: memory that shrank is no regression.
        let back = diff(&new, &old);
        assert!(back.footprint.is_empty() && !back.fails());
        assert!(summary_line(&back).ends_with(", 0 footprint regressions"));
    }

    #[test]
    fn runs_without_footprints_keep_the_usual_summary() {
        let p = pair("pocl0", Peer::HOST);
        let c = || {
            result(
                &p,
                PathKind::Copy,
                SyncMode::Finish,
                Op::Fft,
                64,
                Outcome::pass(),
            )
        };
        let (old, new) = (run(vec![c()]), run(vec![c()]));
        let d = diff(&old, &new);
        assert!(!d.footprints_compared && !d.fails());
        assert!(
            !summary_line(&d).contains("footprint"),
            "{}",
            summary_line(&d)
        );
    }

    #[test]
    fn a_negative_controls_race_is_not_a_regression() {
        let p = pair("pocl0", Peer::HOST);
        let c = |outcome| result(&p, PathKind::Copy, SyncMode::None, Op::Fft, 64, outcome);
        let old = run(vec![c(Outcome::pass())]);
        let new = run(vec![c(super::super::tests::mismatch("stale"))]);
        let d = diff(&old, &new);
        assert_eq!(d.moved[0].movement, Movement::Race);
        assert_eq!(d.regressions(), 0);
    }

    #[test]
    fn the_terminal_diff_shows_control_characters_as_text() {
        let p = pair("pocl0", Peer::HOST);
        let c = |outcome| result(&p, PathKind::Copy, SyncMode::Finish, Op::Fft, 64, outcome);
        let old = run(vec![c(Outcome::pass())]);
        let mut new = run(vec![c(Outcome::unsupported("gone\x1b[2J\nnext\u{202e}"))]);
        new.fingerprint.os_kernel = "Linux\x1b]8;;https://x.example/\x07".into();
        let text = render_diff(&diff(&old, &new));
        let raw: Vec<char> = text
            .chars()
            .filter(|&c| crate::escape::is_control(c) && c != '\n')
            .collect();
        assert_eq!(raw, Vec::<char>::new(), "{text}");
        assert!(text.contains(r"now: gone\x1b[2J / next\u{202e}"), "{text}");
        assert!(
            text.contains(r"  + os kernel: Linux\x1b]8;;https://x.example/\x07"),
            "{text}"
        );
    }

    #[test]
    fn a_case_the_new_run_did_not_get_to_is_not_run_not_removed() {
        let p = pair("pocl0", Peer::HOST);
        let c = |n| {
            result(
                &p,
                PathKind::Copy,
                SyncMode::Finish,
                Op::Handoff,
                n,
                Outcome::pass(),
            )
        };
        let old = run(vec![c(64), c(128), c(256)]);
        let mut new = run(vec![c(64)]);
        new.not_run = vec![c(128).id];
        new.status = super::super::RunStatus::Interrupted;
        let d = diff(&old, &new);
        let by_size = |n: usize| d.moved.iter().find(|m| m.id == c(n).id).map(|m| m.movement);
        assert_eq!(by_size(128), Some(Movement::NotRun));
        assert_eq!(by_size(256), Some(Movement::Removed));
        assert_eq!(
            summary_line(&d),
            "0 regressions, 0 fixes, 0 changed, 0 new, 1 removed, 1 not run in the new run, 0 negative-control races"
        );
        assert!(
            render_diff(&d)
                .contains("  not run     pocl0+host/copy/finish/handoff/n=128: pass -> -")
        );
    }
}
