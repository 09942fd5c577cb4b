//! One ROCm install per process, against real loading: Debian's libamdhip64 (HIP 5.2) in a fake
//! install root A beside stub rocBLAS, rocSOLVER and hiprtc libraries built here with `cc`
//! that would bring a second libamdhip64 (a stub `libamdhip64.so.6` in root B) into the
//! process. Every stub function of theirs calls abort(): if the harness called one, this test
//! binary would die.
//!
//! - librocblas.so.4 and libhiprtc.so.5 of root A need libamdhip64.so.6 directly, found through
//!   their RUNPATH in root B: refused before loading (ELF DT_NEEDED), naming both files.
//! - librocsolver.so.0 of root A needs a helper that needs libamdhip64.so.6: the direct check
//!   cannot see it, the /proc/self/maps check after loading does; the library is unloaded again.
//! - root C holds a rocBLAS that needs the very soname HIP has (libamdhip64.so.5): it loads.
//!
//! One test function: the mixed state is process-wide, and a test binary of its own is a
//! process of its own. Without Debian's libamdhip64 or a C compiler the test is reported
//! ignored, unless CLHIP_REQUIRE_HIP=1 (CI).

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use clhip::model::CaseError;
use clhip::runtimes::hip::ffi::{self, Hip};
use clhip::runtimes::hip::probe as probe_hip;
use clhip::runtimes::hip::{install, open_blas, open_rtc, open_solver};

const DEBIAN_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// Build `src` into `out` as a shared object with `soname`, linked with `args`.
fn cc(dir: &Path, name: &str, src: &str, out: &Path, soname: &str, args: &[String]) {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("writing the stub source");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .arg(&c)
        .arg(format!("-Wl,-soname,{soname}"))
        .arg("-Wl,--no-as-needed")
        .args(args)
        .status()
        .expect("running cc");
    assert!(status.success(), "cc failed for {name}");
}

/// Stub functions named `names`, each calling abort(); `rocblas_get_version_string`, where
/// asked for, answers instead (the control install's version query is harmless).
fn stubs(names: &[&str]) -> String {
    let mut s = String::from("#include <stdlib.h>\n#include <string.h>\n");
    for n in names {
        if *n == "rocblas_get_version_string" {
            s.push_str(
                "int rocblas_get_version_string(char* b, size_t n) { \
                 strncpy(b, \"0.0.0-stub\", n); return 0; }\n",
            );
        } else {
            s.push_str(&format!("int {n}(void) {{ abort(); }}\n"));
        }
    }
    s
}

