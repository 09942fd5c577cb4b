//! Synthetic nights, for the tests and the benchmark of `history`: one real results file
//! repeated night after night, with its durations jittered and, at known nights, planted
//! flakes, a regression with a fingerprint change, single bad nights and growth. The plan says
//! what was planted, so a test can hold `history` to it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::model::{BIT_EXACT, Expectation, Mismatch, Outcome, OutcomeKind};
use crate::report::{RunReport, Summary};

/// A case that comes out `outcome` instead of passing on the nights `n` (1-based) where
/// `n % period == phase`.
#[derive(Debug, Clone)]
pub struct PlantedFlake {
    pub case: String,
    pub period: usize,
    pub phase: usize,
    pub outcome: OutcomeKind,
}

impl PlantedFlake {
    pub fn bad_on(&self, night: usize) -> bool {
        night % self.period == self.phase
    }
}

/// What the synthetic nights plant. Nights are numbered from 1.
#[derive(Debug, Clone)]
pub struct Plan {
    pub nights: usize,
    pub flakes: Vec<PlantedFlake>,
    /// A passing case that fails from this night on, the night the fingerprint changes.
    pub regression: (String, usize),
    /// The fingerprint line before and from the regression's night.
    pub fingerprint_change: (String, String),
    /// A passing case that fails on this one night only: a flake, never a regression.
    pub single_bad: (String, usize),
    /// A passing case that fails on the last night only: too soon to tell.
    pub last_bad: String,
    /// A case whose time is multiplied by the factor from the night on.
    pub time_growth: (String, usize, f64),
    /// A case whose `peak_rss_bytes` (a measure results files do not carry yet, written here
    /// beside each result) is multiplied by the factor from the night on.
    pub rss_growth: (String, usize, f64),
}

/// Periods and outcomes of the planted flakes: in any 30 consecutive nights each fails on
/// exactly 30 / period of them.
const FLAKES: [(usize, OutcomeKind); 4] = [
    (3, OutcomeKind::Fail),
    (5, OutcomeKind::Crash),
    (10, OutcomeKind::Timeout),
    (30, OutcomeKind::Fail),
];

impl Plan {
    /// A plan over `nights` nights of `base`, its regression at `regression_night`; the cases
    /// planted on are passing cases of `base` that were expected to pass, picked by id.
    pub fn new(base: &RunReport, nights: usize, regression_night: usize) -> anyhow::Result<Plan> {
        anyhow::ensure!(
            nights >= 40 && regression_night > 1 && regression_night + 3 <= nights,
            "synthetic nights: {nights} nights with a regression at night {regression_night}: need at least 40 nights and 3 after the regression"
        );
        let mut passing: Vec<&crate::results::CaseResult> = base
            .results
            .iter()
            .filter(|r| r.expectation == Expectation::Pass && r.outcome.kind() == OutcomeKind::Pass)
            .collect();
        passing.sort_by(|a, b| a.id.cmp(&b.id));
        // The time growth needs a case long enough for its growth to be over the time floor.
        let slow = passing
            .iter()
            .position(|r| r.duration_s >= 0.1)
            .context("synthetic nights: no passing case of 0.1 s or more in the base run")?;
        let slow = passing.remove(slow).id.clone();
        anyhow::ensure!(
            passing.len() >= 40,
            "synthetic nights: the base run has only {} passing cases",
            passing.len()
        );
        let step = passing.len() / 10;
        let pick = |k: usize| passing[k * step].id.clone();
        let flakes = FLAKES
            .iter()
            .enumerate()
            .map(|(k, &(period, outcome))| PlantedFlake {
                case: pick(k),
                period,
                // The last bad night two before the last: the flake is not pending at the end.
                phase: (nights - 2) % period,
                outcome,
            })
            .collect();
        let (before, after) = base
            .fingerprint
            .opencl
            .last()
            .map(|d| {
                (
                    format!("opencl {} driver: {}", d.label, d.driver_version),
                    format!(
                        "opencl {} driver: {}",
                        d.label,
                        next_version(&d.driver_version)
                    ),
                )
            })
            .context("synthetic nights: the base run's fingerprint has no OpenCL device")?;
        Ok(Plan {
            nights,
            flakes,
            regression: (pick(4), regression_night),
            fingerprint_change: (before, after),
            single_bad: (pick(5), nights - 12),
            last_bad: pick(6),
            time_growth: (slow, (nights * 2 / 5).max(10), 3.0),
            rss_growth: (pick(7), (nights / 2).max(10), 2.0),
        })
    }
}

