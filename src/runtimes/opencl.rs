//! OpenCL, through opencl3/cl3 with the ICD loader opened at run time. This is the thin safe
//! layer the paths and ops use: device enumeration with stable labels, raw device queries, a
//! session (context, in-order queue, the harness's program), memory that is either a `cl_mem`
//! or an SVM pointer, and kernel launches. Every failing call becomes an [`ApiError`] naming
//! the call, so a refusal or a fault reaches the report with its code.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::kernel::Kernel;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, cl_event, cl_mem, cl_platform_id};

use crate::model::{Api, ApiError, CaseError, ClDeviceRef};
use crate::runtimes::kernel_cache::{CompileKey, KernelCache};

pub use cl3::device as cl_device;
pub use opencl3::types;

/// The harness's OpenCL C sources, embedded so the binary carries them to a GPU machine.
pub const KERNEL_SOURCES: &[(&str, &str)] = &[
    ("pattern.cl", include_str!("../../kernels/pattern.cl")),
    (
        "elementwise.cl",
        include_str!("../../kernels/elementwise.cl"),
    ),
    ("fft.cl", include_str!("../../kernels/fft.cl")),
];

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

/// A device query answering a list of `cl_uint`s (the handle types a device imports).
pub fn device_u32s(id: cl_device_id, param: u32) -> Result<Vec<u32>, ApiError> {
    Ok(device_bytes(id, param)?
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
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

/// An OpenCL device found through the ICD loader.
#[derive(Debug, Clone)]
pub struct ClDevice {
    pub r: ClDeviceRef,
    pub platform: cl_platform_id,
    pub id: cl_device_id,
    pub platform_name: String,
    pub name: String,
}

// SAFETY: platform and device ids are opaque handles to objects that live as long as the ICD is
// loaded, and the OpenCL API is thread-safe for every query on them (OpenCL 3.0 §A.2).
unsafe impl Send for ClDevice {}
unsafe impl Sync for ClDevice {}

/// The vendor family that prefixes a device label. Derived from the platform name because that
/// is what stays the same across driver releases.
pub fn family(platform_name: &str) -> &'static str {
    let p = platform_name.to_ascii_lowercase();
    if p.contains("portable computing language") || p.contains("pocl") {
        "pocl"
    } else if p.contains("nvidia") {
        "nvidia"
    } else if p.contains("amd accelerated parallel processing") || p.contains("amd") {
        "rocm"
    } else if p.contains("rusticl") {
        "rusticl"
    } else if p.contains("clover") {
        "clover"
    } else if p.contains("intel") {
        "intel"
    } else {
        "cl"
    }
}

/// Every device of every platform, labelled `<family><index within family>`.
pub fn enumerate() -> Result<Vec<ClDevice>, ApiError> {
    let platforms = cl3::platform::get_platform_ids().call("clGetPlatformIDs")?;
    let mut per_family: HashMap<&'static str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (pi, &platform) in platforms.iter().enumerate() {
        let platform_name = platform_string(platform, cl3::platform::CL_PLATFORM_NAME)
            .unwrap_or_else(|e| format!("<{e}>"));
        let fam = family(&platform_name);
        let ids = match cl3::device::get_device_ids(platform, cl3::device::CL_DEVICE_TYPE_ALL) {
            Ok(ids) => ids,
            // A platform with no devices is not an error worth failing enumeration for.
            Err(cl3::error_codes::CL_DEVICE_NOT_FOUND) => Vec::new(),
            Err(code) => return Err(cl_error("clGetDeviceIDs", code)),
        };
        for (di, &id) in ids.iter().enumerate() {
            let k = per_family.entry(fam).or_insert(0);
            let label = format!("{fam}{k}");
            *k += 1;
            let name =
                device_string(id, cl3::device::CL_DEVICE_NAME).unwrap_or_else(|e| format!("<{e}>"));
            out.push(ClDevice {
                r: ClDeviceRef {
                    platform_index: pi,
                    device_index: di,
                    label,
                },
                platform,
                id,
                platform_name: platform_name.clone(),
                name,
            });
        }
    }
    Ok(out)
}

