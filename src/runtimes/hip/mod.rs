//! The `hip` participant (AMD ROCm): libamdhip64, hiprtc, rocBLAS, rocSOLVER, loaded at run
//! time through [`ffi`].
//!
//! The structure and semantics are runtimes/cuda's: the device made current on every call
//! (hipSetDevice: the current device is per thread), one stream, one event, one module of
//! `kernels/*.hip` compiled by hiprtc for the device's exact gcnArchName, rocBLAS/rocSOLVER
//! handles created on first use. A missing optional library (hiprtc, rocBLAS, rocSOLVER) or an
//! absent optional symbol (pinned, VMM) takes away only what needs it, as `unsupported` naming
//! what is missing.
//!
//! STATUS: loading, version/ABI gating, the symbol check, device discovery and `open`'s
//! refusal on a machine without a device are tested (tests/hip_no_device.rs, against Debian's
//! HIP 5.2). The device participant (this file and its siblings: allocations of every kind,
//! hipMemcpy, the import of OpenCL memory through HSA's dma-buf export, IPC handles, external
//! semaphores, hiprtc kernels, rocBLAS cgemm, rocSOLVER cpotrf, sticky faults) is written against
//! the headers and clr's sources but has NOT run on AMD hardware: no AMD GPU has been reachable.
//! The logic around these calls is `runtimes/gpu`'s, shared with cuda: that part has run on
//! NVIDIA hardware, and its order of calls is tested against a recording fake backend.

pub mod ffi;
pub mod install;

mod blas;
mod discover;
mod handles;
mod interop;
mod kernels;
mod load;
mod memory;
mod probe;
mod status;
pub mod visible;

use std::ffi::{CStr, c_int, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::rc::Rc;

use crate::model::{Api, ApiError, CaseError, Phase};
use crate::runtimes::device::DeviceInfo;
use crate::runtimes::gpu::device::GpuDevice;
use crate::runtimes::gpu::{self, BLOCK, GpuCore, Kernels, Launch, kernel_source};
use crate::runtimes::kernel_cache::{CompileKey, KernelCache};
use crate::runtimes::vulkan::Broker;

use discover::{describe, device_count};
use ffi::{Hip, OptLib, RtcFns, SolverFns, hipEvent_t, hipFunction_t, hipModule_t, hipStream_t};
use handles::{BlasHandle, DeviceBuffer, HsaRuntime};
use kernels::compile;
use status::hip_call;

pub use discover::discover;
pub use load::{install_libraries, library_versions, load, open_blas, open_rtc, open_solver};
pub use probe::probe;

/// Arguments that open device `ordinal` again in another clhip process, with the same ROCm
/// root when this one was given one.
fn reopen_args(ordinal: usize, rocm_path: Option<&Path>) -> Vec<String> {
    let mut args = vec![
        "--api".to_string(),
        "hip".to_string(),
        "--ordinal".to_string(),
        ordinal.to_string(),
    ];
    if let Some(dir) = rocm_path {
        args.extend(["--rocm-path".to_string(), dir.display().to_string()]);
    }
    args
}

/// The HIP device, in this process, of the run's device `ordinal`.
fn local_device(ordinal: usize) -> Result<c_int, CaseError> {
    let local = visible::local_ordinal(ordinal)?;
    c_int::try_from(local).map_err(|_| CaseError::unsupported("ordinal too large"))
}

// ---------------------------------------------------------------------------------------------
// The participant

/// One HIP device as the peer of an OpenCL device.
pub struct HipPeer {
    pub info: DeviceInfo,
    ordinal: usize,
    dev: c_int,
    rocm_path: Option<PathBuf>,
    stream: hipStream_t,
    event: hipEvent_t,
    module: hipModule_t,
    /// The kernels, or why there are none (hiprtc absent): only what needs them is refused.
    kernels: Result<Kernels<hipFunction_t>, CaseError>,
    /// [`super::gpu::SCRATCH_BYTES`] of device memory for small results: pattern_check's count, first index and ran-marker,
    /// cpotrf's `info`.
    scratch: *mut c_void,
    blas: Option<Result<BlasHandle, CaseError>>,
    solver: Option<Result<OptLib<SolverFns>, CaseError>>,
    /// libhsa-runtime64, opened and initialised on the first import_cl_memory.
    hsa: Option<Result<HsaRuntime, CaseError>>,
    /// The Vulkan broker on this GPU, for the semaphore sync and the vk-memory path.
    vulkan: Option<Result<Rc<Broker>, CaseError>>,
    _rtc: Option<OptLib<RtcFns>>,
    /// Last: released after everything above has been released through it.
    pub hip: Hip,
}

impl std::fmt::Debug for HipPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipPeer")
            .field("info", &self.info)
            .field("hip", &self.hip)
            .field("kernels", &self.kernels.as_ref().map(|_| "loaded"))
            .finish_non_exhaustive()
    }
}

