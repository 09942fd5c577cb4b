//! What the peer holds and releases on drop: a temporary hipMalloc buffer, the rocBLAS handle on
//! its stream, and its reference to the HSA runtime, with the status checks they share with the
//! peer's calls. Below the peer (mod.rs), which holds them, and below memory.rs, blas.rs and
//! interop.rs, which make the peer's calls with them.

use std::ffi::c_void;
use std::ptr::null_mut;

use crate::model::{Api, ApiError, CaseError, Phase};

use super::ffi::{
    self, BlasFns, Hip, HsaFns, OptLib, hipError_t, hipStream_t, hsa_status_t, rocblas_handle,
    rocblas_status,
};
use super::load::open_blas;
use super::status::{hip_call, need};

/// A temporary hipMalloc allocation, freed on every path out of the scope that made it.
pub(super) struct DeviceBuffer {
    pub(super) ptr: *mut c_void,
    free: unsafe extern "C" fn(*mut c_void) -> hipError_t,
}

impl DeviceBuffer {
    pub(super) fn new(hip: &Hip, bytes: usize, what: &str) -> Result<DeviceBuffer, CaseError> {
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

/// A rocBLAS / rocSOLVER status (rocSOLVER returns rocblas_status) as an [`ApiError`].
pub(super) fn blas_check(
    call: &str,
    s: rocblas_status,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    crate::calls::record(call);
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

/// A rocBLAS handle on the peer's stream. Created on the first cgemm or cpotrf (rocSOLVER works
/// through a rocBLAS handle): a machine without rocBLAS loses gemm and cholesky, not the
/// participant.
pub(super) struct BlasHandle {
    pub(super) handle: rocblas_handle,
    pub(super) lib: OptLib<BlasFns>,
}

impl BlasHandle {
    pub(super) fn create(hip: &Hip, stream: hipStream_t) -> Result<BlasHandle, CaseError> {
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

/// An HSA status as an [`ApiError`] (api `Hip`: HSA is ROCm's layer under HIP), named after
/// hsa.h / hsa_ext_amd.h.
pub(super) fn hsa_check(
    call: &str,
    s: hsa_status_t,
    detail: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    crate::calls::record(call);
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
pub(super) fn open_hsa_export(hip: &Hip) -> Result<OptLib<HsaFns>, CaseError> {
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
pub(super) struct HsaRuntime {
    pub(super) lib: OptLib<HsaFns>,
}

impl HsaRuntime {
    pub(super) fn open(hip: &Hip) -> Result<HsaRuntime, CaseError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    /// before anything is called. Where the HSA runtime has the export there is nothing to see.
    #[test]
    #[cfg_attr(
        not(clhip_test_hip),
        ignore = "needs libamdhip64; none was found when this was built"
    )]
    fn import_cl_memory_names_a_missing_dmabuf_export() {
        let hip = Hip::load(None).expect("libamdhip64 was found when this was built");
        let lib = ffi::open_hsa(&hip).expect("libamdhip64 loads, and its HSA runtime with it");
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
}
