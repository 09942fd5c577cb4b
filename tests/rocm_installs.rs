//! Several ROCm installs in one run, against real processes. The installs are fake roots built
//! here: stub libamdhip64 libraries made with `cc` under ROCm's file names
//! (`libamdhip64.so.6.3.60302` for 6.3.2, `libamdhip64.so.7.0.70000` for 7.0.0), exporting
//! every symbol the bindings know, where the version and device-count queries answer (no
//! device: hipErrorNoDevice, 100) and everything else calls abort(); and Debian's HIP 5.2
//! through a root of its own where it is installed.
//!
//! - `clhip probe` with several `--rocm-path` shows each install apart, labelled by version,
//!   with its own reason; installs of one version get `~1`, `~2`; one `--rocm-path` is as
//!   before.
//! - A run's workers for each install's pair load that install: the planned environment
//!   ([`pairs::worker_env`]) through the real runner and worker, each case's refusal naming
//!   its own install's library.
//! - HIP loaded where another install's HSA runtime is already mapped (what another install's
//!   ROCm OpenCL brings) is refused as a mixed install; over its own HSA runtime it is not.
//!
//! Without a C compiler the tests are reported ignored, unless CLHIP_REQUIRE_HIP=1 (CI); the worker test also
//! needs an OpenCL device (CLHIP_REQUIRE_OPENCL=1 makes its absence a failure).

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use clhip::model::{
    Api, Case, ClDeviceRef, Expectation, Op, Outcome, Pair, PathKind, Peer, SyncMode,
};
use clhip::pairs;
use clhip::probe::Probe;
use clhip::runner::{self, Planned, RunOptions};
use clhip::runtimes::hip::ffi::HIP_SYMBOLS;

const DEBIAN_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
const DEBIAN_HSA: &str = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// The stubs are built with `cc`: without it the test is ignored (failed under
/// CLHIP_REQUIRE_HIP=1).
fn need_cc() {
    support::need_tool("cc", "CLHIP_REQUIRE_HIP");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-installs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Build `src` into `out` as a shared object with `soname`.
fn cc(src: &str, out: &Path, soname: &str) {
    let c = out.with_extension("c");
    std::fs::write(&c, src).expect("writing the stub source");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .arg(&c)
        .arg(format!("-Wl,-soname,{soname}"))
        .status()
        .expect("running cc");
    assert!(status.success(), "cc failed for {}", out.display());
    std::fs::remove_file(&c).expect("removing the stub source");
}

/// A libamdhip64 of HIP version `raw` (hipRuntimeGetVersion's encoding) with no device.
fn stub_hip(raw: i32) -> String {
    let mut s = String::from("#include <stdlib.h>\n");
    for (_, name) in HIP_SYMBOLS {
        s.push_str(&match *name {
            "hipRuntimeGetVersion" | "hipDriverGetVersion" => {
                format!("int {name}(int* v) {{ *v = {raw}; return 0; }}\n")
            }
            "hipGetDeviceCount" => format!("int {name}(int* n) {{ *n = 0; return 100; }}\n"),
            "hipGetErrorName" => format!(
                "const char* {name}(int e) {{ return e == 100 ? \"hipErrorNoDevice\" : \"hipErrorUnknown\"; }}\n"
            ),
            _ => format!("int {name}(void) {{ abort(); }}\n"),
        });
    }
    s
}

/// A fake ROCm root `dir` whose lib/ holds a stub libamdhip64 under ROCm's file name `file`,
/// with the soname link `soname` to it.
fn stub_install(dir: &Path, raw: i32, file: &str, soname: &str) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).expect("lib dir");
    cc(&stub_hip(raw), &lib.join(file), soname);
    std::os::unix::fs::symlink(file, lib.join(soname)).expect("soname link");
    dir.to_path_buf()
}

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .expect("clhip runs")
}

