//! What a CI job says to `clhip run` besides the cases: skips (`--skip`, a profile's, an
//! expectation file's `[[skip]]`), profiles of a configuration file, `--allow-empty` on a
//! runner that lacks what the job names, the device check (`--require`, a `required`
//! expectation file), `--rerun-failed`, and known flakes. Each is shown to change what runs or
//! how it is judged, never only that the flag is accepted.
//!
//! A test that needs OpenCL (real cases) is reported ignored without it, with its reason, and
//! fails instead under CLHIP_REQUIRE_OPENCL=1; which is why this file has its own harness.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        Trial::test(
            "skips_are_listed_with_their_glob_in_every_output_and_counted",
            skips_are_listed_with_their_glob_in_every_output_and_counted,
        ),
        Trial::test(
            "a_profile_sets_timeout_retries_outputs_and_skips_and_flags_win",
            a_profile_sets_timeout_retries_outputs_and_skips_and_flags_win,
        ),
        Trial::test(
            "a_profiles_jobs_run_workers_side_by_side_unless_j_says_otherwise",
            a_profiles_jobs_run_workers_side_by_side_unless_j_says_otherwise,
        ),
        Trial::test(
            "a_bad_configuration_or_profile_is_refused_naming_file_and_line",
            a_bad_configuration_or_profile_is_refused_naming_file_and_line,
        ),
        Trial::test(
            "list_marks_what_a_profile_and_skip_leave_out",
            list_marks_what_a_profile_and_skip_leave_out,
        ),
        Trial::test(
            "require_and_a_required_expectation_file_fail_before_any_case",
            require_and_a_required_expectation_file_fail_before_any_case,
        ),
        Trial::ignorable_test(
            "allow_empty_covers_filters_and_devices_that_match_nothing_here",
            allow_empty_covers_filters_and_devices_that_match_nothing_here,
        ),
        Trial::ignorable_test(
            "expectation_file_skips_and_known_flakes_on_real_cases",
            expectation_file_skips_and_known_flakes_on_real_cases,
        ),
        Trial::ignorable_test(
            "rerun_failed_runs_the_cases_worse_than_expected_with_that_runs_seed",
            rerun_failed_runs_the_cases_worse_than_expected_with_that_runs_seed,
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

fn clhip_in(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clhip"));
    cmd.args(args).current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("clhip runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-controls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `cond`, or the test fails with `why`.
fn ensure(cond: bool, why: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond { Ok(()) } else { Err(why().into()) }
}

fn exit(o: &Output, code: i32, what: &str) -> Result<(), Failed> {
    ensure(o.status.code() == Some(code), || {
        format!(
            "{what}: exit {:?}, not {code}:\n{}",
            o.status.code(),
            stderr(o)
        )
    })
}

fn results(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `(id, outcome, reason)` of each result; a timeout's reason is when it was called,
/// `after 0.504`.
fn outcomes(v: &serde_json::Value) -> Vec<(String, String, String)> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let o = &r["outcome"];
            (
                r["id"].as_str().unwrap().to_string(),
                o["outcome"].as_str().unwrap().to_string(),
                match o["after_s"].as_f64() {
                    Some(after) => format!("after {after}"),
                    None => o["reason"].as_str().unwrap_or("").to_string(),
                },
            )
        })
        .collect()
}

/// When a timeout was called, from its [`outcomes`] reason.
fn timed_out_after(reason: &str) -> f64 {
    reason
        .strip_prefix("after ")
        .and_then(|t| t.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Four cases of one pair: copy with finish and event, n=1 and n=4097.
const TINY: &str = "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\", \"event\"]\nops = [\"handoff\"]\nsizes = [1, 4097]\n";

/// Whether real cases can run here: without OpenCL the test is ignored with the reason (and
/// fails under CLHIP_REQUIRE_OPENCL=1, where `test_device` panics).
fn no_opencl() -> Option<Completion> {
    clhip::runtimes::opencl::test_device()
        .is_none()
        .then(|| Completion::ignored_with("no OpenCL device to run real cases on"))
}

/// Mock cases stand in for real ones where only the plumbing is shown: they need no driver.
fn skips_are_listed_with_their_glob_in_every_output_and_counted() -> Result<(), Failed> {
    let dir = scratch("skip");
    let out = |n: &str| dir.join(n);
    let o = clhip_in(
        &dir,
        &[
            "run",
            "--mock-cases",
            "pass,hang,fail",
            "--skip",
            "mock/hang",
            "--skip",
            "mock/f*",
            "--skip",
            "mock/nothing-like-this",
            "--json",
            "r.json",
            "--junit",
            "r.xml",
            "--markdown",
            "r.md",
            "--html",
            "r.html",
        ],
        &[],
    );
    exit(&o, 0, "a run whose failing mock is skipped")?;
    let v = results(&out("r.json"));
    let got = outcomes(&v);
    ensure(
        got == [
            ("mock/pass/0".into(), "pass".into(), String::new()),
            (
                "mock/hang/1".into(),
                "skip".into(),
                "skipped by --skip `mock/hang`".into(),
            ),
            (
                "mock/fail/2".into(),
                "skip".into(),
                "skipped by --skip `mock/f*`".into(),
            ),
        ],
        || format!("results: {got:?}"),
    )?;
    ensure(
        v["summary"]["skip"] == 2 && v["summary"]["total"] == 3,
        || format!("summary: {}", v["summary"]),
    )?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    ensure(
        stdout.contains("mock/hang/1: skipped by --skip `mock/hang`")
            && stdout.contains(" 2 skipped"),
        || format!("matrix:\n{stdout}"),
    )?;
    let junit = std::fs::read_to_string(out("r.xml")).unwrap();
    ensure(
        junit
            .matches("<skipped message=\"skipped by --skip")
            .count()
            == 2,
        || format!("JUnit:\n{junit}"),
    )?;
    for f in ["r.md", "r.html"] {
        let text = std::fs::read_to_string(out(f)).unwrap();
        ensure(
            text.contains("mock/hang/1") && text.contains("skipped by --skip"),
            || format!("{f} does not list the skipped case:\n{text}"),
        )?;
    }
    // The skipped case is not run: the hang would have taken the whole --timeout.
    ensure(v["wall_s"].as_f64().unwrap() < 60.0, || {
        "ran the hang".into()
    })?;
    // An empty glob would skip everything: refused.
    let o = clhip_in(&dir, &["run", "--mock-cases", "pass", "--skip", ""], &[]);
    exit(&o, 2, "--skip ''")?;
    ensure(stderr(&o).contains("an empty glob"), || stderr(&o))
}

fn a_profile_sets_timeout_retries_outputs_and_skips_and_flags_win() -> Result<(), Failed> {
    let dir = scratch("profile");
    std::fs::create_dir(dir.join("out")).unwrap();
    std::fs::write(
        dir.join("clhip.toml"),
        "version = 1\n\n[profile.default]\ntimeout = 0.5\n\n[profile.ci]\nretries = 1\njson = \"out/r.json\"\njunit = \"out/r.xml\"\nmarkdown = \"out/r.md\"\nhtml = \"out/r.html\"\nskip = [\"mock/slow/*\"]\n",
    )
    .unwrap();
    let mark = dir.join("flaky-mark");
    let env = [("CLHIP_MOCK_FLAKY_MARK", mark.as_path())];
    let mocks = [
        "run",
        "--profile",
        "ci",
        "--mock-cases",
        "hang,flaky-once,slow",
    ];
    // clhip.toml is read from the working directory.
    let o = clhip_in(&dir, &mocks, &env);
    exit(&o, 0, "--profile ci")?;
    ensure(stderr(&o).contains("profile `ci` of clhip.toml"), || {
        stderr(&o)
    })?;
    for f in ["r.json", "r.xml", "r.md", "r.html"] {
        ensure(dir.join("out").join(f).exists(), || {
            format!(
                "the profile's output out/{f} was not written:\n{}",
                stderr(&o)
            )
        })?;
    }
    let v = results(&dir.join("out/r.json"));
    let got = outcomes(&v);
    // The default profile's timeout, the ci profile's retries (the flaky mock fails once, then
    // passes alone: flaky, not a failure) and skip.
    ensure((0.5..0.95).contains(&timed_out_after(&got[0].2)), || {
        format!("{got:?}")
    })?;
    ensure(v["summary"]["flaky"] == 1, || format!("{}", v["summary"]))?;
    ensure(
        got[2].1 == "skip" && got[2].2 == "skipped by profile `ci` (clhip.toml:12) `mock/slow/*`",
        || format!("{got:?}"),
    )?;
    // Flags win over the profile, and --skip adds to its skips.
    std::fs::remove_file(&mark).unwrap();
    std::fs::remove_file(dir.join("out/r.json")).unwrap();
    let mut args = mocks.to_vec();
    args.extend([
        "--timeout",
        "1",
        "--retries",
        "0",
        "--json",
        "mine.json",
        "--skip",
        "mock/hang",
    ]);
    let o = clhip_in(&dir, &args, &env);
    // Without a retry, the flaky mock's first failure stands.
    exit(&o, 1, "--profile ci with flags")?;
    ensure(!dir.join("out/r.json").exists(), || {
        "--json did not win over the profile's json".into()
    })?;
    let got = outcomes(&results(&dir.join("mine.json")));
    ensure(
        got[0].2 == "skipped by --skip `mock/hang`"
            && got[1].1 == "fail"
            && got[2].2.contains("profile `ci`"),
        || format!("{got:?}"),
    )?;
    // --timeout wins: the hang, unskipped, times out after 1 s.
    let o = clhip_in(
        &dir,
        &[
            "run",
            "--profile",
            "ci",
            "--mock-cases",
            "hang",
            "--timeout",
            "1",
            "--json",
            "t.json",
        ],
        &env,
    );
    exit(&o, 0, "--timeout 1")?;
    let got = outcomes(&results(&dir.join("t.json")));
    ensure((1.0..60.0).contains(&timed_out_after(&got[0].2)), || {
        format!("{got:?}")
    })?;
    // Without --profile, the default profile applies; --config names another file, whose
    // relative paths are its directory's.
    std::fs::create_dir(dir.join("elsewhere")).unwrap();
    let o = clhip_in(
        &dir.join("elsewhere"),
        &[
            "run",
            "--config",
            "../clhip.toml",
            "--profile",
            "ci",
            "--mock-cases",
            "pass",
        ],
        &env,
    );
    exit(&o, 0, "--config ../clhip.toml")?;
    ensure(dir.join("out/r.json").exists(), || {
        format!("out/r.json not written beside the file:\n{}", stderr(&o))
    })?;
    let o = clhip_in(
        &dir,
        &["run", "--mock-cases", "hang", "--json", "d.json"],
        &env,
    );
    exit(&o, 0, "the default profile")?;
    let got = outcomes(&results(&dir.join("d.json")));
    ensure((0.5..0.95).contains(&timed_out_after(&got[0].2)), || {
        format!("{got:?}")
    })?;
    // A profile's device check: the run stops before any case.
    std::fs::write(
        dir.join("gpu.toml"),
        "version = 1\n[profile.mi100]\nrequire = [\"arch: gfx908\"]\n",
    )
    .unwrap();
    let o = clhip_in(
        &dir,
        &[
            "run",
            "--config",
            "gpu.toml",
            "--profile",
            "mi100",
            "--mock-cases",
            "pass",
            "--json",
            "g.json",
        ],
        &env,
    );
    exit(&o, 2, "a profile that requires an MI100")?;
    ensure(
        stderr(&o).contains(
            "profile `mi100` of gpu.toml: expected a device matching `arch: gfx908`; found: ",
        ) && !dir.join("g.json").exists(),
        || stderr(&o),
    )
}

/// Eight mock cases of 0.8 s each take at least 6.4 s one after another: a run well under
/// that ran them side by side. The margin is wide (four workers take about 2 s here).
fn a_profiles_jobs_run_workers_side_by_side_unless_j_says_otherwise() -> Result<(), Failed> {
    let dir = scratch("jobs");
    std::fs::write(
        dir.join("clhip.toml"),
        "version = 1\n[profile.wide]\njobs = 4\n",
    )
    .unwrap();
    let slow = ["slow"; 8].join(",");
    let wall = |extra: &[&str]| -> Result<f64, Failed> {
        let mut args = vec![
            "run",
            "--profile",
            "wide",
            "--mock-cases",
            &slow,
            "--json",
            "r.json",
        ];
        args.extend_from_slice(extra);
        let o = clhip_in(&dir, &args, &[]);
        exit(&o, 0, &format!("{args:?}"))?;
        Ok(results(&dir.join("r.json"))["wall_s"].as_f64().unwrap())
    };
    let side_by_side = wall(&[])?;
    ensure(side_by_side < 5.0, || {
        format!("jobs = 4 took {side_by_side} s for 6.4 s of cases")
    })?;
    let one_by_one = wall(&["-j", "1"])?;
    ensure(one_by_one >= 6.4, || {
        format!("-j 1 took {one_by_one} s for 6.4 s of cases")
    })
}

fn a_bad_configuration_or_profile_is_refused_naming_file_and_line() -> Result<(), Failed> {
    let dir = scratch("bad-profile");
    let previous = dir.join("r.json");
    std::fs::write(&previous, "previous results").unwrap();
    let run = |dir: &Path, extra: &[&str]| {
        let mut args = vec!["run", "--mock-cases", "pass", "--json", s(&previous)];
        args.extend_from_slice(extra);
        clhip_in(dir, &args, &[])
    };
    // No configuration file at all.
    let o = run(&dir, &["--profile", "ci"]);
    exit(&o, 2, "--profile without a file")?;
    ensure(
        stderr(&o).contains("--profile ci: no configuration file (clhip.toml"),
        || stderr(&o),
    )?;
    std::fs::write(
        dir.join("clhip.toml"),
        "version = 1\n[profile.ci]\njobs = 4\nretries = 11\n",
    )
    .unwrap();
    let o = run(&dir, &["--profile", "ci"]);
    exit(&o, 2, "retries = 11")?;
    ensure(
        stderr(&o).contains("clhip.toml:4:11: profile `ci`: `retries` must be 0 to 10, not 11"),
        || stderr(&o),
    )?;
    // A malformed file is refused even when no profile is asked for.
    std::fs::write(
        dir.join("clhip.toml"),
        "version = 1\n[profile.ci]\njobs = 4\ntimout = 30\n",
    )
    .unwrap();
    let o = run(&dir, &[]);
    exit(&o, 2, "an unknown key")?;
    ensure(
        stderr(&o).contains("clhip.toml:4:") && stderr(&o).contains("timout"),
        || stderr(&o),
    )?;
    std::fs::write(
        dir.join("clhip.toml"),
        "version = 1\n[profile.ci]\njobs = 4\n",
    )
    .unwrap();
    let o = run(&dir, &["--profile", "nightly"]);
    exit(&o, 2, "an unknown profile")?;
    ensure(
        stderr(&o).contains("clhip.toml: no profile `nightly` (it has `ci`)"),
        || stderr(&o),
    )?;
    let o = run(&dir, &["--config", "missing.toml"]);
    exit(&o, 2, "a missing --config")?;
    ensure(stderr(&o).contains("missing.toml"), || stderr(&o))?;
    // A file named on the command line that applies nothing is a mistake.
    let o = run(&dir, &["--config", "clhip.toml"]);
    exit(&o, 2, "--config without a profile")?;
    ensure(stderr(&o).contains("no --profile given"), || stderr(&o))?;
    ensure(
        std::fs::read_to_string(&previous).unwrap() == "previous results",
        || "a refused run overwrote the results".into(),
    )
}

/// On a recorded MI100-like probe: no driver needed.
fn list_marks_what_a_profile_and_skip_leave_out() -> Result<(), Failed> {
    let dir = scratch("list");
    std::fs::write(dir.join("tiny.toml"), TINY).unwrap();
    std::fs::write(
        dir.join("p.toml"),
        "version = 1\n[profile.p]\nskip = [\"*/copy/finish/*\"]\n",
    )
    .unwrap();
    let probe = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mi100-like-probe.json"
    );
    let o = clhip_in(
        &dir,
        &[
            "list",
            "--probe",
            probe,
            "--cases",
            "tiny.toml",
            "--config",
            "p.toml",
            "--profile",
            "p",
            "--skip",
            "event/handoff/n=1",
        ],
        &[],
    );
    exit(&o, 0, "list --profile p --skip")?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let marked = |part: &str, mark: &str| {
        lines
            .iter()
            .filter(|l| l.contains(part))
            .all(|l| l.ends_with(mark))
            && lines.iter().any(|l| l.contains(part))
    };
    ensure(
        lines.len() == 8
            && marked(
                "/copy/finish/",
                "  skip (profile `p` (p.toml:3) `*/copy/finish/*`)",
            )
            && marked(
                "/copy/event/handoff/n=1",
                "  skip (--skip `event/handoff/n=1`)",
            )
            && marked("/copy/event/handoff/n=4097", "/n=4097"),
        || stdout.to_string(),
    )
}

fn require_and_a_required_expectation_file_fail_before_any_case() -> Result<(), Failed> {
    let dir = scratch("require");
    let previous = dir.join("r.json");
    std::fs::write(&previous, "previous results").unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--mock-cases", "pass", "--json", s(&previous)];
        args.extend_from_slice(extra);
        clhip_in(&dir, &args, &[])
    };
    let o = run(&["--require", "arch: gfx908"]);
    exit(&o, 2, "--require arch: gfx908")?;
    let err = stderr(&o);
    ensure(
        err.contains("expected a device matching `arch: gfx908`; found: ")
            && !err.contains("cases, seed"),
        || err.clone(),
    )?;
    ensure(
        std::fs::read_to_string(&previous).unwrap() == "previous results",
        || "a refused run overwrote the results".into(),
    )?;
    // Every machine's fingerprint has a host cpu line: a pattern that matches runs.
    let o = run(&["--require", "host cpu: "]);
    exit(&o, 0, "--require host cpu")?;
    let applies = |required: bool| {
        format!(
            "version = 1\n[applies]\nfingerprint = [\"hip device * arch: gfx908*\"]\nrequired = {required}\n"
        )
    };
    let file = dir.join("mi100.toml");
    std::fs::write(&file, applies(true)).unwrap();
    let o = run(&["--expectations", s(&file)]);
    exit(&o, 2, "a required file that does not apply")?;
    ensure(
        stderr(&o).contains(&format!(
            "{} (required): expected a device matching `hip device * arch: gfx908*`; found: ",
            file.display()
        )),
        || stderr(&o),
    )?;
    // Not required: the run goes on, warned that nothing applies.
    std::fs::write(&file, applies(false)).unwrap();
    let o = run(&["--expectations", s(&file)]);
    exit(&o, 0, "a file that does not apply, not required")?;
    ensure(stderr(&o).contains("none applies"), || stderr(&o))
}

fn allow_empty_covers_filters_and_devices_that_match_nothing_here() -> Result<Completion, Failed> {
    if let Some(ignored) = no_opencl() {
        return Ok(ignored);
    }
    let dir = scratch("allow-empty");
    std::fs::write(dir.join("tiny.toml"), TINY).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--cases", "tiny.toml", "--json", "r.json"];
        args.extend_from_slice(extra);
        clhip_in(&dir, &args, &[])
    };
    for what in [&["nvidia7"][..], &["--devices", "nvidia7"]] {
        let o = run(what);
        exit(&o, 2, &format!("{what:?} without --allow-empty"))?;
        let mut with = what.to_vec();
        with.push("--allow-empty");
        let o = run(&with);
        exit(&o, 0, &format!("{with:?}"))?;
        ensure(stderr(&o).contains("warning:"), || stderr(&o))?;
        let got = outcomes(&results(&dir.join("r.json")));
        // What matches nothing narrows the run to nothing, never widens it to everything.
        ensure(got.is_empty(), || format!("{with:?} ran {got:?}"))?;
    }
    // A filter and a device that match, beside ones that do not: those that match run.
    let o = run(&[
        "nvidia7",
        "copy/finish/",
        "--devices",
        "nvidia7,pocl0",
        "--allow-empty",
    ]);
    exit(
        &o,
        0,
        "a filter and a device that match beside ones that do not",
    )?;
    let got = outcomes(&results(&dir.join("r.json")));
    ensure(
        got.len() == 2
            && got
                .iter()
                .all(|(id, o, _)| id.contains("/copy/finish/") && o == "pass"),
        || format!("{got:?}"),
    )?;
    Ok(Completion::Completed)
}

