//! The `cuda` participant: HIP's NVIDIA platform, which is exactly these libraries — libcuda
//! (driver API), NVRTC, cuBLAS and cuSOLVER — opened at run time.
//!
//! Bindings are cudarc's `sys` modules (bindgen output of the CUDA 13.0 headers) built with
//! `dynamic-loading`: each function resolves itself on first call from cudarc's own dlopen of
//! the library, and cudarc PANICS when the library or the symbol is missing. So no function of
//! a library is called before [`VendorLib::open`] has opened it under the very names cudarc
//! tries, in cudarc's order (cudarc's later dlopen then lands on the same file), and checked
//! that every symbol this file calls from it is exported. Absence becomes `unsupported` with
//! what was tried; a test keeps the symbol lists in step with the calls.
//!
//! One primary context (the one the CUDA runtime inside cuBLAS/cuSOLVER also picks up), one
//! stream, one module of `kernels/*.hip` compiled by NVRTC to a cubin for the device's exact
//! `sm_XY`, so the driver never has to JIT PTX that may be newer than itself.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

use cudarc::cublas::sys as blas;
use cudarc::cusolver::sys as solver;
use cudarc::driver::sys as cu;
use cudarc::nvrtc::sys as rtc;
use libloading::Library;
use num_complex::Complex32;

use crate::model::{Api, ApiError, CaseError, Phase};
use crate::model::{Transpose, Uplo};
use crate::runtimes::PeerPtr;
use crate::runtimes::device::{
    AllocKind, DeviceAlloc, DeviceInfo, DeviceRuntime, ExportHandle, IpcHandle,
};
use crate::runtimes::gpu::{self, BLOCK, GpuCore, Kernel, Kernels, kernel_source};
use crate::runtimes::locate::{cuda_version, open_first};
use crate::runtimes::text::{c_buf_string, normalise_pci_bus_id, uuid_string};

// ---------------------------------------------------------------------------------------------
// Libraries, and the symbols called from each

/// One of the four libraries: the soname this build expects (what a message names), cudarc's
/// base names for it, whether to look beyond the loader path, and every function this file
/// calls from it through cudarc.
struct LibSpec {
    soname: &'static str,
    stems: &'static [&'static str],
    /// Toolkit libraries often sit in `$CUDA_HOME/lib64` off the loader path; libcuda ships
    /// with the kernel driver and is always on it.
    search_toolkit_dirs: bool,
    symbols: &'static [&'static str],
}

const LIBCUDA: LibSpec = LibSpec {
    soname: "libcuda.so.1",
    // cudarc's driver loader tries "cuda" then "nvcuda" (the Windows name): mirror it exactly.
    stems: &["cuda", "nvcuda"],
    search_toolkit_dirs: false,
    symbols: &[
        "cuInit",
        "cuDriverGetVersion",
        "cuDeviceGetCount",
        "cuDeviceGet",
        "cuDeviceGetName",
        "cuDeviceGetAttribute",
        "cuDeviceGetPCIBusId",
        "cuDevicePrimaryCtxRetain",
        "cuDevicePrimaryCtxRelease_v2",
        "cuCtxSetCurrent",
        "cuStreamCreate",
        "cuStreamDestroy_v2",
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventCreate",
        "cuEventRecord",
        "cuEventSynchronize",
        "cuEventDestroy_v2",
        "cuModuleLoadData",
        "cuModuleUnload",
        "cuModuleGetFunction",
        "cuLaunchKernel",
        "cuMemAlloc_v2",
        "cuMemFree_v2",
        "cuMemHostAlloc",
        "cuMemFreeHost",
        "cuMemAllocManaged",
        "cuMemGetInfo_v2",
        "cuMemCreate",
        "cuMemRelease",
        "cuMemGetAllocationGranularity",
        "cuMemAddressReserve",
        "cuMemAddressFree",
        "cuMemMap",
        "cuMemUnmap",
        "cuMemSetAccess",
        "cuMemExportToShareableHandle",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuMemcpy",
        "cuIpcGetMemHandle",
        "cuIpcOpenMemHandle_v2",
        "cuIpcCloseMemHandle",
        "cuDestroyExternalMemory",
        "cuImportExternalSemaphore",
        "cuDestroyExternalSemaphore",
        "cuGetErrorName",
    ],
};

const LIBNVRTC: LibSpec = LibSpec {
    soname: "libnvrtc.so.13",
    stems: &["nvrtc"],
    search_toolkit_dirs: true,
    symbols: &[
        "nvrtcVersion",
        "nvrtcCreateProgram",
        "nvrtcCompileProgram",
        "nvrtcGetProgramLogSize",
        "nvrtcGetProgramLog",
        "nvrtcGetCUBINSize",
        "nvrtcGetCUBIN",
        "nvrtcDestroyProgram",
    ],
};

const LIBCUBLAS: LibSpec = LibSpec {
    soname: "libcublas.so.13",
    stems: &["cublas"],
    search_toolkit_dirs: true,
    symbols: &[
        "cublasCreate_v2",
        "cublasDestroy_v2",
        "cublasSetStream_v2",
        "cublasSetPointerMode_v2",
        "cublasCgemm_v2",
        "cublasGetProperty",
    ],
};

/// CUDA 13.0 ships cuSOLVER 12 (libcusolver.so.12); cudarc tries `.so.13`, then `.so.12`.
const LIBCUSOLVER: LibSpec = LibSpec {
    soname: "libcusolver.so.12",
    stems: &["cusolver"],
    search_toolkit_dirs: true,
    symbols: &[
        "cusolverDnCreate",
        "cusolverDnDestroy",
        "cusolverDnSetStream",
        "cusolverDnCpotrf_bufferSize",
        "cusolverDnCpotrf",
        "cusolverGetProperty",
    ],
};

/// A library opened where cudarc will find it, with every symbol we call present. Holding it
/// keeps the file loaded, so cudarc's own handle resolves to this copy.
struct VendorLib {
    lib: Library,
    path: String,
}

fn toolkit_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|root| PathBuf::from(root).join("lib64"))
        .collect();
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.dedup();
    dirs
}

impl VendorLib {
    fn open(spec: &LibSpec) -> Result<VendorLib, CaseError> {
        // cudarc's candidate list, in its order: the first name that loads for us is the first
        // that loads for cudarc.
        let names: Vec<String> = spec
            .stems
            .iter()
            .flat_map(|s| cudarc::get_lib_name_candidates(s))
            .collect();
        let mut found = open_first(&names).ok();
        let mut dirs_tried = Vec::new();
        if found.is_none() && spec.search_toolkit_dirs {
            // Off the loader path cudarc looks nowhere. A file opened here by full path is
            // registered under its DT_SONAME, and glibc answers cudarc's later dlopen of that
            // bare name with this same object; only names from cudarc's list are tried, so the
            // soname is one cudarc asks for.
            for dir in toolkit_dirs() {
                let paths: Vec<String> = names
                    .iter()
                    .map(|n| dir.join(n))
                    .filter(|p| p.exists())
                    .map(|p| p.display().to_string())
                    .collect();
                dirs_tried.push(dir.display().to_string());
                found = open_first(&paths).ok();
                if found.is_some() {
                    break;
                }
            }
        }
        let Some((lib, path)) = found else {
            let mut reason = format!(
                "{} not found (tried {} on the loader path",
                spec.soname,
                names.join(", ")
            );
            if !dirs_tried.is_empty() {
                reason.push_str(&format!(", then in {}", dirs_tried.join(", ")));
            }
            reason.push(')');
            return Err(CaseError::unsupported(reason));
        };
        let missing: Vec<&str> = spec
            .symbols
            .iter()
            .copied()
            // SAFETY: only the symbol's presence is checked; nothing is called through it.
            .filter(|s| unsafe { lib.get::<*const c_void>(s.as_bytes()) }.is_err())
            .collect();
        if !missing.is_empty() {
            return Err(CaseError::unsupported(format!(
                "{path} lacks {} (older than the CUDA 13.0 API this build calls)",
                missing.join(", ")
            )));
        }
        let path = mapped_file(spec.stems[0]).unwrap_or(path);
        Ok(VendorLib { lib, path })
    }
}

