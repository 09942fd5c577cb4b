//! The four libraries, opened where cudarc will look for them and checked for every symbol
//! this module calls, before cudarc's own loader can panic on one missing; and their versions,
//! read from calls that need no device.

use std::ffi::{c_int, c_void};
use std::path::PathBuf;

use cudarc::cublas::sys as blas;
use cudarc::cusolver::sys as solver;
use cudarc::nvrtc::sys as rtc;
use libloading::Library;

use super::error::call;
use crate::model::CaseError;
use crate::runtimes::locate::open_first;

/// One of the four libraries: the soname this build expects (what a message names), cudarc's
/// base names for it, whether to look beyond the loader path, and every function this module
/// calls from it through cudarc.
pub(super) struct LibSpec {
    soname: &'static str,
    stems: &'static [&'static str],
    /// Toolkit libraries often sit in `$CUDA_HOME/lib64` off the loader path; libcuda ships
    /// with the kernel driver and is always on it.
    search_toolkit_dirs: bool,
    symbols: &'static [&'static str],
}

pub(super) const LIBCUDA: LibSpec = LibSpec {
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
        "cuDeviceCanAccessPeer",
        "cuCtxEnablePeerAccess",
        "cuStreamCreate",
        "cuStreamDestroy_v2",
        "cuStreamSynchronize",
        "cuStreamQuery",
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
        "cuMemHostRegister_v2",
        "cuMemHostGetDevicePointer_v2",
        "cuMemHostUnregister",
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
        "cuImportExternalMemory",
        "cuExternalMemoryGetMappedBuffer",
        "cuDestroyExternalMemory",
        "cuImportExternalSemaphore",
        "cuDestroyExternalSemaphore",
        "cuSignalExternalSemaphoresAsync",
        "cuWaitExternalSemaphoresAsync",
        "cuGetErrorName",
    ],
};

pub(super) const LIBNVRTC: LibSpec = LibSpec {
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

pub(super) const LIBCUBLAS: LibSpec = LibSpec {
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
pub(super) const LIBCUSOLVER: LibSpec = LibSpec {
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
pub(super) struct VendorLib {
    pub(super) lib: Library,
    pub(super) path: String,
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
    pub(super) fn open(spec: &LibSpec) -> Result<VendorLib, CaseError> {
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
        let path = crate::runtimes::locate::mapped_file(spec.stems[0]).unwrap_or(path);
        Ok(VendorLib { lib, path })
    }
}

fn unavailable(e: CaseError) -> String {
    match e {
        CaseError::Unsupported { reason, .. } => format!("unavailable: {reason}"),
        other => format!("unavailable: {other:?}"),
    }
}

/// `NAME major.minor.patch (path)`, or why the library is unavailable. Versions come from
/// calls that need no handle and no device.
pub(super) fn library_version(spec: &LibSpec, label: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::device::IpcHandle;
    use cudarc::driver::sys as cu;

    /// Every cudarc `sys` function this module calls must be in its library's preflight list,
    /// or a library lacking it would panic inside cudarc instead of reporting `unsupported`.
    #[test]
    fn every_called_symbol_is_checked_before_use() {
        // Every file of the module, so that a call moved from one to another is still seen; a
        // file added beside them but not here fails the test rather than escaping it.
        let files = [
            ("mod.rs", include_str!("mod.rs")),
            ("load.rs", include_str!("load.rs")),
            ("error.rs", include_str!("error.rs")),
            ("discover.rs", include_str!("discover.rs")),
            ("kernels.rs", include_str!("kernels.rs")),
            ("blas.rs", include_str!("blas.rs")),
            ("memory.rs", include_str!("memory.rs")),
            ("handles.rs", include_str!("handles.rs")),
            ("probe.rs", include_str!("probe.rs")),
        ];
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/runtimes/cuda");
        if let Ok(entries) = std::fs::read_dir(dir) {
            for name in entries.flatten().map(|e| e.file_name()) {
                let name = name.to_string_lossy();
                let listed = files.iter().any(|(f, _)| *f == name);
                assert!(listed || !name.ends_with(".rs"), "{name} is not scanned");
            }
        }
        let all: String = files.map(|(_, text)| text).concat();
        let src = all.as_str();
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
            // And the other way: the list names nothing this module no longer calls.
            let listed: std::collections::BTreeSet<String> =
                spec.symbols.iter().map(|s| s.to_string()).collect();
            assert_eq!(called, listed, "{}", spec.soname);
        }
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
            "cuImportExternalMemory",
            "cuExternalMemoryGetMappedBuffer",
            "cuSignalExternalSemaphoresAsync",
            "cuWaitExternalSemaphoresAsync",
        ] {
            assert!(LIBCUDA.symbols.contains(&s), "{s}");
        }
        // And the IPC handle is the trait's 64 bytes.
        assert_eq!(size_of::<cu::CUipcMemHandle>(), size_of::<IpcHandle>());
    }
}
