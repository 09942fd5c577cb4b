//! Expectation files say what they do: rules that disagree are refused naming both, a rule
//! that looks at nothing is warned about, a directory that gives no expectation says why, and
//! the console names the rule (or baseline line) a known outcome comes from. `list --probe`
//! runs these against recorded probes, with no device; the `run` tests need PoCL (they fail
//! without it under CLHIP_REQUIRE_OPENCL=1, as on CI).

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MI100: &str = "tests/fixtures/mi100-like-probe.json";

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .expect("clhip runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("clhip-expectations-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn list(expectations: &Path) -> Output {
    clhip(&[
        "list",
        "--probe",
        MI100,
        "--expectations",
        expectations.to_str().unwrap(),
    ])
}

/// A file for the MI100 fixture's fingerprint with one rule per `(glob, outcome)`; rule `k`
/// (from 0) starts on line `5 + 5 k`.
fn file_for_mi100(rules: &[(&str, &str)]) -> String {
    let mut text = "version = 1\n[applies]\nfingerprint = [\"hip version: 6.*\"]\n".to_string();
    for (glob, outcome) in rules {
        text.push_str(&format!(
            "\n[[expect]]\ncases = [\"{glob}\"]\noutcome = \"{outcome}\"\nsource = \"test\"\n"
        ));
    }
    text
}

fn rules_that_disagree_about_a_case_are_an_error_naming_both_in_one_file_or_two() {
    let dir = scratch("conflict-one");
    std::fs::write(
        dir.join("a.toml"),
        file_for_mi100(&[
            ("*/vmm-fd+cl-import/*", "unsupported"),
            ("*/semaphore/*", "fault"),
        ]),
    )
    .unwrap();
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let a = dir.join("a.toml");
    assert!(
        err.contains(&format!(
            "{}:5 says unsupported and {}:10 says fault",
            a.display(),
            a.display()
        )),
        "{err}"
    );
    assert!(err.contains("/vmm-fd+cl-import/semaphore/"), "{err}");
    assert!(o.stdout.is_empty(), "nothing listed under a conflict");

    let dir = scratch("conflict-two");
    std::fs::write(
        dir.join("a.toml"),
        file_for_mi100(&[("*/vmm-fd+cl-import/*", "unsupported")]),
    )
    .unwrap();
    std::fs::write(
        dir.join("b.toml"),
        file_for_mi100(&[("*/semaphore/*", "crash")]),
    )
    .unwrap();
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "{}:5 says unsupported and {}:5 says crash",
            dir.join("a.toml").display(),
            dir.join("b.toml").display()
        )),
        "{}",
        stderr(&o)
    );
    // Agreeing, they are fine.
    std::fs::write(
        dir.join("b.toml"),
        file_for_mi100(&[("*/semaphore/*", "unsupported")]),
    )
    .unwrap();
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

fn a_rule_that_matches_no_case_is_warned_about_with_its_file_and_line() {
    let dir = scratch("stale");
    std::fs::write(
        dir.join("a.toml"),
        file_for_mi100(&[
            ("*/vmm-fd+cl-import/*", "unsupported"),
            ("*/vmm-fd+cl-imprt/*", "fault"),
        ]),
    )
    .unwrap();
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let stale: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("matches no case"))
        .collect();
    assert_eq!(
        stale,
        [format!(
            "clhip: warning: expectation {}:10 `*/vmm-fd+cl-imprt/*` matches no case of this matrix on this machine",
            dir.join("a.toml").display()
        )],
        "{err}"
    );
    // Filtered to other cases, the rule still looks at cases of the matrix: no warning.
    let o = clhip(&[
        "list",
        "--probe",
        MI100,
        "--expectations",
        dir.join("a.toml").to_str().unwrap(),
        "*/copy/*",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("matches no case").count(),
        1,
        "{}",
        stderr(&o)
    );
}

