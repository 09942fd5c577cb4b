//! The parent side of isolated execution, in the manner of Mesa's deqp-runner: work goes to a
//! worker process in batches; when the worker dies mid-case that case is a `crash`, when a case
//! runs past its timeout the worker's whole process group is killed and the case is a
//! `timeout`, and either way a fresh worker resumes at the next case. What happens is reported
//! as [`Event`]s as it happens (the nextest runner/reporter split), and returned as results.
//!
//! Process hygiene: each worker leads its own process group, so a kill reaches any helper a
//! driver forked. The group is killed while the leader is still an unreaped zombie, so its id
//! cannot have been reused, and every worker is reaped, on every path including errors and
//! panics (a drop guard).

use std::collections::VecDeque;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::mock::MockAction;
use crate::model::{Case, Expectation, Outcome};
use crate::worker::{WorkItem, WorkerEvent};

/// What a worker runs: a real case, or a mock that misbehaves on purpose (tests only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Work {
    Case(Case),
    Mock(MockAction),
}

impl Work {
    pub fn case(&self) -> Option<&Case> {
        match self {
            Work::Case(case) => Some(case),
            Work::Mock(_) => None,
        }
    }
}

/// One item of a run's plan.
#[derive(Debug, Clone)]
pub struct Planned {
    /// `Case::id()`, or `mock/<action>/<k>`.
    pub id: String,
    pub work: Work,
    pub expectation: Expectation,
}

impl Planned {
    pub fn case(case: Case, expectation: Expectation) -> Self {
        Planned {
            id: case.id(),
            work: Work::Case(case),
            expectation,
        }
    }
}

/// The verdict on one planned item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub id: String,
    pub work: Work,
    pub outcome: Outcome,
    pub expectation: Expectation,
    /// As measured by the worker, or by the parent for a crash or timeout.
    pub duration_s: f64,
}

impl CaseResult {
    /// How the outcome reads against the expectation.
    pub fn verdict(&self) -> crate::model::Verdict {
        self.expectation.verdict(self.outcome.kind())
    }

    /// Whether this result should fail the run (non-zero exit).
    pub fn unexpected(&self) -> bool {
        self.verdict().fails_run()
    }
}

/// What the runner reports as it goes; `pid` is the worker's, which is also its process group.
#[derive(Debug, Clone)]
pub enum Event {
    Started {
        id: String,
        pid: u32,
    },
    Finished(Box<CaseResult>),
    /// A worker ended badly outside any case (between cases, or while exiting after its last
    /// one, e.g. a crash in a runtime's teardown). No case is charged; `after` is the last case
    /// it finished.
    WorkerLost {
        pid: u32,
        after: Option<String>,
        why: String,
    },
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    /// Per case, from the worker's `start` line for it.
    pub timeout: Duration,
    /// How long a worker may take to start its next case (runtime initialization comes first)
    /// or to exit after its last one.
    pub startup_timeout: Duration,
    /// Cases per worker process before a fresh one takes over.
    pub cases_per_worker: usize,
    /// Worker processes running at once (deqp-runner's -j). Each has its own device contexts,
    /// so a crash or fault still costs one case only.
    pub jobs: usize,
    pub worker_exe: PathBuf,
    /// The whole argv after `worker_exe`; see [`worker_args`].
    pub worker_args: Vec<String>,
}

impl RunOptions {
    /// Defaults for running `exe __worker --seed <seed>`.
    pub fn new(worker_exe: PathBuf, seed: u64) -> Self {
        RunOptions {
            seed,
            timeout: Duration::from_secs(60),
            startup_timeout: Duration::from_secs(30),
            cases_per_worker: 64,
            jobs: 1,
            worker_exe,
            worker_args: worker_args(seed),
        }
    }
}

/// The arguments of the hidden worker subcommand.
pub fn worker_args(seed: u64) -> Vec<String> {
    vec!["__worker".into(), "--seed".into(), seed.to_string()]
}

/// Lines of worker output kept for a crash report.
const TAIL_LINES: usize = 20;
/// How often the parent checks whether the worker has exited while waiting for output.
const POLL: Duration = Duration::from_millis(50);
/// How long to collect a dead worker's last output once its group has been killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// The run stopped because a fresh worker could not start its first case: the harness or the
/// device is unusable (after a GPU reset, for one), and every later worker would fail the same
/// way. Carries what finished, so a caller can still write a report (`err.downcast_ref`).
#[derive(Debug)]
pub struct RunAborted {
    pub why: String,
    pub completed: Vec<CaseResult>,
    pub not_run: Vec<String>,
}

