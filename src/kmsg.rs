//! The kernel's log around a case: amdgpu / KFD VM faults with their addresses, NVRM Xid
//! lines. Read from /dev/kmsg, which gives each reader only records appended after it opened
//! (once it seeks to the end), so lines are attributed to the case they appeared during, and
//! to its worker by the process they name.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

/// What to say when the log cannot be read (no permission, no /dev/kmsg in a container).
pub const UNREADABLE: &str = "kernel log unreadable";

/// Most lines kept per case: a storm of faults says what it says in its first lines.
const MAX_LINES: usize = 50;

/// Most records read per case, before the lines of other processes are set aside.
const MAX_RECORDS: usize = 5000;

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
                    if lines.len() == MAX_RECORDS {
                        lines.push(format!("(more lines; first {MAX_RECORDS} read)"));
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

/// The lines that belong to the process group `pgid` (a worker and the helpers it started):
/// with several workers at once, one case's window also holds the lines of the others' faults
/// and crashes. A line that names a process (NVRM Xid `pid=`, amdgpu's `pid N`, a trap's
/// `comm[pid]:`) is kept when that process is the leader or still in its group; a line that
/// names none goes with the nearest line before it that does (a trap's `Code:` line follows
/// its trap), and is kept where none does.
pub fn of_group(lines: Vec<String>, pgid: u32) -> Vec<String> {
    of_group_by(lines, pgid, |pid| {
        nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid as i32)))
            .is_ok_and(|g| g.as_raw() as u32 == pgid)
    })
}

fn of_group_by(lines: Vec<String>, pgid: u32, in_group: impl Fn(u32) -> bool) -> Vec<String> {
    let mut keep = true;
    let mut kept: Vec<String> = lines
        .into_iter()
        .filter(|line| {
            if line == UNREADABLE || line.starts_with("(more lines") {
                return true;
            }
            if let Some(pid) = named_pid(line) {
                keep = pid == pgid || in_group(pid);
            }
            keep
        })
        .collect();
    if kept.len() > MAX_LINES {
        kept.truncate(MAX_LINES);
        kept.push(format!("(more lines; first {MAX_LINES} kept)"));
    }
    kept
}

/// The process a kernel log line names, if any.
fn named_pid(line: &str) -> Option<u32> {
    let digits = |s: &str| -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    if let Some(at) = line.find("pid=") {
        return digits(&line[at + 4..]);
    }
    if let Some(at) = line.find(" pid ") {
        return digits(&line[at + 5..]);
    }
    // A trap: `comm[pid]: segfault at ...` (comm has no `[`).
    let (head, _) = line.split_once("]: ")?;
    let (_, pid) = head.split_once('[')?;
    digits(pid).filter(|_| pid.bytes().all(|b| b.is_ascii_digit()))
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
    fn a_case_keeps_its_own_group_s_lines_and_not_another_worker_s() {
        let lines: Vec<String> = [
            "NVRM: Xid (PCI:0000:00:06): 31, pid=1503, name=clhip, channel 0x0000000f, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_10 faulted @ 0x7f01_f4a00000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
            "NVRM: Xid (PCI:0000:00:07): 31, pid=1512, name=clhip, channel 0x00000027",
            "Cannot map memory with base addr 0x7f41ac800000 and size of 0x1 pages",
            "clhip[2040]: segfault at 7f41ac800200 ip 00007f45d9006b0d sp 00007fffc14eea78 error 4 in libnvidia-opencl.so.580.159.04[23db0d,7f45d8f24000+fa4000]",
            "Code: 0f 48 83 c0 10 48 01 c1",
            "clhip[1512]: segfault at 10 ip 0 sp 0 error 4",
            "Code: 48 8b 01",
            "amdgpu 0000:c3:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:8 pasid:32769, for process clhip pid 1777 thread clhip pid 1777)",
            "amdgpu 0000:c3:00.0: amdgpu:   in page starting at address 0x00007f0000001000 from client 0x1b (UTCL2)",
        ]
        .map(String::from)
        .to_vec();
        // 1512 leads the group; 1777 is its IPC exporter; 1503 and 2040 are other workers.
        let kept = of_group_by(lines.clone(), 1512, |pid| pid == 1777);
        assert_eq!(kept, [1, 2, 5, 6, 7, 8].map(|i| lines[i].clone()));
        assert_eq!(named_pid(&lines[3]), Some(2040));
        assert_eq!(named_pid("[12345.678] something: [x]: y"), None);
        assert_eq!(
            of_group_by(vec![UNREADABLE.into()], 1, |_| false),
            [UNREADABLE]
        );
    }

    #[test]
    fn an_unreadable_log_says_so() {
        let mut log = KernelLog { file: None };
        assert_eq!(log.since_start(), [UNREADABLE]);
    }
}
