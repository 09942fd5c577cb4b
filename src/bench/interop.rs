//! `clhip bench interop`, the parent: which (pair, path, sync) targets to measure, one child
//! process per target (the binary re-executing itself as `__bench-interop`, in its own process
//! group, with only the pair's OpenCL vendor library), and how each child ended. A path whose
//! driver segfaults (NVIDIA's OpenCL on `device+use-host-ptr`) or hangs costs that target only:
//! it is reported as `crash SIGSEGV` or `timeout`, with whatever it measured before, and the
//! bench goes on.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::child::{GroupChild, Line, Tail, crash_signal, harness_exit};
use crate::model::{Api, ApiError, Outcome, OutcomeKind, Pair, PathKind, SyncMode};
use crate::ops::Plant;
use crate::paths::PathFacts;

use super::measure::{ChildLine, Job};
use super::results::{PairBench, Problem, Row, Settings, Target, TargetBench};

/// Lines of a dead child's output kept for its crash report.
const TAIL_LINES: usize = 20;

/// How long a child that has exited gets to deliver the rest of its output.
const DRAIN: Duration = Duration::from_secs(2);

/// The sync modes a path is measured with: every one the specification allows on it for this
/// peer. Negative controls are left out (leaving out a required sync is not a way to hand
/// memory over, and their stale data would fail the checks), and so is `semaphore`, which no
/// OpenCL clhip can reach drives (see `sync::semaphores`).
pub fn bench_syncs(path: PathKind, peer: Api) -> Vec<SyncMode> {
    path.syncs(peer)
        .iter()
        .copied()
        .filter(|&s| !crate::model::is_negative_control(path, s) && s != SyncMode::Semaphore)
        .collect()
}

/// Every target of a pair: each path that exists for its peer with each of its bench syncs,
/// then the native baseline.
pub fn targets(pair: &Pair) -> Vec<Target> {
    let mut out: Vec<Target> = PathKind::ALL
        .iter()
        .filter(|p| p.applies_to(pair.peer.api))
        .flat_map(|&path| {
            bench_syncs(path, pair.peer.api)
                .into_iter()
                .map(move |sync| Target::Path { path, sync })
        })
        .collect();
    out.push(Target::Native);
    out
}

/// The target every path of a pair is compared with: the copy path with its first sync.
pub fn copy_reference(peer: Api) -> Target {
    Target::Path {
        path: PathKind::Copy,
        sync: bench_syncs(PathKind::Copy, peer)[0],
    }
}

pub fn target_id(pair: &Pair, target: Target) -> String {
    format!("{}/{}", pair.id(), target.name())
}

/// The targets the filters pick (globs or substrings of `pair/path/sync` and `pair/native`, as
/// case filters are), in the order [`targets`] gives. A pair with any target picked also keeps
/// its copy reference and its native baseline: they are what every number is compared with.
/// A filter that matches nothing is an error, as for `run`.
pub fn select(pairs: &[Pair], filters: &[String]) -> anyhow::Result<Vec<(Pair, Target)>> {
    let all: Vec<(Pair, Target)> = pairs
        .iter()
        .flat_map(|p| targets(p).into_iter().map(move |t| (p.clone(), t)))
        .collect();
    if filters.is_empty() {
        return Ok(all);
    }
    if filters.iter().any(String::is_empty) {
        bail!("an empty filter would match every target; give a glob or a substring of target ids");
    }
    let ids: Vec<String> = all.iter().map(|(p, t)| target_id(p, *t)).collect();
    for f in filters {
        if !ids.iter().any(|id| crate::filter::matches_filter(f, id)) {
            bail!(
                "filter `{f}` matches none of the {} bench targets; ids look like `{}`",
                ids.len(),
                ids.first().map_or("(none)", String::as_str)
            );
        }
    }
    let picked = |id: &str| filters.iter().any(|f| crate::filter::matches_filter(f, id));
    let pairs_picked: Vec<&Pair> = all
        .iter()
        .zip(&ids)
        .filter(|(_, id)| picked(id))
        .map(|((p, _), _)| p)
        .collect();
    Ok(all
        .iter()
        .zip(&ids)
        .filter(|((pair, t), id)| {
            picked(id)
                || (pairs_picked.contains(&pair)
                    && (*t == Target::Native || *t == copy_reference(pair.peer.api)))
        })
        .map(|(pt, _)| pt.clone())
        .collect())
}

