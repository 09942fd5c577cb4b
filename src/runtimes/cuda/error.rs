//! Status codes -> `ApiError`: the four libraries' status enums turned into `Result`s named
//! after the call, and the `call!` macro every other file of this module calls through.

use std::ffi::{CStr, c_char};
use std::ptr::null;

use cudarc::cublas::sys as blas;
use cudarc::cusolver::sys as solver;
use cudarc::driver::sys as cu;
use cudarc::nvrtc::sys as rtc;

use crate::model::{Api, ApiError};

pub(super) fn api_error(call: &str, code: i64, name: String, detail: String) -> ApiError {
    ApiError {
        api: Api::Cuda,
        call: call.to_string(),
        code,
        name,
        detail,
    }
}

/// The four libraries' status enums, turned into `Result` with the call's name.
pub(super) trait Status: Copy + PartialEq + std::fmt::Debug {
    const SUCCESS: Self;
    fn code(self) -> i64;
    /// The status's C name: cudarc's enums are the headers' enums, so Debug is that name.
    fn name(self) -> String {
        format!("{self:?}")
    }
    fn check(self, call: &str, detail: impl FnOnce() -> String) -> Result<(), ApiError> {
        crate::calls::record(call);
        if self == Self::SUCCESS {
            Ok(())
        } else {
            Err(api_error(call, self.code(), self.name(), detail()))
        }
    }
}

impl Status for cu::CUresult {
    const SUCCESS: Self = cu::CUresult::CUDA_SUCCESS;
    fn code(self) -> i64 {
        self as i64
    }
    fn name(self) -> String {
        let mut p: *const c_char = null();
        // SAFETY: `CUresult cuGetErrorName(CUresult, const char**)`; the string is static.
        let rc = unsafe { cu::cuGetErrorName(self, &mut p) };
        if rc == cu::CUresult::CUDA_SUCCESS && !p.is_null() {
            // SAFETY: NUL-terminated static string owned by the driver.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        } else {
            format!("{self:?}")
        }
    }
}

impl Status for rtc::nvrtcResult {
    const SUCCESS: Self = rtc::nvrtcResult::NVRTC_SUCCESS;
    fn code(self) -> i64 {
        self as i64
    }
}

impl Status for blas::cublasStatus_t {
    const SUCCESS: Self = blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
    fn code(self) -> i64 {
        self as i64
    }
}

impl Status for solver::cusolverStatus_t {
    const SUCCESS: Self = solver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS;
    fn code(self) -> i64 {
        self as i64
    }
}

/// `call!(cu::cuMemAlloc_v2(&mut p, n))`, or with a detail `call!(f(..), "{n} bytes")`: call
/// the library function and turn its status into `Result<(), ApiError>` named after it. The
/// call is unsafe; the `unsafe` block and its SAFETY comment are the caller's.
macro_rules! call {
    ($m:ident::$f:ident($($a:expr),* $(,)?)) => {
        $crate::runtimes::cuda::error::Status::check($m::$f($($a),*), stringify!($f), String::new)
    };
    ($m:ident::$f:ident($($a:expr),* $(,)?), $($d:tt)+) => {
        $crate::runtimes::cuda::error::Status::check($m::$f($($a),*), stringify!($f), || format!($($d)+))
    };
}

// Imported by path (`use super::error::call`), so that no file depends on the order of the
// `mod` lines that rustfmt sorts.
pub(super) use call;
