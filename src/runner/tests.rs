use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use super::death::{crash_outcome, death_outcome, kernel_fault_outcome};
use crate::model::{Api, Outcome};

fn status_of(shell: &str) -> ExitStatus {
    Command::new("sh").args(["-c", shell]).status().unwrap()
}

#[test]
fn a_signal_death_is_a_crash_named_by_its_signal() {
    let outcome = crash_outcome(status_of("kill -SEGV $$"), "last words".into());
    assert_eq!(
        outcome,
        Outcome::Crash {
            signal: 11,
            signal_name: "SIGSEGV".into(),
            stderr_tail: "last words".into(),
            process: String::new(),
        }
    );
}

#[test]
fn an_exit_mid_case_is_a_crash_with_signal_zero_and_the_status() {
    let Outcome::Crash {
        signal,
        signal_name,
        ..
    } = crash_outcome(status_of("exit 3"), String::new())
    else {
        panic!("not a crash");
    };
    assert_eq!((signal, signal_name.as_str()), (0, "exit status 3"));
}

#[test]
fn a_fault_is_laid_to_the_peer_api_unless_the_peer_is_the_host() {
    use crate::model::{Case, ClDeviceRef, Op, Pair, PathKind, Peer, SyncMode};
    let rocr = "Memory access fault by GPU node-2 (Agent handle: 0x55ac14d27600) on address 0x7f9587e00000. Reason: Page not present or supervisor privilege.";
    let case = |api| Case {
        pair: Pair {
            opencl: ClDeviceRef {
                platform_index: 0,
                device_index: 0,
                label: "rocm0".into(),
            },
            peer: Peer { api, ordinal: 0 },
            install: None,
            cl_gpu: None,
        },
        path: PathKind::Copy,
        sync: SyncMode::Finish,
        op: Op::Handoff,
        n: 64,
        env: Default::default(),
    };
    let api_of = |case: Option<&Case>| {
        // Killed by SIGABRT, as ROCr aborts after printing its fault line.
        match death_outcome(ExitStatus::from_raw(6), rocr.into(), None, &[], case) {
            Outcome::Fault { error } => error.api,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(api_of(Some(&case(Api::Hip))), Api::Hip);
    assert_eq!(api_of(Some(&case(Api::Host))), Api::OpenCl);
    assert_eq!(api_of(None), Api::OpenCl);

    let kernel_api = |peer| {
        let fault = crate::kmsg::KernelFault {
            pid: 1,
            code: 31,
            name: "MMU fault".into(),
            line: "NVRM: Xid 31".into(),
        };
        match kernel_fault_outcome(fault, Duration::from_secs(1), 3.0, "", peer) {
            Outcome::Fault { error } => error.api,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(kernel_api(Some(Api::Cuda)), Api::Cuda);
    assert_eq!(kernel_api(Some(Api::Host)), Api::OpenCl);
    assert_eq!(kernel_api(None), Api::OpenCl);
}

/// A lost GPU's kernel line that names the GPU's own PCI device ends it with no health check;
/// one that names another GPU's device is not its evidence.
#[test]
fn a_lost_gpu_line_naming_the_gpu_s_device_is_evidence_and_another_s_is_not() {
    use crate::mock::MockAction;
    use crate::model::Expectation;
    use crate::results::{CaseResult, Work};
    let mut opts = super::RunOptions::new("/nonexistent/clhip".into(), 1);
    opts.gpu_pci.insert("cuda1".into(), "0000:3B:00.0".into());
    let with_line = |line: &str| {
        let mut r = CaseResult::new(
            "mock/pass/0".into(),
            Work::Mock(MockAction::Pass),
            Outcome::pass(),
            Expectation::Pass,
            0.1,
        );
        r.kernel_log = vec![line.to_string()];
        vec![r]
    };
    let ours = with_line(
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    );
    let evidence =
        super::schedule::loss_evidence(&ours, "cuda1", false, None, &opts).expect("lost");
    assert!(
        evidence.contains("NVRM Xid 79 (GPU has fallen off the bus)"),
        "{evidence}"
    );
    let theirs = with_line(
        "NVRM: Xid (PCI:0000:5e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    );
    assert_eq!(
        super::schedule::loss_evidence(&theirs, "cuda1", false, None, &opts),
        None
    );
    // A fault of one process leaves the GPU in service.
    let fault = with_line("NVRM: Xid (PCI:0000:3b:00): 31, pid=7, name=clhip, MMU Fault");
    assert_eq!(
        super::schedule::loss_evidence(&fault, "cuda1", false, None, &opts),
        None
    );
}

/// A nvidia0+cuda0 copy/finish case of `op` at size `n` whose worker needs `E=env`.
fn planned(op: crate::model::Op, n: usize, env: &str) -> crate::results::Planned {
    use crate::model::{Case, Expectation, Pair, PathKind, SyncMode};
    let case = Case {
        pair: Pair::nvidia0_cuda0(),
        path: PathKind::Copy,
        sync: SyncMode::Finish,
        op,
        n,
        env: Default::default(),
    };
    let mut p = crate::results::Planned::case(case, Expectation::Pass);
    p.env = vec![("E".into(), env.into())];
    p
}

#[test]
fn long_cases_are_spread_through_their_environment_s_run_of_the_queue() {
    use super::schedule::spread_long;
    use crate::model::Op;
    use crate::results::Planned;
    use std::collections::VecDeque;
    let item = planned;
    // The plan's order: 12 short cases, then 4 reuse, then a second environment's 3 and 1.
    let mut plan: Vec<Planned> = (0..12).map(|n| item(Op::Handoff, n, "a")).collect();
    plan.extend((100..104).map(|n| item(Op::Reuse, n, "a")));
    plan.extend((200..203).map(|n| item(Op::Fft, n, "b")));
    plan.push(item(Op::Reuse, 300, "b"));
    let spread: Vec<Planned> = spread_long(VecDeque::from(plan.clone())).into();
    let ids = |v: &[Planned]| v.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
    let mut sorted = ids(&spread);
    sorted.sort();
    let mut want = ids(&plan);
    want.sort();
    assert_eq!(sorted, want, "the same cases, each once");
    let long: Vec<usize> = spread
        .iter()
        .enumerate()
        .filter(|(_, p)| p.work.case().is_some_and(|c| c.op == Op::Reuse))
        .map(|(i, _)| i)
        .collect();
    // One reuse case first, then one every three short ones; the second environment's reuse
    // leads its own run, which stays whole after the first's.
    assert_eq!(long, [0, 4, 8, 12, 16]);
    let envs: Vec<&str> = spread.iter().map(|p| p.env[0].1.as_str()).collect();
    assert_eq!(envs, [vec!["a"; 16], vec!["b"; 4]].concat());
    // Short cases keep their order.
    let short: Vec<String> = ids(&spread)
        .into_iter()
        .filter(|id| id.contains("/handoff/"))
        .collect();
    assert_eq!(short, ids(&plan[..12]), "short cases in plan order");
}

#[test]
fn a_worker_takes_a_long_case_only_while_fewer_than_the_limit_run() {
    use super::schedule::{Pick, next_within};
    use crate::model::Op;
    use std::collections::VecDeque;
    let id = |p: Pick| match p {
        Pick::Case(p) => p.id.clone(),
        Pick::Wait => "wait".into(),
        Pick::Done => "done".into(),
    };
    let mut q = VecDeque::from([
        planned(Op::Reuse, 1, "a"),
        planned(Op::Handoff, 2, "a"),
        planned(Op::Reuse, 3, "b"),
        planned(Op::Handoff, 4, "b"),
    ]);
    let reuse1 = q[0].id.clone();
    let handoff2 = q[1].id.clone();
    let handoff4 = q[3].id.clone();
    // At the limit, a worker of environment `a` passes the reuse case by for the short one
    // behind it, and never reaches into environment `b`'s run.
    assert_eq!(
        id(next_within(
            &mut q,
            Some(&planned(Op::Reuse, 0, "a").env),
            false
        )),
        handoff2
    );
    assert_eq!(
        id(next_within(
            &mut q,
            Some(&planned(Op::Reuse, 0, "a").env),
            false
        )),
        "wait"
    );
    // Under it, the long case is next.
    assert_eq!(id(next_within(&mut q, None, true)), reuse1);
    // A new worker takes any environment's short case.
    assert_eq!(id(next_within(&mut q, None, false)), handoff4);
    assert_eq!(id(next_within(&mut q, None, false)), "wait");
    assert_eq!(q.len(), 1);
    let mut empty = VecDeque::new();
    assert_eq!(id(next_within(&mut empty, None, false)), "done");
}

/// Every worker of a run is told the run's shared data directory, which exists while the run
/// does and is gone after it.
#[test]
fn a_run_s_workers_share_a_data_directory_that_ends_with_the_run() {
    let opts = super::RunOptions::new("/nonexistent/clhip".into(), 1);
    let (with, guard) = super::with_shared_data(&opts);
    let dir = with
        .worker_env
        .iter()
        .find(|(k, _)| k == crate::ops::data::shared::DIR_ENV)
        .map(|(_, v)| std::path::PathBuf::from(v))
        .expect("the workers' environment names the directory");
    assert!(dir.is_dir());
    assert!(guard.is_some());
    assert!(
        opts.worker_env.is_empty(),
        "the caller's options are untouched"
    );
    drop(guard);
    assert!(!dir.exists());
}
