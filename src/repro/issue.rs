//! ISSUE.md beside repro.c: the bug report, in the fields of the vendor's issue form, filled
//! from the results file's fingerprint, what clhip expected and observed, the bound, and the
//! reproducer's build and run commands, so that filing is a paste.
//!
//! - ROCm (a hip peer, or an OpenCL device of ROCm's): GitHub ROCm/ROCm's "Issue Report" form:
//!   Problem Description, Operating System, CPU, GPU, ROCm Version, ROCm Component, Steps to
//!   Reproduce, the optional `rocminfo --support` output, Additional Information.
//! - NVIDIA (a cuda peer, or NVIDIA's OpenCL): NVIDIA's bug form and developer forum ask for
//!   the driver version, the CUDA version, the GPU, the operating system, a description and the
//!   steps to reproduce.
//! - PoCL: its GitHub issues have no form; the issue says the PoCL version and build, the
//!   device, the host and the steps.
//! - Any other OpenCL platform: the same fields, under plain headings.

use crate::model::{Api, FailReason, Op, Outcome, OutcomeKind};

use super::{Header, ReproCase};

/// What clhip expected and observed, and the bound, from the outcome it saw: lines for the
/// header's `facts`.
pub fn facts(outcome: &Outcome) -> Vec<(String, String)> {
    let mut f = Vec::new();
    match outcome {
        Outcome::Pass { note } => {
            f.push(("Observed".into(), format!("pass: {note}")));
        }
        Outcome::Fail { reason } => {
            if let FailReason::Mismatch(m) = reason {
                f.push((
                    "Expected".into(),
                    format!(
                        "{}: every element within the bound; element {} should be {}",
                        m.what, m.index, m.want
                    ),
                ));
                f.push((
                    "Observed".into(),
                    format!(
                        "element {} is {}; {} of {} elements out of bound",
                        m.index, m.got, m.count, m.len
                    ),
                ));
                f.push(("Bound".into(), format!("{:.3e} = {}", m.bound, m.formula)));
            } else {
                f.push(("Expected".into(), "the checked result".into()));
                f.push((
                    "Observed".into(),
                    format!("wrong result: {}", outcome.reason()),
                ));
            }
        }
        _ => {
            f.push((
                "Expected".into(),
                "every call succeeds and the data arrive within clhip's bound (exit 0)".into(),
            ));
            f.push((
                "Observed".into(),
                format!("{}: {}", outcome.kind(), outcome.reason()),
            ));
        }
    }
    f
}

/// Which tracker a case's report goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vendor {
    Rocm,
    Nvidia,
    Pocl,
    Other,
}

fn vendor(case: &ReproCase) -> Vendor {
    let family = super::label_parts(&case.cl_label).map_or("", |(f, _)| f);
    match (case.peer.api, family) {
        (Api::Hip, _) | (_, "rocm") => Vendor::Rocm,
        (Api::Cuda, _) | (_, "nvidia") => Vendor::Nvidia,
        (_, "pocl") => Vendor::Pocl,
        _ => Vendor::Other,
    }
}

/// The value of fingerprint line `key: value`, if the fingerprint has it.
fn value<'a>(lines: &'a [String], key: &str) -> Option<&'a str> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(": ")))
}

