use super::super::diff::diff;
use super::super::tests::{pair, result, sample_diff_runs, sample_report};
use super::*;
use crate::model::{Mismatch, Op, PathKind, Peer, SyncMode};

#[test]
fn text_in_the_template_is_never_markup_nor_a_control_character() {
    let text = "<a href=\"x\">'&'</a>\x1b[2J\nb";
    let page = maud::html! { p title=(shown(text)) { (shown(text)) } }.into_string();
    let inert = r#"&lt;a href=&quot;x&quot;&gt;'&amp;'&lt;/a&gt;\x1b[2J"#;
    assert_eq!(page, format!("<p title=\"{inert}\nb\">{inert}\nb</p>"));
}

/// Anything that would make the page fetch or run something from outside the file.
fn outside_references(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut found: Vec<String> = [
        "<script",
        "<link",
        "<img",
        "<iframe",
        "<object",
        "<embed",
        "src=",
        "url(",
        "@import",
        "@font-face",
    ]
    .iter()
    .filter(|needle| lower.contains(*needle))
    .map(|needle| needle.to_string())
    .collect();
    found.extend(
        lower
            .match_indices("href=\"")
            .map(|(at, _)| &lower[at + 6..])
            .filter(|rest| !rest.starts_with('#'))
            .map(|rest| format!("href to {}", rest.split('"').next().unwrap_or(""))),
    );
    found
}

#[test]
fn the_pages_are_self_contained() {
    let (old, new) = sample_diff_runs();
    let d = diff(&old, &new);
    for html in [
        render_html(&sample_report(), &[]),
        render_diff_html(&d, ("old.json", &old), ("new.json", &new)),
    ] {
        assert_eq!(outside_references(&html), Vec::<String>::new());
        // Planted: a web font, a script and an outside link are each seen.
        let planted = html
            .replacen(
                "<style>",
                "<link rel=\"stylesheet\" href=\"https://fonts.example/x.css\"><style>",
                1,
            )
            .replacen("</body>", "<script>1</script></body>", 1);
        let found = outside_references(&planted);
        assert!(found.contains(&"<link".to_string()), "{found:?}");
        assert!(found.contains(&"<script".to_string()), "{found:?}");
        assert!(
            found.contains(&"href to https://fonts.example/x.css".to_string()),
            "{found:?}"
        );
    }
}

const HOSTILE: &str = "<script>alert(1)</script>";

/// Hostile text that reached the page as markup instead of as text.
fn leaked(html: &str) -> bool {
    html.contains(HOSTILE) || html.contains("<b>label") || html.contains("\"><i>")
}

#[test]
fn strings_from_a_results_file_are_text_never_markup() {
    let mut report = sample_report();
    report.results[0].outcome = Outcome::unsupported(format!("refused {HOSTILE} & more"));
    report.results[0].kernel_log = vec![format!("Code: 89 4c <8b> 16 {HOSTILE}")];
    // A pair label goes into an attribute (`data-cell`) and a heading.
    let mut hostile = report.results[1].clone();
    if let crate::results::Work::Case(case) = &mut hostile.work {
        case.pair.opencl.label = "\"><i>x<b>label".into();
        hostile.id = case.id();
    }
    report.results.push(hostile);
    let (old, mut new) = sample_diff_runs();
    new.results[0].outcome = Outcome::unsupported(HOSTILE);
    for html in [
        render_html(&report, &[format!("{HOSTILE}: inconsistent")]),
        render_diff_html(&diff(&old, &new), ("old.json", &old), ("<b>label", &new)),
    ] {
        assert!(!leaked(&html), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        // Planted: the same page with one escape undone is caught.
        let planted = html.replacen("&lt;script&gt;alert(1)&lt;/script&gt;", HOSTILE, 1);
        assert!(leaked(&planted));
    }
    let html = render_html(&report, &[]);
    assert!(
        html.contains("Code: 89 4c &lt;8b&gt; 16"),
        "kernel log escaped"
    );
    assert!(html.contains("data-cell=\"&quot;&gt;&lt;i&gt;x&lt;b&gt;label+host/"));
}

/// Note references with no note, and notes no cell refers to.
fn dangling_notes(html: &str) -> Vec<String> {
    let refs: Vec<&str> = html
        .match_indices("href=\"#note-")
        .map(|(at, _)| html[at + 12..].split('"').next().unwrap_or(""))
        .collect();
    let ids: Vec<&str> = html
        .match_indices("id=\"note-")
        .map(|(at, _)| html[at + 9..].split('"').next().unwrap_or(""))
        .collect();
    let mut out: Vec<String> = refs
        .iter()
        .filter(|r| !ids.contains(r))
        .map(|r| format!("#note-{r} has no note"))
        .collect();
    out.extend(
        ids.iter()
            .filter(|i| !refs.contains(i))
            .map(|i| format!("note-{i} has no reference")),
    );
    out
}

/// The opening tag and text of the cell `key` (pair/path/sync/op).
fn cell<'h>(html: &'h str, key: &str) -> &'h str {
    let at = html
        .find(&format!("data-cell=\"{key}\""))
        .unwrap_or_else(|| panic!("no cell {key}"));
    let start = html[..at].rfind("<td").expect("a cell opens with <td");
    let end = at + html[at..].find("</td>").expect("a cell closes");
    &html[start..end]
}

