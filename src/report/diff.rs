//! What changed between two runs: `clhip diff OLD.json NEW.json`, the release comparison (ROCm
//! 6.3.2 against 7.0). Cases are matched by id. A case that moves up the severity order (pass <
//! skip < unsupported < fault, crash, timeout < fail) is a regression, pass -> unsupported (a
//! capability that disappeared) included; one that moves down is a fix; a move within one level
//! (a fault that now crashes) is a change. A negative control's pass <-> stale read is a race
//! by design and counts as neither. A harness error on the new side is a regression: the new
//! run cannot vouch for the case. A case the new run planned but did not get to (interrupted)
//! is `not run`, not removed; one the new run did not select (its filters, devices or
//! partition leave it out) is `not in this run`. What the runs were asked to do comes first:
//! their seeds, case sets and flags, then the fingerprints' differences, the counts, and the
//! regressions, before everything else that moved. Whether either file is a whole run is
//! [`super::judge`]'s to say, as for `report`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

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
    /// In the old run, and outside what the new run selected (its filters, devices or
    /// partition): a filtered run says nothing about it.
    NotInThisRun,
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
            Movement::NotInThisRun => "not in this run",
            Movement::Race => "race (negative control)",
        }
    }

    /// The `--only` spelling of a movement: `regressions`, `fixes`, `changed`, `new`,
    /// `removed`, `not-run`, `not-in-this-run`, `races`.
    pub fn parse_plural(s: &str) -> Result<Movement, String> {
        Ok(match s {
            "regressions" => Movement::Regression,
            "fixes" => Movement::Fix,
            "changed" => Movement::Change,
            "new" => Movement::New,
            "removed" => Movement::Removed,
            "not-run" => Movement::NotRun,
            "not-in-this-run" => Movement::NotInThisRun,
            "races" => Movement::Race,
            other => {
                return Err(format!(
                    "`{other}`: expected regressions, fixes, changed, new, removed, not-run, \
                     not-in-this-run or races"
                ));
            }
        })
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

/// Something the two runs were asked to do differently: `what` (seed, filters, a flag), as
/// each side had it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupDifference {
    pub what: String,
    pub old: String,
    pub new: String,
}

/// The differences between two runs.
#[derive(Debug)]
pub struct RunDiff<'a> {
    /// How the runs were set up differently (seeds, case sets, flags, builds): what the
    /// differences below may come from.
    pub setup: Vec<SetupDifference>,
    /// The one movement to show (`diff --only`); `None` shows all. Counts are of all.
    pub shown: Option<Movement>,
    /// Fingerprint lines only the old run has, and only the new one.
    pub fingerprint_old: Vec<String>,
    pub fingerprint_new: Vec<String>,
    pub moved: Vec<Moved<'a>>,
}

impl<'a> RunDiff<'a> {
    pub fn regressions(&self) -> usize {
        self.count(Movement::Regression)
    }

    pub fn count(&self, m: Movement) -> usize {
        self.moved.iter().filter(|c| c.movement == m).count()
    }

    /// The moved cases to show: all, or those of `shown`.
    pub fn shown_moves(&self) -> impl Iterator<Item = &Moved<'a>> {
        self.moved
            .iter()
            .filter(|m| self.shown.is_none_or(|s| s == m.movement))
    }
}

/// Whether `new`'s selection takes in the case `id`: its filters match it, and it falls in a
/// shard `new` holds. `None` where `new` does not record its selection, or selected by devices
/// the old run did not, which this cannot tell from the id.
fn selects(old: &RunReport, new: &RunReport, id: &str) -> Option<bool> {
    let sel = new.selection.as_ref()?;
    let old_devices = old.selection.as_ref().map(|s| &s.devices);
    if !sel.devices.is_empty() && old_devices != Some(&sel.devices) {
        return None;
    }
    let filtered = sel.filters.is_empty()
        || sel
            .filters
            .iter()
            .any(|f| crate::filter::matches_filter(f, id));
    Some(filtered && sel.held().iter().any(|p| p.contains(id)))
}

