//! OpenCL, through opencl3/cl3 with the ICD loader opened at run time. This is the thin safe
//! layer the paths and ops use: device enumeration with stable labels, raw device queries, a
//! session (context, in-order queue, the harness's program), memory that is either a `cl_mem`
//! or an SVM pointer, and kernel launches. Every failing call becomes an [`ApiError`] naming
//! the call, so a refusal or a fault reaches the report with its code.
//!
//! One file per concern: `error` (every call's [`ApiError`]: [`cl_error`], [`ClResultExt`],
//! and how a refusal is judged), `vendors` (the ICDs the environment lists), `devices`
//! (enumeration and labels), `query` (device and platform queries, SVM capabilities),
//! `program` (the kernel sources and their build), `session` (context, queue, memory, events,
//! launches), `extensions` (per-platform entry points) and `semaphore` (imported semaphores).
//! Everything public is re-exported here, so `runtimes::opencl::X` paths stay.
//!
//! [`ApiError`]: crate::model::ApiError

mod devices;
mod error;
mod extensions;
mod program;
mod query;
mod semaphore;
mod session;
mod vendors;

pub use cl3::device as cl_device;
pub use opencl3::types;

#[cfg(test)]
pub(crate) use devices::unit_test_device;
pub use devices::{ClDevice, enumerate, family, test_device};
pub use error::{ClResultExt, cl_error, import_refusal, refused_although_advertised};
pub use extensions::{ExternalMemFn, ExternalMemoryFns};
pub use program::KERNEL_SOURCES;
pub use query::{SvmCaps, device_bytes, device_string, device_u32s, device_u64, platform_string};
pub use semaphore::{ClSemaphore, WaitedEvent};
pub use session::{ClArg, ClEvent, ClMem, ClSession, SessionError};
pub use vendors::{
    DEFAULT_VENDOR_DIR, VendorLibrary, no_vendor_reason, no_vendor_reason_from, single_vendor_env,
    vendor_libraries, vendor_libraries_from,
};

#[cfg(test)]
mod tests;
