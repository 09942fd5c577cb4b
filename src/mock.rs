//! Mock work items: misbehaviour on demand, so the runner's containment can be tested without a
//! GPU. Each action does inside a worker what a broken driver would do: return a wrong answer,
//! report a device fault, write through a bad pointer, abort, or hang.
//!
//! Test-only: reachable through a hidden CLI flag (`clhip run --mock-cases segfault,pass`) and
//! the containment tests, never from a normal plan.

use std::time::Duration;

use crate::model::{Api, ApiError, Expectation, Mismatch, Outcome, OutcomeKind};
use crate::results::{Planned, Work};

pub use crate::results::MockAction;

/// Parses `segfault,pass,hang` (spaces around names allowed) into actions, in order.
pub fn parse_mock_list(s: &str) -> Result<Vec<MockAction>, String> {
    let actions = s
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if actions.is_empty() {
        return Err("empty mock list (expected e.g. `segfault,pass`)".to_string());
    }
    Ok(actions)
}

/// One planned item per action, with id `mock/<action>/<position in the list>`, expecting the
/// outcome kind a correct runner produces for it.
pub fn planned_mocks(actions: &[MockAction]) -> Vec<Planned> {
    actions
        .iter()
        .enumerate()
        .map(|(k, &action)| Planned {
            id: format!("mock/{action}/{k}"),
            work: Work::Mock(action),
            expectation: action.expectation(),
            env: Vec::new(),
            gpu: String::new(),
            data: crate::generate::DataKind::Seeded,
        })
        .collect()
}

/// Judges mock items as cases are judged (`--mock-as-cases`), not each by its own kind: against
/// a baseline's known outcomes when there is one (an id it lists expects that outcome, any
/// other a pass), else as a run with no baseline judges a case.
pub fn judge_as_cases(
    plan: &mut [Planned],
    baseline: Option<&std::collections::HashMap<String, OutcomeKind>>,
) {
    for p in plan {
        p.expectation = match baseline {
            Some(known) => match known.get(&p.id) {
                Some(kind) => Expectation::Known(*kind),
                None => Expectation::Pass,
            },
            None => Expectation::Unbaselined,
        };
    }
}

/// Runs `action` in the current (worker) process. Segfault, abort, exit and hang do not return.
pub fn perform(action: MockAction) -> Outcome {
    match action {
        MockAction::Pass => Outcome::pass(),
        MockAction::Fail => Outcome::mismatch(fake_mismatch()),
        MockAction::Fault => Outcome::Fault {
            error: ApiError {
                api: Api::Host,
                call: "mock".to_string(),
                code: -1,
                name: "MOCK_FAULT".to_string(),
                detail: "mock fault requested".to_string(),
            },
        },
        MockAction::Unsupported => Outcome::unsupported("mock: refused on request"),
        MockAction::Segfault => segfault(),
        MockAction::Abort => {
            eprintln!("mock: aborting");
            std::process::abort()
        }
        MockAction::Exit => {
            eprintln!("mock: calling exit(3)");
            std::process::exit(3)
        }
        MockAction::Hang => hang(),
        MockAction::Sigkill => sigkill(),
        MockAction::Panic => panic!("mock: a harness bug"),
        MockAction::Slow => {
            std::thread::sleep(Duration::from_millis(800));
            Outcome::pass()
        }
        MockAction::FlakyOnce => {
            let first = std::env::var_os("CLHIP_MOCK_FLAKY_MARK")
                .is_some_and(|m| std::fs::File::create_new(m).is_ok());
            if first {
                Outcome::mismatch(fake_mismatch())
            } else {
                Outcome::pass()
            }
        }
        MockAction::Poison => {
            POISONED.store(true, std::sync::atomic::Ordering::SeqCst);
            Outcome::pass()
        }
        MockAction::Victim => {
            if POISONED.load(std::sync::atomic::Ordering::SeqCst) {
                Outcome::mismatch(fake_mismatch())
            } else {
                Outcome::pass()
            }
        }
        MockAction::RocrFault => rocr_fault(),
        MockAction::KernelFaultHang => kernel_fault_hang(),
        MockAction::KernelWarn => {
            log_kernel_line(&format!(
                "4,1,1,-;amdgpu 0000:c3:00.0: amdgpu: [mock] a warning during a passing case, process clhip pid {}\n",
                std::process::id()
            ));
            Outcome::pass()
        }
        MockAction::GpuReset => {
            log_kernel_line("3,1,1,-;amdgpu 0000:c3:00.0: amdgpu: GPU reset begin!\n");
            Outcome::pass()
        }
        MockAction::GpuLost => {
            log_kernel_line(
                "3,1,1,-;[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=7, emitted seq=9\n",
            );
            eprintln!("mock: the GPU stopped answering; aborting");
            std::process::abort()
        }
        MockAction::Noisy => {
            use std::io::Write as _;
            print!("mock: a partial line on stdout, no newline");
            let _ = std::io::stdout().flush();
            println!("@@clhip {{this is not the protocol");
            eprintln!("@@clhip {{\"event\":\"done\",\"id\":\"forged\"}}");
            eprint!("mock: a partial line on stderr");
            Outcome::pass()
        }
    }
}

