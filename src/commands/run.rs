//! `clhip run`: the case matrix over every pair found, each case in a worker process, the
//! support matrix printed and the results written (JSON, with a journal as results land; JUnit
//! and Markdown where asked).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use clhip::cases::Matrix;
use clhip::config::Profile;
use clhip::expectations::Baseline;
use clhip::expectations::Expectations;
use clhip::filter::matches_filter;
use clhip::model::{Case, Expectation, Outcome, OutcomeKind};
use clhip::output::Journal;
use clhip::plan::{self, RunOptionsBuilder, WorkerExe};
use clhip::probe::Probe;
use clhip::report::{self, ConsoleReporter, RunReport, RunStatus};
use clhip::results::{CaseResult, Planned};
use clhip::resume::{Journaled, ResumeKey};
use clhip::runner::{self, Stopped};
use clhip::{mock, pairs};

use super::outputs::{Outputs, Stdout};
use super::signals::handle_signals;
use super::{
    SkipGlob, check_expectations, existing_dir, load_matrix, note, parse_timeout, skip_globs,
    skip_source,
};

mod resume;
use resume::{Resumed, resume_from, take_up};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Globs (`*` wildcard) or substrings of case ids; a filter matching nothing is an error
    /// (a warning with --allow-empty).
    filters: Vec<String>,
    /// The seed every case's data are drawn from: the same seed gives the same data, so a
    /// case rerun (or reproduced) sees what it saw here [default: 24301, or the seed of
    /// --rerun-failed's run].
    #[arg(long)]
    seed: Option<u64>,
    /// Configuration file of named profiles [default: clhip.toml in the working directory, if
    /// there is one].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Apply this profile of the configuration file: its jobs, timeout, expectations, retries,
    /// outputs, skips and required devices. A flag given here wins over the profile's value;
    /// --skip and --require add to its own. Without it, the file's `default` profile applies, if it has one.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Leave out the cases this glob (`*` wildcard) or substring of case ids matches
    /// (repeatable): each is listed as `skip` with the glob as its reason and counted, never
    /// run. For cases that hang a driver.
    #[arg(long, value_name = "GLOB")]
    skip: Vec<String>,
    /// Fail before any case unless a line of this machine's fingerprint (`clhip probe`)
    /// matches this glob (`*` wildcard) or substring, e.g. `arch: gfx908` (repeatable: each
    /// must match). For a job that must not pass on the wrong machine.
    #[arg(long, value_name = "PATTERN")]
    require: Vec<String>,
    /// Run only the cases that came out worse than expected in this results file (regressions
    /// and harness errors), with that run's seed unless --seed is given.
    #[arg(long, value_name = "RUN.json", conflicts_with = "filters")]
    rerun_failed: Option<PathBuf>,
    /// Results file (JSON, versioned, with the driver fingerprint) [default:
    /// reports/latest.json, its directory made if missing; a directory you name must exist].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Also write the Markdown rendering here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Also write the HTML page here (as `clhip report --html`).
    #[arg(long)]
    html: Option<PathBuf>,
    /// Case matrix file (default: the built-in cases/default.toml).
    #[arg(long)]
    cases: Option<PathBuf>,
    /// Known non-passes for this driver (`case-id,outcome` lines).
    #[arg(long, conflicts_with = "expectations")]
    baseline: Option<PathBuf>,
    /// Expectation files (a TOML file, or a directory of them such as cases/expectations):
    /// the ones whose `applies` patterns match this run's fingerprint say what is known.
    #[arg(long)]
    expectations: Option<PathBuf>,
    /// Per-case time limit in seconds (more than 0, at most a week). A worker also gets this
    /// long to start its next case. Time the run spends stopped (Ctrl-Z, or SIGSTOP then
    /// SIGCONT) does not count. [default: 120]
    #[arg(long, value_parser = parse_timeout)]
    timeout: Option<f64>,
    /// Cases per worker process before a fresh one takes over (at least 1).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    cases_per_worker: u32,
    /// Worker processes at once per GPU, 1 to 256. Each has its own device contexts, so a crash
    /// or fault still costs one case; more than one shortens runs where many cases crash or
    /// fault. Each GPU (and each OpenCL device of a host pair) gets its own. [default: 1]
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: Option<u16>,
    /// Keep one spare worker per runner thread, its device contexts made, to take over at once
    /// when a crash or fault ends a worker. Off by default: on NVIDIA's driver, which makes
    /// contexts one process at a time, it bought nothing (an H100's full matrix: 67.0 s without,
    /// 67.3 s with at -j 4), and each spare holds a second set of contexts.
    #[arg(long)]
    spare_workers: bool,
    /// A ROCm install (a directory) to load HIP from. Repeat it to run several installs side
    /// by side: each is a participant of its own (`hip@6.3.2`, case ids
    /// `rocm0+hip@6.3.2:0/...`) run by workers of its own, and the matrix gets a comparison
    /// with a column per install.
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Vec<PathBuf>,
    /// Without a terminal (a CI log), print a status line every SECONDS: cases done of the
    /// total, counts by outcome, ETA (0: none). On a terminal the progress bar says it.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    heartbeat: u64,
    /// Exit 0 when nothing is left to run on this machine: filters and --devices that match
    /// nothing are warned about instead of refused, as is a machine with no pair at all (a
    /// nightly job that ran nothing otherwise fails). One job then serves runners with and
    /// without a GPU.
    #[arg(long)]
    allow_empty: bool,
    /// Run a case that came out worse than expected again alone, up to N times: one that then
    /// comes out otherwise is `flaky` (both outcomes kept); one that fails in its batch and
    /// passes alone is bisected for the earlier case it fails only after. [default: 0]
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=10))]
    retries: Option<u32>,
    /// Only the pairs of these GPUs (comma-separated): a device-runtime index (`0`), a UUID
    /// (`GPU-` prefix optional), a PCI bus id, or an OpenCL label (`nvidia1`).
    #[arg(long, value_delimiter = ',')]
    devices: Vec<String>,
    /// Run only shard M of N (`hash:M/N`): a case's shard is a hash of its id, so it does not
    /// change when filters do; `clhip merge` joins the shards' results. The results file
    /// records the shard, the filters and the whole plan, which the merge checks.
    #[arg(long)]
    partition: Option<clhip::partition::Partition>,
    /// Continue the run whose journal this is (`NAME.partial`, left by a run that died: a
    /// reboot, a killed runner). The run must be the same: the same seed, cases, flags and
    /// driver fingerprint, or it is refused, naming what differs. The cases finished are kept;
    /// the ones running when it died are `incomplete` and are not run again; the rest run.
    /// The results go to `NAME` (or --json, whose journal this must be).
    #[arg(long, value_name = "PARTIAL")]
    resume: Option<PathBuf>,
    /// With --resume: run each case that was running when the run died once more (said so).
    /// A case incomplete twice in a row is not run again, whatever this says.
    #[arg(long, requires = "resume")]
    rerun_incomplete: bool,
    /// This host's worker-start throughput, as `clhip bench runner --save FILE` wrote it:
    /// the run prints its start floor (worker starts / the best throughput) beside its wall
    /// time.
    #[arg(long, value_name = "FILE")]
    start_rate: Option<PathBuf>,
    /// Test-only: plant an error in every case (flip-element, skip-sync, bad-pointer) to show
    /// the checks catch it.
    #[arg(long, hide = true)]
    plant: Option<clhip::ops::Plant>,
    /// Test-only: plant only in the cases these globs or substrings of case ids match (one
    /// GPU's copy of one case, to show the consistency flag raised on real hardware).
    #[arg(long, hide = true, requires = "plant", value_delimiter = ',')]
    plant_only: Vec<String>,
    /// Test-only: run these mock actions (segfault,abort,hang,fault,...) instead of the matrix.
    #[arg(long, hide = true)]
    mock_cases: Option<String>,
    /// Test-only: judge the mock actions as cases are (by --baseline, or as unbaselined), not
    /// each by its own kind, to show the run's exit status.
    #[arg(long, hide = true, requires = "mock_cases")]
    mock_as_cases: bool,
    /// Test-only: spread the mock actions over this many GPUs (`mock0`, `mock1`, ...), item k
    /// on `mock{k mod N}`, each with its own workers.
    #[arg(long, hide = true, requires = "mock_cases", value_parser = clap::value_parser!(u16).range(1..=64))]
    mock_gpus: Option<u16>,
}

