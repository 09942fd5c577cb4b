//! The kernels of `kernels/*.hip`, compiled by hiprtc for the device's exact gcnArchName.

use std::ffi::{CString, c_char, c_int};
use std::ptr::{null, null_mut};

use crate::model::{Api, ApiError, CaseError, Phase};
use crate::runtimes::gpu::compile_refused;

use super::ffi::{self, OptLib, RtcFns, c_buf_string, hiprtcProgram, hiprtcResult};
use super::status::need;

fn rtc_check(
    rtc: &OptLib<RtcFns>,
    call: &str,
    r: hiprtcResult,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    crate::calls::record(call);
    if r == ffi::HIPRTC_SUCCESS {
        return Ok(());
    }
    // The canonical enum name; hiprtcGetErrorString's text, where it differs, goes in detail.
    let text = rtc
        .fns
        .hiprtcGetErrorString
        // SAFETY: returns a static NUL-terminated string (or null).
        .and_then(|f| unsafe { ffi::c_string(f(r)) })
        .unwrap_or_default();
    let name = ffi::hiprtc_result_name(r);
    let mut detail = detail();
    if !text.is_empty() && text != name {
        detail = if detail.is_empty() {
            text
        } else {
            format!("{text}: {detail}")
        };
    }
    Err(ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: r as i64,
        name,
        detail,
    })
}

/// Compile `source` for `arch` (the full gcnArchName, e.g. `gfx90a:sramecc+:xnack-`, which
/// hiprtc takes as a target id) to a code object for hipModuleLoadData.
pub(super) fn compile(
    rtc: &OptLib<RtcFns>,
    source: &str,
    arch: &str,
) -> Result<Vec<u8>, CaseError> {
    let lib = rtc.path.as_str();
    let src =
        CString::new(source).map_err(|_| CaseError::unsupported("kernel source has a NUL"))?;
    let create = need(rtc.fns.hiprtcCreateProgram, lib, "hiprtcCreateProgram")?;
    let destroy = need(rtc.fns.hiprtcDestroyProgram, lib, "hiprtcDestroyProgram")?;
    let mut prog: hiprtcProgram = null_mut();
    let name = c"clhip.hip".as_ptr();
    // SAFETY: NUL-terminated source and name, no headers.
    let r = unsafe { create(&mut prog, src.as_ptr(), name, 0, null(), null()) };
    rtc_check(rtc, "hiprtcCreateProgram", r, String::new).running()?;
    let result = compile_program(rtc, prog, arch);
    // SAFETY: created above, destroyed once.
    unsafe { destroy(&mut prog) };
    result
}

fn compile_program(
    rtc: &OptLib<RtcFns>,
    prog: hiprtcProgram,
    arch: &str,
) -> Result<Vec<u8>, CaseError> {
    let lib = rtc.path.as_str();
    let compile = need(rtc.fns.hiprtcCompileProgram, lib, "hiprtcCompileProgram")?;
    let code_size = need(rtc.fns.hiprtcGetCodeSize, lib, "hiprtcGetCodeSize")?;
    let get_code = need(rtc.fns.hiprtcGetCode, lib, "hiprtcGetCode")?;
    let opts = [CString::new(format!("--offload-arch={arch}"))
        .map_err(|_| CaseError::unsupported("arch name has a NUL"))?];
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `ptrs` holds `opts.len()` live NUL-terminated strings.
    let r = unsafe { compile(prog, ptrs.len() as c_int, ptrs.as_ptr()) };
    if let Err(e) = rtc_check(rtc, "hiprtcCompileProgram", r, String::new) {
        let unknown_target = r == ffi::HIPRTC_ERROR_INVALID_OPTION;
        let log = program_log(rtc, prog);
        return Err(compile_refused(e, "hiprtc", arch, &log, unknown_target));
    }
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    let r = unsafe { code_size(prog, &mut size) };
    rtc_check(rtc, "hiprtcGetCodeSize", r, String::new).running()?;
    let mut code = vec![0u8; size];
    // SAFETY: `code` holds the `size` bytes hiprtcGetCodeSize asked for.
    let r = unsafe { get_code(prog, code.as_mut_ptr().cast()) };
    rtc_check(rtc, "hiprtcGetCode", r, String::new).running()?;
    Ok(code)
}

