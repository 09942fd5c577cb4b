//! The report's fixtures and its snapshot tests (kept in `report::tests`, which names their
//! snapshot files in snapshots/).

use super::junit::junit_report;
use super::*;
use crate::fingerprint::Fingerprint;
use crate::fingerprint::{ClDeviceFingerprint, RuntimeFingerprint};
use crate::model::{Api, ApiError, Case, ClDeviceRef, Mismatch, Pair, Peer};
use crate::model::{
    Expectation, Op, Outcome, OutcomeKind, PathKind, SyncMode, is_negative_control,
};
use crate::results::MockAction;
use crate::results::{CaseResult, Work};

pub(super) fn pair(label: &str, peer: Peer) -> Pair {
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

pub(super) fn result(
    pair: &Pair,
    path: PathKind,
    sync: SyncMode,
    op: Op,
    n: usize,
    outcome: Outcome,
) -> CaseResult {
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
        Expectation::Pass
    };
    CaseResult::new(case.id(), Work::Case(case), outcome, expectation, 0.25)
}

/// `r` as the same case under an environment variant of `vars`.
pub(super) fn under(mut r: CaseResult, vars: &[(&str, &str)]) -> CaseResult {
    if let Work::Case(case) = &mut r.work {
        case.env = crate::model::EnvVariant::new(vars.iter().copied()).unwrap();
        r.id = case.id();
    }
    r
}

pub(super) fn mismatch(what: &str) -> Outcome {
    Outcome::mismatch(Mismatch {
        what: what.into(),
        index: 3,
        got: "0x00000000".into(),
        want: "0xa5a5a5a5".into(),
        count: 61,
        len: 64,
        max_abs_err: 2.0,
        max_rel_err: 1.0,
        bound: 0.0,
        formula: "bit-exact".into(),
    })
}

pub(super) fn api_error(api: Api, call: &str, code: i64, name: &str) -> ApiError {
    ApiError {
        api,
        call: call.into(),
        code,
        name: name.into(),
        detail: String::new(),
    }
}

/// A run with every kind of outcome, on two pairs, plus mocks.
pub(super) fn sample_results() -> Vec<CaseResult> {
    use Op::*;
    use PathKind::*;
    use SyncMode::*;
    let pocl = pair("pocl0", Peer::HOST);
    let rocm = pair(
        "rocm0",
        Peer {
            api: Api::Hip,
            ordinal: 0,
        },
    );
    let pass = Outcome::pass;
    let mut results = vec![
        result(&pocl, Copy, Finish, Handoff, 64, pass()),
        result(&pocl, Copy, Finish, Handoff, 4096, pass()),
        result(&pocl, Copy, Finish, Fft, 64, pass()),
        result(
            &pocl,
            Copy,
            Finish,
            Fft,
            4096,
            mismatch("fft output read by host"),
        ),
        result(
            &pocl,
            Copy,
            None,
            Handoff,
            64,
            mismatch("handoff read by host"),
        ),
        result(&pocl, Copy, None, Handoff, 4096, pass()),
        result(&pocl, ClSvmFine, Map, Handoff, 64, pass()),
        result(
            &pocl,
            ClSvmFine,
            Map,
            Pipeline,
            64,
            Outcome::Crash {
                signal: 11,
                signal_name: "SIGSEGV".into(),
                stderr_tail: "pocl: mapping\npocl: fatal".into(),
                process: String::new(),
            },
        ),
        result(
            &pocl,
            ClSvmFine,
            Map,
            Pipeline,
            4096,
            Outcome::timeout(60.0),
        ),
        result(
            &pocl,
            UseHostPtr,
            Map,
            Handoff,
            64,
            Outcome::Unsupported {
                reason: "USE_HOST_PTR refused".into(),
                error: Some(api_error(
                    Api::OpenCl,
                    "clCreateBuffer",
                    -38,
                    "CL_INVALID_MEM_OBJECT",
                )),
            },
        ),
        result(
            &rocm,
            ClSvmCoarse,
            Map,
            Gemm,
            256,
            Outcome::Fault {
                error: api_error(
                    Api::Hip,
                    "hipDeviceSynchronize",
                    700,
                    "hipErrorIllegalAddress",
                ),
            },
        ),
        result(&rocm, ClSvmCoarse, Map, Gemm, 1024, pass()),
        result(
            &rocm,
            ClSvmCoarse,
            Map,
            Cholesky,
            256,
            Outcome::Skip {
                reason: "rocSOLVER not loaded".into(),
            },
        ),
    ];
    // A baseline that knows the gemm fault: shown, but accepted.
    results[10].expectation = Expectation::Known(OutcomeKind::Fault);
    // A placement measurement: a pass whose note is the finding.
    results.push(result(
        &rocm,
        ClSvmFine,
        Finish,
        Placement,
        4194304,
        Outcome::Pass {
            note: "scale kernel on 32.0 MiB: shared 18.6 GB/s (3.600 ms/pass), device \
                       memory 1342.2 GB/s (0.050 ms/pass), pinned host memory 25.8 GB/s \
                       (2.600 ms/pass): the shared memory runs at host-memory (PCIe) speed"
                .into(),
        },
    ));
    for (k, action) in [MockAction::Pass, MockAction::Segfault]
        .into_iter()
        .enumerate()
    {
        results.push(CaseResult::new(
            format!("mock/{action}/{k}"),
            Work::Mock(action),
            if action == MockAction::Pass {
                pass()
            } else {
                Outcome::Crash {
                    signal: 11,
                    signal_name: "SIGSEGV".into(),
                    stderr_tail: "mock: writing through 0x8".into(),
                    process: String::new(),
                }
            },
            Expectation::Known(action.expected_kind()),
            0.001,
        ));
    }
    results
}

