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
use clhip::expectations::Expectations;
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
