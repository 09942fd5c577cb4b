//! `clhip bench interop` through the real binary on the first OpenCL device's host pair (PoCL on
//! CI), with tiny sizes and few repetitions so each run takes about a second: the JSON's rows
//! are real order statistics, the SVG is well-formed XML, a planted crash costs only its path,
//! and a side that does nothing turns every measurement it touches into a `fail`.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clhip::bench::results::{BenchReport, Measure, Target, TargetBench, load};
use clhip::model::{Outcome, OutcomeKind, PathKind};

const REPS: usize = 3;
const SIZES: [u64; 2] = [4096, 16384];

/// The host pair of the first OpenCL device (`pocl0+host` on CI); without OpenCL the test is
/// ignored (failed under CLHIP_REQUIRE_OPENCL=1).
fn host_pair() -> String {
    format!("{}+host", support::opencl_device().r.label)
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("clhip-bench-interop-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `clhip bench interop PAIR --sizes 4K,16K --reps 3 --warmup 1 --pipeline-len 1024 EXTRA
/// --json DIR/bench.json`, with the report it wrote.
fn bench(pair: &str, dir: &Path, extra: &[&str]) -> (Output, BenchReport) {
    let json = dir.join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["bench", "interop", pair, "--sizes", "4K,16K", "--reps"])
        .arg(REPS.to_string())
        .args([
            "--warmup",
            "1",
            "--pipeline-len",
            "1024",
            "--timeout",
            "120",
        ])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let report = load(&json).unwrap_or_else(|e| {
        panic!(
            "{e}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

fn targets(report: &BenchReport) -> Vec<&TargetBench> {
    report.pairs.iter().flat_map(|p| &p.targets).collect()
}

fn target<'a>(report: &'a BenchReport, name: &str) -> &'a TargetBench {
    targets(report)
        .into_iter()
        .find(|t| t.target.name() == name)
        .unwrap_or_else(|| panic!("no target {name}"))
}

/// Every measure a finished target must have: the pipeline, and per size the handoff both
/// ways and the scale on shared memory (a path), and the scale on the peer's own memory.
fn expected_rows(t: &TargetBench) -> Vec<(Measure, u64)> {
    let mut want = vec![(Measure::Pipeline, 1024 * 8)];
    for b in SIZES {
        match t.target {
            Target::Native => want.push((Measure::ScaleOwn, b)),
            Target::Path { .. } => want.extend([
                (Measure::HandoffToPeer, b),
                (Measure::HandoffToOpencl, b),
                (Measure::ScaleShared, b),
                (Measure::ScaleOwn, b),
            ]),
        }
    }
    want
}

/// A hand check that `text` is one well-formed XML element tree: tags balance and nest, every
/// attribute value is quoted, `<` never appears in text and every `&` starts an entity. Enough
/// for an SVG we wrote ourselves (no comments, CDATA or doctype), without an XML crate.
fn well_formed_xml(text: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text.trim();
    let mut roots = 0;
    while !rest.is_empty() {
        let Some(open) = rest.find('<') else {
            check_text(rest)?;
            break;
        };
        check_text(&rest[..open])?;
        if stack.is_empty() && !rest[..open].trim().is_empty() {
            return Err(format!("text outside the root: {:?}", &rest[..open]));
        }
        let close = rest[open..].find('>').ok_or("a tag that never closes")? + open;
        let tag = &rest[open + 1..close];
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(top) if top == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        } else {
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':')
            {
                return Err(format!("bad tag name in <{tag}>"));
            }
            check_attributes(&body[name.len()..])?;
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name);
            }
        }
        rest = &rest[close + 1..];
    }
    if let Some(open) = stack.last() {
        return Err(format!("<{open}> never closed"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(())
}

fn check_text(text: &str) -> Result<(), String> {
    for (i, _) in text.match_indices('&') {
        let entity = &text[i..];
        if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
            .iter()
            .any(|e| entity.starts_with(e))
        {
            return Err(format!("a bare & in {text:?}"));
        }
    }
    Ok(())
}

/// `name="value"` pairs, each value quoted, free of `<` and with entities only.
fn check_attributes(mut attrs: &str) -> Result<(), String> {
    loop {
        attrs = attrs.trim_start();
        if attrs.is_empty() {
            return Ok(());
        }
        let eq = attrs
            .find('=')
            .ok_or(format!("attribute without a value: {attrs}"))?;
        let value = attrs[eq + 1..]
            .strip_prefix('"')
            .ok_or(format!("unquoted attribute: {attrs}"))?;
        let end = value
            .find('"')
            .ok_or("an attribute value that never closes")?;
        if value[..end].contains('<') {
            return Err(format!("< in an attribute: {}", &value[..end]));
        }
        check_text(&value[..end])?;
        attrs = &value[end + 1..];
    }
}

fn the_xml_check_rejects_what_is_not_xml() {
    assert_eq!(
        well_formed_xml("<svg a=\"1\"><g><line/></g><text>x &amp; y</text></svg>"),
        Ok(())
    );
    assert!(well_formed_xml("<svg><g></svg>").is_err());
    assert!(well_formed_xml("<svg><g></g>").is_err());
    assert!(well_formed_xml("<svg>a & b</svg>").is_err());
    assert!(well_formed_xml("<svg a=1></svg>").is_err());
    assert!(well_formed_xml("<svg a=\"<\"></svg>").is_err());
    assert!(well_formed_xml("<svg></svg><svg></svg>").is_err());
}

fn a_tiny_bench_gives_every_row_a_median_within_its_spread() {
    let pair = host_pair();
    let dir = scratch("tiny");
    let (md, svg) = (dir.join("bench.md"), dir.join("bench.svg"));
    let (out, report) = bench(
        &pair,
        &dir,
        &[
            "--markdown",
            md.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
    // The measurements name the build that took them, as a run's results do.
    assert_eq!(report.build, Some(clhip::build_id::BuildId::this()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report.settings.reps as usize, REPS);
    assert_eq!(report.settings.sizes_bytes, SIZES);
    assert!(
        !report.fingerprint.opencl.is_empty(),
        "the driver fingerprint is recorded"
    );

    let all = targets(&report);
    let names: Vec<String> = all.iter().map(|t| t.target.name()).collect();
    for want in [
        "copy/finish",
        "copy/event",
        "cl-svm-coarse/map",
        "use-host-ptr/map",
        "native",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    let mut rows = 0;
    for t in &all {
        for r in &t.rows {
            let s = &r.stats;
            assert!(
                s.median_s > 0.0,
                "{} {:?}: median {}",
                t.id,
                r.measure,
                s.median_s
            );
            assert!(
                s.min_s <= s.q1_s
                    && s.q1_s <= s.median_s
                    && s.median_s <= s.q3_s
                    && s.q3_s <= s.max_s,
                "{} {:?}: {s:?}",
                t.id,
                r.measure
            );
            assert_eq!(
                s.samples_s.len(),
                REPS,
                "{}: one sample per timed repetition",
                t.id
            );
            assert_eq!(r.warmup, 1);
            rows += 1;
        }
        // A target that finished has every measurement; the copy reference and native always
        // finish on the host.
        if t.outcome.kind() == OutcomeKind::Pass && t.problems.is_empty() {
            for (m, b) in expected_rows(t) {
                assert!(t.row(m, b).is_some(), "{}: no {m:?} at {b}", t.id);
            }
        }
    }
    for must in ["copy/finish", "native"] {
        let t = target(&report, must);
        assert_eq!(t.outcome, Outcome::pass(), "{must}");
        assert_eq!(t.rows.len(), expected_rows(t).len(), "{must}");
    }
    assert!(rows >= 20, "{rows} rows");

    for title in [
        "handoff OpenCL -> host",
        "handoff host -> OpenCL",
        "pipeline",
        "native",
    ] {
        assert!(stdout.contains(title), "console lacks {title}:\n{stdout}");
    }
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("| copy/finish |") && md.contains("## Fingerprint"),
        "{md}"
    );

    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg "), "{}", &svg[..80]);
    assert!(svg.contains(" xmlns=\"http://www.w3.org/2000/svg\""));
    well_formed_xml(&svg).unwrap_or_else(|e| panic!("{e}"));
    // One line per target with handoffs (the plot's only 2-pixel polylines: whiskers are 1,
    // legend samples 3) with a point per measured size, one bar per target with a pipeline
    // time.
    let handoffs = |t: &&TargetBench| {
        t.rows
            .iter()
            .filter(|r| r.measure == Measure::HandoffToPeer)
            .count()
    };
    let with_handoff = all.iter().filter(|t| handoffs(t) > 0).count();
    let lines = svg.matches("stroke-width=\"2\" points=").count();
    // Past the palette's ten colours a target's line is dashed: drawn as many short polylines.
    if with_handoff <= 10 {
        assert_eq!(lines, with_handoff);
    } else {
        assert!(
            lines > with_handoff,
            "{lines} lines for {with_handoff} targets"
        );
    }
    assert_eq!(
        svg.matches("<circle").count(),
        all.iter().map(handoffs).sum::<usize>()
    );
    let with_pipeline = all
        .iter()
        .filter(|t| t.rows.iter().any(|r| r.measure == Measure::Pipeline))
        .count();
    assert_eq!(
        svg.matches("<rect x=").count(),
        1 + with_pipeline,
        "background + bars"
    );
    assert_eq!(
        svg.matches("http").count(),
        1,
        "nothing external, only the SVG namespace"
    );
}

fn a_planted_crash_costs_only_its_path() {
    let pair = host_pair();
    let dir = scratch("crash");
    let (out, report) = bench(&pair, &dir, &["--plant-crash", "use-host-ptr"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a crashing path is a finding, not a bench failure"
    );

    let crashed = target(&report, "use-host-ptr/map");
    match &crashed.outcome {
        Outcome::Crash {
            signal,
            signal_name,
            ..
        } => assert_eq!((*signal, signal_name.as_str()), (11, "SIGSEGV")),
        other => panic!("expected a crash, got {other:?}"),
    }
    assert_eq!(crashed.during.as_deref(), Some("handoff to peer at 16 KiB"));
    // What it measured before it died is kept: the pipeline and the first size.
    assert!(crashed.row(Measure::Pipeline, 8192).is_some());
    assert!(crashed.row(Measure::HandoffToPeer, SIZES[0]).is_some());
    assert!(crashed.row(Measure::HandoffToPeer, SIZES[1]).is_none());
    assert!(stdout.contains("crash SIGSEGV"), "{stdout}");

    for t in targets(&report) {
        if t.target.path() == Some(PathKind::UseHostPtr) {
            continue;
        }
        assert_ne!(t.outcome.kind(), OutcomeKind::Crash, "{}", t.id);
        if t.outcome.kind() == OutcomeKind::Pass && t.problems.is_empty() {
            assert_eq!(
                t.rows.len(),
                expected_rows(t).len(),
                "{} still measured everything",
                t.id
            );
        }
    }
    assert_eq!(target(&report, "copy/finish").outcome, Outcome::pass());
}

fn a_side_that_does_nothing_fails_every_measurement_it_touches() {
    let pair = host_pair();
    // The peer does nothing: no pattern, no scale pass, no upload, no pipeline stage, on any
    // target, the native CPU baseline included.
    let (_, report) = bench(&pair, &scratch("peer-noop"), &["--plant", "peer-noop"]);
    for t in targets(&report) {
        assert_eq!(
            t.outcome.kind(),
            OutcomeKind::Fail,
            "{}: {:?}",
            t.id,
            t.outcome
        );
        assert!(
            t.rows.is_empty(),
            "{}: a time next to wrong data: {:?}",
            t.id,
            t.rows
        );
        let measured: Vec<Measure> = t.problems.iter().filter_map(|p| p.measure).collect();
        for (m, _) in expected_rows(t) {
            assert!(measured.contains(&m), "{}: no failed {m:?}", t.id);
        }
    }
    // OpenCL does nothing: every path fails; what has no OpenCL in it (the native CPU
    // baseline, the scale on the host's own memory) still measures.
    let (_, report) = bench(&pair, &scratch("cl-noop"), &["--plant", "cl-noop"]);
    for t in targets(&report) {
        if t.target == Target::Native {
            assert_eq!(t.outcome, Outcome::pass(), "{}", t.id);
            assert_eq!(t.rows.len(), expected_rows(t).len());
        } else {
            assert_eq!(
                t.outcome.kind(),
                OutcomeKind::Fail,
                "{}: {:?}",
                t.id,
                t.outcome
            );
            let timed: Vec<Measure> = t.rows.iter().map(|r| r.measure).collect();
            assert!(
                timed.iter().all(|&m| m == Measure::ScaleOwn),
                "{}: a time next to OpenCL's wrong data: {timed:?}",
                t.id
            );
        }
    }
}

fn bad_bench_input_is_refused_before_anything_runs() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_clhip"))
            .args(["bench", "interop"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--sizes", "12"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("whole number of complex f32"));
    let out = run(&["--pipeline-len", "1000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("power of two"));
    let out = run(&["--sizes", "1M", "--max-size", "4K"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-size"));
}

/// Checked where a device is listed, so that "matches none" is the filter's doing.
fn an_unknown_target_is_refused() {
    host_pair();
    let out = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["bench", "interop", "no-such-target"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("matches none"));
}

tests!(
    the_xml_check_rejects_what_is_not_xml,
    a_tiny_bench_gives_every_row_a_median_within_its_spread,
    a_planted_crash_costs_only_its_path,
    a_side_that_does_nothing_fails_every_measurement_it_touches,
    bad_bench_input_is_refused_before_anything_runs,
    an_unknown_target_is_refused
);