/// Where the loader looks for `.icd` files when neither `OCL_ICD_VENDORS` nor
/// `OPENCL_VENDOR_PATH` says otherwise.
pub const DEFAULT_VENDOR_DIR: &str = "/etc/OpenCL/vendors";

/// One OpenCL vendor library (an ICD) and where it was listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorLibrary {
    /// As written in `OCL_ICD_FILENAMES` or the `.icd` file: a path or a bare soname that
    /// `dlopen` resolves.
    pub library: String,
    /// `OCL_ICD_FILENAMES`, `OCL_ICD_VENDORS`, or the `.icd` file's path.
    pub listed_in: String,
}

/// The OpenCL vendor libraries of this environment, each to be loaded on its own (see
/// [`single_vendor_env`]): `OCL_ICD_FILENAMES` (colon-separated) when set and not empty; else
/// `OCL_ICD_VENDORS` (a directory of `.icd` files, one `.icd` file, or a library, as ocl-icd
/// reads it); else the `.icd` files of `OPENCL_VENDOR_PATH` or [`DEFAULT_VENDOR_DIR`].
///
/// `OCL_ICD_FILENAMES` replaces the directory here, where Khronos's loader would load both: it
/// is how a person picks vendors (ocl-icd ignores the variable), and a library listed twice,
/// once by path and once by soname, could not be told apart. `.icd` files are taken in name
/// order, so labels do not depend on directory order. Unreadable `.icd` files are skipped, as
/// both loaders skip them.
pub fn vendor_libraries() -> Vec<VendorLibrary> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    vendor_libraries_from(
        var("OCL_ICD_FILENAMES").as_deref(),
        var("OCL_ICD_VENDORS").as_deref(),
        var("OPENCL_VENDOR_PATH").as_deref(),
    )
}

/// [`vendor_libraries`] over given values of `OCL_ICD_FILENAMES`, `OCL_ICD_VENDORS` and
/// `OPENCL_VENDOR_PATH` (`None`: unset or empty).
pub fn vendor_libraries_from(
    filenames: Option<&str>,
    vendors: Option<&str>,
    vendor_path: Option<&str>,
) -> Vec<VendorLibrary> {
    use std::path::Path;
    if let Some(list) = filenames {
        return list
            .split(':')
            .filter(|l| !l.is_empty())
            .map(|l| VendorLibrary {
                library: l.to_string(),
                listed_in: "OCL_ICD_FILENAMES".into(),
            })
            .collect();
    }
    let vendor_dir = vendor_path.unwrap_or(DEFAULT_VENDOR_DIR);
    let Some(v) = vendors else {
        return icd_files_in(Path::new(vendor_dir));
    };
    let path = Path::new(v);
    if path.is_dir() {
        icd_files_in(path)
    } else if v.ends_with(".icd") {
        // ocl-icd: a bare `.icd` name is looked up in the vendor directory first.
        let in_dir = Path::new(vendor_dir).join(v);
        let file = if !v.contains('/') && in_dir.is_file() {
            in_dir
        } else {
            path.to_path_buf()
        };
        read_icd_file(&file).into_iter().collect()
    } else {
        vec![VendorLibrary {
            library: v.to_string(),
            listed_in: "OCL_ICD_VENDORS".into(),
        }]
    }
}

/// Why [`vendor_libraries`] lists nothing in this environment: what the variables hold and
/// where the loader was sent to look.
pub fn no_vendor_reason() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    no_vendor_reason_from(
        var("OCL_ICD_FILENAMES").as_deref(),
        var("OCL_ICD_VENDORS").as_deref(),
        var("OPENCL_VENDOR_PATH").as_deref(),
    )
}