/// How the runs were set up differently: seed, build, plant, case set, flags.
fn setup(old: &RunReport, new: &RunReport) -> Vec<SetupDifference> {
    let mut out = Vec::new();
    let mut differ = |what: &str, a: String, b: String| {
        if a != b {
            out.push(SetupDifference {
                what: what.to_string(),
                old: a,
                new: b,
            });
        }
    };
    differ("seed", old.seed.to_string(), new.seed.to_string());
    differ("clhip", old.clhip_build(), new.clhip_build());
    let plant = |r: &RunReport| r.plant().map_or("none".into(), |p| p.describe());
    differ("plant", plant(old), plant(new));
    let list = |v: &[String]| {
        if v.is_empty() {
            "all".to_string()
        } else {
            v.join(" ")
        }
    };
    match (&old.selection, &new.selection) {
        (Some(a), Some(b)) => {
            differ("case filters", list(&a.filters), list(&b.filters));
            differ("devices", list(&a.devices), list(&b.devices));
            differ("case matrix", a.matrix.clone(), b.matrix.clone());
            let shards = |s: &super::json::Selection| {
                let held: Vec<String> = s.held().iter().map(|p| p.to_string()).collect();
                held.join(" ")
            };
            differ("shards", shards(a), shards(b));
            differ(
                "cases planned",
                a.planned.to_string(),
                b.planned.to_string(),
            );
        }
        (a, b) => {
            let recorded = |s: &Option<super::json::Selection>| {
                if s.is_some() {
                    "recorded"
                } else {
                    "not recorded"
                }
                .to_string()
            };
            differ("case selection", recorded(a), recorded(b));
        }
    }
    let (a, b) = (run_flags(old), run_flags(new));
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for name in names {
        let value = |f: &BTreeMap<String, String>| f.get(name).cloned().unwrap_or("-".into());
        differ(name, value(&a), value(&b));
    }
    out
}

/// The flags of a run's recorded command, with their values (`""` for a switch), less those
/// that only name where its outputs went, those compared on their own (the seed, the plant),
/// and its case filters.
fn run_flags(r: &RunReport) -> BTreeMap<String, String> {
    const LEFT_OUT: &[&str] = &[
        "--json",
        "--junit",
        "--markdown",
        "--html",
        "-o",
        "--output",
        "--seed",
        "--plant",
        "--plant-only",
    ];
    let filters: &[String] = r.selection.as_ref().map_or(&[], |s| &s.filters);
    let args: Vec<&String> = r.command.iter().skip(1).collect();
    let mut flags = BTreeMap::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i];
        i += 1;
        if !arg.starts_with('-') {
            continue;
        }
        let (name, value) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => match args.get(i) {
                Some(v) if !v.starts_with('-') && !filters.contains(v) => {
                    i += 1;
                    (arg.clone(), (*v).clone())
                }
                _ => (arg.clone(), String::new()),
            },
        };
        if !LEFT_OUT.contains(&name.as_str()) {
            flags.insert(name, value);
        }
    }
    flags
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
    for n in &new.results {
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
                } else if selects(old, new, &o.id) == Some(false) {
                    Movement::NotInThisRun
                } else {
                    Movement::Removed
                },
                old: Some(o),
                new: None,
            });
        }
    }
    RunDiff {
        setup: setup(old, new),
        shown: None,
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
    }
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
    let not_selected = match d.count(Movement::NotInThisRun) {
        0 => String::new(),
        n => format!(", {n} not in the new run's selection"),
    };
    format!(
        "{} regressions, {} fixes, {} changed, {} new, {} removed{not_run}{not_selected}, {} negative-control races",
        d.count(Movement::Regression),
        d.count(Movement::Fix),
        d.count(Movement::Change),
        d.count(Movement::New),
        d.count(Movement::Removed),
        d.count(Movement::Race)
    )
}

