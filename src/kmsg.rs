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

/// A file read in place of /dev/kmsg, in its record format (`prio,seq,time,flags;message`, one
/// per line): how the runner's tests plant a kernel's fault line. Not for users.
pub const KERNEL_LOG_ENV: &str = "CLHIP_KERNEL_LOG";

/// A reader positioned at the log's end when it was opened, which keeps what it has read: the
/// runner looks at the log while a case runs, and attaches it whole at the end.
pub struct KernelLog {
    file: Option<File>,
    lines: Vec<String>,
    /// Each line's syslog level (0 emergency .. 7 debug), where its record gave one.
    levels: Vec<Option<u8>>,
    /// A record not yet ended by its newline (a file appended to mid-line).
    partial: String,
}

impl KernelLog {
    /// Opens /dev/kmsg (or [`KERNEL_LOG_ENV`]'s file) at its end; an unreadable log is
    /// remembered, not an error.
    pub fn start() -> Self {
        let path = std::env::var_os(KERNEL_LOG_ENV).unwrap_or_else(|| "/dev/kmsg".into());
        Self::start_at(std::path::Path::new(&path))
    }

    fn start_at(path: &std::path::Path) -> Self {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)
            .and_then(|mut f| f.seek(SeekFrom::End(0)).map(|_| f))
            .ok();
        KernelLog {
            file,
            lines: Vec::new(),
            levels: Vec::new(),
            partial: String::new(),
        }
    }

    /// Reads what was appended since the last look; returns the new `message` lines (each
    /// record's `prio,seq,time,flags;` prefix and continuation lines dropped).
    pub fn poll(&mut self) -> &[String] {
        let before = self.lines.len();
        let Some(f) = &mut self.file else {
            return &[];
        };
        // /dev/kmsg returns one record per read, a file as much as there is; EAGAIN (or 0 from
        // a file) means no more, EPIPE that records were overwritten (the reader moves on).
        let mut buf = vec![0u8; 8192];
        while self.lines.len() < MAX_RECORDS {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.partial.push_str(&String::from_utf8_lossy(&buf[..n]));
                    while let Some(end) = self.partial.find('\n') {
                        let record: String = self.partial.drain(..=end).collect();
                        if let Some(line) = message(&record) {
                            self.lines.push(line);
                            self.levels.push(level(&record));
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(nix::libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        if self.lines.len() == MAX_RECORDS {
            self.lines
                .push(format!("(more lines; first {MAX_RECORDS} read)"));
            self.levels.push(None);
        }
        &self.lines[before..]
    }

    /// What has been read since the start or the last [`KernelLog::clear`].
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Forgets what has been read: what comes next is the next case's.
    pub fn clear(&mut self) {
        self.poll();
        self.lines.clear();
        self.levels.clear();
    }

    /// The GPU driver's lines read since the start or the last clear at warning level or
    /// worse (igt_runner's dmesg-warn threshold): what makes a passing case `warn`.
    pub fn driver_warnings(&mut self) -> Vec<String> {
        self.poll();
        self.lines
            .iter()
            .zip(&self.levels)
            .filter(|(line, level)| {
                level.is_some_and(|l| l <= WARNING)
                    && is_gpu_driver_line(line)
                    && !is_report_header(line)
            })
            .map(|(line, _)| line.clone())
            .collect()
    }

    /// Everything appended since [`KernelLog::start`] or the last [`KernelLog::clear`], or
    /// [`UNREADABLE`].
    pub fn since_start(&mut self) -> Vec<String> {
        if self.file.is_none() {
            return vec![UNREADABLE.to_string()];
        }
        self.poll();
        self.lines.clone()
    }
}

/// A GPU memory fault as the kernel driver logs it, attributed to a process.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelFault {
    /// The process the line names.
    pub pid: u32,
    /// NVIDIA's Xid number; 0 for amdgpu, which numbers nothing.
    pub code: i64,
    pub name: String,
    pub line: String,
}

/// The GPU memory faults among `lines` that name their process:
/// - NVRM Xid 31 (an MMU fault: an access to an unmapped or protected address) and Xid 13
///   (a graphics engine exception, which an out-of-range address in a kernel raises), whose
///   line names its process (`pid=`);
/// - amdgpu's `[gfxhub] page fault` / `retry page fault` and older kernels' `VM fault`. Up to
///   Linux 6.9 the fault line itself ends `for process clhip pid N thread ...`; later kernels
///   print the process on the next line (` in process clhip pid N ...`, or ` Process ...`),
///   so a fault line that names none takes the process of the amdgpu line right after it.
pub fn memory_faults(lines: &[String]) -> Vec<KernelFault> {
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let (code, name) = fault_kind(line)?;
            let pid = line_process(lines, i)?;
            Some(KernelFault {
                pid,
                code,
                name: name.into(),
                line: line.clone(),
            })
        })
        .collect()
}

