//! Child processes as the runner (its workers), the probe (its vendor children) and the IPC
//! path (its exporter process) see them: how one ended, in words, and its output read line by
//! line. Nothing here knows about cases or runtimes.

use std::io::{BufRead, BufReader, Read};
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
