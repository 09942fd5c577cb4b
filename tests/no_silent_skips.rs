//! A test that cannot run here must be reported `ignored` with its reason, never `ok`
//! (tests/support/mod.rs, docs/running.md "What the tests need"). Checked from the source:
//!
//! - a test file run by libtest-mimic (`harness = false`) holds no `#[test]`: one added there,
//!   say by a merge, would compile to nothing and never run;
//! - no test prints that it skipped and returns: it calls `support::ignore`, or, in a unit
//!   test, is marked `ignore` through a gate build.rs sets.

use std::path::{Path, PathBuf};

/// Test code that may still end early, and why: a device property the unit tests' harness
/// cannot turn into `ignored` at run time, on a device where the test has no subject.
const ALLOWED: &[(&str, &str)] = &[
    (
        "src/fft/tests.rs",
        "a device without SVM has no second argument kind to switch to",
    ),
    (
        "src/runtimes/hip/handles.rs",
        "an HSA runtime with the dma-buf export (ROCm 5.6 on) has no missing export to name",
    ),
    (
        "src/runtimes/hip/status.rs",
        "with a HIP device present, the no-device refusal cannot happen",
    ),
];

/// The words a test uses when it gives up without saying so to the harness.
const SKIP_WORDS: &[&str] = &["skipping", "skipped", "not testable", "does not apply"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The test targets Cargo.toml runs without Rust's harness.
fn harness_false_tests(manifest: &str) -> Vec<String> {
    let table: toml::Table = manifest.parse().expect("Cargo.toml parses");
    let tests = table.get("test").and_then(|t| t.as_array());
    tests
        .into_iter()
        .flatten()
        .filter(|t| t.get("harness").and_then(|h| h.as_bool()) == Some(false))
        .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .collect()
}

/// `file:line` of each `#[test]` attribute in `text`.
fn test_attributes(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("#[test]"))
        .map(|(i, _)| format!("{file}:{}", i + 1))
        .collect()
}

/// `file:line: text` of each print in `text` that says a test skipped.
fn skip_prints(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("println!(") || l.contains("eprintln!("))
        .filter(|(_, l)| {
            let l = l.to_lowercase();
            SKIP_WORDS.iter().any(|w| l.contains(w))
        })
        .map(|(i, l)| format!("{file}:{}: {}", i + 1, l.trim()))
        .collect()
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, into);
        } else if p.extension().is_some_and(|x| x == "rs") {
            into.push(p);
        }
    }
}

#[test]
fn a_libtest_mimic_test_file_has_no_test_attribute() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let names = harness_false_tests(&manifest);
    assert!(names.contains(&"cli".to_string()), "{names:?}");
    let mut found = Vec::new();
    for name in names {
        let file = format!("tests/{name}.rs");
        let text = std::fs::read_to_string(root().join(&file)).unwrap();
        found.extend(test_attributes(&file, &text));
    }
    assert!(
        found.is_empty(),
        "under `harness = false` these never run; list the function in the file's `tests!` \
         instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_test_prints_that_it_skipped() {
    let mut files = Vec::new();
    rust_files(&root().join("tests"), &mut files);
    rust_files(&root().join("src"), &mut files);
    let mut found = Vec::new();
    for f in files {
        let file = f.strip_prefix(root()).unwrap().display().to_string();
        if file == "tests/no_silent_skips.rs" || ALLOWED.iter().any(|(a, _)| *a == file) {
            continue;
        }
        found.extend(skip_prints(&file, &std::fs::read_to_string(&f).unwrap()));
    }
    assert!(
        found.is_empty(),
        "a test that cannot run is reported ignored (support::ignore, or a build.rs gate in \
         unit tests), never passed:\n{}",
        found.join("\n")
    );
}

/// The checks above see what they look for.
#[test]
fn the_checks_see_a_planted_skip_and_a_planted_test_attribute() {
    let planted = "fn f() {\n    if !have_cc() {\n        eprintln!(\"skipped: no cc\");\n        return;\n    }\n}\n";
    assert_eq!(
        skip_prints("t.rs", planted),
        ["t.rs:3: eprintln!(\"skipped: no cc\");"]
    );
    assert!(skip_prints("t.rs", "let plant = \"skip-sync\";\n").is_empty());
    assert_eq!(
        test_attributes("t.rs", "#[test]\nfn a() {}\n    #[test]\n"),
        ["t.rs:1", "t.rs:3"]
    );
    let manifest = "[[test]]\nname = \"a\"\nharness = false\n\n[[test]]\nname = \"b\"\n";
    assert_eq!(harness_false_tests(manifest), ["a"]);
}
