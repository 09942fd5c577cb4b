//! The live console: a progress bar on a terminal, and each non-pass outcome as it lands.
//! Without a terminal (a CI log) a heartbeat stands in for the bar: a status line at a fixed
//! interval, so that a long run is never silent.

use std::io::IsTerminal;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::escape::terminal_line;
use crate::model::{OutcomeKind, Verdict};
use crate::results::Event;

use super::matrix::outcome_line_from;

/// Live progress on stderr: on a terminal, a bar with the ETA and the counts by outcome so far;
/// and one line per result that needs a look as it lands. When stderr is not a terminal, those
/// lines and a heartbeat ([`ConsoleReporter::with_heartbeat`]), so CI logs stay plain.
pub struct ConsoleReporter {
    bar: Option<ProgressBar>,
    /// What has finished, shared with the heartbeat's thread.
    tally: Arc<Mutex<Tally>>,
    heartbeat: Option<Heartbeat>,
    /// Where each case's known outcome comes from, by case id: the rule of an expectation file
    /// (`x.toml:12`) or the baseline's line (`baseline b.csv:3`).
    sources: std::collections::HashMap<String, String>,
}

/// The cases finished so far, by what the bar shows: outcome kinds, with caught stale reads
/// apart.
struct Tally {
    total: usize,
    done: usize,
    counts: std::collections::BTreeMap<&'static str, usize>,
    started: Instant,
}

impl Tally {
    /// `pass 40 fail 1 caught 7 unsupported 12`.
    fn counts_text(&self) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        parts.join(" ")
    }

    /// The heartbeat's line: `clhip: 37/84 cases done (pass 30 fail 1 unsupported 6); 1m 12s
    /// elapsed, ETA 1m 32s`. The ETA is the time per case so far times the cases left, unknown
    /// until one has finished.
    fn status_line(&self, now: Instant) -> String {
        let elapsed = now.duration_since(self.started);
        let eta = self.eta(now);
        let counts = match self.counts_text() {
            c if c.is_empty() => String::new(),
            c => format!(" ({c})"),
        };
        format!(
            "clhip: {}/{} cases done{counts}; {} elapsed, {eta}",
            self.done,
            self.total,
            whole_seconds(elapsed)
        )
    }
}

impl Tally {
    /// `ETA 1m 32s`: the time per case so far times the cases left; unknown until a case has
    /// finished. (indicatif's own estimate, a rate of recent steps, stayed at `1s` for 8 s of a
    /// run whose cases take seconds each.)
    fn eta(&self, now: Instant) -> String {
        match self.done {
            0 => "ETA unknown".to_string(),
            done => {
                let elapsed = now.duration_since(self.started).as_secs_f64();
                let left = self.total.saturating_sub(done) as f64;
                let per_case = elapsed / done as f64;
                format!(
                    "ETA {}",
                    whole_seconds(Duration::from_secs_f64(per_case * left))
                )
            }
        }
    }

    /// The bar's message: the case just started first (where an 80-column terminal has room
    /// for a whole id), then the ETA and the counts.
    fn bar_message(&self, started: Option<&str>, now: Instant) -> String {
        let mut parts: Vec<String> = started.map(str::to_string).into_iter().collect();
        parts.push(self.eta(now));
        let counts = self.counts_text();
        if !counts.is_empty() {
            parts.push(counts);
        }
        parts.join(" | ")
    }
}

/// `1m 12s`: a duration to the second, as a person reads a log.
fn whole_seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs_f64().round() as u64)).to_string()
}