impl RunArgs {
    /// The files the run reads, each with the option that names it: no output may be one.
    fn inputs(&self) -> Vec<(&str, &Path)> {
        let mut ins: Vec<(&str, &Path)> = Vec::new();
        ins.extend(self.cases.as_deref().map(|p| ("--cases", p)));
        ins.extend(self.baseline.as_deref().map(|p| ("--baseline", p)));
        ins.extend(self.expectations.as_deref().map(|p| ("--expectations", p)));
        ins.extend(self.start_rate.as_deref().map(|p| ("--start-rate", p)));
        ins.extend(self.rocm_path.iter().map(|p| ("--rocm-path", p.as_path())));
        ins.extend(self.rerun_failed.as_deref().map(|p| ("--rerun-failed", p)));
        ins.extend(self.config.as_deref().map(|p| ("--config", p)));
        ins
    }

    fn seed(&self) -> u64 {
        self.seed.unwrap_or(plan::DEFAULT_SEED)
    }

    /// The profile's settings where no flag gave one; its skips before --skip's. Returns the
    /// skips, each with the reason a skipped case carries.
    fn apply(&mut self, profile: Option<&Profile>) -> anyhow::Result<Vec<SkipGlob>> {
        if let Some(p) = profile {
            note(&format!(
                "clhip: profile `{}` of {}",
                p.name,
                p.file.display()
            ));
            self.jobs = self.jobs.or(p.jobs);
            self.timeout = self.timeout.or(p.timeout);
            self.retries = self.retries.or(p.retries);
            // --baseline and expectation files exclude each other: the flag wins.
            if self.baseline.is_none() {
                self.expectations = self.expectations.take().or(p.expectations.clone());
            }
            self.json = self.json.take().or(p.json.clone());
            self.junit = self.junit.take().or(p.junit.clone());
            self.markdown = self.markdown.take().or(p.markdown.clone());
            self.html = self.html.take().or(p.html.clone());
        }
        skip_globs(profile, &self.skip)
    }

