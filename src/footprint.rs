//! What memory a case's crossing takes, as its worker measures it: resident host memory
//! (Linux `/proc/self/status`) and the device memory in use on the peer's GPU, and the rule by
//! which `diff` calls growth between two runs a regression. A leaf module: the worker opens and
//! closes a case's record, the ops mark the crossing and the device samples, and the results
//! and reports read the record.
//!
//! A worker runs many cases, and a process's peak resident memory (VmHWM, getrusage's
//! ru_maxrss) only ever grows: read after a case it is the largest of every case so far. So
//! the worker resets the peak where the case's crossing starts (writing `5` to
//! `/proc/self/clear_refs` sets VmHWM to the resident memory of that moment, Linux 4.0 and
//! later) and reads it where the crossing ends. The window is the crossing alone: from the
//! first shared allocation (runtimes open, inputs made) to the release of the last. What came
//! before (libraries, contexts, compiled programs, the data cache, what earlier cases left)
//! is in `host_before`, not in the case's growth; the CPU reference and the checks after it
//! are the harness's memory, not the driver's.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// One MiB.
const MIB: u64 = 1 << 20;

/// The case's memory, in bytes. Absent from a case that never reached its crossing (refused
/// at set-up, crashed, timed out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Footprint {
    /// The worker's resident memory where the crossing began (VmRSS).
    pub host_before: u64,
    /// The worker's peak resident memory during the crossing (VmHWM, reset where it began).
    /// Absent where the reset was refused: the process's own peak says nothing of one case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_peak: Option<u64>,
    /// Device memory in use on the peer's GPU where the crossing began (total - free from
    /// cuMemGetInfo / hipMemGetInfo). Absent for a host peer: nothing was measured, which is
    /// not zero. The whole GPU's: other processes on it count too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_before: Option<u64>,
    /// Device memory in use after set-up: the most seen once the case's shared memory was
    /// allocated (gemm's three buffers: after the third).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_after_setup: Option<u64>,
}

impl Footprint {
    /// Host memory the crossing added at its peak: peak - resident where it began.
    pub fn host_growth(&self) -> Option<u64> {
        Some(self.host_peak?.saturating_sub(self.host_before))
    }

    /// Device memory the set-up added: in use after it - in use before it.
    pub fn device_growth(&self) -> Option<u64> {
        Some(self.device_after_setup?.saturating_sub(self.device_before?))
    }
}

/// Which memory grew.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Memory {
    Host,
    Device,
}

impl Memory {
    pub fn name(self) -> &'static str {
        match self {
            Memory::Host => "host",
            Memory::Device => "device",
        }
    }

    /// This memory's growth in `f`, if both ends were measured.
    pub fn growth(self, f: &Footprint) -> Option<u64> {
        match self {
            Memory::Host => f.host_growth(),
            Memory::Device => f.device_growth(),
        }
    }
}

/// How much the new run's growth may exceed the old one's before it is a regression: more
/// than [`GROWTH_RATIO`] times, and by more than [`GROWTH_FLOOR`].
pub const GROWTH_RATIO: f64 = 1.5;
/// See [`GROWTH_RATIO`].
pub const GROWTH_FLOOR: u64 = 16 * MIB;

/// The rule in words, for reports and documentation.
pub const GROWTH_RULE: &str = "new > 1.5 x old and new - old > 16 MiB";

/// Whether a case's growth from `old` to `new` bytes is a footprint regression: both the ratio
/// and the floor must be passed. The ratio alone would flag small cases, whose growth is a few
/// MiB of allocator and page rounding that doubles between runs for nothing; the floor alone
/// would flag big cases, whose growth of GiBs moves by more than 16 MiB run to run. Together
/// they flag what a release changed: a staging copy added per buffer (2x the buffer), 3 MB of
/// runtime staging become 153 MB.
pub fn grew(old: u64, new: u64) -> bool {
    // Bytes as f64: exact below 2^53, and beyond that the ratio is still the ratio.
    new as f64 > GROWTH_RATIO * old as f64 && new.saturating_sub(old) > GROWTH_FLOOR
}

