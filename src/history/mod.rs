//! `clhip history`: many runs' results files across nights, in an embedded store (SQLite), so
//! that a year of nights stays fast to ask. Import results files (a directory of CI artifacts),
//! then see each case's outcome night by night, flake rates over the last runs, the first night
//! of each regression with the fingerprint lines that changed, and what grew. Reads results
//! files only: no runtime, no runner.

pub mod html;
pub mod import;
pub mod store;
pub mod synth;
pub mod views;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;

pub use import::{Imported, import};
pub use store::Store;
pub use views::{History, Options, analyze, render_text};

#[derive(clap::Args, Debug, Clone)]
pub struct HistoryArgs {
    /// Results files (or journals), and directories searched recursively for `*.json`
    /// results files (CI artifacts), to import first. A file already in the store (same
    /// content) is skipped; JSON files of other kinds found in a directory are skipped and
    /// named; a corrupt file is an error naming it, and the rest are imported all the same.
    /// Without any, the store is only read.
    pub inputs: Vec<PathBuf>,
    /// The store: an SQLite file, made if missing.
    #[arg(long, default_value = "clhip-history.sqlite")]
    pub db: PathBuf,
    /// Flake rates and the night-by-night strips cover the last N runs.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub last: u32,
    /// A case worse than before on at least N of its nights in a row, up to the latest, is a
    /// regression; on fewer, it is listed as too soon to tell.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub stay: u32,
    /// Growth compares medians of N nights after a night and N before it.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub window: u32,
    /// Growth is a median after at least this many times the median before (more than 1).
    #[arg(long, default_value_t = 1.5, value_parser = parse_ratio)]
    pub grow: f64,
    /// Also write the views as one self-contained HTML page.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Write the text views to this file instead of standard output.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Write synthetic nights into this directory (tests and benchmarks): `--from`'s run
    /// repeated `--nights` times with planted flakes, a regression and growth. Nothing is
    /// imported.
    #[arg(long, hide = true, value_name = "DIR", requires = "from")]
    pub synthesize: Option<PathBuf>,
    #[arg(long, hide = true, value_name = "RESULTS")]
    pub from: Option<PathBuf>,
    #[arg(long, hide = true, default_value_t = 365)]
    pub nights: usize,
    #[arg(long, hide = true, default_value_t = 200)]
    pub regression_night: usize,
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("`{s}`: {e}"))?;
    if v.is_finite() && v > 1.0 {
        Ok(v)
    } else {
        Err(format!("`{s}`: a ratio above 1 (1.5 for 50% more)"))
    }
}

fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{}", crate::escape::terminal_line(line));
}

/// Standard output; a reader that has gone (`| head`) ends the output quietly.
fn to_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("writing to standard output"))
        }
        _ => Ok(()),
    }
}

/// `clhip history`. Exit 0, or 2 when a file could not be imported (each named on stderr;
/// the others are imported and the views written all the same).
pub fn run(args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.synthesize {
        let Some(from) = &args.from else {
            bail!("--synthesize needs --from RESULTS");
        };
        let base = crate::report::load_json(from)?;
        let plan = synth::Plan::new(&base, args.nights, args.regression_night)?;
        let written = synth::write_nights(&base, &plan, dir)?;
        note(&format!(
            "clhip: wrote {} synthetic nights under {}",
            written.len(),
            dir.display()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    // The store is written by SQLite, not replaced whole as the other outputs are; it is
    // checked by the same rules all the same (a regular file, not an input, not another output).
    let db = crate::output::check("--db", &args.db)?;
    if db.kind != crate::output::Kind::File {
        bail!(
            "--db {}: a history store is a regular file",
            args.db.display()
        );
    }
    let html = crate::output::check_given("--html", args.html.as_deref())?;
    let text = crate::output::check_given("-o", args.output.as_deref())?;
    let mut outputs = vec![("--db", &db)];
    outputs.extend(html.iter().map(|t| ("--html", t)));
    outputs.extend(text.iter().map(|t| ("-o", t)));
    let inputs: Vec<(&str, &Path)> = args
        .inputs
        .iter()
        .map(|p| ("results", p.as_path()))
        .collect();
    crate::output::refuse_collisions(&outputs, &inputs)?;

    let mut store = Store::open(&db.path, !args.inputs.is_empty())?;
    let mut failed = false;
    if !args.inputs.is_empty() {
        let done = import(&mut store, &args.inputs)?;
        for (path, problems) in &done.stored {
            for p in problems {
                note(&format!(
                    "clhip: stored {} with a problem: {p}",
                    path.display()
                ));
            }
        }
        for (path, what) in &done.not_results {
            note(&format!(
                "clhip: skipped {}: not a results file ({what})",
                path.display()
            ));
        }
        note(&format!(
            "clhip: imported {} runs into {}; {} already there; {} JSON files skipped as not results files; {} not imported (errors)",
            done.stored.len(),
            args.db.display(),
            done.already.len(),
            done.not_results.len(),
            done.errors.len()
        ));
        for e in &done.errors {
            note(&format!("clhip: error: {e}"));
        }
        failed = !done.errors.is_empty();
    }
    let options = Options {
        last: args.last as usize,
        stay: args.stay as usize,
        window: args.window as usize,
        grow: args.grow,
    };
    let history = analyze(&store, &options)?;
    let rendered = render_text(&history);
    match &text {
        Some(t) => crate::output::write(t, rendered.as_bytes())?,
        None => to_stdout(&rendered)?,
    }
    if let Some(t) = &html {
        crate::output::write(t, html::render_html(&history).as_bytes())?;
    }
    if failed {
        note("clhip: some files were not imported (above); the views show what the store holds");
    }
    Ok(ExitCode::from(if failed { 2 } else { 0 }))
}

#[cfg(test)]
mod tests;