/// For a terminal: how the runs were set up differently, the fingerprint diff, the counts, the
/// regressions, then the other moved cases grouped by path, worst first. Every string from the
/// two files is shown on its own line with its control characters as text.
pub fn render_diff(d: &RunDiff) -> String {
    let mut out = String::from("setup:\n");
    if d.setup.is_empty() {
        out.push_str("  the same (seed, build, plant, cases selected and flags)\n");
    }
    for s in &d.setup {
        let _ = writeln!(
            out,
            "  {}: {} -> {}",
            terminal_line(&s.what),
            terminal_line(&s.old),
            terminal_line(&s.new)
        );
    }
    out.push_str("fingerprint:\n");
    if d.fingerprint_old.is_empty() && d.fingerprint_new.is_empty() {
        out.push_str("  the same\n");
    }
    for l in &d.fingerprint_old {
        let _ = writeln!(out, "  - {}", terminal_line(l));
    }
    for l in &d.fingerprint_new {
        let _ = writeln!(out, "  + {}", terminal_line(l));
    }
    let _ = writeln!(out, "\n{}", summary_line(d));
    if let Some(only) = d.shown {
        let _ = writeln!(out, "showing only: {}", only.name());
    }
    let write_move = |out: &mut String, m: &Moved| {
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
    };
    let regressions: Vec<&Moved> = d
        .shown_moves()
        .filter(|m| m.movement == Movement::Regression)
        .collect();
    if !regressions.is_empty() {
        out.push_str("\nregressions\n");
        for m in regressions {
            write_move(&mut out, m);
        }
    }
    for (path, moved) in grouped(d) {
        let moved: Vec<&&Moved> = moved
            .iter()
            .filter(|m| m.movement != Movement::Regression)
            .collect();
        if moved.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}", terminal_line(&path));
        for m in moved {
            write_move(&mut out, m);
        }
    }
    // Each piece from the files is escaped where it is put in; this catches any that is not.
    terminal_text(&out)
}

