//! Ops: what a case computes across a pair. Each op moves data through the case's path in both
//! directions, passes ownership with the case's sync mode only, and holds the result to the f64
//! CPU reference with the bound from `tolerance`. The harness's own bookkeeping (a check
//! kernel's counters, the pipeline's read-back) goes through plain buffers that are read only
//! after every step under test has run, so it adds no sync the case didn't ask for.
//!
//! One file per op; what they share (the worker's state, opening sessions and peers, handing
//! OpenCL's output over, OpenCL producing and consuming shared memory) is here.

mod cholesky;
pub mod data;
mod fft;
mod gemm;
pub(crate) mod handoff;
pub(crate) mod pipeline;
mod placement;
pub mod reuse;
#[cfg(test)]
mod stand_in;

use std::collections::HashMap;

use num_complex::Complex32;

use crate::calls;
use crate::fft::FftCache;
use crate::generate::DataKind;
use crate::model::{ApiError, Case, CaseError, Op, Outcome, Peer, Phase, SyncMode};
use crate::paths::{self, DeviceBuffer, Shared};
pub use crate::peer::open_peer;
use crate::runtimes::opencl::{self, ClArg, ClDevice, ClEvent, ClSession, SessionError};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access};
use data::DataCache;

/// A deliberate error planted in a real case, to show that its checks catch it (test-only,
/// through the hidden `--plant` flag). Each is applied at the moment the peer takes over
/// OpenCL's output, which is where a driver bug would bite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Plant {
    /// Flip one bit of one element in the shared memory after OpenCL wrote it.
    FlipElement,
    /// Hand the memory to the peer with no sync, whatever the case's mode says.
    SkipSync,
    /// Give the peer an address that maps nothing.
    BadPointer,
    /// The OpenCL side does nothing at all: every kernel launch becomes a marker. Every case
    /// must then come out non-pass, or its verdict does not depend on OpenCL's work.
    ClNoop,
    /// The peer side does nothing at all: no kernel, no write, no library call on the case's
    /// memory. Every case must then come out non-pass, or its verdict does not depend on the
    /// peer's work.
    PeerNoop,
    /// Die as ROCm does on a GPU page fault, at the handover: print ROCr's fault line for an
    /// address 4 KiB past the end of the case's shared memory, then abort.
    RocrFault,
    /// `semaphore` cases: OpenCL leaves out its signal, so the peer's wait never ends. The
    /// case must end as a timeout naming that wait, not hang the run.
    SkipSignal,
    /// `semaphore` cases: the peer waits on a decoy semaphore that the Vulkan broker signalled
    /// at once, not on OpenCL's: its read races OpenCL's work and must be caught as stale.
    WrongSemaphore,
    /// Plant nothing: the control run of a planted-error test.
    None,
    /// `handoff` cases: OpenCL's pattern check kernel is left out (a marker takes its place),
    /// every other kernel runs. Only the check's ran-marker can then tell that nothing was
    /// checked: the case must fail there.
    SkipCheckKernel,
    /// `fft` cases: neither side does anything, and the case's new memory held the correct
    /// result (as a reused allocation holds an identical earlier case's) before its poison
    /// fill. Only that fill stands between the case and a pass on leftover data.
    StaleCorrect,
    /// `handoff` cases: one word flipped after the peer's last rewrite, so OpenCL's last check
    /// alone sees it: the case must fail there, at that word.
    FlipAfterPeer,
    /// `handoff` cases: OpenCL's kernel that rewrites the shared memory writes one element more
    /// than the case has. Every check of the case's own data passes; only the guard zone after
    /// the memory can see it, and must fail the case naming the buffer, the offset (the view's
    /// size) and the bytes.
    ClOverrun,
    /// `handoff` cases: the peer's first write covers one element more than the case has, as
    /// [`Plant::ClOverrun`] on the other side.
    PeerOverrun,
    /// `pipeline` cases: OpenCL's read-back of the shared memory into a plain buffer copies
    /// one element more. The case's data pass; only the read-back buffer's guard, checked at
    /// the case's end, can see it.
    ReadbackOverrun,
    /// `reuse` cases: crossing [`reuse::PLANTED_CROSSING`] is handed over with no sync, and
    /// OpenCL's write for it is held back until the peer has looked (a GPU still at work).
    /// Every other crossing is synced: the case must fail at that crossing, and there only.
    SkipOneSync,
    /// At the handover, [`Plant::LEAK_BYTES`] of host memory are written and never freed, as a
    /// runtime that grew its staging would: the case's footprint must show it, and `diff`
    /// against a clean run must call it a footprint regression. Its data are untouched.
    LeakHost,
    /// A shape-dependent corruption, the kind `clhip explore` exists to find: one bit of the
    /// first word past a 2 MiB boundary is flipped where the peer takes OpenCL's output, only
    /// when the shared memory straddles that boundary (its bytes, from offset 0 of its
    /// allocation, run past [`Plant::STRADDLE_BOUNDARY`]). Every smaller shape passes.
    #[serde(rename = "straddle-2mib")]
    Straddle2Mib,
    /// Pairs across GPUs: the peer silently opens OpenCL's GPU instead of its own, as a
    /// worker whose device numbering went wrong would. The case must end as a harness error
    /// naming both GPUs, never run on one GPU as if on two.
    WrongGpu,
}