/// [`no_vendor_reason`] over given values (`None`: unset or empty), for an environment where
/// [`vendor_libraries_from`] found nothing.
pub fn no_vendor_reason_from(
    filenames: Option<&str>,
    vendors: Option<&str>,
    vendor_path: Option<&str>,
) -> String {
    use std::path::Path;
    if let Some(list) = filenames {
        return format!("OCL_ICD_FILENAMES is set to `{list}`, which names no library");
    }
    // What a directory holds, when it holds no usable `.icd` file.
    let no_icd_in = |dir: &Path| -> String {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return format!("{}, which cannot be read", dir.display());
        };
        let icd = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "icd"))
            .count();
        match icd {
            0 => format!("{}, a directory with no .icd file", dir.display()),
            n => format!(
                "{}, whose {n} .icd {} no library (unreadable or empty)",
                dir.display(),
                if n == 1 { "file names" } else { "files name" }
            ),
        }
    };
    let dir = Path::new(vendor_path.unwrap_or(DEFAULT_VENDOR_DIR));
    let whose = if vendor_path.is_some() {
        "OPENCL_VENDOR_PATH's "
    } else {
        ""
    };
    match vendors {
        Some(v) if Path::new(v).is_dir() => format!(
            "OCL_ICD_FILENAMES is not set; OCL_ICD_VENDORS is set to {}",
            no_icd_in(Path::new(v))
        ),
        Some(v) => format!(
            "OCL_ICD_FILENAMES is not set; OCL_ICD_VENDORS is set to {v}, an .icd file that \
             cannot be read or names no library"
        ),
        None if !dir.is_dir() => format!(
            "OCL_ICD_FILENAMES and OCL_ICD_VENDORS are not set, and the vendor directory \
             ({whose}{}) does not exist",
            dir.display()
        ),
        None => format!(
            "OCL_ICD_FILENAMES and OCL_ICD_VENDORS are not set; the vendor directory is \
             {whose}{}",
            no_icd_in(dir)
        ),
    }
}

fn icd_files_in(dir: &std::path::Path) -> Vec<VendorLibrary> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "icd"))
        .collect();
    files.sort();
    files.iter().filter_map(|f| read_icd_file(f)).collect()
}

/// The library an `.icd` file names: its first line, without the newline.
fn read_icd_file(file: &std::path::Path) -> Option<VendorLibrary> {
    let text = crate::input::read_text("an ICD file", file, crate::input::ICD_FILE_LIMIT).ok()?;
    let library = text.lines().next()?.trim();
    (!library.is_empty()).then(|| VendorLibrary {
        library: library.to_string(),
        listed_in: file.display().to_string(),
    })
}

/// The environment under which the ICD loader loads `library` and nothing else, with either
/// loader: Khronos's loads `OCL_ICD_FILENAMES` and reads `OCL_ICD_VENDORS` only as a
/// directory (a file is skipped); ocl-icd ignores `OCL_ICD_FILENAMES` and loads an
/// `OCL_ICD_VENDORS` that is neither a directory nor a `.icd` file as the one ICD library.
pub fn single_vendor_env(library: &str) -> Vec<(String, String)> {
    vec![
        ("OCL_ICD_FILENAMES".into(), library.into()),
        ("OCL_ICD_VENDORS".into(), library.into()),
    ]
}

/// Raw bytes of a device query; the caller decodes. Used for extension queries that cl3 does
/// not type (UUID, PCI info, AMD topology, handle-type lists).
pub fn device_bytes(id: cl_device_id, param: u32) -> Result<Vec<u8>, ApiError> {
    cl3::device::get_device_data(id, param).call("clGetDeviceInfo")
}

pub fn device_string(id: cl_device_id, param: u32) -> Result<String, ApiError> {
    device_bytes(id, param).map(|b| c_string(&b))
}

pub fn device_u64(id: cl_device_id, param: u32) -> Result<u64, ApiError> {
    let b = device_bytes(id, param)?;
    Ok(match b.len() {
        1 => b[0] as u64,
        2 => u16::from_ne_bytes([b[0], b[1]]) as u64,
        4 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u64,
        n if n >= 8 => u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        n => {
            let mut e = cl_error("clGetDeviceInfo", 0);
            e.name = "UNEXPECTED_SIZE".into();
            e.detail = format!("param {param:#x} returned {n} bytes");
            return Err(e);
        }
    })
}

pub fn platform_string(id: cl_platform_id, param: u32) -> Result<String, ApiError> {
    cl3::platform::get_platform_data(id, param)
        .call("clGetPlatformInfo")
        .map(|b| c_string(&b))
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_string()
}

/// SVM capability bits (OpenCL 2.0+; 0 on a 1.2 device, where the query itself errors).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SvmCaps {
    pub coarse_grain_buffer: bool,
    pub fine_grain_buffer: bool,
    pub fine_grain_system: bool,
    pub atomics: bool,
}

