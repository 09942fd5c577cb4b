use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::synth::Plan;
use super::views::{Entry, Growth, flake, growth, worse_since};
use super::*;
use crate::model::{OutcomeKind, Verdict};
use crate::report::RunReport;

/// The committed H200 run (858 cases) the synthetic nights are made from.
const BASE: &str = "reports/nvidia-h200-580.159.04-cuda13.0-house-after-ec42c10.json";
/// Fewer nights than a year, to keep the test fast; the benchmark (reports/history-bench.md)
/// takes 365. Night 200 is the regression's, as there.
const NIGHTS: usize = 220;

fn base() -> RunReport {
    crate::report::load_json(&Path::new(env!("CARGO_MANIFEST_DIR")).join(BASE)).unwrap()
}

fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("clhip-history-{name}-"))
        .tempdir()
        .unwrap()
}

fn entry(night: usize, outcome: OutcomeKind) -> Entry {
    Entry {
        night,
        outcome,
        verdict: if outcome == OutcomeKind::Pass {
            Verdict::Pass
        } else {
            Verdict::Regression
        },
        duration_s: 0.1,
    }
}

fn entries(states: &str) -> Vec<Entry> {
    states
        .chars()
        .enumerate()
        .map(|(n, c)| {
            entry(
                n,
                match c {
                    '.' => OutcomeKind::Pass,
                    'F' => OutcomeKind::Fail,
                    'C' => OutcomeKind::Crash,
                    'u' => OutcomeKind::Unsupported,
                    _ => unreachable!(),
                },
            )
        })
        .collect()
}

fn ranks(states: &str) -> Vec<u8> {
    entries(states)
        .iter()
        .map(|e| views::rank(e.state()))
        .collect()
}

#[test]
fn worse_since_finds_the_start_of_the_final_worse_stretch() {
    assert_eq!(worse_since(&ranks("....FFF")), Some(4));
    // A flake before the regression does not move its start.
    assert_eq!(worse_since(&ranks("..F...FFF")), Some(6));
    // Worse in two steps, and worse than the night before all along: from the first step.
    assert_eq!(worse_since(&ranks("...uuFF")), Some(3));
    // Back to as good as before: nothing.
    assert_eq!(worse_since(&ranks("..F..")), None);
    assert_eq!(worse_since(&ranks("FFFF")), None);
    assert_eq!(worse_since(&ranks("F...")), None);
    // A last bad night alone is where a worse stretch starts (too soon to call it anything).
    assert_eq!(worse_since(&ranks("....F")), Some(4));
    // From crash down to fail is worse; from fail to crash is not.
    assert_eq!(worse_since(&ranks("CCFF")), Some(2));
    assert_eq!(worse_since(&ranks("FFCC")), None);
}

#[test]
fn a_flake_goes_and_comes_back_and_its_rate_counts_nights() {
    let f = flake("c", &entries(".....F....")).unwrap();
    assert_eq!((f.usual, f.other, f.nights), (OutcomeKind::Pass, 1, 10));
    let f = flake("c", &entries("F..C..F..")).unwrap();
    assert_eq!((f.other, f.nights), (3, 9));
    assert_eq!(
        f.counts,
        vec![
            (OutcomeKind::Pass, 6),
            (OutcomeKind::Fail, 2),
            (OutcomeKind::Crash, 1)
        ]
    );
    // One change only: a fix, or a regression, not a flake.
    assert!(flake("c", &entries("....FFFF")).is_none());
    assert!(flake("c", &entries("FFFF....")).is_none());
    assert!(flake("c", &entries("........")).is_none());
    // Mostly bad, still judged against its best outcome.
    let f = flake("c", &entries("FF.FF.FF")).unwrap();
    assert_eq!((f.usual, f.other, f.nights), (OutcomeKind::Pass, 6, 8));
    // A negative control's caught stale read is its pass.
    let mut caught = entries(".F.F.F");
    for e in &mut caught {
        if e.outcome == OutcomeKind::Fail {
            e.verdict = Verdict::CaughtStaleRead;
        }
    }
    assert!(flake("c", &caught).is_none());
}

