//! Every safeguard around a verdict, shown to bite where it alone decides: the ran-marker of a
//! check kernel that never ran, the poison fill of new memory that held a correct result, OpenCL's
//! last pattern check against one word corrupted after the peer's last rewrite, the guard zones
//! after a buffer against a one-element overrun by either side, the reuse op's check of every
//! crossing against one crossing left unsynced, a worker killed by SIGKILL, and the run's exit
//! status for each outcome with and without a baseline.
//!
//! The planted cases run the real binary and workers on the first OpenCL device (PoCL on CI);
//! the exit-status tests run mock workers and need no device.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clhip::model::{Expectation, FailReason, Mismatch, Outcome, OutcomeKind, Verdict};
use clhip::report::{RunReport, RunStatus, load_json};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-safeguards-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `clhip ARGS --json DIR/results.json`, killed (and the test failed) if it has not ended
/// within `limit`: a case left without an outcome must not hang the suite. Returns the exit code,
/// the report and stderr.
fn clhip_run(dir: &Path, args: &[&str], limit: Duration) -> (i32, RunReport, String) {
    let json = dir.join("results.json");
    let stderr_path = dir.join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?} still running after {limit:?}; stderr:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let report = load_json(&json).unwrap_or_else(|e| panic!("{args:?}: {e}\nstderr:\n{stderr}"));
    let code = status
        .code()
        .unwrap_or_else(|| panic!("{args:?} ended by {status}; stderr:\n{stderr}"));
    (code, report, stderr)
}

// ---- planted errors on the OpenCL device ----

const ALL_PATHS: &str = r#""copy", "cl-svm-coarse", "cl-svm-fine", "use-host-ptr""#;
const SYNCED: &str = r#""finish", "event", "map""#;

/// Runs one group of cases (`paths` x `syncs` x `op` at `n`) with `plant`; without OpenCL the
/// test is ignored (failed under CLHIP_REQUIRE_OPENCL=1).
fn run_planted(op: &str, n: usize, plant: &str) -> (i32, RunReport) {
    support::opencl_device();
    let dir = scratch(&format!("{plant}-{op}-{n}"));
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        format!(
            "version = 1\n[[group]]\npaths = [{ALL_PATHS}]\nsyncs = [{SYNCED}]\nops = [\"{op}\"]\nsizes = [{n}]\n"
        ),
    )
    .unwrap();
    let cases = cases.to_str().unwrap();
    let args = ["run", "--plant", plant, "--timeout", "60", "--cases", cases];
    let (code, report, _) = clhip_run(&dir, &args, Duration::from_secs(300));
    for path in ["copy", "cl-svm-coarse", "cl-svm-fine", "use-host-ptr"] {
        assert!(
            report
                .results
                .iter()
                .any(|r| r.id.contains(&format!("/{path}/"))),
            "{plant}: no {path} case ran"
        );
    }
    (code, report)
}

fn mismatch<'a>(id: &str, o: &'a Outcome) -> &'a Mismatch {
    match o {
        Outcome::Fail {
            reason: FailReason::Mismatch(m),
        } => m,
        other => panic!("{id}: expected a data mismatch, got {other:?}"),
    }
}

/// Each non-pass must fail the run, but a negative control's `fail`, which it exists to see.
fn assert_fails_the_run(code: i32, report: &RunReport) {
    assert_eq!(code, 1, "{:?}", report.summary);
    for r in &report.results {
        let control = r.work.case().is_some_and(|c| c.is_negative_control());
        assert!(r.unexpected() || control, "{}: {:?}", r.id, r.verdict());
    }
}

/// OpenCL's pattern check kernel is left out, every other kernel runs: no mismatch is counted
/// and no index is set, so only the ran-marker (still the host's 0) can tell that nothing was
/// checked. The peer's own check of OpenCL's rewrite still passes: the marker alone decides.
fn a_check_kernel_that_never_ran_fails_its_case_at_the_ran_marker() {
    let n = 4096;
    let (code, report) = run_planted("handoff", n, "skip-check-kernel");
    assert_fails_the_run(code, &report);
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        assert!(
            m.what
                .contains("OpenCL pattern check kernel did not run: its ran-marker"),
            "{}: {m}",
            r.id
        );
        assert_eq!(m.got, "0", "{}: {m}", r.id);
        assert!(m.want.starts_with(&(2 * n).to_string()), "{}: {m}", r.id);
    }
}

