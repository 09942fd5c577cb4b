//! The parent side of isolated execution, in the manner of Mesa's deqp-runner: work goes to a
//! worker process in batches; when the worker dies mid-case that case is a `crash`, when a case
//! runs past its timeout the worker's whole process group is killed and the case is a
//! `timeout`, and either way a fresh worker resumes at the next case. What happens is reported
//! as [`Event`]s as it happens (the nextest runner/reporter split), and returned as results.
//!
//! Process hygiene: each worker leads its own process group, so a kill reaches any helper a
//! driver forked. The group is killed while the leader is still an unreaped zombie, so its id
//! cannot have been reused, and every worker is reaped, on every path including errors and
//! panics (a drop guard).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::child::{GroupChild, Line, Tail, crash_signal, describe, harness_exit};
use crate::fault::BufferSpan;
use crate::kmsg::KernelLog;
use crate::model::{Api, ApiError, Outcome};
use crate::protocol::{PREPARE_ENV, WorkItem, WorkerEvent};
pub use crate::results::{CaseResult, Event, Planned, Work};

/// What the runner shares with whoever handles signals: a stop request (Ctrl-C), the live
/// worker process groups (to stop, continue or kill them), and the time the run spent stopped
/// (Ctrl-Z, or a plain SIGSTOP), which no case's time limit counts.
#[derive(Debug, Default)]
pub struct RunControl {
    stop: AtomicBool,
    workers: Mutex<HashSet<i32>>,
    paused_ns: AtomicU64,
    paused_since: Mutex<Option<Instant>>,
    ticks: Mutex<Ticks>,
}

/// The run's own heartbeat. A SIGSTOP cannot be caught, and the monotonic clock runs on while
/// the process is stopped; what shows the stop is a gap between ticks, and the SIGCONT after
/// it says the gap was a stop (not a busy machine). See [`RunControl::tick`].
#[derive(Debug, Default)]
struct Ticks {
    last: Option<Instant>,
    /// The latest gap between ticks longer than [`STOP_GAP`]: when it was seen, and how long
    /// the run was not running in it. A SIGCONT that follows soon claims it as stopped time.
    gap: Option<(Instant, Duration)>,
}

/// How often the run ticks while it runs.
const TICK: Duration = Duration::from_millis(20);
/// A gap between ticks at least this long may be a stop.
const STOP_GAP: Duration = Duration::from_millis(200);
/// How long after a gap its SIGCONT may come, and a case at its limit waits for one: the
/// signal thread may run after the runner threads wake, on a loaded machine by a while.
const STOP_CLAIM: Duration = Duration::from_secs(1);

impl RunControl {
    /// Stops dispatching and kills every worker now; the cases they were running are not run.
    pub fn interrupt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.signal_workers(Signal::SIGKILL);
    }

    pub fn is_interrupted(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Stops every worker (Ctrl-Z of the runner), and starts the paused clock.
    pub fn pause(&self) {
        lock(&self.paused_since).get_or_insert_with(Instant::now);
        self.signal_workers(Signal::SIGSTOP);
    }

    /// On SIGCONT: continues every worker; the time since [`RunControl::pause`] counts against
    /// no case. Without a pause (a plain SIGSTOP of the runner, or of the whole process tree),
    /// the gap in the run's ticks that the stop left counts against no case either.
    pub fn resume(&self) {
        let stopped = match lock(&self.paused_since).take() {
            Some(since) => {
                // The pause's own clock covers the gap its stop left in the ticks.
                let mut t = lock(&self.ticks);
                t.gap = None;
                t.last = Some(Instant::now());
                since.elapsed()
            }
            None => {
                self.tick();
                let mut t = lock(&self.ticks);
                match t.gap.take() {
                    Some((seen, gap)) if seen.elapsed() <= STOP_CLAIM => gap,
                    _ => Duration::ZERO,
                }
            }
        };
        let ns = u64::try_from(stopped.as_nanos()).unwrap_or(u64::MAX);
        self.paused_ns.fetch_add(ns, Ordering::SeqCst);
        self.signal_workers(Signal::SIGCONT);
    }

    /// One heartbeat of the run, every [`TICK`] while it runs (and from each runner thread
    /// before it times a case out): a gap since the last one is kept for a SIGCONT to claim.
    pub fn tick(&self) {
        let now = Instant::now();
        let mut t = lock(&self.ticks);
        if let Some(last) = t.last {
            let gap = now.saturating_duration_since(last);
            if gap >= STOP_GAP {
                // The tick's own interval was time running.
                t.gap = Some((now, gap.saturating_sub(TICK)));
            }
        }
        t.last = Some(now);
    }

    /// Between runs nothing ticks: the next run's first tick is no gap.
    fn stop_ticking(&self) {
        *lock(&self.ticks) = Ticks::default();
    }

    /// Whether the run has just come back from a gap no SIGCONT has claimed yet: a case at its
    /// limit then waits (up to [`STOP_CLAIM`]) for the signal thread to count the stop.
    fn unclaimed_gap(&self) -> bool {
        self.tick();
        lock(&self.ticks)
            .gap
            .is_some_and(|(seen, _)| seen.elapsed() < STOP_CLAIM)
    }

    /// Time the run has spent paused so far, a pause in progress included.
    pub fn paused(&self) -> Duration {
        let done = Duration::from_nanos(self.paused_ns.load(Ordering::SeqCst));
        done + lock(&self.paused_since).map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// The registry lock is held while signalling, and a group leaves it before its leader is
    /// reaped: a group id in it cannot have been reused by a stranger.
    fn signal_workers(&self, signal: Signal) {
        for &pgid in lock(&self.workers).iter() {
            let _ = killpg(Pid::from_raw(pgid), signal);
        }
    }

    fn register(&self, pgid: i32) {
        lock(&self.workers).insert(pgid);
        // A worker started while paused is stopped as its siblings are.
        if lock(&self.paused_since).is_some() {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGSTOP);
        }
    }

    fn unregister(&self, pgid: i32) {
        lock(&self.workers).remove(&pgid);
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    /// Per case, from the worker's `start` line for it.
    pub timeout: Duration,
    /// How long a worker may take to start its next case (runtime initialization comes first)
    /// or to exit after its last one.
    pub startup_timeout: Duration,
    /// Cases per worker process before a fresh one takes over.
    pub cases_per_worker: usize,
    /// Worker processes running at once (deqp-runner's -j). Each has its own device contexts,
    /// so a crash or fault still costs one case only.
    pub jobs: usize,
    pub worker_exe: PathBuf,
    /// The whole argv after `worker_exe`; see [`worker_args`].
    pub worker_args: Vec<String>,
    /// Environment for every worker, on top of the runner's own.
    pub worker_env: Vec<(String, String)>,
    /// Times a case that came out worse than expected is run again alone (`--retries`).
    pub retries: u32,
    /// Each runner thread keeps one worker started ahead of need, its device contexts made,
    /// to take over when its worker ends (a crash or fault ends one by design). Off unless
    /// asked for: it holds a second set of contexts, and bought no time on NVIDIA.
    pub spare_workers: bool,
    pub control: Arc<RunControl>,
}

impl RunOptions {
    /// Defaults for running `exe __worker --seed <seed>`.
    pub fn new(worker_exe: PathBuf, seed: u64) -> Self {
        RunOptions {
            seed,
            timeout: Duration::from_secs(60),
            startup_timeout: Duration::from_secs(30),
            cases_per_worker: 64,
            jobs: 1,
            worker_exe,
            worker_args: worker_args(seed),
            worker_env: Vec::new(),
            retries: 0,
            spare_workers: false,
            control: Arc::new(RunControl::default()),
        }
    }
}

/// The arguments of the hidden worker subcommand.
pub fn worker_args(seed: u64) -> Vec<String> {
    vec!["__worker".into(), "--seed".into(), seed.to_string()]
}

/// Lines of worker output kept for a crash report.
const TAIL_LINES: usize = 20;
/// How often the parent checks whether the worker has exited while waiting for output.
const POLL: Duration = Duration::from_millis(50);
/// How long to collect a dead worker's last output once its group has been killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Workers tried for one case before it is recorded as a harness error.
const START_TRIES: u32 = 2;
/// Cases in a row that no worker could start before the run stops: the harness or the device
/// is unusable (after a GPU reset, for one), and every later worker would fail the same way.
const START_FAILURES_TO_STOP: usize = 3;

/// Why a run ended before its plan did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// Ctrl-C or SIGTERM: finished cases are kept, the rest listed as not run.
    Interrupted,
    /// Workers kept failing to start; the reason is the last worker's.
    Aborted(String),
}

