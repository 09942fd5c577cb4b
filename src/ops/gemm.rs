//! The gemm op: cgemm on the peer over matrices OpenCL produced.

use std::sync::Arc;

use num_complex::{Complex32, Complex64};

use crate::generate;
use crate::model::{Case, CaseError};
use crate::paths;
use crate::reference::{self, Transpose};
use crate::runtimes::PeerRuntime;
use crate::runtimes::opencl::ClSession;
use crate::sync::Access;
use crate::tolerance;

use super::{
    Inputs, Plant, consume_on_cl, device, peer_work, produce_on_cl, take_output, with_shared,
};

/// cgemm on the peer over matrices OpenCL produced, through the path; C read back through
/// OpenCL and held to the f64 reference (rocBLAS clients' bound).
/// A, B and C of one (seed, kind, n), made once per worker.
pub(super) fn inputs(data: &mut Inputs, n: usize) -> Arc<[Vec<Complex32>; 3]> {
    let (seed, kind) = (data.seed, data.kind);
    data.get("gemm inputs", n, 3 * n * n * 8, || {
        [0, 1, 2].map(|k| generate::matrix_of(kind, seed.wrapping_add(k), n, n))
    })
}

pub(super) fn gemm(
    session: &mut ClSession,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    mut data: Inputs<'_>,
    plant: Option<Plant>,
) -> Result<String, CaseError> {
    let n = case.n;
    let ld = n;
    let inputs = inputs(&mut data, n);
    let [a, b, c] = &*inputs;
    let (alpha, beta) = (Complex32::new(1.0, 0.0), Complex32::new(-0.5, 0.25));
    device(peer, case)?;
    let got = with_shared(session, peer, case, n * ld, |s, peer, ma| {
        with_shared(s, peer, case, n * ld, |s, peer, mb| {
            with_shared(s, peer, case, n * ld, |s, peer, mc| {
                let ea = produce_on_cl(s, peer, ma, case.sync, a)?;
                let eb = produce_on_cl(s, peer, mb, case.sync, b)?;
                let ec = produce_on_cl(s, peer, mc, case.sync, c)?;
                let pa = take_output(s, peer, ma, case.sync, Some(&ea), Access::Read, plant)?;
                paths::to_peer(s, peer, mb, case.sync, Some(&eb), Access::Read)?;
                paths::to_peer(s, peer, mc, case.sync, Some(&ec), Access::ReadWrite)?;
                let dev = device(peer, case)?;
                peer_work(plant, || {
                    dev.cgemm(
                        Transpose::None,
                        Transpose::None,
                        n,
                        n,
                        n,
                        alpha,
                        pa,
                        ld,
                        mb.peer,
                        ld,
                        beta,
                        mc.peer,
                        ld,
                    )
                })?;
                paths::to_cl(s, peer, ma, case.sync)?;
                paths::to_cl(s, peer, mb, case.sync)?;
                let ready = paths::to_cl(s, peer, mc, case.sync)?;
                consume_on_cl(s, mc, &ready)?.read::<Complex32>(s, n * ld)
            })
        })
    })?;
    let want = data.get("gemm reference", n, n * ld * 16, || {
        reference::cgemm(
            Transpose::None,
            Transpose::None,
            n,
            n,
            n,
            alpha,
            a,
            ld,
            b,
            ld,
            beta,
            c,
            ld,
        )
    });
    verdict(&case.pair.peer.label(), &got, &want, n, ld)
}

/// The op's verdict: C (`n x n`, leading dimension `ld`), as OpenCL read it back, against the
/// f64 reference, with the bound of a k = n sum of inputs that are not exact.
fn verdict(
    peer_name: &str,
    got: &[Complex32],
    want: &[Complex64],
    n: usize,
    ld: usize,
) -> Result<String, CaseError> {
    let what = format!("cgemm on {peer_name} read back through OpenCL");
    let summary = tolerance::check_cgemm(&what, got, want, n, n, ld, n, false)?;
    Ok(summary.to_string())
}

#[cfg(test)]
mod tests;