pub(super) fn sample_report() -> RunReport {
    let results = sample_results();
    RunReport {
        schema: SCHEMA.into(),
        clhip_version: "0.1.0".into(),
        build: Some(crate::build_id::BuildId {
            commit: "b0acdee5f00dfeedc0ffee0123456789abcdef01".into(),
            dirty: Some(false),
        }),
        planted: None,
        started_at: "2026-03-21T13:50:07Z".into(),
        wall_s: 75.5,
        seed: 7,
        command: vec![
            "clhip".into(),
            "run".into(),
            "--filter".into(),
            "svm fine".into(),
        ],
        fingerprint: Fingerprint {
            opencl: vec![ClDeviceFingerprint {
                label: "pocl0".into(),
                platform_name: "Portable Computing Language".into(),
                platform_version: "OpenCL 3.0 PoCL 6.0".into(),
                device_name: "cpu-haswell".into(),
                device_version: "OpenCL 3.0 PoCL".into(),
                driver_version: "6.0".into(),
                uuid: None,
                pci_bus_id: None,
            }],
            runtimes: vec![
                RuntimeFingerprint {
                    api: "hip".into(),
                    status: "loaded".into(),
                    library: Some("libamdhip64.so.6".into()),
                    version: Some("6.3.42133".into()),
                    devices: Vec::new(),
                },
                RuntimeFingerprint {
                    api: "cuda".into(),
                    status: "unsupported: libcuda.so.1 not found".into(),
                    library: None,
                    version: None,
                    devices: Vec::new(),
                },
            ],
            kernel_modules: vec![("amdgpu".into(), "6.10.5".into())],
            host_cpu: "AMD EPYC 7V13".into(),
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

fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    // Relative to this file: the crate's top-level snapshots/.
    s.set_snapshot_path("../../snapshots");
    s
}

#[test]
fn matrix_snapshot() {
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("matrix", render_matrix(&sample_results()));
    });
}

#[test]
fn markdown_snapshot() {
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("markdown", render_markdown(&sample_report()));
    });
}

#[test]
fn junit_snapshot() {
    let xml = junit_report(&sample_report()).to_string().unwrap();
    snapshot_settings().bind(|| insta::assert_snapshot!("junit", xml));
}