/// The file the loader mapped for `stem`: `libcublas.so` is a symlink to something like
/// `libcublas.so.13.1.0.3`, and the real name is what a fingerprint should carry.
fn mapped_file(stem: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let prefix = format!("lib{stem}.so");
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            std::path::Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .map(str::to_string)
}

// ---------------------------------------------------------------------------------------------
// Status codes -> ApiError

fn api_error(call: &str, code: i64, name: String, detail: String) -> ApiError {
    ApiError {
        api: Api::Cuda,
        call: call.to_string(),
        code,
        name,
        detail,
    }
}

/// The four libraries' status enums, turned into `Result` with the call's name.
trait Status: Copy + PartialEq + std::fmt::Debug {
    const SUCCESS: Self;
    fn code(self) -> i64;
    /// The status's C name: cudarc's enums are the headers' enums, so Debug is that name.
    fn name(self) -> String {
        format!("{self:?}")
    }
    fn check(self, call: &str, detail: impl FnOnce() -> String) -> Result<(), ApiError> {
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
        Status::check($m::$f($($a),*), stringify!($f), String::new)
    };
    ($m:ident::$f:ident($($a:expr),* $(,)?), $($d:tt)+) => {
        Status::check($m::$f($($a),*), stringify!($f), || format!($($d)+))
    };
}

/// A size the 32-bit BLAS/LAPACK interfaces cannot take: the combination is refused up front.
fn int_arg(what: &str, v: usize) -> Result<c_int, CaseError> {
    c_int::try_from(v)
        .map_err(|_| CaseError::unsupported(format!("{what} = {v} exceeds the 32-bit int API")))
}

// ---------------------------------------------------------------------------------------------
// Discovery

fn attribute(dev: cu::CUdevice, attr: cu::CUdevice_attribute) -> Result<i32, ApiError> {
    let mut v: c_int = 0;
    // SAFETY: live out-parameter; `dev` came from cuDeviceGet.
    unsafe { call!(cu::cuDeviceGetAttribute(&mut v, attr, dev), "{attr:?}") }?;
    Ok(v)
}

/// cuDeviceGetUuid_v2 where the driver has it (CUDA 11.4+; under MIG it names the instance),
/// else cuDeviceGetUuid. Resolved through our own handle: cudarc's 13.0 bindings carry only
/// `_v2`, and a missing symbol must not panic.
fn device_uuid(driver: &VendorLib, dev: cu::CUdevice) -> Result<String, ApiError> {
    type UuidFn = unsafe extern "C" fn(*mut cu::CUuuid, cu::CUdevice) -> cu::CUresult;
    for name in ["cuDeviceGetUuid_v2", "cuDeviceGetUuid"] {
        // SAFETY: both are `CUresult f(CUuuid*, CUdevice)` in cuda.h.
        if let Ok(f) = unsafe { driver.lib.get::<UuidFn>(name.as_bytes()) } {
            let mut u = cu::CUuuid { bytes: [0; 16] };
            // SAFETY: live out-parameter.
            unsafe { f(&mut u, dev) }.check(name, String::new)?;
            let bytes: Vec<u8> = u.bytes.iter().map(|&b| b as u8).collect();
            return Ok(uuid_string(&bytes));
        }
    }
    Err(api_error(
        "cuDeviceGetUuid",
        0,
        "SYMBOL_NOT_FOUND".into(),
        driver.path.clone(),
    ))
}

/// `13.0 (nvidia 580.159.04)`: the driver API version and, where readable, the kernel
/// module's, which is what a driver engineer calls the driver version.
fn driver_version() -> Result<String, ApiError> {
    let mut v: c_int = 0;
    // SAFETY: live out-parameter.
    unsafe { call!(cu::cuDriverGetVersion(&mut v)) }?;
    let module = std::fs::read_to_string("/sys/module/nvidia/version").unwrap_or_default();
    Ok(match module.trim() {
        "" => cuda_version(v),
        m => format!("{} (nvidia {m})", cuda_version(v)),
    })
}

fn unavailable(e: CaseError) -> String {
    match e {
        CaseError::Unsupported { reason, .. } => format!("unavailable: {reason}"),
        other => format!("unavailable: {other:?}"),
    }
}

/// `NAME major.minor.patch (path)`, or why the library is unavailable. Versions come from
/// calls that need no handle and no device.
fn library_version(spec: &LibSpec, label: &str) -> String {
    let lib = match VendorLib::open(spec) {
        Ok(lib) => lib,
        Err(e) => return unavailable(e),
    };
    let mut v = [0 as c_int; 3];
    // SAFETY: live out-parameters; the library and the symbols were checked by open.
    let read = unsafe {
        if spec.stems == LIBNVRTC.stems {
            let [major, minor, _] = &mut v;
            call!(rtc::nvrtcVersion(major, minor))
        } else if spec.stems == LIBCUBLAS.stems {
            use blas::libraryPropertyType as P;
            let [a, b, c] = &mut v;
            call!(blas::cublasGetProperty(P::MAJOR_VERSION, a))
                .and(call!(blas::cublasGetProperty(P::MINOR_VERSION, b)))
                .and(call!(blas::cublasGetProperty(P::PATCH_LEVEL, c)))
        } else {
            use solver::libraryPropertyType as P;
            let [a, b, c] = &mut v;
            call!(solver::cusolverGetProperty(P::MAJOR_VERSION, a))
                .and(call!(solver::cusolverGetProperty(P::MINOR_VERSION, b)))
                .and(call!(solver::cusolverGetProperty(P::PATCH_LEVEL, c)))
        }
    };
    match read {
        Ok(()) if spec.stems == LIBNVRTC.stems => {
            format!("{label} {}.{} ({})", v[0], v[1], lib.path)
        }
        Ok(()) => format!("{label} {}.{}.{} ({})", v[0], v[1], v[2], lib.path),
        Err(e) => format!("{label} ? ({}: {e})", lib.path),
    }
}

/// What is the same for every device: read once per discovery.
struct Versions {
    driver: String,
    compiler: String,
    blas: String,
    solver: String,
}

impl Versions {
    fn read() -> Result<Versions, ApiError> {
        Ok(Versions {
            driver: driver_version()?,
            compiler: library_version(&LIBNVRTC, "NVRTC"),
            blas: library_version(&LIBCUBLAS, "cuBLAS"),
            solver: library_version(&LIBCUSOLVER, "cuSOLVER"),
        })
    }
}

/// cuInit(0) and the device count. An error here (no device, a driver/library mismatch, a
/// stub libcuda) is the platform refusing: `unsupported` with the call and its code.
fn init_driver() -> Result<usize, CaseError> {
    // SAFETY: plain call; the caller opened libcuda with its symbols checked.
    unsafe { call!(cu::cuInit(0)) }.refused("CUDA driver did not initialise")?;
    let mut n: c_int = 0;
    // SAFETY: live out-parameter.
    unsafe { call!(cu::cuDeviceGetCount(&mut n)) }.refused("CUDA devices could not be counted")?;
    Ok(n.max(0) as usize)
}

fn describe(
    driver: &VendorLib,
    ordinal: usize,
    versions: &Versions,
) -> Result<(cu::CUdevice, DeviceInfo), ApiError> {
    let mut dev: cu::CUdevice = 0;
    // SAFETY: live out-parameter.
    unsafe {
        call!(
            cu::cuDeviceGet(&mut dev, ordinal as c_int),
            "ordinal {ordinal}"
        )
    }?;
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer's length is passed.
    unsafe { call!(cu::cuDeviceGetName(name.as_mut_ptr(), 256, dev)) }?;
    let mut bus = [0 as c_char; 64];
    // SAFETY: the buffer's length is passed.
    unsafe { call!(cu::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, dev)) }?;
    let bus = c_buf_string(&bus);
    use cu::CUdevice_attribute as A;
    let major = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let info = DeviceInfo {
        ordinal,
        name: c_buf_string(&name),
        arch: format!("sm_{major}{minor}"),
        uuid: device_uuid(driver, dev)?,
        pci_bus_id: normalise_pci_bus_id(&bus).unwrap_or(bus),
        driver_version: versions.driver.clone(),
        // No part of the CUDA runtime (libcudart) is used: HIP-on-NVIDIA compiles to the
        // driver API; the compiler, BLAS and solver versions say the rest.
        runtime_version: String::new(),
        blas: versions.blas.clone(),
        solver: versions.solver.clone(),
        compiler: versions.compiler.clone(),
    };
    Ok((dev, info))
}

