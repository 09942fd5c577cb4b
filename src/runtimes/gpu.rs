//! The half of a GPU peer that is the same on both platforms: the harness's kernels
//! (`kernels/*.hip`, one source for NVRTC and hiprtc) and the [`PeerRuntime`] operations built
//! on them. A backend (cuda, hip) supplies only [`GpuCore`]: make its device current, launch one
//! of the kernels, copy synchronously, and a few bytes of scratch.
//!
//! Below it, the rest of the [`DeviceRuntime`] a GPU participant offers, written once over
//! small traits of the backend's raw calls: `memory` (allocation kinds, export, IPC,
//! semaphores), `blas` (cgemm and cpotrf arguments) and `device` (the trait impl itself). The
//! backends implement those traits call by call, so each backend folder still shows every API
//! call it makes, and neither backend imports the other.
//!
//! [`PeerRuntime`]: crate::runtimes::PeerRuntime
//! [`DeviceRuntime`]: crate::runtimes::device::DeviceRuntime

use std::ffi::{CStr, c_void};

use num_complex::Complex32;

use crate::generate::pattern;
use crate::model::{ApiError, CaseError};
use crate::runtimes::{PatternCheck, PeerPtr};
use crate::tolerance::check_exact_u32;

pub(crate) mod blas;
pub(crate) mod device;
pub(crate) mod memory;

/// The prelude every `.hip` source is compiled behind (macros shared by NVRTC and hiprtc).
pub const KERNEL_PRELUDE: &str = include_str!("../../kernels/prelude.hip");

/// The `.hip` kernel files, compiled as one translation unit after the prelude.
pub const KERNEL_FILES: [(&str, &str); 2] = [
    ("pattern.hip", include_str!("../../kernels/pattern.hip")),
    (
        "elementwise.hip",
        include_str!("../../kernels/elementwise.hip"),
    ),
];

/// The one source handed to the run-time compiler: the prelude, then each file, with `#line`
/// markers so a build log names a file and line a person can open.
pub fn kernel_source() -> String {
    let mut s = format!("#line 1 \"prelude.hip\"\n{KERNEL_PRELUDE}\n");
    for (name, text) in KERNEL_FILES {
        s.push_str(&format!("#line 1 \"{name}\"\n{text}\n"));
    }
    s
}

/// A run-time compiler's (`NVRTC`, `hiprtc`) refusal of `kernels/*.hip`, with the first lines of
/// its log in the error's detail. A compiler that does not know the target refuses the option
/// (`unknown_target`): the platform cannot run here. Anything else is a bug in kernels/*.hip
/// and must be loud.
pub(crate) fn compile_refused(
    mut e: ApiError,
    compiler: &str,
    arch: &str,
    log: &str,
    unknown_target: bool,
) -> CaseError {
    let head: Vec<&str> = log.lines().take(12).collect();
    e.detail = format!("{arch}: {}", head.join(" | "));
    if unknown_target {
        CaseError::Unsupported {
            reason: format!("{compiler} cannot compile for {arch}"),
            error: Some(e),
        }
    } else {
        CaseError::Broken(e)
    }
}

/// A kernel of `kernels/*.hip`, by what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Fill,
    Check,
    Flip,
    Scale,
    Magnitude,
    Spin,
}

impl Kernel {
    pub const ALL: [Kernel; 6] = [
        Kernel::Fill,
        Kernel::Check,
        Kernel::Flip,
        Kernel::Scale,
        Kernel::Magnitude,
        Kernel::Spin,
    ];

    /// The `extern "C"` name the module exports.
    pub fn symbol(self) -> &'static CStr {
        match self {
            Kernel::Fill => c"clhip_pattern_fill",
            Kernel::Check => c"clhip_pattern_check",
            Kernel::Flip => c"clhip_flip_bit",
            Kernel::Scale => c"clhip_cscale",
            Kernel::Magnitude => c"clhip_cmagnitude",
            Kernel::Spin => c"clhip_spin",
        }
    }

    pub fn name(self) -> &'static str {
        self.symbol().to_str().unwrap_or("clhip kernel")
    }
}

/// The loaded module's function handles (`CUfunction`, `hipFunction_t`), one per [`Kernel`].
#[derive(Debug)]
pub struct Kernels<F> {
    functions: [F; 6],
}

