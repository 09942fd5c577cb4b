//! The handoff op: a bit-exact pattern crossing the path four times, both directions.

use crate::generate;
use crate::model::{BIT_EXACT, Case, CaseError, Mismatch, Phase};
use crate::paths::{self, DeviceBuffer};
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
    let check_buffer = |crossing: &str| {
        DeviceBuffer::with_words_read_back(
            session,
            &format!("OpenCL pattern check's result buffer for the {crossing}"),
            &CL_CHECK_WORD_NAMES,
            &CL_CHECK_INIT,
        )
    };
    let result_a = check_buffer(&format!("pattern written by {peer_name}"))?;
    let result_c = check_buffer(&format!("pattern rewritten by {peer_name}"))?;
    let seen_by_peer = with_shared(session, peer, case, case.n, |s, peer, m| {
        paths::to_peer(s, peer, m, case.sync, None, Access::Write)?;
        let first_write = if plant == Some(Plant::PeerOverrun) {
            crate::runtimes::PeerPtr {
                len: m.len + 1,
                ..m.peer
            }
        } else {
            m.peer
        };
        peer_work(plant, || peer.fill_pattern(first_write, a))?;
        peer_done(peer, case.sync)?;
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        let checked = cl_check_pattern(
            s,
            m.cl,
            a,
            words,
            CheckWords::Own(&result_a),
            Some(b),
            &sync::raw(&ready),
            plant,
        )?;
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
        if plant == Some(Plant::FlipAfterPeer) {
            peer.flip_bit(m.peer, 2 * Plant::flip_index(m.len), Plant::FLIP_BIT)?;
        }
        peer_done(peer, case.sync)?;
        let ready = paths::to_cl(s, peer, m, case.sync)?;
        cl_check_pattern(
            s,
            m.cl,
            c,
            words,
            CheckWords::Own(&result_c),
            None,
            &sync::raw(&ready),
            plant,
        )?;
        Ok(seen)
    })?;
    // Every step under test has run; reading the results now adds no sync to the case.
    let ra: Vec<u32> = result_a.read(session, CL_CHECK_WORDS)?;
    let rc: Vec<u32> = result_c.read(session, CL_CHECK_WORDS)?;
    verdict(&peer_name, (&ra, seen_by_peer, &rc), [a, b, c], words)
}

