//! `clhip repro`: the C generator is clhip's generator bit for bit for every data kind, a
//! host-pair reproducer passes on PoCL and its planted twin (the sync left out) sees the stale
//! read, a reuse reproducer is one loop that passes and fails at the crossing clhip fails at,
//! every covered case builds (cuda ones against stand-in headers of the CUDA API, hip ones
//! with hipcc), the common cases stay short, shrinking runs smaller sizes and simpler data
//! through clhip's workers (which take the data override), and what the generator does not
//! cover is refused by name.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clhip::generate::DataKind;
use clhip::model::{Api, Op, PathKind};
use clhip::paths::PathFacts;
use clhip::repro::{self, Header, ReproCase};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-repro-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cc` over `args`, panicking with its output on failure.
fn cc(args: &[&str], dir: &Path) {
    support::need_tool("cc", "CLHIP_REQUIRE_CC");
    let o = Command::new("cc")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "cc {args:?}\n{}", text(&o));
}

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .output()
        .unwrap()
}

/// A header as a probe fills it (four fingerprint lines, as on PoCL).
fn header() -> Header {
    Header {
        seed: 0x5EED,
        seen: Some((clhip::model::OutcomeKind::Pass, String::new())),
        seen_from: "a run of this build on this machine".into(),
        shrink: "not shrunk: clhip saw a pass at n=4096".into(),
        data: "not simplified: clhip saw a pass".into(),
        fingerprint: vec![
            "opencl pocl0 driver: 3.1 (Portable Computing Language, OpenCL 3.0 PoCL 3.1)".into(),
            "kernel module: none".into(),
            "host cpu: AMD EPYC".into(),
            "os kernel: 6.1.0".into(),
        ],
        fingerprint_from: "probed on this machine".into(),
        facts: Vec::new(),
    }
}

fn the_c_generator_is_clhips_generator_bit_for_bit() {
    use clhip::generate;
    for kind in [DataKind::Seeded].into_iter().chain(DataKind::SIMPLE) {
        let dir = scratch(&format!("generator-{kind}"));
        let mut main = String::from(
            "static void dump(const float *v, size_t n)\n{\n    for (size_t i = 0; i < n; i++) {\n        uint32_t w;\n        memcpy(&w, &v[i], 4);\n        printf(\"%08x\\n\", w);\n    }\n}\n\nint main(void)\n{\n    size_t info;\n",
        );
        let mut want: Vec<u32> = Vec::new();
        let words = |v: &[num_complex::Complex32]| -> Vec<u32> {
            v.iter()
                .flat_map(|z| [z.re.to_bits(), z.im.to_bits()])
                .collect()
        };
        // Seeds as the runs make them (a data seed uses all 64 bits), sizes across the
        // keystream's 64-byte blocks and generate's 4096-element fills.
        let seeds = [0u64, 7, 0xdc04_292b_62c5_3b42, u64::MAX];
        for &seed in &seeds {
            for n in [1usize, 2, 5, 4097, 70_001] {
                main.push_str(&format!(
                    "    dump(complex_vec({seed}ull, {n}), {});\n",
                    2 * n
                ));
                want.extend(words(&generate::complex_vec_of(kind, seed, n)));
            }
            for n in [1usize, 3, 33] {
                main.push_str(&format!(
                    "    dump(matrix({seed}ull, {n}), {});\n",
                    2 * n * n
                ));
                want.extend(words(&generate::matrix_of(kind, seed, n, n)));
                main.push_str(&format!(
                    "    dump(hpd_matrix({seed}ull, {n}), {});\n",
                    2 * n * n
                ));
                want.extend(words(&generate::hpd_matrix_of(kind, seed, n, n)));
                main.push_str(&format!(
                    "    dump(non_hpd_matrix({seed}ull, {n}, &info), {});\n    printf(\"%08x\\n\", (unsigned)info);\n",
                    2 * n * n
                ));
                let (m, info) = generate::non_hpd_matrix_of(kind, seed, n, n);
                want.extend(words(&m));
                want.push(info as u32);
            }
            let s = seed as u32;
            for i in [0u32, 1, 12345, u32::MAX] {
                main.push_str(&format!(
                    "    printf(\"%08x\\n\", pattern_word({s}u, {i}u));\n"
                ));
                want.push(generate::pattern_word(s, i));
            }
            // The reuse op's crossing seeds, both halves of the data seed folded in.
            for k in [0usize, 1, 499, 500, 1999] {
                main.push_str(&format!(
                    "    printf(\"%08x\\n\", crossing_seed({seed}ull, {k}u));\n"
                ));
                want.push(clhip::ops::reuse::crossing_seed(seed, k));
            }
        }
        main.push_str("    return 0;\n}\n");
        let source = format!("{}\n{main}", repro::generator_source(kind));
        std::fs::write(dir.join("gen.c"), source).unwrap();
        cc(
            &[
                "-O2",
                "-std=gnu11",
                "-Wall",
                "-Werror",
                "-o",
                "gen",
                "gen.c",
                "-lm",
            ],
            &dir,
        );
        let out = Command::new(dir.join("gen")).output().unwrap();
        assert!(out.status.success(), "{kind}: {}", text(&out));
        let got: Vec<u32> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| u32::from_str_radix(l, 16).unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "{kind}");
        // Bit for bit, every word, the signs of zeros included (generate adds +0 to the HPD
        // product's entries, so an exact zero is +0 whatever order faer summed in).
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "{kind}: word {i} of {}: C {:#010x}, Rust {:#010x}",
                want.len(),
                got[i],
                want[i]
            );
        }
    }
    // A non-HPD matrix's info varies with the seed (each stream's last draw is covered).
    let infos: std::collections::BTreeSet<usize> = (0..20)
        .map(|s| clhip::generate::non_hpd_matrix(s, 33, 33).1)
        .collect();
    assert!(infos.len() > 3, "{infos:?}");
}

/// Builds and runs the reproducer in `dir`; its exit code and output.
fn build_and_run(dir: &Path) -> (i32, String) {
    let b = Command::new("sh")
        .arg(dir.join("build.sh"))
        .output()
        .unwrap();
    assert!(
        b.status.success(),
        "build.sh in {}\n{}",
        dir.display(),
        text(&b)
    );
    let r = Command::new(dir.join("repro")).output().unwrap();
    let code = r.status.code().unwrap_or(-1);
    (code, text(&r))
}

fn a_host_reproducer_passes_and_its_planted_twin_sees_the_stale_read() {
    support::opencl_device();
    let dir = scratch("host-pass");
    // A 2^20-point FFT is many kernel passes: with the sync left out the host reads long
    // before they are done (as tests/planted.rs's skip-sync plant on clhip itself shows).
    let case = "pocl0+host/use-host-ptr/map/fft/n=1048576";
    let out = clhip(&["repro", case, "-o", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let source = std::fs::read_to_string(dir.join("repro.c")).unwrap();
    assert!(source.contains(&format!("clhip reproducer for {case}")));
    assert!(source.contains("Outcome clhip saw (a run of this build on this machine): pass"));
    assert!(source.contains("rocFFT clients shared/accuracy_test.h"));
    assert!(!source.contains("clhip::") && !source.contains("libclhip"));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("opencl pocl0 driver:"),
        "no fingerprint: {readme}"
    );
    assert!(
        readme.contains(&format!("clhip reproducer for {case}")),
        "{readme}"
    );
    let (code, run) = build_and_run(&dir);
    assert_eq!(code, 0, "{run}");
    assert!(run.contains("PASS"), "{run}");

    let planted = scratch("host-planted");
    let out = clhip(&[
        "repro",
        case,
        "--no-shrink",
        "--plant",
        "skip-sync",
        "-o",
        planted.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let source = std::fs::read_to_string(planted.join("repro.c")).unwrap();
    assert!(source.contains("PLANTED"), "{source}");
    let (code, run) = build_and_run(&planted);
    assert_eq!(code, 1, "a stale read is wrong data: {run}");
    assert!(run.contains("FAIL:") && run.contains("first at ["), "{run}");
}

/// The hex word after `label` in `text` (`want 0x84b0083e`).
fn word_after(text: &str, label: &str) -> String {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no `{label}` in:\n{text}"));
    text[at + label.len()..].chars().take(10).collect()
}

/// The reuse op's reproducers on PoCL: the 2,000 crossings are one loop over a round trip,
/// each with its own pattern, and pass where clhip passes. Planted as clhip plants it
/// (skip-one-sync: crossing 500 handed over with no sync while OpenCL's write is held back),
/// each fails at crossing 500 and there only, with clhip's words and clhip's words seen and
/// wanted. A peer's write gone wrong at three round trips, edited into the program, fails at
/// the first of them as OpenCL reads it, counting three.
fn a_reuse_reproducer_loops_agrees_and_fails_at_the_planted_crossing() {
    support::opencl_device();
    for id in [
        "pocl0+host/copy/finish/reuse/n=4097",
        "pocl0+host/use-host-ptr/map/reuse/n=4097",
    ] {
        let name = id.replace(['/', '+', '='], "_");
        let dir = scratch(&format!("reuse-{name}"));
        let out = clhip(&["repro", id, "--no-shrink", "-o", dir.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        let source = std::fs::read_to_string(dir.join("repro.c")).unwrap();
        assert!(
            source.contains("Outcome clhip saw (a run of this build on this machine): pass"),
            "{source}"
        );
        assert!(source.contains(
            "enum { ROUND_TRIPS = 1000, CROSSINGS = 2000, STOP_AFTER_FAILED_READS = 8 };"
        ));
        // One round trip, written once: the peer's check and write, OpenCL's check.
        for step in [
            "peer_check_pattern(m_peer, crossing_seed(SEED, 2 * r), peer_seen[r]);",
            "peer_fill_pattern(m_peer, crossing_seed(SEED, 2 * r + 1));",
            "checked = cl_check_pattern_slot(",
        ] {
            assert_eq!(source.matches(step).count(), 1, "{id}: {step}\n{source}");
        }
        let (code, run) = build_and_run(&dir);
        assert_eq!(code, 0, "{id}: {run}");
        assert!(
            run.contains("PASS: 8194 words bit-exact across 2000 crossings of one buffer"),
            "{id}: {run}"
        );

        let planted = scratch(&format!("reuse-planted-{name}"));
        let out = clhip(&[
            "repro",
            id,
            "--no-shrink",
            "--plant",
            "skip-one-sync",
            "-o",
            planted.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let source = std::fs::read_to_string(planted.join("repro.c")).unwrap();
        let at = "crossing 500 of 2000: pattern written by OpenCL, read by host (the only failing crossing): 8194 of 8194 words differ (bit-exact), first at [0]";
        let seen = format!("Outcome clhip saw (a run of this build on this machine): fail: {at}");
        assert!(source.contains(&seen), "{id}: {source}");
        assert!(source.contains("PLANTED (skip-one-sync)"), "{source}");
        let (code, run) = build_and_run(&planted);
        assert_eq!(code, 1, "{id}: the planted crossing is wrong data: {run}");
        assert!(run.contains(&format!("FAIL: {at}")), "{id}: {run}");
        for label in ["got ", "want "] {
            assert_eq!(
                word_after(&run, label),
                word_after(&source, label),
                "{id}: the word {label}at crossing 500, by the program and by clhip"
            );
        }

        // The peer writes the next crossing's pattern at round trips 600 to 602: OpenCL's
        // checks of crossings 1201, 1203 and 1205 must see it.
        let edited = scratch(&format!("reuse-edited-{name}"));
        let source = std::fs::read_to_string(dir.join("repro.c")).unwrap().replace(
            "peer_fill_pattern(m_peer, crossing_seed(SEED, 2 * r + 1));",
            "peer_fill_pattern(m_peer, crossing_seed(SEED, 2 * r + 1 + (r >= 600 && r < 603)));",
        );
        std::fs::write(edited.join("repro.c"), source).unwrap();
        std::fs::copy(dir.join("build.sh"), edited.join("build.sh")).unwrap();
        let (code, run) = build_and_run(&edited);
        assert_eq!(code, 1, "{id}: {run}");
        assert!(
            run.contains(
                "FAIL: crossing 1201 of 2000: pattern written by host, read by OpenCL (the first of 3 failing crossings, the last 1205): "
            ) && run.contains("first at [0]"),
            "{id}: {run}"
        );
    }
}

/// Every (path, sync) the generator covers for `api`, with an op.
fn covered(cl: &str, api: Api, ops: &[Op], n: impl Fn(Op) -> usize) -> Vec<ReproCase> {
    let peer = match api {
        Api::Host => "host",
        Api::Hip => "hip0",
        _ => "cuda0",
    };
    let mut out = Vec::new();
    for &path in PathKind::ALL {
        if !path.applies_to(api) {
            continue;
        }
        for &sync in path.syncs(api) {
            for &op in ops {
                let id = format!("{cl}+{peer}/{path}/{sync}/{op}/n={}", n(op));
                let case = ReproCase::parse(&id).unwrap();
                if repro::check_covered(&case).is_ok() {
                    out.push(case);
                }
            }
        }
    }
    out
}

fn every_host_case_builds_and_the_synced_ones_pass_on_pocl() {
    support::opencl_device();
    let host_ops = [Op::Handoff, Op::Fft, Op::Pipeline, Op::Reuse];
    let cases = covered("pocl0", Api::Host, &host_ops, |op| {
        if matches!(op, Op::Handoff | Op::Reuse) {
            1000
        } else {
            512
        }
    });
    // Every host path and sync with every host op: what the rooms say the generator covers
    // (48 when the four host paths had it).
    let want: usize = PathKind::ALL
        .iter()
        .filter(|p| p.has_reproducer(Api::Host))
        .map(|p| host_ops.len() * p.syncs(Api::Host).len())
        .sum();
    assert!(want >= 48, "{want}");
    assert_eq!(cases.len(), want, "{cases:?}");
    // And each simple data kind, on the ops that have data.
    let mut runs: Vec<(ReproCase, DataKind)> = cases
        .iter()
        .map(|c| (c.clone(), DataKind::Seeded))
        .collect();
    for kind in DataKind::SIMPLE {
        for id in [
            "pocl0+host/cl-svm-fine/map/fft/n=512",
            "pocl0+host/use-host-ptr/map/pipeline/n=512",
        ] {
            runs.push((ReproCase::parse(id).unwrap(), kind));
        }
    }
    let mut failures = Vec::new();
    for (case, kind) in &runs {
        let dir = scratch(&format!("{case}-{kind}").replace(['/', '+', '='], "_"));
        repro::generate(case, *kind, &header(), None)
            .unwrap()
            .write(&dir)
            .unwrap();
        // Warning-free as well as built: no unused code, no implicit declaration.
        cc(
            &[
                "-std=gnu11",
                "-Wall",
                "-Werror",
                "-c",
                "-o",
                "/dev/null",
                "repro.c",
            ],
            &dir,
        );
        let (code, run) = build_and_run(&dir);
        // A negative control (no sync, USE_HOST_PTR without map) may see its race or not.
        let control = clhip::model::is_negative_control(case.path, case.sync);
        if code != 0 && !(control && code == 1) {
            failures.push(format!("{case} ({kind} data): exit {code}\n{run}"));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Stand-ins for the CUDA toolkit's headers, declaring what the reproducers call with the
/// toolkit's signatures, so the emitted C is compile-checked where no toolkit is installed
/// (tests/agreement.rs builds reproducers with them against tests/fixtures/gpu-stub).
const CUDA_STUBS: [(&str, &str); 4] = [
    ("cuda.h", include_str!("fixtures/gpu-stub/include/cuda.h")),
    ("nvrtc.h", include_str!("fixtures/gpu-stub/include/nvrtc.h")),
    (
        "cublas_v2.h",
        include_str!("fixtures/gpu-stub/include/cublas_v2.h"),
    ),
    (
        "cusolverDn.h",
        include_str!("fixtures/gpu-stub/include/cusolverDn.h"),
    ),
];

/// The plants a reproducer of `case` can carry: none, skip-sync, and skip-one-sync where
/// clhip plants it (a reuse case handed over by a wait or a map).
fn plants_of(case: &ReproCase) -> Vec<Option<clhip::ops::Plant>> {
    use clhip::ops::Plant;
    [None, Some(Plant::SkipSync), Some(Plant::SkipOneSync)]
        .into_iter()
        .filter(|&p| repro::check_plant(case, p).is_ok())
        .collect()
}

/// What cublas_v2.h and cusolverDn.h share (cublas_api.h, cuComplex.h, driver_types.h).
const CUBLAS_API_STUB: &str = include_str!("fixtures/gpu-stub/include/cublas_api.h");

fn every_cuda_case_compiles_against_the_cuda_api() {
    let dir = scratch("cuda-stubs");
    let include = dir.join("include");
    std::fs::create_dir_all(&include).unwrap();
    for (name, body) in CUDA_STUBS {
        std::fs::write(include.join(name), body).unwrap();
    }
    std::fs::write(include.join("cublas_api.h"), CUBLAS_API_STUB).unwrap();
    let ops = [
        Op::Handoff,
        Op::Fft,
        Op::Pipeline,
        Op::Gemm,
        Op::Cholesky,
        Op::Placement,
        Op::Reuse,
    ];
    let cases = covered("nvidia0", Api::Cuda, &ops, |op| match op {
        Op::Gemm | Op::Cholesky => 33,
        Op::Handoff | Op::Reuse => 4097,
        _ => 4096,
    });
    // The brief's paths: copy, pinned+use-host-ptr, device+use-host-ptr, cl-svm-coarse,
    // cl-svm-coarse+memcpy, device-ptr-as-cl-arg; each with every sync and op.
    for path in [
        PathKind::Copy,
        PathKind::PinnedUseHostPtr,
        PathKind::DeviceUseHostPtr,
        PathKind::ClSvmCoarse,
        PathKind::ClSvmCoarseMemcpy,
        PathKind::DevicePtrAsClArg,
    ] {
        for op in ops {
            assert!(
                cases.iter().any(|c| c.path == path && c.op == op),
                "{path} {op} not covered"
            );
        }
    }
    for case in &cases {
        // Simple data where the op has data (the handoff's pattern is the same either way).
        let simple = (!matches!(case.op, Op::Handoff | Op::Reuse))
            .then_some((None, DataKind::SmallIntegers));
        for (plant, kind) in plants_of(case)
            .into_iter()
            .map(|p| (p, DataKind::Seeded))
            .chain(simple)
        {
            let r = repro::generate(case, kind, &header(), plant).unwrap();
            assert!(r.build_sh.contains("nvcc") && r.build_sh.contains("-lcuda"));
            assert_eq!(r.build_sh.contains("-lcublas"), case.op == Op::Gemm);
            assert_eq!(r.build_sh.contains("-lcusolver"), case.op == Op::Cholesky);
            let file = dir.join("repro.c");
            std::fs::write(&file, &r.source).unwrap();
            support::need_tool("cc", "CLHIP_REQUIRE_CC");
            let o = Command::new("cc")
                // An object file, not -fsyntax-only: that skips the unused-function warning.
                .args(["-std=gnu11", "-c", "-o", "/dev/null", "-Wall", "-Werror"])
                .arg("-I")
                .arg(&include)
                .arg(&file)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{case} ({plant:?}, {kind} data):\n{}",
                text(&o)
            );
        }
    }
    // The four the NVIDIA acceptance runs read as their clhip counterparts do.
    let seeded = DataKind::Seeded;
    let crash =
        ReproCase::parse("nvidia0+cuda0/device+use-host-ptr/finish/handoff/n=4097").unwrap();
    let src = repro::generate(&crash, seeded, &header(), None)
        .unwrap()
        .source;
    let alloc = src.find("cuMemAlloc(&m_dev").unwrap();
    let wrap = src
        .find("CL_MEM_USE_HOST_PTR, 8 * N, (void *)(uintptr_t)m_dev")
        .unwrap();
    assert!(alloc < wrap, "cuMemAlloc, then USE_HOST_PTR over it");
    let fault = ReproCase::parse("nvidia0+cuda0/cl-svm-coarse/finish/handoff/n=4097").unwrap();
    let src = repro::generate(&fault, seeded, &header(), None)
        .unwrap()
        .source;
    assert!(src.contains("m_peer = (uintptr_t)m_svm;"));
    assert!(src.contains("peer_launch(\"clhip_pattern_fill\""));
    let fail = ReproCase::parse("nvidia0+cuda0/cl-svm-coarse+memcpy/finish/fft/n=4096").unwrap();
    let src = repro::generate(&fail, seeded, &header(), None)
        .unwrap()
        .source;
    let to_svm = src
        .find("cuMemcpy((CUdeviceptr)(uintptr_t)m_svm, m_dev")
        .unwrap();
    let fft = src.find("fft_forward(svm(m_svm), N").unwrap();
    let from_svm = src
        .find("cuMemcpy(m_dev, (CUdeviceptr)(uintptr_t)m_svm")
        .unwrap();
    assert!(
        to_svm < fft && fft < from_svm,
        "cuMemcpy in, FFT on the SVM, cuMemcpy out"
    );
    // cl-gpu-va: the peer takes the address a kernel read of a plain buffer.
    let va = ReproCase::parse("nvidia0+cuda0/cl-gpu-va/event/handoff/n=4097").unwrap();
    let src = repro::generate(&va, seeded, &header(), None)
        .unwrap()
        .source;
    let read = src
        .find("launch(\"buffer_address\", 1, 2, (struct arg[]){mem(m_buf), mem(m_va)}, 0, NULL);")
        .unwrap();
    let used = src.find("peer_fill_pattern(m_peer, a);").unwrap();
    assert!(read < used && src.contains("__kernel void buffer_address("));
}

fn shrinking_runs_the_smaller_sizes_through_clhips_workers() {
    support::opencl_device();
    let dir = scratch("shrink");
    // A results file saying that a case which passes at every size here failed: shrinking
    // must try every smaller size through the workers, see passes, and keep the size.
    let case = "pocl0+host/copy/finish/handoff/n=8";
    let json = dir.join("run.json");
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\"]\nsizes = [8]\n",
    )
    .unwrap();
    let out = clhip(&[
        "run",
        case,
        "--cases",
        cases.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let mut report = clhip::report::load_json(&json).unwrap();
    report.results[0].outcome = clhip::model::Outcome::Unsupported {
        reason: "as recorded elsewhere".into(),
        error: None,
    };
    std::fs::write(&json, serde_json::to_string(&report).unwrap()).unwrap();
    let out_dir = dir.join("repro");
    let out = clhip(&[
        "repro",
        case,
        "--from",
        json.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("running pocl0+host/copy/finish/handoff/n=1, pocl0+host/copy/finish/handoff/n=2, pocl0+host/copy/finish/handoff/n=4"),
        "{stderr}"
    );
    let source = std::fs::read_to_string(out_dir.join("repro.c")).unwrap();
    assert!(
        source.contains("Size: kept n=8: no smaller size gave `unsupported` through clhip's workers (tried n=1 pass, n=2 pass, n=4 pass)"),
        "{source}"
    );
    assert!(source.contains(&format!(
        "Outcome clhip saw ({}): unsupported: as recorded elsewhere",
        json.display()
    )));
    // The run's seed and fingerprint come from the file.
    assert!(source.contains(&format!("run seed {}", report.seed)));
    let readme = std::fs::read_to_string(out_dir.join("README.md")).unwrap();
    assert!(
        readme.contains("Driver fingerprint (the results file"),
        "{readme}"
    );
}

fn bad_ids_uncovered_cases_and_other_plants_are_refused_by_name() {
    let dir = scratch("refused");
    let o = dir.to_str().unwrap();
    for (args, says) in [
        (vec!["pocl0+host/copy/finish/handoff"], "a case id reads"),
        (
            vec!["pocl0+host/copy/finish/handoff/n=x"],
            "is not `n=<size>`",
        ),
        (
            vec!["pocl0+host/warp-drive/finish/handoff/n=8"],
            "unknown PathKind `warp-drive`",
        ),
        (
            vec!["pocl0+host/copy/map/handoff/n=8"],
            "takes sync finish, event, none, not map",
        ),
        (
            vec!["pocl0+host/copy/finish/gemm/n=8"],
            "op gemm needs a device peer",
        ),
        (vec!["pocl0+host/copy/finish/fft/n=12"], "powers of two"),
        (
            vec!["cl0+host/copy/finish/handoff/n=8"],
            "`cl` is no vendor clhip knows",
        ),
        (
            vec![
                "pocl0+host/copy/finish/handoff/n=8",
                "--plant",
                "flip-element",
            ],
            "only the skip-sync, skip-one-sync and straddle-2mib plants have a reproducer, not FlipElement",
        ),
        // Where clhip would skip the planted case, the program would carry no plant.
        (
            vec![
                "pocl0+host/copy/finish/handoff/n=8",
                "--plant",
                "skip-one-sync",
            ],
            "leaves out one crossing's sync of the reuse op, not of handoff",
        ),
        (
            vec!["pocl0+host/copy/none/reuse/n=8", "--plant", "skip-one-sync"],
            "leaves out a wait or a map, not a none handover",
        ),
        // A well-formed id of a pair this machine does not have, with nothing to read it from.
        (
            vec!["nvidia7+cuda7/copy/finish/handoff/n=8", "--no-shrink"],
            "pair nvidia7+cuda7 is not on this machine",
        ),
    ] {
        let mut all = vec!["repro"];
        all.extend(&args);
        all.extend(["-o", o]);
        let out = clhip(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !dir.join("repro.c").exists(),
            "{args:?}: a refused case must write nothing"
        );
    }
    // An id a results file does not hold.
    let json = dir.join("empty.json");
    let out = clhip(&[
        "repro",
        "pocl0+host/copy/finish/handoff/n=8",
        "--from",
        json.to_str().unwrap(),
        "-o",
        o,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty.json"));
}

fn the_sync_under_test_is_the_one_the_plant_leaves_out() {
    // Copy path, finish: clhip reads the buffer into staging and waits with clFinish before
    // the host looks; planted, the read is enqueued and nothing waits for it.
    let case = ReproCase::parse("pocl0+host/copy/finish/fft/n=4096").unwrap();
    let main = |plant| {
        let src = repro::generate(&case, DataKind::Seeded, &header(), plant)
            .unwrap()
            .source;
        src[src.find("int main(void)").unwrap()..].to_string()
    };
    let synced = main(None);
    let planted = main(Some(clhip::ops::Plant::SkipSync));
    let after_fft = |s: &str| {
        let at = s.find("done = fft_forward").unwrap();
        let end = s[at..].find("peer_download").unwrap();
        s[at..at + end].to_string()
    };
    assert!(
        after_fft(&synced).contains("CHECK(CL, clFinish(queue));"),
        "{synced}"
    );
    assert!(!after_fft(&planted).contains("clFinish"), "{planted}");
    assert!(after_fft(&planted).contains("PLANTED (skip-sync): clhip runs sync finish here"));
    // Everything else is the same program.
    assert_eq!(
        synced.lines().filter(|l| l.contains("clFinish")).count(),
        planted.lines().filter(|l| l.contains("clFinish")).count() + 1
    );
}

/// The text of C string literal `name` in `source` (one literal per line, as emitted).
fn c_literal(source: &str, name: &str) -> String {
    let start = source
        .find(&format!("static const char *{name} =\n"))
        .unwrap_or_else(|| panic!("no {name} in the source"));
    let mut out = String::new();
    for line in source[start..].lines().skip(1) {
        let line = line.trim();
        if line == ";" {
            break;
        }
        let inner = &line[1..line.len() - 1];
        let inner = inner.strip_suffix("\\n").unwrap_or(inner);
        out.push_str(&inner.replace("\\\"", "\"").replace("\\\\", "\\"));
        out.push('\n');
    }
    out
}

/// What NVRTC gives kernels without an include, for a host C++ compiler's syntax check.
const NVRTC_STANDINS: &str = r#"#define __CUDACC_RTC__
#define __global__
#define __device__
struct float2 { float x, y; };
struct uint3 { unsigned x, y, z; };
extern uint3 blockIdx, blockDim, threadIdx;
unsigned long long atomicAdd(unsigned long long *, unsigned long long);
unsigned long long atomicMin(unsigned long long *, unsigned long long);
float sqrtf(float);
"#;

fn the_cuda_kernels_a_reproducer_embeds_compile() {
    let dir = scratch("cuda-kernels");
    for (op, kernels) in [
        (
            "handoff/n=4097",
            &["clhip_pattern_fill", "clhip_pattern_check"][..],
        ),
        ("pipeline/n=64", &["clhip_cscale", "clhip_cmagnitude"][..]),
        ("placement/n=4096", &["clhip_cscale"][..]),
        ("gemm/n=33", &[][..]),
    ] {
        let case = ReproCase::parse(&format!("nvidia0+cuda0/copy/finish/{op}")).unwrap();
        let source = repro::generate(&case, DataKind::Seeded, &header(), None)
            .unwrap()
            .source;
        if kernels.is_empty() {
            // No peer kernel launched: none compiled, no NVRTC at all.
            assert!(
                !source.contains("PEER_SOURCE") && !source.contains("nvrtc"),
                "{op}"
            );
            continue;
        }
        let kernels_text = c_literal(&source, "PEER_SOURCE");
        for k in kernels {
            assert!(
                kernels_text.contains(&format!("CLHIP_KERNEL void {k}(")),
                "{op}: {k}"
            );
        }
        let file = dir.join("kernels.cpp");
        std::fs::write(&file, format!("{NVRTC_STANDINS}{kernels_text}")).unwrap();
        support::need_tool("c++", "CLHIP_REQUIRE_CC");
        let o = Command::new("c++")
            .args(["-std=c++17", "-fsyntax-only", "-Wall", "-Werror"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{op}:\n{kernels_text}\n{}", text(&o));
    }
}

/// The common cases, as a bug report attaches them: a fail shrunk to a small size (on simple
/// data where the fail needs none of the seeded draw's values), and passes at their matrix
/// sizes. Each whole file, header included, is held to its line count today, so that what a
/// case does not use stays out: about 300 for a host handoff, 310-380 for a host FFT (clhip's
/// FFT, its f64 reference and both bounds are 80 lines of it, the seeded generator 35 more),
/// 370-510 with a GPU peer (its runtime, the look for a fault pending on the device before the
/// exit, 30 lines, and for the handoff its kernels and their compiler).
fn common_reproducers_are_short() {
    let seeded = DataKind::Seeded;
    // The pattern checks' kernel text holds a helper since the reuse op checks into slots of
    // one result buffer (kernels/pattern.cl): about nine lines more in every pattern case.
    let budget = [
        ("pocl0+host/copy/finish/handoff/n=4097", seeded, 355),
        ("pocl0+host/use-host-ptr/map/handoff/n=1", seeded, 365),
        ("pocl0+host/copy/finish/fft/n=2", DataKind::Ones, 335),
        (
            "pocl0+host/use-host-ptr/map/fft/n=8",
            DataKind::Impulse,
            380,
        ),
        ("pocl0+host/copy/finish/fft/n=2", seeded, 370),
        ("pocl0+host/copy/finish/fft/n=4096", seeded, 405),
        ("nvidia0+cuda0/copy/finish/fft/n=2", DataKind::Ones, 400),
        (
            "nvidia0+cuda0/cl-svm-coarse+memcpy/finish/fft/n=2",
            DataKind::Ones,
            405,
        ),
        ("nvidia0+cuda0/copy/finish/gemm/n=2", DataKind::Ones, 415),
        ("nvidia0+cuda0/copy/finish/gemm/n=33", seeded, 450),
        ("nvidia0+cuda0/copy/finish/handoff/n=4097", seeded, 525),
        (
            "nvidia0+cuda0/cl-svm-coarse/finish/handoff/n=1",
            seeded,
            510,
        ),
        ("rocm0+hip0/copy/finish/handoff/n=4097", seeded, 515),
        // The reuse op's 2,000 crossings are one loop over a round trip, not 2,000 steps.
        ("pocl0+host/copy/finish/reuse/n=4097", seeded, 395),
        ("pocl0+host/use-host-ptr/map/reuse/n=4097", seeded, 410),
        ("nvidia0+cuda0/copy/finish/reuse/n=4097", seeded, 560),
        ("rocm0+hip0/cl-svm-coarse/map/reuse/n=1", seeded, 545),
    ];
    let mut over = Vec::new();
    for (id, kind, most) in budget {
        let case = ReproCase::parse(id).unwrap();
        let r = repro::generate(&case, kind, &header(), None).unwrap();
        let lines = r.source.lines().count();
        eprintln!("{lines:4} lines: {id} ({kind} data)");
        if lines > most {
            over.push(format!("{id} ({kind} data): {lines} lines, budget {most}"));
        }
        // Only what the case uses: no FFT without an FFT, no generator without data, no
        // kernel compiler without a peer kernel, no BLAS without gemm.
        let src = &r.source;
        assert_eq!(src.contains("fft_forward"), case.op == Op::Fft, "{id}");
        assert_eq!(
            src.contains("next_word"),
            kind.is_seeded() && !matches!(case.op, Op::Handoff | Op::Reuse),
            "{id}"
        );
        assert_eq!(
            src.contains("nvrtc") || src.contains("hiprtc"),
            matches!(case.op, Op::Handoff | Op::Reuse) && case.peer.api != Api::Host,
            "{id}"
        );
        assert_eq!(src.contains("cublas"), case.op == Op::Gemm, "{id}");
        assert!(
            !src.contains("svm(") || case.path.name().contains("svm"),
            "{id}"
        );
        // Two macros: CHECK and CALL (and the OpenCL header's configuration).
        let macros: Vec<&str> = src.lines().filter(|l| l.starts_with("#define")).collect();
        assert_eq!(macros.len(), 4, "{id}: {macros:?}");
        for m in ["#define CHECK(", "#define CALL("] {
            assert!(macros.iter().any(|d| d.starts_with(m)), "{id}: {m}");
        }
    }
    assert!(over.is_empty(), "over budget:\n{}", over.join("\n"));
}

/// hipcc (Debian 12: `hipcc`, `libamdhip64-dev`; CI installs them); without it the test is
/// ignored (failed under CLHIP_REQUIRE_HIP=1).
fn hipcc() -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("hipcc"))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        support::ignore(
            "CLHIP_REQUIRE_HIP",
            "no hipcc on PATH (Debian: hipcc libamdhip64-dev)",
        )
    })
}

/// Stand-ins for rocBLAS's and rocSOLVER's headers (Debian 12 packages neither) with their C
/// signatures, over the real HIP headers (tests/agreement.rs builds reproducers with them
/// against tests/fixtures/gpu-stub).
const ROC_STUBS: [(&str, &str); 2] = [
    (
        "rocblas/rocblas.h",
        include_str!("fixtures/gpu-stub/include/rocblas/rocblas.h"),
    ),
    (
        "rocsolver/rocsolver.h",
        include_str!("fixtures/gpu-stub/include/rocsolver/rocsolver.h"),
    ),
];

/// Every hip case the generator covers (the cuda pairs' paths, syncs and ops), synced and
/// planted, compiles with Debian's hipcc against the real HIP runtime and hiprtc headers,
/// warning-free; one links against the real libamdhip64. Compile only: no AMD GPU here.
fn every_hip_case_compiles_with_hipcc() {
    let hipcc = hipcc();
    let dir = scratch("hip");
    let include = dir.join("include");
    for (name, body) in ROC_STUBS {
        let path = include.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let ops = [
        Op::Handoff,
        Op::Fft,
        Op::Pipeline,
        Op::Gemm,
        Op::Cholesky,
        Op::Placement,
        Op::Reuse,
    ];
    let cases = covered("rocm0", Api::Hip, &ops, |op| match op {
        Op::Gemm | Op::Cholesky => 33,
        Op::Handoff | Op::Reuse => 4097,
        _ => 4096,
    });
    let cuda = covered("nvidia0", Api::Cuda, &ops, |op| {
        if op.is_matrix() { 1 } else { 2 }
    });
    // The hip pairs cover what the cuda pairs do, and ROCm's dma-buf import of OpenCL's SVM.
    let dmabuf = cases
        .iter()
        .filter(|c| c.path == PathKind::ClDmabufHipImport)
        .count();
    assert!(dmabuf > 0, "cl-dmabuf+hip-import is covered");
    assert_eq!(
        cases.len(),
        cuda.len() + dmabuf,
        "the hip pairs cover what the cuda pairs do"
    );
    let mut files = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        let planted = plants_of(case).into_iter().map(|p| (p, DataKind::Seeded));
        for (plant, kind) in planted.chain([(None, DataKind::Impulse)]) {
            let r = repro::generate(case, kind, &header(), plant).unwrap();
            assert!(r.build_sh.contains("hipcc") && r.build_sh.contains("-D__HIP_PLATFORM_AMD__"));
            assert_eq!(
                r.build_sh.contains("-lrocblas"),
                matches!(case.op, Op::Gemm | Op::Cholesky)
            );
            assert_eq!(r.build_sh.contains("-lrocsolver"), case.op == Op::Cholesky);
            let name = format!(
                "r{k}-{}-{kind}.c",
                plant.map_or("none".into(), |p| format!("{p:?}"))
            );
            std::fs::write(dir.join(&name), &r.source).unwrap();
            files.push((name, format!("{case} ({plant:?}, {kind} data)")));
        }
    }
    // One hipcc per file would start its driver hundreds of times: one run compiles them all,
    // and a failure is then found file by file.
    let compile = |names: &[&str]| {
        Command::new(&hipcc)
            .args([
                "-D__HIP_PLATFORM_AMD__",
                "-std=gnu11",
                "-Wall",
                "-Werror",
                "-fsyntax-only",
            ])
            // hipcc passes its link flags to a compile that links nothing.
            .arg("-Wno-unused-command-line-argument")
            .arg("-I")
            .arg(&include)
            .args(names)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let all: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    if !compile(&all).status.success() {
        for (name, what) in &files {
            let o = compile(&[name]);
            assert!(o.status.success(), "{what}:\n{}", text(&o));
        }
    }
    // The build script's own command links a case against the real libamdhip64 (hiprtc is in
    // it on HIP 5.2).
    let case = ReproCase::parse("rocm0+hip0/cl-svm-coarse/event/handoff/n=4097").unwrap();
    let out = dir.join("link");
    repro::generate(&case, DataKind::Seeded, &header(), None)
        .unwrap()
        .write(&out)
        .unwrap();
    let b = Command::new("sh")
        .arg(out.join("build.sh"))
        .env("HIPCC", &hipcc)
        .output()
        .unwrap();
    assert!(b.status.success(), "build.sh:\n{}", text(&b));
    assert!(out.join("repro").is_file());
}

/// A work item's data override reaches the worker: with the flip-element plant (one element
/// wrong, found where it lands), the fail's expected value is the simple input's FFT: all ones
/// for an impulse, zero off the first element for all ones; the seeded draw's is neither.
fn workers_run_a_case_on_the_data_its_work_item_names() {
    use clhip::model::{Case, Outcome, Pair, Peer, SyncMode};
    use clhip::runner::{self, Planned, RunOptions};
    let dev = support::opencl_device();
    let case = Case {
        pair: Pair {
            opencl: dev.r.clone(),
            peer: Peer::HOST,
            install: None,
            cl_gpu: None,
        },
        path: PathKind::Copy,
        sync: SyncMode::Finish,
        op: Op::Fft,
        n: 64,
        env: Default::default(),
    };
    let plan: Vec<Planned> = [DataKind::Seeded, DataKind::Impulse, DataKind::Ones]
        .into_iter()
        .map(|kind| {
            let mut p = Planned::case(
                case.clone(),
                clhip::expectations::Baseline::unbaselined(&case),
            );
            p.id = format!("{} data={kind}", p.id);
            p.data = kind;
            p
        })
        .collect();
    let mut opts = RunOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_clhip")), 7);
    opts.worker_args
        .extend(["--plant".to_string(), "flip-element".to_string()]);
    let end = runner::run(plan, &opts, &mut |_| {}).unwrap();
    let reason = |kind: DataKind| -> String {
        let r = end
            .results
            .iter()
            .find(|r| r.id.ends_with(&format!("data={kind}")))
            .unwrap();
        assert!(
            matches!(r.outcome, Outcome::Fail { .. }),
            "{kind}: {:?}",
            r.outcome
        );
        r.outcome.reason()
    };
    let one = "want (1.00000000e0, 0.00000000e0)";
    let zero = "want (0.00000000e0, 0.00000000e0)";
    let (seeded, impulse, ones) = (
        reason(DataKind::Seeded),
        reason(DataKind::Impulse),
        reason(DataKind::Ones),
    );
    assert!(impulse.contains(one), "{impulse}");
    assert!(ones.contains(zero), "{ones}");
    assert!(!seeded.contains(one) && !seeded.contains(zero), "{seeded}");
}

/// `clhip repro` on a case recorded as a fail that passes here (the record comes from a run
/// with one element flipped): every smaller size and every simpler input passes through the
/// workers, so neither is taken, and the header says what was tried.
fn shrinking_refuses_sizes_and_data_that_change_the_outcome() {
    support::opencl_device();
    let dir = scratch("shrink-data");
    let case = "pocl0+host/copy/finish/fft/n=8";
    let json = dir.join("run.json");
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "version = 1\n[[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"fft\"]\nsizes = [8]\n",
    )
    .unwrap();
    let out = clhip(&[
        "run",
        case,
        "--cases",
        cases.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--plant",
        "flip-element",
    ]);
    let mut report = clhip::report::load_json(&json).unwrap();
    assert_eq!(
        report.results[0].outcome.kind(),
        clhip::model::OutcomeKind::Fail,
        "{}",
        text(&out)
    );
    // `repro --from` refuses a planted run's results; this file stands for a run whose fail
    // the workers do not see again, which is what the plant made it.
    report.planted = None;
    report
        .command
        .retain(|a| a != "--plant" && a != "flip-element");
    std::fs::write(&json, serde_json::to_vec(&report).unwrap()).unwrap();
    let out_dir = dir.join("repro");
    let out = clhip(&[
        "repro",
        case,
        "--from",
        json.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("running pocl0+host/copy/finish/fft/n=8 data=ones, pocl0+host/copy/finish/fft/n=8 data=impulse, pocl0+host/copy/finish/fft/n=8 data=small-integers"),
        "{stderr}"
    );
    let source = std::fs::read_to_string(out_dir.join("repro.c")).unwrap();
    assert!(
        source.contains("Size: kept n=8: no smaller size gave `fail` through clhip's workers (tried n=2 pass, n=4 pass)"),
        "{source}"
    );
    assert!(
        source.contains("kept the seeded draw: no simpler input gave `fail` through clhip's workers (tried ones pass, impulse pass, small-integers pass)"),
        "{source}"
    );
    assert!(
        source.contains("next_word"),
        "the seeded generator is emitted"
    );
}

/// A reproducer on simple data, planted: the sync left out, the stale read is still seen.
fn a_simple_data_reproducer_passes_and_its_planted_twin_fails() {
    support::opencl_device();
    let case = ReproCase::parse("pocl0+host/use-host-ptr/map/fft/n=1048576").unwrap();
    for (plant, want) in [(None, 0), (Some(clhip::ops::Plant::SkipSync), 1)] {
        let dir = scratch(&format!("simple-{}", plant.is_some()));
        let r = repro::generate(&case, DataKind::SmallIntegers, &header(), plant).unwrap();
        assert!(
            r.source.contains("generate::DataKind::SmallIntegers")
                && !r.source.contains("next_word")
        );
        r.write(&dir).unwrap();
        let (code, run) = build_and_run(&dir);
        assert_eq!(code, want, "{plant:?}: {run}");
    }
}

/// The checks no host case runs here (a gemm, cholesky or placement reproducer needs a GPU
/// peer), run on planted data: the reference's own result passes, one wrong element fails.
fn the_gpu_ops_checks_pass_the_reference_and_catch_one_wrong_element() {
    let dir = scratch("checks");
    let mut source = String::new();
    for name in [
        "std_includes",
        "check_gemm",
        "check_cholesky",
        "check_exact",
    ] {
        source.push_str(repro::template_section(name));
    }
    source.push_str(
        r#"
int main(void)
{
    enum { n = 5 };
    float a[2 * n * n], b[2 * n * n], c[2 * n * n], got[2 * n * n], hpd[2 * n * n], in[2 * n], out[2 * n];
    double l[2 * n * n], beta[2] = {-0.5, 0.25};
    int fails = 0;
    for (int i = 0; i < 2 * n * n; i++)
        a[i] = (float)(i % 7) - 3, b[i] = (float)(i % 5) - 2, c[i] = (float)(i % 3) - 1;
    /* got = A B + beta C, exactly (small integers) */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double sr = 0, si = 0;
            for (int k = 0; k < n; k++) {
                sr += a[2 * (i + k * n)] * b[2 * (k + j * n)] - a[2 * (i + k * n) + 1] * b[2 * (k + j * n) + 1];
                si += a[2 * (i + k * n)] * b[2 * (k + j * n) + 1] + a[2 * (i + k * n) + 1] * b[2 * (k + j * n)];
            }
            int p = i + j * n;
            got[2 * p] = (float)(sr + beta[0] * c[2 * p] - beta[1] * c[2 * p + 1]);
            got[2 * p + 1] = (float)(si + beta[0] * c[2 * p + 1] + beta[1] * c[2 * p]);
        }
    fails += check_gemm("gemm, as computed", got, a, b, c, beta, n) != 0;
    got[2 * 7 + 1] += 1.0f;
    fails += 10 * (check_gemm("gemm, planted", got, a, b, c, beta, n) == 1);
    /* an HPD matrix: n I plus ones, its factor as the reference computes it */
    for (int p = 0; p < n * n; p++)
        hpd[2 * p] = 1.0f + (p % (n + 1) == 0 ? n : 0), hpd[2 * p + 1] = 0.0f;
    if (reference_cholesky(hpd, n, l) != 0)
        return 99;
    for (int p = 0; p < 2 * n * n; p++)
        got[p] = (float)l[p];
    fails += check_cholesky("cholesky, as computed", got, l, n) != 0;
    got[2 * (3 + 1 * n)] *= 1.5f;
    fails += 100 * (check_cholesky("cholesky, planted", got, l, n) == 1);
    for (int i = 0; i < 2 * n; i++)
        in[i] = (float)i / 16.0f - 0.25f, out[i] = in[i] * 2097152.0f;
    fails += check_exact("placement, as computed", out, in, 2097152.0f, n) != 0;
    out[3] = nextafterf(out[3], 1e30f);
    fails += 1000 * (check_exact("placement, planted", out, in, 2097152.0f, n) == 1);
    printf("score %d\n", fails);
    return fails == 1110 ? 0 : 1;
}
"#,
    );
    std::fs::write(dir.join("checks.c"), source).unwrap();
    cc(
        &[
            "-std=gnu11",
            "-Wall",
            "-Werror",
            "-o",
            "checks",
            "checks.c",
            "-lm",
        ],
        &dir,
    );
    let out = Command::new(dir.join("checks")).output().unwrap();
    let run = text(&out);
    assert!(out.status.success(), "{run}");
    assert!(
        run.contains("FAIL: 1 of 25 elements out of bound, first at [7]"),
        "{run}"
    );
    assert!(
        run.contains("FAIL: the factor is out of bound; its largest error is at [8]"),
        "{run}"
    );
    assert!(
        run.contains("FAIL: placement, planted: 1 of 10 floats differ (bit-exact), first at [3]"),
        "{run}"
    );
}

/// An outcome's text in the header (a path like `/opt/rocm-*/lib`, a `*/`, a terminal escape,
/// a bidi override, a trigraph, backticks) stays inside the program's comment and the README's
/// block: the program still builds, warnings and trigraphs on.
fn any_outcome_text_stays_inert_in_the_reproducer() {
    let dir = scratch("inert-header");
    let case = ReproCase::parse("pocl0+host/copy/finish/fft/n=64").unwrap();
    let mut h = header();
    let hostile = "libamdhip64.so not in /opt/rocm-*/lib */ int evil; /* \x1b[2J\u{202e}x ??/\n```\n# README heading";
    h.seen = Some((clhip::model::OutcomeKind::Fail, hostile.into()));
    h.seen_from = "runs/*/r.json".into();
    h.fingerprint
        .push("os kernel: 6.1 */ \x1b]8;;https://x.example/\x07".into());
    let r = repro::generate(&case, DataKind::Seeded, &h, None).unwrap();
    // The header comment is the first one, and ends where the generator ends it.
    let first_end = r.source.find("*/").unwrap();
    assert!(
        r.source[..first_end].ends_with("Driver fingerprint: README.md\n "),
        "{}",
        &r.source[..first_end + 2]
    );
    assert!(
        r.source
            .contains("/opt/rocm-* /lib * / int evil; / * \\x1b[2J\\u{202e}x ? ?/")
    );
    assert!(!r.source.chars().any(|c| c.is_control() && c != '\n'));
    // README: the block is fenced longer than any backticks inside it.
    assert!(
        r.readme.contains("\n````\nclhip reproducer for"),
        "{}",
        r.readme
    );
    assert!(
        r.readme.contains("\n```\n# README heading\n"),
        "{}",
        r.readme
    );
    assert!(!r.readme.chars().any(|c| c.is_control() && c != '\n'));
    let file = dir.join("repro.c");
    std::fs::write(&file, &r.source).unwrap();
    cc(
        &[
            "-std=gnu11",
            "-trigraphs",
            "-c",
            "-o",
            "/dev/null",
            "-Wall",
            "-Werror",
            "repro.c",
        ],
        &dir,
    );
}