#[test]
fn a_cell_carries_its_outcome_its_note_its_bound_and_its_kernel_log() {
    let mut report = sample_report();
    let p = pair(
        "nvidia0",
        Peer {
            api: crate::model::Api::Cuda,
            ordinal: 0,
        },
    );
    let fft = |n: usize, max_abs_err: f64| {
        result(
            &p,
            PathKind::ClSvmCoarseMemcpy,
            SyncMode::Finish,
            Op::Fft,
            n,
            Outcome::mismatch(Mismatch {
                what: "fft output read by CUDA".into(),
                index: 0,
                got: "(0, 0)".into(),
                want: "(0.25, -0.5)".into(),
                count: n,
                len: n,
                max_abs_err,
                max_rel_err: 1.0,
                bound: 1.5e-5,
                formula: "eps_p*||ref||_inf*max(ln N,1) (rocFFT)".into(),
            }),
        )
    };
    report.results.push(fft(64, 4.5e-5));
    let mut faulted = fft(4096, 0.0);
    faulted.outcome = Outcome::Fault {
        error: super::super::tests::api_error(
            crate::model::Api::Cuda,
            "cuStreamSynchronize",
            700,
            "CUDA_ERROR_ILLEGAL_ADDRESS",
        ),
    };
    faulted.kernel_log = vec![
        "NVRM: Xid (PCI:0000:00:06): 31, pid=902, MMU Fault".into(),
        "Cannot map memory with base addr 0x7fa828000000".into(),
    ];
    report.results.push(faulted);
    let html = render_html(&report, &[]);

    let fail = cell(&html, "pocl0+host/copy/finish/fft");
    assert!(
        fail.starts_with("<td class=\"cell o-fail unexpected\""),
        "{fail}"
    );
    assert!(fail.contains(">fail 1/2 !"), "{fail}");
    let caught = cell(&html, "pocl0+host/copy/none/handoff");
    assert!(caught.contains("class=\"cell o-caught\""), "{caught}");
    assert!(
        html.contains("<tr class=\"control\"><th><code>copy</code></th><th><code>none</code><abbr")
    );

    let gpu = cell(&html, "nvidia0+cuda0/cl-svm-coarse+memcpy/finish/fft");
    assert!(
        gpu.contains("fail 1/2 !"),
        "the fail outranks the fault: {gpu}"
    );
    for wanted in [
        "worst error 4.500e-5 against bound 1.500e-5 (3.0x the bound)",
        "NVRM: Xid (PCI:0000:00:06): 31, pid=902, MMU Fault",
        // The hover text keeps its line breaks: a tooltip shows them as lines.
        "\n    Cannot map memory with base addr 0x7fa828000000",
    ] {
        assert!(gpu.contains(wanted), "hover text lacks {wanted}: {gpu}");
    }
    let note = gpu
        .split("href=\"#note-")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the cell refers to a note");
    let body = &html[html
        .find(&format!("<li id=\"note-{note}\">"))
        .expect("the note")..];
    let body = &body[..body.find("</li>").expect("the note ends")];
    assert!(body.contains("3.0x the bound"), "{body}");
    assert!(body.contains(
        "<pre class=\"kmsg\">NVRM: Xid (PCI:0000:00:06): 31, pid=902, MMU Fault\nCannot map"
    ));

    assert_eq!(dangling_notes(&html), Vec::<String>::new());
    let planted = html.replacen("<li id=\"note-2\">", "<li>", 1);
    assert_eq!(dangling_notes(&planted), ["#note-2 has no note"]);
}

