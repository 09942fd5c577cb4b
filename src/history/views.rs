//! What history shows, computed from the store: each case's outcome night by night, flake
//! rates over the last runs, the first night of each regression with the fingerprint lines that
//! changed, and what grew (time, or a stored measure such as peak memory). The definitions are
//! in docs/nightly.md ("History"); they are restated where they are computed.
//!
//! A *night* is one stored run, numbered from 1 in the order of the runs' start times. A
//! case's nights are the runs that have a result for it: a run that did not select it, or
//! stopped before it, is left out of its history, neither good nor bad.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use crate::model::{OutcomeKind, Verdict};

use super::store::{Run, Store};

/// What the views look at.
#[derive(Debug, Clone)]
pub struct Options {
    /// Flake rates and the night-by-night strips cover the last this many runs.
    pub last: usize,
    /// A case worse than before on at least this many nights in a row, to the latest, is a
    /// regression; fewer, and it is listed as too soon to tell.
    pub stay: usize,
    /// Nights on each side of a growth's median comparison.
    pub window: usize,
    /// How many times the median before a growth the median after must be.
    pub grow: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            last: 30,
            stay: 3,
            window: 7,
            grow: 1.5,
        }
    }
}

/// A time that grows by less than this is no growth, whatever the ratio: most cases take
/// milliseconds, where a scheduler's hiccup doubles them.
pub const TIME_FLOOR_S: f64 = 0.05;

/// The name of the time measure in [`Growth`].
pub const TIME: &str = "time";

/// One night of one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    /// Index into [`History::runs`] (night `night + 1`).
    pub night: usize,
    pub outcome: OutcomeKind,
    pub verdict: Verdict,
    pub duration_s: f64,
}

impl Entry {
    /// The outcome history compares: the outcome kind, except that a negative control's caught
    /// stale read counts as a pass (it is what the case exists for, and its race with a
    /// coherent pass is no news).
    pub fn state(&self) -> OutcomeKind {
        if self.verdict == Verdict::CaughtStaleRead {
            OutcomeKind::Pass
        } else {
            self.outcome
        }
    }

    /// Whether the night read as its expectation said (or better, as a known non-pass that
    /// passed, which is also listed).
    pub fn as_expected(&self) -> bool {
        matches!(
            self.verdict,
            Verdict::Pass | Verdict::ExpectedNonPass | Verdict::CaughtStaleRead
        )
    }
}

/// How bad a state is: the severity order of `diff` (pass, skip, unsupported, then fault,
/// crash and timeout, then wrong data), with the harness's own error above them all, since it
/// fails the run too.
pub fn rank(k: OutcomeKind) -> u8 {
    k.severity().unwrap_or(5)
}

/// One character per outcome, for the strips.
pub fn mark(e: &Entry) -> char {
    if e.verdict == Verdict::CaughtStaleRead {
        return 'c';
    }
    match e.outcome {
        OutcomeKind::Pass => '.',
        OutcomeKind::Fail => 'F',
        OutcomeKind::Fault => 'X',
        OutcomeKind::Crash => 'C',
        OutcomeKind::Timeout => 'T',
        OutcomeKind::Unsupported => 'u',
        OutcomeKind::Skip => 's',
        OutcomeKind::Error => 'E',
        OutcomeKind::Warn => 'w',
        OutcomeKind::Incomplete => 'i',
    }
}

/// The strip legend, in mark order.
pub const LEGEND: &[(char, &str)] = &[
    ('.', "pass"),
    ('c', "caught stale read (negative control)"),
    ('F', "fail"),
    ('X', "fault"),
    ('C', "crash"),
    ('T', "timeout"),
    ('u', "unsupported"),
    ('s', "skip"),
    ('E', "harness error"),
    ('w', "pass, with a kernel warning"),
    ('i', "incomplete: the run died during the case"),
    ('-', "no result that night"),
];

/// A case that became worse and stayed worse: on each of its nights from `first_bad` to the
/// latest, its state ranks worse than on its night before (`before`), and there are at least
/// [`Options::stay`] of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    pub case: String,
    /// Night indices (into [`History::runs`]).
    pub first_bad: usize,
    pub before: usize,
    pub was: OutcomeKind,
    pub became: OutcomeKind,
    pub verdict: Verdict,
    /// The case's nights from `first_bad` on.
    pub nights_bad: usize,
    pub reason: String,
    /// Fingerprint lines of the night before that the first bad night lacks, and the lines it
    /// has that the night before lacked.
    pub fingerprint_removed: Vec<String>,
    pub fingerprint_added: Vec<String>,
}

