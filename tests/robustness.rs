//! A run that survives its users and its own mistakes: interruption, job control, closed and
//! full streams, nonsense flags, outputs that must not destroy anything, a binary replaced
//! mid-run, and results files that are incomplete or lie about themselves. Each test runs the
//! real binary; those that need OpenCL run on PoCL on CI (and fail there if it is missing).

#[macro_use]
mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use clhip::model::OutcomeKind;
use clhip::report::{RunStatus, load};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_clhip")
}

fn clhip(args: &[&str]) -> Output {
    Command::new(exe()).args(args).output().expect("clhip runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-robust-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Starts `clhip ARGS --json JSON` (in its own process group with `own_group`, as a shell
/// job is) and returns once it has printed its plan: its workers are starting.
fn start_run(args: &[&str], json: &Path, own_group: bool) -> std::process::Child {
    let mut cmd = Command::new(exe());
    cmd.args(args)
        .arg("--json")
        .arg(json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if own_group {
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("cases, seed") {
        line.clear();
    }
    // Keep draining stderr so the run never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}

/// Reads the results JSON `from`, lets `edit` change it, and writes it to `to`: how these
/// tests make files that lie, contradict themselves or come from another driver.
fn edit_json(from: &Path, to: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(to, serde_json::to_string(&v).unwrap()).unwrap();
}

/// Waits until `path` has at least `lines` lines, or panics after `within`.
fn wait_for_lines(path: &Path, lines: usize, within: Duration) {
    let began = Instant::now();
    loop {
        let n = std::fs::read_to_string(path).map_or(0, |t| t.lines().count());
        if n >= lines {
            return;
        }
        assert!(began.elapsed() < within, "{} has {n} lines", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ctrl_c_halfway_keeps_finished_cases_marks_the_run_interrupted_and_exits_130() {
    support::opencl_device();
    let dir = scratch("sigint");
    let json = dir.join("r.json");
    std::fs::write(&json, "an older complete file").unwrap();
    let planned = text(&clhip(&["list"]).stdout).lines().count();
    let child = Command::new(exe())
        .args(["run", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let journal = dir.join("r.json.partial");
    // The header and five finished cases, each after its start line.
    wait_for_lines(&journal, 11, Duration::from_secs(120));
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let loaded = load(&json).unwrap();
    let r = &loaded.report;
    assert_eq!(r.status, RunStatus::Interrupted);
    assert!(r.results.len() >= 5, "{}", r.results.len());
    assert!(
        !r.not_run.is_empty(),
        "a run stopped halfway has cases not run"
    );
    assert_eq!(
        r.results.len() + r.not_run.len(),
        planned,
        "every case accounted for"
    );
    assert!(!loaded.problems.is_empty(), "an interrupted file says so");
    assert!(
        !journal.exists(),
        "the journal is removed once the results are written"
    );
    // `report` shows it, says it is incomplete, and exits non-zero.
    let o = clhip(&["report", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("incomplete: interrupted"),
        "{}",
        text(&o.stderr)
    );
}

fn a_runner_that_dies_leaves_its_finished_cases_in_the_journal() {
    support::opencl_device();
    let dir = scratch("sigkill");
    let json = dir.join("r.json");
    let mut child = Command::new(exe())
        .args(["run", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal = dir.join("r.json.partial");
    // The header and three finished cases, each after its start line.
    wait_for_lines(&journal, 7, Duration::from_secs(120));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!json.exists(), "no complete file was claimed");
    let loaded = load(&journal).unwrap();
    assert_eq!(loaded.report.status, RunStatus::InProgress);
    assert!(
        loaded.problems.iter().all(|p| !p.contains("inconsistent")),
        "a journal is incomplete, not inconsistent: {:?}",
        loaded.problems
    );
    assert!(loaded.report.results.len() >= 3);
    let o = clhip(&["report", journal.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("runner died"),
        "{}",
        text(&o.stderr)
    );
}

fn ctrl_z_stops_the_workers_too_and_stopped_time_counts_against_no_case() {
    let dir = scratch("sigtstp");
    let json = dir.join("r.json");
    let mut child = start_run(
        &[
            "run",
            "--mock-cases",
            "slow,slow,slow,slow",
            "--timeout",
            "1.5",
        ],
        &json,
        true,
    );
    std::thread::sleep(Duration::from_millis(900));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTSTP).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let status = child.wait().unwrap();
    let r = load(&json).unwrap().report;
    let kinds: Vec<OutcomeKind> = r.results.iter().map(|r| r.outcome.kind()).collect();
    assert_eq!(kinds, [OutcomeKind::Pass; 4], "{:?}", r.results);
    assert_eq!(status.code(), Some(0));
}

/// The child processes of `pid` (its workers), from /proc.
fn children(pid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    out
}

fn a_plain_sigstop_of_the_whole_process_tree_counts_against_no_case() {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let dir = scratch("sigstop");
    let json = dir.join("r.json");
    // Cases of 0.8 s against a 1.5 s limit, the whole tree stopped for 3 s in the first one.
    let mut child = start_run(
        &[
            "run",
            "--mock-cases",
            "slow,slow,slow",
            "--timeout",
            "1.5",
            "--cases-per-worker",
            "1",
        ],
        &json,
        true,
    );
    let began = Instant::now();
    while children(child.id()).is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "no worker started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let runner = Pid::from_raw(child.id() as i32);
    // `kill -STOP -PGID` of the runner's group, then of each worker's (each leads its own).
    killpg(runner, Signal::SIGSTOP).unwrap();
    let workers = children(child.id());
    assert!(!workers.is_empty(), "a worker runs the first case");
    for &w in &workers {
        let _ = killpg(Pid::from_raw(w), Signal::SIGSTOP);
    }
    std::thread::sleep(Duration::from_secs(3));
    killpg(runner, Signal::SIGCONT).unwrap();
    for &w in &workers {
        let _ = killpg(Pid::from_raw(w), Signal::SIGCONT);
    }
    let status = child.wait().unwrap();
    let r = load(&json).unwrap().report;
    let kinds: Vec<OutcomeKind> = r.results.iter().map(|r| r.outcome.kind()).collect();
    assert_eq!(kinds, [OutcomeKind::Pass; 3], "{:?}", r.results);
    assert_eq!(status.code(), Some(0));
}

fn bench_runner_times_a_jobs_value_given_twice_once_and_says_so() {
    support::opencl_device();
    let o = clhip(&[
        "bench",
        "runner",
        "-j",
        "2,2",
        "pocl0+host/copy/finish/handoff/n=4097",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("-j 2 is given 2 times: timed once"),
        "{}",
        text(&o.stderr)
    );
    let settings: Vec<String> = text(&o.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("-j "))
        .map(str::to_string)
        .collect();
    assert_eq!(settings.len(), 1, "{}", text(&o.stdout));
}

fn nonsense_flags_are_refused_before_any_work() {
    for args in [
        &["run", "--timeout", "-1"][..],
        &["run", "--timeout", "nan"],
        &["run", "--timeout", "inf"],
        &["run", "--timeout", "1e30"],
        &["run", "--timeout", "1e19"],
        &["run", "--timeout", "0"],
        &["run", "-j", "0"],
        &["run", "-j", "100000"],
        &["run", "--cases-per-worker", "0"],
        &["run", "--rocm-path", "/nonexistent"],
        &["probe", "--rocm-path", "/nonexistent"],
        &["list", "--rocm-path", "/etc/passwd"],
    ] {
        let began = Instant::now();
        let o = clhip(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(!text(&o.stderr).is_empty(), "{args:?} says why");
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{args:?} was refused late"
        );
    }
}

fn bad_output_paths_are_refused_before_the_first_case_and_destroy_nothing() {
    let dir = scratch("outputs");
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\"]\nsizes = [4]\n",
    )
    .unwrap();
    let same = dir.join("same.json");
    let refused: Vec<Vec<String>> = vec![
        vec!["--json".into(), dir.display().to_string()],
        vec!["--json".into(), "/proc/version/x/r.json".into()],
        vec![
            "--json".into(),
            same.display().to_string(),
            "--junit".into(),
            same.display().to_string(),
        ],
        vec!["--json".into(), cases.display().to_string()],
    ];
    for extra in refused {
        let began = Instant::now();
        let mut args = vec![
            "run".to_string(),
            "--cases".into(),
            cases.display().to_string(),
        ];
        args.extend(extra.clone());
        let o = Command::new(exe()).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o.stderr));
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{extra:?} was refused late"
        );
    }
    assert!(
        std::fs::read_to_string(&cases)
            .unwrap()
            .starts_with("version = 1")
    );
    assert!(!same.exists());
}

fn json_onto_a_device_node_or_a_link_keeps_the_node_and_the_link() {
    let dir = scratch("special");
    let o = clhip(&["run", "--mock-cases", "pass", "--json", "/dev/null"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    let real = dir.join("real.json");
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    std::fs::write(&real, "old").unwrap();
    let o = clhip(&[
        "run",
        "--mock-cases",
        "pass",
        "--json",
        link.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(load(&real).unwrap().report.results.len(), 1);
}

fn a_run_of_nothing_fails_unless_asked_for() {
    support::opencl_device();
    let dir = scratch("empty");
    let cases = dir.join("gemm-only.toml");
    // gemm needs a BLAS on the peer: nothing on a machine whose only pair is OpenCL + host.
    std::fs::write(
        &cases,
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"gemm\"]\nsizes = [4]\n",
    )
    .unwrap();
    let json = dir.join("r.json");
    let base = [
        "run",
        "pocl0+host",
        "--cases",
        cases.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let o = clhip(&base);
    if o.status.code() == Some(2) && text(&o.stderr).contains("matches none") {
        // The pocl0+host filter matched nothing: the same refusal, earlier.
    } else {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("nothing to run"),
            "{}",
            text(&o.stderr)
        );
    }
    let mut allowed = base.to_vec();
    allowed.retain(|a| *a != "pocl0+host");
    allowed.push("--allow-empty");
    let o = clhip(&allowed);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// Runs `args` with stdout closed before it writes (a pipe whose reader is gone) or onto
/// /dev/full, and stderr onto /dev/full too.
fn with_broken_stdout(args: &[&str], full: bool) -> Output {
    let mut cmd = Command::new(exe());
    cmd.args(args).stderr(
        std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    );
    if full {
        cmd.stdout(
            std::fs::File::options()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        );
        return cmd.output().unwrap();
    }
    cmd.stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

fn no_subcommand_panics_on_a_closed_or_full_stdout_and_results_survive() {
    let dir = scratch("streams");
    let json = dir.join("r.json");
    let rendered = dir.join("render.json");
    let o = clhip(&[
        "run",
        "--mock-cases",
        "pass,fail",
        "--json",
        rendered.to_str().unwrap(),
    ]);
    assert!(rendered.exists(), "{}", text(&o.stderr));
    let runs: Vec<Vec<&str>> = vec![
        vec!["probe"],
        vec!["probe", "--json"],
        vec!["list", "--probe", "tests/fixtures/nvidia-h200-probe.json"],
        vec!["report", rendered.to_str().unwrap()],
        vec!["report", rendered.to_str().unwrap(), "--markdown"],
        vec!["bench", "refs"],
        vec![
            "run",
            "--mock-cases",
            "pass,pass",
            "--json",
            json.to_str().unwrap(),
        ],
    ];
    for args in &runs {
        let closed = with_broken_stdout(args, false);
        assert_ne!(
            closed.status.code(),
            Some(101),
            "{args:?} panicked on a closed pipe"
        );
        assert!(
            closed.status.code().is_some(),
            "{args:?} died by a signal on a closed pipe"
        );
        let full = with_broken_stdout(args, true);
        assert_ne!(
            full.status.code(),
            Some(101),
            "{args:?} panicked on a full stdout"
        );
        assert_ne!(
            full.status.code(),
            Some(0),
            "{args:?} wrote nothing yet exited 0"
        );
    }
    // A closed stdout ends the run's printing quietly: the exit is the run's, the file whole.
    let closed = with_broken_stdout(&runs[6], false);
    assert_eq!(closed.status.code(), Some(0));
    assert_eq!(load(&json).unwrap().report.results.len(), 2);
}

fn a_results_file_whose_summary_lies_is_shown_as_inconsistent() {
    let dir = scratch("lying");
    let json = dir.join("r.json");
    let o = clhip(&[
        "run",
        "--mock-cases",
        "pass,pass,pass",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lying = dir.join("lying.json");
    edit_json(&json, &lying, |v| {
        v["summary"]["pass"] = serde_json::json!(999)
    });
    let o = clhip(&["report", lying.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("inconsistent"),
        "{}",
        text(&o.stderr)
    );
    assert!(text(&o.stdout).contains("3 passed"), "{}", text(&o.stdout));
    // Every result twice, and the summary doubled to match: still a lie.
    edit_json(&json, &lying, |v| {
        let results = v["results"].as_array().unwrap().clone();
        v["results"].as_array_mut().unwrap().extend(results);
        v["summary"]["pass"] = serde_json::json!(6);
        v["summary"]["total"] = serde_json::json!(6);
    });
    let o = clhip(&["report", lying.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("more than one result"),
        "{}",
        text(&o.stderr)
    );
    // Complete, yet with cases not run.
    edit_json(&json, &lying, |v| {
        v["not_run"] = serde_json::json!(["mock/pass/9"])
    });
    let o = clhip(&["report", lying.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("marked complete with 1 cases not run"),
        "{}",
        text(&o.stderr)
    );
}

fn replacing_the_binary_mid_run_does_not_stop_the_run() {
    let dir = scratch("replace");
    let copy = dir.join("clhip");
    std::fs::copy(exe(), &copy).unwrap();
    let json = dir.join("r.json");
    let mut child = Command::new(&copy)
        .args([
            "run",
            "--mock-cases",
            "slow,slow,slow",
            "--cases-per-worker",
            "1",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    // As `cargo build` does: a new file in its place.
    std::fs::remove_file(&copy).unwrap();
    std::fs::write(&copy, b"#!/bin/sh\nexit 99\n").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let r = load(&json).unwrap().report;
    assert!(
        r.results
            .iter()
            .all(|r| r.outcome.kind() == OutcomeKind::Pass),
        "{:?}",
        r.results
    );
}

fn a_buffer_larger_than_the_device_can_allocate_is_refused_without_a_worker() {
    support::opencl_device();
    let probe: clhip::probe::Probe =
        serde_json::from_slice(&clhip(&["probe", "--json"]).stdout).unwrap();
    let Some(max) = probe
        .platforms
        .iter()
        .flat_map(|p| &p.devices)
        .find(|d| d.label == "pocl0")
        .and_then(|d| match d.max_alloc_bytes {
            clhip::probe::Queried::Value(v) => Some(v),
            _ => None,
        })
    else {
        support::ignore("CLHIP_REQUIRE_OPENCL", "no pocl0 with a max_alloc_bytes");
    };
    // One element more than fits in the largest allocation, if the harness's own limits allow
    // such a size at all.
    let n = max / 8 + 1;
    if clhip::cases::check_size(
        clhip::model::Op::Handoff,
        n as usize,
        &clhip::cases::Limits::HARNESS,
    )
    .is_err()
    {
        support::not_applicable(format!(
            "pocl0's largest allocation ({max} bytes) is past the harness's own size limits"
        ));
    }
    let dir = scratch("too-big");
    let cases = dir.join("big.toml");
    std::fs::write(
        &cases,
        format!("version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\"]\nsizes = [{n}]\n"),
    )
    .unwrap();
    let json = dir.join("r.json");
    let o = clhip(&[
        "run",
        "pocl0+host",
        "--cases",
        cases.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = load(&json).unwrap().report;
    assert_eq!(r.results.len(), 1);
    assert_eq!(r.results[0].outcome.kind(), OutcomeKind::Unsupported);
    assert!(
        r.results[0]
            .outcome
            .reason()
            .contains("CL_DEVICE_MAX_MEM_ALLOC_SIZE"),
        "{}",
        r.results[0].outcome.reason()
    );
}

fn baseline_entries_that_match_no_case_are_warned_and_counted() {
    support::opencl_device();
    let dir = scratch("stale");
    let baseline = dir.join("b.csv");
    std::fs::write(
        &baseline,
        "pocl0+host/copy/finish/fft/n=1,unsupported\npocl0+host/no-such-path/finish/fft/n=4,fail\n",
    )
    .unwrap();
    let json = dir.join("r.json");
    let o = clhip(&[
        "run",
        "pocl0+host/copy/finish/handoff/n=1",
        "--baseline",
        baseline.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("`pocl0+host/copy/finish/fft/n=1` matches no case"),
        "{err}"
    );
    assert!(err.contains("2 baseline entries match no case"), "{err}");
    assert_eq!(load(&json).unwrap().report.stale_baseline.len(), 2);
}

fn merged_partition_shards_equal_the_unpartitioned_run() {
    support::opencl_device();
    let dir = scratch("partition");
    let filter = "pocl0+host/*/handoff/*";
    let whole = dir.join("whole.json");
    let o = clhip(&["run", filter, "--json", whole.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut shards = Vec::new();
    for m in 1..=3 {
        let shard = dir.join(format!("shard{m}.json"));
        let spec = format!("hash:{m}/3");
        let o = clhip(&[
            "run",
            filter,
            "--partition",
            &spec,
            "--json",
            shard.to_str().unwrap(),
            "--allow-empty",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        shards.push(shard);
    }
    let merged = dir.join("merged.json");
    let mut args = vec!["merge".to_string()];
    args.extend(shards.iter().map(|s| s.display().to_string()));
    args.extend(["-o".to_string(), merged.display().to_string()]);
    let o = Command::new(exe()).args(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let verdicts = |p: &Path| {
        let r = load(p).unwrap().report;
        let mut v: Vec<(String, Option<OutcomeKind>)> = r
            .results
            .iter()
            .map(|c| {
                // Negative controls race by design: their ids must match, not their outcomes.
                let control = c.work.case().is_some_and(|c| c.is_negative_control());
                (c.id.clone(), (!control).then(|| c.outcome.kind()))
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(verdicts(&merged), verdicts(&whole));
    // The shards are disjoint: merging one twice is refused.
    let o = Command::new(exe())
        .args([
            "merge",
            shards[0].to_str().unwrap(),
            shards[0].to_str().unwrap(),
            "-o",
        ])
        .arg(dir.join("twice.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("is in both"),
        "{}",
        text(&o.stderr)
    );
    // A shard from another driver is refused, naming what differs.
    let other = dir.join("other-driver.json");
    edit_json(&shards[1], &other, |v| {
        v["fingerprint"]["os_kernel"] = serde_json::json!("Linux 9.9.9-other");
    });
    let o = Command::new(exe())
        .args([
            "merge",
            shards[0].to_str().unwrap(),
            other.to_str().unwrap(),
            "-o",
        ])
        .arg(dir.join("mixed.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("not made on the same driver") && err.contains("9.9.9-other"),
        "{err}"
    );
}

fn a_hangup_ends_the_run_as_ctrl_c_does_with_the_results_written() {
    let dir = scratch("sighup");
    let json = dir.join("r.json");
    let mut child = start_run(
        &["run", "--mock-cases", "slow,slow,slow,slow,slow,slow"],
        &json,
        false,
    );
    std::thread::sleep(Duration::from_millis(1200));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let r = load(&json).unwrap().report;
    assert_eq!(r.status, RunStatus::Interrupted);
    assert_eq!(r.results.len() + r.not_run.len(), 6);
}

fn diff_of_two_runs_exits_1_on_a_lost_capability_and_0_without_change() {
    let dir = scratch("diff");
    let old = dir.join("old.json");
    let o = clhip(&[
        "run",
        "--mock-cases",
        "pass,pass",
        "--json",
        old.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let same = clhip(&["diff", old.to_str().unwrap(), old.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(0));
    assert!(
        text(&same.stdout).contains("0 regressions"),
        "{}",
        text(&same.stdout)
    );
    // The same run, but the first case now refused: pass -> unsupported.
    let new = dir.join("new.json");
    edit_json(&old, &new, |v| {
        v["results"][0]["outcome"] =
            serde_json::json!({"outcome": "unsupported", "reason": "gone"});
        v["summary"]["pass"] = serde_json::json!(1);
        v["summary"]["unsupported"] = serde_json::json!(1);
    });
    let d = clhip(&[
        "diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--markdown",
    ]);
    assert_eq!(d.status.code(), Some(1), "{}", text(&d.stderr));
    let md = text(&d.stdout);
    assert!(
        md.contains("| ! | regression | `mock/pass/0` | pass | unsupported: gone |"),
        "{md}"
    );
}

/// A GPU memory fault that only the kernel logged (the API left a call waiting on work the
/// fault stopped) ends its case shortly after the log line, as a `fault` naming the log line
/// and the call; the run goes on. A fault line of another process ends nothing.
fn a_fault_only_the_kernel_logged_ends_its_hung_case_as_that_fault_and_another_s_does_not() {
    let dir = scratch("kernel-fault");
    let log = dir.join("kmsg");
    std::fs::write(&log, "6,0,0,-;before the run\n").unwrap();
    let json = dir.join("r.json");
    let began = Instant::now();
    let o = Command::new(exe())
        .args([
            "run",
            "--mock-cases",
            "kernel-fault-hang,pass",
            "--timeout",
            "30",
        ])
        .arg("--json")
        .arg(&json)
        .env(clhip::kmsg::KERNEL_LOG_ENV, &log)
        .output()
        .unwrap();
    let took = began.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        took < Duration::from_secs(15),
        "ended at the timeout: {took:?}"
    );
    let r = load(&json).unwrap().report;
    let kinds: Vec<OutcomeKind> = r.results.iter().map(|r| r.outcome.kind()).collect();
    assert_eq!(kinds, [OutcomeKind::Fault, OutcomeKind::Pass]);
    let clhip::model::Outcome::Fault { error } = &r.results[0].outcome else {
        unreachable!()
    };
    assert_eq!(
        (error.code, error.name.as_str()),
        (31, "NVRM Xid 31 (GPU MMU fault)")
    );
    assert!(
        error.call.contains("cuWaitExternalSemaphoresAsync hung"),
        "{error:?}"
    );
    assert!(error.detail.contains("MMU Fault"), "{error:?}");
    assert!(
        r.results[0].kernel_log.iter().any(|l| l.contains("Xid")),
        "{:?}",
        r.results[0].kernel_log
    );

    // Another process's fault, logged while this worker hangs: a timeout, not a fault.
    let json = dir.join("other.json");
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            use std::io::Write as _;
            std::thread::sleep(Duration::from_millis(1500));
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            writeln!(
                f,
                "3,9,9,-;NVRM: Xid (PCI:0000:00:06): 31, pid=1, name=init, MMU Fault"
            )
            .unwrap();
        })
    };
    let o = Command::new(exe())
        .args(["run", "--mock-cases", "hang", "--timeout", "5"])
        .arg("--json")
        .arg(&json)
        .env(clhip::kmsg::KERNEL_LOG_ENV, &log)
        .output()
        .unwrap();
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = load(&json).unwrap().report;
    assert_eq!(
        r.results[0].outcome.kind(),
        OutcomeKind::Timeout,
        "{:?}",
        r.results[0]
    );
}

tests!(
    ctrl_c_halfway_keeps_finished_cases_marks_the_run_interrupted_and_exits_130,
    a_runner_that_dies_leaves_its_finished_cases_in_the_journal,
    ctrl_z_stops_the_workers_too_and_stopped_time_counts_against_no_case,
    a_plain_sigstop_of_the_whole_process_tree_counts_against_no_case,
    bench_runner_times_a_jobs_value_given_twice_once_and_says_so,
    nonsense_flags_are_refused_before_any_work,
    bad_output_paths_are_refused_before_the_first_case_and_destroy_nothing,
    json_onto_a_device_node_or_a_link_keeps_the_node_and_the_link,
    a_run_of_nothing_fails_unless_asked_for,
    no_subcommand_panics_on_a_closed_or_full_stdout_and_results_survive,
    a_results_file_whose_summary_lies_is_shown_as_inconsistent,
    replacing_the_binary_mid_run_does_not_stop_the_run,
    a_buffer_larger_than_the_device_can_allocate_is_refused_without_a_worker,
    baseline_entries_that_match_no_case_are_warned_and_counted,
    merged_partition_shards_equal_the_unpartitioned_run,
    a_hangup_ends_the_run_as_ctrl_c_does_with_the_results_written,
    diff_of_two_runs_exits_1_on_a_lost_capability_and_0_without_change,
    a_fault_only_the_kernel_logged_ends_its_hung_case_as_that_fault_and_another_s_does_not
);