impl std::str::FromStr for Plant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "flip-element" => Ok(Plant::FlipElement),
            "skip-sync" => Ok(Plant::SkipSync),
            "bad-pointer" => Ok(Plant::BadPointer),
            "cl-noop" => Ok(Plant::ClNoop),
            "peer-noop" => Ok(Plant::PeerNoop),
            "rocr-fault" => Ok(Plant::RocrFault),
            "skip-signal" => Ok(Plant::SkipSignal),
            "wrong-semaphore" => Ok(Plant::WrongSemaphore),
            "none" => Ok(Plant::None),
            "skip-check-kernel" => Ok(Plant::SkipCheckKernel),
            "stale-correct" => Ok(Plant::StaleCorrect),
            "flip-after-peer" => Ok(Plant::FlipAfterPeer),
            "cl-overrun" => Ok(Plant::ClOverrun),
            "peer-overrun" => Ok(Plant::PeerOverrun),
            "skip-one-sync" => Ok(Plant::SkipOneSync),
            "leak-host" => Ok(Plant::LeakHost),
            "readback-overrun" => Ok(Plant::ReadbackOverrun),
            "straddle-2mib" => Ok(Plant::Straddle2Mib),
            "wrong-gpu" => Ok(Plant::WrongGpu),
            _ => Err(format!(
                "unknown plant `{s}` (expected flip-element, skip-sync, bad-pointer, cl-noop, peer-noop, rocr-fault, skip-signal, wrong-semaphore, none, skip-check-kernel, stale-correct, flip-after-peer, cl-overrun, peer-overrun, skip-one-sync, readback-overrun, leak-host, straddle-2mib, wrong-gpu)"
            )),
        }
    }
}

impl Plant {
    /// The element a flip lands on: the middle, so neither end-of-buffer logic hides it.
    pub fn flip_index(n: usize) -> usize {
        n / 2
    }

    /// The bit flipped: the top exponent bit of the real part's f32 (or the pattern word), so
    /// the error is far outside every bound.
    pub const FLIP_BIT: u32 = 1 << 30;

    /// What the `leak-host` plant leaks: 64 MiB, four times the footprint rule's floor.
    pub const LEAK_BYTES: usize = 64 << 20;
    /// The boundary the `straddle-2mib` plant fires on: 2 MiB, a huge page.
    pub const STRADDLE_BOUNDARY: usize = 2 << 20;

    /// The 32-bit word the `straddle-2mib` plant flips in memory of `bytes` bytes: the first
    /// past the boundary, if the memory reaches past it.
    pub fn straddle_word(bytes: usize) -> Option<usize> {
        (bytes > Self::STRADDLE_BOUNDARY).then_some(Self::STRADDLE_BOUNDARY / 4)
    }