/// The fault `line` reports, if it is one: NVIDIA's Xid number (0 for amdgpu) and a name.
fn fault_kind(line: &str) -> Option<(i64, &'static str)> {
    if let Some(at) = line.find("NVRM: Xid") {
        let after = line[at..].split_once("): ")?.1;
        let xid: i64 = after.split(',').next()?.trim().parse().ok()?;
        return match xid {
            31 => Some((31, "NVRM Xid 31 (GPU MMU fault)")),
            13 => Some((13, "NVRM Xid 13 (graphics engine exception)")),
            _ => None,
        };
    }
    is_amdgpu_fault(line).then_some((0, "amdgpu GPU page fault"))
}

fn is_amdgpu_fault(line: &str) -> bool {
    line.contains("amdgpu") && (line.contains("page fault") || line.contains("VM fault"))
}

/// The process line `i` is about: the one it names; for an amdgpu fault line that names none,
/// the one the next amdgpu line names (within two lines).
fn line_process(lines: &[String], i: usize) -> Option<u32> {
    named_pid(&lines[i]).or_else(|| {
        if !is_amdgpu_fault(&lines[i]) {
            return None;
        }
        lines[i + 1..]
            .iter()
            .take(2)
            .filter(|l| l.contains("amdgpu"))
            .find_map(|l| named_pid(l))
    })
}

/// The lines that belong to the process group `pgid` (a worker and the helpers it started):
/// with several workers at once, one case's window also holds the lines of the others' faults
/// and crashes. A line that names a process (NVRM Xid `pid=`, amdgpu's `pid N`, a trap's
/// `comm[pid]:`) is kept when that process is the leader or still in its group; a line that
/// names none goes with the nearest line before it that does (a trap's `Code:` line follows
/// its trap), and is kept where none does.
pub fn of_group(lines: Vec<String>, pgid: u32) -> Vec<String> {
    of_group_by(lines, pgid, |pid| in_group(pid, pgid))
}

/// Whether process `pid` is `pgid`'s leader or still in its group. Only a process: the drivers
/// name processes (NVRM's `pid=` is its channel's owner), a thread's id is taken from the same
/// numbers, and once they wrap (`pid_max` is 32768 on the H200 hosts measured) a worker's
/// thread can hold the number of a process that has died: a thread's match is a coincidence.
pub fn in_group(pid: u32, pgid: u32) -> bool {
    pid == pgid
        || (is_process(pid)
            && nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid as i32)))
                .is_ok_and(|g| g.as_raw() as u32 == pgid))
}

/// Whether `pid` is a live process (its thread group's leader), not another thread.
fn is_process(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .is_some_and(|tgid| tgid.trim() == pid.to_string())
    })
}