    /// What a resumed run must share with its journal besides its selection and fingerprint:
    /// the seed, and each flag that changes what a case does or how it is judged.
    fn resume_key(&self) -> ResumeKey {
        let mut flags = BTreeMap::new();
        let mut put = |name: &str, value: String| {
            flags.insert(name.to_string(), value);
        };
        put("--timeout", self.timeout.unwrap_or(120.0).to_string());
        put("--cases-per-worker", self.cases_per_worker.to_string());
        put("--jobs", self.jobs.unwrap_or(1).to_string());
        put("--retries", self.retries.unwrap_or(0).to_string());
        put("--spare-workers", self.spare_workers.to_string());
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        for (name, value) in [
            ("--cases", path(&self.cases)),
            ("--baseline", path(&self.baseline)),
            ("--expectations", path(&self.expectations)),
            ("--plant", self.plant.map(|p| format!("{p:?}"))),
            ("--mock-cases", self.mock_cases.clone()),
            ("--mock-gpus", self.mock_gpus.map(|n| n.to_string())),
        ] {
            if let Some(v) = value {
                put(name, v);
            }
        }
        if !self.rocm_path.is_empty() {
            let paths: Vec<String> = self
                .rocm_path
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            put("--rocm-path", paths.join(","));
        }
        if !self.plant_only.is_empty() {
            put("--plant-only", self.plant_only.join(","));
        }
        if self.mock_as_cases {
            put("--mock-as-cases", "true".into());
        }
        ResumeKey {
            seed: self.seed(),
            flags,
        }
    }

    /// `--json`, or the results file of the journal `--resume` names.
    fn json_path(&self) -> anyhow::Result<Option<PathBuf>> {
        match (&self.json, &self.resume) {
            (None, Some(journal)) => Ok(Some(clhip::resume::results_path(journal)?)),
            (json, _) => Ok(json.clone()),
        }
    }
}

/// Why the case `id` is left out, if it is, as a skipped case's reason says it.
fn skipped_by(id: &str, skips: &[SkipGlob], known: Option<&Expectations>) -> Option<String> {
    skip_source(id, skips, known).map(|by| format!("skipped by {by}"))
}

/// The skip globs that match no case of the matrix on this machine, each warned of as a stale
/// expectation is.
fn stale_skips(skips: &[SkipGlob], matrix: &Matrix, probe: &Probe) -> Vec<String> {
    let ids: Vec<String> = matrix
        .expand(&pairs::from_probe(probe))
        .iter()
        .map(Case::id)
        .collect();
    let mut stale = Vec::new();
    for s in skips {
        if !ids.iter().any(|id| matches_filter(&s.glob, id)) {
            note(&format!(
                "clhip: warning: skip {} matches no case of this matrix on this machine",
                s.by
            ));
            stale.push(s.by.clone());
        }
    }
    stale
}

/// The cases `--rerun-failed` names: those worse than expected in an earlier run.
struct Rerun {
    from: PathBuf,
    ids: Vec<String>,
    seed: u64,
}

impl Rerun {
    fn load(path: &Path) -> anyhow::Result<Rerun> {
        let loaded = report::load(path)?;
        // Part of a run still names cases that failed in it: rerun them, and say so.
        for p in &loaded.problems {
            note(&format!("clhip: warning: --rerun-failed {p}"));
        }
        Ok(Rerun {
            from: path.to_path_buf(),
            ids: loaded
                .report
                .results
                .iter()
                .filter(|r| r.unexpected())
                .map(|r| r.id.clone())
                .collect(),
            seed: loaded.report.seed,
        })
    }

