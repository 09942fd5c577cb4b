//! The commands of the `clhip` binary, one file each, with their arguments; what they share
//! is here (stderr lines, argument parsers, the inputs several commands read), standard output
//! and the output files in [`outputs`], Ctrl-C and Ctrl-Z in [`signals`].
//!
//! These modules belong to the binary, not the library: they are where the process meets its
//! user (the exit status, standard output, a second Ctrl-C that ends the process at once), and
//! no module of the library can name them, so nothing but `main` reaches a command.

pub mod bench;
pub mod bench_interop;
pub mod diff;
pub mod explore;
pub mod internal;
pub mod list;
pub mod merge;
pub mod outputs;
pub mod probe;
pub mod report;
pub mod repro;
pub mod run;
pub mod signals;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use clhip::cases::Matrix;
use clhip::config::Profile;
use clhip::expectations::Expectations;
use clhip::filter::matches_filter;
use clhip::pairs;

/// A line on stderr, its control characters (a driver's, a file's) shown as text; a stderr
/// that cannot take it is no reason to fail.
pub fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{}", clhip::escape::terminal_line(line));
}

pub fn parse_timeout(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .parse()
        .map_err(|e| format!("`{s}` is not a number of seconds: {e}"))?;
    clhip::config::check_timeout(t).map_err(|e| format!("`{s}`: {e}"))
}

pub fn existing_dir(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    match std::fs::metadata(&p) {
        Ok(m) if m.is_dir() => Ok(p),
        Ok(_) => Err(format!("{s}: not a directory")),
        Err(e) => Err(format!("{s}: {e}")),
    }
}

/// `--cases FILE`, else the built-in matrix.
pub fn load_matrix(file: Option<&Path>) -> anyhow::Result<Matrix> {
    Ok(match file {
        Some(f) => Matrix::load(f)?,
        None => Matrix::default_matrix(),
    })
}

/// Refuses expectation rules that disagree about a case of the matrix on this machine, and
/// warns about each glob that matches none; returns those globs (`file:line `glob``).
pub fn check_expectations(
    known: &Expectations,
    matrix: &Matrix,
    probe: &clhip::probe::Probe,
) -> anyhow::Result<Vec<String>> {
    let every_case = matrix.expand(&pairs::from_probe(probe));
    let stale = known
        .check(&every_case)
        .with_context(|| format!("--expectations {}", known.from.display()))?;
    for s in &stale {
        note(&format!(
            "clhip: warning: expectation {s} matches no case of this matrix on this machine"
        ));
    }
    Ok(stale)
}

/// A glob of case ids to leave out, from --skip or a profile, with what names it.
pub struct SkipGlob {
    pub glob: String,
    /// `--skip `GLOB``, or the profile, its `file:line` and the glob.
    pub by: String,
}

/// The profile's skips, then --skip's. An empty glob, which would leave out every case, is
/// refused.
pub fn skip_globs(profile: Option<&Profile>, cli: &[String]) -> anyhow::Result<Vec<SkipGlob>> {
    let mut skips = Vec::new();
    if let Some(p) = profile {
        skips.extend(p.skips.iter().map(|s| SkipGlob {
            glob: s.glob.clone(),
            by: format!("profile `{}` ({}) `{}`", p.name, s.at, s.glob),
        }));
    }
    skips.extend(cli.iter().map(|g| SkipGlob {
        glob: g.clone(),
        by: format!("--skip `{g}`"),
    }));
    if let Some(g) = skips.iter().find(|s| s.glob.trim().is_empty()) {
        anyhow::bail!("skip {}: an empty glob would leave out every case", g.by);
    }
    Ok(skips)
}

/// What leaves the case `id` out, if anything: a --skip or profile glob (`--skip `GLOB``),
/// else an expectation file's `[[skip]]` rule (`file:line: reason`).
pub fn skip_source(id: &str, skips: &[SkipGlob], known: Option<&Expectations>) -> Option<String> {
    if let Some(s) = skips.iter().find(|s| matches_filter(&s.glob, id)) {
        return Some(s.by.clone());
    }
    let rule = known?.skip_rule(id)?;
    Some(format!("{}: {}", rule.at, rule.reason))
}