/// New memory that already holds the case's correct result, as a reused allocation holds an
/// identical earlier case's, and neither side doing anything: only the poison fill stands
/// between the case and a pass on leftover data. Over the four paths, OpenCL's fill (SVM) and
/// the peer's (the copy path's staging memory) each decide alone somewhere.
fn memory_holding_an_earlier_correct_result_fails_on_its_poison() {
    let n = 4096;
    let (code, report) = run_planted("fft", n, "stale-correct");
    assert_fails_the_run(code, &report);
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        // What the consumer found, everywhere, is the poison (a NaN), not the leftover result.
        assert_eq!((m.index, m.count), (0, n), "{}: {m}", r.id);
        assert_eq!(m.got, "(NaN, NaN)", "{}: {m}", r.id);
    }
}

/// One word flipped after the peer's last rewrite: the peer's own check has passed by then, so
/// OpenCL's last check alone sees it, and must name the index and the word it saw there.
fn one_word_corrupted_after_the_peer_s_last_rewrite_fails_at_that_word() {
    let n = 4096;
    let (code, report) = run_planted("handoff", n, "flip-after-peer");
    assert_fails_the_run(code, &report);
    let index = 2 * clhip::ops::Plant::flip_index(n);
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        assert_eq!(
            m.what, "pattern rewritten by host, read by OpenCL",
            "{}: {m}",
            r.id
        );
        assert_eq!(
            (m.index, m.count, m.len),
            (index, 1, 2 * n),
            "{}: {m}",
            r.id
        );
        let word = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        assert_eq!(
            word(&m.got) ^ clhip::ops::Plant::FLIP_BIT,
            word(&m.want),
            "{}: the word seen is the pattern's with the planted bit flipped: {m}",
            r.id
        );
    }
}

// ---- guard zones ----

/// The allocation whose guard a one-element overrun on `side` lands in, per path of
/// [`ALL_PATHS`], with the host as the peer.
fn overrun_buffer(id: &str, side: &str) -> &'static str {
    let path = ["copy", "cl-svm-coarse", "cl-svm-fine", "use-host-ptr"]
        .into_iter()
        .find(|p| id.contains(&format!("/{p}/")))
        .unwrap_or_else(|| panic!("{id}: no path of the group"));
    match (path, side) {
        ("copy", "opencl") => "copy path's OpenCL buffer",
        // The host peer works on the copy path's staging memory itself.
        ("copy", _) => "copy path's host staging memory",
        // Both sides write the one SVM allocation.
        ("cl-svm-coarse", _) => "cl-svm-coarse allocation",
        ("cl-svm-fine", _) => "cl-svm-fine allocation",
        // OpenCL's buffer wraps the host's memory: PoCL's kernel writes it in place.
        _ => "host memory under CL_MEM_USE_HOST_PTR",
    }
}

/// A one-element overrun on `side` (its plant): every case's own data checks pass, so the
/// guard after the buffer alone decides, and must name the buffer, the offset (the view's size,
/// from its start) and the bytes found against the guard word.
fn assert_overrun_caught(plant: &str, side: &str) {
    let n = 4096;
    let (code, report) = run_planted("handoff", n, plant);
    assert_fails_the_run(code, &report);
    let view = 8 * n;
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        assert_eq!(
            m.what,
            format!(
                "{}: the {}-byte guard after the case's {view} bytes (index: bytes from the view's start) was overwritten",
                overrun_buffer(&r.id, side),
                4096
            ),
            "{}: {m}",
            r.id
        );
        // One complex element: two words, right at the end of the view.
        assert_eq!((m.index, m.count, m.len), (view, 2, 1024), "{}: {m}", r.id);
        let bytes = |s: &str| -> Vec<u8> {
            s.trim_matches(['[', ']'])
                .split(' ')
                .map(|b| u8::from_str_radix(b, 16).unwrap())
                .collect()
        };
        let (got, want) = (bytes(&m.got), bytes(&m.want));
        assert_eq!((got.len(), want.len()), (8, 8), "{}: {m}", r.id);
        // The allocation's guard word 0x5afe6aXX twice, in memory order: XX 6a fe 5a.
        assert_eq!(want[..4], want[4..], "{}: {m}", r.id);
        assert_eq!(want[1..4], [0x6a, 0xfe, 0x5a], "{}: {m}", r.id);
        assert_ne!(got, want, "{}: {m}", r.id);
    }
}