    /// The cases of `cases` the earlier run had worse than expected. One that is not a case
    /// here (another machine's run, another --cases) is an error, a warning with --allow-empty;
    /// so is a run with none.
    fn pick(&self, cases: Vec<Case>, allow_empty: bool) -> anyhow::Result<Vec<Case>> {
        let from = self.from.display();
        if self.ids.is_empty() {
            let why = format!(
                "--rerun-failed {from}: no case came out worse than expected in that run, so there is nothing to rerun"
            );
            if !allow_empty {
                bail!("{why} (pass --allow-empty if that is fine)");
            }
            note(&format!("clhip: {why}"));
            return Ok(Vec::new());
        }
        let here: std::collections::HashSet<String> = cases.iter().map(Case::id).collect();
        let missing: Vec<&String> = self.ids.iter().filter(|id| !here.contains(*id)).collect();
        if let Some(first) = missing.first() {
            let why = format!(
                "--rerun-failed {from}: {} of its {} cases worse than expected {} not a case of this matrix on this machine, e.g. `{first}` (a run of another machine, or of another --cases?)",
                missing.len(),
                self.ids.len(),
                if missing.len() == 1 { "is" } else { "are" },
            );
            if !allow_empty {
                bail!("{why}");
            }
            note(&format!("clhip: warning: {why}"));
        }
        note(&format!(
            "clhip: rerunning the {} cases worse than expected in {from}",
            self.ids.len() - missing.len()
        ));
        let wanted: std::collections::HashSet<&str> = self.ids.iter().map(String::as_str).collect();
        Ok(cases
            .into_iter()
            .filter(|c| wanted.contains(c.id().as_str()))
            .collect())
    }
}

/// Fails unless every required pattern (with what requires it: `--require`, a profile)
/// matches a line of this machine's fingerprint and every expectation file marked `required`
/// applies: before any case runs, naming what was found.
fn check_required(
    patterns: &[(String, String)],
    known: Option<&Expectations>,
    probe: &Probe,
) -> anyhow::Result<()> {
    let lines = probe.fingerprint().lines();
    let found = found_devices(probe);
    let mut unmet = Vec::new();
    for (p, by) in patterns {
        if p.trim().is_empty() {
            bail!("{by}: an empty pattern would match any machine");
        }
        if !lines.iter().any(|l| matches_filter(p, l)) {
            unmet.push(format!(
                "{by}: expected a device matching `{p}`; found: {found}"
            ));
        }
    }
    for (file, globs) in known.map_or(&[][..], |k| k.required_unmet.as_slice()) {
        let wants: Vec<String> = globs.iter().map(|g| format!("`{g}`")).collect();
        unmet.push(format!(
            "{} (required): expected a device matching {}; found: {found}",
            file.display(),
            wants.join(" and ")
        ));
    }
    if !unmet.is_empty() {
        bail!(
            "{}
no case was run; `clhip probe` lists this machine's fingerprint lines",
            unmet.join(
                "
"
            )
        );
    }
    Ok(())
}

/// `pocl0 (cpu-haswell-...), cuda0 (NVIDIA H100, sm_90)`: the devices the probe found.
fn found_devices(probe: &Probe) -> String {
    let mut found: Vec<String> = probe
        .platforms
        .iter()
        .flat_map(|p| &p.devices)
        .map(|d| format!("{} ({})", d.label, d.name))
        .collect();
    for rt in probe.device_runtimes() {
        for d in &rt.status.devices {
            found.push(format!(
                "{} ({}, {})",
                rt.device_label(d.ordinal),
                d.name,
                d.arch
            ));
        }
    }
    if found.is_empty() {
        "no device".into()
    } else {
        found.join(", ")
    }
}

/// The cases the filters and --devices select on this machine, narrowed to --rerun-failed's.
/// With --allow-empty, a filter or device that matches nothing here, or a machine with no
/// pair at all, is said on stderr and leaves that much less to run, never more.
fn select_cases(
    args: &RunArgs,
    probe: &Probe,
    matrix: &Matrix,
    rerun: Option<&Rerun>,
) -> anyhow::Result<Vec<Case>> {
    let cases = if args.allow_empty {
        cases_allowing_empty(args, probe, matrix)?
    } else {
        plan::planned_cases(probe, matrix, &args.filters, &args.devices)?
    };
    match rerun {
        Some(r) => r.pick(cases, args.allow_empty),
        None => Ok(cases),
    }
}