/// The thread that prints the status line every interval until the run is over.
struct Heartbeat {
    /// Set when the run is over; the condvar wakes the thread for it.
    over: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(every: Duration, tally: Arc<Mutex<Tally>>) -> Self {
        let over = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = {
            let over = over.clone();
            std::thread::spawn(move || {
                let (lock, wake) = &*over;
                let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
                let mut next = Instant::now() + every;
                while !*done {
                    let now = Instant::now();
                    if now >= next {
                        let line = tally
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .status_line(now);
                        // A closed or full stderr must not stop the run.
                        use std::io::Write as _;
                        let _ = writeln!(std::io::stderr(), "{line}");
                        next += every;
                        continue;
                    }
                    done = wake
                        .wait_timeout(done, next - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            })
        };
        Heartbeat {
            over,
            thread: Some(thread),
        }
    }

    fn stop(&mut self) {
        let (lock, wake) = &*self.over;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

impl ConsoleReporter {
    pub fn new(total: usize) -> Self {
        let bar = std::io::stderr()
            .is_terminal()
            .then(|| progress_bar(total as u64));
        ConsoleReporter {
            bar,
            tally: Arc::new(Mutex::new(Tally {
                total,
                done: 0,
                counts: std::collections::BTreeMap::new(),
                started: Instant::now(),
            })),
            heartbeat: None,
            sources: std::collections::HashMap::new(),
        }
    }

    /// Without a terminal, a status line on stderr every `every` (done and total, counts by
    /// outcome, ETA): the heartbeat a CI log needs to tell a long run from a hung one. On a
    /// terminal the bar says it all; `None` (or zero) leaves it out.
    pub fn with_heartbeat(mut self, every: Option<Duration>) -> Self {
        if let Some(every) = every.filter(|e| !e.is_zero())
            && self.bar.is_none()
        {
            self.heartbeat = Some(Heartbeat::start(every, self.tally.clone()));
        }
        self
    }

    /// Names, in each line about a case with a known outcome, where that outcome comes from.
    pub fn with_sources(mut self, sources: std::collections::HashMap<String, String>) -> Self {
        self.sources = sources;
        self
    }

    /// The runner's `on_event` callback.
    pub fn on_event(&mut self, event: &Event) {
        match event {
            Event::Started { id, .. } => {
                if let Some(bar) = &self.bar {
                    let tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
                    bar.set_message(terminal_line(&tally.bar_message(Some(id), Instant::now())));
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
                {
                    let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
                    tally.done += 1;
                    *tally.counts.entry(shown).or_insert(0) += 1;
                }
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                    let tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
                    bar.set_message(tally.bar_message(None, Instant::now()));
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

    /// Removes the bar and stops the heartbeat; the caller prints the matrix and closing line
    /// on stdout.
    pub fn finish(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if let Some(mut h) = self.heartbeat.take() {
            h.stop();
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

/// The bar: done of total and an 8-column bar, then the message ([`Tally::bar_message`]) in the
/// rest of the line. The case id once came after an elapsed time, a 30-column bar, the counts
/// and indicatif's ETA, and an 80-column terminal showed ~17 characters of it.
const BAR_TEMPLATE: &str = "{pos}/{len} [{bar:8}] {wide_msg}";

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    // A fixed template; should it ever not parse, the default style is fine.
    if let Ok(style) = ProgressStyle::with_template(BAR_TEMPLATE) {
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

    #[test]
    fn the_status_line_has_done_and_total_the_counts_and_an_eta() {
        let started = Instant::now();
        let mut tally = Tally {
            total: 84,
            done: 0,
            counts: Default::default(),
            started,
        };
        assert_eq!(
            tally.status_line(started + Duration::from_secs(30)),
            "clhip: 0/84 cases done; 30s elapsed, ETA unknown"
        );
        tally.done = 21;
        tally.counts.insert("pass", 20);
        tally.counts.insert("fail", 1);
        // 21 cases in 42 s: 2 s a case, 63 left.
        assert_eq!(
            tally.status_line(started + Duration::from_secs(42)),
            "clhip: 21/84 cases done (fail 1 pass 20); 42s elapsed, ETA 2m 6s"
        );
    }

    #[test]
    fn the_bar_leaves_an_80_column_line_room_for_a_whole_case_id() {
        let started = Instant::now();
        let tally = Tally {
            total: 858,
            done: 120,
            counts: [("pass", 100), ("fault", 20)].into_iter().collect(),
            started,
        };
        let id = "nvidia0+cuda0/cl-svm-coarse/acquire-release/cholesky/n=1024";
        let message = tally.bar_message(Some(id), started + Duration::from_secs(60));
        assert_eq!(message, format!("{id} | ETA 6m 9s | fault 20 pass 100"));
        // What the template puts before the message, at its widest: `858/858 [`, 8, `] `.
        let before = BAR_TEMPLATE.split("{wide_msg}").next().unwrap();
        let (head, bar) = before.split_once("{bar:").unwrap();
        let (columns, tail) = bar.split_once('}').unwrap();
        let width = head.replace("{pos}", "858").replace("{len}", "858").len()
            + columns.parse::<usize>().unwrap()
            + tail.len();
        assert!(width + id.len() <= 80, "{width} + {}", id.len());
    }
}
