use super::*;
use crate::runtimes::opencl::VendorLibrary;

#[test]
fn uuid_is_canonical() {
    let b: Vec<u8> = (0..16).collect();
    assert_eq!(uuid_string(&b), "00010203-0405-0607-0809-0a0b0c0d0e0f");
}

#[test]
fn handle_names_follow_cl_ext_h() {
    assert_eq!(memory_handle_name(0x2060), "OPAQUE_FD");
    assert_eq!(memory_handle_name(0x2067), "DMA_BUF");
    assert_eq!(semaphore_handle_name(0x2058), "SYNC_FD");
    assert_eq!(memory_handle_name(0x1234), "0x1234");
}

fn vendor(library: &str) -> VendorLibrary {
    VendorLibrary {
        library: library.into(),
        listed_in: "OCL_ICD_FILENAMES".into(),
    }
}

/// A vendor child's answer: one platform with devices labelled as that child labelled them.
fn answered(labels: &[&str]) -> VendorResult {
    let fixture: Probe =
        serde_json::from_str(include_str!("../../tests/fixtures/nvidia-h200-probe.json")).unwrap();
    let mut platform = fixture.platforms[0].clone();
    let template = platform.devices[0].clone();
    platform.devices = labels
        .iter()
        .map(|l| DeviceProbe {
            label: l.to_string(),
            ..template.clone()
        })
        .collect();
    VendorResult {
        state: VendorState::Ok,
        platforms: vec![platform],
        stderr_tail: Vec::new(),
    }
}

#[test]
fn merged_vendors_count_labels_per_family_and_keep_their_library() {
    let crashed = VendorResult {
        state: VendorState::Crashed {
            signal: "SIGSEGV".into(),
            during: "in clGetPlatformIDs".into(),
        },
        platforms: Vec::new(),
        stderr_tail: vec!["".into(), "last words".into(), "".into()],
    };
    let (status, platforms, rows) = merge_vendors(
        &[vendor("liba.so"), vendor("libbad.so"), vendor("libb.so")],
        vec![
            answered(&["pocl0"]),
            crashed,
            answered(&["pocl0", "nvidia0"]),
        ],
    );
    assert_eq!(status, "ok");
    type Row = (String, usize, Option<String>, Option<String>);
    let devs: Vec<Row> = platforms
        .iter()
        .flat_map(|p| &p.devices)
        .map(|d| {
            (
                d.label.clone(),
                d.platform_index,
                d.icd_library.clone(),
                d.icd_label.clone(),
            )
        })
        .collect();
    let some = |l: &str| Some(l.to_string());
    assert_eq!(
        devs,
        [
            ("pocl0".into(), 0, some("liba.so"), some("pocl0")),
            ("pocl1".into(), 1, some("libb.so"), some("pocl0")),
            ("nvidia0".into(), 1, some("libb.so"), some("nvidia0")),
        ]
    );
    assert_eq!(platforms[1].index, 1);
    let p = Probe {
        opencl_status: status,
        platforms,
        opencl_vendors: rows,
        ..probe_rest(hip::probe(None), Vec::new())
    };
    assert_eq!(
        p.broken_vendors(),
        [
            "OpenCL vendor library libbad.so (listed in OCL_ICD_FILENAMES): crashed: SIGSEGV \
          in clGetPlatformIDs; last output: last words"
        ]
    );
    assert_eq!(
        p.icd_env("pocl1"),
        Some(opencl::single_vendor_env("libb.so"))
    );
    let text = p.render();
    assert!(
        text.contains("vendor library libbad.so (OCL_ICD_FILENAMES): BROKEN, crashed: SIGSEGV"),
        "{text}"
    );
}

#[test]
fn with_no_vendor_answering_opencl_is_unsupported_with_the_reason() {
    let none = VendorResult {
        state: VendorState::NoPlatform {
            error: "clGetPlatformIDs returned CL_PLATFORM_NOT_FOUND_KHR (-1001)".into(),
        },
        ..VendorResult::default()
    };
    let (status, platforms, rows) = merge_vendors(&[vendor("libgone.so")], vec![none]);
    assert!(platforms.is_empty());
    assert_eq!(
        status,
        "unsupported: clGetPlatformIDs returned CL_PLATFORM_NOT_FOUND_KHR (-1001)"
    );
    assert!(!rows[0].state.is_broken());
    assert!(
        merge_vendors(&[], Vec::new())
            .0
            .contains("no OpenCL vendor library listed")
    );
}

