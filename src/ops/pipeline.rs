//! The pipeline op (seed 000's): OpenCL add and FFT, then peer scale and magnitude.

use std::sync::Arc;

use num_complex::Complex32;

use crate::fft::FftCache;
use crate::generate;
use crate::model::{Case, CaseError, Phase};
use crate::paths::{self, DeviceBuffer};
use crate::reference;
use crate::runtimes::PeerRuntime;
use crate::runtimes::opencl::{ClArg, ClSession};
use crate::sync::{self, Access};
use crate::tolerance;

use super::{Inputs, Plant, peer_done, peer_work, take_output, with_shared};

/// Seed 000's pipeline: OpenCL add -> OpenCL FFT -> peer scale -> peer magnitude, read back
/// through OpenCL.
/// The two input vectors of one (seed, kind, n), made once per worker.
pub(super) fn inputs(data: &mut Inputs, n: usize) -> Arc<[Vec<Complex32>; 2]> {
    let (seed, kind) = (data.seed, data.kind);
    data.get("pipeline inputs", n, 2 * n * 8, || {
        [0, 1].map(|k| generate::complex_vec_of(kind, seed.wrapping_add(k), n))
    })
}

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
    let scale = 1.0 / n as f32;
    let b_buf = DeviceBuffer::with_data(session, b)?;
    let out = DeviceBuffer::new(session, n * size_of::<Complex32>())?;
    with_shared(session, peer, case, n, |s, peer, m| {
        paths::to_peer(s, peer, m, case.sync, None, Access::Write)?;
        peer_work(plant, || peer.upload(m.peer, a))?;
        peer_done(peer, case.sync)?;
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        let added = s
            .launch(
                "cadd",
                n,
                &[
                    ClArg::Mem(m.cl),
                    ClArg::Mem(b_buf.arg()),
                    ClArg::Mem(m.cl),
                    ClArg::U32(n as u32),
                ],
                &sync::raw(&ready),
            )
            .running()?;
        let transformed = fft.forward(s, m.cl, n, &[added.0]).running()?;
        let taken = take_output(
            s,
            peer,
            m,
            case.sync,
            Some(&transformed),
            Access::ReadWrite,
            plant,
        )?;
        peer_work(plant, || {
            peer.scale(taken, scale)?;
            peer.magnitude(taken)
        })?;
        peer_done(peer, case.sync)?;
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        s.launch(
            "ccopy",
            n,
            &[
                ClArg::Mem(m.cl),
                ClArg::Mem(out.arg()),
                ClArg::U32(n as u32),
            ],
            &sync::raw(&ready),
        )
        .running()?;
        Ok(())
    })?;
    let got: Vec<Complex32> = out.read(session, n)?;
    // The magnitude stage writes (|x|, 0): a non-zero imaginary part is wrong data too.
    let magnitudes: Vec<f32> = got
        .iter()
        .map(|z| if z.im == 0.0 { z.re } else { f32::NAN })
        .collect();
    let want = data.get("pipeline reference", n, n * 40, || {
        reference::pipeline(a, b, scale)
    });
    let what = format!(
        "pipeline magnitude (scaled on {}) read back through OpenCL",
        case.pair.peer.label()
    );
    let summary = tolerance::check_pipeline(&what, &magnitudes, &want, scale)?;
    Ok(summary.to_string())
}
