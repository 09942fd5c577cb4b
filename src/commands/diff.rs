//! `clhip diff`: what changed between two runs.

use std::path::PathBuf;
use std::process::ExitCode;

use clhip::report;

use super::note;
use super::outputs::{checked_output, emit};

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The earlier run's results file.
    old: PathBuf,
    /// The later run's results file, compared against OLD.
    new: PathBuf,
    /// As Markdown tables, for reports/.
    #[arg(long)]
    markdown: bool,
    /// As one self-contained HTML page.
    #[arg(long, conflicts_with = "markdown")]
    html: bool,
    /// Write the rendering to this file instead of standard output.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Show only the cases that moved this way: regressions, fixes, changed, new, removed,
    /// not-run, not-in-this-run, races, or footprint (the footprint regressions) (the counts
    /// stay those of every case).
    #[arg(long, value_name = "MOVEMENT", value_parser = report::Only::parse)]
    only: Option<report::Only>,
}

pub fn diff(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let (old, new) = (&args.old, &args.new);
    let target = checked_output(args.output.as_deref(), &[("old", old), ("new", new)])?;
    let (a, b) = (report::load(old)?, report::load(new)?);
    for p in a.problems.iter().chain(&b.problems) {
        note(&format!("clhip: {p}"));
    }
    let mut d = report::diff(&a.report, &b.report);
    d.shown = args.only;
    let text = if args.html {
        report::render_diff_html(
            &d,
            (&old.display().to_string(), &a.report),
            (&new.display().to_string(), &b.report),
        )
    } else if args.markdown {
        report::render_diff_markdown(&d)
    } else {
        report::render_diff(&d)
    };
    emit(&text, target.as_ref())?;
    // A side that is not a whole run (interrupted, empty for a broken vendor, missing
    // shards, inconsistent) cannot vouch for "no regressions", as `report` exits 1 on it.
    Ok(
        if d.fails() || !a.problems.is_empty() || !b.problems.is_empty() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}