impl fmt::Display for RunAborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "run stopped: {} ({} cases finished, {} not run)",
            self.why,
            self.completed.len(),
            self.not_run.len()
        )
    }
}

impl std::error::Error for RunAborted {}

/// Runs `plan` in worker processes, calling `on_event` as things happen, and returns one result
/// per planned item, in plan order. Errors: a worker that cannot be spawned, a protocol
/// violation (a harness bug), or [`RunAborted`].
pub fn run(
    plan: Vec<Planned>,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<Vec<CaseResult>> {
    if opts.cases_per_worker == 0 {
        bail!("cases per worker must be at least 1");
    }
    run_workers(plan, opts, on_event)
}

/// `opts.jobs` threads (at least one), each driving one worker at a time over a shared queue,
/// batch after batch; what a worker did not reach goes back to the front for the next one.
/// Events reach `on_event` on the caller's thread. Results come back in plan order.
fn run_workers(
    plan: Vec<Planned>,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<Vec<CaseResult>> {
    use std::sync::{Arc, Mutex};
    let order: std::collections::HashMap<String, usize> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.clone(), i))
        .collect();
    let queue = Arc::new(Mutex::new(VecDeque::from(plan)));
    let aborted: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel::<Event>();
    let mut results = Vec::new();
    let outcome: anyhow::Result<()> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..opts.jobs.max(1))
            .map(|_| {
                let (queue, aborted, tx) = (queue.clone(), aborted.clone(), tx.clone());
                scope.spawn(move || -> anyhow::Result<Vec<CaseResult>> {
                    let mut mine = Vec::new();
                    let mut send = |e: &Event| {
                        let _ = tx.send(e.clone());
                    };
                    loop {
                        if lock(&aborted).is_some() {
                            break;
                        }
                        let batch: Vec<Planned> = {
                            let mut q = lock(&queue);
                            let take = opts.cases_per_worker.min(q.len());
                            q.drain(..take).collect()
                        };
                        if batch.is_empty() {
                            break;
                        }
                        match run_batch(&batch, opts, &mut send, &mut mine)? {
                            BatchEnd::Consumed(done) => {
                                let mut q = lock(&queue);
                                for item in batch.into_iter().skip(done).rev() {
                                    q.push_front(item);
                                }
                            }
                            BatchEnd::CouldNotStart(why) => {
                                lock(&queue).extend(batch);
                                lock(&aborted).get_or_insert(why);
                                break;
                            }
                        }
                    }
                    Ok(mine)
                })
            })
            .collect();
        drop(tx);
        for event in rx {
            on_event(&event);
        }
        for h in handles {
            match h.join() {
                Ok(r) => results.extend(r?),
                Err(_) => bail!("a runner thread panicked"),
            }
        }
        Ok(())
    });
    outcome?;
    results.sort_by_key(|r| order.get(&r.id).copied().unwrap_or(usize::MAX));
    if let Some(why) = lock(&aborted).take() {
        let not_run = lock(&queue).iter().map(|p| p.id.clone()).collect();
        return Err(RunAborted {
            why,
            completed: results,
            not_run,
        }
        .into());
    }
    Ok(results)
}

/// A poisoned lock only means another runner thread panicked; the queue itself is intact.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

enum BatchEnd {
    /// The first `n` items of the batch have results (n >= 1).
    Consumed(usize),
    /// The worker died or stalled before starting its first case.
    CouldNotStart(String),
}

/// How waiting on a worker ended.
#[derive(Clone, Copy)]
enum Stop {
    Exited,
    Stalled,
}

/// One worker process working through one batch.
fn run_batch(
    batch: &[Planned],
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
    results: &mut Vec<CaseResult>,
) -> anyhow::Result<BatchEnd> {
    let mut session = Session::start(batch, opts)?;
    let stop = session.pump(opts, on_event, results)?;
    session.finish(stop, opts, on_event, results)
}

struct Session<'b> {
    batch: &'b [Planned],
    worker: WorkerProcess,
    rx: Receiver<Msg>,
    tail: Tail,
    /// Index of the next item to start; everything before it has a result.
    next: usize,
    /// When `batch[next]` started, once the worker said so.
    running_since: Option<Instant>,
    /// When the worker last became idle (spawned, or finished a case).
    idle_since: Instant,
    last_was_fault: bool,
    streams_open: usize,
}