#[test]
fn probe_files_from_before_vendor_rows_still_load() {
    let p: Probe =
        serde_json::from_str(include_str!("../../tests/fixtures/mi100-like-probe.json")).unwrap();
    assert!(p.opencl_vendors.is_empty() && p.broken_vendors().is_empty());
    let label = &p.platforms[0].devices[0].label;
    assert_eq!(p.icd_env(label), None);
}

fn hip_at(library: &str, runtime_version: &str) -> RuntimeStatus {
    RuntimeStatus {
        library: Some(library.into()),
        runtime_version: Some(runtime_version.into()),
        ..several_installs(1)
    }
}

#[test]
fn an_install_is_named_by_the_rocm_release_in_its_file_name_else_by_its_hip_version() {
    // ROCm's packages: libamdhip64.so.<major>.<minor>.<ROCM_VERSION>.
    let rocm = hip_at(
        "/opt/rocm-6.3.2/lib/libamdhip64.so.6.3.60302",
        "6.3.42134 (ABI V6)",
    );
    assert_eq!(install_version(&rocm), "6.3.2");
    let seven = hip_at(
        "/opt/rocm-7.0.0/lib/libamdhip64.so.7.0.70000",
        "7.0.0 (ABI V6)",
    );
    assert_eq!(install_version(&seven), "7.0.0");
    // Debian's file carries the HIP version, which is not that encoding: the HIP version
    // read from the library names it.
    let debian = hip_at(
        "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153",
        "5.2.21153 (ABI V5)",
    );
    assert_eq!(install_version(&debian), "5.2.21153");
    // A soname alone, or a file name that only looks like the encoding.
    let soname = hip_at("/x/lib/libamdhip64.so.6", "6.3.42133 (ABI V6)");
    assert_eq!(install_version(&soname), "6.3.42133");
    let odd = hip_at("/x/lib/libamdhip64.so.6.3.70302", "6.3.42133 (ABI V6)");
    assert_eq!(install_version(&odd), "6.3.42133");
    let gone = RuntimeStatus {
        library: None,
        runtime_version: None,
        ..several_installs(1)
    };
    assert_eq!(install_version(&gone), "unknown");
}

#[test]
fn installs_of_one_version_are_told_apart_and_others_keep_their_version() {
    let v = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        install_labels(&v(&["6.3.2", "7.0.0", "6.3.2", "unknown"])),
        v(&["6.3.2~1", "7.0.0", "6.3.2~2", "unknown"])
    );
    assert_eq!(install_labels(&v(&["6.3.2"])), v(&["6.3.2"]));
}

fn two_installs() -> Probe {
    serde_json::from_str(include_str!(
        "../../tests/fixtures/two-rocm-installs-probe.json"
    ))
    .unwrap()
}

#[test]
fn each_install_is_a_runtime_of_its_own_in_probe_and_fingerprint() {
    let mut p = two_installs();
    p.hip_installs[0].opencl_library = None;
    let names: Vec<String> = p
        .device_runtimes()
        .iter()
        .map(DeviceRuntime::name)
        .collect();
    assert_eq!(names, ["cuda", "hip@6.3.2", "hip@7.0.0"]);
    // The fixture's labels are what the probe would have derived from its files.
    for i in &p.hip_installs {
        assert_eq!(install_version(&i.runtime), i.label);
    }
    let fp = p.fingerprint();
    let apis: Vec<&str> = fp.runtimes.iter().map(|r| r.api.as_str()).collect();
    assert_eq!(apis, ["hip@6.3.2", "hip@7.0.0", "cuda"]);
    assert_eq!(
        fp.runtimes[1].library.as_deref(),
        Some("/opt/rocm-7.0.0/lib/libamdhip64.so.7.0.70000")
    );
    assert!(
        fp.lines()
            .contains(&"hip@7.0.0 device 0 arch: gfx908:sramecc+:xnack-".to_string()),
        "{:#?}",
        fp.lines()
    );
    let text = p.render();
    for want in [
        "hip: 2 ROCm installs, each probed in a process of its own",
        "hip@6.3.2: loaded\n  install            /opt/rocm-6.3.2\n  ROCm OpenCL        none in this install",
        "hip@7.0.0: loaded\n  install            /opt/rocm-7.0.0\n  ROCm OpenCL        /opt/rocm-7.0.0/lib/libamdocl64.so",
        "    device hip@6.3.2:0: AMD Instinct MI100 (gfx908:sramecc+:xnack-)",
        "    device hip@7.0.0:0: AMD Instinct MI100",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    // A probe file round-trips with its installs; one without them has none.
    let back: Probe = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back.hip_installs.len(), 2);
    assert_eq!(
        back.hip_install("7.0.0").map(|i| i.root.clone()),
        Some("/opt/rocm-7.0.0".into())
    );
    let one: Probe =
        serde_json::from_str(include_str!("../../tests/fixtures/mi100-like-probe.json")).unwrap();
    assert!(one.hip_installs.is_empty());
    let names: Vec<String> = one
        .device_runtimes()
        .iter()
        .map(DeviceRuntime::name)
        .collect();
    assert_eq!(names, ["cuda", "hip"]);
    assert!(
        !serde_json::to_string(&one)
            .unwrap()
            .contains("hip_installs")
    );
}

