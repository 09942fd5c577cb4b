//! Expectation files: what a driver is known to do, as data, picked by the run's driver
//! fingerprint (deqp-runner's baselines and skips in one format). A directory of them
//! (`cases/expectations/`) serves a fleet: each file says which fingerprints it applies to,
//! and lists case-id globs with the outcome known for them and where that knowledge comes
//! from (a header, a release note, a run). A case no applicable file lists is expected to
//! pass: on a driver's first run, what the files name is known and everything else is new.
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: Spanned<u32>,
    applies: Applies,
    #[serde(default)]
    expect: Vec<Spanned<ExpectFile>>,
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
        Ok(ExpectationFile {
            path: path.to_path_buf(),
            applies: raw.applies.fingerprint,
            rules,
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

/// The expectation files that apply to one run, in file-name order; the first rule that
/// covers a case decides it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectations {
    pub files: Vec<ExpectationFile>,
}

impl Expectations {
    /// Loads `path` (one file, or every `*.toml` of a directory) and keeps the files that
    /// apply to `fingerprint`. Any malformed file is an error at its line, applicable or not.
    pub fn load(path: &Path, fingerprint: &Fingerprint) -> Result<Self, InputError> {
        let cannot = |p: &Path, e: std::io::Error| InputError {
            file: p.to_path_buf(),
            line: 0,
            column: 0,
            message: format!("cannot read: {e}"),
        };
        let mut paths = Vec::new();
        if path.is_dir() {
            for entry in std::fs::read_dir(path).map_err(|e| cannot(path, e))? {
                let p = entry.map_err(|e| cannot(path, e))?.path();
                if p.extension().is_some_and(|x| x == "toml") {
                    paths.push(p);
                }
            }
            paths.sort();
        } else {
            paths.push(path.to_path_buf());
        }
        let mut files = Vec::new();
        for p in paths {
            let text = crate::input::read_text(
                "an expectation file",
                &p,
                crate::input::EXPECTATIONS_LIMIT,
            )?;
            let f = ExpectationFile::parse(&p, &text)?;
            if f.applies_to(fingerprint) {
                files.push(f);
            }
        }
        Ok(Expectations { files })
    }

    /// The rule that decides `case`, if any.
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
        results: &[crate::runner::CaseResult],
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
                devices: vec![crate::fingerprint::DeviceFingerprint {
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
            crate::runner::CaseResult::new(
                id.into(),
                crate::runner::Work::Mock(crate::mock::MockAction::Pass),
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
}