#[test]
fn a_file_that_is_not_a_whole_run_says_so_on_the_page() {
    let mut report = sample_report();
    assert!(!render_html(&report, &[]).contains("class=\"problems\""));
    report.status = RunStatus::Interrupted;
    report.not_run = vec!["pocl0+host/copy/map/fft/n=64".into()];
    let html = render_html(&report, &["run.json: incomplete: interrupted".into()]);
    assert!(html.contains("<div class=\"problems\">"), "{html}");
    assert!(html.contains("<li>run.json: incomplete: interrupted</li>"));
    assert!(html.contains("incomplete: interrupted (1 cases not run)"));
}

#[test]
fn sizes_that_tell_one_story_share_one_entry() {
    let p = pair("pocl0", Peer::HOST);
    let refused = |n| {
        result(
            &p,
            PathKind::ClSvmFine,
            SyncMode::Map,
            Op::Fft,
            n,
            Outcome::unsupported("no fine-grain buffer SVM"),
        )
    };
    let (a, b, c) = (
        refused(4096),
        refused(64),
        result(
            &p,
            PathKind::ClSvmFine,
            SyncMode::Map,
            Op::Fft,
            128,
            Outcome::pass(),
        ),
    );
    let e = entries(&[&a, &b, &c]);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].sizes, [64, 4096]);
    assert_eq!(e[1].sizes, [128]);
}

#[test]
fn a_figure_is_inlined_as_checked() {
    let plot = "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\"><title>handoff</title><rect width=\"1\" height=\"1\"/></svg>";
    let f = Figure::inline("bench.svg", plot).unwrap();
    let page = render_html_with_figures(&sample_report(), &[], &[f]);
    assert!(page.contains("<h2>bench.svg</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\"><title>handoff</title><rect width=\"1\" height=\"1\"/></svg>"));
    assert!(!page.contains("<?xml"));
    assert_eq!(outside_references(&page), Vec::<String>::new());
}

#[test]
fn control_characters_from_a_results_file_show_as_text() {
    let mut report = sample_report();
    report.results[0].outcome =
        Outcome::unsupported("refused\x1b[2J\u{9b}1m\u{202e}desrever\u{202c}\r");
    report.results[0].kernel_log = vec!["log\x1b]8;;https://x.example/\x07".into()];
    report.fingerprint.os_kernel = "Linux\x1b[31m".into();
    let (old, mut new) = sample_diff_runs();
    new.results[0].outcome = Outcome::unsupported("diff\x1b[2J");
    for html in [
        render_html(&report, &["run.json: problem\x1b[2J".into()]),
        render_diff_html(
            &diff(&old, &new),
            ("old\x1b[2J.json", &old),
            ("new.json", &new),
        ),
    ] {
        let raw: Vec<char> = html
            .chars()
            .filter(|&c| crate::escape::is_control(c) && c != '\n' && c != '\t')
            .collect();
        assert_eq!(raw, Vec::<char>::new());
        assert!(html.contains(r"\x1b[2J"), "{html}");
    }
    let html = render_html(&report, &[]);
    assert!(html.contains(r"refused\x1b[2J\u{9b}1m\u{202e}desrever\u{202c}\x0d"));
    assert!(html.contains(r"log\x1b]8;;https://x.example/\x07"));
}

/// The `PreEscaped` uses of a template source other than the stylesheet: markup let through
/// unescaped. A figure's checked SVG goes through its own `Render` (figure.rs), not here.
fn unescaped_splices(source: &str) -> Vec<String> {
    source
        .lines()
        .filter(|l| l.contains("PreEscaped(") && !l.contains("PreEscaped(STYLE)"))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn the_pages_let_no_text_through_unescaped() {
    let source = include_str!("../html.rs");
    assert_eq!(unescaped_splices(source), Vec::<String>::new());
    // Planted: a reason spliced in as markup is seen.
    let planted = source.replacen(
        "(shown(&r.outcome.reason()))",
        "(PreEscaped(r.outcome.reason()))",
        1,
    );
    assert_eq!(
        unescaped_splices(&planted).len(),
        1,
        "the plant did not take"
    );
}