/// Set by `poison` in this worker process.
static POISONED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// ROCm's runtime on a GPU page fault (ROCR-Runtime `Runtime::VMFaultHandler`): one line on
/// stderr, then abort().
fn rocr_fault() -> ! {
    let base = 0x7f95_87e0_0000u64;
    let bytes = 32 * 1024;
    crate::fault::announce(crate::fault::BufferSpan {
        name: "mock shared memory (fine-grain SVM)".into(),
        addr: base,
        bytes,
    });
    eprintln!(
        "Memory access fault by GPU node-2 (Agent handle: 0x55ac14d27600) on address {:#x}. Reason: Page not present or supervisor privilege.",
        base + bytes + 4096
    );
    std::process::abort()
}

/// What the kernel-fault-hang mock announces before it blocks.
pub const KERNEL_FAULT_HANG_CALL: &str =
    "cuWaitExternalSemaphoresAsync (mock: a wait whose signal the fault stopped)";

/// Appends `record` to the kernel log file of a test (never /dev/kmsg).
fn log_kernel_line(record: &str) {
    use std::io::Write as _;
    match std::env::var_os(crate::kmsg::KERNEL_LOG_ENV) {
        Some(path) => {
            let logged = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(record.as_bytes()));
            if let Err(e) = logged {
                eprintln!("mock: could not log to {}: {e}", path.to_string_lossy());
            }
        }
        None => eprintln!(
            "mock: {} is not set: no kernel log line",
            crate::kmsg::KERNEL_LOG_ENV
        ),
    }
}

fn kernel_fault_hang() -> ! {
    use std::io::Write as _;
    let record = format!(
        "3,1,1,-;NVRM: Xid (PCI:0000:00:06): 31, pid={}, name=clhip, channel 0x00000010, intr \
         00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 faulted @ 0x7f7c_4ea00000. \
         Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE\n",
        std::process::id()
    );
    // Never /dev/kmsg: a test's line has no place in the real kernel log.
    match std::env::var_os(crate::kmsg::KERNEL_LOG_ENV) {
        Some(path) => {
            let logged = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(record.as_bytes()));
            if let Err(e) = logged {
                eprintln!(
                    "mock: could not log the fault to {}: {e}",
                    path.to_string_lossy()
                );
            }
        }
        None => eprintln!(
            "mock: {} is not set: no kernel log line",
            crate::kmsg::KERNEL_LOG_ENV
        ),
    }
    crate::blocking::announce(KERNEL_FAULT_HANG_CALL);
    loop {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILL from itself, as from the OOM killer: no handler runs, nothing is flushed.
fn sigkill() -> ! {
    eprintln!("mock: sending myself SIGKILL");
    let raised = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    unreachable!("SIGKILL was not delivered: {raised:?}")
}

fn fake_mismatch() -> Mismatch {
    Mismatch {
        what: "mock data read back".to_string(),
        index: 7,
        got: "0x00000000".to_string(),
        want: "0x5a5a5a5a".to_string(),
        count: 1,
        len: 16,
        max_abs_err: 1.0,
        max_rel_err: 1.0,
        bound: 0.0,
        formula: "bit-exact (mock)".to_string(),
    }
}

/// A real invalid write, so the kernel delivers SIGSEGV exactly as for a driver bug. Address 0x8
/// rather than null: null trips Rust's debug precondition checks, which would abort instead.
fn segfault() -> ! {
    // Chatter on stdout, as drivers print: the runner must keep it out of the protocol and show
    // it in the crash's output tail.
    println!("mock: driver chatter on stdout before the crash");
    eprintln!("mock: writing through 0x8");
    let bad = std::ptr::without_provenance_mut::<u32>(0x8);
    // SAFETY: none; the point is to fault. The volatile write cannot be optimised away.
    unsafe { std::ptr::write_volatile(bad, 0xdead) };
    unreachable!("a write to 0x8 did not fault")
}

/// Hangs, after starting a helper process that hangs too and holds the worker's output pipes:
/// killing only the worker would leave it running and the runner's readers waiting for EOF.
/// What the hang mock announces before it blocks: the timeout must name it.
pub const HANG_CALL: &str = "mock: waiting forever on a helper that sleeps an hour";

fn hang() -> ! {
    crate::blocking::announce(HANG_CALL);
    match std::process::Command::new("sleep").arg("3600").spawn() {
        Ok(helper) => eprintln!("mock: hanging, helper pid {}", helper.id()),
        Err(e) => eprintln!("mock: hanging (no helper: {e})"),
    }
    loop {
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mock_list_parses_in_order_and_names_bad_entries() {
        assert_eq!(
            parse_mock_list("segfault, pass,hang").unwrap(),
            vec![MockAction::Segfault, MockAction::Pass, MockAction::Hang]
        );
        let err = parse_mock_list("pass,segv").unwrap_err();
        assert!(err.contains("`segv`") && err.contains("segfault"), "{err}");
        assert!(parse_mock_list(" , ").is_err());
    }

    #[test]
    fn planned_mocks_have_positional_ids_and_expect_their_own_outcome() {
        let plan = planned_mocks(&[MockAction::Pass, MockAction::Hang, MockAction::Pass]);
        let ids: Vec<&str> = plan.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["mock/pass/0", "mock/hang/1", "mock/pass/2"]);
        assert_eq!(plan[0].expectation, Expectation::Pass);
        assert_eq!(
            plan[1].expectation,
            Expectation::Known(OutcomeKind::Timeout)
        );
    }

    #[test]
    fn returning_actions_give_their_kind() {
        for &a in &[
            MockAction::Pass,
            MockAction::Fail,
            MockAction::Fault,
            MockAction::Unsupported,
        ] {
            assert_eq!(perform(a).kind(), a.expected_kind(), "{a}");
        }
    }
}
