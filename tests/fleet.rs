//! Nightly life on hardware that dies: a run killed mid-case (SIGKILL of the runner's process
//! group, as a reboot leaves it) and resumed from its journal; a lost GPU that ends its pair's
//! run while the other pair finishes; a kernel warning during a passing case; the worker-start
//! throughput `bench runner` measures, and the floor a run prints from it.
//!
//! The resume and bench trials need OpenCL (PoCL; `CLHIP_REQUIRE_OPENCL=1` makes its absence a
//! failure); the rest run the real `clhip` with mock work items and a kernel log file in place
//! of /dev/kmsg.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use serde_json::Value;

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        Trial::ignorable_test(
            "a_run_killed_at_a_random_point_resumes_to_the_uninterrupted_verdicts",
            killed_and_resumed_on_pocl,
        ),
        Trial::test(
            "a_case_incomplete_twice_in_a_row_is_skipped_on_the_next_resume",
            || incomplete_twice_is_skipped().map_err(Failed::from),
        ),
        Trial::test(
            "a_resume_of_another_run_is_refused_naming_what_differs",
            || another_run_is_refused().map_err(Failed::from),
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

fn clhip() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
}

fn required(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// A scratch directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The journal's lines: (started ids in flight, result count).
fn journal_state(journal: &Path) -> (Vec<String>, usize) {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    let mut in_flight: Vec<String> = Vec::new();
    let mut results = 0;
    for line in text.lines().skip(1) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(id) = v.get("started").and_then(Value::as_str) {
            in_flight.push(id.to_string());
        } else if let Some(id) = v.get("id").and_then(Value::as_str) {
            in_flight.retain(|i| i != id);
            results += 1;
        }
    }
    (in_flight, results)
}

