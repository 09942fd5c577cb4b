//! A broken OpenCL driver is a finding, not the end of the tool. These tests run `clhip probe`
//! beside the project's own misbehaving ICD (tests/fixtures/bad-icd/bad_icd.c, built here with
//! `cc -shared -fPIC`), which wraps PoCL and on request hangs, crashes, chatters or exits inside
//! the platform query: PoCL must still be listed, the bad vendor shown for what it did, the probe
//! must end promptly, exit 1, and no process of it may be left behind. Asked to drop buffer
//! writes or to refuse fine-grain SVM that it advertises, it is a driver whose defects `run`
//! must file as the driver's: `fail`, never a harness error or `unsupported`.
//!
//! Needs PoCL and a C compiler. Without them the tests are reported ignored, except under
//! `CLHIP_REQUIRE_OPENCL=1` (CI), where they fail.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clhip::model::OutcomeKind;
use clhip::probe::{Probe, VendorState};
use clhip::report::RunReport;

/// The vendor time limit the tests give the probe (CLHIP_PROBE_VENDOR_TIMEOUT_S).
const LIMIT_S: u64 = 3;

/// Generous bound on a whole probe run: the limit plus a loaded two-core CI machine's slack.
/// A probe that goes past it has regressed to waiting on the hung driver.
const PROMPT: Duration = Duration::from_secs(LIMIT_S + 20);

struct Setup {
    bad_icd: PathBuf,
    pocl: String,
}

/// Builds the bad ICD once per test binary; the test is ignored without PoCL or a C compiler
/// (failed under CLHIP_REQUIRE_OPENCL=1).
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Result<Setup, String>> = OnceLock::new();
    let s = SETUP.get_or_init(|| {
        if let Err(e) = clhip::runtimes::opencl::enumerate() {
            return Err(format!("no OpenCL device: {e}"));
        }
        let pocl = pocl_library().ok_or("no PoCL among the OpenCL vendors")?;
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bad-icd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-icd/bad_icd.c");
        let so = dir.join("libclhip_bad_icd.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args([
                "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
            ])
            .arg(&so)
            .arg(&src)
            .arg("-ldl")
            .output()
            .map_err(|e| format!("running {cc}: {e}"))?;
        if !out.status.success() {
            // A compile error in the fixture is a bug, never a reason to skip.
            panic!(
                "{cc} failed to build {}: {}",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(Setup { bad_icd: so, pocl })
    });
    match s {
        Ok(s) => s,
        Err(why) => support::ignore("CLHIP_REQUIRE_OPENCL", why),
    }
}

/// PoCL's library as this machine's vendor list names it (libpocl.so.2 on Debian).
fn pocl_library() -> Option<String> {
    clhip::runtimes::opencl::vendor_libraries_from(None, None, None)
        .into_iter()
        .map(|v| v.library)
        .find(|l| l.contains("pocl"))
}

/// A tag in the environment of everything one probe run starts, to find leftovers by.
fn new_tag(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{what}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

const TAG_VAR: &str = "CLHIP_BAD_ICD_TEST_TAG";

/// `clhip probe ARGS` with the bad ICD (in `mode`) listed before PoCL.
fn probe_command(s: &Setup, mode: &str, tag: &str, limit_s: u64, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clhip"));
    cmd.arg("probe").args(args);
    with_bad_icd(&mut cmd, s, mode, tag, limit_s);
    cmd
}

/// The environment that lists the bad ICD (in `mode`) before PoCL, tagged with `tag`.
fn with_bad_icd(cmd: &mut Command, s: &Setup, mode: &str, tag: &str, limit_s: u64) {
    cmd.env(
        "OCL_ICD_FILENAMES",
        format!("{}:{}", s.bad_icd.display(), s.pocl),
    )
    .env_remove("OCL_ICD_VENDORS")
    .env("CLHIP_BAD_ICD", mode)
    .env("CLHIP_BAD_ICD_POCL", &s.pocl)
    .env(clhip::probe::VENDOR_TIMEOUT_ENV, limit_s.to_string())
    .env(TAG_VAR, tag)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
}

/// Runs to the end, failing the test (and killing it) past [`PROMPT`].
fn run_promptly(mut cmd: Command) -> (Output, Duration) {
    let started = Instant::now();
    let child = cmd.spawn().expect("clhip starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(PROMPT) {
        Ok(out) => (out.expect("clhip's output"), started.elapsed()),
        Err(_) => {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("clhip probe still running after {PROMPT:?}");
        }
    }
}

/// Processes whose environment carries `tag`: whatever a probe run left behind.
fn tagged_processes(tag: &str) -> Vec<String> {
    let needle = format!("{TAG_VAR}={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| {
            // A zombie's environ reads empty, and a process gone meanwhile fails to read.
            let env = std::fs::read(e.path().join("environ")).ok()?;
            env.split(|&b| b == 0)
                .any(|kv| kv == needle.as_bytes())
                .then(|| {
                    let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                    format!(
                        "{} {}",
                        e.file_name().to_string_lossy(),
                        String::from_utf8_lossy(&cmd).replace('\0', " ")
                    )
                })
        })
        .collect()
}

