//! The IPC path's second process. hipIpcOpenMemHandle / cuIpcOpenMemHandle refuse a handle
//! from their own process, so the allocation under test is made by another clhip process (the
//! exporter: `clhip __ipc-export`), which keeps it alive until the worker closes its stdin.
//!
//! Protocol: the exporter writes one line to stdout, after [`PREFIX`]: an [`ExporterLine`],
//! either the handle (128 hex digits) or the outcome that stopped it (a refusal, a fault). The
//! worker answers nothing; EOF on the exporter's stdin means "done, free it and exit".

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

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
    Stopped { outcome: Outcome },
}

/// The exporter process, seen from the worker. Dropping it closes the exporter's stdin and
/// waits for it; [`Exporter::finish`] does the same and says how it ended.
#[derive(Debug)]
pub struct Exporter {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
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

impl Exporter {
    /// Start `exe __ipc-export <reopen_args> --len <len>` and read its handle. A refusal in
    /// the exporter (no device, hipMalloc refused) comes back as the case's own outcome; an
    /// exporter that dies is a crash of that process.
    pub fn spawn(
        exe: PathBuf,
        reopen_args: &[String],
        len: usize,
    ) -> Result<(Exporter, IpcHandle), CaseError> {
        let mut child = Command::new(&exe)
            .arg("__ipc-export")
            .args(reopen_args)
            .arg("--len")
            .arg(len.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                CaseError::Broken(exporter_error(format!("starting {}: {e}", exe.display())))
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let mut exporter = Exporter {
            child: Some(child),
            stdin,
        };
        let line = match stdout {
            Some(out) => read_line_within(out, EXPORTER_START),
            None => None,
        };
        let parsed = line
            .as_deref()
            .and_then(|l| l.strip_prefix(PREFIX))
            .map(serde_json::from_str::<ExporterLine>);
        match parsed {
            Some(Ok(ExporterLine::Handle { hex })) => match decode(&hex) {
                Ok(h) => Ok((exporter, h)),
                Err(e) => Err(CaseError::Broken(exporter_error(format!(
                    "unreadable handle: {e}"
                )))),
            },
            Some(Ok(ExporterLine::Stopped { outcome })) => {
                exporter.finish_quietly();
                Err(from_exporter_outcome(outcome))
            }
            Some(Err(e)) => Err(CaseError::Broken(exporter_error(format!(
                "unreadable protocol line: {e}"
            )))),
            None => Err(exporter.died()),
        }
    }

    /// Close the exporter's stdin (it frees the allocation and exits) and wait for it.
    pub fn finish(mut self) -> Result<(), CaseError> {
        self.stdin = None;
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let status = child
            .wait()
            .map_err(|e| CaseError::Broken(exporter_error(format!("waiting: {e}"))))?;
        if status.success() {
            return Ok(());
        }
        Err(crashed(status, stderr_tail(&mut child)))
    }

    fn finish_quietly(&mut self) {
        self.stdin = None;
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    /// The exporter gave no line: it died, or hung past [`EXPORTER_START`].
    fn died(&mut self) -> CaseError {
        self.stdin = None;
        let Some(mut child) = self.child.take() else {
            return CaseError::Broken(exporter_error("gone".into()));
        };
        if let Ok(None) = child.try_wait() {
            let _ = child.kill();
        }
        match child.wait() {
            Ok(status) if status.signal().is_some() || !status.success() => {
                crashed(status, stderr_tail(&mut child))
            }
            Ok(_) => CaseError::Broken(exporter_error(format!(
                "exited without a handle: {}",
                stderr_tail(&mut child)
            ))),
            Err(e) => CaseError::Broken(exporter_error(format!("waiting: {e}"))),
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.finish_quietly();
    }
}

fn crashed(status: std::process::ExitStatus, stderr_tail: String) -> CaseError {
    let (signal, signal_name) = match status.signal() {
        Some(sig) => (sig, crate::process::signal_name(sig)),
        None => (0, crate::process::describe(status)),
    };
    CaseError::Crashed {
        process: "IPC exporter process".into(),
        signal,
        signal_name,
        stderr_tail,
    }
}

fn stderr_tail(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// One line from `out`, or `None` at EOF or after `limit` (read on a thread: a pipe read has
/// no timeout, and a hung exporter must not hang the worker past the runner's own timeout).
fn read_line_within(out: impl Read + Send + 'static, limit: Duration) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(out);
        let start = Instant::now();
        let mut line = String::new();
        // Skip driver chatter until the protocol line.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(None);
                    return;
                }
                Ok(_) if line.starts_with(PREFIX) => {
                    let _ = tx.send(Some(line.trim_end().to_string()));
                    // Keep draining so the exporter never blocks on a full pipe.
                    let _ = std::io::copy(&mut reader, &mut std::io::sink());
                    return;
                }
                Ok(_) if start.elapsed() > limit => {
                    let _ = tx.send(None);
                    return;
                }
                Ok(_) => {}
            }
        }
    });
    rx.recv_timeout(limit).ok().flatten()
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

/// The exporter's side (`clhip __ipc-export`): open the device, allocate `len` elements, print
/// the handle, hold the allocation until stdin closes.
pub fn serve(
    api: Api,
    ordinal: usize,
    rocm_path: Option<PathBuf>,
    len: usize,
) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    let say = |out: &mut dyn Write, line: &ExporterLine| -> anyhow::Result<()> {
        writeln!(out, "{PREFIX}{}", serde_json::to_string(line)?)?;
        out.flush()?;
        Ok(())
    };
    let mut peer = match crate::peer::open_peer(api, ordinal, rocm_path.as_deref()) {
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
    let exported = dev
        .alloc(crate::runtimes::device::AllocKind::Device, len)
        .and_then(|a| match dev.ipc_handle(&a) {
            Ok(h) => Ok((a, h)),
            Err(e) => {
                dev.free(a);
                Err(e)
            }
        });
    let alloc = match exported {
        Ok((alloc, handle)) => {
            say(
                &mut stdout,
                &ExporterLine::Handle {
                    hex: encode(&handle),
                },
            )?;
            alloc
        }
        Err(e) => {
            let outcome = e.into_outcome();
            return say(&mut stdout, &ExporterLine::Stopped { outcome });
        }
    };
    // Hold the allocation until the worker is done with it.
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    dev.free(alloc);
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

    /// An executable script standing in for `clhip __ipc-export`.
    fn fake_exporter(name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("clhip-ipc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn the_handle_arrives_and_finish_waits_for_a_clean_exit() {
        let hex = "ab".repeat(64);
        let line = serde_json::to_string(&ExporterLine::Handle { hex: hex.clone() }).unwrap();
        let exe = fake_exporter(
            "ok",
            &format!("echo driver chatter; echo '{PREFIX}{line}'; cat >/dev/null"),
        );
        let (exporter, handle) = Exporter::spawn(exe, &[], 4).unwrap();
        assert_eq!(handle, [0xab; 64]);
        exporter.finish().unwrap();
    }

    #[test]
    fn a_dead_exporter_is_a_crash_of_that_process() {
        let exe = fake_exporter("segv", "echo dying >&2; kill -SEGV $$");
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
    fn an_exporter_crash_after_the_handle_is_reported_by_finish() {
        let line = serde_json::to_string(&ExporterLine::Handle {
            hex: "00".repeat(64),
        })
        .unwrap();
        let exe = fake_exporter(
            "segv-late",
            &format!("echo '{PREFIX}{line}'; cat >/dev/null; kill -SEGV $$"),
        );
        let (exporter, _) = Exporter::spawn(exe, &[], 4).unwrap();
        assert!(matches!(
            exporter.finish(),
            Err(CaseError::Crashed { signal: 11, .. })
        ));
    }
}
