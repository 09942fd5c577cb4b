//! Thin, run-time-loaded bindings to ROCm: libamdhip64, hiprtc, rocBLAS, rocSOLVER and the HSA
//! runtime. Nothing is linked at build time; every symbol is resolved with `dlsym` when its
//! library is opened, and an absent one is listed by name instead of crashing on first call.
//!
//! Every struct and enum below cites the header it was copied from. Sizes and offsets were
//! checked by compiling the header's own definitions with gcc (x86-64) for ROCm 5.2.3, 6.0.0 and
//! the HIP `amd-staging` branch of Oct 2024 (6.3 development); the layout tests repeat them.
//!
//! ABI gates found in the headers (ROCm/HIP `include/hip/hip_runtime_api.h` unless said):
//! - 5.3.0: `hipMemAllocationProp` reordered (5.2: `compressionType@0, location@4,
//!   requestedHandleType@12, type@16, usage@20, win32HandleMetaData@24`; 5.3+: `type@0,
//!   requestedHandleType@4, location@8, win32HandleMetaData@16, allocFlags@24`). Same size, 32.
//! - hiprtc was never moved out in one step. At every tag read (ROCm/hipamd rocm-5.2.3 .. 5.5.0,
//!   ROCm/clr rocm-5.6.0 .. rocm-6.2.2, release/rocm-rel-6.3.0.1 and amd-staging of Oct 2024) the
//!   build makes a standalone libhiprtc (`add_library(hiprtc SHARED)` in src/hiprtc/CMakeLists.txt)
//!   *and* compiles hiprtc into libamdhip64 on Linux (5.2.3: the `hiprtcobject` objects; 5.4.0 on:
//!   `target_sources(amdhip64 PRIVATE hiprtc.cpp ...)`), whose version script hip_hcc.map.in
//!   exports the `hiprtc*` names (11 at 5.2.3, 18 from 5.3.0). Whether libhiprtc is shipped is
//!   packaging: AMD's packages have it from 5.3, Debian's 5.2 does not. clhip binds libhiprtc of
//!   the install when it is there and the copy inside libamdhip64 otherwise ([`open_hiprtc`]).
//! - 6.0.0: `hipDeviceProp_t` became `hipDeviceProp_tR0600` (1472 bytes, gcnArchName@1160;
//!   5.x: 792 bytes, gcnArchName@396) read by `hipGetDevicePropertiesR0600`;
//!   `hipMemoryType` renumbered (5.x Host=0 Device=1 Array=2 Unified=3; 6.x Unregistered=0
//!   Host=1 Device=2 Managed=3 Array=10 Unified=11) and the field renamed `memoryType`->`type`;
//!   `unsigned int reserved[16]` appended to the external memory handle/buffer and semaphore
//!   descriptors; `hipIpcMemLazyEnablePeerAccess` 0 -> 0x01.
//! - `hipExtHostAlloc`: declared by ROCm/HIP amd-staging (commit 83511e015 "Added hipExtHostAlloc
//!   API", Sep 2024) and exported by ROCm/clr amd-staging's hip_hcc.map.in, with `hipHostMalloc`
//!   deprecated in its favour; but ROCm/clr release/rocm-rel-6.3.0.1 has no hipExtHostAlloc at
//!   all, and HIP's docs for 6.4.2 no longer list hipHostMalloc as deprecated. No released
//!   libamdhip64 we could find exports it, so it is optional ([`OPTIONAL_SYMBOLS`]): used where
//!   present, never a defect where absent.
//! - 7.0 (ROCm/rocm-systems projects/hip): `hipMemAllocationProp.requestedHandleType` is a union
//!   with `requestedHandleTypes`: a name only, the layout is unchanged.
//! - 7.1: `hipMemImportFromShareableHandle` is said (shared/DOMAIN.md) to take the fd by value.
//!   NOT verified: every header read here (5.2 .. 7.0) declares `void* osHandle`. Kept as a gate
//!   ([`Abi::import_fd_by_value`]) but no code path calls the import yet.

#![allow(
    non_snake_case,
    non_camel_case_types,
    non_upper_case_globals,
    dead_code
)]

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::path::{Path, PathBuf};

use libloading::Library;

use crate::runtimes::hip::install;
use crate::runtimes::locate::{Attempt, hip_candidates, hip_version, open_first};

// ---------------------------------------------------------------------------------------------
// Scalar types and enum values

pub type hipError_t = c_int;
pub type hipStream_t = *mut c_void;
pub type hipEvent_t = *mut c_void;
pub type hipModule_t = *mut c_void;
pub type hipFunction_t = *mut c_void;
pub type hipMemGenericAllocationHandle_t = *mut c_void;
pub type hipExternalMemory_t = *mut c_void;
pub type hipExternalSemaphore_t = *mut c_void;
pub type hiprtcProgram = *mut c_void;
pub type hiprtcResult = c_int;
pub type rocblas_handle = *mut c_void;
pub type rocblas_status = c_int;
pub type rocblas_int = i32;
/// hsa.h `typedef enum { .. } hsa_status_t`: an int-sized enum.
pub type hsa_status_t = c_int;

/// hipError_t values used by name (hip_runtime_api.h, `enum hipError_t`; unchanged 5.2 .. 7.0).
pub const hipSuccess: hipError_t = 0;
pub const hipErrorInvalidValue: hipError_t = 1;
pub const hipErrorNoDevice: hipError_t = 100;
pub const hipErrorInvalidDevice: hipError_t = 101;
pub const hipErrorIllegalAddress: hipError_t = 700;
pub const hipErrorLaunchFailure: hipError_t = 719;
pub const hipErrorNotSupported: hipError_t = 801;

/// hipMemcpyKind (hip_runtime_api.h, unchanged 5.2 .. 7.0): HostToHost 0, HostToDevice 1,
/// DeviceToHost 2, DeviceToDevice 3, Default 4 (the runtime infers the direction from the
/// pointers, and between two pointers it does not know it copies on the host).
pub const hipMemcpyHostToDevice: c_int = 1;
pub const hipMemcpyDeviceToHost: c_int = 2;
pub const hipMemcpyDefault: c_int = 4;
/// hipHostMalloc/hipExtHostAlloc flags (hip_runtime_api.h): Portable 0x1, Mapped 0x2.
pub const hipHostMallocPortable: c_uint = 0x1;
pub const hipHostMallocMapped: c_uint = 0x2;
/// hipMallocManaged flag hipMemAttachGlobal (hip_runtime_api.h).
pub const hipMemAttachGlobal: c_uint = 0x1;
/// hipEventCreateWithFlags: hipEventDisableTiming 0x2 (hip_runtime_api.h).
pub const hipEventDisableTiming: c_uint = 0x2;

/// hipDeviceAttribute_t values (hip_runtime_api.h `typedef enum hipDeviceAttribute_t`): the
/// enum is positional; gcc printed ManagedMemory = 24 in 5.2.3, 6.0.0 and amd-staging.
pub const hipDeviceAttributeManagedMemory: c_int = 24;
/// hipDeviceAttributeVirtualMemoryManagementSupported = 89 from ROCm/HIP rocm-5.3.0 (gcc printed
/// 89 at rocm-5.3.0, 5.4.0, 5.7.1, 6.0.0, 6.2.2 and amd-staging); the rocm-5.2.3 enum has no such
/// attribute (there VMM support is found by calling hipMemCreate). See
/// [`HipVersion::has_vmm_attribute`].
pub const hipDeviceAttributeVirtualMemoryManagementSupported: c_int = 89;

