//! The `clhip bench interop` record: what the children measured ([`Row`]), what they could not
//! ([`Problem`]), how each (pair, path) went ([`TargetBench`]), and the file it is saved as
//! (`--json`, versioned, with the driver fingerprint). Knows nothing of runtimes, so a report
//! can be read and rendered on any machine.

use std::path::Path;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::model::{Outcome, OutcomeKind, PathKind, SyncMode};

/// The bench file format this build writes and reads.
pub const SCHEMA: &str = "clhip-bench-interop/1";

/// One `clhip bench interop` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// [`SCHEMA`]; a reader refuses any other.
    pub schema: String,
    pub clhip_version: String,
    /// The commit the clhip that measured was built from; `None` in files from before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::build_id::BuildId>,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub wall_s: f64,
    pub command: Vec<String>,
    pub fingerprint: Fingerprint,
    pub settings: Settings,
    pub pairs: Vec<PairBench>,
}

/// What every measurement of the run was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Buffer sizes of the handoff and bandwidth measurements.
    pub sizes_bytes: Vec<u64>,
    /// Timed repetitions per measurement.
    pub reps: u32,
    /// Untimed repetitions before them (the pipeline also runs one checked iteration first).
    pub warmup: u32,
    /// Complex elements of the pipeline's vector (default 4,194,304).
    pub pipeline_len: usize,
    /// The data seed (`run --seed`): the pipeline's inputs are the conformance case's.
    pub seed: u64,
    /// Per (pair, path) limit on its child process.
    pub timeout_s: f64,
}

/// Every measured (pair, path) of one pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairBench {
    /// `nvidia0+cuda0`.
    pub pair: String,
    /// The peer's label: `cuda0`, `host`.
    pub peer: String,
    pub targets: Vec<TargetBench>,
}

/// What one child process measures: an interop path with one of its sync modes, or the peer
/// alone with no crossing at all (the pipeline's native baseline, and the peer's own memory,
/// which the bandwidth on shared memory is a fraction of).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Target {
    Path { path: PathKind, sync: SyncMode },
    Native,
}

impl Target {
    /// `copy/finish`, `native`: what the tables call it, and what filters match after the
    /// pair id.
    pub fn name(self) -> String {
        match self {
            Target::Path { path, sync } => format!("{path}/{sync}"),
            Target::Native => "native".into(),
        }
    }

    pub fn path(self) -> Option<PathKind> {
        match self {
            Target::Path { path, .. } => Some(path),
            Target::Native => None,
        }
    }
}

/// One target's measurements, and how its child process ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetBench {
    pub target: Target,
    /// `pocl0+host/copy/finish`.
    pub id: String,
    /// How the target went as a whole: `pass` when its child finished (any measurement it
    /// could not make is in `problems`); otherwise how the child died (`crash` with the signal,
    /// `fault` for ROCm's page-fault line, `timeout`, `error` for the harness's own), or the
    /// worst problem when nothing could be measured or the data came back wrong.
    pub outcome: Outcome,
    /// What the child was measuring when it died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<String>,
    /// What the target does, where that needs saying (the native baseline).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    pub rows: Vec<Row>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
    pub wall_s: f64,
}

impl TargetBench {
    pub fn row(&self, measure: Measure, bytes: u64) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.measure == measure && r.bytes == bytes)
    }

    /// Why `measure` at `bytes` has no row: its own problem, one for every measure at that
    /// size (a refused allocation) or for the whole target (no session), else how the child
    /// ended if it died before getting there.
    pub fn missing(&self, measure: Measure, bytes: u64) -> Option<&Outcome> {
        self.problems
            .iter()
            .find(|p| p.measure.is_none_or(|m| m == measure) && p.bytes.is_none_or(|b| b == bytes))
            .map(|p| &p.outcome)
            .or_else(|| (self.outcome.kind() != OutcomeKind::Pass).then_some(&self.outcome))
    }
}

/// What a row measures. Every row is seconds per repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measure {
    /// OpenCL's last write done to the peer able to start: the path's sync toward the peer and
    /// whatever copy it makes, up to the peer's stream being idle.
    HandoffToPeer,
    /// The peer's last write done to OpenCL able to start: the sync back, its copy, and the
    /// events the next OpenCL command would wait for.
    HandoffToOpencl,
    /// One pass of the peer's scale kernel (read and write every element) over the shared
    /// memory, launch to synchronize.
    ScaleShared,
    /// The same pass over the peer's own memory (device memory; pageable memory for the
    /// host), measured by the same child right after the shared memory: what its bandwidth is
    /// a share of.
    ScaleOwn,
    /// One iteration of the pipeline (docs/bench.md): OpenCL add, OpenCL FFT, handoff to the peer, peer
    /// scale, peer magnitude, handoff back.
    Pipeline,
}