fn a_directory_that_gives_no_expectation_says_why() {
    // Empty: an error, since expectations were asked for and none could apply.
    let dir = scratch("empty");
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no *.toml file: the directory is empty"),
        "{}",
        stderr(&o)
    );
    // Only other files, and TOML files in a subdirectory: the same error, naming them.
    std::fs::write(dir.join("notes.txt"), "x").unwrap();
    std::fs::create_dir(dir.join("old")).unwrap();
    std::fs::write(
        dir.join("old/a.toml"),
        file_for_mi100(&[("*/semaphore/*", "unsupported")]),
    )
    .unwrap();
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("it holds notes.txt, old/"),
        "{}",
        stderr(&o)
    );
    // `.TOML` is read as a TOML file.
    std::fs::write(
        dir.join("A.TOML"),
        file_for_mi100(&[("*/semaphore/*", "unsupported")]),
    )
    .unwrap();
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("A.TOML"), "{}", stderr(&o));
    // Files that do not apply: a loud warning, each file with what it wants, and what this
    // machine's fingerprint is.
    let dir = scratch("none-applies");
    std::fs::write(
        dir.join("b.toml"),
        "version = 1\n[applies]\nfingerprint = [\"opencl * driver: 580.*\", \"hip version: 6.*\"]\n",
    )
    .unwrap();
    let o = list(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("1 file read, none applies to this machine's fingerprint"),
        "{err}"
    );
    assert!(
        err.contains("b.toml wants `opencl * driver: 580.*`, which no fingerprint line matches"),
        "{err}"
    );
    assert!(err.contains("`opencl rocm0 driver: "), "{err}");
}

/// One PoCL case, `copy/finish/handoff/n=4`, that passes.
fn one_case(dir: &Path) -> PathBuf {
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\"]\nsizes = [4]\n",
    )
    .unwrap();
    cases
}

fn pocl_file(rules: &[(&str, &str)]) -> String {
    let mut text =
        "version = 1\n[applies]\nfingerprint = [\"opencl pocl* driver: *\"]\n".to_string();
    for (glob, outcome) in rules {
        text.push_str(&format!(
            "\n[[expect]]\ncases = [\"{glob}\"]\noutcome = \"{outcome}\"\nsource = \"test\"\n"
        ));
    }
    text
}

fn the_console_names_the_rule_or_baseline_line_a_known_outcome_comes_from() {
    support::opencl_device();
    let dir = scratch("source");
    let cases = one_case(&dir);
    let file = dir.join("pocl.toml");
    std::fs::write(&file, pocl_file(&[("*/copy/finish/handoff/*", "fault")])).unwrap();
    let json = dir.join("r.json");
    let o = clhip(&[
        "run",
        "--cases",
        cases.to_str().unwrap(),
        "--expectations",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "(unexpected pass: {}:5 says fault; update it)",
            file.display()
        )),
        "{err}"
    );
    assert!(!err.contains("the baseline"), "{err}");
    // From a baseline: its file and line.
    let baseline = dir.join("b.csv");
    std::fs::write(
        &baseline,
        "# known\npocl0+host/copy/finish/handoff/n=4,crash\n",
    )
    .unwrap();
    let o = clhip(&[
        "run",
        "--cases",
        cases.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "(unexpected pass: baseline {}:2 says crash; update it)",
            baseline.display()
        )),
        "{}",
        stderr(&o)
    );
}

fn a_run_refuses_disagreeing_rules_before_anything_runs_and_warns_about_stale_ones() {
    support::opencl_device();
    let dir = scratch("run-conflict");
    let cases = one_case(&dir);
    let json = dir.join("r.json");
    std::fs::write(&json, "previous results").unwrap();
    let file = dir.join("pocl.toml");
    std::fs::write(
        &file,
        pocl_file(&[("*/copy/*", "unsupported"), ("*/handoff/*", "fault")]),
    )
    .unwrap();
    let o = clhip(&[
        "run",
        "--cases",
        cases.to_str().unwrap(),
        "--expectations",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "{}:5 says unsupported and {}:10 says fault",
            file.display(),
            file.display()
        )),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "previous results");
    // A rule about no case of this machine: a warning, recorded in the results file.
    std::fs::write(
        &file,
        pocl_file(&[("*/copy/*", "fault"), ("*/no-such-op/*", "fault")]),
    )
    .unwrap();
    let o = clhip(&[
        "run",
        "--cases",
        cases.to_str().unwrap(),
        "--expectations",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stale = format!("{}:10 `*/no-such-op/*`", file.display());
    assert!(
        stderr(&o).contains(&format!("warning: expectation {stale} matches no case")),
        "{}",
        stderr(&o)
    );
    let r = clhip::report::load(&json).unwrap().report;
    assert_eq!(r.stale_baseline, [stale]);
}

tests!(
    rules_that_disagree_about_a_case_are_an_error_naming_both_in_one_file_or_two,
    a_rule_that_matches_no_case_is_warned_about_with_its_file_and_line,
    a_directory_that_gives_no_expectation_says_why,
    the_console_names_the_rule_or_baseline_line_a_known_outcome_comes_from,
    a_run_refuses_disagreeing_rules_before_anything_runs_and_warns_about_stale_ones
);
