//! Results name the build that made them: `--version` and every results file carry the commit
//! clhip was built from and whether the tree was dirty, and whether the run was planted; a
//! planted run's results cannot seed a reproducer. Runs the real binary on mock cases (no
//! device needed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clhip::build_id::BuildId;

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .expect("clhip runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-build-id-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `git rev-parse HEAD` of the source tree, or `unknown` where git cannot say.
fn source_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".into(), |o| text(&o.stdout).trim().to_string())
}

#[test]
fn version_names_the_commit_built_and_whether_the_tree_was_dirty() {
    let o = clhip(&["--version"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let line = text(&o.stdout);
    let commit = source_commit();
    let short = commit.get(..12).unwrap_or(&commit);
    let want = format!("clhip {} (commit {short}", env!("CARGO_PKG_VERSION"));
    assert!(
        line.starts_with(&want),
        "{line:?} does not start with {want:?}"
    );
    let dirty = BuildId::this().dirty;
    assert_eq!(line.contains(", dirty)"), dirty == Some(true), "{line:?}");
}

/// `clhip run --mock-cases pass,pass EXTRA --json DIR/NAME`'s results, as JSON.
fn mock_run(dir: &Path, name: &str, extra: &[&str]) -> serde_json::Value {
    let json = dir.join(name);
    let mut args = vec!["run", "--mock-cases", "pass,pass", "--json"];
    args.push(json.to_str().unwrap());
    args.extend(extra);
    let o = clhip(&args);
    assert!(o.status.code().is_some(), "{}", text(&o.stderr));
    serde_json::from_slice(&std::fs::read(&json).expect("the results file")).unwrap()
}

#[test]
fn every_results_file_carries_the_build_and_the_plant() {
    let dir = scratch("results");
    let clean = mock_run(&dir, "clean.json", &[]);
    let this = BuildId::this();
    assert_eq!(clean["build"]["commit"], this.commit.as_str(), "{clean}");
    assert_eq!(clean["build"]["commit"], source_commit().as_str());
    assert!(clean.get("planted").is_none(), "{clean}");
    // `none` is a plant test's control run: nothing planted.
    let control = mock_run(&dir, "control.json", &["--plant", "none"]);
    assert!(control.get("planted").is_none(), "{control}");
    let planted = mock_run(&dir, "planted.json", &["--plant", "flip-element"]);
    assert_eq!(planted["planted"]["plant"], "flip-element", "{planted}");
    assert_eq!(planted["build"], clean["build"]);
    // The Markdown report says so at its top, beside the build.
    let md = clhip(&[
        "report",
        dir.join("planted.json").to_str().unwrap(),
        "--markdown",
    ]);
    let md = text(&md.stdout);
    assert!(md.contains("| planted | flip-element |"), "{md}");
    let short = this.commit.get(..12).unwrap_or(&this.commit).to_string();
    assert!(md.contains(&format!("0.1.0 (commit {short}")), "{md}");
}

#[test]
fn a_planted_run_s_results_are_refused_as_a_reproducer_s_source() {
    // The run the issue names: flip-element planted in one case of an NVIDIA run, written before
    // plants were recorded (its command says it).
    let planted = "reports/nvidia-2xh200-580.159.04-cuda13.0-planted.json";
    let dir = scratch("repro");
    let out = dir.join("repro");
    let o = clhip(&[
        "repro",
        "nvidia1+cuda1/copy/finish/handoff/n=4097",
        "--from",
        planted,
        "--no-shrink",
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{planted} is the results of a planted run (--plant flip-element in cases matching nvidia1+cuda1/copy/finish/handoff/n=4097)")),
        "{err}"
    );
    assert!(!out.join("repro.c").exists());
    // The same run's unplanted twin seeds one.
    let clean = "reports/nvidia-2xh200-580.159.04-cuda13.0-main-8e2fe73.json";
    let o = clhip(&[
        "repro",
        "nvidia1+cuda1/copy/finish/handoff/n=4097",
        "--from",
        clean,
        "--no-shrink",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(out.join("repro.c").exists());
}

#[test]
fn color_is_asked_for_with_color_and_refused_with_no_color() {
    let colours = |args: &[&str], no_color: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_clhip"));
        cmd.args(args)
            .env("CLICOLOR_FORCE", "1")
            .env_remove("NO_COLOR");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(2));
        text(&o.stderr).contains('\x1b')
    };
    // A usage error, where clap colours its words.
    assert!(colours(&["run", "--no-such-flag"], false));
    assert!(colours(
        &["--color", "always", "run", "--no-such-flag"],
        true
    ));
    assert!(!colours(&["run", "--no-such-flag"], true));
    assert!(!colours(&["run", "--color=never", "--no-such-flag"], false));
}
