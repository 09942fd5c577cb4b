//! The kernel's log around a case: amdgpu / KFD VM faults with their addresses, NVRM Xid
//! lines. Read from /dev/kmsg, which gives each reader only records appended after it opened
//! (once it seeks to the end), so lines are attributed to the case they appeared during.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

/// What to say when the log cannot be read (no permission, no /dev/kmsg in a container).
pub const UNREADABLE: &str = "kernel log unreadable";

/// Most lines kept per case: a storm of faults says what it says in its first lines.
const MAX_LINES: usize = 50;

/// A reader positioned at the log's end when the case started.
pub struct KernelLog {
    file: Option<File>,
}

impl KernelLog {
    /// Opens /dev/kmsg at its end; an unreadable log is remembered, not an error.
    pub fn start() -> Self {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open("/dev/kmsg")
            .and_then(|mut f| f.seek(SeekFrom::End(0)).map(|_| f))
            .ok();
        KernelLog { file }
    }

    /// The records appended since [`KernelLog::start`], as `message` lines (each record's
    /// `prio,seq,time,flags;` prefix and continuation lines dropped), or [`UNREADABLE`].
    pub fn since_start(&mut self) -> Vec<String> {
        let Some(f) = &mut self.file else {
            return vec![UNREADABLE.to_string()];
        };
        let mut lines = Vec::new();
        // One read returns one record; EAGAIN means no more, EPIPE that records were
        // overwritten (the reader moves on to the next one).
        let mut buf = vec![0u8; 8192];
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let record = String::from_utf8_lossy(&buf[..n]);
                    if let Some(line) = message(&record) {
                        lines.push(line);
                    }
                    if lines.len() == MAX_LINES {
                        lines.push(format!("(more lines; first {MAX_LINES} kept)"));
                        break;
                    }
                }
                Err(e) if e.raw_os_error() == Some(nix::libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        lines
    }
}

/// The message of one /dev/kmsg record: `6,1234,5678901,-;amdgpu: [gfxhub] page fault ...`.
fn message(record: &str) -> Option<String> {
    let first = record.lines().next()?;
    let (_, msg) = first.split_once(';')?;
    Some(msg.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_lose_their_prefix_and_continuations() {
        assert_eq!(
            message(
                "3,812,1234567,-;amdgpu 0000:c3:00.0: [gfxhub0] retry page fault\n SUBSYSTEM=pci\n"
            )
            .as_deref(),
            Some("amdgpu 0000:c3:00.0: [gfxhub0] retry page fault")
        );
        assert_eq!(message("garbage"), None);
    }

    #[test]
    fn an_unreadable_log_says_so() {
        let mut log = KernelLog { file: None };
        assert_eq!(log.since_start(), [UNREADABLE]);
    }
}