fn cases_allowing_empty(
    args: &RunArgs,
    probe: &Probe,
    matrix: &Matrix,
) -> anyhow::Result<Vec<Case>> {
    let mut pairs = pairs::from_probe(probe);
    if !args.devices.is_empty() {
        let mut here = Vec::new();
        for sel in &args.devices {
            match pairs::select(probe, pairs.clone(), std::slice::from_ref(sel)) {
                Ok(_) => here.push(sel.clone()),
                Err(e) => note(&format!("clhip: warning: {e:#} (--allow-empty)")),
            }
        }
        // No selector left selects no pair: never every pair.
        pairs = if here.is_empty() {
            Vec::new()
        } else {
            pairs::select(probe, pairs, &here)?
        };
    } else if pairs.is_empty() {
        note(&format!(
            "clhip: warning: no OpenCL device found, nothing to pair (OpenCL: {}; see `clhip probe`) (--allow-empty)",
            probe.opencl_status
        ));
    }
    let cases = matrix.expand(&pairs);
    if args.filters.is_empty() {
        return Ok(cases);
    }
    let ids: Vec<String> = cases.iter().map(Case::id).collect();
    let mut live = Vec::new();
    for f in &args.filters {
        if ids.iter().any(|id| matches_filter(f, id)) {
            live.push(f.clone());
        } else {
            note(&format!(
                "clhip: warning: filter `{f}` matches none of the {} cases on this machine (--allow-empty)",
                ids.len()
            ));
        }
    }
    // No filter left selects no case: never every case.
    if live.is_empty() {
        return Ok(Vec::new());
    }
    clhip::cases::filter(cases, &live)
}