/// ISSUE.md beside repro.c, in the fields of the vendor's form, filled from a results file (its
/// fingerprint, the outcome's expected and observed values and bound) and the build: a PoCL
/// case from a PoCL run (tests/fixtures), a CUDA case from the committed H200 run.
fn issue_md_is_the_vendors_form_filled_in() {
    let dir = scratch("issue");
    for (name, from, case) in [
        (
            "issue_pocl",
            "tests/fixtures/pocl-fft-run.json",
            "pocl0+host/use-host-ptr/none/fft/n=8",
        ),
        (
            "issue_cuda",
            "reports/nvidia-h200-580.159.04-cuda13.0-house2-after-1368f97-full.json",
            "nvidia0+cuda0/cl-svm-coarse/finish/gemm/n=33",
        ),
    ] {
        let out = dir.join(name);
        let req = clhip::repro::Request {
            case: case.into(),
            seed: None,
            output: out.clone(),
            from: Some(PathBuf::from(from)),
            no_shrink: true,
            plant: None,
            timeout_s: 60.0,
            rocm_path: None,
            shrunk: None,
        };
        clhip::repro::make(&req, &mut |_| {}).unwrap();
        let issue = std::fs::read_to_string(out.join("ISSUE.md")).unwrap();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("../snapshots");
        settings.bind(|| insta::assert_snapshot!(name, issue));
    }
}