/// The op's verdict from its three checks: OpenCL's result words of the first crossing, the
/// peer's check of the second, OpenCL's result words of the last. The first wrong crossing in
/// causal order is the one reported.
fn verdict(
    peer_name: &str,
    (ra, seen_by_peer, rc): (&[u32], PatternCheck, &[u32]),
    [a, b, c]: [u32; 3],
    words: u32,
) -> Result<String, CaseError> {
    cl_pattern_verdict(
        format!("pattern written by {peer_name}, read by OpenCL"),
        ra,
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
        rc,
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
/// What each of those words is, for a verdict that names one.
pub(crate) const CL_CHECK_WORD_NAMES: [&str; CL_CHECK_WORDS] = [
    "mismatch count",
    "first mismatching index",
    "ran-marker",
    "word seen at the first mismatch",
];

/// Where an OpenCL pattern check puts its [`CL_CHECK_WORDS`] result words.
#[derive(Clone, Copy)]
pub(crate) enum CheckWords<'a> {
    /// A buffer of its own.
    Own(&'a DeviceBuffer),
    /// Slot `slot` of a buffer of such slots: the reuse op's 1,000 checks share one buffer, so
    /// that making, writing and reading it back are three host waits, not four thousand.
    Slot(&'a DeviceBuffer, u32),
}

/// OpenCL's bit-exact check of `words` pattern words of `mem` after `wait`: pattern_check, then
/// pattern_observe (the word at the first mismatch), then, with `rewrite`, the pattern of the
/// next seed written over it. `result` holds [`CL_CHECK_INIT`] and is read once the case's
/// steps are done. Returns the last event. The `skip-check-kernel` plant puts a marker where
/// pattern_check would run.
#[allow(clippy::too_many_arguments)] // the kernels' arguments, the wait and the plant
pub(crate) fn cl_check_pattern(
    s: &mut ClSession,
    mem: crate::runtimes::opencl::ClMem,
    seed: u32,
    words: u32,
    result: CheckWords<'_>,
    rewrite: Option<u32>,
    wait: &[cl3::types::cl_event],
    plant: Option<Plant>,
) -> Result<ClEvent, CaseError> {
    let n = words as usize;
    let (check, observe, result, slot) = match result {
        CheckWords::Own(b) => ("pattern_check", "pattern_observe", b.arg(), None),
        CheckWords::Slot(b, slot) => (
            "pattern_check_slot",
            "pattern_observe_slot",
            b.arg(),
            Some(ClArg::U32(slot)),
        ),
    };
    let checked = if plant == Some(Plant::SkipCheckKernel) {
        s.marker(wait)
    } else {
        let args = [
            ClArg::Mem(mem),
            ClArg::U32(seed),
            ClArg::U32(words),
            ClArg::Mem(result),
        ];
        let args: Vec<ClArg> = args.into_iter().chain(slot).collect();
        s.launch(check, n, &args, wait)
    }
    .running()?;
    let args = [ClArg::Mem(mem), ClArg::U32(words), ClArg::Mem(result)];
    let args: Vec<ClArg> = args.into_iter().chain(slot).collect();
    let mut last = s.launch(observe, 1, &args, &[checked.0]).running()?;
    if let Some(next) = rewrite {
        // The `cl-overrun` plant: one complex element (two words) past the memory.
        let fill = if plant == Some(Plant::ClOverrun) {
            words + 2
        } else {
            words
        };
        last = s
            .launch(
                "pattern_fill",
                fill as usize,
                &[ClArg::Mem(mem), ClArg::U32(next), ClArg::U32(fill)],
                &[last.0],
            )
            .running()?;
    }
    Ok(last)
}

/// The verdict of an OpenCL pattern check from its result words. Words that make no sense are
/// the driver's failure, like a wrong pattern: it wrote, ran and read them.
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
    )
    .map_err(|e| e.with_note(&what))?;
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

    /// The C reproducer computes the same three seeds (repro/emit.rs), so the patterns of a
    /// case and of its reproducer are the same words: both halves of the run seed count.
    #[test]
    fn handoff_seeds_fold_the_run_seed_as_the_reproducer_does() {
        assert_eq!(
            handoff_seeds(0x0000_000F_0000_00FF),
            [0xF0, 0x5555_55A5, 0xAAAA_AA5A]
        );
    }

    /// The peer's check: no mismatch passes; any mismatch fails at the first word, with the
    /// word seen there, the pattern's word and the count.
    #[test]
    fn the_peers_pattern_check_fails_on_one_word() {
        let what = || "pattern written by OpenCL, read by hip0".to_string();
        let clean = PatternCheck {
            mismatches: 0,
            first: None,
        };
        assert!(pattern_verdict(what(), clean, 7, 8).is_ok());
        let one = PatternCheck {
            mismatches: 1,
            first: Some((3, 0xdead)),
        };
        let reason = fail_reason(pattern_verdict(what(), one, 7, 8));
        assert_eq!(
            reason,
            format!(
                "pattern written by OpenCL, read by hip0: 1 of 8 words differ (bit-exact), first at [3] got 0x0000dead want {:#010x}",
                generate::pattern_word(7, 3)
            )
        );
    }

    /// The op's verdict: each of the three checks alone fails it, named by its crossing and
    /// seed; with several wrong, the first in causal order is reported.
    #[test]
    fn the_handoff_verdict_reports_the_first_wrong_crossing() {
        let seeds = [11, 22, 33];
        let clean_cl = [0, u32::MAX, 8, 0];
        let clean_peer = PatternCheck {
            mismatches: 0,
            first: None,
        };
        let wrong_cl = [1, 2, 8, 0xbad];
        let wrong_peer = PatternCheck {
            mismatches: 1,
            first: Some((4, 0xbad)),
        };
        let run = |checks| fail_reason(verdict("hip0", checks, seeds, 8).map(drop));
        assert_eq!(
            verdict("hip0", (&clean_cl, clean_peer, &clean_cl), seeds, 8).unwrap(),
            "8 words bit-exact across 4 crossings"
        );
        let first = run((&wrong_cl, wrong_peer, &wrong_cl));
        let want = |seed, i| format!("want {:#010x}", generate::pattern_word(seed, i));
        assert!(
            first.starts_with("pattern written by hip0, read by OpenCL: ")
                && first.ends_with(&want(11, 2)),
            "{first}"
        );
        let second = run((&clean_cl, wrong_peer, &wrong_cl));
        assert!(
            second.starts_with("pattern written by OpenCL, read by hip0: ")
                && second.ends_with(&want(22, 4)),
            "{second}"
        );
        let third = run((&clean_cl, clean_peer, &wrong_cl));
        assert!(
            third.starts_with("pattern rewritten by hip0, read by OpenCL: ")
                && third.ends_with(&want(33, 2)),
            "{third}"
        );
    }

    fn fail_reason(r: Result<(), CaseError>) -> String {
        match r.map_err(CaseError::into_outcome) {
            Err(o @ crate::model::Outcome::Fail { .. }) => o.reason(),
            other => panic!("not a fail: {other:?}"),
        }
    }

    /// Result words the driver got wrong are its failure, with what was read: the issue's
    /// counter initialisation that never landed (the buffer keeps its poison, and the kernel's
    /// atomics count on from there), and an index with no mismatch counted.
    #[test]
    fn contradictory_check_words_fail_on_the_driver() {
        let poison = crate::paths::POISON_WORD;
        let seed = 7;
        let what = || "pattern written by host, read by OpenCL".to_string();
        let dropped_init = [poison + 2, poison, 8, 0];
        let reason = fail_reason(cl_pattern_verdict(what(), &dropped_init, seed, 8));
        assert!(
            reason.contains("result words contradict each other")
                && reason.contains(&format!(
                    "{} mismatches, first index {poison:#x}",
                    poison + 2
                ))
                && reason.contains("pattern written by host, read by OpenCL"),
            "{reason}"
        );
        let index_without_count = [0, 3, 8, 0];
        let reason = fail_reason(cl_pattern_verdict(what(), &index_without_count, seed, 8));
        assert!(reason.contains("0 mismatches, first index 0x3"), "{reason}");
        let more_than_words = [9, 0, 8, 0];
        fail_reason(cl_pattern_verdict(what(), &more_than_words, seed, 8));
        // Consistent words are a verdict on the pattern, as before.
        assert!(cl_pattern_verdict(what(), &[0, u32::MAX, 8, 0], seed, 8).is_ok());
        let one_wrong = [1, 5, 8, 0xdead];
        let reason = fail_reason(cl_pattern_verdict(what(), &one_wrong, seed, 8));
        assert!(reason.contains("1 of 8 words differ") && reason.contains("[5] got 0x0000dead"));
    }

    /// The check's initial words as the driver left them, read back before the case: a
    /// dropped write names the buffer, the word, what was written and what was read.
    #[test]
    fn a_dropped_initialisation_is_named_by_word() {
        let poison = crate::paths::POISON_WORD;
        let what = "OpenCL pattern check's result buffer for the pattern written by host";
        assert!(
            crate::paths::written_as_asked(
                what,
                &CL_CHECK_WORD_NAMES,
                &CL_CHECK_INIT,
                &CL_CHECK_INIT
            )
            .is_ok()
        );
        let m = crate::paths::written_as_asked(
            what,
            &CL_CHECK_WORD_NAMES,
            &CL_CHECK_INIT,
            &[poison; CL_CHECK_WORDS],
        )
        .expect_err("a dropped write");
        let reason = crate::model::Outcome::mismatch(*m).reason();
        assert_eq!(
            reason,
            format!(
                "{what}, read back after clEnqueueWriteBuffer (word 0 is the mismatch count): the driver did not write what it was given: 4 of 4 words differ (bit-exact), first at [0] got {poison:#010x} want 0x00000000"
            )
        );
        // One word wrong further in is named as that word.
        let mut read = CL_CHECK_INIT;
        read[2] = 1;
        let m = crate::paths::written_as_asked(what, &CL_CHECK_WORD_NAMES, &CL_CHECK_INIT, &read)
            .expect_err("a garbled write");
        assert_eq!((m.index, m.count), (2, 1));
        assert!(m.what.contains("word 2 is the ran-marker"), "{}", m.what);
        // In a buffer of slots (the reuse op's), a word is named by its place in its slot.
        let slots: Vec<u32> = CL_CHECK_INIT.repeat(3);
        let mut read = slots.clone();
        read[9] = 7;
        let m = crate::paths::written_as_asked(what, &CL_CHECK_WORD_NAMES, &slots, &read)
            .expect_err("a garbled slot");
        assert_eq!((m.index, m.count), (9, 1));
        assert!(
            m.what.contains("word 9 is the first mismatching index"),
            "{}",
            m.what
        );
    }
}