#[test]
fn closing_line_counts_every_kind_and_the_unexpected() {
    let summary = Summary::of(&sample_results());
    snapshot_settings().bind(|| insta::assert_snapshot!("closing_line", closing_line(&summary)));
    assert_eq!(summary.total, 16);
    assert_eq!(summary.count(OutcomeKind::Crash), 2);
    // fft mismatch, svm crash, svm timeout, and (the sample expects a baseline's passes)
    // the refusal and the skip of cases the baseline's driver passed; not the negative
    // control, the known fault or the mock crash.
    assert_eq!(summary.unexpected, 5);
    assert_eq!(summary.caught, 1);
    assert_eq!(summary.fail, 1);
}

/// Two runs of the sample that differ in every way a diff tells apart: pass -> unsupported (a
/// capability gone) and fault -> fail (a refusal become corruption) are regressions; a fail
/// that passes is a fix; crash -> fault is a change; a negative control's stale read that
/// passes is a race; one case only the old run has, one only the new; another HIP.
pub(super) fn sample_diff_runs() -> (RunReport, RunReport) {
    let old = sample_report();
    let mut new = sample_report();
    let pocl = pair("pocl0", Peer::HOST);
    let find = |new: &mut RunReport, id: &str| -> usize {
        new.results
            .iter()
            .position(|r| r.id == id)
            .unwrap_or_else(|| panic!("the sample has no {id}"))
    };
    let set = |new: &mut RunReport, id: &str, outcome: Outcome| {
        let i = find(new, id);
        new.results[i].outcome = outcome;
    };
    set(
        &mut new,
        "pocl0+host/copy/finish/handoff/n=64",
        Outcome::unsupported("clCreateBuffer: size < 1 page refused <since 7.0>"),
    );
    set(
        &mut new,
        "rocm0+hip0/cl-svm-coarse/map/gemm/n=256",
        mismatch("gemm result read by OpenCL"),
    );
    set(
        &mut new,
        "pocl0+host/copy/finish/fft/n=4096",
        Outcome::pass(),
    );
    set(
        &mut new,
        "pocl0+host/cl-svm-fine/map/pipeline/n=64",
        Outcome::Fault {
            error: api_error(Api::OpenCl, "clFinish", -5, "CL_OUT_OF_RESOURCES"),
        },
    );
    set(
        &mut new,
        "pocl0+host/copy/none/handoff/n=64",
        Outcome::pass(),
    );
    let gone = find(&mut new, "pocl0+host/use-host-ptr/map/handoff/n=64");
    new.results.remove(gone);
    new.results.push(result(
        &pocl,
        PathKind::ClSvmCoarse,
        SyncMode::Finish,
        Op::Handoff,
        64,
        Outcome::pass(),
    ));
    new.fingerprint.runtimes[0].version = Some("7.0.51831".into());
    new.fingerprint.runtimes[0].library = Some("libamdhip64.so.7".into());
    new.started_at = "2026-03-22T09:12:44Z".into();
    new.summary = Summary::of(&new.results);
    (old, new)
}

/// The part of `page` from `start` to the end of its element `tag`.
fn element<'p>(page: &'p str, start: &str, tag: &str) -> &'p str {
    let at = page.find(start).unwrap_or_else(|| panic!("no {start}"));
    let end = page[at..].find(&format!("</{tag}>")).unwrap();
    &page[at..at + end]
}

