//! OpenCL's memory into HIP: the HSA runtime's dma-buf export of an OpenCL allocation, imported
//! with hipImportExternalMemory.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr::null_mut;

use crate::model::{Api, ApiError, CaseError, Phase};
use crate::runtimes::gpu::GpuCore;

use super::HipPeer;
use super::ffi::{self, Group, Hip, HsaFns, OptLib, hsa_status_t};
use super::status::{hip_call, lacks, need};

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
pub(super) struct HsaRuntime {
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

impl HipPeer {
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
    /// bytes wanted), then hipExternalMemoryGetMappedBuffer of `bytes` at `offset`. Returns the
    /// mapped address and the external-memory object; a refused mapping destroys the import.
    fn import_dmabuf(
        &self,
        fd: c_int,
        offset: u64,
        bytes: usize,
    ) -> Result<(usize, ffi::hipExternalMemory_t), CaseError> {
        let size = offset
            .checked_add(bytes as u64)
            .ok_or_else(|| CaseError::unsupported("dma-buf offset + size overflows"))?;
        let ext = self.import_external_memory(fd, size, 0, "the dma-buf")?;
        let mapped = self.map_external_buffer(ext, offset, bytes)?;
        Ok((mapped, ext))
    }

    /// hipImportExternalMemory of an opaque fd (a dma-buf on ROCm) of `size` bytes, in the
    /// generation's descriptor layout (6.0 appended `reserved[16]`); `flags` 0 or
    /// hipExternalMemoryDedicated. `what` names the fd in the refusal.
    pub(super) fn import_external_memory(
        &self,
        fd: c_int,
        size: u64,
        flags: c_uint,
        what: &str,
    ) -> Result<ffi::hipExternalMemory_t, CaseError> {
        let hip = &self.hip;
        let handle = ffi::hipExternalHandle::from_fd(fd);
        let ty = ffi::hipExternalMemoryHandleTypeOpaqueFd;
        let desc = ffi::hipExternalMemoryHandleDesc {
            type_: ty,
            handle,
            size,
            flags,
            reserved: [0; 16],
        };
        let desc_v5 = ffi::hipExternalMemoryHandleDescV5 {
            type_: ty,
            handle,
            size,
            flags,
        };
        let desc_ptr: *const c_void = if hip.abi.descriptor_has_reserved() {
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
                "fd {fd}, {size} bytes, flags {flags:#x}"
            )
        }
        .refused(&format!("hipImportExternalMemory refused {what}"))?;
        Ok(ext)
    }

    /// hipExternalMemoryGetMappedBuffer of `bytes` at `offset` of an import, in the generation's
    /// descriptor layout; a refused mapping destroys the import.
    pub(super) fn map_external_buffer(
        &self,
        ext: ffi::hipExternalMemory_t,
        offset: u64,
        bytes: usize,
    ) -> Result<usize, CaseError> {
        let hip = &self.hip;
        let reserved = hip.abi.descriptor_has_reserved();
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
        Ok(p as usize)
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
    /// Returns the mapped address and the external-memory object.
    pub(super) fn import_cl_dmabuf(
        &mut self,
        addr: usize,
        bytes: usize,
    ) -> Result<(usize, u64), CaseError> {
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
        Ok((mapped, ext as u64))
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
}