#[test]
fn a_regression_takes_its_nights_from_the_flake_and_a_short_stretch_is_too_soon() {
    // Flaky, then worse for good: the regression from index 8, the flake counted before it.
    let j = views::judge_case("c", &entries("....F...FFFF"), 0, 3);
    assert_eq!((j.worse_from, j.regression), (Some(8), true));
    let f = j.flake.unwrap();
    assert_eq!((f.other, f.nights), (1, 8));
    // Only the window's nights count for the flake.
    let j = views::judge_case("c", &entries("....F...FFFF"), 2, 3);
    assert_eq!(j.flake.map(|f| (f.other, f.nights)), Some((1, 6)));
    // Two bad nights at the end, three needed: too soon, and still the flake's.
    let j = views::judge_case("c", &entries("..F.......FF"), 0, 3);
    assert_eq!((j.worse_from, j.regression), (Some(10), false));
    assert_eq!(j.flake.map(|f| (f.other, f.nights)), Some((3, 12)));
    // A single bad night in the middle: a flake, never a regression.
    let j = views::judge_case("c", &entries(".....F....."), 0, 1);
    assert_eq!((j.worse_from, j.regression), (None, false));
    assert_eq!(j.flake.map(|f| (f.other, f.nights)), Some((1, 11)));
}

#[test]
fn growth_is_a_step_of_medians_that_stays() {
    let series = |values: &[f64]| -> Vec<(usize, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(n, v)| (n + 10, *v))
            .collect()
    };
    let mut v = vec![1.0; 20];
    v.extend([3.0; 15]);
    let g = growth(&series(&v), 5, 1.5, 0.05).unwrap();
    assert_eq!(
        g,
        Growth {
            case: String::new(),
            measure: String::new(),
            night: 30,
            before: 1.0,
            after: 3.0,
            latest: 3.0
        }
    );
    // One slow night is no growth; nor is a step that went back down.
    let mut spike = vec![1.0; 35];
    spike[20] = 9.0;
    assert!(growth(&series(&spike), 5, 1.5, 0.05).is_none());
    let mut back = v.clone();
    back.extend([1.0; 10]);
    assert!(growth(&series(&back), 5, 1.5, 0.05).is_none());
    // Under the ratio, or under the floor: none.
    let mut small = vec![1.0; 20];
    small.extend([1.4; 15]);
    assert!(growth(&series(&small), 5, 1.5, 0.05).is_none());
    let mut tiny = vec![0.001; 20];
    tiny.extend([0.01; 15]);
    assert!(growth(&series(&tiny), 5, 1.5, 0.05).is_none());
    assert!(growth(&series(&tiny), 5, 1.5, 0.0).is_some());
}

/// What the views found for `case` among flakes: (nights not usual, nights).
fn flakes_by_case(h: &History) -> BTreeMap<String, (usize, usize)> {
    h.flakes
        .iter()
        .map(|f| (f.case.clone(), (f.other, f.nights)))
        .collect()
}

