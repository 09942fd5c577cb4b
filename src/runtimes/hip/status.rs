//! Status codes -> ApiError: the conversions every part of the participant shares, and
//! [`hip_call!`], through which every libamdhip64 call goes.

use crate::model::{Api, ApiError, CaseError};
use crate::runtimes::locate::hip_version;

use super::ffi::{Hip, hipError_t, hipSuccess};

pub(super) fn api_error(hip: &Hip, call: &str, rc: hipError_t, detail: String) -> ApiError {
    ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: rc as i64,
        name: hip.error_name(rc),
        detail,
    }
}

pub(super) fn check(hip: &Hip, call: &str, rc: hipError_t) -> Result<(), ApiError> {
    crate::calls::record(call);
    if rc == hipSuccess {
        Ok(())
    } else {
        Err(api_error(hip, call, rc, String::new()))
    }
}

/// A symbol this code needs that the loaded library lacks: `unsupported`, naming both.
pub(super) fn lacks(hip: &Hip, name: &str) -> CaseError {
    CaseError::unsupported(format!(
        "{} (HIP {}) lacks {name}",
        hip.path,
        hip_version(hip.version.raw)
    ))
}

/// `rc` as `Result`, with a detail only built on failure.
pub(super) fn checked(
    hip: &Hip,
    call: &str,
    rc: hipError_t,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    crate::calls::record(call);
    if rc == hipSuccess {
        Ok(())
    } else {
        Err(api_error(hip, call, rc, detail()))
    }
}

/// A symbol of an optional group (pinned, VMM) that this libamdhip64 does not export.
pub(super) fn absent(hip: &Hip, name: &str) -> ApiError {
    ApiError {
        api: Api::Hip,
        call: name.to_string(),
        code: 0,
        name: "SYMBOL_NOT_FOUND".into(),
        detail: format!("{} (HIP {})", hip.path, hip_version(hip.version.raw)),
    }
}

/// `hip_call!(hip, hipMalloc(&mut p, n))`, or with a detail `hip_call!(hip, f(..), "{n} B")`:
/// call the libamdhip64 function through the table and turn its hipError_t into
/// `Result<(), ApiError>` named after it (an absent symbol is `SYMBOL_NOT_FOUND`). The call is
/// unsafe; the `unsafe` block and its SAFETY comment are the caller's.
macro_rules! hip_call {
    ($hip:expr, $f:ident($($a:expr),* $(,)?)) => {
        hip_call!(@ $hip, $f, String::new, $($a),*)
    };
    ($hip:expr, $f:ident($($a:expr),* $(,)?), $($d:tt)+) => {
        hip_call!(@ $hip, $f, || format!($($d)+), $($a),*)
    };
    // Full paths: the files that call it import the macro alone, not what it expands to.
    (@ $hip:expr, $f:ident, $detail:expr, $($a:expr),*) => {{
        use $crate::runtimes::hip::status::{absent, checked};
        let hip: &$crate::runtimes::hip::ffi::Hip = $hip;
        match hip.fns.$f {
            Some(f) => checked(hip, stringify!($f), f($($a),*), $detail),
            None => Err(absent(hip, stringify!($f))),
        }
    }};
}

pub(super) use hip_call;

/// A function of an optional library whose table was checked complete at open; `None` here
/// would be a bug in that check, reported rather than panicking.
pub(super) fn need<T>(f: Option<T>, lib: &str, name: &str) -> Result<T, CaseError> {
    f.ok_or_else(|| CaseError::unsupported(format!("{lib} lacks {name}")))
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;
    use std::ptr::null_mut;

    use super::*;

    /// The call macro against the real runtime: a refused call carries the call's name and
    /// hipGetErrorName's; an absent optional symbol is SYMBOL_NOT_FOUND, not a crash.
    #[test]
    #[cfg_attr(
        not(clhip_test_hip),
        ignore = "needs libamdhip64; none was found when this was built"
    )]
    fn hip_call_names_the_call_and_the_error() {
        let hip = Hip::load(None).expect("libamdhip64 was found when this was built");
        if hip.device_count().is_ok_and(|n| n > 0) {
            eprintln!("a device is present: the refusal below does not apply");
            return;
        }
        // SAFETY: plain call; without a device it only returns an error code.
        let e = unsafe { hip_call!(&hip, hipSetDevice(0), "ordinal 0") }.unwrap_err();
        eprintln!("{e}");
        assert_eq!(e.api, Api::Hip);
        assert_eq!(e.call, "hipSetDevice");
        assert!(e.name.starts_with("hipError"), "{}", e.name);
        assert_eq!(e.detail, "ordinal 0");
        if !hip.fns.has("hipExtHostAlloc") {
            let mut p: *mut c_void = null_mut();
            // SAFETY: not called: the symbol is absent.
            let e = unsafe { hip_call!(&hip, hipExtHostAlloc(&mut p, 8, 0)) }.unwrap_err();
            assert_eq!(
                (e.call.as_str(), e.name.as_str()),
                ("hipExtHostAlloc", "SYMBOL_NOT_FOUND")
            );
        }
    }
}
