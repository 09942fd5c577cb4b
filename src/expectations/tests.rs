use super::*;
use crate::fingerprint::RuntimeFingerprint;

fn mi100() -> Fingerprint {
    Fingerprint {
        runtimes: vec![RuntimeFingerprint {
            api: "hip".into(),
            status: "loaded".into(),
            library: Some("/opt/rocm-6.3.2/lib/libamdhip64.so.6".into()),
            version: Some("6.3.42133".into()),
            devices: vec![crate::fingerprint::DeviceInfo {
                ordinal: 0,
                name: "AMD Instinct MI100".into(),
                arch: "gfx908:sramecc+:xnack-".into(),
                ..Default::default()
            }],
        }],
        ..Default::default()
    }
}

const FILE: &str = r#"version = 1
[applies]
fingerprint = ["hip version: 6.*", "hip device * arch: gfx908*"]

[[expect]]
cases = ["*/vmm-fd+cl-import/*"]
outcome = "unsupported"
source = "clr: no cl_khr_external_memory"
"#;

#[test]
fn files_apply_by_fingerprint_and_rules_decide_cases() {
    let f = ExpectationFile::parse(Path::new("x.toml"), FILE).unwrap();
    assert!(f.applies_to(&mi100()));
    let mut other = mi100();
    other.runtimes[0].version = Some("7.0.1".into());
    assert!(!f.applies_to(&other));
    assert_eq!(f.rules[0].at, "x.toml:5");
}

#[test]
fn malformed_files_name_file_line_and_column() {
    let bad = FILE.replace("\"unsupported\"", "\"unsuported\"");
    let e = ExpectationFile::parse(Path::new("x.toml"), &bad).unwrap_err();
    assert_eq!((e.line, e.file.as_path()), (7, Path::new("x.toml")), "{e}");
    let pass = FILE.replace("\"unsupported\"", "\"pass\"");
    let e = ExpectationFile::parse(Path::new("x.toml"), &pass).unwrap_err();
    assert!(e.message.contains("needs no rule"), "{e}");
    let nosource = FILE.replace(
        "source = \"clr: no cl_khr_external_memory\"",
        "source = \"\"",
    );
    assert!(ExpectationFile::parse(Path::new("x.toml"), &nosource).is_err());
    let empty = FILE.replace("\"*/vmm-fd+cl-import/*\"", "\"\"");
    assert!(ExpectationFile::parse(Path::new("x.toml"), &empty).is_err());
    let noapplies = FILE.replace(
        "[\"hip version: 6.*\", \"hip device * arch: gfx908*\"]",
        "[]",
    );
    assert!(ExpectationFile::parse(Path::new("x.toml"), &noapplies).is_err());
}

#[test]
fn a_starting_file_has_one_rule_per_case_for_every_gpu_of_the_model() {
    assert_eq!(
        any_device("nvidia1+cuda1/copy/finish/fft/n=4096"),
        "nvidia*+cuda*/copy/finish/fft/n=4096"
    );
    assert_eq!(
        any_device("rocm0+hip@6.3.2:0/vmm-fd+cl-import/event/gemm/n=33"),
        "rocm*+hip@6.3.2:*/vmm-fd+cl-import/event/gemm/n=33"
    );
    assert_eq!(any_device("pocl0+host/x"), "pocl*+host/x");
    use crate::model::{Expectation, Outcome};
    let on = |id: &str| {
        crate::results::CaseResult::new(
            id.into(),
            crate::results::Work::Mock(crate::results::MockAction::Pass),
            Outcome::unsupported("no cl_khr_external_memory"),
            Expectation::Pass,
            0.1,
        )
    };
    let file = Expectations::starting_file(
        &[on("nvidia0+cuda0/a/n=1"), on("nvidia1+cuda1/a/n=1")],
        &mi100(),
        "run.json",
    );
    assert_eq!(file.matches("[[expect]]").count(), 1, "{file}");
    assert!(file.contains("cases = [\"nvidia*+cuda*/a/n=1\"]"), "{file}");
    ExpectationFile::parse(Path::new("x.toml"), &file).unwrap();
}

fn pocl_cases() -> Vec<Case> {
    let pair = crate::model::Pair {
        opencl: crate::model::ClDeviceRef {
            platform_index: 0,
            device_index: 0,
            label: "pocl0".into(),
        },
        peer: crate::model::Peer::HOST,
        install: None,
        cl_gpu: None,
    };
    crate::cases::Matrix::default_matrix().expand(&[pair])
}

fn applying(files: &[(&str, &str)]) -> Expectations {
    Expectations {
        files: files
            .iter()
            .map(|(name, text)| ExpectationFile::parse(Path::new(name), text).unwrap())
            .collect(),
        ..Default::default()
    }
}

