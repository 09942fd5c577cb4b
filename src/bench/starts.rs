//! A host's worker-start throughput: fresh processes that each make one pair's contexts (the
//! worker binary's `__contexts`, what every worker pays before its first case), started at
//! several concurrencies, per pair kind. A run that ends many workers (each crash or fault
//! ends one) cannot be faster than its worker starts divided by the best of these: its start
//! floor, which `run` prints beside its wall time from the file `bench runner --save` writes.
//!
//! A worker ended by a device fault costs the host more than a clean start: the driver
//! recovers the GPU from the fault and tears the faulted context down (on an H200, 107
//! faulting cases alone took 35 s at 8 at a time, where 107 clean starts take 16 s). For a
//! pair with a GPU peer the bench therefore also times fresh processes that make the pair's
//! contexts and then fault ([`crate::ops::open_pair_and_fault`]); the floor counts each worker
//! a fault ended at that rate.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::results::Planned;
use crate::runner::RunOptions;

/// The format `bench runner --save` writes and `run --start-rate` reads.
pub const SCHEMA: &str = "clhip-start-rate/1";

/// The concurrencies timed: how many starts are in flight at once.
pub const CONCURRENCIES: [usize; 5] = [1, 2, 4, 8, 16];

/// One host's start throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartRates {
    pub schema: String,
    /// RFC 3339, UTC.
    pub measured_at: String,
    pub kinds: Vec<KindRates>,
    /// The best starts per second of any kind at any concurrency.
    pub best: f64,
}

/// One pair kind's throughput (`pocl+host`, `nvidia+cuda`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindRates {
    pub kind: String,
    /// The GPU the starts made their contexts on.
    pub gpu: String,
    /// (concurrency, starts per second)
    pub rates: Vec<(usize, f64)>,
    pub best: f64,
    /// (concurrency, fault-ended starts per second): processes that make the pair's contexts,
    /// fault on the peer and exit. Empty for a pair with no GPU peer, or whose fault did not
    /// come (said when measured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault_rates: Vec<(usize, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_best: Option<f64>,
}

/// The first case of each pair kind in `plan`, in order.
pub fn kinds_of(plan: &[Planned]) -> Vec<(String, Planned)> {
    let mut kinds: Vec<(String, Planned)> = Vec::new();
    for p in plan {
        let kind = p.pair_kind();
        if !kinds.iter().any(|(k, _)| *k == kind) {
            kinds.push((kind, p.clone()));
        }
    }
    kinds
}

/// Times `starts` fresh context-making processes of each kind at each of `concurrencies`,
/// printing a line per setting, and returns the rates. A kind whose process fails is said, with
/// why, and has no rate (a rate of failures is none); none measured at all is an error.
pub fn measure(
    kinds: &[(String, Planned)],
    opts: &RunOptions,
    concurrencies: &[usize],
    starts: usize,
    out: &mut dyn Write,
) -> anyhow::Result<StartRates> {
    writeln!(
        out,
        "worker starts (a fresh process making one pair's contexts), {starts} per setting:"
    )?;
    let mut all = Vec::new();
    for (kind, sample) in kinds {
        let Some(rates) = rates_of(kind, sample, opts, concurrencies, starts, false, out)? else {
            continue;
        };
        let best = rates.iter().map(|r| r.1).fold(0.0, f64::max);
        writeln!(out, "  {kind:<16} best: {best:.2} starts/s")?;
        let gpu_peer = sample
            .work
            .case()
            .is_some_and(|c| c.pair.peer.api != crate::model::Api::Host);
        let fault_rates = if gpu_peer {
            rates_of(kind, sample, opts, concurrencies, starts, true, out)?.unwrap_or_default()
        } else {
            Vec::new()
        };
        let fault_best =
            (!fault_rates.is_empty()).then(|| fault_rates.iter().map(|r| r.1).fold(0.0, f64::max));
        if let Some(b) = fault_best {
            writeln!(out, "  {kind:<16} best: {b:.2} fault-ended starts/s")?;
        }
        all.push(KindRates {
            kind: kind.clone(),
            gpu: sample.gpu.clone(),
            rates,
            best,
            fault_rates,
            fault_best,
        });
    }
    let best = all.iter().map(|k| k.best).fold(0.0, f64::max);
    if all.is_empty() {
        bail!("bench runner: no pair kind could start a worker's contexts (each is said above)");
    }
    writeln!(out, "best: {best:.2} worker starts/s")?;
    Ok(StartRates {
        schema: SCHEMA.into(),
        measured_at: crate::report::rfc3339_utc(std::time::SystemTime::now()),
        kinds: all,
        best,
    })
}

