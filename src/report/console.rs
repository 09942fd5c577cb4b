//! The live console: a progress bar on a terminal, and each non-pass outcome as it lands.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::escape::terminal_line;
use crate::model::{OutcomeKind, Verdict};
use crate::results::Event;

use super::matrix::outcome_line_from;

/// Live progress on stderr: on a terminal, a bar with the ETA and the counts by outcome so far;
/// and one line per result that needs a look as it lands (only those lines when stderr is not
/// a terminal, so CI logs stay plain).
pub struct ConsoleReporter {
    bar: Option<ProgressBar>,
    /// Finished cases by what the bar shows: outcome kinds, with caught stale reads apart.
    counts: std::collections::BTreeMap<&'static str, usize>,
    /// Where each case's known outcome comes from, by case id: the rule of an expectation file
    /// (`x.toml:12`) or the baseline's line (`baseline b.csv:3`).
    sources: std::collections::HashMap<String, String>,
}

impl ConsoleReporter {
    pub fn new(total: usize) -> Self {
        let bar = std::io::stderr()
            .is_terminal()
            .then(|| progress_bar(total as u64));
        ConsoleReporter {
            bar,
            counts: std::collections::BTreeMap::new(),
            sources: std::collections::HashMap::new(),
        }
    }

    /// Names, in each line about a case with a known outcome, where that outcome comes from.
    pub fn with_sources(mut self, sources: std::collections::HashMap<String, String>) -> Self {
        self.sources = sources;
        self
    }

    /// `pass 40 fail 1 caught 7 unsupported 12`: the counts so far, for the bar.
    fn counts_text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (name, n) in &self.counts {
            parts.push(format!("{name} {n}"));
        }
        parts.join(" ")
    }

    /// The runner's `on_event` callback.
    pub fn on_event(&mut self, event: &Event) {
        match event {
            Event::Started { id, .. } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(terminal_line(&format!("{} | {id}", self.counts_text())));
                }
            }
            Event::Finished(r) => {
                if let Some(line) = shown_line(event, &self.sources) {
                    self.print(&line);
                }
                let shown = match r.verdict() {
                    Verdict::CaughtStaleRead => "caught",
                    _ => r.outcome.kind().name(),
                };
                *self.counts.entry(shown).or_insert(0) += 1;
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                    bar.set_message(self.counts_text());
                }
            }
            // Nothing to look at: a spare shows only when it takes a case.
            Event::SpareStarted { .. } => {}
            Event::WorkerLost { .. } | Event::GpuLost { .. } => {
                if let Some(line) = shown_line(event, &self.sources) {
                    self.print(&line);
                }
            }
        }
    }

    /// Removes the bar; the caller prints the matrix and closing line on stdout.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn print(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            // A closed or full stderr must not stop the run: the results file has it all.
            None => {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "{line}");
            }
        }
    }
}

/// The line an event streams to the console, if it needs a look: a result other than a pass
/// or a caught stale read, an unexpected pass, a lost worker. Its control characters (a
/// driver's reason, a kernel log's) are shown as text.
fn shown_line(
    event: &Event,
    sources: &std::collections::HashMap<String, String>,
) -> Option<String> {
    let line = match event {
        Event::Finished(r) => {
            // Only what needs a look streams; caught stale reads are counted at the end.
            let look = match r.verdict() {
                Verdict::CaughtStaleRead => false,
                Verdict::UnexpectedPass => true,
                _ => r.outcome.kind() != OutcomeKind::Pass,
            };
            look.then(|| outcome_line_from(r, sources.get(&r.id).map(String::as_str)))?
        }
        Event::WorkerLost { pid, after, why } => {
            let after = after.as_deref().unwrap_or("start");
            format!("  worker {pid} lost after {after}: {why}")
        }
        Event::GpuLost {
            gpu,
            after,
            evidence,
        } => {
            let after = after.as_deref().unwrap_or("its start");
            format!("  GPU {gpu} lost after {after}: {evidence}")
        }
        Event::Started { .. } | Event::SpareStarted { .. } => return None,
    };
    Some(terminal_line(&line))
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    // A fixed template; should it ever not parse, the default style is fine.
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} ETA {eta} {wide_msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::escape::is_control;
    use crate::model::{Op, Outcome, PathKind, Peer, SyncMode};
    use crate::report::tests::{pair, result};

    #[test]
    fn a_streamed_line_shows_control_characters_as_text() {
        let hostile = "refused\x1b[2J\x1b]8;;https://x.example/\x07here\u{202e}\r! pass";
        let r = result(
            &pair("pocl0", Peer::HOST),
            PathKind::Copy,
            SyncMode::Finish,
            Op::Fft,
            64,
            Outcome::unsupported(hostile),
        );
        let mut with_log = r.clone();
        with_log.kernel_log = vec!["amdgpu: fault\x1b[31m".into()];
        let shown = r"refused\x1b[2J\x1b]8;;https://x.example/\x07here\u{202e}\x0d! pass";
        for (event, wanted) in [
            (Event::Finished(Box::new(r)), shown),
            (
                Event::Finished(Box::new(with_log)),
                r"[kernel log: amdgpu: fault\x1b[31m]",
            ),
            (
                Event::WorkerLost {
                    pid: 7,
                    after: Some("case\x1b[1A".into()),
                    why: hostile.into(),
                },
                r"worker 7 lost after case\x1b[1A: refused\x1b[2J",
            ),
        ] {
            let line = shown_line(&event, &Default::default()).expect("a line that needs a look");
            assert!(!line.chars().any(is_control), "{line:?}");
            assert!(line.contains(wanted), "{line}");
        }
    }
}
