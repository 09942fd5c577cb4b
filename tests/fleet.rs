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
        Trial::test(
            "a_lost_gpu_ends_its_pair_s_run_and_the_other_pair_finishes",
            || lost_gpu_ends_its_pair().map_err(Failed::from),
        ),
        Trial::test(
            "a_gpu_reset_after_a_passing_case_stops_its_worker_before_the_next",
            || reset_stops_the_worker().map_err(Failed::from),
        ),
        Trial::test("a_gpu_whose_health_check_passes_goes_on", || {
            healthy_gpu_goes_on().map_err(Failed::from)
        }),
        Trial::test(
            "a_kernel_warning_during_a_passing_case_is_warn_unless_allowed",
            || kernel_warning_is_warn().map_err(Failed::from),
        ),
        Trial::ignorable_test(
            "a_gpu_driver_s_line_during_a_pocl_case_is_not_its_warning",
            driver_line_beside_a_cpu_case,
        ),
        Trial::ignorable_test(
            "bench_runner_measures_worker_starts_and_a_run_prints_its_floor",
            start_floor_on_pocl,
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

/// How many cases `clhip list` finds of `cases`; where fewer than `at_least` (no PoCL here),
/// the trial's end instead: ignored with why, or failed where `CLHIP_REQUIRE_OPENCL=1` asks
/// for PoCL.
fn pocl_cases(cases: &[&str], at_least: usize) -> Result<usize, Result<Completion, Failed>> {
    let listed = match clhip().arg("list").args(cases).output() {
        Ok(out) => out,
        Err(e) => return Err(Err(e.to_string().into())),
    };
    let found = String::from_utf8_lossy(&listed.stdout).lines().count();
    if listed.status.success() && found >= at_least {
        return Ok(found);
    }
    let why = format!(
        "no PoCL cases to run ({})",
        String::from_utf8_lossy(&listed.stderr).trim()
    );
    if required("CLHIP_REQUIRE_OPENCL") {
        return Err(Err(format!("CLHIP_REQUIRE_OPENCL=1 but {why}").into()));
    }
    Err(Ok(Completion::ignored_with(why)))
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
    let cases = match pocl_cases(&POCL_CASES, 10) {
        Ok(n) => n,
        Err(end) => return end,
    };
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

/// A run of mock items over two GPUs (`mock0`, `mock1`) with a kernel log file in place of
/// /dev/kmsg and `extra` environment: its exit status, stderr and results file.
fn two_gpu_run(
    name: &str,
    mocks: &str,
    extra: &[(&str, &str)],
    args: &[&str],
) -> Result<(i32, String, Value, PathBuf), String> {
    let dir = scratch(name);
    let log = dir.join("kmsg");
    std::fs::write(&log, "").map_err(|e| e.to_string())?;
    let out = clhip()
        .args([
            "run",
            "--mock-cases",
            mocks,
            "--mock-gpus",
            "2",
            "--json",
            "r.json",
        ])
        .args(args)
        .env("CLHIP_KERNEL_LOG", &log)
        .envs(extra.iter().copied())
        .current_dir(&dir)
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = std::fs::read_to_string(dir.join("r.json"))
        .map_err(|e| format!("r.json: {e}; stderr: {stderr}"))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok((out.status.code().unwrap_or(-1), stderr, v, dir))
}

fn result<'v>(v: &'v Value, id: &str) -> Result<&'v Value, String> {
    v["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["id"] == id))
        .ok_or_else(|| format!("no result for {id}"))
}

/// `mock0` runs items 0, 2, 4, 6; `mock1` items 1, 3, 5, 7. Item 2 logs an amdgpu ring
/// timeout that names no device and dies; mock0's health check then fails (the test hook), so
/// mock0 is lost; mock1 finishes.
const LOST_MOCKS: &str = "pass,pass,gpu-lost,pass,pass,pass,pass,pass";

fn lost_gpu_ends_its_pair() -> Result<(), String> {
    let (code, err, v, dir) = two_gpu_run(
        "lost",
        LOST_MOCKS,
        &[("CLHIP_MOCK_UNHEALTHY", "mock0")],
        &[],
    )?;
    if code != 3 {
        return Err(format!("exit {code}, not 3 (a GPU lost): {err}"));
    }
    let said = "GPU mock0 lost after mock/gpu-lost/2: the kernel logged amdgpu ring timeout: `[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout";
    if !err.contains(said)
        || !err.contains("health check (a fresh process making its contexts) failed twice")
    {
        return Err(format!(
            "stderr does not say the GPU was lost, with the evidence: {err}"
        ));
    }
    let lost = v["lost_gpus"].as_array().map_or(0, Vec::len);
    if lost != 1 {
        return Err(format!("lost_gpus: {}", v["lost_gpus"]));
    }
    for id in ["mock/pass/4", "mock/pass/6"] {
        let r = result(&v, id)?;
        let reason = r["outcome"]["reason"].as_str().unwrap_or_default();
        if r["outcome"]["outcome"] != "skip"
            || !reason.starts_with("not run: GPU mock0 lost after mock/gpu-lost/2")
        {
            return Err(format!("{id}: {}", r["outcome"]));
        }
    }
    // The other pair ran every case; a line that names no device reaches its cases too,
    // as a warning.
    for id in ["mock/pass/1", "mock/pass/3", "mock/pass/5", "mock/pass/7"] {
        let o = &result(&v, id)?["outcome"]["outcome"];
        if o != "pass" && o != "warn" {
            return Err(format!("{id} on mock1: {o}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The same kernel line with a GPU that passes its health check: nothing is lost.
fn healthy_gpu_goes_on() -> Result<(), String> {
    let (code, err, v, dir) = two_gpu_run("healthy", LOST_MOCKS, &[], &[])?;
    if err.contains("lost after") || v.get("lost_gpus").is_some() {
        return Err(format!("a healthy GPU was called lost: {err}"));
    }
    for id in ["mock/pass/4", "mock/pass/6"] {
        let o = &result(&v, id)?["outcome"]["outcome"];
        if o != "pass" && o != "warn" {
            return Err(format!("{id}: {o}"));
        }
    }
    if code != 0 {
        return Err(format!("exit {code}: {err}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn kernel_warning_is_warn() -> Result<(), String> {
    let (code, err, v, dir) = two_gpu_run("warn", "kernel-warn,pass", &[], &["--junit", "j.xml"])?;
    let r = result(&v, "mock/kernel-warn/0")?;
    let line = "[mock] a warning during a passing case";
    if r["outcome"]["outcome"] != "warn"
        || !r["kernel_log"][0]
            .as_str()
            .unwrap_or_default()
            .contains(line)
    {
        return Err(format!("not a warn with its line: {r}"));
    }
    if result(&v, "mock/pass/1")?["outcome"]["outcome"] != "pass" {
        return Err("the other GPU's case caught a line that names another process".into());
    }
    // A warn is a pass: the run exits 0, JUnit has no failure and carries the lines.
    if code != 0 {
        return Err(format!("exit {code}: {err}"));
    }
    let junit = std::fs::read_to_string(dir.join("j.xml")).map_err(|e| e.to_string())?;
    if junit.contains("<failure")
        || junit.contains("<error")
        || !junit.contains("<system-err>")
        || !junit.contains("clhip.kernel-warning")
        || !junit.contains(line)
    {
        return Err(format!("JUnit: {junit}"));
    }
    // An expectation file's allow-list: the same line no longer warns.
    std::fs::write(
        dir.join("allow.toml"),
        "version = 1\nkernel_log_allow = [\"*[mock] a warning*\"]\n[applies]\nfingerprint = [\"*\"]\n",
    )
    .map_err(|e| e.to_string())?;
    let (code, err, v, dir2) = two_gpu_run(
        "allowed",
        "kernel-warn,pass",
        &[],
        &[
            "--expectations",
            &dir.join("allow.toml").display().to_string(),
        ],
    )?;
    if result(&v, "mock/kernel-warn/0")?["outcome"]["outcome"] != "pass" {
        return Err(format!("an allowed line still warns: {err}"));
    }
    if code != 0 {
        return Err(format!("exit {code}: {err}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
    Ok(())
}

fn start_floor_on_pocl() -> Result<Completion, Failed> {
    let cases = [
        "pocl0+host/copy/finish/handoff/n=1",
        "pocl0+host/copy/event/handoff/n=1",
    ];
    if let Err(end) = pocl_cases(&cases, 1) {
        return end;
    }
    let dir = scratch("starts");
    let out = clhip()
        .args([
            "bench",
            "runner",
            "--starts-only",
            "--starts",
            "4",
            "--save",
            "rate.json",
        ])
        .args(cases)
        .current_dir(&dir)
        .output()
        .map_err(|e| e.to_string())?;
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("bench runner: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    for c in [1, 2, 4, 8, 16] {
        let line = format!("pocl+host        {c:>2} at once:");
        if !printed.contains(&line) {
            return Err(format!("no `{line}` in: {printed}").into());
        }
    }
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("rate.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let rates: Vec<f64> = saved["kinds"][0]["rates"]
        .as_array()
        .ok_or("no rates saved")?
        .iter()
        .filter_map(|r| r[1].as_f64())
        .collect();
    let best = saved["best"].as_f64().unwrap_or(0.0);
    if rates.len() != 5
        || rates.iter().any(|&r| r.is_nan() || r <= 0.0)
        || rates.iter().cloned().fold(0.0, f64::max) != best
    {
        return Err(format!("saved rates {rates:?}, best {best}").into());
    }
    if !printed.contains(&format!("best: {best:.2} worker starts/s")) {
        return Err(format!("the best is not printed: {printed}").into());
    }
    // One case per worker: as many worker starts as cases, and the floor from the saved rate.
    let run = |extra: &[&str]| -> Result<(String, Value), String> {
        let out = clhip()
            .args(["run", "--cases-per-worker", "1", "--json", "r.json"])
            .args(extra)
            .args(cases)
            .current_dir(&dir)
            .output()
            .map_err(|e| e.to_string())?;
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(format!("run: {err}"));
        }
        let v = serde_json::from_str(
            &std::fs::read_to_string(dir.join("r.json")).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        Ok((err, v))
    };
    let (err, v) = run(&["--start-rate", "rate.json"])?;
    let n = v["results"].as_array().map_or(0, Vec::len);
    if v["worker_starts"].as_u64() != Some(n as u64) || n < 2 {
        return Err(format!(
            "worker_starts {} for {n} cases, one per worker",
            v["worker_starts"]
        )
        .into());
    }
    // PoCL's host pair is the one kind here: its best is the file's.
    let floor = format!(
        "start floor {:.1} s ({n} worker starts: {n} pocl+host / {best:.2}/s",
        n as f64 / best
    );
    if !err.contains(&floor) {
        return Err(format!("no `{floor}` in: {err}").into());
    }
    let (err, _) = run(&[])?;
    if !err.contains("start floor unknown: no start rate measured") {
        return Err(format!("a run without a start rate does not say so: {err}").into());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Completion::Completed)
}

/// A GPU reset logged during a case that still passed: the worker takes no further case, the
/// GPU is checked before the next one starts, and its failing health check ends its run there.
fn reset_stops_the_worker() -> Result<(), String> {
    let (code, err, v, dir) = two_gpu_run(
        "reset",
        "gpu-reset,pass,pass,pass,pass,pass",
        &[("CLHIP_MOCK_UNHEALTHY", "mock0")],
        &[],
    )?;
    if code != 3
        || !err
            .contains("GPU mock0 lost after mock/gpu-reset/0: the kernel logged amdgpu GPU reset")
    {
        return Err(format!("exit {code}: {err}"));
    }
    if result(&v, "mock/gpu-reset/0")?["outcome"]["outcome"] != "warn" {
        return Err("the case during the reset is not a warn".into());
    }
    for id in ["mock/pass/2", "mock/pass/4"] {
        let o = &result(&v, id)?["outcome"]["outcome"];
        if o != "skip" {
            return Err(format!("{id} ran on a GPU in doubt: {o}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `clhip run ARGS` in `dir` while another thread appends an NVIDIA driver line naming no
/// process or GPU to the kernel log every few milliseconds, as a GPU's firmware assertion
/// beside the run would: the results file.
fn run_beside_driver_lines(dir: &Path, args: &[&str]) -> Result<Value, String> {
    use std::io::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    let log = dir.join("kmsg");
    std::fs::write(&log, "").map_err(|e| e.to_string())?;
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&log)
                .expect("kernel log file");
            let mut seq = 0u64;
            while !stop.load(Ordering::SeqCst) {
                seq += 1;
                let _ = writeln!(
                    f,
                    "4,{seq},{seq},-;NVRM: nvAssertFailedNoLog: Assertion failed: [test] a line naming no process"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let out = clhip()
            .args(args)
            .args(["--json", "r.json"])
            .env("CLHIP_KERNEL_LOG", &log)
            .current_dir(dir)
            .output();
        stop.store(true, Ordering::SeqCst);
        out
    })
    .map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(dir.join("r.json")).map_err(|e| {
        format!(
            "r.json: {e}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// A GPU driver's line that names no process may be any GPU case's, and makes a passing one
/// `warn` (the mock's cases, on a mock GPU); a PoCL case with the host peer uses no GPU, so it
/// is not its (seen on an H200: an `NVRM: nvAssertFailedNoLog` line during a PoCL case).
fn driver_line_beside_a_cpu_case() -> Result<Completion, Failed> {
    let cases = [
        "pocl0+host/copy/finish/handoff/n=4097",
        "pocl0+host/use-host-ptr/map/handoff/n=4097",
    ];
    if let Err(end) = pocl_cases(&cases, 1) {
        return end;
    }
    let dir = scratch("cpu-warn");
    let mut args = vec!["run"];
    args.extend(cases);
    let v = run_beside_driver_lines(&dir, &args)?;
    for id in cases {
        let r = result(&v, id)?;
        if r["outcome"]["outcome"] != "pass" {
            return Err(format!("{id} is not a plain pass: {r}").into());
        }
    }
    // The control: the same lines during the mock's passing cases on a GPU make them `warn`.
    let dir = scratch("gpu-warn");
    let v = run_beside_driver_lines(
        &dir,
        &["run", "--mock-cases", "slow,slow", "--mock-gpus", "1"],
    )?;
    let warned = v["results"].as_array().map_or(0, |rs| {
        rs.iter()
            .filter(|r| r["outcome"]["outcome"] == "warn")
            .count()
    });
    if warned == 0 {
        return Err(format!("no mock case on a GPU warned: {v}").into());
    }
    Ok(Completion::Completed)
}