/// For reports/: the same as Markdown tables.
pub fn render_diff_markdown(d: &RunDiff) -> String {
    let mut out = String::from("# clhip diff\n\n## Setup\n\n");
    if d.setup.is_empty() {
        out.push_str("The same on both sides: seed, build, plant, cases selected and flags.\n");
    } else {
        let rows: Vec<Vec<Md>> = d
            .setup
            .iter()
            .map(|s| vec![Md::text(&s.what), Md::text(&s.old), Md::text(&s.new)])
            .collect();
        out.push_str(&md_table(
            &[Md::text(""), Md::text("old"), Md::text("new")],
            &rows,
        ));
    }
    out.push_str("\n## Fingerprint\n\n");
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
    if let Some(only) = d.shown {
        let _ = writeln!(out, "\nShowing only: {}.", only.name());
    }
    // Regressions first, under a heading of their own; then the rest by path.
    let regressions: Vec<&Moved> = d
        .shown_moves()
        .filter(|m| m.movement == Movement::Regression)
        .collect();
    let mut sections: Vec<(Md, Vec<&Moved>)> = Vec::new();
    if !regressions.is_empty() {
        sections.push((Md::text("Regressions"), regressions));
    }
    for (path, moved) in grouped(d) {
        let rest: Vec<&Moved> = moved
            .into_iter()
            .filter(|m| m.movement != Movement::Regression)
            .collect();
        if !rest.is_empty() {
            sections.push((code(&path), rest));
        }
    }
    for (heading, moved) in sections {
        let _ = writeln!(out, "\n## {heading}\n");
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
    for m in d.shown_moves() {
        by_path.entry(group(m)).or_default().push(m);
    }
    for moved in by_path.values_mut() {
        moved.sort_by_key(|m| m.movement);
    }
    by_path
}

#[cfg(test)]
mod tests {
    use super::super::tests::{pair, result, sample_report};
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

    #[test]
    fn seeds_case_sets_and_flags_are_compared_before_any_case() {
        let p = pair("pocl0", Peer::HOST);
        let c = |outcome| result(&p, PathKind::Copy, SyncMode::Finish, Op::Fft, 64, outcome);
        let mut old = run(vec![c(Outcome::pass())]);
        let mut new = run(vec![c(Outcome::unsupported("gone"))]);
        old.seed = 24301;
        old.command = [
            "clhip",
            "run",
            "-j",
            "4",
            "--timeout",
            "60",
            "--json",
            "a.json",
        ]
        .map(String::from)
        .to_vec();
        new.command = ["clhip", "run", "-j", "2", "--allow-empty", "--json=b.json"]
            .map(String::from)
            .to_vec();
        let d = diff(&old, &new);
        let setup: Vec<String> = d
            .setup
            .iter()
            .map(|s| format!("{}: {} -> {}", s.what, s.old, s.new))
            .collect();
        // Where the outputs went is no difference in what was run.
        assert_eq!(
            setup,
            [
                "seed: 24301 -> 7",
                "--allow-empty: - -> ",
                "--timeout: 60 -> -",
                "-j: 4 -> 2"
            ]
        );
        let text = render_diff(&d);
        assert!(text.starts_with("setup:\n  seed: 24301 -> 7\n"), "{text}");
        let md = render_diff_markdown(&d);
        assert!(md.contains("## Setup\n\n|  | old | new |"), "{md}");
        assert!(md.contains("| seed | 24301 | 7 |"), "{md}");
        // The same setup says so.
        let same = render_diff(&diff(&old, &old));
        assert!(
            same.starts_with("setup:\n  the same (seed, build, plant, cases selected and flags)\n"),
            "{same}"
        );
    }

    #[test]
    fn a_filtered_run_s_absent_cases_are_not_in_this_run_and_a_dropped_one_is_removed() {
        let p = pair("pocl0", Peer::HOST);
        let c = |path| result(&p, path, SyncMode::Finish, Op::Handoff, 64, Outcome::pass());
        let selection = |filters: &[&str]| super::super::json::Selection {
            filters: filters.iter().map(|f| f.to_string()).collect(),
            devices: Vec::new(),
            matrix: "m".into(),
            planned: 3,
            plan: "p".into(),
            shards: Vec::new(),
        };
        let mut old = run(vec![
            c(PathKind::Copy),
            c(PathKind::ClSvmCoarse),
            c(PathKind::ClSvmFine),
        ]);
        old.selection = Some(selection(&[]));
        // Filtered to the SVM paths, and the fine-grain case gone from them.
        let mut new = run(vec![c(PathKind::ClSvmCoarse)]);
        new.selection = Some(selection(&["*/cl-svm-*"]));
        let d = diff(&old, &new);
        let of = |path| {
            d.moved
                .iter()
                .find(|m| m.id == c(path).id)
                .map(|m| m.movement)
        };
        assert_eq!(of(PathKind::Copy), Some(Movement::NotInThisRun));
        assert_eq!(of(PathKind::ClSvmFine), Some(Movement::Removed));
        assert!(
            summary_line(&d).contains("1 removed, 1 not in the new run's selection"),
            "{}",
            summary_line(&d)
        );
        assert!(
            d.setup
                .iter()
                .any(|s| s.what == "case filters" && s.old == "all" && s.new == "*/cl-svm-*"),
            "{:?}",
            d.setup
        );
        // A shard of the new run leaves out the others' cases.
        let mut shard = run(Vec::new());
        let mut sel = selection(&[]);
        sel.shards = vec!["hash:1/2".parse().unwrap()];
        shard.selection = Some(sel);
        let d = diff(&old, &shard);
        for m in &d.moved {
            let in_shard = "hash:1/2"
                .parse::<crate::partition::Partition>()
                .unwrap()
                .contains(m.id);
            let want = if in_shard {
                Movement::Removed
            } else {
                Movement::NotInThisRun
            };
            assert_eq!(m.movement, want, "{}", m.id);
        }
    }

    #[test]
    fn regressions_come_first_and_only_shows_the_movement_asked_for() {
        let p = pair("pocl0", Peer::HOST);
        let c = |path, outcome| result(&p, path, SyncMode::Finish, Op::Fft, 64, outcome);
        // The regression's path sorts last: grouped by path alone it would come last.
        let old = run(vec![
            c(PathKind::Copy, fault()),
            c(PathKind::UseHostPtr, Outcome::pass()),
        ]);
        let new = run(vec![
            c(PathKind::Copy, Outcome::pass()),
            c(PathKind::UseHostPtr, Outcome::unsupported("gone")),
        ]);
        let mut d = diff(&old, &new);
        let text = render_diff(&d);
        let regression = text.find("! regression").unwrap();
        let fix = text.find("  fix ").unwrap();
        let summary = text.find("1 regressions, 1 fixes").unwrap();
        assert!(summary < regression && regression < fix, "{text}");
        assert!(text.contains("\nregressions\n! regression"), "{text}");
        let md = render_diff_markdown(&d);
        assert!(
            md.find("## Regressions").unwrap() < md.find("| fix |").unwrap(),
            "{md}"
        );
        d.shown = Some(Movement::parse_plural("regressions").unwrap());
        let only = render_diff(&d);
        assert!(only.contains("! regression"), "{only}");
        assert!(!only.contains("  fix "), "{only}");
        // The counts are still of every case.
        assert!(only.contains("1 regressions, 1 fixes"), "{only}");
        assert!(only.contains("showing only: regression"), "{only}");
        assert!(Movement::parse_plural("regression").is_err());
    }
}
