//! rocSOLVER (ROCm/rocSOLVER `library/include/rocsolver/`): its symbol table; its types are
//! rocBLAS's.

use std::ffi::{c_char, c_int};

use libloading::Library;

use super::loader::{Hip, OptLib, install_candidates, open_opt};
use super::rocblas::{rocblas_float_complex, rocblas_handle, rocblas_int, rocblas_status};
use super::table::Group;

// ROCm/rocSOLVER library/include/rocsolver/rocsolver-functions.h.
fn_table!(SolverFns, SOLVER_SYMBOLS {
    Core rocsolver_get_version_string: fn(*mut c_char, usize) -> rocblas_status;
    Core rocsolver_cpotrf: fn(rocblas_handle, c_int, rocblas_int, *mut rocblas_float_complex,
        rocblas_int, *mut rocblas_int) -> rocblas_status;
});

/// rocSOLVER of the install: librocsolver.so.0 (SOVERSION 0.1 at 5.2 .. 6.0, 0.2 at 6.2).
pub fn open_rocsolver(hip: &Hip) -> Result<OptLib<SolverFns>, String> {
    open_opt(
        &install_candidates(hip, &["librocsolver.so.0"]),
        "librocsolver",
        "librocsolver.so",
        SOLVER_SYMBOLS,
        SolverFns::resolve,
        SolverFns::has,
    )
}
