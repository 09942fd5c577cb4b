//! Containment: a worker that crashes, aborts, exits, hangs or faults costs exactly one case, the
//! run goes on at the next case in a fresh worker, and no process of a killed worker survives.
//! Runs the real `clhip __worker` with mock work items; no GPU needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clhip::mock::{MockAction, planned_mocks};
use clhip::model::{Outcome, OutcomeKind};
use clhip::runner::{self, CaseResult, Event, RunOptions, Stopped};

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
    let end = runner::run(planned_mocks(actions), opts, &mut |e: &Event| {
        if let Event::Started { id, pid } = e {
            pids.insert(id.clone(), *pid);
        }
        events.push(e.clone());
    })
    .expect("run");
    assert_eq!(end.stopped, None, "{:?}", end.not_run);
    (end.results, pids, events)
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
        Outcome::Timeout {
            after_s,
            blocked_in,
        } => {
            assert!((2.0..10.0).contains(after_s), "{after_s}");
            // The call the worker announced before it blocked is what the timeout names.
            assert_eq!(blocked_in, clhip::mock::HANG_CALL);
        }
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
fn a_case_no_worker_can_start_is_a_harness_error_and_a_run_of_them_stops() {
    let mut opts = options();
    opts.worker_args = vec!["__worker".into(), "--no-such-flag".into()];
    let end = runner::run(planned_mocks(&[MockAction::Pass]), &opts, &mut |_| {}).unwrap();
    assert_eq!(end.stopped, None);
    let Outcome::Error { reason } = &end.results[0].outcome else {
        panic!("{:?}", end.results[0].outcome);
    };
    assert!(reason.contains("exit status 2"), "{reason}");
    assert!(reason.contains("--no-such-flag"), "{reason}");
    assert!(reason.contains("2 tried"), "{reason}");

    // Three cases in a row that no worker can start: the harness or the device is unusable,
    // and the rest are not run.
    let end = runner::run(planned_mocks(&[MockAction::Pass; 5]), &opts, &mut |_| {}).unwrap();
    assert_eq!(end.results.len(), 3);
    assert_eq!(end.not_run, ["mock/pass/3", "mock/pass/4"]);
    let Some(Stopped::Aborted(why)) = &end.stopped else {
        panic!("{:?}", end.stopped);
    };
    assert!(why.contains("3 cases in a row"), "{why}");
}

#[test]
fn a_worker_that_never_starts_is_killed_at_the_startup_timeout() {
    let mut opts = options();
    // A stand-in worker that reads nothing and says nothing.
    opts.worker_exe = PathBuf::from("sleep");
    opts.worker_args = vec!["30".into()];
    opts.startup_timeout = Duration::from_millis(500);
    let began = Instant::now();
    let end = runner::run(planned_mocks(&[MockAction::Pass]), &opts, &mut |_| {}).unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    let Outcome::Error { reason } = &end.results[0].outcome else {
        panic!("{:?}", end.results[0].outcome);
    };
    assert!(reason.contains("did not start within 0.5 s"), "{reason}");
}

#[test]
fn a_panic_is_a_harness_error_and_chatter_is_not_protocol() {
    use MockAction::*;
    let (results, _, _) = run_mocks(&[Noisy, Panic, Pass, Noisy], &options());
    let kinds: Vec<OutcomeKind> = results.iter().map(|r| r.outcome.kind()).collect();
    assert_eq!(
        kinds,
        [
            OutcomeKind::Pass,
            OutcomeKind::Error,
            OutcomeKind::Pass,
            OutcomeKind::Pass
        ]
    );
    let reason = results[1].outcome.reason();
    assert!(
        reason.contains("panicked") && reason.contains("a harness bug"),
        "{reason}"
    );
}

#[test]
fn rocr_fault_line_then_abort_is_a_fault_placed_in_the_buffers() {
    let (results, _, _) = run_mocks(&[MockAction::RocrFault, MockAction::Pass], &options());
    let Outcome::Fault { error } = &results[0].outcome else {
        panic!("{:?}", results[0].outcome);
    };
    assert!(error.detail.contains("GPU node-2"), "{}", error.detail);
    assert!(error.detail.contains("0x7f9587e09000"), "{}", error.detail);
    assert!(
        error
            .detail
            .contains("Page not present or supervisor privilege"),
        "{}",
        error.detail
    );
    assert!(
        error
            .detail
            .contains("4 KiB past the end of the mock shared memory (fine-grain SVM)"),
        "{}",
        error.detail
    );
    assert_eq!(results[1].outcome.kind(), OutcomeKind::Pass);
}