pub fn run(mut args: RunArgs) -> anyhow::Result<ExitCode> {
    let started = SystemTime::now();
    let clock = Instant::now();
    // Inputs and outputs first: a bad configuration, case file, baseline, filter or output
    // path fails before anything runs, and before anything is written.
    let profile = clhip::config::select(args.config.as_deref(), args.profile.as_deref())?;
    let skips = args.apply(profile.as_ref())?;
    let rerun = args.rerun_failed.as_deref().map(Rerun::load).transpose()?;
    args.seed = args.seed.or(rerun.as_ref().map(|r| r.seed));
    let matrix = load_matrix(args.cases.as_deref())?;
    let baseline = match &args.baseline {
        Some(f) => Some(Baseline::load(f)?),
        None => None,
    };
    let json = args.json_path()?;
    let start_rate = args
        .start_rate
        .as_deref()
        .map(|p| clhip::bench::starts::load(p).map(|r| (p.to_path_buf(), r)))
        .transpose()?;
    let outputs = Outputs::check(
        json.as_deref(),
        args.junit.as_deref(),
        args.markdown.as_deref(),
        args.html.as_deref(),
        &args.inputs(),
    )?;
    let probe = plan::probe_machine(&args.rocm_path)?;
    let known = args
        .expectations
        .as_deref()
        .map(|p| Expectations::load(p, &probe.fingerprint()))
        .transpose()?;
    // The wrong machine is said before anything else it would do. The profile's checks and
    // --require's add up, as skips do.
    let required: Vec<(String, String)> = profile
        .iter()
        .flat_map(|p| {
            let by = format!("profile `{}` of {}", p.name, p.file.display());
            p.require.iter().map(move |r| (r.clone(), by.clone()))
        })
        .chain(args.require.iter().map(|r| (r.clone(), "--require".into())))
        .collect();
    check_required(&required, known.as_ref(), &probe)?;
    // Every OpenCL vendor broke in the probe: that is the finding, named, not "no device".
    if args.mock_cases.is_none()
        && pairs::from_probe(&probe).is_empty()
        && !probe.broken_vendors().is_empty()
    {
        return every_vendor_broke(&args, &matrix, &probe, &outputs, started, clock);
    }
    let mut stale_expectations = Vec::new();
    if let Some(k) = &known {
        for line in k.notes() {
            note(&format!("clhip: {line}"));
        }
        // Mock items are not cases of the matrix: no rule is about them.
        if args.mock_cases.is_none() {
            stale_expectations = check_expectations(k, &matrix, &probe)?;
        }
    }
    if args.mock_cases.is_none() {
        stale_expectations.extend(stale_skips(&skips, &matrix, &probe));
    }
    // Where each known outcome comes from, for the console to name.
    let mut sources = HashMap::new();
    let items = planned_items(
        &args,
        &probe,
        &matrix,
        baseline.as_ref(),
        known.as_ref(),
        rerun.as_ref(),
        &mut sources,
    )?;
    // The whole plan is recorded before the partition takes this shard's share of it: it is
    // what tells shards of one run from strangers, and a merge of every shard from part of one.
    let selection = plan::selection(
        &args.filters,
        &args.devices,
        args.partition,
        &matrix,
        items.iter().map(|p| p.id.as_str()),
    );
    let items: Vec<Planned> = items
        .into_iter()
        .filter(|p| args.partition.is_none_or(|part| part.contains(&p.id)))
        .collect();
    // A resumed run: the same run, checked before anything runs; what it finished is kept.
    let resumed = match &args.resume {
        Some(path) => Some(resume_from(path, &args, &outputs, &selection, &probe)?),
        None => None,
    };
    let stale = stale_baseline(&args, baseline.as_ref(), &matrix, &probe);
    let plan_position: HashMap<String, usize> = items
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.clone(), i))
        .collect();
    // A skipped case is a result like any other, listed with its rule, never silently absent.
    let (items, skipped): (Vec<Planned>, Vec<Planned>) = items
        .into_iter()
        .partition(|p| skipped_by(&p.id, &skips, known.as_ref()).is_none());
    let skipped: Vec<CaseResult> = skipped
        .into_iter()
        .map(|p| {
            let reason = skipped_by(&p.id, &skips, known.as_ref()).unwrap_or_default();
            CaseResult::new(
                p.id,
                p.work,
                Outcome::Skip { reason },
                Expectation::Known(OutcomeKind::Skip),
                0.0,
            )
        })
        .collect();
    // A case whose buffer the device cannot allocate at all is decided here, from the probe,
    // with the same refusal a worker would meet, and costs no worker.
    let (items, mut decided) = plan::decide_by_probe(&probe, items);
    let n_skipped = skipped.len();
    decided.extend(skipped);
    let Resumed {
        items,
        kept,
        newly_incomplete,
    } = match &resumed {
        Some(j) => take_up(j, items, &mut decided, args.rerun_incomplete),
        None => Resumed {
            items,
            kept: Vec::new(),
            newly_incomplete: Vec::new(),
        },
    };
    // A plant that reaches no case that runs leaves a clean run, which the caller would read
    // as a check that caught nothing: the same rule as the run's own filters.
    if !args.plant_only.is_empty() {
        let cases = items
            .iter()
            .filter_map(|p| p.work.case().cloned())
            .collect();
        clhip::cases::filter(cases, &args.plant_only).context("--plant-only")?;
    }
    if items.is_empty() && decided.is_empty() && !args.allow_empty {
        bail!(
            "nothing to run: the filters and the pairs found leave 0 cases (pass --allow-empty if that is intended)"
        );
    }
    for line in pairs::unpaired(&probe) {
        note(&format!("clhip: warning: {line}"));
    }
    let broken_vendors = probe.broken_vendors();
    let fingerprint = probe.fingerprint();
    let exe = WorkerExe::pin()?;
    let mut opts = RunOptionsBuilder::new(&exe, args.seed(), args.timeout.unwrap_or(120.0))
        .workers(
            args.cases_per_worker as usize,
            usize::from(args.jobs.unwrap_or(1)),
            args.spare_workers,
        )
        .retries(args.retries.unwrap_or(0))
        .rocm_paths(&args.rocm_path)
        .plant(args.plant, &args.plant_only)?
        .build();
    opts.gpu_pci = clhip::plan::gpu_pci(&probe, &items);
    opts.no_gpu = clhip::plan::no_gpu_queues(&probe, &items);
    opts.kernel_log_allow = known
        .as_ref()
        .map(Expectations::kernel_log_allow)
        .unwrap_or_default();
    handle_signals(opts.control.clone())?;

    let command: Vec<String> = std::env::args().collect();
    let mut head = RunReport::new(
        args.seed(),
        command.clone(),
        fingerprint.clone(),
        started,
        0.0,
        Vec::new(),
    );
    head.selection = Some(selection.clone());
    head.planted = planted(&args);
    let mut journal = match &resumed {
        Some(_) => {
            let mut j = Journal::reopen(&outputs.json)?;
            // The cases that were running when the run died are recorded as such first.
            for r in &newly_incomplete {
                j.append(&serde_json::to_value(r)?)?;
            }
            Some(j)
        }
        None => {
            let mut head_line = report::journal_head(&head);
            head_line["resume"] = serde_json::to_value(args.resume_key())?;
            Journal::start(&outputs.json, &head_line)?
        }
    };
    let skipped_note = match n_skipped {
        0 => String::new(),
        n => format!(" ({n} more skipped)"),
    };
    if let Some(j) = &journal {
        note(&format!(
            "clhip: {} cases{skipped_note}, seed {}; results are journaled to {} as they land",
            items.len(),
            args.seed(),
            j.path().display()
        ));
    } else {
        note(&format!(
            "clhip: {} cases{skipped_note}, seed {}",
            items.len(),
            args.seed()
        ));
    }
    let mut console = ConsoleReporter::new(items.len() + decided.len())
        .with_sources(sources)
        .with_heartbeat(Some(Duration::from_secs(args.heartbeat)));
    let mut journal_error = None;
    let mut on_event = |e: &runner::Event| {
        console.on_event(e);
        let Some(j) = &mut journal else {
            return;
        };
        let journaled = match e {
            runner::Event::Finished(r) => serde_json::to_value(r)
                .map_err(anyhow::Error::from)
                .and_then(|v| j.append(&v)),
            runner::Event::Started { id, .. } => j.started(id),
            _ => Ok(()),
        };
        if let Err(err) = journaled {
            journal_error.get_or_insert(err);
        }
    };
    for r in &decided {
        on_event(&runner::Event::Finished(Box::new(r.clone())));
    }
    let mut end = runner::run(items, &opts, &mut on_event)?;
    if !kept.is_empty() {
        end.results.extend(kept);
    }
    if !decided.is_empty() || resumed.is_some() {
        // Back into plan order: the decided cases where the matrix put them.
        end.results.extend(decided);
        end.results
            .sort_by_key(|r| plan_position.get(&r.id).copied().unwrap_or(usize::MAX));
    }
    console.finish();
    if let Some(e) = journal_error {
        note(&format!(
            "clhip: warning: the journal missed results: {e:#}"
        ));
    }
    let mut report = RunReport::new(
        args.seed(),
        command,
        fingerprint,
        started,
        clock.elapsed().as_secs_f64(),
        end.results,
    );
    if let Some(j) = &resumed {
        // The run began when the journal did; its wall time is this part's.
        report.started_at = j.head.started_at.clone();
    }
    report.lost_gpus = end.lost_gpus.clone();
    report.worker_starts = Some(opts.control.worker_starts());
    report.worker_starts_by_kind = opts.control.worker_starts_by_kind();
    report.footprint_isolated =
        args.cases_per_worker == 1 && args.jobs.unwrap_or(1) == 1 && !args.spare_workers;
    note(&format!(
        "clhip: {}",
        clhip::bench::starts::floor_line(
            report.wall_s,
            &report.worker_starts_by_kind,
            &clhip::bench::starts::faults_by_kind(&report.results),
            start_rate.as_ref().map(|(p, r)| (p.as_path(), r))
        )
    ));
    report.not_run = end.not_run;
    report.stale_baseline = stale;
    report.stale_baseline.extend(stale_expectations);
    report.broken_vendors = broken_vendors;
    report.selection = Some(selection);
    report.planted = planted(&args);
    report.consistency = clhip::consistency::check(&report.results, &plan::gpu_identities(&probe));
    for line in report.consistency.lines() {
        note(&format!("clhip: {line}"));
    }
    report.status = match &end.stopped {
        None => RunStatus::Complete,
        Some(Stopped::Interrupted) => RunStatus::Interrupted,
        Some(Stopped::Aborted(why)) => RunStatus::Stopped { why: why.clone() },
    };
    let mut stdout = Stdout::new();
    let printed = stdout
        .write(&report::render_matrix(&report.results))
        .and_then(|()| stdout.write(&format!("{}\n", report::closing_line(&report.summary))));
    if !report.stale_baseline.is_empty() {
        note(&format!(
            "clhip: {} baseline entries or expectation globs matched no case (listed in the results file)",
            report.stale_baseline.len()
        ));
    }
    // The results are written whatever happened to stdout, each output whatever happened to
    // the others.
    let written = outputs.write(&report);
    match journal {
        Some(j) if written.json_failed => note(&format!(
            "clhip: the results are kept in the journal {} (`clhip report` reads it)",
            j.path().display()
        )),
        Some(j) => j.finish(),
        None => {}
    }
    written.result()?;
    printed?;
    Ok(exit_status(report))
}