impl Measure {
    pub fn name(self) -> &'static str {
        match self {
            Measure::HandoffToPeer => "handoff to peer",
            Measure::HandoffToOpencl => "handoff to OpenCL",
            Measure::ScaleShared => "scale on shared memory",
            Measure::ScaleOwn => "scale on own memory",
            Measure::Pipeline => "pipeline",
        }
    }
}

/// One measurement: a measure at one size, over the timed repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub measure: Measure,
    pub bytes: u64,
    /// Untimed repetitions before the timed ones.
    pub warmup: u32,
    pub stats: Stats,
}

/// A measurement that was not made, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// `None`: every measure (a size that could not be allocated, a session that would not open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<Measure>,
    /// `None`: every size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    pub outcome: Outcome,
}

/// Order statistics of the timed repetitions, in seconds. Quartiles interpolate between
/// neighbours (the "type 7" rule of R and numpy), so `min <= q1 <= median <= q3 <= max`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub median_s: f64,
    pub min_s: f64,
    pub q1_s: f64,
    pub q3_s: f64,
    pub max_s: f64,
    /// Every timed repetition, in the order it ran.
    pub samples_s: Vec<f64>,
}

impl Stats {
    /// `None` for no samples or a sample that is not a finite, non-negative duration.
    pub fn of(samples: Vec<f64>) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return None;
        }
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let pos = q * (sorted.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
        };
        Some(Stats {
            median_s: at(0.5),
            min_s: sorted[0],
            q1_s: at(0.25),
            q3_s: at(0.75),
            max_s: sorted[sorted.len() - 1],
            samples_s: samples,
        })
    }
}

/// Reads a bench file, naming the file and the line and column of anything wrong with it.
pub fn load(path: &Path) -> anyhow::Result<BenchReport> {
    let text = crate::input::read_text("a bench file", path, crate::input::RESULTS_LIMIT)?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(other) => bail!(
            "{}: schema `{other}`, but this clhip reads `{SCHEMA}`",
            path.display()
        ),
        None => bail!("{}: no `schema` field: not a bench file", path.display()),
    }
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not a `{SCHEMA}` file: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })
}

/// Writes the report as pretty JSON to a checked output.
pub fn write_json(report: &BenchReport, target: &crate::output::Target) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(report).context("encoding the bench results")?;
    bytes.push(b'\n');
    crate::output::write(target, &bytes)
}