/// Nothing of the run tagged `tag` is left, allowing a moment for the kernel to finish killing.
fn assert_nothing_left(tag: &str) {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let left = tagged_processes(tag);
        if left.is_empty() {
            return;
        }
        if Instant::now() > until {
            panic!("processes left behind: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `clhip probe` (human form) with the bad ICD in `mode`: ends promptly, lists PoCL, shows
/// the bad vendor as `state`, with the ICD's last words, leaves nothing behind, and exits 1
/// naming the vendor and what it did on stderr.
fn broken_vendor_is_a_row(mode: &str, state: &str, last_words: &str) {
    let s = setup();
    let tag = new_tag(mode);
    let (out, took) = run_promptly(probe_command(s, mode, &tag, LIMIT_S, &[]));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "clhip: broken driver: OpenCL vendor library {} (listed in OCL_ICD_FILENAMES): {state}",
            s.bad_icd.display()
        )),
        "{stderr}"
    );
    assert!(took < PROMPT, "took {took:?}");
    let row = stdout
        .lines()
        .find(|l| l.contains(&s.bad_icd.display().to_string()))
        .unwrap_or_else(|| panic!("no row for the bad vendor:\n{stdout}"));
    assert!(row.contains("BROKEN") && row.contains(state), "{row}");
    assert!(stdout.contains(last_words), "{stdout}");
    assert!(stdout.contains("OpenCL: ok"), "{stdout}");
    assert!(stdout.contains("device pocl0"), "{stdout}");
    assert!(
        stdout.contains(&format!("ICD library         {}", s.pocl)),
        "{stdout}"
    );
    assert_nothing_left(&tag);
}

fn a_hung_vendor_is_reported_and_killed_and_pocl_still_probed() {
    broken_vendor_is_a_row(
        "hang",
        &format!("hung: no answer within {LIMIT_S} s in clGetPlatformIDs"),
        "bad icd: hanging in clIcdGetPlatformIDsKHR",
    );
}

fn a_crashing_vendor_is_reported_as_sigsegv_and_pocl_still_probed() {
    broken_vendor_is_a_row(
        "crash",
        "crashed: SIGSEGV in clGetPlatformIDs",
        "bad icd: crashing in clIcdGetPlatformIDsKHR",
    );
}

fn a_vendor_exiting_inside_a_call_is_reported_and_pocl_still_probed() {
    broken_vendor_is_a_row(
        "exit0",
        "exited: exit status 0 in clGetPlatformIDs, without an answer",
        "bad icd: exiting in clIcdGetPlatformIDsKHR",
    );
}

/// `clhip probe --json` with the bad ICD in `mode`, which must exit with `code`: 1 where the
/// vendor broke in the probe, 0 where every vendor answered. The JSON is printed either way.
fn probe_json(s: &Setup, mode: &str, code: i32) -> Probe {
    let tag = new_tag(mode);
    let (out, _) = run_promptly(probe_command(s, mode, &tag, LIMIT_S, &["--json"]));
    assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    assert_nothing_left(&tag);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("probe --json is not JSON ({e}):\n{}", text(&out.stdout)))
}

