//! The `cuda` participant: HIP's NVIDIA platform, which is exactly these libraries — libcuda
//! (driver API), NVRTC, cuBLAS and cuSOLVER — opened at run time.
//!
//! Bindings are cudarc's `sys` modules (bindgen output of the CUDA 13.0 headers) built with
//! `dynamic-loading`: each function resolves itself on first call from cudarc's own dlopen of
//! the library, and cudarc PANICS when the library or the symbol is missing. So no function of
//! a library is called before [`VendorLib::open`] has opened it under the very names cudarc
//! tries, in cudarc's order (cudarc's later dlopen then lands on the same file), and checked
//! that every symbol this module calls from it is exported. Absence becomes `unsupported` with
//! what was tried; a test keeps the symbol lists in step with the calls.
//!
//! One primary context (the one the CUDA runtime inside cuBLAS/cuSOLVER also picks up), one
//! stream, one module of `kernels/*.hip` compiled by NVRTC to a cubin for the device's exact
//! `sm_XY`, so the driver never has to JIT PTX that may be newer than itself.
//!
//! One file per concern: `load` (the libraries and their preflight), `error` (statuses and the
//! `call!` macro), `discover` (devices and versions), `probe` (the probe's look at libcuda),
//! `kernels` (NVRTC), `handles` (the buffer and library handles the peer holds), `blas` (cuBLAS
//! and cuSOLVER) and `memory` (allocation kinds, export, IPC, semaphores). This file holds the
//! peer itself; `blas` and `memory` implement its calls and import it, so nothing they define is
//! imported here. What a GPU participant does around these calls is written once, in
//! `runtimes/gpu`; the files here implement its traits with the driver's calls.

use std::ffi::{CStr, c_void};
use std::ptr::null_mut;
use std::rc::Rc;

use cudarc::driver::sys as cu;

use crate::model::{Api, ApiError, CaseError, Phase};
use crate::runtimes::device::DeviceInfo;
use crate::runtimes::gpu::device::GpuDevice;
use crate::runtimes::gpu::{self, BLOCK, GpuCore, Kernels, Launch, kernel_source};
use crate::runtimes::kernel_cache::{CompileKey, KernelCache};
use crate::runtimes::vulkan::Broker;

mod blas;
mod discover;
mod error;
mod handles;
mod kernels;
mod load;
mod memory;
mod probe;

pub use discover::discover;
pub use probe::probe;

use discover::{Versions, describe, init_driver};
use error::call;
use handles::{BlasHandle, DeviceBuffer, SolverHandle};
use kernels::compile;
use load::{LIBCUDA, LIBNVRTC, VendorLib};

/// The arguments that open CUDA device `ordinal` in another clhip process (the IPC exporter).
fn reopen_args(ordinal: usize) -> Vec<String> {
    vec![
        "--api".into(),
        "cuda".into(),
        "--ordinal".into(),
        ordinal.to_string(),
    ]
}

/// One CUDA device as the peer of an OpenCL device.
pub struct CudaPeer {
    ordinal: usize,
    info: DeviceInfo,
    dev: cu::CUdevice,
    ctx: cu::CUcontext,
    stream: cu::CUstream,
    event: cu::CUevent,
    module: cu::CUmodule,
    kernels: Option<Kernels<cu::CUfunction>>,
    /// [`super::gpu::SCRATCH_BYTES`] of device memory for small results: pattern_check's
    /// count, first index and ran-marker, cpotrf's `info`.
    scratch: cu::CUdeviceptr,
    blas: Option<Result<BlasHandle, CaseError>>,
    solver: Option<Result<SolverHandle, CaseError>>,
    /// The Vulkan broker on this GPU, for the semaphore sync and the vk-memory path.
    vulkan: Option<Result<Rc<Broker>, CaseError>>,
    /// Other devices whose primary context this peer retained to let them reach its memory
    /// (a pair across GPUs): released with the peer, which ends the access.
    peer_contexts: Vec<(usize, cu::CUdevice)>,
    _nvrtc: Option<VendorLib>,
    /// Last: released after everything above has been released through it.
    _driver: VendorLib,
}

