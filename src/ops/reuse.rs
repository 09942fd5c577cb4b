//! The reuse op: one shared buffer handed back and forth [`ROUND_TRIPS`] times, a fresh
//! pattern written at every crossing and every crossing checked bit-exact by the side that
//! takes the memory. A driver that handles the first few handovers of an allocation and then
//! stops (cupy#4923: repeated copies from pinned memory into one device buffer had no effect
//! after the first) passes every op that crosses a buffer four times; here it fails at the
//! crossing where it stopped.
//!
//! Crossing k (from 0) is OpenCL's write read by the peer when k is even, the peer's write read
//! by OpenCL when k is odd. OpenCL's checks go to a slot per crossing of one result buffer,
//! read once the last crossing is done, so that no read adds a sync the case did not ask for;
//! the peer's checks are its own and immediate. The verdict names the first failing crossing
//! in causal order, and how many failed.

use cl3::types::cl_event;

use crate::generate;
use crate::model::{Case, CaseError, Phase, SyncMode};
use crate::paths::{self, DeviceBuffer};
use crate::runtimes::opencl::{ClArg, ClResultExt, ClSession};
use crate::runtimes::{PatternCheck, PeerRuntime};
use crate::sync::{self, Access};

use super::handoff::{
    CL_CHECK_INIT, CL_CHECK_WORD_NAMES, CL_CHECK_WORDS, CheckWords, cl_check_pattern,
    cl_pattern_verdict, pattern_verdict,
};
use super::{Plant, peer_done, peer_work, with_shared};

/// Round trips of one case: OpenCL to the peer and back, each a crossing.
pub const ROUND_TRIPS: usize = 1000;
/// Crossings of one case.
pub const CROSSINGS: usize = 2 * ROUND_TRIPS;
/// The crossing the `skip-one-sync` plant hands over with no sync: OpenCL's write, read by
/// the peer.
pub const PLANTED_CROSSING: usize = 500;
/// Failing reads by the peer after which a case stops, at the end of that round trip. A
/// driver that fails every crossing has said so by then, and the case's remaining 1,000
/// host waits would only restate it (on an H200 such a case cost 7 s in a full run); one that
/// fails now and then, as cupy#4923's did after the first copy, still runs every crossing
/// until that many failed. A negative control (`none`) never stops: which of its reads fail is
/// a race, so where it stopped would be too, and how many went stale is what it measures.
pub const STOP_AFTER_FAILED_READS: usize = 8;

/// Whether a case handed over with `sync` stops after [`STOP_AFTER_FAILED_READS`]: every sync
/// but a negative control's `none`. The C of the op asks the same.
pub fn stops_early(sync: SyncMode) -> bool {
    sync != SyncMode::None
}

/// Whether the `skip-one-sync` plant applies to a case handed over with `sync`: a wait, a map
/// or nothing more. A semaphore or an acquisition left out once leaves the next handover
/// unpaired, which is another error than a missing sync. The reproducer asks the same.
pub fn skip_one_sync_applies(sync: SyncMode) -> bool {
    matches!(sync, SyncMode::Finish | SyncMode::Event | SyncMode::Map)
}

/// The pattern seed of crossing `k`: distinct for every k (the pattern's word function is a
/// bijection of its index for one seed), so that memory still holding an earlier crossing's
/// pattern never passes for this one's.
pub fn crossing_seed(seed: u64, k: usize) -> u32 {
    let base = (seed ^ (seed >> 32)) as u32 ^ 0x2E05_E5ED;
    generate::pattern_word(base, k as u32)
}

/// A user event OpenCL commands wait on, completed when dropped: how the `skip-one-sync`
/// plant holds OpenCL's write back past the reader's look, as a GPU still at work would be,
/// so that the sync left out decides the crossing and the race is not won by chance.
struct Gate(cl_event);

impl Gate {
    fn new(s: &ClSession) -> Result<Self, CaseError> {
        cl3::event::create_user_event(s.context.get())
            .call("clCreateUserEvent")
            .refused("OpenCL would not make the user event that holds the planted write back")
            .map(Gate)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // SAFETY: a user event this gate made and owns.
        unsafe {
            let _ = cl3::event::set_user_event_status(self.0, cl3::event::CL_COMPLETE);
            let _ = cl3::event::release_event(self.0);
        }
    }
}

