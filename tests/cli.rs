//! The command line as a user meets it: bad input gets a clear error naming the file and line
//! and a non-zero exit, and nothing already written is lost.

#[macro_use]
mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .expect("clhip runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn a_malformed_case_file_is_rejected_with_file_and_line_and_nothing_is_overwritten() {
    let dir = scratch("malformed");
    let cases = dir.join("bad.toml");
    std::fs::write(
        &cases,
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\", \"mapp\"]\nops = [\"fft\"]\nsizes = [4]\n",
    )
    .unwrap();
    let json = dir.join("results.json");
    std::fs::write(&json, "previous results").unwrap();
    let o = clhip(&[
        "run",
        "--cases",
        cases.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{}:4:", cases.display())), "{err}");
    assert!(
        err.contains("unknown SyncMode `mapp`") || err.contains("mapp"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "previous results");
}

fn an_unknown_filter_is_an_error_not_an_empty_run() {
    support::opencl_device();
    let o = clhip(&["list", "no-such-path-anywhere"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`no-such-path-anywhere` matches none"),
        "{}",
        stderr(&o)
    );
}

fn a_corrupt_report_names_file_line_and_column() {
    let dir = scratch("corrupt");
    let f = dir.join("r.json");
    std::fs::write(
        &f,
        "{\n  \"schema\": \"clhip-results/1\",\n  \"seed\": oops\n}\n",
    )
    .unwrap();
    let o = clhip(&["report", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}:3:", f.display())),
        "{}",
        stderr(&o)
    );
}

fn probe_json_parses_and_names_every_runtime() {
    let o = clhip(&["probe", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("probe --json is JSON");
    for api in ["hip", "cuda"] {
        assert!(v[api]["status"].is_string(), "{api} section: {v}");
    }
    // The rest needs a device to describe.
    support::opencl_device();
    assert_eq!(v["opencl_status"], "ok");
    let dev = &v["platforms"][0]["devices"][0];
    assert!(dev["svm"].is_object(), "{dev}");
}

fn list_shows_the_default_matrix_for_the_host_pair() {
    support::opencl_device();
    let o = clhip(&["list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ids: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(ids.len() >= 40, "{} ids", ids.len());
    assert!(ids.iter().any(|i| i.ends_with("/fft/n=4194304")));
    assert!(ids.iter().all(|i| i.contains("+host/")));
    // The host has no semaphores and imports nothing: the Vulkan broker's sync and path are
    // device pairs' only, so a host-only machine runs what it ran before them.
    assert!(
        ids.iter()
            .all(|i| !i.contains("/semaphore/") && !i.contains("/vk-memory+import/")),
        "{ids:?}"
    );
}

fn list_for_a_recorded_h200_probe_pairs_cuda_with_its_opencl_twin() {
    // Recorded by `clhip probe --json` on an H200 (driver 580.159.04); pairing comes from the
    // UUIDs OpenCL and CUDA reported there, not from this machine.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nvidia-h200-probe.json"
    );
    let o = clhip(&["list", "--probe", fixture]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ids: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let cuda: Vec<&String> = ids
        .iter()
        .filter(|i| i.starts_with("nvidia0+cuda0/"))
        .collect();
    assert!(
        cuda.iter()
            .any(|i| i.contains("/vmm-fd+cl-import/acquire-release/gemm/n=2048"))
    );
    // The Vulkan broker's path with every sync it takes, and the semaphore sync on the paths
    // where both sides work on one allocation in place, but not on copies.
    for sync in ["acquire-release", "semaphore", "finish", "none"] {
        let want = format!("nvidia0+cuda0/vk-memory+import/{sync}/");
        assert!(cuda.iter().any(|i| i.starts_with(&want)), "{want}");
    }
    for path in ["cl-svm-coarse", "device-ptr-as-cl-arg", "cl-gpu-va"] {
        let want = format!("nvidia0+cuda0/{path}/semaphore/fft/");
        assert!(cuda.iter().any(|i| i.starts_with(&want)), "{want}");
    }
    assert!(!cuda.iter().any(|i| i.contains("/semaphore/")
        && (i.contains("/copy/") || i.contains("+memcpy/") || i.contains("use-host-ptr/"))));
    assert!(
        cuda.iter()
            .any(|i| i.contains("/pinned+use-host-ptr/map/cholesky/"))
    );
    assert!(
        !cuda
            .iter()
            .any(|i| i.contains("/use-host-ptr/") && !i.contains("+use-host-ptr"))
    );
    assert!(ids.iter().any(|i| i.starts_with("nvidia0+host/")));
    assert!(
        !ids.iter()
            .any(|i| i.starts_with("nvidia0+host/") && i.contains("/gemm/"))
    );
}

fn a_corrupt_probe_file_names_file_and_line() {
    let dir = scratch("probe");
    let f = dir.join("p.json");
    std::fs::write(&f, "{\n  \"opencl_status\": 3\n}\n").unwrap();
    let o = clhip(&["list", "--probe", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}:2:", f.display())),
        "{}",
        stderr(&o)
    );
}

fn list_for_an_mi100_like_probe_has_every_amd_path_sync_and_op() {
    use clhip::model::{Api, Op, PathKind};
    use clhip::paths::PathFacts;
    // Written by hand from the ROCm sources (tests/fixtures/README.md): ROCm OpenCL with coarse
    // and fine SVM and no external memory, one gfx908 HIP device on the same PCI bus id.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mi100-like-probe.json"
    );
    let o = clhip(&["list", "--probe", fixture]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    let hip: Vec<&str> = listing
        .lines()
        .filter(|i| i.starts_with("rocm0+hip0/"))
        .collect();
    // Every path x sync x op the paths give the hip peer, from their rooms themselves, so a path
    // added later without cases fails here. Placement measures memory, not a handover: one
    // sync per path is enough, and each path has it.
    let mut missing = Vec::new();
    for &path in PathKind::ALL.iter().filter(|p| p.applies_to(Api::Hip)) {
        for &op in Op::ALL.iter().filter(|o| o.applies_to(Api::Hip)) {
            let syncs: Vec<String> = if op == Op::Placement {
                vec![String::new()]
            } else {
                path.syncs(Api::Hip)
                    .iter()
                    .map(|s| format!("{s}/"))
                    .collect()
            };
            for sync in syncs {
                let want = format!("rocm0+hip0/{path}/{sync}");
                let op_part = format!("/{op}/");
                if !hip
                    .iter()
                    .any(|i| i.starts_with(&want) && i.contains(&op_part))
                {
                    missing.push(format!("{want}*{op_part}"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "not listed: {missing:#?}");
    // ROCm-only paths are the hip peer's alone.
    assert!(hip.iter().any(|i| i.contains("/cl-dmabuf+hip-import/")));
    assert!(
        !listing
            .lines()
            .any(|i| i.starts_with("rocm0+host/") && i.contains("cl-dmabuf"))
    );
    // The listing is the matrix a reviewer reads: kept as a snapshot.
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| insta::assert_snapshot!("mi100_like_listing", hip.join("\n")));
}

fn list_for_two_rocm_installs_plans_every_case_once_per_install_with_its_label() {
    // tests/fixtures/two-rocm-installs-probe.json: the MI100 fixture as two installs see it.
    let one = clhip(&["list", "--probe", "tests/fixtures/mi100-like-probe.json"]);
    let two = clhip(&[
        "list",
        "--probe",
        "tests/fixtures/two-rocm-installs-probe.json",
    ]);
    assert!(
        one.status.success() && two.status.success(),
        "{}",
        stderr(&two)
    );
    let one = String::from_utf8_lossy(&one.stdout).into_owned();
    let two = String::from_utf8_lossy(&two.stdout).into_owned();
    let single: Vec<&str> = one
        .lines()
        .filter_map(|i| i.strip_prefix("rocm0+hip0/"))
        .collect();
    assert!(single.len() > 600, "{} cases", single.len());
    // Each install gets every case the single install had, under an id of its own.
    for install in ["6.3.2", "7.0.0"] {
        let prefix = format!("rocm0+hip@{install}:0/");
        let cases: Vec<&str> = two
            .lines()
            .filter_map(|i| i.strip_prefix(prefix.as_str()))
            .collect();
        assert_eq!(cases, single, "hip@{install}");
    }
    assert!(!two.lines().any(|i| i.starts_with("rocm0+hip0/")));
    // The host pair is no install's: listed once, as before.
    let host = |s: &str| s.lines().filter(|i| i.starts_with("rocm0+host/")).count();
    assert_eq!(host(&two), host(&one));
    assert_eq!(two.lines().count(), one.lines().count() + single.len());
    // The comparison's glob selects one GPU's cases under every install; a label one.
    let dmabuf = clhip(&[
        "list",
        "--probe",
        "tests/fixtures/two-rocm-installs-probe.json",
        "rocm0+hip@*:0/cl-dmabuf+hip-import/finish/*",
    ]);
    let dmabuf = String::from_utf8_lossy(&dmabuf.stdout).into_owned();
    assert!(dmabuf.lines().count() >= 2, "{dmabuf}");
    assert!(dmabuf.lines().any(|i| i.starts_with("rocm0+hip@6.3.2:0/")));
    assert!(dmabuf.lines().any(|i| i.starts_with("rocm0+hip@7.0.0:0/")));
    let new_only = clhip(&[
        "list",
        "--probe",
        "tests/fixtures/two-rocm-installs-probe.json",
        "hip@7.0.0",
    ]);
    let new_only = String::from_utf8_lossy(&new_only.stdout).into_owned();
    assert_eq!(new_only.lines().count(), single.len());
    // --rocm-path is repeatable; each must be a directory.
    let o = clhip(&["list", "--rocm-path", "/", "--rocm-path", "/etc/passwd"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/etc/passwd: not a directory"),
        "{}",
        stderr(&o)
    );
}

fn mi100_expectation_files_load_and_list_applies_them_to_the_mi100_fixture() {
    let o = clhip(&[
        "list",
        "--probe",
        "tests/fixtures/mi100-like-probe.json",
        "--expectations",
        "cases/expectations",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    // The fixture is ROCm 6.3 on a gfx908: the 6.x file applies, and only it.
    assert!(err.contains("mi100-rocm-6.x.toml"), "{err}");
    assert!(
        !err.contains("mi100-rocm-5.7.toml") && !err.contains("mi100-rocm-7.x.toml"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let vmm: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("/vmm-fd+cl-import/"))
        .collect();
    assert!(!vmm.is_empty());
    for l in &vmm {
        assert!(
            l.contains("expect unsupported (cases/expectations/mi100-rocm-6.x.toml:"),
            "{l}"
        );
    }
    assert!(
        out.lines()
            .any(|l| l.contains("/device+use-host-ptr/") && l.contains("expect fault"))
    );
    // The shipped variants run on the hip pair, each case expected as its plain twin: no
    // warning of a stale rule, and HSA_XNACK=1 keeps the fault (XNACK stays off on an MI100).
    assert!(!err.contains("matches no case"), "{err}");
    for segment in [
        "/env:HSA_ENABLE_SDMA=0",
        "/env:HSA_XNACK=1",
        "/env:AMD_SERIALIZE_COPY=3",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with("rocm0+hip0/") && l.contains(segment)),
            "{segment}"
        );
    }
    assert!(
        !out.contains("CUDA_MODULE_LOADING"),
        "a cuda variant on a hip pair"
    );
    let xnack: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("/device+use-host-ptr/") && l.contains("/env:HSA_XNACK=1"))
        .collect();
    assert!(!xnack.is_empty());
    for l in xnack {
        assert!(l.contains("expect fault"), "{l}");
    }
    assert!(
        out.lines().any(|l| l.starts_with("rocm0+hip0/cl-svm-fine/")
            && l.contains("/env:HSA_ENABLE_SDMA=0")
            && !l.contains("expect")),
        "a variant case no rule lists is expected to pass"
    );
    // Cases no rule lists are expected to pass: no annotation.
    assert!(
        out.lines()
            .any(|l| l.starts_with("rocm0+hip0/cl-svm-fine/") && !l.contains("expect"))
    );
}

fn devices_picks_a_gpu_by_index_uuid_pci_bus_id_or_label_and_refuses_an_unknown_one() {
    let fixture = "tests/fixtures/nvidia-h200-probe.json";
    let pairs_of = |sel: &str| {
        let o = clhip(&["list", "--probe", fixture, "--devices", sel]);
        assert_eq!(o.status.code(), Some(0), "{sel}: {}", stderr(&o));
        let mut pairs: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split('/').next().map(str::to_string))
            .collect();
        pairs.sort();
        pairs.dedup();
        pairs
    };
    let gpu = ["nvidia0+cuda0", "nvidia0+host"];
    for sel in [
        "0",
        "GPU-c7104762-bb50-731e-0123-40f61fb6c99c",
        "c7104762-BB50-731e-0123-40f61fb6c99c",
        "00000000:00:06.0",
        "nvidia0",
    ] {
        assert_eq!(pairs_of(sel), gpu, "{sel}");
    }
    let o = clhip(&["list", "--probe", fixture, "--devices", "7"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("names no GPU; there are: cuda0"),
        "{}",
        stderr(&o)
    );
}

fn a_plant_limited_to_cases_that_do_not_run_is_refused_and_nothing_is_overwritten() {
    let dir = scratch("plant-only");
    let json = dir.join("results.json");
    std::fs::write(&json, "previous results").unwrap();
    for only in ["no-such-case", ""] {
        let o = clhip(&[
            "run",
            "--mock-cases",
            "pass",
            "--plant",
            "flip-element",
            "--plant-only",
            only,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{only:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--plant-only"), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&json).unwrap(), "previous results");
    }
}

fn probe_prints_the_fingerprint_lines_expectation_files_match_in_text_and_tagged_json() {
    let dir = scratch("fingerprint-lines");
    let o = clhip(&["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("probe --json is JSON");
    assert_eq!(v["schema"], "clhip-probe/1", "{v}");
    let lines: Vec<String> = v["fingerprint_lines"]
        .as_array()
        .expect("fingerprint_lines")
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    assert!(
        lines.iter().any(|l| l.starts_with("os kernel: ")),
        "{lines:?}"
    );
    let text = String::from_utf8_lossy(&clhip(&["probe"]).stdout).into_owned();
    let at = text
        .find("\nFingerprint lines (")
        .unwrap_or_else(|| panic!("{text}"));
    for l in &lines {
        assert!(text[at..].contains(&format!("\n  {l}\n")), "{l}: {text}");
    }
    // The saved probe is what `list --probe` reads, and a file whose globs are those lines,
    // as printed, applies to it.
    let saved = dir.join("probe.json");
    std::fs::write(&saved, &o.stdout).unwrap();
    let expectations = dir.join("expectations");
    std::fs::create_dir_all(&expectations).unwrap();
    let globs: Vec<String> = lines.iter().map(|l| format!("{l:?}")).collect();
    std::fs::write(
        expectations.join("this-machine.toml"),
        format!(
            "version = 1\n[applies]\nfingerprint = [{}]\n",
            globs.join(", ")
        ),
    )
    .unwrap();
    // A tag of another schema is refused, naming the file.
    let other = dir.join("other.json");
    let tagged = String::from_utf8_lossy(&o.stdout).replacen("clhip-probe/1", "clhip-probe/9", 1);
    std::fs::write(&other, tagged).unwrap();
    let r = clhip(&["list", "--probe", other.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains(&format!("{}: schema `clhip-probe/9`", other.display())),
        "{}",
        stderr(&r)
    );
    // Listing plans the pairs of a device.
    support::opencl_device();
    let r = clhip(&[
        "list",
        "--probe",
        saved.to_str().unwrap(),
        "--expectations",
        expectations.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(!stderr(&r).contains("none applies"), "{}", stderr(&r));
    assert!(stderr(&r).contains("this-machine.toml"), "{}", stderr(&r));
}

/// The entries of a `--help` text (options and arguments) that say nothing: no text of their
/// own, or only clap's `[default: ...]`.
fn undocumented(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    let entry = |l: &str| {
        let t = l.trim_start();
        let indent = l.len() - t.len();
        (2..=6).contains(&indent)
            && (t.starts_with('-') || t.starts_with('<') || t.starts_with('['))
    };
    let says = |text: &str| {
        let text = text.trim();
        let only_a_default = text.starts_with("[default:") && text.ends_with(']');
        !text.is_empty() && !only_a_default
    };
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if !entry(l) {
            continue;
        }
        let t = l.trim_start();
        // Same-line help: after the name, two spaces and the text.
        let inline = t.split_once("  ").map(|(_, rest)| rest).unwrap_or("");
        let below = lines
            .get(i + 1)
            .filter(|n| !entry(n) && n.len() - n.trim_start().len() >= 8)
            .copied()
            .unwrap_or("");
        if !says(inline) && !says(below) {
            out.push(t.split("  ").next().unwrap_or(t).to_string());
        }
    }
    out
}

fn every_option_and_argument_has_a_help_text() {
    let commands = [
        "probe",
        "list",
        "run",
        "report",
        "diff",
        "merge",
        "repro",
        "history",
        "bench interop",
        "bench runner",
    ];
    let mut missing = Vec::new();
    for c in commands {
        let mut args: Vec<&str> = c.split(' ').collect();
        args.push("--help");
        let o = clhip(&args);
        assert!(o.status.success(), "{c}: {}", stderr(&o));
        let help = String::from_utf8_lossy(&o.stdout).into_owned();
        missing.extend(
            undocumented(&help)
                .into_iter()
                .map(|e| format!("clhip {c}: {e}")),
        );
    }
    assert_eq!(missing, Vec::<String>::new());
    // The check sees an entry with nothing, or only a default, to say.
    let planted = "Options:\n      --seed <SEED>\n          [default: 7]\n  <FILE>  \n      --json  As JSON\n";
    assert_eq!(undocumented(planted), ["--seed <SEED>", "<FILE>"]);
}

tests!(
    every_option_and_argument_has_a_help_text,
    probe_prints_the_fingerprint_lines_expectation_files_match_in_text_and_tagged_json,
    a_malformed_case_file_is_rejected_with_file_and_line_and_nothing_is_overwritten,
    an_unknown_filter_is_an_error_not_an_empty_run,
    a_corrupt_report_names_file_line_and_column,
    probe_json_parses_and_names_every_runtime,
    list_shows_the_default_matrix_for_the_host_pair,
    list_for_a_recorded_h200_probe_pairs_cuda_with_its_opencl_twin,
    a_corrupt_probe_file_names_file_and_line,
    list_for_an_mi100_like_probe_has_every_amd_path_sync_and_op,
    list_for_two_rocm_installs_plans_every_case_once_per_install_with_its_label,
    mi100_expectation_files_load_and_list_applies_them_to_the_mi100_fixture,
    devices_picks_a_gpu_by_index_uuid_pci_bus_id_or_label_and_refuses_an_unknown_one,
    a_plant_limited_to_cases_that_do_not_run_is_refused_and_nothing_is_overwritten
);