/// ISSUE.md for `case`, written as `header` says, built by `build_sh`.
pub fn issue(case: &ReproCase, header: &Header, build_sh: &str) -> String {
    let fp = &header.fingerprint;
    let not_recorded = "not in the results file";
    // Everything from the results file is text to show, never Markdown to follow.
    let md = crate::escape::markdown_text;
    let get = |key: &str| value(fp, key).map_or(not_recorded.to_string(), md);
    let cl = |what: &str| get(&format!("opencl {} {what}", case.cl_label));
    let peer = case.peer.api.name();
    let peer_device = |what: &str| get(&format!("{peer} device {} {what}", case.peer.ordinal));
    let (kind, reason) = header
        .seen
        .clone()
        .unwrap_or((OutcomeKind::Pass, "not run".into()));
    let reason = md(&reason);
    let id = md(&case.to_string());
    let who = if case.peer.api == Api::Host {
        "the host CPU".to_string()
    } else {
        format!("{peer} device {}", case.peer.ordinal)
    };
    let negative = crate::model::is_negative_control(case.path, case.sync);
    let summary = match kind {
        OutcomeKind::Fail if negative => format!(
            "{id}: a negative control (sync {} leaves out a hand-over the specification requires \
             on path {}): its wrong data is expected; nothing to file",
            case.sync, case.path
        ),
        OutcomeKind::Pass => {
            format!("{id}: clhip saw a pass; nothing to file (this reproducer is for comparison)")
        }
        OutcomeKind::Fail => format!(
            "{}: wrong data where OpenCL ({}) and {who} share memory by path {}, sync {}",
            case.op,
            cl("device"),
            case.path,
            case.sync
        ),
        OutcomeKind::Crash => format!(
            "{}: the process crashes ({reason}) where OpenCL ({}) and {who} share memory by path {}",
            case.op,
            cl("device"),
            case.path
        ),
        _ => format!(
            "{}: {kind} where OpenCL ({}) and {who} share memory by path {}, sync {}: {reason}",
            case.op,
            cl("device"),
            case.path,
            case.sync
        ),
    };
    let mut description = format!(
        "{summary}.\n\n\
         A standalone C program (repro.c, attached; OpenCL and the vendor API only) runs one case \
         of clhip, a conformance harness for memory shared between OpenCL and HIP/CUDA: case \
         {}. {}\n\n",
        crate::escape::markdown_code(&case.to_string()),
        what_it_does(case)
    );
    for (k, v) in &header.facts {
        description.push_str(&format!("- {}: {}\n", md(k), md(v)));
    }
    description.push_str(&format!(
        "- clhip's outcome ({}): {kind}{}\n",
        md(&header.seen_from),
        if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        }
    ));
    let compile = build_sh
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    let steps = format!(
        "1. Save repro.c and build.sh (attached) in one directory.\n\
         2. Build: `./build.sh`, which runs\n   ```sh\n   {compile}\n   ```\n\
         3. Run: `./repro; echo \"exit $?\"`. Exit 0: pass; 1: wrong data; 2: a call refused; \
         3: a device memory fault (also when one is pending after another error: \
         cuCtxSynchronize or hipDeviceSynchronize, after the failed call); a signal: a crash.\n\
         4. Expected: exit 0. Seen by clhip: {}.\n",
        expected_exit(kind)
    );
    let os = format!(
        "Linux, kernel {} (the distribution is {not_recorded}: `grep -E '^(NAME|VERSION)=' /etc/os-release`)",
        get("os kernel")
    );
    let cpu = get("host cpu");
    let mut additional = format!("{}\nSize: {}\n", fenced(&fp.join("\n")), md(&header.shrink));
    if !case.op.checks_a_pattern() && !header.data.is_empty() {
        additional.push_str(&format!("Data: {}\n", md(&header.data)));
    }
    additional.push_str(&format!(
        "Run seed {} (the data come from it: repro.c's header). Driver fingerprint: {}.\n",
        header.seed,
        md(&header.fingerprint_from)
    ));
    let gpu = if case.peer.api == Api::Host {
        format!("{} (OpenCL {})", cl("device"), case.cl_label)
    } else {
        format!(
            "{} ({}), OpenCL device {}",
            peer_device("name"),
            peer_device("arch"),
            cl("device")
        )
    };
    let mut s = String::new();
    let field = |s: &mut String, name: &str, body: &str| {
        s.push_str(&format!("### {name}\n\n{}\n\n", body.trim_end()));
    };
    match vendor(case) {
        Vendor::Rocm => {
            s.push_str(&format!(
                "<!-- ROCm's GitHub issue form (github.com/ROCm/ROCm, \"Issue Report\"): each \
                 section below is the form field of its name. Filled in by clhip repro. -->\n\n\
                 **Title:** [Issue]: {summary}\n\n"
            ));
            field(&mut s, "Problem Description", &description);
            field(&mut s, "Operating System", &os);
            field(&mut s, "CPU", &cpu);
            field(&mut s, "GPU", &gpu);
            field(
                &mut s,
                "ROCm Version",
                &format!(
                    "HIP {} ({}); OpenCL: {}, driver {}",
                    get("hip version"),
                    get("hip library"),
                    cl("platform"),
                    cl("driver")
                ),
            );
            field(&mut s, "ROCm Component", rocm_component(case));
            field(&mut s, "Steps to Reproduce", &steps);
            field(
                &mut s,
                "(Optional for Linux users) Output of /opt/rocm/bin/rocminfo --support",
                &format!("{not_recorded}: paste `/opt/rocm/bin/rocminfo --support` here."),
            );
            field(&mut s, "Additional Information", &additional);
        }
        Vendor::Nvidia => {
            s.push_str(&format!(
                "<!-- For NVIDIA's bug form (developer.nvidia.com, \"Submit a bug\") or its \
                 developer forum: the fields they ask for. Filled in by clhip repro. -->\n\n\
                 **Title:** {summary}\n\n"
            ));
            field(
                &mut s,
                "Driver version",
                &value(fp, "kernel module nvidia").map_or_else(|| cl("driver"), md),
            );
            field(
                &mut s,
                "CUDA version",
                &format!(
                    "CUDA {} ({}); OpenCL: {}{}",
                    get("cuda version"),
                    get("cuda library"),
                    cl("platform"),
                    nvidia_libraries(fp, case)
                ),
            );
            field(&mut s, "GPU", &gpu);
            field(&mut s, "Operating system", &os);
            field(&mut s, "CPU", &cpu);
            field(&mut s, "Description", &description);
            field(&mut s, "Steps to reproduce", &steps);
            field(&mut s, "Additional information", &additional);
        }
        Vendor::Pocl | Vendor::Other => {
            let (tracker, version) = if vendor(case) == Vendor::Pocl {
                (
                    "PoCL's GitHub issues (github.com/pocl/pocl; no issue form): the fields a \
                     report needs",
                    "PoCL version and build",
                )
            } else {
                (
                    "the OpenCL platform's bug tracker: the fields a report needs",
                    "OpenCL platform version",
                )
            };
            s.push_str(&format!(
                "<!-- For {tracker}. Filled in by clhip repro. -->\n\n**Title:** {summary}\n\n"
            ));
            field(&mut s, "Description", &description);
            field(
                &mut s,
                version,
                &format!(
                    "{} (driver {})\n\nDevice version: {}",
                    cl("platform"),
                    cl("driver"),
                    cl("version")
                ),
            );
            field(&mut s, "Device", &cl("device"));
            field(&mut s, "Operating system", &os);
            field(&mut s, "CPU", &cpu);
            field(&mut s, "Steps to reproduce", &steps);
            field(&mut s, "Additional information", &additional);
        }
    }
    s.truncate(s.trim_end().len());
    s.push('\n');
    s
}

