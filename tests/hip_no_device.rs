//! The HIP bindings against a real HIP runtime with no device behind it: Debian's
//! libamdhip64-5 (HIP 5.2.x), which CI installs. Without libamdhip64 the tests are reported ignored, unless
//! CLHIP_REQUIRE_HIP=1 (CI), when they fail.

#[macro_use]
mod support;

use clhip::model::CaseError;
use clhip::runtimes::hip::ffi::{self, Abi, Group, Hip};
use clhip::runtimes::hip::probe as probe_hip;
use clhip::runtimes::hip::{HipPeer, discover};

fn hip() -> Hip {
    Hip::load(None).unwrap_or_else(|e| support::ignore("CLHIP_REQUIRE_HIP", e))
}

/// What HIP 5.2's libamdhip64 lacks of everything hip/ffi binds: only symbols of later headers
/// (hipGetDevicePropertiesR0600: 6.0; hipExtHostAlloc: optional, declared for 6.3 and exported
/// by no released library found), neither of them "missing". Checked with `nm -D` on Debian's
/// libamdhip64.so.5.2.21153.
const ABSENT_IN_5_2: [&str; 2] = ["hipGetDevicePropertiesR0600", "hipExtHostAlloc"];

fn loads_hip_5_2_with_abi_v5_and_every_symbol_it_needs() {
    let hip = hip();
    eprintln!(
        "loaded {} (candidate {}): HIP {}.{}.{} ({}), ABI {:?}",
        hip.path,
        hip.candidate,
        hip.version.major,
        hip.version.minor,
        hip.version.patch,
        hip.version.raw,
        hip.abi
    );
    if hip.version.major != 5 {
        support::not_applicable("not HIP 5: the 5.2-specific checks do not apply");
    }
    assert_eq!(hip.abi, Abi::V5);
    assert!(hip.path.contains("libamdhip64.so.5"), "{}", hip.path);
    let missing = hip.missing();
    eprintln!("missing (expected for this version): {missing:?}");
    assert!(missing.is_empty(), "HIP 5.x lacks {missing:?}");
    // hipExtHostAlloc is no part of 5.x: not even shown as optional.
    assert!(
        hip.optional_absent().is_empty(),
        "{:?}",
        hip.optional_absent()
    );
    // The install is where the library was found: Debian's multiarch directory.
    assert!(
        hip.install_dir.join("libamdhip64.so.5").exists(),
        "{}",
        hip.install_dir.display()
    );
    if hip.version.minor == 2 {
        // The symbols a 5.2 library really lacks: exactly the later ones.
        let absent: Vec<&str> = ffi::HIP_SYMBOLS
            .iter()
            .map(|(_, n)| *n)
            .filter(|n| !hip.fns.has(n))
            .collect();
        eprintln!("absent from the 5.2 library: {absent:?}");
        assert_eq!(absent, ABSENT_IN_5_2);
        assert!(hip.version.legacy_alloc_prop());
        // VMM, external memory, semaphores and IPC are all exported by 5.2.
        for g in [
            Group::Vmm,
            Group::ExternalMemory,
            Group::ExternalSemaphore,
            Group::Ipc,
        ] {
            assert!(hip.missing_in(g).is_empty(), "{g:?}");
        }
    }
}

fn hiprtc_is_found_for_5_2_inside_libamdhip64_or_in_libhiprtc() {
    let hip = hip();
    match ffi::open_hiprtc(&hip) {
        Ok(rtc) => {
            eprintln!("hiprtc from {}", rtc.path);
            assert!(rtc.missing.is_empty(), "{:?}", rtc.missing);
        }
        Err(e) => panic!("no hiprtc for HIP {:?}: {e}", hip.version),
    }
}

fn optional_libraries_absent_only_say_so() {
    // rocBLAS, rocSOLVER and HSA's dmabuf export are optional: absent, they are a reason, not a
    // crash. Debian's HSA 1.5 (ROCm 5.2) has hsa_init but no hsa_amd_portable_export_dmabuf
    // (ROCR-Runtime hsa_ext_amd.h has it from rocm-5.6.0). Each is looked for in the install
    // HIP came from, nowhere else.
    let hip = hip();
    for (what, r) in [
        (
            "rocBLAS",
            ffi::open_rocblas(&hip).map(|l| (l.path, l.missing)),
        ),
        (
            "rocSOLVER",
            ffi::open_rocsolver(&hip).map(|l| (l.path, l.missing)),
        ),
        ("HSA", ffi::open_hsa(&hip).map(|l| (l.path, l.missing))),
    ] {
        match r {
            Ok((path, missing)) => eprintln!("{what}: {path}, missing {missing:?}"),
            Err(e) => {
                eprintln!("{what}: {e}");
                assert!(e.contains("not found (tried"), "{e}");
                let dir = hip.install_dir.display().to_string();
                assert!(e.contains(&format!("tried {dir}/")), "{e}");
            }
        }
    }
}

fn open_without_a_device_is_unsupported_naming_hip_error_no_device() {
    let hip = hip();
    if hip.device_count().is_ok_and(|n| n > 0) {
        support::not_applicable("a HIP device is present: the no-device checks do not apply");
    }
    drop(hip);
    match HipPeer::open(0, None) {
        Err(CaseError::Unsupported {
            reason,
            error: Some(e),
        }) => {
            eprintln!("{reason}: {e}");
            // The participant is written: the refusal is the runtime's, not a placeholder's.
            assert!(!reason.contains("not implemented"), "{reason}");
            assert_eq!(reason, "no HIP device");
            assert_eq!(e.call, "hipGetDeviceCount");
            assert_eq!(e.name, "hipErrorNoDevice");
            assert_eq!(e.code, 100);
        }
        Err(other) => panic!("expected Unsupported with hipErrorNoDevice, got {other:?}"),
        Ok(_) => panic!("opened a HIP device on a machine without one"),
    }
    let d = discover(None).unwrap_err();
    assert!(d.contains("hipErrorNoDevice"), "{d}");
}

fn probe_reports_library_version_abi_and_no_device() {
    let hip = hip();
    let no_device = hip.device_count().is_err();
    drop(hip);
    let s = probe_hip(None);
    eprintln!("{}", serde_json::to_string_pretty(&s).unwrap());
    let lib = s.library.as_deref().unwrap();
    assert!(lib.contains("libamdhip64.so"), "{lib}");
    let v = s.runtime_version.as_deref().unwrap();
    assert!(v.contains("(ABI V"), "{v}");
    // One install, one HIP: nothing mixed; the companion libraries are listed as found there.
    assert!(!s.status.contains("mixed ROCm install"), "{}", s.status);
    assert_eq!(s.libraries.len(), 4, "{:?}", s.libraries);
    assert!(s.libraries[0].starts_with("hiprtc: "), "{:?}", s.libraries);
    if no_device {
        assert!(
            s.status.starts_with(
                "unsupported: no HIP device (hipGetDeviceCount returned hipErrorNoDevice (100))"
            ),
            "{}",
            s.status
        );
    }
}

tests!(
    loads_hip_5_2_with_abi_v5_and_every_symbol_it_needs,
    hiprtc_is_found_for_5_2_inside_libamdhip64_or_in_libhiprtc,
    optional_libraries_absent_only_say_so,
    open_without_a_device_is_unsupported_naming_hip_error_no_device,
    probe_reports_library_version_abi_and_no_device
);