/// A case worse on its last nights than before them, on fewer than [`Options::stay`] nights:
/// a flake's bad night, or a regression starting; too soon to tell.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub case: String,
    pub since: usize,
    pub nights: usize,
    pub was: OutcomeKind,
    pub became: OutcomeKind,
}

/// A case whose state changed and changed back within the last runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Flake {
    pub case: String,
    /// Its usual state in the window: the best one (the most frequent of the best rank).
    pub usual: OutcomeKind,
    /// Nights in the window whose state was not `usual`.
    pub other: usize,
    /// Nights in the window with a result (those of a regression left out).
    pub nights: usize,
    /// Nights per state, most frequent first.
    pub counts: Vec<(OutcomeKind, usize)>,
}

impl Flake {
    pub fn rate(&self) -> f64 {
        self.other as f64 / self.nights as f64
    }
}

/// A measure that grew and stayed grown.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    pub case: String,
    /// [`TIME`], or a stored measure's name.
    pub measure: String,
    /// The first night over the threshold on its own, in the window after the step.
    pub night: usize,
    /// Medians of the window before and the window after the step, and of the last window.
    pub before: f64,
    pub after: f64,
    pub latest: f64,
}

/// A case's outcomes night by night over the window: `None` where it has no result.
#[derive(Debug, Clone, PartialEq)]
pub struct Strip {
    pub case: String,
    pub nights: Vec<Option<Entry>>,
}

impl Strip {
    pub fn text(&self) -> String {
        self.nights
            .iter()
            .map(|e| e.as_ref().map_or('-', mark))
            .collect()
    }
}

/// Everything the views show.
#[derive(Debug)]
pub struct History {
    pub store: PathBuf,
    pub options: Options,
    pub runs: Vec<Run>,
    pub cases: usize,
    /// The first night index of the window (the last [`Options::last`] runs).
    pub window_start: usize,
    pub regressions: Vec<Regression>,
    pub pending: Vec<Pending>,
    pub flakes: Vec<Flake>,
    pub growth: Vec<Growth>,
    pub strips: Vec<Strip>,
}

/// The first index `i >= 1` from which every rank is above the rank at `i - 1`: where the
/// final stretch of worse nights begins. None if the last night is no worse than the one
/// before it (or there is one night only).
pub fn worse_since(ranks: &[u8]) -> Option<usize> {
    let mut suffix_min = vec![u8::MAX; ranks.len() + 1];
    for i in (0..ranks.len()).rev() {
        suffix_min[i] = suffix_min[i + 1].min(ranks[i]);
    }
    (1..ranks.len()).find(|&i| suffix_min[i] > ranks[i - 1])
}

/// A flake among `entries` (one case's nights in the window, in order): the state changed at
/// least twice, so it went and came back. A single change (a fix, or a regression) is none.
pub fn flake(case: &str, entries: &[Entry]) -> Option<Flake> {
    let changes = entries
        .windows(2)
        .filter(|w| w[0].state() != w[1].state())
        .count();
    if changes < 2 {
        return None;
    }
    let mut counts: BTreeMap<OutcomeKind, usize> = BTreeMap::new();
    for e in entries {
        *counts.entry(e.state()).or_default() += 1;
    }
    let best = counts.keys().map(|&k| rank(k)).min()?;
    let usual = counts
        .iter()
        .filter(|(k, _)| rank(**k) == best)
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(k, _)| *k)?;
    let mut counts: Vec<(OutcomeKind, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Some(Flake {
        case: case.to_string(),
        usual,
        other: entries.iter().filter(|e| e.state() != usual).count(),
        nights: entries.len(),
        counts,
    })
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Where `series` (night, value; in night order) grew: the step whose median of the `window`
/// values after it is the largest multiple of the median of the `window` before it, at least
/// `grow` times and `floor` more, provided the median of the last `window` values is so too
/// (it stayed grown). The night reported begins the nights whose own values are over the
/// threshold around that step: the first over it from the step on, and those over it just
/// before (within a window).
pub fn growth(series: &[(usize, f64)], window: usize, grow: f64, floor: f64) -> Option<Growth> {
    let w = window.max(1);
    if series.len() < 2 * w {
        return None;
    }
    let values: Vec<f64> = series.iter().map(|s| s.1).collect();
    let grown = |before: f64, v: f64| v >= grow * before && v - before >= floor && v > before;
    let latest = median(&values[values.len() - w..]);
    let mut best: Option<(f64, usize, f64, f64)> = None;
    for t in w..=values.len() - w {
        let before = median(&values[t - w..t]);
        let after = median(&values[t..t + w]);
        if !grown(before, after) || !grown(before, latest) {
            continue;
        }
        let ratio = if before > 0.0 {
            after / before
        } else {
            f64::INFINITY
        };
        if best.is_none_or(|b| ratio > b.0) {
            best = Some((ratio, t, before, after));
        }
    }
    let (_, t, before, after) = best?;
    // With noise the best step can fall anywhere in the window the medians cannot tell apart:
    // the night is where the nights over the threshold begin, around it.
    let mut at = (t..t + w).find(|&j| grown(before, values[j]))?;
    while at > t.saturating_sub(w) && at > 0 && grown(before, values[at - 1]) {
        at -= 1;
    }
    Some(Growth {
        case: String::new(),
        measure: String::new(),
        night: series[at].0,
        before,
        after,
        latest,
    })
}

/// What one case's nights say: where its final worse stretch begins (an index into its
/// entries), whether that stretch is long enough to be a regression, and its flake over the
/// window.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub worse_from: Option<usize>,
    pub regression: bool,
    pub flake: Option<Flake>,
}