/// `12.3 MiB`.
pub fn show(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// The running case's record, kept by the worker process between the marks.
#[derive(Debug, Default)]
struct Window {
    started: bool,
    host_before: u64,
    peak_reset: bool,
    host_peak: Option<u64>,
    device_before: Option<u64>,
    device_after_setup: Option<u64>,
}

static CASE: Mutex<Option<Window>> = Mutex::new(None);

fn window() -> std::sync::MutexGuard<'static, Option<Window>> {
    CASE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The worker begins a case: nothing measured yet.
pub fn begin_case() {
    *window() = Some(Window::default());
}

/// The worker ends a case: its record, if its crossing began.
pub fn end_case() -> Option<Footprint> {
    let w = window().take()?;
    w.started.then_some(Footprint {
        host_before: w.host_before,
        host_peak: w.host_peak,
        device_before: w.device_before,
        device_after_setup: w.device_after_setup,
    })
}

/// The crossing begins (the first shared allocation is next): the resident memory now, the
/// peak reset to it, and `device_in_use` (None for a host peer). Later calls in the same case
/// (gemm's second and third buffers) change nothing. Outside a case (a test calling an op
/// directly) nothing is kept.
pub fn crossing_begins(device_in_use: impl FnOnce() -> Option<u64>) {
    let mut guard = window();
    let Some(w) = guard.as_mut() else { return };
    if w.started {
        return;
    }
    let Some(status) = read_status() else { return };
    w.started = true;
    w.host_before = status.rss;
    w.peak_reset = reset_peak();
    w.device_before = device_in_use();
}

/// Shared memory was set up: the device memory in use now (asked only inside a case's
/// crossing), the largest kept.
pub fn after_setup(device_in_use: impl FnOnce() -> Option<u64>) {
    let mut guard = window();
    let Some(w) = guard.as_mut().filter(|w| w.started) else {
        return;
    };
    if let Some(d) = device_in_use() {
        w.device_after_setup = Some(w.device_after_setup.map_or(d, |was| was.max(d)));
    }
}

/// Shared memory was released: the peak so far (since the reset) is the crossing's.
pub fn crossing_ends() {
    let mut guard = window();
    let Some(w) = guard.as_mut().filter(|w| w.started && w.peak_reset) else {
        return;
    };
    if let Some(status) = read_status() {
        w.host_peak = Some(status.hwm);
    }
}

/// VmRSS and VmHWM, in bytes.
struct Status {
    rss: u64,
    hwm: u64,
}

fn read_status() -> Option<Status> {
    parse_status(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// `VmHWM:  123 kB` and `VmRSS:  45 kB` of /proc/self/status, in bytes.
fn parse_status(text: &str) -> Option<Status> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        kb.checked_mul(1024)
    };
    Some(Status {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// Sets this process's peak resident memory to its resident memory now (proc(5),
/// /proc/pid/clear_refs: "5"). False where the kernel or a sandbox refuses it.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_flagged_past_both_the_ratio_and_the_floor() {
        // Small cases: doubling a few MiB is noise.
        assert!(!grew(2 * MIB, 6 * MIB));
        // Big cases: 40 MiB more on 2 GiB is 2%.
        assert!(!grew(2048 * MIB, 2088 * MIB));
        // A staging copy per 32 MiB buffer: 2x and +32 MiB.
        assert!(grew(32 * MIB, 64 * MIB));
        // legacy-rocm-build#5928's staging, 3 MB to 153 MB.
        assert!(grew(3_000_000, 153_000_000));
        // From nothing, past the floor.
        assert!(grew(0, 17 * MIB));
        assert!(!grew(0, 16 * MIB));
        // Exactly 1.5x is not more than 1.5x.
        assert!(!grew(64 * MIB, 96 * MIB));
        assert!(grew(64 * MIB, 96 * MIB + 1));
        // Shrinking never is.
        assert!(!grew(200 * MIB, 20 * MIB));
    }

    #[test]
    fn status_lines_are_read_in_bytes() {
        let s = parse_status("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n").unwrap();
        assert_eq!((s.rss, s.hwm), (1 << 20, 2 << 20));
        assert!(parse_status("VmRSS: 1 kB\n").is_none());
    }

    #[test]
    fn an_old_record_without_the_optional_fields_loads() {
        let f: Footprint = serde_json::from_str(r#"{"host_before":1}"#).unwrap();
        assert_eq!(f.host_growth(), None);
        assert_eq!(f.device_growth(), None);
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(json, r#"{"host_before":1}"#, "absent stays absent, never 0");
    }

    /// Set in the process of its own that the window test runs alone in.
    const ALONE: &str = "CLHIP_FOOTPRINT_TEST_ALONE";

    #[test]
    fn the_window_measures_what_the_crossing_touched_and_not_what_came_before() {
        if std::env::var_os(ALONE).is_none() {
            // Other tests' threads share this process, and memory they free inside the window
            // lowers its peak below its start (one run in four of CI's lost 40 MiB so): the
            // test runs alone, in a process of its own, and must have run there.
            let name = "footprint::tests::the_window_measures_what_the_crossing_touched_and_not_what_came_before";
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--test-threads=1"])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("1 passed"),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        // Resident before the case, and a spike before it that was freed again: neither is
        // the case's, though the process's peak (VmHWM) still holds the spike.
        let before = vec![7u8; 64 << 20];
        drop(std::hint::black_box(vec![8u8; 256 << 20]));
        begin_case();
        crossing_begins(|| Some(100));
        after_setup(|| Some(130));
        after_setup(|| Some(120));
        // Touched during the crossing, then freed: the peak keeps it.
        drop(std::hint::black_box(vec![9u8; 48 << 20]));
        crossing_ends();
        let f = end_case().expect("the crossing began");
        assert_eq!(f.device_growth(), Some(30), "the largest after set-up");
        let growth = f.host_growth().expect("clear_refs works on this kernel");
        assert!(growth >= 40 << 20, "{}", show(growth));
        // Other tests' threads share the process: a margin for them, well short of the spike.
        assert!(
            growth < 200 << 20,
            "the spike before the case is not its growth: {}",
            show(growth)
        );
        drop(before);
        // A case that never reached its crossing has no record.
        begin_case();
        assert_eq!(end_case(), None);
    }
}