fn probe_json_carries_the_broken_vendor_row() {
    let s = setup();
    let p = probe_json(s, "crash", 1);
    let bad = &p.opencl_vendors[0];
    assert_eq!(bad.library, s.bad_icd.display().to_string());
    assert_eq!(bad.listed_in, "OCL_ICD_FILENAMES");
    assert_eq!(
        bad.state,
        VendorState::Crashed {
            signal: "SIGSEGV".into(),
            during: "in clGetPlatformIDs".into()
        }
    );
    assert_eq!(
        bad.stderr_tail.last().map(String::as_str),
        Some("bad icd: crashing in clIcdGetPlatformIDsKHR")
    );
    assert_eq!(p.opencl_vendors[1].state, VendorState::Ok);
    let broken = p.broken_vendors();
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        broken[0].contains(&bad.library) && broken[0].contains("crashed: SIGSEGV"),
        "{}",
        broken[0]
    );
    // The raw JSON, as other tools read it: the row is flat, the device names its library.
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["opencl_vendors"][0]["state"], "crashed");
    assert_eq!(v["opencl_vendors"][0]["signal"], "SIGSEGV");
    let dev = &v["platforms"][0]["devices"][0];
    assert_eq!(dev["label"], "pocl0");
    assert_eq!(dev["icd_library"], s.pocl.as_str());
    assert_eq!(
        p.icd_env("pocl0"),
        Some(vec![
            ("OCL_ICD_FILENAMES".to_string(), s.pocl.clone()),
            ("OCL_ICD_VENDORS".to_string(), s.pocl.clone()),
        ])
    );
    assert_eq!(p.icd_env("pocl9"), None);
}

/// Chatter on stdout and stderr, partial lines and lines that imitate the harness's protocol
/// prefix, change nothing: the same platforms, every vendor ok, the chatter in the tail only.
fn protocol_lookalikes_and_partial_lines_from_a_driver_change_nothing() {
    let s = setup();
    let quiet = probe_json(s, "", 0);
    assert!(
        quiet.broken_vendors().is_empty(),
        "{:?}",
        quiet.broken_vendors()
    );
    // The bad ICD, behaving, is PoCL: two vendors, pocl0 and pocl1.
    let labels: Vec<&str> = quiet
        .platforms
        .iter()
        .flat_map(|p| &p.devices)
        .map(|d| d.label.as_str())
        .collect();
    assert_eq!(labels, ["pocl0", "pocl1"]);
    // Each is pocl0 to a process that loads its library alone.
    for d in quiet.platforms.iter().flat_map(|p| &p.devices) {
        assert_eq!(d.icd_label.as_deref(), Some("pocl0"), "{}", d.label);
    }
    for (mode, expect_in_tail) in [
        ("print", "bad icd: a partial line on stdout"),
        ("protocol", "@@clhip {not json"),
    ] {
        let p = probe_json(s, mode, 0);
        assert!(
            p.broken_vendors().is_empty(),
            "{mode}: {:?}",
            p.broken_vendors()
        );
        assert_eq!(p.opencl_status, "ok", "{mode}");
        assert_eq!(p.platforms, quiet.platforms, "{mode}");
        assert!(
            p.opencl_vendors[0]
                .stderr_tail
                .iter()
                .any(|l| l.contains(expect_in_tail)),
            "{mode}: {:?}",
            p.opencl_vendors[0].stderr_tail
        );
    }
}

/// `icd_env` is what makes a process load one vendor and not its broken neighbour: with the
/// crashing ICD as the machine's only `.icd` file, a vendor probe under PoCL's `icd_env`
/// still answers.
fn icd_env_makes_the_loader_load_that_vendor_alone() {
    let s = setup();
    let p = probe_json(s, "crash", 1);
    let env = p.icd_env("pocl0").expect("pocl0 records its library");
    let vendors = s.bad_icd.parent().unwrap().join("vendors");
    std::fs::create_dir_all(&vendors).unwrap();
    std::fs::write(
        vendors.join("bad.icd"),
        format!("{}\n", s.bad_icd.display()),
    )
    .unwrap();
    // The vendor child alone, with the crashing ICD as the machine's only vendor.
    let vendor_child = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_clhip"));
        c.arg(clhip::probe::VENDOR_CHILD_SUBCOMMAND)
            .env_remove("OCL_ICD_FILENAMES")
            .env_remove("OCL_ICD_VENDORS")
            .env("OPENCL_VENDOR_PATH", &vendors)
            .env("CLHIP_BAD_ICD", "crash")
            .env("CLHIP_BAD_ICD_POCL", &s.pocl)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    // Without it the crashing ICD is loaded, and the process dies of it.
    let (out, _) = run_promptly(vendor_child());
    assert!(
        !out.status.success(),
        "the bad ICD was not loaded: {}",
        text(&out.stdout)
    );
    let mut cmd = vendor_child();
    cmd.envs(env);
    let (out, _) = run_promptly(cmd);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{}",
        out.status,
        text(&out.stderr)
    );
    assert!(
        stdout.contains("\"opencl_status\":\"ok\"") && stdout.contains("pocl0"),
        "{stdout}"
    );
}

