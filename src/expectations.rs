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
    #[serde(default)]
    flaky: Vec<Spanned<FlakyFile>>,
    #[serde(default)]
    skip: Vec<Spanned<SkipFile>>,
    /// Globs (`*`) of kernel log lines known for this driver that do not make a passing case
    /// `warn`.
    #[serde(default)]
    kernel_log_allow: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Applies {
    fingerprint: Vec<String>,
    #[serde(default)]
    required: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    cases: Vec<Spanned<String>>,
    outcome: Spanned<OutcomeKind>,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlakyFile {
    cases: Vec<Spanned<String>>,
    outcomes: Spanned<Vec<OutcomeKind>>,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkipFile {
    cases: Vec<Spanned<String>>,
    reason: String,
}

/// One rule: the case ids it covers, the outcome known for them (two, for a known flake), and
/// why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub globs: Vec<String>,
    pub outcome: OutcomeKind,
    /// A known flake's other outcome (`[[flaky]]`), the more severe of the two.
    pub also: Option<OutcomeKind>,
    pub source: String,
    /// `file:line` of the rule, for people to find it.
    pub at: String,
}

impl Rule {
    /// What the rule expects of a case it covers.
    pub fn expectation(&self) -> Expectation {
        match self.also {
            Some(other) => Expectation::KnownFlaky(self.outcome, other),
            None => Expectation::Known(self.outcome),
        }
    }

    /// `fault`, or `pass or timeout` for a known flake.
    pub fn describe(&self) -> String {
        match self.also {
            Some(other) => format!("{} or {other}", self.outcome),
            None => self.outcome.to_string(),
        }
    }
}

/// A `[[skip]]` rule: cases not to run on the drivers the file applies to (ones that hang a
/// driver or take a machine down), each listed as `skip` with the rule as its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipRule {
    pub globs: Vec<String>,
    pub reason: String,
    /// `file:line` of the rule.
    pub at: String,
}

/// One expectation file, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectationFile {
    pub path: PathBuf,
    pub applies: Vec<String>,
    /// `[applies] required = true`: a run on a machine this file does not apply to fails
    /// before any case (a runner that lost its GPU, or a job sent to the wrong runner).
    pub required: bool,
    pub rules: Vec<Rule>,
    pub skips: Vec<SkipRule>,
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
        let check_globs = |span: Range<usize>, cases: &[Spanned<String>], table: &str| {
            if cases.is_empty() {
                return Err(err(span, format!("a [[{table}]] with no `cases`")));
            }
            for c in cases {
                if c.get_ref().trim().is_empty() {
                    return Err(err(
                        c.span(),
                        "an empty case glob would match every case".into(),
                    ));
                }
            }
            Ok(cases
                .iter()
                .map(|c| c.get_ref().clone())
                .collect::<Vec<_>>())
        };
        let check_known = |kind: OutcomeKind, span: Range<usize>, table: &str| match kind {
            OutcomeKind::Error => Err(err(
                span,
                "`error` is the harness's own failure, never a driver's known outcome".into(),
            )),
            OutcomeKind::Skip if table == "flaky" => Err(err(
                span,
                "a case to leave out is a [[skip]] rule, not a flake".into(),
            )),
            _ => Ok(kind),
        };
        let line_of = |span: &Range<usize>| {
            format!(
                "{}:{}",
                path.display(),
                locate(path, text, span.start, "").line
            )
        };
        let mut rules = Vec::new();
        for e in raw.expect {
            let span = e.span();
            let e = e.into_inner();
            let globs = check_globs(span.clone(), &e.cases, "expect")?;
            if *e.outcome.get_ref() == OutcomeKind::Pass {
                return Err(err(
                    e.outcome.span(),
                    "`pass` needs no rule: a case no rule lists is expected to pass".into(),
                ));
            }
            let outcome = check_known(*e.outcome.get_ref(), e.outcome.span(), "expect")?;
            if e.source.trim().is_empty() {
                return Err(err(
                    span,
                    "an [[expect]] must say where its knowledge comes from (`source`)".into(),
                ));
            }
            rules.push(Rule {
                globs,
                outcome,
                also: None,
                source: e.source,
                at: line_of(&span),
            });
        }
        for f in raw.flaky {
            let span = f.span();
            let f = f.into_inner();
            let globs = check_globs(span.clone(), &f.cases, "flaky")?;
            let (list, list_span) = (f.outcomes.get_ref(), f.outcomes.span());
            let [a, b] = list.as_slice() else {
                return Err(err(
                    list_span,
                    format!(
                        "a [[flaky]] lists the two outcomes a case is known to come out as, not {}",
                        list.len()
                    ),
                ));
            };
            if a == b {
                return Err(err(
                    list_span,
                    format!("a [[flaky]] with `{a}` twice: one outcome is an [[expect]]"),
                ));
            }
            for kind in [a, b] {
                check_known(*kind, list_span.clone(), "flaky")?;
            }
            if f.source.trim().is_empty() {
                return Err(err(
                    span,
                    "a [[flaky]] must say where its knowledge comes from (`source`)".into(),
                ));
            }
            // The less severe first, so that two rules listing one pair in either order agree.
            let (outcome, also) = if a.severity() <= b.severity() {
                (*a, *b)
            } else {
                (*b, *a)
            };
            rules.push(Rule {
                globs,
                outcome,
                also: Some(also),
                source: f.source,
                at: line_of(&span),
            });
        }
        let mut skips = Vec::new();
        for k in raw.skip {
            let span = k.span();
            let k = k.into_inner();
            let globs = check_globs(span.clone(), &k.cases, "skip")?;
            if k.reason.trim().is_empty() {
                return Err(err(
                    span,
                    "a [[skip]] must say why the cases are left out (`reason`)".into(),
                ));
            }
            skips.push(SkipRule {
                globs,
                reason: k.reason,
                at: line_of(&span),
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
            required: raw.applies.required,
            rules,
            skips,
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
    /// Files marked `required` that do not apply, each with its unmet `applies` globs: the
    /// run fails on them before any case.
    pub required_unmet: Vec<(PathBuf, Vec<String>)>,
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
            a.describe(),
            b.at,
            b.describe(),
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
        let mut required_unmet = Vec::new();
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
                    .collect::<Vec<_>>();
                if f.required {
                    required_unmet.push((p.clone(), unmet.clone()));
                }
                not_applying.push((p, unmet));
            }
        }
        Ok(Expectations {
            files,
            from: path.to_path_buf(),
            not_applying,
            fingerprint_lines: lines,
            required_unmet,
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
                    if rules[a].expectation() == rules[b].expectation() {
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
        let ids: Vec<String> = cases.iter().map(Case::id).collect();
        for k in self.files.iter().flat_map(|f| &f.skips) {
            for g in &k.globs {
                if !ids.iter().any(|id| glob(g, id)) {
                    stale.push(format!("{} `{g}`", k.at));
                }
            }
        }
        Ok(stale)
    }

    /// The `[[skip]]` rule that leaves the case `id` out, if any: the first that covers it.
    /// A skip needs no agreement with the other rules: whatever they expect of the case, it
    /// is not run.
    pub fn skip_rule(&self, id: &str) -> Option<&SkipRule> {
        self.files
            .iter()
            .flat_map(|f| &f.skips)
            .find(|k| k.globs.iter().any(|g| glob(g, id)))
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
            Some(r) => r.expectation(),
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
mod tests;