    /// The one op a plant is made for; in a case of another op it would plant nothing, so
    /// that case is a skip rather than a pass that proves nothing.
    pub fn only_op(self) -> Option<Op> {
        match self {
            Plant::SkipCheckKernel
            | Plant::FlipAfterPeer
            | Plant::ClOverrun
            | Plant::PeerOverrun => Some(Op::Handoff),
            Plant::SkipOneSync => Some(Op::Reuse),
            Plant::ReadbackOverrun => Some(Op::Pipeline),
            Plant::StaleCorrect => Some(Op::Fft),
            _ => None,
        }
    }
}

/// Runs the peer's own work on the case's memory, unless the `peer-noop` plant leaves it out.
fn peer_work(
    plant: Option<Plant>,
    work: impl FnOnce() -> Result<(), CaseError>,
) -> Result<(), CaseError> {
    if matches!(plant, Some(Plant::PeerNoop | Plant::StaleCorrect)) {
        Ok(())
    } else {
        work()
    }
}

/// Waits for the peer's own work before handing the memory back, except under `semaphore`,
/// whose signal on the peer's stream orders OpenCL after it with no host wait.
fn peer_done(peer: &mut dyn PeerRuntime, sync_mode: SyncMode) -> Result<(), CaseError> {
    if sync_mode == SyncMode::Semaphore {
        Ok(())
    } else {
        peer.synchronize()
    }
}

/// Hands OpenCL's output to the peer: the case's sync, or the plant's sabotage of it.
fn take_output(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync_mode: SyncMode,
    last: Option<&ClEvent>,
    access: Access,
    plant: Option<Plant>,
) -> Result<PeerPtr, CaseError> {
    let mode = if plant == Some(Plant::SkipSync) {
        SyncMode::None
    } else {
        sync_mode
    };
    let fault = match plant {
        Some(Plant::SkipSignal) => Some(sync::SemaphoreFault::SkipSignal),
        Some(Plant::WrongSemaphore) => Some(sync::SemaphoreFault::WrongSemaphore),
        _ => None,
    };
    if fault.is_some() && sync_mode != SyncMode::Semaphore {
        return Err(CaseError::Skip(format!(
            "the {plant:?} plant applies to the semaphore sync only, not {sync_mode}"
        )));
    }
    paths::to_peer_with(s, peer, m, mode, last, access, fault)?;
    match plant {
        Some(Plant::FlipElement) => {
            peer.flip_bit(m.peer, 2 * Plant::flip_index(m.len), Plant::FLIP_BIT)?;
            Ok(m.peer)
        }
        Some(Plant::Straddle2Mib) => {
            if let Some(word) = Plant::straddle_word(m.bytes()) {
                peer.flip_bit(m.peer, word, Plant::FLIP_BIT)?;
            }
            Ok(m.peer)
        }
        Some(Plant::BadPointer) => Ok(PeerPtr {
            addr: 0x8,
            len: m.len,
        }),
        Some(Plant::LeakHost) => {
            // Written, so that it is resident (untouched pages would not count), and kept for
            // the worker's life, as a leak is. Through black_box: an optimised build may
            // otherwise drop an allocation nothing reads (the H200 release run showed no leak).
            std::mem::forget(std::hint::black_box(vec![0x5Au8; Plant::LEAK_BYTES]));
            Ok(m.peer)
        }
        Some(Plant::RocrFault) => {
            let past_end = m.peer.addr as u64 + m.bytes() as u64 + 4096;
            eprintln!(
                "Memory access fault by GPU node-1 (Agent handle: 0x5555deadbeef) on address {past_end:#x}. Reason: Page not present or supervisor privilege."
            );
            std::process::abort()
        }
        _ => Ok(m.peer),
    }
}

/// What a worker keeps between cases: OpenCL sessions (context, queue, built program) per
/// device, the FFT plan, the peers. Building the program once per worker matters on PoCL, where
/// a build costs seconds.
#[derive(Default)]
pub struct WorkerState {
    /// The ROCm install the hip participant loads (`--rocm-path`).
    pub rocm_path: Option<std::path::PathBuf>,
    devices: Option<Result<Vec<ClDevice>, CaseError>>,
    sessions: HashMap<String, Result<ClSession, CaseError>>,
    fft: FftCache,
    peers: HashMap<Peer, Result<Box<dyn PeerRuntime>, CaseError>>,
    data: DataCache,
}

