//! The reuse op's C (ops/reuse.rs): one buffer handed back and forth [`ROUND_TRIPS`] times, a
//! fresh pattern at every crossing, each crossing checked bit-exact by the side that takes the
//! memory. The round trip is written once, as a loop's body: its handovers are decided when
//! the program is written, as every step's are, so the body must leave the memory as it found
//! it (its owner and mappings), or the program is refused.

use crate::model::SyncMode;
use crate::ops::Plant;
use crate::ops::reuse::{
    CROSSINGS, PLANTED_CROSSING, ROUND_TRIPS, STOP_AFTER_FAILED_READS, stops_early,
};
use crate::paths::c::{CMem as Mem, CWriter, waits};
use crate::sync::Access;

use super::{Body, Gen};

/// A round trip's part in the `skip-one-sync` plant, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trip {
    Plain,
    /// The round trip before the planted crossing: OpenCL's check and its write of the planted
    /// crossing's pattern wait on a user event, as on a GPU still at work.
    Gated,
    /// The planted crossing's: handed to the peer with no sync; the user event completes once
    /// the peer has looked.
    Planted,
}

/// ops/reuse.rs's steps, in its order: OpenCL's result buffer made and read back before the
/// case, the memory created, OpenCL's write of crossing 0, the round trips, the release, then
/// OpenCL's result words read and the verdict.
pub(super) fn reuse(g: &mut Gen, b: &mut Body, plant: Option<Plant>) {
    b.common = vec![
        "pattern",
        "crossing_seed",
        "device_buffer",
        "cl_pattern",
        "reuse",
    ];
    b.cl_kernels = vec!["pattern_check_slot", "pattern_observe_slot", "pattern_fill"];
    b.peer_kernels = vec!["clhip_pattern_fill", "clhip_pattern_check"];
    b.scratch = true;
    b.constants.push_str(&format!(
        "enum {{ ROUND_TRIPS = {ROUND_TRIPS}, CROSSINGS = {CROSSINGS}, STOP_AFTER_FAILED_READS = {STOP_AFTER_FAILED_READS} }}; /* ops/reuse.rs */\n"
    ));
    let peer = g.peer_name();
    g.declare("int r;");
    // Round trips run, and the peer's failed reads so far: clhip stops once there are
    // STOP_AFTER_FAILED_READS, at the end of that round trip.
    g.declare(if stops_early(g.case.sync) {
        "int trips = 0, failed_reads = 0;"
    } else {
        "int trips = 0;"
    });
    g.declare("uint32_t (*init)[4] = malloc(ROUND_TRIPS * sizeof *init);");
    g.declare("cl_mem results;");
    g.declare("uint64_t (*peer_seen)[3] = calloc(ROUND_TRIPS, sizeof *peer_seen);");
    g.declare("uint32_t (*cl_words)[4] = malloc(ROUND_TRIPS * sizeof *cl_words);");
    g.declare("cl_event last;");
    g.declare("cl_event checked;");
    g.out.comment(&format!(
        "ops/reuse.rs: one buffer handed back and forth {ROUND_TRIPS} times. Crossing 2r is OpenCL's pattern read by {peer}, crossing 2r + 1 {peer}'s read by OpenCL, each with its own seed. OpenCL's checks go to a slot per round trip of one result buffer, read once every step has run, so that no read adds a sync the case does not make; {peer}'s are its own and immediate."
    ));
    g.out.line(
        "for (r = 0; r < ROUND_TRIPS; r++)\n    \
             memcpy(init[r], (uint32_t[4]){0, 0xFFFFFFFFu, 0, 0}, 16);\n\
         results = device_buffer(ROUND_TRIPS * 16, init);\n\
         check_written_slots(\"OpenCL pattern checks' result buffer, a slot per odd crossing\", results, init, ROUND_TRIPS);",
    );
    let mut m = g.mem("m", "N");
    g.create(&m);
    // Memory that starts with its exporter is OpenCL's only once handed over.
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL writes crossing 0's pattern");
    g.out.line(format!(
        "last = launch(\"pattern_fill\", 2 * N, 3, (struct arg[]){{{}, u32(crossing_seed(SEED, 0)), u32(2 * N)}}, {});",
        m.arg(),
        waits(ready.as_deref())
    ));
    if plant == Some(Plant::SkipOneSync) {
        let planted = PLANTED_CROSSING / 2;
        repeat(g, &mut m, "r = 0", &format!("r < {}", planted - 1));
        g.out.comment(&format!(
            "PLANTED (skip-one-sync): round trip {} holds OpenCL's check and its write of crossing {PLANTED_CROSSING}'s pattern back on a user event",
            planted - 1
        ));
        round_trip(g, &mut m, Trip::Gated);
        g.out.line("r++;");
        round_trip(g, &mut m, Trip::Planted);
        repeat(g, &mut m, "r++", "r < ROUND_TRIPS");
    } else {
        repeat(g, &mut m, "r = 0", "r < ROUND_TRIPS");
    }
    if !g.out.text.contains("&last") {
        // A handover that waits for all of OpenCL's work (clFinish) names no event.
        g.out.text = g.out.text.replace("last = launch(", "launch(");
    }
    if stops_early(g.case.sync) {
        g.out.line("stopped:;");
    }
    g.release(&m);
    g.out.comment(
        "every step has run: OpenCL's result words of the round trips run read, then the verdict (bit-exact), the first failing crossing in causal order",
    );
    g.out.line(format!(
        "if (trips)\n    \
             CHECK(CL, clEnqueueReadBuffer(queue, results, CL_TRUE, 0, trips * sizeof *cl_words, cl_words, 0, NULL, NULL));\n\
         return reuse_verdict(\"{peer}\", peer_seen, cl_words, 2 * trips);"
    ));
}