/// One kind's rates at each concurrency, a line per setting; `None` (said, with why) when a
/// start fails: a rate of failures is none.
fn rates_of(
    kind: &str,
    sample: &Planned,
    opts: &RunOptions,
    concurrencies: &[usize],
    starts: usize,
    fault: bool,
    out: &mut dyn Write,
) -> anyhow::Result<Option<Vec<(usize, f64)>>> {
    let what = if fault {
        "fault-ended starts"
    } else {
        "starts"
    };
    let mut rates = Vec::new();
    for &c in concurrencies {
        match time_starts(sample, opts, c, starts.max(c), fault) {
            Ok(rate) => {
                writeln!(out, "  {kind:<16} {c:>2} at once: {rate:6.2} {what}/s")?;
                rates.push((c, rate));
            }
            Err(why) => {
                writeln!(
                    out,
                    "  {kind:<16} a {} on {} failed: {why:#}; no rate",
                    if fault { "faulting start" } else { "start" },
                    sample.gpu
                )?;
                return Ok(None);
            }
        }
    }
    Ok(Some(rates))
}

/// `n` starts of `sample`'s pair, `concurrency` at a time: starts per second of wall time.
/// With `fault`, each process also faults on the peer before it ends.
fn time_starts(
    sample: &Planned,
    opts: &RunOptions,
    concurrency: usize,
    n: usize,
    fault: bool,
) -> anyhow::Result<f64> {
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let began = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..concurrency {
            s.spawn(|| {
                while next.fetch_add(1, Ordering::SeqCst) < n {
                    let made = crate::runner::health::open_contexts(
                        opts,
                        &sample.env,
                        sample.work.case(),
                        &sample.gpu,
                        opts.startup_timeout,
                        fault,
                    );
                    if let Err(why) = made {
                        let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                        f.get_or_insert(why);
                        return;
                    }
                }
            });
        }
    });
    let wall = began.elapsed().max(Duration::from_micros(1));
    if let Some(why) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        bail!("{why}");
    }
    Ok(n as f64 / wall.as_secs_f64())
}

/// Writes `rates` to `path` as JSON.
pub fn save(rates: &StartRates, target: &crate::output::Target) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(rates).context("encoding the start rates")?;
    bytes.push(b'\n');
    crate::output::write(target, &bytes)
}

/// Reads a file `save` wrote, naming it and the place of anything wrong.
pub fn load(path: &Path) -> anyhow::Result<StartRates> {
    let text = crate::input::read_text("a start-rate file", path, crate::input::RESULTS_LIMIT)?;
    let rates: StartRates = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}:{}:{}: {e}", path.display(), e.line(), e.column()))?;
    if rates.schema != SCHEMA {
        bail!(
            "{}: schema `{}` is not a start-rate file's (`{SCHEMA}`)",
            path.display(),
            rates.schema
        );
    }
    if !(rates.best.is_finite() && rates.best > 0.0) {
        bail!(
            "{}: corrupt: best start rate {}",
            path.display(),
            rates.best
        );
    }
    Ok(rates)
}

