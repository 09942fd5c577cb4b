//! Scheduling: the plan split into one queue per GPU, runner threads per queue each driving
//! one worker at a time, and what happens when workers cannot start.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};

use anyhow::{Context, bail};

use super::control::{TICK, lock};
use super::death::BatchEnd;
use super::options::RunOptions;
use super::session::{Session, Source};
use super::worker_process::Spares;
use crate::model::Outcome;
use crate::results::{CaseResult, Event, Planned};

/// Workers tried for one case before it is recorded as a harness error.
pub(super) const START_TRIES: u32 = 2;
/// Cases in a row that no worker could start before the run stops: the harness or the device
/// is unusable (after a GPU reset, for one), and every later worker would fail the same way.
pub(super) const START_FAILURES_TO_STOP: usize = 3;

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
    /// Each GPU lost during the run: `GPU <gpu> lost after <case>: <evidence>`. Its cases not
    /// run are `skip`s; the other GPUs went on.
    pub lost_gpus: Vec<String>,
}

/// The next case for a worker: any case for a new one (`env` None), else only one that needs
/// the worker's own environment.
pub(super) fn next_of(
    queue: &mut VecDeque<Planned>,
    env: Option<&[(String, String)]>,
) -> Option<Planned> {
    match env {
        Some(env) if queue.front()?.env != env => None,
        _ => queue.pop_front(),
    }
}

/// What a worker gets from [`next_within`].
pub(super) enum Pick {
    Case(Box<Planned>),
    /// Its next cases are long ones, and as many run on its GPU as may: ask again soon.
    Wait,
    /// Nothing it may take.
    Done,
}

/// [`next_of`], with a long case ([`holds_long`]) taken only while `long_allowed`: else the
/// first short case the worker may take, in queue order.
pub(super) fn next_within(
    queue: &mut VecDeque<Planned>,
    env: Option<&[(String, String)]>,
    long_allowed: bool,
) -> Pick {
    let mut blocked = false;
    for i in 0..queue.len() {
        if env.is_some_and(|e| queue[i].env != e) {
            break;
        }
        if long_allowed || !holds_long(&queue[i]) {
            return queue
                .remove(i)
                .map_or(Pick::Done, |p| Pick::Case(Box::new(p)));
        }
        blocked = true;
    }
    if blocked { Pick::Wait } else { Pick::Done }
}

/// What the runner threads share.
struct Shared {
    /// One queue per GPU, in the plan's order of first appearance.
    queues: Vec<Mutex<VecDeque<Planned>>>,
    /// Per queue, its long cases running now.
    long_now: Vec<std::sync::atomic::AtomicUsize>,
    /// Each queue's GPU.
    gpus: Vec<String>,
    /// The GPUs lost so far, each with what says so.
    lost: Mutex<Vec<(String, String)>>,
    aborted: Mutex<Option<String>>,
    start_failures: Mutex<HashMap<String, u32>>,
    failed_starts_in_a_row: Mutex<usize>,
}

