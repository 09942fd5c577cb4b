//! `clhip repro` from request to files: the case and the plant checked first (no run for an
//! id the generator cannot emit), the output directory before any run, the outcome learned
//! (a results file's, or a run here), the case shrunk and its data simplified through the
//! workers, then the reproducer written.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::expectations::Baseline;
use crate::generate::DataKind;
use crate::model::{Case, Outcome, OutcomeKind, Pair};
use crate::ops::Plant;
use crate::output::{self, Target};
use crate::plan::{self, RunOptionsBuilder, WorkerExe};
use crate::report::{self, RunReport};
use crate::results::Planned;
use crate::runner::{self, RunOptions};
use crate::{pairs, probe};

use super::{Header, ReproCase};

/// What `clhip repro` is asked for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The case id.
    pub case: String,
    /// The run seed; default: the results file's, else [`plan::DEFAULT_SEED`].
    pub seed: Option<u64>,
    /// The directory to write into.
    pub output: PathBuf,
    /// A results file that holds the case.
    pub from: Option<PathBuf>,
    pub no_shrink: bool,
    pub plant: Option<Plant>,
    /// Per-case time limit of the runs that shrink.
    pub timeout_s: f64,
    pub rocm_path: Option<PathBuf>,
    /// The case was found and shrunk already (by `clhip explore`): its size is kept, and
    /// only its data are still simplified.
    pub shrunk: Option<AlreadyShrunk>,
}

/// What a caller that shrank the case itself knows of it.
#[derive(Debug, Clone)]
pub struct AlreadyShrunk {
    /// The outcome at the case's size.
    pub outcome: Outcome,
    /// Where that outcome was seen, for the header.
    pub seen_from: String,
    /// How the size was shrunk, for the header.
    pub note: String,
    /// The driver fingerprint's lines, and where they come from.
    pub fingerprint: Vec<String>,
    pub fingerprint_from: String,
}

/// What was written: the case at the size, and on the data, it was emitted with.
#[derive(Debug, Clone)]
pub struct Made {
    pub case: ReproCase,
    pub data: DataKind,
    /// The outcome clhip saw for the case as written, with its reason.
    pub seen: Option<(OutcomeKind, String)>,
}