/// Judges one case's entries (in night order): a final worse stretch of at least `stay`
/// nights is a regression, and its nights are left out of the flake's count (they are the
/// regression's); a shorter one is too soon to tell, and counts as the flake's.
pub fn judge_case(name: &str, entries: &[Entry], window_start: usize, stay: usize) -> Judged {
    let ranks: Vec<u8> = entries.iter().map(|e| rank(e.state())).collect();
    let worse_from = worse_since(&ranks);
    let regression = worse_from.is_some_and(|i| entries.len() - i >= stay.max(1));
    let flaky_part = match worse_from {
        Some(i) if regression => &entries[..i],
        _ => entries,
    };
    let in_window: Vec<Entry> = flaky_part
        .iter()
        .filter(|e| e.night >= window_start)
        .copied()
        .collect();
    Judged {
        worse_from,
        regression,
        flake: flake(name, &in_window),
    }
}

/// A measure's values of one case: (night, value), in night order.
type Series = Vec<(usize, f64)>;

/// Reads the store and computes every view.
pub fn analyze(store: &Store, options: &Options) -> anyhow::Result<History> {
    let runs = store.runs()?;
    let night_of: HashMap<i64, usize> = runs.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    let names = store.cases()?;
    let mut by_case: HashMap<i64, Vec<Entry>> = HashMap::with_capacity(names.len());
    store.results(|r| {
        if let Some(&night) = night_of.get(&r.run) {
            by_case.entry(r.case_id).or_default().push(Entry {
                night,
                outcome: r.outcome,
                verdict: r.verdict,
                duration_s: r.duration_s,
            });
        }
    })?;
    let mut measure_names: Vec<String> = Vec::new();
    let mut measures: HashMap<(i64, usize), Series> = HashMap::new();
    store.measures(|case_id, run, name, value| {
        let Some(&night) = night_of.get(&run) else {
            return;
        };
        let k = match measure_names.iter().position(|n| n == name) {
            Some(k) => k,
            None => {
                measure_names.push(name.to_string());
                measure_names.len() - 1
            }
        };
        measures
            .entry((case_id, k))
            .or_default()
            .push((night, value));
    })?;

    let window_start = runs.len().saturating_sub(options.last.max(1));
    let mut regressions = Vec::new();
    let mut pending = Vec::new();
    let mut flakes = Vec::new();
    let mut growths = Vec::new();
    let mut shown: HashSet<i64> = HashSet::new();
    let mut case_ids: Vec<(&str, i64)> = by_case
        .keys()
        .map(|id| (names.get(id).map_or("", String::as_str), *id))
        .collect();
    case_ids.sort_unstable();
    for &(name, id) in &case_ids {
        let entries = by_case.get_mut(&id).expect("listed from the map");
        entries.sort_by_key(|e| e.night);
        let entries: &[Entry] = entries;
        let judged = judge_case(name, entries, window_start, options.stay);
        if let Some(i) = judged.worse_from {
            let (before, first) = (entries[i - 1], entries[i]);
            if judged.regression {
                let (removed, added) = fingerprint_diff(
                    &runs[before.night].fingerprint,
                    &runs[first.night].fingerprint,
                );
                regressions.push(Regression {
                    case: name.to_string(),
                    first_bad: first.night,
                    before: before.night,
                    was: before.state(),
                    became: first.state(),
                    verdict: first.verdict,
                    nights_bad: entries.len() - i,
                    reason: store.reason(id, runs[first.night].id)?,
                    fingerprint_removed: removed,
                    fingerprint_added: added,
                });
            } else {
                pending.push(Pending {
                    case: name.to_string(),
                    since: first.night,
                    nights: entries.len() - i,
                    was: before.state(),
                    became: first.state(),
                });
            }
            shown.insert(id);
        }
        if let Some(f) = judged.flake {
            flakes.push(f);
            shown.insert(id);
        }
        if entries
            .iter()
            .any(|e| e.night >= window_start && !e.as_expected())
        {
            shown.insert(id);
        }
        let times: Vec<(usize, f64)> = entries.iter().map(|e| (e.night, e.duration_s)).collect();
        let mut series: Vec<(String, Series, f64)> = vec![(TIME.to_string(), times, TIME_FLOOR_S)];
        for (k, n) in measure_names.iter().enumerate() {
            if let Some(s) = measures.get_mut(&(id, k)) {
                s.sort_by_key(|v| v.0);
                series.push((n.clone(), s.clone(), 0.0));
            }
        }
        for (measure, s, floor) in series {
            if let Some(mut g) = growth(&s, options.window, options.grow, floor) {
                g.case = name.to_string();
                g.measure = measure;
                growths.push(g);
                shown.insert(id);
            }
        }
    }
    regressions.sort_by(|a, b| (a.first_bad, &a.case).cmp(&(b.first_bad, &b.case)));
    pending.sort_by(|a, b| (a.since, &a.case).cmp(&(b.since, &b.case)));
    flakes.sort_by(|a, b| {
        (b.other * a.nights)
            .cmp(&(a.other * b.nights))
            .then(a.case.cmp(&b.case))
    });
    growths.sort_by(|a, b| (a.night, &a.case, &a.measure).cmp(&(b.night, &b.case, &b.measure)));
    let strips = case_ids
        .iter()
        .filter(|(_, id)| shown.contains(id))
        .map(|&(name, id)| {
            let mut nights = vec![None; runs.len() - window_start];
            for e in &by_case[&id] {
                if e.night >= window_start {
                    nights[e.night - window_start] = Some(*e);
                }
            }
            Strip {
                case: name.to_string(),
                nights,
            }
        })
        .collect();
    Ok(History {
        store: store.path().to_path_buf(),
        options: options.clone(),
        cases: by_case.len(),
        runs,
        window_start,
        regressions,
        pending,
        flakes,
        growth: growths,
        strips,
    })
}