/// What a run produced: one result per case that ran, in plan order, and what did not run.
#[derive(Debug)]
pub struct RunEnd {
    pub results: Vec<CaseResult>,
    pub not_run: Vec<String>,
    pub stopped: Option<Stopped>,
}

/// Runs `plan` in worker processes, calling `on_event` as things happen. Errors: a worker that
/// cannot be spawned at all, or a runner thread that panicked (harness bugs).
pub fn run(
    plan: Vec<Planned>,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<RunEnd> {
    if opts.cases_per_worker == 0 {
        bail!("cases per worker must be at least 1");
    }
    let planned: HashMap<String, Planned> =
        plan.iter().map(|p| (p.id.clone(), p.clone())).collect();
    let mut end = run_workers(plan, opts, on_event)?;
    if opts.retries > 0 && end.stopped.is_none() {
        for r in &mut end.results {
            if !r.unexpected() || opts.control.is_interrupted() {
                continue;
            }
            if let Some(p) = planned.get(&r.id) {
                retry(r, p, &planned, opts)?;
            }
        }
    }
    Ok(end)
}

/// Runs a case that came out worse than expected again alone, `opts.retries` times: a rerun
/// that differs makes it flaky, with both outcomes kept. If it fails in its batch and passes
/// alone, the cases that ran before it in that worker are bisected for the one it fails after.
fn retry(
    r: &mut CaseResult,
    p: &Planned,
    planned: &HashMap<String, Planned>,
    opts: &RunOptions,
) -> anyhow::Result<()> {
    for _ in 0..opts.retries {
        match run_alone(std::slice::from_ref(p), opts)? {
            Some(again) => r.reruns.push(again.outcome),
            None => break,
        }
    }
    let passes_alone = r
        .reruns
        .first()
        .is_some_and(|o| !p.expectation.is_unexpected(o.kind()));
    let before: Vec<Planned> = r
        .predecessors
        .iter()
        .filter_map(|id| planned.get(id).cloned())
        .collect();
    if passes_alone && !before.is_empty() {
        r.fails_only_after = bisect(p, &before, opts)?;
    }
    Ok(())
}

/// The one case of `before` after which `p` fails when both run in one worker, if there is one.
fn bisect(p: &Planned, before: &[Planned], opts: &RunOptions) -> anyhow::Result<Option<String>> {
    let fails_after = |prefix: &[Planned]| -> anyhow::Result<bool> {
        let mut items = prefix.to_vec();
        items.push(p.clone());
        Ok(run_alone(&items, opts)?.is_some_and(|r| r.unexpected()))
    };
    let mut candidates = before;
    while candidates.len() > 1 {
        let (first, second) = candidates.split_at(candidates.len() / 2);
        candidates = if fails_after(first)? { first } else { second };
    }
    match candidates.first() {
        Some(c) if fails_after(std::slice::from_ref(c))? => Ok(Some(c.id.clone())),
        _ => Ok(None),
    }
}

/// Runs `items` in fresh workers, one batch (a new worker only where one dies), and returns the
/// last item's result.
fn run_alone(items: &[Planned], opts: &RunOptions) -> anyhow::Result<Option<CaseResult>> {
    let Some(last) = items.last() else {
        return Ok(None);
    };
    let mut results = Vec::new();
    let mut rest: VecDeque<Planned> = items.iter().cloned().collect();
    while !rest.is_empty() && !opts.control.is_interrupted() {
        let mut source = |env: Option<&[(String, String)]>| next_of(&mut rest, env);
        let (end, leftover) = run_batch(&mut source, None, opts, &mut |_| {}, &mut results)?;
        for item in leftover.into_iter().rev() {
            rest.push_front(item);
        }
        if let BatchEnd::CouldNotStart(_) = end {
            break;
        }
    }
    Ok(results.into_iter().find(|r| r.id == last.id))
}

/// The next case for a worker: any case for a new one (`env` None), else only one that needs
/// the worker's own environment.
fn next_of(queue: &mut VecDeque<Planned>, env: Option<&[(String, String)]>) -> Option<Planned> {
    match env {
        Some(env) if queue.front()?.env != env => None,
        _ => queue.pop_front(),
    }
}

/// What the runner threads share.
struct Shared {
    /// One queue per GPU, in the plan's order of first appearance.
    queues: Vec<Mutex<VecDeque<Planned>>>,
    aborted: Mutex<Option<String>>,
    start_failures: Mutex<HashMap<String, u32>>,
    failed_starts_in_a_row: Mutex<usize>,
}

/// Per GPU, `opts.jobs` threads (at least one, at most one per item), each driving one worker
/// at a time, which takes that GPU's cases one by one; what a worker was given and did not
/// start goes back to the front for the next one. Events reach `on_event` on the caller's
/// thread. Results come back in plan order.
fn run_workers(
    plan: Vec<Planned>,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<RunEnd> {
    let order: HashMap<String, usize> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.clone(), i))
        .collect();
    let mut groups: Vec<(String, VecDeque<Planned>)> = Vec::new();
    for p in plan {
        match groups.iter_mut().find(|(gpu, _)| *gpu == p.gpu) {
            Some((_, q)) => q.push_back(p),
            None => groups.push((p.gpu.clone(), VecDeque::from([p]))),
        }
    }
    let threads: Vec<usize> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, (_, q))| std::iter::repeat_n(g, opts.jobs.clamp(1, q.len().max(1))))
        .collect();
    let shared = Shared {
        queues: groups.into_iter().map(|(_, q)| Mutex::new(q)).collect(),
        aborted: Mutex::new(None),
        start_failures: Mutex::new(HashMap::new()),
        failed_starts_in_a_row: Mutex::new(0),
    };
    let (tx, rx) = mpsc::channel::<Event>();
    let mut results = Vec::new();
    let ticking = AtomicBool::new(true);
    let outcome: anyhow::Result<()> = std::thread::scope(|scope| {
        // The heartbeat that lets a stop of the whole run be told from a case's time; it ends
        // with this closure, however it returns, or the scope would wait on it for ever.
        struct Ending<'a>(&'a AtomicBool);
        impl Drop for Ending<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::SeqCst);
            }
        }
        let _ending = Ending(&ticking);
        let (control, ticking) = (&opts.control, &ticking);
        std::thread::Builder::new()
            .name("clhip-ticks".into())
            .spawn_scoped(scope, move || {
                while ticking.load(Ordering::SeqCst) {
                    control.tick();
                    std::thread::sleep(TICK);
                }
                control.stop_ticking();
            })
            .context("starting the runner's heartbeat")?;
        let mut handles = Vec::new();
        for (i, &queue) in threads.iter().enumerate() {
            let (shared, tx) = (&shared, tx.clone());
            let handle = std::thread::Builder::new()
                .name(format!("clhip-runner-{i}"))
                .spawn_scoped(scope, move || run_thread(shared, queue, opts, tx))
                .context("starting a runner thread")?;
            handles.push(handle);
        }
        drop(tx);
        for event in rx {
            on_event(&event);
        }
        for h in handles {
            match h.join() {
                Ok(r) => results.extend(r?),
                Err(_) => bail!("a runner thread panicked"),
            }
        }
        Ok(())
    });
    outcome?;
    results.sort_by_key(|r| order.get(&r.id).copied().unwrap_or(usize::MAX));
    let done: HashSet<&str> = results.iter().map(|r| r.id.as_str()).collect();
    let mut not_run: Vec<(usize, String)> = order
        .iter()
        .filter(|(id, _)| !done.contains(id.as_str()))
        .map(|(id, &i)| (i, id.clone()))
        .collect();
    not_run.sort();
    let stopped = match lock(&shared.aborted).take() {
        Some(why) => Some(Stopped::Aborted(why)),
        None if opts.control.is_interrupted() => Some(Stopped::Interrupted),
        None => None,
    };
    Ok(RunEnd {
        results,
        not_run: not_run.into_iter().map(|(_, id)| id).collect(),
        stopped,
    })
}