/// Makes the reproducer `req` asks for and writes it; `say` takes each line of progress.
pub fn make(req: &Request, say: &mut dyn FnMut(&str)) -> anyhow::Result<Made> {
    let case = ReproCase::parse(&req.case)?;
    super::check_covered(&case)?;
    super::check_plant(&case, req.plant).context("--plant")?;
    // Before any run: a directory that cannot take the reproducer, or holds the user's own
    // README.md, must not cost a shrink.
    let out_dir = output::check_dir("-o", &req.output, &super::FILES)?;
    let mut ins: Vec<(&str, &Path)> = Vec::new();
    ins.extend(req.from.as_deref().map(|p| ("--from", p)));
    ins.extend(req.rocm_path.as_deref().map(|p| ("--rocm-path", p)));
    let outs: Vec<(&str, &Target)> = out_dir.files.iter().map(|t| ("-o", t)).collect();
    output::refuse_collisions(&outs, &ins)?;
    let from = req
        .from
        .as_deref()
        .map(|f| report::load(f).map(|l| (f, l.report)))
        .transpose()?;
    if let Some((f, r)) = &from
        && let Some(p) = r.plant()
    {
        bail!(
            "{} is the results of a planted run (--plant {}): its outcomes are the plant's, not \
             the driver's, and a reproducer of them would pass; run the case without a plant, \
             or leave out --from",
            f.display(),
            p.describe()
        );
    }
    let seed = match (&from, req.seed) {
        (Some((f, r)), Some(s)) if r.seed != s => bail!(
            "--seed {s}, but {} was run with seed {}: its outcome is for that seed's data",
            f.display(),
            r.seed
        ),
        (Some((_, r)), _) => r.seed,
        (None, s) => s.unwrap_or(plan::DEFAULT_SEED),
    };
    let mut header = Header {
        seed,
        ..Header::default()
    };
    let mut seen: Option<Outcome> = None;
    if let Some(s) = &req.shrunk {
        if from.is_some() {
            bail!("a case shrunk already takes its outcome from its shrink, not from --from");
        }
        seen = Some(s.outcome.clone());
        header.seen_from = s.seen_from.clone();
        header.shrink = s.note.clone();
        header.fingerprint = super::pair_fingerprint(&s.fingerprint, &case);
        header.fingerprint_from = s.fingerprint_from.clone();
    }
    if let Some((f, r)) = &from {
        seen = Some(seen_in(f, r, &case)?.clone());
        header.seen_from = format!("{}", f.display());
        header.fingerprint = super::pair_fingerprint(&r.fingerprint.lines(), &case);
        header.fingerprint_from = format!("the results file {}", f.display());
    }
    // Workers run the case when no file says its outcome, and shrink anything but a pass.
    let seen_pass = seen.as_ref().is_some_and(|o| o.kind() == OutcomeKind::Pass);
    // Shrunk already, only wrong data on data is left to simplify.
    let shrunk_fail_on_data = seen
        .as_ref()
        .is_some_and(|o| o.kind() == OutcomeKind::Fail && super::has_data(case.op));
    let needs_workers = match &req.shrunk {
        Some(_) => shrunk_fail_on_data && !req.no_shrink,
        None => seen.is_none() || !(req.no_shrink || seen_pass),
    };
    let (emit_case, emit_data) = if needs_workers {
        through_workers(req, &case, from.is_none(), &mut header, &mut seen, say)?
    } else {
        if req.shrunk.is_some() {
            header.data = match &seen {
                Some(o) if o.kind() != OutcomeKind::Fail => {
                    format!("not simplified: clhip saw `{}`, not wrong data", o.kind())
                }
                _ if !super::has_data(case.op) => {
                    format!("not simplified: {} has no input data to simplify", case.op)
                }
                _ => "not simplified (--no-shrink)".into(),
            };
        } else if req.no_shrink {
            not_shrunk(&mut header);
        } else {
            seen_a_pass(&mut header, &case);
        }
        (case, DataKind::Seeded)
    };
    if let Some(o) = &seen {
        header.facts = super::issue_facts(o);
    }
    header.seen = seen.map(|o| (o.kind(), o.reason()));
    let reproducer = super::generate(&emit_case, emit_data, &header, req.plant)?;
    reproducer.write_to(&out_dir)?;
    Ok(Made {
        case: emit_case,
        data: emit_data,
        seen: header.seen,
    })
}

/// The outcome results file `f` holds for `case`.
fn seen_in<'a>(f: &Path, r: &'a RunReport, case: &ReproCase) -> anyhow::Result<&'a Outcome> {
    let id = case.to_string();
    let found = r.results.iter().find(|x| x.id == id).with_context(|| {
        format!(
            "{}: no result for case `{id}` in this results file",
            f.display()
        )
    })?;
    Ok(&found.outcome)
}

fn not_shrunk(header: &mut Header) {
    header.shrink = "not shrunk (--no-shrink)".into();
    header.data = "not simplified (--no-shrink)".into();
}

fn seen_a_pass(header: &mut Header, case: &ReproCase) {
    header.shrink = format!("not shrunk: clhip saw a pass at n={}", case.n);
    header.data = "not simplified: clhip saw a pass".into();
}

