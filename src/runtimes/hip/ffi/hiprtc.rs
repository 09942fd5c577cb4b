//! hiprtc (ROCm/HIP `include/hip/hiprtc.h`): the run-time compiler, from libhiprtc or from inside
//! libamdhip64.
//!
//! ABI gate:
//! - hiprtc was never moved out in one step. At every tag read (ROCm/hipamd rocm-5.2.3 .. 5.5.0,
//!   ROCm/clr rocm-5.6.0 .. rocm-6.2.2, release/rocm-rel-6.3.0.1 and amd-staging of Oct 2024) the
//!   build makes a standalone libhiprtc (`add_library(hiprtc SHARED)` in src/hiprtc/CMakeLists.txt)
//!   *and* compiles hiprtc into libamdhip64 on Linux (5.2.3: the `hiprtcobject` objects; 5.4.0 on:
//!   `target_sources(amdhip64 PRIVATE hiprtc.cpp ...)`), whose version script hip_hcc.map.in
//!   exports the `hiprtc*` names (11 at 5.2.3, 18 from 5.3.0). Whether libhiprtc is shipped is
//!   packaging: AMD's packages have it from 5.3, Debian's 5.2 does not. clhip binds libhiprtc of
//!   the install when it is there and the copy inside libamdhip64 otherwise ([`open_hiprtc`]).

use std::ffi::{c_char, c_int, c_void};

use libloading::Library;

use super::loader::{Hip, OptLib, install_candidates, open_opt};
use super::table::Group;

pub type hiprtcProgram = *mut c_void;
pub type hiprtcResult = c_int;

/// hiprtcResult (ROCm/HIP include/hip/hiprtc.h `typedef enum hiprtcResult`), by value.
pub const HIPRTC_SUCCESS: hiprtcResult = 0;
pub const HIPRTC_ERROR_INVALID_OPTION: hiprtcResult = 5;

/// hiprtcResult names, by value (hiprtc.h): the canonical name an [`ApiError`] carries, whatever
/// hiprtcGetErrorString says in prose.
///
/// [`ApiError`]: crate::model::ApiError
pub fn hiprtc_result_name(r: hiprtcResult) -> String {
    const NAMES: [&str; 12] = [
        "HIPRTC_SUCCESS",
        "HIPRTC_ERROR_OUT_OF_MEMORY",
        "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
        "HIPRTC_ERROR_INVALID_INPUT",
        "HIPRTC_ERROR_INVALID_PROGRAM",
        "HIPRTC_ERROR_INVALID_OPTION",
        "HIPRTC_ERROR_COMPILATION",
        "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        "HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        "HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        "HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        "HIPRTC_ERROR_INTERNAL_ERROR",
    ];
    match r {
        100 => "HIPRTC_ERROR_LINKING".to_string(),
        _ => usize::try_from(r)
            .ok()
            .and_then(|i| NAMES.get(i).copied())
            .map_or_else(|| format!("hiprtcResult {r}"), str::to_string),
    }
}

// ROCm/HIP include/hip/hiprtc.h.
fn_table!(RtcFns, RTC_SYMBOLS {
    EmbeddedRtc hiprtcVersion: fn(*mut c_int, *mut c_int) -> hiprtcResult;
    EmbeddedRtc hiprtcCreateProgram: fn(*mut hiprtcProgram, *const c_char, *const c_char, c_int,
        *const *const c_char, *const *const c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcCompileProgram: fn(hiprtcProgram, c_int, *const *const c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcGetCodeSize: fn(hiprtcProgram, *mut usize) -> hiprtcResult;
    EmbeddedRtc hiprtcGetCode: fn(hiprtcProgram, *mut c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcGetProgramLogSize: fn(hiprtcProgram, *mut usize) -> hiprtcResult;
    EmbeddedRtc hiprtcGetProgramLog: fn(hiprtcProgram, *mut c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcDestroyProgram: fn(*mut hiprtcProgram) -> hiprtcResult;
    EmbeddedRtc hiprtcGetErrorString: fn(hiprtcResult) -> *const c_char;
});

/// libamdhip64 itself. Both are built from the same tree at every tag read (module comment);
/// libhiprtc is preferred because it is the library HIP documents for hiprtc, and a missing one
/// (Debian's 5.2) falls back. A mixed install is refused, never worked around through the
/// fallback.
pub fn open_hiprtc(hip: &Hip) -> Result<OptLib<RtcFns>, String> {
    let own = format!("libhiprtc.so.{}", hip.version.major);
    let mut sonames = vec![own.as_str()];
    sonames.extend(
        ["libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5"]
            .into_iter()
            .filter(|s| *s != own),
    );
    let candidates = install_candidates(hip, &sonames);
    match open_opt(
        &candidates,
        "libhiprtc",
        "libhiprtc.so",
        RTC_SYMBOLS,
        RtcFns::resolve,
        RtcFns::has,
    ) {
        Ok(l) => Ok(l),
        Err(e) if e.starts_with("mixed ROCm install") => Err(e),
        Err(e) => {
            // SAFETY: the same file is already loaded; this only takes another reference.
            let lib = unsafe { Library::new(&hip.path) }.map_err(|x| format!("{e}; {x}"))?;
            let fns = RtcFns::resolve(&lib);
            if fns.hiprtcCreateProgram.is_none() {
                return Err(format!("{e}, and {} does not embed hiprtc", hip.path));
            }
            let missing = RTC_SYMBOLS
                .iter()
                .map(|(_, n)| *n)
                .filter(|n| !fns.has(n))
                .collect();
            Ok(OptLib {
                fns,
                path: hip.path.clone(),
                missing,
                _lib: lib,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hiprtc_result_names_per_header() {
        assert_eq!(hiprtc_result_name(5), "HIPRTC_ERROR_INVALID_OPTION");
        assert_eq!(hiprtc_result_name(6), "HIPRTC_ERROR_COMPILATION");
        assert_eq!(hiprtc_result_name(100), "HIPRTC_ERROR_LINKING");
        assert_eq!(hiprtc_result_name(42), "hiprtcResult 42");
    }
}
