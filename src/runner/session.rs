//! One worker's session: the cases it is given one at a time, what it says on its protocol
//! stream, the clock of the running case (paused time left out), and the kernel log watched
//! for a GPU memory fault no API reports. How the session's end is judged is in `death`.

use std::process::ChildStdin;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::options::RunOptions;
use super::worker_process::{Spare, Spares, WorkerProcess, write_item};
use crate::child::{Line, Tail};
use crate::fault::BufferSpan;
use crate::kmsg::KernelLog;
use crate::model::Outcome;
use crate::protocol::WorkerEvent;
use crate::results::{CaseResult, Event, Planned};

/// Lines of worker output kept for a crash report.
const TAIL_LINES: usize = 20;
/// How often the parent checks whether the worker has exited while waiting for output.
const POLL: Duration = Duration::from_millis(50);

/// How long an API may stay silent about a GPU memory fault the kernel has logged for its
/// process. CUDA returns one to a waiting call well within a second (a whole faulting case,
/// fault reported, takes 0.65 s on an H200); an API silent for seconds has left its caller
/// waiting on work the fault stopped, for good (on an H100, 12 such cases sat out the whole
/// 30 s timeout before this watch).
const KERNEL_FAULT_GRACE: Duration = Duration::from_secs(2);

/// How often the runner reads the kernel log while a case runs.
const KERNEL_LOG_LOOK: Duration = Duration::from_millis(250);

/// How waiting on a worker ended.
#[derive(Clone, Copy)]
pub(super) enum Stop {
    Exited,
    Stalled,
}

/// Where a worker's cases come from, one at a time. `Some(env)` asks only for a case that needs
/// that environment (the worker's own); `None`, for any case (a new worker's first).
pub(super) type Source<'s> = dyn FnMut(Option<&[(String, String)]>) -> Option<Planned> + 's;

pub(super) struct Session<'s, 'q> {
    /// The cases given to this worker so far, in order.
    pub(super) batch: Vec<Planned>,
    pub(super) source: &'s mut Source<'s>,
    /// Where the next worker waits, started once this one has its contexts.
    pub(super) spares: Option<&'s mut Spares<'q>>,
    /// This worker was a spare: its runtimes were open before its first case.
    pub(super) prepared: bool,
    /// Closed (None) once the worker is to get no more cases: it then exits at EOF.
    pub(super) stdin: Option<ChildStdin>,
    pub(super) worker: WorkerProcess,
    pub(super) rx: Receiver<Line>,
    pub(super) tail: Tail,
    /// Index of the next item to start; everything before it has a result.
    pub(super) next: usize,
    /// Whether `batch[next]` has started, once the worker said so.
    pub(super) running: bool,
    /// When the current limit started counting (case start, or the worker becoming idle), and
    /// the run's paused time then: time spent paused (Ctrl-Z) is not counted.
    pub(super) clock: (Instant, Duration),
    /// The last case ended in a fault or a timeout the worker found itself: the worker takes
    /// no further case and exits by itself (see `worker_main`).
    pub(super) worker_retired: bool,
    /// The kernel said a GPU was lost while the last case ran: the worker takes no further
    /// case, so that its runner thread looks at its GPU before the next one starts.
    pub(super) gpu_in_doubt: bool,
    pub(super) streams_open: usize,
    /// The running case's memory, as the worker announced it.
    pub(super) buffers: Vec<BufferSpan>,
    /// A harness error the worker reported for the running case before dying.
    pub(super) harness_error: Option<String>,
    /// The last blocking call the worker announced for the running case.
    pub(super) blocked_in: String,
    /// The kernel log since the last case ended (or the worker started): a case's lines begin
    /// before the runner hears of its start, which a fault right after it may beat.
    pub(super) kernel_log: KernelLog,
    /// When the kernel log was last looked at.
    pub(super) kernel_log_seen: Instant,
    /// A GPU memory fault the kernel logged for this worker during the running case, and how
    /// far into the case it was seen.
    pub(super) kernel_fault: Option<(Duration, crate::kmsg::KernelFault)>,
    /// The footprint the worker's `done` brought, for the result it closes.
    pub(super) footprint: Option<crate::footprint::Footprint>,
}

impl<'s, 'q> Session<'s, 'q> {
    pub(super) fn start(
        first: Planned,
        spare: Option<Spare>,
        source: &'s mut Source<'s>,
        spares: Option<&'s mut Spares<'q>>,
        opts: &RunOptions,
    ) -> anyhow::Result<Self> {
        let prepared = spare.is_some();
        let (worker, mut stdin, rx) = match spare {
            Some(s) => (s.worker, s.stdin, s.rx),
            None => WorkerProcess::spawn(opts, &first.env, None, &first.pair_kind())?,
        };
        // A worker that is already gone shows as one that could not start its first case.
        let stdin = write_item(&mut stdin, &first).ok().map(|()| stdin);
        Ok(Session {
            batch: vec![first],
            source,
            spares,
            prepared,
            stdin,
            worker,
            rx,
            tail: Tail::new(TAIL_LINES),
            next: 0,
            running: false,
            clock: (Instant::now(), opts.control.paused()),
            worker_retired: false,
            gpu_in_doubt: false,
            streams_open: 2,
            buffers: Vec::new(),
            harness_error: None,
            blocked_in: String::new(),
            kernel_log: KernelLog::start(),
            kernel_log_seen: Instant::now(),
            kernel_fault: None,
            footprint: None,
        })
    }