impl<F: Copy> Kernels<F> {
    /// Look every kernel up with `get` (cuModuleGetFunction, hipModuleGetFunction).
    pub fn load(get: impl Fn(&CStr) -> Result<F, CaseError>) -> Result<Self, CaseError> {
        let [a, b, c, d, e, f] = Kernel::ALL.map(|k| get(k.symbol()));
        Ok(Kernels {
            functions: [a?, b?, c?, d?, e?, f?],
        })
    }

    pub fn get(&self, k: Kernel) -> F {
        self.functions[k as usize]
    }
}

/// Threads per block: a multiple of both warp (32) and wavefront (32, 64) sizes, and any size
/// works for these memory-bound kernels.
pub const BLOCK: u64 = 256;

/// Blocks for `threads` threads, or the refusal of a size the launch APIs cannot take.
pub fn grid(name: &str, threads: u64) -> Result<u32, CaseError> {
    u32::try_from(threads.div_ceil(BLOCK))
        .ok()
        .filter(|&g| g <= i32::MAX as u32)
        .ok_or_else(|| CaseError::unsupported(format!("{name}: {threads} threads")))
}

/// What a GPU runtime supplies for the shared operations.
pub(crate) trait GpuCore {
    /// A loaded kernel's handle (`CUfunction`, `hipFunction_t`).
    type Function: Copy;
    /// Make the device (context) current on the calling thread: per thread in both APIs.
    fn bind(&self) -> Result<(), CaseError>;
    /// The loaded module's kernels, or why there are none.
    fn kernels(&self) -> Result<&Kernels<Self::Function>, CaseError>;
    /// Launch on the peer's stream. Only the launch is checked: a fault surfaces at the next
    /// synchronizing call.
    fn launch_blocks(&self, launch: Launch<Self::Function>) -> Result<(), CaseError>;
    /// Host -> any device-usable address the path hands over, then wait.
    fn copy_in(&self, dst: usize, src: *const c_void, bytes: usize) -> Result<(), CaseError>;
    /// Any device-usable address -> host, then wait.
    fn copy_out(&self, dst: *mut c_void, src: usize, bytes: usize) -> Result<(), CaseError>;
    /// [`SCRATCH_BYTES`] of device memory for a kernel's result words.
    fn scratch(&self) -> u64;
}

/// One kernel launch: `grid` blocks of [`BLOCK`] threads running `f`, the kernel `name`, with
/// `params` pointing at each kernel argument in order (the launch APIs' `kernelParams`).
pub(crate) struct Launch<F> {
    pub f: F,
    pub name: &'static str,
    pub grid: u32,
    pub params: *mut *mut c_void,
}

/// Launch `k` over `threads` threads (none for zero); `args` points at each kernel argument in
/// order.
pub(crate) fn launch(
    g: &impl GpuCore,
    k: Kernel,
    threads: u64,
    args: &mut [*mut c_void],
) -> Result<(), CaseError> {
    if threads == 0 {
        return Ok(());
    }
    let (name, f) = (k.name(), g.kernels()?.get(k));
    let grid = grid(name, threads)?;
    let params = args.as_mut_ptr();
    g.launch_blocks(Launch {
        f,
        name,
        grid,
        params,
    })
}

/// Device scratch per peer: pattern_check's count, first index and ran-marker (3 x u64), or
/// cpotrf's `info`.
pub(crate) const SCRATCH_BYTES: usize = 24;

pub(crate) fn fill_pattern(g: &impl GpuCore, ptr: PeerPtr, seed: u32) -> Result<(), CaseError> {
    g.bind()?;
    let (mut p, mut seed, mut words) = (ptr.addr as u64, seed, ptr.len as u64 * 2);
    let mut args = [
        (&raw mut p).cast(),
        (&raw mut seed).cast(),
        (&raw mut words).cast(),
    ];
    launch(g, Kernel::Fill, words, &mut args)
}

pub(crate) fn check_pattern(
    g: &impl GpuCore,
    ptr: PeerPtr,
    seed: u32,
) -> Result<PatternCheck, CaseError> {
    g.bind()?;
    // result[0] counts mismatches, result[1] keeps the smallest mismatching index, result[2]
    // is where the kernel says it ran.
    let mut result: [u64; 3] = [0, u64::MAX, 0];
    g.copy_in(g.scratch() as usize, result.as_ptr().cast(), SCRATCH_BYTES)?;
    let (mut p, mut seed, mut words) = (ptr.addr as u64, seed, ptr.len as u64 * 2);
    let mut out = g.scratch();
    let mut args = [
        (&raw mut p).cast(),
        (&raw mut seed).cast(),
        (&raw mut words).cast(),
        (&raw mut out).cast(),
    ];
    launch(g, Kernel::Check, words, &mut args)?;
    g.copy_out(
        result.as_mut_ptr().cast(),
        g.scratch() as usize,
        SCRATCH_BYTES,
    )?;
    let [count, first, ran] = result;
    crate::runtimes::check_self_consistent("peer", count, first, u64::MAX, ran, words)?;
    if count == 0 {
        return Ok(PatternCheck {
            mismatches: 0,
            first: None,
        });
    }
    // The word itself, read where it lies: the kernel only found where.
    let mut got = 0u32;
    let at = ptr.addr + first as usize * 4;
    crate::calls::scoped(crate::calls::MISMATCH, || {
        g.copy_out((&raw mut got).cast(), at, 4)
    })?;
    Ok(PatternCheck {
        mismatches: count as usize,
        first: Some((first as usize, got)),
    })
}

