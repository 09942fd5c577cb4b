//! The HTML report as a browser renders it. A fixed sample run goes through `clhip report
//! --html -o`, headless Chromium opens the page, and the DOM it dumps is checked: the cells'
//! texts, and their colours as the browser computed them (a probe script, added to a copy of
//! the page, writes each cell's computed background into a `data-bg` attribute). Screenshots of
//! the matrix and of a diff are kept under target/html-report/.
//!
//! Without a `chromium` on PATH the browser tests are reported ignored, unless
//! `CLHIP_REQUIRE_CHROMIUM=1` (CI), where that is a failure.

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use clhip::fingerprint::{ClDeviceFingerprint, Fingerprint, RuntimeFingerprint};
use clhip::model::{
    Api, ApiError, Case, ClDeviceRef, Expectation, Mismatch, Op, Outcome, Pair, PathKind, Peer,
    SyncMode, is_negative_control,
};
use clhip::report::{RunReport, RunStatus, SCHEMA, Summary};
use clhip::runner::{CaseResult, Work};

fn pair(label: &str, peer: Peer) -> Pair {
    Pair {
        opencl: ClDeviceRef {
            platform_index: 0,
            device_index: 0,
            label: label.into(),
        },
        peer,
        install: None,
        cl_gpu: None,
    }
}

fn result(pair: &Pair, path: PathKind, sync: SyncMode, op: Op, n: usize, o: Outcome) -> CaseResult {
    let case = Case {
        pair: pair.clone(),
        path,
        sync,
        op,
        n,
        env: Default::default(),
    };
    let expectation = if is_negative_control(path, sync) {
        Expectation::NegativeControl
    } else {
        Expectation::Unbaselined
    };
    CaseResult::new(case.id(), Work::Case(case), o, expectation, 0.5)
}

fn mismatch(what: &str, max_abs_err: f64, bound: f64, formula: &str) -> Outcome {
    Outcome::mismatch(Mismatch {
        what: what.into(),
        index: 5,
        got: "(0, 0)".into(),
        want: "(0.25, -0.5)".into(),
        count: 12,
        len: 4096,
        max_abs_err,
        max_rel_err: 1.0,
        bound,
        formula: formula.into(),
    })
}

/// A fresh run (no baseline) on a PoCL host pair and a CUDA pair with one cell of each
/// outcome the matrix colours, a negative control, a kernel log and a reason holding `<`.
fn sample_run() -> RunReport {
    let results = sample_results();
    RunReport {
        schema: SCHEMA.into(),
        clhip_version: "0.1.0".into(),
        build: None,
        planted: None,
        started_at: "2026-03-21T13:50:07Z".into(),
        wall_s: 12.5,
        seed: 7,
        command: vec!["clhip".into(), "run".into()],
        fingerprint: Fingerprint {
            opencl: vec![ClDeviceFingerprint {
                label: "pocl0".into(),
                platform_name: "Portable Computing Language".into(),
                platform_version: "OpenCL 3.0 PoCL 5.0".into(),
                device_name: "cpu".into(),
                device_version: "OpenCL 3.0 PoCL".into(),
                driver_version: "5.0".into(),
                uuid: None,
                pci_bus_id: None,
            }],
            runtimes: vec![RuntimeFingerprint {
                api: "cuda".into(),
                status: "loaded".into(),
                library: Some("libcuda.so.1".into()),
                version: Some("13.0".into()),
                devices: Vec::new(),
            }],
            kernel_modules: vec![("nvidia".into(), "580.159.04".into())],
            host_cpu: "Intel(R) Xeon(R) Processor".into(),
            os_kernel: "Linux 6.8.0".into(),
        },
        summary: Summary::of(&results),
        results,
        status: RunStatus::Complete,
        not_run: Vec::new(),
        stale_baseline: Vec::new(),
        broken_vendors: Vec::new(),
        consistency: Default::default(),
        selection: None,
        lost_gpus: Vec::new(),
        worker_starts: None,
        worker_starts_by_kind: Default::default(),
        footprint_isolated: false,
    }
}

