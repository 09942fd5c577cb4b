//! rocBLAS (ROCm/rocBLAS `library/include/internal/`): the handle, status and enum values, the
//! complex type and the symbol table; rocSOLVER reuses all of them.

use std::ffi::{c_char, c_int, c_void};

use libloading::Library;

use super::hip::hipStream_t;
use super::loader::{Hip, OptLib, install_candidates, open_opt};
use super::table::Group;
use crate::runtimes::text::c_buf_string;

pub type rocblas_handle = *mut c_void;
pub type rocblas_status = c_int;
pub type rocblas_int = i32;

/// rocblas_operation / rocblas_fill / rocblas_pointer_mode
/// (ROCm/rocBLAS library/include/internal/rocblas-types.h).
pub const rocblas_operation_none: c_int = 111;
pub const rocblas_operation_transpose: c_int = 112;
pub const rocblas_operation_conjugate_transpose: c_int = 113;
pub const rocblas_fill_upper: c_int = 121;
pub const rocblas_fill_lower: c_int = 122;
pub const rocblas_pointer_mode_host: c_int = 0;
pub const rocblas_status_success: rocblas_status = 0;
/// rocblas-types.h from rocm-5.7.0.
pub const rocblas_status_excluded_from_build: rocblas_status = 14;
pub const rocblas_status_arch_mismatch: rocblas_status = 15;

/// rocblas_status names (rocblas-types.h `typedef enum rocblas_status_`), by value.
/// rocblas_status_excluded_from_build (14) and rocblas_status_arch_mismatch (15) exist from
/// ROCm/rocBLAS rocm-5.7.0.
pub fn rocblas_status_name(s: rocblas_status) -> &'static str {
    const NAMES: [&str; 16] = [
        "rocblas_status_success",
        "rocblas_status_invalid_handle",
        "rocblas_status_not_implemented",
        "rocblas_status_invalid_pointer",
        "rocblas_status_invalid_size",
        "rocblas_status_memory_error",
        "rocblas_status_internal_error",
        "rocblas_status_perf_degraded",
        "rocblas_status_size_query_mismatch",
        "rocblas_status_size_increased",
        "rocblas_status_size_unchanged",
        "rocblas_status_invalid_value",
        "rocblas_status_continue",
        "rocblas_status_check_numerics_fail",
        // 14 and 15 from ROCm/rocBLAS rocm-5.7.0 (absent at rocm-5.6.0): a function built out
        // (no Tensile), and no code for the device's architecture (hipErrorNoBinaryForGpu is
        // converted to it, library/src/utility.cpp at rocm-6.2.2).
        "rocblas_status_excluded_from_build",
        "rocblas_status_arch_mismatch",
    ];
    usize::try_from(s)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
        .unwrap_or("rocblas_status_unknown")
}

/// rocBLAS library/include/internal/rocblas-complex-types.h (C path): `{ float x, y; }`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct rocblas_float_complex {
    pub x: f32,
    pub y: f32,
}

// ROCm/rocBLAS library/include/internal/rocblas-auxiliary.h, rocblas-functions.h.
fn_table!(BlasFns, BLAS_SYMBOLS {
    Core rocblas_create_handle: fn(*mut rocblas_handle) -> rocblas_status;
    Core rocblas_destroy_handle: fn(rocblas_handle) -> rocblas_status;
    Core rocblas_set_stream: fn(rocblas_handle, hipStream_t) -> rocblas_status;
    Core rocblas_set_pointer_mode: fn(rocblas_handle, c_int) -> rocblas_status;
    Core rocblas_get_version_string: fn(*mut c_char, usize) -> rocblas_status;
    Core rocblas_cgemm: fn(rocblas_handle, c_int, c_int, rocblas_int, rocblas_int, rocblas_int,
        *const rocblas_float_complex, *const rocblas_float_complex, rocblas_int,
        *const rocblas_float_complex, rocblas_int, *const rocblas_float_complex,
        *mut rocblas_float_complex, rocblas_int) -> rocblas_status;
});

/// rocBLAS of the install: librocblas.so.5 (ROCm 7), .4 (6.x: SOVERSION 4.0/4.2), .3 (5.7:
/// 3.1.0), .0 (5.2: SOVERSION 0.1), per ROCm/rocBLAS CMakeLists.txt at those tags.
pub fn open_rocblas(hip: &Hip) -> Result<OptLib<BlasFns>, String> {
    const SONAMES: [&str; 4] = [
        "librocblas.so.5",
        "librocblas.so.4",
        "librocblas.so.3",
        "librocblas.so.0",
    ];
    open_opt(
        &install_candidates(hip, &SONAMES),
        "librocblas",
        "librocblas.so",
        BLAS_SYMBOLS,
        BlasFns::resolve,
        BlasFns::has,
    )
}

/// A library's version string through `f(char* buf, size_t len)` (rocBLAS, rocSOLVER).
pub fn version_string(f: unsafe extern "C" fn(*mut c_char, usize) -> rocblas_status) -> String {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the buffer's length is passed.
    let rc = unsafe { f(buf.as_mut_ptr(), buf.len()) };
    if rc != rocblas_status_success {
        return format!("? ({})", rocblas_status_name(rc));
    }
    c_buf_string(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layout_float_complex() {
        assert_eq!(size_of::<rocblas_float_complex>(), 8);
        assert_eq!(offset_of!(rocblas_float_complex, y), 4);
    }

    #[test]
    fn rocblas_enums_per_header() {
        assert_eq!(
            (
                rocblas_operation_none,
                rocblas_operation_transpose,
                rocblas_operation_conjugate_transpose
            ),
            (111, 112, 113)
        );
        assert_eq!((rocblas_fill_upper, rocblas_fill_lower), (121, 122));
        assert_eq!(rocblas_status_name(5), "rocblas_status_memory_error");
        // rocm-5.7.0 additions.
        assert_eq!(
            rocblas_status_name(14),
            "rocblas_status_excluded_from_build"
        );
        assert_eq!(rocblas_status_name(15), "rocblas_status_arch_mismatch");
        assert_eq!(rocblas_status_name(16), "rocblas_status_unknown");
        assert_eq!(rocblas_status_name(99), "rocblas_status_unknown");
    }
}