/// One runner thread: worker after worker on its GPU's queue until it is empty or the run
/// stops.
fn run_thread(
    shared: &Shared,
    queue: usize,
    opts: &RunOptions,
    tx: Sender<Event>,
) -> anyhow::Result<Vec<CaseResult>> {
    let mut mine = Vec::new();
    let mut send = |e: &Event| {
        let _ = tx.send(e.clone());
    };
    let mut spares = Spares {
        queue: &shared.queues[queue],
        spare: None,
    };
    loop {
        if lock(&shared.aborted).is_some() || opts.control.is_interrupted() {
            break;
        }
        if lock(&shared.queues[queue]).is_empty() {
            break;
        }
        // The worker takes case after case from the GPU's queue while it lives: a new worker
        // costs two device contexts, whose creation the NVIDIA driver serialises.
        let mut source = |env: Option<&[(String, String)]>| {
            if lock(&shared.aborted).is_some() || opts.control.is_interrupted() {
                return None;
            }
            next_of(&mut lock(&shared.queues[queue]), env)
        };
        let spares = opts.spare_workers.then_some(&mut spares);
        let (end, mut requeue) = run_batch(&mut source, spares, opts, &mut send, &mut mine)?;
        let start_failure = match end {
            BatchEnd::Ran => {
                *lock(&shared.failed_starts_in_a_row) = 0;
                None
            }
            BatchEnd::CouldNotStart(why) => Some(why),
        };
        if let Some(why) = start_failure
            && let Some(first) = requeue.first()
        {
            let tries = {
                let mut f = lock(&shared.start_failures);
                let n = f.entry(first.id.clone()).or_insert(0);
                *n += 1;
                *n
            };
            if tries >= START_TRIES {
                // This case alone is charged, as the harness's error: no verdict on the driver.
                let item = requeue.remove(0);
                let result = CaseResult::new(
                    item.id.clone(),
                    item.work.clone(),
                    Outcome::Error {
                        reason: format!("no worker could start this case ({tries} tried): {why}"),
                    },
                    item.expectation,
                    0.0,
                );
                send(&Event::Finished(Box::new(result.clone())));
                mine.push(result);
                let mut row = lock(&shared.failed_starts_in_a_row);
                *row += 1;
                if *row >= START_FAILURES_TO_STOP {
                    lock(&shared.aborted).get_or_insert(format!(
                        "{} cases in a row could not start a worker; the last: {why}",
                        *row
                    ));
                }
            }
        }
        let mut q = lock(&shared.queues[queue]);
        for item in requeue.into_iter().rev() {
            q.push_front(item);
        }
    }
    Ok(mine)
}