impl CudaPeer {
    /// Open device `ordinal`: load the libraries, retain its primary context, create the
    /// stream and event, compile and load the kernels. A missing library or a refused step is
    /// `Unsupported` with what was tried, or the call and its code.
    pub fn open(ordinal: usize) -> Result<CudaPeer, CaseError> {
        let driver = crate::trace::timed("load libcuda", || VendorLib::open(&LIBCUDA))?;
        let count = crate::trace::timed("cuInit", init_driver)?;
        if ordinal >= count {
            return Err(CaseError::unsupported(format!(
                "no CUDA device {ordinal} ({count} found by {})",
                driver.path
            )));
        }
        let versions = Versions::read_for_peer().refused("CUDA driver version")?;
        let (dev, info) = describe(&driver, ordinal, &versions).refused("CUDA device query")?;
        let mut ctx: cu::CUcontext = null_mut();
        // SAFETY: live out-parameter; `dev` came from cuDeviceGet.
        crate::trace::timed("CUDA primary context", || unsafe {
            call!(cu::cuDevicePrimaryCtxRetain(&mut ctx, dev))
        })
        .refused("CUDA primary context")?;
        // From here on Drop releases whatever has been created, on every error path.
        let mut peer = CudaPeer {
            ordinal,
            info,
            dev,
            ctx,
            stream: null_mut(),
            event: null_mut(),
            module: null_mut(),
            kernels: None,
            scratch: 0,
            blas: None,
            solver: None,
            vulkan: None,
            peer_contexts: Vec::new(),
            _nvrtc: None,
            _driver: driver,
        };
        peer.bind()?;
        let no_timing = cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: live out-parameters, in the current context. Stream flags 0: a blocking
        // stream, ordered after anything on the legacy default stream too.
        unsafe {
            call!(cu::cuStreamCreate(&mut peer.stream, 0)).refused("CUDA stream")?;
            call!(cu::cuEventCreate(&mut peer.event, no_timing)).refused("CUDA event")?;
            call!(cu::cuMemAlloc_v2(
                &mut peer.scratch,
                super::gpu::SCRATCH_BYTES
            ))
            .refused("CUDA scratch memory")?;
        }

        peer._nvrtc = Some(crate::trace::timed("load NVRTC", || {
            VendorLib::open(&LIBNVRTC)
        })?);
        let arch = peer.info.arch.clone();
        let source = kernel_source();
        let key = CompileKey {
            compiler: &peer.info.compiler,
            target: &arch,
            driver: &peer.info.driver_version,
            options: kernels::OPTIONS,
            source: &source,
        };
        peer.module = crate::trace::timed("CUDA kernels (cache or NVRTC)", || {
            KernelCache::from_env().load(
                &key,
                || compile(&source, &arch),
                |cubin| {
                    let mut module: cu::CUmodule = null_mut();
                    // SAFETY: `cubin` is a complete ELF image from NVRTC, alive for the call.
                    unsafe {
                        call!(
                            cu::cuModuleLoadData(&mut module, cubin.as_ptr().cast()),
                            "{arch}"
                        )
                    }
                    .refused("loading the NVRTC-compiled module")?;
                    Ok(module)
                },
            )
        })?;
        let module = peer.module;
        let get = |name: &CStr| -> Result<cu::CUfunction, CaseError> {
            let mut f: cu::CUfunction = null_mut();
            // SAFETY: live out-parameter; the module is loaded.
            unsafe {
                call!(
                    cu::cuModuleGetFunction(&mut f, module, name.as_ptr()),
                    "{name:?}"
                )
            }
            .running()?;
            Ok(f)
        };
        peer.kernels = Some(Kernels::load(get)?);
        Ok(peer)
    }

    fn sync(&self) -> Result<(), CaseError> {
        // SAFETY: the stream is live.
        unsafe { call!(cu::cuStreamSynchronize(self.stream)) }.running()
    }
}

/// The CUDA device of ordinal `ordinal`.
fn device(ordinal: usize) -> Result<cu::CUdevice, CaseError> {
    let o = i32::try_from(ordinal).map_err(|_| CaseError::unsupported("ordinal too large"))?;
    let mut dev: cu::CUdevice = 0;
    // SAFETY: live out-parameter; the driver is initialised (the peer is open).
    unsafe { call!(cu::cuDeviceGet(&mut dev, o), "cuda{ordinal}") }.refused("CUDA device")?;
    Ok(dev)
}