impl<'b> Session<'b> {
    fn start(batch: &'b [Planned], opts: &RunOptions) -> anyhow::Result<Self> {
        let (worker, stdin, rx) = WorkerProcess::spawn(opts)?;
        feed(stdin, batch)?;
        Ok(Session {
            batch,
            worker,
            rx,
            tail: Tail::default(),
            next: 0,
            running_since: None,
            idle_since: Instant::now(),
            last_was_fault: false,
            streams_open: 2,
        })
    }

    /// Handles worker output until the worker exits or misses its deadline.
    fn pump(
        &mut self,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<Stop> {
        loop {
            if self.worker.has_exited()? {
                return Ok(Stop::Exited);
            }
            let left = self
                .deadline(opts)
                .saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Stop::Stalled);
            }
            self.receive(left.min(POLL), on_event, results)?;
        }
    }

    fn deadline(&self, opts: &RunOptions) -> Instant {
        match self.running_since {
            Some(since) => since + opts.timeout,
            None => self.idle_since + opts.startup_timeout,
        }
    }

    /// Waits up to `wait` for one message and handles it.
    fn receive(
        &mut self,
        wait: Duration,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        match self.rx.recv_timeout(wait) {
            Ok(Msg::Line(line)) => self.on_line(line, on_event, results),
            Ok(Msg::Eof) => {
                self.streams_open -= 1;
                Ok(())
            }
            Err(RecvTimeoutError::Timeout) => Ok(()),
            // Both pipes closed but the worker lives on: keep polling its exit, without spinning.
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                Ok(())
            }
        }
    }

    fn on_line(
        &mut self,
        line: String,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        match WorkerEvent::parse_line(&line) {
            None => {
                self.tail.push(line);
                Ok(())
            }
            Some(Err(e)) => bail!("worker sent a malformed protocol line ({e}): {line}"),
            Some(Ok(WorkerEvent::Start { id })) => self.on_start(id, on_event),
            Some(Ok(WorkerEvent::Done {
                id,
                outcome,
                duration_s,
            })) => {
                self.expect_running(&id, "done")?;
                self.record(outcome, duration_s, on_event, results);
                Ok(())
            }
        }
    }

    fn on_start(&mut self, id: String, on_event: &mut dyn FnMut(&Event)) -> anyhow::Result<()> {
        let expected = self.batch.get(self.next).map(|p| p.id.as_str());
        if self.running_since.is_some() || expected != Some(id.as_str()) {
            bail!(
                "worker protocol violation: `start` for `{id}`, expected {}",
                expected.unwrap_or("no further case")
            );
        }
        self.running_since = Some(Instant::now());
        on_event(&Event::Started {
            id,
            pid: self.worker.pid(),
        });
        Ok(())
    }

    fn expect_running(&self, id: &str, what: &str) -> anyhow::Result<()> {
        let running = self
            .running_since
            .map(|_| self.batch[self.next].id.as_str());
        if running != Some(id) {
            bail!(
                "worker protocol violation: `{what}` for `{id}`, running {}",
                running.unwrap_or("nothing")
            );
        }
        Ok(())
    }

    /// Closes the running case with `outcome`.
    fn record(
        &mut self,
        outcome: Outcome,
        duration_s: f64,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) {
        let planned = &self.batch[self.next];
        self.last_was_fault = matches!(outcome, Outcome::Fault { .. });
        let result = CaseResult {
            id: planned.id.clone(),
            work: planned.work.clone(),
            outcome,
            expectation: planned.expectation,
            duration_s,
        };
        on_event(&Event::Finished(Box::new(result.clone())));
        results.push(result);
        self.next += 1;
        self.running_since = None;
        self.idle_since = Instant::now();
    }

    /// Ends the worker and decides what its end means for the batch.
    fn finish(
        mut self,
        stop: Stop,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<BatchEnd> {
        match stop {
            Stop::Stalled => self.after_stall(opts, on_event, results)?,
            Stop::Exited => self.after_exit(on_event, results)?,
        }
        if self.next == 0 {
            let why = self.could_not_start(stop, opts);
            return Ok(BatchEnd::CouldNotStart(why));
        }
        Ok(BatchEnd::Consumed(self.next))
    }

    fn after_stall(
        &mut self,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        self.worker.kill_and_reap()?;
        if let Some(since) = self.running_since {
            let after_s = since.elapsed().as_secs_f64();
            self.record(Outcome::Timeout { after_s }, after_s, on_event, results);
        } else if self.next > 0 {
            let why = if self.next < self.batch.len() {
                format!(
                    "did not start its next case within {:.1} s; killed",
                    opts.startup_timeout.as_secs_f64()
                )
            } else {
                format!(
                    "did not exit within {:.1} s after its last case; killed",
                    opts.startup_timeout.as_secs_f64()
                )
            };
            self.lost(why, on_event);
        }
        Ok(())
    }

    fn after_exit(
        &mut self,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        // Helpers left in the group would hold the pipes open; then read what is still in them:
        // a `done` written just before a clean exit, or the last words before a crash.
        self.worker.kill_group();
        let until = Instant::now() + DRAIN_GRACE;
        while self.streams_open > 0 && Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            self.receive(left, on_event, results)?;
        }
        let status = self.worker.kill_and_reap()?;

        if let Some(since) = self.running_since {
            let outcome = crash_outcome(status, self.tail.text());
            self.record(outcome, since.elapsed().as_secs_f64(), on_event, results);
        } else if self.next > 0 {
            let retired_after_fault = status.success() && self.last_was_fault;
            if !status.success() {
                let when = if self.next < self.batch.len() {
                    "between cases"
                } else {
                    "after its last case"
                };
                self.lost(format!("{} {when}", describe(status)), on_event);
            } else if self.next < self.batch.len() && !retired_after_fault {
                self.lost("exited 0 with cases left".into(), on_event);
            }
        }
        Ok(())
    }

    fn lost(&self, why: String, on_event: &mut dyn FnMut(&Event)) {
        let why = match self.tail.last() {
            Some(line) => format!("{why}; last output: {line}"),
            None => why,
        };
        on_event(&Event::WorkerLost {
            pid: self.worker.pid(),
            after: Some(self.batch[self.next - 1].id.clone()),
            why,
        });
    }

    fn could_not_start(&self, stop: Stop, opts: &RunOptions) -> String {
        let how = match (stop, self.worker.status) {
            (Stop::Stalled, _) => format!(
                "did not start within {:.1} s",
                opts.startup_timeout.as_secs_f64()
            ),
            (Stop::Exited, Some(status)) => format!("ended ({})", describe(status)),
            (Stop::Exited, None) => "ended".to_string(),
        };
        let mut why = format!(
            "worker `{}` (pid {}) {how} before starting `{}`",
            opts.worker_exe.display(),
            self.worker.pid(),
            self.batch[0].id
        );
        if !self.tail.is_empty() {
            why.push_str("; its last output:\n");
            why.push_str(&self.tail.text());
        }
        why
    }
}

