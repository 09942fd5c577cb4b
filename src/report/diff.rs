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

/// A case whose memory grew past the footprint rule between the runs.
#[derive(Debug, Clone)]
pub struct Growth<'a> {
    pub id: &'a str,
    pub memory: Memory,
    /// The crossing's growth in each run, in bytes.
    pub old: u64,
    pub new: u64,
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
    pub shown: Option<Only>,
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

impl<'a> RunDiff<'a> {
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

    /// The moved cases to show: all, or those of `shown`.
    pub fn shown_moves(&self) -> impl Iterator<Item = &Moved<'a>> {
        self.moved
            .iter()
            .filter(|m| self.shown.is_none_or(|s| s == Only::Moved(m.movement)))
    }

    /// The footprint regressions to show: all, unless `--only` asked for a movement.
    pub fn shown_footprint(&self) -> &[Growth<'a>] {
        match self.shown {
            None | Some(Only::Footprint) => &self.footprint,
            Some(Only::Moved(_)) => &[],
        }
    }
}

/// What `diff --only` shows: the cases of one movement, or the footprint regressions (a
/// regression of their own kind, beside the outcome's movements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    Moved(Movement),
    Footprint,
}

impl Only {
    /// A movement's `--only` spelling ([`Movement::parse_plural`]), or `footprint`.
    pub fn parse(s: &str) -> Result<Only, String> {
        if s == "footprint" {
            return Ok(Only::Footprint);
        }
        Movement::parse_plural(s).map(Only::Moved).map_err(|_| {
            format!(
                "`{s}`: expected regressions, fixes, changed, new, removed, not-run, \
                 not-in-this-run, races or footprint"
            )
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Only::Moved(m) => m.name(),
            Only::Footprint => "footprint",
        }
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
    let not_selected = match d.count(Movement::NotInThisRun) {
        0 => String::new(),
        n => format!(", {n} not in the new run's selection"),
    };
    format!(
        "{} regressions, {} fixes, {} changed, {} new, {} removed{not_run}{not_selected}, {} negative-control races{footprint}",
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
    if !d.shown_footprint().is_empty() {
        let _ = writeln!(out, "\n{}", footprint_heading());
        for g in d.shown_footprint() {
            let _ = writeln!(
                out,
                "! footprint   {}: {}",
                terminal_line(g.id),
                growth_text(g)
            );
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
    // Regressions first, under a heading of their own, then footprint regressions; then the
    // rest by path.
    let regressions: Vec<&Moved> = d
        .shown_moves()
        .filter(|m| m.movement == Movement::Regression)
        .collect();
    if !regressions.is_empty() {
        md_moves(&mut out, &Md::text("Regressions"), &regressions);
    }
    if !d.shown_footprint().is_empty() {
        let _ = writeln!(out, "\n## Footprint\n\n{}.\n", footprint_heading());
        let rows: Vec<Vec<Md>> = d
            .shown_footprint()
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
    for (path, moved) in grouped(d) {
        let rest: Vec<&Moved> = moved
            .into_iter()
            .filter(|m| m.movement != Movement::Regression)
            .collect();
        if !rest.is_empty() {
            md_moves(&mut out, &code(&path), &rest);
        }
    }
    out
}

/// A section of moved cases under `heading`, as a table.
fn md_moves(out: &mut String, heading: &Md, moved: &[&Moved]) {
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
mod tests;
