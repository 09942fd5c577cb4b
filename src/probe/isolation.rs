//! The probe's child processes, on top of the one child supervisor (`crate::child`): each
//! OpenCL vendor library and each ROCm install is probed in a child of its own, which leads its
//! own process group, dies with its parent and answers in protocol lines; a child that
//! crashes, hangs or exits is classified, never fatal. The harness's parent process itself
//! probes through a child (`probe_in_child`), so that it never loads a GPU driver.

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::records::{BROKEN_VENDOR_EXIT, PlatformProbe, Probe, VendorState};
use crate::child::{GroupChild, Line, Tail, describe, signal_name};
use crate::runtimes::runtime_status::RuntimeStatus;

/// Lines of a vendor child's stderr kept for its row, and the length each is cut to.
const STDERR_TAIL_LINES: usize = 8;
const STDERR_LINE_CHARS: usize = 240;

/// One protocol line of a vendor child, after [`crate::protocol::PROTOCOL_PREFIX`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum VendorLine {
    /// The call about to be made.
    Stage(String),
    Answer {
        opencl_status: String,
        platforms: Vec<PlatformProbe>,
    },
    /// A ROCm install child's answer.
    Install(Box<RuntimeStatus>),
}

#[derive(Debug, Default)]
pub(super) struct VendorResult {
    pub(super) state: VendorState,
    pub(super) platforms: Vec<PlatformProbe>,
    pub(super) stderr_tail: Vec<String>,
}

/// Probe from a child process (`exe probe --json`). The harness's parent process never loads a
/// GPU driver: a driver that crashes while being enumerated must not take the run with it, and
/// a driver that lets one process at a time hold the GPU (exclusive compute mode) must not be
/// held by the parent while the workers need it. A probe that exits [`BROKEN_VENDOR_EXIT`]
/// has still answered; the broken vendors are in its answer.
pub fn probe_in_child(exe: &Path, rocm_paths: &[PathBuf]) -> anyhow::Result<Probe> {
    let mut cmd = Command::new(exe);
    cmd.args(["probe", "--json"]).stdin(Stdio::null());
    for p in rocm_paths {
        cmd.arg("--rocm-path").arg(p);
    }
    // SIGTERM, not SIGKILL: the probe process then kills its vendor children's process groups
    // before it dies.
    crate::child::dies_with_parent(&mut cmd, Signal::SIGTERM);
    // From here on the guard owns the child: an error below kills its group and reaps it.
    let mut child =
        GroupChild::spawn(&mut cmd).with_context(|| format!("starting {} probe", exe.display()))?;
    let (_, rx) = child.lines("clhip-probe-reader")?;
    let (mut json, mut err) = (String::new(), Vec::new());
    // Until both pipes close, as the probe ends.
    for line in rx {
        match line {
            Line::Protocol(line) => {
                json.push_str(&line);
                json.push('\n');
            }
            Line::Output(line) => err.push(line),
            Line::Eof => {}
        }
    }
    let status = child.kill_and_reap()?;
    let err = err.join("\n");
    let err = match err.trim() {
        "" => "it printed nothing on stderr",
        e => e,
    };
    let broken_vendor_exit = status.code() == Some(BROKEN_VENDOR_EXIT.into());
    if !status.success() && !broken_vendor_exit {
        anyhow::bail!("the probe process failed ({status}): {err}");
    }
    let probe: Probe = serde_json::from_str(&json).context("reading the probe process's JSON")?;
    if broken_vendor_exit && probe.broken_vendors().is_empty() {
        anyhow::bail!("the probe process failed ({status}), naming no broken vendor: {err}");
    }
    Ok(probe)
}

/// Process groups of vendor children now running, for [`install_group_reaper`]'s handler
/// (0: free slot). Atomics, because a signal handler may read them.
static LIVE_GROUPS: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

