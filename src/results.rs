//! The records of a run, below the runner that produces them and the reports, baselines and
//! expectations that read them: what a worker runs ([`Work`], a [`MockAction`] among it), one
//! item of a plan ([`Planned`]), the verdict on it ([`CaseResult`]), and what a run reports as
//! it goes ([`Event`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::model::{Case, Expectation, Outcome, OutcomeKind};

/// What a worker runs: a real case, or a mock that misbehaves on purpose (tests only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Work {
    Case(Case),
    Mock(MockAction),
}

impl Work {
    pub fn case(&self) -> Option<&Case> {
        match self {
            Work::Case(case) => Some(case),
            Work::Mock(_) => None,
        }
    }
}

/// One item of a run's plan.
#[derive(Debug, Clone)]
pub struct Planned {
    /// `Case::id()`, or `mock/<action>/<k>`.
    pub id: String,
    pub work: Work,
    pub expectation: Expectation,
    /// Environment the worker running it needs (the one OpenCL vendor library its pair
    /// uses). A batch holds items of one environment only.
    pub env: Vec<(String, String)>,
    /// The GPU it runs on (`cuda1`, `nvidia0`; empty for none of its own). Each GPU gets its
    /// own `--jobs` workers, so that GPUs of one host work at the same time.
    pub gpu: String,
    /// The case's data: the seeded draw, except where `clhip repro` tries simpler inputs.
    pub data: crate::generate::DataKind,
}

impl Planned {
    pub fn case(case: Case, expectation: Expectation) -> Self {
        Planned {
            id: case.id(),
            work: Work::Case(case),
            expectation,
            env: Vec::new(),
            gpu: String::new(),
            data: crate::generate::DataKind::Seeded,
        }
    }

    /// The kind of pair a worker for this item opens, what its start costs: the pair's
    /// [`crate::model::Pair::kind`] (`nvidia+cuda`), `mock` for the mock's items.
    pub fn pair_kind(&self) -> String {
        self.work
            .case()
            .map_or_else(|| "mock".into(), |c| c.pair.kind())
    }
}

/// The verdict on one planned item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub id: String,
    pub work: Work,
    pub outcome: Outcome,
    pub expectation: Expectation,
    /// As measured by the worker, or by the parent for a crash or timeout.
    pub duration_s: f64,
    /// Kernel log lines (amdgpu/KFD VM faults, NVRM Xid) that appeared while a case that
    /// crashed, faulted or timed out ran, or that the log was unreadable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_log: Vec<String>,
    /// Outcomes of the case run again alone (`--retries`), in order. One that differs from
    /// `outcome` makes the case flaky; both are kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<Outcome>,
    /// For a case that failed in its batch but passed alone: the earlier case of that batch
    /// after which it fails, found by bisection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fails_only_after: Option<String>,
    /// The items that ran before this one in its worker, for that bisection; not saved.
    #[serde(skip)]
    pub predecessors: Vec<String>,
    /// The memory its crossing took, as its worker measured it; absent where nothing was
    /// measured (a mock, a case refused before its crossing, a crash, a timeout, a results
    /// file from before footprints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint: Option<crate::footprint::Footprint>,
}

impl CaseResult {
    pub fn new(
        id: String,
        work: Work,
        outcome: Outcome,
        expectation: Expectation,
        duration_s: f64,
    ) -> Self {
        CaseResult {
            id,
            work,
            outcome,
            expectation,
            duration_s,
            kernel_log: Vec::new(),
            reruns: Vec::new(),
            fails_only_after: None,
            predecessors: Vec::new(),
            footprint: None,
        }
    }

    /// How the outcome reads against the expectation: flaky if a rerun came out otherwise.
    pub fn verdict(&self) -> crate::model::Verdict {
        let kind = self.outcome.kind();
        if self.reruns.iter().any(|o| o.kind() != kind) {
            return crate::model::Verdict::Flaky;
        }
        self.expectation.verdict_of(&self.outcome)
    }

    /// Whether this result should fail the run (non-zero exit).
    pub fn unexpected(&self) -> bool {
        self.verdict().fails_run()
    }
}

/// What the runner reports as it goes; `pid` is the worker's, which is also its process group.
#[derive(Debug, Clone)]
pub enum Event {
    Started {
        id: String,
        pid: u32,
    },
    Finished(Box<CaseResult>),
    /// A spare worker was started: it makes its runtimes now, and takes over when its runner
    /// thread's worker ends.
    SpareStarted {
        pid: u32,
    },
    /// A worker ended badly outside any case (between cases, or while exiting after its last
    /// one, e.g. a crash in a runtime's teardown). No case is charged; `after` is the last case
    /// it finished.
    WorkerLost {
        pid: u32,
        after: Option<String>,
        why: String,
    },
    /// A GPU is gone (the kernel said so, its health check failed twice, or it left the PCI
    /// bus): no further case starts on it, and its cases not run are `skip`s that say so.
    GpuLost {
        gpu: String,
        after: Option<String>,
        evidence: String,
    },
}