/// Every CUDA device with what the probe and the fingerprint record. `Err` says why none can
/// be listed (library absent, cuInit refused, a query failed). Never panics.
pub fn discover() -> Result<Vec<DeviceInfo>, String> {
    let reason = |e: CaseError| match e {
        CaseError::Unsupported {
            error: Some(err), ..
        } => err.to_string(),
        CaseError::Unsupported { reason, .. } => reason,
        other => format!("{other:?}"),
    };
    let driver = VendorLib::open(&LIBCUDA).map_err(reason)?;
    let count = init_driver().map_err(reason)?;
    let versions = Versions::read().map_err(|e| e.to_string())?;
    (0..count)
        .map(|i| {
            describe(&driver, i, &versions)
                .map(|(_, info)| info)
                .map_err(|e| format!("device {i}: {e}"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// NVRTC

/// Compile `source` to a cubin for `arch` (`sm_90`). A cubin, not PTX: PTX from an NVRTC newer
/// than the driver is refused at load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), and a cubin is what
/// the device runs with no JIT in between.
fn compile(source: &str, arch: &str) -> Result<Vec<u8>, CaseError> {
    let src =
        CString::new(source).map_err(|_| CaseError::unsupported("kernel source has a NUL"))?;
    let mut prog: rtc::nvrtcProgram = null_mut();
    let name = c"clhip.hip".as_ptr();
    // SAFETY: NUL-terminated source and name, no headers.
    unsafe {
        call!(rtc::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name,
            0,
            null(),
            null()
        ))
    }
    .running()?;
    let result = compile_program(prog, arch);
    // SAFETY: created above, destroyed once.
    unsafe { rtc::nvrtcDestroyProgram(&mut prog) };
    result
}

fn compile_program(prog: rtc::nvrtcProgram, arch: &str) -> Result<Vec<u8>, CaseError> {
    let opts = [
        CString::new(format!("--gpu-architecture={arch}"))
            .map_err(|_| CaseError::unsupported("arch name has a NUL"))?,
        c"--std=c++17".to_owned(),
    ];
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `ptrs` holds `opts.len()` live NUL-terminated strings.
    let compiled = unsafe {
        call!(rtc::nvrtcCompileProgram(
            prog,
            ptrs.len() as c_int,
            ptrs.as_ptr()
        ))
    };
    if let Err(mut e) = compiled {
        let log = program_log(prog);
        e.detail = format!(
            "{arch}: {}",
            log.lines().take(12).collect::<Vec<_>>().join(" | ")
        );
        // An NVRTC that does not know this architecture refuses the option: the platform cannot
        // run here. Anything else is a bug in kernels/*.hip and must be loud.
        return Err(if e.name == "NVRTC_ERROR_INVALID_OPTION" {
            CaseError::Unsupported {
                reason: format!("NVRTC cannot compile for {arch}"),
                error: Some(e),
            }
        } else {
            CaseError::Broken(e)
        });
    }
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    unsafe { call!(rtc::nvrtcGetCUBINSize(prog, &mut size)) }.running()?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` holds the `size` bytes nvrtcGetCUBINSize asked for.
    unsafe { call!(rtc::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast())) }.running()?;
    Ok(cubin)
}

fn program_log(prog: rtc::nvrtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    if unsafe { call!(rtc::nvrtcGetProgramLogSize(prog, &mut size)) }.is_err() {
        return String::new();
    }
    let mut log = vec![0 as c_char; size.max(1)];
    // SAFETY: `log` holds the `size` bytes asked for.
    match unsafe { call!(rtc::nvrtcGetProgramLog(prog, log.as_mut_ptr())) } {
        Ok(()) => c_buf_string(&log),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// cuBLAS and cuSOLVER handles, created on first use

/// A cuBLAS handle on the peer's stream. Created on the first cgemm: a machine without cuBLAS
/// loses gemm, not the participant.
struct BlasHandle {
    handle: blas::cublasHandle_t,
    _lib: VendorLib,
}

impl BlasHandle {
    fn create(stream: cu::CUstream) -> Result<BlasHandle, CaseError> {
        let lib = VendorLib::open(&LIBCUBLAS)?;
        let mut handle: blas::cublasHandle_t = null_mut();
        // SAFETY: live out-parameter; the primary context is current on this thread.
        unsafe { call!(blas::cublasCreate_v2(&mut handle)) }.refused("cuBLAS initialisation")?;
        let h = BlasHandle { handle, _lib: lib };
        // SAFETY: live handle; cuBLAS's cudaStream_t is the driver's CUstream_st*. Host pointer
        // mode: alpha and beta are read from host memory during the call.
        unsafe {
            call!(blas::cublasSetStream_v2(h.handle, stream.cast())).running()?;
            let host = blas::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST;
            call!(blas::cublasSetPointerMode_v2(h.handle, host)).running()?;
        }
        Ok(h)
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasCreate_v2, destroyed once, before the library is released.
        unsafe { blas::cublasDestroy_v2(self.handle) };
    }
}

/// A cuSOLVER dense handle on the peer's stream, created on the first cpotrf.
struct SolverHandle {
    handle: solver::cusolverDnHandle_t,
    _lib: VendorLib,
}

impl SolverHandle {
    fn create(stream: cu::CUstream) -> Result<SolverHandle, CaseError> {
        let lib = VendorLib::open(&LIBCUSOLVER)?;
        let mut handle: solver::cusolverDnHandle_t = null_mut();
        // SAFETY: live out-parameter; the primary context is current on this thread.
        unsafe { call!(solver::cusolverDnCreate(&mut handle)) }
            .refused("cuSOLVER initialisation")?;
        let h = SolverHandle { handle, _lib: lib };
        // SAFETY: live handle; the same CUstream_st* as the driver's.
        unsafe { call!(solver::cusolverDnSetStream(h.handle, stream.cast())) }.running()?;
        Ok(h)
    }
}

impl Drop for SolverHandle {
    fn drop(&mut self) {
        // SAFETY: created by cusolverDnCreate, destroyed once.
        unsafe { solver::cusolverDnDestroy(self.handle) };
    }
}

/// A temporary device allocation, freed on every path out of the scope that made it.
struct DeviceBuffer(cu::CUdeviceptr);

impl DeviceBuffer {
    fn new(bytes: usize, what: &str) -> Result<DeviceBuffer, CaseError> {
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter.
        unsafe { call!(cu::cuMemAlloc_v2(&mut p, bytes.max(1)), "{bytes} bytes") }.refused(what)?;
        Ok(DeviceBuffer(p))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc_v2 in the current context, freed once.
        unsafe { cu::cuMemFree_v2(self.0) };
    }
}

// ---------------------------------------------------------------------------------------------
// The participant

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
    _nvrtc: Option<VendorLib>,
    /// Last: released after everything above has been released through it.
    _driver: VendorLib,
}

impl CudaPeer {
    /// Open device `ordinal`: load the libraries, retain its primary context, create the
    /// stream and event, compile and load the kernels. A missing library or a refused step is
    /// `Unsupported` with what was tried, or the call and its code.
    pub fn open(ordinal: usize) -> Result<CudaPeer, CaseError> {
        let driver = VendorLib::open(&LIBCUDA)?;
        let count = init_driver()?;
        if ordinal >= count {
            return Err(CaseError::unsupported(format!(
                "no CUDA device {ordinal} ({count} found by {})",
                driver.path
            )));
        }
        let versions = Versions::read().refused("CUDA driver version")?;
        let (dev, info) = describe(&driver, ordinal, &versions).refused("CUDA device query")?;
        let mut ctx: cu::CUcontext = null_mut();
        // SAFETY: live out-parameter; `dev` came from cuDeviceGet.
        unsafe { call!(cu::cuDevicePrimaryCtxRetain(&mut ctx, dev)) }
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

        peer._nvrtc = Some(VendorLib::open(&LIBNVRTC)?);
        let arch = peer.info.arch.clone();
        let cubin = compile(&kernel_source(), &arch)?;
        // SAFETY: `cubin` is a complete ELF image from NVRTC, alive for the call.
        unsafe {
            call!(
                cu::cuModuleLoadData(&mut peer.module, cubin.as_ptr().cast()),
                "{arch}"
            )
        }
        .refused("loading the NVRTC-compiled module")?;
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

    fn kernels(&self) -> Result<&Kernels<cu::CUfunction>, CaseError> {
        self.kernels
            .as_ref()
            .ok_or_else(|| CaseError::unsupported("CUDA kernels not loaded"))
    }

    fn sync(&self) -> Result<(), CaseError> {
        // SAFETY: the stream is live.
        unsafe { call!(cu::cuStreamSynchronize(self.stream)) }.running()
    }

    fn blas(&mut self) -> Result<blas::cublasHandle_t, CaseError> {
        let stream = self.stream;
        match self.blas.get_or_insert_with(|| BlasHandle::create(stream)) {
            Ok(h) => Ok(h.handle),
            Err(e) => Err(e.clone()),
        }
    }

    fn solver(&mut self) -> Result<solver::cusolverDnHandle_t, CaseError> {
        let stream = self.stream;
        match self
            .solver
            .get_or_insert_with(|| SolverHandle::create(stream))
        {
            Ok(h) => Ok(h.handle),
            Err(e) => Err(e.clone()),
        }
    }

    /// cuMemCreate with a POSIX-fd shareable handle, then reserve, map and open for read/write
    /// by this device. Any step refused undoes the ones before it.
    fn alloc_exportable(&mut self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
        use cu::CUdevice_attribute as A;
        let vmm = attribute(
            self.dev,
            A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        )
        .refused("VMM support query")?;
        if vmm == 0 {
            return Err(CaseError::unsupported(
                "device has no virtual memory management",
            ));
        }
        let location = cu::CUmemLocation {
            type_: cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.dev,
        };
        let prop = cu::CUmemAllocationProp {
            type_: cu::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            requestedHandleTypes:
                cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            location,
            win32HandleMetaData: null_mut(),
            allocFlags: cu::CUmemAllocationProp_st__bindgen_ty_1 {
                compressionType: 0,
                gpuDirectRDMACapable: 0,
                usage: 0,
                reserved: [0; 4],
            },
        };
        let access = cu::CUmemAccessDesc {
            location,
            flags: cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        let minimum = cu::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM;
        let mut gran = 0usize;
        // SAFETY: live out-parameter and property struct.
        unsafe { call!(cu::cuMemGetAllocationGranularity(&mut gran, &prop, minimum)) }
            .refused("VMM allocation granularity")?;
        let size = bytes.next_multiple_of(gran.max(1));
        let mut handle: cu::CUmemGenericAllocationHandle = 0;
        // SAFETY: live out-parameter and property struct.
        unsafe { call!(cu::cuMemCreate(&mut handle, size, &prop, 0), "{size} bytes") }
            .refused("cuMemCreate with a POSIX fd handle type")?;
        let (mut va, mut reserved, mut mapped): (cu::CUdeviceptr, bool, bool) = (0, false, false);
        // SAFETY: each step works on what the previous one made: a reservation of `size`
        // bytes at any address, the `size`-byte allocation mapped at its start, one access
        // descriptor over the mapping.
        let made = unsafe {
            call!(
                cu::cuMemAddressReserve(&mut va, size, 0, 0, 0),
                "{size} bytes"
            )
            .inspect(|()| reserved = true)
            .and_then(|()| call!(cu::cuMemMap(va, size, 0, handle, 0)))
            .inspect(|()| mapped = true)
            .and_then(|()| call!(cu::cuMemSetAccess(va, size, &access, 1)))
        };
        if let Err(e) = made {
            // SAFETY: undo exactly the steps that succeeded, in reverse.
            unsafe {
                if mapped {
                    cu::cuMemUnmap(va, size);
                }
                if reserved {
                    cu::cuMemAddressFree(va, size);
                }
                cu::cuMemRelease(handle);
            }
            return Err(CaseError::Unsupported {
                reason: "mapping a cuMemCreate allocation".into(),
                error: Some(e),
            });
        }
        Ok(DeviceAlloc {
            kind: AllocKind::Exportable,
            ptr: PeerPtr {
                addr: va as usize,
                len,
            },
            handle,
            bytes: size,
        })
    }
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
            cu::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}

impl GpuCore for CudaPeer {
    /// Make the primary context current on the calling thread: contexts are per thread, and a
    /// test runner or worker may call from a thread other than the one that opened.
    fn bind(&self) -> Result<(), CaseError> {
        // SAFETY: `ctx` is retained for the life of `self`.
        unsafe { call!(cu::cuCtxSetCurrent(self.ctx)) }.running()
    }

    fn launch(&self, k: Kernel, threads: u64, args: &mut [*mut c_void]) -> Result<(), CaseError> {
        if threads == 0 {
            return Ok(());
        }
        let (name, f) = (k.name(), self.kernels()?.get(k));
        let grid = gpu::grid(name, threads)?;
        let (s, b) = (self.stream, BLOCK as u32);
        let params = args.as_mut_ptr();
        // SAFETY: `f` is from the loaded module; each caller passes exactly its kernel's
        // parameters, which the driver copies during the call.
        unsafe {
            call!(
                cu::cuLaunchKernel(f, grid, 1, 1, b, 1, 1, 0, s, params, null_mut()),
                "{name}"
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

impl DeviceRuntime for CudaPeer {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&mut self, kind: AllocKind, len: usize) -> Result<DeviceAlloc, CaseError> {
        self.bind()?;
        let bytes = len.max(1) * size_of::<Complex32>();
        let plain = |addr: usize| DeviceAlloc::new(kind, addr, len, 0);
        match kind {
            AllocKind::Device => {
                let mut p: cu::CUdeviceptr = 0;
                // SAFETY: live out-parameter.
                unsafe { call!(cu::cuMemAlloc_v2(&mut p, bytes), "{bytes} bytes") }
                    .refused("cuMemAlloc")?;
                Ok(plain(p as usize))
            }
            AllocKind::PinnedHost => {
                // PORTABLE: pinned for every context; DEVICEMAP: mapped into the device's
                // address space (implied under UVA; said so the intent is explicit).
                let flags = cu::CU_MEMHOSTALLOC_PORTABLE | cu::CU_MEMHOSTALLOC_DEVICEMAP;
                let mut p: *mut c_void = null_mut();
                // SAFETY: live out-parameter.
                unsafe { call!(cu::cuMemHostAlloc(&mut p, bytes, flags), "{bytes} bytes") }
                    .refused("cuMemHostAlloc")?;
                Ok(plain(p as usize))
            }
            AllocKind::Managed => {
                let attr = cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY;
                if attribute(self.dev, attr).refused("managed memory query")? == 0 {
                    return Err(CaseError::unsupported("device has no managed memory"));
                }
                // Oversubscribed managed memory can hang the GPU, not only this process:
                // never ask for more than is free on the device now.
                let (mut free, mut total) = (0usize, 0usize);
                // SAFETY: live out-parameters.
                unsafe { call!(cu::cuMemGetInfo_v2(&mut free, &mut total)) }
                    .refused("device memory query")?;
                if bytes > free {
                    return Err(CaseError::unsupported(format!(
                        "managed allocation of {bytes} bytes exceeds the {free} bytes free"
                    )));
                }
                let global = cu::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32;
                let mut p: cu::CUdeviceptr = 0;
                // SAFETY: live out-parameter.
                unsafe {
                    call!(
                        cu::cuMemAllocManaged(&mut p, bytes, global),
                        "{bytes} bytes"
                    )
                }
                .refused("cuMemAllocManaged")?;
                Ok(plain(p as usize))
            }
            AllocKind::Exportable => self.alloc_exportable(bytes, len),
            AllocKind::ImportedExternal | AllocKind::IpcOpened => {
                Err(CaseError::unsupported(format!(
                    "{kind:?} memory is not allocated: it comes from import_cl_memory or ipc_open"
                )))
            }
        }
    }

    fn free(&mut self, alloc: DeviceAlloc) {
        if self.bind().is_err() {
            return;
        }
        let (p, size) = (alloc.ptr.addr as cu::CUdeviceptr, alloc.bytes);
        // SAFETY: each kind is released by the calls that pair with its allocation, once.
        let freed = unsafe {
            match alloc.kind {
                AllocKind::Device | AllocKind::Managed => call!(cu::cuMemFree_v2(p)),
                AllocKind::PinnedHost => call!(cu::cuMemFreeHost(alloc.ptr.addr as *mut c_void)),
                AllocKind::Exportable => {
                    let unmapped = call!(cu::cuMemUnmap(p, size));
                    let unreserved = call!(cu::cuMemAddressFree(p, size));
                    let released = call!(cu::cuMemRelease(alloc.handle));
                    unmapped.and(unreserved).and(released)
                }
                AllocKind::IpcOpened => call!(cu::cuIpcCloseMemHandle(p)),
                // Never made on CUDA today (import_cl_memory refuses), but freed the way
                // cuExternalMemoryGetMappedBuffer's documentation says: the mapped buffer with
                // cuMemFree, then the external-memory object.
                AllocKind::ImportedExternal => {
                    let unmapped = call!(cu::cuMemFree_v2(p));
                    let ext = alloc.handle as usize as cu::CUexternalMemory;
                    let destroyed = call!(cu::cuDestroyExternalMemory(ext));
                    unmapped.and(destroyed)
                }
            }
        };
        // The trait gives free no error channel; a failing free is still worth a line in the
        // worker's stderr (after a fault, every call fails with the sticky error).
        if let Err(e) = freed {
            eprintln!(
                "clhip cuda{}: freeing {:?} at {p:#x}: {e}",
                self.ordinal, alloc.kind
            );
        }
    }

    fn export_fd(&mut self, alloc: &DeviceAlloc) -> Result<OwnedFd, CaseError> {
        alloc.require(AllocKind::Exportable, "a shareable handle")?;
        self.bind()?;
        let ty = cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        let mut fd: c_int = -1;
        // SAFETY: for the POSIX fd handle type the out-parameter is an int.
        let out = (&raw mut fd).cast();
        unsafe { call!(cu::cuMemExportToShareableHandle(out, alloc.handle, ty, 0)) }
            .refused("exporting a POSIX fd")?;
        if fd < 0 {
            return Err(CaseError::unsupported(
                "cuMemExportToShareableHandle gave no fd",
            ));
        }
        // SAFETY: a fresh fd from the driver, owned by the caller from now on.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// cuMemExportToShareableHandle with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: an opaque
    /// fd, for cl_khr_external_memory_opaque_fd.
    fn export_handle(&self) -> ExportHandle {
        ExportHandle::OpaqueFd
    }

    /// cuMemcpy: with unified addressing the driver infers the direction from the pointers.
    /// Synchronous, and ordered after the peer's stream, which is a blocking stream and so
    /// waits for (and is waited for by) the legacy default stream cuMemcpy runs on.
    ///
    /// An address CUDA did not allocate, register or import is pageable host memory to the
    /// driver, which copies it with the CPU: one the CPU cannot touch kills the process with
    /// SIGSEGV (seen on an H100, driver 580.159.04, with 0x8), not an error code. Only
    /// workers, whose death is an outcome, should hand it such an address.
    fn memcpy(&mut self, dst: usize, src: usize, bytes: usize) -> Result<(), CaseError> {
        self.bind()?;
        let (d, s) = (dst as cu::CUdeviceptr, src as cu::CUdeviceptr);
        // SAFETY: none that Rust can give: an address the driver does not know (OpenCL's SVM,
        // say) is accessed from the CPU as host memory. That behaviour is what is under test,
        // in a worker process.
        unsafe { call!(cu::cuMemcpy(d, s, bytes), "{bytes} B {s:#x} -> {d:#x}") }.refused(
            "cuMemcpy refused the addresses (one may be memory CUDA did not allocate or map)",
        )
    }

    fn import_cl_memory(
        &mut self,
        _addr: usize,
        _bytes: usize,
        _len: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        Err(CaseError::unsupported(
            "no export of OpenCL memory reaches CUDA: the dma-buf export \
             (hsa_amd_portable_export_dmabuf) is ROCm's HSA runtime",
        ))
    }

    fn ipc_handle(&mut self, alloc: &DeviceAlloc) -> Result<IpcHandle, CaseError> {
        alloc.require(AllocKind::Device, "an IPC handle (cuIpcGetMemHandle)")?;
        self.bind()?;
        let mut h = cu::CUipcMemHandle { reserved: [0; 64] };
        let p = alloc.ptr.addr as cu::CUdeviceptr;
        // SAFETY: live out-parameter; `p` is the base of a cuMemAlloc allocation.
        unsafe { call!(cu::cuIpcGetMemHandle(&mut h, p), "{p:#x}") }
            .refused("cuIpcGetMemHandle")?;
        Ok(h.reserved.map(|c| c as u8))
    }

    fn ipc_open(&mut self, handle: &IpcHandle, len: usize) -> Result<DeviceAlloc, CaseError> {
        self.bind()?;
        let h = cu::CUipcMemHandle {
            reserved: handle.map(|b| b as c_char),
        };
        let lazy = cu::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: live out-parameter; the handle is passed by value. A handle from this same
        // process is refused by the driver with an error, not undefined behaviour.
        unsafe { call!(cu::cuIpcOpenMemHandle_v2(&mut p, h, lazy)) }
            .refused("cuIpcOpenMemHandle refused the handle")?;
        Ok(DeviceAlloc::new(AllocKind::IpcOpened, p as usize, len, 0))
    }

    /// cuImportExternalSemaphore with an opaque fd. On success the driver owns the fd (it
    /// closes it when the semaphore is destroyed); on failure the fd stays the caller's. The
    /// caller passes a dup of its own fd, so either way it closes only what it still owns.
    fn import_semaphore_fd(&mut self, fd: RawFd) -> Result<u64, CaseError> {
        if fd < 0 {
            return Err(CaseError::unsupported(format!(
                "no fd to import as a semaphore ({fd})"
            )));
        }
        self.bind()?;
        let desc = cu::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
            type_: cu::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
            handle: cu::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 { fd },
            flags: 0,
            reserved: [0; 16],
        };
        let mut sem: cu::CUexternalSemaphore = null_mut();
        // SAFETY: live out-parameter and descriptor; for the opaque-fd type only `fd` of the
        // handle union is read.
        unsafe { call!(cu::cuImportExternalSemaphore(&mut sem, &desc), "fd {fd}") }
            .refused("cuImportExternalSemaphore refused the fd")?;
        Ok(sem as usize as u64)
    }

    fn destroy_semaphore(&mut self, sem: u64) {
        if sem == 0 || self.bind().is_err() {
            return;
        }
        let s = sem as usize as cu::CUexternalSemaphore;
        // SAFETY: a handle import_semaphore_fd returned, destroyed once.
        if let Err(e) = unsafe { call!(cu::cuDestroyExternalSemaphore(s)) } {
            eprintln!(
                "clhip cuda{}: destroying semaphore {sem:#x}: {e}",
                self.ordinal
            );
        }
    }

    fn reopen_args(&self) -> Vec<String> {
        reopen_args(self.ordinal)
    }

    fn record_and_wait_event(&mut self) -> Result<(), CaseError> {
        self.bind()?;
        // SAFETY: event and stream are live, in the current context.
        unsafe {
            call!(cu::cuEventRecord(self.event, self.stream)).running()?;
            call!(cu::cuEventSynchronize(self.event)).running()
        }
    }

    fn cgemm(
        &mut self,
        op_a: Transpose,
        op_b: Transpose,
        m: usize,
        n: usize,
        k: usize,
        alpha: Complex32,
        a: PeerPtr,
        lda: usize,
        b: PeerPtr,
        ldb: usize,
        beta: Complex32,
        c: PeerPtr,
        ldc: usize,
    ) -> Result<(), CaseError> {
        self.bind()?;
        let op = |t: Transpose| match t {
            Transpose::None => blas::cublasOperation_t::CUBLAS_OP_N,
            Transpose::Trans => blas::cublasOperation_t::CUBLAS_OP_T,
            Transpose::ConjTrans => blas::cublasOperation_t::CUBLAS_OP_C,
        };
        let (ta, tb) = (op(op_a), op(op_b));
        let (m, n, k) = (int_arg("m", m)?, int_arg("n", n)?, int_arg("k", k)?);
        let (lda, ldb, ldc) = (
            int_arg("lda", lda)?,
            int_arg("ldb", ldb)?,
            int_arg("ldc", ldc)?,
        );
        let h = self.blas()?;
        let alpha = blas::cuComplex {
            x: alpha.re,
            y: alpha.im,
        };
        let beta = blas::cuComplex {
            x: beta.re,
            y: beta.im,
        };
        let (a, b, c) = (a.addr as *const _, b.addr as *const _, c.addr as *mut _);
        // SAFETY: column-major operands at the addresses the path handed over; with host
        // pointer mode cuBLAS reads alpha and beta before returning.
        unsafe {
            call!(
                blas::cublasCgemm_v2(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc),
                "m={m} n={n} k={k} {op_a:?} {op_b:?}"
            )
        }
        .running()
    }

    fn cpotrf(&mut self, uplo: Uplo, n: usize, a: PeerPtr, lda: usize) -> Result<i32, CaseError> {
        self.bind()?;
        let fill = match uplo {
            Uplo::Lower => solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
            Uplo::Upper => solver::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
        };
        let (n, lda) = (int_arg("cpotrf n", n)?, int_arg("cpotrf lda", lda)?);
        let h = self.solver()?;
        let a = a.addr as *mut solver::cuComplex;
        let mut lwork: c_int = 0;
        // SAFETY: live out-parameter; `a` is only looked at for its shape.
        unsafe {
            call!(solver::cusolverDnCpotrf_bufferSize(
                h, fill, n, a, lda, &mut lwork
            ))
        }
        .running()?;
        let bytes = lwork.max(1) as usize * size_of::<Complex32>();
        let work = DeviceBuffer::new(bytes, "cpotrf workspace")?;
        let (w, info_at) = (work.0 as *mut solver::cuComplex, self.scratch as *mut c_int);
        // SAFETY: a workspace of `lwork` elements; `info` goes to 4 device bytes of scratch.
        unsafe {
            call!(
                solver::cusolverDnCpotrf(h, fill, n, a, lda, w, lwork, info_at),
                "n={n} lda={lda} {uplo:?}"
            )
        }
        .running()?;
        // Ordered after the factorization on the stream; the copy waits for it.
        let mut info: c_int = 0;
        self.copy_out((&raw mut info).cast(), self.scratch as usize, 4)?;
        Ok(info)
    }

    fn sticky_fault(&mut self) -> Option<ApiError> {
        if self.bind().is_err() {
            return None;
        }
        // SAFETY: the context is current; cuCtxSynchronize only waits and reports.
        let r = unsafe { call!(cu::cuCtxSynchronize(), "after the case") };
        match r {
            Err(e) if e.is_device_fault() => Some(e),
            _ => None,
        }
    }

    fn health_check(&mut self) -> Result<(), CaseError> {
        self.bind()?;
        let buf = DeviceBuffer::new(gpu::HEALTH_WORDS * 4, "health-check buffer")?;
        gpu::known_answer(self, buf.0 as usize, "cuda health check")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::pattern;
    use crate::runtimes::{PatternCheck, PeerRuntime};

    /// Whether this machine has a CUDA driver at all. Device tests are skipped without one
    /// (CI), unless CLHIP_REQUIRE_CUDA=1 says a GPU is expected (the device machine).
    fn gpu_or_skip(test: &str) -> Option<CudaPeer> {
        let present = open_first(&crate::runtimes::locate::cuda_candidates()).is_ok();
        if !present {
            assert!(
                std::env::var("CLHIP_REQUIRE_CUDA").as_deref() != Ok("1"),
                "{test}: CLHIP_REQUIRE_CUDA=1 but libcuda is absent"
            );
            eprintln!("{test}: skipped, no libcuda");
            return None;
        }
        match CudaPeer::open(0) {
            Ok(p) => Some(p),
            Err(e) => panic!("{test}: libcuda loads but open(0) failed: {e:?}"),
        }
    }

    #[test]
    fn kernel_source_holds_every_kernel() {
        let src = kernel_source();
        for name in Kernel::ALL.map(Kernel::name) {
            assert!(src.contains(&format!("void {name}(")), "{name} missing");
        }
        assert!(src.starts_with("#line 1 \"prelude.hip\""));
        // Both compilers take it: no include of toolkit headers, C linkage for every kernel.
        assert!(!src.lines().any(|l| l.trim_start().starts_with("#include")));
        assert_eq!(src.matches("CLHIP_KERNEL void").count(), Kernel::ALL.len());
    }

    /// Every cudarc `sys` function this file calls must be in its library's preflight list, or
    /// a library lacking it would panic inside cudarc instead of reporting `unsupported`.
    #[test]
    fn every_called_symbol_is_checked_before_use() {
        let src = include_str!("cuda.rs");
        for (prefix, spec) in [
            ("cu::", &LIBCUDA),
            ("rtc::", &LIBNVRTC),
            ("blas::", &LIBCUBLAS),
            ("solver::", &LIBCUSOLVER),
        ] {
            let mut called = std::collections::BTreeSet::new();
            let mut rest = src;
            while let Some(at) = rest.find(prefix) {
                let tail = &rest[at + prefix.len()..];
                let ident: String = tail
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let is_call = tail[ident.len()..].starts_with('(');
                let is_fn = ["cu", "nvrtc", "cublas", "cusolver"].iter().any(|p| {
                    ident.starts_with(p)
                        && ident[p.len()..].starts_with(|c: char| c.is_ascii_uppercase())
                });
                if is_call && is_fn {
                    assert!(
                        spec.symbols.contains(&ident.as_str()),
                        "{ident} is called but not checked in {}",
                        spec.soname
                    );
                    called.insert(ident.clone());
                }
                rest = &tail[ident.len()..];
            }
            // And the other way: the list names nothing this file no longer calls.
            let listed: std::collections::BTreeSet<String> =
                spec.symbols.iter().map(|s| s.to_string()).collect();
            assert_eq!(called, listed, "{}", spec.soname);
        }
    }

    #[test]
    fn reopen_args_name_the_api_and_the_ordinal() {
        assert_eq!(reopen_args(0), ["--api", "cuda", "--ordinal", "0"]);
        assert_eq!(reopen_args(3), ["--api", "cuda", "--ordinal", "3"]);
    }

    /// The interop calls added with IPC, cross-runtime copies and external semaphores are in
    /// the driver's preflight list, so a libcuda without one is `unsupported`, not a panic.
    #[test]
    fn interop_symbols_are_preflighted() {
        for s in [
            "cuMemcpy",
            "cuIpcGetMemHandle",
            "cuIpcOpenMemHandle_v2",
            "cuIpcCloseMemHandle",
            "cuDestroyExternalMemory",
            "cuImportExternalSemaphore",
            "cuDestroyExternalSemaphore",
        ] {
            assert!(LIBCUDA.symbols.contains(&s), "{s}");
        }
        // And the IPC handle is the trait's 64 bytes.
        assert_eq!(size_of::<cu::CUipcMemHandle>(), size_of::<IpcHandle>());
    }

    #[test]
    fn pci_bus_ids_normalise_to_opencl_form() {
        assert_eq!(
            normalise_pci_bus_id("0000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(
            normalise_pci_bus_id("00000000:19:00.0").as_deref(),
            Some("0000:19:00.0")
        );
        assert_eq!(normalise_pci_bus_id("garbage"), None);
    }

    /// Without libcuda (CI, this development machine) the participant says so and what it
    /// tried; it must not panic inside cudarc.
    #[test]
    fn absent_libcuda_is_unsupported_with_what_was_tried() {
        if open_first(&crate::runtimes::locate::cuda_candidates()).is_ok() {
            eprintln!("libcuda present: absence not testable here");
            return;
        }
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
    fn device_opens_and_reports_identity() {
        let Some(p) = gpu_or_skip("device_opens_and_reports_identity") else {
            return;
        };
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

    /// Prints cuDeviceGetUuid beside OpenCL's CL_DEVICE_UUID_KHR and PCI bus ids, for pairing.
    #[test]
    fn device_uuid_matches_opencl() {
        let Some(p) = gpu_or_skip("device_uuid_matches_opencl") else {
            return;
        };
        let probe = crate::probe::probe(None);
        let info = p.info();
        eprintln!(
            "cuda: uuid {} pci {} ({})",
            info.uuid, info.pci_bus_id, info.name
        );
        let mut same = None;
        for d in probe.platforms.iter().flat_map(|pl| pl.devices.iter()) {
            eprintln!(
                "opencl {}: uuid {:?} pci {:?} ({})",
                d.label, d.uuid, d.pci_bus_id, d.name
            );
            if d.pci_bus_id == crate::probe::Queried::Value(info.pci_bus_id.clone()) {
                same = Some(d.uuid.clone());
            }
        }
        eprintln!("cuda.devices (probe json): {:?}", probe.cuda.devices);
        match same {
            Some(u) => eprintln!(
                "same PCI device: OpenCL uuid {u:?} vs CUDA {} -> {}",
                info.uuid,
                if u == crate::probe::Queried::Value(info.uuid.clone()) {
                    "AGREE"
                } else {
                    "DIFFER"
                }
            ),
            None => eprintln!("no OpenCL device at PCI {}", info.pci_bus_id),
        }
    }

    #[test]
    fn device_allocs_of_every_kind_round_trip() {
        let Some(mut p) = gpu_or_skip("device_allocs_of_every_kind_round_trip") else {
            return;
        };
        let data = crate::generate::complex_vec(11, 4099);
        // Every kind is tried and reported before the verdict: one refusal must not hide the
        // others' results.
        let mut failures = Vec::new();
        for kind in [
            AllocKind::Device,
            AllocKind::PinnedHost,
            AllocKind::Managed,
            AllocKind::Exportable,
        ] {
            let one = |p: &mut CudaPeer| -> Result<String, CaseError> {
                let a = p.alloc(kind, data.len())?;
                assert!(a.bytes >= data.len() * 8);
                p.upload(a.ptr, &data)?;
                assert_eq!(p.download(a.ptr)?, data, "{kind:?} copy round trip");
                // The kernels on this kind of memory too, and the host's view of their work.
                p.fill_pattern(a.ptr, 3)?;
                let check = p.check_pattern(a.ptr, 3)?;
                assert_eq!(check.mismatches, 0, "{kind:?}");
                let words = bits(&p.download(a.ptr)?);
                assert_eq!(words, pattern(3, data.len() * 2), "{kind:?} pattern");
                let note = if kind == AllocKind::Exportable {
                    let fd = p.export_fd(&a)?;
                    format!(
                        "{} bytes (granularity-rounded), exported as {fd:?}",
                        a.bytes
                    )
                } else {
                    assert!(p.export_fd(&a).is_err());
                    format!("{} bytes at {:#x}", a.bytes, a.ptr.addr)
                };
                p.free(a);
                Ok(note)
            };
            match one(&mut p) {
                Ok(note) => eprintln!("alloc {kind:?}: ok, {note}"),
                Err(e) => {
                    eprintln!("alloc {kind:?}: {e:?}");
                    failures.push(kind);
                }
            }
        }
        p.health_check().unwrap();
        assert!(failures.is_empty(), "refused or broken: {failures:?}");
    }

    #[test]
    fn device_pattern_sees_a_planted_flip_at_its_index() {
        let Some(mut p) = gpu_or_skip("device_pattern_sees_a_planted_flip_at_its_index") else {
            return;
        };
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

    /// Everything on this platform that needs no second process: the opaque-fd export kind,
    /// import_cl_memory's honest refusal, IPC handles only for Device memory, a handle of
    /// 64 bytes that this same process cannot open (the driver refuses; no crash), and a bad
    /// semaphore fd refused.
    #[test]
    fn device_ipc_handle_and_refusals() {
        let Some(mut p) = gpu_or_skip("device_ipc_handle_and_refusals") else {
            return;
        };
        assert_eq!(p.export_handle(), ExportHandle::OpaqueFd);
        assert_eq!(p.reopen_args(), ["--api", "cuda", "--ordinal", "0"]);
        match p.import_cl_memory(0x1000, 4096, 512) {
            Err(CaseError::Unsupported { reason, .. }) => {
                assert!(
                    reason.contains("hsa_amd_portable_export_dmabuf"),
                    "{reason}"
                )
            }
            other => panic!("expected unsupported, got {other:?}"),
        }
        let len = 4096;
        let a = p.alloc(AllocKind::Device, len).unwrap();
        let h = p.ipc_handle(&a).unwrap();
        assert_eq!(h.len(), 64);
        assert!(h.iter().any(|&b| b != 0), "an all-zero IPC handle");
        match p.ipc_open(&h, len) {
            Err(e) => eprintln!("ipc_open of this process's own handle: {e:?}"),
            Ok(opened) => {
                // Not expected, but not a crash either: say so, and close it.
                eprintln!("ipc_open of this process's own handle was accepted: {opened:?}");
                p.free(opened);
                panic!("cuIpcOpenMemHandle accepted a handle from its own process");
            }
        }
        let pinned = p.alloc(AllocKind::PinnedHost, len).unwrap();
        assert!(matches!(
            p.ipc_handle(&pinned),
            Err(CaseError::Unsupported { error: None, .. })
        ));
        p.free(pinned);
        // /dev/null is an fd, but no semaphore: refused with the driver's error.
        let null = std::fs::File::open("/dev/null").unwrap();
        let r = p.import_semaphore_fd(std::os::fd::AsRawFd::as_raw_fd(&null));
        eprintln!("import_semaphore_fd(/dev/null) -> {r:?}");
        match r {
            Err(CaseError::Unsupported { reason, error }) => {
                assert_eq!(reason, "cuImportExternalSemaphore refused the fd");
                assert!(error.is_some());
            }
            Ok(sem) => {
                p.destroy_semaphore(sem);
                panic!("cuImportExternalSemaphore accepted /dev/null");
            }
            Err(e) => panic!("expected unsupported, got {e:?}"),
        }
        p.free(a);
        p.health_check().unwrap();
    }

    /// cuMemcpy device -> device, device -> pinned host and back: the data arrives bit for bit.
    #[test]
    fn device_memcpy_round_trips() {
        let Some(mut p) = gpu_or_skip("device_memcpy_round_trips") else {
            return;
        };
        let data = crate::generate::complex_vec(17, 65_537);
        let bytes = data.len() * size_of::<Complex32>();
        let a = p.alloc(AllocKind::Device, data.len()).unwrap();
        let b = p.alloc(AllocKind::Device, data.len()).unwrap();
        let h = p.alloc(AllocKind::PinnedHost, data.len()).unwrap();
        p.upload(a.ptr, &data).unwrap();
        p.memcpy(b.ptr.addr, a.ptr.addr, bytes).unwrap();
        assert_eq!(p.download(b.ptr).unwrap(), data, "device -> device");
        // The kernel's work on the stream is ordered before cuMemcpy on the legacy stream.
        p.fill_pattern(a.ptr, 5).unwrap();
        p.memcpy(h.ptr.addr, a.ptr.addr, bytes).unwrap();
        let want = pattern(5, data.len() * 2);
        assert_eq!(bits(&p.download(h.ptr).unwrap()), want, "device -> pinned");
        p.memcpy(b.ptr.addr, h.ptr.addr, bytes).unwrap();
        assert_eq!(bits(&p.download(b.ptr).unwrap()), want, "pinned -> device");
        eprintln!("memcpy round trips: {bytes} B each way, bit for bit");
        for x in [a, b, h] {
            p.free(x);
        }
        p.health_check().unwrap();
    }

    /// An address CUDA never allocated is, under unified addressing, pageable host memory to
    /// cuMemcpy: the driver copies it with the CPU, so an unmapped one kills the process
    /// (SIGSEGV) rather than returning an error. In a child process; the parent only insists
    /// that the copy did not claim success.
    #[test]
    fn device_memcpy_from_an_unknown_address_never_succeeds() {
        const TEST: &str = "device_memcpy_from_an_unknown_address_never_succeeds";
        if std::env::var_os("CLHIP_CUDA_MEMCPY_CHILD").is_some() {
            let Some(mut p) = gpu_or_skip(TEST) else {
                return;
            };
            let a = p.alloc(AllocKind::Device, 64).unwrap();
            eprintln!("copying from 0x8");
            let r = p.memcpy(a.ptr.addr, 0x8, 512);
            eprintln!("memcpy from 0x8 -> {r:?}");
            assert!(r.is_err(), "cuMemcpy from 0x8 claimed success");
            return;
        }
        if gpu_or_skip(TEST).is_none() {
            return;
        }
        let exe = std::env::current_exe().expect("test binary path");
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                &format!("runtimes::cuda::tests::{TEST}"),
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CLHIP_CUDA_MEMCPY_CHILD", "1")
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        eprintln!("child: {:?}\n{text}", out.status);
        assert!(text.contains("copying from 0x8"), "{text}");
        // Either the driver refused (the child passed) or the CPU copy faulted: both are
        // honest; a copy that "succeeded" fails the child's assertion and this one.
        let refused = out.status.success() && text.contains("memcpy from 0x8 -> Err");
        let crashed = std::os::unix::process::ExitStatusExt::signal(&out.status).is_some();
        assert!(refused || crashed, "{text}");
    }

    fn bits(v: &[Complex32]) -> Vec<u32> {
        v.iter()
            .flat_map(|z| [z.re.to_bits(), z.im.to_bits()])
            .collect()
    }

    #[test]
    fn device_scale_and_magnitude_match_the_cpu() {
        let Some(mut p) = gpu_or_skip("device_scale_and_magnitude_match_the_cpu") else {
            return;
        };
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

    fn gemm_case(p: &mut CudaPeer, n: usize, timed: bool) {
        use crate::generate::matrix;
        let (a, b, c) = (matrix(1, n, n, n), matrix(2, n, n, n), matrix(3, n, n, n));
        let (alpha, beta) = (Complex32::new(0.5, -1.0), Complex32::new(0.25, 0.5));
        let bufs: Vec<DeviceAlloc> = [&a, &b, &c]
            .iter()
            .map(|m| {
                let d = p.alloc(AllocKind::Device, m.len()).unwrap();
                p.upload(d.ptr, m).unwrap();
                d
            })
            .collect();
        let (ta, tb) = (Transpose::ConjTrans, Transpose::None);
        let run = |p: &mut CudaPeer| {
            p.cgemm(
                ta,
                tb,
                n,
                n,
                n,
                alpha,
                bufs[0].ptr,
                n,
                bufs[1].ptr,
                n,
                beta,
                bufs[2].ptr,
                n,
            )
            .unwrap();
        };
        run(p);
        let got = p.download(bufs[2].ptr).unwrap();
        let want = crate::reference::cgemm(ta, tb, n, n, n, alpha, &a, n, &b, n, beta, &c, n);
        crate::tolerance::check_cgemm("cuda cgemm", &got, &want, n, n, n, n, false)
            .unwrap_or_else(|m| panic!("{m}"));
        if timed {
            let reps = 10;
            p.synchronize().unwrap();
            let t = std::time::Instant::now();
            for _ in 0..reps {
                run(p);
            }
            p.synchronize().unwrap();
            let s = t.elapsed().as_secs_f64() / reps as f64;
            let flops = 8.0 * (n as f64).powi(3);
            eprintln!(
                "cgemm n={n}: {:.3} ms, {:.1} TFLOP/s",
                s * 1e3,
                flops / s / 1e12
            );
        }
        for d in bufs {
            p.free(d);
        }
    }

    #[test]
    fn device_cgemm_matches_the_reference() {
        let Some(mut p) = gpu_or_skip("device_cgemm_matches_the_reference") else {
            return;
        };
        eprintln!("{}", p.info().blas);
        gemm_case(&mut p, 64, false);
        gemm_case(&mut p, 2048, true);
    }

    #[test]
    fn device_cpotrf_matches_the_reference_and_reports_info() {
        let Some(mut p) = gpu_or_skip("device_cpotrf_matches_the_reference_and_reports_info")
        else {
            return;
        };
        eprintln!("{}", p.info().solver);
        for (n, lda) in [(64, 70), (2048, 2048)] {
            for uplo in [Uplo::Lower, Uplo::Upper] {
                let a = crate::generate::hpd_matrix(9, n, lda);
                let d = p.alloc(AllocKind::Device, a.len()).unwrap();
                let mut times = Vec::new();
                // The first call of a shape pays for the cuSOLVER handle (first call only) and
                // CUDA's lazy kernel loading; the second is the steady state.
                for _ in 0..2 {
                    p.upload(d.ptr, &a).unwrap();
                    let t = std::time::Instant::now();
                    let info = p.cpotrf(uplo, n, d.ptr, lda).unwrap();
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                    assert_eq!(info, 0);
                }
                let got = p.download(d.ptr).unwrap();
                let want = crate::reference::cholesky(uplo, n, &a, lda).unwrap();
                crate::tolerance::check_cholesky("cuda cpotrf", &got, &want, uplo, n, lda)
                    .unwrap_or_else(|m| panic!("{m}"));
                eprintln!(
                    "cpotrf n={n} {uplo:?}: first {:.3} ms, then {:.3} ms \
                     (workspace alloc, factorization, info read-back)",
                    times[0], times[1]
                );
                p.free(d);
            }
        }
        let (a, want_info) = crate::generate::non_hpd_matrix(4, 300, 300);
        let d = p.alloc(AllocKind::Device, a.len()).unwrap();
        p.upload(d.ptr, &a).unwrap();
        let info = p.cpotrf(Uplo::Lower, 300, d.ptr, 300).unwrap();
        eprintln!("cpotrf non-HPD n=300: info {info}, want {want_info}");
        assert_eq!(info, want_info as i32);
        p.free(d);
    }

    /// An illegal address is a `Fault` named CUDA_ERROR_ILLEGAL_ADDRESS. It poisons the
    /// primary context for the whole process, so it runs in a child process of this test
    /// binary, never beside the other device tests.
    #[test]
    fn device_illegal_address_is_a_fault() {
        if std::env::var_os("CLHIP_CUDA_FAULT_CHILD").is_some() {
            let Some(mut p) = gpu_or_skip("device_illegal_address_is_a_fault") else {
                return;
            };
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
        if gpu_or_skip("device_illegal_address_is_a_fault").is_none() {
            return;
        }
        let exe = std::env::current_exe().expect("test binary path");
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "runtimes::cuda::tests::device_illegal_address_is_a_fault",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CLHIP_CUDA_FAULT_CHILD", "1")
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        eprintln!("{text}");
        assert!(out.status.success(), "child failed: {text}");
        assert!(text.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{text}");
    }
}