/// What the program does, in a sentence, for a reader who has not seen clhip.
fn what_it_does(case: &ReproCase) -> String {
    let peer = case.peer.label();
    let op = match case.op {
        Op::Handoff => format!(
            "OpenCL and {peer} take turns writing a bit pattern into the shared memory and checking \
             the other's, bit for bit"
        ),
        Op::Fft => format!(
            "{peer} uploads data into the shared memory, OpenCL transforms it (FFT), {peer} reads \
             the result, held to an f64 reference"
        ),
        Op::Pipeline => format!(
            "OpenCL adds and transforms, {peer} scales and takes magnitudes, on the shared \
             memory; the result is held to an f64 reference"
        ),
        Op::Gemm => format!(
            "OpenCL writes three matrices into shared memory, {peer}'s BLAS computes C = A B + \
             beta C on them, OpenCL reads C back, held to an f64 reference"
        ),
        Op::Cholesky => format!(
            "OpenCL writes a Hermitian positive-definite matrix into shared memory, {peer}'s \
             solver factors it in place, OpenCL reads the factor back, held to an f64 reference"
        ),
        Op::Placement => format!(
            "OpenCL writes data into shared memory, {peer} scales it 21 times, OpenCL reads it \
             back, bit for bit"
        ),
        Op::Reuse => format!(
            "OpenCL and {peer} hand one buffer back and forth across 2000 crossings, a fresh pattern \
             written at each crossing and checked bit for bit by the side that takes it"
        ),
    };
    format!(
        "The memory is shared by path `{}` and handed over by sync `{}`; {op}.",
        case.path, case.sync
    )
}

fn rocm_component(case: &ReproCase) -> &'static str {
    match (case.peer.api, case.op) {
        (Api::Hip, Op::Gemm) => "rocBLAS (on HIP, clr), beside the OpenCL runtime (clr)",
        (Api::Hip, Op::Cholesky) => "rocSOLVER (on HIP, clr), beside the OpenCL runtime (clr)",
        (Api::Hip, _) => "HIP and the OpenCL runtime (clr)",
        _ => "the OpenCL runtime (clr, ROCm-OpenCL-Runtime)",
    }
}

