//! The child process of `clhip bench interop` (`clhip __bench-interop --job JSON`): one pair and
//! one target, measured. A driver that crashes or hangs here costs this target only; what was
//! measured before that has already reached the parent, one protocol line per measurement.
//!
//! Every number is earned: each measurement also checks its data (the handoff's patterns
//! bit-exact on both sides, the scale passes' result exactly, the pipeline against the f64
//! reference with the conformance bound), and a measurement whose data came back wrong is a
//! `fail` problem with the mismatch, never a time.
//!
//! Protocol: the parent starts the child with the [`Job`]; the child writes [`ChildLine`]s after
//! [`PREFIX`] on its own stream (a duplicate of its stdout, whose fd 1 then points at stderr, so
//! driver chatter can never split a line): `begin` before each measurement, then its `row` or
//! `problem`, and `done` at the end.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use num_complex::Complex32;
use serde::{Deserialize, Serialize};

use crate::fft::FftCache;
use crate::generate::{self, DataKind};
use crate::model::{CaseError, Op, Pair, PathKind, Phase, SyncMode};
use crate::ops::handoff::{
    CL_CHECK_INIT, CL_CHECK_WORDS, CheckWords, cl_check_pattern, cl_pattern_verdict,
    pattern_verdict,
};
use crate::ops::pipeline::{check_output, input_pair, opencl_stages, peer_stages, scale_of};
use crate::ops::{OPENCL_LABEL_ENV, Plant};
use crate::paths::{self, DeviceBuffer, Shared};
use crate::runtimes::device::{AllocKind, DeviceAlloc};
use crate::runtimes::host::HostPeer;
use crate::runtimes::opencl::{self, ClArg, ClSession, SessionError};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access};
use crate::{reference, tolerance};

use super::results::{Measure, Problem, Row, Stats, Target};

/// Marks the child's protocol lines among whatever its drivers print.
pub const PREFIX: &str = "@@clhip-bench ";

/// What the parent asks of one child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub pair: Pair,
    pub target: Target,
    /// Sizes to measure, ascending (the parent has already set aside those the device cannot
    /// allocate).
    pub sizes_bytes: Vec<u64>,
    pub reps: u32,
    pub warmup: u32,
    pub pipeline_len: usize,
    pub seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rocm_path: Option<PathBuf>,
    /// Test-only: a side that does nothing (`cl-noop`, `peer-noop`), to show every
    /// measurement's check sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plant: Option<Plant>,
    /// Test-only: die by SIGSEGV after the pipeline and the first size, as NVIDIA's OpenCL does
    /// on `device+use-host-ptr`.
    #[serde(default)]
    pub plant_crash: bool,
}

/// One protocol line from the child, after [`PREFIX`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "kebab-case")]
pub enum ChildLine {
    /// About to measure this: what the child was doing, should it die.
    Begin {
        measure: Measure,
        bytes: u64,
    },
    Row(Row),
    Problem(Problem),
    Done,
}

impl ChildLine {
    /// The line in `text`, `None` for driver output, an error for a prefixed line that does not
    /// parse (the harness's bug, never noise).
    pub fn parse(text: &str) -> Option<Result<ChildLine, serde_json::Error>> {
        text.strip_prefix(PREFIX).map(serde_json::from_str)
    }
}

/// How many repetitions a loop runs, and how many of the first it does not time.
#[derive(Debug, Clone, Copy)]
struct Runs {
    warmup: u32,
    reps: u32,
}

impl Runs {
    fn total(self) -> u32 {
        self.warmup + self.reps
    }

    fn timed(self, rep: u32) -> bool {
        rep >= self.warmup
    }
}

/// The protocol stream.
struct Protocol(File);

impl Protocol {
    fn send(&mut self, line: &ChildLine) -> anyhow::Result<()> {
        let text = format!(
            "{PREFIX}{}\n",
            serde_json::to_string(line).context("encoding a bench line")?
        );
        self.0
            .write_all(text.as_bytes())
            .and_then(|()| self.0.flush())
            .context("writing a bench line to the parent")
    }

