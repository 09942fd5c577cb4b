//! One GPU per HIP worker, and a peer held to its GPU, against real processes: the real
//! runner and worker over a stub ROCm install built here with `cc`. The stub's libamdhip64
//! behaves as HIP does under `HIP_VISIBLE_DEVICES` (rocclr's `Device::init`): it sees the
//! listed GPUs only, numbered 0, 1, ... in the list's order, each with the PCI bus id of the
//! GPU it is (`0000:0N:00.0` for the host's GPU N; four GPUs when nothing is listed), and it
//! writes what it was asked to a log. It has no hiprtc, so a peer opens and then fails its
//! known-answer check: far enough to show which device the worker opened.
//!
//! - A case of `pocl0+hip2`: its worker sees GPU 2 alone, opens it as its device 0, and the
//!   result keeps the run's id (`hip2`).
//! - A case across GPUs (`pocl0+hip3.xgpu`, OpenCL's GPU being hip1): its worker sees GPUs 1
//!   and 3, and opens 3 as its device 1.
//! - The wrong-gpu plant (the peer opens OpenCL's GPU in its place) is a harness error naming
//!   both GPUs' PCI bus ids, as the probe saw them and as the worker found them.
//!
//! NOT run on AMD hardware: what a real HIP does under `HIP_VISIBLE_DEVICES` is taken from
//! ROCm/clr's source (docs/rocm.md). Without a C compiler the test is reported ignored, unless
//! CLHIP_REQUIRE_HIP=1; without an OpenCL device too, unless CLHIP_REQUIRE_OPENCL=1.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clhip::model::{
    Api, Case, ClDeviceRef, Expectation, Op, Outcome, Pair, PathKind, Peer, SyncMode,
};
use clhip::probe::Probe;
use clhip::runner::{self, CaseResult, Planned, RunOptions};
use clhip::runtimes::hip::ffi::HIP_SYMBOLS;

#[macro_use]
mod support;

/// What the stub's calls do; every other symbol returns hipSuccess.
const STUB_BODIES: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(const char* what, int n) {
    const char* log = getenv("CLHIP_STUB_HIP_LOG");
    if (!log) return;
    FILE* f = fopen(log, "a");
    if (!f) return;
    const char* v = getenv("HIP_VISIBLE_DEVICES");
    fprintf(f, "%s %d HIP_VISIBLE_DEVICES=%s\n", what, n, v ? v : "(unset)");
    fclose(f);
}

/* The host's GPU that visible device `dev` is, or -1. */
static int host_gpu(int dev) {
    const char* v = getenv("HIP_VISIBLE_DEVICES");
    if (!v || !*v) return dev < 4 ? dev : -1;
    const char* p = v;
    for (int i = 0; *p; i++) {
        int n = atoi(p);
        if (i == dev) return n;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    return -1;
}

int hipRuntimeGetVersion(int* v) { *v = 60342134; return 0; }
int hipDriverGetVersion(int* v) { *v = 60342134; return 0; }
int hipGetDeviceCount(int* n) {
    int count = 0;
    while (host_gpu(count) >= 0) count++;
    *n = count;
    say("count", count);
    return 0;
}
const char* hipGetErrorName(int e) { return e == 101 ? "hipErrorInvalidDevice" : "hipErrorUnknown"; }
int hipDeviceGetName(char* name, int len, int dev) {
    if (host_gpu(dev) < 0) return 101;
    snprintf(name, len, "Stub GPU %d", host_gpu(dev));
    return 0;
}
int hipDeviceGetPCIBusId(char* bus, int len, int dev) {
    if (host_gpu(dev) < 0) return 101;
    snprintf(bus, len, "0000:%02x:00.0", host_gpu(dev));
    return 0;
}
int hipDeviceGetUuid(unsigned char* uuid, int dev) {
    if (host_gpu(dev) < 0) return 101;
    memset(uuid, 0, 16);
    uuid[15] = (unsigned char)host_gpu(dev);
    return 0;
}
int hipSetDevice(int dev) {
    say("set", dev);
    return host_gpu(dev) < 0 ? 101 : 0;
}
static char heap[4096];
int hipMalloc(void** p, size_t n) { (void)n; *p = heap; return 0; }
"#;

/// A libamdhip64 of HIP 6.3 (ABI V6) as [`STUB_BODIES`] says.
fn stub_hip() -> String {
    let mut s = String::from(STUB_BODIES);
    for (_, name) in HIP_SYMBOLS {
        if !STUB_BODIES.contains(&format!(" {name}(")) {
            s.push_str(&format!("int {name}(void) {{ return 0; }}\n"));
        }
    }
    s
}

/// A fake ROCm 6.3.2 root under `dir` whose lib/ holds the stub.
fn stub_install(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).expect("lib dir");
    let file = lib.join("libamdhip64.so.6.3.60302");
    let c = lib.join("stub.c");
    std::fs::write(&c, stub_hip()).expect("writing the stub source");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&file)
        .arg(&c)
        .arg("-Wl,-soname,libamdhip64.so.6")
        .status()
        .expect("running cc");
    assert!(status.success(), "cc failed");
    std::os::unix::fs::symlink("libamdhip64.so.6.3.60302", lib.join("libamdhip64.so.6"))
        .expect("soname link");
    dir.to_path_buf()
}