fn probe(roots: &[&Path]) -> Probe {
    let mut args = vec!["probe".to_string(), "--json".to_string()];
    for r in roots {
        args.extend(["--rocm-path".to_string(), r.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = clhip(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("probe JSON")
}

const NO_DEVICE: &str =
    "unsupported: no HIP device (hipGetDeviceCount returned hipErrorNoDevice (100))";

fn each_install_is_probed_apart_labelled_by_version_with_its_own_reason() {
    need_cc();
    let tmp = scratch("probe");
    let old = stub_install(
        &tmp.join("rocm-6.3.2"),
        60_342_134,
        "libamdhip64.so.6.3.60302",
        "libamdhip64.so.6",
    );
    let new = stub_install(
        &tmp.join("rocm-7.0.0"),
        70_051_831,
        "libamdhip64.so.7.0.70000",
        "libamdhip64.so.7",
    );
    // The new install brings its own ROCm OpenCL (present, not loaded here).
    std::fs::write(new.join("lib/libamdocl64.so"), b"").expect("OpenCL placeholder");
    let mut roots = vec![old.as_path(), new.as_path()];
    let debian = tmp.join("debian");
    if Path::new(DEBIAN_HIP).exists() {
        std::fs::create_dir_all(debian.join("lib")).expect("lib dir");
        std::os::unix::fs::symlink(DEBIAN_HIP, debian.join("lib/libamdhip64.so.5")).expect("link");
        roots.push(&debian);
    } else {
        assert!(
            !required("CLHIP_REQUIRE_HIP"),
            "CLHIP_REQUIRE_HIP=1 but no {DEBIAN_HIP}"
        );
    }

    let p = probe(&roots);
    let labels: Vec<&str> = p.hip_installs.iter().map(|i| i.label.as_str()).collect();
    let want = ["6.3.2", "7.0.0", "5.2.21153"];
    assert_eq!(labels, want[..roots.len()]);
    for (install, root) in p.hip_installs.iter().zip(&roots) {
        eprintln!(
            "hip@{}: {} ({:?})",
            install.label, install.runtime.status, install.runtime.library
        );
        assert_eq!(install.root, *root);
        assert!(
            install.runtime.status.starts_with(NO_DEVICE),
            "{}",
            install.runtime.status
        );
        assert!(install.runtime.devices.is_empty());
        // Each was loaded from its own root, in a process of its own.
        let lib = install.runtime.library.as_deref().unwrap_or_default();
        if install.label == "5.2.21153" {
            assert!(lib.ends_with("libamdhip64.so.5.2.21153"), "{lib}");
        } else {
            assert!(lib.starts_with(&root.display().to_string()), "{lib}");
        }
    }
    assert_eq!(p.hip_installs[0].opencl_library, None);
    assert_eq!(
        p.hip_installs[1].opencl_library.as_deref(),
        Some(
            new.join("lib/libamdocl64.so")
                .display()
                .to_string()
                .as_str()
        )
    );
    assert!(p.hip.status.contains("ROCm installs"), "{}", p.hip.status);
    // Without a device no install has a pair: nothing of theirs is planned.
    assert!(
        pairs::from_probe(&p)
            .iter()
            .all(|pair| pair.peer.api != Api::Hip)
    );
    // The results file's fingerprint lists each install's runtime.
    let fp = p.fingerprint();
    let apis: Vec<&str> = fp.runtimes.iter().map(|r| r.api.as_str()).collect();
    let want_apis = ["hip@6.3.2", "hip@7.0.0", "hip@5.2.21153", "cuda"];
    assert_eq!(apis[..roots.len()], want_apis[..roots.len()]);
    // After the installs: CUDA, then the Vulkan broker.
    assert_eq!(apis[apis.len().saturating_sub(2)..], ["cuda", "vulkan"]);
    assert!(
        fp.lines()
            .contains(&"hip@7.0.0 version: 7.0.51831 (ABI V7)".to_string()),
        "{:#?}",
        fp.lines()
    );

    // What a person reads.
    let o = clhip(&[
        "probe",
        "--rocm-path",
        &old.display().to_string(),
        "--rocm-path",
        &new.display().to_string(),
    ]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    eprintln!("{text}");
    for want in [
        format!(
            "hip@6.3.2: {NO_DEVICE}\n  install            {}\n",
            old.display()
        ),
        format!(
            "hip@7.0.0: {NO_DEVICE}\n  install            {}\n",
            new.display()
        ),
        format!(
            "  ROCm OpenCL        {}/lib/libamdocl64.so\n",
            new.display()
        ),
        "  runtime version    6.3.42134 (ABI V6)\n".to_string(),
        "  runtime version    7.0.51831 (ABI V7)\n".to_string(),
    ] {
        assert!(text.contains(&want), "{want:?} not in the probe:\n{text}");
    }

    // Two installs of one version are told apart.
    let twin = tmp.join("rocm-6.3.2-again");
    stub_install(
        &twin,
        60_342_134,
        "libamdhip64.so.6.3.60302",
        "libamdhip64.so.6",
    );
    let p = probe(&[&old, &twin]);
    let labels: Vec<&str> = p.hip_installs.iter().map(|i| i.label.as_str()).collect();
    assert_eq!(labels, ["6.3.2~1", "6.3.2~2"]);

    // One --rocm-path is what it always was: `hip`, no installs, ids without a label.
    let p = probe(&[&new]);
    assert!(p.hip_installs.is_empty());
    assert!(p.hip.status.starts_with(NO_DEVICE), "{}", p.hip.status);
    assert!(
        p.hip
            .library
            .as_deref()
            .is_some_and(|l| l.starts_with(&new.display().to_string()))
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

fn each_install_s_cases_run_in_workers_that_load_that_install() {
    need_cc();
    let tmp = scratch("workers");
    let old = stub_install(
        &tmp.join("rocm-6.3.2"),
        60_342_134,
        "libamdhip64.so.6.3.60302",
        "libamdhip64.so.6",
    );
    let new = stub_install(
        &tmp.join("rocm-7.0.0"),
        70_051_831,
        "libamdhip64.so.7.0.70000",
        "libamdhip64.so.7",
    );
    let p = probe(&[&old, &new]);
    let Some(cl) = p.platforms.iter().flat_map(|pl| &pl.devices).next() else {
        support::ignore("CLHIP_REQUIRE_OPENCL", "no OpenCL device");
    };
    // The pairs a GPU would make: no stub claims a device, and the OpenCL device here has no
    // UUID or PCI bus id to pair by, so the pairs are made as pairing would make them.
    let plan: Vec<Planned> = p
        .hip_installs
        .iter()
        .map(|install| {
            let pair = Pair {
                opencl: ClDeviceRef {
                    platform_index: cl.platform_index,
                    device_index: cl.device_index,
                    label: cl.label.clone(),
                },
                peer: Peer {
                    api: Api::Hip,
                    ordinal: 0,
                },
                install: Some(install.label.clone()),
                cl_gpu: None,
            };
            let case = Case {
                pair,
                path: PathKind::Copy,
                sync: SyncMode::Finish,
                op: Op::Handoff,
                n: 64,
                env: Default::default(),
            };
            let mut planned = Planned::case(case.clone(), Expectation::Pass);
            planned.env = pairs::worker_env(&p, &case.pair);
            planned
        })
        .collect();
    let ids: Vec<&str> = plan.iter().map(|p| p.id.as_str()).collect();
    let label = &cl.label;
    assert_eq!(
        ids,
        [
            format!("{label}+hip@6.3.2:0/copy/finish/handoff/n=64"),
            format!("{label}+hip@7.0.0:0/copy/finish/handoff/n=64"),
        ]
    );
    let mut opts = RunOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_clhip")), 1);
    opts.timeout = Duration::from_secs(120);
    opts.startup_timeout = opts.timeout;
    let end = runner::run(plan, &opts, &mut |_| {}).expect("the run");
    assert_eq!(end.results.len(), 2, "{:?}", end.not_run);
    for (r, (mine, other)) in end.results.iter().zip([(&old, &new), (&new, &old)]) {
        let reason = r.outcome.reason();
        eprintln!("{}: {} {reason}", r.id, r.outcome.kind());
        // The worker loaded its own install's HIP, found no device there, and said which file.
        assert!(
            matches!(r.outcome, Outcome::Unsupported { .. }),
            "{}: {reason}",
            r.id
        );
        assert!(reason.contains("hipErrorNoDevice (100)"), "{reason}");
        assert!(
            reason.contains(&format!("{}/lib/libamdhip64.so.", mine.display())),
            "{reason}"
        );
        assert!(!reason.contains(&other.display().to_string()), "{reason}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

fn hip_over_another_install_s_hsa_runtime_is_a_mixed_install() {
    for lib in [DEBIAN_HIP, DEBIAN_HSA] {
        if !Path::new(lib).exists() {
            support::ignore(
                "CLHIP_REQUIRE_HIP",
                format!("no {lib} (Debian: libamdhip64-5)"),
            );
        }
    }
    need_cc();
    let tmp = scratch("hsa");
    // Root A: Debian's HIP beside an HSA runtime of its own that nothing loads. The loader
    // gives HIP Debian's HSA runtime, as it gives a second install's HIP the HSA runtime its
    // ROCm OpenCL already mapped.
    let a = tmp.join("a/lib");
    std::fs::create_dir_all(&a).expect("lib dir");
    std::os::unix::fs::symlink(DEBIAN_HIP, a.join("libamdhip64.so.5")).expect("link");
    cc(
        "int clhip_stub_hsa(void) { return 0; }\n",
        &a.join("libhsa-runtime64.so.1"),
        "libhsa-runtime64.so.1",
    );
    // Root B: the same HIP with the HSA runtime it does run on.
    let b = tmp.join("b/lib");
    std::fs::create_dir_all(&b).expect("lib dir");
    std::os::unix::fs::symlink(DEBIAN_HIP, b.join("libamdhip64.so.5")).expect("link");
    std::os::unix::fs::symlink(DEBIAN_HSA, b.join("libhsa-runtime64.so.1")).expect("link");

    let mapped_hsa = std::fs::canonicalize(DEBIAN_HSA).expect("Debian's HSA runtime");
    match clhip::runtimes::hip::load(Some(&tmp.join("a"))) {
        Err(clhip::model::CaseError::Unsupported { reason, .. }) => {
            eprintln!("root A: {reason}");
            assert!(
                reason.starts_with("mixed ROCm install: HIP of "),
                "{reason}"
            );
            assert!(
                reason.contains(&mapped_hsa.display().to_string()),
                "{reason}"
            );
            assert!(
                reason.contains(&a.join("libhsa-runtime64.so.1").display().to_string()),
                "{reason}"
            );
        }
        Err(other) => panic!("root A: expected a mixed install, got {other:?}"),
        Ok(hip) => panic!("root A: HIP accepted over another install's HSA runtime: {hip:?}"),
    }
    // The same library over its own install's HSA runtime loads.
    match clhip::runtimes::hip::load(Some(&tmp.join("b"))) {
        Ok(hip) => assert_eq!(hip.install_dir, b),
        Err(e) => panic!("root B is one install, yet: {e:?}"),
    }
    // And the device peer says the same, through its own loading.
    match clhip::runtimes::hip::HipPeer::open(0, Some(&tmp.join("a"))) {
        Err(clhip::model::CaseError::Unsupported { reason, .. }) => {
            assert!(reason.starts_with("mixed ROCm install: "), "{reason}")
        }
        other => panic!("HipPeer over root A: {:?}", other.err()),
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

tests!(
    each_install_is_probed_apart_labelled_by_version_with_its_own_reason,
    each_install_s_cases_run_in_workers_that_load_that_install,
    hip_over_another_install_s_hsa_runtime_is_a_mixed_install
);
