//! NVRTC: `kernels/*.hip` compiled to a cubin for the device's exact `sm_XY`.

use std::ffi::{CString, c_char, c_int};
use std::ptr::{null, null_mut};

use cudarc::nvrtc::sys as rtc;

use super::error::call;
use crate::model::{CaseError, Phase};
use crate::runtimes::gpu::compile_refused;
use crate::runtimes::text::c_buf_string;

/// The options [`compile`] passes, for the kernel cache's key.
pub(super) const OPTIONS: &str = "--gpu-architecture=<arch> --std=c++17";

/// Compile `source` to a cubin for `arch` (`sm_90`). A cubin, not PTX: PTX from an NVRTC newer
/// than the driver is refused at load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), and a cubin is what
/// the device runs with no JIT in between.
pub(super) fn compile(source: &str, arch: &str) -> Result<Vec<u8>, CaseError> {
    let src =
        CString::new(source).map_err(|_| CaseError::unsupported("kernel source has a NUL"))?;
    let mut prog: rtc::nvrtcProgram = null_mut();
    let name = c"clhip.hip".as_ptr();
    // SAFETY: NUL-terminated source and name, no headers.
    unsafe {
        call!(rtc::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name,
            0,
            null(),
            null()
        ))
    }
    .running()?;
    let result = compile_program(prog, arch);
    // SAFETY: created above, destroyed once.
    unsafe { rtc::nvrtcDestroyProgram(&mut prog) };
    result
}

fn compile_program(prog: rtc::nvrtcProgram, arch: &str) -> Result<Vec<u8>, CaseError> {
    let opts = [
        CString::new(format!("--gpu-architecture={arch}"))
            .map_err(|_| CaseError::unsupported("arch name has a NUL"))?,
        c"--std=c++17".to_owned(),
    ];
    debug_assert_eq!(OPTIONS, "--gpu-architecture=<arch> --std=c++17");
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `ptrs` holds `opts.len()` live NUL-terminated strings.
    let compiled = unsafe {
        call!(rtc::nvrtcCompileProgram(
            prog,
            ptrs.len() as c_int,
            ptrs.as_ptr()
        ))
    };
    if let Err(e) = compiled {
        let unknown_target = e.name == "NVRTC_ERROR_INVALID_OPTION";
        let log = program_log(prog);
        return Err(compile_refused(e, "NVRTC", arch, &log, unknown_target));
    }
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    unsafe { call!(rtc::nvrtcGetCUBINSize(prog, &mut size)) }.running()?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` holds the `size` bytes nvrtcGetCUBINSize asked for.
    unsafe { call!(rtc::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast())) }.running()?;
    Ok(cubin)
}

fn program_log(prog: rtc::nvrtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    if unsafe { call!(rtc::nvrtcGetProgramLogSize(prog, &mut size)) }.is_err() {
        return String::new();
    }
    let mut log = vec![0 as c_char; size.max(1)];
    // SAFETY: `log` holds the `size` bytes asked for.
    match unsafe { call!(rtc::nvrtcGetProgramLog(prog, log.as_mut_ptr())) } {
        Ok(()) => c_buf_string(&log),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::runtimes::gpu::{Kernel, kernel_source};

    #[test]
    fn kernel_source_holds_every_kernel() {
        let src = kernel_source();
        for name in Kernel::ALL.map(Kernel::name) {
            assert!(src.contains(&format!("void {name}(")), "{name} missing");
        }
        assert!(src.starts_with("#line 1 \"prelude.hip\""));
        // Both compilers take it: no include of toolkit headers, C linkage for every kernel.
        assert!(!src.lines().any(|l| l.trim_start().starts_with("#include")));
        assert_eq!(src.matches("CLHIP_KERNEL void").count(), Kernel::ALL.len());
    }
}
