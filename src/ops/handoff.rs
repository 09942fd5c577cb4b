//! The handoff op: a bit-exact pattern crossing the path four times, both directions.

use crate::generate;
use crate::model::{BIT_EXACT, Case, CaseError, Mismatch, Phase};
use crate::paths::DeviceBuffer;
use crate::runtimes::opencl::{ClArg, ClEvent, ClSession};
use crate::runtimes::{PatternCheck, PeerRuntime};
use crate::sync::{self, Access};

use super::{Plant, peer_done, peer_work, take_output, with_shared};

/// The three seeds of a handoff, distinct so a stale pattern never passes for a fresh one.
fn handoff_seeds(seed: u64) -> [u32; 3] {
    let base = (seed ^ (seed >> 32)) as u32;
    [base, base ^ 0x5555_5555, base ^ 0xAAAA_AAAA]
}

/// Bit-exact handoff: the peer writes A; OpenCL checks A and writes B; the peer checks B and
/// writes C; OpenCL checks C. Four crossings, both directions, through the path under test.
pub(super) fn handoff(
    session: &mut ClSession,
    peer: &mut dyn PeerRuntime,
    case: &Case,
    seed: u64,
    plant: Option<Plant>,
) -> Result<String, CaseError> {
    let [a, b, c] = handoff_seeds(seed);
    let words = u32::try_from(2 * case.n).map_err(|_| {
        CaseError::Harness(format!(
            "{} words do not fit the check kernels' u32 index",
            2 * case.n
        ))
    })?;
    let peer_name = case.pair.peer.label();
    // Made before the case starts: a blocking write later would drain the queue, a sync the
    // case did not ask for.
    let result_a = DeviceBuffer::with_data(session, &CL_CHECK_INIT)?;
    let result_c = DeviceBuffer::with_data(session, &CL_CHECK_INIT)?;
    let seen_by_peer = with_shared(session, peer, case, case.n, |s, peer, m| {
        sync::to_peer(s, peer, m, case.sync, None, Access::Write)?;
        peer_work(plant, || peer.fill_pattern(m.peer, a))?;
        peer_done(peer, case.sync)?;
        let ready = sync::to_cl(s, peer, m, case.sync)?;
        let checked = cl_check_pattern(s, m.cl, a, words, &result_a, Some(b), &sync::raw(&ready))?;
        let out = take_output(
            s,
            peer,
            m,
            case.sync,
            Some(&checked),
            Access::ReadWrite,
            plant,
        )?;
        let seen = peer.check_pattern(out, b)?;
        peer_work(plant, || peer.fill_pattern(m.peer, c))?;
        peer_done(peer, case.sync)?;
        let ready = sync::to_cl(s, peer, m, case.sync)?;
        cl_check_pattern(s, m.cl, c, words, &result_c, None, &sync::raw(&ready))?;
        Ok(seen)
    })?;
    // Every step under test has run; reading the results now adds no sync to the case.
    let ra: Vec<u32> = result_a.read(session, CL_CHECK_WORDS)?;
    let rc: Vec<u32> = result_c.read(session, CL_CHECK_WORDS)?;
    // Report the first wrong crossing in causal order.
    cl_pattern_verdict(
        format!("pattern written by {peer_name}, read by OpenCL"),
        &ra,
        a,
        words,
    )?;
    pattern_verdict(
        format!("pattern written by OpenCL, read by {peer_name}"),
        seen_by_peer,
        b,
        words,
    )?;
    cl_pattern_verdict(
        format!("pattern rewritten by {peer_name}, read by OpenCL"),
        &rc,
        c,
        words,
    )?;
    Ok(format!("{words} words bit-exact across 4 crossings"))
}

/// Words of an OpenCL pattern check's result buffer: mismatches, first index, ran-marker, the
/// word seen at the first index (kernels/pattern.cl).
pub(crate) const CL_CHECK_WORDS: usize = 4;
/// What the host puts there first: no mismatches, no index, not run, nothing seen.
pub(crate) const CL_CHECK_INIT: [u32; CL_CHECK_WORDS] = [0, u32::MAX, 0, 0];

/// OpenCL's bit-exact check of `words` pattern words of `mem` after `wait`: pattern_check, then
/// pattern_observe (the word at the first mismatch), then, with `rewrite`, the pattern of the
/// next seed written over it. `result` holds [`CL_CHECK_INIT`] and is read once the case's
/// steps are done. Returns the last event.
pub(crate) fn cl_check_pattern(
    s: &mut ClSession,
    mem: crate::runtimes::opencl::ClMem,
    seed: u32,
    words: u32,
    result: &DeviceBuffer,
    rewrite: Option<u32>,
    wait: &[cl3::types::cl_event],
) -> Result<ClEvent, CaseError> {
    let n = words as usize;
    let checked = s
        .launch(
            "pattern_check",
            n,
            &[
                ClArg::Mem(mem),
                ClArg::U32(seed),
                ClArg::U32(words),
                ClArg::Mem(result.arg()),
            ],
            wait,
        )
        .running()?;
    let mut last = s
        .launch(
            "pattern_observe",
            1,
            &[ClArg::Mem(mem), ClArg::U32(words), ClArg::Mem(result.arg())],
            &[checked.0],
        )
        .running()?;
    if let Some(next) = rewrite {
        last = s
            .launch(
                "pattern_fill",
                n,
                &[ClArg::Mem(mem), ClArg::U32(next), ClArg::U32(words)],
                &[last.0],
            )
            .running()?;
    }
    Ok(last)
}

/// The verdict of an OpenCL pattern check from its result words.
pub(crate) fn cl_pattern_verdict(
    what: String,
    r: &[u32],
    seed: u32,
    words: u32,
) -> Result<(), CaseError> {
    crate::runtimes::check_self_consistent(
        "OpenCL",
        r[0].into(),
        r[1].into(),
        u32::MAX.into(),
        r[2].into(),
        words.into(),
    )?;
    if r[0] == 0 {
        return Ok(());
    }
    let check = PatternCheck {
        mismatches: r[0] as usize,
        first: Some((r[1] as usize, r[3])),
    };
    Err(pattern_mismatch(what, check, seed, words as usize).into())
}

/// The verdict of the peer's pattern check: any mismatch is wrong data, named by `what`.
pub(crate) fn pattern_verdict(
    what: String,
    seen: PatternCheck,
    seed: u32,
    words: u32,
) -> Result<(), CaseError> {
    if seen.mismatches == 0 {
        return Ok(());
    }
    Err(pattern_mismatch(what, seen, seed, words as usize).into())
}

fn pattern_mismatch(what: String, check: PatternCheck, seed: u32, words: usize) -> Mismatch {
    let (index, got) = check.first.unwrap_or((0, 0));
    Mismatch {
        what,
        index,
        got: format!("{got:#010x}"),
        want: format!("{:#010x}", generate::pattern_word(seed, index as u32)),
        count: check.mismatches,
        len: words,
        max_abs_err: f64::NAN,
        max_rel_err: f64::NAN,
        bound: 0.0,
        formula: BIT_EXACT.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_seeds_differ() {
        let [a, b, c] = handoff_seeds(42);
        assert!(a != b && b != c && a != c);
    }
}