fn of_group_by(lines: Vec<String>, pgid: u32, in_group: impl Fn(u32) -> bool) -> Vec<String> {
    // Each line's process: its own, an amdgpu fault line's (named on the line after it), or
    // the last one named before it.
    let mut owner = None;
    let owners: Vec<Option<u32>> = (0..lines.len())
        .map(|i| {
            if let Some(pid) = line_process(&lines, i) {
                owner = Some(pid);
            }
            owner
        })
        .collect();
    let mut kept: Vec<String> = lines
        .into_iter()
        .zip(owners)
        .filter(|(line, owner)| {
            line == UNREADABLE
                || line.starts_with("(more lines")
                || owner.is_none_or(|pid| pid == pgid || in_group(pid))
        })
        .map(|(line, _)| line)
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

/// Syslog's warning level: this and the more severe ones (error, critical, ...) count.
const WARNING: u8 = 4;

/// NVIDIA's driver heads each report it logs (an Xid, a fault of another process's context)
/// with lines that say which GPU, at error level, naming no process: they say nothing
/// themselves, and a case running beside another's fault would otherwise `warn` for it (seen
/// on an H200: "NVRM: GPU at PCI:0000:00:06: GPU-d9e1d49b-..." during passing copy cases). The
/// report's own line (the Xid, which names its process) is what counts.
fn is_report_header(line: &str) -> bool {
    ["NVRM: GPU at PCI:", "NVRM: GPU Board Serial Number:"]
        .iter()
        .any(|h| line.contains(h))
}

/// A line of a GPU kernel driver: one that begins with the driver's name, as amdgpu and its
/// KFD, NVIDIA's (NVRM, nvidia-modeset, nvidia-uvm), nouveau, i915/xe and DRM's core write
/// theirs. Only at the start: a trap's continuation names the library a process died in
/// (` in libnvidia-opencl.so.580.159.04[23db98,...] likely on CPU 6`, at the default warning
/// level), which made a passing case beside another worker's crash `warn` on an H200.
pub fn is_gpu_driver_line(line: &str) -> bool {
    [
        "amdgpu", "kfd", "NVRM", "nvidia", "nouveau", "i915", "xe ", "[drm", "drm:",
    ]
    .iter()
    .any(|m| line.starts_with(m))
}

/// The syslog level of a /dev/kmsg record (`prio` is facility * 8 + level).
fn level(record: &str) -> Option<u8> {
    let prio: u32 = record.split(',').next()?.trim().parse().ok()?;
    u8::try_from(prio & 7).ok()
}

/// Kernel log evidence that a GPU is gone: what said so, and the PCI device it names, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuLoss {
    /// `domain:bus:device`, lower case (NVRM names no function).
    pub pci: Option<String>,
    pub what: &'static str,
    pub line: String,
}

/// Whether `line` says a GPU is gone or was reset under its users:
/// - NVRM Xid 79 (fallen off the bus), 48 (double-bit ECC error), 74 (NVLink error),
///   119 (GSP RPC timeout);
/// - amdgpu's GPU reset, a device lost, a ring (engine) timeout.
pub fn gpu_loss(line: &str) -> Option<GpuLoss> {
    let what = if let Some(at) = line.find("NVRM: Xid") {
        let after = line[at..].split_once("): ")?.1;
        let xid: u32 = after.split(',').next()?.trim().parse().ok()?;
        match xid {
            79 => "NVRM Xid 79 (GPU has fallen off the bus)",
            48 => "NVRM Xid 48 (double-bit ECC error)",
            74 => "NVRM Xid 74 (NVLink error)",
            119 => "NVRM Xid 119 (GSP RPC timeout)",
            _ => return None,
        }
    } else if line.contains("amdgpu") {
        if line.contains("GPU reset") {
            "amdgpu GPU reset"
        } else if line.contains("device lost") || line.contains("device is lost") {
            "amdgpu device lost"
        } else if line.contains("ring ") && line.contains("timeout") {
            "amdgpu ring timeout"
        } else {
            return None;
        }
    } else {
        return None;
    };
    Some(GpuLoss {
        pci: pci_of(line),
        what,
        line: line.to_string(),
    })
}

/// The PCI device a kernel line names, as `domain:bus:device` in lower case: NVRM's
/// `Xid (PCI:0000:3b:00)`, amdgpu's `amdgpu 0000:c3:00.0:`.
pub fn pci_of(line: &str) -> Option<String> {
    if let Some(at) = line.find("(PCI:") {
        let rest = &line[at + 5..];
        return Some(pci_device(&rest[..rest.find(')')?]));
    }
    line.split(|c: char| c.is_whitespace() || c == '[' || c == ']')
        .map(|w| w.trim_end_matches(':'))
        .find(|w| {
            let b = w.as_bytes();
            b.len() == 12
                && b[4] == b':'
                && b[7] == b':'
                && b[10] == b'.'
                && w.chars()
                    .enumerate()
                    .all(|(i, c)| [4, 7, 10].contains(&i) || c.is_ascii_hexdigit())
        })
        .map(pci_device)
}