/// The run's plant, for its results: `none` is the control run of a plant, no plant at all.
fn planted(args: &RunArgs) -> Option<clhip::report::Planted> {
    let plant = args.plant.filter(|p| *p != clhip::ops::Plant::None)?;
    let name = serde_json::to_value(plant).ok()?.as_str()?.to_string();
    Some(clhip::report::Planted {
        plant: name,
        only: args.plant_only.clone(),
    })
}

/// The run when every OpenCL vendor broke in the probe: nothing run, each vendor named, the
/// results file written saying so; exit 1.
fn every_vendor_broke(
    args: &RunArgs,
    matrix: &Matrix,
    probe: &Probe,
    outputs: &Outputs,
    started: SystemTime,
    clock: Instant,
) -> anyhow::Result<ExitCode> {
    for v in probe.broken_vendors() {
        note(&format!("clhip: broken driver: {v}"));
    }
    let mut report = RunReport::new(
        args.seed(),
        std::env::args().collect(),
        probe.fingerprint(),
        started,
        clock.elapsed().as_secs_f64(),
        Vec::new(),
    );
    report.broken_vendors = probe.broken_vendors();
    report.planted = planted(args);
    report.status = RunStatus::NothingRun {
        why: "every OpenCL vendor broke in the probe".into(),
    };
    report.selection = Some(plan::selection(
        &args.filters,
        &args.devices,
        args.partition,
        matrix,
        std::iter::empty(),
    ));
    outputs.write(&report).result()?;
    Ok(ExitCode::from(1))
}