/// A poisoned lock only means another runner thread panicked; the data itself is intact.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

enum BatchEnd {
    /// The worker ran at least one case (or the source had none, or the run was interrupted).
    Ran,
    /// The worker died or stalled before starting its first case.
    CouldNotStart(String),
}

/// How waiting on a worker ended.
#[derive(Clone, Copy)]
enum Stop {
    Exited,
    Stalled,
}

/// Where a worker's cases come from, one at a time. `Some(env)` asks only for a case that needs
/// that environment (the worker's own); `None`, for any case (a new worker's first).
type Source<'s> = dyn FnMut(Option<&[(String, String)]>) -> Option<Planned> + 's;

/// One worker process working through cases from `source`, one at a time, until it dies,
/// faults, has run `opts.cases_per_worker` cases, or the source has none for it. Returns how it
/// ended and the cases it was given but did not start, which go back to the source's owner.
fn run_batch<'q>(
    source: &mut Source<'_>,
    mut spares: Option<&mut Spares<'q>>,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
    results: &mut Vec<CaseResult>,
) -> anyhow::Result<(BatchEnd, Vec<Planned>)> {
    // The spare takes the next case its environment suits; one that suits none is let go.
    let spare = spares.as_mut().and_then(|s| s.take());
    let (first, spare) = match spare {
        Some(spare) => match source(Some(&spare.env)) {
            Some(first) => (Some(first), Some(spare)),
            None => (source(None), None),
        },
        None => (source(None), None),
    };
    let Some(first) = first else {
        return Ok((BatchEnd::Ran, Vec::new()));
    };
    let mut session = Session::start(first, spare, source, spares, opts)?;
    let stop = session.pump(opts, on_event, results)?;
    session.finish(stop, opts, on_event, results)
}

/// A worker started before it is needed: it makes its runtimes and inputs for its runner
/// thread's next case (`protocol::PREPARE_ENV`), then waits for work.
struct Spare {
    worker: WorkerProcess,
    stdin: ChildStdin,
    rx: Receiver<Line>,
    env: Vec<(String, String)>,
}

/// A runner thread's spare worker. A crash or fault ends a worker by design, and a new one
/// spends a few hundred ms making its device contexts (more while other workers make theirs):
/// the spare has made them while the last worker ran cases.
struct Spares<'q> {
    queue: &'q Mutex<VecDeque<Planned>>,
    spare: Option<Spare>,
}

impl Spares<'_> {
    /// Starts a spare for the queue's next case, unless there is one already or none is left.
    fn fill(&mut self, opts: &RunOptions, on_event: &mut dyn FnMut(&Event)) {
        if self.spare.is_some() || opts.control.is_interrupted() {
            return;
        }
        let Some(next) = lock(self.queue).front().cloned() else {
            return;
        };
        // A spare that cannot start costs nothing: a worker is started when one is needed.
        if let Ok((worker, stdin, rx)) = WorkerProcess::spawn(opts, &next.env, next.work.case()) {
            on_event(&Event::SpareStarted { pid: worker.pid() });
            self.spare = Some(Spare {
                worker,
                stdin,
                rx,
                env: next.env,
            });
        }
    }

    /// The spare, while it lives (one that died waiting is let go).
    fn take(&mut self) -> Option<Spare> {
        let spare = self.spare.take()?;
        match spare.worker.has_exited() {
            Ok(false) => Some(spare),
            _ => None,
        }
    }
}

