use super::super::tests::{pair, result, sample_report, under};
use super::*;
use crate::model::{Api, ApiError, Op, Outcome, PathKind, Peer, SyncMode};

fn fault() -> Outcome {
    Outcome::Fault {
        error: ApiError {
            api: Api::Cuda,
            call: "cuStreamSynchronize".into(),
            code: 700,
            name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            detail: String::new(),
        },
    }
}

fn run(results: Vec<CaseResult>) -> RunReport {
    let mut r = sample_report();
    r.results = results;
    r
}

#[test]
fn regressions_fixes_lost_capabilities_and_corruption_are_told_apart() {
    let p = pair(
        "nvidia0",
        Peer {
            api: Api::Cuda,
            ordinal: 0,
        },
    );
    let c = |path, op, outcome| result(&p, path, SyncMode::Finish, op, 64, outcome);
    let old = run(vec![
        c(PathKind::Copy, Op::Handoff, Outcome::pass()),
        c(PathKind::ClSvmCoarse, Op::Handoff, fault()),
        c(PathKind::ClSvmFine, Op::Handoff, Outcome::pass()),
        c(PathKind::DeviceUseHostPtr, Op::Handoff, fault()),
        c(PathKind::ManagedUseHostPtr, Op::Handoff, Outcome::pass()),
    ]);
    let mut new = run(vec![
        // A pass that is now refused: a capability that disappeared.
        c(PathKind::Copy, Op::Handoff, Outcome::unsupported("gone")),
        // A fault that is now wrong data: silent corruption, worse.
        c(
            PathKind::ClSvmCoarse,
            Op::Handoff,
            super::super::tests::mismatch("x"),
        ),
        c(PathKind::ClSvmFine, Op::Handoff, Outcome::pass()),
        // A fault that now passes.
        c(PathKind::DeviceUseHostPtr, Op::Handoff, Outcome::pass()),
        c(PathKind::PinnedUseHostPtr, Op::Handoff, Outcome::pass()),
    ]);
    new.fingerprint.os_kernel = "Linux 9.9".into();
    let d = diff(&old, &new);
    let by_id = |path: PathKind| {
        d.moved
            .iter()
            .find(|m| {
                m.new
                    .or(m.old)
                    .and_then(|r| r.work.case())
                    .is_some_and(|c| c.path == path)
            })
            .map(|m| m.movement)
    };
    assert_eq!(by_id(PathKind::Copy), Some(Movement::Regression));
    assert_eq!(by_id(PathKind::ClSvmCoarse), Some(Movement::Regression));
    assert_eq!(by_id(PathKind::ClSvmFine), None);
    assert_eq!(by_id(PathKind::DeviceUseHostPtr), Some(Movement::Fix));
    assert_eq!(by_id(PathKind::PinnedUseHostPtr), Some(Movement::New));
    assert_eq!(by_id(PathKind::ManagedUseHostPtr), Some(Movement::Removed));
    assert_eq!(d.regressions(), 2);
    assert_eq!(d.fingerprint_new, ["os kernel: Linux 9.9"]);
    let text = render_diff(&d);
    assert!(
        text.contains("! regression  nvidia0+cuda0/copy/finish/handoff/n=64: pass -> unsupported"),
        "{text}"
    );
    assert!(text.contains("  + os kernel: Linux 9.9"), "{text}");
    let md = render_diff_markdown(&d);
    assert!(md.contains("| ! | regression |"), "{md}");
    assert!(md.contains("2 regressions, 1 fixes"), "{md}");
}

#[test]
fn a_variants_case_is_diffed_apart_from_its_plain_twin() {
    let p = pair(
        "rocm0",
        Peer {
            api: Api::Hip,
            ordinal: 0,
        },
    );
    let c = |outcome| {
        result(
            &p,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Handoff,
            4097,
            outcome,
        )
    };
    let sdma = [("HSA_ENABLE_SDMA", "0")];
    let old = run(vec![c(Outcome::pass()), under(c(Outcome::pass()), &sdma)]);
    let new = run(vec![c(Outcome::pass()), under(c(fault()), &sdma)]);
    let d = diff(&old, &new);
    assert_eq!(d.regressions(), 1);
    assert_eq!(
        d.moved[0].id,
        "rocm0+hip0/copy/finish/handoff/n=4097/env:HSA_ENABLE_SDMA=0"
    );
    let text = render_diff(&d);
    assert!(
        text.contains(
            "! regression  rocm0+hip0/copy/finish/handoff/n=4097/env:HSA_ENABLE_SDMA=0: pass -> fault"
        ),
        "{text}"
    );
    // A variant the new run no longer has is removed, not matched to the plain case.
    let plain_only = run(vec![c(Outcome::pass())]);
    let d = diff(&old, &plain_only);
    assert_eq!(d.count(Movement::Removed), 1);
    assert_eq!(d.regressions(), 0);
}

