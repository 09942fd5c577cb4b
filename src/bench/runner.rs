//! `clhip bench runner`: the runner's own cost, the same plan under several settings.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;

use crate::runner::Planned;

/// One configuration of `clhip bench runner`: how many jobs per GPU, how many cases a worker
/// runs before a fresh one takes over, and whether each runner thread keeps a spare worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerConfig {
    pub jobs: usize,
    pub cases_per_worker: usize,
    pub spare_workers: bool,
}

/// The configurations `clhip bench runner` times: one process per case first unless `-j`
/// values were picked, then each `-j` value (batched, 64 cases a worker) with each spare
/// setting. A value given twice would time the same setting twice under two lines that read
/// as two settings: it is timed once, and the returned notes say which were dropped.
pub fn runner_configs(jobs: &[usize], spares: &[bool]) -> (Vec<RunnerConfig>, Vec<String>) {
    let picked = !jobs.is_empty();
    let mut unique: Vec<usize> = Vec::new();
    let mut notes = Vec::new();
    for &j in jobs {
        if unique.contains(&j) {
            continue;
        }
        let times = jobs.iter().filter(|&&k| k == j).count();
        if times > 1 {
            notes.push(format!("-j {j} is given {times} times: timed once"));
        }
        unique.push(j);
    }
    if unique.is_empty() {
        unique = vec![1, 4, 8];
    }
    let naive = RunnerConfig {
        jobs: 1,
        cases_per_worker: 1,
        spare_workers: false,
    };
    let configs = (!picked)
        .then_some(naive)
        .into_iter()
        .chain(unique.iter().flat_map(|&jobs| {
            spares.iter().map(move |&spare_workers| RunnerConfig {
                jobs,
                cases_per_worker: 64,
                spare_workers,
            })
        }))
        .collect();
    (configs, notes)
}

/// `clhip bench runner`: the same plan run under each configuration, with the wall time, the
/// time the cases themselves took, and the runner's overhead per case (wall x workers - case
/// time, over the cases). Batched (64 cases a worker) against one process per case shows what a
/// worker's start costs; `-j 1/4/8` what parallel workers buy. Where the plan spans several
/// GPUs, each setting also runs the first GPU's cases alone, and prints the ratio of the two
/// wall times (each GPU has its own workers, so the goal is about 1x).
pub fn run_runner(
    plan: &[Planned],
    base: &crate::runner::RunOptions,
    configs: &[RunnerConfig],
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "{} cases; per configuration: wall time, summed case time, runner overhead per case",
        plan.len()
    )?;
    let gpus = gpus_of(plan);
    for (i, c) in configs.iter().enumerate() {
        let mut opts = base.clone();
        opts.jobs = c.jobs;
        opts.cases_per_worker = c.cases_per_worker;
        opts.spare_workers = c.spare_workers;
        let all = measure(plan, &opts, &format!("{i}"))?;
        writeln!(
            out,
            "  -j {:<2} {:>3} cases/worker{}: {}",
            c.jobs,
            c.cases_per_worker,
            if c.spare_workers { ", spares" } else { "" },
            all.line(c.jobs)
        )
        .context("writing the bench")?;
        all.write_steps(out)?;
        // The same per-GPU matrix on one GPU: with each GPU's own workers, two GPUs should
        // take about the time of one.
        if let [first, _, ..] = &gpus[..] {
            let one: Vec<Planned> = plan.iter().filter(|p| &p.gpu == first).cloned().collect();
            let alone = measure(&one, &opts, &format!("{i}-one"))?;
            // Both sides of the ratio hold the GPUs' cases only: the host pairs' (PoCL's)
            // are timed apart when the plan has any.
            let every: Vec<Planned> = plan
                .iter()
                .filter(|p| gpus.contains(&p.gpu))
                .cloned()
                .collect();
            let together = if every.len() == plan.len() {
                all.wall_s
            } else {
                let m = measure(&every, &opts, &format!("{i}-gpus"))?;
                writeln!(
                    out,
                    "      the {} GPUs' cases: {}",
                    gpus.len(),
                    m.line(c.jobs)
                )
                .context("writing the bench")?;
                m.wall_s
            };
            writeln!(
                out,
                "      {first} alone: {}\n      per-GPU matrix on {} GPUs ({} cases) against {first} alone ({} cases): {:.2} s / {:.2} s = {:.2}x",
                alone.line(c.jobs),
                gpus.len(),
                every.len(),
                one.len(),
                together,
                alone.wall_s,
                together / alone.wall_s.max(1e-9)
            )
            .context("writing the bench")?;
        }
    }
    Ok(())
}

/// The GPUs of device-runtime pairs the plan keeps busy, in order of first appearance (a host
/// pair's OpenCL device is not one of them).
fn gpus_of(plan: &[Planned]) -> Vec<String> {
    let mut gpus: Vec<String> = Vec::new();
    for p in plan {
        let on_gpu = p
            .work
            .case()
            .is_some_and(|c| c.pair.peer.api != crate::model::Api::Host);
        if on_gpu && !p.gpu.is_empty() && !gpus.contains(&p.gpu) {
            gpus.push(p.gpu.clone());
        }
    }
    gpus
}

