//! Footprints on PoCL: each case's results record carries what its crossing took, and `diff`
//! calls a case whose host memory grew past the rule a `footprint` regression, which fails it,
//! while two clean runs differ by nothing it flags. The real binary and workers on the first
//! OpenCL device; without OpenCL the tests are ignored, unless CLHIP_REQUIRE_OPENCL=1, when
//! they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clhip::model::OutcomeKind;
use clhip::report::{RunReport, load_json};
use libtest_mimic::{Arguments, Failed, Trial};

/// The one case the plant leaks in.
const LEAKY: &str = "pocl0+host/copy/event/handoff/n=4097";

fn main() {
    let args = Arguments::from_args();
    let opencl = clhip::runtimes::opencl::test_device().is_some();
    let trials = vec![
        Trial::test(
            "every_case_records_its_footprint_and_a_host_peer_no_device_memory",
            every_case_records_its_footprint_and_a_host_peer_no_device_memory,
        )
        .with_ignored_flag(!opencl),
        Trial::test(
            "a_leak_in_one_case_is_a_footprint_regression_and_clean_reruns_are_not",
            a_leak_in_one_case_is_a_footprint_regression_and_clean_reruns_are_not,
        )
        .with_ignored_flag(!opencl),
    ];
    libtest_mimic::run(&args, trials).exit();
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-footprint-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .unwrap()
}

/// `clhip run` over four handoff cases (two sizes, two syncs), with `extra` arguments.
fn run(dir: &Path, name: &str, extra: &[&str]) -> Result<(PathBuf, RunReport), Failed> {
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\", \"event\"]\nops = [\"handoff\"]\nsizes = [4097, 65536]\n",
    )
    .unwrap();
    let json = dir.join(format!("{name}.json"));
    let mut args = vec![
        "run",
        "--timeout",
        "60",
        "--cases-per-worker",
        "1",
        "-j",
        "1",
        "--cases",
        cases.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = clhip(&args);
    let report = load_json(&json)
        .map_err(|e| format!("{e}\nstderr: {}", String::from_utf8_lossy(&out.stderr)))?;
    if out.status.code() != Some(0) {
        return Err(format!(
            "{name}: exit {:?}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok((json, report))
}

fn every_case_records_its_footprint_and_a_host_peer_no_device_memory() -> Result<(), Failed> {
    let dir = scratch("record");
    let (json, report) = run(&dir, "clean", &[])?;
    if report.results.len() != 4 {
        return Err(format!("{} results", report.results.len()).into());
    }
    for r in &report.results {
        let f = r
            .footprint
            .as_ref()
            .ok_or(format!("{}: no footprint", r.id))?;
        // The crossing's peak cannot be below where it began; a host peer has no device, and
        // the record says so by leaving the device out, never by a 0.
        let ok = f.host_before > 0
            && f.host_peak.is_some_and(|p| p >= f.host_before)
            && f.device_before.is_none()
            && f.device_after_setup.is_none();
        if !ok {
            return Err(format!("{}: {f:?}", r.id).into());
        }
    }
    let text = std::fs::read_to_string(&json).unwrap();
    if text.contains("\"device_before\"") || !text.contains("\"host_peak\"") {
        return Err("the JSON writes absent device memory as a field".into());
    }
    let md = clhip(&["report", json.to_str().unwrap(), "--markdown"]);
    if !String::from_utf8_lossy(&md.stdout).contains("## Footprint") {
        return Err("report --markdown has no footprint section".into());
    }
    Ok(())
}

fn a_leak_in_one_case_is_a_footprint_regression_and_clean_reruns_are_not() -> Result<(), Failed> {
    let dir = scratch("leak");
    let (clean, _) = run(&dir, "clean", &[])?;
    let (again, _) = run(&dir, "again", &[])?;
    let (leaky, report) = run(
        &dir,
        "leaky",
        &["--plant", "leak-host", "--plant-only", LEAKY],
    )?;
    // The plant leaks and changes no data: every case still passes.
    for r in &report.results {
        if r.outcome.kind() != OutcomeKind::Pass {
            return Err(format!("{}: {}", r.id, r.outcome.reason()).into());
        }
    }
    let grown = report
        .results
        .iter()
        .find(|r| r.id == LEAKY)
        .and_then(|r| r.footprint?.host_growth())
        .ok_or("the leaky case has no host growth")?;
    if grown < 64 << 20 {
        return Err(format!("the leaky case grew by {grown} bytes only").into());
    }

    let diff = |old: &Path, new: &Path| {
        let o = clhip(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    // Two clean runs: their growth differs by allocator noise, which the rule does not flag.
    let (code, text) = diff(&clean, &again);
    if code != Some(0) || !text.contains(", 0 footprint regressions") {
        return Err(format!("clean against clean: exit {code:?}\n{text}").into());
    }
    let (code, text) = diff(&clean, &leaky);
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("! footprint"))
        .collect();
    let want = format!("! footprint   {LEAKY}: host ");
    let ok = code == Some(1)
        && flagged.len() == 1
        && flagged[0].starts_with(&want)
        && text.contains("0 regressions, 0 fixes")
        && text.contains(", 1 footprint regressions");
    if !ok {
        return Err(format!("clean against leaky: exit {code:?}\n{text}").into());
    }
    Ok(())
}
