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
//!
//! The rooms: `schedule` splits the plan into one queue per GPU and drives runner threads over
//! them; `worker_process` starts a worker (through `crate::child`, the one child supervisor)
//! and the spare started ahead of need; `session` follows one worker through its cases;
//! `death` judges how a worker's session ended; `control` is what signal handlers share with
//! the run; `options` is how a run is run; `stream` runs items asked for one at a time, each
//! after the results before it. This file is the entry and the retries.

mod control;
mod death;
pub mod health;
mod options;
mod schedule;
mod session;
mod stream;
mod worker_process;

use std::collections::{HashMap, VecDeque};

use anyhow::bail;

pub use self::control::RunControl;
use self::death::BatchEnd;
pub use self::options::{RunOptions, worker_args};
pub use self::schedule::{RunEnd, Stopped};
use self::schedule::{next_of, run_batch, run_workers};
pub use self::stream::{Next, run_stream};
pub use crate::results::{CaseResult, Event, Planned, Work};

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
    let (opts, _shared) = with_shared_data(opts);
    let opts = &opts;
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

/// `opts` with the run's shared data directory for its workers, and the guard that removes it:
/// the workers make each slow input and reference once between them. Without it (a temporary
/// directory that cannot be made) each worker makes its own.
fn with_shared_data(opts: &RunOptions) -> (RunOptions, Option<tempfile::TempDir>) {
    let shared = crate::ops::data::shared::make_run_dir().ok();
    let mut opts = opts.clone();
    if let Some(dir) = &shared {
        opts.worker_env.push((
            crate::ops::data::shared::DIR_ENV.to_string(),
            dir.path().display().to_string(),
        ));
    }
    (opts, shared)
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

#[cfg(test)]
mod tests;