/// The other half: a probe waiting on a hung driver, killed with SIGTERM, takes its
/// vendor children (and the helper the driver forked) with it.
fn sigterm_to_a_probe_waiting_on_a_hung_vendor_leaves_nothing_behind() {
    let s = setup();
    let tag = new_tag("sigterm");
    // A limit the test never reaches: the probe is still waiting when it is terminated.
    let mut child = probe_command(s, "hang", &tag, 600, &[])
        .spawn()
        .expect("clhip starts");
    // The probe, its hung vendor child and the helper the bad ICD forked.
    let until = Instant::now() + PROMPT;
    while tagged_processes(&tag).len() < 3 {
        assert!(
            Instant::now() < until,
            "the hang never started: {:?}",
            tagged_processes(&tag)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The bad ICD prints before it hangs; give the forked helper a moment to exist for sure.
    std::thread::sleep(Duration::from_millis(300));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM to clhip");
    let until = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting on clhip") {
            break st;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("clhip probe ignored SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(15), "{status}");
    assert_nothing_left(&tag);
}

/// `clhip run ARGS` with the bad ICD (in `mode`) listed before PoCL, results in `json`.
fn run_command(s: &Setup, mode: &str, tag: &str, json: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clhip"));
    cmd.arg("run").args(args).arg("--json").arg(json);
    with_bad_icd(&mut cmd, s, mode, tag, LIMIT_S);
    cmd
}

/// With a vendor that hangs in its platform query, `run` still runs every case of the healthy
/// vendor (its workers never load the hung one), and exits 1 naming the broken vendor.
fn run_with_a_hung_vendor_runs_every_pocl_case_and_fails_naming_it() {
    let s = setup();
    let tag = new_tag("run-hang");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bad-icd-run-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let filter = "pocl0+host/*/handoff/*";
    let cmd = run_command(s, "hang", &tag, &json, &[filter, "--timeout", "60"]);
    let started = Instant::now();
    let out = cmd_output_within(cmd, Duration::from_secs(300));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("broken driver") && err.contains("hung"),
        "{err}"
    );
    assert!(err.contains(&s.bad_icd.display().to_string()), "{err}");
    // The file is complete, and says which vendor broke: `load` lists that as a problem.
    let loaded = clhip::report::load(&json).unwrap();
    assert!(
        loaded
            .problems
            .iter()
            .any(|p| p.contains("broke in the probe")),
        "{:?}",
        loaded.problems
    );
    let r = loaded.report;
    assert!(r.results.len() >= 30, "{} cases ran", r.results.len());
    assert!(
        r.results.iter().all(|c| !matches!(
            c.outcome.kind(),
            clhip::model::OutcomeKind::Timeout
                | clhip::model::OutcomeKind::Crash
                | clhip::model::OutcomeKind::Error
        )),
        "{:?}",
        r.results
            .iter()
            .map(|c| (c.id.clone(), c.outcome.reason()))
            .collect::<Vec<_>>()
    );
    assert_eq!(r.broken_vendors.len(), 1, "{:?}", r.broken_vendors);
    assert!(started.elapsed() < Duration::from_secs(300));
    assert_nothing_left(&tag);
}

/// With the crashing vendor as the machine's only one, `run` gets to no case: it exits 1 naming
/// the vendor, and its results file says no case ran, never `complete`, so that `report` and a
/// `diff` against it exit 1 too instead of reading the empty run as every case removed.
fn a_run_whose_only_vendor_crashed_in_the_probe_is_stored_as_no_case_run() {
    let s = setup();
    let tag = new_tag("run-only-crash");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bad-icd-run-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let mut cmd = run_command(s, "crash", &tag, &json, &[]);
    cmd.env("OCL_ICD_FILENAMES", &s.bad_icd);
    let out = cmd_output_within(cmd, Duration::from_secs(120));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("broken driver"), "{err}");
    let loaded = clhip::report::load(&json).unwrap();
    assert!(
        matches!(
            loaded.report.status,
            clhip::report::RunStatus::NothingRun { .. }
        ),
        "{:?}",
        loaded.report.status
    );
    assert!(loaded.report.results.is_empty());
    let clean = dir.join("clean.json");
    let o = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["run", "--mock-cases", "pass,pass", "--json"])
        .arg(&clean)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for args in [
        vec!["report".as_ref(), json.as_os_str()],
        vec!["diff".as_ref(), clean.as_os_str(), json.as_os_str()],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_clhip"))
            .args(&args)
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("incomplete: no case ran (every OpenCL vendor broke in the probe)")
                && err.contains(&s.bad_icd.display().to_string()),
            "{args:?}: {err}"
        );
    }
    assert_nothing_left(&tag);
}