extern "C" fn kill_live_groups_and_die(sig: std::ffi::c_int) {
    // Only async-signal-safe calls here: atomic loads, kill(2), sigaction(2), raise(3).
    for g in &LIVE_GROUPS {
        let pgid = g.load(Ordering::SeqCst);
        if pgid > 0 {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
    if let Ok(sig) = Signal::try_from(sig) {
        // SAFETY: restoring the default disposition of the signal being handled, then raising
        // it again, so the process dies of it as it would have without this handler.
        unsafe {
            let _ = nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl);
        }
        let _ = nix::sys::signal::raise(sig);
    }
}

/// On SIGTERM, SIGINT or SIGHUP, kill the vendor children's process groups before dying: they
/// lead groups of their own (so a hung driver and any helper it forked can be killed as one),
/// so neither a Ctrl-C nor a kill of this process would reach a helper otherwise. Only where
/// the signal has its default disposition: a process that handles it already keeps its handler.
pub(super) fn install_group_reaper() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let action = SigAction::new(
            SigHandler::Handler(kill_live_groups_and_die),
            SaFlags::empty(),
            SigSet::empty(),
        );
        for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            // SAFETY: the handler only makes async-signal-safe calls (see above).
            match unsafe { sigaction(sig, &action) } {
                Ok(old) if !matches!(old.handler(), SigHandler::SigDfl) => {
                    // SAFETY: puts back exactly what was installed before.
                    let _ = unsafe { sigaction(sig, &old) };
                }
                _ => {}
            }
        }
    });
}