fn a_one_element_overrun_by_an_opencl_kernel_fails_at_the_guard_after_the_buffer() {
    assert_overrun_caught("cl-overrun", "opencl");
}

fn a_one_element_overrun_by_the_peer_fails_at_the_guard_after_its_memory() {
    assert_overrun_caught("peer-overrun", "peer");
}

/// OpenCL's read-back of the pipeline's shared memory copies one element more into its plain
/// buffer: the data checks pass, and the read-back buffer's guard, checked at the case's end,
/// must fail it. What it found there is the shared memory's own guard word (another low
/// byte), copied along: each allocation's word tells where an overrun came from.
fn a_one_element_overrun_into_a_plain_buffer_fails_at_its_guard() {
    let n = 1024;
    let (code, report) = run_planted("pipeline", n, "readback-overrun");
    assert_fails_the_run(code, &report);
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        assert!(
            m.what.starts_with(&format!(
                "pipeline's read-back buffer: the 4096-byte guard after the case's {} bytes",
                8 * n
            )),
            "{}: {m}",
            r.id
        );
        assert_eq!((m.index, m.count), (8 * n, 2), "{}: {m}", r.id);
        assert_ne!(m.got, m.want, "{}: {m}", r.id);
        assert!(
            m.got.ends_with("6a fe 5a]"),
            "{}: another guard's word: {m}",
            r.id
        );
    }
}

// ---- reuse ----

/// A clean driver passes every reuse case: 2,000 crossings of one buffer, each checked.
fn every_reuse_case_passes_on_a_clean_driver() {
    let (code, report) = run_planted("reuse", 4097, "none");
    assert_eq!(code, 0, "{:?}", report.summary);
    for r in &report.results {
        // A negative control (USE_HOST_PTR after finish, no map) may catch a stale read.
        if r.work.case().is_some_and(|c| c.is_negative_control()) {
            continue;
        }
        assert_eq!(
            r.outcome.kind(),
            OutcomeKind::Pass,
            "{}: {:?}",
            r.id,
            r.outcome
        );
        assert!(
            r.outcome
                .reason()
                .contains("across 2000 crossings of one buffer"),
            "{}: {}",
            r.id,
            r.outcome.reason()
        );
    }
}

/// Crossing 500 handed over with no sync, OpenCL's write for it still held back when the peer
/// looks: the case fails there, at that crossing and no other, whatever the path.
fn a_reuse_crossing_handed_over_without_its_sync_fails_at_that_crossing() {
    let n = 4097;
    let (code, report) = run_planted("reuse", n, "skip-one-sync");
    assert_fails_the_run(code, &report);
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        assert_eq!(
            m.what,
            "crossing 500 of 2000: pattern written by OpenCL, read by host (the only failing crossing)",
            "{}: {m}",
            r.id
        );
        // The peer found crossing 499's pattern, its own last write, everywhere.
        assert_eq!(
            (m.index, m.count, m.len),
            (0, 2 * n, 2 * n),
            "{}: {m}",
            r.id
        );
    }
}

/// OpenCL does nothing (every kernel a marker): every read by the peer finds stale memory. The
/// case fails at crossing 0 and stops once eight reads by the peer have failed, at the end of
/// that round trip, saying so; it does not spend 2,000 crossings restating the failure.
fn a_reuse_case_failing_every_crossing_stops_after_eight_failed_reads() {
    let n = 4097;
    let (code, report) = run_planted("reuse", n, "cl-noop");
    assert_fails_the_run(code, &report);
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        assert!(
            m.what
                .starts_with("crossing 0 of 2000: pattern written by OpenCL, read by host ("),
            "{}: {m}",
            r.id
        );
        assert!(
            m.what.ends_with(
                "the first of 16 failing crossings, the last 15; stopped after crossing 15 of \
                 2000, once 8 reads by host had failed)"
            ),
            "{}: {m}",
            r.id
        );
    }
}

/// The peer never writes: OpenCL's check of every odd crossing finds its own last pattern, and
/// each of the 1,000 is judged from its own slot of the one result buffer: a slot read for
/// another round trip's, or never written, would give another count or another first crossing.
fn a_reuse_peer_that_never_writes_fails_every_crossing_opencl_reads() {
    let n = 4097;
    let (code, report) = run_planted("reuse", n, "peer-noop");
    assert_fails_the_run(code, &report);
    for r in &report.results {
        let m = mismatch(&r.id, &r.outcome);
        assert_eq!(
            m.what,
            "crossing 1 of 2000: pattern written by host, read by OpenCL (the first of 1000 \
             failing crossings, the last 1999)",
            "{}: {m}",
            r.id
        );
        assert_eq!((m.index, m.count), (0, 2 * n), "{}: {m}", r.id);
    }
}

