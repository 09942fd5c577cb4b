//! libamdhip64 (ROCm/HIP `include/hip/hip_runtime_api.h`): scalar types, enum values, the
//! structs that cross the boundary, the version gate that picks their layout, and the symbol table.
//!
//! ABI gates found in the headers (ROCm/HIP `include/hip/hip_runtime_api.h` unless said):
//! - 5.3.0: `hipMemAllocationProp` reordered (5.2: `compressionType@0, location@4,
//!   requestedHandleType@12, type@16, usage@20, win32HandleMetaData@24`; 5.3+: `type@0,
//!   requestedHandleType@4, location@8, win32HandleMetaData@16, allocFlags@24`). Same size, 32.
//! - 6.0.0: `hipExternalSemaphoreSignalParams` and `hipExternalSemaphoreWaitParams` gained an
//!   `nvSciSync` union (8 bytes) inside `params`, before `keyedMutex`: 136 -> 144 bytes, `flags`
//!   at 64 -> 72.
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
//! - 7.1: `hipMemImportFromShareableHandle` is said (docs/rocm.md#the-abi-by-version) to take the fd by value.
//!   NOT verified: every header read here (5.2 .. 7.0) declares `void* osHandle`. Kept as a gate
//!   ([`Abi::import_fd_by_value`]) but no code path calls the import yet.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

use libloading::Library;

use crate::runtimes::locate::hip_version;

use super::table::{Cvp, Group, Vp};

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

/// hipError_t values used by name (hip_runtime_api.h, `enum hipError_t`; unchanged 5.2 .. 7.0).
pub const hipSuccess: hipError_t = 0;
pub const hipErrorInvalidValue: hipError_t = 1;
pub const hipErrorNoDevice: hipError_t = 100;
pub const hipErrorInvalidDevice: hipError_t = 101;
pub const hipErrorNotReady: hipError_t = 600;
pub const hipErrorIllegalAddress: hipError_t = 700;
pub const hipErrorPeerAccessAlreadyEnabled: hipError_t = 704;
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
/// hipHostRegister flags (hip_runtime_api.h): Portable 0x1, Mapped 0x2.
pub const hipHostRegisterPortable: c_uint = 0x1;
pub const hipHostRegisterMapped: c_uint = 0x2;
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
/// hipExternalMemoryHandleDesc flag for a dedicated allocation (`#define hipExternalMemoryDedicated
/// 0x1`, hip_runtime_api.h from rocm-5.7; clr accepts 0 or exactly this).
pub const hipExternalMemoryDedicated: c_uint = 0x1;
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

/// hip_runtime_api.h at rocm-6.0.0 .. amd-staging: `hipExternalSemaphoreSignalParams_st { struct
/// { struct { unsigned long long value; } fence; union { void* fence; unsigned long long
/// reserved; } nvSciSync; struct { unsigned long long key; } keyedMutex; unsigned int
/// reserved[12]; } params; unsigned int flags; unsigned int reserved[16]; }`: 144 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipExternalSemaphoreSignalParams {
    pub fence_value: c_ulonglong,
    pub nv_sci_sync: c_ulonglong,
    pub keyed_mutex_key: c_ulonglong,
    pub params_reserved: [c_uint; 12],
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// hip_runtime_api.h at rocm-5.2.3 .. 5.7.1: the same without `nvSciSync`: 136 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipExternalSemaphoreSignalParamsV5 {
    pub fence_value: c_ulonglong,
    pub keyed_mutex_key: c_ulonglong,
    pub params_reserved: [c_uint; 12],
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// hip_runtime_api.h at rocm-6.0.0 .. amd-staging: `hipExternalSemaphoreWaitParams_st { struct
/// { struct { unsigned long long value; } fence; union { .. } nvSciSync; struct { unsigned long
/// long key; unsigned int timeoutMs; } keyedMutex; unsigned int reserved[10]; } params;
/// unsigned int flags; unsigned int reserved[16]; }`: 144 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipExternalSemaphoreWaitParams {
    pub fence_value: c_ulonglong,
    pub nv_sci_sync: c_ulonglong,
    pub keyed_mutex: hipKeyedMutexWait,
    pub params_reserved: [c_uint; 10],
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// hip_runtime_api.h at rocm-5.2.3 .. 5.7.1: the same without `nvSciSync`: 136 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipExternalSemaphoreWaitParamsV5 {
    pub fence_value: c_ulonglong,
    pub keyed_mutex: hipKeyedMutexWait,
    pub params_reserved: [c_uint; 10],
    pub flags: c_uint,
    pub reserved: [c_uint; 16],
}

