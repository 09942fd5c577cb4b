//! `clhip history` from the command line: synthetic nights (the hidden `--synthesize`) as CI
//! artifacts with a corrupt file among them, imported and shown as text and HTML.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BASE: &str = "reports/nvidia-h200-580.159.04-cuda13.0-house-after-ec42c10.json";

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn history_imports_ci_artifacts_names_a_corrupt_file_and_finds_the_first_bad_night() {
    let dir = tempfile::tempdir().unwrap();
    let nights: PathBuf = dir.path().join("artifacts");
    std::fs::create_dir(&nights).unwrap();
    let o = clhip(&[
        "history",
        "--synthesize",
        s(&nights),
        "--from",
        BASE,
        "--nights",
        "40",
        "--regression-night",
        "30",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let corrupt = nights.join("night-012").join("results-rerun.json");
    std::fs::write(&corrupt, "{\"schema\": \"clhip-results/1\", \"seed\": ").unwrap();

    let db = dir.path().join("h.sqlite");
    let out = dir.path().join("history.txt");
    let page = dir.path().join("history.html");
    let o = clhip(&[
        "history",
        s(&nights),
        "--db",
        s(&db),
        "-o",
        s(&out),
        "--html",
        s(&page),
        "--last",
        "20",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("clhip: error: {}:1:", corrupt.display())),
        "{err}"
    );
    assert!(err.contains("imported 40 runs"), "{err}");
    let shown = std::fs::read_to_string(&out).unwrap();
    assert!(shown.contains("    first bad: night 30 ("), "{shown}");
    assert!(
        shown.contains(
            "      - opencl nvidia0 driver: 580.159.04\n      + opencl nvidia0 driver: 580.159.05"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("Flaky over the last 20 runs, nights 21-40"),
        "{shown}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");

    // The store alone: the same views, exit 0 (nothing to import, nothing wrong).
    let o = clhip(&["history", "--db", s(&db), "--last", "20"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), shown);

    // A store that is an input, or an output that is the store, is refused before anything.
    let first = nights.join("night-001").join("results.json");
    let o = clhip(&["history", s(&first), "--db", s(&first)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("would destroy"),
        "{}",
        text(&o.stderr)
    );
    let o = clhip(&["history", "--db", s(&db), "-o", s(&db)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("are the same file"),
        "{}",
        text(&o.stderr)
    );
    let o = clhip(&["history", "--db", s(&db), "--grow", "1"]);
    assert_eq!(o.status.code(), Some(2));
    // No store and nothing to import: said so, and no file made.
    let none = dir.path().join("none.sqlite");
    let o = clhip(&["history", "--db", s(&none)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no history store there"));
    assert!(!none.exists());
}