/// One target as the parent starts it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub pair: Pair,
    pub target: Target,
    /// The child's environment: only the pair's OpenCL vendor library, and the label the
    /// device has in it (what the runner gives its workers).
    pub env: Vec<(String, String)>,
    /// CL_DEVICE_MAX_MEM_ALLOC_SIZE of the pair's OpenCL device, where the probe read it:
    /// larger sizes are not attempted.
    pub max_alloc_bytes: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// The executable children start from (this one, held open).
    pub exe: PathBuf,
    pub settings: Settings,
    pub rocm_path: Option<PathBuf>,
    /// Test-only: a side that does nothing, in every child.
    pub plant: Option<Plant>,
    /// Test-only: the children of this path die by SIGSEGV after their first size.
    pub plant_crash: Option<PathKind>,
}

/// What the native baseline does on this peer.
pub fn native_note(pair: &Pair) -> String {
    let peer = pair.peer.label();
    match pair.peer.api {
        Api::Host => "the pipeline on the CPU alone, one thread: the add as a loop, rustfft's f32 FFT, the host's scale and magnitude loops; the scale bandwidth on pageable host memory".into(),
        _ => format!(
            "{peer} has no FFT in clhip (no cuFFT or rocFFT binding), so the pipeline runs with nothing crossing: OpenCL add and FFT on its own buffer, then {peer}'s scale and magnitude on its own device memory; the scale bandwidth on {peer}'s device memory"
        ),
    }
}

/// Measures every planned target, one child at a time (children measuring at once would
/// measure each other), calling `done` after each.
pub fn run(
    plan: &[Planned],
    opts: &Options,
    done: &mut dyn FnMut(&TargetBench),
) -> anyhow::Result<Vec<PairBench>> {
    let mut pairs: Vec<PairBench> = Vec::new();
    for p in plan {
        let t = run_target(p, opts)?;
        done(&t);
        let id = p.pair.id();
        match pairs.iter_mut().find(|b| b.pair == id) {
            Some(b) => b.targets.push(t),
            None => pairs.push(PairBench {
                pair: id,
                peer: p.pair.peer.label(),
                targets: vec![t],
            }),
        }
    }
    Ok(pairs)
}

