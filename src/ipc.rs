//! The IPC path's second process. hipIpcOpenMemHandle / cuIpcOpenMemHandle refuse a handle
//! from their own process, so the allocation under test is made by another clhip process (the
//! exporter: `clhip __ipc-export`).
//!
//! One exporter serves a worker's IPC cases one after another: a process and a device context
//! per case cost more than the rest of such a case (1.5 s of its 1.7 s on an H200 at `-j 4`).
//! It starts on the worker's first IPC case and dies with the worker. For a pair across two
//! GPUs it opens OpenCL's GPU, not the peer's: the peer then opens memory of another GPU.
//!
//! Protocol: the worker writes `alloc <elements>` or `free` lines to the exporter's stdin; the
//! exporter answers each with one line to stdout, after [`PREFIX`]: an [`ExporterLine`]. EOF
//! on its stdin means "free what you hold and exit".

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Api, ApiError, CaseError, Outcome};
use crate::runtimes::device::IpcHandle;

/// Marks the exporter's protocol line among whatever its driver prints.
pub const PREFIX: &str = "@@clhip-ipc ";

/// How long the exporter may take to open its device and allocate before the case gives up on
/// it (a GPU context on a busy machine takes seconds, not minutes).
const EXPORTER_START: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExporterLine {
    Handle { hex: String },
    Freed,
    Stopped { outcome: Outcome },
}

fn exporter_error(detail: String) -> ApiError {
    ApiError {
        api: Api::Host,
        call: "clhip __ipc-export".into(),
        code: 0,
        name: "EXPORTER".into(),
        detail,
    }
}

pub fn encode(handle: &IpcHandle) -> String {
    handle.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn decode(hex: &str) -> Result<IpcHandle, String> {
    let mut out = [0u8; 64];
    if hex.len() != 128 {
        return Err(format!("{} hex digits, not 128", hex.len()));
    }
    for (i, b) in out.iter_mut().enumerate() {
        *b =
            u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| format!("byte {i}: {e}"))?;
    }
    Ok(out)
}

/// A running exporter process: its stdin, its protocol lines, the tail of its stderr.
#[derive(Debug)]
struct Process {
    /// What started it (executable and device arguments): a case for another device gets
    /// its own exporter.
    key: Vec<String>,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Answers at the exporter's EOF on stderr: awaited once it is dead, for the last lines.
    stderr_reader: Option<Receiver<()>>,
}

/// The worker's exporters between two IPC cases, one per device it has opened.
static IDLE: Mutex<Vec<Process>> = Mutex::new(Vec::new());

