//! Child processes as the runner (its workers), the probe (its vendor children) and the IPC
//! path (its exporter process) see them: how one ended, in words, and its output read line by
//! line. Nothing here knows about cases or runtimes.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;

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