/// Starts `clhip ARGS` as the leader of its own process group, waits until `ready` says so of
/// its journal, and kills the group with SIGKILL (the runner; its workers die with it). Returns
/// whether `ready` came true before the run ended by itself.
fn kill_when(
    args: &[&str],
    dir: &Path,
    journal: &Path,
    ready: impl Fn(&[String], usize) -> bool,
) -> Result<bool, String> {
    let mut child = clhip()
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting clhip: {e}"))?;
    let pgid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (in_flight, results) = journal_state(journal);
        if ready(&in_flight, results) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            return Ok(true);
        }
        if child.try_wait().map_err(|e| e.to_string())?.is_some() || Instant::now() > deadline {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Each case's (outcome, verdict-relevant expectation) from a results file.
fn outcomes(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(v["results"]
        .as_array()
        .ok_or("no results")?
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or_default().to_string(),
                r["outcome"]["outcome"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect())
}

fn run_to_end(args: &[&str], dir: &Path) -> Result<(i32, String), String> {
    let out = clhip()
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("starting clhip: {e}"))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The cases of PoCL whose outcome does not race: no negative control (`none`, which races
/// by design).
const POCL_CASES: [&str; 3] = [
    "pocl0+host/*/finish/handoff/*",
    "pocl0+host/*/map/handoff/*",
    "pocl0+host/*/event/handoff/*",
];

fn killed_and_resumed_on_pocl() -> Result<Completion, Failed> {
    let listed = clhip()
        .arg("list")
        .args(POCL_CASES)
        .output()
        .map_err(|e| e.to_string())?;
    let cases = String::from_utf8_lossy(&listed.stdout).lines().count();
    if !listed.status.success() || cases < 10 {
        let why = format!(
            "no PoCL cases to run ({})",
            String::from_utf8_lossy(&listed.stderr).trim()
        );
        if required("CLHIP_REQUIRE_OPENCL") {
            return Err(format!("CLHIP_REQUIRE_OPENCL=1 but {why}").into());
        }
        return Ok(Completion::ignored_with(why));
    }
    let dir = scratch("resume");
    let whole = dir.join("whole.json");
    let mut args: Vec<&str> = vec!["run", "--json"];
    let whole_s = whole.display().to_string();
    args.push(&whole_s);
    args.extend(POCL_CASES);
    let (code, err) = run_to_end(&args, &dir)?;
    if code != 0 {
        return Err(format!("the uninterrupted run exited {code}: {err}").into());
    }
    let want = outcomes(&whole)?;

    // A random point: after a random number of finished cases, while a case is running.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.subsec_nanos() as usize);
    let journal = dir.join("cut.json.partial");
    let mut killed_during = None;
    for attempt in 0..5 {
        let _ = std::fs::remove_file(&journal);
        let after = 2 + (seed + attempt * 7) % (cases - 4);
        let mut args = vec!["run", "--json", "cut.json"];
        args.extend(POCL_CASES);
        let killed = kill_when(&args, &dir, &journal, |in_flight, results| {
            results >= after && !in_flight.is_empty()
        })?;
        let (in_flight, _) = journal_state(&journal);
        eprintln!(
            "attempt {attempt}: killed after {after} results: {killed}, in flight {in_flight:?}"
        );
        // The kill may land just after the case ended: then no case was in flight.
        if killed && in_flight.len() == 1 {
            killed_during = Some(in_flight[0].clone());
            break;
        }
    }
    let Some(in_flight) = killed_during else {
        return Err("five kills found no case in flight".into());
    };
    let mut args = vec!["run", "--resume", "cut.json.partial"];
    args.extend(POCL_CASES);
    let (code, err) = run_to_end(&args, &dir)?;
    if !err.contains(&format!(
        "`{in_flight}` was running when the run died: incomplete, not run again"
    )) {
        return Err(format!("the resume did not name the case in flight: {err}").into());
    }
    // An incomplete case needs a look: the run fails on it.
    if code != 1 {
        return Err(format!("the resumed run exited {code}, not 1: {err}").into());
    }
    if journal.exists() {
        return Err("the journal outlived the resumed run's results".into());
    }
    let got = outcomes(&dir.join("cut.json"))?;
    let mut expected = want.clone();
    expected.insert(in_flight.clone(), "incomplete".into());
    if got != expected {
        let differ: Vec<String> = expected
            .iter()
            .filter(|(id, o)| got.get(*id) != Some(o))
            .map(|(id, o)| format!("{id}: want {o}, got {:?}", got.get(id)))
            .collect();
        return Err(format!(
            "the resumed run is not the whole run plus `{in_flight}` incomplete: {differ:?} ({} results)",
            got.len()
        )
        .into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Completion::Completed)
}

/// A mock run killed twice while its hanging case runs: the first resume makes it incomplete
/// and runs it once more (asked to); the second finds it incomplete twice in a row and skips it.
fn incomplete_twice_is_skipped() -> Result<(), String> {
    let dir = scratch("twice");
    let journal = dir.join("m.json.partial");
    let hang = "mock/hang/2";
    let mocks = "--mock-cases=pass,pass,hang,pass";
    let ran_hang = |in_flight: &[String], _: usize| in_flight.iter().any(|i| i == hang);
    let base = ["run", mocks, "--timeout", "60"];
    let mut first: Vec<&str> = base.to_vec();
    first.extend(["--json", "m.json"]);
    if !kill_when(&first, &dir, &journal, ran_hang)? {
        return Err("the hang case never started".into());
    }
    let mut again: Vec<&str> = base.to_vec();
    again.extend(["--resume", "m.json.partial", "--rerun-incomplete"]);
    // Not before the resume has recorded the first death (a third result line): until then
    // the journal still shows the first run's start.
    let ran_hang_again = |f: &[String], results: usize| results >= 3 && ran_hang(f, results);
    if !kill_when(&again, &dir, &journal, ran_hang_again)? {
        return Err("the resume did not run the incomplete case again".into());
    }
    let (_, err) = run_to_end(&again, &dir)?;
    if !err.contains(&format!(
        "`{hang}` was running when the run died 2 times in a row: skipped, incomplete"
    )) {
        return Err(format!("the second resume did not skip it: {err}"));
    }
    let got = outcomes(&dir.join("m.json"))?;
    let want: BTreeMap<String, String> = [
        ("mock/pass/0", "pass"),
        ("mock/pass/1", "pass"),
        (hang, "incomplete"),
        ("mock/pass/3", "pass"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    if got != want {
        return Err(format!("{got:?}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A resume with another seed, flag or case set is refused, each difference named, and the
/// journal is left as it was.
fn another_run_is_refused() -> Result<(), String> {
    let dir = scratch("refused");
    let journal = dir.join("m.json.partial");
    let mocks = "--mock-cases=pass,hang,pass";
    if !kill_when(
        &["run", mocks, "--timeout", "60", "--json", "m.json"],
        &dir,
        &journal,
        |f, _| !f.is_empty() && f[0] == "mock/hang/1",
    )? {
        return Err("the hang case never started".into());
    }
    let before = std::fs::read(&journal).map_err(|e| e.to_string())?;
    let (code, err) = run_to_end(
        &[
            "run",
            "--mock-cases=pass,hang,pass,pass",
            "--timeout",
            "30",
            "--seed",
            "9",
            "--resume",
            "m.json.partial",
        ],
        &dir,
    )?;
    for needle in [
        "not resumed: this run is not the one the journal holds",
        "the seed: 24301 in the journal, 9 now",
        "--timeout: 60 in the journal, 30 now",
        "--mock-cases: pass,hang,pass in the journal, pass,hang,pass,pass now",
    ] {
        if !err.contains(needle) {
            return Err(format!("no `{needle}` in: {err}"));
        }
    }
    if code != 2 {
        return Err(format!("exit {code}, not 2"));
    }
    if std::fs::read(&journal).map_err(|e| e.to_string())? != before {
        return Err("the refused resume changed the journal".into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
