//! A run whose items are not known ahead: each is asked for when a worker is ready to take it,
//! after every earlier result has been reported, so that the next item can depend on them
//! (`clhip explore` draws shapes, then shrinks the ones that failed, one run after another).
//! One worker at a time, on the caller's thread; a worker takes item after item until it
//! dies, faults, has run `cases_per_worker` items, or is asked for an environment it lacks.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;

use super::options::RunOptions;
use super::schedule::{START_FAILURES_TO_STOP, START_TRIES, Stopped, heartbeat, run_batch};
use crate::model::Outcome;
use crate::results::{CaseResult, Event, Planned};

use super::death::BatchEnd;

/// Where a stream's items come from. `Some(env)`: only an item that needs that environment
/// (the running worker's own), else `None`, which ends that worker; `None`: any item (a new
/// worker's first). Returning `None` to `None` ends the stream.
pub type Next<'a> = dyn FnMut(Option<&[(String, String)]>) -> Option<Planned> + 'a;

/// Runs the items `next` hands out until it has none, calling `on_event` as things happen:
/// every `Finished` reaches `on_event` before `next` is asked again. An item a worker was given
/// and did not start (it died first) is given again before `next` is asked. A case no worker
/// can start is a harness error; several in a row stop the stream. Returns why the stream
/// stopped before `next` ran dry, if it did.
pub fn run_stream(
    next: &mut Next,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<Option<Stopped>> {
    if opts.cases_per_worker == 0 {
        anyhow::bail!("cases per worker must be at least 1");
    }
    let ticking = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let _ending = heartbeat(scope, &opts.control, &ticking)?;
        pump(next, opts, on_event)
    })
}

fn pump(
    next: &mut Next,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<Option<Stopped>> {
    let mut pending: VecDeque<Planned> = VecDeque::new();
    let mut start_failures: HashMap<String, u32> = HashMap::new();
    let mut failed_starts_in_a_row = 0;
    loop {
        if opts.control.is_interrupted() {
            return Ok(Some(Stopped::Interrupted));
        }
        let mut results = Vec::new();
        let (end, requeue) = {
            let mut source = |env: Option<&[(String, String)]>| {
                if opts.control.is_interrupted() {
                    return None;
                }
                match (pending.front(), env) {
                    (Some(p), Some(env)) if p.env != env => None,
                    (Some(_), _) => pending.pop_front(),
                    (None, env) => next(env),
                }
            };
            run_batch(&mut source, None, opts, on_event, &mut results)?
        };
        for item in requeue.into_iter().rev() {
            pending.push_front(item);
        }
        match end {
            // No item came for a new worker: the stream is dry.
            BatchEnd::Ran if results.is_empty() && pending.is_empty() => {
                return Ok(opts
                    .control
                    .is_interrupted()
                    .then_some(Stopped::Interrupted));
            }
            BatchEnd::Ran => failed_starts_in_a_row = 0,
            BatchEnd::CouldNotStart(why) => {
                let Some(first) = pending.front() else {
                    continue;
                };
                let tries = start_failures.entry(first.id.clone()).or_insert(0);
                *tries += 1;
                if *tries < START_TRIES {
                    continue;
                }
                let tries = *tries;
                let Some(item) = pending.pop_front() else {
                    continue;
                };
                // This case alone is charged, as the harness's error: no verdict on the driver.
                let result = CaseResult::new(
                    item.id.clone(),
                    item.work.clone(),
                    Outcome::Error {
                        reason: format!("no worker could start this case ({tries} tried): {why}"),
                    },
                    item.expectation,
                    0.0,
                );
                on_event(&Event::Finished(Box::new(result)));
                failed_starts_in_a_row += 1;
                if failed_starts_in_a_row >= START_FAILURES_TO_STOP {
                    return Ok(Some(Stopped::Aborted(format!(
                        "{failed_starts_in_a_row} cases in a row could not start a worker; the last: {why}"
                    ))));
                }
            }
        }
    }
}