impl Process {
    fn start(exe: &PathBuf, reopen_args: &[String], key: Vec<String>) -> Result<Self, CaseError> {
        let mut child = Command::new(exe)
            .arg("__ipc-export")
            .args(reopen_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                CaseError::Broken(exporter_error(format!("starting {}: {e}", exe.display())))
            })?;
        let stdin = child.stdin.take();
        let (tx, lines) = std::sync::mpsc::channel();
        if let Some(out) = child.stdout.take() {
            // Skip driver chatter; the channel closes at the exporter's EOF.
            let started = crate::child::read_lines("clhip-ipc-out", out, move |line| match line {
                Some(line) if line.starts_with(PREFIX) => tx.send(line).is_ok(),
                Some(_) => true,
                None => false,
            });
            if let Err(e) = started {
                // No reader: the exporter's answer never comes, which the case reports.
                eprintln!("clhip: cannot start the IPC exporter's reader: {e}");
            }
        }
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let stderr_reader = child.stderr.take().and_then(|err| {
            // Drained all the time: a long-lived exporter must never block on a full pipe.
            let tail = stderr.clone();
            crate::child::read_lines("clhip-ipc-err", err, move |line| {
                let Some(line) = line else {
                    let _ = done_tx.send(());
                    return false;
                };
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push_back(line);
                if t.len() > 10 {
                    t.pop_front();
                }
                true
            })
            .ok()
            .map(|()| done_rx)
        });
        Ok(Process {
            key,
            child,
            stdin,
            lines,
            stderr,
            stderr_reader,
        })
    }

    /// Send one request and read its answer. `None`: the exporter is gone or hung.
    fn ask(&mut self, request: &str, limit: Duration) -> Option<Result<ExporterLine, String>> {
        let stdin = self.stdin.as_mut()?;
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .ok()?;
        let line = match self.lines.recv_timeout(limit) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
        };
        let json = line.strip_prefix(PREFIX).unwrap_or(&line);
        Some(serde_json::from_str(json).map_err(|e| format!("unreadable protocol line: {e}")))
    }

    fn stderr_tail(&self) -> String {
        let t = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The exporter gave no answer: it died, or hung past the limit. Say how it ended.
    fn died(mut self) -> CaseError {
        self.stdin = None;
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let status = self.child.wait();
        if let Some(reader) = self.stderr_reader.take() {
            // Disconnected too when the reader is gone: either way the tail is complete.
            let _ = reader.recv();
        }
        match status {
            Ok(status) if status.signal().is_some() || !status.success() => {
                crashed(status, self.stderr_tail())
            }
            Ok(_) => CaseError::Broken(exporter_error(format!(
                "exited without answering: {}",
                self.stderr_tail()
            ))),
            Err(e) => CaseError::Broken(exporter_error(format!("waiting: {e}"))),
        }
    }

    /// What an answer other than the one `request` wants means for the case, the exporter being
    /// done with either way: its own refusal or fault, a protocol error, or its death.
    fn ended(self, answer: Option<Result<ExporterLine, String>>, request: &str) -> CaseError {
        match answer {
            None => self.died(),
            Some(answer) => {
                self.reap();
                match answer {
                    Ok(ExporterLine::Stopped { outcome }) => from_exporter_outcome(outcome),
                    Ok(other) => CaseError::Broken(exporter_error(format!(
                        "answered {other:?} to {request}"
                    ))),
                    Err(e) => CaseError::Broken(exporter_error(e)),
                }
            }
        }
    }

    /// The exporter said it stopped (a refusal, a fault) and exits by itself: reap it.
    fn reap(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

/// One case's allocation in the exporter. [`Exporter::finish`] frees it and says how that
/// went; dropping it frees it quietly.
#[derive(Debug)]
pub struct Exporter {
    process: Option<Process>,
}

impl Exporter {
    /// Have an exporter (this worker's, or a new one for `exe __ipc-export <reopen_args>`)
    /// allocate `len` elements and hand over its IPC handle. A refusal in the exporter (no
    /// device, hipMalloc refused) comes back as the case's own outcome; an exporter that dies
    /// is a crash of that process.
    pub fn spawn(
        exe: PathBuf,
        reopen_args: &[String],
        len: usize,
    ) -> Result<(Exporter, IpcHandle), CaseError> {
        let mut key = vec![exe.display().to_string()];
        key.extend(reopen_args.iter().cloned());
        let idle = {
            let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
            idle.iter()
                .position(|p| p.key == key)
                .map(|i| idle.swap_remove(i))
        };
        let request = format!("alloc {len}");
        // An idle exporter that has gone away since its last case is replaced, once.
        let (mut process, answer) = match idle {
            Some(mut p) => match p.ask(&request, EXPORTER_START) {
                Some(answer) => (p, Some(answer)),
                None => {
                    let _ = p.died();
                    (Process::start(&exe, reopen_args, key)?, None)
                }
            },
            None => (Process::start(&exe, reopen_args, key)?, None),
        };
        let answer = match answer {
            Some(a) => Some(a),
            None => crate::trace::timed("IPC exporter start and first allocation", || {
                process.ask(&request, EXPORTER_START)
            }),
        };
        match answer {
            Some(Ok(ExporterLine::Handle { hex })) => match decode(&hex) {
                Ok(h) => Ok((
                    Exporter {
                        process: Some(process),
                    },
                    h,
                )),
                Err(e) => {
                    process.reap();
                    Err(CaseError::Broken(exporter_error(format!(
                        "unreadable handle: {e}"
                    ))))
                }
            },
            other => Err(process.ended(other, "an allocation")),
        }
    }

    /// Have the exporter free the allocation, and keep it for the worker's next IPC case.
    pub fn finish(mut self) -> Result<(), CaseError> {
        let Some(process) = self.process.take() else {
            return Ok(());
        };
        release(process)
    }
}

fn release(mut process: Process) -> Result<(), CaseError> {
    match process.ask("free", EXPORTER_START) {
        Some(Ok(ExporterLine::Freed)) => {
            IDLE.lock().unwrap_or_else(|e| e.into_inner()).push(process);
            Ok(())
        }
        other => Err(process.ended(other, "a free")),
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            let _ = release(process);
        }
    }
}

fn crashed(status: std::process::ExitStatus, stderr_tail: String) -> CaseError {
    let (signal, signal_name) = crate::child::crash_signal(status);
    CaseError::Crashed {
        process: "IPC exporter process".into(),
        signal,
        signal_name,
        stderr_tail,
    }
}

/// What the exporter's own outcome means for the case: its refusals and faults are the case's.
fn from_exporter_outcome(outcome: Outcome) -> CaseError {
    match outcome {
        Outcome::Unsupported { reason, error } => CaseError::Unsupported {
            reason: format!("in the IPC exporter process: {reason}"),
            error,
        },
        Outcome::Fault { error } => CaseError::Fault(error),
        Outcome::Skip { reason } => CaseError::Skip(format!("IPC exporter process: {reason}")),
        other => CaseError::Broken(exporter_error(format!(
            "stopped with {}: {}",
            other.kind(),
            other.reason()
        ))),
    }
}

/// The exporter's side (`clhip __ipc-export`): open the device once, then allocate and free
/// as the worker asks, one allocation at a time, until stdin closes.
pub fn serve(api: Api, ordinal: usize, rocm_path: Option<PathBuf>) -> anyhow::Result<()> {
    crate::child::die_with_parent("IPC exporter");
    let mut stdout = std::io::stdout().lock();
    let say = |out: &mut dyn Write, line: &ExporterLine| -> anyhow::Result<()> {
        writeln!(out, "{PREFIX}{}", serde_json::to_string(line)?)?;
        out.flush()?;
        Ok(())
    };
    let opened = crate::trace::timed("exporter: open peer", || {
        crate::peer::open_peer(api, ordinal, rocm_path.as_deref())
    });
    let mut peer = match opened {
        Ok(p) => p,
        Err(e) => {
            let outcome = e.into_outcome();
            return say(&mut stdout, &ExporterLine::Stopped { outcome });
        }
    };
    let Some(dev) = peer.as_device() else {
        let outcome = Outcome::unsupported(format!("{} has no device runtime", api.name()));
        return say(&mut stdout, &ExporterLine::Stopped { outcome });
    };
    let mut held = None;
    for request in std::io::stdin().lock().lines() {
        let request = request?;
        let request = request.trim();
        if request == "free" {
            if let Some(alloc) = held.take() {
                dev.free(alloc);
            }
            say(&mut stdout, &ExporterLine::Freed)?;
            continue;
        }
        let Some(len) = request
            .strip_prefix("alloc ")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            anyhow::bail!("unknown request from the worker: {request:?}");
        };
        if let Some(alloc) = held.take() {
            dev.free(alloc);
        }
        let exported = dev
            .alloc(crate::runtimes::device::AllocKind::Device, len)
            .and_then(|a| match dev.ipc_handle(&a) {
                Ok(h) => Ok((a, h)),
                Err(e) => {
                    dev.free(a);
                    Err(e)
                }
            });
        match exported {
            Ok((alloc, handle)) => {
                held = Some(alloc);
                say(
                    &mut stdout,
                    &ExporterLine::Handle {
                        hex: encode(&handle),
                    },
                )?;
            }
            Err(e) => {
                let outcome = e.into_outcome();
                return say(&mut stdout, &ExporterLine::Stopped { outcome });
            }
        }
    }
    if let Some(alloc) = held.take() {
        dev.free(alloc);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_through_hex() {
        let mut h = [0u8; 64];
        for (i, b) in h.iter_mut().enumerate() {
            *b = (i * 37) as u8;
        }
        assert_eq!(decode(&encode(&h)).unwrap(), h);
        assert!(decode("00").is_err());
        assert!(decode(&"zz".repeat(64)).is_err());
    }

    #[test]
    fn exporter_refusals_become_the_case_outcome() {
        let e = from_exporter_outcome(Outcome::unsupported("no HIP device"));
        assert!(
            matches!(&e, CaseError::Unsupported { reason, .. } if reason.contains("IPC exporter") && reason.contains("no HIP device")),
            "{e:?}"
        );
        let e = from_exporter_outcome(Outcome::pass());
        assert!(matches!(e, CaseError::Broken(_)), "{e:?}");
    }

    /// An executable script standing in for `clhip __ipc-export`: it answers each request
    /// line with the shell snippet's output.
    fn fake_exporter(name: &str, on_alloc: &str, on_free: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("clhip-ipc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho driver chatter\nwhile read req; do case \"$req\" in alloc*) {on_alloc};; free) {on_free};; esac; done\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn line(l: &ExporterLine) -> String {
        format!("echo '{PREFIX}{}'", serde_json::to_string(l).unwrap())
    }

    #[test]
    fn one_exporter_serves_case_after_case() {
        let hex = "ab".repeat(64);
        // Counts its allocations in a file: a second process would start from 1 again.
        let count = std::env::temp_dir().join(format!("clhip-ipc-count-{}", std::process::id()));
        let _ = std::fs::remove_file(&count);
        let exe = fake_exporter(
            "ok",
            &format!(
                "echo $$ >> {}; {}",
                count.display(),
                line(&ExporterLine::Handle { hex: hex.clone() })
            ),
            &line(&ExporterLine::Freed),
        );
        for _ in 0..3 {
            let (exporter, handle) = Exporter::spawn(exe.clone(), &[], 4).unwrap();
            assert_eq!(handle, [0xab; 64]);
            exporter.finish().unwrap();
        }
        let pids = std::fs::read_to_string(&count).unwrap();
        let pids: Vec<&str> = pids.lines().collect();
        assert_eq!(pids.len(), 3, "{pids:?}");
        assert!(pids.iter().all(|p| *p == pids[0]), "one process: {pids:?}");
    }

    #[test]
    fn a_dead_exporter_is_a_crash_of_that_process() {
        let exe = fake_exporter("segv", "echo dying >&2; kill -SEGV $$", "");
        match Exporter::spawn(exe, &[], 4) {
            Err(CaseError::Crashed {
                process,
                signal_name,
                stderr_tail,
                ..
            }) => {
                assert!(process.contains("exporter"), "{process}");
                assert_eq!(signal_name, "SIGSEGV");
                assert!(stderr_tail.contains("dying"), "{stderr_tail}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_exporter_crash_while_freeing_is_reported_by_finish() {
        let exe = fake_exporter(
            "segv-late",
            &line(&ExporterLine::Handle {
                hex: "00".repeat(64),
            }),
            "kill -SEGV $$",
        );
        let (exporter, _) = Exporter::spawn(exe, &[], 4).unwrap();
        assert!(matches!(
            exporter.finish(),
            Err(CaseError::Crashed { signal: 11, .. })
        ));
    }

    #[test]
    fn a_refusal_in_the_exporter_is_the_case_outcome() {
        let exe = fake_exporter(
            "refuses",
            &format!(
                "{}; exit 0",
                line(&ExporterLine::Stopped {
                    outcome: Outcome::unsupported("no HIP device"),
                })
            ),
            "",
        );
        match Exporter::spawn(exe, &[], 4) {
            Err(CaseError::Unsupported { reason, .. }) => {
                assert!(reason.contains("no HIP device"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}