impl HipPeer {
    /// Open device `ordinal`: load the runtime, check the symbols and the device, make it
    /// current, create the stream and event, compile and load the kernels. On a machine without
    /// a device this is `Unsupported` naming hipGetDeviceCount and hipErrorNoDevice (100); a
    /// refused step is `Unsupported` with the call and its code. Without hiprtc the peer opens
    /// and only the kernel operations are refused.
    ///
    /// `ordinal` is the run's; in a worker that sees only its pair's GPUs the device HIP
    /// opens is its place among them ([`visible::local_ordinal`]), and the peer still reports
    /// the run's ordinal.
    pub fn open(ordinal: usize, rocm_path: Option<&Path>) -> Result<HipPeer, CaseError> {
        let local = visible::local_ordinal(ordinal)?;
        let hip = load(rocm_path)?;
        let count = device_count(&hip)?;
        if local >= count {
            let seen_as = if local == ordinal {
                String::new()
            } else {
                format!(", seen here as device {local}")
            };
            return Err(CaseError::unsupported(format!(
                "no HIP device {ordinal}{seen_as} ({count} found by {})",
                hip.path
            )));
        }
        let (blas, solver, compiler) = library_versions(&hip);
        let mut info = describe(&hip, local, &blas, &solver, &compiler)?;
        info.ordinal = ordinal;
        let dev = local as c_int; // describe checked it fits
        // From here on Drop releases whatever has been created, on every error path.
        let mut peer = HipPeer {
            info,
            ordinal,
            dev,
            rocm_path: rocm_path.map(Path::to_path_buf),
            stream: null_mut(),
            event: null_mut(),
            module: null_mut(),
            kernels: Err(CaseError::unsupported("HIP kernels not loaded")),
            scratch: null_mut(),
            blas: None,
            solver: None,
            hsa: None,
            vulkan: None,
            _rtc: None,
            hip,
        };
        peer.bind().map_err(|e| match e {
            CaseError::Unsupported {
                error: Some(err), ..
            } => CaseError::Unsupported {
                reason: "HIP device could not be made current".into(),
                error: Some(err),
            },
            other => other,
        })?;
        let no_timing = ffi::hipEventDisableTiming;
        // SAFETY: live out-parameters, on the current device. hipStreamCreate: a blocking
        // stream, ordered after the null stream, as runtimes/cuda's flags 0.
        unsafe {
            hip_call!(&peer.hip, hipStreamCreate(&mut peer.stream)).refused("HIP stream")?;
            hip_call!(
                &peer.hip,
                hipEventCreateWithFlags(&mut peer.event, no_timing)
            )
            .refused("HIP event")?;
            hip_call!(
                &peer.hip,
                hipMalloc(&mut peer.scratch, super::gpu::SCRATCH_BYTES)
            )
            .refused("HIP scratch memory")?;
        }

        let rtc = match open_rtc(&peer.hip) {
            Ok(l) => l,
            Err(e) => {
                peer.kernels = Err(e);
                return Ok(peer);
            }
        };
        let arch = peer.info.arch.clone();
        if arch.is_empty() {
            peer.kernels = Err(CaseError::unsupported(
                "device reports no gcnArchName to compile for",
            ));
            return Ok(peer);
        }
        let source = kernel_source();
        let key = CompileKey {
            compiler: &peer.info.compiler,
            target: &arch,
            driver: &peer.info.driver_version,
            options: "--offload-arch=<arch>",
            source: &source,
        };
        let hip = &peer.hip;
        let loaded = KernelCache::from_env().load(
            &key,
            || compile(&rtc, &source, &arch),
            |code| {
                let mut module: hipModule_t = null_mut();
                // SAFETY: `code` is a complete code object from hiprtc, alive for the call.
                unsafe {
                    hip_call!(
                        hip,
                        hipModuleLoadData(&mut module, code.as_ptr().cast()),
                        "{arch}"
                    )
                }
                .refused("loading the hiprtc-compiled module")?;
                Ok(module)
            },
        );
        peer._rtc = Some(rtc);
        peer.module = loaded?;
        let (hip, module) = (&peer.hip, peer.module);
        let get = |name: &CStr| -> Result<hipFunction_t, CaseError> {
            let mut f: hipFunction_t = null_mut();
            // SAFETY: live out-parameter; the module is loaded.
            unsafe {
                hip_call!(
                    hip,
                    hipModuleGetFunction(&mut f, module, name.as_ptr()),
                    "{name:?}"
                )
            }
            .running()?;
            Ok(f)
        };
        let kernels = Kernels::load(get)?;
        peer.kernels = Ok(kernels);
        Ok(peer)
    }