const HEAD: &str = "version = 1\n[applies]\nfingerprint = [\"hip version: 6.*\"]\n";

fn rule(cases: &str, outcome: &str) -> String {
    format!("\n[[expect]]\ncases = [{cases}]\noutcome = \"{outcome}\"\nsource = \"s\"\n")
}

#[test]
fn rules_that_disagree_about_a_case_are_refused_naming_both() {
    let cases = pocl_cases();
    // One file: a path's rule and a sync's rule meet on the copy/finish cases.
    let one = format!(
        "{HEAD}{}{}",
        rule("\"*/copy/*\"", "unsupported"),
        rule("\"*/finish/*\"", "fault")
    );
    let e = applying(&[("a.toml", &one)]).check(&cases).unwrap_err();
    assert_eq!(e.0.len(), 1, "{e}");
    let c = &e.0[0];
    assert_eq!(
        (c.first.at.as_str(), c.second.at.as_str()),
        ("a.toml:5", "a.toml:10")
    );
    assert!(
        c.cases.iter().all(|id| id.contains("/copy/finish/")),
        "{:?}",
        c.cases
    );
    assert_eq!(
        c.cases.len(),
        cases
            .iter()
            .filter(|c| c.id().contains("/copy/finish/"))
            .count()
    );
    let text = e.to_string();
    assert!(
        text.contains("a.toml:5 says unsupported and a.toml:10 says fault"),
        "{text}"
    );
    // Two files: the same disagreement across them.
    let a = format!("{HEAD}{}", rule("\"*/copy/*\"", "unsupported"));
    let b = format!("{HEAD}{}", rule("\"*/finish/*\"", "crash"));
    let e = applying(&[("a.toml", &a), ("b.toml", &b)])
        .check(&cases)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("a.toml:5 says unsupported and b.toml:5 says crash"),
        "{e}"
    );
    // Rules that agree, or that never meet on a case, are fine.
    let b = format!("{HEAD}{}", rule("\"*/finish/*\"", "unsupported"));
    assert!(
        applying(&[("a.toml", &a), ("b.toml", &b)])
            .check(&cases)
            .is_ok()
    );
    let apart = format!(
        "{HEAD}{}{}",
        rule("\"*/copy/finish/*\"", "unsupported"),
        rule("\"*/copy/map/*\"", "fault")
    );
    assert!(applying(&[("a.toml", &apart)]).check(&cases).is_ok());
}

