//! `clhip explore`: random shapes over the (path, sync, op) combinations that pass on this
//! machine, for a time budget, so that a fleet of nightly runs with a new seed each night meets
//! the sizes no fixed matrix has (an odd size, a buffer that straddles a page or a 2 MiB
//! boundary). Every failure is shrunk with proptest's shrinking to its smallest size and
//! written as a reproducer.
//!
//! The order: calibration (each combination of the case matrix once, at a small size; those
//! that do not pass are left out, their outcome is the matrix's to report), then exploration
//! until the budget is spent, then shrinking (one failure per combination and outcome kind).
//! All three go through one stream of workers ([`runner::run_stream`]), each worker serving
//! case after case, since the next shape, and every shrinking step, depends on the results
//! before it. Every case is a case of the matrix's kind (its id is `Case::id`), its data drawn
//! from the run seed, its op and its size as `run`'s are: `clhip run --seed S --cases
//! found.toml ID` runs it again. `shape` holds the size strategies, `shrink` one failure's
//! shrinking, `seed` the nightly seed, `found` the case file and the reproducers of what was
//! found.

pub mod found;
pub mod seed;
mod shape;
mod shrink;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::cases::{self, Matrix};
use crate::model::{Case, Expectation, Op, Outcome, OutcomeKind, Pair};
use crate::plan;
use crate::probe::Probe;
use crate::results::{CaseResult, Event, Planned};
use crate::runner::{self, RunOptions, Stopped};

pub use shape::{HUGE_PAGE, PAGE, largest, sizes};
pub use shrink::Shrinker;

/// What an exploration is asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The run seed: the shapes drawn and every case's data come from it.
    pub seed: u64,
    /// How long to explore, after calibration.
    pub budget: Duration,
    /// The largest shared buffer a shape may have, in bytes.
    pub max_bytes: usize,
    /// Most sizes tried in shrinking one failure.
    pub shrink_steps: usize,
}

/// The ops explored unless asked otherwise: every op but placement, which times 20 passes
/// over its buffer to measure where memory lives, and reuse, whose 2,000 crossings make one
/// case cost as much as hundreds of others (`--ops reuse` explores it).
pub const DEFAULT_OPS: [Op; 5] = [Op::Handoff, Op::Fft, Op::Pipeline, Op::Gemm, Op::Cholesky];

/// The size a combination is calibrated at: a small one the op takes, within `max_bytes`.
pub fn calibration_size(op: Op, max_bytes: usize) -> Option<usize> {
    let usual = match op {
        Op::Handoff | Op::Placement | Op::Reuse => 4097,
        Op::Fft => 4096,
        Op::Pipeline => 1024,
        Op::Gemm | Op::Cholesky => 64,
    };
    largest(op, max_bytes).map(|max| usual.min(max))
}

/// The combinations to explore, each once at its calibration size: the matrix's cases on
/// `pairs` that `filters` select (an error for a filter that matches none, as in `run`), of
/// `ops`, without negative controls (their failure is expected).
pub fn combinations(
    matrix: &Matrix,
    pairs: &[Pair],
    filters: &[String],
    ops: &[Op],
    max_bytes: usize,
) -> anyhow::Result<Vec<Case>> {
    let cases = cases::filter(matrix.expand(pairs), filters)?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for c in cases {
        if c.is_negative_control() || !ops.contains(&c.op) {
            continue;
        }
        let Some(n) = calibration_size(c.op, max_bytes) else {
            continue;
        };
        if seen.insert((c.pair.clone(), c.path, c.sync, c.op)) {
            out.push(Case { n, ..c });
        }
    }
    Ok(out)
}

/// One combination and what its calibration gave.
#[derive(Debug, Clone)]
pub struct Combination {
    /// The combination at its calibration size.
    pub case: Case,
    /// None: not run (the run stopped first).
    pub calibration: Option<Outcome>,
}

impl Combination {
    /// `pocl0+host/copy/finish/handoff`: the case id without its size.
    pub fn name(&self) -> String {
        let c = &self.case;
        format!("{}/{}/{}/{}", c.pair.id(), c.path, c.sync, c.op)
    }

    pub fn passes(&self) -> bool {
        matches!(self.calibration, Some(Outcome::Pass { .. }))
    }

    fn at(&self, n: usize) -> Case {
        Case {
            n,
            ..self.case.clone()
        }
    }
}

/// One failure: the first case of a combination that gave an outcome kind, shrunk.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Index into [`Explored::combinations`].
    pub combination: usize,
    pub kind: OutcomeKind,
    /// The case exploring found first.
    pub found: CaseResult,
    /// Other cases of this combination that gave this kind while exploring.
    pub also: Vec<String>,
    /// The smallest case shrinking found to give this kind (`found` if none smaller did).
    pub shrunk: CaseResult,
    /// Each size shrinking tried, with its outcome kind, in order.
    pub tried: Vec<(usize, OutcomeKind)>,
    /// Shrinking stopped at its step limit, not at a size it could not shrink.
    pub ran_out: bool,
}

