//! Extension entry points, looked up per platform: cl_khr_external_memory's acquire and
//! release.

use std::ffi::c_void;

use opencl3::types::{self, cl_event, cl_mem, cl_platform_id};

use super::error::cl_error;
use crate::model::ApiError;

/// `clEnqueue{Acquire,Release}ExternalMemObjectsKHR` (cl_khr_external_memory).
pub type ExternalMemFn = unsafe extern "C" fn(
    types::cl_command_queue,
    u32,
    *const cl_mem,
    u32,
    *const cl_event,
    *mut cl_event,
) -> i32;

/// Extension entry points, resolved for one platform with
/// clGetExtensionFunctionAddressForPlatform: an ICD loader need not export extension functions
/// itself, and the platform's own are the ones that know its objects.
#[derive(Debug, Clone, Copy)]
pub struct ExternalMemoryFns {
    pub acquire: ExternalMemFn,
    pub release: ExternalMemFn,
}

impl ExternalMemoryFns {
    pub fn resolve(platform: cl_platform_id) -> Result<Self, ApiError> {
        let lookup = extension_functions(platform)?;
        // SAFETY: the platform returned each entry point for exactly this name, whose C
        // signature (cl_ext.h) is ExternalMemFn.
        unsafe {
            Ok(ExternalMemoryFns {
                acquire: std::mem::transmute::<*mut c_void, ExternalMemFn>(lookup(
                    "clEnqueueAcquireExternalMemObjectsKHR",
                )?),
                release: std::mem::transmute::<*mut c_void, ExternalMemFn>(lookup(
                    "clEnqueueReleaseExternalMemObjectsKHR",
                )?),
            })
        }
    }
}

/// An extension function that is not there, as an error naming it.
fn missing_function(name: &str, why: String) -> ApiError {
    let mut e = cl_error(name, 0);
    e.name = "NOT_FOUND".into();
    e.detail = why;
    e
}

/// Looks up extension entry points of `platform` by name with
/// clGetExtensionFunctionAddressForPlatform: a null answer is an error naming the function.
pub(super) fn extension_functions(
    platform: cl_platform_id,
) -> Result<impl Fn(&str) -> Result<*mut c_void, ApiError>, ApiError> {
    type GetAddr = unsafe extern "C" fn(cl_platform_id, *const std::ffi::c_char) -> *mut c_void;
    // SAFETY: the same loader cl3 opened; dlopen of a loaded library only adds a reference.
    let lib = unsafe { libloading::Library::new("libOpenCL.so.1") }
        .map_err(|e| missing_function("libOpenCL.so.1", e.to_string()))?;
    // SAFETY: the C signature from cl_ext.h.
    let get: GetAddr =
        *unsafe { lib.get::<GetAddr>(b"clGetExtensionFunctionAddressForPlatform\0") }.map_err(
            |e| missing_function("clGetExtensionFunctionAddressForPlatform", e.to_string()),
        )?;
    // The loader stays loaded for the process (cl3 holds it); keep our reference too so the
    // entry points can never dangle.
    std::mem::forget(lib);
    Ok(move |name: &str| {
        let c = std::ffi::CString::new(name).expect("no NUL in a function name");
        // SAFETY: a valid platform and a NUL-terminated name.
        let p = unsafe { get(platform, c.as_ptr()) };
        if p.is_null() {
            return Err(missing_function(
                name,
                "the platform does not provide it".into(),
            ));
        }
        Ok(p)
    })
}