/// The case's peer, opened on first use in this worker. A device peer must first pass its
/// known-answer check: after a fault or crash in an earlier worker, a device that no longer
/// computes must not turn every later case into a misleading verdict. `instead`: the
/// `wrong-gpu` plant's device, opened in `want`'s place.
fn peer<'a>(
    peers: &'a mut HashMap<Peer, Result<Box<dyn PeerRuntime>, CaseError>>,
    want: &Peer,
    rocm_path: Option<&std::path::Path>,
    instead: Option<usize>,
) -> Result<&'a mut dyn PeerRuntime, CaseError> {
    let opened = instead.unwrap_or(want.ordinal);
    if instead.is_some() {
        // The plant must not meet the right device opened earlier (a spare worker's start).
        peers.remove(want);
    }
    let entry = peers.entry(want.clone()).or_insert_with(|| {
        crate::peer::open_peer_instead(want.api, want.ordinal, opened, rocm_path)
    });
    match entry {
        Ok(p) => Ok(p.as_mut()),
        Err(e) => Err(e.clone()),
    }
}

/// Set by the runner for a worker that loads one OpenCL vendor library alone:
/// `<label in the run>=<label within that library>`.
pub const OPENCL_LABEL_ENV: &str = "CLHIP_OPENCL_AS";

/// The label this worker's own enumeration gives the run's device `label`.
fn local_label(label: &str) -> String {
    std::env::var(OPENCL_LABEL_ENV)
        .ok()
        .and_then(|v| {
            let (run, local) = v.split_once('=')?;
            (run == label).then(|| local.to_string())
        })
        .unwrap_or_else(|| label.to_string())
}

/// The case's OpenCL session, opened on first use in this worker.
fn session<'a>(
    devices: &mut Option<Result<Vec<ClDevice>, CaseError>>,
    sessions: &'a mut HashMap<String, Result<ClSession, CaseError>>,
    case: &Case,
) -> Result<&'a mut ClSession, CaseError> {
    {
        let want = &case.pair.opencl;
        if !sessions.contains_key(&want.label) {
            let devices = devices.get_or_insert_with(|| {
                crate::trace::timed("OpenCL platforms and devices", opencl::enumerate)
                    .refused("no OpenCL platform could be enumerated")
            });
            let opened = match devices {
                Err(e) => Err(e.clone()),
                // By label: family and index within it stay the same when another vendor's
                // platform enumerates first, which platform indices do not. A worker that
                // loads its pair's vendor library alone numbers its devices within that
                // library: the runner says which label the pair's device has there.
                Ok(list) => match list.iter().find(|d| d.r.label == local_label(&want.label)) {
                    None => {
                        let seen: Vec<String> = list
                            .iter()
                            .map(|d| format!("{} ({})", d.r.label, d.platform_name))
                            .collect();
                        Err(CaseError::unsupported(format!(
                            "OpenCL device {} not found by the worker, which sees: {}",
                            want.label,
                            if seen.is_empty() {
                                "nothing".into()
                            } else {
                                seen.join(", ")
                            }
                        )))
                    }
                    Some(d) => crate::trace::timed("OpenCL context, queue and program", || {
                        ClSession::open(d.clone())
                    })
                    .map_err(|e| match e {
                        SessionError::Api(e) => CaseError::Unsupported {
                            reason: "OpenCL refused a context or queue".into(),
                            error: Some(e),
                        },
                        // Valid OpenCL C 1.2 that the driver's compiler rejects is a driver bug.
                        SessionError::Build(e) => CaseError::Broken(e),
                    }),
                },
            };
            sessions.insert(want.label.clone(), opened);
        }
        match sessions.get_mut(&want.label) {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(e.clone()),
            None => unreachable!("inserted above"),
        }
    }
}

/// Run one case to its outcome. Never panics on a driver result; a crash or hang here is the
/// worker's to contain.
pub fn execute(state: &mut WorkerState, case: &Case, seed: u64) -> Outcome {
    execute_planted(state, case, seed, None)
}

/// [`execute`] with a planted error (tests only).
pub fn execute_planted(
    state: &mut WorkerState,
    case: &Case,
    seed: u64,
    plant: Option<Plant>,
) -> Outcome {
    execute_with_data(state, case, seed, plant, DataKind::Seeded)
}