#[test]
fn a_glob_that_matches_no_case_is_named_with_its_rule() {
    let cases = pocl_cases();
    let file = format!(
        "{HEAD}{}{}",
        rule("\"*/copy/finish/*\", \"*/no-such-path/*\"", "unsupported"),
        rule("\"nvidia*+cuda*/*\"", "fault")
    );
    let stale = applying(&[("a.toml", &file)]).check(&cases).unwrap();
    assert_eq!(
        stale,
        ["a.toml:5 `*/no-such-path/*`", "a.toml:10 `nvidia*+cuda*/*`"]
    );
    // A filtered run still checks the whole matrix: the caller passes every case.
    assert_eq!(applying(&[("a.toml", &file)]).check(&[]).unwrap().len(), 3);
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("clhip-expectations-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_directory_with_no_toml_file_is_an_error_that_says_what_it_holds() {
    let dir = scratch("empty");
    let e = Expectations::load(&dir, &mi100()).unwrap_err();
    assert!(
        e.message.contains("no *.toml file: the directory is empty"),
        "{e}"
    );
    assert_eq!(e.file, dir);
    std::fs::write(dir.join("notes.txt"), FILE).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/x.toml"), FILE).unwrap();
    let e = Expectations::load(&dir, &mi100()).unwrap_err();
    assert!(
        e.message.contains("it holds notes.txt, sub/") && e.message.contains("subdirectories"),
        "{e}"
    );
    // The suffix in capitals is still a TOML file.
    std::fs::write(dir.join("MI100.TOML"), FILE).unwrap();
    let k = Expectations::load(&dir, &mi100()).unwrap();
    assert_eq!(k.files.len(), 1);
    assert_eq!(
        k.notes(),
        [format!(
            "expectations from {}",
            dir.join("MI100.TOML").display()
        )]
    );
}

#[test]
fn when_no_file_applies_the_notes_say_what_each_wants_and_what_was_found() {
    let dir = scratch("none-applies");
    std::fs::write(dir.join("a.toml"), FILE).unwrap();
    let mut other = mi100();
    other.runtimes[0].version = Some("7.0.1".into());
    let k = Expectations::load(&dir, &other).unwrap();
    assert!(k.files.is_empty());
    let notes = k.notes();
    assert!(
        notes[0].starts_with("warning: --expectations ")
            && notes[0].contains("1 file read, none applies"),
        "{notes:?}"
    );
    assert!(
        notes[1].contains("a.toml wants `hip version: 6.*`, which no fingerprint line")
            && !notes[1].contains("gfx908"),
        "{notes:?}"
    );
    assert!(notes[2].contains("`hip version: 7.0.1`"), "{notes:?}");
    // One file named directly: the same.
    let k = Expectations::load(&dir.join("a.toml"), &other).unwrap();
    assert!(k.notes()[0].contains("none applies"), "{:?}", k.notes());
}

#[test]
fn skip_and_flaky_rules_parse_with_their_lines_and_malformed_ones_are_refused() {
    let text = format!(
        "{HEAD}\n[[skip]]\ncases = [\"*/ipc/*\"]\nreason = \"hangs the driver\"\n\n[[flaky]]\ncases = [\"*/fft/*\"]\noutcomes = [\"timeout\", \"pass\"]\nsource = \"r.json\"\n"
    );
    let f = ExpectationFile::parse(Path::new("x.toml"), &text).unwrap();
    assert_eq!(
        f.skips,
        [SkipRule {
            globs: vec!["*/ipc/*".into()],
            reason: "hangs the driver".into(),
            at: "x.toml:5".into(),
        }]
    );
    let flake = &f.rules[0];
    assert_eq!(flake.at, "x.toml:9");
    // The less severe first, whatever the order written.
    assert_eq!(
        flake.expectation(),
        Expectation::KnownFlaky(OutcomeKind::Pass, OutcomeKind::Timeout)
    );
    assert_eq!(flake.describe(), "pass or timeout");
    assert!(!f.required);
    let bad = |from: &str, to: &str| {
        let e = ExpectationFile::parse(Path::new("x.toml"), &text.replace(from, to)).unwrap_err();
        (e.line, e.message)
    };
    let (line, m) = bad("reason = \"hangs the driver\"", "reason = \" \"");
    assert_eq!(line, 5, "{m}");
    assert!(m.contains("`reason`"), "{m}");
    let (line, m) = bad("[\"timeout\", \"pass\"]", "[\"timeout\"]");
    assert_eq!(line, 11, "{m}");
    assert!(m.contains("the two outcomes"), "{m}");
    let (line, m) = bad("[\"timeout\", \"pass\"]", "[\"pass\", \"pass\"]");
    assert!(line == 11 && m.contains("`pass` twice"), "{m}");
    let (line, m) = bad("[\"timeout\", \"pass\"]", "[\"error\", \"pass\"]");
    assert!(line == 11 && m.contains("harness's own failure"), "{m}");
    let (line, m) = bad("[\"timeout\", \"pass\"]", "[\"skip\", \"pass\"]");
    assert!(line == 11 && m.contains("[[skip]] rule"), "{m}");
    let (line, m) = bad("[\"timeout\", \"pass\"]", "[\"timeout\", \"pas\"]");
    assert_eq!(line, 11, "{m}");
    let (line, m) = bad("[\"*/ipc/*\"]", "[\"\"]");
    assert!(line == 6 && m.contains("empty case glob"), "{m}");
    let (line, m) = bad("cases = [\"*/ipc/*\"]", "cases = []");
    assert!(line == 5 && m.contains("[[skip]] with no `cases`"), "{m}");
    let (line, m) = bad("source = \"r.json\"", "source = \"\"");
    assert!(line == 9 && m.contains("`source`"), "{m}");
    let (_, m) = bad("reason =", "why =");
    assert!(m.contains("why"), "{m}");
}

#[test]
fn a_known_flake_accepts_either_outcome_and_judges_any_other_as_one_known_outcome() {
    use crate::model::Verdict as V;
    use OutcomeKind as K;
    let pass_or_timeout = Expectation::KnownFlaky(K::Pass, K::Timeout);
    assert_eq!(pass_or_timeout.verdict(K::Pass), V::Pass);
    assert_eq!(pass_or_timeout.verdict(K::Timeout), V::ExpectedNonPass);
    // Sideways or up the order from the worse of the two: a change to look at.
    assert_eq!(pass_or_timeout.verdict(K::Crash), V::Regression);
    assert_eq!(pass_or_timeout.verdict(K::Fail), V::Regression);
    assert_eq!(pass_or_timeout.verdict(K::Unsupported), V::Regression);
    assert_eq!(pass_or_timeout.verdict(K::Error), V::HarnessError);
    let fault_or_crash = Expectation::KnownFlaky(K::Fault, K::Crash);
    assert_eq!(fault_or_crash.verdict(K::Crash), V::ExpectedNonPass);
    assert_eq!(fault_or_crash.verdict(K::Fault), V::ExpectedNonPass);
    assert_eq!(fault_or_crash.verdict(K::Pass), V::UnexpectedPass);
    assert_eq!(fault_or_crash.verdict(K::Unsupported), V::UnexpectedPass);
    assert_eq!(fault_or_crash.verdict(K::Timeout), V::Regression);
}

#[test]
fn flake_rules_agree_only_with_the_same_two_outcomes() {
    let cases = pocl_cases();
    let flaky = |outcomes: &str| {
        format!(
            "\n[[flaky]]\ncases = [\"*/copy/finish/*\"]\noutcomes = [{outcomes}]\nsource = \"s\"\n"
        )
    };
    let a = format!("{HEAD}{}", flaky("\"pass\", \"timeout\""));
    let b = format!("{HEAD}{}", flaky("\"timeout\", \"pass\""));
    assert!(
        applying(&[("a.toml", &a), ("b.toml", &b)])
            .check(&cases)
            .is_ok()
    );
    let c = format!("{HEAD}{}", rule("\"*/finish/*\"", "timeout"));
    let e = applying(&[("a.toml", &a), ("c.toml", &c)])
        .check(&cases)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("a.toml:5 says pass or timeout and c.toml:5 says timeout"),
        "{e}"
    );
}