/// `repro --all` over a PoCL run of every host path and sync (handoff or reuse at n=1, fft at
/// n=8): a reproducer per kind of non-pass and a pass per path (the reuse op's on the paths it
/// runs on), each built and run by run-all.sh,
/// which must find each one giving clhip's outcome (a negative control's pass against fail is
/// a race, printed as one). Then the same run with a pass recorded as `unsupported`: run-all.sh
/// must print the disagreement and exit 1.
fn repro_all_over_a_pocl_run_builds_and_agrees() {
    support::opencl_device();
    let dir = scratch("all");
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "version = 1\n\
         [[group]]\n\
         paths = [\"cl-svm-fine\", \"host-ptr+svm-memcpy\", \"host-ptr-unaligned+svm-memcpy\", \"sub-buffer+use-host-ptr\"]\n\
         syncs = [\"finish\", \"event\", \"map\", \"none\"]\n\
         ops = [\"handoff\"]\nsizes = [1]\n\
         [[group]]\n\
         paths = [\"copy\", \"use-host-ptr\"]\n\
         syncs = [\"finish\", \"map\", \"none\"]\n\
         ops = [\"fft\"]\nsizes = [8]\n\
         [[group]]\n\
         paths = [\"copy\", \"cl-svm-coarse\", \"use-host-ptr\"]\n\
         syncs = [\"finish\", \"event\", \"map\", \"none\"]\n\
         ops = [\"reuse\"]\nsizes = [1]\n",
    )
    .unwrap();
    let json = dir.join("run.json");
    let out = clhip(&[
        "run",
        "pocl0+host/*",
        "--cases",
        cases.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(json.exists(), "{}", text(&out));
    let report = clhip::report::load_json(&json).unwrap();
    let paths: std::collections::BTreeSet<String> = report
        .results
        .iter()
        .map(|r| r.id.split('/').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(paths.len(), 7, "{paths:?}");

    let all = dir.join("all");
    let (ran, table) = repro_all_and_run(&json, &all);
    let readme = std::fs::read_to_string(all.join("README.md")).unwrap();
    assert!(!readme.contains("No reproducer"), "{readme}");
    assert!(ran.status.success(), "{}", text(&ran));
    // A row for each reproducer: a pass per path, a row per kind of non-pass.
    let rows: Vec<&str> = table.lines().skip(1).collect();
    let chosen = clhip::repro::choose(&report.results);
    assert_eq!(rows.len(), chosen.len(), "{table}");
    for p in &paths {
        assert!(
            rows.iter()
                .any(|r| r.starts_with("pass ") && r.ends_with(&format!("pass.pocl0+host.{p}"))),
            "no pass of {p}:\n{table}"
        );
    }
    assert!(
        rows.iter()
            .all(|r| r.contains(" agrees ") || r.contains(" race (negative control) ")),
        "{table}"
    );
    for p in ["copy", "cl-svm-coarse", "use-host-ptr"] {
        let source =
            std::fs::read_to_string(all.join(format!("pass.pocl0+host.{p}/repro.c"))).unwrap();
        assert!(
            source.contains(&format!("reproducer for pocl0+host/{p}/"))
                && source.contains("/reuse/n=1\n"),
            "the pass of {p} is a reuse case's:\n{source}"
        );
    }
    for r in &rows {
        assert!(
            !r.contains("race") || r.contains(".none.") || r.contains("use-host-ptr"),
            "a race outside a negative control: {r}"
        );
    }

    // A pass recorded as `unsupported`: its reproducer passes, and run-all.sh says so.
    let mut report = report;
    let planted = report
        .results
        .iter_mut()
        .find(|r| r.id == "pocl0+host/copy/finish/reuse/n=1")
        .unwrap();
    planted.outcome = clhip::model::Outcome::Unsupported {
        reason: "as recorded elsewhere".into(),
        error: None,
    };
    std::fs::write(&json, serde_json::to_string(&report).unwrap()).unwrap();
    let (ran, table) = repro_all_and_run(&json, &dir.join("all-planted"));
    assert_eq!(ran.status.code(), Some(1), "{}", text(&ran));
    assert!(
        table.lines().any(|l| l.starts_with("unsupported")
            && l.contains("pass (exit 0)")
            && l.contains("DISAGREES")
            && l.ends_with("unsupported.pocl0+host.copy.finish.reuse")),
        "{table}"
    );
}

/// `clhip repro --all json -o all` (which must succeed), then its run-all.sh: how that ended,
/// and the table it printed.
fn repro_all_and_run(json: &Path, all: &Path) -> (std::process::Output, String) {
    let out = clhip(&[
        "repro",
        "--all",
        json.to_str().unwrap(),
        "-o",
        all.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let ran = Command::new("sh")
        .arg(all.join("run-all.sh"))
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&ran.stdout).into_owned();
    (ran, table)
}

/// The CUDA stub (tests/fixtures/gpu-stub: CUDA's driver API and NVRTC done on the host) built
/// into `dir/lib` as libcuda.so and libnvrtc.so, its stand-in headers in `dir/include`.
fn cuda_stub(dir: &Path) {
    let include = dir.join("include");
    std::fs::create_dir_all(&include).unwrap();
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    for (name, body) in CUDA_STUBS {
        std::fs::write(include.join(name), body).unwrap();
    }
    std::fs::write(include.join("cublas_api.h"), CUBLAS_API_STUB).unwrap();
    std::fs::write(dir.join("host.h"), include_str!("fixtures/gpu-stub/host.h")).unwrap();
    std::fs::write(dir.join("cuda.c"), include_str!("fixtures/gpu-stub/cuda.c")).unwrap();
    cc(
        &[
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Werror",
            "-I",
            "include",
            "-o",
            "lib/libcuda.so",
            "cuda.c",
            "-lm",
        ],
        dir,
    );
    std::os::unix::fs::symlink("libcuda.so", dir.join("lib/libnvrtc.so")).unwrap();
}

/// `source` built against the CUDA stub in `stub` (`-Werror` unless `lenient`) and run there
/// with its calls printed: its exit code, what it printed, and its compared calls.
fn run_on_cuda_stub(stub: &Path, source: &str, lenient: bool) -> (i32, String, Vec<String>) {
    let dir = stub.join(format!("run-{}", clhip::hash::fnv1a64(source.as_bytes())));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("repro.c"), source).unwrap();
    let include = format!("-I{}", stub.join("include").display());
    let lib = format!("-L{}", stub.join("lib").display());
    let mut args = vec!["-std=gnu11", "-O1", "-Wall", "-o", "repro", "repro.c"];
    if !lenient {
        args.push("-Werror");
    }
    args.extend([
        include.as_str(),
        lib.as_str(),
        "-lcuda",
        "-lnvrtc",
        "-lOpenCL",
        "-lm",
    ]);
    cc(&args, &dir);
    // The stub first, then whatever the environment adds (a Vulkan loader, say).
    let library_path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", stub.join("lib").display()),
        _ => stub.join("lib").display().to_string(),
    };
    let r = Command::new(dir.join("repro"))
        .env("LD_LIBRARY_PATH", library_path)
        .env(clhip::calls::PRINT_ENV, dir.join("calls"))
        .output()
        .unwrap();
    let calls = std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    (
        r.status.code().unwrap_or(-1),
        text(&r),
        clhip::calls::normalise(&calls),
    )
}

/// The index of each of `steps` in `text`, in order: each must follow the one before.
fn in_order(text: &str, steps: &[&str]) {
    let mut from = 0;
    for step in steps {
        match text[from..].find(step) {
            Some(at) => from += at + step.len(),
            None => panic!("`{step}` not found after byte {from} in:\n{text}"),
        }
    }
}

/// The body of `id`'s reproducer (its `run_case`), seeded data, no plant.
fn run_case_of(id: &str, plant: Option<clhip::ops::Plant>) -> String {
    let case = ReproCase::parse(id).unwrap();
    let src = repro::generate(&case, DataKind::Seeded, &header(), plant)
        .unwrap()
        .source;
    src[src.find("static int run_case(void)").unwrap()..].to_string()
}

/// vmm-fd+cl-import under acquire-release, as clhip makes it (paths/vmm_import.rs, sync.rs):
/// the VMM allocation, its fd and OpenCL's import; the peer's poison (imported memory starts
/// out its exporter's); OpenCL acquires before its first kernel on the memory and releases
/// after its last, waiting for the release, before the peer's work; the release of what
/// OpenCL holds at the end, then the buffer, then the VMM allocation. CUDA's fd is an opaque
/// fd, HIP's a dma-buf.
fn vmm_fd_under_acquire_release_is_clhips_sequence() {
    for (id, handle) in [
        (
            "nvidia0+cuda0/vmm-fd+cl-import/acquire-release/handoff/n=4097",
            "CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR",
        ),
        (
            "rocm0+hip0/vmm-fd+cl-import/acquire-release/handoff/n=4097",
            "CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR",
        ),
    ] {
        let body = run_case_of(id, None);
        in_order(
            &body,
            &[
                "vmm_alloc(&m_vmm, 8 * N);",
                &format!("m_buf = cl_import_fd(vmm_export(&m_vmm), m_vmm.size, {handle});"),
                "m_peer = m_vmm.va;",
                "peer_upload(m_peer, poison_vec(N), 8 * N);",
                "peer_fill_pattern(m_peer, a);",
                "peer_synchronize();",
                "acquired1 = acquire_external(m_buf, 0, NULL);",
                "cl_check_pattern(mem(m_buf), a, result_a, 1, &acquired1);",
                "ev3 = launch(\"pattern_fill\"",
                "released4 = release_external(m_buf, 1, &ev3);",
                "CHECK(CL, clWaitForEvents(1, &released4));",
                "peer_check_pattern(m_peer, b, seen_b);",
                "acquired5 = acquire_external(m_buf, 0, NULL);",
                "cl_check_pattern(mem(m_buf), c, result_c, 1, &acquired5);",
                "release_external(m_buf, 0, NULL);",
                "CHECK(CL, clFinish(queue));",
                "CHECK(CL, clReleaseMemObject(m_buf));",
                "vmm_free(&m_vmm);",
            ],
        );
        // OpenCL does not fill memory it has not acquired: only the peer poisons.
        assert!(!body.contains("clEnqueueFillBuffer(queue, m_buf"), "{body}");
        // Planted (skip-sync): where the peer takes OpenCL's output nothing releases it.
        let planted = run_case_of(id, Some(clhip::ops::Plant::SkipSync));
        assert_eq!(planted.matches("release_external(").count(), 1, "{planted}");
        assert!(planted.contains("PLANTED (skip-sync): clhip runs sync acquire-release here"));
        // The finish sync is the negative control: OpenCL finishes and never releases, but
        // clhip's release still gives back what OpenCL holds at the end.
        let finish = run_case_of(&id.replace("acquire-release", "finish"), None);
        assert!(!finish.contains("acquire_external"), "{finish}");
        assert_eq!(finish.matches("release_external(").count(), 1, "{finish}");
    }
}

/// cl-dmabuf+hip-import, as clhip makes it (paths/dmabuf.rs, runtimes/hip/interop.rs): OpenCL's
/// coarse-grain SVM, exported by the HSA runtime and imported by HIP at the export's offset;
/// OpenCL poisons it (its own allocation); HIP's mapping goes before the SVM. Never run: no AMD
/// GPU here.
fn cl_dmabuf_is_clhips_sequence() {
    let id = "rocm0+hip0/cl-dmabuf+hip-import/finish/handoff/n=4097";
    let case = ReproCase::parse(id).unwrap();
    let r = repro::generate(&case, DataKind::Seeded, &header(), None).unwrap();
    assert!(r.build_sh.contains(" -ldl"), "{}", r.build_sh);
    in_order(
        &r.source,
        &[
            "static void hsa_open(void)",
            "dlopen(installed, RTLD_NOW)",
            "said(\"hsa_init\");",
            "said(\"hsa_amd_portable_export_dmabuf\");",
            "desc.size = offset + bytes;",
            "CHECK(HIP, hipImportExternalMemory(&m->ext, &desc));",
            "buffer.offset = offset;",
            "CHECK(HIP, hipExternalMemoryGetMappedBuffer(&p, m->ext, &buffer));",
            "said(\"hsa_amd_portable_close_dmabuf\");",
        ],
    );
    in_order(
        &run_case_of(id, None),
        &[
            "m_svm = svm_alloc(0, 8 * N);",
            "dmabuf_import(&m_imported, m_svm, 8 * N);",
            "m_peer = m_imported.p;",
            "clEnqueueSVMMemFill(queue, m_svm, &POISON",
            "peer_fill_pattern(m_peer, a);",
            "peer_free_imported(&m_imported);",
            "CALL(clSVMFree(context, m_svm));",
        ],
    );
    // No cuda pair has it: CUDA imports no OpenCL memory.
    assert!(ReproCase::parse("nvidia0+cuda0/cl-dmabuf+hip-import/finish/handoff/n=4097").is_err());
}

/// The CUDA stub does the VMM allocation and its export on the host; PoCL has no
/// cl_khr_external_memory, so the reproducer must end where clhip says the case is
/// unsupported, in clhip's words (paths/mod.rs import_fd), after the same VMM calls, and
/// without calling OpenCL's import. With the extension check left out (planted), it calls
/// clCreateBufferWithProperties, which clhip never makes there.
fn a_vmm_fd_reproducer_ends_where_pocl_refuses_the_import() {
    support::opencl_device();
    let stub = scratch("vmm-stub");
    cuda_stub(&stub);
    let case =
        ReproCase::parse("pocl0+cuda0/vmm-fd+cl-import/acquire-release/handoff/n=1").unwrap();
    let source = repro::generate(&case, DataKind::Seeded, &header(), None)
        .unwrap()
        .source;
    let (code, out, calls) = run_on_cuda_stub(&stub, &source, false);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(
            "UNSUPPORTED: device lacks cl_khr_external_memory, so OpenCL has no way to import the peer's fd"
        ),
        "{out}"
    );
    let vmm = [
        "cuMemGetAllocationGranularity",
        "cuMemCreate",
        "cuMemAddressReserve",
        "cuMemMap",
        "cuMemSetAccess",
        "cuMemExportToShareableHandle",
    ];
    assert!(calls.ends_with(&vmm.map(String::from)), "{calls:?}");
    let planted = source.replace(
        "static int has_extension(const char *name)\n{\n",
        "static int has_extension(const char *name)\n{\n    if (name)\n        return 1;\n",
    );
    assert_ne!(planted, source);
    let (code, out, calls) = run_on_cuda_stub(&stub, &planted, true);
    assert!(
        calls.last().map(String::as_str) == Some("clCreateBufferWithProperties"),
        "{calls:?}\n{out}"
    );
    assert!(
        !out.contains("device lacks cl_khr_external_memory"),
        "{out}"
    );
    assert_ne!(code, 0, "{out}");
}