#[test]
fn an_interrupt_keeps_what_finished_and_lists_the_rest_as_not_run() {
    use MockAction::*;
    let opts = options();
    let control = opts.control.clone();
    let mut finished = 0;
    let end = runner::run(planned_mocks(&[Pass, Pass, Hang, Pass]), &opts, &mut |e| {
        if let Event::Started { id, .. } = e
            && id.starts_with("mock/hang")
        {
            control.interrupt();
        }
        if let Event::Finished(_) = e {
            finished += 1;
        }
    })
    .unwrap();
    assert_eq!(end.stopped, Some(Stopped::Interrupted));
    assert_eq!(end.results.len(), 2);
    assert_eq!(finished, 2);
    assert_eq!(end.not_run, ["mock/hang/2", "mock/pass/3"]);
}

#[test]
fn time_paused_does_not_count_against_a_case() {
    let mut opts = options();
    opts.timeout = Duration::from_secs(1);
    let control = opts.control.clone();
    // A case of 0.8 s, paused for 1.5 s in its middle: 2.3 s of wall time, 0.8 s of its own.
    // Counting the pause would time it out against its 1 s limit.
    let pauser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        control.pause();
        std::thread::sleep(Duration::from_millis(1500));
        control.resume();
    });
    let (results, _, _) = run_mocks(&[MockAction::Slow], &opts);
    pauser.join().unwrap();
    assert!(
        results
            .iter()
            .all(|r| r.outcome.kind() == OutcomeKind::Pass),
        "{:?}",
        results
            .iter()
            .map(|r| r.outcome.reason())
            .collect::<Vec<_>>()
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

#[test]
fn a_case_that_fails_then_passes_alone_is_flaky_with_both_outcomes() {
    let mut opts = options();
    opts.retries = 2;
    let mark = std::env::temp_dir().join(format!("clhip-flaky-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    opts.worker_env = vec![("CLHIP_MOCK_FLAKY_MARK".into(), mark.display().to_string())];
    let (results, _, _) = run_mocks(&[MockAction::Pass, MockAction::FlakyOnce], &opts);
    let r = &results[1];
    assert_eq!(r.outcome.kind(), OutcomeKind::Fail);
    let kinds: Vec<OutcomeKind> = r.reruns.iter().map(|o| o.kind()).collect();
    assert_eq!(kinds, [OutcomeKind::Pass, OutcomeKind::Pass]);
    assert_eq!(r.verdict(), clhip::model::Verdict::Flaky);
    assert!(!r.unexpected(), "flaky does not fail the run");
    let _ = std::fs::remove_file(&mark);
}

#[test]
fn a_case_that_fails_only_after_another_is_bisected_to_it() {
    use MockAction::*;
    let mut opts = options();
    opts.retries = 1;
    let (results, _, _) = run_mocks(&[Pass, Pass, Poison, Pass, Pass, Victim], &opts);
    let victim = &results[5];
    assert_eq!(victim.outcome.kind(), OutcomeKind::Fail);
    assert_eq!(
        victim.reruns.first().map(|o| o.kind()),
        Some(OutcomeKind::Pass)
    );
    assert_eq!(victim.fails_only_after.as_deref(), Some("mock/poison/2"));
}

#[test]
fn each_gpu_gets_its_own_workers_so_gpus_work_at_the_same_time() {
    use MockAction::*;
    let opts = options(); // one job: per GPU
    let mut plan = planned_mocks(&[Slow, Slow, Slow, Slow]);
    for (k, p) in plan.iter_mut().enumerate() {
        p.gpu = if k < 2 {
            "cuda0".into()
        } else {
            "cuda1".into()
        };
    }
    let mut order = Vec::new();
    let end = runner::run(plan, &opts, &mut |e| match e {
        Event::Started { id, .. } => order.push(format!("start {id}")),
        Event::Finished(r) => order.push(format!("done {}", r.id)),
        _ => {}
    })
    .unwrap();
    assert_eq!(end.results.len(), 4);
    // cuda1's first case starts before cuda0's first is done: the two GPUs overlap, although
    // the run has one job (per GPU).
    let at = |what: &str| order.iter().position(|e| e == what).unwrap();
    assert!(
        at("start mock/slow/2") < at("done mock/slow/0"),
        "{order:?}"
    );
}

#[test]
fn a_spare_worker_started_before_the_crash_takes_the_next_case_with_the_same_outcomes() {
    use MockAction::*;
    let actions = [
        Pass, Segfault, Pass, Segfault, Pass, Fault, Pass, Abort, Pass,
    ];
    let mut opts = options();
    opts.spare_workers = true;
    let (results, pids, events) = run_mocks(&actions, &opts);
    let kinds: Vec<OutcomeKind> = results.iter().map(|r| r.outcome.kind()).collect();
    let want: Vec<OutcomeKind> = actions.iter().map(|a| a.expected_kind()).collect();
    assert_eq!(kinds, want, "{results:?}");
    // The worker of the case after each crash or fault had been started as a spare before
    // that case ended: not a worker started once the crash was seen.
    let position = |want: &dyn Fn(&Event) -> bool| events.iter().position(want);
    let planned = planned_mocks(&actions);
    for (ended, next) in [(1, 2), (3, 4), (5, 6), (7, 8)] {
        let (ended_id, next_id) = (&planned[ended].id, &planned[next].id);
        let next_pid = pids[next_id];
        let spare_began =
            position(&|e| matches!(e, Event::SpareStarted { pid } if *pid == next_pid));
        let ended_at = position(&|e| matches!(e, Event::Finished(r) if &r.id == ended_id));
        assert!(
            spare_began.is_some() && spare_began < ended_at,
            "{next_id}'s worker {next_pid}: spare at {spare_began:?}, {ended_id} ended at \
             {ended_at:?}: {events:?}"
        );
    }
    // Spares that never took a case are gone with the run too.
    for e in &events {
        if let Event::SpareStarted { pid } = e {
            let live = live_members(*pid);
            assert!(live.is_empty(), "spare {pid} still has: {live:?}");
        }
    }
}

/// `run_stream` asks for each item only after every earlier item's result has been reported,
/// keeps one worker for item after item, and a crash costs one item: the stream goes on in a
/// fresh worker.
#[test]
fn a_stream_asks_for_each_item_after_the_results_before_it() {
    use std::cell::RefCell;
    let actions = [
        MockAction::Pass,
        MockAction::Fail,
        MockAction::Segfault,
        MockAction::Pass,
        MockAction::Pass,
    ];
    let plan = planned_mocks(&actions);
    let finished: RefCell<Vec<(String, OutcomeKind)>> = RefCell::new(Vec::new());
    let mut pids = BTreeMap::new();
    let mut asked_when = Vec::new();
    let mut given = plan.iter();
    let mut next = |_: Option<&[(String, String)]>| {
        asked_when.push(finished.borrow().len());
        given.next().cloned()
    };
    let stopped = runner::run_stream(&mut next, &options(), &mut |e: &Event| match e {
        Event::Finished(r) => finished.borrow_mut().push((r.id.clone(), r.outcome.kind())),
        Event::Started { id, pid } => {
            pids.insert(id.clone(), *pid);
        }
        _ => {}
    })
    .expect("stream");
    assert_eq!(stopped, None);
    let kinds: Vec<OutcomeKind> = finished.borrow().iter().map(|(_, k)| *k).collect();
    assert_eq!(
        kinds,
        [
            OutcomeKind::Pass,
            OutcomeKind::Fail,
            OutcomeKind::Crash,
            OutcomeKind::Pass,
            OutcomeKind::Pass
        ]
    );
    // Item k is asked for once k results are in; then the dry stream is asked until it ends.
    assert_eq!(&asked_when[..actions.len()], &[0, 1, 2, 3, 4]);
    assert!(
        asked_when[actions.len()..]
            .iter()
            .all(|&k| k == actions.len())
    );
    let workers: BTreeSet<u32> = pids.values().copied().collect();
    assert_eq!(
        workers.len(),
        2,
        "one worker up to the crash, one after: {pids:?}"
    );
}
