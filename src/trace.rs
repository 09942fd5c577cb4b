//! Where a process's time goes, for `clhip bench runner` and for anyone asking why a run is
//! slow on their driver. With `CLHIP_TRACE=DIR`, every clhip process (runner, worker, IPC
//! exporter) appends one line per timed step to `DIR/<pid>.trace`:
//! `<start, µs since the epoch> <duration µs> <pid> <step>`. Wall-clock starts, not
//! per-process clocks, so the steps of concurrent processes can be laid side by side.
//!
//! Off (the default), a step costs one load of an initialised `OnceLock`.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub const TRACE_ENV: &str = "CLHIP_TRACE";

fn sink() -> Option<&'static Mutex<File>> {
    static SINK: OnceLock<Option<Mutex<File>>> = OnceLock::new();
    SINK.get_or_init(|| {
        let dir = PathBuf::from(std::env::var_os(TRACE_ENV)?);
        // Tracing is a diagnostic: a directory it cannot write leaves the run untraced, never
        // failed.
        std::fs::create_dir_all(&dir).ok()?;
        let path = dir.join(format!("{}.trace", std::process::id()));
        File::options()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(Mutex::new)
    })
    .as_ref()
}

fn epoch_us(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros())
}

/// Run `f` as the step `what`, recording its start and duration when tracing is on.
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let Some(sink) = sink() else {
        return f();
    };
    let (wall, start) = (SystemTime::now(), Instant::now());
    let value = f();
    write(sink, wall, start.elapsed().as_micros(), what);
    value
}

/// A point in time (duration 0): a process start, a case id.
pub fn mark(what: &str) {
    if let Some(sink) = sink() {
        write(sink, SystemTime::now(), 0, what);
    }
}

fn write(sink: &Mutex<File>, wall: SystemTime, duration_us: u128, what: &str) {
    let line = format!(
        "{} {duration_us} {} {}\n",
        epoch_us(wall),
        std::process::id(),
        what.replace('\n', " ")
    );
    let mut file = sink.lock().unwrap_or_else(|e| e.into_inner());
    let _ = file.write_all(line.as_bytes());
}

/// One traced step, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub start_us: u128,
    pub duration_us: u128,
    pub pid: u32,
    pub what: String,
}

/// Parse one trace line; `None` for a line that is not one (a torn write at a crash).
pub fn parse_line(line: &str) -> Option<Step> {
    let mut it = line.splitn(4, ' ');
    Some(Step {
        start_us: it.next()?.parse().ok()?,
        duration_us: it.next()?.parse().ok()?,
        pid: it.next()?.parse().ok()?,
        what: it.next()?.trim_end().to_string(),
    })
}

/// Every step in the trace files of `dir`.
pub fn read_dir(dir: &std::path::Path) -> std::io::Result<Vec<Step>> {
    let mut steps = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "trace") {
            let text = std::fs::read_to_string(&path)?;
            steps.extend(text.lines().filter_map(parse_line));
        }
    }
    Ok(steps)
}

/// One kind of step over a whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTotal {
    pub what: String,
    pub count: usize,
    /// Summed over every process.
    pub total_s: f64,
    /// Wall time during which at least one process was in this step: near `total_s`, the step
    /// ran one at a time, whatever the number of workers.
    pub in_flight_s: f64,
}

/// The steps grouped by kind (`case <id>` as `case`, `data: <what> n=<n>` as `data: <what>`),
/// longest total first.
pub fn totals(steps: &[Step]) -> Vec<StepTotal> {
    let kind = |what: &str| -> String {
        if what.starts_with("case ") {
            return "case".into();
        }
        match what.rsplit_once(" n=") {
            Some((head, n)) if n.bytes().all(|b| b.is_ascii_digit()) => head.to_string(),
            _ => what.to_string(),
        }
    };
    let mut by_kind: std::collections::BTreeMap<String, Vec<(u128, u128)>> = Default::default();
    for s in steps.iter().filter(|s| s.duration_us > 0) {
        by_kind
            .entry(kind(&s.what))
            .or_default()
            .push((s.start_us, s.start_us + s.duration_us));
    }
    let mut out: Vec<StepTotal> = by_kind
        .into_iter()
        .map(|(what, mut spans)| {
            let total: u128 = spans.iter().map(|(a, b)| b - a).sum();
            spans.sort();
            let (mut union, mut open) = (0u128, None::<(u128, u128)>);
            for (a, b) in spans.iter().copied() {
                open = match open {
                    Some((oa, ob)) if a <= ob => Some((oa, ob.max(b))),
                    Some((oa, ob)) => {
                        union += ob - oa;
                        Some((a, b))
                    }
                    None => Some((a, b)),
                };
            }
            if let Some((oa, ob)) = open {
                union += ob - oa;
            }
            StepTotal {
                count: spans.len(),
                what,
                total_s: total as f64 / 1e6,
                in_flight_s: union as f64 / 1e6,
            }
        })
        .collect();
    out.sort_by(|a, b| b.total_s.total_cmp(&a.total_s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(start_us: u128, duration_us: u128, pid: u32, what: &str) -> Step {
        Step {
            start_us,
            duration_us,
            pid,
            what: what.into(),
        }
    }

    #[test]
    fn totals_group_kinds_and_count_overlap_once() {
        let steps = [
            // Two processes in a context at once for 5 us, then one alone for 10.
            step(0, 10, 1, "CUDA primary context"),
            step(5, 10, 2, "CUDA primary context"),
            step(100, 10, 3, "CUDA primary context"),
            step(0, 7, 1, "case a/b/n=1"),
            step(0, 3, 2, "case c/d/n=2"),
            step(0, 4, 1, "data: gemm inputs n=2048"),
            step(50, 4, 1, "data: gemm inputs n=33"),
            step(9, 0, 1, "worker start"),
        ];
        let t = totals(&steps);
        let get = |w: &str| t.iter().find(|s| s.what == w).unwrap().clone();
        let ctx = get("CUDA primary context");
        assert_eq!((ctx.count, ctx.total_s, ctx.in_flight_s), (3, 30e-6, 25e-6));
        let case = get("case");
        assert_eq!((case.count, case.in_flight_s), (2, 7e-6));
        assert_eq!(get("data: gemm inputs").count, 2);
        assert!(
            t.iter().all(|s| s.what != "worker start"),
            "marks have no length"
        );
        assert_eq!(t[0].what, "CUDA primary context", "longest total first");
    }

    #[test]
    fn lines_parse_back_and_torn_lines_do_not() {
        let s = parse_line("1700000000000000 1234 42 cuInit and primary context\n").unwrap();
        assert_eq!(s.duration_us, 1234);
        assert_eq!(s.pid, 42);
        assert_eq!(s.what, "cuInit and primary context");
        assert_eq!(parse_line("1700000000000000 12"), None);
        assert_eq!(parse_line("x 1 2 y"), None);
    }
}