/// [`execute_planted`] on the data of `kind`: the seeded draw, as every run, or a simple input
/// that `clhip repro` tries after shrinking a case's size.
pub fn execute_with_data(
    state: &mut WorkerState,
    case: &Case,
    seed: u64,
    plant: Option<Plant>,
    kind: DataKind,
) -> Outcome {
    let outcome = match run(state, case, data_seed(seed, case.op, case.n), plant, kind) {
        Ok(note) => Outcome::Pass { note },
        Err(e) => e.into_outcome(),
    };
    let sticky = calls::scoped(calls::PENDING_FAULT, || {
        match state.peers.get_mut(&case.pair.peer) {
            Some(Ok(p)) => p.as_device().and_then(|d| d.sticky_fault()),
            _ => None,
        }
    });
    if plant == Some(Plant::WrongGpu) {
        // The planted peer is another GPU: no later case of this worker may meet it.
        state.peers.remove(&case.pair.peer);
    }
    with_sticky_fault(sticky, outcome)
}

/// A fault the case's own calls did not name as one (a library's EXECUTION_FAILED, an
/// allocation failing on a poisoned context), still pending on the peer's device after the
/// case, is still the fault it was: the case's outcome, with what the case saw as its detail.
fn with_sticky_fault(sticky: Option<ApiError>, outcome: Outcome) -> Outcome {
    match (sticky, &outcome) {
        (Some(_), Outcome::Fault { .. }) | (None, _) => outcome,
        (Some(mut error), earlier) => {
            error.detail = format!(
                "pending after the case, which saw: {} {}",
                earlier.kind(),
                earlier.reason()
            );
            Outcome::Fault { error }
        }
    }
}

/// A case's data come from the run seed, its op and its size, not from its path or sync: every
/// path of one (op, size) moves the same data, so a worker makes the input and its f64
/// reference once per (op, size) rather than once per case, and a case rerun alone (by a
/// filter, in a fresh worker after a crash, or as a reproducer) still sees exactly the data it
/// saw in the full run.
pub fn data_seed(run_seed: u64, op: Op, n: usize) -> u64 {
    let key = format!("{}/n={n}", op.name());
    crate::hash::fnv1a64(key.as_bytes()) ^ run_seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A case's inputs: the data seed, what the data are, and the worker's cache of them.
pub(crate) struct Inputs<'a> {
    seed: u64,
    kind: DataKind,
    cache: &'a mut DataCache,
}

impl Inputs<'_> {
    /// The seeded value `what` at size `n` from the cache (made by `make` the first time); a
    /// simple input is made afresh, since the cache knows seeds, not kinds.
    fn get<T: std::any::Any + Send + Sync + data::shared::Shareable>(
        &mut self,
        what: &'static str,
        n: usize,
        bytes: usize,
        make: impl FnOnce() -> T,
    ) -> std::sync::Arc<T> {
        if self.kind.is_seeded() {
            self.cache.get(what, self.seed, n, bytes, make)
        } else {
            std::sync::Arc::new(make())
        }
    }
}

