//! The worker: a child process that runs work items one after another and reports each over a
//! line protocol, so that a crash, a hang or a device fault costs one case and not the run.
//!
//! The lines it speaks are [`crate::protocol`]'s.

use std::fs::File;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;

use crate::model::Outcome;
use crate::protocol::{PREPARE_ENV, WorkItem, WorkerEvent, send};
use crate::results::Work;

/// A test-only planted error, in every case or only in those some filters match.
#[derive(Debug, Clone, Default)]
pub struct Planting {
    pub plant: Option<crate::ops::Plant>,
    /// Globs or substrings of case ids; empty: every case.
    pub only: Vec<String>,
}

impl Planting {
    pub fn for_case(&self, id: &str) -> Option<crate::ops::Plant> {
        let picked = self.only.is_empty()
            || self
                .only
                .iter()
                .any(|f| crate::filter::matches_filter(f, id));
        self.plant.filter(|_| picked)
    }
}

/// The hidden `clhip __worker --seed N` subcommand: runs work items from stdin until EOF, or
/// until one faults. A faulted device context is not trusted for further cases, so the worker
/// exits 0 after reporting the fault and the parent starts a fresh one for the rest.
pub fn worker_main(
    seed: u64,
    planting: Planting,
    rocm_path: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    crate::child::die_with_parent("worker");
    crate::trace::mark("worker start");
    let protocol = Arc::new(Mutex::new(crate::child::take_stdout_for_protocol()?));
    report_panics_as_harness_errors(protocol.clone());
    let announce_to = protocol.clone();
    crate::fault::set_announcer(Box::new(move |span| {
        // Best effort: a parent that is gone learns nothing either way.
        let _ = send(&announce_to, &WorkerEvent::Buffer { span: span.clone() });
    }));
    let blocking_to = protocol.clone();
    crate::blocking::set_announcer(Box::new(move |call| {
        let _ = send(&blocking_to, &WorkerEvent::Blocking { call: call.into() });
    }));
    let mut state = crate::ops::WorkerState::default();
    state.rocm_path = rocm_path;
    if let Some(case) = std::env::var(PREPARE_ENV)
        .ok()
        .and_then(|json| serde_json::from_str::<crate::model::Case>(&json).ok())
    {
        crate::ops::prepare(&mut state, &case, seed);
    }

    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading work from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let item: WorkItem = serde_json::from_str(&line)
            .with_context(|| format!("decoding a work item from stdin: {line}"))?;

        send(
            &protocol,
            &WorkerEvent::Start {
                id: item.id.clone(),
            },
        )?;
        let started = Instant::now();
        crate::calls::begin_case(&item.id);
        crate::footprint::begin_case();
        let outcome = crate::trace::timed(&format!("case {}", item.id), || match &item.work {
            Work::Case(case) => match variant_not_here(case) {
                Some(reason) => Outcome::Error { reason },
                None => {
                    let plant = planting.for_case(&item.id);
                    crate::ops::execute_with_data(&mut state, case, seed, plant, item.data)
                }
            },
            Work::Mock(action) => crate::mock::perform(*action),
        });
        crate::calls::end_case();
        // A fault leaves a context that is not trusted; a timeout the case found itself, a
        // queue that holds a wait that never ends: the worker takes no further case.
        let retires = matches!(outcome, Outcome::Fault { .. } | Outcome::Timeout { .. });
        send(
            &protocol,
            &WorkerEvent::Done {
                id: item.id,
                outcome,
                duration_s: started.elapsed().as_secs_f64(),
                footprint: crate::footprint::end_case(),
            },
        )?;
        if retires {
            // Releasing a faulted context, or a queue that holds a wait that never ends (a
            // thread may still be inside the driver's enqueue), can block or crash: the
            // process exit leaves that to the kernel.
            std::mem::forget(state);
            return Ok(());
        }
    }
    Ok(())
}

/// Why this process is not the environment `case`'s variant names, if it is not: a variant's
/// case run in a worker started without its variables would be reported under an id that
/// says otherwise, so it is the harness's error and never a verdict.
fn variant_not_here(case: &crate::model::Case) -> Option<String> {
    let wrong: Vec<String> = case
        .env
        .vars()
        .filter_map(|(name, want)| match std::env::var(name) {
            Ok(got) if got == want => None,
            Ok(got) => Some(format!("{name}={got} (the variant sets {want})")),
            Err(_) => Some(format!("{name} unset (the variant sets {want})")),
        })
        .collect();
    (!wrong.is_empty()).then(|| {
        format!(
            "the worker does not run in the case's environment variant: {}",
            wrong.join(", ")
        )
    })
}

/// A panic in the worker is the harness's bug, not the driver's: tell the parent so before the
/// process dies, so the case is recorded as a harness error and never as a crash.
fn report_panics_as_harness_errors(protocol: Arc<Mutex<File>>) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let reason = format!("the worker panicked: {info}");
        // try_lock: a panic while the lock is held must not deadlock the hook.
        if let Ok(mut file) = protocol.try_lock()
            && let Ok(line) = (WorkerEvent::HarnessError { reason }).to_line()
        {
            let _ = file.write_all(line.as_bytes()).and_then(|()| file.flush());
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plant_limited_to_some_cases_reaches_only_those() {
        let every = Planting {
            plant: Some(crate::ops::Plant::FlipElement),
            only: Vec::new(),
        };
        assert_eq!(
            every.for_case("nvidia0+cuda0/copy/finish/handoff/n=1"),
            every.plant
        );
        let one = Planting {
            only: vec!["nvidia1+cuda1/copy/finish/*".into()],
            ..every.clone()
        };
        assert_eq!(
            one.for_case("nvidia1+cuda1/copy/finish/handoff/n=1"),
            every.plant
        );
        assert_eq!(one.for_case("nvidia0+cuda0/copy/finish/handoff/n=1"), None);
        assert_eq!(Planting::default().for_case("x"), None);
    }

    #[test]
    fn a_variant_case_in_a_worker_without_its_variables_is_refused_naming_them() {
        let mut case = crate::model::Case {
            pair: crate::model::Pair {
                opencl: crate::model::ClDeviceRef {
                    platform_index: 0,
                    device_index: 0,
                    label: "pocl0".into(),
                },
                peer: crate::model::Peer::HOST,
                install: None,
                cl_gpu: None,
            },
            path: crate::model::PathKind::Copy,
            sync: crate::model::SyncMode::Finish,
            op: crate::model::Op::Handoff,
            n: 1,
            env: Default::default(),
        };
        assert_eq!(variant_not_here(&case), None, "the plain environment");
        // A variable set here to another value (or not at all), and one no environment sets.
        case.env = crate::model::EnvVariant::new([("HOME", "x")]).unwrap();
        let why = variant_not_here(&case).expect("HOME is not x here");
        assert!(why.contains("HOME"), "{why}");
        assert!(why.contains("(the variant sets x)"), "{why}");
        case.env = crate::model::EnvVariant::new([("VARIANT_TEST_UNSET_9F2", "1")]).unwrap();
        let why = variant_not_here(&case).expect("unset");
        assert_eq!(
            why,
            "the worker does not run in the case's environment variant: VARIANT_TEST_UNSET_9F2 unset (the variant sets 1)"
        );
    }
}