    pub(super) fn restart_clock(&mut self, opts: &RunOptions) {
        self.clock = (Instant::now(), opts.control.paused());
    }

    /// Time on the current limit, paused time excluded.
    pub(super) fn elapsed(&self, opts: &RunOptions) -> Duration {
        let (since, paused_then) = self.clock;
        let paused = opts.control.paused().saturating_sub(paused_then);
        since.elapsed().saturating_sub(paused)
    }

    /// Handles worker output until the worker exits or misses its deadline.
    pub(super) fn pump(
        &mut self,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<Stop> {
        loop {
            if self.worker.has_exited()? {
                return Ok(Stop::Exited);
            }
            let mut limit = if self.running {
                opts.timeout
            } else {
                opts.startup_timeout
            };
            if self.running {
                self.look_for_kernel_fault(opts);
                if let Some((seen, _)) = &self.kernel_fault {
                    limit = limit.min(*seen + KERNEL_FAULT_GRACE);
                }
            }
            let left = limit.saturating_sub(self.elapsed(opts));
            if left.is_zero() {
                // Just back from a stop (SIGSTOP, SIGCONT): its time is not the case's.
                if opts.control.unclaimed_gap() {
                    self.receive(POLL, opts, on_event, results)?;
                    continue;
                }
                return Ok(Stop::Stalled);
            }
            self.receive(left.min(POLL), opts, on_event, results)?;
        }
    }

    /// Reads the kernel log while the case runs: a GPU memory fault of this worker's process
    /// group that no API call returns (a call left waiting on work the fault stopped) ends the
    /// case [`KERNEL_FAULT_GRACE`] later as that fault, not at the timeout.
    fn look_for_kernel_fault(&mut self, opts: &RunOptions) {
        if self.kernel_fault.is_some() || self.kernel_log_seen.elapsed() < KERNEL_LOG_LOOK {
            return;
        }
        self.kernel_log_seen = Instant::now();
        let pgid = self.worker.pid();
        self.kernel_log.poll();
        // The whole window, not only what is new: an amdgpu fault names its process on the
        // line after it, which may come with the next read.
        let fault = crate::kmsg::memory_faults(self.kernel_log.lines())
            .into_iter()
            .find(|f| crate::kmsg::in_group(f.pid, pgid));
        if let Some(fault) = fault {
            self.kernel_fault = Some((self.elapsed(opts), fault));
        }
    }

    /// Waits up to `wait` for one message and handles it.
    pub(super) fn receive(
        &mut self,
        wait: Duration,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        match self.rx.recv_timeout(wait) {
            Ok(Line::Protocol(line)) => self.on_protocol(line, opts, on_event, results),
            Ok(Line::Output(line)) => {
                self.tail.push(line);
                Ok(())
            }
            Ok(Line::Eof) => {
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

    /// A line on the worker's protocol stream (its original stdout, which only the worker
    /// writes: drivers' stdout goes to its stderr). Driver output never reaches here; a line
    /// that is not a valid message is the harness's error, charged to the running case alone.
    fn on_protocol(
        &mut self,
        line: String,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        let event = match WorkerEvent::parse_line(&line) {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                return self.protocol_error(
                    format!("malformed protocol line ({e}): {line}"),
                    opts,
                    on_event,
                    results,
                );
            }
            None => {
                return self.protocol_error(
                    format!("unprefixed line on the protocol stream: {line}"),
                    opts,
                    on_event,
                    results,
                );
            }
        };
        match event {
            WorkerEvent::Start { id } => {
                let expected = self.batch.get(self.next).map(|p| p.id.as_str());
                if self.running || expected != Some(id.as_str()) {
                    return self.protocol_error(
                        format!(
                            "`start` for `{id}`, expected {}",
                            expected.unwrap_or("no further case")
                        ),
                        opts,
                        on_event,
                        results,
                    );
                }
                self.running = true;
                self.buffers.clear();
                self.harness_error = None;
                self.blocked_in.clear();
                self.kernel_fault = None;
                self.restart_clock(opts);
                if self.prepared {
                    self.fill_spare(opts, on_event);
                }
                on_event(&Event::Started {
                    id,
                    pid: self.worker.pid(),
                });
            }
            WorkerEvent::Done {
                id,
                outcome,
                duration_s,
                footprint,
            } => {
                if !self.running || self.batch[self.next].id != id {
                    return self.protocol_error(
                        format!("`done` for `{id}`, running {}", self.running_id()),
                        opts,
                        on_event,
                        results,
                    );
                }
                self.footprint = footprint;
                self.record(outcome, duration_s, opts, on_event, results);
                self.feed_next(opts);
                self.fill_spare(opts, on_event);
            }
            WorkerEvent::Buffer { span } => self.buffers.push(span),
            WorkerEvent::HarnessError { reason } => self.harness_error = Some(reason),
            WorkerEvent::Blocking { call } => self.blocked_in = call,
        }
        Ok(())
    }

    /// Gives the worker its next case, or EOF when it is to get none: after a fault (it exits
    /// by itself, its context untrusted), after `cases_per_worker` cases, or when the source
    /// has no case for its environment.
    fn feed_next(&mut self, opts: &RunOptions) {
        let Some(stdin) = self.stdin.as_mut() else {
            return;
        };
        let next = if self.worker_retired
            || self.gpu_in_doubt
            || self.batch.len() >= opts.cases_per_worker
        {
            None
        } else {
            (self.source)(Some(&self.batch[0].env))
        };
        let Some(item) = next else {
            self.stdin = None;
            return;
        };
        if write_item(stdin, &item).is_err() {
            // The worker is gone: the case stays in the batch, not started, and goes back.
            self.stdin = None;
        }
        self.batch.push(item);
    }

    /// Starts the thread's next worker once this one has its runtimes (its first case done,
    /// or begun after it was itself a spare): started earlier, the two would make their
    /// contexts at the same time, and the driver makes them one at a time.
    fn fill_spare(&mut self, opts: &RunOptions, on_event: &mut dyn FnMut(&Event)) {
        if let Some(spares) = self.spares.as_mut() {
            spares.fill(opts, on_event);
        }
    }

    fn running_id(&self) -> &str {
        if self.running {
            &self.batch[self.next].id
        } else {
            "nothing"
        }
    }

    /// The worker said something the runner cannot follow: the running case (if any) is a
    /// harness error, and the worker is not trusted with more.
    fn protocol_error(
        &mut self,
        why: String,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        let reason = format!("worker protocol: {why}");
        if self.running {
            let took = self.elapsed(opts).as_secs_f64();
            self.record(Outcome::Error { reason }, took, opts, on_event, results);
        } else {
            self.tail.push(reason);
        }
        self.worker.kill_group();
        Ok(())
    }

    /// Closes the running case with `outcome`.
    pub(super) fn record(
        &mut self,
        outcome: Outcome,
        duration_s: f64,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) {
        let planned = &self.batch[self.next];
        self.worker_retired = matches!(outcome, Outcome::Fault { .. } | Outcome::Timeout { .. });
        let bad_end = matches!(
            outcome,
            Outcome::Crash { .. } | Outcome::Fault { .. } | Outcome::Timeout { .. }
        );
        let pid = self.worker.pid();
        // The GPU driver's warnings of this worker's group (lines that name no process
        // included), less those an expectation file allows; none for a case on no GPU. Read
        // whatever the case: the read brings the window's last lines, which the look for a
        // lost GPU below takes too.
        let mut driver_lines = self.kernel_log.driver_warnings();
        if opts.no_gpu.contains(&planned.gpu) {
            driver_lines.clear();
        }
        let warnings: Vec<String> = crate::kmsg::of_group(driver_lines, pid)
            .into_iter()
            .filter(|l| {
                !opts
                    .kernel_log_allow
                    .iter()
                    .any(|p| crate::filter::glob(p, l))
            })
            .collect();
        // A lost GPU names no process: every line of the window is looked at.
        let losses: Vec<String> = self
            .kernel_log
            .lines()
            .iter()
            .filter(|l| crate::kmsg::gpu_loss(l).is_some())
            .cloned()
            .collect();
        let outcome = match outcome {
            Outcome::Pass { .. } if !warnings.is_empty() => Outcome::Warn {
                warning: warnings[0].clone(),
            },
            other => other,
        };
        let mut result = CaseResult::new(
            planned.id.clone(),
            planned.work.clone(),
            outcome,
            planned.expectation,
            duration_s,
        );
        // Only a `done` brings one: a case the runner closes (a crash, a timeout) has none.
        result.footprint = self.footprint.take();
        if bad_end {
            let lines = self.kernel_log.since_start();
            result.kernel_log = crate::kmsg::of_group(lines, pid);
        } else {
            result.kernel_log = warnings;
        }
        // The runner thread reads a lost GPU's evidence from the result.
        self.gpu_in_doubt |= !losses.is_empty();
        for line in losses {
            if !result.kernel_log.contains(&line) {
                result.kernel_log.push(line);
            }
        }
        self.kernel_log.clear();
        result.predecessors = self.batch[..self.next]
            .iter()
            .map(|p| p.id.clone())
            .collect();
        on_event(&Event::Finished(Box::new(result.clone())));
        results.push(result);
        self.next += 1;
        self.running = false;
        self.restart_clock(opts);
    }
}