fn program_log(rtc: &OptLib<RtcFns>, prog: hiprtcProgram) -> String {
    let (Some(log_size), Some(get_log)) =
        (rtc.fns.hiprtcGetProgramLogSize, rtc.fns.hiprtcGetProgramLog)
    else {
        return String::new();
    };
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    if unsafe { log_size(prog, &mut size) } != ffi::HIPRTC_SUCCESS {
        return String::new();
    }
    let mut log = vec![0 as c_char; size.max(1)];
    // SAFETY: `log` holds the `size` bytes asked for.
    match unsafe { get_log(prog, log.as_mut_ptr()) } {
        ffi::HIPRTC_SUCCESS => c_buf_string(&log),
        r => ffi::hiprtc_result_name(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::gpu::{Kernel, kernel_source};
    use crate::runtimes::hip::ffi::Hip;

    /// The kernels through the real hiprtc where one loads (Debian's HIP 5.2 embeds it in
    /// libamdhip64 and compiles through libamd-comgr): no device is needed to compile for an
    /// explicit target. Ignored without libamdhip64.
    #[test]
    #[cfg_attr(
        not(clhip_test_hip),
        ignore = "needs libamdhip64; none was found when this was built"
    )]
    fn hiprtc_compiles_the_kernels_for_an_explicit_target() {
        // hiprtc compiles through comgr's LLVM; PoCL, which other tests in this process load,
        // brings another LLVM, and two LLVMs in one process abort ("Option ... registered more
        // than once"). So the compile runs in a fresh copy of this test binary.
        if std::env::var_os("CLHIP_HIPRTC_CHILD").is_none() {
            let exe = std::env::current_exe().expect("the test binary's path");
            let out = std::process::Command::new(exe)
                .args([
                    "--exact",
                    "runtimes::hip::kernels::tests::hiprtc_compiles_the_kernels_for_an_explicit_target",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("CLHIP_HIPRTC_CHILD", "1")
                .output()
                .expect("the test binary runs");
            assert!(
                out.status.success(),
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let hip = Hip::load(None).expect("libamdhip64 was found when this was built");
        let rtc = match ffi::open_hiprtc(&hip) {
            Ok(r) if r.missing.is_empty() => r,
            Ok(r) => panic!("hiprtc {} lacks {:?}", r.path, r.missing),
            Err(e) => panic!("libamdhip64 loads, but hiprtc does not: {e:?}"),
        };
        // gcnArchName as hipGetDeviceProperties gives it: a target id with feature flags.
        for arch in ["gfx908", "gfx90a:sramecc+:xnack-"] {
            let code = match compile(&rtc, &kernel_source(), arch) {
                Ok(c) => c,
                Err(e) => panic!("{arch}: kernels/*.hip do not compile under hiprtc: {e:?}"),
            };
            eprintln!("{arch}: {} byte code object from {}", code.len(), rtc.path);
            assert!(
                code.starts_with(b"\x7fELF"),
                "{arch}: not an ELF code object"
            );
            for name in Kernel::ALL.map(Kernel::name) {
                let found = code.windows(name.len() + 1).any(|w| {
                    w[..name.len()] == *name.as_bytes() && matches!(w[name.len()], 0 | b'.')
                });
                assert!(found, "{arch}: {name} not in the code object");
            }
        }
        // Not tried: a target this hiprtc does not know. Debian's HIP 5.2 hiprtc dies with
        // SIGSEGV inside hiprtcCompileProgram for `gfx942` (newer than its LLVM) and for `gfx0`,
        // instead of returning HIPRTC_ERROR_INVALID_OPTION; on a device, open() compiles for
        // the device's own gcnArchName, which the matching hiprtc knows.
    }
}