/// The semaphore sync on a path PoCL runs (cl-svm-coarse): the path's memory made and
/// poisoned, then at the first handover the reproducer ends where clhip does, on OpenCL's
/// missing cl_khr_external_semaphore, before any Vulkan or semaphore call.
fn a_semaphore_reproducer_ends_where_pocl_lacks_external_semaphores() {
    support::opencl_device();
    let stub = scratch("semaphore-stub");
    cuda_stub(&stub);
    let id = "pocl0+cuda0/cl-svm-coarse/semaphore/handoff/n=1";
    let body = run_case_of(id, None);
    in_order(
        &body,
        &[
            "m_svm = svm_alloc(0, 8 * N);",
            "semaphore_to_peer(&m_link, NULL, 0, NULL);",
            "peer_fill_pattern(m_peer, a);",
            "waited1 = semaphore_to_cl(&m_link, NULL);",
            "cl_check_pattern(svm(m_svm), a, result_a, 1, &waited1);",
            "semaphore_to_peer(&m_link, NULL, 1, &ev3);",
            "link_release(&m_link);",
            "CALL(clSVMFree(context, m_svm));",
        ],
    );
    // No host wait for the peer's work: its signal orders OpenCL after it.
    let between = &body[body.find("peer_fill_pattern(m_peer, a);").unwrap()
        ..body.find("waited1 = semaphore_to_cl").unwrap()];
    assert!(!between.contains("peer_synchronize"), "{between}");
    let case = ReproCase::parse(id).unwrap();
    let source = repro::generate(&case, DataKind::Seeded, &header(), None)
        .unwrap()
        .source;
    let (code, out, calls) = run_on_cuda_stub(&stub, &source, false);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("UNSUPPORTED: the OpenCL device lacks cl_khr_external_semaphore, so it cannot import the Vulkan broker's semaphore"),
        "{out}"
    );
    assert!(calls.iter().any(|c| c == "clSVMAlloc"), "{calls:?}");
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("vk") || c.contains("Semaphore")),
        "{calls:?}"
    );
}