struct Session<'s, 'q> {
    /// The cases given to this worker so far, in order.
    batch: Vec<Planned>,
    source: &'s mut Source<'s>,
    /// Where the next worker waits, started once this one has its contexts.
    spares: Option<&'s mut Spares<'q>>,
    /// This worker was a spare: its runtimes were open before its first case.
    prepared: bool,
    /// Closed (None) once the worker is to get no more cases: it then exits at EOF.
    stdin: Option<ChildStdin>,
    worker: WorkerProcess,
    rx: Receiver<Line>,
    tail: Tail,
    /// Index of the next item to start; everything before it has a result.
    next: usize,
    /// Whether `batch[next]` has started, once the worker said so.
    running: bool,
    /// When the current limit started counting (case start, or the worker becoming idle), and
    /// the run's paused time then: time spent paused (Ctrl-Z) is not counted.
    clock: (Instant, Duration),
    /// The last case ended in a fault or a timeout the worker found itself: the worker takes
    /// no further case and exits by itself (see `worker_main`).
    worker_retired: bool,
    streams_open: usize,
    /// The running case's memory, as the worker announced it.
    buffers: Vec<BufferSpan>,
    /// A harness error the worker reported for the running case before dying.
    harness_error: Option<String>,
    /// The last blocking call the worker announced for the running case.
    blocked_in: String,
    /// The kernel log since the last case ended (or the worker started): a case's lines begin
    /// before the runner hears of its start, which a fault right after it may beat.
    kernel_log: KernelLog,
    /// When the kernel log was last looked at.
    kernel_log_seen: Instant,
    /// A GPU memory fault the kernel logged for this worker during the running case, and how
    /// far into the case it was seen.
    kernel_fault: Option<(Duration, crate::kmsg::KernelFault)>,
}

impl<'s, 'q> Session<'s, 'q> {
    fn start(
        first: Planned,
        spare: Option<Spare>,
        source: &'s mut Source<'s>,
        spares: Option<&'s mut Spares<'q>>,
        opts: &RunOptions,
    ) -> anyhow::Result<Self> {
        let prepared = spare.is_some();
        let (worker, mut stdin, rx) = match spare {
            Some(s) => (s.worker, s.stdin, s.rx),
            None => WorkerProcess::spawn(opts, &first.env, None)?,
        };
        // A worker that is already gone shows as one that could not start its first case.
        let stdin = write_item(&mut stdin, &first).ok().map(|()| stdin);
        Ok(Session {
            batch: vec![first],
            source,
            spares,
            prepared,
            stdin,
            worker,
            rx,
            tail: Tail::new(TAIL_LINES),
            next: 0,
            running: false,
            clock: (Instant::now(), opts.control.paused()),
            worker_retired: false,
            streams_open: 2,
            buffers: Vec::new(),
            harness_error: None,
            blocked_in: String::new(),
            kernel_log: KernelLog::start(),
            kernel_log_seen: Instant::now(),
            kernel_fault: None,
        })
    }

    fn restart_clock(&mut self, opts: &RunOptions) {
        self.clock = (Instant::now(), opts.control.paused());
    }

    /// Time on the current limit, paused time excluded.
    fn elapsed(&self, opts: &RunOptions) -> Duration {
        let (since, paused_then) = self.clock;
        let paused = opts.control.paused().saturating_sub(paused_then);
        since.elapsed().saturating_sub(paused)
    }

    /// Handles worker output until the worker exits or misses its deadline.
    fn pump(
        &mut self,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<Stop> {
        loop {
            if self.worker.has_exited()? {
                return Ok(Stop::Exited);
            }
            let mut limit = if self.running {
                opts.timeout
            } else {
                opts.startup_timeout
            };
            if self.running {
                self.look_for_kernel_fault(opts);
                if let Some((seen, _)) = &self.kernel_fault {
                    limit = limit.min(*seen + KERNEL_FAULT_GRACE);
                }
            }
            let left = limit.saturating_sub(self.elapsed(opts));
            if left.is_zero() {
                // Just back from a stop (SIGSTOP, SIGCONT): its time is not the case's.
                if opts.control.unclaimed_gap() {
                    self.receive(POLL, opts, on_event, results)?;
                    continue;
                }
                return Ok(Stop::Stalled);
            }
            self.receive(left.min(POLL), opts, on_event, results)?;
        }
    }

    /// Reads the kernel log while the case runs: a GPU memory fault of this worker's process
    /// group that no API call returns (a call left waiting on work the fault stopped) ends the
    /// case [`KERNEL_FAULT_GRACE`] later as that fault, not at the timeout.
    fn look_for_kernel_fault(&mut self, opts: &RunOptions) {
        if self.kernel_fault.is_some() || self.kernel_log_seen.elapsed() < KERNEL_LOG_LOOK {
            return;
        }
        self.kernel_log_seen = Instant::now();
        let pgid = self.worker.pid();
        self.kernel_log.poll();
        // The whole window, not only what is new: an amdgpu fault names its process on the
        // line after it, which may come with the next read.
        let fault = crate::kmsg::memory_faults(self.kernel_log.lines())
            .into_iter()
            .find(|f| crate::kmsg::in_group(f.pid, pgid));
        if let Some(fault) = fault {
            self.kernel_fault = Some((self.elapsed(opts), fault));
        }
    }

    /// Waits up to `wait` for one message and handles it.
    fn receive(
        &mut self,
        wait: Duration,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        match self.rx.recv_timeout(wait) {
            Ok(Line::Protocol(line)) => self.on_protocol(line, opts, on_event, results),
            Ok(Line::Output(line)) => {
                self.tail.push(line);
                Ok(())
            }
            Ok(Line::Eof) => {
                self.streams_open -= 1;
                Ok(())
            }
            Err(RecvTimeoutError::Timeout) => Ok(()),
            // Both pipes closed but the worker lives on: keep polling its exit, without spinning.
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                Ok(())
            }
        }
    }