/// `; cuBLAS ...` where the case calls a library beside the driver.
fn nvidia_libraries(fp: &[String], case: &ReproCase) -> String {
    let k = case.peer.ordinal;
    let what = match case.op {
        Op::Gemm => "blas",
        Op::Cholesky => "solver",
        _ => return String::new(),
    };
    value(fp, &format!("cuda device {k} {what}"))
        .map(|v| format!("; {}", crate::escape::markdown_text(v)))
        .unwrap_or_default()
}

fn expected_exit(kind: OutcomeKind) -> &'static str {
    match kind {
        OutcomeKind::Pass => "pass (exit 0)",
        OutcomeKind::Fail => "wrong data (exit 1)",
        OutcomeKind::Unsupported => "a call refused (exit 2)",
        OutcomeKind::Fault => "a device memory fault (exit 3)",
        OutcomeKind::Crash => "a crash (a signal)",
        OutcomeKind::Timeout => "a hang (killed after clhip's time limit)",
        // The program does not read the kernel's log: a pass with a warning passes.
        OutcomeKind::Warn => "pass (exit 0); clhip also saw a kernel warning",
        OutcomeKind::Skip | OutcomeKind::Error | OutcomeKind::Incomplete => {
            "no verdict on the driver"
        }
    }
}

/// `text` in a fence longer than any run of backticks in it.
fn fenced(text: &str) -> String {
    crate::escape::markdown_fence("", text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: OutcomeKind, reason: &str, fingerprint: &[&str]) -> Header {
        Header {
            seen: Some((kind, reason.into())),
            seen_from: "run.json".into(),
            fingerprint: fingerprint.iter().map(|l| l.to_string()).collect(),
            ..Header::default()
        }
    }

    /// ROCm's form and NVIDIA's fields, each filled from the fingerprint; a reason's Markdown
    /// and HTML stay text.
    #[test]
    fn each_vendor_gets_its_forms_fields_filled() {
        let h = header(
            OutcomeKind::Fault,
            "<b>rocblas_cgemm</b> returned `x`",
            &[
                "hip version: 6.3.42133",
                "hip device 0 name: AMD Instinct MI100",
                "hip device 0 arch: gfx908",
                "opencl rocm0 device: gfx908",
                "os kernel: 6.8.0",
                "host cpu: AMD EPYC 7763",
            ],
        );
        let case = ReproCase::parse("rocm0+hip0/copy/finish/gemm/n=4").unwrap();
        let rocm = issue(&case, &h, "#!/bin/sh\nhipcc -o repro repro.c\n");
        for field in [
            "### Problem Description",
            "### Operating System",
            "### CPU",
            "### GPU",
            "### ROCm Version",
            "### ROCm Component",
            "### Steps to Reproduce",
            "### Additional Information",
        ] {
            assert!(rocm.contains(&format!("\n{field}\n")), "{field}:\n{rocm}");
        }
        for filled in [
            "**Title:** [Issue]: gemm: fault",
            "HIP 6.3.42133",
            "AMD Instinct MI100 (gfx908)",
            "AMD EPYC 7763",
            "kernel 6.8.0",
            "rocBLAS",
            "hipcc -o repro repro.c",
            "Seen by clhip: a device memory fault (exit 3)",
            "&lt;b&gt;rocblas_cgemm&lt;/b&gt; returned \\`x\\`",
        ] {
            assert!(rocm.contains(filled), "{filled}:\n{rocm}");
        }
        assert!(!rocm.contains("<b>"), "{rocm}");

        let h = header(
            OutcomeKind::Crash,
            "SIGSEGV",
            &["kernel module nvidia: 580.159.04", "cuda version: 13.0"],
        );
        let case =
            ReproCase::parse("nvidia0+cuda0/device+use-host-ptr/finish/handoff/n=1").unwrap();
        let nvidia = issue(&case, &h, "nvcc -o repro repro.c\n");
        for field in [
            "### Driver version\n\n580.159.04",
            "### CUDA version\n\nCUDA 13.0",
            "### GPU",
            "### Operating system",
            "### Description",
            "### Steps to reproduce",
        ] {
            assert!(nvidia.contains(field), "{field}:\n{nvidia}");
        }
        assert!(nvidia.contains("the process crashes (SIGSEGV)"), "{nvidia}");
    }
}
