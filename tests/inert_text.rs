//! Text from drivers and results files is inert wherever clhip writes it: a results file whose
//! reasons, kernel log and fingerprint hold terminal escapes, OSC 8 links, bidi overrides and
//! HTML goes through `clhip report` and `clhip diff` to the terminal, Markdown and HTML, and
//! none of it arrives as itself; an SVG figure that would load from the network is refused,
//! naming the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

use clhip::fingerprint::Fingerprint;
use clhip::model::{Case, ClDeviceRef, Expectation, Op, Outcome, Pair, PathKind, Peer, SyncMode};
use clhip::report::RunReport;
use clhip::results::MockAction;
use clhip::runner::{CaseResult, Work};

/// A screen clear, an OSC 8 hyperlink, a carriage return, a C1 CSI, a bidi override, and HTML.
const HOSTILE: &str = "refused\x1b[2J\x1b]8;;https://x.example/\x07link\x1b]8;;\x07\r\u{9b}31m\u{202e}desrever <script>alert(1)</script> | `x`";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-inert-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn clhip(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .unwrap()
}

fn case(label: &str, op: Op, outcome: Outcome, kernel_log: &[&str]) -> CaseResult {
    let case = Case {
        pair: Pair {
            opencl: ClDeviceRef {
                platform_index: 0,
                device_index: 0,
                label: label.into(),
            },
            peer: Peer::HOST,
            install: None,
            cl_gpu: None,
        },
        path: PathKind::Copy,
        sync: SyncMode::Finish,
        op,
        n: 64,
        env: Default::default(),
    };
    let mut r = CaseResult::new(
        case.id(),
        Work::Case(case),
        outcome,
        Expectation::Unbaselined,
        0.5,
    );
    r.kernel_log = kernel_log.iter().map(|l| l.to_string()).collect();
    r
}

/// A run on a pocl pair and a pair whose label holds Markdown; `hostile` makes the first case
/// an unsupported whose reason, kernel log and fingerprint hold the hostile text (else a pass).
fn run(hostile: bool) -> RunReport {
    let (reason, log, kernel) = if hostile {
        (
            Outcome::unsupported(HOSTILE),
            vec!["amdgpu: fault\x1b[31m<blink>"],
            "Linux\x1b[2J",
        )
    } else {
        (Outcome::pass(), vec![], "Linux 6.8")
    };
    let results = vec![
        case("pocl0", Op::Fft, reason, &log),
        case("evil`|0", Op::Handoff, Outcome::pass(), &[]),
    ];
    let fingerprint = Fingerprint {
        os_kernel: kernel.into(),
        ..Fingerprint::default()
    };
    let mut r = RunReport::new(
        7,
        vec!["clhip".into(), "run".into()],
        fingerprint,
        SystemTime::UNIX_EPOCH,
        1.0,
        results,
    );
    if hostile {
        // Said on stderr by `report`.
        r.stale_baseline = vec!["pocl0+host/\x1b[2J".into()];
    }
    r
}

fn write(dir: &Path, name: &str, r: &RunReport) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(r).unwrap()).unwrap();
    path
}

/// Control characters other than line breaks, as they reached the output.
fn raw_controls(bytes: &[u8]) -> Vec<char> {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|&c| clhip::escape::is_control(c) && c != '\n')
        .collect()
}