/// `for (start; condition; r++)` over one plain round trip, written once.
fn repeat(g: &mut Gen, m: &mut Mem, start: &str, condition: &str) {
    let before = (m.owner, m.mapped, m.svm_mapped);
    let outer = std::mem::take(&mut g.out.text);
    round_trip(g, m, Trip::Plain);
    let body = std::mem::replace(&mut g.out.text, outer);
    if (m.owner, m.mapped, m.svm_mapped) != before {
        g.refuse(format!(
            "a round trip of {} with sync {} does not leave the memory as it found it, so a loop cannot repeat it",
            m.path, g.case.sync
        ));
    }
    g.out.line(format!("for ({start}; {condition}; r++) {{"));
    // The body's lines are indented once already: once more, inside the loop.
    g.out.line(&body);
    g.out.line("}");
}

/// Round trip `r`: crossing 2r, OpenCL's pattern to the peer, and 2r + 1, the peer's back.
fn round_trip(g: &mut Gen, m: &mut Mem, trip: Trip) {
    let peer = g.peer_name();
    let sync = g.case.sync;
    g.out.line(format!(
        "printf(\"-- round trip %d: crossing %d read by {peer}, %d by OpenCL\\n\", r, 2 * r, 2 * r + 1);"
    ));
    if trip == Trip::Planted {
        g.out.comment(&format!(
            "PLANTED (skip-one-sync): clhip runs sync {sync} here; crossing {PLANTED_CROSSING} is handed over with none"
        ));
    }
    let to_peer = if trip == Trip::Planted {
        SyncMode::None
    } else {
        sync
    };
    g.hand_to_peer(m, to_peer, Some("last"), Access::ReadWrite);
    g.out
        .line("peer_check_pattern(m_peer, crossing_seed(SEED, 2 * r), peer_seen[r]);");
    if stops_early(sync) {
        g.out.line("failed_reads += peer_seen[r][0] != 0;");
    }
    if trip == Trip::Planted {
        g.out.comment("the held-back write lands now, before the peer writes again: only the planted crossing saw it late");
        // clhip completes and releases its user event as it drops it, calls it does not
        // record: checked here, not printed.
        g.out.line(
            "if ((err = clSetUserEventStatus(gate, CL_COMPLETE)) != CL_SUCCESS)\n    \
                 check(CL, err, \"clSetUserEventStatus(gate, CL_COMPLETE)\", __LINE__);\n\
             clReleaseEvent(gate);\n\
             CHECK(CL, clFinish(queue));",
        );
    }
    g.out
        .line("peer_fill_pattern(m_peer, crossing_seed(SEED, 2 * r + 1));");
    g.peer_sync();
    let ready = g.hand_to_cl(m, sync);
    let wait = if trip == Trip::Gated {
        g.declare("cl_event gate;");
        g.declare("cl_int err;");
        g.out
            .line("CHECK(CL, (gate = clCreateUserEvent(context, &err), err));");
        match ready {
            Some(ev) => format!("2, (cl_event[]){{{ev}, gate}}"),
            None => "1, &gate".to_string(),
        }
    } else {
        waits(ready.as_deref())
    };
    g.out.line(format!(
        "checked = cl_check_pattern_slot({}, crossing_seed(SEED, 2 * r + 1), results, r, {wait});\n\
         if (r + 1 < ROUND_TRIPS)\n    \
             last = launch(\"pattern_fill\", 2 * N, 3, (struct arg[]){{{}, u32(crossing_seed(SEED, 2 * r + 2)), u32(2 * N)}}, 1, &checked);\n\
         trips = r + 1;",
        m.arg(),
        m.arg()
    ));
    // A negative control runs every crossing, as clhip's does.
    if stops_early(sync) {
        g.out.line(
            "if (failed_reads >= STOP_AFTER_FAILED_READS)\n    \
                 goto stopped;",
        );
    }
}