/// Lines of `before` that `after` lacks, and lines of `after` that `before` lacked, each in
/// its file's order.
pub fn fingerprint_diff(before: &[String], after: &[String]) -> (Vec<String>, Vec<String>) {
    let a: HashSet<&String> = after.iter().collect();
    let b: HashSet<&String> = before.iter().collect();
    (
        before.iter().filter(|l| !a.contains(l)).cloned().collect(),
        after.iter().filter(|l| !b.contains(l)).cloned().collect(),
    )
}

/// A measure's value as read: seconds for time, MiB for bytes.
pub fn show_value(measure: &str, v: f64) -> String {
    if measure == TIME {
        format!("{v:.3} s")
    } else if measure.ends_with("bytes") {
        format!("{:.1} MiB", v / (1u64 << 20) as f64)
    } else {
        format!("{v}")
    }
}

/// `2.50x`, or `from 0` when nothing was there before.
pub fn show_ratio(before: f64, after: f64) -> String {
    if before > 0.0 {
        format!("{:.2}x", after / before)
    } else {
        "from 0".into()
    }
}

impl History {
    /// `night 200 (2026-07-19T04:24:16Z, nights/200/results.json)`.
    pub fn night(&self, i: usize) -> String {
        let r = &self.runs[i];
        format!("night {} ({}, {})", i + 1, r.started_at, r.file)
    }

    /// The window as `nights 191-220`.
    pub fn window_text(&self) -> String {
        match self.runs.len() - self.window_start {
            0 => "no nights".into(),
            1 => format!("night {}", self.runs.len()),
            n => format!(
                "the last {n} runs, nights {}-{}",
                self.window_start + 1,
                self.runs.len()
            ),
        }
    }
}