/// hipExternalMemoryHandleType (hip_runtime_api.h, `hipExternalMemoryHandleType_enum`).
pub const hipExternalMemoryHandleTypeOpaqueFd: c_int = 1;
pub const hipExternalMemoryHandleTypeOpaqueWin32: c_int = 2;
pub const hipExternalMemoryHandleTypeOpaqueWin32Kmt: c_int = 3;
pub const hipExternalMemoryHandleTypeD3D12Heap: c_int = 4;
pub const hipExternalMemoryHandleTypeD3D12Resource: c_int = 5;
pub const hipExternalMemoryHandleTypeD3D11Resource: c_int = 6;
pub const hipExternalMemoryHandleTypeD3D11ResourceKmt: c_int = 7;
/// hipExternalSemaphoreHandleType (hip_runtime_api.h).
pub const hipExternalSemaphoreHandleTypeOpaqueFd: c_int = 1;
/// hipMemAllocationHandleType (hip_runtime_api.h `typedef enum hipMemAllocationHandleType`).
pub const hipMemHandleTypeNone: c_int = 0x0;
pub const hipMemHandleTypePosixFileDescriptor: c_int = 0x1;
/// hipMemAllocationType: Pinned = 1. hipMemLocationType: Device = 1. hipMemAccessFlags:
/// ProtReadWrite = 3. hipMemAllocationGranularity_flags: Minimum = 0.
pub const hipMemAllocationTypePinned: c_int = 0x1;
pub const hipMemLocationTypeDevice: c_int = 1;
pub const hipMemAccessFlagsProtReadWrite: c_int = 3;
pub const hipMemAllocationGranularityMinimum: c_int = 0;

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

/// hiprtcResult (ROCm/HIP include/hip/hiprtc.h `typedef enum hiprtcResult`), by value.
pub const HIPRTC_SUCCESS: hiprtcResult = 0;
pub const HIPRTC_ERROR_INVALID_OPTION: hiprtcResult = 5;

/// hiprtcResult names, by value (hiprtc.h): the canonical name an [`ApiError`] carries, whatever
/// hiprtcGetErrorString says in prose.
///
/// [`ApiError`]: crate::model::ApiError
pub fn hiprtc_result_name(r: hiprtcResult) -> String {
    const NAMES: [&str; 12] = [
        "HIPRTC_SUCCESS",
        "HIPRTC_ERROR_OUT_OF_MEMORY",
        "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
        "HIPRTC_ERROR_INVALID_INPUT",
        "HIPRTC_ERROR_INVALID_PROGRAM",
        "HIPRTC_ERROR_INVALID_OPTION",
        "HIPRTC_ERROR_COMPILATION",
        "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        "HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        "HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        "HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        "HIPRTC_ERROR_INTERNAL_ERROR",
    ];
    match r {
        100 => "HIPRTC_ERROR_LINKING".to_string(),
        _ => usize::try_from(r)
            .ok()
            .and_then(|i| NAMES.get(i).copied())
            .map_or_else(|| format!("hiprtcResult {r}"), str::to_string),
    }
}

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

/// hsa_status_t names, by value: ROCR-Runtime hsa.h `typedef enum { HSA_STATUS_SUCCESS = 0x0,
/// .. }` (hex, 0x1000 up; unchanged rocm-5.2.3 .. Oct 2024 master but for the last additions)
/// and the AMD additions of hsa_ext_amd.h (`enum { HSA_STATUS_ERROR_INVALID_MEMORY_POOL = 40,
/// .. }`: decimal 40 .. 47, not 0x40). Unknown values are `hsa_status_t <hex>`.
pub fn hsa_status_name(s: hsa_status_t) -> String {
    let name = match s {
        0x0 => "HSA_STATUS_SUCCESS",
        0x1 => "HSA_STATUS_INFO_BREAK",
        0x1000 => "HSA_STATUS_ERROR",
        0x1001 => "HSA_STATUS_ERROR_INVALID_ARGUMENT",
        0x1002 => "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION",
        0x1003 => "HSA_STATUS_ERROR_INVALID_ALLOCATION",
        0x1004 => "HSA_STATUS_ERROR_INVALID_AGENT",
        0x1005 => "HSA_STATUS_ERROR_INVALID_REGION",
        0x1006 => "HSA_STATUS_ERROR_INVALID_SIGNAL",
        0x1007 => "HSA_STATUS_ERROR_INVALID_QUEUE",
        0x1008 => "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        0x1009 => "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT",
        0x100A => "HSA_STATUS_ERROR_RESOURCE_FREE",
        0x100B => "HSA_STATUS_ERROR_NOT_INITIALIZED",
        0x100C => "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW",
        0x100D => "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS",
        0x100E => "HSA_STATUS_ERROR_INVALID_INDEX",
        0x100F => "HSA_STATUS_ERROR_INVALID_ISA",
        0x1010 => "HSA_STATUS_ERROR_INVALID_CODE_OBJECT",
        0x1011 => "HSA_STATUS_ERROR_INVALID_EXECUTABLE",
        0x1012 => "HSA_STATUS_ERROR_FROZEN_EXECUTABLE",
        0x1013 => "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME",
        0x1014 => "HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED",
        0x1015 => "HSA_STATUS_ERROR_VARIABLE_UNDEFINED",
        0x1016 => "HSA_STATUS_ERROR_EXCEPTION",
        0x1017 => "HSA_STATUS_ERROR_INVALID_ISA_NAME",
        0x1018 => "HSA_STATUS_ERROR_INVALID_CODE_SYMBOL",
        0x1019 => "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL",
        0x1020 => "HSA_STATUS_ERROR_INVALID_FILE",
        0x1021 => "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER",
        0x1022 => "HSA_STATUS_ERROR_INVALID_CACHE",
        0x1023 => "HSA_STATUS_ERROR_INVALID_WAVEFRONT",
        0x1024 => "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP",
        0x1025 => "HSA_STATUS_ERROR_INVALID_RUNTIME_STATE",
        0x1026 => "HSA_STATUS_ERROR_FATAL",
        40 => "HSA_STATUS_ERROR_INVALID_MEMORY_POOL",
        41 => "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
        42 => "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION",
        43 => "HSA_STATUS_ERROR_MEMORY_FAULT",
        44 => "HSA_STATUS_CU_MASK_REDUCED",
        45 => "HSA_STATUS_ERROR_OUT_OF_REGISTERS",
        46 => "HSA_STATUS_ERROR_RESOURCE_BUSY",
        // hsa_ext_amd.h (not hsa.h) of ROCm/rocm-systems projects/rocr-runtime at 1b1610fc
        // (2025-08-09, the 7.x line); absent at ROCR-Runtime rocm-6.2.4 and amd-staging of Oct
        // 2024. "Request is not supported by this system".
        47 => "HSA_STATUS_ERROR_NOT_SUPPORTED",
        _ => return format!("hsa_status_t {s:#x}"),
    };
    name.to_string()
}

// ---------------------------------------------------------------------------------------------
// Structs that cross the boundary

/// hip_runtime_api.h `typedef struct hipUUID_t { char bytes[16]; } hipUUID;` (5.2 .. 7.0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipUUID {
    pub bytes: [c_char; 16],
}

