//! Words for how a child process ended, shared by the runner (its workers) and the IPC path
//! (its exporter process). Nothing here knows about cases or runtimes.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;

/// `SIGSEGV`, or the number for a signal nix does not know.
pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// How a child process ended, in words: `killed by SIGKILL`, `exit status 3`.
pub fn describe(status: ExitStatus) -> String {
    match (status.signal(), status.code()) {
        (Some(sig), _) => format!("killed by {}", signal_name(sig)),
        (None, Some(code)) => format!("exit status {code}"),
        (None, None) => format!("{status}"),
    }
}