fn measured(mut r: CaseResult, host: (u64, u64), device: Option<(u64, u64)>) -> CaseResult {
    r.footprint = Some(crate::footprint::Footprint {
        host_before: host.0,
        host_peak: Some(host.0 + host.1),
        device_before: device.map(|d| d.0),
        device_after_setup: device.map(|d| d.0 + d.1),
    });
    r
}

#[test]
fn memory_grown_past_the_rule_is_a_footprint_regression_of_its_own() {
    const MIB: u64 = 1 << 20;
    let p = pair(
        "nvidia0",
        Peer {
            api: Api::Cuda,
            ordinal: 0,
        },
    );
    let c = |path| result(&p, path, SyncMode::Finish, Op::Fft, 4096, Outcome::pass());
    let old = run(vec![
        measured(
            c(PathKind::Copy),
            (500 * MIB, 2 * MIB),
            Some((400 * MIB, MIB)),
        ),
        measured(
            c(PathKind::ClSvmCoarse),
            (900 * MIB, 2 * MIB),
            Some((400 * MIB, 32 * MIB)),
        ),
        measured(c(PathKind::ClSvmFine), (500 * MIB, 4 * MIB), None),
        c(PathKind::DeviceUseHostPtr),
    ]);
    let mut old = old;
    old.footprint_isolated = true;
    let new = run(vec![
        // Host: 2 MiB -> 66 MiB, past both; the worker's history (host_before) moved too,
        // which is not the case's.
        measured(
            c(PathKind::Copy),
            (700 * MIB, 66 * MIB),
            Some((400 * MIB, MIB)),
        ),
        // Device: a staging copy per buffer, 32 -> 64 MiB.
        measured(
            c(PathKind::ClSvmCoarse),
            (900 * MIB, 2 * MIB),
            Some((400 * MIB, 64 * MIB)),
        ),
        // Doubled, but by 4 MiB: noise.
        measured(c(PathKind::ClSvmFine), (500 * MIB, 8 * MIB), None),
        // Not measured in the old run: nothing to compare.
        measured(c(PathKind::DeviceUseHostPtr), (500 * MIB, 900 * MIB), None),
    ]);
    // Batched runs (a case's footprint not its own) are not compared, and say so.
    let d = diff(&old, &new);
    assert!(
        d.footprint.is_empty() && !d.fails(),
        "batched: not compared"
    );
    assert!(
        summary_line(&d).ends_with(
            ", footprints not compared (a run compares them with --cases-per-worker 1 -j 1)"
        ),
        "{}",
        summary_line(&d)
    );
    let mut new = new;
    new.footprint_isolated = true;
    let d = diff(&old, &new);
    assert_eq!(d.regressions(), 0, "no outcome moved");
    let flagged: Vec<(&str, Memory)> = d.footprint.iter().map(|g| (g.id, g.memory)).collect();
    assert_eq!(
        flagged,
        [
            ("nvidia0+cuda0/copy/finish/fft/n=4096", Memory::Host),
            (
                "nvidia0+cuda0/cl-svm-coarse/finish/fft/n=4096",
                Memory::Device
            ),
        ]
    );
    assert!(d.fails(), "a footprint regression fails the diff");
    let text = render_diff(&d);
    assert!(
        text.contains(
            "! footprint   nvidia0+cuda0/copy/finish/fft/n=4096: host 2.0 MiB -> 66.0 MiB"
        ),
        "{text}"
    );
    assert!(
        text.contains("flagged when new > 1.5 x old and new - old > 16 MiB"),
        "{text}"
    );
    assert!(text.contains(", 2 footprint regressions"), "{text}");
    let md = render_diff_markdown(&d);
    assert!(
        md.contains(
            "| ! | `nvidia0+cuda0/cl-svm-coarse/finish/fft/n=4096` | device | 32.0 MiB | 64.0 MiB |"
        ),
        "{md}"
    );
    // `--only footprint` shows them alone; `--only regressions` leaves them out.
    let mut only = diff(&old, &new);
    only.shown = Some(Only::parse("footprint").unwrap());
    let text = render_diff(&only);
    assert!(text.contains("! footprint   nvidia0+cuda0/copy"), "{text}");
    assert!(text.contains("showing only: footprint"), "{text}");
    only.shown = Some(Only::parse("regressions").unwrap());
    assert!(!render_diff(&only).contains("! footprint"));
    assert!(!render_diff_markdown(&only).contains("## Footprint"));
    // The same runs the other way round: memory that shrank is no regression.
    let back = diff(&new, &old);
    assert!(back.footprint.is_empty() && !back.fails());
    assert!(summary_line(&back).ends_with(", 0 footprint regressions"));
}