fn run(
    state: &mut WorkerState,
    case: &Case,
    seed: u64,
    plant: Option<Plant>,
    kind: DataKind,
) -> Result<String, CaseError> {
    if let Some(p) = plant
        && let Some(op) = p.only_op()
        && op != case.op
    {
        return Err(CaseError::Skip(format!(
            "the {p:?} plant applies to {op} cases only"
        )));
    }
    let instead = match (plant, case.pair.cl_gpu) {
        (Some(Plant::WrongGpu), Some(cl_gpu)) => Some(cl_gpu),
        (Some(Plant::WrongGpu), None) => {
            return Err(CaseError::Skip(
                "the WrongGpu plant applies to pairs across GPUs only".into(),
            ));
        }
        _ => None,
    };
    if instead.is_none() {
        open_side_by_side(state, case, seed, kind);
    }
    let WorkerState {
        rocm_path,
        devices,
        sessions,
        fft,
        peers,
        data,
    } = state;
    // Opened once per worker, which a reproducer does at its start: not the case's calls.
    let session = calls::scoped(calls::OPEN, move || session(devices, sessions, case))?;
    let peer = calls::scoped(calls::OPEN, || {
        peer(peers, &case.pair.peer, rocm_path.as_deref(), instead)
    })?;
    session.notes.clear();
    session.skip_kernels = matches!(plant, Some(Plant::ClNoop | Plant::StaleCorrect));
    sync::set_wrong_semaphore(plant == Some(Plant::WrongSemaphore));
    let data = Inputs {
        seed,
        kind,
        cache: data,
    };
    // Every plain buffer the op makes from here on is kept for its guard check below.
    paths::guard::arm_case_buffers();
    let result = match case.op {
        Op::Handoff => handoff::handoff(session, peer, case, seed, plant),
        Op::Fft => fft::fft_op(session, fft, peer, case, data, plant),
        Op::Pipeline => pipeline::pipeline(session, fft, peer, case, data, plant),
        Op::Gemm => gemm::gemm(session, peer, case, data, plant),
        Op::Cholesky => cholesky::cholesky(session, peer, case, data, plant),
        Op::Placement => placement::placement(session, peer, case, seed, plant),
        Op::Reuse => reuse::reuse(session, peer, case, seed, plant),
    };
    // The op's own buffers (inputs, read-backs, check words) are checked once it has passed:
    // a case that already failed or stopped keeps its own reason.
    let guards = paths::guard::check_case_buffers(session, result.is_ok());
    let result = result.and_then(|summary| guards.map(|()| summary));
    // What the case learned on the way (the refused GPU-VA tokens of docs/domain.md#the-zero-copy-notes) is reported whatever the
    // verdict: on a driver where the path faults, that is where it matters most.
    crate::blocking::watch_peer_queue(None);
    let notes = std::mem::take(&mut session.notes);
    if notes.is_empty() {
        return result;
    }
    let notes = notes.join("; ");
    match result {
        Ok(summary) => Ok(format!("{summary}; {notes}")),
        Err(e) => Err(e.with_note(&notes)),
    }
}

/// A worker's first case opens both runtimes, and a worker starts again after every crash or
/// fault. On NVIDIA each start-up makes a context (OpenCL's own and CUDA's primary, ~130 ms
/// apiece on an H200, alone): they are made side by side, with the case's inputs (a 2048 x
/// 2048 HPD matrix takes 170 ms to draw). Only for CUDA: ROCm's OpenCL and HIP runtimes
/// starting at once in one process has never been tried. What fails is kept in the caches,
/// for the case to take.
fn open_side_by_side(state: &mut WorkerState, case: &Case, seed: u64, kind: DataKind) {
    let WorkerState {
        rocm_path,
        devices,
        sessions,
        peers,
        data,
        ..
    } = state;
    if case.pair.peer.api != crate::model::Api::Cuda
        || sessions.contains_key(&case.pair.opencl.label)
        || peers.contains_key(&case.pair.peer)
    {
        return;
    }
    let mut inputs = Inputs {
        seed,
        kind,
        cache: data,
    };
    calls::scoped(calls::OPEN, || {
        std::thread::scope(|s| {
            s.spawn(|| {
                let _ = session(devices, sessions, case);
            });
            s.spawn(|| make_inputs(&mut inputs, case));
            let _ = peer(peers, &case.pair.peer, rocm_path.as_deref(), None);
        })
    });
}

/// Opens `case`'s pair as a worker does for its first case (the OpenCL context on the pair's
/// device, the peer with its known-answer check), and says the first refusal: what a health
/// check of the GPU and a timed worker start do.
pub fn open_pair(state: &mut WorkerState, case: &Case) -> Result<(), CaseError> {
    let WorkerState {
        rocm_path,
        devices,
        sessions,
        peers,
        ..
    } = state;
    session(devices, sessions, case)?;
    peer(peers, &case.pair.peer, rocm_path.as_deref(), None)?;
    Ok(())
}