    /// Sends a measurement's row, or its problem. Returns whether the child should stop: a
    /// device fault poisons the context (CUDA's and HIP's are sticky), so nothing measured
    /// after it could be trusted.
    fn report(
        &mut self,
        measure: Measure,
        bytes: u64,
        warmup: u32,
        measured: Result<Vec<f64>, CaseError>,
    ) -> anyhow::Result<bool> {
        let stats = measured.and_then(|samples| {
            Stats::of(samples)
                .ok_or_else(|| CaseError::Harness("a timed loop gave no usable duration".into()))
        });
        match stats {
            Ok(stats) => {
                self.send(&ChildLine::Row(Row {
                    measure,
                    bytes,
                    warmup,
                    stats,
                }))?;
                Ok(false)
            }
            Err(e) => self.problem(Some(measure), Some(bytes), e),
        }
    }

    fn problem(
        &mut self,
        measure: Option<Measure>,
        bytes: Option<u64>,
        e: CaseError,
    ) -> anyhow::Result<bool> {
        let stop = matches!(e, CaseError::Fault(_));
        self.send(&ChildLine::Problem(Problem {
            measure,
            bytes,
            outcome: e.into_outcome(),
        }))?;
        Ok(stop)
    }
}

/// What the child works with: the pair's OpenCL session, its peer, the FFT plan.
struct Sides {
    session: ClSession,
    peer: Box<dyn PeerRuntime>,
    fft: FftCache,
    plant: Option<Plant>,
}

impl Sides {
    fn open(job: &Job) -> Result<Self, CaseError> {
        let mut session = open_session(&job.pair)?;
        session.skip_kernels = job.plant == Some(Plant::ClNoop);
        let peer = crate::peer::open_peer(
            job.pair.peer.api,
            job.pair.peer.ordinal,
            job.rocm_path.as_deref(),
        )?;
        Ok(Sides {
            session,
            peer,
            fft: FftCache::default(),
            plant: job.plant,
        })
    }

    /// The peer's own work on the data, unless the `peer-noop` plant leaves it out.
    fn peer_work(
        &mut self,
        work: impl FnOnce(&mut dyn PeerRuntime) -> Result<(), CaseError>,
    ) -> Result<(), CaseError> {
        if self.plant == Some(Plant::PeerNoop) {
            return Ok(());
        }
        work(self.peer.as_mut())
    }

    /// A fault the calls did not name as one, left pending in the peer's context.
    fn sticky_fault(&mut self) -> Option<CaseError> {
        self.peer
            .as_device()
            .and_then(|d| d.sticky_fault())
            .map(CaseError::Fault)
    }
}

/// The pair's OpenCL device, found by its label as this process's own enumeration gives it
/// (the parent loads only the pair's vendor library here, and says which label the device has
/// in it, as the runner does for its workers).
fn open_session(pair: &Pair) -> Result<ClSession, CaseError> {
    let want = &pair.opencl.label;
    let local = std::env::var(OPENCL_LABEL_ENV)
        .ok()
        .and_then(|v| {
            let (run, local) = v.split_once('=')?;
            (run == want).then(|| local.to_string())
        })
        .unwrap_or_else(|| want.clone());
    let devices = opencl::enumerate().refused("no OpenCL platform could be enumerated")?;
    let Some(device) = devices.into_iter().find(|d| d.r.label == local) else {
        return Err(CaseError::unsupported(format!(
            "OpenCL device {want} not found by the bench child"
        )));
    };
    ClSession::open(device).map_err(|e| match e {
        SessionError::Api(e) => CaseError::Unsupported {
            reason: "OpenCL refused a context or queue".into(),
            error: Some(e),
        },
        SessionError::Build(e) => CaseError::Broken(e),
    })
}

