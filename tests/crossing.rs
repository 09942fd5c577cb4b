//! The crossing test: every case of the default matrix must depend on both sides having done
//! their work on the shared memory. The whole matrix runs twice through real workers, once with
//! the OpenCL side planted as a no-op (every kernel launch becomes a marker) and once with the
//! peer side planted as a no-op (no kernel, write or library call on the case's memory). Every
//! case must come out non-pass both times; any that passes is listed as a failure of the test.
//!
//! On CI this runs the pairs the first OpenCL device forms (PoCL with the host). On a GPU
//! machine, `CLHIP_CROSSING_FILTER=nvidia0+cuda0 cargo test --release --test crossing` runs it
//! for that pair, and `CLHIP_CROSSING_OUT=DIR` keeps both results files there.

#[macro_use]
mod support;

use std::path::PathBuf;
use std::process::Command;

use clhip::model::OutcomeKind;
use clhip::report::load_json;

fn run_planted(plant: &str) -> Vec<(String, OutcomeKind, String)> {
    support::opencl_device();
    let dir = match std::env::var_os("CLHIP_CROSSING_OUT") {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("clhip-crossing-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join(format!("crossing-{plant}.json"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clhip"));
    cmd.args(["run", "--plant", plant, "--timeout", "120", "-j", "2"])
        .arg("--json")
        .arg(&json);
    if let Ok(filter) = std::env::var("CLHIP_CROSSING_FILTER") {
        cmd.arg(filter);
    }
    let out = cmd.output().unwrap();
    let report = load_json(&json).unwrap_or_else(|e| {
        panic!(
            "{e}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    report
        .results
        .iter()
        .map(|r| (r.id.clone(), r.outcome.kind(), r.outcome.reason()))
        .collect()
}

fn assert_all_non_pass(plant: &str) {
    let results = run_planted(plant);
    assert!(!results.is_empty(), "{plant}: no case ran");
    let passed: Vec<String> = results
        .iter()
        .filter(|(_, kind, _)| *kind == OutcomeKind::Pass)
        .map(|(id, _, why)| format!("  {id}: {why}"))
        .collect();
    let mut by_kind = std::collections::BTreeMap::new();
    for (_, kind, _) in &results {
        *by_kind.entry(kind.name()).or_insert(0usize) += 1;
    }
    eprintln!(
        "{plant}: {} cases planted, outcomes {by_kind:?}",
        results.len()
    );
    assert!(
        passed.is_empty(),
        "{plant}: {} of {} cases passed although one side did nothing:\n{}",
        passed.len(),
        results.len(),
        passed.join("\n")
    );
}

fn no_case_passes_when_opencl_does_nothing() {
    assert_all_non_pass("cl-noop");
}

fn no_case_passes_when_the_peer_does_nothing() {
    assert_all_non_pass("peer-noop");
}

tests!(
    no_case_passes_when_opencl_does_nothing,
    no_case_passes_when_the_peer_does_nothing
);