impl SvmCaps {
    pub fn from_bits(bits: u64) -> Self {
        use cl3::device::*;
        SvmCaps {
            coarse_grain_buffer: bits & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER != 0,
            fine_grain_buffer: bits & CL_DEVICE_SVM_FINE_GRAIN_BUFFER != 0,
            fine_grain_system: bits & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM != 0,
            atomics: bits & CL_DEVICE_SVM_ATOMICS != 0,
        }
    }

    pub fn query(id: cl_device_id) -> Result<Self, ApiError> {
        device_u64(id, cl3::device::CL_DEVICE_SVM_CAPABILITIES).map(Self::from_bits)
    }
}

impl std::fmt::Display for SvmCaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yes = |b: bool| if b { "yes" } else { "no" };
        write!(
            f,
            "coarse buffer {}, fine buffer {}, fine system {}, atomics {}",
            yes(self.coarse_grain_buffer),
            yes(self.fine_grain_buffer),
            yes(self.fine_grain_system),
            yes(self.atomics)
        )
    }
}

/// Memory a kernel can take as an argument: a buffer object, or an SVM/raw device pointer that
/// is passed with clSetKernelArgSVMPointer.
#[derive(Debug, Clone, Copy)]
pub enum ClMem {
    Buffer(cl_mem),
    Svm(*mut c_void),
}

/// A kernel argument.
#[derive(Debug, Clone, Copy)]
pub enum ClArg {
    Mem(ClMem),
    U32(u32),
    F32(f32),
}

/// An event the caller owns; released on drop.
pub struct ClEvent(pub cl_event);

impl ClEvent {
    pub fn wait(&self) -> Result<(), ApiError> {
        cl3::event::wait_for_events(&[self.0]).call("clWaitForEvents")
    }
}

impl Drop for ClEvent {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: we own one reference to this event.
            unsafe {
                let _ = cl3::event::release_event(self.0);
            }
        }
    }
}

/// One device's context, in-order queue and the harness's built program.
pub struct ClSession {
    pub device: ClDevice,
    pub svm: SvmCaps,
    pub max_work_group: usize,
    pub extensions: Vec<String>,
    /// What the running case learned about this device on the way (a refused query, where
    /// an address came from), appended to its pass note.
    pub notes: Vec<String>,
    /// Test-only (the `cl-noop` plant): every launch enqueues a marker instead of its kernel,
    /// so the OpenCL side of a case does nothing at all, and the case must come out non-pass.
    pub skip_kernels: bool,
    // Field order is drop order: kernels and program before queue before context.
    /// Keyed by name and which arguments are SVM pointers: NVIDIA's OpenCL (580) refuses a
    /// buffer in a slot that once held an SVM pointer (CL_INVALID_KERNEL_ARGS), so a kernel
    /// object is never switched between the two.
    kernels: HashMap<(String, u64), Kernel>,
    program: Program,
    pub queue: CommandQueue,
    pub context: Context,
}

/// Why a session could not be opened: a clean refusal (reported as unsupported) or a program
/// that the driver would not build (the driver's compiler is broken for valid OpenCL C).
#[derive(Debug)]
pub enum SessionError {
    Api(ApiError),
    Build(ApiError),
}

/// The session's program: from the kernel cache's binary when it has a valid one the device
/// takes, else built from source (and its binary stored for the next worker).
fn build_program(
    context: &Context,
    device: &ClDevice,
    source: &str,
) -> Result<Program, SessionError> {
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
        SessionError::Build(e)
    })?;
    if let Ok(binaries) = program.get_binaries()
        && let [binary] = binaries.as_slice()
    {
        cache.store(&key, binary);
    }
    Ok(program)
}

