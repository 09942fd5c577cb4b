//! Expectation files: what a driver is known to do, as data, picked by the run's driver
//! fingerprint (deqp-runner's baselines and skips in one format). A directory of them
//! (`cases/expectations/`) serves a fleet: each file says which fingerprints it applies to,
//! and lists case-id globs with the outcome known for them and where that knowledge comes
//! from (a header, a release note, a run). A case no applicable file lists is expected to
//! pass: on a driver's first run, what the files name is known and everything else is new.
//!
//! Rules that cover one case must agree on its outcome, in one file or across the files that
//! apply: there is no precedence between them, and a run refuses files where two disagree
//! about a case of its matrix (a later rule never silently overrides an earlier one, nor the
//! other way round). A rule's glob that matches no case of the matrix on this machine is
//! warned about, as a stale baseline line is.
//!
//! ```toml
//! version = 1
//! [applies]
//! # Every glob must match a line of the run's fingerprint (`clhip probe` shows them as
//! # `fingerprint lines`); `*` is the only wildcard.
//! fingerprint = ["hip version: 6.*", "hip device * arch: gfx908*"]
//!
//! [[expect]]
//! cases = ["*/vmm-fd+cl-import/*"]
//! outcome = "unsupported"
//! source = "ROCm/clr rocm-6.2.2 rocclr/device/device.hpp: no cl_khr_external_memory"
//! ```

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::cases::{InputError, locate, parse_toml};
use crate::filter::glob;
use crate::fingerprint::Fingerprint;
use crate::model::{Case, Expectation, OutcomeKind};

mod baseline;
pub use baseline::Baseline;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: Spanned<u32>,
    applies: Applies,
    #[serde(default)]
    expect: Vec<Spanned<ExpectFile>>,
    /// Globs (`*`) of kernel log lines known for this driver that do not make a passing case
    /// `warn`.
    #[serde(default)]
    kernel_log_allow: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Applies {
    fingerprint: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    cases: Vec<Spanned<String>>,
    outcome: Spanned<OutcomeKind>,
    source: String,
}

/// One rule: the case ids it covers, the outcome known for them, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub globs: Vec<String>,
    pub outcome: OutcomeKind,
    pub source: String,
    /// `file:line` of the rule, for people to find it.
    pub at: String,
}

/// One expectation file, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectationFile {
    pub path: PathBuf,
    pub applies: Vec<String>,
    pub rules: Vec<Rule>,
    /// Kernel log lines (globs) that do not make a passing case `warn`.
    pub kernel_log_allow: Vec<String>,
}

impl ExpectationFile {
    pub fn parse(path: &Path, text: &str) -> Result<Self, InputError> {
        let raw: File = parse_toml(path, text)?;
        let err = |span: Range<usize>, msg: String| locate(path, text, span.start, msg);
        if *raw.version.get_ref() != 1 {
            return Err(err(
                raw.version.span(),
                format!(
                    "unsupported expectation-file version {} (this clhip reads version 1)",
                    raw.version.get_ref()
                ),
            ));
        }
        if raw.applies.fingerprint.is_empty() {
            return Err(err(
                0..0,
                "`[applies] fingerprint` is empty: a file must say which drivers it is for".into(),
            ));
        }
        let mut rules = Vec::new();
        for e in raw.expect {
            let span = e.span();
            let e = e.into_inner();
            if e.cases.is_empty() {
                return Err(err(span, "an [[expect]] with no `cases`".into()));
            }
            for c in &e.cases {
                if c.get_ref().trim().is_empty() {
                    return Err(err(
                        c.span(),
                        "an empty case glob would match every case".into(),
                    ));
                }
            }
            if *e.outcome.get_ref() == OutcomeKind::Pass {
                return Err(err(
                    e.outcome.span(),
                    "`pass` needs no rule: a case no rule lists is expected to pass".into(),
                ));
            }
            if *e.outcome.get_ref() == OutcomeKind::Error {
                return Err(err(
                    e.outcome.span(),
                    "`error` is the harness's own failure, never a driver's known outcome".into(),
                ));
            }
            if e.source.trim().is_empty() {
                return Err(err(
                    span,
                    "an [[expect]] must say where its knowledge comes from (`source`)".into(),
                ));
            }
            let at = locate(path, text, span.start, "");
            rules.push(Rule {
                globs: e.cases.iter().map(|c| c.get_ref().clone()).collect(),
                outcome: *e.outcome.get_ref(),
                source: e.source,
                at: format!("{}:{}", path.display(), at.line),
            });
        }
        for g in &raw.kernel_log_allow {
            if g.get_ref().trim().is_empty() || g.get_ref().chars().all(|c| c == '*') {
                return Err(err(
                    g.span(),
                    "a `kernel_log_allow` glob that matches every line would hide every kernel warning".into(),
                ));
            }
        }
        Ok(ExpectationFile {
            path: path.to_path_buf(),
            applies: raw.applies.fingerprint,
            rules,
            kernel_log_allow: raw
                .kernel_log_allow
                .iter()
                .map(|g| g.get_ref().clone())
                .collect(),
        })
    }