#[test]
fn runs_without_footprints_keep_the_usual_summary() {
    let p = pair("pocl0", Peer::HOST);
    let c = || {
        result(
            &p,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Fft,
            64,
            Outcome::pass(),
        )
    };
    let (old, new) = (run(vec![c()]), run(vec![c()]));
    let d = diff(&old, &new);
    assert!(!d.footprints_compared && !d.fails());
    assert!(
        !summary_line(&d).contains("footprint"),
        "{}",
        summary_line(&d)
    );
}

#[test]
fn a_negative_controls_race_is_not_a_regression() {
    let p = pair("pocl0", Peer::HOST);
    let c = |outcome| result(&p, PathKind::Copy, SyncMode::None, Op::Fft, 64, outcome);
    let old = run(vec![c(Outcome::pass())]);
    let new = run(vec![c(super::super::tests::mismatch("stale"))]);
    let d = diff(&old, &new);
    assert_eq!(d.moved[0].movement, Movement::Race);
    assert_eq!(d.regressions(), 0);
}

#[test]
fn the_terminal_diff_shows_control_characters_as_text() {
    let p = pair("pocl0", Peer::HOST);
    let c = |outcome| result(&p, PathKind::Copy, SyncMode::Finish, Op::Fft, 64, outcome);
    let old = run(vec![c(Outcome::pass())]);
    let mut new = run(vec![c(Outcome::unsupported("gone\x1b[2J\nnext\u{202e}"))]);
    new.fingerprint.os_kernel = "Linux\x1b]8;;https://x.example/\x07".into();
    let text = render_diff(&diff(&old, &new));
    let raw: Vec<char> = text
        .chars()
        .filter(|&c| crate::escape::is_control(c) && c != '\n')
        .collect();
    assert_eq!(raw, Vec::<char>::new(), "{text}");
    assert!(text.contains(r"now: gone\x1b[2J / next\u{202e}"), "{text}");
    assert!(
        text.contains(r"  + os kernel: Linux\x1b]8;;https://x.example/\x07"),
        "{text}"
    );
}

#[test]
fn a_case_the_new_run_did_not_get_to_is_not_run_not_removed() {
    let p = pair("pocl0", Peer::HOST);
    let c = |n| {
        result(
            &p,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Handoff,
            n,
            Outcome::pass(),
        )
    };
    let old = run(vec![c(64), c(128), c(256)]);
    let mut new = run(vec![c(64)]);
    new.not_run = vec![c(128).id];
    new.status = super::super::RunStatus::Interrupted;
    let d = diff(&old, &new);
    let by_size = |n: usize| d.moved.iter().find(|m| m.id == c(n).id).map(|m| m.movement);
    assert_eq!(by_size(128), Some(Movement::NotRun));
    assert_eq!(by_size(256), Some(Movement::Removed));
    assert_eq!(
        summary_line(&d),
        "0 regressions, 0 fixes, 0 changed, 0 new, 1 removed, 1 not run in the new run, 0 negative-control races"
    );
    assert!(
        render_diff(&d).contains("  not run     pocl0+host/copy/finish/handoff/n=128: pass -> -")
    );
}

#[test]
fn seeds_case_sets_and_flags_are_compared_before_any_case() {
    let p = pair("pocl0", Peer::HOST);
    let c = |outcome| result(&p, PathKind::Copy, SyncMode::Finish, Op::Fft, 64, outcome);
    let mut old = run(vec![c(Outcome::pass())]);
    let mut new = run(vec![c(Outcome::unsupported("gone"))]);
    old.seed = 24301;
    old.command = [
        "clhip",
        "run",
        "-j",
        "4",
        "--timeout",
        "60",
        "--json",
        "a.json",
    ]
    .map(String::from)
    .to_vec();
    new.command = ["clhip", "run", "-j", "2", "--allow-empty", "--json=b.json"]
        .map(String::from)
        .to_vec();
    let d = diff(&old, &new);
    let setup: Vec<String> = d
        .setup
        .iter()
        .map(|s| format!("{}: {} -> {}", s.what, s.old, s.new))
        .collect();
    // Where the outputs went is no difference in what was run.
    assert_eq!(
        setup,
        [
            "seed: 24301 -> 7",
            "--allow-empty: - -> ",
            "--timeout: 60 -> -",
            "-j: 4 -> 2"
        ]
    );
    let text = render_diff(&d);
    assert!(text.starts_with("setup:\n  seed: 24301 -> 7\n"), "{text}");
    let md = render_diff_markdown(&d);
    assert!(md.contains("## Setup\n\n|  | old | new |"), "{md}");
    assert!(md.contains("| seed | 24301 | 7 |"), "{md}");
    // The same setup says so.
    let same = render_diff(&diff(&old, &old));
    assert!(
        same.starts_with("setup:\n  the same (seed, build, plant, cases selected and flags)\n"),
        "{same}"
    );
}