/// The line `run` prints beside its wall time: its start floor from `rates`, or that there
/// is none to go by. The floor is each pair kind's worker starts over that kind's best
/// throughput, summed: the host's start capacity is one (issue 26's measurement: starts spread
/// over two GPUs went no faster), so the kinds' starts queue behind each other. Of a kind's
/// workers, those a fault ended (`faults_by_kind`: each fault outcome ends its worker) count at
/// the kind's fault-ended rate where one was measured. The floor counting every start as a
/// clean one is said beside it. A kind the rates file did not measure is counted at the file's
/// best rate, and named.
pub fn floor_line(
    wall_s: f64,
    starts_by_kind: &BTreeMap<String, usize>,
    faults_by_kind: &BTreeMap<String, usize>,
    rates: Option<(&Path, &StartRates)>,
) -> String {
    let total: usize = starts_by_kind.values().sum();
    let Some((path, r)) = rates else {
        return format!(
            "wall {wall_s:.1} s; {total} worker starts; start floor unknown: no start rate measured (`clhip bench runner --save FILE`, then `run --start-rate FILE`)"
        );
    };
    let (mut floor, mut clean_floor) = (0.0, 0.0);
    let mut terms = Vec::new();
    let mut unmeasured = Vec::new();
    let mut no_fault_rate = Vec::new();
    for (kind, &starts) in starts_by_kind {
        let measured = r.kinds.iter().find(|k| k.kind == *kind);
        let rate = match measured {
            Some(k) => k.best,
            None => {
                unmeasured.push(kind.as_str());
                r.best
            }
        };
        let faults = faults_by_kind.get(kind).copied().unwrap_or(0).min(starts);
        let fault_rate = measured.and_then(|k| k.fault_best);
        clean_floor += starts as f64 / rate;
        match fault_rate {
            Some(fr) if faults > 0 => {
                let clean = starts - faults;
                floor += clean as f64 / rate + faults as f64 / fr;
                terms.push(format!("{clean} {kind} / {rate:.2}/s"));
                terms.push(format!("{faults} {kind} ended by a fault / {fr:.2}/s"));
            }
            _ => {
                if faults > 0 {
                    no_fault_rate.push(kind.as_str());
                }
                floor += starts as f64 / rate;
                terms.push(format!("{starts} {kind} / {rate:.2}/s"));
            }
        }
    }
    let mut notes = String::new();
    if !unmeasured.is_empty() {
        notes.push_str(&format!(
            "; not measured there, counted at its best rate: {}",
            unmeasured.join(", ")
        ));
    }
    if !no_fault_rate.is_empty() {
        notes.push_str(&format!(
            "; no fault-ended rate there, faults counted as clean starts: {}",
            no_fault_rate.join(", ")
        ));
    }
    let clean = if (floor - clean_floor).abs() > 0.05 {
        format!("; {clean_floor:.1} s counting every start as a clean one")
    } else {
        String::new()
    };
    format!(
        "wall {wall_s:.1} s; start floor {floor:.1} s ({total} worker starts: {}{clean}; rates of {} measured {}{notes}): wall = {:.2}x the floor",
        terms.join(" + "),
        path.display(),
        r.measured_at,
        wall_s / f64::max(floor, 1e-9)
    )
}