/// One timed run of a plan, with its workers' traced steps.
struct Measured {
    wall_s: f64,
    cases_s: f64,
    results: usize,
    /// Worker queues: one per GPU (every item without one shares a queue).
    queues: usize,
    stopped: Option<String>,
    steps: Vec<crate::trace::StepTotal>,
}

fn measure(
    plan: &[Planned],
    base: &crate::runner::RunOptions,
    tag: &str,
) -> anyhow::Result<Measured> {
    let mut opts = base.clone();
    let trace_dir =
        std::env::temp_dir().join(format!("clhip-bench-trace-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&trace_dir);
    opts.worker_env.push((
        crate::trace::TRACE_ENV.to_string(),
        trace_dir.display().to_string(),
    ));
    let t = Instant::now();
    let end = crate::runner::run(plan.to_vec(), &opts, &mut |_| {})?;
    let wall_s = t.elapsed().as_secs_f64();
    let steps = crate::trace::read_dir(&trace_dir).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&trace_dir);
    Ok(Measured {
        wall_s,
        cases_s: end.results.iter().map(|r| r.duration_s).sum(),
        results: end.results.len(),
        queues: plan
            .iter()
            .map(|p| p.gpu.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            .max(1),
        stopped: end.stopped.map(|s| format!("{s:?}")),
        steps: crate::trace::totals(&steps),
    })
}

impl Measured {
    /// Wall time, summed case time, and the runner's overhead per case (wall x workers - case
    /// time, over the cases; `jobs` workers per GPU).
    fn line(&self, jobs: usize) -> String {
        let workers = (jobs * self.queues) as f64;
        let overhead = (self.wall_s * workers - self.cases_s).max(0.0) / self.results.max(1) as f64;
        format!(
            "wall {:7.2} s, cases {:7.2} s, overhead {:6.1} ms/case{}",
            self.wall_s,
            self.cases_s,
            overhead * 1e3,
            match &self.stopped {
                Some(s) => format!(" (stopped: {s})"),
                None => String::new(),
            }
        )
    }

    /// Where the workers' time went: a step whose time in flight is near its summed time ran
    /// one at a time across processes, and more jobs cannot shorten it.
    fn write_steps(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        for t in self.steps.iter().take(TRACE_LINES) {
            writeln!(
                out,
                "      {:<40} {:>4} x {:7.1} ms = {:7.2} s summed, {:7.2} s in flight",
                t.what,
                t.count,
                t.total_s * 1e3 / t.count.max(1) as f64,
                t.total_s,
                t.in_flight_s
            )
            .context("writing the bench")?;
        }
        Ok(())
    }
}

/// Steps shown per configuration, longest summed time first.
const TRACE_LINES: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Api, Case, ClDeviceRef, Expectation, Op, Pair, PathKind, Peer, SyncMode};

    fn planned(api: Api, gpu: usize) -> Planned {
        let case = Case {
            pair: Pair {
                opencl: ClDeviceRef {
                    platform_index: 0,
                    device_index: gpu,
                    label: format!("nvidia{gpu}"),
                },
                peer: Peer { api, ordinal: gpu },
                install: None,
                cl_gpu: None,
            },
            path: PathKind::Copy,
            sync: SyncMode::Finish,
            op: Op::Handoff,
            n: 1,
            env: Default::default(),
        };
        let gpu_label = match api {
            Api::Host => case.pair.opencl.label.clone(),
            _ => case.pair.peer.label(),
        };
        let mut p = Planned::case(case, Expectation::Pass);
        p.gpu = gpu_label;
        p
    }

    #[test]
    fn a_jobs_value_given_twice_is_timed_once_and_said_so() {
        let jobs = |configs: &[RunnerConfig]| -> Vec<(usize, bool)> {
            configs.iter().map(|c| (c.jobs, c.spare_workers)).collect()
        };
        let (configs, notes) = runner_configs(&[4, 4], &[false]);
        assert_eq!(jobs(&configs), [(4, false)]);
        assert_eq!(notes, ["-j 4 is given 2 times: timed once"]);
        let (configs, notes) = runner_configs(&[8, 1, 8, 8, 1], &[false, true]);
        assert_eq!(
            jobs(&configs),
            [(8, false), (8, true), (1, false), (1, true)]
        );
        assert_eq!(
            notes,
            [
                "-j 8 is given 3 times: timed once",
                "-j 1 is given 2 times: timed once"
            ]
        );
        // None picked: one process per case, then -j 1, 4 and 8.
        let (configs, notes) = runner_configs(&[], &[false]);
        assert!(notes.is_empty());
        assert_eq!(configs[0].cases_per_worker, 1);
        assert_eq!(jobs(&configs[1..]), [(1, false), (4, false), (8, false)]);
    }

    #[test]
    fn the_gpus_compared_are_the_device_runtimes_not_the_host_pairs() {
        let plan = [
            planned(Api::Host, 0),
            planned(Api::Cuda, 1),
            planned(Api::Cuda, 0),
            planned(Api::Cuda, 1),
        ];
        assert_eq!(gpus_of(&plan), ["cuda1", "cuda0"]);
        assert_eq!(gpus_of(&plan[..2]), ["cuda1"]);
    }
}
