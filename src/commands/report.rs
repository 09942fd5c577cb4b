//! `clhip report`: a saved results file rendered (the matrix, Markdown, HTML with figures), or
//! turned into a baseline or a starting expectation file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clhip::expectations::Baseline;
use clhip::expectations::Expectations;
use clhip::report;

use super::note;
use super::outputs::{checked_output, emit};

#[derive(clap::Args)]
pub struct ReportArgs {
    /// A results file (`run --json`, `merge -o`, or a journal of a run cut short).
    file: PathBuf,
    /// As Markdown, for reports/: what the run ran on, the matrix as tables, every non-pass.
    #[arg(long)]
    markdown: bool,
    /// The matrix as one self-contained HTML page: colour per outcome, and per cell the
    /// reasons, the worst error against its bound and the kernel log.
    #[arg(long, conflicts_with_all = ["markdown", "baseline", "expectations"])]
    html: bool,
    /// Write the rendering to this file instead of standard output.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// With --html: embed this SVG figure after the matrix (`clhip bench interop --svg`);
    /// repeatable.
    #[arg(long, requires = "html")]
    figure: Vec<PathBuf>,
    /// Print the run's non-passes as a baseline (`case-id,outcome` lines, for --baseline):
    /// what this driver is known to do, so the next run reports only changes.
    #[arg(long, conflicts_with = "markdown")]
    baseline: bool,
    /// Print a starting expectation file (TOML, for --expectations) from the run: one rule
    /// per non-pass, applying to this run's driver and GPU versions.
    #[arg(long, conflicts_with_all = ["markdown", "baseline"])]
    expectations: bool,
    /// Also write the run as JUnit XML to this file (as `run --junit` does): a suite per
    /// pair, with its time.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

/// Exit 1 when the file is not a whole, consistent run: it is shown, and said to be so.
pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let file = &args.file;
    let mut inputs: Vec<(&str, &PathBuf)> = vec![("results", file)];
    inputs.extend(args.figure.iter().map(|f| ("figure", f)));
    let target = checked_output(args.output.as_deref(), &inputs)?;
    let junit = clhip::output::check_given("--junit", args.junit.as_deref())?;
    if let Some(j) = &junit {
        let outs: Vec<(&str, &clhip::output::Target)> = target
            .iter()
            .map(|t| ("-o", t))
            .chain([("--junit", j)])
            .collect();
        let inputs: Vec<(&str, &Path)> = inputs.iter().map(|(w, p)| (*w, p.as_path())).collect();
        clhip::output::refuse_collisions(&outs, &inputs)?;
    }
    let loaded = report::load(file)?;
    let r = &loaded.report;
    let mut figures = Vec::new();
    for f in &args.figure {
        let svg = clhip::input::read_text("a figure", f, clhip::input::FIGURE_LIMIT)?;
        let title = format!(
            "{}",
            f.file_name()
                .map_or(f.display(), |n| Path::new(n).display())
        );
        figures.push(
            report::Figure::inline(&title, &svg)
                .map_err(|why| anyhow::anyhow!("{}: {why}", f.display()))?,
        );
    }
    let text = if args.html {
        report::render_html_with_figures(r, &loaded.problems, &figures)
    } else if args.expectations {
        Expectations::starting_file(&r.results, &r.fingerprint, &file.display().to_string())
    } else if args.baseline {
        Baseline::from_results(&r.results, &file.display().to_string()).to_string()
    } else if args.markdown {
        report::render_markdown(r)
    } else {
        format!(
            "{}{}\n",
            report::render_matrix(&r.results),
            report::closing_line(&r.summary)
        )
    };
    emit(&text, target.as_ref())?;
    if let Some(j) = &junit {
        report::write_junit(r, j)?;
    }
    for id in &r.stale_baseline {
        note(&format!(
            "clhip: baseline entry `{id}` matched no case of that run"
        ));
    }
    // An incomplete or inconsistent file is shown, and said to be so.
    for p in &loaded.problems {
        note(&format!("clhip: {p}"));
    }
    Ok(if loaded.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
