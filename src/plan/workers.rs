//! How a plan's workers start: the environment each pair's worker needs, the executable they
//! start from, and the one builder of the options the runner starts them with (`run`,
//! `repro`'s shrink and `bench runner` alike).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::model::{Api, Pair, Peer};
use crate::ops::{OPENCL_LABEL_ENV, Plant};
use crate::pairs;
use crate::peer::{ExpectedGpu, PEER_GPUS_ENV, peer_gpus_value};
use crate::probe::Probe;
use crate::runner::RunOptions;
use crate::runtimes::hip::visible::RUN_ORDINALS_ENV;

/// What a worker for `pair` needs in its environment ([`pairs::worker_env`]: its OpenCL vendor
/// library alone, its ROCm install where the run has several), the label the pair's OpenCL
/// device has in that library, the GPUs its peer may open as the probe saw them
/// ([`PEER_GPUS_ENV`]), and for a HIP pair only those GPUs visible ([`visible_hip_env`]).
pub fn worker_env(probe: &Probe, pair: &Pair) -> Vec<(String, String)> {
    let label = &pair.opencl.label;
    let mut env = pairs::worker_env(probe, pair);
    let local = probe.cl_device(label).and_then(|d| d.icd_label.clone());
    if let Some(local) = local {
        env.push((OPENCL_LABEL_ENV.to_string(), format!("{label}={local}")));
    }
    let gpus = pair_gpus(probe, pair);
    if !gpus.is_empty() {
        env.push((PEER_GPUS_ENV.to_string(), peer_gpus_value(&gpus)));
    }
    if pair.peer.api == Api::Hip {
        let inherited = |k: &str| std::env::var(k).ok();
        env.extend(visible_hip_env(pair, inherited));
    }
    env
}

/// The device-runtime GPUs of `pair` as the probe saw them: its peer's, and for a pair across
/// GPUs the OpenCL device's, each by the label the worker's runtime gives it.
fn pair_gpus(probe: &Probe, pair: &Pair) -> Vec<ExpectedGpu> {
    let Some(rt) = probe.device_runtimes().into_iter().find(|rt| {
        rt.api == pair.peer.api && rt.install.map(|i| &i.label) == pair.install.as_ref()
    }) else {
        return Vec::new();
    };
    std::iter::once(pair.peer.ordinal)
        .chain(pair.cl_gpu)
        .filter_map(|ordinal| {
            let info = rt.status.devices.iter().find(|d| d.ordinal == ordinal)?;
            let label = Peer {
                api: pair.peer.api,
                ordinal,
            }
            .label();
            Some(ExpectedGpu::of(label, info))
        })
        .collect()
}

/// A HIP worker sees only its pair's GPUs (HIP's init sets up every GPU it sees: ~10 s on 8
/// GPUs against under 1 s for one, legacy-rocm-build#4152): `HIP_VISIBLE_DEVICES` lists them
/// in ascending order, and [`RUN_ORDINALS_ENV`] tells the worker which run ordinal each is
/// (`runtimes::hip::visible`). Where the runner was itself given a list (`HIP_VISIBLE_DEVICES`,
/// or `CUDA_VISIBLE_DEVICES`, which HIP reads in its absence), the run's ordinals are places in
/// that list, and the worker's list is made of its entries. A run ordinal past that list leaves
/// the worker seeing every GPU the runner sees. CUDA workers get no such list: NVIDIA's OpenCL
/// honours `CUDA_VISIBLE_DEVICES` too, which would renumber the OpenCL device the worker finds
/// its pair's device by, and a CUDA worker's start is not spent on the GPUs it does not use.
pub fn visible_hip_env(
    pair: &Pair,
    inherited: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut ordinals: Vec<usize> = std::iter::once(pair.peer.ordinal)
        .chain(pair.cl_gpu)
        .collect();
    ordinals.sort_unstable();
    ordinals.dedup();
    let given = inherited("HIP_VISIBLE_DEVICES")
        .filter(|v| !v.trim().is_empty())
        .or_else(|| inherited("CUDA_VISIBLE_DEVICES").filter(|v| !v.trim().is_empty()));
    let entries: Option<Vec<String>> = match &given {
        None => Some(ordinals.iter().map(usize::to_string).collect()),
        Some(list) => {
            let listed: Vec<&str> = list.split(',').map(str::trim).collect();
            ordinals
                .iter()
                .map(|&o| listed.get(o).map(|e| e.to_string()))
                .collect()
        }
    };
    let Some(entries) = entries else {
        return Vec::new();
    };
    let run: Vec<String> = ordinals.iter().map(usize::to_string).collect();
    vec![
        ("HIP_VISIBLE_DEVICES".to_string(), entries.join(",")),
        (RUN_ORDINALS_ENV.to_string(), run.join(",")),
    ]
}

