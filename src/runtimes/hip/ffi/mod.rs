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

use std::ffi::{c_char, c_void};

// ---------------------------------------------------------------------------------------------
// Symbol tables

/// What a missing symbol takes away: only `Core` takes the participant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Group {
    /// Device discovery, memory, streams, events, modules, launches.
    Core,
    /// `hipGetDeviceProperties` (5.x) / `hipGetDevicePropertiesR0600` (6.0+): gcnArchName.
    Props,
    /// hipHostMalloc (all), hipExtHostAlloc (6.3+): pinned host allocations.
    Pinned,
    /// hipMemCreate & co: the Exportable allocation kind.
    Vmm,
    /// hipImportExternalMemory & co: the cl-dmabuf -> hip-import path.
    ExternalMemory,
    ExternalSemaphore,
    Ipc,
    /// hiprtc inside libamdhip64 (ROCm 5.2 and older): used when no libhiprtc loads.
    EmbeddedRtc,
}

/// Declares a table of function pointers resolved at load, each `Option` (None = absent), with
/// the list of (group, name) the symbol check walks.
macro_rules! fn_table {
    ($table:ident, $list:ident { $( $group:ident $name:ident : fn($($arg:ty),* $(,)?) $(-> $ret:ty)? ; )* }) => {
        #[derive(Clone, Copy)]
        pub struct $table {
            $( pub $name: Option<unsafe extern "C" fn($($arg),*) $(-> $ret)?>, )*
        }

        pub const $list: &[(Group, &str)] = &[ $( (Group::$group, stringify!($name)), )* ];

        impl $table {
            pub(super) fn resolve(lib: &Library) -> $table {
                $table {
                    $( $name: {
                        // SAFETY: the type is the header's prototype for this very name.
                        unsafe {
                            lib.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        }
                        .ok()
                        .map(|s| *s)
                    }, )*
                }
            }

            /// Whether `name` resolved.
            pub fn has(&self, name: &str) -> bool {
                match name {
                    $( stringify!($name) => self.$name.is_some(), )*
                    _ => false,
                }
            }
        }
    };
}

type Vp = *mut c_void;
type Cvp = *const c_void;

// After fn_table!, which they use.
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

/// # Safety
/// `p` is null or a NUL-terminated string that stays valid for the call.
pub unsafe fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: runtimes return NUL-terminated strings.
    Some(
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned(),
    )
}

pub use crate::runtimes::text::c_buf_string;

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