/// The acceptance test: synthetic nights of the committed H200 run (858 cases) with planted
/// flakes at known rates, a regression and a fingerprint change at night 200, a single bad
/// night, a bad last night, and growth of time and of a footprint measure, as CI artifacts in a
/// directory with a JSON file of another kind and a corrupt results file. History finds each,
/// with its rate exactly, and nothing else.
#[test]
fn synthetic_nights_give_back_what_was_planted() {
    let base = base();
    assert_eq!(base.results.len(), 858);
    let plan = Plan::new(&base, NIGHTS, 200).unwrap();
    let dir = scratch("nights");
    let nights = dir.path().join("artifacts");
    std::fs::create_dir(&nights).unwrap();
    synth::write_nights(&base, &plan, &nights).unwrap();
    std::fs::write(
        nights.join("night-001").join("bench.json"),
        r#"{"schema": "clhip-bench-interop/1", "targets": []}"#,
    )
    .unwrap();
    let corrupt = nights.join("night-150").join("retry").join("results.json");
    std::fs::create_dir_all(corrupt.parent().unwrap()).unwrap();
    let whole = synth::night(&base, &plan, 150).unwrap();
    std::fs::write(&corrupt, &whole[..whole.len() / 2]).unwrap();

    let db = dir.path().join("h.sqlite");
    let mut store = Store::open(&db, true).unwrap();
    let done = import(&mut store, std::slice::from_ref(&nights)).unwrap();
    assert_eq!(done.stored.len(), NIGHTS);
    assert!(done.stored.iter().all(|(_, problems)| problems.is_empty()));
    assert_eq!(done.not_results.len(), 1, "{:?}", done.not_results);
    assert!(done.not_results[0].0.ends_with("night-001/bench.json"));
    assert_eq!(done.errors.len(), 1, "{:?}", done.errors);
    assert!(
        done.errors[0].starts_with(&format!("{}:", corrupt.display())),
        "{}",
        done.errors[0]
    );
    // Stored in the order the runs started.
    let stored: Vec<PathBuf> = done.stored.iter().map(|(p, _)| p.clone()).collect();
    let mut sorted = stored.clone();
    sorted.sort();
    assert_eq!(stored, sorted);

    let h = analyze(&store, &Options::default()).unwrap();
    assert_eq!(h.runs.len(), NIGHTS);
    assert_eq!(h.cases, 858);
    assert_eq!(h.window_start, NIGHTS - 30);

    // The regression: night 200 (index 199), with the fingerprint line that changed.
    let (reg_case, reg_night) = &plan.regression;
    assert_eq!(h.regressions.len(), 1, "{:#?}", h.regressions);
    let r = &h.regressions[0];
    assert_eq!(&r.case, reg_case);
    assert_eq!(r.first_bad + 1, *reg_night);
    assert_eq!(r.before + 1, reg_night - 1);
    assert_eq!((r.was, r.became), (OutcomeKind::Pass, OutcomeKind::Fail));
    assert_eq!(r.verdict, Verdict::Regression);
    assert_eq!(r.nights_bad, NIGHTS - reg_night + 1);
    assert_eq!(
        r.fingerprint_removed,
        vec![plan.fingerprint_change.0.clone()]
    );
    assert_eq!(r.fingerprint_added, vec![plan.fingerprint_change.1.clone()]);
    assert!(
        r.reason.contains("planted wrong data, night 200"),
        "{}",
        r.reason
    );

    // The flakes, each at exactly its planted rate over the last 30 nights; the single bad
    // night among them, not among the regressions.
    let mut expected: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for f in &plan.flakes {
        let bad = (NIGHTS - 29..=NIGHTS).filter(|&n| f.bad_on(n)).count();
        assert_eq!(bad, 30 / f.period, "{f:?}");
        expected.insert(f.case.clone(), (bad, 30));
    }
    expected.insert(plan.single_bad.0.clone(), (1, 30));
    assert_eq!(flakes_by_case(&h), expected);

    // The last night's single failure: too soon to tell.
    assert_eq!(h.pending.len(), 1, "{:#?}", h.pending);
    assert_eq!(h.pending[0].case, plan.last_bad);
    assert_eq!((h.pending[0].since + 1, h.pending[0].nights), (NIGHTS, 1));

    // Growth of time and of peak memory, at their nights.
    let grew: Vec<(String, String, usize)> = h
        .growth
        .iter()
        .map(|g| (g.case.clone(), g.measure.clone(), g.night + 1))
        .collect();
    let mut want = vec![
        (
            plan.time_growth.0.clone(),
            views::TIME.to_string(),
            plan.time_growth.1,
        ),
        (
            plan.rss_growth.0.clone(),
            "peak_rss_bytes".to_string(),
            plan.rss_growth.1,
        ),
    ];
    want.sort_by_key(|w| w.2);
    assert_eq!(grew, want);
    let time = h.growth.iter().find(|g| g.measure == views::TIME).unwrap();
    let ratio = time.after / time.before;
    assert!((2.4..3.7).contains(&ratio), "{time:?}");

    // The text says it all.
    let text = render_text(&h);
    for line in [
        format!(
            "    first bad: night 200 ({}, {}): pass -> fail (regression), worse on all 21 of its nights since",
            h.runs[199].started_at,
            nights.join("night-200/results.json").display()
        ),
        "    fingerprint, night 199 -> night 200:".to_string(),
        format!("      - {}", plan.fingerprint_change.0),
        format!("      + {}", plan.fingerprint_change.1),
        format!(
            "  10/30   33%  {}  (usually pass; pass 20, fail 10)",
            plan.flakes[0].case
        ),
        format!(
            "   1/30    3%  {}  (usually pass; pass 29, fail 1)",
            plan.single_bad.0
        ),
        format!(
            "  {}: pass -> fail since night {NIGHTS} (1 night)",
            plan.last_bad
        ),
        format!(
            "  {}  {}",
            ".".repeat(9) + &"F".repeat(21),
            plan.regression.0
        ),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line\n{line}\nin\n{text}"
        );
    }
    let html = html::render_html(&h);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(&plan.regression.0));
    assert!(html.contains("<span class=\"removed\">- opencl nvidia0 driver: 580.159.04</span>"));

    // Again: every night is there already; the corrupt file is still named; nothing changes.
    let again = import(&mut store, std::slice::from_ref(&nights)).unwrap();
    assert_eq!(
        (again.stored.len(), again.already.len(), again.errors.len()),
        (0, NIGHTS, 1)
    );
    let h2 = analyze(&store, &Options::default()).unwrap();
    assert_eq!(h2.runs.len(), NIGHTS);
    assert_eq!(h2.regressions, h.regressions);
    // A store opened afresh reads the same.
    drop(store);
    let reopened = Store::open(&db, false).unwrap();
    let h3 = analyze(&reopened, &Options::default()).unwrap();
    assert_eq!(flakes_by_case(&h3), expected);
}

