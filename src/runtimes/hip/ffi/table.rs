//! What every symbol table shares: the [`Group`] a missing symbol takes away, the `fn_table!`
//! macro that declares a table (loaded with `#[macro_use]`, before the files that use it), and
//! the pointer shorthands of the prototypes. Imports nothing of the tables, so that each table
//! file and the loader can import it.

use std::ffi::c_void;

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

/// Pointer shorthands of the prototypes.
pub(super) type Vp = *mut c_void;
pub(super) type Cvp = *const c_void;