/// The verdict on a case whose worker died while running it. A signal is the classic crash; a
/// plain exit mid-case (a runtime calling exit(), a harness panic: 101) has no signal, so it is
/// recorded as signal 0 with the exit status as its name.
fn crash_outcome(status: ExitStatus, stderr_tail: String) -> Outcome {
    let (signal, signal_name) = match status.signal() {
        Some(sig) => (sig, signal_name(sig)),
        None => (0, describe(status)),
    };
    Outcome::Crash {
        signal,
        signal_name,
        stderr_tail,
        process: String::new(),
    }
}

/// `SIGSEGV`, or the number for a signal nix does not know.
pub(crate) fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

pub(crate) fn describe(status: ExitStatus) -> String {
    match (status.signal(), status.code()) {
        (Some(sig), _) => format!("killed by {}", signal_name(sig)),
        (None, Some(code)) => format!("exit status {code}"),
        (None, None) => format!("{status}"),
    }
}

/// Writes the batch to the worker's stdin from a thread, then closes it (EOF ends the batch).
/// A thread, because a large batch can fill the pipe while the worker is busy with a case and
/// the parent must keep watching the clock meanwhile. Write errors are the worker having died,
/// which the parent learns about from its exit.
fn feed(stdin: ChildStdin, batch: &[Planned]) -> anyhow::Result<()> {
    let mut lines = String::new();
    for p in batch {
        let item = WorkItem {
            id: p.id.clone(),
            work: p.work.clone(),
        };
        lines.push_str(&serde_json::to_string(&item).context("encoding a work item")?);
        lines.push('\n');
    }
    std::thread::Builder::new()
        .name("clhip-feed".into())
        .spawn(move || {
            let mut stdin = stdin;
            let _ = stdin.write_all(lines.as_bytes());
        })
        .context("starting the worker feed thread")?;
    Ok(())
}

/// A line of worker output (either stream), or the end of one stream.
enum Msg {
    Line(String),
    Eof,
}