/// vk-memory+import, as clhip makes it (paths/vk_memory.rs): the broker opened, its memory, an
/// opaque fd imported and mapped by the peer, another imported by OpenCL, the peer's poison;
/// at the end both importers let go before the broker frees its memory. The broker opens in
/// the `open` scope (a worker keeps its broker), and finds its device by the peer's UUID.
/// Against the stub, whose UUID no Vulkan device has, it must end where clhip does: no Vulkan
/// loader, a loader with no driver, or no device of that UUID.
fn a_vk_memory_reproducer_opens_the_broker_on_the_peers_gpu() {
    support::opencl_device();
    for id in [
        "nvidia0+cuda0/vk-memory+import/acquire-release/handoff/n=4097",
        "rocm0+hip0/vk-memory+import/acquire-release/handoff/n=4097",
    ] {
        in_order(
            &run_case_of(id, None),
            &[
                "vk_open();",
                "vk_memory(&m_vk, 8 * N);",
                "peer_import_memory(&m_imported, vk_memory_fd(&m_vk), m_vk.size, m_vk.dedicated, 8 * N);",
                "m_peer = m_imported.p;",
                "m_buf = cl_import_fd(vk_memory_fd(&m_vk), m_vk.size, CL_EXTERNAL_MEMORY_HANDLE_OPAQUE_FD_KHR);",
                "peer_upload(m_peer, poison_vec(N), 8 * N);",
                "acquired1 = acquire_external(m_buf, 0, NULL);",
                "released4 = release_external(m_buf, 1, &ev3);",
                "CHECK(CL, clReleaseMemObject(m_buf));",
                "peer_free_imported(&m_imported);",
                "vk_free_memory(&m_vk);",
            ],
        );
    }
    let case = ReproCase::parse("pocl0+cuda0/vk-memory+import/acquire-release/fft/n=8").unwrap();
    let source = repro::generate(&case, DataKind::Seeded, &header(), None)
        .unwrap()
        .source;
    assert!(source.contains("call_scope = \"open\";\n    peer_uuid(want);"));
    let stub = scratch("vk-stub");
    cuda_stub(&stub);
    let (code, out, calls) = run_on_cuda_stub(&stub, &source, false);
    assert_eq!(code, 2, "{out}");
    let no_loader = "UNSUPPORTED: Vulkan broker: no Vulkan loader: libvulkan.so.1 not found (tried libvulkan.so.1: ";
    // "clhip-host-stub!", the stub's UUID, as 8-4-4-4-12 hex.
    let no_device = "UNSUPPORTED: Vulkan broker: no Vulkan device has the GPU's UUID \
                     636c6869-702d-686f-7374-2d7374756221 (Vulkan sees ";
    // A loader with no driver (CI's, which the Vulkan headers bring), in clhip's words.
    let no_driver = "UNSUPPORTED: Vulkan broker: vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER (-9) (line ";
    assert!(
        out.contains(no_loader) || out.contains(no_device) || out.contains(no_driver),
        "{out}"
    );
    // Nothing of the case ran before the broker: OpenCL's staging only.
    assert!(!calls.iter().any(|c| c.starts_with("cu")), "{calls:?}");
}