/// A driver whose worker prints partial lines and protocol look-alikes (the behaving bad ICD
/// is a second PoCL, `pocl1`, whose workers load it): every case still gets its own verdict.
fn run_with_a_driver_that_prints_protocol_lookalikes_gets_every_verdict() {
    let s = setup();
    let tag = new_tag("run-protocol");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bad-icd-run-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let cmd = run_command(s, "protocol", &tag, &json, &["pocl1+host/copy/*/handoff/*"]);
    let out = cmd_output_within(cmd, Duration::from_secs(300));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let r = clhip::report::load_json(&json).unwrap();
    assert_eq!(
        r.results.len(),
        9,
        "{:?}",
        r.results.iter().map(|c| &c.id).collect::<Vec<_>>()
    );
    assert!(r.results.iter().all(|c| !matches!(
        c.outcome.kind(),
        clhip::model::OutcomeKind::Error | clhip::model::OutcomeKind::Crash
    )));
    assert_nothing_left(&tag);
}

/// The OpenCL labels of the bad ICD's device and of PoCL's own, as a probe with the bad ICD in
/// `mode` (enumerating like PoCL) gives them, and the bad ICD's device as probed.
fn labels(s: &Setup, mode: &str) -> (String, String, clhip::probe::DeviceProbe) {
    let p = probe_json(s, mode, 0);
    let devices: Vec<&clhip::probe::DeviceProbe> =
        p.platforms.iter().flat_map(|p| &p.devices).collect();
    let of = |library: &str| {
        *devices
            .iter()
            .find(|d| d.icd_library.as_deref() == Some(library))
            .unwrap_or_else(|| panic!("no device of {library}: {devices:?}"))
    };
    let bad = of(&s.bad_icd.display().to_string());
    (bad.label.clone(), of(&s.pocl).label.clone(), bad.clone())
}

/// `clhip run FILTERS` with the bad ICD in `mode`: its exit code and results.
fn run_planted(s: &Setup, mode: &str, filters: &[&str]) -> (Option<i32>, RunReport) {
    let tag = new_tag(mode);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bad-icd-run-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let out = cmd_output_within(
        run_command(s, mode, &tag, &json, filters),
        Duration::from_secs(300),
    );
    let r =
        clhip::report::load_json(&json).unwrap_or_else(|e| panic!("{e:#}\n{}", text(&out.stderr)));
    assert_nothing_left(&tag);
    (out.status.code(), r)
}

/// The results whose id starts with `prefix`: id, outcome kind, reason.
fn outcomes_of<'r>(r: &'r RunReport, prefix: &str) -> Vec<(&'r str, OutcomeKind, String)> {
    r.results
        .iter()
        .filter(|c| c.id.starts_with(prefix))
        .map(|c| (c.id.as_str(), c.outcome.kind(), c.outcome.reason()))
        .collect()
}

/// A driver that reports success for clEnqueueWriteBuffer and writes nothing: every handoff
/// case's check counters keep the buffer's poison. That is wrong data from the driver, so
/// every case fails, naming the buffer, the word, what was written and what was read; never a
/// harness error. PoCL itself, in the same run, passes.
fn a_driver_that_drops_a_write_fails_every_handoff_case_naming_the_word() {
    let s = setup();
    let (bad, good, _) = labels(s, "drop-write");
    let (code, r) = run_planted(
        s,
        "drop-write",
        &[
            &format!("{bad}+host/*/handoff/*"),
            &format!("{good}+host/copy/finish/handoff/n=1"),
        ],
    );
    assert_eq!(code, Some(1));
    let planted = outcomes_of(&r, &format!("{bad}+host/"));
    assert!(planted.len() >= 30, "{} cases ran", planted.len());
    let poison = clhip::paths::POISON_WORD;
    for (id, kind, reason) in &planted {
        assert_eq!(*kind, OutcomeKind::Fail, "{id}: {reason}");
        assert!(
            reason.starts_with(
                "OpenCL pattern check's result buffer for the pattern written by host, read back \
                 after clEnqueueWriteBuffer (word 0 is the mismatch count)"
            ) && reason.contains(&format!("got {poison:#010x} want 0x00000000")),
            "{id}: {reason}"
        );
    }
    // A filter without `*` is a substring: n=1 and n=1048576.
    let control = outcomes_of(&r, &format!("{good}+host/"));
    assert!(!control.is_empty());
    assert!(
        control.iter().all(|c| c.1 == OutcomeKind::Pass),
        "{control:?}"
    );
}

