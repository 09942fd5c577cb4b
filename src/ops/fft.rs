//! The fft op: the peer's data transformed by OpenCL's FFT, read back by the peer.

use std::sync::Arc;

use crate::fft::FftCache;
use crate::generate;
use crate::model::{Case, CaseError, Phase};
use crate::paths;
use crate::reference;
use crate::runtimes::PeerRuntime;
use crate::runtimes::opencl::ClSession;
use crate::sync::{self, Access};
use crate::tolerance;
use num_complex::{Complex32, Complex64};

use super::{Inputs, Plant, peer_done, peer_work, take_output, with_shared};

/// The peer uploads a random vector; OpenCL transforms it in place; the peer reads the result,
/// which is held to the f64 reference FFT.
/// The input of one (seed, kind, n), made once per worker.
pub(super) fn input(data: &mut Inputs, n: usize) -> Arc<Vec<Complex32>> {
    let (seed, kind) = (data.seed, data.kind);
    data.get("fft input", n, n * 8, || {
        generate::complex_vec_of(kind, seed, n)
    })
}

pub(super) fn fft_op(
    session: &mut ClSession,
    fft: &mut FftCache,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    mut data: Inputs<'_>,
    plant: Option<Plant>,
) -> Result<String, CaseError> {
    let n = case.n;
    let input = input(&mut data, n);
    if plant == Some(Plant::StaleCorrect) {
        let want = data.get("fft reference", n, n * 16, || {
            reference::fft_forward(&input)
        });
        let stale = want
            .iter()
            .map(|z| Complex32::new(z.re as f32, z.im as f32));
        crate::paths::plant_stale(stale.collect());
    }
    let got = with_shared(session, peer, case, case.n, |s, peer, m| {
        paths::to_peer(s, peer, m, case.sync, None, Access::Write)?;
        peer_work(plant, || peer.upload(m.peer, &input))?;
        peer_done(peer, case.sync)?;
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        let done = fft.forward(s, m.cl, case.n, &sync::raw(&ready)).running()?;
        let out = take_output(s, peer, m, case.sync, Some(&done), Access::Read, plant)?;
        peer.download(out)
    })?;
    let want = data.get("fft reference", n, n * 16, || {
        reference::fft_forward(&input)
    });
    verdict(&case.pair.peer.label(), &got, &want)
}

/// The op's verdict: OpenCL's FFT output, as the peer read it, against the f64 reference.
fn verdict(peer_name: &str, got: &[Complex32], want: &[Complex64]) -> Result<String, CaseError> {
    let what = format!("OpenCL FFT output read by {peer_name}");
    let summary = tolerance::check_fft(&what, got, want)?;
    Ok(summary.to_string())
}

#[cfg(test)]
mod tests;