// ---- a worker killed by SIGKILL ----

/// A worker that dies by SIGKILL no interrupt of the run's sent (the OOM killer's way) costs its
/// case, as a `crash` named SIGKILL; the run goes on with the next case. Once mid-batch, once as
/// the first case of the fresh worker that follows.
fn a_worker_killed_by_sigkill_is_a_crash_and_the_run_goes_on() {
    let dir = scratch("sigkill");
    let mocks = "pass,sigkill,sigkill,pass";
    let (code, report, stderr) = clhip_run(
        &dir,
        &["run", "--mock-cases", mocks, "--timeout", "10"],
        Duration::from_secs(120),
    );
    let kinds: Vec<OutcomeKind> = report.results.iter().map(|r| r.outcome.kind()).collect();
    assert_eq!(
        kinds,
        [
            OutcomeKind::Pass,
            OutcomeKind::Crash,
            OutcomeKind::Crash,
            OutcomeKind::Pass
        ],
        "{stderr}"
    );
    for r in &report.results[1..3] {
        let Outcome::Crash {
            signal,
            signal_name,
            stderr_tail,
            ..
        } = &r.outcome
        else {
            unreachable!()
        };
        assert_eq!((*signal, signal_name.as_str()), (9, "SIGKILL"), "{}", r.id);
        assert!(
            stderr_tail.contains("sending myself SIGKILL"),
            "{}: {stderr_tail}",
            r.id
        );
    }
    assert!(report.not_run.is_empty(), "{:?}", report.not_run);
    assert_eq!(report.status, RunStatus::Complete);
    // Each mock expects its own kind here: the crashes were expected, so the run is clean.
    assert_eq!(code, 0, "{stderr}");

    // Judged as cases are, with no baseline: a crash is a regression.
    let (code, report, stderr) = clhip_run(
        &dir,
        &[
            "run",
            "--mock-cases",
            mocks,
            "--mock-as-cases",
            "--timeout",
            "10",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report.summary.unexpected, 2, "{:?}", report.summary);
}

// ---- exit status for each outcome, with and without a baseline ----

/// What one mock run came to: its exit code, and each result's (id, kind, verdict).
struct Judged {
    code: i32,
    results: Vec<(String, OutcomeKind, Verdict)>,
    stderr: String,
}

/// Runs `pass,ACTIONS` judged as cases are: against `baseline` (its text) or with none.
fn judged(name: &str, actions: &str, baseline: Option<&str>) -> Judged {
    let dir = scratch(name);
    let mocks = format!("pass,{actions}");
    let mut args = vec![
        "run",
        "--mock-cases",
        &mocks,
        "--mock-as-cases",
        "--timeout",
        "3",
    ];
    let file = dir.join("baseline.csv");
    let file = file.to_str().unwrap();
    if let Some(text) = baseline {
        std::fs::write(file, text).unwrap();
        args.extend(["--baseline", file]);
    }
    let (code, report, stderr) = clhip_run(&dir, &args, Duration::from_secs(120));
    // Judged as cases, not each by its own kind (which would make every run exit 0).
    for r in &report.results {
        match baseline {
            None => assert_eq!(r.expectation, Expectation::Unbaselined, "{}", r.id),
            Some(_) => assert!(
                matches!(r.expectation, Expectation::Pass | Expectation::Known(_)),
                "{}: {:?}",
                r.id,
                r.expectation
            ),
        }
    }
    Judged {
        code,
        results: report
            .results
            .iter()
            .map(|r| (r.id.clone(), r.outcome.kind(), r.verdict()))
            .collect(),
        stderr,
    }
}

/// The mocks `actions` (each coming out as `kind`) judged three ways: with no baseline, with a
/// baseline that does not list them (they passed on its driver), and with one that lists each
/// as `kind`. Asserts each result's kind and verdict and the exact exit code of each run.
fn assert_exit_statuses(name: &str, actions: &[&str], kind: OutcomeKind) {
    let list = actions.join(",");
    let ids: Vec<String> = actions
        .iter()
        .enumerate()
        .map(|(k, a)| format!("mock/{a}/{}", k + 1))
        .collect();
    let check = |how: &str, j: &Judged, verdict: Verdict, code: i32| {
        assert_eq!(j.results.len(), actions.len() + 1, "{how}: {}", j.stderr);
        assert_eq!(
            j.results[0],
            ("mock/pass/0".to_string(), OutcomeKind::Pass, Verdict::Pass),
            "{how}"
        );
        for (id, (got_id, got_kind, got_verdict)) in ids.iter().zip(&j.results[1..]) {
            assert_eq!(
                (got_id, *got_kind, *got_verdict),
                (id, kind, verdict),
                "{how}: {}",
                j.stderr
            );
        }
        assert_eq!(j.code, code, "{how}: exit status; stderr:\n{}", j.stderr);
    };
    let harness = kind == OutcomeKind::Error;
    let worse = if harness {
        Verdict::HarnessError
    } else {
        Verdict::Regression
    };
    let none = judged(&format!("{name}-unbaselined"), &list, None);
    check("no baseline", &none, worse, 1);
    let other = judged(
        &format!("{name}-passed-before"),
        &list,
        Some("# lists none of this run's cases\nmock/other/9,fail\n"),
    );
    check("a baseline where it passed", &other, worse, 1);
    // A baseline never lists `error` (it is no driver's behaviour): list a crash there instead,
    // which a harness error still is not.
    let listed_as = if harness { OutcomeKind::Crash } else { kind };
    let text: String = ids.iter().map(|id| format!("{id},{listed_as}\n")).collect();
    let listed = judged(&format!("{name}-listed"), &list, Some(&text));
    if harness {
        check(
            "a baseline listing a crash",
            &listed,
            Verdict::HarnessError,
            1,
        );
    } else {
        check(
            "a baseline listing it",
            &listed,
            Verdict::ExpectedNonPass,
            0,
        );
    }
}

fn a_harness_error_fails_the_run_whatever_the_baseline_says() {
    assert_exit_statuses("error", &["panic"], OutcomeKind::Error);
}

fn a_timeout_fails_the_run_unless_a_baseline_lists_it() {
    assert_exit_statuses("timeout", &["hang"], OutcomeKind::Timeout);
}

fn a_crash_fails_the_run_unless_a_baseline_lists_it() {
    assert_exit_statuses("crash", &["segfault", "sigkill"], OutcomeKind::Crash);
}

fn a_fault_fails_the_run_unless_a_baseline_lists_it() {
    assert_exit_statuses("fault", &["fault"], OutcomeKind::Fault);
}

fn wrong_data_fails_the_run_unless_a_baseline_lists_it() {
    assert_exit_statuses("fail", &["fail"], OutcomeKind::Fail);
}

/// The control of the five above: the same runs with only passes exit 0 every way.
fn passes_exit_zero_with_and_without_a_baseline() {
    for baseline in [None, Some("mock/other/9,fail\n")] {
        let j = judged("pass", "pass", baseline);
        assert!(
            j.results
                .iter()
                .all(|(_, k, v)| (*k, *v) == (OutcomeKind::Pass, Verdict::Pass)),
            "{:?}",
            j.results
        );
        assert_eq!(j.code, 0, "{}", j.stderr);
    }
}

tests!(
    a_check_kernel_that_never_ran_fails_its_case_at_the_ran_marker,
    memory_holding_an_earlier_correct_result_fails_on_its_poison,
    one_word_corrupted_after_the_peer_s_last_rewrite_fails_at_that_word,
    a_worker_killed_by_sigkill_is_a_crash_and_the_run_goes_on,
    a_harness_error_fails_the_run_whatever_the_baseline_says,
    a_timeout_fails_the_run_unless_a_baseline_lists_it,
    a_crash_fails_the_run_unless_a_baseline_lists_it,
    a_fault_fails_the_run_unless_a_baseline_lists_it,
    wrong_data_fails_the_run_unless_a_baseline_lists_it,
    passes_exit_zero_with_and_without_a_baseline,
    a_one_element_overrun_by_an_opencl_kernel_fails_at_the_guard_after_the_buffer,
    a_one_element_overrun_by_the_peer_fails_at_the_guard_after_its_memory,
    a_one_element_overrun_into_a_plain_buffer_fails_at_its_guard,
    every_reuse_case_passes_on_a_clean_driver,
    a_reuse_crossing_handed_over_without_its_sync_fails_at_that_crossing,
    a_reuse_case_failing_every_crossing_stops_after_eight_failed_reads,
    a_reuse_peer_that_never_writes_fails_every_crossing_opencl_reads,
);