/// hip_runtime_api.h `hipIpcMemHandle_st { char reserved[HIP_IPC_HANDLE_SIZE]; }`, 64 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipIpcMemHandle_t {
    pub reserved: [c_char; 64],
}

/// hip_runtime_api.h `hipMemLocation { hipMemLocationType type; int id; }` (5.2 .. 7.0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipMemLocation {
    pub type_: c_int,
    pub id: c_int,
}

/// hip_runtime_api.h `hipMemAccessDesc { hipMemLocation location; hipMemAccessFlags flags; }`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipMemAccessDesc {
    pub location: hipMemLocation,
    pub flags: c_int,
}

/// hip_runtime_api.h at rocm-5.3.0 .. 7.0: `hipMemAllocationProp { type; requestedHandleType
/// (7.0: union with requestedHandleTypes); location; win32HandleMetaData; struct { uchar
/// compressionType; uchar gpuDirectRDMACapable; ushort usage; } allocFlags; }`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemAllocationProp {
    pub type_: c_int,
    pub requestedHandleType: c_int,
    pub location: hipMemLocation,
    pub win32HandleMetaData: *mut c_void,
    pub allocFlags: hipMemAllocFlags,
}

/// The anonymous `allocFlags` struct of [`hipMemAllocationProp`] (5.3+).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipMemAllocFlags {
    pub compressionType: u8,
    pub gpuDirectRDMACapable: u8,
    pub usage: u16,
}

/// hip_runtime_api.h at rocm-5.2.3 (and earlier 5.x with VMM): `hipMemAllocationProp {
/// unsigned char compressionType; hipMemLocation location; hipMemAllocationHandleType
/// requestedHandleType; hipMemAllocationType type; unsigned short usage; void*
/// win32HandleMetaData; }`. Same size as the 5.3+ layout, different offsets.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemAllocationPropV52 {
    pub compressionType: u8,
    pub location: hipMemLocation,
    pub requestedHandleType: c_int,
    pub type_: c_int,
    pub usage: u16,
    pub win32HandleMetaData: *mut c_void,
}

/// hip_runtime_api.h `hipPointerAttribute_t` (5.x field `memoryType`, 6.0+ `type`; same layout;
/// the enum's values changed, see [`MemoryType::decode`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipPointerAttribute_t {
    pub type_: c_int,
    pub device: c_int,
    pub devicePointer: *mut c_void,
    pub hostPointer: *mut c_void,
    pub isManaged: c_int,
    pub allocationFlags: c_uint,
}

/// The Win32 arm of the handle unions (hip_runtime_api.h `struct { void* handle; const void*
/// name; } win32`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipWin32Handle {
    pub handle: *mut c_void,
    pub name: *const c_void,
}

/// hip_runtime_api.h `union { int fd; struct {..} win32; const void* nvSciBufObject (6.x); }`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union hipExternalHandle {
    pub fd: c_int,
    pub win32: hipWin32Handle,
    pub nvSci: *const c_void,
}

impl hipExternalHandle {
    /// The fd arm, with every byte of the union zeroed first (the Win32 arm is the widest), so
    /// no uninitialised byte crosses the FFI.
    pub fn from_fd(fd: c_int) -> Self {
        let mut handle = hipExternalHandle {
            win32: hipWin32Handle {
                handle: std::ptr::null_mut(),
                name: std::ptr::null(),
            },
        };
        handle.fd = fd;
        handle
    }
}

/// hip_runtime_api.h at rocm-6.0.0 .. 7.0 `hipExternalMemoryHandleDesc_st { type; union handle;
/// unsigned long long size; unsigned int flags; unsigned int reserved[16]; }`: 104 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipExternalMemoryHandleDesc {
    pub type_: c_int,
    pub handle: hipExternalHandle,
    pub size: c_ulonglong,
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// hip_runtime_api.h at rocm-5.2.3 .. 5.7: the same without `reserved`: 40 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipExternalMemoryHandleDescV5 {
    pub type_: c_int,
    pub handle: hipExternalHandle,
    pub size: c_ulonglong,
    pub flags: c_uint,
}

/// hip_runtime_api.h at rocm-6.0.0 .. 7.0 `hipExternalMemoryBufferDesc_st { offset; size;
/// flags; reserved[16]; }`: 88 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipExternalMemoryBufferDesc {
    pub offset: c_ulonglong,
    pub size: c_ulonglong,
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// hip_runtime_api.h at rocm-5.2.3 .. 5.7: without `reserved`: 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipExternalMemoryBufferDescV5 {
    pub offset: c_ulonglong,
    pub size: c_ulonglong,
    pub flags: c_uint,
}

/// hip_runtime_api.h at rocm-6.0.0 .. 7.0 `hipExternalSemaphoreHandleDesc_st { type; union
/// handle; unsigned int flags; unsigned int reserved[16]; }`: 96 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipExternalSemaphoreHandleDesc {
    pub type_: c_int,
    pub handle: hipExternalHandle,
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// hip_runtime_api.h at rocm-5.2.3 .. 5.7: without `reserved`: 32 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipExternalSemaphoreHandleDescV5 {
    pub type_: c_int,
    pub handle: hipExternalHandle,
    pub flags: c_uint,
}

/// rocBLAS library/include/internal/rocblas-complex-types.h (C path): `{ float x, y; }`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct rocblas_float_complex {
    pub x: f32,
    pub y: f32,
}

/// Bytes of the largest `hipDeviceProp_t` known (R0600: 1472), rounded up generously: the
/// buffer handed to hipGetDeviceProperties*, so a newer, larger struct cannot overrun it.
pub const DEVICE_PROP_BUFFER: usize = 4096;
/// `gcnArchName` offsets in `hipDeviceProp_t` (5.x, 792 bytes) and `hipDeviceProp_tR0600`
/// (6.0 .. amd-staging, 1472 bytes), computed by gcc from the headers.
pub const GCN_ARCH_NAME_OFFSET_R0000: usize = 396;
pub const GCN_ARCH_NAME_OFFSET_R0600: usize = 1160;

// ---------------------------------------------------------------------------------------------
// Version gate

/// The ABI generation of the loaded libamdhip64, from hipRuntimeGetVersion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Abi {
    V5,
    V6,
    V7,
}

/// hipRuntimeGetVersion decoded: major*10^7 + minor*10^5 + patch (hip_version.h HIP_VERSION).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HipVersion {
    pub raw: i32,
    pub major: i32,
    pub minor: i32,
    pub patch: i32,
}

impl HipVersion {
    pub fn decode(raw: i32) -> HipVersion {
        HipVersion {
            raw,
            major: raw / 10_000_000,
            minor: (raw / 100_000) % 100,
            patch: raw % 100_000,
        }
    }