/// The views as text.
pub fn render_text(h: &History) -> String {
    let mut out = String::new();
    let o = &h.options;
    let (Some(first), Some(last)) = (h.runs.first(), h.runs.last()) else {
        let _ = writeln!(out, "No runs in {}.", h.store.display());
        return out;
    };
    let _ = writeln!(
        out,
        "History of {} runs in {}: {} (night 1) to {} (night {}); {} cases.",
        h.runs.len(),
        h.store.display(),
        first.started_at,
        last.started_at,
        h.runs.len(),
        h.cases
    );
    let troubled: Vec<usize> = (0..h.runs.len())
        .filter(|&i| !h.runs[i].problems.is_empty())
        .collect();
    if !troubled.is_empty() {
        let _ = writeln!(out, "\nRuns stored with problems:");
        for i in troubled {
            for p in &h.runs[i].problems {
                let _ = writeln!(out, "  night {}: {p}", i + 1);
            }
        }
    }

    let _ = writeln!(
        out,
        "\nRegressions: worse from a night on, and on every night since (at least {}):",
        o.stay
    );
    if h.regressions.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for r in &h.regressions {
        let _ = writeln!(
            out,
            "  {}\n    first bad: {}: {} -> {} ({}), worse on all {} of its nights since",
            r.case,
            h.night(r.first_bad),
            r.was,
            r.became,
            r.verdict.name(),
            r.nights_bad
        );
        if !r.reason.is_empty() {
            let _ = writeln!(out, "    {}", r.reason);
        }
        if r.fingerprint_removed.is_empty() && r.fingerprint_added.is_empty() {
            let _ = writeln!(out, "    fingerprint: the same as night {}", r.before + 1);
        } else {
            let _ = writeln!(
                out,
                "    fingerprint, night {} -> night {}:",
                r.before + 1,
                r.first_bad + 1
            );
            for l in &r.fingerprint_removed {
                let _ = writeln!(out, "      - {l}");
            }
            for l in &r.fingerprint_added {
                let _ = writeln!(out, "      + {l}");
            }
        }
    }
    if !h.pending.is_empty() {
        let _ = writeln!(
            out,
            "\nWorse on the last nights, but fewer than {}: a flake or a regression starting, too soon to tell:",
            o.stay
        );
        for p in &h.pending {
            let _ = writeln!(
                out,
                "  {}: {} -> {} since night {} ({} {})",
                p.case,
                p.was,
                p.became,
                p.since + 1,
                p.nights,
                if p.nights == 1 { "night" } else { "nights" }
            );
        }
    }

    let _ = writeln!(
        out,
        "\nFlaky over {}: the outcome changed and changed back; rate = nights not the usual outcome / nights run:",
        h.window_text()
    );
    if h.flakes.is_empty() {
        let _ = writeln!(out, "  none");
    }
    let width = h
        .flakes
        .iter()
        .map(|f| format!("{}/{}", f.other, f.nights).len())
        .max()
        .unwrap_or(0);
    for f in &h.flakes {
        let counts: Vec<String> = f.counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(
            out,
            "  {:>width$}  {:>3.0}%  {}  (usually {}; {})",
            format!("{}/{}", f.other, f.nights),
            100.0 * f.rate(),
            f.case,
            f.usual,
            counts.join(", ")
        );
    }

    let _ = writeln!(
        out,
        "\nGrowth: median of {w} nights after a night over the {w} before it, at least {g}x (time: and {TIME_FLOOR_S} s more), and still so over the last {w}:",
        w = o.window,
        g = o.grow
    );
    if h.growth.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for g in &h.growth {
        let _ = writeln!(
            out,
            "  {}  {}: from night {}: {} -> {} ({}), last {} nights {}",
            g.case,
            g.measure,
            g.night + 1,
            show_value(&g.measure, g.before),
            show_value(&g.measure, g.after),
            show_ratio(g.before, g.after),
            o.window,
            show_value(&g.measure, g.latest)
        );
    }

    let _ = writeln!(
        out,
        "\nNight by night over {}, cases not as expected on any of them or listed above:",
        h.window_text()
    );
    let legend: Vec<String> = LEGEND.iter().map(|(c, w)| format!("{c} {w}")).collect();
    let _ = writeln!(out, "  {}", legend.join(", "));
    if h.strips.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for s in &h.strips {
        let _ = writeln!(out, "  {}  {}", s.text(), s.case);
    }
    crate::escape::terminal_text(&out)
}
