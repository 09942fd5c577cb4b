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