    pub fn at_least(&self, major: i32, minor: i32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// The ABI generation, or why this build has no bindings for it.
    pub fn abi(&self) -> Result<Abi, String> {
        match self.major {
            5 => Ok(Abi::V5),
            6 => Ok(Abi::V6),
            7 => Ok(Abi::V7),
            _ => Err(format!(
                "HIP {} has no bindings in this build (5.x, 6.x and 7.x do)",
                hip_version(self.raw)
            )),
        }
    }

    /// hipMemAllocationProp was reordered in 5.3.0.
    pub fn legacy_alloc_prop(&self) -> bool {
        !self.at_least(5, 3)
    }

    /// hipExtHostAlloc might be exported from 6.3 on (amd-staging headers of Sep 2024; not in
    /// rocm-6.2.x): from there its absence is worth showing, as optional. Below, no library has
    /// it and nothing is said.
    pub fn may_have_ext_host_alloc(&self) -> bool {
        self.at_least(6, 3)
    }

    /// hipDeviceAttributeVirtualMemoryManagementSupported (89) exists from rocm-5.3.0.
    pub fn has_vmm_attribute(&self) -> bool {
        self.at_least(5, 3)
    }

    /// 7.1+: the fd is passed as the `void*` value itself (shared/DOMAIN.md; unverified here).
    pub fn import_fd_by_value(&self) -> bool {
        self.at_least(7, 1)
    }
}

impl Abi {
    /// hipIpcMemLazyEnablePeerAccess: 0 in 5.x, 0x01 from 6.0.
    pub fn ipc_lazy_enable_peer_access(self) -> c_uint {
        match self {
            Abi::V5 => 0,
            Abi::V6 | Abi::V7 => 1,
        }
    }

    /// The symbol that fills a `hipDeviceProp_t` of this generation, and where gcnArchName is.
    pub fn device_props(self) -> (&'static str, usize) {
        match self {
            Abi::V5 => ("hipGetDeviceProperties", GCN_ARCH_NAME_OFFSET_R0000),
            Abi::V6 | Abi::V7 => ("hipGetDevicePropertiesR0600", GCN_ARCH_NAME_OFFSET_R0600),
        }
    }

    /// Extra bytes after the 5.x descriptors (`reserved[16]`) from 6.0.
    pub fn descriptor_has_reserved(self) -> bool {
        self != Abi::V5
    }
}

/// hipMemoryType, decoded per generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryType {
    Unregistered,
    Host,
    Device,
    Managed,
    Array,
    Unified,
    Unknown(c_int),
}