impl Failure {
    /// The shrunk case.
    pub fn case(&self) -> &Case {
        match self.shrunk.work.case() {
            Some(c) => c,
            None => unreachable!("explore runs cases only"),
        }
    }

    /// One line on how the size was shrunk, for a reproducer's header.
    pub fn shrink_note(&self) -> String {
        let from = self.found.work.case().map_or(0, |c| c.n);
        let to = self.case().n;
        let steps = self.tried.len();
        let how = "with proptest's shrinking, through clhip's workers";
        let limit = if self.ran_out {
            "; stopped at the step limit"
        } else {
            ""
        };
        if from == to {
            format!(
                "kept n={to}: no smaller size gave `{}` {how} ({steps} tried{limit})",
                self.kind
            )
        } else {
            format!(
                "shrunk from n={from} to n={to}, the smallest size that gave `{}` {how} ({steps} tried{limit})",
                self.kind
            )
        }
    }
}

/// What an exploration did.
#[derive(Debug)]
pub struct Explored {
    /// Every case explored and every case shrinking ran, once each, in the order they ran.
    pub results: Vec<CaseResult>,
    pub combinations: Vec<Combination>,
    /// Cases drawn and run while exploring (shrinking's not counted), and the time that took.
    pub explored: usize,
    pub explore_s: f64,
    /// Draws of a case already run, not run again.
    pub repeats: usize,
    /// Exploring ended before the budget: [`REPEATS_TO_STOP`] draws in a row were cases
    /// already run (every shape of a small pool, such as the FFT's powers of two, was).
    pub exhausted: bool,
    pub failures: Vec<Failure>,
    /// Why the run ended early, if it did.
    pub stopped: Option<Stopped>,
}

impl Explored {
    /// Explored cases a minute.
    pub fn per_minute(&self) -> f64 {
        if self.explore_s > 0.0 {
            self.explored as f64 * 60.0 / self.explore_s
        } else {
            0.0
        }
    }
}

/// What a case handed to a worker is for.
enum Purpose {
    Calibrate(usize),
    Explore(usize, Box<dyn ValueTree<Value = usize>>),
    Shrink(usize),
}

enum Phase {
    Calibrate,
    Explore,
    Shrink,
}

/// A failure being shrunk.
struct Shrinking {
    failure: Failure,
    shrinker: Shrinker,
}

/// A combination being explored.
struct Pooled {
    combination: usize,
    sizes: proptest::strategy::BoxedStrategy<usize>,
    env: Vec<(String, String)>,
}

/// Draws of an id already run, in a row, after which the shapes are taken as exhausted.
pub const REPEATS_TO_STOP: usize = 10_000;

struct State<'p> {
    options: &'p Options,
    probe: &'p Probe,
    stop_asked: &'p dyn Fn() -> bool,
    phase: Phase,
    combinations: Vec<Combination>,
    /// Combinations not yet calibrated, in order.
    to_calibrate: std::collections::VecDeque<usize>,
    /// Combinations that passed calibration, each with its sizes and its workers'
    /// environment.
    pool: Vec<Pooled>,
    runner: TestRunner,
    explore_started: Option<Instant>,
    explore_s: f64,
    explored: usize,
    repeats: usize,
    repeats_in_a_row: usize,
    in_flight: HashMap<String, Purpose>,
    /// Every id run (calibration's apart), with its result's place in `results`.
    outcomes: HashMap<String, usize>,
    results: Vec<CaseResult>,
    shrinking: Vec<Shrinking>,
    /// The failure being shrunk now.
    current: usize,
}

