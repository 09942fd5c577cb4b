//! A run says what it does. Without a terminal it is never silent: a status line every
//! `--heartbeat` seconds (cases done of the total, counts by outcome, ETA), and each result that
//! needs a look as it lands; a directory it makes unasked, it names. Runs the real binary on
//! mock cases (no device needed), its stderr a pipe as in CI.

use std::process::Command;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-heartbeat-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `clhip run --mock-cases MOCKS --json ... EXTRA`: its exit code and stderr.
fn run(mocks: &str, extra: &[&str]) -> (Option<i32>, String) {
    let dir = scratch(&format!("{}{}", mocks.len(), extra.len()));
    let o = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["run", "--mock-cases", mocks, "--json"])
        .arg(dir.join("r.json"))
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_run_without_a_terminal_prints_a_status_line_every_interval_and_each_problem_as_it_lands() {
    // A fail first, then about 4 s of slow passes, one at a time.
    let (code, err) = run("fail,slow,slow,slow,slow,slow", &["--heartbeat", "1"]);
    // A mock's outcome is its expected one: the run passes, the fail still needs a look.
    assert_eq!(code, Some(0), "{err}");
    let status: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("clhip: ") && l.contains(" cases done"))
        .collect();
    assert!(status.len() >= 2, "a line a second over ~4 s:\n{err}");
    for line in &status {
        assert!(line.contains("/6 cases done"), "{line}");
        assert!(line.contains(" elapsed, ETA "), "{line}");
    }
    // The counts grow, and the fail is counted.
    let done = |l: &str| -> usize {
        l.trim_start_matches("clhip: ")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(done(status.last().unwrap()) > done(status[0]), "{err}");
    assert!(status.last().unwrap().contains("fail 1"), "{err}");
    // The fail's line came as it landed: before a status line that counts it.
    let fail_line = err
        .lines()
        .position(|l| l.contains("mock/fail/0"))
        .unwrap_or_else(|| panic!("{err}"));
    let counted = err
        .lines()
        .position(|l| l.contains(" cases done (") && l.contains("fail 1"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(fail_line < counted, "{err}");
}

#[test]
fn the_heartbeat_is_every_30_s_by_default_and_off_at_0() {
    let (_, err) = run("slow,slow", &[]);
    assert!(!err.contains(" cases done"), "{err}");
    let (_, err) = run("slow,slow,slow", &["--heartbeat", "0"]);
    assert!(!err.contains(" cases done"), "{err}");
    let help = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--heartbeat <SECONDS>"), "{help}");
    assert!(help.contains("[default: 30]"), "{help}");
}

#[test]
fn a_run_without_json_says_it_made_the_reports_directory() {
    let dir = scratch("default-json");
    let run_here = || {
        Command::new(env!("CARGO_BIN_EXE_clhip"))
            .args(["run", "--mock-cases", "pass"])
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = run_here();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("clhip: made ./reports/ for the results (reports/latest.json)"),
        "{err}"
    );
    assert!(dir.join("reports/latest.json").is_file());
    // Once made, nothing to say.
    let again = String::from_utf8_lossy(&run_here().stderr).into_owned();
    assert!(!again.contains("made ./reports/"), "{again}");
}