/// The wait parameters' `struct { unsigned long long key; unsigned int timeoutMs; }
/// keyedMutex`: 16 bytes with its padding.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipKeyedMutexWait {
    pub key: c_ulonglong,
    pub timeout_ms: c_uint,
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

    /// 7.1+: the fd is passed as the `void*` value itself (docs/rocm.md#the-abi-by-version; unverified here).
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
    Core hipDeviceCanAccessPeer: fn(*mut c_int, c_int, c_int) -> hipError_t;
    Core hipDeviceEnablePeerAccess: fn(c_int, c_uint) -> hipError_t;
    Core hipGetErrorName: fn(hipError_t) -> *const c_char;
    Core hipMalloc: fn(*mut Vp, usize) -> hipError_t;
    Core hipFree: fn(Vp) -> hipError_t;
    Core hipHostFree: fn(Vp) -> hipError_t;
    Core hipHostRegister: fn(Vp, usize, c_uint) -> hipError_t;
    Core hipHostGetDevicePointer: fn(*mut Vp, Vp, c_uint) -> hipError_t;
    Core hipHostUnregister: fn(Vp) -> hipError_t;
    Core hipMallocManaged: fn(*mut Vp, usize, c_uint) -> hipError_t;
    Core hipMemGetInfo: fn(*mut usize, *mut usize) -> hipError_t;
    Core hipMemcpy: fn(Vp, Cvp, usize, c_int) -> hipError_t;
    Core hipMemcpyAsync: fn(Vp, Cvp, usize, c_int, hipStream_t) -> hipError_t;
    Core hipStreamCreate: fn(*mut hipStream_t) -> hipError_t;
    Core hipStreamSynchronize: fn(hipStream_t) -> hipError_t;
    Core hipStreamQuery: fn(hipStream_t) -> hipError_t;
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
    ExternalSemaphore hipSignalExternalSemaphoresAsync: fn(*const hipExternalSemaphore_t, Cvp, c_uint, hipStream_t) -> hipError_t;
    ExternalSemaphore hipWaitExternalSemaphoresAsync: fn(*const hipExternalSemaphore_t, Cvp, c_uint, hipStream_t) -> hipError_t;
    Ipc hipIpcGetMemHandle: fn(*mut hipIpcMemHandle_t, Vp) -> hipError_t;
    Ipc hipIpcOpenMemHandle: fn(*mut Vp, hipIpcMemHandle_t, c_uint) -> hipError_t;
    Ipc hipIpcCloseMemHandle: fn(Vp) -> hipError_t;
});

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    // Every value below was printed by gcc from the header's own definitions (x86-64).

    #[test]
    fn layout_external_memory_handle_desc_v6_v7() {
        // rocm-6.0.0 and amd-staging hip_runtime_api.h (docs/rocm.md#the-abi-by-version).
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
    fn layout_external_semaphore_signal_and_wait_params() {
        // gcc printed these from the rocm-5.7.1 and rocm-6.0.0 headers' own definitions.
        // rocm-6.0.0 .. amd-staging: params 72 bytes (fence, nvSciSync, keyedMutex,
        // reserved[12] / keyedMutex with timeoutMs, reserved[10]), flags @72, reserved @76.
        assert_eq!(size_of::<hipExternalSemaphoreSignalParams>(), 144);
        assert_eq!(align_of::<hipExternalSemaphoreSignalParams>(), 8);
        assert_eq!(offset_of!(hipExternalSemaphoreSignalParams, nv_sci_sync), 8);
        assert_eq!(
            offset_of!(hipExternalSemaphoreSignalParams, keyed_mutex_key),
            16
        );
        assert_eq!(
            offset_of!(hipExternalSemaphoreSignalParams, params_reserved),
            24
        );
        assert_eq!(offset_of!(hipExternalSemaphoreSignalParams, flags), 72);
        assert_eq!(offset_of!(hipExternalSemaphoreSignalParams, reserved), 76);
        assert_eq!(size_of::<hipExternalSemaphoreWaitParams>(), 144);
        assert_eq!(offset_of!(hipExternalSemaphoreWaitParams, keyed_mutex), 16);
        assert_eq!(
            offset_of!(hipExternalSemaphoreWaitParams, params_reserved),
            32
        );
        assert_eq!(offset_of!(hipExternalSemaphoreWaitParams, flags), 72);
        assert_eq!(offset_of!(hipExternalSemaphoreWaitParams, reserved), 76);
        assert_eq!(size_of::<hipKeyedMutexWait>(), 16);
        // rocm-5.2.3 .. 5.7.1: no nvSciSync, params 64 bytes, flags @64, reserved @68.
        assert_eq!(size_of::<hipExternalSemaphoreSignalParamsV5>(), 136);
        assert_eq!(
            offset_of!(hipExternalSemaphoreSignalParamsV5, keyed_mutex_key),
            8
        );
        assert_eq!(offset_of!(hipExternalSemaphoreSignalParamsV5, flags), 64);
        assert_eq!(offset_of!(hipExternalSemaphoreSignalParamsV5, reserved), 68);
        assert_eq!(size_of::<hipExternalSemaphoreWaitParamsV5>(), 136);
        assert_eq!(offset_of!(hipExternalSemaphoreWaitParamsV5, keyed_mutex), 8);
        assert_eq!(offset_of!(hipExternalSemaphoreWaitParamsV5, flags), 64);
        assert_eq!(offset_of!(hipExternalSemaphoreWaitParamsV5, reserved), 68);
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
    fn layout_location_access_uuid_ipc() {
        assert_eq!(size_of::<hipMemLocation>(), 8);
        assert_eq!(align_of::<hipMemLocation>(), 4);
        assert_eq!(size_of::<hipMemAccessDesc>(), 12);
        assert_eq!(offset_of!(hipMemAccessDesc, flags), 8);
        assert_eq!(size_of::<hipUUID>(), 16);
        assert_eq!(size_of::<hipIpcMemHandle_t>(), 64);
        assert_eq!(align_of::<hipIpcMemHandle_t>(), 1);
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
}