    /// Whether every `applies` glob matches some line of `fingerprint`.
    pub fn applies_to(&self, fingerprint: &Fingerprint) -> bool {
        let lines = fingerprint.lines();
        self.applies
            .iter()
            .all(|g| lines.iter().any(|l| glob(g, l)))
    }
}

/// The expectation files that apply to one run, in file-name order, and what else `load`
/// read: the files that do not apply, with why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectations {
    pub files: Vec<ExpectationFile>,
    /// The `--expectations` argument, a file or a directory.
    pub from: PathBuf,
    /// Files read that do not apply to this run, each with the `applies` globs that no line
    /// of the fingerprint matches.
    pub not_applying: Vec<(PathBuf, Vec<String>)>,
    /// The fingerprint's lines, to show against the globs when no file applies.
    pub fingerprint_lines: Vec<String>,
}

/// Two rules that give one case different outcomes, with the cases they both cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub first: Rule,
    pub second: Rule,
    /// The ids both rules cover, in matrix order.
    pub cases: Vec<String>,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b) = (&self.first, &self.second);
        write!(
            f,
            "expectation rules disagree: {} says {} and {} says {} for {} case{}, e.g. `{}`",
            a.at,
            a.outcome,
            b.at,
            b.outcome,
            self.cases.len(),
            if self.cases.len() == 1 { "" } else { "s" },
            self.cases.first().map_or("", String::as_str),
        )
    }
}

/// Every disagreement between rules of the files that apply, for the run to refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflicts(pub Vec<Conflict>);

impl std::error::Error for Conflicts {}

impl std::fmt::Display for Conflicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in &self.0 {
            writeln!(f, "{c}")?;
        }
        write!(
            f,
            "no rule takes precedence over another: narrow the `cases` of one rule of each pair \
             so that every case has one known outcome"
        )
    }
}