/// `decls` with every Vulkan name (`Vk...`, `VK_...`, `PFN_vk...`) as `MINE_` and the name, so
/// that they can stand beside the header's own.
fn rename_vulkan(decls: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if ["Vk", "VK_", "PFN_vk"].iter().any(|p| word.starts_with(p)) {
            out.push_str("MINE_");
        }
        out.push_str(word);
        word.clear();
    };
    for c in decls.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The Vulkan declarations of the reproducer's broker (templates/interop.c) against the Vulkan
/// headers (Debian: libvulkan-dev; `CLHIP_VULKAN_INCLUDE` names another include directory):
/// the broker's code compiles warning-free against the real types and prototypes (its own
/// declarations step aside when vulkan_core.h came first), and each value, struct size and
/// field offset it declares is the header's. A planted wrong value must fail the check.
fn the_vulkan_declarations_are_the_vulkan_headers() {
    let include = std::env::var_os("CLHIP_VULKAN_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    if !include.join("vulkan/vulkan_core.h").is_file() {
        support::ignore(
            "CLHIP_REQUIRE_VULKAN_HEADERS",
            format!(
                "no vulkan/vulkan_core.h under {} (Debian: libvulkan-dev)",
                include.display()
            ),
        );
    }
    let interop = repro::interop_template();
    let section = |name: &str| {
        let marker = format!("/*@ {name} @*/\n");
        let rest = &interop[interop.find(&marker).unwrap() + marker.len()..];
        rest[..rest.find("/*@ ").unwrap()].to_string()
    };
    let vulkan = section("vulkan");
    let dir = scratch("vulkan-headers");
    let inc = format!("-I{}", include.display());
    // (1) The broker's code against the real declarations.
    let prelude = "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
                   #include <vulkan/vulkan_core.h>\n\
                   static const char *call_scope;\n\
                   static void said(const char *c) { (void)c; }\n\
                   static void finish(int code) { exit(code); }\n\
                   #define CALL(call) (said(#call), (call))\n\
                   static void peer_uuid(unsigned char u[16]) { memset(u, 0, 16); }\n";
    let program = format!(
        "{prelude}{vulkan}{}{}int main(void)\n{{\n    struct vk_memory m;\n    vk_open();\n    vk_memory(&m, 8);\n    \
         vk_destroy_semaphore(vk_semaphore());\n    vk_free_memory(&m);\n    return vk_semaphore_fd(NULL) + vk_memory_fd(&m);\n}}\n",
        section("vk_semaphore"),
        section("vk_memory")
    );
    std::fs::write(dir.join("real.c"), &program).unwrap();
    cc(
        &[
            "-std=gnu11",
            "-Wall",
            "-Werror",
            "-c",
            "-o",
            "/dev/null",
            &inc,
            "real.c",
        ],
        &dir,
    );
    // (2) The declarations, renamed, held to the header's values and layouts.
    let decls = {
        let start = vulkan.find("#ifndef VULKAN_CORE_H_\n").unwrap();
        let end = vulkan[start..].find("\n#endif\n").unwrap() + start;
        vulkan[start + "#ifndef VULKAN_CORE_H_\n".len()..end].to_string()
    };
    let renamed = rename_vulkan(&decls);
    let mut checks = String::new();
    let mut structs_checked = 0;
    let mut fields: Option<String> = None;
    for line in decls.lines().map(str::trim) {
        if let Some((name, _)) = line.split_once(" = ").filter(|_| line.starts_with("VK_")) {
            checks.push_str(&format!(
                "_Static_assert((long long)MINE_{name} == (long long){name}, \"{name}\");\n"
            ));
        } else if let Some(name) = line
            .strip_prefix("typedef struct ")
            .and_then(|l| l.strip_suffix(" {"))
        {
            structs_checked += 1;
            checks.push_str(&format!(
                "_Static_assert(sizeof(MINE_{name}) == sizeof({name}), \"sizeof {name}\");\n"
            ));
            fields = Some(name.to_string());
        } else if line.starts_with('}') {
            fields = None;
        } else if let Some(name) = &fields {
            // `type field[n]; /* ... */`: the field's name is the last word before `[` or `;`.
            let decl = line.split(';').next().unwrap_or_default();
            let decl = decl.split('[').next().unwrap_or_default();
            let field = decl.rsplit([' ', '*']).next().unwrap_or_default();
            checks.push_str(&format!(
                "_Static_assert(offsetof(MINE_{name}, {field}) == offsetof({name}, {field}), \"{name}.{field}\");\n"
            ));
        }
    }
    for m in ["VK_API_VERSION_1_1", "VK_API_VERSION_1_2"] {
        checks.push_str(&format!("_Static_assert(MINE_{m} == {m}, \"{m}\");\n"));
    }
    assert!(structs_checked >= 30, "{structs_checked} structs");
    let check = |decls: &str| {
        let text = format!(
            "#include <stddef.h>\n#include <stdint.h>\n#include <vulkan/vulkan_core.h>\n{decls}\n{checks}"
        );
        std::fs::write(dir.join("values.c"), text).unwrap();
        Command::new("cc")
            .args([
                "-std=gnu11",
                "-Wall",
                "-Werror",
                "-c",
                "-o",
                "/dev/null",
                &inc,
                "values.c",
            ])
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = check(&renamed);
    assert!(o.status.success(), "{}", text(&o));
    let planted = renamed.replace(
        "MINE_VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR = 1000074002",
        "MINE_VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR = 1000074001",
    );
    assert_ne!(planted, renamed);
    let o = check(&planted);
    assert!(!o.status.success(), "a wrong value passed");
    assert!(
        text(&o).contains("VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR"),
        "{}",
        text(&o)
    );
}

tests!(
    the_c_generator_is_clhips_generator_bit_for_bit,
    a_host_reproducer_passes_and_its_planted_twin_sees_the_stale_read,
    every_host_case_builds_and_the_synced_ones_pass_on_pocl,
    a_reuse_reproducer_loops_agrees_and_fails_at_the_planted_crossing,
    every_cuda_case_compiles_against_the_cuda_api,
    shrinking_runs_the_smaller_sizes_through_clhips_workers,
    bad_ids_uncovered_cases_and_other_plants_are_refused_by_name,
    the_sync_under_test_is_the_one_the_plant_leaves_out,
    the_cuda_kernels_a_reproducer_embeds_compile,
    common_reproducers_are_short,
    every_hip_case_compiles_with_hipcc,
    workers_run_a_case_on_the_data_its_work_item_names,
    shrinking_refuses_sizes_and_data_that_change_the_outcome,
    a_simple_data_reproducer_passes_and_its_planted_twin_fails,
    the_gpu_ops_checks_pass_the_reference_and_catch_one_wrong_element,
    any_outcome_text_stays_inert_in_the_reproducer,
    issue_md_is_the_vendors_form_filled_in,
    repro_all_over_a_pocl_run_builds_and_agrees,
    vmm_fd_under_acquire_release_is_clhips_sequence,
    a_vmm_fd_reproducer_ends_where_pocl_refuses_the_import,
    a_semaphore_reproducer_ends_where_pocl_lacks_external_semaphores,
    a_vk_memory_reproducer_opens_the_broker_on_the_peers_gpu,
    the_vulkan_declarations_are_the_vulkan_headers,
    cl_dmabuf_is_clhips_sequence,
);