/// clEnqueueNDRangeKernel of `kernel` over `global` work-items in groups of `local`, after
/// `wait`.
///
/// # Safety
/// Every argument of `kernel` is set, to what its parameters declare.
unsafe fn enqueue_1d(
    queue: types::cl_command_queue,
    kernel: &Kernel,
    global: usize,
    local: usize,
    wait: &[cl_event],
) -> Result<ClEvent, ApiError> {
    let (gws, lws) = ([global], [local]);
    // SAFETY: the caller set the arguments; the sizes are 1-D arrays that outlive the call.
    let ev = unsafe {
        cl3::command_queue::enqueue_nd_range_kernel(
            queue,
            kernel.get(),
            1,
            ptr::null(),
            gws.as_ptr(),
            lws.as_ptr(),
            wait.len() as u32,
            if wait.is_empty() {
                ptr::null()
            } else {
                wait.as_ptr()
            },
        )
    }
    .call("clEnqueueNDRangeKernel")?;
    Ok(ClEvent(ev))
}

impl ClSession {
    pub fn open(device: ClDevice) -> Result<Self, SessionError> {
        let dev = Device::new(device.id);
        let context = crate::trace::timed("clCreateContext", || Context::from_device(&dev))
            .call("clCreateContext")
            .map_err(SessionError::Api)?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, 0)
            .call("clCreateCommandQueue")
            .map_err(SessionError::Api)?;
        // One string: cl3's multi-source call passes Rust fat pointers as the C `char**`
        // (cl3 0.13 program.rs), which reads past the array for more than one source.
        let source: String = KERNEL_SOURCES
            .iter()
            .map(|(name, text)| format!("// ---- kernels/{name} ----\n{text}\n"))
            .collect();
        let program = crate::trace::timed("OpenCL program (cache or build)", || {
            build_program(&context, &device, &source)
        })?;
        let svm = SvmCaps::query(device.id).unwrap_or_default();
        let max_work_group = device_u64(device.id, cl3::device::CL_DEVICE_MAX_WORK_GROUP_SIZE)
            .map_err(SessionError::Api)? as usize;
        let extensions = device_string(device.id, cl3::device::CL_DEVICE_EXTENSIONS)
            .map_err(SessionError::Api)?
            .split_whitespace()
            .map(str::to_string)
            .collect();
        Ok(ClSession {
            device,
            svm,
            max_work_group,
            extensions,
            notes: Vec::new(),
            skip_kernels: false,
            kernels: HashMap::new(),
            program,
            queue,
            context,
        })
    }

    pub fn has_extension(&self, name: &str) -> bool {
        self.extensions.iter().any(|e| e == name)
    }

    /// A refused import of a handle of type `handle` (name, value), judged by whether the
    /// device lists that type in its answer to `query` (name, param): see [`import_refusal`].
    pub fn import_refusal(
        &self,
        e: ApiError,
        what: &str,
        (query_name, query): (&str, u32),
        handle: (&str, u32),
    ) -> CaseError {
        let listed = device_u32s(self.device.id, query);
        import_refusal(e, what, query_name, handle, listed)
    }

    fn kernel(&mut self, name: &str, svm_args: u64) -> Result<&Kernel, ApiError> {
        let key = (name.to_string(), svm_args);
        if !self.kernels.contains_key(&key) {
            let k = Kernel::create(&self.program, name).call("clCreateKernel")?;
            self.kernels.insert(key.clone(), k);
        }
        Ok(&self.kernels[&key])
    }

    /// Enqueue a 1-D kernel over `global` work-items (rounded up to the work-group size; every
    /// kernel bounds-checks its own index) after `wait` events.
    pub fn launch(
        &mut self,
        name: &str,
        global: usize,
        args: &[ClArg],
        wait: &[cl_event],
    ) -> Result<ClEvent, ApiError> {
        let device = self.device.id;
        let max_wg = self.max_work_group;
        let queue = self.queue.get();
        if self.skip_kernels {
            return self.marker(wait);
        }
        let svm_args = args
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a, ClArg::Mem(ClMem::Svm(_))))
            .fold(0u64, |m, (i, _)| m | 1 << i);
        let kernel = self.kernel(name, svm_args)?;
        let kernel_wg = kernel
            .get_work_group_size(device)
            .call("clGetKernelWorkGroupInfo")?;
        let local = local_size(global, max_wg.min(kernel_wg));
        let global = global.div_ceil(local) * local;
        for (i, arg) in args.iter().enumerate() {
            let i = i as u32;
            // SAFETY: each argument matches the kernel's declared parameter type; cl3 passes
            // the pointer and size straight to clSetKernelArg*.
            unsafe {
                match arg {
                    ClArg::Mem(ClMem::Buffer(m)) => kernel.set_arg(i, m),
                    ClArg::Mem(ClMem::Svm(p)) => kernel.set_arg_svm_pointer(i, *p),
                    ClArg::U32(v) => kernel.set_arg(i, v),
                    ClArg::F32(v) => kernel.set_arg(i, v),
                }
            }
            .call(match arg {
                ClArg::Mem(ClMem::Svm(_)) => "clSetKernelArgSVMPointer",
                _ => "clSetKernelArg",
            })?;
        }
        // SAFETY: arguments are set above.
        unsafe { enqueue_1d(queue, kernel, global, local, wait) }
    }

    /// Fills `bytes` of `mem` with `word`, enqueued in order (clEnqueueFillBuffer, or
    /// clEnqueueSVMMemFill for an SVM pointer).
    pub fn fill(&self, mem: ClMem, bytes: usize, word: u32) -> Result<(), ApiError> {
        let pattern: *const c_void = (&raw const word).cast();
        // SAFETY: `pattern` points at 4 live bytes the call copies before returning; `mem`
        // holds at least `bytes` bytes (the caller's allocation).
        let ev = unsafe {
            match mem {
                ClMem::Buffer(b) => cl3::command_queue::enqueue_fill_buffer(
                    self.queue.get(),
                    b,
                    pattern,
                    4,
                    0,
                    bytes,
                    0,
                    ptr::null(),
                )
                .call("clEnqueueFillBuffer"),
                ClMem::Svm(p) => cl3::command_queue::enqueue_svm_mem_fill(
                    self.queue.get(),
                    p,
                    pattern,
                    4,
                    bytes,
                    0,
                    ptr::null(),
                )
                .call("clEnqueueSVMMemFill"),
            }
        }?;
        drop(ClEvent(ev));
        Ok(())
    }

    /// An event that completes once `wait` has: what a skipped launch hands on, so that the
    /// commands after it keep their order.
    pub fn marker(&self, wait: &[cl_event]) -> Result<ClEvent, ApiError> {
        // SAFETY: `wait` holds live events of this context; the marker takes no memory.
        unsafe {
            cl3::command_queue::enqueue_marker_with_wait_list(
                self.queue.get(),
                wait.len() as u32,
                if wait.is_empty() {
                    ptr::null()
                } else {
                    wait.as_ptr()
                },
            )
        }
        .call("clEnqueueMarkerWithWaitList")
        .map(ClEvent)
    }

    pub fn finish(&self) -> Result<(), ApiError> {
        self.queue.finish().call("clFinish")
    }

    pub fn flush(&self) -> Result<(), ApiError> {
        self.queue.flush().call("clFlush")
    }
}

