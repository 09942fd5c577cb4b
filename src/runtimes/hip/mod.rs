//! The `hip` participant (AMD ROCm): libamdhip64, hiprtc, rocBLAS, rocSOLVER, loaded at run
//! time through [`ffi`].
//!
//! The structure and semantics are cuda.rs's: the device made current on every call
//! (hipSetDevice: the current device is per thread), one stream, one event, one module of
//! `kernels/*.hip` compiled by hiprtc for the device's exact gcnArchName, rocBLAS/rocSOLVER
//! handles created on first use. A missing optional library (hiprtc, rocBLAS, rocSOLVER) or an
//! absent optional symbol (pinned, VMM) takes away only what needs it, as `unsupported` naming
//! what is missing.
//!
//! STATUS: loading, version/ABI gating, the symbol check, device discovery and `open`'s
//! refusal on a machine without a device are tested (tests/hip_no_device.rs, against Debian's
//! HIP 5.2). The device participant below (allocations of every kind, hipMemcpy, the import of
//! OpenCL memory through HSA's dma-buf export, IPC handles, external semaphores, hiprtc kernels,
//! rocBLAS cgemm, rocSOLVER cpotrf, sticky faults) is written against the headers and clr's
//! sources but has NOT run on AMD hardware: no AMD GPU has been reachable.

pub mod ffi;
pub mod install;

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use num_complex::Complex32;

use crate::model::{Api, ApiError, CaseError, Phase};
use crate::model::{Transpose, Uplo};
use crate::runtimes::PeerPtr;
use crate::runtimes::device::{
    AllocKind, DeviceAlloc, DeviceInfo, DeviceRuntime, ExportHandle, IpcHandle,
};
use crate::runtimes::gpu::{self, BLOCK, GpuCore, Kernel, Kernels, kernel_source};
use crate::runtimes::locate::hip_version;
use crate::runtimes::text::{normalise_pci_bus_id, uuid_string as uuid_text};

use ffi::{
    BlasFns, Group, Hip, HsaFns, LoadError, OptLib, RtcFns, SolverFns, c_buf_string, hipError_t,
    hipEvent_t, hipFunction_t, hipModule_t, hipStream_t, hipSuccess, hiprtcProgram, hiprtcResult,
    hsa_status_t, rocblas_float_complex, rocblas_handle, rocblas_status,
};

fn api_error(hip: &Hip, call: &str, rc: hipError_t, detail: String) -> ApiError {
    ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: rc as i64,
        name: hip.error_name(rc),
        detail,
    }
}

fn check(hip: &Hip, call: &str, rc: hipError_t) -> Result<(), ApiError> {
    if rc == hipSuccess {
        Ok(())
    } else {
        Err(api_error(hip, call, rc, String::new()))
    }
}

/// A symbol this code needs that the loaded library lacks: `unsupported`, naming both.
fn lacks(hip: &Hip, name: &str) -> CaseError {
    CaseError::unsupported(format!(
        "{} (HIP {}) lacks {name}",
        hip.path,
        hip_version(hip.version.raw)
    ))
}

/// Open libamdhip64 and refuse, naming every absent symbol, if a core one is missing.
pub fn load(rocm_path: Option<&Path>) -> Result<Hip, CaseError> {
    let hip = Hip::load(rocm_path).map_err(|e| match e {
        LoadError::NotFound(_) => CaseError::unsupported(e.to_string()),
        LoadError::Unusable { .. } => CaseError::unsupported(e.to_string()),
    })?;
    let core = hip.missing_in(Group::Core);
    if !core.is_empty() {
        return Err(CaseError::unsupported(format!(
            "{} (HIP {}) lacks {}",
            hip.path,
            hip_version(hip.version.raw),
            core.join(", ")
        )));
    }
    Ok(hip)
}

/// hipGetDeviceCount, with a refusal (hipErrorNoDevice on a machine without GPU) as
/// `Unsupported` carrying the call and its code.
fn device_count(hip: &Hip) -> Result<usize, CaseError> {
    hip.device_count().map_err(|rc| CaseError::Unsupported {
        reason: "no HIP device".into(),
        error: Some(api_error(hip, "hipGetDeviceCount", rc, hip.path.clone())),
    })
}

/// gcnArchName through the generation's hipGetDeviceProperties (5.x) /
/// hipGetDevicePropertiesR0600 (6.0+), into a buffer larger than either struct.
fn gcn_arch_name(hip: &Hip, ordinal: i32) -> Result<String, CaseError> {
    let (symbol, offset) = hip.abi.device_props();
    let f = match symbol {
        "hipGetDeviceProperties" => hip.fns.hipGetDeviceProperties,
        _ => hip.fns.hipGetDevicePropertiesR0600,
    }
    .ok_or_else(|| lacks(hip, symbol))?;
    // u64 elements: 8-byte alignment, as the struct has.
    let mut buf = vec![0u64; ffi::DEVICE_PROP_BUFFER / 8];
    // SAFETY: the buffer is larger than every known hipDeviceProp_t layout (1472 bytes at most).
    let rc = unsafe { f(buf.as_mut_ptr().cast(), ordinal) };
    check(hip, symbol, rc).map_err(|e| CaseError::Unsupported {
        reason: "HIP device properties".into(),
        error: Some(e),
    })?;
    // SAFETY: viewing the initialised u64 buffer as bytes.
    let bytes: &[c_char] =
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), ffi::DEVICE_PROP_BUFFER) };
    Ok(c_buf_string(&bytes[offset..offset + 256]))
}

fn describe(
    hip: &Hip,
    ordinal: usize,
    blas: &str,
    solver: &str,
    compiler: &str,
) -> Result<DeviceInfo, CaseError> {
    let dev = i32::try_from(ordinal).map_err(|_| CaseError::unsupported("ordinal too large"))?;
    let refused = |what: &str, e: ApiError| CaseError::Unsupported {
        reason: what.to_string(),
        error: Some(e),
    };
    let mut name = [0 as c_char; 256];
    let f = hip
        .fns
        .hipDeviceGetName
        .ok_or_else(|| lacks(hip, "hipDeviceGetName"))?;
    // SAFETY: the buffer's length is passed.
    check(hip, "hipDeviceGetName", unsafe {
        f(name.as_mut_ptr(), 256, dev)
    })
    .map_err(|e| refused("HIP device name", e))?;
    let mut bus = [0 as c_char; 64];
    let f = hip
        .fns
        .hipDeviceGetPCIBusId
        .ok_or_else(|| lacks(hip, "hipDeviceGetPCIBusId"))?;
    // SAFETY: the buffer's length is passed.
    check(hip, "hipDeviceGetPCIBusId", unsafe {
        f(bus.as_mut_ptr(), 64, dev)
    })
    .map_err(|e| refused("HIP PCI bus id", e))?;
    let bus = c_buf_string(&bus);
    let mut uuid = ffi::hipUUID::default();
    let f = hip
        .fns
        .hipDeviceGetUuid
        .ok_or_else(|| lacks(hip, "hipDeviceGetUuid"))?;
    // SAFETY: live out-parameter.
    check(hip, "hipDeviceGetUuid", unsafe { f(&mut uuid, dev) })
        .map_err(|e| refused("HIP device UUID", e))?;
    let uuid_bytes: Vec<u8> = uuid.bytes.iter().map(|&b| b as u8).collect();
    let driver = hip.driver_version().map(hip_version).unwrap_or_default();
    let module = std::fs::read_to_string("/sys/module/amdgpu/version").unwrap_or_default();
    Ok(DeviceInfo {
        ordinal,
        name: c_buf_string(&name),
        arch: gcn_arch_name(hip, dev)?,
        uuid: uuid_text(&uuid_bytes),
        pci_bus_id: normalise_pci_bus_id(&bus).unwrap_or(bus),
        driver_version: match module.trim() {
            "" => driver,
            m => format!("{driver} (amdgpu {m})"),
        },
        runtime_version: format!(
            "{} ({:?}, {})",
            hip_version(hip.version.raw),
            hip.abi,
            hip.path
        ),
        blas: blas.to_string(),
        solver: solver.to_string(),
        compiler: compiler.to_string(),
    })
}