    /// A line on the worker's protocol stream (its original stdout, which only the worker
    /// writes: drivers' stdout goes to its stderr). Driver output never reaches here; a line
    /// that is not a valid message is the harness's error, charged to the running case alone.
    fn on_protocol(
        &mut self,
        line: String,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        let event = match WorkerEvent::parse_line(&line) {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                return self.protocol_error(
                    format!("malformed protocol line ({e}): {line}"),
                    opts,
                    on_event,
                    results,
                );
            }
            None => {
                return self.protocol_error(
                    format!("unprefixed line on the protocol stream: {line}"),
                    opts,
                    on_event,
                    results,
                );
            }
        };
        match event {
            WorkerEvent::Start { id } => {
                let expected = self.batch.get(self.next).map(|p| p.id.as_str());
                if self.running || expected != Some(id.as_str()) {
                    return self.protocol_error(
                        format!(
                            "`start` for `{id}`, expected {}",
                            expected.unwrap_or("no further case")
                        ),
                        opts,
                        on_event,
                        results,
                    );
                }
                self.running = true;
                self.buffers.clear();
                self.harness_error = None;
                self.blocked_in.clear();
                self.kernel_fault = None;
                self.restart_clock(opts);
                if self.prepared {
                    self.fill_spare(opts, on_event);
                }
                on_event(&Event::Started {
                    id,
                    pid: self.worker.pid(),
                });
            }
            WorkerEvent::Done {
                id,
                outcome,
                duration_s,
            } => {
                if !self.running || self.batch[self.next].id != id {
                    return self.protocol_error(
                        format!("`done` for `{id}`, running {}", self.running_id()),
                        opts,
                        on_event,
                        results,
                    );
                }
                self.record(outcome, duration_s, opts, on_event, results);
                self.feed_next(opts);
                self.fill_spare(opts, on_event);
            }
            WorkerEvent::Buffer { span } => self.buffers.push(span),
            WorkerEvent::HarnessError { reason } => self.harness_error = Some(reason),
            WorkerEvent::Blocking { call } => self.blocked_in = call,
        }
        Ok(())
    }

    /// Gives the worker its next case, or EOF when it is to get none: after a fault (it exits
    /// by itself, its context untrusted), after `cases_per_worker` cases, or when the source
    /// has no case for its environment.
    fn feed_next(&mut self, opts: &RunOptions) {
        let Some(stdin) = self.stdin.as_mut() else {
            return;
        };
        let next = if self.worker_retired || self.batch.len() >= opts.cases_per_worker {
            None
        } else {
            (self.source)(Some(&self.batch[0].env))
        };
        let Some(item) = next else {
            self.stdin = None;
            return;
        };
        if write_item(stdin, &item).is_err() {
            // The worker is gone: the case stays in the batch, not started, and goes back.
            self.stdin = None;
        }
        self.batch.push(item);
    }

    /// Starts the thread's next worker once this one has its runtimes (its first case done,
    /// or begun after it was itself a spare): started earlier, the two would make their
    /// contexts at the same time, and the driver makes them one at a time.
    fn fill_spare(&mut self, opts: &RunOptions, on_event: &mut dyn FnMut(&Event)) {
        if let Some(spares) = self.spares.as_mut() {
            spares.fill(opts, on_event);
        }
    }

    fn running_id(&self) -> &str {
        if self.running {
            &self.batch[self.next].id
        } else {
            "nothing"
        }
    }

    /// The worker said something the runner cannot follow: the running case (if any) is a
    /// harness error, and the worker is not trusted with more.
    fn protocol_error(
        &mut self,
        why: String,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        let reason = format!("worker protocol: {why}");
        if self.running {
            let took = self.elapsed(opts).as_secs_f64();
            self.record(Outcome::Error { reason }, took, opts, on_event, results);
        } else {
            self.tail.push(reason);
        }
        self.worker.kill_group();
        Ok(())
    }

    /// Closes the running case with `outcome`.
    fn record(
        &mut self,
        outcome: Outcome,
        duration_s: f64,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) {
        let planned = &self.batch[self.next];
        self.worker_retired = matches!(outcome, Outcome::Fault { .. } | Outcome::Timeout { .. });
        let bad_end = matches!(
            outcome,
            Outcome::Crash { .. } | Outcome::Fault { .. } | Outcome::Timeout { .. }
        );
        let mut result = CaseResult::new(
            planned.id.clone(),
            planned.work.clone(),
            outcome,
            planned.expectation,
            duration_s,
        );
        if bad_end {
            let lines = self.kernel_log.since_start();
            result.kernel_log = crate::kmsg::of_group(lines, self.worker.pid());
        }
        self.kernel_log.clear();
        result.predecessors = self.batch[..self.next]
            .iter()
            .map(|p| p.id.clone())
            .collect();
        on_event(&Event::Finished(Box::new(result.clone())));
        results.push(result);
        self.next += 1;
        self.running = false;
        self.restart_clock(opts);
    }

    /// Ends the worker and decides what its end means for its cases; returns those it did not
    /// start.
    fn finish(
        mut self,
        stop: Stop,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<(BatchEnd, Vec<Planned>)> {
        self.stdin = None;
        match stop {
            Stop::Stalled => self.after_stall(opts, on_event, results)?,
            Stop::Exited => self.after_exit(opts, on_event, results)?,
        }
        let end = if self.next == 0 && !opts.control.is_interrupted() {
            BatchEnd::CouldNotStart(self.could_not_start(stop, opts))
        } else {
            BatchEnd::Ran
        };
        let not_started = self.batch.split_off(self.next);
        Ok((end, not_started))
    }

    fn after_stall(
        &mut self,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        self.worker.kill_and_reap()?;
        if opts.control.is_interrupted() {
            return Ok(());
        }
        if self.running {
            let after_s = self.elapsed(opts).as_secs_f64();
            let blocked_in = std::mem::take(&mut self.blocked_in);
            let outcome = match self.kernel_fault.take() {
                Some((seen, fault)) => {
                    let peer = self.batch[self.next].work.case().map(|c| c.pair.peer.api);
                    kernel_fault_outcome(fault, seen, after_s, &blocked_in, peer)
                }
                None => Outcome::Timeout {
                    after_s,
                    blocked_in,
                },
            };
            self.record(outcome, after_s, opts, on_event, results);
        } else if self.next > 0 {
            let why = if self.next < self.batch.len() {
                format!(
                    "did not start its next case within {:.1} s; killed",
                    opts.startup_timeout.as_secs_f64()
                )
            } else {
                format!(
                    "did not exit within {:.1} s after its last case; killed",
                    opts.startup_timeout.as_secs_f64()
                )
            };
            self.lost(why, on_event);
        }
        Ok(())
    }

    fn after_exit(
        &mut self,
        opts: &RunOptions,
        on_event: &mut dyn FnMut(&Event),
        results: &mut Vec<CaseResult>,
    ) -> anyhow::Result<()> {
        // Helpers left in the group would hold the pipes open; then read what is still in them:
        // a `done` written just before a clean exit, or the last words before a crash.
        self.worker.kill_group();
        let until = Instant::now() + DRAIN_GRACE;
        while self.streams_open > 0 && Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            self.receive(left, opts, on_event, results)?;
        }
        let status = self.worker.kill_and_reap()?;
        // Killed by the interrupt: the case did not run to any end, so it has no outcome.
        if opts.control.is_interrupted() && status.signal() == Some(Signal::SIGKILL as i32) {
            return Ok(());
        }
        if self.running {
            let took = self.elapsed(opts).as_secs_f64();
            let outcome = death_outcome(
                status,
                self.tail.text(),
                self.harness_error.take(),
                &self.buffers,
                self.batch[self.next].work.case(),
            );
            self.record(outcome, took, opts, on_event, results);
        } else if self.next > 0 {
            let retired_by_itself = status.success() && self.worker_retired;
            if !status.success() {
                let when = if self.next < self.batch.len() {
                    "between cases"
                } else {
                    "after its last case"
                };
                self.lost(format!("{} {when}", describe(status)), on_event);
            } else if self.next < self.batch.len() && !retired_by_itself {
                self.lost("exited 0 with cases left".into(), on_event);
            }
        }
        Ok(())
    }

    fn lost(&self, why: String, on_event: &mut dyn FnMut(&Event)) {
        let why = match self.tail.last() {
            Some(line) => format!("{why}; last output: {line}"),
            None => why,
        };
        on_event(&Event::WorkerLost {
            pid: self.worker.pid(),
            after: Some(self.batch[self.next - 1].id.clone()),
            why,
        });
    }

    fn could_not_start(&self, stop: Stop, opts: &RunOptions) -> String {
        let how = match (stop, self.worker.group.status()) {
            (Stop::Stalled, _) => format!(
                "did not start within {:.1} s",
                opts.startup_timeout.as_secs_f64()
            ),
            (Stop::Exited, Some(status)) => format!("ended ({})", describe(status)),
            (Stop::Exited, None) => "ended".to_string(),
        };
        let mut why = format!(
            "worker `{}` (pid {}) {how} before starting `{}`",
            // The pinned executable's /proc/self/fd path says nothing: name the file itself.
            std::fs::read_link(&opts.worker_exe)
                .unwrap_or_else(|_| opts.worker_exe.clone())
                .display(),
            self.worker.pid(),
            self.batch[0].id
        );
        if !self.tail.is_empty() {
            why.push_str("; its last output:\n");
            why.push_str(&self.tail.text());
        }
        why
    }
}