pub(crate) fn upload(g: &impl GpuCore, ptr: PeerPtr, data: &[Complex32]) -> Result<(), CaseError> {
    assert_eq!(ptr.len, data.len(), "upload length");
    g.bind()?;
    g.copy_in(ptr.addr, data.as_ptr().cast(), size_of_val(data))
}

pub(crate) fn download(g: &impl GpuCore, ptr: PeerPtr) -> Result<Vec<Complex32>, CaseError> {
    g.bind()?;
    let mut out = vec![Complex32::default(); ptr.len];
    g.copy_out(
        out.as_mut_ptr().cast(),
        ptr.addr,
        size_of_val(out.as_slice()),
    )?;
    Ok(out)
}

pub(crate) fn scale(g: &impl GpuCore, ptr: PeerPtr, s: f32) -> Result<(), CaseError> {
    g.bind()?;
    let (mut x, mut s, mut n) = (ptr.addr as u64, s, ptr.len as u64);
    let mut args = [
        (&raw mut x).cast(),
        (&raw mut s).cast(),
        (&raw mut n).cast(),
    ];
    launch(g, Kernel::Scale, n, &mut args)
}

pub(crate) fn magnitude(g: &impl GpuCore, ptr: PeerPtr) -> Result<(), CaseError> {
    g.bind()?;
    let (mut x, mut n) = (ptr.addr as u64, ptr.len as u64);
    let mut args = [(&raw mut x).cast(), (&raw mut n).cast()];
    launch(g, Kernel::Magnitude, n, &mut args)
}

pub(crate) fn flip_bit(
    g: &impl GpuCore,
    ptr: PeerPtr,
    word: usize,
    bit: u32,
) -> Result<(), CaseError> {
    assert!(word < ptr.len * 2, "flip past the buffer");
    g.bind()?;
    let (mut p, mut word, mut mask) = (ptr.addr as u64, word as u64, bit);
    let mut args = [
        (&raw mut p).cast(),
        (&raw mut word).cast(),
        (&raw mut mask).cast(),
    ];
    launch(g, Kernel::Flip, 1, &mut args)
}

/// Busy work on the peer's stream: one block of `iters` steps per thread, the result stored
/// (never, in practice) into scratch.
pub(crate) fn spin(g: &impl GpuCore, iters: u32) -> Result<(), CaseError> {
    g.bind()?;
    let (mut sink, mut iters) = (g.scratch(), iters);
    let mut args = [(&raw mut sink).cast(), (&raw mut iters).cast()];
    launch(g, Kernel::Spin, BLOCK, &mut args)
}

/// Words of the known-answer check.
pub const HEALTH_WORDS: usize = 1024;

/// The known-answer check on `HEALTH_WORDS` words of device memory at `addr`: fill the pattern
/// with a kernel, read it back, compare bit for bit.
pub(crate) fn known_answer(g: &impl GpuCore, addr: usize, what: &str) -> Result<(), CaseError> {
    const SEED: u32 = 0xC1A5_0001;
    let ptr = PeerPtr {
        addr,
        len: HEALTH_WORDS / 2,
    };
    fill_pattern(g, ptr, SEED)?;
    let mut got = vec![0u32; HEALTH_WORDS];
    g.copy_out(got.as_mut_ptr().cast(), ptr.addr, HEALTH_WORDS * 4)?;
    check_exact_u32(what, &got, &pattern(SEED, HEALTH_WORDS))?;
    Ok(())
}

