//! What a run holds, settled before any worker starts: the matrix expanded over the pairs a
//! probe found and filtered; each case with the environment its worker needs and the GPU it
//! keeps busy; the cases the probe already decides (a buffer the device cannot hold, an SVM
//! kind it lacks), which cost no worker; what the results file records of the selection; and
//! each pair's GPU identity, by which the consistency check compares GPUs. [`workers`] makes
//! the options the runner starts the workers with.

mod workers;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};

use crate::cases::{self, Matrix};
use crate::model::{Api, Case, Expectation, Outcome};
use crate::partition::Partition;
use crate::probe::{self, Probe, Queried};
use crate::report::Selection;
use crate::results::{CaseResult, Planned};
use crate::{pairs, paths};

pub use workers::{RunOptionsBuilder, WorkerExe, visible_hip_env, worker_env};

/// The default seed: fixed, so two nightly runs of one build see the same data and a diff of
/// their matrices is a diff of drivers. Pass --seed to vary it.
pub const DEFAULT_SEED: u64 = 0x5EED;

/// This machine probed in a child process of this executable, so that a vendor library that
/// crashes or hangs takes the child, not the command.
pub fn probe_machine(rocm_paths: &[PathBuf]) -> anyhow::Result<Probe> {
    let exe = std::env::current_exe().context("locating the clhip binary")?;
    probe::probe_in_child(&exe, rocm_paths)
}

/// The matrix expanded over the pairs a probe found, filtered.
pub fn planned_cases(
    probe: &Probe,
    matrix: &Matrix,
    filters: &[String],
    devices: &[String],
) -> anyhow::Result<Vec<Case>> {
    let mut pairs = pairs::from_probe(probe);
    if !devices.is_empty() {
        pairs = pairs::select(probe, pairs, devices)?;
    }
    if pairs.is_empty() {
        bail!(
            "no OpenCL device found, nothing to pair (OpenCL: {}; see `clhip probe`)",
            probe.opencl_status
        );
    }
    cases::filter(matrix.expand(&pairs), filters)
}

/// A case as the runner plans it: the environment its worker needs, and the GPU it keeps
/// busy: its device runtime's, else its OpenCL device. One GPU seen by several ROCm installs
/// is one GPU: their cases share its workers.
pub fn plan_item(probe: &Probe, c: Case, e: Expectation) -> Planned {
    let env = case_env(probe, &c);
    let gpu = match c.pair.peer.api {
        Api::Host => c.pair.opencl.label.clone(),
        _ => c.pair.peer.label(),
    };
    let mut p = Planned::case(c, e);
    p.env = env;
    p.gpu = gpu;
    p
}

/// Each GPU's PCI device (`domain:bus:device.function`) by its label in the plan, where the
/// probe knows it: the pair's OpenCL device is that GPU (a host pair's OpenCL device is its
/// own GPU).
pub fn gpu_pci(probe: &Probe, items: &[Planned]) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::new();
    for p in items {
        let Some(c) = p.work.case() else {
            continue;
        };
        if let Some(dev) = probe.cl_device(&c.pair.opencl.label)
            && let Queried::Value(pci) = &dev.pci_bus_id
        {
            out.entry(p.gpu.clone()).or_insert_with(|| pci.clone());
        }
    }
    out
}

/// The plan's queues (`Planned::gpu`) whose cases use no GPU: each an OpenCL CPU device (PoCL)
/// with the host peer. No GPU driver's kernel line is theirs.
pub fn no_gpu_queues(probe: &Probe, items: &[Planned]) -> std::collections::HashSet<String> {
    let on_cpu = |p: &Planned| {
        p.work.case().is_some_and(|c| {
            c.pair.peer.api == Api::Host
                && probe
                    .cl_device(&c.pair.opencl.label)
                    .is_some_and(|d| d.is_cpu())
        })
    };
    let mut out: std::collections::HashSet<String> = items
        .iter()
        .filter(|p| on_cpu(p))
        .map(|p| p.gpu.clone())
        .collect();
    for p in items.iter().filter(|p| !on_cpu(p)) {
        out.remove(&p.gpu);
    }
    out
}

