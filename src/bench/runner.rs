//! `clhip bench runner`: the runner's own cost, the same plan under several settings.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;

/// One configuration of `clhip bench runner`: how many jobs per GPU, how many cases a worker
/// runs before a fresh one takes over.
#[derive(Debug, Clone, Copy)]
pub struct RunnerConfig {
    pub jobs: usize,
    pub cases_per_worker: usize,
}

/// `clhip bench runner`: the same plan run under each configuration, with the wall time, the
/// time the cases themselves took, and the runner's overhead per case (wall x jobs - case time,
/// over the cases). Batched (64 cases a worker) against one process per case shows what a
/// worker's start costs; `-j 1/4/8` what parallel workers buy.
pub fn run_runner(
    plan: &[crate::runner::Planned],
    base: &crate::runner::RunOptions,
    configs: &[RunnerConfig],
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "{} cases; per configuration: wall time, summed case time, runner overhead per case",
        plan.len()
    )?;
    for (i, c) in configs.iter().enumerate() {
        let mut opts = base.clone();
        opts.jobs = c.jobs;
        opts.cases_per_worker = c.cases_per_worker;
        let trace_dir =
            std::env::temp_dir().join(format!("clhip-bench-trace-{}-{i}", std::process::id()));
        let _ = std::fs::remove_dir_all(&trace_dir);
        opts.worker_env.push((
            crate::trace::TRACE_ENV.to_string(),
            trace_dir.display().to_string(),
        ));
        let t = Instant::now();
        let end = crate::runner::run(plan.to_vec(), &opts, &mut |_| {})?;
        let wall = t.elapsed().as_secs_f64();
        let cases: f64 = end.results.iter().map(|r| r.duration_s).sum();
        let n = end.results.len().max(1) as f64;
        let overhead = (wall * c.jobs as f64 - cases).max(0.0) / n;
        writeln!(
            out,
            "  -j {:<2} {:>3} cases/worker: wall {wall:7.2} s, cases {cases:7.2} s, overhead {:6.1} ms/case{}",
            c.jobs,
            c.cases_per_worker,
            overhead * 1e3,
            match &end.stopped {
                Some(s) => format!(" (stopped: {s:?})"),
                None => String::new(),
            }
        )
        .context("writing the bench")?;
        // Where the workers' time went: a step whose time in flight is near its summed time
        // ran one at a time across processes, and more jobs cannot shorten it.
        let steps = crate::trace::read_dir(&trace_dir).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&trace_dir);
        for t in crate::trace::totals(&steps).iter().take(TRACE_LINES) {
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
    }
    Ok(())
}

/// Steps shown per configuration, longest summed time first.
const TRACE_LINES: usize = 10;