/// `0000:3B:00.0` or `0000:3b:00` as `0000:3b:00`: the form both drivers' lines can give.
pub fn pci_device(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    match id.rsplit_once('.') {
        Some((device, _function)) => device.to_string(),
        None => id,
    }
}

/// The message of one /dev/kmsg record: `6,1234,5678901,-;amdgpu: [gfxhub] page fault ...`.
/// A continuation line (` SUBSYSTEM=pci`) has no prefix, and no message of its own.
fn message(record: &str) -> Option<String> {
    let first = record.lines().next()?;
    if first.starts_with(' ') {
        return None;
    }
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
    fn a_lost_gpu_is_read_from_nvidia_and_amdgpu_lines_with_its_pci_device() {
        let loss = |l: &str| gpu_loss(l).map(|g| (g.what, g.pci));
        assert_eq!(
            loss(
                "NVRM: Xid (PCI:0000:3B:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
            ),
            Some((
                "NVRM Xid 79 (GPU has fallen off the bus)",
                Some("0000:3b:00".into())
            ))
        );
        assert_eq!(
            loss("NVRM: Xid (PCI:0000:06:00): 119, pid=991, name=clhip, Timeout after 6s of waiting for RPC response from GPU0 GSP!").map(|l| l.0),
            Some("NVRM Xid 119 (GSP RPC timeout)")
        );
        assert_eq!(
            loss("amdgpu 0000:c3:00.0: amdgpu: GPU reset begin!"),
            Some(("amdgpu GPU reset", Some("0000:c3:00".into())))
        );
        assert_eq!(
            loss(
                "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=7, emitted seq=9"
            ),
            Some(("amdgpu ring timeout", None))
        );
        // Faults of one process, and other Xids, leave the GPU in service.
        assert_eq!(
            loss("NVRM: Xid (PCI:0000:00:06): 31, pid=1507, name=clhip, MMU Fault"),
            None
        );
        assert_eq!(
            loss("amdgpu 0000:c3:00.0: amdgpu: [gfxhub0] retry page fault"),
            None
        );
        assert_eq!(pci_device("0000:C3:00.0"), "0000:c3:00");
    }

    #[test]
    fn only_gpu_driver_lines_at_warning_or_worse_are_warnings() {
        use std::io::Write as _;
        let path = std::env::temp_dir().join(format!("clhip-kmsg-warn-{}", std::process::id()));
        let mut f = std::fs::File::create(&path).expect("log file");
        let mut log = KernelLog::start_at(&path);
        write!(
            f,
            "4,1,1,-;amdgpu 0000:c3:00.0: amdgpu: a warning\n6,2,2,-;amdgpu: an info line\n3,3,3,-;EXT4-fs error (device sda1): not the GPU's\n4,7,7,c; in libnvidia-opencl.so.580.159.04[23db98,7f0344f24000+fa4000] likely on CPU 6 (core 6, socket 0)\n3,4,4,-;NVRM: an error\n3,5,5,-;NVRM: GPU at PCI:0000:00:06: GPU-d9e1d49b-ff96-386e-99b3-8bb1eff43fd6\n3,6,6,-;NVRM: GPU Board Serial Number: 1652123456789\n"
        )
        .expect("write");
        assert_eq!(
            log.driver_warnings(),
            ["amdgpu 0000:c3:00.0: amdgpu: a warning", "NVRM: an error"]
        );
        log.clear();
        assert!(log.driver_warnings().is_empty());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_thread_of_the_group_is_not_a_process_of_it() {
        let me = std::process::id();
        let group = nix::unistd::getpgid(None).expect("getpgid").as_raw() as u32;
        assert!(in_group(me, group));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32)
                .expect("send");
            let _ = done_rx.recv();
        });
        let tid = rx.recv().expect("tid");
        assert_ne!(tid, me);
        assert!(
            !in_group(tid, group),
            "a thread's id named in a kernel line is not this group's process"
        );
        drop(done_tx);
        t.join().expect("thread");
    }

    #[test]
    fn an_unreadable_log_says_so() {
        let mut log = KernelLog {
            file: None,
            lines: Vec::new(),
            levels: Vec::new(),
            partial: String::new(),
        };
        assert!(log.poll().is_empty());
        assert_eq!(log.since_start(), [UNREADABLE]);
    }

    #[test]
    fn a_log_file_is_read_from_its_end_record_by_record_as_it_grows() {
        use std::io::Write as _;
        let path = std::env::temp_dir().join(format!("clhip-kmsg-test-{}", std::process::id()));
        let mut f = std::fs::File::create(&path).expect("log file");
        writeln!(f, "6,1,1,-;before the case").expect("write");
        let mut log = KernelLog::start_at(&path);
        assert!(
            log.poll().is_empty(),
            "what was there before is not the case's"
        );
        write!(f, "3,2,2,-;NVRM: Xid (PCI:0000:00:06): 31, pid=7, name=clhip, MMU Fault\n SUBSYSTEM=pci\n4,3,3,-;half")
            .expect("write");
        assert_eq!(
            log.poll(),
            ["NVRM: Xid (PCI:0000:00:06): 31, pid=7, name=clhip, MMU Fault"]
        );
        writeln!(f, " a record").expect("write");
        assert_eq!(log.poll(), ["half a record"]);
        assert_eq!(log.since_start().len(), 2);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn memory_faults_are_read_from_nvidia_and_amdgpu_lines_with_their_process() {
        let faults = |lines: &[&str]| -> Vec<(u32, i64)> {
            let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            memory_faults(&lines)
                .iter()
                .map(|f| (f.pid, f.code))
                .collect()
        };
        let xid31 = "NVRM: Xid (PCI:0000:00:06): 31, pid=1507, name=clhip, channel 0x00000012, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 faulted @ 0x7f7c_4ea00000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE";
        assert_eq!(faults(&[xid31]), [(1507, 31)]);
        let xid13 = "NVRM: Xid (PCI:0000:00:06): 13, pid=88, name=clhip, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address";
        assert_eq!(faults(&[xid13]), [(88, 13)]);
        // amdgpu up to Linux 6.9: the process on the fault line.
        let amd = "amdgpu 0000:c3:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:8 pasid:32769, for process clhip pid 1777 thread clhip pid 1777)";
        assert_eq!(faults(&[amd]), [(1777, 0)]);
        // Later kernels: the process on the next line, then the address.
        let new_amd = [
            "amdgpu 0000:c3:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:9 pasid:32777)",
            "amdgpu 0000:c3:00.0: amdgpu:  in process clhip pid 1888 thread clhip pid 1890)",
            "amdgpu 0000:c3:00.0: amdgpu:   in page starting at address 0x00007f0000001000 from client 10",
        ];
        assert_eq!(faults(&new_amd), [(1888, 0)]);
        // Not memory faults: a process killed with work in flight (Xid 45), an Xid line with no
        // process, a CPU segfault; an amdgpu fault whose process never follows.
        assert!(
            faults(&["NVRM: Xid (PCI:0000:00:06): 45, pid=1507, name=clhip, Ch 00000010"])
                .is_empty()
        );
        assert!(faults(&["NVRM: Xid (PCI:0000:00:06): 31, Ch 00000010, MMU Fault"]).is_empty());
        assert!(faults(&["clhip[2040]: segfault at 7f41ac800200 ip 0 sp 0 error 4"]).is_empty());
        assert!(faults(&[new_amd[0]]).is_empty());
    }

    #[test]
    fn a_newer_kernel_s_amdgpu_fault_goes_with_the_process_named_after_it() {
        let lines: Vec<String> = [
            "clhip[1512]: segfault at 10 ip 0 sp 0 error 4",
            "amdgpu 0000:c3:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:9 pasid:32777)",
            "amdgpu 0000:c3:00.0: amdgpu:  in process clhip pid 1888 thread clhip pid 1890)",
            "amdgpu 0000:c3:00.0: amdgpu:   in page starting at address 0x00007f0000001000 from client 10",
        ]
        .map(String::from)
        .to_vec();
        // Worker 1888's fault is its own, not the segfaulting 1512's before it.
        assert_eq!(of_group_by(lines.clone(), 1888, |_| false), lines[1..]);
        assert_eq!(of_group_by(lines.clone(), 1512, |_| false), lines[..1]);
    }
}