impl State<'_> {
    fn planned(&self, case: Case) -> Planned {
        plan::plan_item(self.probe, case, Expectation::Pass)
    }

    /// The next case for a worker (`env`: only one for that environment), or None.
    fn next(&mut self, env: Option<&[(String, String)]>) -> Option<Planned> {
        let fits = |p: &Planned| env.is_none_or(|e| p.env == e);
        loop {
            if (self.stop_asked)() {
                return None;
            }
            match self.phase {
                Phase::Calibrate => {
                    let Some(&i) = self.to_calibrate.front() else {
                        self.start_exploring();
                        continue;
                    };
                    let p = self.planned(self.combinations[i].case.clone());
                    if !fits(&p) {
                        return None;
                    }
                    self.to_calibrate.pop_front();
                    self.in_flight.insert(p.id.clone(), Purpose::Calibrate(i));
                    return Some(p);
                }
                Phase::Explore => {
                    let spent = self
                        .explore_started
                        .is_none_or(|t| t.elapsed() >= self.options.budget);
                    if spent || self.pool.is_empty() || self.repeats_in_a_row >= REPEATS_TO_STOP {
                        self.stop_exploring();
                        continue;
                    }
                    match self.draw(env) {
                        Some(p) => return Some(p),
                        None if self.repeats_in_a_row > 0 => continue,
                        None => return None,
                    }
                }
                Phase::Shrink => {
                    let s = self.shrinking.get_mut(self.current)?;
                    let Some(n) = s.shrinker.next() else {
                        self.current += 1;
                        continue;
                    };
                    let case = self.combinations[s.failure.combination].at(n);
                    let id = case.id();
                    // A size run before (exploring, or an earlier step) is not run again.
                    if let Some(&at) = self.outcomes.get(&id) {
                        let earlier = &self.results[at];
                        let kind = earlier.outcome.kind();
                        s.failure.tried.push((n, kind));
                        s.shrinker.record(kind == s.failure.kind);
                        if kind == s.failure.kind {
                            s.failure.shrunk = earlier.clone();
                        }
                        continue;
                    }
                    let p = self.planned(case);
                    if !fits(&p) {
                        return None;
                    }
                    self.in_flight.insert(id, Purpose::Shrink(self.current));
                    return Some(p);
                }
            }
        }
    }

    fn start_exploring(&mut self) {
        self.pool = self
            .combinations
            .iter()
            .enumerate()
            .filter(|(_, c)| c.passes())
            .filter_map(|(i, c)| {
                Some(Pooled {
                    combination: i,
                    sizes: sizes(c.case.op, self.options.max_bytes)?,
                    env: plan::worker_env(self.probe, &c.case.pair),
                })
            })
            .collect();
        self.explore_started = Some(Instant::now());
        self.phase = Phase::Explore;
    }

    fn stop_exploring(&mut self) {
        self.explore_s = self
            .explore_started
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.phase = Phase::Shrink;
    }

    /// A new shape of a combination whose worker environment is `env` (any for None); None
    /// when no combination suits `env`, or the draw was a case already run (counted).
    fn draw(&mut self, env: Option<&[(String, String)]>) -> Option<Planned> {
        let suits: Vec<usize> = (0..self.pool.len())
            .filter(|&k| env.is_none_or(|e| self.pool[k].env == e))
            .collect();
        if suits.is_empty() {
            return None;
        }
        let pick = (0..suits.len()).new_tree(&mut self.runner).ok()?.current();
        let pooled = &self.pool[suits[pick]];
        let combination = pooled.combination;
        let tree = pooled.sizes.new_tree(&mut self.runner).ok()?;
        let case = self.combinations[combination].at(tree.current());
        let p = self.planned(case);
        if self.outcomes.contains_key(&p.id) {
            self.repeats += 1;
            self.repeats_in_a_row += 1;
            return None;
        }
        self.repeats_in_a_row = 0;
        self.in_flight
            .insert(p.id.clone(), Purpose::Explore(combination, tree));
        Some(p)
    }

    /// A case's result; the result to record, if it is one (calibration's are not).
    fn finished(&mut self, r: &CaseResult) -> Option<CaseResult> {
        let purpose = self.in_flight.remove(&r.id);
        let kind = r.outcome.kind();
        match purpose {
            Some(Purpose::Calibrate(i)) => {
                self.combinations[i].calibration = Some(r.outcome.clone());
                return None;
            }
            Some(Purpose::Explore(combination, tree)) => {
                self.explored += 1;
                if shrinkable(kind) {
                    match self
                        .shrinking
                        .iter_mut()
                        .find(|s| s.failure.combination == combination && s.failure.kind == kind)
                    {
                        Some(s) => s.failure.also.push(r.id.clone()),
                        None => self.shrinking.push(Shrinking {
                            failure: Failure {
                                combination,
                                kind,
                                found: r.clone(),
                                also: Vec::new(),
                                shrunk: r.clone(),
                                tried: Vec::new(),
                                ran_out: false,
                            },
                            shrinker: Shrinker::new(tree, self.options.shrink_steps),
                        }),
                    }
                }
            }
            Some(Purpose::Shrink(k)) => {
                if let Some(s) = self.shrinking.get_mut(k) {
                    let n = r.work.case().map_or(0, |c| c.n);
                    s.failure.tried.push((n, kind));
                    s.shrinker.record(kind == s.failure.kind);
                    if kind == s.failure.kind {
                        s.failure.shrunk = r.clone();
                    }
                }
            }
            // A result the stream charged to no case of ours: recorded as it came.
            None => {}
        }
        self.outcomes.insert(r.id.clone(), self.results.len());
        self.results.push(r.clone());
        Some(r.clone())
    }
}