fn run_target(p: &Planned, opts: &Options) -> anyhow::Result<TargetBench> {
    let started = Instant::now();
    let s = &opts.settings;
    let mut problems = Vec::new();
    let mut sizes = Vec::new();
    for &bytes in &s.sizes_bytes {
        match p.max_alloc_bytes {
            Some(max) if bytes > max => problems.push(Problem {
                measure: None,
                bytes: Some(bytes),
                outcome: Outcome::unsupported(format!(
                    "a {bytes}-byte buffer is more than {} can allocate at once (CL_DEVICE_MAX_MEM_ALLOC_SIZE {max})",
                    p.pair.opencl.label
                )),
            }),
            _ => sizes.push(bytes),
        }
    }
    let job = Job {
        pair: p.pair.clone(),
        target: p.target,
        sizes_bytes: sizes,
        reps: s.reps,
        warmup: s.warmup,
        pipeline_len: s.pipeline_len,
        seed: s.seed,
        rocm_path: opts.rocm_path.clone(),
        plant: opts.plant,
        plant_crash: opts.plant_crash.is_some() && opts.plant_crash == p.target.path(),
    };
    let json = serde_json::to_string(&job).context("encoding a bench job")?;
    let watched = watch(
        &opts.exe,
        &json,
        &p.env,
        Duration::from_secs_f64(s.timeout_s),
    )?;
    let mut rows: Vec<Row> = Vec::new();
    let mut during = None;
    let mut finished = false;
    for line in watched.lines {
        match line {
            ChildLine::Begin { measure, bytes } => during = Some((measure, bytes)),
            ChildLine::Row(r) => {
                rows.push(r);
                during = None;
            }
            ChildLine::Problem(pr) => {
                problems.push(pr);
                during = None;
            }
            ChildLine::Done => finished = true,
        }
    }
    let died = death(
        &watched.ended,
        finished,
        &watched.tail,
        p.pair.peer.api,
        s.timeout_s,
    );
    let outcome = overall(died, &rows, &problems);
    Ok(TargetBench {
        target: p.target,
        id: target_id(&p.pair, p.target),
        during: (outcome.kind() != OutcomeKind::Pass)
            .then_some(during)
            .flatten()
            .map(|(m, b)| format!("{} at {}", m.name(), super::human_bytes(b))),
        outcome,
        note: match p.target {
            Target::Native => native_note(&p.pair),
            Target::Path { .. } => String::new(),
        },
        rows,
        problems,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// How the target went as a whole: how its child died, if it did; else its worst problem when
/// that is wrong data or a fault (a time next to wrong data would mislead) or when nothing at
/// all was measured; else `pass`, the measurements that could not be made listed apart.
fn overall(died: Option<Outcome>, rows: &[Row], problems: &[Problem]) -> Outcome {
    if let Some(o) = died {
        return o;
    }
    // Harness errors first: never a verdict on the driver, always shown.
    let rank = |o: &Outcome| o.kind().severity().map_or(u8::MAX, |s| s);
    let worst = problems.iter().map(|p| &p.outcome).max_by_key(|o| rank(o));
    match worst {
        Some(o)
            if rows.is_empty()
                || matches!(
                    o.kind(),
                    OutcomeKind::Fail | OutcomeKind::Fault | OutcomeKind::Error
                ) =>
        {
            o.clone()
        }
        _ => Outcome::pass(),
    }
}

/// How a child that did not finish cleanly ended, in the runner's words: a harness error for
/// its own failures (status 2, a panic, an unreadable protocol line), `timeout`, `fault` for
/// ROCm's page-fault line, else `crash` with the signal (or the exit status of a child that
/// left without finishing). `None` for a child that finished.
fn death(
    ended: &Ended,
    finished: bool,
    tail: &[String],
    peer: Api,
    timeout_s: f64,
) -> Option<Outcome> {
    let stderr_tail = tail.join("\n");
    let status = match ended {
        Ended::BadLine(line) => {
            return Some(Outcome::Error {
                reason: format!("unreadable protocol line from the bench child: {line}"),
            });
        }
        Ended::TimedOut => return Some(Outcome::timeout(timeout_s)),
        Ended::Exited(status) => *status,
    };
    if finished && status.success() {
        return None;
    }
    if let Some(f) = crate::fault::parse_rocr_fault(&stderr_tail) {
        let api = if peer == Api::Host { Api::OpenCl } else { peer };
        return Some(Outcome::Fault {
            error: ApiError {
                api,
                call: "ROCr GPU page-fault handler (the process then aborted)".into(),
                code: i64::from(status.signal().unwrap_or(0)),
                name: "Memory access fault".into(),
                detail: format!(
                    "GPU node-{}, address {:#x}; reason: {}; ROCr said: {}",
                    f.node, f.address, f.reason, f.line
                ),
            },
        });
    }
    if let Some((code, which)) = harness_exit(status) {
        return Some(Outcome::Error {
            reason: format!(
                "the bench child exited with status {code} ({which}): {}",
                tail.last().map_or("no output", String::as_str)
            ),
        });
    }
    let (signal, signal_name) = crash_signal(status);
    Some(Outcome::Crash {
        signal,
        signal_name,
        stderr_tail,
        process: "bench child".into(),
    })
}

/// How a watched child ended.
enum Ended {
    Exited(ExitStatus),
    TimedOut,
    /// A prefixed line that does not parse: the harness's bug.
    BadLine(String),
}

struct Watched {
    lines: Vec<ChildLine>,
    /// The last lines of driver output (stderr, and stdout, which the child points there).
    tail: Vec<String>,
    ended: Ended,
}

/// Starts `exe __bench-interop --job JSON` in its own process group and reads it until it
/// exits or `timeout` passes; then its whole group is killed (a driver's helper processes
/// with it) and it is reaped.
fn watch(
    exe: &std::path::Path,
    job: &str,
    env: &[(String, String)],
    timeout: Duration,
) -> anyhow::Result<Watched> {
    let mut child = GroupChild::spawn(
        Command::new(exe)
            .args(["__bench-interop", "--job", job])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null()),
    )
    .with_context(|| format!("starting a bench child {}", exe.display()))?;
    let result = read_child(&mut child, timeout);
    // Whatever happened above, nothing of the group outlives the target.
    let status = child.kill_and_reap().context("reaping a bench child")?;
    let mut watched = result?;
    if let Ended::Exited(s) = &mut watched.ended {
        *s = status;
    }
    Ok(watched)
}

fn read_child(child: &mut GroupChild, timeout: Duration) -> anyhow::Result<Watched> {
    let (_, rx) = child
        .lines("clhip-bench-reader")
        .context("starting a bench child reader")?;
    let deadline = Instant::now() + timeout;
    let mut lines = Vec::new();
    let mut tail = Tail::new(TAIL_LINES);
    let mut eofs = 0;
    let mut exited_at: Option<Instant> = None;
    let ended = loop {
        let now = Instant::now();
        match exited_at {
            // The real status is read when the child is reaped.
            Some(t) if eofs == 2 || now >= t + DRAIN => {
                break Ended::Exited(ExitStatus::from_raw(0));
            }
            None if now >= deadline => break Ended::TimedOut,
            _ => {}
        }
        let wait = Duration::from_millis(100).min(deadline.saturating_duration_since(now));
        match rx.recv_timeout(wait) {
            Ok(Line::Protocol(l)) => match ChildLine::parse(&l) {
                Some(Ok(line)) => lines.push(line),
                Some(Err(e)) => break Ended::BadLine(format!("{e}: {l}")),
                None => tail.push(l),
            },
            Ok(Line::Output(l)) => tail.push(l),
            Ok(Line::Eof) => eofs += 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                eofs = 2;
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Asked without reaping, so the group id stays the child's until it is reaped. Its
        // pipes closing is not enough: a helper of its group may hold them open.
        if exited_at.is_none() && child.has_exited()? {
            exited_at = Some(Instant::now());
        }
    };
    Ok(Watched {
        lines,
        tail: tail.lines().cloned().collect(),
        ended,
    })
}

#[cfg(test)]
mod tests {
    use super::super::results::Measure;
    use super::*;
    use crate::model::{ClDeviceRef, Peer};

    fn pair(api: Api) -> Pair {
        Pair {
            opencl: ClDeviceRef {
                platform_index: 0,
                device_index: 0,
                label: "cl0".into(),
            },
            peer: Peer { api, ordinal: 0 },
            install: None,
            cl_gpu: None,
        }
    }

    fn status_of(shell: &str) -> ExitStatus {
        Command::new("sh").args(["-c", shell]).status().unwrap()
    }

    /// An executable script standing in for `clhip __bench-interop`.
    fn fake_child(name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("clhip-bench-child-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn a_dead_child_keeps_what_it_reported_and_its_last_words() {
        let begin = ChildLine::Begin {
            measure: Measure::ScaleShared,
            bytes: 4096,
        };
        let line = format!(
            "{}{}",
            super::super::measure::PREFIX,
            serde_json::to_string(&begin).unwrap()
        );
        let exe = fake_child(
            "segv",
            &format!("echo '{line}'; echo 'driver: about to die' >&2; kill -SEGV $$"),
        );
        let w = watch(&exe, "{}", &[], Duration::from_secs(20)).unwrap();
        assert_eq!(w.lines, vec![begin]);
        assert!(
            w.tail.iter().any(|l| l.contains("about to die")),
            "{:?}",
            w.tail
        );
        assert!(matches!(w.ended, Ended::Exited(s) if s.signal() == Some(11)));
    }

    #[test]
    fn a_hung_child_is_killed_at_its_deadline() {
        let exe = fake_child("hang", "sleep 30 & wait");
        let started = Instant::now();
        let w = watch(&exe, "{}", &[], Duration::from_millis(300)).unwrap();
        assert!(matches!(w.ended, Ended::TimedOut));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_helper_holding_the_pipes_does_not_hold_the_bench() {
        // The child exits at once; its helper keeps stdout and stderr open for 30 s.
        let exe = fake_child("helper", "sleep 30 & exit 0");
        let started = Instant::now();
        let w = watch(&exe, "{}", &[], Duration::from_secs(20)).unwrap();
        assert!(matches!(w.ended, Ended::Exited(s) if s.success()));
        assert!(
            started.elapsed() < DRAIN + Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        let bad = fake_child(
            "bad-line",
            &format!("echo '{}{{nope'", super::super::measure::PREFIX),
        );
        let w = watch(&bad, "{}", &[], Duration::from_secs(20)).unwrap();
        assert!(matches!(w.ended, Ended::BadLine(_)));
    }

    #[test]
    fn bench_syncs_leave_out_negative_controls_and_semaphores() {
        assert_eq!(
            bench_syncs(PathKind::Copy, Api::Cuda),
            vec![SyncMode::Finish, SyncMode::Event]
        );
        assert_eq!(
            bench_syncs(PathKind::UseHostPtr, Api::Host),
            vec![SyncMode::Map]
        );
        assert_eq!(
            bench_syncs(PathKind::VmmFdClImport, Api::Cuda),
            vec![SyncMode::AcquireRelease]
        );
        for api in [Api::Host, Api::Cuda, Api::Hip] {
            for t in targets(&pair(api)) {
                if let Target::Path { path, sync } = t {
                    assert!(!crate::model::is_negative_control(path, sync), "{t:?}");
                    assert!(path.applies_to(api));
                }
            }
        }
        assert_eq!(copy_reference(Api::Host).name(), "copy/finish");
    }

    #[test]
    fn filters_keep_the_copy_reference_and_native_of_a_picked_pair() {
        let pairs = [pair(Api::Host), pair(Api::Cuda)];
        let picked = select(&pairs, &["cl0+cuda0/pinned*".to_string()]).unwrap();
        let ids: Vec<String> = picked.iter().map(|(p, t)| target_id(p, *t)).collect();
        assert_eq!(
            ids,
            [
                "cl0+cuda0/copy/finish",
                "cl0+cuda0/pinned+use-host-ptr/map",
                "cl0+cuda0/native"
            ]
        );
        let e = select(&pairs, &["nothing-like-this".to_string()]).unwrap_err();
        assert!(e.to_string().contains("matches none"), "{e}");
        assert!(select(&pairs, &[String::new()]).is_err());
        assert_eq!(
            select(&pairs, &[]).unwrap().len(),
            targets(&pairs[0]).len() + targets(&pairs[1]).len()
        );
    }

    #[test]
    fn a_child_death_is_named_by_its_signal_or_status() {
        let segv = death(
            &Ended::Exited(status_of("kill -SEGV $$")),
            false,
            &["last words".into()],
            Api::Cuda,
            1.0,
        )
        .unwrap();
        assert!(
            matches!(&segv, Outcome::Crash { signal: 11, signal_name, .. } if signal_name == "SIGSEGV"),
            "{segv:?}"
        );
        assert!(
            segv.reason().contains("bench child killed by SIGSEGV"),
            "{}",
            segv.reason()
        );
        let exit3 = death(
            &Ended::Exited(status_of("exit 3")),
            false,
            &[],
            Api::Host,
            1.0,
        )
        .unwrap();
        assert!(
            matches!(exit3, Outcome::Crash { signal: 0, .. }),
            "{exit3:?}"
        );
        let harness = death(
            &Ended::Exited(status_of("exit 2")),
            false,
            &[],
            Api::Host,
            1.0,
        )
        .unwrap();
        assert_eq!(harness.kind(), OutcomeKind::Error);
        let unfinished = death(
            &Ended::Exited(status_of("exit 0")),
            false,
            &[],
            Api::Host,
            1.0,
        );
        assert_eq!(unfinished.map(|o| o.kind()), Some(OutcomeKind::Crash));
        assert!(
            death(
                &Ended::Exited(status_of("exit 0")),
                true,
                &[],
                Api::Host,
                1.0
            )
            .is_none()
        );
        let rocr = death(
            &Ended::Exited(status_of("kill -ABRT $$")),
            false,
            &["Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x7f00. Reason: Page not present.".into()],
            Api::Hip,
            1.0,
        )
        .unwrap();
        assert!(
            matches!(&rocr, Outcome::Fault { error } if error.api == Api::Hip),
            "{rocr:?}"
        );
        let late = death(&Ended::TimedOut, false, &[], Api::Host, 7.0).unwrap();
        assert_eq!(late, Outcome::timeout(7.0));
    }

    #[test]
    fn wrong_data_or_a_fault_outweighs_the_rows_a_refusal_does_not() {
        let row = Row {
            measure: Measure::HandoffToPeer,
            bytes: 8,
            warmup: 0,
            stats: super::super::results::Stats::of(vec![1.0]).unwrap(),
        };
        let problem = |o: Outcome| Problem {
            measure: None,
            bytes: Some(16),
            outcome: o,
        };
        let refused = problem(Outcome::unsupported("too big"));
        assert_eq!(
            overall(
                None,
                std::slice::from_ref(&row),
                std::slice::from_ref(&refused)
            )
            .kind(),
            OutcomeKind::Pass
        );
        assert_eq!(
            overall(None, &[], std::slice::from_ref(&refused)).kind(),
            OutcomeKind::Unsupported
        );
        let wrong = problem(Outcome::Fail {
            reason: crate::model::FailReason::Api(ApiError {
                api: Api::OpenCl,
                call: "x".into(),
                code: 0,
                name: "X".into(),
                detail: String::new(),
            }),
        });
        assert_eq!(
            overall(None, std::slice::from_ref(&row), &[refused, wrong]).kind(),
            OutcomeKind::Fail
        );
        assert_eq!(overall(None, &[row], &[]).kind(), OutcomeKind::Pass);
    }
}