/// What a mock work item does when a worker runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MockAction {
    /// Returns `pass`.
    Pass,
    /// Returns `fail` with a made-up mismatch.
    Fail,
    /// Returns `fault` with a made-up API error; the worker then retires, as after a real fault.
    Fault,
    /// Writes through an invalid pointer: the worker dies by SIGSEGV.
    Segfault,
    /// Calls abort(): the worker dies by SIGABRT, as a runtime's failed assertion does.
    Abort,
    /// Never returns, and leaves a helper process hanging in the worker's process group, as a
    /// driver's helper would: the runner must time the case out and kill the whole group.
    Hang,
    /// Calls exit(3) mid-case, as some runtimes do on a fatal error instead of aborting.
    Exit,
    /// Returns `unsupported`, as a driver that cleanly refuses the combination.
    Unsupported,
    /// Panics: the harness's own bug, which must be a harness error and never a crash.
    Panic,
    /// Announces a 32 KiB buffer, prints ROCr's page-fault line for an address 4 KiB past its
    /// end and aborts, as ROCm's runtime does on a device page fault: a `fault`.
    RocrFault,
    /// Logs an NVIDIA MMU fault (Xid 31) of its own process to the kernel log file the runner
    /// reads in tests (`CLHIP_KERNEL_LOG`), then blocks in a semaphore wait that never
    /// returns, as CUDA does when a fault stops the work that was to signal: a `fault`, ended
    /// shortly after the log line rather than at the timeout.
    KernelFaultHang,
    /// Sleeps 0.8 s, then passes: a case that takes a while (the pause test's).
    Slow,
    /// Fails the first time it runs and passes after, across processes (a marker file named
    /// by `CLHIP_MOCK_FLAKY_MARK`): a flaky case.
    FlakyOnce,
    /// Passes, and leaves its worker process in a state that makes `victim` fail after it.
    Poison,
    /// Fails in a process where `poison` ran before it, passes alone: order dependence.
    Victim,
    /// Prints what a chatty driver prints (partial lines, lines that begin with the protocol's
    /// prefix but are not the protocol, on stdout and stderr), then passes.
    Noisy,
    /// Sends itself SIGKILL mid-case, as the kernel's OOM killer does: a `crash` named
    /// SIGKILL, though no interrupt of the run's own sent it.
    Sigkill,
    /// Logs an amdgpu warning of its own process to the kernel log file the runner reads in
    /// tests (`CLHIP_KERNEL_LOG`), then passes: a `warn`.
    KernelWarn,
    /// Logs an amdgpu ring timeout that names no device to that file, then aborts, as a
    /// process on a GPU that hung does: a `crash`, after which the runner checks the GPU.
    GpuLost,
    /// Logs amdgpu's `GPU reset begin!` to that file and passes, as a case that finished
    /// before its GPU was reset: a `warn`, after which its worker takes no further case.
    GpuReset,
}

impl MockAction {
    pub const ALL: &'static [MockAction] = &[
        MockAction::Pass,
        MockAction::Fail,
        MockAction::Fault,
        MockAction::Segfault,
        MockAction::Abort,
        MockAction::Hang,
        MockAction::Exit,
        MockAction::Unsupported,
        MockAction::Panic,
        MockAction::RocrFault,
        MockAction::KernelFaultHang,
        MockAction::Noisy,
        MockAction::Slow,
        MockAction::FlakyOnce,
        MockAction::Poison,
        MockAction::Victim,
        MockAction::Sigkill,
        MockAction::KernelWarn,
        MockAction::GpuLost,
        MockAction::GpuReset,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MockAction::Pass => "pass",
            MockAction::Fail => "fail",
            MockAction::Fault => "fault",
            MockAction::Segfault => "segfault",
            MockAction::Abort => "abort",
            MockAction::Hang => "hang",
            MockAction::Exit => "exit",
            MockAction::Unsupported => "unsupported",
            MockAction::Panic => "panic",
            MockAction::RocrFault => "rocr-fault",
            MockAction::KernelFaultHang => "kernel-fault-hang",
            MockAction::Noisy => "noisy",
            MockAction::Slow => "slow",
            MockAction::FlakyOnce => "flaky-once",
            MockAction::Poison => "poison",
            MockAction::Victim => "victim",
            MockAction::Sigkill => "sigkill",
            MockAction::KernelWarn => "kernel-warn",
            MockAction::GpuLost => "gpu-lost",
            MockAction::GpuReset => "gpu-reset",
        }
    }

    /// The outcome kind a correct runner records for this action. Used as the item's
    /// expectation, so a mock run exits zero exactly when containment works.
    pub fn expected_kind(self) -> OutcomeKind {
        match self {
            MockAction::Pass
            | MockAction::Noisy
            | MockAction::Slow
            | MockAction::FlakyOnce
            | MockAction::Poison
            | MockAction::Victim => OutcomeKind::Pass,
            MockAction::Fail => OutcomeKind::Fail,
            MockAction::Fault | MockAction::RocrFault | MockAction::KernelFaultHang => {
                OutcomeKind::Fault
            }
            MockAction::Panic => OutcomeKind::Error,
            MockAction::Segfault
            | MockAction::Abort
            | MockAction::Exit
            | MockAction::Sigkill
            | MockAction::GpuLost => OutcomeKind::Crash,
            MockAction::KernelWarn | MockAction::GpuReset => OutcomeKind::Warn,
            MockAction::Hang => OutcomeKind::Timeout,
            MockAction::Unsupported => OutcomeKind::Unsupported,
        }
    }

    pub fn expectation(self) -> Expectation {
        match self.expected_kind() {
            OutcomeKind::Pass => Expectation::Pass,
            kind => Expectation::Known(kind),
        }
    }
}

impl FromStr for MockAction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        MockAction::ALL
            .iter()
            .copied()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = MockAction::ALL.iter().map(|a| a.name()).collect();
                format!(
                    "unknown mock action `{s}` (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for MockAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
