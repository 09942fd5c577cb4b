//! How a worker's end is judged: what its death or stall means for the case it was running
//! (a crash, a fault, a timeout, or the harness's own error) and for the cases it had not
//! started (they go back to the queue), and why a worker that never started a case failed.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::options::RunOptions;
use super::session::{Session, Stop};
use crate::child::{crash_signal, describe, harness_exit};
use crate::fault::BufferSpan;
use crate::model::{Api, ApiError, Outcome};
use crate::results::{CaseResult, Event, Planned};

/// How long to collect a dead worker's last output once its group has been killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

pub(super) enum BatchEnd {
    /// The worker ran at least one case (or the source had none, or the run was interrupted).
    Ran,
    /// The worker died or stalled before starting its first case.
    CouldNotStart(String),
}

impl Session<'_, '_> {
    /// Ends the worker and decides what its end means for its cases; returns those it did not
    /// start.
    pub(super) fn finish(
        mut self,
        stop: Stop,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<(BatchEnd, Vec<Planned>)> {
        self.stdin = None;
        match stop {
            Stop::Stalled => self.after_stall(opts, on_event, results)?,
            Stop::Exited => self.after_exit(opts, on_event, results)?,
        }
        let end = if self.next == 0 && !opts.control.is_interrupted() {
            BatchEnd::CouldNotStart(self.could_not_start(stop, opts))
        } else {
            BatchEnd::Ran
        };
        let not_started = self.batch.split_off(self.next);
        Ok((end, not_started))
    }

    fn after_stall(
        &mut self,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        self.worker.kill_and_reap()?;
        if opts.control.is_interrupted() {
            return Ok(());
        }
        if self.running {
            let after_s = self.elapsed(opts).as_secs_f64();
            let blocked_in = std::mem::take(&mut self.blocked_in);
            let outcome = match self.kernel_fault.take() {
                Some((seen, fault)) => {
                    let peer = self.batch[self.next].work.case().map(|c| c.pair.peer.api);
                    kernel_fault_outcome(fault, seen, after_s, &blocked_in, peer)
                }
                None => Outcome::Timeout {
                    after_s,
                    blocked_in,
                },
            };
            self.record(outcome, after_s, opts, on_event, results);
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
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        // Helpers left in the group would hold the pipes open; then read what is still in them:
        // a `done` written just before a clean exit, or the last words before a crash.
        self.worker.kill_group();
        let until = Instant::now() + DRAIN_GRACE;
        while self.streams_open > 0 && Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            self.receive(left, opts, on_event, results)?;
        }
        let status = self.worker.kill_and_reap()?;
        // Killed by the interrupt: the case did not run to any end, so it has no outcome.
        if opts.control.is_interrupted() && status.signal() == Some(Signal::SIGKILL as i32) {
            return Ok(());
        }
        if self.running {
            let took = self.elapsed(opts).as_secs_f64();
            let outcome = death_outcome(
                status,
                self.tail.text(),
                self.harness_error.take(),
                &self.buffers,
                self.batch[self.next].work.case(),
            );
            self.record(outcome, took, opts, on_event, results);
        } else if self.next > 0 {
            let retired_by_itself = status.success() && self.worker_retired;
            if !status.success() {
                let when = if self.next < self.batch.len() {
                    "between cases"
                } else {
                    "after its last case"
                };
                self.lost(format!("{} {when}", describe(status)), on_event);
            } else if self.next < self.batch.len() && !retired_by_itself {
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
        let how = match (stop, self.worker.group.status()) {
            (Stop::Stalled, _) => format!(
                "did not start within {:.1} s",
                opts.startup_timeout.as_secs_f64()
            ),
            (Stop::Exited, Some(status)) => format!("ended ({})", describe(status)),
            (Stop::Exited, None) => "ended".to_string(),
        };
        let mut why = format!(
            "worker `{}` (pid {}) {how} before starting `{}`",
            // The pinned executable's /proc/self/fd path says nothing: name the file itself.
            std::fs::read_link(&opts.worker_exe)
                .unwrap_or_else(|_| opts.worker_exe.clone())
                .display(),
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

/// The verdict on a case whose worker died while running it.
/// - The worker said it hit its own bug (a panic), or exited as clhip does on an internal
///   error (status 2) or a panic (101): a harness error, never the driver's crash.
/// - ROCm's runtime printed its GPU page-fault line before aborting: a `fault`, with the node,
///   the address (placed among the case's buffers) and the reason.
/// - Otherwise a `crash`: a signal is the classic one; a plain exit mid-case (a runtime calling
///   exit()) has no signal, so it is recorded as signal 0 with the exit status as its name.
pub(super) fn death_outcome(
    status: ExitStatus,
    stderr_tail: String,
    harness_error: Option<String>,
    buffers: &[BufferSpan],
    case: Option<&crate::model::Case>,
) -> Outcome {
    if let Some(reason) = harness_error {
        return Outcome::Error { reason };
    }
    if let Some(f) = crate::fault::parse_rocr_fault(&stderr_tail) {
        let api = match case {
            Some(c) if c.pair.peer.api != Api::Host => c.pair.peer.api,
            _ => Api::OpenCl,
        };
        return Outcome::Fault {
            error: ApiError {
                api,
                call: "ROCr GPU page-fault handler (the process then aborted)".into(),
                code: i64::from(status.signal().unwrap_or(0)),
                name: "Memory access fault".into(),
                detail: format!(
                    "GPU node-{}, address {:#x} {}; reason: {}; ROCr said: {}",
                    f.node,
                    f.address,
                    crate::fault::locate(f.address, buffers),
                    f.reason,
                    f.line
                ),
            },
        };
    }
    if let Some((code, which)) = harness_exit(status) {
        let last = stderr_tail.lines().last().unwrap_or("no output");
        return Outcome::Error {
            reason: format!("the worker exited with status {code} ({which}): {last}"),
        };
    }
    crash_outcome(status, stderr_tail)
}

/// A case ended after the kernel logged a GPU memory fault of its worker that no API call
/// returned. It is a `fault`: the device reported one, through the kernel driver; the call it
/// hung in is named, so the missing report (a driver bug of its own) is not lost. The log names
/// the process, not which API's context faulted: the error's API is that of the call left
/// waiting.
pub(super) fn kernel_fault_outcome(
    fault: crate::kmsg::KernelFault,
    seen: Duration,
    after_s: f64,
    blocked_in: &str,
    peer: Option<Api>,
) -> Outcome {
    let call = blocked_in.split_whitespace().next().unwrap_or("");
    let api = if call.starts_with("cl") {
        Api::OpenCl
    } else if call.starts_with("hip") {
        Api::Hip
    } else if call.starts_with("cu") {
        Api::Cuda
    } else {
        peer.filter(|&a| a != Api::Host).unwrap_or(Api::OpenCl)
    };
    // Displayed as "<call> returned <name> (<code>)": the call here is where it was seen.
    let call = if call.is_empty() {
        "the kernel log (no API call reported it)".to_string()
    } else {
        format!("the kernel log (no API call reported it; {call} hung)")
    };
    let waiting = if blocked_in.is_empty() {
        String::new()
    } else {
        format!("; the last blocking call announced: {blocked_in}")
    };
    Outcome::Fault {
        error: ApiError {
            api,
            call,
            code: fault.code,
            name: fault.name,
            detail: format!(
                "`{}`, logged {:.1} s into the case; ended {:.1} s later with no API having \
                 reported it{waiting}",
                fault.line,
                seen.as_secs_f64(),
                after_s - seen.as_secs_f64()
            ),
        },
    }
}

pub(super) fn crash_outcome(status: ExitStatus, stderr_tail: String) -> Outcome {
    let (signal, signal_name) = crash_signal(status);
    Outcome::Crash {
        signal,
        signal_name,
        stderr_tail,
        process: String::new(),
    }
}
