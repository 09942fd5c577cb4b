//! The one supervisor of clhip's child processes: the runner's workers, the probe's vendor
//! and install children, bench's children and the IPC path's exporter. A child leads a process
//! group of its own ([`GroupChild`]) so that one kill reaches any helper a driver forked; it
//! dies with its parent ([`die_with_parent`]); it speaks a line protocol on a stdout kept for
//! it ([`take_stdout_for_protocol`]), read line by line ([`GroupChild::lines`]); it is killed
//! with its whole group and reaped on every path; and how it ended is put in words
//! ([`describe`], [`crash_signal`], [`harness_exit`]). Nothing here knows about cases or
//! runtimes.
//!
//! The group is killed while its leader is still an unreaped zombie, so the group id cannot
//! have been reused by a stranger.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};

use anyhow::Context;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

/// Status of `clhip` ending on an error of its own (main's error path).
pub const HARNESS_ERROR_EXIT: i32 = 2;
/// Status of a Rust panic.
pub const PANIC_EXIT: i32 = 101;

/// For a child that speaks a line protocol to its parent (a worker, a probe's vendor child, a
/// bench child): keeps the original stdout for the protocol (close-on-exec, so helpers a driver
/// spawns do not hold it) and points fd 1 at stderr. Driver prints, buffered by C stdio and
/// flushed in arbitrary chunks, land in the stderr tail and can never split or imitate a
/// protocol line. `clhip probe` uses it too, so that HIP or CUDA chatter cannot corrupt `--json`.
pub fn take_stdout_for_protocol() -> anyhow::Result<File> {
    use anyhow::Context;
    let protocol = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("duplicating stdout for the protocol")?;
    nix::unistd::dup2_stdout(std::io::stderr().as_fd())
        .context("pointing stdout at stderr for driver output")?;
    Ok(File::from(protocol))
}

/// Asks the kernel to SIGKILL this child when its parent dies, so that a parent killed outright
/// does not leave it running on the GPU or hung in a driver. Best effort: the parent also kills
/// the child's group, and a child ends at the next stdin EOF or stdout EPIPE anyway. `who`
/// names the child in the warning.
pub fn die_with_parent(who: &str) {
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        eprintln!("clhip {who}: cannot set parent-death signal: {e}");
    }
}

/// Has the kernel send `signal` to the child `cmd` starts when this process dies: the parent's
/// side of [`die_with_parent`], for a child that is not clhip's own code or that must be told
/// before it starts.
pub fn dies_with_parent(cmd: &mut Command, signal: Signal) {
    // SAFETY: the closure runs between fork and exec and makes one system call (prctl), which
    // is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || nix::sys::prctl::set_pdeathsig(signal).map_err(std::io::Error::from));
    }
}

/// `SIGSEGV`, or the number for a signal nix does not know.
pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// How a child that died mid-work ended, as a crash records it: the signal and its name, or
/// for a plain exit (a runtime calling exit()) signal 0 and the exit status in words.
pub fn crash_signal(status: ExitStatus) -> (i32, String) {
    match status.signal() {
        Some(sig) => (sig, signal_name(sig)),
        None => (0, describe(status)),
    }
}

/// For a child that exited as clhip does on its own failure (an internal error, a panic): its
/// status and which of the two, in words. Such a death is a harness error, never the driver's
/// crash.
pub fn harness_exit(status: ExitStatus) -> Option<(i32, &'static str)> {
    if status.signal().is_some() {
        return None;
    }
    match status.code()? {
        PANIC_EXIT => Some((PANIC_EXIT, "a panic")),
        HARNESS_ERROR_EXIT => Some((HARNESS_ERROR_EXIT, "an internal error")),
        _ => None,
    }
}

/// How a child process ended, in words: `killed by SIGKILL`, `exit status 3`.
pub fn describe(status: ExitStatus) -> String {
    match (status.signal(), status.code()) {
        (Some(sig), _) => format!("killed by {}", signal_name(sig)),
        (None, Some(code)) => format!("exit status {code}"),
        (None, None) => format!("{status}"),
    }
}

/// Reads `pipe` line by line on a thread of its own (so that a child's full pipe never blocks
/// the caller), handing each line to `each`, then `None` at the end of the stream. Lossy
/// UTF-8, since drivers print what they like; a partial last line (no newline) comes as a line
/// of its own. The thread stops early when `each` returns false (its reader is gone).
pub fn read_lines(
    name: &str,
    pipe: impl Read + Send + 'static,
    mut each: impl FnMut(Option<String>) -> bool + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_string())
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
                        if !each(Some(line)) {
                            return;
                        }
                    }
                }
            }
            each(None);
        })
        .map(drop)
}

/// A line from a child, by stream, or the end of one stream.
#[derive(Debug)]
pub enum Line {
    /// The protocol stream (the child's original stdout).
    Protocol(String),
    /// Driver and runtime output (the child's stderr, where its fd 1 points too).
    Output(String),
    Eof,
}