/// What a worker that ends in a device fault pays beyond its start: after [`open_pair`], a peer
/// kernel writes where nothing is mapped (the `bad-pointer` plant's address) and the peer's
/// sync reports the fault. `bench runner` times fresh processes doing this, for the floor of a
/// run whose faults each end a worker. `Ok` is the fault, as a worker would report it; a peer
/// with no device to fault (the host), or one that took the write, is the error.
pub fn open_pair_and_fault(state: &mut WorkerState, case: &Case) -> Result<(), CaseError> {
    open_pair(state, case)?;
    let peer = peer(
        &mut state.peers,
        &case.pair.peer,
        state.rocm_path.as_deref(),
        None,
    )?;
    if peer.as_device().is_none() {
        return Err(CaseError::unsupported(format!(
            "{} has no device to fault",
            case.pair.peer.label()
        )));
    }
    let nowhere = PeerPtr {
        addr: 0x8,
        len: 1 << 16,
    };
    let wrote = peer
        .fill_pattern(nowhere, 1)
        .and_then(|()| peer.synchronize());
    match wrote {
        Err(CaseError::Fault(_)) => Ok(()),
        Err(other) => Err(other),
        Ok(()) => Err(CaseError::Harness(format!(
            "{} wrote {:#x} with no fault",
            case.pair.peer.label(),
            nowhere.addr
        ))),
    }
}

/// What a spare worker does before its first case, which it has not been given yet: open the
/// runtimes and make the inputs of `case`, the case its runner thread has next (the one it
/// will most likely get). A case of another pair later opens its own.
pub fn prepare(state: &mut WorkerState, case: &Case, seed: u64) {
    crate::trace::timed("prepare a spare worker", || {
        open_side_by_side(
            state,
            case,
            data_seed(seed, case.op, case.n),
            DataKind::Seeded,
        )
    });
}

/// Make the case's inputs into the worker's cache, ahead of the op that takes them from there.
/// A simple input is not cached (it is made when the op asks), so nothing is made ahead.
fn make_inputs(data: &mut Inputs, case: &Case) {
    if !data.kind.is_seeded() {
        return;
    }
    match case.op {
        Op::Gemm => drop(gemm::inputs(data, case.n)),
        Op::Cholesky => drop(cholesky::inputs(data, case.n)),
        Op::Fft => drop(fft::input(data, case.n)),
        Op::Pipeline => drop(pipeline::inputs(data, case.n)),
        Op::Handoff | Op::Placement | Op::Reuse => {}
    }
}

/// Run `body` on a fresh [`Shared`], then release it whatever happened: a case that stops
/// early must not leave OpenCL work in flight on freed memory.
fn with_shared<T>(
    session: &mut ClSession,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    len: usize,
    body: impl FnOnce(&mut ClSession, &mut dyn PeerRuntime, &mut Shared) -> Result<T, CaseError>,
) -> Result<T, CaseError> {
    // The case's footprint is of its crossing: from before its first shared allocation to
    // after its last release (crate::footprint says why).
    crate::footprint::crossing_begins(|| device_in_use(peer));
    let mut shared = match Shared::create_across(session, peer, case.path, len, case.pair.cl_gpu) {
        Ok(shared) => shared,
        Err(e) => {
            crate::footprint::crossing_ends();
            return Err(e);
        }
    };
    crate::footprint::after_setup(|| device_in_use(peer));
    let result = body(session, peer, &mut shared);
    let released = shared.release(session, peer);
    crate::footprint::crossing_ends();
    let value = result?;
    released?;
    Ok(value)
}

/// The device memory in use on the peer's GPU, for the footprint: None for the host peer, and
/// where the query fails (the case's own calls report a device that fails).
fn device_in_use(peer: &mut dyn PeerRuntime) -> Option<u64> {
    peer.as_device()?.memory_in_use().ok()
}

/// Put `data` into shared memory with an OpenCL kernel, so that what the peer then reads was
/// produced by OpenCL (a write through a buffer API would test the runtime's copy, not the
/// path). Returns the kernel's event.
fn produce_on_cl(
    s: &mut ClSession,
    peer: &mut dyn PeerRuntime,
    m: &mut Shared,
    sync_mode: SyncMode,
    data: &[Complex32],
) -> Result<ClEvent, CaseError> {
    let staging = DeviceBuffer::with_data_named(s, data, "OpenCL's input staging buffer")?;
    // Imported memory starts with its exporter; OpenCL takes it first.
    let ready = paths::to_cl(s, peer, m, sync_mode)?;
    let ev = s
        .launch(
            "ccopy",
            data.len(),
            &[
                ClArg::Mem(staging.arg()),
                ClArg::Mem(m.cl),
                ClArg::U32(data.len() as u32),
            ],
            &sync::raw(&ready),
        )
        .running()?;
    Ok(ev)
}