/// `clhip __bench-interop --job JSON`: measures the job's target and reports each measurement.
/// Returns an error only for the harness's own failures (the parent calls those `error`).
pub fn child_main(job: &str) -> anyhow::Result<()> {
    let job: Job = serde_json::from_str(job).context("decoding the bench job")?;
    let mut out = Protocol(crate::child::take_stdout_for_protocol()?);
    crate::child::die_with_parent("bench child");
    match Sides::open(&job) {
        Ok(mut sides) => measure_all(&mut sides, &job, &mut out)?,
        Err(e) => {
            out.problem(None, None, e)?;
        }
    }
    out.send(&ChildLine::Done)
}

fn measure_all(sides: &mut Sides, job: &Job, out: &mut Protocol) -> anyhow::Result<()> {
    let runs = Runs {
        warmup: job.warmup,
        reps: job.reps,
    };
    // The pipeline first: it is the headline, and a path that dies at some size keeps it.
    let n = job.pipeline_len;
    let bytes = (n * size_of::<Complex32>()) as u64;
    out.send(&ChildLine::Begin {
        measure: Measure::Pipeline,
        bytes,
    })?;
    let data_seed = crate::ops::data_seed(job.seed, Op::Pipeline, n);
    let timed = match job.target {
        Target::Path { path, sync } => pipeline_on_path(sides, path, sync, n, data_seed, runs),
        Target::Native if sides.peer.as_device().is_some() => {
            pipeline_no_crossing(sides, n, data_seed, runs)
        }
        Target::Native => pipeline_on_cpu(sides, n, data_seed, runs),
    };
    if out.report(Measure::Pipeline, bytes, job.warmup, timed)? || stop_on_fault(sides, out)? {
        return Ok(());
    }
    let mut input = Input {
        seed: job.seed,
        largest: job.sizes_bytes.iter().max().copied().unwrap_or(0) as usize
            / size_of::<Complex32>(),
        data: None,
    };
    for (i, &bytes) in job.sizes_bytes.iter().enumerate() {
        let len = bytes as usize / size_of::<Complex32>();
        let crash = job.plant_crash && i == 1;
        let stop = match job.target {
            Target::Path { path, sync } => {
                measure_size(sides, path, sync, (&mut input, len), runs, crash, out)?
            }
            Target::Native => {
                out.send(&ChildLine::Begin {
                    measure: Measure::ScaleOwn,
                    bytes,
                })?;
                let timed = scale_own(sides, input.get(len), runs);
                out.report(Measure::ScaleOwn, bytes, job.warmup, timed)?
            }
        };
        if stop || stop_on_fault(sides, out)? {
            return Ok(());
        }
    }
    Ok(())
}

/// The scale measurements' input, made on first use at the largest size (`complex_vec(s, n)`
/// is a prefix of `complex_vec(s, m)` for n <= m): half a GiB takes a second or two to make,
/// which a target refused at every size never pays.
struct Input {
    seed: u64,
    largest: usize,
    data: Option<Vec<Complex32>>,
}

impl Input {
    fn get(&mut self, len: usize) -> &[Complex32] {
        let (seed, largest) = (self.seed, self.largest);
        &self
            .data
            .get_or_insert_with(|| generate::complex_vec(seed, largest))[..len]
    }
}

/// After a measurement: a fault pending in the peer's context ends the child.
fn stop_on_fault(sides: &mut Sides, out: &mut Protocol) -> anyhow::Result<bool> {
    match sides.sticky_fault() {
        Some(e) => out.problem(None, None, e),
        None => Ok(false),
    }
}

