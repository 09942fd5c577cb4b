//! Planted errors: every check must be shown to catch one. Each test runs real cases through the
//! real binary and worker processes on the first OpenCL device (PoCL on CI), with an error
//! planted where a driver bug would bite, and asserts the verdict and where it points.

#[macro_use]
mod support;

use std::path::Path;
use std::process::Command;

use clhip::model::{FailReason, Outcome, OutcomeKind};
use clhip::report::{RunReport, load_json};

/// Runs `clhip run` over a one-group matrix with `plant`, returning the exit code and report;
/// without OpenCL the test is ignored (failed under CLHIP_REQUIRE_OPENCL=1).
fn run_planted(paths: &str, syncs: &str, ops: &str, n: usize, plant: &str) -> (i32, RunReport) {
    support::opencl_device();
    let dir = std::env::temp_dir().join(format!(
        "clhip-planted-{}-{plant}-{ops}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        format!(
            "version = 1\n[[group]]\npaths = [{paths}]\nsyncs = [{syncs}]\nops = [{ops}]\nsizes = [{n}]\n"
        ),
    )
    .unwrap();
    let json = dir.join("results.json");
    let out = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["run", "--plant", plant, "--timeout", "60"])
        .arg("--cases")
        .arg(&cases)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let report = load_json(Path::new(&json))
        .unwrap_or_else(|e| panic!("{e}\nstderr: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), report)
}

fn mismatch(o: &Outcome) -> &clhip::model::Mismatch {
    match o {
        Outcome::Fail {
            reason: FailReason::Mismatch(m),
        } => m,
        other => panic!("expected a data mismatch, got {other:?}"),
    }
}

const ALL_PATHS: &str = r#""copy", "cl-svm-coarse", "cl-svm-fine", "use-host-ptr""#;
const SYNCED: &str = r#""finish", "event", "map""#;

fn a_flipped_element_fails_every_op_at_that_element() {
    let n = 4096;
    for (op, index) in [
        ("handoff", 2 * (n / 2)),
        ("fft", n / 2),
        ("pipeline", n / 2),
    ] {
        let (code, report) =
            run_planted(ALL_PATHS, SYNCED, &format!("\"{op}\""), n, "flip-element");
        assert_eq!(code, 1, "a planted flip must fail the run");
        assert!(report.results.len() >= 4, "{op}: every path ran");
        for r in &report.results {
            let m = mismatch(&r.outcome);
            assert_eq!(m.index, index, "{}: {m}", r.id);
            // A negative control's fail is expected (USE_HOST_PTR read after finish, no map);
            // every other planted fail must fail the run.
            let control = r.work.case().is_some_and(|c| c.is_negative_control());
            assert!(r.unexpected() || control, "{}", r.id);
        }
    }
}

fn a_skipped_sync_is_a_stale_read() {
    // A skipped sync is a race, so the plant needs OpenCL to be still at work when the peer
    // looks: a 2^20-point FFT is many kernel passes, finished long after the peer's immediate
    // read. Handoff is left out: its one pass over memory can finish before the peer's check,
    // which is then a fair pass; its bit-exact check is shown to catch a flipped element above.
    let n = 1 << 20;
    for op in ["fft", "pipeline"] {
        let (code, report) = run_planted(ALL_PATHS, SYNCED, &format!("\"{op}\""), n, "skip-sync");
        assert_eq!(code, 1);
        for r in &report.results {
            assert_eq!(
                r.outcome.kind(),
                OutcomeKind::Fail,
                "{}: {:?}",
                r.id,
                r.outcome
            );
        }
    }
}

fn a_bad_pointer_is_contained_as_a_crash() {
    let (code, report) = run_planted(
        r#""cl-svm-fine", "copy""#,
        r#""finish""#,
        r#""fft", "handoff""#,
        64,
        "bad-pointer",
    );
    assert_eq!(code, 1);
    assert_eq!(report.results.len(), 4);
    for r in &report.results {
        match &r.outcome {
            Outcome::Crash { signal_name, .. } => assert_eq!(signal_name, "SIGSEGV", "{}", r.id),
            other => panic!("{}: expected a crash, got {other:?}", r.id),
        }
    }
}

fn without_a_plant_the_same_cases_pass() {
    // The control for the three above: the harness is not simply failing everything.
    let (code, report) = run_planted(
        ALL_PATHS,
        SYNCED,
        r#""handoff", "fft", "pipeline""#,
        4096,
        "none",
    );
    assert_eq!(code, 0, "{:#?}", report.summary);
    assert!(
        report
            .results
            .iter()
            .all(|r| r.outcome.kind() == OutcomeKind::Pass)
    );
}

fn a_rocr_fault_line_and_abort_in_an_opencl_case_is_a_fault_placed_past_its_buffer() {
    // ROCm's OpenCL ends a GPU page fault as HIP does: ROCr's line on stderr, then abort().
    let n = 4096;
    let (code, report) = run_planted(
        r#""cl-svm-fine", "copy""#,
        r#""finish""#,
        r#""handoff""#,
        n,
        "rocr-fault",
    );
    assert_eq!(code, 1);
    assert_eq!(report.results.len(), 2);
    for r in &report.results {
        let Outcome::Fault { error } = &r.outcome else {
            panic!("{}: expected a fault, got {:?}", r.id, r.outcome);
        };
        assert!(error.detail.contains("GPU node-1"), "{}", error.detail);
        assert!(
            error
                .detail
                .contains("Page not present or supervisor privilege"),
            "{}",
            error.detail
        );
        assert!(
            error.detail.contains("4 KiB past the end of the ")
                && error.detail.contains("shared memory"),
            "{}: {}",
            r.id,
            error.detail
        );
    }
}

/// Runs `clhip run --plant PLANT` over the `semaphore` cases of `paths` x `ops` at `n` on the
/// pair `CLHIP_SEMAPHORE_PAIR` names (`nvidia0+cuda0`), with a short case limit. Without that
/// variable the test is ignored (failed under CLHIP_REQUIRE_VULKAN=1): the semaphore handover
/// needs a GPU, its Vulkan driver and OpenCL's semaphore import, none of which CI has.
fn run_semaphore_planted(paths: &str, ops: &str, n: usize, plant: &str) -> RunReport {
    let Ok(pair) = std::env::var("CLHIP_SEMAPHORE_PAIR") else {
        support::ignore(
            "CLHIP_REQUIRE_VULKAN",
            "CLHIP_SEMAPHORE_PAIR is not set (it names a GPU pair with Vulkan: nvidia0+cuda0)",
        );
    };
    let dir = std::env::temp_dir().join(format!(
        "clhip-planted-semaphore-{}-{plant}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        format!(
            "version = 1\n[[group]]\npaths = [{paths}]\nsyncs = [\"semaphore\"]\nops = [{ops}]\nsizes = [{n}]\n"
        ),
    )
    .unwrap();
    let json = dir.join("results.json");
    let out = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["run", "--plant", plant, "--timeout", "20", "--cases"])
        .arg(&cases)
        .arg("--json")
        .arg(&json)
        .arg(format!("{pair}/*"))
        .output()
        .unwrap();
    let report = load_json(Path::new(&json))
        .unwrap_or_else(|e| panic!("{e}\nstderr: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(
        !report.results.is_empty(),
        "no semaphore case ran on {pair}"
    );
    for r in &report.results {
        eprintln!("{plant}: {} -> {}", r.id, r.outcome.reason());
    }
    report
}

const SEMAPHORE_PATHS: &str = r#""vk-memory+import", "vmm-fd+cl-import""#;

/// On a GPU (`CLHIP_SEMAPHORE_PAIR=nvidia0+cuda0`): without a plant the semaphore handover
/// passes (the control of the two below); with OpenCL's signal left out, every case ends as a
/// timeout that names the peer's semaphore wait, and the run goes on; with the peer waiting on
/// a decoy the broker signalled at once, the read races OpenCL's 2^22-point FFT and must not
/// pass.
fn semaphore_plants_come_out_non_pass_on_a_gpu() {
    let control = run_semaphore_planted(SEMAPHORE_PATHS, r#""handoff", "fft""#, 4096, "none");
    for r in &control.results {
        assert_eq!(
            r.outcome.kind(),
            OutcomeKind::Pass,
            "{}: {:?}",
            r.id,
            r.outcome
        );
    }
    let skipped = run_semaphore_planted(SEMAPHORE_PATHS, r#""handoff""#, 4097, "skip-signal");
    for r in &skipped.results {
        match &r.outcome {
            Outcome::Timeout { blocked_in, .. } => assert!(
                blocked_in.contains("WaitExternalSemaphoresAsync")
                    && blocked_in.contains("planted skip-signal"),
                "{}: {blocked_in}",
                r.id
            ),
            other => panic!(
                "{}: expected a timeout naming the wait, got {other:?}",
                r.id
            ),
        }
    }
    let wrong = run_semaphore_planted(
        SEMAPHORE_PATHS,
        r#""fft", "pipeline""#,
        1 << 22,
        "wrong-semaphore",
    );
    for r in &wrong.results {
        assert_ne!(
            r.outcome.kind(),
            OutcomeKind::Pass,
            "{}: {:?}",
            r.id,
            r.outcome
        );
    }
}

tests!(
    a_flipped_element_fails_every_op_at_that_element,
    a_skipped_sync_is_a_stale_read,
    a_bad_pointer_is_contained_as_a_crash,
    without_a_plant_the_same_cases_pass,
    a_rocr_fault_line_and_abort_in_an_opencl_case_is_a_fault_placed_past_its_buffer,
    semaphore_plants_come_out_non_pass_on_a_gpu
);