/// The verdict on a case whose worker died while running it.
/// - The worker said it hit its own bug (a panic), or exited as clhip does on an internal
///   error (status 2) or a panic (101): a harness error, never the driver's crash.
/// - ROCm's runtime printed its GPU page-fault line before aborting: a `fault`, with the node,
///   the address (placed among the case's buffers) and the reason.
/// - Otherwise a `crash`: a signal is the classic one; a plain exit mid-case (a runtime calling
///   exit()) has no signal, so it is recorded as signal 0 with the exit status as its name.
fn death_outcome(
    status: ExitStatus,
    stderr_tail: String,
    harness_error: Option<String>,
    buffers: &[BufferSpan],
    case: Option<&crate::model::Case>,
) -> Outcome {
    if let Some(reason) = harness_error {
        return Outcome::Error { reason };
    }
    if let Some(f) = crate::fault::parse_rocr_fault(&stderr_tail) {
        let api = match case {
            Some(c) if c.pair.peer.api != Api::Host => c.pair.peer.api,
            _ => Api::OpenCl,
        };
        return Outcome::Fault {
            error: ApiError {
                api,
                call: "ROCr GPU page-fault handler (the process then aborted)".into(),
                code: i64::from(status.signal().unwrap_or(0)),
                name: "Memory access fault".into(),
                detail: format!(
                    "GPU node-{}, address {:#x} {}; reason: {}; ROCr said: {}",
                    f.node,
                    f.address,
                    crate::fault::locate(f.address, buffers),
                    f.reason,
                    f.line
                ),
            },
        };
    }
    if let Some((code, which)) = harness_exit(status) {
        let last = stderr_tail.lines().last().unwrap_or("no output");
        return Outcome::Error {
            reason: format!("the worker exited with status {code} ({which}): {last}"),
        };
    }
    crash_outcome(status, stderr_tail)
}