/// A driver that advertises fine-grain buffer SVM and returns NULL from clSVMAlloc for it has
/// failed, not lacked the capability: every fine-grain case fails with the call and what the
/// device advertised, and the run exits 1. Coarse-grain SVM, which it does not refuse, passes.
fn fine_grain_svm_advertised_and_refused_fails_every_case() {
    let s = setup();
    let (bad, _, device) = labels(s, "svm-fine-null");
    // The probe, which allocates nothing, sees the capability advertised.
    match &device.svm {
        clhip::probe::Queried::Value(caps) => assert!(caps.fine_grain_buffer, "{caps}"),
        other => panic!("{other:?}"),
    }
    let (code, r) = run_planted(
        s,
        "svm-fine-null",
        &[
            &format!("{bad}+host/cl-svm-fine/*/handoff/*"),
            &format!("{bad}+host/cl-svm-coarse/map/handoff/n=1"),
        ],
    );
    assert_eq!(code, Some(1));
    let fine = outcomes_of(&r, &format!("{bad}+host/cl-svm-fine/"));
    assert!(fine.len() >= 12, "{} cases ran", fine.len());
    for (id, kind, reason) in &fine {
        assert_eq!(*kind, OutcomeKind::Fail, "{id}: {reason}");
        assert!(
            reason.starts_with("clSVMAlloc(CL_MEM_SVM_FINE_GRAIN_BUFFER) returned NULL")
                && reason.ends_with(
                    "although CL_DEVICE_SVM_CAPABILITIES advertises CL_DEVICE_SVM_FINE_GRAIN_BUFFER"
                ),
            "{id}: {reason}"
        );
    }
    let coarse = outcomes_of(&r, &format!("{bad}+host/cl-svm-coarse/"));
    assert!(!coarse.is_empty());
    assert!(
        coarse.iter().all(|c| c.1 == OutcomeKind::Pass),
        "{coarse:?}"
    );
}

fn cmd_output_within(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd.spawn().expect("clhip starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("clhip's output"),
        Err(_) => {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("clhip run still running after {limit:?}");
        }
    }
}

/// With `OCL_ICD_VENDORS` naming a directory that holds no `.icd` file, the probe says so: not
/// that the variable is unset. Needs no OpenCL: nothing is loaded.
fn an_empty_vendor_directory_is_named_for_what_it_is() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("empty-vendors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .arg("probe")
        .env_remove("OCL_ICD_FILENAMES")
        .env("OCL_ICD_VENDORS", &dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let opencl = stdout
        .lines()
        .find(|l| l.starts_with("OpenCL: "))
        .unwrap_or_else(|| panic!("no OpenCL line: {stdout}"));
    assert!(
        opencl.contains(&format!(
            "OCL_ICD_VENDORS is set to {}, a directory with no .icd file",
            dir.display()
        )),
        "{opencl}"
    );
    assert!(!opencl.contains("unset"), "{opencl}");
}

tests!(
    a_hung_vendor_is_reported_and_killed_and_pocl_still_probed,
    a_crashing_vendor_is_reported_as_sigsegv_and_pocl_still_probed,
    a_vendor_exiting_inside_a_call_is_reported_and_pocl_still_probed,
    probe_json_carries_the_broken_vendor_row,
    protocol_lookalikes_and_partial_lines_from_a_driver_change_nothing,
    icd_env_makes_the_loader_load_that_vendor_alone,
    sigterm_to_a_probe_waiting_on_a_hung_vendor_leaves_nothing_behind,
    run_with_a_hung_vendor_runs_every_pocl_case_and_fails_naming_it,
    a_run_whose_only_vendor_crashed_in_the_probe_is_stored_as_no_case_run,
    run_with_a_driver_that_prints_protocol_lookalikes_gets_every_verdict,
    a_driver_that_drops_a_write_fails_every_handoff_case_naming_the_word,
    fine_grain_svm_advertised_and_refused_fails_every_case,
    an_empty_vendor_directory_is_named_for_what_it_is
);