/// The [`PeerRuntime`](crate::runtimes::PeerRuntime) of a GPU participant: every operation is
/// this module's, over the backend's [`GpuCore`]; only the API and the inherent `ordinal` and
/// `sync` differ. A macro rather than a blanket impl over `GpuCore`, so that the host peer's
/// own impl needs no coherence argument beside it.
macro_rules! gpu_peer_runtime {
    ($ty:ty, $api:expr) => {
        impl $crate::runtimes::PeerRuntime for $ty {
            fn peer(&self) -> $crate::model::Peer {
                $crate::model::Peer {
                    api: $api,
                    ordinal: self.ordinal,
                }
            }

            fn as_device(&mut self) -> Option<&mut dyn $crate::runtimes::device::DeviceRuntime> {
                Some(self)
            }

            /// Ordinary pageable, page-aligned host memory, as the host peer's: the copy
            /// path's staging.
            fn alloc_host(
                &mut self,
                len: usize,
            ) -> Result<$crate::runtimes::PeerPtr, $crate::model::CaseError> {
                $crate::runtimes::host::alloc_pageable(len)
            }

            fn free_host(&mut self, ptr: $crate::runtimes::PeerPtr) {
                $crate::runtimes::host::free_pageable(ptr)
            }

            fn fill_pattern(
                &mut self,
                ptr: $crate::runtimes::PeerPtr,
                seed: u32,
            ) -> Result<(), $crate::model::CaseError> {
                $crate::runtimes::gpu::fill_pattern(self, ptr, seed)
            }

            fn check_pattern(
                &mut self,
                ptr: $crate::runtimes::PeerPtr,
                seed: u32,
            ) -> Result<$crate::runtimes::PatternCheck, $crate::model::CaseError> {
                $crate::runtimes::gpu::check_pattern(self, ptr, seed)
            }

            fn upload(
                &mut self,
                ptr: $crate::runtimes::PeerPtr,
                data: &[num_complex::Complex32],
            ) -> Result<(), $crate::model::CaseError> {
                $crate::runtimes::gpu::upload(self, ptr, data)
            }

            fn download(
                &mut self,
                ptr: $crate::runtimes::PeerPtr,
            ) -> Result<Vec<num_complex::Complex32>, $crate::model::CaseError> {
                $crate::runtimes::gpu::download(self, ptr)
            }

            fn scale(
                &mut self,
                ptr: $crate::runtimes::PeerPtr,
                s: f32,
            ) -> Result<(), $crate::model::CaseError> {
                $crate::runtimes::gpu::scale(self, ptr, s)
            }

            fn magnitude(
                &mut self,
                ptr: $crate::runtimes::PeerPtr,
            ) -> Result<(), $crate::model::CaseError> {
                $crate::runtimes::gpu::magnitude(self, ptr)
            }

            fn flip_bit(
                &mut self,
                ptr: $crate::runtimes::PeerPtr,
                word: usize,
                bit: u32,
            ) -> Result<(), $crate::model::CaseError> {
                $crate::runtimes::gpu::flip_bit(self, ptr, word, bit)
            }

            fn synchronize(&mut self) -> Result<(), $crate::model::CaseError> {
                $crate::runtimes::gpu::GpuCore::bind(self)?;
                self.sync()
            }
        }
    };
}
pub(crate) use gpu_peer_runtime;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_match_the_source() {
        let src = kernel_source();
        for k in Kernel::ALL {
            assert!(
                src.contains(k.name()),
                "{} missing from kernels/*.hip",
                k.name()
            );
        }
    }

    #[test]
    fn an_unknown_target_is_unsupported_and_any_other_compile_error_broken() {
        let e = ApiError {
            api: crate::model::Api::Cuda,
            call: "nvrtcCompileProgram".into(),
            code: 5,
            name: "NVRTC_ERROR_INVALID_OPTION".into(),
            detail: String::new(),
        };
        let log: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        match compile_refused(e.clone(), "NVRTC", "sm_90", &log, true) {
            CaseError::Unsupported {
                reason,
                error: Some(err),
            } => {
                assert_eq!(reason, "NVRTC cannot compile for sm_90");
                assert!(err.detail.starts_with("sm_90: line 1 | line 2 | "));
                assert!(err.detail.ends_with(" | line 12"), "{}", err.detail);
            }
            other => panic!("{other:?}"),
        }
        match compile_refused(e, "NVRTC", "sm_90", "", false) {
            CaseError::Broken(err) => assert_eq!(err.detail, "sm_90: "),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn grid_refuses_what_the_launch_apis_cannot_take() {
        assert_eq!(grid("k", 1).unwrap(), 1);
        assert_eq!(grid("k", 257).unwrap(), 2);
        assert!(grid("k", u64::MAX).is_err());
    }
}