/// `rocBLAS 4.2.0... (path)`, or why it is unavailable (`unavailable: mixed ROCm install: ..`
/// among the reasons), each from the install of `hip`.
pub fn library_versions(hip: &Hip) -> (String, String, String) {
    let blas = match ffi::open_rocblas(hip) {
        Ok(l) => match l.fns.rocblas_get_version_string {
            Some(f) => format!("rocBLAS {} ({})", ffi::version_string(f), l.path),
            None => format!("rocBLAS ? ({} lacks rocblas_get_version_string)", l.path),
        },
        Err(e) => format!("unavailable: {e}"),
    };
    let solver = match ffi::open_rocsolver(hip) {
        Ok(l) => match l.fns.rocsolver_get_version_string {
            Some(f) => format!("rocSOLVER {} ({})", ffi::version_string(f), l.path),
            None => format!(
                "rocSOLVER ? ({} lacks rocsolver_get_version_string)",
                l.path
            ),
        },
        Err(e) => format!("unavailable: {e}"),
    };
    let compiler = match ffi::open_hiprtc(hip) {
        Ok(l) => {
            let (mut a, mut b) = (0, 0);
            match l.fns.hiprtcVersion {
                // SAFETY: live out-parameters.
                Some(f) if unsafe { f(&mut a, &mut b) } == 0 => {
                    format!("hiprtc {a}.{b} ({})", l.path)
                }
                _ => format!("hiprtc ? ({})", l.path),
            }
        }
        Err(e) => format!("unavailable: {e}"),
    };
    (blas, solver, compiler)
}

/// hiprtc, rocBLAS, rocSOLVER and the HSA runtime as found in `hip`'s install, one line each
/// (`rocBLAS: <path>` or `rocBLAS: <why not>`), for the probe. Opening loads them (their
/// initialisers need no device) and calls nothing in them.
pub fn install_libraries(hip: &Hip) -> Vec<String> {
    let line = |what: &str, r: Result<String, String>| match r {
        Ok(path) => format!("{what}: {path}"),
        Err(e) => format!("{what}: {e}"),
    };
    vec![
        line("hiprtc", ffi::open_hiprtc(hip).map(|l| l.path)),
        line("rocBLAS", ffi::open_rocblas(hip).map(|l| l.path)),
        line("rocSOLVER", ffi::open_rocsolver(hip).map(|l| l.path)),
        line("HSA", ffi::open_hsa(hip).map(|l| l.path)),
    ]
}