/// A small report for the renderers' tests: one GPU pair with a measured copy path, a path
/// whose child died by SIGSEGV in its pipeline, one refused everywhere, and native.
#[cfg(test)]
pub(crate) fn sample_report() -> BenchReport {
    use crate::model::{Api, ApiError};
    let mib32 = 32u64 << 20;
    let stats = |ms: f64| Stats::of(vec![ms * 0.9e-3, ms * 1e-3, ms * 1.2e-3]).expect("samples");
    let row = |measure, bytes, ms| Row {
        measure,
        bytes,
        warmup: 2,
        stats: stats(ms),
    };
    let path = |path, sync| Target::Path { path, sync };
    let target = |t: Target, outcome, rows, problems| TargetBench {
        id: format!("nvidia0+cuda0/{}", t.name()),
        target: t,
        outcome,
        during: None,
        note: String::new(),
        rows,
        problems,
        wall_s: 1.0,
    };
    let copy = target(
        path(PathKind::Copy, SyncMode::Finish),
        Outcome::pass(),
        vec![
            row(Measure::Pipeline, mib32, 12.0),
            row(Measure::HandoffToPeer, mib32, 2.6),
            row(Measure::HandoffToOpencl, mib32, 2.7),
            row(Measure::ScaleShared, mib32, 0.013),
            row(Measure::ScaleOwn, mib32, 0.013),
        ],
        Vec::new(),
    );
    let pinned = target(
        path(PathKind::PinnedUseHostPtr, SyncMode::Map),
        Outcome::pass(),
        vec![
            row(Measure::Pipeline, mib32, 6.0),
            row(Measure::HandoffToPeer, mib32, 0.4),
            row(Measure::HandoffToOpencl, mib32, 0.5),
            row(Measure::ScaleShared, mib32, 0.82),
            row(Measure::ScaleOwn, mib32, 0.0133),
        ],
        Vec::new(),
    );
    let mut crashed = target(
        path(PathKind::DeviceUseHostPtr, SyncMode::Map),
        Outcome::Crash {
            signal: 11,
            signal_name: "SIGSEGV".into(),
            stderr_tail: String::new(),
            process: "bench child".into(),
        },
        Vec::new(),
        Vec::new(),
    );
    crashed.during = Some("pipeline at 32 MiB".into());
    let refused = Outcome::Unsupported {
        reason: "refused while the case ran".into(),
        error: Some(ApiError {
            api: Api::OpenCl,
            call: "clEnqueueNDRangeKernel".into(),
            code: -52,
            name: "CL_INVALID_KERNEL_ARGS".into(),
            detail: String::new(),
        }),
    };
    let unsupported = target(
        path(PathKind::DevicePtrAsClArg, SyncMode::Finish),
        refused.clone(),
        Vec::new(),
        vec![Problem {
            measure: None,
            bytes: None,
            outcome: refused,
        }],
    );
    let mut native = target(
        Target::Native,
        Outcome::pass(),
        vec![
            row(Measure::Pipeline, mib32, 4.0),
            row(Measure::ScaleOwn, mib32, 0.013),
        ],
        Vec::new(),
    );
    native.note = "cuda0 has no FFT in clhip".into();
    BenchReport {
        schema: SCHEMA.into(),
        clhip_version: "0.1.0".into(),
        build: None,
        started_at: "2026-01-01T00:00:00Z".into(),
        wall_s: 10.0,
        command: vec!["clhip".into(), "bench".into(), "interop".into()],
        fingerprint: Fingerprint::default(),
        settings: Settings {
            sizes_bytes: vec![mib32],
            reps: 3,
            warmup: 2,
            pipeline_len: 4_194_304,
            seed: 1,
            timeout_s: 60.0,
        },
        pairs: vec![PairBench {
            pair: "nvidia0+cuda0".into(),
            peer: "cuda0".into(),
            targets: vec![copy, pinned, crashed, unsupported, native],
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_order_and_interpolate() {
        let s = Stats::of(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.min_s, s.max_s), (1.0, 4.0));
        assert_eq!(s.median_s, 2.5);
        assert_eq!((s.q1_s, s.q3_s), (1.75, 3.25));
        assert_eq!(s.samples_s, vec![4.0, 1.0, 3.0, 2.0], "kept in run order");
        let one = Stats::of(vec![0.5]).unwrap();
        assert_eq!((one.min_s, one.median_s, one.max_s), (0.5, 0.5, 0.5));
        assert!(Stats::of(Vec::new()).is_none());
        assert!(Stats::of(vec![1.0, f64::NAN]).is_none());
        assert!(Stats::of(vec![-1.0]).is_none());
    }

    #[test]
    fn a_missing_measurement_names_its_own_problem_before_the_targets() {
        let unsupported = Outcome::unsupported("too big");
        let t = TargetBench {
            target: Target::Native,
            id: "x/native".into(),
            outcome: Outcome::Crash {
                signal: 11,
                signal_name: "SIGSEGV".into(),
                stderr_tail: String::new(),
                process: String::new(),
            },
            during: None,
            note: String::new(),
            rows: Vec::new(),
            problems: vec![Problem {
                measure: None,
                bytes: Some(64),
                outcome: unsupported.clone(),
            }],
            wall_s: 0.0,
        };
        assert_eq!(t.missing(Measure::ScaleOwn, 64), Some(&unsupported));
        assert_eq!(
            t.missing(Measure::ScaleOwn, 128).map(Outcome::kind),
            Some(OutcomeKind::Crash)
        );
    }

    #[test]
    fn load_refuses_other_schemas_and_names_the_place_of_bad_json() {
        let dir = std::env::temp_dir().join(format!("clhip-bench-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("b.json");
        std::fs::write(&f, "{\"schema\": \"clhip-results/1\"}").unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(e.contains("clhip-results/1") && e.contains(SCHEMA), "{e}");
        std::fs::write(&f, "{\n  \"schema\": ").unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(e.contains("b.json:2:"), "{e}");
        std::fs::write(&f, format!("{{\"schema\": \"{SCHEMA}\"}}")).unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(e.contains("missing field"), "{e}");
    }
}