    fn sync(&self) -> Result<(), CaseError> {
        // SAFETY: the stream is live.
        unsafe { hip_call!(&self.hip, hipStreamSynchronize(self.stream)) }.running()
    }
}

impl Drop for HipPeer {
    fn drop(&mut self) {
        // Best effort, in reverse order of creation. After a device fault every call returns
        // the sticky error and there is nothing better to do than go on.
        let _ = self.bind();
        self.solver = None;
        self.blas = None;
        self.hsa = None;
        let hip = &self.hip;
        // SAFETY: each handle was created by this peer on its device and is released once;
        // the null ones (an open that failed part-way) are skipped.
        unsafe {
            if !self.scratch.is_null() {
                let _ = hip_call!(hip, hipFree(self.scratch));
            }
            if !self.module.is_null() {
                let _ = hip_call!(hip, hipModuleUnload(self.module));
            }
            if !self.event.is_null() {
                let _ = hip_call!(hip, hipEventDestroy(self.event));
            }
            if !self.stream.is_null() {
                let _ = hip_call!(hip, hipStreamDestroy(self.stream));
            }
        }
    }
}

impl GpuCore for HipPeer {
    type Function = hipFunction_t;

    /// Make the device current on the calling thread: HIP's current device is per thread, and a
    /// test runner or worker may call from a thread other than the one that opened.
    fn bind(&self) -> Result<(), CaseError> {
        // SAFETY: plain call with an ordinal below the device count.
        unsafe { hip_call!(&self.hip, hipSetDevice(self.dev)) }.running()
    }

    fn kernels(&self) -> Result<&Kernels<hipFunction_t>, CaseError> {
        self.kernels.as_ref().map_err(Clone::clone)
    }

    fn launch_blocks(&self, l: Launch<hipFunction_t>) -> Result<(), CaseError> {
        let (s, b) = (self.stream, BLOCK as c_uint);
        // SAFETY: `l.f` is from the loaded module; each caller passes exactly its kernel's
        // parameters, which the runtime copies during the call.
        unsafe {
            hip_call!(
                &self.hip,
                hipModuleLaunchKernel(l.f, l.grid, 1, 1, b, 1, 1, 0, s, l.params, null_mut()),
                "{}",
                l.name
            )
        }
        .running()
    }

    /// Host -> any device-usable address (device, pinned, managed, imported, SVM: whatever the
    /// path hands over), then wait. The direction is said explicitly: with hipMemcpyDefault the
    /// runtime would copy on the host when it does not know the device pointer (OpenCL's).
    fn copy_in(&self, dst: usize, src: *const c_void, bytes: usize) -> Result<(), CaseError> {
        let (d, kind) = (dst as *mut c_void, ffi::hipMemcpyHostToDevice);
        // SAFETY: `src` is live host memory of `bytes` bytes until the sync below returns.
        unsafe {
            hip_call!(
                &self.hip,
                hipMemcpyAsync(d, src, bytes, kind, self.stream),
                "{bytes} B to {dst:#x}"
            )
        }
        .running()?;
        self.sync()
    }

    fn copy_out(&self, dst: *mut c_void, src: usize, bytes: usize) -> Result<(), CaseError> {
        let (s, kind) = (src as *const c_void, ffi::hipMemcpyDeviceToHost);
        // SAFETY: `dst` is live host memory of `bytes` bytes until the sync below returns.
        unsafe {
            hip_call!(
                &self.hip,
                hipMemcpyAsync(dst, s, bytes, kind, self.stream),
                "{bytes} B from {src:#x}"
            )
        }
        .running()?;
        self.sync()
    }

    fn scratch(&self) -> u64 {
        self.scratch as u64
    }
}

gpu::gpu_peer_runtime!(HipPeer, Api::Hip);