#[test]
fn the_html_page_is_titled_by_its_run_lists_what_needs_a_look_first_and_indexes_its_pairs() {
    let mut report = sample_report();
    // One known fault: its cell is marked expected, not unexpected.
    let known = report
        .results
        .iter_mut()
        .find(|r| r.outcome.kind() == OutcomeKind::Fault && r.work.case().is_some())
        .expect("a fault in the sample");
    known.expectation = Expectation::Known(OutcomeKind::Fault);
    let known_id = known.id.clone();
    report.summary = Summary::of(&report.results);
    let page = render_html(&report, &[]);
    assert!(
        page.contains(&format!(
            "<title>clhip: pocl0+host, rocm0+hip0: {} ({})</title>",
            closing_line(&report.summary)
                .replace('&', "&amp;")
                .replace('<', "&lt;"),
            report.started_at
        )),
        "{}",
        element(&page, "<title>", "title")
    );
    // Needs a look: exactly the unexpected outcomes and unexpected passes, before any matrix.
    let look = element(&page, "<section class=\"look\"", "section");
    let wanted: Vec<&str> = report
        .results
        .iter()
        .filter(|r| r.unexpected() || r.verdict() == crate::model::Verdict::UnexpectedPass)
        .map(|r| r.id.as_str())
        .collect();
    assert!(!wanted.is_empty());
    assert_eq!(look.matches("<li>").count(), wanted.len(), "{look}");
    for id in &wanted {
        assert!(look.contains(&format!("<code>{id}</code>")), "{id}: {look}");
    }
    assert!(!look.contains(&known_id), "{look}");
    assert!(page.find("class=\"look\"").unwrap() < page.find("class=\"pair\"").unwrap());
    // The index links every pair's section.
    let index = element(&page, "<nav class=\"pairs\"", "nav");
    for pair in ["pocl0+host", "rocm0+hip0"] {
        assert!(index.contains(&format!("href=\"#pair-{pair}\"")), "{index}");
        assert!(page.contains(&format!("id=\"pair-{pair}\"")), "{pair}");
    }
    // The known fault's cell is drawn as expected; a new one's is not.
    let cell = |id: &str| {
        let case = report.results.iter().find(|r| r.id == id).unwrap();
        let c = case.work.case().unwrap();
        let key = format!("{}/{}/{}/{}", c.pair.id(), c.path, c.sync, c.op);
        let at = page.find(&format!("data-cell=\"{key}\"")).unwrap();
        let open = page[..at].rfind("<td").unwrap();
        page[open..at].to_string()
    };
    assert!(cell(&known_id).contains(" expected"), "{}", cell(&known_id));
    assert!(
        !cell(&known_id).contains("unexpected"),
        "{}",
        cell(&known_id)
    );
    for id in wanted.iter().filter(|id| !id.starts_with("mock/")) {
        assert!(!cell(id).contains(" expected"), "{id}: {}", cell(id));
    }
}

#[test]
fn html_snapshot() {
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("html", render_html(&sample_report(), &[]));
    });
}

#[test]
fn diff_snapshots_terminal_markdown_html() {
    let (old, new) = sample_diff_runs();
    let d = diff(&old, &new);
    // What the sample is built to show, so that the snapshots show it.
    for (movement, count) in [
        (Movement::Regression, 2),
        (Movement::Fix, 1),
        (Movement::Change, 1),
        (Movement::New, 1),
        (Movement::Removed, 1),
        (Movement::Race, 1),
    ] {
        assert_eq!(d.count(movement), count, "{movement:?}");
    }
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("diff_terminal", render_diff(&d));
        insta::assert_snapshot!("diff_markdown", render_diff_markdown(&d));
        insta::assert_snapshot!(
            "diff_html",
            render_diff_html(&d, ("old.json", &old), ("new.json", &new))
        );
    });
}