/// Read shared memory back through OpenCL, after everything the case did: a kernel copies it
/// into a plain buffer, which is then read.
fn consume_on_cl(
    s: &mut ClSession,
    m: &Shared,
    ready: &[ClEvent],
) -> Result<DeviceBuffer, CaseError> {
    let out = DeviceBuffer::named(s, m.bytes(), "OpenCL's read-back of the shared memory")?;
    s.launch(
        "ccopy",
        m.len,
        &[
            ClArg::Mem(m.cl),
            ClArg::Mem(out.arg()),
            ClArg::U32(m.len as u32),
        ],
        &sync::raw(ready),
    )
    .running()?;
    Ok(out)
}

fn device<'a>(
    peer: &'a mut dyn PeerRuntime,
    case: &Case,
) -> Result<&'a mut dyn crate::runtimes::device::DeviceRuntime, CaseError> {
    peer.as_device().ok_or_else(|| {
        CaseError::unsupported(format!(
            "{} needs a BLAS/solver library on the peer; {} has none",
            case.op,
            case.pair.peer.label()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_seed_is_stable_and_distinct() {
        assert_eq!(data_seed(1, Op::Fft, 4), data_seed(1, Op::Fft, 4));
        assert_ne!(data_seed(1, Op::Fft, 4), data_seed(1, Op::Fft, 8));
        assert_ne!(data_seed(1, Op::Fft, 4), data_seed(1, Op::Pipeline, 4));
        assert_ne!(data_seed(1, Op::Fft, 4), data_seed(2, Op::Fft, 4));
        // Pinned: a change here changes every case's data, which invalidates recorded runs.
        assert_eq!(data_seed(24301, Op::Handoff, 1), 0x4fa5_18b1_1c2c_e523);
    }

    /// A fault still pending on the peer's device after the case is the case's outcome, with
    /// what the case saw (a pass, wrong data) as its detail; a fault the case named itself, and
    /// any outcome with nothing pending, stay as they were.
    #[test]
    fn a_fault_pending_after_the_case_is_its_outcome() {
        let pending = ApiError {
            api: crate::model::Api::Hip,
            call: "hipDeviceSynchronize".into(),
            code: 700,
            name: "hipErrorIllegalAddress".into(),
            detail: String::new(),
        };
        let pass = Outcome::Pass {
            note: "8 words bit-exact across 4 crossings".into(),
        };
        assert_eq!(with_sticky_fault(None, pass.clone()), pass);
        let Outcome::Fault { error } = with_sticky_fault(Some(pending.clone()), pass) else {
            panic!("a pass with a pending fault is no fault");
        };
        assert_eq!(
            error,
            ApiError {
                detail:
                    "pending after the case, which saw: pass 8 words bit-exact across 4 crossings"
                        .into(),
                ..pending.clone()
            }
        );
        let named = Outcome::Fault {
            error: ApiError {
                name: "hipErrorLaunchFailure".into(),
                ..pending.clone()
            },
        };
        assert_eq!(with_sticky_fault(Some(pending), named.clone()), named);
    }

    /// Memory that ends at 2 MiB exactly is not touched; one element more, and the first word
    /// past the boundary is.
    #[test]
    fn the_straddle_plant_fires_only_past_2_mib() {
        assert_eq!(Plant::straddle_word(0), None);
        assert_eq!(Plant::straddle_word(2 << 20), None);
        assert_eq!(Plant::straddle_word((2 << 20) + 8), Some(524_288));
        assert_eq!("straddle-2mib".parse::<Plant>(), Ok(Plant::Straddle2Mib));
        assert_eq!(
            serde_json::to_value(Plant::Straddle2Mib).unwrap(),
            "straddle-2mib"
        );
    }
}
