//! A session on one device: its context, in-order queue and the harness's program; memory as a
//! buffer or an SVM pointer, events, and kernel launches.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::kernel::Kernel;
use opencl3::program::Program;
use opencl3::types::{self, cl_event, cl_mem};

use super::devices::ClDevice;
use super::error::{ClResultExt, import_refusal};
use super::program::{KERNEL_SOURCES, build_program};
use super::query::{SvmCaps, device_string, device_u32s, device_u64};
use crate::model::{ApiError, CaseError};

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
        })
        .map_err(SessionError::Build)?;
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
pub(super) fn local_size(global: usize, limit: usize) -> usize {
    let cap = limit.clamp(1, 256);
    let mut l = 1;
    while l * 2 <= cap && l < global {
        l *= 2;
    }
    l
}