/// A case ended after the kernel logged a GPU memory fault of its worker that no API call
/// returned. It is a `fault`: the device reported one, through the kernel driver; the call it
/// hung in is named, so the missing report (a driver bug of its own) is not lost. The log names
/// the process, not which API's context faulted: the error's API is that of the call left
/// waiting.
fn kernel_fault_outcome(
    fault: crate::kmsg::KernelFault,
    seen: Duration,
    after_s: f64,
    blocked_in: &str,
    peer: Option<Api>,
) -> Outcome {
    let call = blocked_in.split_whitespace().next().unwrap_or("");
    let api = if call.starts_with("cl") {
        Api::OpenCl
    } else if call.starts_with("hip") {
        Api::Hip
    } else if call.starts_with("cu") {
        Api::Cuda
    } else {
        peer.filter(|&a| a != Api::Host).unwrap_or(Api::OpenCl)
    };
    // Displayed as "<call> returned <name> (<code>)": the call here is where it was seen.
    let call = if call.is_empty() {
        "the kernel log (no API call reported it)".to_string()
    } else {
        format!("the kernel log (no API call reported it; {call} hung)")
    };
    let waiting = if blocked_in.is_empty() {
        String::new()
    } else {
        format!("; the last blocking call announced: {blocked_in}")
    };
    Outcome::Fault {
        error: ApiError {
            api,
            call,
            code: fault.code,
            name: fault.name,
            detail: format!(
                "`{}`, logged {:.1} s into the case; ended {:.1} s later with no API having \
                 reported it{waiting}",
                fault.line,
                seen.as_secs_f64(),
                after_s - seen.as_secs_f64()
            ),
        },
    }
}

/// How long an API may stay silent about a GPU memory fault the kernel has logged for its
/// process. CUDA returns one to a waiting call well within a second (a whole faulting case,
/// fault reported, takes 0.65 s on an H200); an API silent for seconds has left its caller
/// waiting on work the fault stopped, for good (on an H100, 12 such cases sat out the whole
/// 30 s timeout before this watch).
const KERNEL_FAULT_GRACE: Duration = Duration::from_secs(2);

/// How often the runner reads the kernel log while a case runs.
const KERNEL_LOG_LOOK: Duration = Duration::from_millis(250);

fn crash_outcome(status: ExitStatus, stderr_tail: String) -> Outcome {
    let (signal, signal_name) = crash_signal(status);
    Outcome::Crash {
        signal,
        signal_name,
        stderr_tail,
        process: String::new(),
    }
}

/// Writes the batch to the worker's stdin from a thread, then closes it (EOF ends the batch).
/// A thread, because a large batch can fill the pipe while the worker is busy with a case and
/// the parent must keep watching the clock meanwhile. Write errors are the worker having died,
/// which the parent learns about from its exit.
/// One work item, as one line on the worker's stdin. The worker holds at most this one unread
/// line, so the write never waits on a full pipe.
fn write_item(stdin: &mut ChildStdin, p: &Planned) -> anyhow::Result<()> {
    let item = WorkItem {
        id: p.id.clone(),
        work: p.work.clone(),
        data: p.data,
    };
    let mut line = serde_json::to_string(&item).context("encoding a work item")?;
    line.push('\n');
    stdin
        .write_all(line.as_bytes())
        .and_then(|()| stdin.flush())
        .context("writing a work item to the worker")
}

/// A worker process leading its own process group, registered with the run's control while
/// it lives; killed and reaped on drop at the latest.
struct WorkerProcess {
    group: GroupChild,
}

impl WorkerProcess {
    /// Starts a worker with `env` on top of the run's; `prepare` makes it a spare that opens
    /// the runtimes of that case before its first work item.
    fn spawn(
        opts: &RunOptions,
        env: &[(String, String)],
        prepare: Option<&crate::model::Case>,
    ) -> anyhow::Result<(Self, ChildStdin, Receiver<Line>)> {
        let prepare = prepare
            .map(serde_json::to_string)
            .transpose()
            .context("encoding a spare worker's case")?
            .map(|json| (PREPARE_ENV.to_string(), json));
        let mut group = GroupChild::spawn(
            Command::new(&opts.worker_exe)
                .args(&opts.worker_args)
                .envs(opts.worker_env.iter().map(|(k, v)| (k, v)))
                .envs(env.iter().map(|(k, v)| (k, v)))
                .envs(prepare.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::piped()),
        )
        .with_context(|| format!("starting worker {}", opts.worker_exe.display()))?;
        let pgid = group.pgid();
        crate::trace::mark(&format!("spawned worker {pgid}"));
        opts.control.register(pgid.as_raw());
        // The group leaves the run's registry before the reap, so no signal can reach a
        // reused id. From here on the guard owns the child: an error below still reaps it.
        let control = opts.control.clone();
        group.on_kill(move |pgid| control.unregister(pgid));
        let (stdin, rx) = group.lines("clhip-reader")?;
        let stdin = stdin.context("worker spawned without its pipes")?;
        Ok((WorkerProcess { group }, stdin, rx))
    }

    fn pid(&self) -> u32 {
        self.group.pid()
    }

    fn has_exited(&self) -> anyhow::Result<bool> {
        self.group.has_exited()
    }

    fn kill_group(&self) {
        self.group.kill_group();
    }

    fn kill_and_reap(&mut self) -> anyhow::Result<ExitStatus> {
        self.group.kill_and_reap()
    }
}

#[cfg(test)]
mod tests;