fn probe(root: &Path) -> Probe {
    let o = Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(["probe", "--json", "--rocm-path"])
        .arg(root)
        .env_remove("HIP_VISIBLE_DEVICES")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .expect("clhip runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("probe JSON")
}

/// Runs `pair`'s copy case through the real runner, its worker under the environment the
/// plan gives the pair, with `plant`; its one result and what the stub was asked.
fn run_case(
    tmp: &Path,
    root: &Path,
    p: &Probe,
    pair: Pair,
    plant: Option<&str>,
) -> (CaseResult, String) {
    let log = tmp.join(format!("{}-{}.log", pair.id(), plant.unwrap_or("none")));
    let case = Case {
        pair,
        path: PathKind::Copy,
        sync: SyncMode::Finish,
        op: Op::Handoff,
        n: 64,
        env: Default::default(),
    };
    let mut planned = Planned::case(case.clone(), Expectation::Unbaselined);
    planned.env = clhip::plan::worker_env(p, &case.pair);
    let mut opts = RunOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_clhip")), 1);
    opts.timeout = Duration::from_secs(120);
    opts.startup_timeout = opts.timeout;
    opts.worker_args
        .extend(["--rocm-path".to_string(), root.display().to_string()]);
    if let Some(plant) = plant {
        opts.worker_args
            .extend(["--plant".to_string(), plant.to_string()]);
    }
    opts.worker_env
        .push(("CLHIP_STUB_HIP_LOG".into(), log.display().to_string()));
    let end = runner::run(vec![planned], &opts, &mut |_| {}).expect("the run");
    assert_eq!(end.results.len(), 1, "{:?}", end.not_run);
    let r = end.results.into_iter().next().expect("one result");
    eprintln!("{}: {} {}", r.id, r.outcome.kind(), r.outcome.reason());
    let asked = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!("{asked}");
    (r, asked)
}

fn hip(ordinal: usize) -> Peer {
    Peer {
        api: Api::Hip,
        ordinal,
    }
}

fn a_hip_worker_sees_its_pair_s_gpus_and_opens_the_one_the_probe_saw() {
    support::need_tool("cc", "CLHIP_REQUIRE_HIP");
    let tmp = std::env::temp_dir().join(format!("clhip-visible-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let root = stub_install(&tmp.join("rocm-6.3.2"));
    let p = probe(&root);
    // The probe sees every GPU, each as itself.
    let pci: Vec<&str> = p
        .hip
        .devices
        .iter()
        .map(|d| d.pci_bus_id.as_str())
        .collect();
    assert_eq!(
        pci,
        [
            "0000:00:00.0",
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:03:00.0"
        ],
        "{}",
        p.hip.status
    );
    let Some(cl) = p.platforms.iter().flat_map(|pl| &pl.devices).next() else {
        support::ignore("CLHIP_REQUIRE_OPENCL", "no OpenCL device");
    };
    // The pairs a GPU would make: the OpenCL device here is no stub GPU's twin, so they are
    // made as pairing would make them.
    let pair = |peer: Peer, cl_gpu: Option<usize>| Pair {
        opencl: ClDeviceRef {
            platform_index: cl.platform_index,
            device_index: cl.device_index,
            label: cl.label.clone(),
        },
        peer,
        install: None,
        cl_gpu,
    };
    let label = &cl.label;
    let known_answer = |r: &CaseResult, peer: &str| {
        assert!(
            matches!(&r.outcome, Outcome::Skip { reason }
                if reason.starts_with(&format!("{peer} failed its known-answer check"))),
            "{}: {}",
            r.id,
            r.outcome.reason()
        );
    };

    // One GPU: the worker sees GPU 2 alone, as its device 0; the result is hip2's.
    let (r, asked) = run_case(&tmp, &root, &p, pair(hip(2), None), None);
    assert_eq!(r.id, format!("{label}+hip2/copy/finish/handoff/n=64"));
    known_answer(&r, "hip2");
    assert!(asked.contains("count 1 HIP_VISIBLE_DEVICES=2\n"), "{asked}");
    assert!(asked.contains("set 0 HIP_VISIBLE_DEVICES=2\n"), "{asked}");
    assert!(!asked.contains("(unset)"), "{asked}");

    // Across GPUs: GPUs 1 and 3, the peer's (3) as device 1.
    let (r, asked) = run_case(&tmp, &root, &p, pair(hip(3), Some(1)), None);
    assert_eq!(r.id, format!("{label}+hip3.xgpu/copy/finish/handoff/n=64"));
    known_answer(&r, "hip3");
    assert!(
        asked.contains("count 2 HIP_VISIBLE_DEVICES=1,3\n"),
        "{asked}"
    );
    assert!(asked.contains("set 1 HIP_VISIBLE_DEVICES=1,3\n"), "{asked}");

    // The peer on OpenCL's GPU instead of its own: caught before it computes anything.
    let (r, _) = run_case(&tmp, &root, &p, pair(hip(3), Some(1)), Some("wrong-gpu"));
    let reason = r.outcome.reason();
    assert!(
        matches!(r.outcome, Outcome::Error { .. }),
        "{}: {reason}",
        r.id
    );
    assert!(
        reason.contains("a peer on the wrong GPU: hip3 opened Stub GPU 1")
            && reason.contains("PCI bus id 0000:01:00.0")
            && reason.contains("PCI bus id 0000:03:00.0"),
        "{reason}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

tests!(a_hip_worker_sees_its_pair_s_gpus_and_opens_the_one_the_probe_saw);