fn sample_results() -> Vec<CaseResult> {
    use Op::*;
    use PathKind::*;
    use SyncMode::*;
    let pocl = pair("pocl0", Peer::HOST);
    let cuda = pair(
        "nvidia0",
        Peer {
            api: Api::Cuda,
            ordinal: 0,
        },
    );
    let mut fault = result(
        &cuda,
        ClSvmCoarse,
        Finish,
        Gemm,
        64,
        Outcome::Fault {
            error: ApiError {
                api: Api::Cuda,
                call: "cuStreamSynchronize".into(),
                code: 700,
                name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                detail: String::new(),
            },
        },
    );
    fault.kernel_log = vec![
        "NVRM: Xid (PCI:0000:00:06): 31, pid=902, name=3, MMU Fault: faulted @ 0x7fc6_c8800000"
            .into(),
    ];
    vec![
        result(&pocl, Copy, Finish, Handoff, 64, Outcome::pass()),
        result(&pocl, Copy, Finish, Handoff, 4096, Outcome::pass()),
        result(&pocl, Copy, Finish, Fft, 64, Outcome::pass()),
        result(
            &pocl,
            Copy,
            Finish,
            Fft,
            4096,
            mismatch(
                "fft output read by host",
                4.5e-5,
                1.5e-5,
                "eps_p*||ref||_inf*max(ln N,1) (rocFFT)",
            ),
        ),
        result(
            &pocl,
            Copy,
            None,
            Handoff,
            64,
            mismatch("handoff read by host", 1.0, 0.0, "bit-exact"),
        ),
        result(&pocl, Copy, None, Handoff, 4096, Outcome::pass()),
        result(
            &pocl,
            ClSvmFine,
            Map,
            Handoff,
            64,
            Outcome::unsupported("CL_DEVICE_SVM_CAPABILITIES lacks <fine-grain buffer> & atomics"),
        ),
        fault,
        result(
            &cuda,
            DeviceUseHostPtr,
            Map,
            Handoff,
            64,
            Outcome::Crash {
                signal: 11,
                signal_name: "SIGSEGV".into(),
                stderr_tail: String::new(),
                process: String::new(),
            },
        ),
        result(&cuda, VmmFdClImport, Finish, Fft, 64, Outcome::pass()),
    ]
}

/// The same run on a newer driver: the passing copy fft now refused (a capability gone), the
/// gemm fault now wrong data (silent corruption), the crash fixed.
fn sample_newer_run() -> RunReport {
    let mut r = sample_run();
    for c in &mut r.results {
        if c.id == "pocl0+host/copy/finish/fft/n=64" {
            c.outcome = Outcome::unsupported("clEnqueueNDRangeKernel refused <n=64>");
        } else if c.id == "nvidia0+cuda0/cl-svm-coarse/finish/gemm/n=64" {
            c.outcome = mismatch("gemm C read by OpenCL", 0.7, 5.6e-3, "K*1e-4*sqrt(0.5)");
            c.kernel_log.clear();
        } else if c.id == "nvidia0+cuda0/device+use-host-ptr/map/handoff/n=64" {
            c.outcome = Outcome::pass();
        }
    }
    r.fingerprint.kernel_modules = vec![("nvidia".into(), "590.10".into())];
    r.summary = Summary::of(&r.results);
    r
}