/// Whether a non-pass is shrunk: wrong data, a fault, a crash, a hang, a refusal. A harness
/// error says nothing of the driver, and a skip ran nothing.
fn shrinkable(kind: OutcomeKind) -> bool {
    !matches!(
        kind,
        OutcomeKind::Pass | OutcomeKind::Error | OutcomeKind::Skip
    )
}

/// The proptest runner whose draws the run seed decides: ChaCha keyed by the seed.
fn seeded_runner(seed: u64) -> TestRunner {
    let mut key = Vec::with_capacity(32);
    for part in 0..4u8 {
        let word = crate::hash::fnv1a64(format!("clhip explore {seed} {part}").as_bytes());
        key.extend_from_slice(&word.to_le_bytes());
    }
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &key),
    )
}

/// Explores `combinations` (from [`combinations`]) on the machine `probe` found, through
/// workers started with `run_options`; `on_result` gets each result recorded as it lands
/// (calibration's are not), `say` a line for each failure and each phase.
pub fn explore(
    options: &Options,
    probe: &Probe,
    combinations: Vec<Case>,
    run_options: &RunOptions,
    on_result: &mut dyn FnMut(&CaseResult),
    say: &mut dyn FnMut(&str),
) -> anyhow::Result<Explored> {
    let control = run_options.control.clone();
    let stop_asked = move || control.is_interrupted();
    let count = combinations.len();
    let state = RefCell::new(State {
        options,
        probe,
        stop_asked: &stop_asked,
        phase: Phase::Calibrate,
        combinations: combinations
            .into_iter()
            .map(|case| Combination {
                case,
                calibration: None,
            })
            .collect(),
        to_calibrate: (0..count).collect(),
        pool: Vec::new(),
        runner: seeded_runner(options.seed),
        explore_started: None,
        explore_s: 0.0,
        explored: 0,
        repeats: 0,
        repeats_in_a_row: 0,
        in_flight: HashMap::new(),
        outcomes: HashMap::new(),
        results: Vec::new(),
        shrinking: Vec::new(),
        current: 0,
    });
    say(&format!(
        "clhip: explore: calibrating {count} combinations, then exploring for {}",
        humantime::format_duration(options.budget)
    ));
    let say = RefCell::new(say);
    let mut announced = (false, false);
    let mut next = |env: Option<&[(String, String)]>| {
        let mut s = state.borrow_mut();
        let p = s.next(env);
        if matches!(s.phase, Phase::Explore) && !announced.0 {
            announced.0 = true;
            let passing = s.pool.len();
            let left_out: Vec<String> = s
                .combinations
                .iter()
                .filter(|c| !c.passes())
                .map(|c| {
                    let how = c
                        .calibration
                        .as_ref()
                        .map_or("not run".to_string(), |o| o.kind().to_string());
                    format!("{} ({how})", c.name())
                })
                .collect();
            drop(s);
            (say.borrow_mut())(&format!(
                "clhip: explore: {passing} combinations pass here and are explored{}",
                if left_out.is_empty() {
                    String::new()
                } else {
                    format!("; left out: {}", left_out.join(", "))
                }
            ));
        } else if matches!(s.phase, Phase::Shrink) && !announced.1 {
            announced.1 = true;
            let line = format!(
                "clhip: explore: {} cases explored in {:.1} s; {} failures to shrink",
                s.explored,
                s.explore_s,
                s.shrinking.len()
            );
            drop(s);
            (say.borrow_mut())(&line);
        }
        p
    };
    let mut on_event = |e: &Event| {
        let Event::Finished(r) = e else {
            return;
        };
        let recorded = state.borrow_mut().finished(r);
        if let Some(r) = recorded {
            if r.outcome.kind() != OutcomeKind::Pass {
                (say.borrow_mut())(&format!(
                    "clhip: explore: {} {}: {}",
                    r.outcome.kind(),
                    r.id,
                    r.outcome.reason()
                ));
            }
            on_result(&r);
        }
    };
    let stopped = runner::run_stream(&mut next, run_options, &mut on_event)?;
    let mut s = state.into_inner();
    if matches!(s.phase, Phase::Explore) {
        s.stop_exploring();
    }
    let failures = s
        .shrinking
        .into_iter()
        .map(|mut k| {
            k.failure.ran_out = k.shrinker.ran_out();
            k.failure
        })
        .collect();
    Ok(Explored {
        results: s.results,
        combinations: s.combinations,
        explored: s.explored,
        explore_s: s.explore_s,
        repeats: s.repeats,
        exhausted: s.repeats_in_a_row >= REPEATS_TO_STOP,
        failures,
        stopped,
    })
}