/// The case run here where no file gave its outcome, then shrunk to the smallest size, and
/// for wrong data the simplest data, that give that outcome: the case and data to emit.
/// `probe_fingerprint`: the header's fingerprint is this machine's (no results file gave one).
fn through_workers(
    req: &Request,
    case: &ReproCase,
    probe_fingerprint: bool,
    header: &mut Header,
    seen: &mut Option<Outcome>,
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<(ReproCase, DataKind)> {
    let probe = plan::probe_machine(req.rocm_path.as_slice())?;
    if probe_fingerprint && req.shrunk.is_none() {
        header.fingerprint = super::pair_fingerprint(&probe.fingerprint().lines(), case);
        header.fingerprint_from = "probed on this machine".into();
    }
    let pair = pair_here(&probe, case)?;
    let exe = WorkerExe::pin()?;
    let workers = Workers {
        env: plan::worker_env(&probe, &pair),
        pair,
        // Under the reproducer's plant: the outcome seen, each smaller size and each simpler
        // input are then the planted driver's, as the program's is.
        opts: RunOptionsBuilder::new(&exe, header.seed, req.timeout_s)
            .rocm_paths(req.rocm_path.as_slice())
            .plant(req.plant, &[])?
            .build(),
    };
    let mut run_cases = |cases: &[(ReproCase, DataKind)]| workers.run(cases, say);
    let outcome = match seen.clone() {
        Some(o) => o,
        None => {
            let o = run_cases(&[(case.clone(), DataKind::Seeded)])?.remove(0);
            header.seen_from = "a run of this build on this machine".into();
            *seen = Some(o.clone());
            o
        }
    };
    let kind = outcome.kind();
    if req.no_shrink {
        not_shrunk(header);
        return Ok((case.clone(), DataKind::Seeded));
    }
    if kind == OutcomeKind::Pass {
        seen_a_pass(header, case);
        return Ok((case.clone(), DataKind::Seeded));
    }
    let emit_case = if req.shrunk.is_some() {
        case.clone()
    } else {
        let shrunk = super::shrink(case, kind, outcome, &mut run_cases)?;
        header.shrink = shrunk.note(case.n, kind);
        if shrunk.case.n != case.n {
            header.seen_from = format!(
                "{} at n={}; at n={} through clhip's workers here",
                header.seen_from, case.n, shrunk.case.n
            );
            *seen = Some(shrunk.outcome.clone());
        }
        shrunk.case
    };
    let mut emit_data = DataKind::Seeded;
    // Wrong data may hang on the data: simpler inputs that still fail read better.
    if kind != OutcomeKind::Fail {
        header.data = format!("not simplified: clhip saw `{kind}`, not wrong data");
    } else if super::has_data(case.op) {
        let simpler = super::simplify_data(&emit_case, kind, &mut run_cases)?;
        header.data = simpler.note(kind);
        if let Some(o) = simpler.outcome {
            header.seen_from = format!("{}; on {} data here", header.seen_from, simpler.kind);
            *seen = Some(o);
        }
        emit_data = simpler.kind;
    }
    Ok((emit_case, emit_data))
}

/// The pair of `case` among those this machine's probe found.
fn pair_here(probe: &probe::Probe, case: &ReproCase) -> anyhow::Result<Pair> {
    let pairs = pairs::from_probe(probe);
    if let Some(pair) = pairs.iter().find(|p| p.id() == case.pair_id()) {
        return Ok(pair.clone());
    }
    let found: Vec<String> = pairs.iter().map(|p| p.id()).collect();
    bail!(
        "pair {} is not on this machine (pairs found: {}); give --from RUN.json --no-shrink to emit the reproducer without running it",
        case.pair_id(),
        if found.is_empty() {
            "none".into()
        } else {
            found.join(", ")
        }
    );
}

/// The workers that run a repro case's variants on its pair, as `run` runs cases.
struct Workers {
    pair: Pair,
    env: Vec<(String, String)>,
    opts: RunOptions,
}

impl Workers {
    /// Runs repro cases, each on its data, and returns their outcomes in order.
    fn run(
        &self,
        cases: &[(ReproCase, DataKind)],
        say: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Vec<Outcome>> {
        let plan: Vec<Planned> = cases
            .iter()
            .map(|(c, data)| {
                let real = Case {
                    pair: self.pair.clone(),
                    path: c.path,
                    sync: c.sync,
                    op: c.op,
                    n: c.n,
                    env: c.env.clone(),
                };
                let e = Baseline::unbaselined(&real);
                let mut p = Planned::case(real, e);
                p.env = self.env.clone();
                p.env
                    .extend(c.env.vars().map(|(k, v)| (k.to_string(), v.to_string())));
                if !data.is_seeded() {
                    // One plan may hold a case on several data: each its own id.
                    p.id = format!("{} data={data}", p.id);
                    p.data = *data;
                }
                p
            })
            .collect();
        let ids: Vec<String> = plan.iter().map(|p| p.id.clone()).collect();
        say(&format!("clhip: running {}", ids.join(", ")));
        let end = runner::run(plan, &self.opts, &mut |_| {})?;
        ids.iter()
            .map(|id| {
                end.results
                    .iter()
                    .find(|r| &r.id == id)
                    .map(|r| r.outcome.clone())
                    .with_context(|| format!("no result came back for {id}"))
            })
            .collect()
    }
}
