//! OpenCL's memory into HIP: the HSA runtime's dma-buf export of an OpenCL allocation, imported
//! with hipImportExternalMemory.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr::null_mut;

use crate::model::{CaseError, Phase};
use crate::runtimes::gpu::GpuCore;

use super::HipPeer;
use super::ffi::{self, Group, HsaFns};
use super::handles::{HsaRuntime, hsa_check};
use super::status::{hip_call, lacks, need};

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
