//! The placement op: where the shared memory lives, measured against the peer's own.

use num_complex::Complex32;

use crate::generate;
use crate::model::{Case, CaseError};
use crate::paths;
use crate::runtimes::device::AllocKind;
use crate::runtimes::opencl::ClSession;
use crate::runtimes::{PeerPtr, PeerRuntime};
use crate::sync::Access;
use crate::tolerance;

use super::{Plant, consume_on_cl, device, produce_on_cl, take_output, with_shared};

/// Scale passes timed per buffer in [`placement`], after one untimed warm-up pass.
const PLACEMENT_TIMED_PASSES: u32 = 20;

/// Where the shared memory lives, measured (the MI100 notes report 3.6 ms per stage on 32 MiB: docs/domain.md#the-mi100-notes).
/// OpenCL produces the data through the path; the peer scales it by 2 (one warm-up pass, then
/// [`PLACEMENT_TIMED_PASSES`] timed ones) on the shared memory, then on its own device memory
/// and its pinned host memory, which bracket the answer: device-memory speed or host-memory
/// (PCIe) speed. The data comes back through OpenCL and must be exactly 2^21 times the input
/// (doubling is exact in f32: inputs in [-0.5, 0.5] stay far below f32's range), so a
/// measurement over stale or lost data fails. The timing is wall-clock around launches and one
/// synchronize, so a 32 MiB buffer that fits a large L2 (the H200's 50 MB) reads as faster than
/// HBM: the verdict compares the shared buffer with references measured the same way.
pub(super) fn placement(
    session: &mut ClSession,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    seed: u64,
    plant: Option<Plant>,
) -> Result<String, CaseError> {
    let n = case.n;
    let input = generate::complex_vec(seed, n);
    device(peer, case)?;
    let (got, shared_s) = with_shared(session, peer, case, n, |s, peer, m| {
        let ev = produce_on_cl(s, peer, m, case.sync, &input)?;
        let p = take_output(s, peer, m, case.sync, Some(&ev), Access::ReadWrite, plant)?;
        let secs = if plant == Some(Plant::PeerNoop) {
            f64::NAN
        } else {
            timed_scale_passes(peer, p)?
        };
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        let out = consume_on_cl(s, m, &ready)?.read::<Complex32>(s, n)?;
        Ok((out, secs))
    })?;
    let factor = 2f32.powi(PLACEMENT_TIMED_PASSES as i32 + 1);
    let want: Vec<Complex32> = input.iter().map(|z| z * factor).collect();
    tolerance::check_exact_c32(
        &format!(
            "data scaled on {} read back through OpenCL",
            case.pair.peer.label()
        ),
        &got,
        &want,
    )?;
    let bytes = n * size_of::<Complex32>();
    let (device_s, host_s) = crate::calls::scoped(crate::calls::NOTE, || {
        (
            reference_placement(peer, case, AllocKind::Device, &input),
            reference_placement(peer, case, AllocKind::PinnedHost, &input),
        )
    });
    Ok(placement_note(bytes, shared_s, device_s, host_s))
}

/// One warm-up pass, then the timed ones; seconds per timed pass.
fn timed_scale_passes(peer: &mut dyn PeerRuntime, p: PeerPtr) -> Result<f64, CaseError> {
    peer.scale(p, 2.0)?;
    peer.synchronize()?;
    let start = std::time::Instant::now();
    for _ in 0..PLACEMENT_TIMED_PASSES {
        peer.scale(p, 2.0)?;
    }
    peer.synchronize()?;
    Ok(start.elapsed().as_secs_f64() / f64::from(PLACEMENT_TIMED_PASSES))
}

/// The same passes on memory of `kind` the peer allocates itself; why not, if it can't.
fn reference_placement(
    peer: &mut dyn PeerRuntime,
    case: &Case,
    kind: AllocKind,
    input: &[Complex32],
) -> Result<f64, String> {
    let why = |e: CaseError| e.into_outcome().reason();
    let dev = device(peer, case).map_err(why)?;
    let alloc = dev.alloc(kind, input.len()).map_err(why)?;
    let p = alloc.ptr;
    let timed = peer
        .upload(p, input)
        .and_then(|()| timed_scale_passes(peer, p));
    if let Some(d) = peer.as_device() {
        d.free(alloc);
    }
    timed.map_err(why)
}

/// Bandwidths (read + write of every byte per pass) and the verdict on where the shared
/// memory lives: nearer (in ratio) to the device-memory bandwidth or to the pinned-host one.
fn placement_note(
    bytes: usize,
    shared_s: f64,
    device_s: Result<f64, String>,
    host_s: Result<f64, String>,
) -> String {
    let gbps = |s: f64| 2.0 * bytes as f64 / s / 1e9;
    let show = |r: &Result<f64, String>| match r {
        Ok(s) => format!("{:.1} GB/s ({:.3} ms/pass)", gbps(*s), s * 1e3),
        Err(why) => format!("not measured ({why})"),
    };
    let shared = gbps(shared_s);
    let verdict = match (&device_s, &host_s) {
        (Ok(d), Ok(h)) => {
            let middle = (gbps(*d) * gbps(*h)).sqrt();
            if shared >= middle {
                format!(
                    "the shared memory runs at device-memory speed (above {middle:.1} GB/s, the geometric mean of the two)"
                )
            } else {
                format!(
                    "the shared memory runs at host-memory (PCIe) speed (below {middle:.1} GB/s, the geometric mean of the two)"
                )
            }
        }
        _ => "no verdict without both references".into(),
    };
    format!(
        "scale kernel on {:.1} MiB: shared {:.1} GB/s ({:.3} ms/pass), device memory {}, pinned host memory {}: {verdict}",
        bytes as f64 / (1 << 20) as f64,
        shared,
        shared_s * 1e3,
        show(&device_s),
        show(&host_s),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_verdict_sides_with_the_nearer_reference() {
        let mib32 = 32 << 20;
        // 2 * 32 MiB per pass: 0.05 ms is ~1342 GB/s, 3.6 ms (the MI100 notes' stage) ~18.6 GB/s.
        let pcie = placement_note(mib32, 3.6e-3, Ok(0.05e-3), Ok(2.6e-3));
        assert!(pcie.contains("host-memory (PCIe) speed"), "{pcie}");
        let vram = placement_note(mib32, 0.06e-3, Ok(0.05e-3), Ok(2.6e-3));
        assert!(vram.contains("device-memory speed"), "{vram}");
        let partial = placement_note(mib32, 0.06e-3, Ok(0.05e-3), Err("refused".into()));
        assert!(
            partial.contains("no verdict") && partial.contains("refused"),
            "{partial}"
        );
    }

    #[test]
    fn placements_exact_check_names_the_first_differing_element() {
        let want = vec![Complex32::new(1.0, 2.0); 8];
        let mut got = want.clone();
        assert!(tolerance::check_exact_c32("x", &got, &want).is_ok());
        got[5].im = f32::from_bits(got[5].im.to_bits() ^ 1);
        got[7].re = 0.0;
        match tolerance::check_exact_c32("x", &got, &want) {
            Err(m) => assert_eq!((m.index, m.count), (5, 2)),
            other => panic!("{other:?}"),
        }
    }
}