#[test]
#[cfg_attr(
    not(clhip_test_opencl),
    ignore = "needs an OpenCL ICD; none was found when this was built"
)]
fn probe_lists_an_opencl_device_with_svm_caps() {
    crate::runtimes::opencl::unit_test_device();
    let p = probe(None);
    assert_eq!(p.opencl_status, "ok");
    let d = &p.platforms.iter().flat_map(|p| &p.devices).next().unwrap();
    assert!(matches!(d.svm, Queried::Value(_) | Queried::Error(_)));
    let text = p.render();
    assert!(text.contains("SVM"), "{text}");
    let json = serde_json::to_string(&p).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["platforms"][0]["devices"][0]["label"].is_string());
    assert!(v["hip"]["status"].is_string() && v["cuda"]["status"].is_string());
}

/// A stand-in for `clhip probe --json`: a script that checks its arguments, prints `answer` on
/// stdout and `stderr` on stderr, and exits `code`.
fn fake_probe(dir: &std::path::Path, answer: &str, stderr: &str, code: i32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let n = std::fs::read_dir(dir).unwrap().count();
    let json = dir.join(format!("answer-{n}.json"));
    std::fs::write(&json, answer).unwrap();
    let exe = dir.join(format!("clhip-{n}"));
    std::fs::write(
        &exe,
        format!(
            "#!/bin/sh\n[ \"$*\" = 'probe --json --rocm-path /opt/rocm' ] || exit 9\n\
             cat '{}'\necho '{stderr}' >&2\nexit {code}\n",
            json.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

#[test]
fn the_probe_child_is_judged_by_its_answer_and_its_exit() {
    let dir = tempfile::tempdir().unwrap();
    let rocm = [PathBuf::from("/opt/rocm")];
    let fixture = include_str!("../../tests/fixtures/mi100-like-probe.json");
    let expected: Probe = serde_json::from_str(fixture).unwrap();
    let run = |answer: &str, stderr: &str, code: i32| {
        probe_in_child(&fake_probe(dir.path(), answer, stderr, code), &rocm)
    };
    let error = |answer: &str, stderr: &str, code: i32| {
        format!("{:#}", run(answer, stderr, code).unwrap_err())
    };

    // Driver chatter on stderr beside a whole answer is no failure.
    let p = run(fixture, "driver chatter", 0).unwrap();
    assert_eq!(p.fingerprint(), expected.fingerprint());
    assert_eq!(p.platforms, expected.platforms);

    let e = error("", "no GPU here", 3);
    assert_eq!(e, "the probe process failed (exit status: 3): no GPU here");
    let e = error("{", "", 0);
    assert!(e.starts_with("reading the probe process's JSON: "), "{e}");
    // Exit 1 is a broken vendor's, and stands only with the vendor named in the answer.
    let e = error(fixture, "", 1);
    assert_eq!(
        e,
        "the probe process failed (exit status: 1), naming no broken vendor: it printed nothing \
         on stderr"
    );
    let mut broken = expected.clone();
    broken.opencl_vendors.push(VendorProbe {
        library: "libbad.so".into(),
        listed_in: "OCL_ICD_FILENAMES".into(),
        state: VendorState::Crashed {
            signal: "SIGSEGV".into(),
            during: "in clGetPlatformIDs".into(),
        },
        platforms: 0,
        stderr_tail: Vec::new(),
    });
    let answer = serde_json::to_string_pretty(&broken).unwrap();
    let p = run(&answer, "", i32::from(BROKEN_VENDOR_EXIT)).unwrap();
    assert_eq!(p.broken_vendors(), broken.broken_vendors());
    assert_eq!(p.broken_vendors().len(), 1);
}
