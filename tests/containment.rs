//! Containment: a worker that crashes, aborts, exits, hangs or faults costs exactly one case, the
//! run goes on at the next case in a fresh worker, and no process of a killed worker survives.
//! Runs the real `clhip __worker` with mock work items; no GPU needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clhip::mock::{MockAction, planned_mocks};
use clhip::model::{Outcome, OutcomeKind};
use clhip::runner::{self, CaseResult, Event, RunAborted, RunOptions};

fn options() -> RunOptions {
    let mut opts = RunOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_clhip")), 7);
    opts.timeout = Duration::from_secs(2);
    opts.startup_timeout = Duration::from_secs(10);
    opts
}

/// Runs the mocks, returning the results and the worker pid each case started in.
fn run_mocks(
    actions: &[MockAction],
    opts: &RunOptions,
) -> (Vec<CaseResult>, BTreeMap<String, u32>, Vec<Event>) {
    let mut pids = BTreeMap::new();
    let mut events = Vec::new();
    let results = runner::run(planned_mocks(actions), opts, &mut |e: &Event| {
        if let Event::Started { id, pid } = e {
            pids.insert(id.clone(), *pid);
        }
        events.push(e.clone());
    })
    .expect("run");
    (results, pids, events)
}

fn by_id(results: &[CaseResult]) -> BTreeMap<&str, &Outcome> {
    results
        .iter()
        .map(|r| (r.id.as_str(), &r.outcome))
        .collect()
}

/// Live (non-zombie) processes in the process group `pgid`; a worker leads its own group.
/// From /proc rather than `killpg(pgid, 0)`, which also succeeds for a killed helper that became
/// a zombie of an init that does not reap (as in some containers): dead, but not yet gone.
fn live_members(pgid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // `pid (comm) state ppid pgrp ...`; comm may contain spaces, so split after `)`.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
            fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
        })
        .collect()
}