/// `580.159.04` -> `580.159.05`: the last number one up, its width kept.
fn next_version(v: &str) -> String {
    let end = v.rfind(|c: char| c.is_ascii_digit()).map_or(0, |i| i + 1);
    let start = v[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    match v[start..end].parse::<u64>() {
        Ok(n) => format!(
            "{}{:0width$}{}",
            &v[..start],
            n + 1,
            &v[end..],
            width = end - start
        ),
        Err(_) => format!("{v}.1"),
    }
}

/// A number in [0, 1) from a key: the same on every machine.
fn unit(key: &str) -> f64 {
    (crate::hash::fnv1a64(key.as_bytes()) >> 11) as f64 / (1u64 << 53) as f64
}

fn planted(kind: OutcomeKind, night: usize) -> Outcome {
    match kind {
        OutcomeKind::Crash => Outcome::Crash {
            signal: 11,
            signal_name: "SIGSEGV".into(),
            stderr_tail: format!("planted crash, night {night}"),
            process: String::new(),
        },
        OutcomeKind::Timeout => Outcome::timeout(30.0),
        _ => Outcome::mismatch(Mismatch {
            what: format!("planted wrong data, night {night}"),
            index: 7,
            got: "0x00000000".into(),
            want: "0x3f800000".into(),
            count: 1,
            len: 2,
            max_abs_err: 1.0,
            max_rel_err: 1.0,
            bound: 0.0,
            formula: BIT_EXACT.into(),
        }),
    }
}

/// Night `night` (1-based) of the plan, as a results file's bytes.
pub fn night(base: &RunReport, plan: &Plan, night: usize) -> anyhow::Result<Vec<u8>> {
    let mut r = base.clone();
    let last = humantime::parse_rfc3339(&base.started_at)
        .with_context(|| format!("synthetic nights: start time `{}`", base.started_at))?;
    let back = Duration::from_secs(86_400 * (plan.nights - night) as u64);
    r.started_at = crate::report::rfc3339_utc(last - back);
    let (case, from) = &plan.regression;
    if night >= *from {
        let (before, after) = &plan.fingerprint_change;
        for d in &mut r.fingerprint.opencl {
            if format!("opencl {} driver: {}", d.label, d.driver_version) == *before {
                d.driver_version = after
                    .rsplit_once(": ")
                    .map_or(after.clone(), |x| x.1.to_string());
            }
        }
    }
    let mut rss = Vec::with_capacity(r.results.len());
    for res in &mut r.results {
        let key = format!("{night}/{}", res.id);
        res.duration_s *= 0.9 + 0.2 * unit(&key);
        let mut bytes = (256.0 + 256.0 * unit(&res.id)) * f64::from(1 << 20);
        bytes *= 0.98 + 0.04 * unit(&format!("rss/{key}"));
        let id = res.id.as_str();
        let bad = plan
            .flakes
            .iter()
            .find(|f| f.case == id && f.bad_on(night))
            .map(|f| f.outcome)
            .or_else(|| (id == case && night >= *from).then_some(OutcomeKind::Fail))
            .or_else(|| {
                ((id == plan.single_bad.0 && night == plan.single_bad.1)
                    || (id == plan.last_bad && night == plan.nights))
                    .then_some(OutcomeKind::Fail)
            });
        if let Some(kind) = bad {
            res.outcome = planted(kind, night);
        }
        if id == plan.time_growth.0 && night >= plan.time_growth.1 {
            res.duration_s *= plan.time_growth.2;
        }
        if id == plan.rss_growth.0 && night >= plan.rss_growth.1 {
            bytes *= plan.rss_growth.2;
        }
        rss.push(bytes.round() as u64);
    }
    r.summary = Summary::of(&r.results);
    let mut value = serde_json::to_value(&r).context("synthetic nights: encoding")?;
    if let Some(results) = value.get_mut("results").and_then(|v| v.as_array_mut()) {
        for (res, bytes) in results.iter_mut().zip(rss) {
            if let Some(o) = res.as_object_mut() {
                o.insert("peak_rss_bytes".into(), bytes.into());
            }
        }
    }
    let mut bytes = serde_json::to_vec_pretty(&value).context("synthetic nights: encoding")?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes every night of the plan under `dir` (which must exist), as CI artifacts would lie:
/// `night-001/results.json`, ... Returns the files written.
pub fn write_nights(base: &RunReport, plan: &Plan, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    anyhow::ensure!(dir.is_dir(), "{}: not a directory", dir.display());
    let mut written = Vec::with_capacity(plan.nights);
    for n in 1..=plan.nights {
        let path = dir.join(format!("night-{n:03}")).join("results.json");
        let target =
            crate::output::check_with("--synthesize", &path, crate::output::Parent::MayCreate)?;
        crate::output::write(&target, &night(base, plan, n)?)?;
        written.push(path);
    }
    Ok(written)
}
