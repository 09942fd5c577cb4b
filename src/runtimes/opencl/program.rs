//! The harness's OpenCL program: its kernel sources, built for a device or taken from the
//! kernel cache.

use opencl3::context::Context;
use opencl3::program::Program;

use super::devices::ClDevice;
use super::error::cl_error;
use super::query::device_string;
use crate::model::ApiError;
use crate::runtimes::kernel_cache::{CompileKey, KernelCache};

/// The harness's OpenCL C sources, embedded so the binary carries them to a GPU machine.
pub const KERNEL_SOURCES: &[(&str, &str)] = &[
    ("pattern.cl", include_str!("../../../kernels/pattern.cl")),
    (
        "elementwise.cl",
        include_str!("../../../kernels/elementwise.cl"),
    ),
    ("fft.cl", include_str!("../../../kernels/fft.cl")),
];

/// The session's program: from the kernel cache's binary when it has a valid one the device
/// takes, else built from source (and its binary stored for the next worker). The error is the
/// driver's refusal to build valid OpenCL C, with its build log.
pub(super) fn build_program(
    context: &Context,
    device: &ClDevice,
    source: &str,
) -> Result<Program, ApiError> {
    let query = |param| device_string(device.id, param).unwrap_or_default();
    let (driver, version) = (
        query(cl3::device::CL_DRIVER_VERSION),
        query(cl3::device::CL_DEVICE_VERSION),
    );
    let compiler = format!("{} ({version})", device.platform_name);
    let key = CompileKey {
        compiler: &compiler,
        target: &device.name,
        driver: &driver,
        options: "",
        source,
    };
    let cache = KernelCache::from_env();
    if let Some(binary) = cache.lookup(&key) {
        match Program::create_and_build_from_binary(context, &[&binary], "") {
            Ok(program) => return Ok(program),
            Err(_) => cache.forget(&key),
        }
    }
    let program = Program::create_and_build_from_source(context, source, "").map_err(|log| {
        let mut e = cl_error("clBuildProgram", cl3::error_codes::CL_BUILD_PROGRAM_FAILURE);
        e.detail = log.chars().take(2000).collect();
        e
    })?;
    if let Ok(binaries) = program.get_binaries()
        && let [binary] = binaries.as_slice()
    {
        cache.store(&key, binary);
    }
    Ok(program)
}