#[test]
fn a_filtered_run_s_absent_cases_are_not_in_this_run_and_a_dropped_one_is_removed() {
    let p = pair("pocl0", Peer::HOST);
    let c = |path| result(&p, path, SyncMode::Finish, Op::Handoff, 64, Outcome::pass());
    let selection = |filters: &[&str]| super::super::json::Selection {
        filters: filters.iter().map(|f| f.to_string()).collect(),
        devices: Vec::new(),
        matrix: "m".into(),
        planned: 3,
        plan: "p".into(),
        shards: Vec::new(),
    };
    let mut old = run(vec![
        c(PathKind::Copy),
        c(PathKind::ClSvmCoarse),
        c(PathKind::ClSvmFine),
    ]);
    old.selection = Some(selection(&[]));
    // Filtered to the SVM paths, and the fine-grain case gone from them.
    let mut new = run(vec![c(PathKind::ClSvmCoarse)]);
    new.selection = Some(selection(&["*/cl-svm-*"]));
    let d = diff(&old, &new);
    let of = |path| {
        d.moved
            .iter()
            .find(|m| m.id == c(path).id)
            .map(|m| m.movement)
    };
    assert_eq!(of(PathKind::Copy), Some(Movement::NotInThisRun));
    assert_eq!(of(PathKind::ClSvmFine), Some(Movement::Removed));
    assert!(
        summary_line(&d).contains("1 removed, 1 not in the new run's selection"),
        "{}",
        summary_line(&d)
    );
    assert!(
        d.setup
            .iter()
            .any(|s| s.what == "case filters" && s.old == "all" && s.new == "*/cl-svm-*"),
        "{:?}",
        d.setup
    );
    // A shard of the new run leaves out the others' cases.
    let mut shard = run(Vec::new());
    let mut sel = selection(&[]);
    sel.shards = vec!["hash:1/2".parse().unwrap()];
    shard.selection = Some(sel);
    let d = diff(&old, &shard);
    for m in &d.moved {
        let in_shard = "hash:1/2"
            .parse::<crate::partition::Partition>()
            .unwrap()
            .contains(m.id);
        let want = if in_shard {
            Movement::Removed
        } else {
            Movement::NotInThisRun
        };
        assert_eq!(m.movement, want, "{}", m.id);
    }
}

#[test]
fn regressions_come_first_and_only_shows_the_movement_asked_for() {
    let p = pair("pocl0", Peer::HOST);
    let c = |path, outcome| result(&p, path, SyncMode::Finish, Op::Fft, 64, outcome);
    // The regression's path sorts last: grouped by path alone it would come last.
    let old = run(vec![
        c(PathKind::Copy, fault()),
        c(PathKind::UseHostPtr, Outcome::pass()),
    ]);
    let new = run(vec![
        c(PathKind::Copy, Outcome::pass()),
        c(PathKind::UseHostPtr, Outcome::unsupported("gone")),
    ]);
    let mut d = diff(&old, &new);
    let text = render_diff(&d);
    let regression = text.find("! regression").unwrap();
    let fix = text.find("  fix ").unwrap();
    let summary = text.find("1 regressions, 1 fixes").unwrap();
    assert!(summary < regression && regression < fix, "{text}");
    assert!(text.contains("\nregressions\n! regression"), "{text}");
    let md = render_diff_markdown(&d);
    assert!(
        md.find("## Regressions").unwrap() < md.find("| fix |").unwrap(),
        "{md}"
    );
    d.shown = Some(Only::parse("regressions").unwrap());
    let only = render_diff(&d);
    assert!(only.contains("! regression"), "{only}");
    assert!(!only.contains("  fix "), "{only}");
    // The counts are still of every case.
    assert!(only.contains("1 regressions, 1 fixes"), "{only}");
    assert!(only.contains("showing only: regression"), "{only}");
    assert!(Movement::parse_plural("regression").is_err());
}