/// Registers a vendor child's group for the signal handler while it runs; the group lets go of
/// its slot when it is killed, before its leader is reaped.
fn register_group(child: &mut GroupChild) {
    let raw = child.pgid().as_raw();
    let slot = LIVE_GROUPS.iter().position(|g| {
        g.compare_exchange(0, raw, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    if let Some(slot) = slot {
        child.on_kill(move |_| LIVE_GROUPS[slot].store(0, Ordering::SeqCst));
    }
}

/// What a probe child said, and how it ended.
pub(super) struct ChildRun {
    pub(super) seen: Seen,
    pub(super) timed_out: bool,
    pub(super) status: anyhow::Result<ExitStatus>,
}

/// Run a probe child (`cmd`) in a process group of its own until it exits or `limit` passes,
/// then kill the group and read what it said. Err only when it could not be started.
pub(super) fn run_child(mut cmd: Command, limit: Duration) -> Result<ChildRun, String> {
    // From here on the guard owns the child: every return below kills and reaps it.
    let mut child = match GroupChild::spawn(cmd.stdin(Stdio::null())) {
        Ok(c) => c,
        Err(e) => return Err(format!("cannot start {}: {e}", cmd.get_program().display())),
    };
    register_group(&mut child);
    let (_, rx) = child
        .lines("clhip-probe-reader")
        .map_err(|e| format!("{e:#}"))?;

    let mut seen = Seen::new();
    let deadline = Instant::now() + limit;
    let timed_out = loop {
        seen.take(&rx, Duration::from_millis(20));
        // An error (ECHILD) means there is nothing left to wait for.
        if child.has_exited().unwrap_or(true) {
            break false;
        }
        if Instant::now() >= deadline {
            break true;
        }
    };
    let status = child.kill_and_reap().context("reaping vendor probe");
    // The group is dead, so the pipes close; what was still in them is read now. Bounded, in
    // case something outside the group (a daemon that called setsid) holds them open.
    let drain_until = Instant::now() + Duration::from_secs(1);
    while seen.eofs < 2 {
        let left = drain_until.saturating_duration_since(Instant::now());
        if left.is_zero() || !seen.take(&rx, left) {
            break;
        }
    }
    Ok(ChildRun {
        seen,
        timed_out,
        status,
    })
}

/// What a vendor child has said so far.
pub(super) struct Seen {
    stage: Option<String>,
    answer: Option<(String, Vec<PlatformProbe>)>,
    pub(super) install: Option<Box<RuntimeStatus>>,
    bad_line: Option<String>,
    pub(super) tail: Tail,
    eofs: usize,
}

impl Seen {
    fn new() -> Self {
        Seen {
            stage: None,
            answer: None,
            install: None,
            bad_line: None,
            tail: Tail::new(STDERR_TAIL_LINES),
            eofs: 0,
        }
    }

    /// Takes what arrives within `wait`; false once both pipes have closed and been read.
    fn take(&mut self, rx: &Receiver<Line>, wait: Duration) -> bool {
        let mut msg = rx.recv_timeout(wait);
        loop {
            match msg {
                Ok(Line::Protocol(line)) => self.protocol(line),
                Ok(Line::Output(line)) => self.stderr(line),
                Ok(Line::Eof) => self.eofs += 1,
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => {
                    // Both readers are done: nothing more will come; do not spin.
                    std::thread::sleep(wait.min(Duration::from_millis(20)));
                    return false;
                }
            }
            msg = match rx.try_recv() {
                Ok(m) => Ok(m),
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            };
        }
    }

    fn protocol(&mut self, line: String) {
        // The child's stdout carries only protocol lines (driver prints go to stderr there);
        // anything else is kept with the driver's output.
        let Some(parsed) = crate::protocol::parse_line::<VendorLine>(&line) else {
            return self.stderr(line);
        };
        match parsed {
            Ok(VendorLine::Stage(s)) => self.stage = Some(s),
            Ok(VendorLine::Answer {
                opencl_status,
                platforms,
            }) => self.answer = Some((opencl_status, platforms)),
            Ok(VendorLine::Install(runtime)) => self.install = Some(runtime),
            Err(e) => {
                self.bad_line
                    .get_or_insert_with(|| format!("unreadable answer ({e}): {line}"));
            }
        }
    }

    fn stderr(&mut self, line: String) {
        self.tail
            .push(line.chars().take(STDERR_LINE_CHARS).collect());
    }

    pub(super) fn classify(
        self,
        timed_out: bool,
        status: anyhow::Result<ExitStatus>,
        limit: Duration,
    ) -> VendorResult {
        let during = match (&self.answer, &self.stage) {
            (Some(_), _) => "at exit, after answering".to_string(),
            (None, Some(s)) => format!("in {s}"),
            (None, None) => "before its first OpenCL call".to_string(),
        };
        let (answered_status, platforms) = match self.answer {
            Some((s, p)) => (Some(s), p),
            None => (None, Vec::new()),
        };
        let state = if timed_out {
            VendorState::Hung {
                limit_s: limit.as_secs_f64(),
                during,
            }
        } else if let Some(bad) = self.bad_line {
            VendorState::Failed { error: bad }
        } else {
            match status {
                Err(e) => VendorState::Failed {
                    error: format!("{e:#}"),
                },
                Ok(st) => match (st.signal(), answered_status) {
                    (Some(sig), _) => VendorState::Crashed {
                        signal: signal_name(sig),
                        during,
                    },
                    (None, Some(s)) if s == "ok" && st.success() => VendorState::Ok,
                    (None, Some(s)) if st.success() => VendorState::NoPlatform {
                        error: s.strip_prefix("unsupported: ").unwrap_or(&s).to_string(),
                    },
                    (None, _) => VendorState::Exited {
                        status: describe(st),
                        during,
                    },
                },
            }
        };
        VendorResult {
            state,
            platforms,
            stderr_tail: self.tail.lines().cloned().collect(),
        }
    }
}

/// A probe child's side of the protocol: it dies with its parent, keeps its stdout for
/// protocol lines (driver output goes to stderr) and sends one line at a time.
pub(super) fn answer_parent() -> anyhow::Result<impl FnMut(&VendorLine) -> anyhow::Result<()>> {
    crate::child::die_with_parent("probe");
    let mut protocol = crate::child::take_stdout_for_protocol()?;
    Ok(move |line: &VendorLine| {
        protocol
            .write_all(crate::protocol::line_of(line)?.as_bytes())
            .and_then(|()| protocol.flush())
            .context("writing a protocol line to the parent")
    })
}
