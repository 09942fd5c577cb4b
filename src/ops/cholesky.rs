//! The cholesky op: cpotrf on the peer over matrices OpenCL produced, HPD and not.

use std::sync::Arc;

use num_complex::{Complex32, Complex64};

use crate::generate;
use crate::model::{Api, Case, CaseError};
use crate::paths;
use crate::reference::{self, Uplo};
use crate::runtimes::PeerRuntime;
use crate::runtimes::opencl::ClSession;
use crate::sync::Access;
use crate::tolerance;

use super::{Inputs, Plant, consume_on_cl, device, produce_on_cl, take_output, with_shared};

/// cpotrf on the peer over an HPD matrix OpenCL produced, factor read back through OpenCL;
/// then a non-HPD matrix whose `info` must match the reference's.
/// The HPD matrix and the non-HPD one of one (seed, kind, n), made once per worker.
pub(super) fn inputs(data: &mut Inputs, n: usize) -> Arc<(Vec<Complex32>, Vec<Complex32>)> {
    let (seed, kind) = (data.seed, data.kind);
    data.get("cholesky inputs", n, 2 * n * n * 8, || {
        let hpd = generate::hpd_matrix_of(kind, seed, n, n);
        let (non_hpd, _) = generate::non_hpd_matrix_of(kind, seed.wrapping_add(1), n, n);
        (hpd, non_hpd)
    })
}

pub(super) fn cholesky(
    session: &mut ClSession,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    mut data: Inputs<'_>,
    plant: Option<Plant>,
) -> Result<String, CaseError> {
    let n = case.n;
    let ld = n;
    let inputs = inputs(&mut data, n);
    let (hpd, non_hpd) = &*inputs;
    device(peer, case)?;
    let (info, factor, bad_info) = with_shared(session, peer, case, n * ld, |s, peer, m| {
        let ev = produce_on_cl(s, peer, m, case.sync, hpd)?;
        let pa = take_output(s, peer, m, case.sync, Some(&ev), Access::ReadWrite, plant)?;
        let peer_noop = plant == Some(Plant::PeerNoop);
        let info = if peer_noop {
            0
        } else {
            device(peer, case)?.cpotrf(Uplo::Lower, n, pa, ld)?
        };
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        let factor = consume_on_cl(s, m, &ready)?.read::<Complex32>(s, n * ld)?;
        // The failure path through the same memory: OpenCL writes a non-HPD matrix.
        let ev = produce_on_cl(s, peer, m, case.sync, non_hpd)?;
        paths::to_peer(s, peer, m, case.sync, Some(&ev), Access::ReadWrite)?;
        let bad_info = if peer_noop {
            0
        } else {
            device(peer, case)?.cpotrf(Uplo::Lower, n, m.peer, ld)?
        };
        Ok((info, factor, bad_info))
    })?;
    let references = || {
        data.get("cholesky references", n, n * ld * 16, || {
            let non_hpd_info = match reference::cholesky(Uplo::Lower, n, non_hpd, ld) {
                Err(info) => info,
                Ok(_) => 0,
            };
            (reference::cholesky(Uplo::Lower, n, hpd, ld), non_hpd_info)
        })
    };
    verdict(
        &case.pair.peer.label(),
        (info, &factor, bad_info),
        references,
        n,
        ld,
    )
}

/// What [`reference::cholesky`] gives for the HPD matrix (the factor, or the order of the minor
/// it stopped at), and the info it gives for the non-HPD one.
type References = (Result<Vec<Complex64>, usize>, usize);

/// The op's verdict in the order its steps ran: the HPD matrix's `info`, its factor (`n x n`,
/// leading dimension `ld`) against the f64 reference, then the non-HPD matrix's `info` against
/// the reference's. The references are made only once the first `info` is right.
fn verdict(
    peer_name: &str,
    (info, factor, bad_info): (i32, &[Complex32], i32),
    references: impl FnOnce() -> Arc<References>,
    n: usize,
    ld: usize,
) -> Result<String, CaseError> {
    tolerance::check_info(
        &format!("cpotrf info on {peer_name} (HPD input)"),
        info as i64,
        0,
    )?;
    let references = references();
    let (factored, want_info) = &*references;
    let want = factored.as_ref().map_err(|&info| {
        CaseError::Broken(crate::model::ApiError {
            api: Api::Host,
            call: "reference::cholesky".into(),
            code: info as i64,
            name: "NOT_HPD".into(),
            detail: "the generator's HPD matrix did not factor in f64".into(),
        })
    })?;
    let what = format!("cpotrf factor on {peer_name} read back through OpenCL");
    let summary = tolerance::check_cholesky(&what, factor, want, Uplo::Lower, n, ld)?;
    tolerance::check_info(
        &format!("cpotrf info on {peer_name} (non-HPD input)"),
        bad_info as i64,
        *want_info,
    )?;
    Ok(format!(
        "{summary}; non-HPD info {bad_info} as the reference"
    ))
}

#[cfg(test)]
mod tests;
