//! A merged or compared run is whole, or says it isn't: `merge` refuses shards of another run
//! and marks a merge that lacks a shard incomplete; `report` and `diff` judge a file alike and
//! exit 1 on one that is interrupted, empty for a broken vendor, missing shards or contradicting
//! itself. Each test runs the real binary on mock runs (no device needed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clhip::partition::Partition;
use clhip::report::{RunReport, RunStatus, Summary, load};

/// Cases in the mock plan: enough that each of three shards gets some.
const PLAN: usize = 12;

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .expect("clhip runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-shards-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mock_plan(n: usize) -> String {
    vec!["pass"; n].join(",")
}

/// `clhip run --mock-cases PLAN EXTRA --json JSON`, which must exit 0.
fn run(json: &Path, extra: &[&str]) {
    let plan = mock_plan(PLAN);
    let mut args = vec![
        "run",
        "--mock-cases",
        &plan,
        "--json",
        s(json),
        "--allow-empty",
    ];
    args.extend(extra);
    let o = clhip(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// The three shards of the mock plan, run apart.
fn shards(dir: &Path) -> Vec<PathBuf> {
    (1..=3)
        .map(|m| {
            let json = dir.join(format!("s{m}.json"));
            run(&json, &["--partition", &format!("hash:{m}/3")]);
            json
        })
        .collect()
}

fn merge(inputs: &[&Path], out: &Path) -> Output {
    let mut args = vec!["merge"];
    args.extend(inputs.iter().map(|p| s(p)));
    args.extend(["-o", s(out)]);
    clhip(&args)
}

fn write(report: &RunReport, to: &Path) {
    std::fs::write(to, serde_json::to_vec_pretty(report).unwrap()).unwrap();
}

#[test]
fn each_shard_records_its_partition_and_the_whole_plan() {
    let dir = scratch("record");
    let paths = shards(&dir);
    let whole = dir.join("whole.json");
    run(&whole, &[]);
    let whole = load(&whole).unwrap().report;
    let plan = whole
        .selection
        .clone()
        .expect("a run records its selection");
    assert_eq!(plan.planned, PLAN);
    assert!(plan.shards.is_empty());
    let mut share = 0;
    for (m, path) in (1..=3).zip(&paths) {
        let shard = load(path).unwrap();
        assert!(shard.problems.is_empty(), "{:?}", shard.problems);
        let sel = shard.report.selection.unwrap();
        assert_eq!(sel.shards, [Partition { shard: m, of: 3 }]);
        // Every shard records the same whole plan, not its share of it.
        assert_eq!(
            (sel.planned, &sel.plan, &sel.matrix),
            (PLAN, &plan.plan, &plan.matrix)
        );
        assert!(!shard.report.results.is_empty(), "shard {m} ran nothing");
        share += shard.report.results.len();
    }
    assert_eq!(share, PLAN);
}

#[test]
fn two_of_three_shards_merge_marked_incomplete_and_report_and_diff_exit_1() {
    let dir = scratch("two-of-three");
    let paths = shards(&dir);
    let whole = dir.join("whole.json");
    run(&whole, &[]);

    let two = dir.join("two.json");
    let o = merge(&[&paths[0], &paths[1]], &two);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("incomplete: shard hash:3/3 missing"),
        "{}",
        text(&o.stderr)
    );
    let merged = load(&two).unwrap().report;
    assert_eq!(
        merged.status,
        RunStatus::MissingShards {
            missing: vec![Partition { shard: 3, of: 3 }]
        }
    );
    let o = clhip(&["report", s(&two)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("shard hash:3/3 missing"));
    for (old, new) in [(&whole, &two), (&two, &whole)] {
        let o = clhip(&["diff", s(old), s(new)]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("0 regressions"),
            "{}",
            text(&o.stdout)
        );
        assert!(text(&o.stderr).contains("shard hash:3/3 missing"));
    }

    // All three, in any order, or the missing one added to the merge: a whole run.
    let all = dir.join("all.json");
    let o = merge(&[&paths[2], &paths[0], &paths[1]], &all);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("merged 3 shards (12 results)"));
    let o = clhip(&["report", s(&all)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = clhip(&["diff", s(&whole), s(&all)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let completed = dir.join("completed.json");
    let o = merge(&[&two, &paths[2]], &completed);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn an_interrupted_shard_makes_the_merge_incomplete_whichever_place_it_has() {
    let dir = scratch("interrupted-shard");
    let paths = shards(&dir);
    let cut = dir.join("cut.json");
    let mut r = load(&paths[1]).unwrap().report;
    let last = r.results.pop().unwrap();
    r.not_run.push(last.id);
    r.summary = Summary::of(&r.results);
    r.status = RunStatus::Interrupted;
    write(&r, &cut);
    for (name, order) in [
        ("first", [&cut, &paths[0], &paths[2]]),
        ("second", [&paths[0], &cut, &paths[2]]),
    ] {
        let out = dir.join(format!("merged-{name}.json"));
        let o = merge(&order.map(PathBuf::as_path), &out);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("incomplete: interrupted"),
            "{name}"
        );
        assert_eq!(load(&out).unwrap().report.status, RunStatus::Interrupted);
        let o = clhip(&["report", s(&out)]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o.stderr));
    }
}

#[test]
fn shards_of_another_run_or_given_twice_are_refused() {
    let dir = scratch("foreign");
    let paths = shards(&dir);
    let refused = |other: &Path, says: &str| {
        let o = merge(&[&paths[0], other], &dir.join("refused.json"));
        assert_eq!(o.status.code(), Some(2), "{says}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(says),
            "{says}: {}",
            text(&o.stderr)
        );
        assert!(!dir.join("refused.json").exists(), "{says}: written anyway");
    };
    let seed = dir.join("seed.json");
    run(&seed, &["--partition", "hash:2/3", "--seed", "9"]);
    refused(&seed, "seed 9: shards of one run share its seed");
    let filters = dir.join("filters.json");
    run(&filters, &["--partition", "hash:2/3", "mock"]);
    refused(&filters, "filters differ");
    let other_plan = dir.join("other-plan.json");
    let o = clhip(&[
        "run",
        "--mock-cases",
        &mock_plan(PLAN + 1),
        "--partition",
        "hash:2/3",
        "--json",
        s(&other_plan),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    refused(&other_plan, "plans differ");
    let halves = dir.join("halves.json");
    run(&halves, &["--partition", "hash:2/2"]);
    refused(&halves, "partitions differ");
    refused(&paths[0], "shard hash:1/3 is in both");
    let version = dir.join("version.json");
    let mut r = load(&paths[1]).unwrap().report;
    r.clhip_version = "0.0.1".into();
    write(&r, &version);
    refused(&version, "by clhip 0.0.1");
    // A shard from before runs recorded what they selected cannot be shown to belong.
    let old = dir.join("old.json");
    let mut r = load(&paths[1]).unwrap().report;
    r.selection = None;
    write(&r, &old);
    refused(&old, "does not record its partition, filters or plan");
}

/// Every way a file can fall short of a whole run, made from a clean one. `report` and `diff`
/// (the file on either side) each exit 1 on it and say why, in the same words.
#[test]
fn report_and_diff_judge_a_file_alike() {
    let dir = scratch("judge");
    let good = dir.join("good.json");
    run(&good, &[]);
    let clean = load(&good).unwrap().report;
    type Spoil = fn(&mut RunReport);
    let spoiled: [(&str, Spoil, &str); 6] = [
        (
            "interrupted",
            |r| {
                for _ in 0..3 {
                    let last = r.results.pop().unwrap();
                    r.not_run.insert(0, last.id);
                }
                r.status = RunStatus::Interrupted;
            },
            "incomplete: interrupted (9 results, 3 cases not run)",
        ),
        (
            "nothing-run",
            |r| {
                r.results.clear();
                r.status = RunStatus::NothingRun {
                    why: "every OpenCL vendor broke in the probe".into(),
                };
                r.broken_vendors = vec!["/opt/bad/libbad.so: crashed: SIGSEGV".into()];
            },
            "incomplete: no case ran (every OpenCL vendor broke in the probe)",
        ),
        (
            "broken-vendor",
            |r| r.broken_vendors = vec!["/opt/bad/libbad.so: hung".into()],
            "1 OpenCL vendor libraries broke in the probe: /opt/bad/libbad.so: hung",
        ),
        (
            "missing-shards",
            |r| {
                r.status = RunStatus::MissingShards {
                    missing: vec![Partition { shard: 2, of: 2 }],
                }
            },
            "incomplete: shard hash:2/2 missing",
        ),
        (
            "lost-case",
            |r| {
                r.results.pop();
            },
            "inconsistent: marked complete, but its 11 cases are not the 12 cases it planned",
        ),
        (
            "renamed-case",
            |r| r.results[0].id = "mock/pass/99".into(),
            "inconsistent: marked complete, but its 12 cases are not the 12 cases it planned",
        ),
    ];
    for (name, spoil, says) in spoiled {
        let path = dir.join(format!("{name}.json"));
        let mut r = clean.clone();
        spoil(&mut r);
        r.summary = Summary::of(&r.results);
        write(&r, &path);
        judged_alike(&good, &path, says);
    }
}

/// A results file whose result ids are not their cases' (real cases, from reports/).
#[test]
fn report_and_diff_both_refuse_a_result_filed_under_another_case() {
    let dir = scratch("ids");
    let good = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("reports/nvidia-h200-580.159.04-cuda13.0-main-2691a36.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    let (first, second) = (v["results"][0]["id"].clone(), v["results"][1]["id"].clone());
    v["results"][0]["id"] = second.clone();
    v["results"][1]["id"] = first;
    let bad = dir.join("swapped.json");
    std::fs::write(&bad, serde_json::to_string(&v).unwrap()).unwrap();
    judged_alike(
        &good,
        &bad,
        &format!(
            "inconsistent: result `{}` is for another case",
            second.as_str().unwrap()
        ),
    );
}

/// `load` finds a problem with `bad` that begins `says`; `report BAD`, `diff GOOD BAD` and
/// `diff BAD GOOD` each exit 1 and name every problem `load` found, in its words.
fn judged_alike(good: &Path, bad: &Path, says: &str) {
    let problems = load(bad).unwrap().problems;
    let want = format!("{}: {says}", bad.display());
    assert!(
        problems.iter().any(|p| p.starts_with(&want)),
        "{want}\n{problems:?}"
    );
    for args in [
        vec!["report", s(bad)],
        vec!["diff", s(good), s(bad)],
        vec!["diff", s(bad), s(good)],
    ] {
        let o = clhip(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        for p in &problems {
            assert!(
                err.contains(p.as_str()),
                "{args:?} does not say {p}:\n{err}"
            );
        }
    }
}

#[test]
fn a_diff_against_an_interrupted_run_says_not_run_and_exits_1() {
    let dir = scratch("diff-interrupted");
    let clean = dir.join("clean.json");
    run(&clean, &[]);
    let mut r = load(&clean).unwrap().report;
    for _ in 0..4 {
        let last = r.results.pop().unwrap();
        r.not_run.insert(0, last.id);
    }
    r.summary = Summary::of(&r.results);
    r.status = RunStatus::Interrupted;
    let cut = dir.join("interrupted.json");
    write(&r, &cut);
    let o = clhip(&["diff", s(&clean), s(&cut)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "0 regressions, 0 fixes, 0 changed, 0 new, 0 removed, 4 not run in the new run"
        ),
        "{out}"
    );
    assert!(text(&o.stderr).contains("incomplete: interrupted"));
}

/// `(suite name, tests, time)` of each `<testsuite>` of a JUnit file, and its `<testcase>` count.
fn junit_suites(xml: &str) -> (Vec<(String, usize, f64)>, usize) {
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut suites, mut cases) = (Vec::new(), 0);
    loop {
        match reader.read_event().expect("well-formed JUnit") {
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                let attr = |name: &str| {
                    e.attributes()
                        .filter_map(Result::ok)
                        .find(|a| a.key.as_ref() == name.as_bytes())
                        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                };
                match e.name().as_ref() {
                    b"testsuite" => suites.push((
                        attr("name").unwrap_or_default(),
                        attr("tests").and_then(|t| t.parse().ok()).unwrap_or(0),
                        attr("time").and_then(|t| t.parse().ok()).unwrap_or(-1.0),
                    )),
                    b"testcase" => cases += 1,
                    _ => {}
                }
            }
            quick_xml::events::Event::Eof => return (suites, cases),
            _ => {}
        }
    }
}

#[test]
fn report_and_merge_write_junit_from_results_files_with_each_suite_s_time() {
    let dir = scratch("junit");
    // A whole run's own JUnit, and the same from its results file afterwards: the same XML.
    let whole = dir.join("whole.json");
    let run_xml = dir.join("run.xml");
    run(&whole, &["--junit", s(&run_xml)]);
    let report_xml = dir.join("report.xml");
    let o = clhip(&["report", s(&whole), "--junit", s(&report_xml)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // The matrix still goes to standard output.
    assert!(text(&o.stdout).contains("passed"), "{}", text(&o.stdout));
    let from_run = std::fs::read_to_string(&run_xml).unwrap();
    assert_eq!(std::fs::read_to_string(&report_xml).unwrap(), from_run);
    let (suites, cases) = junit_suites(&from_run);
    assert_eq!(cases, PLAN, "{from_run}");
    let report = load(&whole).unwrap().report;
    let case_time: f64 = report.results.iter().map(|r| r.duration_s).sum();
    assert_eq!(suites.len(), 1, "{from_run}");
    assert_eq!(suites[0].1, PLAN);
    assert!(
        (suites[0].2 - case_time).abs() < 1e-3,
        "suite time {} for cases taking {case_time} s: {from_run}",
        suites[0].2
    );

    // A sharded run's JUnit comes from the merge, with every shard's cases.
    let parts = shards(&dir);
    let paths: Vec<&Path> = parts.iter().map(PathBuf::as_path).collect();
    let merged_xml = dir.join("merged.xml");
    let merged_json = dir.join("merged.json");
    let mut args = vec!["merge"];
    args.extend(paths.iter().map(|p| s(p)));
    args.extend(["-o", s(&merged_json), "--junit", s(&merged_xml)]);
    let o = clhip(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let xml = std::fs::read_to_string(&merged_xml).unwrap();
    let (suites, cases) = junit_suites(&xml);
    assert_eq!(cases, PLAN, "{xml}");
    let merged = load(&merged_json).unwrap().report;
    let case_time: f64 = merged.results.iter().map(|r| r.duration_s).sum();
    assert_eq!(suites.len(), 1, "{xml}");
    assert!((suites[0].2 - case_time).abs() < 1e-3, "{xml}");

    // --junit is an output like any other: never one of the inputs.
    let o = clhip(&[
        "merge",
        s(paths[0]),
        "-o",
        s(&dir.join("m.json")),
        "--junit",
        s(paths[0]),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--junit"), "{}", text(&o.stderr));
}

#[test]
fn diff_compares_seeds_case_sets_and_flags_first_and_a_filtered_run_s_absent_cases_are_not_in_it() {
    let dir = scratch("diff-setup");
    let (all, filtered) = (dir.join("all.json"), dir.join("filtered.json"));
    run(&all, &[]);
    run(&filtered, &["--seed", "7", "-j", "2", "mock/pass/1*"]);
    // Mock runs take every mock action whatever the filters; the file is made what a filtered
    // run of real cases writes: only the cases its filters select.
    let mut r = load(&filtered).unwrap().report;
    r.results
        .retain(|c| clhip::filter::matches_filter("mock/pass/1*", &c.id));
    r.summary = Summary::of(&r.results);
    let sel = r.selection.as_mut().unwrap();
    sel.planned = r.results.len();
    sel.plan = clhip::report::Selection::plan_hash(r.results.iter().map(|c| c.id.as_str()));
    write(&r, &filtered);
    let o = clhip(&["diff", s(&all), s(&filtered)]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}{out}", text(&o.stderr));
    let default_seed = load(&all).unwrap().report.seed;
    assert!(
        out.starts_with(&format!("setup:\n  seed: {default_seed} -> 7\n")),
        "{out}"
    );
    assert!(
        out.contains("  case filters: all -> mock/pass/1*\n"),
        "{out}"
    );
    assert!(out.contains("  -j: - -> 2\n"), "{out}");
    // Setup, then the fingerprint, then the counts, then the cases.
    let at = |what: &str| out.find(what).unwrap_or_else(|| panic!("{what}: {out}"));
    assert!(at("setup:") < at("fingerprint:"));
    assert!(at("fingerprint:") < at("0 regressions"));
    let absent = PLAN - 3; // mock/pass/1, 10 and 11 are in both
    assert!(
        out.contains(&format!(
            "0 removed, {absent} not in the new run's selection"
        )),
        "{out}"
    );
    assert_eq!(out.matches("not in this run ").count(), absent, "{out}");
    assert!(!out.contains("removed     "), "{out}");
    // --only: the cases of one movement; the counts stay.
    let o = clhip(&["diff", s(&all), s(&filtered), "--only", "regressions"]);
    let only = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!only.contains("not in this run "), "{only}");
    assert!(
        only.contains(&format!("{absent} not in the new run's selection")),
        "{only}"
    );
    let o = clhip(&["diff", s(&all), s(&filtered), "--only", "not-in-this-run"]);
    assert_eq!(text(&o.stdout).matches("not in this run ").count(), absent);
    let o = clhip(&["diff", s(&all), s(&filtered), "--only", "regression"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("expected regressions, fixes"),
        "{}",
        text(&o.stderr)
    );
}