impl MemoryType {
    /// 5.x (ROCm/HIP rocm-5.2.3 hip_runtime_api.h): Host 0, Device 1, Array 2, Unified 3; from
    /// rocm-5.3.0 to rocm-5.7.1 also Managed 4 (gcc printed 4 at 5.3.0, 5.4.0 and 5.7.1; a 5.2
    /// library never returns 4, so one table serves all of 5.x).
    /// 6.0+: Unregistered 0, Host 1, Device 2, Managed 3, Array 10, Unified 11.
    pub fn decode(abi: Abi, v: c_int) -> MemoryType {
        match (abi, v) {
            (Abi::V5, 0) => MemoryType::Host,
            (Abi::V5, 1) => MemoryType::Device,
            (Abi::V5, 2) => MemoryType::Array,
            (Abi::V5, 3) => MemoryType::Unified,
            (Abi::V5, 4) => MemoryType::Managed,
            (Abi::V6 | Abi::V7, 0) => MemoryType::Unregistered,
            (Abi::V6 | Abi::V7, 1) => MemoryType::Host,
            (Abi::V6 | Abi::V7, 2) => MemoryType::Device,
            (Abi::V6 | Abi::V7, 3) => MemoryType::Managed,
            (Abi::V6 | Abi::V7, 10) => MemoryType::Array,
            (Abi::V6 | Abi::V7, 11) => MemoryType::Unified,
            (_, v) => MemoryType::Unknown(v),
        }
    }
}

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
            fn resolve(lib: &Library) -> $table {
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

// Prototypes: ROCm/HIP include/hip/hip_runtime_api.h (5.2.3 .. amd-staging) and hiprtc.h.
fn_table!(HipFns, HIP_SYMBOLS {
    Core hipRuntimeGetVersion: fn(*mut c_int) -> hipError_t;
    Core hipDriverGetVersion: fn(*mut c_int) -> hipError_t;
    Core hipGetDeviceCount: fn(*mut c_int) -> hipError_t;
    Core hipSetDevice: fn(c_int) -> hipError_t;
    Core hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> hipError_t;
    Core hipDeviceGetName: fn(*mut c_char, c_int, c_int) -> hipError_t;
    Core hipDeviceGetPCIBusId: fn(*mut c_char, c_int, c_int) -> hipError_t;
    Core hipDeviceGetUuid: fn(*mut hipUUID, c_int) -> hipError_t;
    Core hipGetErrorName: fn(hipError_t) -> *const c_char;
    Core hipMalloc: fn(*mut Vp, usize) -> hipError_t;
    Core hipFree: fn(Vp) -> hipError_t;
    Core hipHostFree: fn(Vp) -> hipError_t;
    Core hipMallocManaged: fn(*mut Vp, usize, c_uint) -> hipError_t;
    Core hipMemGetInfo: fn(*mut usize, *mut usize) -> hipError_t;
    Core hipMemcpy: fn(Vp, Cvp, usize, c_int) -> hipError_t;
    Core hipMemcpyAsync: fn(Vp, Cvp, usize, c_int, hipStream_t) -> hipError_t;
    Core hipStreamCreate: fn(*mut hipStream_t) -> hipError_t;
    Core hipStreamSynchronize: fn(hipStream_t) -> hipError_t;
    Core hipStreamDestroy: fn(hipStream_t) -> hipError_t;
    Core hipEventCreateWithFlags: fn(*mut hipEvent_t, c_uint) -> hipError_t;
    Core hipEventRecord: fn(hipEvent_t, hipStream_t) -> hipError_t;
    Core hipEventSynchronize: fn(hipEvent_t) -> hipError_t;
    Core hipEventDestroy: fn(hipEvent_t) -> hipError_t;
    Core hipDeviceSynchronize: fn() -> hipError_t;
    Core hipModuleLoadData: fn(*mut hipModule_t, Cvp) -> hipError_t;
    Core hipModuleUnload: fn(hipModule_t) -> hipError_t;
    Core hipModuleGetFunction: fn(*mut hipFunction_t, hipModule_t, *const c_char) -> hipError_t;
    Core hipModuleLaunchKernel: fn(hipFunction_t, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint,
        c_uint, hipStream_t, *mut Vp, *mut Vp) -> hipError_t;
    Core hipPointerGetAttributes: fn(*mut hipPointerAttribute_t, Cvp) -> hipError_t;
    Props hipGetDeviceProperties: fn(Vp, c_int) -> hipError_t;
    Props hipGetDevicePropertiesR0600: fn(Vp, c_int) -> hipError_t;
    Pinned hipHostMalloc: fn(*mut Vp, usize, c_uint) -> hipError_t;
    Pinned hipExtHostAlloc: fn(*mut Vp, usize, c_uint) -> hipError_t;
    Vmm hipMemGetAllocationGranularity: fn(*mut usize, Cvp, c_int) -> hipError_t;
    Vmm hipMemCreate: fn(*mut hipMemGenericAllocationHandle_t, usize, Cvp, c_ulonglong) -> hipError_t;
    Vmm hipMemExportToShareableHandle: fn(Vp, hipMemGenericAllocationHandle_t, c_int, c_ulonglong) -> hipError_t;
    Vmm hipMemImportFromShareableHandle: fn(*mut hipMemGenericAllocationHandle_t, Vp, c_int) -> hipError_t;
    Vmm hipMemAddressReserve: fn(*mut Vp, usize, usize, Vp, c_ulonglong) -> hipError_t;
    Vmm hipMemMap: fn(Vp, usize, usize, hipMemGenericAllocationHandle_t, c_ulonglong) -> hipError_t;
    Vmm hipMemSetAccess: fn(Vp, usize, *const hipMemAccessDesc, usize) -> hipError_t;
    Vmm hipMemUnmap: fn(Vp, usize) -> hipError_t;
    Vmm hipMemAddressFree: fn(Vp, usize) -> hipError_t;
    Vmm hipMemRelease: fn(hipMemGenericAllocationHandle_t) -> hipError_t;
    ExternalMemory hipImportExternalMemory: fn(*mut hipExternalMemory_t, Cvp) -> hipError_t;
    ExternalMemory hipExternalMemoryGetMappedBuffer: fn(*mut Vp, hipExternalMemory_t, Cvp) -> hipError_t;
    ExternalMemory hipDestroyExternalMemory: fn(hipExternalMemory_t) -> hipError_t;
    ExternalSemaphore hipImportExternalSemaphore: fn(*mut hipExternalSemaphore_t, Cvp) -> hipError_t;
    ExternalSemaphore hipDestroyExternalSemaphore: fn(hipExternalSemaphore_t) -> hipError_t;
    Ipc hipIpcGetMemHandle: fn(*mut hipIpcMemHandle_t, Vp) -> hipError_t;
    Ipc hipIpcOpenMemHandle: fn(*mut Vp, hipIpcMemHandle_t, c_uint) -> hipError_t;
    Ipc hipIpcCloseMemHandle: fn(Vp) -> hipError_t;
});

// ROCm/HIP include/hip/hiprtc.h.
fn_table!(RtcFns, RTC_SYMBOLS {
    EmbeddedRtc hiprtcVersion: fn(*mut c_int, *mut c_int) -> hiprtcResult;
    EmbeddedRtc hiprtcCreateProgram: fn(*mut hiprtcProgram, *const c_char, *const c_char, c_int,
        *const *const c_char, *const *const c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcCompileProgram: fn(hiprtcProgram, c_int, *const *const c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcGetCodeSize: fn(hiprtcProgram, *mut usize) -> hiprtcResult;
    EmbeddedRtc hiprtcGetCode: fn(hiprtcProgram, *mut c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcGetProgramLogSize: fn(hiprtcProgram, *mut usize) -> hiprtcResult;
    EmbeddedRtc hiprtcGetProgramLog: fn(hiprtcProgram, *mut c_char) -> hiprtcResult;
    EmbeddedRtc hiprtcDestroyProgram: fn(*mut hiprtcProgram) -> hiprtcResult;
    EmbeddedRtc hiprtcGetErrorString: fn(hiprtcResult) -> *const c_char;
});

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

// ROCm/rocSOLVER library/include/rocsolver/rocsolver-functions.h.
fn_table!(SolverFns, SOLVER_SYMBOLS {
    Core rocsolver_get_version_string: fn(*mut c_char, usize) -> rocblas_status;
    Core rocsolver_cpotrf: fn(rocblas_handle, c_int, rocblas_int, *mut rocblas_float_complex,
        rocblas_int, *mut rocblas_int) -> rocblas_status;
});

// ROCm/ROCR-Runtime src/inc/hsa.h and hsa_ext_amd.h (runtime/hsa-runtime/inc/ from 6.x):
// `hsa_status_t hsa_init(void)`, `hsa_status_t hsa_shut_down(void)` (every version);
// `hsa_status_t hsa_amd_portable_export_dmabuf(const void* ptr, size_t size, int* dmabuf,
// uint64_t* offset)` and `hsa_status_t hsa_amd_portable_close_dmabuf(int dmabuf)` from
// rocm-5.6.0 (absent at rocm-5.5.0; Debian's HSA 1.5, ROCm 5.2, lacks both). The prototypes are
// the same at rocm-5.6.0, 6.0.0 and the Oct 2024 master.
fn_table!(HsaFns, HSA_SYMBOLS {
    Core hsa_init: fn() -> hsa_status_t;
    Core hsa_shut_down: fn() -> hsa_status_t;
    Core hsa_amd_portable_export_dmabuf: fn(Cvp, usize, *mut c_int, *mut u64) -> hsa_status_t;
    Core hsa_amd_portable_close_dmabuf: fn(c_int) -> hsa_status_t;
});

// ---------------------------------------------------------------------------------------------
// Loading

/// The HIP runtime: where it was loaded from, its version and ABI, and every symbol.
pub struct Hip {
    pub fns: HipFns,
    /// The candidate that loaded (a soname or a path).
    pub candidate: String,
    /// The file actually mapped (/proc/self/maps), else the candidate.
    pub path: String,
    pub version: HipVersion,
    pub abi: Abi,
    /// The ROCm install this HIP came from: the directory of the candidate that loaded (a root's
    /// lib/, symlinks kept as the user named them), or of the mapped file when the loader's own
    /// search found it. Every other ROCm library is loaded from here and nowhere else.
    pub install_dir: PathBuf,
    _lib: Library,
}

impl std::fmt::Debug for Hip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hip")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("abi", &self.abi)
            .finish()
    }
}

/// Why libamdhip64 could not be used.
#[derive(Debug, Clone)]
pub enum LoadError {
    /// No candidate loaded: each one and dlopen's reason.
    NotFound(Vec<Attempt>),
    /// It loaded but cannot be used (no hipRuntimeGetVersion, a version without bindings).
    Unusable { path: String, reason: String },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotFound(tried) => {
                let names: Vec<&str> = tried.iter().map(|a| a.candidate.as_str()).collect();
                write!(f, "libamdhip64 not found (tried {})", names.join(", "))
            }
            LoadError::Unusable { path, reason } => write!(f, "{path}: {reason}"),
        }
    }
}

/// The file the loader mapped whose name starts with `prefix` (`libamdhip64.so`): the first,
/// where a mixed install maps more than one.
pub fn mapped_file(prefix: &str) -> Option<String> {
    install::mapped_files(prefix).into_iter().next()
}

/// Symbols that are used where the library exports them and are never a defect where it does
/// not: declared in some header, exported by no released libamdhip64 found (see the module
/// comment on hipExtHostAlloc).
pub const OPTIONAL_SYMBOLS: [&str; 1] = ["hipExtHostAlloc"];

/// How one symbol of [`HIP_SYMBOLS`] stands in a library of version `v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolState {
    Present,
    /// Expected in this version and absent: a defect of the library (or of these bindings).
    Missing,
    /// Optional, possible in this version, absent: shown, not a defect.
    OptionalAbsent,
    /// Not part of this version at all: nothing to say.
    NotInVersion,
}

/// The state of `name` in a library of version `v` that does (`present`) or does not export it.
pub fn symbol_state(v: HipVersion, name: &str, present: bool) -> SymbolState {
    let in_version = match name {
        "hipGetDeviceProperties" => v.major == 5,
        "hipGetDevicePropertiesR0600" => v.major >= 6,
        "hipExtHostAlloc" => v.may_have_ext_host_alloc(),
        _ => true,
    };
    match (present, in_version, OPTIONAL_SYMBOLS.contains(&name)) {
        (true, _, _) => SymbolState::Present,
        (false, false, _) => SymbolState::NotInVersion,
        (false, true, true) => SymbolState::OptionalAbsent,
        (false, true, false) => SymbolState::Missing,
    }
}