/// Runs the round trips, the `skip-one-sync` plant where [`skip_one_sync_applies`].
pub(super) fn reuse(
    session: &mut ClSession,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    seed: u64,
    plant: Option<Plant>,
) -> Result<String, CaseError> {
    let words = u32::try_from(2 * case.n).map_err(|_| {
        CaseError::Harness(format!(
            "{} words do not fit the check kernels' u32 index",
            2 * case.n
        ))
    })?;
    let skip_one = plant == Some(Plant::SkipOneSync);
    if skip_one && !skip_one_sync_applies(case.sync) {
        return Err(CaseError::Skip(format!(
            "the SkipOneSync plant leaves out a wait or a map, not a {} handover",
            case.sync
        )));
    }
    let peer_name = case.pair.peer.label();
    let seeds: Vec<u32> = (0..CROSSINGS).map(|k| crossing_seed(seed, k)).collect();
    // Made before the case starts: a blocking write later would drain the queue, a sync the
    // case did not ask for. One slot of CL_CHECK_WORDS per round trip, in one buffer.
    let init: Vec<u32> = CL_CHECK_INIT
        .iter()
        .copied()
        .cycle()
        .take(ROUND_TRIPS * CL_CHECK_WORDS)
        .collect();
    let results = DeviceBuffer::with_words_read_back(
        session,
        "OpenCL pattern checks' result buffer, slot r (words 4r to 4r + 3) for crossing 2r + 1",
        &CL_CHECK_WORD_NAMES,
        &init,
    )?;
    let n = words as usize;
    let (seen, cl_ran) = with_shared(session, peer, case, case.n, |s, peer, m| {
        let mut seen: Vec<PatternCheck> = Vec::with_capacity(ROUND_TRIPS);
        let mut cl_ran = 0;
        // Imported memory starts with its exporter: OpenCL takes it, then writes crossing 0.
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        let mut last = s
            .launch(
                "pattern_fill",
                n,
                &[ClArg::Mem(m.cl), ClArg::U32(seeds[0]), ClArg::U32(words)],
                &sync::raw(&ready),
            )
            .running()?;
        let mut gate: Option<Gate> = None;
        let mut failed_reads = 0;
        for r in 0..ROUND_TRIPS {
            let k = 2 * r;
            let planted = skip_one && k == PLANTED_CROSSING;
            let mode = if planted { SyncMode::None } else { case.sync };
            paths::to_peer(s, peer, m, mode, Some(&last), Access::ReadWrite)?;
            let check = peer.check_pattern(m.peer, seeds[k])?;
            failed_reads += usize::from(check.mismatches > 0);
            seen.push(check);
            if gate.take().is_some() {
                // The held-back write lands now, before the peer writes again: only the
                // planted crossing saw it late.
                s.finish().running()?;
            }
            peer_work(plant, || peer.fill_pattern(m.peer, seeds[k + 1]))?;
            peer_done(peer, case.sync)?;
            let ready = paths::to_cl(s, peer, m, case.sync)?;
            let mut wait = sync::raw(&ready);
            if skip_one && k + 2 == PLANTED_CROSSING {
                let g = Gate::new(s)?;
                wait.push(g.0);
                gate = Some(g);
            }
            let next = seeds.get(k + 2).copied();
            let slot = CheckWords::Slot(&results, r as u32);
            last = cl_check_pattern(s, m.cl, seeds[k + 1], words, slot, next, &wait, plant)?;
            cl_ran += 1;
            if failed_reads >= STOP_AFTER_FAILED_READS && stops_early(case.sync) {
                break;
            }
        }
        Ok((seen, cl_ran))
    })?;
    // Every step under test has run; reading the results now adds no sync to the case.
    // At least one round trip ran: the loop's first ends in OpenCL's check or the case's error.
    let cl_seen: Vec<Vec<u32>> = results
        .read::<u32>(session, cl_ran * CL_CHECK_WORDS)?
        .chunks(CL_CHECK_WORDS)
        .map(<[u32]>::to_vec)
        .collect();
    let what = |k: usize| {
        if k.is_multiple_of(2) {
            format!("pattern written by OpenCL, read by {peer_name}")
        } else {
            format!("pattern written by {peer_name}, read by OpenCL")
        }
    };
    let verdict = |k: usize| -> Result<(), CaseError> {
        let at = format!("crossing {k} of {CROSSINGS}: {}", what(k));
        if k.is_multiple_of(2) {
            pattern_verdict(at, seen[k / 2], seeds[k], words)
        } else {
            cl_pattern_verdict(at, &cl_seen[k / 2], seeds[k], words)
        }
    };
    let crossed = seen.len() + cl_seen.len();
    let failing: Vec<usize> = (0..crossed).filter(|&k| verdict(k).is_err()).collect();
    if let Some(&first) = failing.first() {
        let count = failing.len();
        let mut note = if count == 1 {
            "the only failing crossing".to_string()
        } else {
            format!(
                "the first of {count} failing crossings, the last {}",
                failing[count - 1]
            )
        };
        if crossed < CROSSINGS {
            note.push_str(&format!(
                "; stopped after crossing {} of {CROSSINGS}, once {STOP_AFTER_FAILED_READS} \
                 reads by {peer_name} had failed",
                crossed - 1
            ));
        }
        verdict(first).map_err(|e| e.with_note(&note))?;
    }
    Ok(format!(
        "{words} words bit-exact across {CROSSINGS} crossings of one buffer, a fresh pattern each"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crossing_has_its_own_pattern() {
        let seeds: std::collections::HashSet<u32> =
            (0..CROSSINGS).map(|k| crossing_seed(24301, k)).collect();
        assert_eq!(seeds.len(), CROSSINGS);
        assert_ne!(crossing_seed(1, 0), crossing_seed(2, 0));
        assert_eq!(
            PLANTED_CROSSING % 2,
            0,
            "the plant holds back OpenCL's write"
        );
    }
}