impl Drop for CudaPeer {
    fn drop(&mut self) {
        // Best effort, in reverse order of creation. After a device fault every call returns
        // the sticky error and there is nothing better to do than go on.
        let _ = self.bind();
        self.blas = None;
        self.solver = None;
        // SAFETY: each handle was created by this peer in its context and is released once;
        // the null ones (an open that failed part-way) are skipped.
        unsafe {
            if self.scratch != 0 {
                cu::cuMemFree_v2(self.scratch);
            }
            if !self.module.is_null() {
                cu::cuModuleUnload(self.module);
            }
            if !self.event.is_null() {
                cu::cuEventDestroy_v2(self.event);
            }
            if !self.stream.is_null() {
                cu::cuStreamDestroy_v2(self.stream);
            }
            for &(_, other) in &self.peer_contexts {
                cu::cuDevicePrimaryCtxRelease_v2(other);
            }
            cu::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}

impl GpuCore for CudaPeer {
    type Function = cu::CUfunction;

    /// Make the primary context current on the calling thread: contexts are per thread, and a
    /// test runner or worker may call from a thread other than the one that opened.
    fn bind(&self) -> Result<(), CaseError> {
        // SAFETY: `ctx` is retained for the life of `self`.
        unsafe { call!(cu::cuCtxSetCurrent(self.ctx)) }.running()
    }

    fn kernels(&self) -> Result<&Kernels<cu::CUfunction>, CaseError> {
        self.kernels
            .as_ref()
            .ok_or_else(|| CaseError::unsupported("CUDA kernels not loaded"))
    }

    fn launch_blocks(&self, l: Launch<cu::CUfunction>) -> Result<(), CaseError> {
        let (s, b) = (self.stream, BLOCK as u32);
        // SAFETY: `l.f` is from the loaded module; each caller passes exactly its kernel's
        // parameters, which the driver copies during the call.
        unsafe {
            call!(
                cu::cuLaunchKernel(l.f, l.grid, 1, 1, b, 1, 1, 0, s, l.params, null_mut()),
                "{}",
                l.name
            )
        }
        .running()
    }

    /// Host -> any device-usable address (device, pinned, managed, imported, SVM: whatever the
    /// path hands over), then wait. The driver says if the address is not usable.
    fn copy_in(&self, dst: usize, src: *const c_void, bytes: usize) -> Result<(), CaseError> {
        let d = dst as cu::CUdeviceptr;
        // SAFETY: `src` is live host memory of `bytes` bytes until the sync below returns.
        unsafe {
            call!(
                cu::cuMemcpyHtoDAsync_v2(d, src, bytes, self.stream),
                "{bytes} B to {d:#x}"
            )
        }
        .running()?;
        self.sync()
    }

    fn copy_out(&self, dst: *mut c_void, src: usize, bytes: usize) -> Result<(), CaseError> {
        let s = src as cu::CUdeviceptr;
        // SAFETY: `dst` is live host memory of `bytes` bytes until the sync below returns.
        unsafe {
            call!(
                cu::cuMemcpyDtoHAsync_v2(dst, s, bytes, self.stream),
                "{bytes} B from {s:#x}"
            )
        }
        .running()?;
        self.sync()
    }

    fn scratch(&self) -> u64 {
        self.scratch
    }
}

gpu::gpu_peer_runtime!(CudaPeer, Api::Cuda);

impl GpuDevice for CudaPeer {
    fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    fn reopen_arguments(&self, ordinal: usize) -> Vec<String> {
        reopen_args(ordinal)
    }

    const PEER_ACCESS_CALL: &'static str = "cuDeviceCanAccessPeer";

    fn can_access_peer(&self, from: usize, to: usize) -> Result<bool, CaseError> {
        let (a, b) = (device(from)?, device(to)?);
        let mut can = 0;
        // SAFETY: live out-parameter; both devices came from cuDeviceGet.
        unsafe {
            call!(
                cu::cuDeviceCanAccessPeer(&mut can, a, b),
                "cuda{from} -> cuda{to}"
            )
        }
        .refused("CUDA peer access query")?;
        Ok(can != 0)
    }

    fn enable_peer_access_from(&mut self, other: usize) -> Result<(), CaseError> {
        let dev = device(other)?;
        let mut ctx: cu::CUcontext = null_mut();
        // SAFETY: live out-parameter; `dev` came from cuDeviceGet. A second retain of one
        // device's primary context returns the same context and is released as often.
        unsafe { call!(cu::cuDevicePrimaryCtxRetain(&mut ctx, dev), "cuda{other}") }
            .refused("the CUDA primary context of OpenCL's GPU")?;
        if self.peer_contexts.iter().any(|&(o, _)| o == other) {
            // SAFETY: the retain just made, undone: the first one is kept until Drop.
            unsafe { cu::cuDevicePrimaryCtxRelease_v2(dev) };
        } else {
            self.peer_contexts.push((other, dev));
        }
        // SAFETY: `ctx` is retained; `self.ctx` is this peer's live primary context. The
        // caller makes this peer's context current again.
        let enabled = unsafe {
            call!(cu::cuCtxSetCurrent(ctx)).and_then(|()| {
                call!(
                    cu::cuCtxEnablePeerAccess(self.ctx, 0),
                    "cuda{other} -> cuda{}",
                    self.ordinal
                )
            })
        };
        match enabled {
            Err(e)
                if e.code == cu::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED as i64 =>
            {
                Ok(())
            }
            other => other.refused("CUDA peer access from OpenCL's GPU"),
        }
    }

    fn record_event_and_wait(&self) -> Result<(), CaseError> {
        // SAFETY: event and stream are live, in the current context.
        unsafe {
            call!(cu::cuEventRecord(self.event, self.stream)).running()?;
            call!(cu::cuEventSynchronize(self.event)).running()
        }
    }

    fn synchronize_device(&self) -> Result<(), ApiError> {
        // SAFETY: the context is current; cuCtxSynchronize only waits and reports.
        unsafe { call!(cu::cuCtxSynchronize(), "after the case") }
    }

    fn stream_watch(&self) -> Option<crate::blocking::QueueWatch> {
        use crate::blocking::QueueState;
        // The stream outlives the watch: the case clears it before the peer could be closed.
        let stream = self.stream as usize;
        Some(Box::new(move || {
            // SAFETY: a live stream of the context current on this (the worker's) thread;
            // cuStreamQuery only reports.
            match unsafe { call!(cu::cuStreamQuery(stream as cu::CUstream)) } {
                Ok(()) => QueueState::Idle,
                Err(e) if e.code == cu::cudaError_enum::CUDA_ERROR_NOT_READY as i64 => {
                    QueueState::Busy
                }
                Err(e) => QueueState::Failed(e),
            }
        }))
    }

    fn known_answer_check(&self) -> Result<(), CaseError> {
        let buf = DeviceBuffer::new(gpu::HEALTH_WORDS * 4, "health-check buffer")?;
        gpu::known_answer(self, buf.0 as usize, "cuda health check")
    }

    fn vulkan_slot(&mut self) -> &mut Option<Result<Rc<Broker>, CaseError>> {
        &mut self.vulkan
    }
}

#[cfg(test)]
mod tests {
    use num_complex::Complex32;

    use super::*;
    use crate::generate::pattern;
    use crate::runtimes::device::{AllocKind, DeviceRuntime};
    use crate::runtimes::locate::open_first;
    use crate::runtimes::text::normalise_pci_bus_id;
    use crate::runtimes::{PatternCheck, PeerPtr, PeerRuntime};

    /// Device 0, for the device tests. They are marked `ignore` where build.rs found no libcuda
    /// (CI), unless CLHIP_REQUIRE_CUDA=1 says a GPU is expected (the device machine); a libcuda
    /// that does not load or cannot open device 0 then fails them.
    pub(super) fn gpu(test: &str) -> CudaPeer {
        if let Err(tried) = open_first(&crate::runtimes::locate::cuda_candidates()) {
            panic!("{test}: libcuda was found when this was built, but: {tried:?}");
        }
        match CudaPeer::open(0) {
            Ok(p) => p,
            Err(e) => panic!("{test}: libcuda loads but open(0) failed: {e:?}"),
        }
    }

    #[test]
    fn reopen_args_name_the_api_and_the_ordinal() {
        assert_eq!(reopen_args(0), ["--api", "cuda", "--ordinal", "0"]);
        assert_eq!(reopen_args(3), ["--api", "cuda", "--ordinal", "3"]);
    }

    /// Without libcuda (CI, this development machine) the participant says so and what it
    /// tried; it must not panic inside cudarc.
    #[test]
    #[cfg_attr(
        clhip_test_cuda,
        ignore = "libcuda is installed: its absence cannot be tested here"
    )]
    fn absent_libcuda_is_unsupported_with_what_was_tried() {
        assert!(
            open_first(&crate::runtimes::locate::cuda_candidates()).is_err(),
            "build.rs found no libcuda, but one loads: rebuild"
        );
        match CudaPeer::open(0) {
            Err(CaseError::Unsupported {
                reason,
                error: None,
            }) => {
                assert!(
                    reason.starts_with("libcuda.so.1 not found (tried "),
                    "{reason}"
                );
                assert!(
                    reason.contains("libcuda.so, ") && reason.contains("libcuda.so.1"),
                    "{reason}"
                );
            }
            Err(e) => panic!("expected unsupported, got {e:?}"),
            Ok(_) => panic!("opened a CUDA device without libcuda"),
        }
        let err = discover().unwrap_err();
        assert!(err.contains("libcuda.so.1 not found"), "{err}");
    }