#[test]
fn skip_rules_leave_cases_out_whatever_else_is_known_and_stale_ones_are_named() {
    let cases = pocl_cases();
    let file = format!(
        "{HEAD}{}\n[[skip]]\ncases = [\"*/copy/finish/*\", \"*/no-such-path/*\"]\nreason = \"hangs\"\n",
        rule("\"*/copy/*\"", "fault"),
    );
    let k = applying(&[("a.toml", &file)]);
    let stale = k.check(&cases).unwrap();
    assert_eq!(stale, ["a.toml:10 `*/no-such-path/*`"]);
    let finish = cases
        .iter()
        .find(|c| c.id().contains("/copy/finish/"))
        .unwrap();
    assert_eq!(
        k.skip_rule(&finish.id()).map(|r| r.at.as_str()),
        Some("a.toml:10")
    );
    let event = cases
        .iter()
        .find(|c| c.id().contains("/copy/event/"))
        .unwrap();
    assert_eq!(k.skip_rule(&event.id()), None);
}

#[test]
fn a_required_file_that_does_not_apply_is_kept_for_the_run_to_refuse() {
    let dir = scratch("required");
    let required = FILE.replace("[applies]\n", "[applies]\nrequired = true\n");
    std::fs::write(dir.join("a.toml"), &required).unwrap();
    std::fs::write(dir.join("b.toml"), FILE).unwrap();
    let mut other = mi100();
    other.runtimes[0].version = Some("7.0.1".into());
    let k = Expectations::load(&dir, &other).unwrap();
    assert_eq!(
        k.required_unmet,
        [(dir.join("a.toml"), vec!["hip version: 6.*".to_string()])]
    );
    let k = Expectations::load(&dir, &mi100()).unwrap();
    assert!(k.required_unmet.is_empty());
    assert_eq!(k.files.len(), 2);
}

#[test]
fn the_shipped_mi100_files_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/expectations");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let f = ExpectationFile::parse(&p, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!f.rules.is_empty(), "{}", p.display());
        n += 1;
    }
    assert!(n >= 3, "one file per ROCm release line");
}

#[test]
fn a_case_gets_its_rule_else_a_negative_controls_latitude_else_pass() {
    let cases = pocl_cases();
    let file = format!("{HEAD}{}", rule("\"*/copy/finish/*\"", "fault"));
    let e = applying(&[("a.toml", &file)]);
    let ruled = |c: &&Case| c.id().contains("/copy/finish/");
    let listed = cases.iter().find(ruled).expect("a copy/finish case");
    assert_eq!(e.rule(listed).map(|r| r.at.as_str()), Some("a.toml:5"));
    assert_eq!(
        e.expectation(listed),
        Expectation::Known(OutcomeKind::Fault)
    );
    let control = cases
        .iter()
        .find(|c| !ruled(c) && c.is_negative_control())
        .expect("a negative control");
    assert_eq!(e.rule(control), None);
    assert_eq!(e.expectation(control), Expectation::NegativeControl);
    let plain = cases
        .iter()
        .find(|c| !ruled(c) && !c.is_negative_control())
        .expect("a case no rule lists");
    assert_eq!(e.expectation(plain), Expectation::Pass);
}