/// The items the run's filters select (or its mock actions), each with its expectation: the
/// baseline's, else the expectation files', else none; `sources` gets where each known
/// outcome comes from, for the console to name.
fn planned_items(
    args: &RunArgs,
    probe: &Probe,
    matrix: &Matrix,
    baseline: Option<&Baseline>,
    known: Option<&Expectations>,
    rerun: Option<&Rerun>,
    sources: &mut HashMap<String, String>,
) -> anyhow::Result<Vec<Planned>> {
    Ok(match &args.mock_cases {
        Some(list) => {
            let mut items =
                mock::planned_mocks(&mock::parse_mock_list(list).map_err(anyhow::Error::msg)?);
            if let Some(n) = args.mock_gpus {
                for (k, p) in items.iter_mut().enumerate() {
                    p.gpu = format!("mock{}", k % usize::from(n));
                }
            }
            if args.mock_as_cases {
                mock::judge_as_cases(&mut items, baseline.map(|b| &b.known));
            }
            items
        }
        None => select_cases(args, probe, matrix, rerun)?
            .into_iter()
            .map(|c| {
                let e = match (baseline, known) {
                    (Some(b), _) => b.expectation(&c),
                    (None, Some(k)) => k.expectation(&c),
                    (None, None) => Baseline::unbaselined(&c),
                };
                let source = match (baseline, known) {
                    (Some(b), _) => b.source_of(&c.id()),
                    (None, Some(k)) => k.rule(&c).map(|r| r.at.clone()),
                    (None, None) => None,
                };
                if let Some(at) = source {
                    sources.insert(c.id(), at);
                }
                plan::plan_item(probe, c, e)
            })
            .collect(),
    })
}

/// The baseline's entries that match no case of the matrix on this machine, each warned of:
/// a stale baseline is how a nightly job goes blind.
fn stale_baseline(
    args: &RunArgs,
    baseline: Option<&Baseline>,
    matrix: &Matrix,
    probe: &Probe,
) -> Vec<String> {
    let mut stale = Vec::new();
    if let (Some(b), Some(file)) = (baseline, &args.baseline) {
        let every_case = matrix.expand(&pairs::from_probe(probe));
        stale = b.unmatched(&every_case);
        for id in &stale {
            note(&format!(
                "clhip: warning: baseline {}: `{id}` matches no case of this matrix on this machine",
                file.display()
            ));
        }
        if !stale.is_empty() {
            note(&format!(
                "clhip: warning: {} baseline entries match no case",
                stale.len()
            ));
        }
    }
    stale
}

/// The exit status of a run that lost a GPU: its other GPUs' cases ran, its own did not.
const LOST_GPU_EXIT: u8 = 3;

/// The run's exit status, said on stderr where it is not the verdict: 130 interrupted, 2
/// stopped, 3 a GPU lost, 1 for a broken driver or an outcome worse than expected.
fn exit_status(report: RunReport) -> ExitCode {
    match report.status {
        RunStatus::Interrupted => {
            note(&format!(
                "clhip: interrupted: {} finished, {} not run",
                report.results.len(),
                report.not_run.len()
            ));
            ExitCode::from(130)
        }
        RunStatus::Stopped { why } => {
            note(&format!("clhip: run stopped: {why}"));
            ExitCode::from(2)
        }
        _ if !report.lost_gpus.is_empty() => {
            for lost in &report.lost_gpus {
                note(&format!("clhip: {lost}"));
            }
            ExitCode::from(LOST_GPU_EXIT)
        }
        _ if !report.broken_vendors.is_empty() => {
            for v in &report.broken_vendors {
                note(&format!("clhip: broken driver: {v}"));
            }
            ExitCode::from(1)
        }
        _ if report.summary.unexpected == 0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}