/// The handoff and the scale bandwidth at one size, on one allocation of the path, then the
/// scale on the peer's own memory. Returns whether the child should stop.
fn measure_size(
    sides: &mut Sides,
    path: PathKind,
    sync: SyncMode,
    (input, len): (&mut Input, usize),
    runs: Runs,
    plant_crash: bool,
    out: &mut Protocol,
) -> anyhow::Result<bool> {
    let bytes = (len * size_of::<Complex32>()) as u64;
    out.send(&ChildLine::Begin {
        measure: Measure::HandoffToPeer,
        bytes,
    })?;
    if plant_crash {
        eprintln!("clhip bench child: planted crash");
        // A real invalid write, so the kernel delivers SIGSEGV as for a driver's bug.
        crate::mock::perform(crate::mock::MockAction::Segfault);
    }
    let mut m = match Shared::create(&mut sides.session, sides.peer.as_mut(), path, len) {
        Ok(m) => m,
        Err(e) => return out.problem(None, Some(bytes), e),
    };
    let mut stop = false;
    match handoff(sides, &mut m, sync, runs) {
        Ok((to_peer, to_cl)) => {
            out.report(Measure::HandoffToPeer, bytes, runs.warmup, Ok(to_peer))?;
            out.report(Measure::HandoffToOpencl, bytes, runs.warmup, Ok(to_cl))?;
        }
        Err(e) => {
            let fault = matches!(e, CaseError::Fault(_));
            out.problem(Some(Measure::HandoffToPeer), Some(bytes), e.clone())?;
            stop = out.problem(Some(Measure::HandoffToOpencl), Some(bytes), e)? || fault;
        }
    }
    if !stop {
        out.send(&ChildLine::Begin {
            measure: Measure::ScaleShared,
            bytes,
        })?;
        let timed = scale_shared(sides, &mut m, sync, input.get(len), runs);
        stop = out.report(Measure::ScaleShared, bytes, runs.warmup, timed)?;
    }
    let released = m.release(&sides.session, sides.peer.as_mut());
    if let (false, Err(e)) = (stop, released) {
        stop = out.problem(None, Some(bytes), e)?;
    }
    // The reference the shared memory's bandwidth is a share of, measured by the same process
    // right after it (as the placement op does): a busy machine's drift between two children
    // would otherwise pass for a difference in memory.
    if !stop {
        out.send(&ChildLine::Begin {
            measure: Measure::ScaleOwn,
            bytes,
        })?;
        let timed = scale_own(sides, input.get(len), runs);
        stop = out.report(Measure::ScaleOwn, bytes, runs.warmup, timed)?;
    }
    Ok(stop)
}

/// Before OpenCL writes: imported memory starts with its exporter, and a previous step may
/// have left the memory with the peer.
fn take_for_opencl(sides: &mut Sides, m: &mut Shared, sync: SyncMode) -> Result<(), CaseError> {
    for ev in paths::to_cl(&sides.session, sides.peer.as_mut(), m, sync)? {
        ev.wait().running()?;
    }
    Ok(())
}

/// The two handoffs of one repetition, timed apart: OpenCL writes a pattern and finishes, then
/// the clock runs over `paths::to_peer` (the path's sync and any copy) and the peer's
/// synchronize (every transfer the handoff started is complete); the peer writes another
/// pattern and synchronizes, then the clock runs over `paths::to_cl` and the events the next
/// OpenCL command would wait for. On the first repetition each side checks, untimed, that it
/// sees the other's pattern bit-exact: a handoff that moves nothing must not look fast.
fn handoff(
    sides: &mut Sides,
    m: &mut Shared,
    sync: SyncMode,
    runs: Runs,
) -> Result<(Vec<f64>, Vec<f64>), CaseError> {
    let words = u32::try_from(2 * m.len)
        .map_err(|_| CaseError::Harness(format!("{} words do not fit a u32 index", 2 * m.len)))?;
    let check = DeviceBuffer::new(&sides.session, size_of_val(&CL_CHECK_INIT))?;
    take_for_opencl(sides, m, sync)?;
    let (mut to_peer, mut to_cl) = (Vec::new(), Vec::new());
    for rep in 0..runs.total() {
        let cl_seed = 0xC1C1_0000 ^ rep;
        let peer_seed = 0x9EE2_0000 ^ rep;
        let written = sides
            .session
            .launch(
                "pattern_fill",
                words as usize,
                &[ClArg::Mem(m.cl), ClArg::U32(cl_seed), ClArg::U32(words)],
                &[],
            )
            .running()?;
        written.wait().running()?;
        let t = Instant::now();
        paths::to_peer(
            &sides.session,
            sides.peer.as_mut(),
            m,
            sync,
            Some(&written),
            Access::ReadWrite,
        )?;
        sides.peer.synchronize()?;
        let peer_s = t.elapsed().as_secs_f64();
        if rep == 0 {
            let seen = sides.peer.check_pattern(m.peer, cl_seed)?;
            pattern_verdict(
                "pattern written by OpenCL, read by the peer".into(),
                seen,
                cl_seed,
                words,
            )?;
        }
        let p = m.peer;
        sides.peer_work(|peer| peer.fill_pattern(p, peer_seed))?;
        sides.peer.synchronize()?;
        let t = Instant::now();
        let ready = paths::to_cl(&sides.session, sides.peer.as_mut(), m, sync)?;
        for ev in &ready {
            ev.wait().running()?;
        }
        let cl_s = t.elapsed().as_secs_f64();
        if rep == 0 {
            // The op's check, read back at once: it runs after the timed handoff, so its
            // waiting costs nothing measured.
            check.write(&sides.session, &CL_CHECK_INIT)?;
            cl_check_pattern(
                &mut sides.session,
                m.cl,
                peer_seed,
                words,
                CheckWords::Own(&check),
                None,
                &[],
                None,
            )?;
            let r: Vec<u32> = check.read(&sides.session, CL_CHECK_WORDS)?;
            cl_pattern_verdict(
                "pattern written by the peer, read by OpenCL".into(),
                &r,
                peer_seed,
                words,
            )?;
        }
        if runs.timed(rep) {
            to_peer.push(peer_s);
            to_cl.push(cl_s);
        }
    }
    Ok((to_peer, to_cl))
}