/// The executable workers start from: this one, held open while this value lives, so that a
/// rebuild that replaces the file on disk mid-run (`cargo build`) cannot change or remove it.
/// The path `/proc/self/fd/N` names the open file in each child, which inherits it.
pub struct WorkerExe {
    path: PathBuf,
    _open: Option<File>,
}

impl WorkerExe {
    /// This executable, pinned where `/proc` allows, else by its path.
    pub fn pin() -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("locating the clhip binary to start workers")?;
        if let Ok(file) = File::open(&exe) {
            use std::os::fd::AsRawFd as _;
            let pinned = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            if pinned.exists() {
                return Ok(WorkerExe {
                    path: pinned,
                    _open: Some(file),
                });
            }
        }
        Ok(WorkerExe {
            path: exe,
            _open: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The options a command's workers run under. Every command that starts workers makes them
/// here, so that the per-case limit, the worker's start and the ROCm install are read one way.
pub struct RunOptionsBuilder {
    opts: RunOptions,
}

impl RunOptionsBuilder {
    /// Workers of `exe` on `seed`'s data, each case held to `timeout_s`.
    pub fn new(exe: &WorkerExe, seed: u64, timeout_s: f64) -> Self {
        let mut opts = RunOptions::new(exe.path().to_path_buf(), seed);
        opts.timeout = Duration::from_secs_f64(timeout_s);
        // A worker's start (runtime init, kernel builds) is held to the case limit too: a fixed
        // allowance would let a stopped worker outlast a short --timeout.
        opts.startup_timeout = opts.timeout;
        RunOptionsBuilder { opts }
    }

    /// The `--rocm-path` installs: one is every worker's; each of several is named in its own
    /// pairs' environment instead ([`worker_env`]).
    pub fn rocm_paths(mut self, rocm_paths: &[PathBuf]) -> Self {
        if let [one] = rocm_paths {
            self.opts
                .worker_args
                .extend(["--rocm-path".to_string(), one.display().to_string()]);
        }
        self
    }

    /// Cases per worker process, worker processes at once per GPU, and whether each runner
    /// thread keeps a spare worker.
    pub fn workers(mut self, cases_per_worker: usize, jobs: usize, spare_workers: bool) -> Self {
        self.opts.cases_per_worker = cases_per_worker;
        self.opts.jobs = jobs;
        self.opts.spare_workers = spare_workers;
        self
    }

    /// Times a case that came out worse than expected is run again alone.
    pub fn retries(mut self, retries: u32) -> Self {
        self.opts.retries = retries;
        self
    }

    /// An error planted in every case, or in the cases `only` selects where it names any.
    pub fn plant(mut self, plant: Option<Plant>, only: &[String]) -> anyhow::Result<Self> {
        if let Some(p) = plant {
            let name = serde_json::to_value(p)?;
            self.opts.worker_args.extend([
                "--plant".to_string(),
                name.as_str().unwrap_or_default().to_string(),
            ]);
            if !only.is_empty() {
                self.opts
                    .worker_args
                    .extend(["--plant-only".to_string(), only.join(",")]);
            }
        }
        Ok(self)
    }

    pub fn build(self) -> RunOptions {
        self.opts
    }
}