fn expectation_file_skips_and_known_flakes_on_real_cases() -> Result<Completion, Failed> {
    if let Some(ignored) = no_opencl() {
        return Ok(ignored);
    }
    let dir = scratch("flakes");
    std::fs::write(dir.join("tiny.toml"), TINY).unwrap();
    let expectations = |flaky: &str| {
        format!(
            "version = 1\n[applies]\nfingerprint = [\"opencl * driver: *\"]\n\n[[skip]]\ncases = [\"*/copy/event/*\", \"*/no-such-path/*\"]\nreason = \"hangs this driver\"\n\n[[flaky]]\ncases = [\"*/copy/finish/*\"]\noutcomes = [{flaky}]\nsource = \"two nights\"\n"
        )
    };
    // The plant makes every case that runs come out `fail`.
    let run = |flaky: &str| {
        std::fs::write(dir.join("e.toml"), expectations(flaky)).unwrap();
        clhip_in(
            &dir,
            &[
                "run",
                "--cases",
                "tiny.toml",
                "--expectations",
                "e.toml",
                "--plant",
                "flip-element",
                "--json",
                "r.json",
            ],
            &[],
        )
    };
    let o = run("\"pass\", \"fail\"");
    exit(&o, 0, "a known flake that came out fail")?;
    ensure(
        stderr(&o).contains("e.toml:5 `*/no-such-path/*` matches no case"),
        || stderr(&o),
    )?;
    let v = results(&dir.join("r.json"));
    let got = outcomes(&v);
    let skipped: Vec<_> = got.iter().filter(|(_, o, _)| o == "skip").collect();
    ensure(
        skipped.len() == 2
            && skipped.iter().all(|(id, _, why)| {
                id.contains("/copy/event/") && why == "skipped by e.toml:5: hangs this driver"
            }),
        || format!("{got:?}"),
    )?;
    ensure(
        v["summary"]["fail"] == 2
            && v["summary"]["known_flaky"] == 2
            && v["summary"]["unexpected"] == 0,
        || format!("{}", v["summary"]),
    )?;
    ensure(
        String::from_utf8_lossy(&o.stdout).contains("2 known flakes struck"),
        || String::from_utf8_lossy(&o.stdout).into_owned(),
    )?;
    // A flake of other outcomes does not cover a `fail`: the run fails on it.
    let o = run("\"pass\", \"timeout\"");
    exit(&o, 1, "a known flake of pass or timeout that came out fail")?;
    let v = results(&dir.join("r.json"));
    ensure(
        v["summary"]["unexpected"] == 2 && v["summary"].get("known_flaky").is_none(),
        || format!("{}", v["summary"]),
    )?;
    Ok(Completion::Completed)
}