/// Scale factors of successive passes: 2, 0.5, 2, ... Doubling and halving are exact in f32, so
/// the data stay bounded however many passes run, and after [`finish_passes`] they are exactly
/// twice the input.
fn pass_factor(pass: u32) -> f32 {
    if pass.is_multiple_of(2) { 2.0 } else { 0.5 }
}

/// Timed passes of the peer's scale kernel (the placement op's) over `p`: one pass per
/// repetition, launch to synchronize.
fn scale_passes(sides: &mut Sides, p: PeerPtr, runs: Runs) -> Result<Vec<f64>, CaseError> {
    let mut times = Vec::new();
    for pass in 0..runs.total() {
        let t = Instant::now();
        sides.peer_work(|peer| peer.scale(p, pass_factor(pass)))?;
        sides.peer.synchronize()?;
        if runs.timed(pass) {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    finish_passes(sides, p, runs.total()).map(|()| times)
}

/// After an even number of passes (net factor 1), one more untimed pass of 2: the result is
/// then always twice the input, so a scale kernel that never ran cannot pass for one that did.
fn finish_passes(sides: &mut Sides, p: PeerPtr, passes: u32) -> Result<(), CaseError> {
    if passes.is_multiple_of(2) {
        sides.peer_work(|peer| peer.scale(p, 2.0))?;
    }
    sides.peer.synchronize()
}

fn doubled(input: &[Complex32]) -> Vec<Complex32> {
    input.iter().map(|z| z * 2.0).collect()
}

/// The peer's scale kernel on the shared memory: OpenCL writes the input through the path
/// (a kernel, as the placement op does), the path hands it over, the passes run, and the data
/// come back through OpenCL, where they must be exactly twice the input.
fn scale_shared(
    sides: &mut Sides,
    m: &mut Shared,
    sync: SyncMode,
    input: &[Complex32],
    runs: Runs,
) -> Result<Vec<f64>, CaseError> {
    let len = input.len();
    take_for_opencl(sides, m, sync)?;
    let staging = DeviceBuffer::with_data(&sides.session, input)?;
    let written = sides
        .session
        .launch(
            "ccopy",
            len,
            &[
                ClArg::Mem(staging.arg()),
                ClArg::Mem(m.cl),
                ClArg::U32(len as u32),
            ],
            &[],
        )
        .running()?;
    paths::to_peer(
        &sides.session,
        sides.peer.as_mut(),
        m,
        sync,
        Some(&written),
        Access::ReadWrite,
    )?;
    let times = scale_passes(sides, m.peer, runs)?;
    let ready = paths::to_cl(&sides.session, sides.peer.as_mut(), m, sync)?;
    let back = DeviceBuffer::new(&sides.session, size_of_val(input))?;
    sides
        .session
        .launch(
            "ccopy",
            len,
            &[
                ClArg::Mem(m.cl),
                ClArg::Mem(back.arg()),
                ClArg::U32(len as u32),
            ],
            &sync::raw(&ready),
        )
        .running()?;
    let got: Vec<Complex32> = back.read(&sides.session, len)?;
    tolerance::check_exact_c32(
        "data scaled on the shared memory, read back through OpenCL",
        &got,
        &doubled(input),
    )?;
    Ok(times)
}

/// Memory the peer allocated for itself.
enum Own {
    Device(DeviceAlloc),
    Host(PeerPtr),
}

impl Own {
    /// Device memory for a device peer; pageable memory (its only kind) for the host. Filled
    /// with the poison word, as every path's memory is: a peer that then does nothing leaves
    /// data that fails every check.
    fn alloc(peer: &mut dyn PeerRuntime, len: usize) -> Result<Self, CaseError> {
        let own = match peer.as_device() {
            Some(d) => Own::Device(d.alloc(AllocKind::Device, len)?),
            None => Own::Host(peer.alloc_host(len)?),
        };
        let poisoned = peer
            .upload(own.ptr(), &crate::paths::poison_vec(len))
            .and_then(|()| peer.synchronize());
        match poisoned {
            Ok(()) => Ok(own),
            Err(e) => {
                own.free(peer);
                Err(e)
            }
        }
    }

    fn ptr(&self) -> PeerPtr {
        match self {
            Own::Device(a) => a.ptr,
            Own::Host(p) => *p,
        }
    }

    fn free(self, peer: &mut dyn PeerRuntime) {
        match self {
            Own::Device(a) => {
                if let Some(d) = peer.as_device() {
                    d.free(a);
                }
            }
            Own::Host(p) => peer.free_host(p),
        }
    }
}

/// The peer's scale kernel on its own memory, measured as [`scale_shared`] measures the
/// shared memory: what "a fraction of its own bandwidth" is a fraction of.
fn scale_own(sides: &mut Sides, input: &[Complex32], runs: Runs) -> Result<Vec<f64>, CaseError> {
    let own = Own::alloc(sides.peer.as_mut(), input.len())?;
    let p = own.ptr();
    let result = (|| {
        sides.peer_work(|peer| peer.upload(p, input))?;
        sides.peer.synchronize()?;
        let times = scale_passes(sides, p, runs)?;
        let got = sides.peer.download(p)?;
        tolerance::check_exact_c32(
            "data scaled on the peer's own memory",
            &got,
            &doubled(input),
        )?;
        Ok(times)
    })();
    own.free(sides.peer.as_mut());
    result
}

/// The pipeline's inputs and scale, as the conformance op makes them from seeded data.
fn pipeline_inputs(n: usize, seed: u64) -> (Vec<Complex32>, Vec<Complex32>, f32) {
    let [a, b] = input_pair(DataKind::Seeded, seed, n);
    (a, b, scale_of(n))
}

/// The op's check of the pipeline's output against the f64 reference of `a` and `b`.
fn check_magnitudes(
    what: &str,
    got: &[Complex32],
    a: &[Complex32],
    b: &[Complex32],
    scale: f32,
) -> Result<(), CaseError> {
    check_output(what, got, &reference::pipeline(a, b, scale), scale).map(drop)
}

/// The pipeline op through a path. One checked iteration first, exactly the conformance
/// op's steps from the same data (the peer uploads `a`, OpenCL adds `b` and transforms, the
/// peer scales and takes magnitudes, the result comes back through OpenCL and is held to the
/// reference); then the timed ones, each a full round: OpenCL add and FFT, the handoff to the
/// peer, its scale and magnitude, the handoff back up to OpenCL being able to start.
fn pipeline_on_path(
    sides: &mut Sides,
    path: PathKind,
    sync: SyncMode,
    n: usize,
    seed: u64,
    runs: Runs,
) -> Result<Vec<f64>, CaseError> {
    let (a, b, scale) = pipeline_inputs(n, seed);
    let b_buf = DeviceBuffer::with_data(&sides.session, &b)?;
    let mut m = Shared::create(&mut sides.session, sides.peer.as_mut(), path, n)?;
    let result: Result<Vec<f64>, CaseError> = (|| {
        paths::to_peer(
            &sides.session,
            sides.peer.as_mut(),
            &mut m,
            sync,
            None,
            Access::Write,
        )?;
        let p = m.peer;
        sides.peer_work(|peer| peer.upload(p, &a))?;
        sides.peer.synchronize()?;
        take_for_opencl(sides, &mut m, sync)?;
        pipeline_round(sides, &mut m, sync, &b_buf, scale)?;
        let out = DeviceBuffer::new(&sides.session, n * size_of::<Complex32>())?;
        sides
            .session
            .launch(
                "ccopy",
                n,
                &[
                    ClArg::Mem(m.cl),
                    ClArg::Mem(out.arg()),
                    ClArg::U32(n as u32),
                ],
                &[],
            )
            .running()?;
        let got: Vec<Complex32> = out.read(&sides.session, n)?;
        check_magnitudes(
            "pipeline magnitude read back through OpenCL",
            &got,
            &a,
            &b,
            scale,
        )?;
        let mut times = Vec::new();
        for rep in 0..runs.total() {
            let t = Instant::now();
            pipeline_round(sides, &mut m, sync, &b_buf, scale)?;
            if runs.timed(rep) {
                times.push(t.elapsed().as_secs_f64());
            }
        }
        Ok(times)
    })();
    let released = m.release(&sides.session, sides.peer.as_mut());
    let times = result?;
    released?;
    Ok(times)
}

/// One round of the pipeline on memory OpenCL owns, ending with OpenCL owning it again (its
/// handoff events waited for): every round costs the same, the first included.
fn pipeline_round(
    sides: &mut Sides,
    m: &mut Shared,
    sync: SyncMode,
    b: &DeviceBuffer,
    scale: f32,
) -> Result<(), CaseError> {
    let stages = (m.cl, b.arg(), m.cl);
    let transformed = opencl_stages(&mut sides.session, &mut sides.fft, stages, m.len, &[])?;
    paths::to_peer(
        &sides.session,
        sides.peer.as_mut(),
        m,
        sync,
        Some(&transformed),
        Access::ReadWrite,
    )?;
    peer_stages(sides.peer.as_mut(), m.peer, scale, sides.plant)?;
    sides.peer.synchronize()?;
    take_for_opencl(sides, m, sync)
}

/// The native baseline of a device peer. clhip has no FFT on the peer (no cuFFT or rocFFT
/// binding), so this is the pipeline with nothing crossing: OpenCL adds and transforms on its
/// own buffer and finishes, then the peer scales and takes magnitudes on its own device
/// memory. That is the floor every path's pipeline is compared with: the stages alone. The
/// checked iteration carries the FFT's output across once through the host (untimed), so that
/// every stage's kernel is held to the reference.
fn pipeline_no_crossing(
    sides: &mut Sides,
    n: usize,
    seed: u64,
    runs: Runs,
) -> Result<Vec<f64>, CaseError> {
    let (a, b, scale) = pipeline_inputs(n, seed);
    let a_buf = DeviceBuffer::with_data(&sides.session, &a)?;
    let b_buf = DeviceBuffer::with_data(&sides.session, &b)?;
    let x = DeviceBuffer::new(&sides.session, n * size_of::<Complex32>())?;
    let own = Own::alloc(sides.peer.as_mut(), n)?;
    let y = own.ptr();
    let result = (|| {
        opencl_half(sides, &a_buf, &b_buf, &x, n)?;
        let fft: Vec<Complex32> = x.read(&sides.session, n)?;
        sides.peer_work(|peer| peer.upload(y, &fft))?;
        peer_half(sides, y, scale)?;
        let got = sides.peer.download(y)?;
        check_magnitudes(
            "native pipeline (OpenCL add and FFT, peer scale and magnitude)",
            &got,
            &a,
            &b,
            scale,
        )?;
        let mut times = Vec::new();
        for rep in 0..runs.total() {
            let t = Instant::now();
            opencl_half(sides, &a_buf, &b_buf, &x, n)?;
            peer_half(sides, y, scale)?;
            if runs.timed(rep) {
                times.push(t.elapsed().as_secs_f64());
            }
        }
        Ok(times)
    })();
    own.free(sides.peer.as_mut());
    result
}

/// `x = FFT(a + b)` on OpenCL's own buffers, finished.
fn opencl_half(
    sides: &mut Sides,
    a: &DeviceBuffer,
    b: &DeviceBuffer,
    x: &DeviceBuffer,
    n: usize,
) -> Result<(), CaseError> {
    let stages = (a.arg(), b.arg(), x.arg());
    opencl_stages(&mut sides.session, &mut sides.fft, stages, n, &[])?;
    sides.session.finish().running()
}

/// `y = |scale * y|` on the peer, synchronized.
fn peer_half(sides: &mut Sides, y: PeerPtr, scale: f32) -> Result<(), CaseError> {
    peer_stages(sides.peer.as_mut(), y, scale, sides.plant)?;
    sides.peer.synchronize()
}

/// The native baseline of the host: the whole pipeline on the CPU, one thread, with nothing of
/// OpenCL's: the add as a loop, rustfft's f32 FFT (planned before the clock starts), and the host
/// peer's own scale and magnitude loops, the ones its paths' pipelines run. The checked
/// iteration starts from the conformance data; the timed ones continue on the result.
fn pipeline_on_cpu(
    sides: &mut Sides,
    n: usize,
    seed: u64,
    runs: Runs,
) -> Result<Vec<f64>, CaseError> {
    let (a, b, scale) = pipeline_inputs(n, seed);
    let fft = rustfft::FftPlanner::<f32>::new().plan_fft_forward(n);
    let mut scratch = vec![Complex32::default(); fft.get_inplace_scratch_len()];
    let mut host = HostPeer;
    let mut x = a.clone();
    let noop = sides.plant == Some(Plant::PeerNoop);
    let mut round = |x: &mut Vec<Complex32>| -> Result<(), CaseError> {
        if noop {
            return Ok(());
        }
        for (xi, bi) in x.iter_mut().zip(&b) {
            *xi += bi;
        }
        fft.process_with_scratch(x, &mut scratch);
        let p = PeerPtr {
            addr: x.as_mut_ptr() as usize,
            len: x.len(),
        };
        peer_stages(&mut host, p, scale, None)
    };
    round(&mut x)?;
    check_magnitudes("native pipeline on the CPU", &x, &a, &b, scale)?;
    let mut times = Vec::new();
    for rep in 0..runs.total() {
        let t = Instant::now();
        round(&mut x)?;
        if runs.timed(rep) {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_always_end_at_twice_the_input() {
        for passes in 0..7u32 {
            let mut x = 1.0f32;
            for p in 0..passes {
                x *= pass_factor(p);
            }
            if passes.is_multiple_of(2) {
                x *= 2.0;
            }
            assert_eq!(x, 2.0, "{passes} passes");
        }
    }

    #[test]
    fn child_lines_round_trip_and_driver_output_is_not_protocol() {
        let row = ChildLine::Row(Row {
            measure: Measure::HandoffToPeer,
            bytes: 4096,
            warmup: 3,
            stats: Stats::of(vec![1e-3, 2e-3]).unwrap(),
        });
        let text = format!("{PREFIX}{}", serde_json::to_string(&row).unwrap());
        assert_eq!(ChildLine::parse(&text).unwrap().unwrap(), row);
        assert!(ChildLine::parse("NVRM: some driver line").is_none());
        assert!(
            ChildLine::parse(&format!("{PREFIX}{{broken"))
                .unwrap()
                .is_err()
        );
    }
}