impl Hip {
    pub fn load(rocm_path: Option<&Path>) -> Result<Hip, LoadError> {
        let (lib, candidate) =
            open_first(&hip_candidates(rocm_path)).map_err(LoadError::NotFound)?;
        let fns = HipFns::resolve(&lib);
        let path = mapped_file("libamdhip64.so").unwrap_or_else(|| candidate.clone());
        let Some(get_version) = fns.hipRuntimeGetVersion else {
            return Err(LoadError::Unusable {
                path,
                reason: "lacks hipRuntimeGetVersion".into(),
            });
        };
        let mut raw: c_int = 0;
        // SAFETY: `hipError_t hipRuntimeGetVersion(int*)`; needs no device.
        let rc = unsafe { get_version(&mut raw) };
        if rc != hipSuccess {
            return Err(LoadError::Unusable {
                path,
                reason: format!("hipRuntimeGetVersion returned {rc}"),
            });
        }
        let version = HipVersion::decode(raw);
        let abi = version.abi().map_err(|reason| LoadError::Unusable {
            path: path.clone(),
            reason,
        })?;
        let install_dir = if candidate.contains('/') {
            Path::new(&candidate).parent().map(Path::to_path_buf)
        } else {
            Path::new(&path).parent().map(Path::to_path_buf)
        }
        .unwrap_or_default();
        Ok(Hip {
            fns,
            candidate,
            path,
            version,
            abi,
            install_dir,
            _lib: lib,
        })
    }

    /// Every expected symbol that did not resolve, with its group, in table order. Optional
    /// symbols and those a version never had are not "missing".
    pub fn missing(&self) -> Vec<(Group, &'static str)> {
        HIP_SYMBOLS
            .iter()
            .copied()
            .filter(|(_, n)| symbol_state(self.version, n, self.fns.has(n)) == SymbolState::Missing)
            .collect()
    }

    /// The optional symbols this version might have and this library does not export.
    pub fn optional_absent(&self) -> Vec<&'static str> {
        HIP_SYMBOLS
            .iter()
            .map(|(_, n)| *n)
            .filter(|n| {
                symbol_state(self.version, n, self.fns.has(n)) == SymbolState::OptionalAbsent
            })
            .collect()
    }

    /// The missing symbols of one group.
    pub fn missing_in(&self, group: Group) -> Vec<&'static str> {
        self.missing()
            .into_iter()
            .filter(|(g, _)| *g == group)
            .map(|(_, n)| n)
            .collect()
    }

    /// The error's name from hipGetErrorName, or `hipError <code>`.
    pub fn error_name(&self, rc: hipError_t) -> String {
        self.fns
            .hipGetErrorName
            .and_then(|f| {
                // SAFETY: returns a static NUL-terminated string (or null).
                unsafe { c_string(f(rc)) }
            })
            .unwrap_or_else(|| format!("hipError {rc}"))
    }

    /// hipGetDeviceCount: the count, or the code it returned.
    pub fn device_count(&self) -> Result<usize, hipError_t> {
        let f = self.fns.hipGetDeviceCount.ok_or(hipErrorNotSupported)?;
        let mut n: c_int = 0;
        // SAFETY: live out-parameter.
        let rc = unsafe { f(&mut n) };
        if rc == hipSuccess {
            Ok(n.max(0) as usize)
        } else {
            Err(rc)
        }
    }

    pub fn driver_version(&self) -> Option<i32> {
        let f = self.fns.hipDriverGetVersion?;
        let mut v: c_int = 0;
        // SAFETY: live out-parameter.
        (unsafe { f(&mut v) } == hipSuccess).then_some(v)
    }
}

/// An optional library (hiprtc, rocBLAS, rocSOLVER, HSA) opened with its table.
pub struct OptLib<T> {
    pub fns: T,
    pub path: String,
    pub missing: Vec<&'static str>,
    _lib: Library,
}

/// `sonames` in the install of `hip`, nothing else: one ROCm install per process.
pub fn install_candidates(hip: &Hip, sonames: &[&str]) -> Vec<String> {
    sonames
        .iter()
        .map(|so| hip.install_dir.join(so).display().to_string())
        .collect()
}