impl Expectations {
    /// Loads `path` (one file, or every `*.toml` of a directory, the suffix in any case; its
    /// subdirectories are not read) and keeps the files that apply to `fingerprint`. Any
    /// malformed file is an error at its line, applicable or not; so is a directory with no
    /// `*.toml` file, since the run was asked for expectations and would get none.
    pub fn load(path: &Path, fingerprint: &Fingerprint) -> Result<Self, InputError> {
        let cannot = |p: &Path, e: std::io::Error| InputError {
            file: p.to_path_buf(),
            line: 0,
            column: 0,
            message: format!("cannot read: {e}"),
        };
        let mut paths = Vec::new();
        if path.is_dir() {
            // What is there but not read, to say why nothing was.
            let mut passed_over = Vec::new();
            for entry in std::fs::read_dir(path).map_err(|e| cannot(path, e))? {
                let p = entry.map_err(|e| cannot(path, e))?.path();
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                if p.is_dir() {
                    passed_over.push(format!("{name}/"));
                } else if p
                    .extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case("toml"))
                {
                    paths.push(p);
                } else {
                    passed_over.push(name);
                }
            }
            if paths.is_empty() {
                passed_over.sort();
                return Err(InputError {
                    file: path.to_path_buf(),
                    line: 0,
                    column: 0,
                    message: if passed_over.is_empty() {
                        "no *.toml file: the directory is empty, so no expectation applies".into()
                    } else {
                        format!(
                            "no *.toml file, so no expectation applies (it holds {}; only \
                             `*.toml` files directly in it are read, not subdirectories)",
                            passed_over.join(", ")
                        )
                    },
                });
            }
            paths.sort();
        } else {
            paths.push(path.to_path_buf());
        }
        let lines = fingerprint.lines();
        let mut files = Vec::new();
        let mut not_applying = Vec::new();
        for p in paths {
            let text = crate::input::read_text(
                "an expectation file",
                &p,
                crate::input::EXPECTATIONS_LIMIT,
            )?;
            let f = ExpectationFile::parse(&p, &text)?;
            if f.applies_to(fingerprint) {
                files.push(f);
            } else {
                let unmet = f
                    .applies
                    .iter()
                    .filter(|g| !lines.iter().any(|l| glob(g, l)))
                    .cloned()
                    .collect();
                not_applying.push((p, unmet));
            }
        }
        Ok(Expectations {
            files,
            from: path.to_path_buf(),
            not_applying,
            fingerprint_lines: lines,
        })
    }

    /// The kernel log globs of every file that applies.
    pub fn kernel_log_allow(&self) -> Vec<String> {
        self.files
            .iter()
            .flat_map(|f| f.kernel_log_allow.iter().cloned())
            .collect()
    }

    /// What a person should hear about the loaded files: the ones that apply, or, when none
    /// does, a warning that names each file's unmet globs and this machine's fingerprint.
    pub fn notes(&self) -> Vec<String> {
        if !self.files.is_empty() {
            return self
                .files
                .iter()
                .map(|f| format!("expectations from {}", f.path.display()))
                .collect();
        }
        let n = self.not_applying.len();
        let mut out = vec![format!(
            "warning: --expectations {}: {n} file{} read, none applies to this machine's \
             fingerprint, so every case is expected to pass:",
            self.from.display(),
            if n == 1 { "" } else { "s" },
        )];
        for (p, unmet) in &self.not_applying {
            let wants: Vec<String> = unmet.iter().map(|g| format!("`{g}`")).collect();
            out.push(format!(
                "  {} wants {}, which no fingerprint line matches",
                p.display(),
                wants.join(" and ")
            ));
        }
        out.push(if self.fingerprint_lines.is_empty() {
            "  this machine's fingerprint has no lines (nothing was found)".into()
        } else {
            format!(
                "  this machine's fingerprint lines: {}",
                self.fingerprint_lines
                    .iter()
                    .map(|l| format!("`{l}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        out
    }

    /// Checks the rules of the files that apply against every case of the matrix on this
    /// machine (not only those a filter keeps: a filtered run must not hide a disagreement).
    /// Two rules that give one case different outcomes are an error; the warnings returned
    /// name each glob (`file:line` of its rule) that matches no case.
    pub fn check(&self, cases: &[Case]) -> Result<Vec<String>, Conflicts> {
        let rules: Vec<&Rule> = self.files.iter().flat_map(|f| &f.rules).collect();
        let mut used: Vec<Vec<bool>> = rules.iter().map(|r| vec![false; r.globs.len()]).collect();
        // Pairs of rules (indices) that disagree, in the order first met, with their cases.
        let mut conflicts: Vec<((usize, usize), Vec<String>)> = Vec::new();
        for case in cases {
            let id = case.id();
            let mut covering = Vec::new();
            for (i, r) in rules.iter().enumerate() {
                let mut covers = false;
                for (j, g) in r.globs.iter().enumerate() {
                    if glob(g, &id) {
                        used[i][j] = true;
                        covers = true;
                    }
                }
                if covers {
                    covering.push(i);
                }
            }
            for (k, &a) in covering.iter().enumerate() {
                for &b in &covering[k + 1..] {
                    if rules[a].outcome == rules[b].outcome {
                        continue;
                    }
                    match conflicts.iter_mut().find(|(pair, _)| *pair == (a, b)) {
                        Some((_, ids)) => ids.push(id.clone()),
                        None => conflicts.push(((a, b), vec![id.clone()])),
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(Conflicts(
                conflicts
                    .into_iter()
                    .map(|((a, b), cases)| Conflict {
                        first: rules[a].clone(),
                        second: rules[b].clone(),
                        cases,
                    })
                    .collect(),
            ));
        }
        let mut stale = Vec::new();
        for (r, used) in rules.iter().zip(&used) {
            for (g, &hit) in r.globs.iter().zip(used) {
                if !hit {
                    stale.push(format!("{} `{g}`", r.at));
                }
            }
        }
        Ok(stale)
    }

    /// The rule that decides `case`, if any: the first that covers it, which [`Self::check`]
    /// has made sure every other one that does agrees with.
    pub fn rule(&self, case: &Case) -> Option<&Rule> {
        let id = case.id();
        self.files
            .iter()
            .flat_map(|f| &f.rules)
            .find(|r| r.globs.iter().any(|g| glob(g, &id)))
    }

    /// What the run expects of `case`: a rule's outcome, else a negative control's latitude,
    /// else a pass (no file knows of a reason it should not).
    pub fn expectation(&self, case: &Case) -> Expectation {
        match self.rule(case) {
            Some(r) => Expectation::Known(r.outcome),
            None if case.is_negative_control() => Expectation::NegativeControl,
            None => Expectation::Pass,
        }
    }

    /// A starting expectation file from a run: one rule per non-pass (negative controls'
    /// stale reads and harness errors aside), its source the run.
    pub fn starting_file(
        results: &[crate::results::CaseResult],
        fingerprint: &Fingerprint,
        source: &str,
    ) -> String {
        let mut out = String::from(
            "# Known outcomes of one driver, from a run. Narrow `applies` to what matters\n# (a driver version, a GPU arch) and replace the sources with the reason where known.\nversion = 1\n\n[applies]\nfingerprint = [\n",
        );
        for line in fingerprint.lines() {
            if line.contains(" version: ") || line.contains(" arch: ") {
                out.push_str(&format!("    {},\n", toml_string(&line)));
            }
        }
        out.push_str("]\n");
        let mut written = std::collections::HashSet::new();
        for r in results {
            let kind = r.outcome.kind();
            let control = r.work.case().is_some_and(Case::is_negative_control);
            if matches!(kind, OutcomeKind::Pass | OutcomeKind::Error)
                || (control && kind == OutcomeKind::Fail)
            {
                continue;
            }
            // One rule for every GPU of the model: a fleet's hosts number their GPUs
            // differently, and a GPU that disagrees with its twins is the consistency
            // check's to flag, not a rule's.
            let case = any_device(&r.id);
            if !written.insert(case.clone()) {
                continue;
            }
            out.push_str(&format!(
                "\n[[expect]]\ncases = [{}]\noutcome = \"{kind}\"\nsource = {}\n",
                toml_string(&case),
                toml_string(&format!(
                    "{source}: {}",
                    r.outcome.reason().lines().next().unwrap_or("")
                )),
            ));
        }
        out
    }
}

/// A case id with its pair's device numbers made wildcards: `nvidia1+cuda1/copy/...` ->
/// `nvidia*+cuda*/copy/...`. An install's label (`hip@6.3.2:0`) keeps its version.
fn any_device(id: &str) -> String {
    let Some((pair, rest)) = id.split_once('/') else {
        return id.to_string();
    };
    let pair: Vec<String> = pair
        .split('+')
        .map(|side| {
            let name = side.trim_end_matches(|c: char| c.is_ascii_digit());
            if name.len() < side.len() {
                format!("{name}*")
            } else {
                side.to_string()
            }
        })
        .collect();
    format!("{}/{rest}", pair.join("+"))
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
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
}
