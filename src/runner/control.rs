//! The run's control, shared with whoever handles signals: interrupt (Ctrl-C), pause and
//! resume (Ctrl-Z, SIGSTOP, SIGCONT), and the run's own heartbeat, which tells a stop of the
//! whole run from a case's time.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

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
    /// Worker processes started so far: what the run's start floor is counted in.
    starts: AtomicUsize,
    /// The same, by pair kind (`nvidia+cuda`): each kind starts at its own rate.
    starts_by_kind: Mutex<std::collections::BTreeMap<String, usize>>,
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
pub(super) const TICK: Duration = Duration::from_millis(20);
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
    pub(super) fn stop_ticking(&self) {
        *lock(&self.ticks) = Ticks::default();
    }

    /// Whether the run has just come back from a gap no SIGCONT has claimed yet: a case at its
    /// limit then waits (up to [`STOP_CLAIM`]) for the signal thread to count the stop.
    pub(super) fn unclaimed_gap(&self) -> bool {
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

    /// Worker processes this run has started (spares included).
    pub fn worker_starts(&self) -> usize {
        self.starts.load(Ordering::SeqCst)
    }

    /// Worker processes this run has started, by pair kind.
    pub fn worker_starts_by_kind(&self) -> std::collections::BTreeMap<String, usize> {
        lock(&self.starts_by_kind).clone()
    }

    pub(super) fn register(&self, pgid: i32, kind: &str) {
        self.starts.fetch_add(1, Ordering::SeqCst);
        *lock(&self.starts_by_kind)
            .entry(kind.to_string())
            .or_default() += 1;
        lock(&self.workers).insert(pgid);
        // A worker started while paused is stopped as its siblings are.
        if lock(&self.paused_since).is_some() {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGSTOP);
        }
    }

    pub(super) fn unregister(&self, pgid: i32) {
        lock(&self.workers).remove(&pgid);
    }
}

/// A poisoned lock only means another runner thread panicked; the data itself is intact.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