impl GpuDevice for HipPeer {
    fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    fn reopen_arguments(&self, ordinal: usize) -> Vec<String> {
        reopen_args(ordinal, self.rocm_path.as_deref())
    }

    const PEER_ACCESS_CALL: &'static str = "hipDeviceCanAccessPeer";

    fn can_access_peer(&self, from: usize, to: usize) -> Result<bool, CaseError> {
        let (a, b) = (local_device(from)?, local_device(to)?);
        let mut can: c_int = 0;
        // SAFETY: live out-parameter; plain ordinals.
        unsafe {
            hip_call!(
                &self.hip,
                hipDeviceCanAccessPeer(&mut can, a, b),
                "hip{from} -> hip{to}"
            )
        }
        .refused("HIP peer access query")?;
        Ok(can != 0)
    }

    fn enable_peer_access_from(&mut self, other: usize) -> Result<(), CaseError> {
        let from = local_device(other)?;
        // SAFETY: plain calls with ordinals; the caller makes this peer's device current
        // again.
        let enabled = unsafe {
            hip_call!(&self.hip, hipSetDevice(from), "hip{other}").and_then(|()| {
                hip_call!(
                    &self.hip,
                    hipDeviceEnablePeerAccess(self.dev, 0),
                    "hip{other} -> hip{}",
                    self.ordinal
                )
            })
        };
        match enabled {
            Err(e) if e.code == ffi::hipErrorPeerAccessAlreadyEnabled as i64 => Ok(()),
            other => other.refused("HIP peer access from OpenCL's GPU"),
        }
    }

    fn record_event_and_wait(&self) -> Result<(), CaseError> {
        // SAFETY: event and stream are live, on the current device.
        unsafe {
            hip_call!(&self.hip, hipEventRecord(self.event, self.stream)).running()?;
            hip_call!(&self.hip, hipEventSynchronize(self.event)).running()
        }
    }

    fn synchronize_device(&self) -> Result<(), ApiError> {
        // SAFETY: the device is current; hipDeviceSynchronize only waits and reports.
        unsafe { hip_call!(&self.hip, hipDeviceSynchronize(), "after the case") }
    }

    fn stream_watch(&self) -> Option<crate::blocking::QueueWatch> {
        use crate::blocking::QueueState;
        let query = self.hip.fns.hipStreamQuery?;
        let error_name = self.hip.fns.hipGetErrorName;
        // The stream outlives the watch: the case clears it before the peer could be closed.
        let stream = self.stream as usize;
        Some(Box::new(move || {
            // SAFETY: a live stream of the current device; hipStreamQuery only reports.
            match unsafe { query(stream as ffi::hipStream_t) } {
                ffi::hipSuccess => QueueState::Idle,
                ffi::hipErrorNotReady => QueueState::Busy,
                rc => QueueState::Failed(ApiError {
                    api: Api::Hip,
                    call: "hipStreamQuery".into(),
                    code: rc.into(),
                    // SAFETY: hipGetErrorName returns a static NUL-terminated string or null.
                    name: error_name
                        .and_then(|f| unsafe { ffi::c_string(f(rc)) })
                        .unwrap_or_else(|| format!("hipError {rc}")),
                    detail: String::new(),
                }),
            }
        }))
    }

    fn known_answer_check(&self) -> Result<(), CaseError> {
        let buf = DeviceBuffer::new(&self.hip, gpu::HEALTH_WORDS * 4, "health-check buffer")?;
        gpu::known_answer(self, buf.ptr as usize, "hip health check")
    }

    fn vulkan_slot(&mut self) -> &mut Option<Result<Rc<Broker>, CaseError>> {
        &mut self.vulkan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::PeerRuntime;
    use crate::runtimes::device::DeviceRuntime;

    #[test]
    fn reopen_args_name_the_api_the_ordinal_and_the_rocm_root() {
        assert_eq!(reopen_args(0, None), ["--api", "hip", "--ordinal", "0"]);
        assert_eq!(
            reopen_args(2, Some(Path::new("/opt/rocm-6.2.0"))),
            [
                "--api",
                "hip",
                "--ordinal",
                "2",
                "--rocm-path",
                "/opt/rocm-6.2.0"
            ]
        );
    }

    /// HipPeer is a device peer: the trait object the paths and ops take.
    #[test]
    fn hip_peer_is_a_device_runtime() {
        fn as_device(p: &mut HipPeer) -> Option<&mut dyn DeviceRuntime> {
            p.as_device()
        }
        let _ = as_device;
    }
}
