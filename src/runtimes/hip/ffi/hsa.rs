//! The HSA runtime (ROCm/ROCR-Runtime `hsa.h`, `hsa_ext_amd.h`): the layer under HIP whose
//! dma-buf export hands OpenCL's allocations to HIP.

use std::ffi::c_int;

use libloading::Library;

use super::loader::{Hip, OptLib, install_candidates, open_opt};
use super::table::{Cvp, Group};
use crate::runtimes::hip::install;

/// hsa.h `typedef enum { .. } hsa_status_t`: an int-sized enum.
pub type hsa_status_t = c_int;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
