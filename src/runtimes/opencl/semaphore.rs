//! Binary semaphores OpenCL imports (cl_khr_external_semaphore): signalled and waited for on
//! a session's queue.

use std::ffi::c_void;
use std::ptr;

use opencl3::types::{self, cl_event, cl_platform_id};

use super::error::cl_error;
use super::extensions::extension_functions;
use super::session::{ClEvent, ClSession};
use crate::model::ApiError;

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
        crate::calls::record("clCreateSemaphoreWithPropertiesKHR");
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
    crate::calls::record(call);
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
        crate::calls::record("clReleaseSemaphoreKHR");
    }
}