/// Forwards each line of `pipe` to `tx` from a detached thread. Lossy UTF-8: drivers print what
/// they like. The thread ends at EOF, or at the next line once the session is gone.
fn forward_lines(pipe: impl Read + Send + 'static, tx: Sender<Msg>) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("clhip-reader".into())
        .spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf);
                        let line = line.trim_end_matches(['\n', '\r']).to_string();
                        if tx.send(Msg::Line(line)).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(Msg::Eof);
        })
        .context("starting a worker output reader")?;
    Ok(())
}

/// A worker process leading its own process group; killed and reaped on drop at the latest.
struct WorkerProcess {
    child: Child,
    pgid: Pid,
    /// Set once reaped.
    status: Option<ExitStatus>,
}

impl WorkerProcess {
    fn spawn(opts: &RunOptions) -> anyhow::Result<(Self, ChildStdin, Receiver<Msg>)> {
        let child = Command::new(&opts.worker_exe)
            .args(&opts.worker_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting worker {}", opts.worker_exe.display()))?;
        let pgid = Pid::from_raw(i32::try_from(child.id()).context("worker pid out of range")?);
        // From here on the guard owns the child, so an error below still kills and reaps it.
        let mut worker = WorkerProcess {
            child,
            pgid,
            status: None,
        };
        let (tx, rx) = mpsc::channel();
        let (stdin, stdout, stderr) = (
            worker.child.stdin.take(),
            worker.child.stdout.take(),
            worker.child.stderr.take(),
        );
        let (Some(stdin), Some(stdout), Some(stderr)) = (stdin, stdout, stderr) else {
            bail!("worker spawned without its pipes");
        };
        forward_lines(stdout, tx.clone())?;
        forward_lines(stderr, tx)?;
        Ok((worker, stdin, rx))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the leader has exited, without reaping it: while it is an unreaped zombie its
    /// pid, and so the group id, cannot be reused, and `kill_group` cannot hit a stranger.
    fn has_exited(&self) -> anyhow::Result<bool> {
        if self.status.is_some() {
            return Ok(true);
        }
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        let status = waitid(Id::Pid(self.pgid), flags)
            .with_context(|| format!("checking on worker {}", self.pgid))?;
        Ok(!matches!(status, WaitStatus::StillAlive))
    }

    /// SIGKILL to every process in the group. No-op once reaped (the id may be reused then).
    fn kill_group(&self) {
        if self.status.is_none() {
            // ESRCH: nobody left in the group, which is the goal.
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }

    /// Kills the group and reaps the leader; the status is the leader's own if it had already
    /// exited, SIGKILL otherwise.
    fn kill_and_reap(&mut self) -> anyhow::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.kill_group();
        let status = self
            .child
            .wait()
            .with_context(|| format!("reaping worker {}", self.pgid))?;
        self.status = Some(status);
        Ok(status)
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.kill_and_reap();
    }
}

/// The last lines a worker printed on either stream, for crash reports.
#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
}

impl Tail {
    fn push(&mut self, line: String) {
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    fn text(&self) -> String {
        Vec::from_iter(self.lines.iter().map(String::as_str)).join("\n")
    }

    fn last(&self) -> Option<&str> {
        self.lines.back().map(String::as_str)
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(shell: &str) -> ExitStatus {
        Command::new("sh").args(["-c", shell]).status().unwrap()
    }

    #[test]
    fn a_signal_death_is_a_crash_named_by_its_signal() {
        let outcome = crash_outcome(status_of("kill -SEGV $$"), "last words".into());
        assert_eq!(
            outcome,
            Outcome::Crash {
                signal: 11,
                signal_name: "SIGSEGV".into(),
                stderr_tail: "last words".into(),
                process: String::new(),
            }
        );
    }

    #[test]
    fn an_exit_mid_case_is_a_crash_with_signal_zero_and_the_status() {
        let Outcome::Crash {
            signal,
            signal_name,
            ..
        } = crash_outcome(status_of("exit 3"), String::new())
        else {
            panic!("not a crash");
        };
        assert_eq!((signal, signal_name.as_str()), (0, "exit status 3"));
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut tail = Tail::default();
        for i in 0..(TAIL_LINES + 5) {
            tail.push(format!("line {i}"));
        }
        assert_eq!(tail.lines.len(), TAIL_LINES);
        assert_eq!(tail.lines.front().map(String::as_str), Some("line 5"));
        assert_eq!(tail.last(), Some("line 24"));
    }
}