/// Forwards each line of `pipe` to `tx`, wrapped by `wrap`, then [`Line::Eof`]; the reader
/// ends at the next line once the receiver is gone.
fn forward_lines(
    name: &str,
    pipe: impl Read + Send + 'static,
    tx: Sender<Line>,
    wrap: fn(String) -> Line,
) -> std::io::Result<()> {
    read_lines(name, pipe, move |line| {
        tx.send(line.map_or(Line::Eof, wrap)).is_ok()
    })
}

/// A child process leading its own process group: killed (the whole group) and reaped on drop
/// at the latest.
pub struct GroupChild {
    child: Child,
    pgid: Pid,
    /// Set once reaped.
    status: Option<ExitStatus>,
    /// Called with the group id once the group is killed and before the leader is reaped: the
    /// caller's registry of live groups lets go of it while the id is still the child's.
    on_kill: Option<Box<dyn FnMut(i32) + Send>>,
}

impl GroupChild {
    /// Starts `cmd` as the leader of a new process group, its stdout and stderr piped (read
    /// them with [`GroupChild::lines`]). Its stdin is whatever `cmd` says.
    pub fn spawn(cmd: &mut Command) -> std::io::Result<Self> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let Ok(raw) = i32::try_from(child.id()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("child pid out of range"));
        };
        Ok(GroupChild {
            child,
            pgid: Pid::from_raw(raw),
            status: None,
            on_kill: None,
        })
    }

    /// Has `on_kill` called with the group id when the group is killed, before the reap.
    pub fn on_kill(&mut self, on_kill: impl FnMut(i32) + Send + 'static) {
        self.on_kill = Some(Box::new(on_kill));
    }

    /// The child's stdin (when `cmd` piped it), and its stdout and stderr lines on one
    /// channel, read by threads named after `reader`. Once only.
    pub fn lines(&mut self, reader: &str) -> anyhow::Result<(Option<ChildStdin>, Receiver<Line>)> {
        let (Some(stdout), Some(stderr)) = (self.child.stdout.take(), self.child.stderr.take())
        else {
            anyhow::bail!("child {} started without its pipes", self.pgid);
        };
        let (tx, rx) = mpsc::channel();
        forward_lines(reader, stdout, tx.clone(), Line::Protocol)
            .and_then(|()| forward_lines(reader, stderr, tx, Line::Output))
            .with_context(|| format!("starting a reader of child {}", self.pgid))?;
        Ok((self.child.stdin.take(), rx))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn pgid(&self) -> Pid {
        self.pgid
    }

    /// How the leader ended, once reaped.
    pub fn status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// Whether the leader has exited, without reaping it: while it is an unreaped zombie its
    /// pid, and so the group id, cannot be reused, and [`GroupChild::kill_group`] cannot hit a
    /// stranger.
    pub fn has_exited(&self) -> anyhow::Result<bool> {
        if self.status.is_some() {
            return Ok(true);
        }
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        let status = waitid(Id::Pid(self.pgid), flags)
            .with_context(|| format!("checking on child {}", self.pgid))?;
        Ok(!matches!(status, WaitStatus::StillAlive))
    }

    /// SIGKILL to every process in the group. No-op once reaped (the id may be reused then).
    pub fn kill_group(&self) {
        if self.status.is_none() {
            // ESRCH: nobody left in the group, which is the goal.
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }

    /// Kills the group and reaps the leader; the status is the leader's own if it had already
    /// exited, SIGKILL otherwise.
    pub fn kill_and_reap(&mut self) -> anyhow::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        self.kill_group();
        if let Some(mut on_kill) = self.on_kill.take() {
            on_kill(self.pgid.as_raw());
        }
        let status = self
            .child
            .wait()
            .with_context(|| format!("reaping child {}", self.pgid))?;
        self.status = Some(status);
        Ok(status)
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        let _ = self.kill_and_reap();
    }
}

/// The last lines a child printed, for the report of its death.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    keep: usize,
    lines: std::collections::VecDeque<String>,
}

impl Tail {
    /// Keeps the last `keep` lines.
    pub fn new(keep: usize) -> Self {
        Tail {
            keep,
            lines: std::collections::VecDeque::new(),
        }
    }

    pub fn push(&mut self, line: String) {
        if self.lines.len() == self.keep {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The lines kept, joined by newlines.
    pub fn text(&self) -> String {
        Vec::from_iter(self.lines.iter().map(String::as_str)).join("\n")
    }

    pub fn last(&self) -> Option<&str> {
        self.lines.back().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn lines(&self) -> impl DoubleEndedIterator<Item = &String> {
        self.lines.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut tail = Tail::new(20);
        for i in 0..25 {
            tail.push(format!("line {i}"));
        }
        assert_eq!(tail.lines().count(), 20);
        assert_eq!(tail.lines().next().map(String::as_str), Some("line 5"));
        assert_eq!(tail.last(), Some("line 24"));
    }
}