    // ----- device tests: real on a machine with libcuda, skipped without one -----

    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_opens_and_reports_identity() {
        let p = gpu("device_opens_and_reports_identity");
        let info = p.info();
        eprintln!("cuda device 0: {info:#?}");
        assert!(info.arch.starts_with("sm_"), "{}", info.arch);
        assert_eq!(info.uuid.len(), 36, "{}", info.uuid);
        assert_eq!(
            normalise_pci_bus_id(&info.pci_bus_id).as_deref(),
            Some(info.pci_bus_id.as_str())
        );
        let all = discover().expect("discover");
        assert_eq!(all[0], *info);
    }

    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_pattern_sees_a_planted_flip_at_its_index() {
        let mut p = gpu("device_pattern_sees_a_planted_flip_at_its_index");
        let len = 1 << 20;
        let a = p.alloc(AllocKind::Device, len).unwrap();
        p.fill_pattern(a.ptr, 7).unwrap();
        p.synchronize().unwrap();
        // Bit for bit what the host computes.
        let words: Vec<u32> = bits(&p.download(a.ptr).unwrap());
        assert_eq!(words, pattern(7, len * 2));
        assert_eq!(
            p.check_pattern(a.ptr, 7).unwrap(),
            PatternCheck {
                mismatches: 0,
                first: None
            }
        );
        p.flip_bit(a.ptr, 12345, 1 << 30).unwrap();
        p.flip_bit(a.ptr, 999_999, 1).unwrap();
        p.record_and_wait_event().unwrap();
        let c = p.check_pattern(a.ptr, 7).unwrap();
        assert_eq!(c.mismatches, 2);
        assert_eq!(
            c.first,
            Some((12345, crate::generate::pattern_word(7, 12345) ^ (1 << 30)))
        );
        p.free(a);
    }