fn rerun_failed_runs_the_cases_worse_than_expected_with_that_runs_seed()
-> Result<Completion, Failed> {
    if let Some(ignored) = no_opencl() {
        return Ok(ignored);
    }
    let dir = scratch("rerun");
    std::fs::write(dir.join("tiny.toml"), TINY).unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["run", "--cases", "tiny.toml"];
        all.extend_from_slice(args);
        clhip_in(&dir, &all, &[])
    };
    // One case of four planted to fail.
    let o = run(&[
        "--plant",
        "flip-element",
        "--plant-only",
        "copy/event/handoff/n=1",
        "--seed",
        "7",
        "--json",
        "first.json",
    ]);
    exit(&o, 1, "the planted run")?;
    let first = outcomes(&results(&dir.join("first.json")));
    let failed: Vec<&String> = first
        .iter()
        .filter(|(_, o, _)| o == "fail")
        .map(|(id, _, _)| id)
        .collect();
    ensure(failed.len() == 1, || format!("{first:?}"))?;
    let o = run(&["--rerun-failed", "first.json", "--json", "again.json"]);
    exit(&o, 0, "the rerun, unplanted")?;
    let again = results(&dir.join("again.json"));
    let rerun: Vec<String> = outcomes(&again).into_iter().map(|(id, _, _)| id).collect();
    ensure(rerun == [failed[0].clone()], || format!("reran {rerun:?}"))?;
    ensure(again["seed"] == 7, || format!("seed {}", again["seed"]))?;
    // Nothing failed in the rerun: nothing to rerun, which --allow-empty accepts.
    let o = run(&["--rerun-failed", "again.json", "--json", "third.json"]);
    exit(&o, 2, "a rerun of a clean run")?;
    ensure(stderr(&o).contains("nothing to rerun"), || stderr(&o))?;
    let o = run(&[
        "--rerun-failed",
        "again.json",
        "--json",
        "third.json",
        "--allow-empty",
    ]);
    exit(&o, 0, "a rerun of a clean run with --allow-empty")?;
    // A failure that is no case here: another machine's run.
    let text = std::fs::read_to_string(dir.join("first.json"))
        .unwrap()
        .replace(failed[0].as_str(), "nvidia0+cuda0/copy/event/handoff/n=1");
    std::fs::write(dir.join("other.json"), text).unwrap();
    let o = run(&["--rerun-failed", "other.json", "--json", "fourth.json"]);
    exit(&o, 2, "a rerun of another machine's run")?;
    ensure(
        stderr(&o).contains("`nvidia0+cuda0/copy/event/handoff/n=1`"),
        || stderr(&o),
    )?;
    // The failed cases are the selection: filters beside them are refused.
    let o = run(&["--rerun-failed", "first.json", "copy"]);
    exit(&o, 2, "--rerun-failed with a filter")?;
    Ok(Completion::Completed)
}
