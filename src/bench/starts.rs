//! A host's worker-start throughput: fresh processes that each make one pair's contexts (the
//! worker binary's `__contexts`, what every worker pays before its first case), started at
//! several concurrencies, per pair kind. A run that ends many workers (each crash or fault
//! ends one) cannot be faster than its worker starts divided by the best of these: its start
//! floor, which `run` prints beside its wall time from the file `bench runner --save` writes.

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
        let mut rates = Vec::new();
        for &c in concurrencies {
            match time_starts(sample, opts, c, starts.max(c)) {
                Ok(rate) => {
                    writeln!(out, "  {kind:<16} {c:>2} at once: {rate:6.2} starts/s")?;
                    rates.push((c, rate));
                }
                Err(why) => {
                    writeln!(
                        out,
                        "  {kind:<16} a start on {} failed: {why:#}; no rate",
                        sample.gpu
                    )?;
                    rates.clear();
                    break;
                }
            }
        }
        if rates.is_empty() {
            continue;
        }
        let best = rates.iter().map(|r| r.1).fold(0.0, f64::max);
        writeln!(out, "  {kind:<16} best: {best:.2} starts/s")?;
        all.push(KindRates {
            kind: kind.clone(),
            gpu: sample.gpu.clone(),
            rates,
            best,
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

/// `n` starts of `sample`'s pair, `concurrency` at a time: starts per second of wall time.
fn time_starts(
    sample: &Planned,
    opts: &RunOptions,
    concurrency: usize,
    n: usize,
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
/// over two GPUs went no faster), so the kinds' starts queue behind each other. A kind the
/// rates file did not measure is counted at the file's best rate, and named.
pub fn floor_line(
    wall_s: f64,
    starts_by_kind: &BTreeMap<String, usize>,
    rates: Option<(&Path, &StartRates)>,
) -> String {
    let total: usize = starts_by_kind.values().sum();
    let Some((path, r)) = rates else {
        return format!(
            "wall {wall_s:.1} s; {total} worker starts; start floor unknown: no start rate measured (`clhip bench runner --save FILE`, then `run --start-rate FILE`)"
        );
    };
    let mut floor = 0.0;
    let mut terms = Vec::new();
    let mut unmeasured = Vec::new();
    for (kind, &starts) in starts_by_kind {
        let rate = match r.kinds.iter().find(|k| k.kind == *kind) {
            Some(k) => k.best,
            None => {
                unmeasured.push(kind.as_str());
                r.best
            }
        };
        floor += starts as f64 / rate;
        terms.push(format!("{starts} {kind} / {rate:.2}/s"));
    }
    let unmeasured = if unmeasured.is_empty() {
        String::new()
    } else {
        format!(
            "; not measured there, counted at its best rate: {}",
            unmeasured.join(", ")
        )
    };
    format!(
        "wall {wall_s:.1} s; start floor {floor:.1} s ({total} worker starts: {}; rates of {} measured {}{unmeasured}): wall = {:.2}x the floor",
        terms.join(" + "),
        path.display(),
        r.measured_at,
        wall_s / f64::max(floor, 1e-9)
    )
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
                },
                KindRates {
                    kind: "pocl+host".into(),
                    gpu: "pocl0".into(),
                    rates: vec![(16, 200.0)],
                    best: 200.0,
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
        let line = floor_line(67.1, &starts, Some((Path::new("rate.json"), &r)));
        assert!(
            line.contains("start floor 61.0 s (350 worker starts"),
            "{line}"
        );
        assert!(line.contains("150 nvidia+cuda / 2.50/s"), "{line}");
        assert!(line.contains("1.10x the floor"), "{line}");
        let odd = BTreeMap::from([("rocm+hip".to_string(), 20)]);
        let line = floor_line(1.0, &odd, Some((Path::new("rate.json"), &r)));
        assert!(
            line.contains("counted at its best rate: rocm+hip"),
            "{line}"
        );
        let none = floor_line(3.0, &starts, None);
        assert!(
            none.contains("350 worker starts; start floor unknown"),
            "{none}"
        );
    }
}