/// Artifacts a person looks at after the test: target/html-report/.
fn artifact_dir() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp");
    let dir = target.join("html-report");
    std::fs::create_dir_all(&dir).expect("creating target/html-report");
    dir
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("html-report-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

fn write_run(path: &Path, run: &RunReport) {
    let text = serde_json::to_string_pretty(run).expect("encoding a sample run");
    std::fs::write(path, text).expect("writing a sample run");
}

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .expect("running clhip")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The sample run rendered by the CLI, as the file a user would open.
fn rendered_sample(dir: &Path) -> PathBuf {
    let run = dir.join("sample.json");
    write_run(&run, &sample_run());
    let html = dir.join("sample.html");
    let o = clhip(&["report", s(&run), "--html", "-o", s(&html)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "with -o, nothing goes to stdout");
    html
}

fn report_and_diff_write_html_through_checked_outputs() {
    let dir = scratch("cli");
    let html = rendered_sample(&dir);
    let text = std::fs::read_to_string(&html).expect("the page");
    assert!(text.starts_with("<!DOCTYPE html>"), "{text}");
    assert!(text.contains("data-cell=\"pocl0+host/copy/finish/fft\""));

    // -o may not overwrite its own input.
    let run = dir.join("sample.json");
    let o = clhip(&["report", s(&run), "--html", "-o", s(&run)]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is the results file"), "{err}");
    assert!(std::fs::read_to_string(&run).unwrap().contains(SCHEMA));

    // One rendering at a time.
    let o = clhip(&["report", s(&run), "--html", "--markdown"]);
    assert_eq!(o.status.code(), Some(2));

    // A diff with regressions writes its page and still exits 1.
    let newer = dir.join("newer.json");
    write_run(&newer, &sample_newer_run());
    let page = dir.join("diff.html");
    let o = clhip(&["diff", s(&run), s(&newer), "--html", "-o", s(&page)]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&page).expect("the diff page");
    assert!(text.contains("2 regressions, 1 fixes"), "{text}");
    let o = clhip(&["diff", s(&run), s(&newer), "--html", "-o", s(&newer)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is the new file"));
}

/// The browser; without it the test is ignored (failed under CLHIP_REQUIRE_CHROMIUM=1).
fn chromium() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|d| [d.join("chromium"), d.join("chromium-browser")])
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        support::ignore(
            "CLHIP_REQUIRE_CHROMIUM",
            "no chromium on PATH (Debian: apt-get install chromium)",
        )
    })
}

/// Runs headless Chromium on a local page with `args`, within a time limit.
fn browse(chromium: &Path, profile: &Path, page: &Path, args: &[&str]) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting chromium");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("waiting for chromium").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium gave no answer within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().expect("chromium's output");
    assert!(
        o.status.success(),
        "chromium {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Added to a copy of the page (the report itself has no script): records what the browser
/// computed for each cell and legend swatch, where --dump-dom shows it.
const PROBE: &str = "<script>\
for (const el of document.querySelectorAll('td.cell, [data-legend]')) {\
  el.setAttribute('data-bg', getComputedStyle(el).backgroundColor);\
}\
document.body.setAttribute('data-probed', 'yes');\
</script>";

/// An element's opening tag and inner markup, from the DOM dump, found by an attribute.
fn element<'d>(dump: &'d str, attr: &str) -> Option<(&'d str, &'d str)> {
    let at = dump.find(attr)?;
    let start = dump[..at].rfind('<')?;
    let open_end = at + dump[at..].find('>')?;
    let name: String = dump[start + 1..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    let close = open_end + dump[open_end..].find(&format!("</{name}>"))?;
    Some((&dump[start..=open_end], &dump[open_end + 1..close]))
}

fn attribute<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    tag[at..].split('"').next()
}

fn text(markup: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in markup.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn rgb(css: &str) -> Option<(u8, u8, u8)> {
    let inner = css.strip_prefix("rgb(")?.strip_suffix(')')?;
    let v: Vec<u8> = inner
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect();
    match v[..] {
        [r, g, b] => Some((r, g, b)),
        _ => None,
    }
}

/// Cells of the sample and what the browser must show in them: text, and the legend entry
/// whose colour they must have.
const EXPECTED: [(&str, &str, &str); 7] = [
    ("pocl0+host/copy/finish/handoff", "pass 2/2", "pass"),
    ("pocl0+host/copy/finish/fft", "fail 1/2 !", "fail"),
    ("pocl0+host/copy/none/handoff", "caught 1/2", "caught"),
    ("pocl0+host/cl-svm-fine/map/handoff", "unsup 1/1", "unsup"),
    (
        "nvidia0+cuda0/cl-svm-coarse/finish/gemm",
        "fault 1/1 !",
        "fault",
    ),
    (
        "nvidia0+cuda0/device+use-host-ptr/map/handoff",
        "crash 1/1 !",
        "crash",
    ),
    (
        "nvidia0+cuda0/vmm-fd+cl-import/finish/fft",
        "pass 1/1",
        "pass",
    ),
];

/// Everything wrong with the rendered matrix, as the DOM dump shows it.
fn check_matrix(dump: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if element(dump, "data-probed=\"yes\"").is_none() {
        return vec!["the probe script did not run: no computed colours".into()];
    }
    let mut legend: BTreeMap<&str, (u8, u8, u8)> = BTreeMap::new();
    for l in [
        "pass", "caught", "fail", "fault", "crash", "timeout", "unsup", "skip", "error",
    ] {
        match element(dump, &format!("data-legend=\"{l}\""))
            .and_then(|(tag, _)| attribute(tag, "data-bg"))
            .and_then(rgb)
        {
            Some(c) => {
                if let Some((other, _)) = legend.iter().find(|(_, x)| **x == c) {
                    problems.push(format!("legend: {l} has the colour of {other}: {c:?}"));
                }
                legend.insert(l, c);
            }
            None => problems.push(format!("legend: no computed colour for {l}")),
        }
    }
    let hue = |l: &str, ok: fn((u8, u8, u8)) -> bool, what: &str| match legend.get(l) {
        Some(c) if !ok(*c) => Some(format!("legend: {l} is {c:?}, not {what}")),
        _ => None,
    };
    problems.extend(
        [
            hue(
                "fail",
                |(r, g, b)| i32::from(r) > i32::from(g) + 40 && i32::from(r) > i32::from(b) + 40,
                "red",
            ),
            hue("pass", |(r, g, b)| g > r && g > b, "green"),
            hue("caught", |(r, g, b)| b > r && b > g, "blue"),
            hue(
                "unsup",
                |(r, g, b)| r.abs_diff(g) < 12 && g.abs_diff(b) < 12,
                "grey",
            ),
        ]
        .into_iter()
        .flatten(),
    );
    for (key, want_text, want_colour) in EXPECTED {
        let Some((tag, inner)) = element(dump, &format!("data-cell=\"{key}\"")) else {
            problems.push(format!("{key}: no cell"));
            continue;
        };
        let worst = element(inner, "class=\"worst\"")
            .map(|(_, w)| text(w))
            .unwrap_or_default();
        if !worst.starts_with(want_text) {
            problems.push(format!("{key}: shows {worst:?}, not {want_text:?}"));
        }
        let got = attribute(tag, "data-bg").and_then(rgb);
        if got.is_none() || got != legend.get(want_colour).copied() {
            problems.push(format!(
                "{key}: coloured {got:?}, but {want_colour} is {:?}",
                legend.get(want_colour)
            ));
        }
    }
    // What hovering shows: the reason, the error against its bound, the kernel log.
    for (key, wanted) in [
        (
            "pocl0+host/copy/finish/fft",
            "worst error 4.500e-5 against bound 1.500e-5 (3.0x the bound)",
        ),
        (
            "nvidia0+cuda0/cl-svm-coarse/finish/gemm",
            "NVRM: Xid (PCI:0000:00:06): 31, pid=902",
        ),
        (
            "pocl0+host/cl-svm-fine/map/handoff",
            "lacks &lt;fine-grain buffer&gt; &amp; atomics",
        ),
    ] {
        let title = element(dump, &format!("data-cell=\"{key}\""))
            .and_then(|(tag, _)| attribute(tag, "title"))
            .unwrap_or_default();
        if !title.contains(wanted) {
            problems.push(format!("{key}: the hover text lacks {wanted:?}: {title:?}"));
        }
    }
    // A reason's `<` stayed text: the browser made no element of it.
    if dump.contains("<fine-grain") {
        problems.push("a reason's `<fine-grain buffer>` became an element".into());
    }
    // Negative controls: no sync, and imported memory without acquire/release.
    for (key, sync) in [
        ("pocl0+host/copy/none/handoff", "none*"),
        ("nvidia0+cuda0/vmm-fd+cl-import/finish/fft", "finish*"),
    ] {
        let row = dump
            .find(&format!("data-cell=\"{key}\""))
            .and_then(|at| dump[..at].rfind("<tr"))
            .map(|start| &dump[start..])
            .and_then(|row| Some(&row[..row.find("</tr>")?]));
        if !row.is_some_and(|row| {
            row.starts_with("<tr class=\"control\">") && text(row).contains(sync)
        }) {
            problems.push(format!(
                "{key}: its row is not marked as a negative control"
            ));
        }
    }
    problems
}

fn chromium_renders_the_matrix_with_its_colours_and_texts() {
    let chromium = chromium();
    let dir = scratch("chromium");
    let artifacts = artifact_dir();
    let html = rendered_sample(&dir);
    let page = std::fs::read_to_string(&html).expect("the page");
    std::fs::copy(&html, artifacts.join("sample.html")).expect("keeping the page");

    let probed = dir.join("probed.html");
    std::fs::write(
        &probed,
        page.replacen("</body>", &format!("{PROBE}</body>"), 1),
    )
    .expect("writing the probed copy");
    let dump = browse(&chromium, &dir.join("profile"), &probed, &["--dump-dom"]);
    std::fs::write(artifacts.join("sample-dom.html"), &dump).expect("keeping the DOM dump");
    assert_eq!(check_matrix(&dump), Vec::<String>::new(), "{dump}");

    // Planted: the fail colour turned green, and the unsupported cell given the pass class.
    // The check sees both.
    let unsup = "class=\"cell o-unsup\" data-cell=\"pocl0+host/cl-svm-fine/map/handoff\"";
    assert!(page.contains(unsup), "{page}");
    let planted = page
        .replacen("</style>", ".o-fail { --c: #8fd19e; }</style>", 1)
        .replacen(
            unsup,
            "class=\"cell o-pass\" data-cell=\"pocl0+host/cl-svm-fine/map/handoff\"",
            1,
        )
        .replacen("</body>", &format!("{PROBE}</body>"), 1);
    std::fs::write(&probed, planted).expect("writing the planted copy");
    let dump = browse(&chromium, &dir.join("profile"), &probed, &["--dump-dom"]);
    let problems = check_matrix(&dump);
    assert!(
        problems.iter().any(|p| p.starts_with("legend: fail is")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("pocl0+host/cl-svm-fine/map/handoff: coloured")),
        "{problems:#?}"
    );

    let shot = artifacts.join("sample.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &chromium,
        &dir.join("profile"),
        &html,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1500",
        ],
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
    println!("screenshot of the matrix: {}", shot.display());
}

fn chromium_renders_a_diff() {
    let chromium = chromium();
    let dir = scratch("chromium-diff");
    let artifacts = artifact_dir();
    let (old, new) = (dir.join("old.json"), dir.join("new.json"));
    write_run(&old, &sample_run());
    write_run(&new, &sample_newer_run());
    let page = artifacts.join("diff.html");
    let o = clhip(&["diff", s(&old), s(&new), "--html", "-o", s(&page)]);
    assert_eq!(o.status.code(), Some(1));
    let dump = browse(&chromium, &dir.join("profile"), &page, &["--dump-dom"]);
    let row = |id: &str| {
        element(&dump, &format!("data-case=\"{id}\""))
            .map(|(tag, inner)| {
                (
                    attribute(tag, "class").unwrap_or("").to_string(),
                    text(inner),
                )
            })
            .unwrap_or_default()
    };
    let (class, cells) = row("pocl0+host/copy/finish/fft/n=64");
    assert_eq!(class, "mv-regression");
    assert!(
        cells.starts_with("!regression")
            && cells.contains("unsup clEnqueueNDRangeKernel refused &lt;n=64&gt;"),
        "{cells}"
    );
    let (class, cells) = row("nvidia0+cuda0/cl-svm-coarse/finish/gemm/n=64");
    assert_eq!(class, "mv-regression");
    assert!(cells.contains("fault cuStreamSynchronize") && cells.contains("fail gemm C read"));
    let (class, _) = row("nvidia0+cuda0/device+use-host-ptr/map/handoff/n=64");
    assert_eq!(class, "mv-fix");
    assert!(
        dump.contains("kernel module nvidia: 590.10"),
        "the fingerprint diff on top"
    );

    let shot = artifacts.join("diff.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &chromium,
        &dir.join("profile"),
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1100",
        ],
    );
    assert!(
        std::fs::read(&shot)
            .expect("the screenshot")
            .starts_with(b"\x89PNG")
    );
    println!("screenshot of the diff: {}", shot.display());
}

tests!(
    report_and_diff_write_html_through_checked_outputs,
    chromium_renders_the_matrix_with_its_colours_and_texts,
    chromium_renders_a_diff
);
