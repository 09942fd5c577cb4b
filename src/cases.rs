//! The case matrix as data. `cases/default.toml` says which paths x syncs x ops x sizes run; it
//! is expanded over every pair found. Expectation baselines (`case-id,outcome` lines, as in
//! deqp-runner) turn a driver's known non-passes into expected ones. Bad input is rejected
//! with `file:line:column` and what was expected.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::model::{Case, Expectation, Op, OutcomeKind, Pair, PathKind, SyncMode};

/// The largest FFT the harness's OpenCL FFT runs: the seed's 4,194,304 complex elements.
pub const MAX_FFT: usize = 1 << 22;

/// The case matrix shipped with the binary, so `clhip run` works from any directory.
pub const DEFAULT_MATRIX: &str = include_str!("../cases/default.toml");
pub const DEFAULT_MATRIX_NAME: &str = "cases/default.toml";

/// A problem in an input file, located for a person to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

impl std::error::Error for InputError {}

fn locate(file: &Path, text: &str, offset: usize, message: impl Into<String>) -> InputError {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    InputError {
        file: file.to_path_buf(),
        line,
        column,
        message: message.into(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    version: Spanned<u32>,
    #[serde(rename = "group", default)]
    groups: Vec<Spanned<GroupFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    #[serde(default)]
    name: Option<String>,
    paths: Vec<Spanned<PathKind>>,
    syncs: Vec<Spanned<SyncMode>>,
    ops: Vec<Spanned<Op>>,
    sizes: Vec<Spanned<usize>>,
}

/// One validated group: every (path, sync) it yields is meaningful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub paths: Vec<PathKind>,
    pub syncs: Vec<SyncMode>,
    pub ops: Vec<Op>,
    pub sizes: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pub groups: Vec<Group>,
}

impl Matrix {
    pub fn load(file: &Path) -> Result<Self, InputError> {
        let text = std::fs::read_to_string(file).map_err(|e| InputError {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(file, &text)
    }

    pub fn default_matrix() -> Self {
        Self::parse(Path::new(DEFAULT_MATRIX_NAME), DEFAULT_MATRIX)
            .expect("the shipped case matrix is valid (tested)")
    }

    pub fn parse(file: &Path, text: &str) -> Result<Self, InputError> {
        let raw: MatrixFile = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            locate(file, text, at, e.message().trim().to_string())
        })?;
        let err = |span: Range<usize>, msg: String| locate(file, text, span.start, msg);
        if *raw.version.get_ref() != 1 {
            return Err(err(
                raw.version.span(),
                format!(
                    "unsupported case-file version {} (this clhip reads version 1)",
                    raw.version.get_ref()
                ),
            ));
        }
        if raw.groups.is_empty() {
            return Err(err(0..0, "no [[group]] tables: the matrix is empty".into()));
        }
        let mut groups = Vec::new();
        for (gi, g) in raw.groups.into_iter().enumerate() {
            let gspan = g.span();
            let g = g.into_inner();
            for (what, empty) in [
                ("paths", g.paths.is_empty()),
                ("syncs", g.syncs.is_empty()),
                ("ops", g.ops.is_empty()),
                ("sizes", g.sizes.is_empty()),
            ] {
                if empty {
                    return Err(err(
                        gspan.clone(),
                        format!("group has an empty `{what}` list"),
                    ));
                }
            }
            let paths: Vec<PathKind> = g.paths.iter().map(|p| *p.get_ref()).collect();
            for s in &g.syncs {
                let sync = *s.get_ref();
                if !paths.iter().any(|p| p.any_syncs().contains(&sync)) {
                    let allowed: Vec<String> = paths
                        .iter()
                        .map(|p| {
                            let names: Vec<&str> = p.any_syncs().iter().map(|s| s.name()).collect();
                            format!("{p}: {}", names.join(", "))
                        })
                        .collect();
                    return Err(err(
                        s.span(),
                        format!(
                            "sync `{sync}` applies to none of this group's paths ({})",
                            allowed.join("; ")
                        ),
                    ));
                }
            }
            for size in &g.sizes {
                let n = *size.get_ref();
                if n == 0 {
                    return Err(err(size.span(), "size must be at least 1".into()));
                }
                for op in &g.ops {
                    let op = *op.get_ref();
                    if matches!(op, Op::Fft | Op::Pipeline) && (!n.is_power_of_two() || n > MAX_FFT)
                    {
                        return Err(err(
                            size.span(),
                            format!(
                                "size {n} for op `{op}`: expected a power of two from 1 to {MAX_FFT} (the OpenCL FFT's range)"
                            ),
                        ));
                    }
                }
            }
            groups.push(Group {
                name: g.name.unwrap_or_else(|| format!("group {}", gi + 1)),
                paths,
                syncs: g.syncs.iter().map(|s| *s.get_ref()).collect(),
                ops: g.ops.iter().map(|o| *o.get_ref()).collect(),
                sizes: g.sizes.iter().map(|s| *s.get_ref()).collect(),
            });
        }
        Ok(Matrix { groups })
    }

    /// Every case of the matrix on every pair, in file order, without duplicates. Paths, syncs
    /// and ops that mean nothing for a pair are left out, not reported: they are not cases.
    pub fn expand(&self, pairs: &[Pair]) -> Vec<Case> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for pair in pairs {
            for g in &self.groups {
                for &path in &g.paths {
                    if !path.applies_to(pair.peer.api) {
                        continue;
                    }
                    for &sync in g
                        .syncs
                        .iter()
                        .filter(|s| path.syncs(pair.peer.api).contains(s))
                    {
                        for &op in g.ops.iter().filter(|o| o.applies_to(pair.peer.api)) {
                            for &n in &g.sizes {
                                let case = Case {
                                    pair: pair.clone(),
                                    path,
                                    sync,
                                    op,
                                    n,
                                };
                                if seen.insert(case.clone()) {
                                    out.push(case);
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// Keep the cases whose id matches any filter. A filter is a glob over the case id (`*`
/// matches any run of characters) or, without `*`, a substring. A filter that matches nothing
/// is an error: a typo must not silently run zero cases.
pub fn filter(cases: Vec<Case>, filters: &[String]) -> anyhow::Result<Vec<Case>> {
    if filters.is_empty() {
        return Ok(cases);
    }
    let ids: Vec<String> = cases.iter().map(Case::id).collect();
    for f in filters {
        if !ids.iter().any(|id| matches_filter(f, id)) {
            let example = ids.first().map_or("(no cases at all)".to_string(), |i| {
                format!("ids look like `{i}`")
            });
            anyhow::bail!(
                "filter `{f}` matches none of the {} cases; {example}",
                ids.len()
            );
        }
    }
    Ok(cases
        .into_iter()
        .zip(ids)
        .filter(|(_, id)| filters.iter().any(|f| matches_filter(f, id)))
        .map(|(c, _)| c)
        .collect())
}

pub fn matches_filter(filter: &str, id: &str) -> bool {
    if !filter.contains('*') {
        return id.contains(filter);
    }
    glob(filter.as_bytes(), id.as_bytes())
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// Known outcomes per case id for one driver (deqp-runner's baseline: `case-id,outcome`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    pub known: HashMap<String, OutcomeKind>,
}

impl Baseline {
    pub fn load(file: &Path) -> Result<Self, InputError> {
        let text = std::fs::read_to_string(file).map_err(|e| InputError {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(file, &text)
    }

    pub fn parse(file: &Path, text: &str) -> Result<Self, InputError> {
        let mut known = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |column: usize, message: String| InputError {
                file: file.to_path_buf(),
                line: i + 1,
                column,
                message,
            };
            let Some((id, outcome)) = line.split_once(',') else {
                return Err(at(1, "expected `case-id,outcome`".into()));
            };
            let kind: OutcomeKind = outcome
                .trim()
                .parse()
                .map_err(|e: String| at(raw.find(',').map_or(1, |c| c + 2), e))?;
            if kind == OutcomeKind::Pass {
                return Err(at(
                    1,
                    "a baseline lists non-passes only; remove this line".into(),
                ));
            }
            if known.insert(id.trim().to_string(), kind).is_some() {
                return Err(at(1, format!("case `{}` is listed twice", id.trim())));
            }
        }
        Ok(Baseline { known })
    }

    /// A baseline text from a run: every non-pass that is not already expected by its nature
    /// (a negative control's fail), `unsupported` and `skip` included, in run order, with a
    /// header naming the source. A case the baseline does not list passed on that driver, so
    /// a later run that cannot do it any more (pass -> unsupported) is a regression. Harness
    /// errors are never a driver's known behaviour and are left out.
    pub fn from_results(results: &[crate::runner::CaseResult], source: &str) -> String {
        let mut out = format!("# known outcomes, from {source}\n");
        for r in results {
            let kind = r.outcome.kind();
            let control = r.work.case().is_some_and(Case::is_negative_control);
            let known = !matches!(kind, OutcomeKind::Pass | OutcomeKind::Error);
            if known && !(control && kind == OutcomeKind::Fail) {
                out.push_str(&format!("{},{}\n", r.id, kind));
            }
        }
        out
    }

    /// What this baseline expects of `case`: its listed outcome, else a negative control's
    /// latitude, else a pass (the baseline's driver passed it).
    pub fn expectation(&self, case: &Case) -> Expectation {
        match self.known.get(&case.id()) {
            Some(kind) => Expectation::Known(*kind),
            None if case.is_negative_control() => Expectation::NegativeControl,
            None => Expectation::Pass,
        }
    }

    /// What a run with no baseline expects of `case`: nothing is known to have passed before.
    pub fn unbaselined(case: &Case) -> Expectation {
        if case.is_negative_control() {
            Expectation::NegativeControl
        } else {
            Expectation::Unbaselined
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClDeviceRef, Peer};

    fn pair() -> Pair {
        Pair {
            opencl: ClDeviceRef {
                platform_index: 0,
                device_index: 0,
                label: "pocl0".into(),
            },
            peer: Peer::HOST,
        }
    }

    fn parse(text: &str) -> Result<Matrix, InputError> {
        Matrix::parse(Path::new("cases/test.toml"), text)
    }

    #[test]
    fn shipped_matrix_is_valid_and_big_enough() {
        let m = Matrix::default_matrix();
        let cases = m.expand(&[pair()]);
        assert!(cases.len() >= 40, "only {} host-pair cases", cases.len());
        assert!(
            cases.iter().any(|c| c.op == Op::Fft && c.n == MAX_FFT),
            "the seed's 2^22 FFT must be in the default matrix"
        );
    }

    #[test]
    fn unknown_sync_names_file_line_and_choices() {
        let e = parse(
            "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\", \"mapp\"]\nops = [\"fft\"]\nsizes = [4]\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.file.to_str().unwrap()), (4, "cases/test.toml"));
        assert!(e.message.contains("mapp"), "{e}");
        assert!(
            e.message
                .contains("expected one of `finish`, `event`, `map`"),
            "{e}"
        );
        assert!(e.to_string().starts_with("cases/test.toml:4:"), "{e}");
    }

    #[test]
    fn sync_meaningless_for_every_path_is_rejected_at_its_line() {
        let e = parse(
            "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\",\n  \"map\"]\nops = [\"fft\"]\nsizes = [4]\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        assert!(e.message.contains("copy: finish, event, none"), "{e}");
    }

    #[test]
    fn fft_size_must_be_a_power_of_two_in_range() {
        let e = parse(
            "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\", \"fft\"]\nsizes = [4, 1000]\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (6, 13), "{e}");
        assert!(e.message.contains("power of two"), "{e}");
    }

    #[test]
    fn typos_and_syntax_errors_are_located() {
        let e = parse("version = 1\n[[group]]\npath = [\"copy\"]\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("unknown field `path`"), "{e}");
        let e = parse("version = 1\n[[group]\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = parse("version = 2\n").unwrap_err();
        assert!(e.message.contains("version 2"), "{e}");
    }

    #[test]
    fn expansion_skips_meaningless_combinations_and_duplicates() {
        let m = parse(
            "version = 1\n[[group]]\npaths = [\"copy\", \"cl-svm-coarse\"]\nsyncs = [\"finish\", \"map\"]\nops = [\"fft\", \"gemm\"]\nsizes = [4, 4]\n",
        )
        .unwrap();
        let ids: Vec<String> = m.expand(&[pair()]).iter().map(Case::id).collect();
        // copy takes finish, coarse SVM takes map; gemm needs a BLAS peer; 4 is listed twice.
        assert_eq!(
            ids,
            [
                "pocl0+host/copy/finish/fft/n=4",
                "pocl0+host/cl-svm-coarse/map/fft/n=4"
            ]
        );
    }

    #[test]
    fn filters_glob_substring_and_reject_unknown() {
        let cases = Matrix::default_matrix().expand(&[pair()]);
        let total = cases.len();
        let fft = filter(cases.clone(), &["*/fft/*".into()]).unwrap();
        assert!(!fft.is_empty() && fft.len() < total);
        assert!(fft.iter().all(|c| c.op == Op::Fft));
        let sub = filter(cases.clone(), &["cl-svm-fine".into()]).unwrap();
        assert!(sub.iter().all(|c| c.path == PathKind::ClSvmFine));
        let e = filter(cases, &["no-such-path".into()]).unwrap_err();
        assert!(e.to_string().contains("`no-such-path` matches none"), "{e}");
    }

    #[test]
    fn baseline_parses_and_locates_errors() {
        let b = Baseline::parse(
            Path::new("b.csv"),
            "# known on driver X\npocl0+host/copy/finish/fft/n=4,fault\n",
        )
        .unwrap();
        assert_eq!(
            b.known["pocl0+host/copy/finish/fft/n=4"],
            OutcomeKind::Fault
        );
        let e = Baseline::parse(Path::new("b.csv"), "a,fail\nb,flop\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3), "{e}");
        assert!(e.message.contains("flop"), "{e}");
        let e = Baseline::parse(Path::new("b.csv"), "a fail\n").unwrap_err();
        assert!(e.to_string().starts_with("b.csv:1:1: expected"), "{e}");
    }

    #[test]
    fn negative_controls_get_their_expectation() {
        let b = Baseline::default();
        let mut c = Matrix::default_matrix().expand(&[pair()])[0].clone();
        c.sync = SyncMode::None;
        assert_eq!(b.expectation(&c), Expectation::NegativeControl);
        c.sync = SyncMode::Finish;
        assert_eq!(b.expectation(&c), Expectation::Pass);
    }
}
