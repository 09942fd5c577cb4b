//! Thin, run-time-loaded bindings to ROCm: libamdhip64, hiprtc, rocBLAS, rocSOLVER and the HSA
//! runtime. Nothing is linked at build time; every symbol is resolved with `dlsym` when its
//! library is opened, and an absent one is listed by name instead of crashing on first call.
//!
//! Every struct and enum of these files cites the header it was copied from. Sizes and offsets were
//! checked by compiling the header's own definitions with gcc (x86-64) for ROCm 5.2.3, 6.0.0 and
//! the HIP `amd-staging` branch of Oct 2024 (6.3 development); the layout tests repeat them.
//!
//! One file per library, each with the ABI gates (version-gated layouts and enums) that concern
//! it and their layout tests; everything is re-exported here, as `ffi::X`. loader.rs opens
//! libamdhip64 and, from its install only, the others.

#![allow(
    non_snake_case,
    non_camel_case_types,
    non_upper_case_globals,
    dead_code
)]

// The symbol tables' shared parts; first, so that `fn_table!` is defined for the files after.
#[macro_use]
mod table;

mod hip;
mod hiprtc;
mod hsa;
mod loader;
mod rocblas;
mod rocsolver;

pub use self::hip::*;
pub use self::hiprtc::*;
pub use self::hsa::*;
pub use self::loader::*;
pub use self::rocblas::*;
pub use self::rocsolver::*;
pub use self::table::Group;

pub use crate::runtimes::text::{c_buf_string, c_string};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_tables_have_no_duplicates() {
        let mut all: Vec<&str> = HIP_SYMBOLS.iter().map(|(_, n)| *n).collect();
        all.extend(RTC_SYMBOLS.iter().map(|(_, n)| *n));
        all.extend(HSA_SYMBOLS.iter().map(|(_, n)| *n));
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