/// How many of a run's workers each pair kind lost to a fault: each `fault` outcome ends its
/// worker.
pub fn faults_by_kind(results: &[crate::results::CaseResult]) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for r in results {
        if let (crate::model::OutcomeKind::Fault, Some(case)) = (r.outcome.kind(), r.work.case()) {
            *by.entry(case.pair.kind()).or_insert(0) += 1;
        }
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_each_kinds_starts_over_its_rate_and_its_absence_is_said() {
        let r = StartRates {
            schema: SCHEMA.into(),
            measured_at: "2026-11-26T08:00:00Z".into(),
            kinds: vec![
                KindRates {
                    kind: "nvidia+cuda".into(),
                    gpu: "nvidia0".into(),
                    rates: vec![(4, 2.5)],
                    best: 2.5,
                    fault_rates: vec![(8, 1.0)],
                    fault_best: Some(1.0),
                },
                KindRates {
                    kind: "pocl+host".into(),
                    gpu: "pocl0".into(),
                    rates: vec![(16, 200.0)],
                    best: 200.0,
                    fault_rates: vec![],
                    fault_best: None,
                },
            ],
            best: 200.0,
        };
        let starts = BTreeMap::from([
            ("nvidia+cuda".to_string(), 150),
            ("pocl+host".to_string(), 200),
        ]);
        // 150 / 2.5 + 200 / 200 = 61 s: the slow kind's starts are not counted at the fast
        // kind's rate (which would say 1.75 s).
        let no_faults = BTreeMap::new();
        let line = floor_line(
            67.1,
            &starts,
            &no_faults,
            Some((Path::new("rate.json"), &r)),
        );
        assert!(
            line.contains("start floor 61.0 s (350 worker starts"),
            "{line}"
        );
        assert!(line.contains("150 nvidia+cuda / 2.50/s"), "{line}");
        assert!(line.contains("1.10x the floor"), "{line}");
        let odd = BTreeMap::from([("rocm+hip".to_string(), 20)]);
        let line = floor_line(1.0, &odd, &no_faults, Some((Path::new("rate.json"), &r)));
        assert!(
            line.contains("counted at its best rate: rocm+hip"),
            "{line}"
        );
        let none = floor_line(3.0, &starts, &no_faults, None);
        assert!(
            none.contains("350 worker starts; start floor unknown"),
            "{none}"
        );
    }

    #[test]
    fn workers_a_fault_ended_count_at_the_fault_ended_rate_where_there_is_one() {
        let k = |kind: &str, best: f64, fault_best: Option<f64>| KindRates {
            kind: kind.into(),
            gpu: "nvidia0".into(),
            rates: vec![(4, best)],
            best,
            fault_rates: fault_best.map(|b| vec![(8, b)]).unwrap_or_default(),
            fault_best,
        };
        let r = StartRates {
            schema: SCHEMA.into(),
            measured_at: "2026-11-26T08:00:00Z".into(),
            kinds: vec![
                k("nvidia+cuda", 5.0, Some(2.0)),
                k("nvidia+host", 10.0, None),
            ],
            best: 10.0,
        };
        let starts = BTreeMap::from([
            ("nvidia+cuda".to_string(), 100),
            ("nvidia+host".to_string(), 20),
        ]);
        let faults = BTreeMap::from([
            ("nvidia+cuda".to_string(), 40),
            ("nvidia+host".to_string(), 5),
        ]);
        // 60 / 5 + 40 / 2 + 20 / 10 = 34 s; 22 s counting every start as clean.
        let line = floor_line(37.4, &starts, &faults, Some((Path::new("rate.json"), &r)));
        assert!(
            line.contains("start floor 34.0 s (120 worker starts"),
            "{line}"
        );
        assert!(line.contains("60 nvidia+cuda / 5.00/s"), "{line}");
        assert!(
            line.contains("40 nvidia+cuda ended by a fault / 2.00/s"),
            "{line}"
        );
        assert!(
            line.contains("22.0 s counting every start as a clean one"),
            "{line}"
        );
        assert!(
            line.contains("faults counted as clean starts: nvidia+host"),
            "{line}"
        );
        assert!(line.contains("1.10x the floor"), "{line}");
        // A file written before fault-ended rates were measured still reads.
        let old = r#"{"schema":"clhip-start-rate/1","measured_at":"x","kinds":[{"kind":"a","gpu":"g","rates":[[1,2.0]],"best":2.0}],"best":2.0}"#;
        let parsed: StartRates = serde_json::from_str(old).unwrap();
        assert_eq!(parsed.kinds[0].fault_best, None);
    }
}
