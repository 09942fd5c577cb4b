//! How a run is run: its workers, their limits and environment, retries and spares.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::control::RunControl;

/// Long cases (the reuse op's) running at once on one GPU, at most. Measured on the full
/// matrix, after the reuse op's checks moved to one result buffer (reports/README.md, "Where
/// the full matrix's time goes"): no limit 78.1 s, 1 at once 74.4 s, 2 at once 71.8 s (one
/// H100); 71.9 s at 2 on an H200. One at a time leaves the chain of reuse cases the longest
/// thing in the run; with no limit they wait on each other's context switches.
pub const LONG_AT_ONCE: usize = 2;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    /// Per case, from the worker's `start` line for it.
    pub timeout: Duration,
    /// How long a worker may take to start its next case (runtime initialization comes first)
    /// or to exit after its last one.
    pub startup_timeout: Duration,
    /// Cases per worker process before a fresh one takes over.
    pub cases_per_worker: usize,
    /// Worker processes running at once (deqp-runner's -j). Each has its own device contexts,
    /// so a crash or fault still costs one case only.
    pub jobs: usize,
    pub worker_exe: PathBuf,
    /// The whole argv after `worker_exe`; see [`worker_args`].
    pub worker_args: Vec<String>,
    /// Environment for every worker, on top of the runner's own.
    pub worker_env: Vec<(String, String)>,
    /// Times a case that came out worse than expected is run again alone (`--retries`).
    pub retries: u32,
    /// Each runner thread keeps one worker started ahead of need, its device contexts made,
    /// to take over when its worker ends (a crash or fault ends one by design). Off unless
    /// asked for: it holds a second set of contexts, and bought no time on NVIDIA.
    pub spare_workers: bool,
    /// Each GPU's PCI device (`domain:bus:device.function`) by its label in the plan, where
    /// known: kernel log lines about a lost GPU name it, and the bus may lose it.
    pub gpu_pci: HashMap<String, String>,
    /// Globs (`*`) of kernel log lines that do not make a passing case `warn` (an
    /// expectation file's `kernel_log_allow`).
    pub kernel_log_allow: Vec<String>,
    /// The plan's queues (`Planned::gpu`) whose cases use no GPU: an OpenCL CPU device with the
    /// host peer. A GPU driver's kernel line during one of their cases is another worker's
    /// (on an H200, an `NVRM: nvAssertFailedNoLog` line naming no process made a PoCL case
    /// `warn`).
    pub no_gpu: std::collections::HashSet<String>,
    /// Long cases (the reuse op's) running at once on one GPU, at most; 0 for no limit
    /// ([`LONG_AT_ONCE`]).
    pub long_at_once: usize,
    pub control: Arc<RunControl>,
}

impl RunOptions {
    /// Defaults for running `exe __worker --seed <seed>`.
    pub fn new(worker_exe: PathBuf, seed: u64) -> Self {
        RunOptions {
            seed,
            timeout: Duration::from_secs(60),
            startup_timeout: Duration::from_secs(30),
            cases_per_worker: 64,
            jobs: 1,
            worker_exe,
            worker_args: worker_args(seed),
            worker_env: Vec::new(),
            retries: 0,
            spare_workers: false,
            gpu_pci: HashMap::new(),
            kernel_log_allow: Vec::new(),
            no_gpu: Default::default(),
            long_at_once: LONG_AT_ONCE,
            control: Arc::new(RunControl::default()),
        }
    }
}

/// The arguments of the hidden worker subcommand.
pub fn worker_args(seed: u64) -> Vec<String> {
    vec!["__worker".into(), "--seed".into(), seed.to_string()]
}