    pub(super) fn bits(v: &[Complex32]) -> Vec<u32> {
        v.iter()
            .flat_map(|z| [z.re.to_bits(), z.im.to_bits()])
            .collect()
    }

    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_scale_and_magnitude_match_the_cpu() {
        let mut p = gpu("device_scale_and_magnitude_match_the_cpu");
        let data = crate::generate::complex_vec(5, 100_003);
        // Pinned host memory: the kernels reach it through UVA.
        let a = p.alloc(AllocKind::PinnedHost, data.len()).unwrap();
        p.upload(a.ptr, &data).unwrap();
        p.scale(a.ptr, 0.25).unwrap();
        let scaled = p.download(a.ptr).unwrap();
        for (g, x) in scaled.iter().zip(&data) {
            assert_eq!(*g, x * 0.25); // a power-of-two scale is exact
        }
        p.magnitude(a.ptr).unwrap();
        let mag = p.download(a.ptr).unwrap();
        for (g, x) in mag.iter().zip(&scaled) {
            // The device may contract re*re + im*im into an FMA: a few ulp, not bit-exact.
            let want = (x.re as f64).hypot(x.im as f64);
            let err = (g.re as f64 - want).abs();
            assert!(
                err <= 4.0 * f32::EPSILON as f64 * want,
                "{x}: {g} vs {want}"
            );
            assert_eq!(g.im, 0.0);
        }
        p.free(a);
    }

    /// An illegal address is a `Fault` named CUDA_ERROR_ILLEGAL_ADDRESS. It poisons the
    /// primary context for the whole process, so it runs in a child process of this test
    /// binary, never beside the other device tests.
    #[test]
    #[cfg_attr(
        not(clhip_test_cuda),
        ignore = "needs libcuda; none was found when this was built"
    )]
    fn device_illegal_address_is_a_fault() {
        if std::env::var_os("CLHIP_CUDA_FAULT_CHILD").is_some() {
            let mut p = gpu("device_illegal_address_is_a_fault");
            let bad = PeerPtr {
                addr: 0x8,
                len: 1 << 16,
            };
            let launched = p.scale(bad, 2.0);
            let e = launched.and_then(|()| p.synchronize()).unwrap_err();
            eprintln!("illegal address -> {e:?}");
            match e {
                CaseError::Fault(err) => assert_eq!(err.name, "CUDA_ERROR_ILLEGAL_ADDRESS"),
                other => panic!("expected a fault, got {other:?}"),
            }
            // The context is now unusable: the health check says so rather than passing.
            assert!(p.health_check().is_err());
            return;
        }
        gpu("device_illegal_address_is_a_fault");
        let (status, text) = crate::runtimes::run_test_in_child(
            "runtimes::cuda::tests::device_illegal_address_is_a_fault",
            "CLHIP_CUDA_FAULT_CHILD",
        );
        eprintln!("{text}");
        assert!(status.success(), "child failed: {text}");
        assert!(text.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{text}");
    }
}