fn ran(o: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_terminal_sees_a_drivers_control_characters_as_text() {
    let dir = scratch("terminal");
    let hostile = write(&dir, "hostile.json", &run(true));
    let clean = write(&dir, "clean.json", &run(false));
    for args in [
        vec![Path::new("report"), &hostile],
        vec![Path::new("diff"), &clean, &hostile],
    ] {
        let o = clhip(&args);
        assert_ne!(o.status.code(), Some(2), "{}", ran(&o));
        assert_eq!(raw_controls(&o.stdout), Vec::<char>::new(), "{}", ran(&o));
        assert_eq!(raw_controls(&o.stderr), Vec::<char>::new(), "{}", ran(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(r"refused\x1b[2J\x1b]8;;https://x.example/\x07link"),
            "{out}"
        );
    }
    let o = clhip(&[Path::new("report"), &hostile]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(r"baseline entry `pocl0+host/\x1b[2J`"),
        "{err}"
    );
}

#[test]
fn an_error_that_quotes_a_file_shows_its_control_characters_as_text() {
    let dir = scratch("error");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"schema": "clhip\u001b[2J\u202e"}"#).unwrap();
    let o = clhip(&[Path::new("report"), &bad]);
    assert_eq!(o.status.code(), Some(2), "{}", ran(&o));
    assert_eq!(raw_controls(&o.stderr), Vec::<char>::new(), "{}", ran(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(r"schema `clhip\x1b[2J\u{202e}`"), "{err}");
}

#[test]
fn markdown_and_html_hold_a_drivers_text_as_text() {
    let dir = scratch("pages");
    let hostile = write(&dir, "hostile.json", &run(true));
    let clean = write(&dir, "clean.json", &run(false));
    let report = Path::new("report");
    let diff = Path::new("diff");
    let (md, html) = (Path::new("--markdown"), Path::new("--html"));
    for args in [
        vec![report, &hostile, md],
        vec![report, &hostile, html],
        vec![diff, &clean, &hostile, md],
        vec![diff, &clean, &hostile, html],
    ] {
        let o = clhip(&args);
        assert_ne!(o.status.code(), Some(2), "{}", ran(&o));
        let page = String::from_utf8_lossy(&o.stdout).to_ascii_lowercase();
        assert!(page.contains("alert(1)"), "{}", ran(&o));
        for markup in ["<script", "<blink"] {
            assert!(!page.contains(markup), "{markup}: {}", ran(&o));
        }
        assert_eq!(raw_controls(&o.stdout), Vec::<char>::new(), "{}", ran(&o));
    }
}

/// A results file whose case ids are markup: a pair label `<script>…</script>` (its ids, its
/// matrix's heading, cells and notes) and a mock whose id is a `<script>` element.
fn run_with_markup_ids() -> RunReport {
    let mut results = run(false).results;
    results.push(case(
        "<script>alert(2)</script>",
        Op::Fft,
        Outcome::unsupported("refused"),
        &[],
    ));
    results.push(CaseResult::new(
        "<script>alert(3)</script>".into(),
        Work::Mock(MockAction::Fail),
        Outcome::unsupported("mock"),
        Expectation::Unbaselined,
        0.1,
    ));
    RunReport::new(
        7,
        vec!["clhip".into(), "run".into()],
        Fingerprint::default(),
        SystemTime::UNIX_EPOCH,
        1.0,
        results,
    )
}

#[test]
fn a_case_id_that_is_markup_is_rendered_inert() {
    let dir = scratch("case-id");
    let clean = write(&dir, "clean.json", &run(false));
    let hostile = write(&dir, "hostile.json", &run_with_markup_ids());
    let (report, diff, html) = (Path::new("report"), Path::new("diff"), Path::new("--html"));
    for (args, ids) in [
        (vec![report, &hostile, html], &["alert(2)", "alert(3)"][..]),
        (
            vec![diff, &clean, &hostile, html],
            &["alert(2)", "alert(3)"][..],
        ),
    ] {
        let o = clhip(&args);
        assert_ne!(o.status.code(), Some(2), "{}", ran(&o));
        let page = String::from_utf8_lossy(&o.stdout);
        for id in ids {
            // The id is on the page, as text.
            assert!(
                page.contains(&format!("&lt;script&gt;{id}&lt;/script&gt;")),
                "{id}: {}",
                ran(&o)
            );
        }
        assert!(
            !page.to_ascii_lowercase().contains("<script"),
            "{}",
            ran(&o)
        );
    }
}

#[test]
fn a_figure_that_reaches_outside_is_refused_naming_the_file() {
    let dir = scratch("figure");
    let results = write(&dir, "run.json", &run(false));
    let page = dir.join("page.html");
    let figure = dir.join("plot.svg");
    for svg in [
        "<svg xmlns=\"http://www.w3.org/2000/svg\">\n<image xlink:href = \"https://x.example/a.png\"/>\n</svg>",
        "<svg>\n<style>rect { fill: url( https://x.example/p ) }</style>\n</svg>",
        "<svg>\n<rect fill=\"url( https://x.example/p )\"/>\n</svg>",
        "<svg>\n<rect ONLOAD = \"f()\"/>\n</svg>",
    ] {
        std::fs::write(&figure, svg).unwrap();
        let o = clhip(&[
            Path::new("report"),
            &results,
            Path::new("--html"),
            Path::new("--figure"),
            &figure,
            Path::new("-o"),
            &page,
        ]);
        assert_eq!(o.status.code(), Some(2), "{svg}: {}", ran(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}: line 2:", figure.display())),
            "{svg}: {err}"
        );
        assert!(!page.exists(), "{svg}: the page was written");
    }
    std::fs::write(
        &figure,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\"><rect width=\"1\" height=\"1\" fill=\"#1f77b4\"/></svg>",
    )
    .unwrap();
    let o = clhip(&[
        Path::new("report"),
        &results,
        Path::new("--html"),
        Path::new("--figure"),
        &figure,
        Path::new("-o"),
        &page,
    ]);
    assert!(o.status.success(), "{}", ran(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\"><rect width=\"1\" height=\"1\" fill=\"#1f77b4\"/></svg>"
    ));
}