/// One MI100 under two ROCm installs (a host pair beside it), with every kind of agreement: the
/// same outcome, a differing one (a fault gone, a pass become a fail), a case one install did
/// not run, and a negative control that raced.
pub(super) fn two_install_results() -> Vec<CaseResult> {
    use Op::*;
    use PathKind::*;
    use SyncMode::*;
    let hip0 = Peer {
        api: Api::Hip,
        ordinal: 0,
    };
    let on = |install: &str| Pair {
        install: Some(install.into()),
        ..pair("rocm0", hip0.clone())
    };
    let (old, new) = (on("6.3.2"), on("7.0.0"));
    let host = pair("rocm0", Peer::HOST);
    let pass = Outcome::pass;
    let unsupported = || Outcome::unsupported("ROCm's OpenCL has no cl_khr_external_memory");
    let crash = || Outcome::Crash {
        signal: 11,
        signal_name: "SIGSEGV".into(),
        stderr_tail: String::new(),
        process: String::new(),
    };
    let fault = || Outcome::Fault {
        error: api_error(
            Api::Hip,
            "hipDeviceSynchronize",
            700,
            "hipErrorIllegalAddress",
        ),
    };
    let mut results = vec![result(&host, Copy, Finish, Handoff, 64, pass())];
    for (p, gemm_256, fft_4096, stale) in [
        (
            &old,
            fault(),
            pass(),
            mismatch("handoff read by hip@6.3.2:0"),
        ),
        (
            &new,
            pass(),
            mismatch("fft output read by hip@7.0.0:0"),
            pass(),
        ),
    ] {
        results.extend([
            result(p, Copy, Finish, Handoff, 64, pass()),
            result(p, Copy, Finish, Handoff, 4096, pass()),
            result(p, Copy, None, Handoff, 64, stale),
            result(p, ClSvmCoarse, Map, Gemm, 256, gemm_256),
            result(p, ClSvmCoarse, Map, Gemm, 1024, pass()),
            result(p, ClSvmFine, Finish, Fft, 4096, fft_4096),
            result(p, DeviceUseHostPtr, Map, Handoff, 64, crash()),
            result(p, VmmFdClImport, AcquireRelease, Handoff, 64, unsupported()),
        ]);
    }
    // Only the old install's run got to it.
    results.push(result(
        &old,
        ClDmabufHipImport,
        Finish,
        Handoff,
        64,
        Outcome::unsupported("hsa_amd_portable_export_dmabuf returned 4096"),
    ));
    results
}

#[test]
fn install_comparison_snapshots() {
    let results = two_install_results();
    let mut report = sample_report();
    report.summary = Summary::of(&results);
    report.results = results.clone();
    report.command = ["clhip", "run", "rocm0", "--rocm-path", "/opt/rocm-6.3.2"]
        .into_iter()
        .chain(["--rocm-path", "/opt/rocm-7.0.0"])
        .map(String::from)
        .collect();
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("install_comparison", render_matrix(&results));
        insta::assert_snapshot!("install_comparison_markdown", render_markdown(&report));
    });
    // The HTML page carries the same comparison: one column per install, the differing rows
    // marked, each differing case with both installs' outcomes; a one-install page has none.
    let page = render_html(&report, &[]);
    assert!(
        page.contains("Across ROCm installs: <code>rocm0+hip@*:0</code>"),
        "{page}"
    );
    assert!(page.contains("<th>hip@6.3.2</th><th>hip@7.0.0</th>"));
    assert!(page.contains("<tr><td>&gt;</td><td>cl-svm-fine</td>"));
    assert!(page.contains("<li><code>cl-svm-fine/finish/fft/n=4096</code>: hip@6.3.2:"));
    assert!(!render_html(&sample_report(), &[]).contains("Across ROCm installs"));
}

