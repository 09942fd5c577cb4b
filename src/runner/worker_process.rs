//! A worker process, on top of the one child supervisor (`crate::child`): started with the
//! run's command line and environment, registered with the run's control while it lives, fed
//! one work item at a time; and the spare a runner thread starts ahead of need.

use std::collections::VecDeque;
use std::io::Write;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::Receiver;

use anyhow::Context;

use super::control::lock;
use super::options::RunOptions;
use crate::child::{GroupChild, Line};
use crate::protocol::{PREPARE_ENV, WorkItem};
use crate::results::{Event, Planned};

/// One work item, as one line on the worker's stdin. The worker holds at most this one unread
/// line, so the write never waits on a full pipe.
pub(super) fn write_item(stdin: &mut ChildStdin, p: &Planned) -> anyhow::Result<()> {
    let item = WorkItem {
        id: p.id.clone(),
        work: p.work.clone(),
        data: p.data,
    };
    let mut line = serde_json::to_string(&item).context("encoding a work item")?;
    line.push('\n');
    stdin
        .write_all(line.as_bytes())
        .and_then(|()| stdin.flush())
        .context("writing a work item to the worker")
}

/// A worker process leading its own process group, registered with the run's control while
/// it lives; killed and reaped on drop at the latest.
pub(super) struct WorkerProcess {
    pub(super) group: GroupChild,
}

impl WorkerProcess {
    /// Starts a worker with `env` on top of the run's; `prepare` makes it a spare that opens
    /// the runtimes of that case before its first work item.
    pub(super) fn spawn(
        opts: &RunOptions,
        env: &[(String, String)],
        prepare: Option<&crate::model::Case>,
        kind: &str,
    ) -> anyhow::Result<(Self, ChildStdin, Receiver<Line>)> {
        let prepare = prepare
            .map(serde_json::to_string)
            .transpose()
            .context("encoding a spare worker's case")?
            .map(|json| (PREPARE_ENV.to_string(), json));
        let mut group = GroupChild::spawn(
            Command::new(&opts.worker_exe)
                .args(&opts.worker_args)
                .envs(opts.worker_env.iter().map(|(k, v)| (k, v)))
                .envs(env.iter().map(|(k, v)| (k, v)))
                .envs(prepare.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::piped()),
        )
        .with_context(|| format!("starting worker {}", opts.worker_exe.display()))?;
        let pgid = group.pgid();
        crate::trace::mark(&format!("spawned worker {pgid}"));
        opts.control.register(pgid.as_raw(), kind);
        // The group leaves the run's registry before the reap, so no signal can reach a
        // reused id. From here on the guard owns the child: an error below still reaps it.
        let control = opts.control.clone();
        group.on_kill(move |pgid| control.unregister(pgid));
        let (stdin, rx) = group.lines("clhip-reader")?;
        let stdin = stdin.context("worker spawned without its pipes")?;
        Ok((WorkerProcess { group }, stdin, rx))
    }

    pub(super) fn pid(&self) -> u32 {
        self.group.pid()
    }

    pub(super) fn has_exited(&self) -> anyhow::Result<bool> {
        self.group.has_exited()
    }

    pub(super) fn kill_group(&self) {
        self.group.kill_group();
    }

    pub(super) fn kill_and_reap(&mut self) -> anyhow::Result<ExitStatus> {
        self.group.kill_and_reap()
    }
}

/// A worker started before it is needed: it makes its runtimes and inputs for its runner
/// thread's next case (`protocol::PREPARE_ENV`), then waits for work.
pub(super) struct Spare {
    pub(super) worker: WorkerProcess,
    pub(super) stdin: ChildStdin,
    pub(super) rx: Receiver<Line>,
    pub(super) env: Vec<(String, String)>,
}

/// A runner thread's spare worker. A crash or fault ends a worker by design, and a new one
/// spends a few hundred ms making its device contexts (more while other workers make theirs):
/// the spare has made them while the last worker ran cases.
pub(super) struct Spares<'q> {
    pub(super) queue: &'q Mutex<VecDeque<Planned>>,
    pub(super) spare: Option<Spare>,
}

impl Spares<'_> {
    /// Starts a spare for the queue's next case, unless there is one already or none is left.
    pub(super) fn fill(&mut self, opts: &RunOptions, on_event: &mut dyn FnMut(&Event)) {
        if self.spare.is_some() || opts.control.is_interrupted() {
            return;
        }
        let Some(next) = lock(self.queue).front().cloned() else {
            return;
        };
        // A spare that cannot start costs nothing: a worker is started when one is needed.
        if let Ok((worker, stdin, rx)) =
            WorkerProcess::spawn(opts, &next.env, next.work.case(), &next.pair_kind())
        {
            on_event(&Event::SpareStarted { pid: worker.pid() });
            self.spare = Some(Spare {
                worker,
                stdin,
                rx,
                env: next.env,
            });
        }
    }

    /// The spare, while it lives (one that died waiting is let go).
    pub(super) fn take(&mut self) -> Option<Spare> {
        let spare = self.spare.take()?;
        match spare.worker.has_exited() {
            Ok(false) => Some(spare),
            _ => None,
        }
    }
}