/// Largest power of two not above `limit`, 256 or `global` (rounded up to a power of two).
fn local_size(global: usize, limit: usize) -> usize {
    let cap = limit.clamp(1, 256);
    let mut l = 1;
    while l * 2 <= cap && l < global {
        l *= 2;
    }
    l
}

/// For tests: the first OpenCL device, or `None` when no ICD answers. Under
/// `CLHIP_REQUIRE_OPENCL=1` (CI) a missing OpenCL is a test failure, not a skip, so a green run
/// cannot hide a missing install step.
pub fn test_device() -> Option<ClDevice> {
    // Enumerate once per process: test threads run in parallel, and the ICD loader's first
    // initialisation is not safe to race (ocl-icd segfaults).
    static FIRST: std::sync::OnceLock<Result<ClDevice, String>> = std::sync::OnceLock::new();
    let required = std::env::var("CLHIP_REQUIRE_OPENCL").is_ok_and(|v| v == "1");
    let first = FIRST.get_or_init(|| match enumerate() {
        Ok(devices) if !devices.is_empty() => Ok(devices[0].clone()),
        Ok(_) => Err("no OpenCL device".to_string()),
        Err(e) => Err(e.to_string()),
    });
    match first {
        Ok(d) => Some(d.clone()),
        Err(why) => {
            assert!(!required, "CLHIP_REQUIRE_OPENCL=1 but {why}");
            eprintln!("skipping: {why}");
            None
        }
    }
}

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
fn extension_functions(
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

/// `cl_semaphore_khr` (cl_ext.h): an opaque handle.
type ClSemaphoreRaw = *mut c_void;

type CreateSemaphoreFn =
    unsafe extern "C" fn(types::cl_context, *const u64, *mut i32) -> ClSemaphoreRaw;
type ReleaseSemaphoreFn = unsafe extern "C" fn(ClSemaphoreRaw) -> i32;

/// cl_khr_semaphore's entry points (cl_ext.h), resolved for one platform.
#[derive(Debug, Clone, Copy)]
struct SemaphoreFns {
    create: CreateSemaphoreFn,
    /// clEnqueueWaitSemaphoresKHR and clEnqueueSignalSemaphoresKHR share this signature.
    wait: EnqueueSemaphoresFn,
    signal: EnqueueSemaphoresFn,
    release: ReleaseSemaphoreFn,
}

type EnqueueSemaphoresFn = unsafe extern "C" fn(
    types::cl_command_queue,
    u32,
    *const ClSemaphoreRaw,
    *const u64,
    u32,
    *const cl_event,
    *mut cl_event,
) -> i32;

impl SemaphoreFns {
    fn resolve(platform: cl_platform_id) -> Result<Self, ApiError> {
        let lookup = extension_functions(platform)?;
        // SAFETY: the platform returned each entry point for exactly this name; the types are
        // cl_ext.h's prototypes.
        unsafe {
            Ok(SemaphoreFns {
                create: std::mem::transmute::<*mut c_void, CreateSemaphoreFn>(lookup(
                    "clCreateSemaphoreWithPropertiesKHR",
                )?),
                wait: std::mem::transmute::<*mut c_void, EnqueueSemaphoresFn>(lookup(
                    "clEnqueueWaitSemaphoresKHR",
                )?),
                signal: std::mem::transmute::<*mut c_void, EnqueueSemaphoresFn>(lookup(
                    "clEnqueueSignalSemaphoresKHR",
                )?),
                release: std::mem::transmute::<*mut c_void, ReleaseSemaphoreFn>(lookup(
                    "clReleaseSemaphoreKHR",
                )?),
            })
        }
    }
}

/// A binary semaphore OpenCL imported (cl_khr_external_semaphore), released on drop.
pub struct ClSemaphore {
    raw: ClSemaphoreRaw,
    fns: SemaphoreFns,
}

impl ClSemaphore {
    /// clCreateSemaphoreWithPropertiesKHR of a binary semaphore from an opaque fd, for this
    /// session's device (CL_SEMAPHORE_DEVICE_HANDLE_LIST_KHR, 0x2053: the memory import's
    /// 0x2051 there is CL_INVALID_PROPERTY). The import owns the fd once it accepts it, as in
    /// Vulkan's model that cl_khr_external_semaphore follows; a refused one closes it.
    pub fn import_opaque_fd(
        session: &ClSession,
        fd: std::os::fd::OwnedFd,
    ) -> Result<Self, ApiError> {
        // cl_khr_semaphore / cl_khr_external_semaphore (OpenCL-Headers cl_ext.h).
        const CL_SEMAPHORE_TYPE_KHR: u64 = 0x203D;
        const CL_SEMAPHORE_TYPE_BINARY_KHR: u64 = 1;
        const CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR: u64 = 0x2055;
        const CL_SEMAPHORE_DEVICE_HANDLE_LIST_KHR: u64 = 0x2053;
        const CL_SEMAPHORE_DEVICE_HANDLE_LIST_END_KHR: u64 = 0;
        let fns = SemaphoreFns::resolve(session.device.platform)?;
        let raw_fd = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let props: [u64; 8] = [
            CL_SEMAPHORE_TYPE_KHR,
            CL_SEMAPHORE_TYPE_BINARY_KHR,
            CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR,
            raw_fd as u64,
            CL_SEMAPHORE_DEVICE_HANDLE_LIST_KHR,
            session.device.id as u64,
            CL_SEMAPHORE_DEVICE_HANDLE_LIST_END_KHR,
            0,
        ];
        let mut err = 0i32;
        // SAFETY: a live context and a zero-terminated property list that outlives the call.
        let raw = unsafe { (fns.create)(session.context.get(), props.as_ptr(), &mut err) };
        if err != 0 || raw.is_null() {
            let mut e = cl_error(
                "clCreateSemaphoreWithPropertiesKHR(CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR)",
                err,
            );
            e.detail = format!("binary semaphore, fd {raw_fd}");
            return Err(e);
        }
        let _ = std::os::fd::IntoRawFd::into_raw_fd(fd);
        Ok(ClSemaphore { raw, fns })
    }

    /// clEnqueueSignalSemaphoresKHR after `waits` (and, the queue being in order, after
    /// everything enqueued before).
    pub fn signal(&self, session: &ClSession, waits: &[cl_event]) -> Result<ClEvent, ApiError> {
        // SAFETY: our semaphore, of the session's context; live events of it.
        unsafe {
            enqueue_semaphore(
                self.fns.signal,
                "clEnqueueSignalSemaphoresKHR",
                session.queue.get(),
                self.raw,
                waits,
            )
        }
        .map(ClEvent)
    }

    /// clEnqueueWaitSemaphoresKHR (the commands enqueued after it wait for the signal), called
    /// on a thread of its own, for a caller that must watch the other side meanwhile: NVIDIA's
    /// OpenCL (580) can hold the calling thread inside the enqueue until the signal has run.
    /// The answer comes on the channel; a thread whose call never returns is left behind (the
    /// worker exits after such a case).
    pub fn wait_on_thread(
        &self,
        session: &ClSession,
    ) -> std::sync::mpsc::Receiver<Result<WaitedEvent, ApiError>> {
        let (tx, rx) = std::sync::mpsc::channel();
        // Raw handles as integers: the queue and the semaphore stay alive for the case, and
        // OpenCL's enqueue calls are thread-safe.
        let (queue, raw, f) = (
            session.queue.get() as usize,
            self.raw as usize,
            self.fns.wait,
        );
        std::thread::spawn(move || {
            let call = "clEnqueueWaitSemaphoresKHR";
            // SAFETY: as in `signal`, with no wait list.
            let answer = unsafe { enqueue_semaphore(f, call, queue as _, raw as _, &[]) }
                .map(|ev| WaitedEvent(ev as usize));
            // A caller that gave up is gone; the event then leaks with the worker, which exits.
            let _ = tx.send(answer);
        });
        rx
    }
}

/// clEnqueueSignalSemaphoresKHR or clEnqueueWaitSemaphoresKHR (`f`, named `call`) of one binary
/// semaphore (no payload) on `queue`, after `waits`.
///
/// # Safety
/// `raw` is a live semaphore of the queue's context, and `waits` live events of it.
unsafe fn enqueue_semaphore(
    f: EnqueueSemaphoresFn,
    call: &str,
    queue: types::cl_command_queue,
    raw: ClSemaphoreRaw,
    waits: &[cl_event],
) -> Result<cl_event, ApiError> {
    let mut ev: cl_event = ptr::null_mut();
    let wait_ptr = if waits.is_empty() {
        ptr::null()
    } else {
        waits.as_ptr()
    };
    // SAFETY: the caller's; the semaphore and event pointers are live for the call.
    let rc = unsafe {
        f(
            queue,
            1,
            &raw,
            ptr::null(),
            waits.len() as u32,
            wait_ptr,
            &mut ev,
        )
    };
    if rc != 0 {
        return Err(cl_error(call, rc));
    }
    Ok(ev)
}

/// The event of a wait enqueued on another thread, as an integer (an event is not `Send` as a
/// pointer); [`WaitedEvent::into_event`] takes ownership of it.
pub struct WaitedEvent(usize);

impl WaitedEvent {
    pub fn into_event(self) -> ClEvent {
        ClEvent(self.0 as cl_event)
    }
}

impl Drop for ClSemaphore {
    fn drop(&mut self) {
        // SAFETY: our one reference to a semaphore of a live context.
        unsafe {
            (self.fns.release)(self.raw);
        }
    }
}

#[cfg(test)]
mod tests;