fn names(list: &[(ffi::Group, &'static str)]) -> Vec<&'static str> {
    list.iter().map(|(_, n)| *n).collect()
}

fn mapped(prefix: &str) -> Vec<String> {
    install::mapped_files(prefix)
}

fn unsupported_reason(r: Result<impl Sized, CaseError>, what: &str) -> String {
    match r {
        Err(CaseError::Unsupported { reason, .. }) => reason,
        Err(other) => panic!("{what}: expected unsupported, got {other:?}"),
        Ok(_) => panic!("{what}: opened from a mixed install"),
    }
}

fn a_rocm_library_that_would_bring_a_second_libamdhip64_is_refused_and_not_loaded() {
    if !Path::new(DEBIAN_HIP).exists() {
        support::ignore(
            "CLHIP_REQUIRE_HIP",
            format!("no {DEBIAN_HIP} (Debian: libamdhip64-5)"),
        );
    }
    support::need_tool("cc", "CLHIP_REQUIRE_HIP");
    let tmp: PathBuf =
        std::env::temp_dir().join(format!("clhip-mixed-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let (a, b, c) = (tmp.join("a/lib"), tmp.join("b/lib"), tmp.join("c/lib"));
    for d in [&a, &b, &c] {
        std::fs::create_dir_all(d).expect("temp install roots");
    }

    // Root B: another release's HIP, as far as the loader can tell.
    let hip6 = b.join("libamdhip64.so.6");
    cc(
        &tmp,
        "hip6",
        "int hipRuntimeGetVersion(int* v) { *v = 60342134; return 0; }\n",
        &hip6,
        "libamdhip64.so.6",
        &[],
    );
    let link_b = [
        format!("-L{}", b.display()),
        "-l:libamdhip64.so.6".to_string(),
        format!("-Wl,-rpath,{}", b.display()),
    ];

    // Root A: Debian's HIP 5.2, and companions that need root B's.
    std::os::unix::fs::symlink(DEBIAN_HIP, a.join("libamdhip64.so.5")).expect("symlink");
    cc(
        &tmp,
        "rocblas",
        &stubs(&names(ffi::BLAS_SYMBOLS)),
        &a.join("librocblas.so.4"),
        "librocblas.so.4",
        &link_b,
    );
    cc(
        &tmp,
        "hiprtc",
        &stubs(&names(ffi::RTC_SYMBOLS)),
        &a.join("libhiprtc.so.5"),
        "libhiprtc.so.5",
        &link_b,
    );
    // rocSOLVER needs root B's HIP only through a helper of its own.
    cc(
        &tmp,
        "helper",
        "int clhip_stub_helper(void) { return 0; }\n",
        &b.join("libhelper.so"),
        "libhelper.so",
        &link_b,
    );
    cc(
        &tmp,
        "rocsolver",
        &stubs(&names(ffi::SOLVER_SYMBOLS)),
        &a.join("librocsolver.so.0"),
        "librocsolver.so.0",
        &[
            format!("-L{}", b.display()),
            "-l:libhelper.so".to_string(),
            format!("-Wl,-rpath,{}", b.display()),
        ],
    );

    // Root C: the same HIP and a rocBLAS that needs exactly its soname.
    std::os::unix::fs::symlink(DEBIAN_HIP, c.join("libamdhip64.so.5")).expect("symlink");
    cc(
        &tmp,
        "rocblas_ok",
        &stubs(&names(ffi::BLAS_SYMBOLS)),
        &c.join("librocblas.so.4"),
        "librocblas.so.4",
        &[
            format!("-L{}", c.display()),
            "-l:libamdhip64.so.5".to_string(),
        ],
    );

    let hip = Hip::load(Some(&tmp.join("a"))).expect("Debian's libamdhip64 through root A");
    assert_eq!(
        hip.install_dir, a,
        "the install is root A, where HIP was found"
    );
    let one_hip = mapped("libamdhip64.so");
    assert_eq!(one_hip.len(), 1, "{one_hip:?}");

    // rocBLAS and hiprtc: refused before loading, naming both libamdhip64 files.
    let blas = unsupported_reason(open_blas(&hip), "rocBLAS");
    eprintln!("rocBLAS: unsupported: {blas}");
    let rtc = unsupported_reason(open_rtc(&hip), "hiprtc");
    eprintln!("hiprtc: unsupported: {rtc}");
    for (what, reason) in [("rocBLAS", &blas), ("hiprtc", &rtc)] {
        assert!(
            reason.starts_with("mixed ROCm install: "),
            "{what}: {reason}"
        );
        assert!(
            reason.contains(&hip6.display().to_string()),
            "{what} names root B's: {reason}"
        );
        assert!(
            reason.contains(&one_hip[0]),
            "{what} names the mapped one: {reason}"
        );
    }
    assert!(mapped("librocblas.so").is_empty(), "rocBLAS was loaded");
    assert!(mapped("libhiprtc.so").is_empty(), "hiprtc was loaded");
    assert_eq!(mapped("libamdhip64.so"), one_hip, "a second HIP was loaded");

    // rocSOLVER: seen only after loading; refused, unloaded, and nothing of it called.
    let solver = unsupported_reason(open_solver(&hip), "rocSOLVER");
    eprintln!("rocSOLVER: unsupported: {solver}");
    assert!(solver.starts_with("mixed ROCm install: "), "{solver}");
    assert!(solver.contains(&hip6.display().to_string()), "{solver}");
    assert!(solver.contains(&one_hip[0]), "{solver}");
    assert!(solver.contains("librocsolver.so.0"), "{solver}");
    assert!(
        mapped("librocsolver.so").is_empty(),
        "rocSOLVER stayed loaded"
    );
    assert_eq!(
        mapped("libamdhip64.so"),
        one_hip,
        "the second HIP stayed loaded"
    );

    // The probe says so too, for root A.
    let probe = probe_hip(Some(&tmp.join("a")));
    eprintln!("probe: {}\n{:#?}", probe.status, probe.libraries);
    assert!(
        probe
            .status
            .starts_with("unsupported: mixed ROCm install: "),
        "{}",
        probe.status
    );
    assert!(
        probe.status.contains(&hip6.display().to_string()),
        "{}",
        probe.status
    );
    for what in ["hiprtc", "rocBLAS", "rocSOLVER"] {
        assert!(
            probe
                .libraries
                .iter()
                .any(|l| l.starts_with(&format!("{what}: mixed ROCm install: "))),
            "{what}: {:?}",
            probe.libraries
        );
    }
    assert_eq!(mapped("libamdhip64.so"), one_hip);

    // Control: a companion of the same HIP loads (and is not called here).
    let hip_c = Hip::load(Some(&tmp.join("c"))).expect("Debian's libamdhip64 through root C");
    assert_eq!(hip_c.install_dir, c);
    match open_blas(&hip_c) {
        Ok(lib) => {
            assert!(lib.path.ends_with("c/lib/librocblas.so.4"), "{}", lib.path);
            assert_eq!(mapped("libamdhip64.so"), one_hip);
        }
        Err(e) => panic!("root C is one install, yet: {e:?}"),
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

tests!(a_rocm_library_that_would_bring_a_second_libamdhip64_is_refused_and_not_loaded);
