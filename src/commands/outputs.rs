//! Where a command's output goes: standard output ([`Stdout`]), a rendering's `-o` file
//! ([`emit`]), and the set of files a run writes ([`Outputs`]), each checked before anything
//! runs and each written whatever became of the others ([`Written`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use clhip::output::{self, Target};
use clhip::report::{self, RunReport};

use super::note;

/// Standard output that a closed pipe ends quietly (`clhip list | head`) and any other write
/// error (`> /dev/full`) turns into an error: never a panic, never a silent exit 0.
pub struct Stdout {
    closed: bool,
}

impl Stdout {
    pub fn new() -> Self {
        Stdout { closed: false }
    }

    pub fn write(&mut self, text: &str) -> anyhow::Result<()> {
        if self.closed {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        self.closed = !write_quietly_on_closed_pipe(&mut out, text)?;
        Ok(())
    }
}

/// Writes `text` to `out`: `Ok(false)` if the reader has gone (a closed pipe ends the output
/// quietly), an error for any other failure (a full disk must not look like success).
pub fn write_quietly_on_closed_pipe(
    out: &mut impl std::io::Write,
    text: &str,
) -> anyhow::Result<bool> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("writing to standard output"),
    }
}

/// `-o PATH` of `report` and `diff`, checked before anything is read: never one of the inputs.
pub fn checked_output(
    output: Option<&Path>,
    inputs: &[(&str, &PathBuf)],
) -> anyhow::Result<Option<Target>> {
    let Some(path) = output else {
        return Ok(None);
    };
    let target = output::check("-o", path)?;
    let inputs: Vec<(&str, &Path)> = inputs.iter().map(|(w, p)| (*w, p.as_path())).collect();
    output::refuse_collisions(&[("-o", &target)], &inputs)?;
    Ok(Some(target))
}

/// A rendering to its `-o` file, else to standard output.
pub fn emit(text: &str, target: Option<&Target>) -> anyhow::Result<()> {
    match target {
        Some(t) => output::write(t, text.as_bytes()),
        None => Stdout::new().write(text),
    }
}

/// Where `run` writes its results when no --json is given: the one output directory clhip
/// makes unasked.
const DEFAULT_JSON: &str = "reports/latest.json";

/// The outputs a run writes, checked before anything runs.
pub struct Outputs {
    pub json: Target,
    junit: Option<Target>,
    markdown: Option<Target>,
    html: Option<Target>,
}

impl Outputs {
    /// `--json` (else [`DEFAULT_JSON`]), `--junit`, `--markdown` and `--html`, none of them one
    /// of the run's `inputs` (each with the option that names it), nor its journal.
    pub fn check(
        json: Option<&Path>,
        junit: Option<&Path>,
        markdown: Option<&Path>,
        html: Option<&Path>,
        inputs: &[(&str, &Path)],
    ) -> anyhow::Result<Self> {
        let json = match json {
            Some(p) => output::check("--json", p)?,
            None => {
                let dir = Path::new(DEFAULT_JSON).parent().unwrap_or(Path::new("."));
                let existed = dir.exists();
                let t = output::check_with(
                    "--json",
                    Path::new(DEFAULT_JSON),
                    output::Parent::MayCreate,
                )?;
                // A directory made unasked in the working directory is said, not left to be
                // found.
                if !existed && dir.is_dir() {
                    note(&format!(
                        "clhip: made ./{}/ for the results ({DEFAULT_JSON}); --json names another \
                         place",
                        dir.display()
                    ));
                }
                t
            }
        };
        let junit = output::check_given("--junit", junit)?;
        let markdown = output::check_given("--markdown", markdown)?;
        let html = output::check_given("--html", html)?;
        let journal = json.journal_target();
        let mut outs = vec![("--json", &json)];
        outs.extend(journal.iter().map(|t| ("the journal of --json", t)));
        outs.extend(junit.iter().map(|t| ("--junit", t)));
        outs.extend(markdown.iter().map(|t| ("--markdown", t)));
        outs.extend(html.iter().map(|t| ("--html", t)));
        output::refuse_collisions(&outs, inputs)?;
        Ok(Outputs {
            json,
            junit,
            markdown,
            html,
        })
    }

    /// Writes every output, whatever happened to the others. A failed --json is marked apart:
    /// the journal then holds the results and must stay.
    pub fn write(&self, report: &RunReport) -> Written {
        let mut written = Written::default();
        let json_ok = written.record("--json", &self.json, report::write_json(report, &self.json));
        if let Some(t) = &self.junit {
            written.record("--junit", t, report::write_junit(report, t));
        }
        if let Some(t) = &self.markdown {
            let text = report::render_markdown(report);
            written.record("--markdown", t, output::write(t, text.as_bytes()));
        }
        if let Some(t) = &self.html {
            let problems = report::judge(&self.json.given, report);
            let text = report::render_html(report, &problems);
            written.record("--html", t, output::write(t, text.as_bytes()));
        }
        written.json_failed = !json_ok;
        written
    }
}

/// What became of a command's outputs: each written, or said on stderr why not.
#[derive(Default)]
pub struct Written {
    failed: Vec<String>,
    pub json_failed: bool,
}

impl Written {
    /// Says what became of one output; true if it was written.
    pub fn record(&mut self, what: &str, t: &Target, result: anyhow::Result<()>) -> bool {
        match result {
            Ok(()) => {
                note(&format!("clhip: wrote {}", t.given.display()));
                true
            }
            Err(e) => {
                note(&format!(
                    "clhip: error: {what} {}: not written: {e:#}",
                    t.given.display()
                ));
                self.failed.push(format!("{what} {}", t.given.display()));
                false
            }
        }
    }

    /// An error naming every output that was not written.
    pub fn result(&self) -> anyhow::Result<()> {
        if self.failed.is_empty() {
            Ok(())
        } else {
            bail!("not written: {}", self.failed.join(", "))
        }
    }
}
