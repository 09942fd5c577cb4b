//! OpenCL's failures as [`ApiError`]s that name the call, and how a refusal is judged: a
//! driver's failure (it refused what it advertises) or an honest absence.

use crate::model::{Api, ApiError, CaseError};

/// Build an [`ApiError`] for an OpenCL call; the name comes from the Khronos code table.
pub fn cl_error(call: &str, code: i32) -> ApiError {
    ApiError {
        api: Api::OpenCl,
        call: call.to_string(),
        code: code as i64,
        name: cl3::error_codes::error_text(code).to_string(),
        detail: String::new(),
    }
}

/// Attach the call name to a cl3/opencl3 result.
pub trait ClResultExt<T> {
    fn call(self, name: &str) -> Result<T, ApiError>;
}

impl<T> ClResultExt<T> for Result<T, i32> {
    fn call(self, name: &str) -> Result<T, ApiError> {
        crate::calls::record(name);
        self.map_err(|code| cl_error(name, code))
    }
}

impl<T> ClResultExt<T> for Result<T, opencl3::error_codes::ClError> {
    fn call(self, name: &str) -> Result<T, ApiError> {
        self.map_err(|e| e.0).call(name)
    }
}

/// A refusal of what the device advertises (`advertised`: the query and the answer that said
/// so): the driver's failure, not an absence, so `Broken` (a `fail`), unless it is a device
/// fault. Only a capability the device does not advertise is unsupported when refused.
pub fn refused_although_advertised(mut e: ApiError, advertised: &str) -> CaseError {
    if e.is_device_fault() {
        return CaseError::Fault(e);
    }
    e.detail = if e.detail.is_empty() {
        format!("although {advertised}")
    } else {
        format!("{}, although {advertised}", e.detail)
    };
    CaseError::Broken(e)
}

/// A refused import (`e`; `what` was refused) of a handle of type `handle` (name, value), with
/// `listed` the handle types the device answered to `query_name`: refused although listed is
/// the driver's failure; not listed, or the list unknown, unsupported. The extension alone
/// names no handle type: the device's list does.
pub fn import_refusal(
    e: ApiError,
    what: &str,
    query_name: &str,
    (handle_name, handle): (&str, u32),
    listed: Result<Vec<u32>, ApiError>,
) -> CaseError {
    let why = match listed {
        Ok(types) if types.contains(&handle) => {
            return refused_although_advertised(e, &format!("{query_name} lists {handle_name}"));
        }
        Ok(types) => format!("{handle_name} is not in its {query_name}: {types:#x?}"),
        Err(q) => format!("its {query_name} unknown: {q}"),
    };
    if e.is_device_fault() {
        return CaseError::Fault(e);
    }
    CaseError::Unsupported {
        reason: format!("{what} ({why})"),
        error: Some(e),
    }
}