#[test]
fn installs_are_compared_case_by_case_and_a_planted_difference_is_marked() {
    use super::matrix::{Agreement, compare_installs};
    let results = two_install_results();
    let c = compare_installs(&results);
    assert_eq!(
        c.len(),
        1,
        "one GPU, two installs; the host pair is not compared"
    );
    let c = &c[0];
    assert_eq!(c.pairs, "rocm0+hip@*:0");
    assert_eq!(c.installs, ["hip@6.3.2", "hip@7.0.0"]);
    let differing: Vec<&str> = c
        .cases
        .iter()
        .filter(|k| k.agreement == Agreement::Differs)
        .map(|k| k.case.as_str())
        .collect();
    assert_eq!(
        differing,
        [
            "cl-svm-coarse/map/gemm/n=256",
            "cl-svm-fine/finish/fft/n=4096",
            "cl-dmabuf+hip-import/finish/handoff/n=64",
        ]
    );
    assert_eq!((c.count(Agreement::Race), c.cases.len()), (1, 9));

    // The same outcomes under both installs: nothing is marked. Then one planted change is.
    let same: Vec<CaseResult> = results
        .iter()
        .filter(|r| r.id.starts_with("rocm0+hip@6.3.2:0/"))
        .flat_map(|r| {
            let mut twin = r.clone();
            if let Work::Case(case) = &mut twin.work {
                case.pair.install = Some("7.0.0".into());
                twin.id = case.id();
            }
            [r.clone(), twin]
        })
        .collect();
    let quiet = &compare_installs(&same)[0];
    assert_eq!(
        quiet.count(Agreement::Differs) + quiet.count(Agreement::Race),
        0
    );
    assert!(
        quiet.rows.iter().all(|r| r.agreement == Agreement::Same),
        "{}",
        render_matrix(&same)
    );
    let mut planted = same.clone();
    let victim = planted
        .iter_mut()
        .find(|r| r.id == "rocm0+hip@7.0.0:0/copy/finish/handoff/n=4096")
        .expect("the case to plant in");
    victim.outcome = mismatch("handoff read by hip@7.0.0:0");
    let caught = &compare_installs(&planted)[0];
    let marked: Vec<&str> = caught
        .cases
        .iter()
        .filter(|k| k.agreement == Agreement::Differs)
        .map(|k| k.case.as_str())
        .collect();
    assert_eq!(marked, ["copy/finish/handoff/n=4096"]);
    let text = render_matrix(&planted);
    assert!(
        text.contains("    copy/finish/handoff/n=4096: hip@6.3.2 pass, hip@7.0.0 fail"),
        "{text}"
    );
    // A run of one install has no comparison at all.
    assert!(compare_installs(&sample_results()).is_empty());
    assert!(!render_markdown(&sample_report()).contains("Across ROCm installs"));
}

#[test]
fn the_markdown_lists_the_largest_footprints_and_absent_is_not_zero() {
    let host = pair("pocl0", Peer::HOST);
    let c = |n| {
        result(
            &host,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Fft,
            n,
            Outcome::pass(),
        )
    };
    let mut small = c(64);
    small.footprint = Some(crate::footprint::Footprint {
        host_before: 100 << 20,
        host_peak: Some(101 << 20),
        device_before: None,
        device_after_setup: None,
    });
    let mut big = c(4096);
    big.footprint = Some(crate::footprint::Footprint {
        host_before: 100 << 20,
        host_peak: Some(164 << 20),
        device_before: None,
        device_after_setup: None,
    });
    let mut report = sample_report();
    report.results = vec![small, big, c(128)];
    let md = render_markdown(&report);
    let table = md
        .split("## Footprint")
        .nth(1)
        .expect("a footprint section");
    assert!(table.contains("The 2 of 2 measured cases"), "{table}");
    let first = table.find("n=4096").unwrap();
    let second = table.find("n=64").unwrap();
    assert!(first < second, "largest first: {table}");
    assert!(
        table.contains("| `pocl0+host/copy/finish/fft/n=4096` | 64.0 MiB | 164.0 MiB | - | - |"),
        "{table}"
    );
    // Nothing measured: no section.
    report.results = vec![c(128)];
    assert!(!render_markdown(&report).contains("## Footprint"));
}

#[test]
fn a_variants_cases_get_a_table_of_their_own() {
    let hip = pair(
        "rocm0",
        Peer {
            api: Api::Hip,
            ordinal: 0,
        },
    );
    let plain = result(
        &hip,
        PathKind::Copy,
        SyncMode::Finish,
        Op::Handoff,
        4097,
        Outcome::pass(),
    );
    let sdma = under(
        result(
            &hip,
            PathKind::Copy,
            SyncMode::Finish,
            Op::Handoff,
            4097,
            mismatch("x"),
        ),
        &[("HSA_ENABLE_SDMA", "0")],
    );
    let text = render_matrix(&[plain, sdma]);
    let tables: Vec<&str> = text.lines().filter(|l| l.starts_with("rocm0")).collect();
    assert_eq!(
        tables,
        ["rocm0+hip0", "rocm0+hip0 env:HSA_ENABLE_SDMA=0"],
        "{text}"
    );
    // The variant's fail is its own table's, not the plain table's worst outcome.
    let plain_table = text.split("rocm0+hip0 env:").next().unwrap();
    assert!(!plain_table.contains("fail"), "{text}");
}