/// What the worker of `case` needs in its environment: its pair's ([`worker_env`]), then the
/// case's environment variant, set last so that it wins where both name a variable (a
/// variant of `CUDA_DEVICE_MAX_CONNECTIONS`).
pub fn case_env(probe: &Probe, case: &Case) -> Vec<(String, String)> {
    let mut env = worker_env(probe, &case.pair);
    env.extend(case.env.vars().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

/// What a run sets out to run, `plan` being every case its filters select (before any
/// partition: the whole plan is what tells shards of one run from strangers).
pub fn selection<'a>(
    filters: &[String],
    devices: &[String],
    partition: Option<Partition>,
    matrix: &Matrix,
    plan: impl Iterator<Item = &'a str> + Clone,
) -> Selection {
    Selection {
        filters: filters.to_vec(),
        devices: devices.to_vec(),
        // Debug covers every field of the parsed matrix, and two clhip versions are never
        // compared: shards of different versions are refused first.
        matrix: Selection::hash(format!("{matrix:?}").as_bytes()),
        planned: plan.clone().count(),
        plan: Selection::plan_hash(plan),
        shards: partition.into_iter().collect(),
    }
}

/// `plan` split into the items to run and the cases the probe decides: each of those an
/// `unsupported` result with the refusal a worker would meet ([`decided_by_probe`]). Both keep
/// the plan's order.
pub fn decide_by_probe(probe: &Probe, plan: Vec<Planned>) -> (Vec<Planned>, Vec<CaseResult>) {
    let mut run = Vec::new();
    let mut decided = Vec::new();
    for p in plan {
        match p.work.case().and_then(|c| decided_by_probe(probe, c)) {
            Some(reason) => decided.push(CaseResult::new(
                p.id.clone(),
                p.work.clone(),
                Outcome::unsupported(reason),
                p.expectation,
                0.0,
            )),
            None => run.push(p),
        }
    }
    (run, decided)
}

/// Why `case` cannot run on its pair's OpenCL device, from what the probe found: a buffer too
/// big, or an SVM kind the device lacks. The text is the refusal a worker would meet.
pub fn decided_by_probe(probe: &Probe, case: &Case) -> Option<String> {
    too_big_for_device(probe, case).or_else(|| {
        let dev = probe.cl_device(&case.pair.opencl.label)?;
        match &dev.svm {
            Queried::Value(caps) => paths::svm_refusal(case.path, caps),
            _ => None,
        }
    })
}

/// Why the device of `case`'s pair cannot hold the case's largest buffer, if it cannot: more
/// than CL_DEVICE_MAX_MEM_ALLOC_SIZE, or all its buffers more than CL_DEVICE_GLOBAL_MEM_SIZE.
pub fn too_big_for_device(probe: &Probe, case: &Case) -> Option<String> {
    let bytes = cases::case_bytes(case.op, case.n)?;
    let label = &case.pair.opencl.label;
    let dev = probe.cl_device(label)?;
    if let Queried::Value(max) = dev.max_alloc_bytes
        && bytes.buffer > max
    {
        return Some(format!(
            "a {}-byte buffer is more than {label} can allocate at once (CL_DEVICE_MAX_MEM_ALLOC_SIZE {max})",
            bytes.buffer
        ));
    }
    if let Queried::Value(total) = dev.global_mem_bytes
        && bytes.device > total
    {
        return Some(format!(
            "the case's {} bytes of device memory are more than {label} has (CL_DEVICE_GLOBAL_MEM_SIZE {total})",
            bytes.device
        ));
    }
    None
}

/// Each pair's GPU as "model, driver": pairs of equal identity are compared for consistency.
pub fn gpu_identities(probe: &Probe) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for pair in pairs::from_probe(probe) {
        let identity = match pair.peer.api {
            Api::Host => probe.cl_device(&pair.opencl.label).map(|d| {
                let driver = match &d.driver_version {
                    Queried::Value(v) => v.clone(),
                    _ => String::new(),
                };
                format!("OpenCL {}, driver {driver}", d.name)
            }),
            api => probe
                .device_runtimes()
                .into_iter()
                .find(|rt| rt.api == api && rt.install.map(|i| &i.label) == pair.install.as_ref())
                .and_then(|rt| {
                    // One GPU under two installs is compared across GPUs of one install only.
                    let d = rt
                        .status
                        .devices
                        .iter()
                        .find(|d| d.ordinal == pair.peer.ordinal)?;
                    Some(format!(
                        "{} {}, driver {}{}",
                        d.name,
                        d.arch,
                        d.driver_version,
                        rt.install
                            .map(|i| format!(", {}", i.participant()))
                            .unwrap_or_default()
                    ))
                }),
        };
        if let Some(id) = identity {
            out.insert(pair.id(), id);
        }
    }
    out
}

#[cfg(test)]
mod across_tests;
#[cfg(test)]
mod tests;