/// Every HIP device with what the probe and the fingerprint record, or why none can be listed
/// (library absent, a core symbol absent, hipGetDeviceCount refused). Never panics.
pub fn discover(rocm_path: Option<&Path>) -> Result<Vec<DeviceInfo>, String> {
    let reason = |e: CaseError| match e {
        CaseError::Unsupported {
            error: Some(err), ..
        } => err.to_string(),
        CaseError::Unsupported { reason, .. } => reason,
        other => format!("{other:?}"),
    };
    let hip = load(rocm_path).map_err(reason)?;
    let count = device_count(&hip).map_err(reason)?;
    let (blas, solver, compiler) = library_versions(&hip);
    (0..count)
        .map(|i| {
            describe(&hip, i, &blas, &solver, &compiler)
                .map_err(|e| format!("device {i}: {}", reason(e)))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Status codes -> ApiError for the device participant

/// `rc` as `Result`, with a detail only built on failure.
fn checked(
    hip: &Hip,
    call: &str,
    rc: hipError_t,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    if rc == hipSuccess {
        Ok(())
    } else {
        Err(api_error(hip, call, rc, detail()))
    }
}

/// A symbol of an optional group (pinned, VMM) that this libamdhip64 does not export.
fn absent(hip: &Hip, name: &str) -> ApiError {
    ApiError {
        api: Api::Hip,
        call: name.to_string(),
        code: 0,
        name: "SYMBOL_NOT_FOUND".into(),
        detail: format!("{} (HIP {})", hip.path, hip_version(hip.version.raw)),
    }
}

/// `hip_call!(hip, hipMalloc(&mut p, n))`, or with a detail `hip_call!(hip, f(..), "{n} B")`:
/// call the libamdhip64 function through the table and turn its hipError_t into
/// `Result<(), ApiError>` named after it (an absent symbol is `SYMBOL_NOT_FOUND`). The call is
/// unsafe; the `unsafe` block and its SAFETY comment are the caller's.
macro_rules! hip_call {
    ($hip:expr, $f:ident($($a:expr),* $(,)?)) => {
        hip_call!(@ $hip, $f, String::new, $($a),*)
    };
    ($hip:expr, $f:ident($($a:expr),* $(,)?), $($d:tt)+) => {
        hip_call!(@ $hip, $f, || format!($($d)+), $($a),*)
    };
    (@ $hip:expr, $f:ident, $detail:expr, $($a:expr),*) => {{
        let hip: &Hip = $hip;
        match hip.fns.$f {
            Some(f) => checked(hip, stringify!($f), f($($a),*), $detail),
            None => Err(absent(hip, stringify!($f))),
        }
    }};
}

/// A rocBLAS / rocSOLVER status (rocSOLVER returns rocblas_status) as an [`ApiError`].
fn blas_check(
    call: &str,
    s: rocblas_status,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    if s == ffi::rocblas_status_success {
        return Ok(());
    }
    Err(ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: s as i64,
        name: ffi::rocblas_status_name(s).to_string(),
        detail: detail(),
    })
}

/// The status of a rocBLAS / rocSOLVER operation as the case's outcome. Two statuses of
/// ROCm/rocBLAS rocm-5.7.0 and later are refusals with a reason of their own:
/// rocblas_status_arch_mismatch (15; what rocBLAS makes of hipErrorNoBinaryForGpu, i.e. the
/// library has no code objects for this device) reads `<lib> has no kernels for this
/// architecture (gfx908)`, with the device's arch without its feature flags, and
/// rocblas_status_excluded_from_build (14) says the function was built out. Anything else is a
/// refusal while running (a device fault where the code says so).
fn blas_outcome(
    lib: &str,
    call: &str,
    s: rocblas_status,
    arch: &str,
    detail: impl FnOnce() -> String,
) -> Result<(), CaseError> {
    let Err(e) = blas_check(call, s, detail) else {
        return Ok(());
    };
    let arch = arch.split(':').next().unwrap_or(arch);
    let reason = match s {
        ffi::rocblas_status_arch_mismatch => {
            format!("{lib} has no kernels for this architecture ({arch})")
        }
        ffi::rocblas_status_excluded_from_build => format!("{lib} was built without {call}"),
        _ => return Err(e).running(),
    };
    Err(CaseError::Unsupported {
        reason,
        error: Some(e),
    })
}

fn rtc_check(
    rtc: &OptLib<RtcFns>,
    call: &str,
    r: hiprtcResult,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    if r == ffi::HIPRTC_SUCCESS {
        return Ok(());
    }
    // The canonical enum name; hiprtcGetErrorString's text, where it differs, goes in detail.
    let text = rtc
        .fns
        .hiprtcGetErrorString
        // SAFETY: returns a static NUL-terminated string (or null).
        .and_then(|f| unsafe { ffi::c_string(f(r)) })
        .unwrap_or_default();
    let name = ffi::hiprtc_result_name(r);
    let mut detail = detail();
    if !text.is_empty() && text != name {
        detail = if detail.is_empty() {
            text
        } else {
            format!("{text}: {detail}")
        };
    }
    Err(ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: r as i64,
        name,
        detail,
    })
}

/// A function of an optional library whose table was checked complete at open; `None` here
/// would be a bug in that check, reported rather than panicking.
fn need<T>(f: Option<T>, lib: &str, name: &str) -> Result<T, CaseError> {
    f.ok_or_else(|| CaseError::unsupported(format!("{lib} lacks {name}")))
}

/// A size the 32-bit rocBLAS/rocSOLVER interfaces cannot take: refused up front.
fn int_arg(what: &str, v: usize) -> Result<c_int, CaseError> {
    c_int::try_from(v)
        .map_err(|_| CaseError::unsupported(format!("{what} = {v} exceeds the 32-bit int API")))
}

// ---------------------------------------------------------------------------------------------
// hiprtc

/// Compile `source` for `arch` (the full gcnArchName, e.g. `gfx90a:sramecc+:xnack-`, which
/// hiprtc takes as a target id) to a code object for hipModuleLoadData.
fn compile(rtc: &OptLib<RtcFns>, source: &str, arch: &str) -> Result<Vec<u8>, CaseError> {
    let lib = rtc.path.as_str();
    let src =
        CString::new(source).map_err(|_| CaseError::unsupported("kernel source has a NUL"))?;
    let create = need(rtc.fns.hiprtcCreateProgram, lib, "hiprtcCreateProgram")?;
    let destroy = need(rtc.fns.hiprtcDestroyProgram, lib, "hiprtcDestroyProgram")?;
    let mut prog: hiprtcProgram = null_mut();
    let name = c"clhip.hip".as_ptr();
    // SAFETY: NUL-terminated source and name, no headers.
    let r = unsafe { create(&mut prog, src.as_ptr(), name, 0, null(), null()) };
    rtc_check(rtc, "hiprtcCreateProgram", r, String::new).running()?;
    let result = compile_program(rtc, prog, arch);
    // SAFETY: created above, destroyed once.
    unsafe { destroy(&mut prog) };
    result
}

fn compile_program(
    rtc: &OptLib<RtcFns>,
    prog: hiprtcProgram,
    arch: &str,
) -> Result<Vec<u8>, CaseError> {
    let lib = rtc.path.as_str();
    let compile = need(rtc.fns.hiprtcCompileProgram, lib, "hiprtcCompileProgram")?;
    let code_size = need(rtc.fns.hiprtcGetCodeSize, lib, "hiprtcGetCodeSize")?;
    let get_code = need(rtc.fns.hiprtcGetCode, lib, "hiprtcGetCode")?;
    let opts = [CString::new(format!("--offload-arch={arch}"))
        .map_err(|_| CaseError::unsupported("arch name has a NUL"))?];
    let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `ptrs` holds `opts.len()` live NUL-terminated strings.
    let r = unsafe { compile(prog, ptrs.len() as c_int, ptrs.as_ptr()) };
    if let Err(mut e) = rtc_check(rtc, "hiprtcCompileProgram", r, String::new) {
        let log = program_log(rtc, prog);
        e.detail = format!(
            "{arch}: {}",
            log.lines().take(12).collect::<Vec<_>>().join(" | ")
        );
        // A hiprtc that does not know this target refuses the option: the platform cannot run
        // here. Anything else is a bug in kernels/*.hip and must be loud.
        return Err(if r == ffi::HIPRTC_ERROR_INVALID_OPTION {
            CaseError::Unsupported {
                reason: format!("hiprtc cannot compile for {arch}"),
                error: Some(e),
            }
        } else {
            CaseError::Broken(e)
        });
    }
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    let r = unsafe { code_size(prog, &mut size) };
    rtc_check(rtc, "hiprtcGetCodeSize", r, String::new).running()?;
    let mut code = vec![0u8; size];
    // SAFETY: `code` holds the `size` bytes hiprtcGetCodeSize asked for.
    let r = unsafe { get_code(prog, code.as_mut_ptr().cast()) };
    rtc_check(rtc, "hiprtcGetCode", r, String::new).running()?;
    Ok(code)
}

fn program_log(rtc: &OptLib<RtcFns>, prog: hiprtcProgram) -> String {
    let (Some(log_size), Some(get_log)) =
        (rtc.fns.hiprtcGetProgramLogSize, rtc.fns.hiprtcGetProgramLog)
    else {
        return String::new();
    };
    let mut size = 0usize;
    // SAFETY: live out-parameter.
    if unsafe { log_size(prog, &mut size) } != ffi::HIPRTC_SUCCESS {
        return String::new();
    }
    let mut log = vec![0 as c_char; size.max(1)];
    // SAFETY: `log` holds the `size` bytes asked for.
    match unsafe { get_log(prog, log.as_mut_ptr()) } {
        ffi::HIPRTC_SUCCESS => c_buf_string(&log),
        r => ffi::hiprtc_result_name(r),
    }
}

// ---------------------------------------------------------------------------------------------
// rocBLAS and rocSOLVER, created on first use

/// A rocBLAS handle on the peer's stream. Created on the first cgemm or cpotrf (rocSOLVER works
/// through a rocBLAS handle): a machine without rocBLAS loses gemm and cholesky, not the
/// participant.
struct BlasHandle {
    handle: rocblas_handle,
    lib: OptLib<BlasFns>,
}

impl BlasHandle {
    fn create(hip: &Hip, stream: hipStream_t) -> Result<BlasHandle, CaseError> {
        let lib = open_blas(hip)?;
        let create = need(
            lib.fns.rocblas_create_handle,
            &lib.path,
            "rocblas_create_handle",
        )?;
        let mut handle: rocblas_handle = null_mut();
        // SAFETY: live out-parameter; the peer's device is current on this thread.
        blas_check(
            "rocblas_create_handle",
            unsafe { create(&mut handle) },
            String::new,
        )
        .refused("rocBLAS initialisation")?;
        let h = BlasHandle { handle, lib };
        let set_stream = need(
            h.lib.fns.rocblas_set_stream,
            &h.lib.path,
            "rocblas_set_stream",
        )?;
        let set_mode = need(
            h.lib.fns.rocblas_set_pointer_mode,
            &h.lib.path,
            "rocblas_set_pointer_mode",
        )?;
        // SAFETY: live handle and stream. Host pointer mode: alpha and beta are read from host
        // memory during the call.
        unsafe {
            blas_check(
                "rocblas_set_stream",
                set_stream(h.handle, stream),
                String::new,
            )
            .running()?;
            let host = ffi::rocblas_pointer_mode_host;
            blas_check(
                "rocblas_set_pointer_mode",
                set_mode(h.handle, host),
                String::new,
            )
            .running()?;
        }
        Ok(h)
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        if let Some(destroy) = self.lib.fns.rocblas_destroy_handle {
            // SAFETY: created by rocblas_create_handle, destroyed once, before the library is
            // released.
            unsafe { destroy(self.handle) };
        }
    }
}

/// librocblas of `hip`'s install with every symbol checked: what the gemm cells (and, through
/// its handle, the cholesky ones) get, or `unsupported` naming the library and what it lacks,
/// or the mixed install.
pub fn open_blas(hip: &Hip) -> Result<OptLib<BlasFns>, CaseError> {
    let lib = ffi::open_rocblas(hip).map_err(CaseError::unsupported)?;
    if !lib.missing.is_empty() {
        return Err(CaseError::unsupported(format!(
            "{} lacks {}",
            lib.path,
            lib.missing.join(", ")
        )));
    }
    Ok(lib)
}

/// libhiprtc (or libamdhip64's own hiprtc) of `hip`'s install with every symbol checked: what
/// the kernel operations need, or `unsupported` naming what is missing or the mixed install.
pub fn open_rtc(hip: &Hip) -> Result<OptLib<RtcFns>, CaseError> {
    let lib = ffi::open_hiprtc(hip).map_err(CaseError::unsupported)?;
    if !lib.missing.is_empty() {
        return Err(CaseError::unsupported(format!(
            "{} lacks {}",
            lib.path,
            lib.missing.join(", ")
        )));
    }
    Ok(lib)
}

/// librocsolver of `hip`'s install, opened on the first cpotrf with every symbol checked.
pub fn open_solver(hip: &Hip) -> Result<OptLib<SolverFns>, CaseError> {
    let lib = ffi::open_rocsolver(hip).map_err(CaseError::unsupported)?;
    if !lib.missing.is_empty() {
        return Err(CaseError::unsupported(format!(
            "{} lacks {}",
            lib.path,
            lib.missing.join(", ")
        )));
    }
    Ok(lib)
}

// ---------------------------------------------------------------------------------------------
// The HSA runtime, opened on the first import_cl_memory

/// An HSA status as an [`ApiError`] (api `Hip`: HSA is ROCm's layer under HIP), named after
/// hsa.h / hsa_ext_amd.h.
fn hsa_check(call: &str, s: hsa_status_t, detail: impl FnOnce() -> String) -> Result<(), ApiError> {
    if s == 0 {
        return Ok(());
    }
    Err(ApiError {
        api: Api::Hip,
        call: call.to_string(),
        code: s as i64,
        name: ffi::hsa_status_name(s),
        detail: detail(),
    })
}

/// The HSA symbols import_cl_memory calls; hsa_shut_down is used where present.
const HSA_EXPORT_SYMBOLS: [&str; 3] = [
    "hsa_init",
    "hsa_amd_portable_export_dmabuf",
    "hsa_amd_portable_close_dmabuf",
];

/// libhsa-runtime64 with the dma-buf export, or `unsupported` naming the library and what it
/// lacks: the export pair is in ROCR-Runtime's hsa_ext_amd.h from rocm-5.6.0 (Debian's HSA of
/// ROCm 5.2 has neither). Needs no device: nothing is called.
fn open_hsa_export(hip: &Hip) -> Result<OptLib<HsaFns>, CaseError> {
    let lib = ffi::open_hsa(hip).map_err(CaseError::unsupported)?;
    let lacking: Vec<&str> = HSA_EXPORT_SYMBOLS
        .into_iter()
        .filter(|n| !lib.fns.has(n))
        .collect();
    if !lacking.is_empty() {
        return Err(CaseError::unsupported(format!(
            "{} lacks {} (the dma-buf export of ROCm 5.6 and later)",
            lib.path,
            lacking.join(", ")
        )));
    }
    Ok(lib)
}

/// The HSA runtime with one hsa_init of this peer's own. hsa_init "increases the reference
/// counter associated with the HSA runtime for the current process" and hsa_shut_down decreases
/// it (ROCR-Runtime hsa.h); HIP already holds one, so this only takes another reference, which
/// Drop gives back.
struct HsaRuntime {
    lib: OptLib<HsaFns>,
}

impl HsaRuntime {
    fn open(hip: &Hip) -> Result<HsaRuntime, CaseError> {
        let lib = open_hsa_export(hip)?;
        let init = need(lib.fns.hsa_init, &lib.path, "hsa_init")?;
        // SAFETY: `hsa_status_t hsa_init(void)`; reference-counted, safe to call again.
        let s = unsafe { init() };
        hsa_check("hsa_init", s, || lib.path.clone()).refused("initialising the HSA runtime")?;
        Ok(HsaRuntime { lib })
    }
}

impl Drop for HsaRuntime {
    fn drop(&mut self) {
        if let Some(shut_down) = self.lib.fns.hsa_shut_down {
            // SAFETY: balances the one successful hsa_init of `open`; HIP's own reference keeps
            // the runtime up.
            unsafe { shut_down() };
        }
    }
}

/// A temporary hipMalloc allocation, freed on every path out of the scope that made it.
struct DeviceBuffer {
    ptr: *mut c_void,
    free: unsafe extern "C" fn(*mut c_void) -> hipError_t,
}

impl DeviceBuffer {
    fn new(hip: &Hip, bytes: usize, what: &str) -> Result<DeviceBuffer, CaseError> {
        let mut ptr: *mut c_void = null_mut();
        // SAFETY: live out-parameter.
        unsafe { hip_call!(hip, hipMalloc(&mut ptr, bytes.max(1)), "{bytes} bytes") }
            .refused(what)?;
        let free = need(hip.fns.hipFree, &hip.path, "hipFree")?;
        Ok(DeviceBuffer { ptr, free })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by hipMalloc on the current device, freed once; the peer that made
        // it (and its library) outlives this scope.
        unsafe { (self.free)(self.ptr) };
    }
}

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
    pub fn open(ordinal: usize, rocm_path: Option<&Path>) -> Result<HipPeer, CaseError> {
        let hip = load(rocm_path)?;
        let count = device_count(&hip)?;
        if ordinal >= count {
            return Err(CaseError::unsupported(format!(
                "no HIP device {ordinal} ({count} found by {})",
                hip.path
            )));
        }
        let (blas, solver, compiler) = library_versions(&hip);
        let info = describe(&hip, ordinal, &blas, &solver, &compiler)?;
        let dev = ordinal as c_int; // describe checked it fits
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
        // stream, ordered after the null stream, as cuda.rs's flags 0.
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
        let code = compile(&rtc, &kernel_source(), &arch);
        peer._rtc = Some(rtc);
        let code = code?;
        // SAFETY: `code` is a complete code object from hiprtc, alive for the call.
        unsafe {
            hip_call!(
                &peer.hip,
                hipModuleLoadData(&mut peer.module, code.as_ptr().cast()),
                "{arch}"
            )
        }
        .refused("loading the hiprtc-compiled module")?;
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

    fn kernels(&self) -> Result<&Kernels<hipFunction_t>, CaseError> {
        self.kernels.as_ref().map_err(Clone::clone)
    }

    fn sync(&self) -> Result<(), CaseError> {
        // SAFETY: the stream is live.
        unsafe { hip_call!(&self.hip, hipStreamSynchronize(self.stream)) }.running()
    }

    fn blas(&mut self) -> Result<&BlasHandle, CaseError> {
        let (stream, hip) = (self.stream, &self.hip);
        match self
            .blas
            .get_or_insert_with(|| BlasHandle::create(hip, stream))
        {
            Ok(h) => Ok(h),
            Err(e) => Err(e.clone()),
        }
    }

    /// The rocSOLVER table and the rocBLAS handle it works through.
    fn solver(&mut self) -> Result<(ffi::SolverFns, rocblas_handle), CaseError> {
        let hip = &self.hip;
        let fns = match self.solver.get_or_insert_with(|| open_solver(hip)) {
            Ok(l) => l.fns,
            Err(e) => return Err(e.clone()),
        };
        Ok((fns, self.blas()?.handle))
    }

    /// The HSA table, its library opened and initialised on first use (a failure is kept
    /// and given again, as rocBLAS's).
    fn hsa(&mut self) -> Result<(HsaFns, String), CaseError> {
        let hip = &self.hip;
        match self.hsa.get_or_insert_with(|| HsaRuntime::open(hip)) {
            Ok(h) => Ok((h.lib.fns, h.lib.path.clone())),
            Err(e) => Err(e.clone()),
        }
    }

    /// hipImportExternalMemory of a dma-buf fd of `size` bytes (the export's offset plus the
    /// bytes wanted), then hipExternalMemoryGetMappedBuffer of `bytes` at `offset`, each in the
    /// generation's descriptor layout (6.0 appended `reserved[16]`). Returns the mapped address
    /// and the external-memory object; a refused mapping destroys the import.
    fn import_dmabuf(
        &self,
        fd: c_int,
        offset: u64,
        bytes: usize,
    ) -> Result<(usize, ffi::hipExternalMemory_t), CaseError> {
        let hip = &self.hip;
        let reserved = hip.abi.descriptor_has_reserved();
        let size = offset
            .checked_add(bytes as u64)
            .ok_or_else(|| CaseError::unsupported("dma-buf offset + size overflows"))?;
        let handle = ffi::hipExternalHandle::from_fd(fd);
        let ty = ffi::hipExternalMemoryHandleTypeOpaqueFd;
        let desc = ffi::hipExternalMemoryHandleDesc {
            type_: ty,
            handle,
            size,
            flags: 0,
            reserved: [0; 16],
        };
        let desc_v5 = ffi::hipExternalMemoryHandleDescV5 {
            type_: ty,
            handle,
            size,
            flags: 0,
        };
        let desc_ptr: *const c_void = if reserved {
            (&raw const desc).cast()
        } else {
            (&raw const desc_v5).cast()
        };
        let mut ext: ffi::hipExternalMemory_t = null_mut();
        // SAFETY: live out-parameter; the descriptor is the layout this library reads, and for
        // the opaque-fd type only `fd` of the union is read. clr's hipImportExternalMemory
        // (hipamd/src/hip_memory.cpp) keeps the fd in an amd::ExternalBuffer, whose device
        // memory is mapped by hsa_amd_interop_map_buffer (rocclr/device/rocm/rocmemory.cpp
        // Memory::interopMapBuffer); neither closes it.
        unsafe {
            hip_call!(
                hip,
                hipImportExternalMemory(&mut ext, desc_ptr),
                "dma-buf fd {fd}, {size} bytes"
            )
        }
        .refused("hipImportExternalMemory refused the dma-buf")?;
        let buf = ffi::hipExternalMemoryBufferDesc {
            offset,
            size: bytes as u64,
            flags: 0,
            reserved: [0; 16],
        };
        let buf_v5 = ffi::hipExternalMemoryBufferDescV5 {
            offset,
            size: bytes as u64,
            flags: 0,
        };
        let buf_ptr: *const c_void = if reserved {
            (&raw const buf).cast()
        } else {
            (&raw const buf_v5).cast()
        };
        let mut p: *mut c_void = null_mut();
        // SAFETY: live out-parameter, a live import and a descriptor of the right layout.
        let mapped = unsafe {
            hip_call!(
                hip,
                hipExternalMemoryGetMappedBuffer(&mut p, ext, buf_ptr),
                "{bytes} bytes at offset {offset}"
            )
        };
        if let Err(e) = mapped {
            // SAFETY: the import made above, destroyed once.
            let _ = unsafe { hip_call!(hip, hipDestroyExternalMemory(ext)) };
            return Err(e).refused("hipExternalMemoryGetMappedBuffer refused the import");
        }
        Ok((p as usize, ext))
    }

    /// hipMemCreate with a POSIX-fd shareable handle (a dma-buf on ROCm), in the generation's
    /// hipMemAllocationProp layout, then reserve, map and open for read/write by this device.
    /// Any step refused undoes the ones before it.
    fn alloc_exportable(&mut self, bytes: usize, len: usize) -> Result<DeviceAlloc, CaseError> {
        let missing = self.hip.missing_in(Group::Vmm);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        if self.hip.version.has_vmm_attribute() {
            // 5.2 has no such attribute (it is 89 from rocm-5.3.0): there hipMemCreate says.
            let attr = ffi::hipDeviceAttributeVirtualMemoryManagementSupported;
            let mut vmm: c_int = 0;
            // SAFETY: live out-parameter.
            unsafe {
                hip_call!(
                    &self.hip,
                    hipDeviceGetAttribute(&mut vmm, attr, self.dev),
                    "VirtualMemoryManagementSupported"
                )
            }
            .refused("VMM support query")?;
            if vmm == 0 {
                return Err(CaseError::unsupported(
                    "device has no virtual memory management",
                ));
            }
        }
        let location = ffi::hipMemLocation {
            type_: ffi::hipMemLocationTypeDevice,
            id: self.dev,
        };
        let prop = ffi::hipMemAllocationProp {
            type_: ffi::hipMemAllocationTypePinned,
            requestedHandleType: ffi::hipMemHandleTypePosixFileDescriptor,
            location,
            win32HandleMetaData: null_mut(),
            allocFlags: ffi::hipMemAllocFlags::default(),
        };
        let prop_v52 = ffi::hipMemAllocationPropV52 {
            compressionType: 0,
            location,
            requestedHandleType: ffi::hipMemHandleTypePosixFileDescriptor,
            type_: ffi::hipMemAllocationTypePinned,
            usage: 0,
            win32HandleMetaData: null_mut(),
        };
        // The layout this library reads (reordered in 5.3.0).
        let prop_ptr: *const c_void = if self.hip.version.legacy_alloc_prop() {
            (&raw const prop_v52).cast()
        } else {
            (&raw const prop).cast()
        };
        let access = ffi::hipMemAccessDesc {
            location,
            flags: ffi::hipMemAccessFlagsProtReadWrite,
        };
        let minimum = ffi::hipMemAllocationGranularityMinimum;
        let hip = &self.hip;
        let mut gran = 0usize;
        // SAFETY: live out-parameter; `prop_ptr` points at a live struct of the right layout.
        unsafe {
            hip_call!(
                hip,
                hipMemGetAllocationGranularity(&mut gran, prop_ptr, minimum)
            )
        }
        .refused("VMM allocation granularity")?;
        let size = bytes.next_multiple_of(gran.max(1));
        let mut handle: ffi::hipMemGenericAllocationHandle_t = null_mut();
        // SAFETY: live out-parameter and property struct.
        unsafe {
            hip_call!(
                hip,
                hipMemCreate(&mut handle, size, prop_ptr, 0),
                "{size} bytes"
            )
        }
        .refused("hipMemCreate with a POSIX fd handle type")?;
        let (mut va, mut reserved, mut mapped): (*mut c_void, bool, bool) =
            (null_mut(), false, false);
        // SAFETY: each step works on what the previous one made: a reservation of `size`
        // bytes at any address, the `size`-byte allocation mapped at its start, one access
        // descriptor over the mapping.
        let made = unsafe {
            hip_call!(
                hip,
                hipMemAddressReserve(&mut va, size, 0, null_mut(), 0),
                "{size} bytes"
            )
            .inspect(|()| reserved = true)
            .and_then(|()| hip_call!(hip, hipMemMap(va, size, 0, handle, 0)))
            .inspect(|()| mapped = true)
            .and_then(|()| hip_call!(hip, hipMemSetAccess(va, size, &access, 1)))
        };
        if let Err(e) = made {
            // SAFETY: undo exactly the steps that succeeded, in reverse.
            unsafe {
                if mapped {
                    let _ = hip_call!(hip, hipMemUnmap(va, size));
                }
                if reserved {
                    let _ = hip_call!(hip, hipMemAddressFree(va, size));
                }
                let _ = hip_call!(hip, hipMemRelease(handle));
            }
            if e.is_device_fault() {
                return Err(CaseError::Fault(e));
            }
            return Err(CaseError::Unsupported {
                reason: "mapping a hipMemCreate allocation".into(),
                error: Some(e),
            });
        }
        Ok(DeviceAlloc {
            kind: AllocKind::Exportable,
            ptr: PeerPtr {
                addr: va as usize,
                len,
            },
            handle: handle as u64,
            bytes: size,
        })
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
    /// Make the device current on the calling thread: HIP's current device is per thread, and a
    /// test runner or worker may call from a thread other than the one that opened.
    fn bind(&self) -> Result<(), CaseError> {
        // SAFETY: plain call with an ordinal below the device count.
        unsafe { hip_call!(&self.hip, hipSetDevice(self.dev)) }.running()
    }

    fn launch(&self, k: Kernel, threads: u64, args: &mut [*mut c_void]) -> Result<(), CaseError> {
        if threads == 0 {
            return Ok(());
        }
        let (name, f) = (k.name(), self.kernels()?.get(k));
        let grid = gpu::grid(name, threads)?;
        let (s, b) = (self.stream, BLOCK as c_uint);
        let params = args.as_mut_ptr();
        // SAFETY: `f` is from the loaded module; each caller passes exactly its kernel's
        // parameters, which the runtime copies during the call.
        unsafe {
            hip_call!(
                &self.hip,
                hipModuleLaunchKernel(f, grid, 1, 1, b, 1, 1, 0, s, params, null_mut()),
                "{name}"
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

impl DeviceRuntime for HipPeer {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&mut self, kind: AllocKind, len: usize) -> Result<DeviceAlloc, CaseError> {
        self.bind()?;
        let bytes = len.max(1) * size_of::<Complex32>();
        let plain = |addr: usize| DeviceAlloc::new(kind, addr, len, 0);
        let hip = &self.hip;
        match kind {
            AllocKind::Device => {
                let mut p: *mut c_void = null_mut();
                // SAFETY: live out-parameter.
                unsafe { hip_call!(hip, hipMalloc(&mut p, bytes), "{bytes} bytes") }
                    .refused("hipMalloc")?;
                Ok(plain(p as usize))
            }
            AllocKind::PinnedHost => {
                // Portable: pinned for every device; Mapped: mapped into the device's address
                // space (implied on ROCm; said so the intent is explicit). hipExtHostAlloc
                // (optional: same flag values) where this library exports it, else
                // hipHostMalloc, which every released library has.
                let flags = ffi::hipHostMallocPortable | ffi::hipHostMallocMapped;
                let mut p: *mut c_void = null_mut();
                let ext = hip.fns.hipExtHostAlloc.is_some();
                // SAFETY: live out-parameter.
                let r = unsafe {
                    if ext {
                        hip_call!(hip, hipExtHostAlloc(&mut p, bytes, flags), "{bytes} bytes")
                    } else {
                        hip_call!(hip, hipHostMalloc(&mut p, bytes, flags), "{bytes} bytes")
                    }
                };
                r.refused(if ext {
                    "hipExtHostAlloc"
                } else {
                    "hipHostMalloc"
                })?;
                Ok(plain(p as usize))
            }
            AllocKind::Managed => {
                let attr = ffi::hipDeviceAttributeManagedMemory;
                let mut managed: c_int = 0;
                // SAFETY: live out-parameter.
                unsafe {
                    hip_call!(
                        hip,
                        hipDeviceGetAttribute(&mut managed, attr, self.dev),
                        "ManagedMemory"
                    )
                }
                .refused("managed memory query")?;
                if managed == 0 {
                    return Err(CaseError::unsupported("device has no managed memory"));
                }
                // Oversubscribed managed memory can hang the GPU, not only this process:
                // never ask for more than is free on the device now.
                let (mut free, mut total) = (0usize, 0usize);
                // SAFETY: live out-parameters.
                unsafe { hip_call!(hip, hipMemGetInfo(&mut free, &mut total)) }
                    .refused("device memory query")?;
                if bytes > free {
                    return Err(CaseError::unsupported(format!(
                        "managed allocation of {bytes} bytes exceeds the {free} bytes free"
                    )));
                }
                let global = ffi::hipMemAttachGlobal;
                let mut p: *mut c_void = null_mut();
                // SAFETY: live out-parameter.
                unsafe {
                    hip_call!(
                        hip,
                        hipMallocManaged(&mut p, bytes, global),
                        "{bytes} bytes"
                    )
                }
                .refused("hipMallocManaged")?;
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
        let hip = &self.hip;
        let (p, size) = (alloc.ptr.addr as *mut c_void, alloc.bytes);
        // SAFETY: each kind is released by the calls that pair with its allocation, once.
        let freed = unsafe {
            match alloc.kind {
                AllocKind::Device | AllocKind::Managed => hip_call!(hip, hipFree(p)),
                AllocKind::PinnedHost => hip_call!(hip, hipHostFree(p)),
                AllocKind::Exportable => {
                    let handle = alloc.handle as ffi::hipMemGenericAllocationHandle_t;
                    let unmapped = hip_call!(hip, hipMemUnmap(p, size));
                    let unreserved = hip_call!(hip, hipMemAddressFree(p, size));
                    let released = hip_call!(hip, hipMemRelease(handle));
                    unmapped.and(unreserved).and(released)
                }
                // clr's ihipFree (hipamd/src/hip_memory.cpp, rocm-5.6.0 .. Oct 2024) takes a
                // pointer from hipExternalMemoryGetMappedBuffer: an interop object, removed from
                // the pointer map and released (the reference GetMappedBuffer took). Then
                // hipDestroyExternalMemory releases the import's own, and the mapping goes.
                AllocKind::ImportedExternal => {
                    let unmapped = hip_call!(hip, hipFree(p));
                    let ext = alloc.handle as ffi::hipExternalMemory_t;
                    let destroyed = hip_call!(hip, hipDestroyExternalMemory(ext));
                    unmapped.and(destroyed)
                }
                AllocKind::IpcOpened => hip_call!(hip, hipIpcCloseMemHandle(p)),
            }
        };
        // The trait gives free no error channel; a failing free is still worth a line in the
        // worker's stderr (after a fault, every call fails with the sticky error).
        if let Err(e) = freed {
            eprintln!(
                "clhip hip{}: freeing {:?} at {p:?}: {e}",
                self.ordinal, alloc.kind
            );
        }
    }

    fn export_fd(&mut self, alloc: &DeviceAlloc) -> Result<OwnedFd, CaseError> {
        alloc.require(AllocKind::Exportable, "a shareable handle")?;
        self.bind()?;
        let ty = ffi::hipMemHandleTypePosixFileDescriptor;
        let handle = alloc.handle as ffi::hipMemGenericAllocationHandle_t;
        let mut fd: c_int = -1;
        let out: *mut c_void = (&raw mut fd).cast();
        // SAFETY: for the POSIX fd handle type the out-parameter is an int.
        unsafe { hip_call!(&self.hip, hipMemExportToShareableHandle(out, handle, ty, 0)) }
            .refused("exporting a POSIX fd")?;
        if fd < 0 {
            return Err(CaseError::unsupported(
                "hipMemExportToShareableHandle gave no fd",
            ));
        }
        // SAFETY: a fresh fd from the runtime, owned by the caller from now on.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// hipMemExportToShareableHandle with hipMemHandleTypePosixFileDescriptor gives a dma-buf
    /// fd on ROCm: for cl_khr_external_memory_dma_buf.
    fn export_handle(&self) -> ExportHandle {
        ExportHandle::DmaBuf
    }

    /// hipMemcpy with hipMemcpyDefault: the runtime infers the direction from the pointers.
    /// clr's ihipMemcpy (hipamd/src/hip_memory.cpp) looks both up in its own pointer map; when
    /// it knows neither (OpenCL's SVM is in libamdocl64's map, not libamdhip64's) it copies on
    /// the host (ihipHtoHMemcpy: finish the null stream, then memcpy), which works for
    /// host-visible memory and faults the process for memory the CPU cannot reach. That is
    /// what is under test. hipMemcpy runs on the null stream, which this peer's blocking stream
    /// is ordered with.
    fn memcpy(&mut self, dst: usize, src: usize, bytes: usize) -> Result<(), CaseError> {
        self.bind()?;
        let (d, s, kind) = (
            dst as *mut c_void,
            src as *const c_void,
            ffi::hipMemcpyDefault,
        );
        // SAFETY: the runtime checks the addresses against what it knows; what it does with
        // addresses it does not know is the behaviour under test.
        unsafe {
            hip_call!(
                &self.hip,
                hipMemcpy(d, s, bytes, kind),
                "{bytes} B {src:#x} -> {dst:#x}"
            )
        }
        .refused("hipMemcpy refused the addresses (one may be memory HIP did not allocate or map)")
    }

    /// OpenCL's allocation into HIP: hsa_amd_portable_export_dmabuf (the HSA runtime both
    /// OpenCL and HIP run on) gives a dma-buf fd and the allocation's offset in it;
    /// hipImportExternalMemory of that fd (opaque-fd type, size offset + bytes), then
    /// hipExternalMemoryGetMappedBuffer of `bytes` at the offset; then the fd is closed with
    /// hsa_amd_portable_close_dmabuf. The import does not take the fd: clr's
    /// amd::ExternalMemory (rocclr/platform/external_memory.hpp) only stores it, and
    /// Memory::interopMapBuffer (rocclr/device/rocm/rocmemory.cpp) hands it to
    /// hsa_amd_interop_map_buffer, which registers the buffer with the kernel driver
    /// (ROCR-Runtime Runtime::InteropMap) and does not close it; the GL interop path beside it
    /// closes its own fd right after mapping, and hsa_ext_amd.h says of the export "the handle
    /// is not required to remain open for the lifetime of imported mappings".
    fn import_cl_memory(
        &mut self,
        addr: usize,
        bytes: usize,
        len: usize,
    ) -> Result<DeviceAlloc, CaseError> {
        let missing = self.hip.missing_in(Group::ExternalMemory);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        self.bind()?;
        let (hsa, lib) = self.hsa()?;
        let export = need(
            hsa.hsa_amd_portable_export_dmabuf,
            &lib,
            "hsa_amd_portable_export_dmabuf",
        )?;
        let close = need(
            hsa.hsa_amd_portable_close_dmabuf,
            &lib,
            "hsa_amd_portable_close_dmabuf",
        )?;
        let (mut fd, mut offset): (c_int, u64) = (-1, 0);
        // SAFETY: live out-parameters; HSA looks `addr` up in its own allocation map and
        // refuses (HSA_STATUS_ERROR_INVALID_ALLOCATION) a range outside one allocation.
        let s = unsafe { export(addr as *const c_void, bytes, &mut fd, &mut offset) };
        hsa_check("hsa_amd_portable_export_dmabuf", s, || {
            format!("{bytes} B at {addr:#x}")
        })
        .refused("HSA refused to export the OpenCL allocation as a dma-buf")?;
        let imported = self.import_dmabuf(fd, offset, bytes);
        // SAFETY: the fd the export gave, closed once; the import holds its own reference.
        let s = unsafe { close(fd) };
        if let Err(e) = hsa_check("hsa_amd_portable_close_dmabuf", s, || format!("fd {fd}")) {
            // The mapping stands without the fd: worth a line, not the case.
            eprintln!("clhip hip{}: closing the dma-buf: {e}", self.ordinal);
        }
        let (mapped, ext) = imported?;
        Ok(DeviceAlloc {
            kind: AllocKind::ImportedExternal,
            ptr: PeerPtr { addr: mapped, len },
            handle: ext as u64,
            bytes,
        })
    }

    fn ipc_handle(&mut self, alloc: &DeviceAlloc) -> Result<IpcHandle, CaseError> {
        alloc.require(AllocKind::Device, "an IPC handle (hipIpcGetMemHandle)")?;
        let missing = self.hip.missing_in(Group::Ipc);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        self.bind()?;
        let mut h = ffi::hipIpcMemHandle_t { reserved: [0; 64] };
        let p = alloc.ptr.addr as *mut c_void;
        // SAFETY: live out-parameter; `p` is the base of a hipMalloc allocation.
        unsafe { hip_call!(&self.hip, hipIpcGetMemHandle(&mut h, p), "{p:?}") }
            .refused("hipIpcGetMemHandle")?;
        Ok(h.reserved.map(|c| c as u8))
    }

    /// hipIpcOpenMemHandle with hipIpcMemLazyEnablePeerAccess, whose value changed in 6.0
    /// (0 -> 0x01) and which clr requires exactly (any other flags: hipErrorInvalidValue). clr
    /// refuses a handle from this same process with hipErrorInvalidContext.
    fn ipc_open(&mut self, handle: &IpcHandle, len: usize) -> Result<DeviceAlloc, CaseError> {
        let missing = self.hip.missing_in(Group::Ipc);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        self.bind()?;
        let h = ffi::hipIpcMemHandle_t {
            reserved: handle.map(|b| b as c_char),
        };
        let flags = self.hip.abi.ipc_lazy_enable_peer_access();
        let mut p: *mut c_void = null_mut();
        // SAFETY: live out-parameter; the 64-byte handle is passed by value, as declared.
        unsafe { hip_call!(&self.hip, hipIpcOpenMemHandle(&mut p, h, flags)) }
            .refused("hipIpcOpenMemHandle refused the handle")?;
        Ok(DeviceAlloc::new(AllocKind::IpcOpened, p as usize, len, 0))
    }

    /// hipImportExternalSemaphore with an opaque fd, in the generation's descriptor layout.
    /// On Linux clr always refuses: hipImportExternalSemaphore (hipamd/src/hip_memory.cpp)
    /// returns hipErrorNotSupported (801) when the device's importExtSemaphore fails, and
    /// ROCm's (roc::NullDevice in rocclr/device/rocm/rocdevice.hpp, inherited by roc::Device;
    /// only PAL, Windows, implements it) is `ShouldNotReachHere(); return false;`.
    /// ShouldNotReachHere is `assert(false && ..)` (rocclr/utils/debug.hpp), a no-op in release
    /// builds: a debug build of clr would abort the process here instead. From rocm-6.0.0 clr
    /// refuses fd 0 first, with hipErrorInvalidValue. The fd stays the caller's on refusal.
    fn import_semaphore_fd(&mut self, fd: RawFd) -> Result<u64, CaseError> {
        if fd < 0 {
            return Err(CaseError::unsupported(format!(
                "no fd to import as a semaphore ({fd})"
            )));
        }
        let missing = self.hip.missing_in(Group::ExternalSemaphore);
        if !missing.is_empty() {
            return Err(lacks(&self.hip, &missing.join(", ")));
        }
        self.bind()?;
        let handle = ffi::hipExternalHandle::from_fd(fd);
        let ty = ffi::hipExternalSemaphoreHandleTypeOpaqueFd;
        let desc = ffi::hipExternalSemaphoreHandleDesc {
            type_: ty,
            handle,
            flags: 0,
            reserved: [0; 16],
        };
        let desc_v5 = ffi::hipExternalSemaphoreHandleDescV5 {
            type_: ty,
            handle,
            flags: 0,
        };
        let desc_ptr: *const c_void = if self.hip.abi.descriptor_has_reserved() {
            (&raw const desc).cast()
        } else {
            (&raw const desc_v5).cast()
        };
        let mut sem: ffi::hipExternalSemaphore_t = null_mut();
        // SAFETY: live out-parameter; the descriptor is the layout this library reads, and for
        // the opaque-fd type only `fd` of the union is read.
        unsafe {
            hip_call!(
                &self.hip,
                hipImportExternalSemaphore(&mut sem, desc_ptr),
                "fd {fd}"
            )
        }
        .refused("hipImportExternalSemaphore refused the fd")?;
        Ok(sem as u64)
    }

    fn destroy_semaphore(&mut self, sem: u64) {
        if sem == 0 || self.bind().is_err() {
            return;
        }
        let s = sem as ffi::hipExternalSemaphore_t;
        // SAFETY: a handle import_semaphore_fd returned, destroyed once.
        if let Err(e) = unsafe { hip_call!(&self.hip, hipDestroyExternalSemaphore(s)) } {
            eprintln!(
                "clhip hip{}: destroying semaphore {sem:#x}: {e}",
                self.ordinal
            );
        }
    }

    fn reopen_args(&self) -> Vec<String> {
        reopen_args(self.ordinal, self.rocm_path.as_deref())
    }

    fn record_and_wait_event(&mut self) -> Result<(), CaseError> {
        self.bind()?;
        // SAFETY: event and stream are live, on the current device.
        unsafe {
            hip_call!(&self.hip, hipEventRecord(self.event, self.stream)).running()?;
            hip_call!(&self.hip, hipEventSynchronize(self.event)).running()
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
            Transpose::None => ffi::rocblas_operation_none,
            Transpose::Trans => ffi::rocblas_operation_transpose,
            Transpose::ConjTrans => ffi::rocblas_operation_conjugate_transpose,
        };
        let (ta, tb) = (op(op_a), op(op_b));
        let (m, n, k) = (int_arg("m", m)?, int_arg("n", n)?, int_arg("k", k)?);
        let (lda, ldb, ldc) = (
            int_arg("lda", lda)?,
            int_arg("ldb", ldb)?,
            int_arg("ldc", ldc)?,
        );
        let blas = self.blas()?;
        let h = blas.handle;
        let gemm = need(blas.lib.fns.rocblas_cgemm, &blas.lib.path, "rocblas_cgemm")?;
        let alpha = rocblas_float_complex {
            x: alpha.re,
            y: alpha.im,
        };
        let beta = rocblas_float_complex {
            x: beta.re,
            y: beta.im,
        };
        let (a, b, c) = (a.addr as *const _, b.addr as *const _, c.addr as *mut _);
        // SAFETY: column-major operands at the addresses the path handed over; with host
        // pointer mode rocBLAS reads alpha and beta before returning.
        let s = unsafe { gemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc) };
        blas_outcome("rocBLAS", "rocblas_cgemm", s, &self.info.arch, || {
            format!("m={m} n={n} k={k} {op_a:?} {op_b:?}")
        })
    }

    fn cpotrf(&mut self, uplo: Uplo, n: usize, a: PeerPtr, lda: usize) -> Result<i32, CaseError> {
        self.bind()?;
        let fill = match uplo {
            Uplo::Lower => ffi::rocblas_fill_lower,
            Uplo::Upper => ffi::rocblas_fill_upper,
        };
        let (n, lda) = (int_arg("cpotrf n", n)?, int_arg("cpotrf lda", lda)?);
        let (fns, h) = self.solver()?;
        let potrf = need(fns.rocsolver_cpotrf, "librocsolver", "rocsolver_cpotrf")?;
        let a = a.addr as *mut rocblas_float_complex;
        let info_at = self.scratch as *mut ffi::rocblas_int;
        // SAFETY: `a` is n x n column-major with leading dimension lda at the address the path
        // handed over; `info` goes to 4 device bytes of scratch. rocSOLVER allocates its
        // workspace through the rocBLAS handle, on the handle's stream.
        let s = unsafe { potrf(h, fill, n, a, lda, info_at) };
        blas_outcome("rocSOLVER", "rocsolver_cpotrf", s, &self.info.arch, || {
            format!("n={n} lda={lda} {uplo:?}")
        })?;
        // Ordered after the factorization on the stream; the copy waits for it.
        let mut info: c_int = 0;
        self.copy_out((&raw mut info).cast(), self.scratch as usize, 4)?;
        Ok(info)
    }

    fn sticky_fault(&mut self) -> Option<ApiError> {
        if self.bind().is_err() {
            return None;
        }
        // SAFETY: the device is current; hipDeviceSynchronize only waits and reports.
        let r = unsafe { hip_call!(&self.hip, hipDeviceSynchronize(), "after the case") };
        match r {
            Err(e) if e.is_device_fault() => Some(e),
            _ => None,
        }
    }

    fn health_check(&mut self) -> Result<(), CaseError> {
        self.bind()?;
        let buf = DeviceBuffer::new(&self.hip, gpu::HEALTH_WORDS * 4, "health-check buffer")?;
        gpu::known_answer(self, buf.ptr as usize, "hip health check")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::PeerRuntime;

    /// The kernels through the real hiprtc where one loads (Debian's HIP 5.2 embeds it in
    /// libamdhip64 and compiles through libamd-comgr): no device is needed to compile for an
    /// explicit target. Skipped without hiprtc.
    #[test]
    fn hiprtc_compiles_the_kernels_for_an_explicit_target() {
        // hiprtc compiles through comgr's LLVM; PoCL, which other tests in this process load,
        // brings another LLVM, and two LLVMs in one process abort ("Option ... registered more
        // than once"). So the compile runs in a fresh copy of this test binary.
        if std::env::var_os("CLHIP_HIPRTC_CHILD").is_none() {
            let exe = std::env::current_exe().expect("the test binary's path");
            let out = std::process::Command::new(exe)
                .args([
                    "--exact",
                    "runtimes::hip::tests::hiprtc_compiles_the_kernels_for_an_explicit_target",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("CLHIP_HIPRTC_CHILD", "1")
                .output()
                .expect("the test binary runs");
            assert!(
                out.status.success(),
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let Ok(hip) = Hip::load(None) else {
            eprintln!("no libamdhip64: skipped");
            return;
        };
        let rtc = match ffi::open_hiprtc(&hip) {
            Ok(r) if r.missing.is_empty() => r,
            other => {
                eprintln!("no usable hiprtc: skipped ({:?})", other.err());
                return;
            }
        };
        // gcnArchName as hipGetDeviceProperties gives it: a target id with feature flags.
        for arch in ["gfx908", "gfx90a:sramecc+:xnack-"] {
            let code = match compile(&rtc, &kernel_source(), arch) {
                Ok(c) => c,
                Err(e) => panic!("{arch}: kernels/*.hip do not compile under hiprtc: {e:?}"),
            };
            eprintln!("{arch}: {} byte code object from {}", code.len(), rtc.path);
            assert!(
                code.starts_with(b"\x7fELF"),
                "{arch}: not an ELF code object"
            );
            for name in Kernel::ALL.map(Kernel::name) {
                let found = code.windows(name.len() + 1).any(|w| {
                    w[..name.len()] == *name.as_bytes() && matches!(w[name.len()], 0 | b'.')
                });
                assert!(found, "{arch}: {name} not in the code object");
            }
        }
        // Not tried: a target this hiprtc does not know. Debian's HIP 5.2 hiprtc dies with
        // SIGSEGV inside hiprtcCompileProgram for `gfx942` (newer than its LLVM) and for `gfx0`,
        // instead of returning HIPRTC_ERROR_INVALID_OPTION; on a device, open() compiles for
        // the device's own gcnArchName, which the matching hiprtc knows.
    }

    #[test]
    fn hiprtc_result_names_per_header() {
        assert_eq!(ffi::hiprtc_result_name(5), "HIPRTC_ERROR_INVALID_OPTION");
        assert_eq!(ffi::hiprtc_result_name(6), "HIPRTC_ERROR_COMPILATION");
        assert_eq!(ffi::hiprtc_result_name(100), "HIPRTC_ERROR_LINKING");
        assert_eq!(ffi::hiprtc_result_name(42), "hiprtcResult 42");
    }

    /// The call macro against the real runtime: a refused call carries the call's name and
    /// hipGetErrorName's; an absent optional symbol is SYMBOL_NOT_FOUND, not a crash.
    #[test]
    fn hip_call_names_the_call_and_the_error() {
        let Ok(hip) = Hip::load(None) else {
            eprintln!("no libamdhip64: skipped");
            return;
        };
        if hip.device_count().is_ok_and(|n| n > 0) {
            eprintln!("a device is present: the refusal below does not apply");
            return;
        }
        // SAFETY: plain call; without a device it only returns an error code.
        let e = unsafe { hip_call!(&hip, hipSetDevice(0), "ordinal 0") }.unwrap_err();
        eprintln!("{e}");
        assert_eq!(e.api, Api::Hip);
        assert_eq!(e.call, "hipSetDevice");
        assert!(e.name.starts_with("hipError"), "{}", e.name);
        assert_eq!(e.detail, "ordinal 0");
        if !hip.fns.has("hipExtHostAlloc") {
            let mut p: *mut c_void = null_mut();
            // SAFETY: not called: the symbol is absent.
            let e = unsafe { hip_call!(&hip, hipExtHostAlloc(&mut p, 8, 0)) }.unwrap_err();
            assert_eq!(
                (e.call.as_str(), e.name.as_str()),
                ("hipExtHostAlloc", "SYMBOL_NOT_FOUND")
            );
        }
    }

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

    #[test]
    fn hsa_errors_carry_the_call_and_the_header_name() {
        assert!(hsa_check("hsa_init", 0, String::new).is_ok());
        let e = hsa_check("hsa_amd_portable_export_dmabuf", 0x1003, || "8 B".into()).unwrap_err();
        assert_eq!(e.api, Api::Hip);
        assert_eq!(e.call, "hsa_amd_portable_export_dmabuf");
        assert_eq!(e.code, 0x1003);
        assert_eq!(e.name, "HSA_STATUS_ERROR_INVALID_ALLOCATION");
        assert!(!e.is_device_fault());
        match Err::<(), _>(e).refused("exporting") {
            Err(CaseError::Unsupported {
                error: Some(e),
                reason,
            }) => assert_eq!((reason.as_str(), e.code), ("exporting", 0x1003)),
            other => panic!("{other:?}"),
        }
    }

    /// import_cl_memory's first step without a device: an HSA runtime older than ROCm 5.6
    /// (Debian's, of ROCm 5.2) is `unsupported` naming the library and the missing export,
    /// before anything is called. Skipped where no HSA loads or it has the export.
    #[test]
    fn import_cl_memory_names_a_missing_dmabuf_export() {
        let Ok(hip) = Hip::load(None) else {
            eprintln!("no libamdhip64: skipped");
            return;
        };
        let lib = match ffi::open_hsa(&hip) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("no libhsa-runtime64: skipped ({e})");
                return;
            }
        };
        if lib.fns.hsa_amd_portable_export_dmabuf.is_some() {
            eprintln!("{} has the dma-buf export: skipped", lib.path);
            return;
        }
        let path = lib.path.clone();
        drop(lib);
        match open_hsa_export(&hip) {
            Err(CaseError::Unsupported {
                reason,
                error: None,
            }) => {
                eprintln!("{reason}");
                assert!(reason.starts_with(&format!("{path} lacks ")), "{reason}");
                assert!(
                    reason.contains("hsa_amd_portable_export_dmabuf"),
                    "{reason}"
                );
            }
            Err(other) => panic!("expected Unsupported naming the symbol, got {other:?}"),
            Ok(_) => panic!("{path} lacks the export, yet it opened"),
        }
    }

    /// rocBLAS 5.7+ status 15 is a refusal naming the architecture (without feature flags), 14
    /// names the function built out; others stay refusals while running, named per header.
    #[test]
    fn rocblas_arch_mismatch_is_unsupported_naming_the_arch() {
        assert!(blas_outcome("rocBLAS", "rocblas_cgemm", 0, "gfx908", String::new).is_ok());
        match blas_outcome(
            "rocBLAS",
            "rocblas_cgemm",
            15,
            "gfx908:sramecc+:xnack-",
            || "m=4".into(),
        ) {
            Err(CaseError::Unsupported {
                reason,
                error: Some(e),
            }) => {
                assert_eq!(
                    reason,
                    "rocBLAS has no kernels for this architecture (gfx908)"
                );
                assert_eq!(
                    format!("unsupported: {reason}"),
                    "unsupported: rocBLAS has no kernels for this architecture (gfx908)"
                );
                assert_eq!(
                    (e.code, e.name.as_str()),
                    (15, "rocblas_status_arch_mismatch")
                );
                assert_eq!(e.call, "rocblas_cgemm");
            }
            other => panic!("{other:?}"),
        }
        match blas_outcome("rocSOLVER", "rocsolver_cpotrf", 14, "gfx90a", String::new) {
            Err(CaseError::Unsupported {
                reason,
                error: Some(e),
            }) => {
                assert_eq!(reason, "rocSOLVER was built without rocsolver_cpotrf");
                assert_eq!(e.name, "rocblas_status_excluded_from_build");
            }
            other => panic!("{other:?}"),
        }
        match blas_outcome("rocBLAS", "rocblas_cgemm", 3, "gfx908", String::new) {
            Err(CaseError::Unsupported {
                reason,
                error: Some(e),
            }) => {
                assert_eq!(reason, "refused while the case ran");
                assert_eq!(e.name, "rocblas_status_invalid_pointer");
            }
            other => panic!("{other:?}"),
        }
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