#[test]
fn each_failure_costs_one_case_and_the_run_goes_on() {
    use MockAction::*;
    let actions = [
        Pass,
        Segfault,
        Pass,
        Abort,
        Pass,
        Hang,
        Pass,
        Exit,
        Pass,
        Fault,
        Pass,
        Fail,
        Unsupported,
    ];
    let began = Instant::now();
    let (results, pids, events) = run_mocks(&actions, &options());

    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    let planned: Vec<String> = planned_mocks(&actions).into_iter().map(|p| p.id).collect();
    assert_eq!(ids, planned, "one result per item, in plan order");

    let outcomes = by_id(&results);
    for r in results.iter().filter(|r| r.id.starts_with("mock/pass/")) {
        assert_eq!(
            r.outcome.kind(),
            OutcomeKind::Pass,
            "{}: {:?}",
            r.id,
            r.outcome
        );
    }
    match outcomes["mock/segfault/1"] {
        Outcome::Crash {
            signal_name,
            stderr_tail,
            ..
        } => {
            assert_eq!(signal_name, "SIGSEGV");
            // Driver chatter on stdout reaches the tail, not the protocol.
            assert!(
                stderr_tail.contains("driver chatter on stdout"),
                "{stderr_tail}"
            );
            assert!(stderr_tail.contains("writing through 0x8"), "{stderr_tail}");
        }
        other => panic!("segfault: {other:?}"),
    }
    match outcomes["mock/abort/3"] {
        Outcome::Crash { signal_name, .. } => assert_eq!(signal_name, "SIGABRT"),
        other => panic!("abort: {other:?}"),
    }
    match outcomes["mock/hang/5"] {
        Outcome::Timeout { after_s } => assert!((2.0..10.0).contains(after_s), "{after_s}"),
        other => panic!("hang: {other:?}"),
    }
    match outcomes["mock/exit/7"] {
        Outcome::Crash {
            signal,
            signal_name,
            ..
        } => assert_eq!((*signal, signal_name.as_str()), (0, "exit status 3")),
        other => panic!("exit: {other:?}"),
    }
    assert_eq!(outcomes["mock/fault/9"].kind(), OutcomeKind::Fault);
    assert_eq!(outcomes["mock/fail/11"].kind(), OutcomeKind::Fail);
    assert_eq!(
        outcomes["mock/unsupported/12"].kind(),
        OutcomeKind::Unsupported
    );
    // Every mock expects its own outcome: a correct runner has nothing unexpected.
    assert!(results.iter().all(|r| !r.unexpected()));

    // A fresh worker after each crash, exit, timeout and fault, and not otherwise.
    assert_eq!(pids["mock/pass/0"], pids["mock/segfault/1"]);
    let workers: BTreeSet<u32> = pids.values().copied().collect();
    assert_eq!(workers.len(), 6, "{pids:?}");
    // Clean ends are not reported as lost workers.
    assert!(
        !events.iter().any(|e| matches!(e, Event::WorkerLost { .. })),
        "{events:?}"
    );

    // Nothing of any worker survives, including the helper the hanging one left behind.
    for pid in workers {
        let live = live_members(pid);
        assert!(live.is_empty(), "process group {pid} still has: {live:?}");
    }
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn batches_get_fresh_workers() {
    let mut opts = options();
    opts.cases_per_worker = 2;
    let (results, pids, _) = run_mocks(&[MockAction::Pass; 5], &opts);
    assert!(
        results
            .iter()
            .all(|r| r.outcome.kind() == OutcomeKind::Pass)
    );
    let workers: BTreeSet<u32> = pids.values().copied().collect();
    assert_eq!(workers.len(), 3, "{pids:?}");
}

#[test]
fn a_worker_that_cannot_start_stops_the_run_with_what_it_said() {
    let mut opts = options();
    opts.worker_args = vec!["__worker".into(), "--no-such-flag".into()];
    let err = runner::run(planned_mocks(&[MockAction::Pass]), &opts, &mut |_| {})
        .expect_err("a worker that rejects its arguments cannot run anything");
    let aborted = err.downcast_ref::<RunAborted>().expect("RunAborted");
    assert_eq!(aborted.not_run, ["mock/pass/0"]);
    assert!(aborted.why.contains("exit status 2"), "{}", aborted.why);
    assert!(aborted.why.contains("--no-such-flag"), "{}", aborted.why);
}

#[test]
fn a_worker_that_never_starts_is_killed_at_the_startup_timeout() {
    let mut opts = options();
    // A stand-in worker that reads nothing and says nothing.
    opts.worker_exe = PathBuf::from("sleep");
    opts.worker_args = vec!["30".into()];
    opts.startup_timeout = Duration::from_millis(500);
    let began = Instant::now();
    let err = runner::run(planned_mocks(&[MockAction::Pass]), &opts, &mut |_| {})
        .expect_err("nothing can start");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    let aborted = err.downcast_ref::<RunAborted>().expect("RunAborted");
    assert!(
        aborted.why.contains("did not start within 0.5 s"),
        "{}",
        aborted.why
    );
}

#[test]
fn parallel_workers_contain_failures_and_keep_plan_order() {
    use MockAction::*;
    let actions = [
        Pass, Segfault, Pass, Abort, Fault, Pass, Hang, Pass, Exit, Pass,
    ];
    let mut opts = options();
    opts.jobs = 3;
    opts.cases_per_worker = 2;
    let (results, _pids, _events) = run_mocks(&actions, &opts);
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    let planned: Vec<String> = planned_mocks(&actions).into_iter().map(|p| p.id).collect();
    assert_eq!(ids, planned, "one result per item, in plan order");
    for (r, a) in results.iter().zip(actions) {
        assert_eq!(
            r.outcome.kind(),
            a.expected_kind(),
            "{}: {:?}",
            r.id,
            r.outcome
        );
    }
}
