//! The pipeline op (the MI100 notes' chain, docs/domain.md#the-mi100-notes): OpenCL add and FFT, then peer scale and magnitude.

use std::sync::Arc;

use num_complex::Complex32;

use cl3::types::cl_event;

use crate::fft::FftCache;
use crate::generate::{self, DataKind};
use crate::model::{Case, CaseError, Phase};
use crate::paths::{self, DeviceBuffer};
use crate::reference::{self, PipelineReference};
use crate::runtimes::opencl::{ClArg, ClEvent, ClMem, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::{self, Access};
use crate::tolerance::{self, CheckSummary};

use super::{Inputs, Plant, peer_done, peer_work, take_output, with_shared};

/// The two input vectors of one (seed, kind, n).
pub(crate) fn input_pair(kind: DataKind, seed: u64, n: usize) -> [Vec<Complex32>; 2] {
    [0, 1].map(|k| generate::complex_vec_of(kind, seed.wrapping_add(k), n))
}

/// The scale stage's factor at length `n`.
pub(crate) fn scale_of(n: usize) -> f32 {
    1.0 / n as f32
}

/// [`input_pair`], made once per worker.
pub(super) fn inputs(data: &mut Inputs, n: usize) -> Arc<[Vec<Complex32>; 2]> {
    let (seed, kind) = (data.seed, data.kind);
    data.get("pipeline inputs", n, 2 * n * 8, || {
        input_pair(kind, seed, n)
    })
}

/// OpenCL's stages, after `wait`: `x = a + b` (`x` may be `a`), then the forward FFT of `x` in
/// place. Returns the FFT's event.
pub(crate) fn opencl_stages(
    s: &mut ClSession,
    fft: &mut FftCache,
    (a, b, x): (ClMem, ClMem, ClMem),
    n: usize,
    wait: &[cl_event],
) -> Result<ClEvent, CaseError> {
    let added = s
        .launch(
            "cadd",
            n,
            &[
                ClArg::Mem(a),
                ClArg::Mem(b),
                ClArg::Mem(x),
                ClArg::U32(n as u32),
            ],
            wait,
        )
        .running()?;
    fft.forward(s, x, n, &[added.0]).running()
}

/// The peer's stages on `x`: scale by `scale`, then magnitude (`(|x|, 0)`), unless the
/// `peer-noop` plant leaves them out.
pub(crate) fn peer_stages(
    peer: &mut dyn PeerRuntime,
    x: PeerPtr,
    scale: f32,
    plant: Option<Plant>,
) -> Result<(), CaseError> {
    peer_work(plant, || {
        peer.scale(x, scale)?;
        peer.magnitude(x)
    })
}

/// The pipeline's output against the f64 reference, with the conformance bound. The magnitude
/// stage writes (|x|, 0): a non-zero imaginary part is wrong data too.
pub(crate) fn check_output(
    what: &str,
    got: &[Complex32],
    want: &PipelineReference,
    scale: f32,
) -> Result<CheckSummary, CaseError> {
    let magnitudes: Vec<f32> = got
        .iter()
        .map(|z| if z.im == 0.0 { z.re } else { f32::NAN })
        .collect();
    Ok(tolerance::check_pipeline(what, &magnitudes, want, scale)?)
}

/// The pipeline: OpenCL add -> OpenCL FFT -> peer scale -> peer magnitude, read back through
/// OpenCL.
pub(super) fn pipeline(
    session: &mut ClSession,
    fft: &mut FftCache,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    mut data: Inputs<'_>,
    plant: Option<Plant>,
) -> Result<String, CaseError> {
    let n = case.n;
    let inputs = inputs(&mut data, n);
    let [a, b] = &*inputs;
    let scale = scale_of(n);
    let b_buf = DeviceBuffer::with_data_named(session, b, "pipeline's operand b")?;
    let out = DeviceBuffer::named(
        session,
        n * size_of::<Complex32>(),
        "pipeline's read-back buffer",
    )?;
    // The `readback-overrun` plant: one element more than the buffer has.
    let copied = if plant == Some(Plant::ReadbackOverrun) {
        n + 1
    } else {
        n
    };
    with_shared(session, peer, case, n, |s, peer, m| {
        paths::to_peer(s, peer, m, case.sync, None, Access::Write)?;
        peer_work(plant, || peer.upload(m.peer, a))?;
        peer_done(peer, case.sync)?;
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        let stages = (m.cl, b_buf.arg(), m.cl);
        let transformed = opencl_stages(s, fft, stages, n, &sync::raw(&ready))?;
        let taken = take_output(
            s,
            peer,
            m,
            case.sync,
            Some(&transformed),
            Access::ReadWrite,
            plant,
        )?;
        peer_stages(peer, taken, scale, plant)?;
        peer_done(peer, case.sync)?;
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        s.launch(
            "ccopy",
            copied,
            &[
                ClArg::Mem(m.cl),
                ClArg::Mem(out.arg()),
                ClArg::U32(copied as u32),
            ],
            &sync::raw(&ready),
        )
        .running()?;
        Ok(())
    })?;
    let got: Vec<Complex32> = out.read(session, n)?;
    let want = data.get("pipeline reference", n, n * 40, || {
        reference::pipeline(a, b, scale)
    });
    verdict(&case.pair.peer.label(), &got, &want, scale)
}

/// The op's verdict: the magnitudes the peer wrote, as OpenCL read them back, against the f64
/// reference.
fn verdict(
    peer_name: &str,
    got: &[Complex32],
    want: &PipelineReference,
    scale: f32,
) -> Result<String, CaseError> {
    let what = format!("pipeline magnitude (scaled on {peer_name}) read back through OpenCL");
    let summary = check_output(&what, got, want, scale)?;
    Ok(summary.to_string())
}

#[cfg(test)]
mod tests;