/// `n` small nights (40 cases of the committed run, the same outcomes), a day apart.
fn small_nights(dir: &Path, n: usize) -> Vec<PathBuf> {
    let mut base = base();
    base.results.truncate(40);
    base.summary = crate::report::Summary::of(&base.results);
    // Its selection is of the whole matrix, which 40 cases are not.
    base.selection = None;
    (1..=n)
        .map(|k| {
            let mut r = base.clone();
            r.started_at = format!("2026-01-{k:02}T04:00:00Z");
            let p = dir.join(format!("n{k:02}.json"));
            std::fs::write(&p, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
            p
        })
        .collect()
}

#[test]
fn the_store_refuses_a_file_that_is_not_one_and_names_it() {
    let dir = scratch("store");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "just some notes, not a database\n".repeat(200)).unwrap();
    let err = format!("{:#}", Store::open(&text, true).err().unwrap());
    assert!(
        err.starts_with(&format!("{}: not a clhip history store", text.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&text).unwrap(),
        "just some notes, not a database\n".repeat(200)
    );

    let other = dir.path().join("other.sqlite");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let err = format!("{:#}", Store::open(&other, true).err().unwrap());
    assert!(err.contains("not a clhip history store"), "{err}");

    let missing = dir.path().join("none.sqlite");
    let err = format!("{:#}", Store::open(&missing, false).err().unwrap());
    assert!(err.contains("no history store there"), "{err}");
    assert!(!missing.exists());

    let made = dir.path().join("h.sqlite");
    Store::open(&made, true).unwrap();
    rusqlite::Connection::open(&made)
        .unwrap()
        .pragma_update(None, "user_version", 7)
        .unwrap();
    let err = format!("{:#}", Store::open(&made, false).err().unwrap());
    assert!(err.contains("a history store of layout 7"), "{err}");
}

#[test]
fn import_names_what_it_cannot_take_and_keeps_the_rest() {
    let dir = scratch("import");
    let files = small_nights(dir.path(), 3);
    let mut store = Store::open(&dir.path().join("h.sqlite"), true).unwrap();

    // A results file with a case twice: which result the night meant is not for history to
    // guess.
    let mut twice = base();
    twice.results.truncate(3);
    let again = twice.results[0].clone();
    twice.results.push(again);
    let dup = dir.path().join("twice.json");
    std::fs::write(&dup, serde_json::to_vec(&twice).unwrap()).unwrap();
    // Named, not results: an error; a results file of a newer schema: an error.
    let other = dir.path().join("probe.json");
    std::fs::write(&other, r#"{"opencl": []}"#).unwrap();
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, r#"{"schema": "clhip-results/2", "x": 1}"#).unwrap();
    let missing = dir.path().join("gone.json");

    let mut inputs = files.clone();
    inputs.extend([dup.clone(), other.clone(), newer.clone(), missing.clone()]);
    let done = import(&mut store, &inputs).unwrap();
    assert_eq!(done.stored.len(), 3);
    let errors = done.errors.join("\n");
    for (path, why) in [
        (&dup, "has more than one result"),
        (&other, "not a clhip results file (no `schema` field)"),
        (&newer, "`clhip-results/2` is not supported"),
        (&missing, "cannot read"),
    ] {
        assert!(
            done.errors
                .iter()
                .any(|e| e.starts_with(&format!("{}", path.display())) && e.contains(why)),
            "{path:?} {why}: {errors}"
        );
    }
    assert_eq!(done.errors.len(), 4, "{errors}");

    // The same content under another name is the same run.
    let copy = dir.path().join("copy.json");
    std::fs::copy(&files[0], &copy).unwrap();
    let done = import(&mut store, &[copy]).unwrap();
    assert_eq!(done.stored.len(), 0);
    assert_eq!(done.already[0].1, files[0].display().to_string());
}

/// The store keeps what each night said: fingerprint lines, selection-free runs, problems of
/// a run that was interrupted (stored, and shown), and measures only where a file has them.
#[test]
fn an_interrupted_run_is_stored_with_its_problem_and_missing_cases_are_no_nights() {
    let dir = scratch("interrupted");
    let files = small_nights(dir.path(), 2);
    let mut cut: RunReport = crate::report::load_json(&files[1]).unwrap();
    let gone = cut.results.pop().unwrap();
    cut.not_run.push(gone.id.clone());
    cut.status = crate::report::RunStatus::Interrupted;
    cut.summary = crate::report::Summary::of(&cut.results);
    cut.started_at = "2030-01-01T00:00:00Z".into();
    let cut_path = dir.path().join("cut.json");
    // A results file that records the commit of the clhip that wrote it (this version's do
    // not): kept with the run.
    let mut value = serde_json::to_value(&cut).unwrap();
    value["clhip_commit"] = "abc1234".into();
    std::fs::write(&cut_path, serde_json::to_vec(&value).unwrap()).unwrap();

    let mut store = Store::open(&dir.path().join("h.sqlite"), true).unwrap();
    let done = import(&mut store, &[files[0].clone(), cut_path.clone()]).unwrap();
    assert!(done.errors.is_empty(), "{:?}", done.errors);
    assert_eq!(done.stored[1].1.len(), 1);
    assert!(done.stored[1].1[0].contains("incomplete: interrupted"));
    let h = analyze(&store, &Options::default()).unwrap();
    assert_eq!(h.runs[1].status, "incomplete: interrupted");
    assert_eq!(h.runs[1].fingerprint, cut.fingerprint.lines());
    assert_eq!(h.runs[0].clhip_commit, None);
    assert_eq!(h.runs[1].clhip_commit.as_deref(), Some("abc1234"));
    assert!(render_text(&h).contains("Runs stored with problems:\n  night 2: "));
    // The case not run that night has one night only, and is no flake or regression.
    assert!(h.regressions.is_empty() && h.pending.is_empty() && h.flakes.is_empty());
}

/// Nights are numbered by start time, whatever order the files came in: a night found late
/// (an artifact downloaded again) takes its place among the others.
#[test]
fn nights_are_in_the_order_the_runs_started_whatever_the_import_order() {
    let dir = scratch("order");
    let files = small_nights(dir.path(), 4);
    let mut store = Store::open(&dir.path().join("h.sqlite"), true).unwrap();
    // One import, files named latest first: stored oldest first.
    let done = import(&mut store, &[files[3].clone(), files[1].clone()]).unwrap();
    let stored: Vec<&PathBuf> = done.stored.iter().map(|(p, _)| p).collect();
    assert_eq!(stored, [&files[1], &files[3]]);
    // Then the two missing ones, in a later import.
    import(&mut store, &[files[2].clone(), files[0].clone()]).unwrap();
    let h = analyze(&store, &Options::default()).unwrap();
    let order: Vec<String> = h.runs.iter().map(|r| r.file.clone()).collect();
    let want: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    assert_eq!(order, want);
}