/// Per GPU, `opts.jobs` threads (at least one, at most one per item), each driving one worker
/// at a time, which takes that GPU's cases one by one; what a worker was given and did not
/// start goes back to the front for the next one. Events reach `on_event` on the caller's
/// thread. Results come back in plan order.
pub(super) fn run_workers(
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
    for (_, q) in &mut groups {
        *q = spread_long(std::mem::take(q));
    }
    let threads: Vec<usize> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, (_, q))| std::iter::repeat_n(g, opts.jobs.clamp(1, q.len().max(1))))
        .collect();
    let shared = Shared {
        gpus: groups.iter().map(|(gpu, _)| gpu.clone()).collect(),
        lost: Mutex::new(Vec::new()),
        long_now: groups.iter().map(|_| Default::default()).collect(),
        queues: groups.into_iter().map(|(_, q)| Mutex::new(q)).collect(),
        aborted: Mutex::new(None),
        start_failures: Mutex::new(HashMap::new()),
        failed_starts_in_a_row: Mutex::new(0),
    };
    let (tx, rx) = mpsc::channel::<Event>();
    let mut results = Vec::new();
    let ticking = AtomicBool::new(true);
    let outcome: anyhow::Result<()> = std::thread::scope(|scope| {
        let _ending = heartbeat(scope, &opts.control, &ticking)?;
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
    let lost_gpus = lock(&shared.lost).iter().map(|(_, m)| m.clone()).collect();
    Ok(RunEnd {
        results,
        not_run: not_run.into_iter().map(|(_, id)| id).collect(),
        stopped,
        lost_gpus,
    })
}

/// Whether a case holds its worker long: the reuse op's 2,000 crossings, each a host wait on
/// one API and then the other. Such cases slow each other down when they run side by side on
/// one GPU (on an H200, 30 of them took 15-17 s one at a time and 28 s four or eight at a time:
/// every crossing waits for the GPU to switch contexts), so the queue spreads them out (the
/// H200's full matrix took 91.0 s so and 112.4 s with its reuse cases left together at the
/// end), and at most [`RunOptions::long_at_once`] run at once on one GPU.
fn holds_long(p: &Planned) -> bool {
    p.work
        .case()
        .is_some_and(|c| c.op == crate::model::Op::Reuse)
}

/// `queue` with its long cases ([`holds_long`]) spread evenly among the others, the first at
/// the front, so that few run at once and none are left for the end. Only within each run of
/// cases that share an environment: a worker takes only cases of its own, and a run broken up
/// would cost a worker start per piece. Results are reported in plan order whatever the order
/// run.
pub(super) fn spread_long(queue: VecDeque<Planned>) -> VecDeque<Planned> {
    let mut out = VecDeque::with_capacity(queue.len());
    let mut rest = queue.into_iter().peekable();
    while let Some(first) = rest.next() {
        let mut block = vec![first];
        while let Some(p) = rest.next_if(|p| p.env == block[0].env) {
            block.push(p);
        }
        let (long, short): (Vec<Planned>, Vec<Planned>) = block.into_iter().partition(holds_long);
        let (l, s) = (long.len(), short.len());
        let mut long = long.into_iter();
        let mut placed = 0;
        for (i, p) in short.into_iter().enumerate() {
            // Long case j goes before short case j * s / l.
            while placed < l && placed * s <= i * l {
                out.extend(long.next());
                placed += 1;
            }
            out.push_back(p);
        }
        out.extend(long);
    }
    out
}

/// Ends the heartbeat when dropped.
pub(super) struct Ending<'a>(&'a AtomicBool);

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Starts the heartbeat that lets a stop of the whole run be told from a case's time, in
/// `scope`; it ends when the returned guard drops, however the caller returns, or the scope
/// would wait on it for ever.
pub(super) fn heartbeat<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    control: &'env super::control::RunControl,
    ticking: &'env AtomicBool,
) -> anyhow::Result<Ending<'env>> {
    let ending = Ending(ticking);
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
    Ok(ending)
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
    let gpu = &shared.gpus[queue];
    // A case of this GPU, whose pair a health check opens.
    let sample = lock(&shared.queues[queue]).front().cloned();
    // Whether this thread's worker was last given a long case, counted in `long_now`.
    let mut holding_long = false;
    let on_bus_at_start = opts
        .gpu_pci
        .get(gpu)
        .is_some_and(|pci| !super::health::pci_gone(pci));
    loop {
        if lock(&shared.aborted).is_some() || opts.control.is_interrupted() {
            break;
        }
        if lock(&shared.queues[queue]).is_empty() {
            break;
        }
        // The worker takes case after case from the GPU's queue while it lives: a new worker
        // costs two device contexts, whose creation the NVIDIA driver serialises.
        let mut source = |env: Option<&[(String, String)]>| loop {
            if lock(&shared.aborted).is_some() || opts.control.is_interrupted() {
                return None;
            }
            let mut q = lock(&shared.queues[queue]);
            // Asked again: the worker's last case has ended.
            let long_now = &shared.long_now[queue];
            if std::mem::take(&mut holding_long) {
                long_now.fetch_sub(1, Ordering::SeqCst);
            }
            let allowed =
                opts.long_at_once == 0 || long_now.load(Ordering::SeqCst) < opts.long_at_once;
            match next_within(&mut q, env, allowed) {
                Pick::Case(p) => {
                    if holds_long(&p) {
                        long_now.fetch_add(1, Ordering::SeqCst);
                        holding_long = true;
                    }
                    return Some(*p);
                }
                Pick::Done => return None,
                Pick::Wait => {
                    drop(q);
                    std::thread::sleep(TICK);
                }
            }
        };
        let spares = opts.spare_workers.then_some(&mut spares);
        let before = mine.len();
        let (end, mut requeue) = run_batch(&mut source, spares, opts, &mut send, &mut mine)?;
        let lost_already = lock(&shared.lost).iter().any(|(g, _)| g == gpu);
        if !lost_already
            && let Some(evidence) =
                loss_evidence(&mine[before..], gpu, on_bus_at_start, sample.as_ref(), opts)
        {
            let after = mine.last().map(|r| r.id.clone());
            let mut left = requeue;
            left.extend(lock(&shared.queues[queue]).drain(..));
            lose(shared, gpu, after, evidence, left, &mut send, &mut mine);
            break;
        }
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

/// What says `gpu` is gone after a batch whose results are `new`, if anything does:
/// - its PCI device left the bus (`on_bus_at_start`: it was there when the run began);
/// - a kernel line of a lost GPU (NVRM Xid 79 and kin, amdgpu reset, device lost, ring
///   timeout) that names its PCI device;
/// - such a line that names no device, or where the GPU's device is unknown, and then a health
///   check (a fresh process making `sample`'s contexts) that fails twice.
///
/// A line that names another GPU's device is that GPU's.
pub(super) fn loss_evidence(
    new: &[CaseResult],
    gpu: &str,
    on_bus_at_start: bool,
    sample: Option<&Planned>,
    opts: &RunOptions,
) -> Option<String> {
    let pci = opts.gpu_pci.get(gpu);
    // Only a device seen on the bus when the run began can leave it: an id the probe wrote
    // otherwise than sysfs does must not read as a GPU gone.
    if let Some(pci) = pci
        && on_bus_at_start
        && super::health::pci_gone(pci)
    {
        return Some(format!("its PCI device {pci} is gone from the bus"));
    }
    let mut suspect = None;
    for line in new.iter().flat_map(|r| &r.kernel_log) {
        let Some(loss) = crate::kmsg::gpu_loss(line) else {
            continue;
        };
        match (&loss.pci, pci) {
            (Some(named), Some(own)) if *named == crate::kmsg::pci_device(own) => {
                return Some(format!("the kernel logged {}: `{}`", loss.what, loss.line));
            }
            (Some(_), Some(_)) => {}
            _ => {
                suspect.get_or_insert(loss);
            }
        }
    }
    let suspect = suspect?;
    let (env, case) = match sample {
        Some(p) => (p.env.as_slice(), p.work.case()),
        None => (&[][..], None),
    };
    let mut why = String::new();
    for _ in 0..2 {
        match super::health::open_contexts(opts, env, case, gpu, opts.startup_timeout, false) {
            Ok(_) => return None,
            Err(e) => why = e,
        }
    }
    Some(format!(
        "the kernel logged {}: `{}`; then its health check (a fresh process making its contexts) failed twice: {why}",
        suspect.what, suspect.line
    ))
}

/// Records `gpu` as lost and each of its cases `left` as not run, saying why.
fn lose(
    shared: &Shared,
    gpu: &str,
    after: Option<String>,
    evidence: String,
    left: Vec<Planned>,
    send: &mut dyn FnMut(&Event),
    mine: &mut Vec<CaseResult>,
) {
    let after_text = after.clone().unwrap_or_else(|| "its start".into());
    lock(&shared.lost).push((
        gpu.to_string(),
        format!("GPU {gpu} lost after {after_text}: {evidence}"),
    ));
    send(&Event::GpuLost {
        gpu: gpu.to_string(),
        after,
        evidence: evidence.clone(),
    });
    for item in left {
        let result = CaseResult::new(
            item.id.clone(),
            item.work.clone(),
            Outcome::Skip {
                reason: format!("not run: GPU {gpu} lost after {after_text}: {evidence}"),
            },
            item.expectation,
            0.0,
        );
        send(&Event::Finished(Box::new(result.clone())));
        mine.push(result);
    }
}

/// One worker process working through cases from `source`, one at a time, until it dies,
/// faults, has run `opts.cases_per_worker` cases, or the source has none for it. Returns how it
/// ended and the cases it was given but did not start, which go back to the source's owner.
pub(super) fn run_batch<'q>(
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