/// Open the first of `candidates` that exists, guarded against a second libamdhip64 or
/// libhsa-runtime64 in this process: refused before loading when the library's dynamic section
/// says it would bring one ([`install::preflight`]), and dropped again when /proc/self/maps
/// shows one afterwards ([`install::mixed_now`]). A refusal reads `mixed ROCm install: ...`.
fn open_opt<T>(
    candidates: &[String],
    what: &str,
    prefix: &str,
    list: &[(Group, &'static str)],
    resolve: fn(&Library) -> T,
    has: fn(&T, &str) -> bool,
) -> Result<OptLib<T>, String> {
    // Already mixed (an earlier library, or the application): nothing more is loaded.
    if let Some(mixed) = install::mixed_now() {
        return Err(mixed);
    }
    let mut tried = Vec::new();
    let mut opened = None;
    for c in candidates {
        let path = Path::new(c);
        if !path.exists() {
            tried.push(c.as_str());
            continue;
        }
        install::preflight(path)?;
        // SAFETY: loading a ROCm library runs its initialisers; that is the point.
        match unsafe { Library::new(path) } {
            Ok(lib) => {
                opened = Some((lib, c.clone()));
                break;
            }
            Err(e) => return Err(format!("{what}: {c}: {e}")),
        }
    }
    let Some((lib, candidate)) = opened else {
        return Err(format!("{what} not found (tried {})", tried.join(", ")));
    };
    if let Some(mixed) = install::mixed_now() {
        // Unload before anything in it is called; what stays mapped (a library marked
        // NODELETE) keeps every later open refused by the check above.
        drop(lib);
        return Err(format!("{mixed} after loading {candidate}"));
    }
    let fns = resolve(&lib);
    let missing = list
        .iter()
        .map(|(_, n)| *n)
        .filter(|n| !has(&fns, n))
        .collect();
    Ok(OptLib {
        fns,
        path: mapped_file(prefix).unwrap_or(candidate),
        missing,
        _lib: lib,
    })
}

/// libhiprtc of the install (soname of this HIP's major first), else the hiprtc inside
/// libamdhip64 itself. Both are built from the same tree at every tag read (module comment);
/// libhiprtc is preferred because it is the library HIP documents for hiprtc, and a missing one
/// (Debian's 5.2) falls back. A mixed install is refused, never worked around through the
/// fallback.
pub fn open_hiprtc(hip: &Hip) -> Result<OptLib<RtcFns>, String> {
    let own = format!("libhiprtc.so.{}", hip.version.major);
    let mut sonames = vec![own.as_str()];
    sonames.extend(
        ["libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5"]
            .into_iter()
            .filter(|s| *s != own),
    );
    let candidates = install_candidates(hip, &sonames);
    match open_opt(
        &candidates,
        "libhiprtc",
        "libhiprtc.so",
        RTC_SYMBOLS,
        RtcFns::resolve,
        RtcFns::has,
    ) {
        Ok(l) => Ok(l),
        Err(e) if e.starts_with("mixed ROCm install") => Err(e),
        Err(e) => {
            // SAFETY: the same file is already loaded; this only takes another reference.
            let lib = unsafe { Library::new(&hip.path) }.map_err(|x| format!("{e}; {x}"))?;
            let fns = RtcFns::resolve(&lib);
            if fns.hiprtcCreateProgram.is_none() {
                return Err(format!("{e}, and {} does not embed hiprtc", hip.path));
            }
            let missing = RTC_SYMBOLS
                .iter()
                .map(|(_, n)| *n)
                .filter(|n| !fns.has(n))
                .collect();
            Ok(OptLib {
                fns,
                path: hip.path.clone(),
                missing,
                _lib: lib,
            })
        }
    }
}

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

/// The HSA runtime (libhsa-runtime64.so.1; hsa_amd_portable_export_dmabuf from ROCm 5.6): the
/// install's, else the one libamdhip64 itself already pulled in (its DT_NEEDED, found by the
/// loader), which is the runtime HIP runs on. An install copy other than the mapped one is a
/// mixed install and refused before loading.
pub fn open_hsa(hip: &Hip) -> Result<OptLib<HsaFns>, String> {
    let mut candidates = install_candidates(hip, &["libhsa-runtime64.so.1"]);
    candidates.extend(install::mapped_files("libhsa-runtime64.so"));
    open_opt(
        &candidates,
        "libhsa-runtime64",
        "libhsa-runtime64.so",
        HSA_SYMBOLS,
        HsaFns::resolve,
        HsaFns::has,
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
    use std::mem::{align_of, offset_of, size_of};

    // Every value below was printed by gcc from the header's own definitions (x86-64).

    #[test]
    fn layout_external_memory_handle_desc_v6_v7() {
        // rocm-6.0.0 and amd-staging hip_runtime_api.h; also shared/DOMAIN.md.
        assert_eq!(size_of::<hipExternalMemoryHandleDesc>(), 104);
        assert_eq!(align_of::<hipExternalMemoryHandleDesc>(), 8);
        assert_eq!(offset_of!(hipExternalMemoryHandleDesc, type_), 0);
        assert_eq!(offset_of!(hipExternalMemoryHandleDesc, handle), 8);
        assert_eq!(offset_of!(hipExternalMemoryHandleDesc, size), 24);
        assert_eq!(offset_of!(hipExternalMemoryHandleDesc, flags), 32);
        assert_eq!(offset_of!(hipExternalMemoryHandleDesc, reserved), 36);
        assert_eq!(size_of::<hipExternalHandle>(), 16);
    }

    #[test]
    fn layout_external_memory_handle_desc_v5() {
        // rocm-5.2.3 hip_runtime_api.h.
        assert_eq!(size_of::<hipExternalMemoryHandleDescV5>(), 40);
        assert_eq!(offset_of!(hipExternalMemoryHandleDescV5, handle), 8);
        assert_eq!(offset_of!(hipExternalMemoryHandleDescV5, size), 24);
        assert_eq!(offset_of!(hipExternalMemoryHandleDescV5, flags), 32);
    }

    #[test]
    fn layout_external_memory_buffer_desc() {
        assert_eq!(size_of::<hipExternalMemoryBufferDesc>(), 88);
        assert_eq!(offset_of!(hipExternalMemoryBufferDesc, size), 8);
        assert_eq!(offset_of!(hipExternalMemoryBufferDesc, flags), 16);
        assert_eq!(offset_of!(hipExternalMemoryBufferDesc, reserved), 20);
        assert_eq!(size_of::<hipExternalMemoryBufferDescV5>(), 24);
        assert_eq!(offset_of!(hipExternalMemoryBufferDescV5, size), 8);
        assert_eq!(offset_of!(hipExternalMemoryBufferDescV5, flags), 16);
    }

    #[test]
    fn layout_external_semaphore_handle_desc() {
        assert_eq!(size_of::<hipExternalSemaphoreHandleDesc>(), 96);
        assert_eq!(offset_of!(hipExternalSemaphoreHandleDesc, handle), 8);
        assert_eq!(offset_of!(hipExternalSemaphoreHandleDesc, flags), 24);
        assert_eq!(offset_of!(hipExternalSemaphoreHandleDesc, reserved), 28);
        assert_eq!(size_of::<hipExternalSemaphoreHandleDescV5>(), 32);
        assert_eq!(offset_of!(hipExternalSemaphoreHandleDescV5, handle), 8);
        assert_eq!(offset_of!(hipExternalSemaphoreHandleDescV5, flags), 24);
    }

    #[test]
    fn layout_mem_allocation_prop_5_3_onwards() {
        assert_eq!(size_of::<hipMemAllocationProp>(), 32);
        assert_eq!(align_of::<hipMemAllocationProp>(), 8);
        assert_eq!(offset_of!(hipMemAllocationProp, type_), 0);
        assert_eq!(offset_of!(hipMemAllocationProp, requestedHandleType), 4);
        assert_eq!(offset_of!(hipMemAllocationProp, location), 8);
        assert_eq!(offset_of!(hipMemAllocationProp, win32HandleMetaData), 16);
        assert_eq!(offset_of!(hipMemAllocationProp, allocFlags), 24);
        assert_eq!(size_of::<hipMemAllocFlags>(), 4);
    }

    #[test]
    fn layout_mem_allocation_prop_5_2() {
        assert_eq!(size_of::<hipMemAllocationPropV52>(), 32);
        assert_eq!(offset_of!(hipMemAllocationPropV52, compressionType), 0);
        assert_eq!(offset_of!(hipMemAllocationPropV52, location), 4);
        assert_eq!(offset_of!(hipMemAllocationPropV52, requestedHandleType), 12);
        assert_eq!(offset_of!(hipMemAllocationPropV52, type_), 16);
        assert_eq!(offset_of!(hipMemAllocationPropV52, usage), 20);
        assert_eq!(offset_of!(hipMemAllocationPropV52, win32HandleMetaData), 24);
    }

    #[test]
    fn layout_location_access_uuid_ipc_complex() {
        assert_eq!(size_of::<hipMemLocation>(), 8);
        assert_eq!(align_of::<hipMemLocation>(), 4);
        assert_eq!(size_of::<hipMemAccessDesc>(), 12);
        assert_eq!(offset_of!(hipMemAccessDesc, flags), 8);
        assert_eq!(size_of::<hipUUID>(), 16);
        assert_eq!(size_of::<hipIpcMemHandle_t>(), 64);
        assert_eq!(align_of::<hipIpcMemHandle_t>(), 1);
        assert_eq!(size_of::<rocblas_float_complex>(), 8);
        assert_eq!(offset_of!(rocblas_float_complex, y), 4);
    }

    #[test]
    fn layout_pointer_attribute() {
        // Same in 5.2.3, 6.0.0 and amd-staging.
        assert_eq!(size_of::<hipPointerAttribute_t>(), 32);
        assert_eq!(offset_of!(hipPointerAttribute_t, device), 4);
        assert_eq!(offset_of!(hipPointerAttribute_t, devicePointer), 8);
        assert_eq!(offset_of!(hipPointerAttribute_t, hostPointer), 16);
        assert_eq!(offset_of!(hipPointerAttribute_t, isManaged), 24);
        assert_eq!(offset_of!(hipPointerAttribute_t, allocationFlags), 28);
    }

    #[test]
    fn device_prop_buffer_covers_every_known_layout() {
        // hipDeviceProp_t: 792 bytes (5.2.3); hipDeviceProp_tR0600: 1472 (6.0.0, amd-staging).
        const {
            assert!(DEVICE_PROP_BUFFER >= 1472 + 1024);
            assert!(GCN_ARCH_NAME_OFFSET_R0000 + 256 <= 792);
            assert!(GCN_ARCH_NAME_OFFSET_R0600 + 256 <= 1472);
        }
    }

    #[test]
    fn version_gates() {
        let v = HipVersion::decode(50_221_153);
        assert_eq!((v.major, v.minor, v.patch), (5, 2, 21153));
        assert_eq!(v.abi(), Ok(Abi::V5));
        assert!(v.legacy_alloc_prop());
        assert!(!v.may_have_ext_host_alloc());
        assert!(!v.has_vmm_attribute());
        let v = HipVersion::decode(60_342_134);
        assert_eq!(v.abi(), Ok(Abi::V6));
        assert!(!v.legacy_alloc_prop() && v.may_have_ext_host_alloc());
        assert!(!v.import_fd_by_value());
        let v = HipVersion::decode(70_100_000);
        assert_eq!(v.abi(), Ok(Abi::V7));
        assert!(v.import_fd_by_value());
        assert!(HipVersion::decode(40_500_000).abi().is_err());
        assert_eq!(Abi::V5.ipc_lazy_enable_peer_access(), 0);
        assert_eq!(Abi::V6.ipc_lazy_enable_peer_access(), 1);
        assert_eq!(Abi::V5.device_props().0, "hipGetDeviceProperties");
        assert_eq!(Abi::V7.device_props().0, "hipGetDevicePropertiesR0600");
    }

    #[test]
    fn vmm_attribute_exists_from_5_3() {
        // ROCm/HIP rocm-5.3.0 added hipDeviceAttributeVirtualMemoryManagementSupported (89).
        assert!(!HipVersion::decode(50_221_153).has_vmm_attribute());
        assert!(HipVersion::decode(50_322_062).has_vmm_attribute());
        assert!(HipVersion::decode(50_731_921).has_vmm_attribute());
        assert!(HipVersion::decode(60_032_830).has_vmm_attribute());
        assert_eq!(hipDeviceAttributeVirtualMemoryManagementSupported, 89);
    }

    #[test]
    fn ext_host_alloc_is_optional_never_missing() {
        let (v52, v63, v71) = (
            HipVersion::decode(50_221_153),
            HipVersion::decode(60_342_134),
            HipVersion::decode(70_151_831),
        );
        // 6.3+ without it (every released library found): shown as optional, not a defect.
        assert_eq!(
            symbol_state(v63, "hipExtHostAlloc", false),
            SymbolState::OptionalAbsent
        );
        assert_eq!(
            symbol_state(v71, "hipExtHostAlloc", false),
            SymbolState::OptionalAbsent
        );
        assert_eq!(
            symbol_state(v71, "hipExtHostAlloc", true),
            SymbolState::Present
        );
        // Before 6.3 it is not part of the version: nothing to say.
        assert_eq!(
            symbol_state(v52, "hipExtHostAlloc", false),
            SymbolState::NotInVersion
        );
        // A core symbol absent is still a defect; a generation's other props symbol is not.
        assert_eq!(symbol_state(v63, "hipMalloc", false), SymbolState::Missing);
        assert_eq!(
            symbol_state(v63, "hipGetDeviceProperties", false),
            SymbolState::NotInVersion
        );
        assert_eq!(
            symbol_state(v52, "hipGetDevicePropertiesR0600", false),
            SymbolState::NotInVersion
        );
        assert!(
            OPTIONAL_SYMBOLS
                .iter()
                .all(|n| HIP_SYMBOLS.iter().any(|(_, s)| s == n))
        );
    }

    #[test]
    fn memory_type_managed_is_4_in_5_3_to_5_7() {
        // ROCm/HIP rocm-5.3.0 .. rocm-5.7.1: hipMemoryTypeManaged = 4 after Unified = 3.
        assert_eq!(MemoryType::decode(Abi::V5, 4), MemoryType::Managed);
        assert_eq!(MemoryType::decode(Abi::V5, 3), MemoryType::Unified);
        // 6.0 renumbered: 4 means nothing there, Managed is 3.
        assert_eq!(MemoryType::decode(Abi::V6, 4), MemoryType::Unknown(4));
        assert_eq!(MemoryType::decode(Abi::V6, 3), MemoryType::Managed);
    }

    #[test]
    fn memory_type_renumbered_in_6_0() {
        assert_eq!(MemoryType::decode(Abi::V5, 1), MemoryType::Device);
        assert_eq!(MemoryType::decode(Abi::V6, 1), MemoryType::Host);
        assert_eq!(MemoryType::decode(Abi::V6, 2), MemoryType::Device);
        assert_eq!(MemoryType::decode(Abi::V7, 0), MemoryType::Unregistered);
        assert_eq!(MemoryType::decode(Abi::V6, 10), MemoryType::Array);
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

    #[test]
    fn hsa_status_names_per_header() {
        // ROCR-Runtime runtime/hsa-runtime/inc/hsa.h (hex) and hsa_ext_amd.h (decimal 40 ..).
        assert_eq!(hsa_status_name(0), "HSA_STATUS_SUCCESS");
        assert_eq!(hsa_status_name(0x1001), "HSA_STATUS_ERROR_INVALID_ARGUMENT");
        assert_eq!(
            hsa_status_name(0x1003),
            "HSA_STATUS_ERROR_INVALID_ALLOCATION"
        );
        assert_eq!(hsa_status_name(0x1004), "HSA_STATUS_ERROR_INVALID_AGENT");
        assert_eq!(hsa_status_name(0x1008), "HSA_STATUS_ERROR_OUT_OF_RESOURCES");
        assert_eq!(hsa_status_name(0x100A), "HSA_STATUS_ERROR_RESOURCE_FREE");
        assert_eq!(hsa_status_name(0x100B), "HSA_STATUS_ERROR_NOT_INITIALIZED");
        assert_eq!(hsa_status_name(0x1017), "HSA_STATUS_ERROR_INVALID_ISA_NAME");
        assert_eq!(hsa_status_name(40), "HSA_STATUS_ERROR_INVALID_MEMORY_POOL");
        assert_eq!(hsa_status_name(43), "HSA_STATUS_ERROR_MEMORY_FAULT");
        assert_eq!(hsa_status_name(46), "HSA_STATUS_ERROR_RESOURCE_BUSY");
        // hsa_ext_amd.h of the 7.x line (rocm-systems projects/rocr-runtime, Aug 2025).
        assert_eq!(hsa_status_name(47), "HSA_STATUS_ERROR_NOT_SUPPORTED");
        assert_eq!(hsa_status_name(48), "hsa_status_t 0x30");
        assert_eq!(hsa_status_name(0x40), "hsa_status_t 0x40");
        assert_eq!(hsa_status_name(0x1027), "hsa_status_t 0x1027");
    }

    #[test]
    fn hsa_table_has_the_dmabuf_export_pair() {
        for n in [
            "hsa_init",
            "hsa_shut_down",
            "hsa_amd_portable_export_dmabuf",
            "hsa_amd_portable_close_dmabuf",
        ] {
            assert!(HSA_SYMBOLS.iter().any(|(_, s)| *s == n), "{n}");
        }
    }

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
