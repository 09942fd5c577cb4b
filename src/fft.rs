//! The harness's own forward complex FFT on OpenCL (sign -1, unnormalised: rustfft's
//! `Forward`), for power-of-two sizes 1..=2^22 complex `float2`, in place on the caller's
//! memory, which may be a buffer object or an SVM / raw device pointer.
//!
//! Algorithm: Stockham autosort (kernels/fft.cl). Each pass is out of place, so passes
//! ping-pong between the caller's memory and a scratch buffer; radix-8, -4 and -2 passes are
//! planned so that the pass count is even where that costs no extra sweep over memory, and the
//! result lands back in the caller's memory; otherwise a final `ccopy` brings it back. Twiddles
//! are computed on the host in f64 and uploaded once as a float2 table (a float sincos on the
//! device is too coarse at 2^22 for the rocFFT bound). The kernels use no local memory and no
//! barriers, so any work-group size is valid: [`ClSession::launch`] picks one within
//! CL_DEVICE_MAX_WORK_GROUP_SIZE and the kernel's CL_KERNEL_WORK_GROUP_SIZE, and each kernel
//! bounds-checks its id.
//!
//! [`ClFft`] is a plan for one size: it owns the scratch and twiddle buffers (released on
//! drop), so repeated transforms of that size upload nothing. [`FftCache`] keeps the last plan
//! and re-plans only when the size changes. [`forward`] is the one-shot form.
//!
//! A size the FFT cannot do (not a power of two, 0, above 2^22) is refused with an
//! [`ApiError`] whose `call` names this module (`clhip::fft::plan`, not an OpenCL entry point)
//! and whose code is CL_INVALID_VALUE, so it composes with the runtime's errors; callers that
//! must not confuse it with a driver refusal check [`supports`] first.

use std::f64::consts::PI;

use opencl3::types::{cl_context, cl_event, cl_mem};

use crate::model::ApiError;
use crate::runtimes::opencl::{ClArg, ClEvent, ClMem, ClResultExt, ClSession, cl_error};

/// Largest log2 of a size the FFT takes.
pub const MAX_LOG2_N: u32 = 22;
/// Largest size (complex elements) the FFT takes.
pub const MAX_N: usize = 1 << MAX_LOG2_N;

/// Bytes of one complex float element.
const ELEM: usize = 8;

/// Whether [`ClFft`] takes `n` complex elements.
pub fn supports(n: usize) -> bool {
    n.is_power_of_two() && n <= MAX_N
}

/// One Stockham pass: radix `radix`, span `ns` (the product of the radices before it), and
/// where its `(radix - 1) * ns` twiddles start in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub radix: u32,
    pub ns: u32,
    pub tw_off: u32,
}

impl Pass {
    fn kernel(self) -> &'static str {
        match self.radix {
            2 => "fft_radix2",
            4 => "fft_radix4",
            8 => "fft_radix8",
            r => unreachable!("no radix-{r} kernel"),
        }
    }
}

/// The passes for one size, and whether a final copy from scratch is needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub n: usize,
    pub passes: Vec<Pass>,
    /// The pass count is odd: the last pass wrote scratch, so `ccopy` brings the result back.
    pub final_copy: bool,
    /// Twiddle table length in complex elements.
    pub twiddles: usize,
}

fn bad_size(n: usize) -> ApiError {
    let mut e = cl_error("clhip::fft::plan", cl3::error_codes::CL_INVALID_VALUE);
    e.detail = format!(
        "n = {n}: the OpenCL FFT takes powers of two from 1 to 2^{MAX_LOG2_N} = {MAX_N} complex elements"
    );
    e
}

/// Choose radices for `n`: the fewest sweeps over memory (passes, plus one for a final copy
/// when the pass count is odd), then the fewest radix-2 passes, then the fewest radix-4 passes.
/// Larger radices go first.
pub fn plan(n: usize) -> Result<Plan, ApiError> {
    if !supports(n) {
        return Err(bad_size(n));
    }
    let l = n.trailing_zeros();
    // (sweeps, radix-2 passes, radix-4 passes, radix-8 passes): the smallest wins.
    let mut best = (u32::MAX, 0, 0, 0);
    for c8 in 0..=l / 3 {
        for c4 in 0..=(l - 3 * c8) / 2 {
            let c2 = l - 3 * c8 - 2 * c4;
            let passes = c8 + c4 + c2;
            best = best.min((passes + passes % 2, c2, c4, c8));
        }
    }
    let (_, c2, c4, c8) = best;
    let radices = std::iter::repeat_n(8u32, c8 as usize)
        .chain(std::iter::repeat_n(4, c4 as usize))
        .chain(std::iter::repeat_n(2, c2 as usize));
    let mut passes = Vec::new();
    let (mut ns, mut off) = (1u32, 0u32);
    for radix in radices {
        passes.push(Pass {
            radix,
            ns,
            tw_off: off,
        });
        off += (radix - 1) * ns;
        ns *= radix;
    }
    debug_assert_eq!(ns as usize, n);
    Ok(Plan {
        n,
        final_copy: passes.len() % 2 == 1,
        passes,
        twiddles: off as usize,
    })
}

/// The twiddle table of a plan: for each pass, `exp(-2 pi i r k / (ns radix))` at
/// `tw_off + (r - 1) ns + k`, computed in f64 and rounded once to f32.
pub fn twiddles(plan: &Plan) -> Vec<[f32; 2]> {
    let mut t = Vec::with_capacity(plan.twiddles);
    for p in &plan.passes {
        let span = (p.ns * p.radix) as f64;
        for r in 1..p.radix {
            for k in 0..p.ns {
                let (s, c) = (-2.0 * PI * (r * k) as f64 / span).sin_cos();
                t.push([c as f32, s as f32]);
            }
        }
    }
    debug_assert_eq!(t.len(), plan.twiddles);
    t
}

/// A buffer object this module created; released on drop. OpenCL defers the deletion until
/// commands already queued on it have finished (clReleaseMemObject), so dropping right after
/// an enqueue is safe.
struct OwnedMem(cl_mem);

impl Drop for OwnedMem {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: we hold the one reference clCreateBuffer gave us.
            unsafe {
                let _ = cl3::memory::release_mem_object(self.0);
            }
        }
    }
}

fn create_buffer(
    context: cl_context,
    flags: u64,
    bytes: usize,
    host: *mut std::ffi::c_void,
) -> Result<OwnedMem, ApiError> {
    // SAFETY: `host` is null or points to `bytes` readable bytes (CL_MEM_COPY_HOST_PTR copies
    // them before clCreateBuffer returns).
    unsafe { cl3::memory::create_buffer(context, flags, bytes, host) }
        .call("clCreateBuffer")
        .map(OwnedMem)
}

/// A forward FFT plan for one size on one session's context: scratch and twiddle buffers,
/// created and uploaded once.
pub struct ClFft {
    plan: Plan,
    context: cl_context,
    /// `None` for n = 1, which needs no passes.
    scratch: Option<OwnedMem>,
    table: Option<OwnedMem>,
}

// SAFETY: OpenCL handles may be used from any thread (every API call but clSetKernelArg on one
// kernel object is thread-safe, and launches go through the session, which is &mut).
unsafe impl Send for ClFft {}

impl ClFft {
    /// Plan `n` and allocate + upload on `session`'s context (blocking upload).
    pub fn new(session: &ClSession, n: usize) -> Result<Self, ApiError> {
        let plan = plan(n)?;
        let context = session.context.get();
        let (scratch, table) = if plan.passes.is_empty() {
            (None, None)
        } else {
            use cl3::memory::{CL_MEM_COPY_HOST_PTR, CL_MEM_READ_ONLY, CL_MEM_READ_WRITE};
            let scratch =
                create_buffer(context, CL_MEM_READ_WRITE, n * ELEM, std::ptr::null_mut())?;
            let mut tw = twiddles(&plan);
            let table = create_buffer(
                context,
                CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                tw.len() * ELEM,
                tw.as_mut_ptr().cast(),
            )?;
            (Some(scratch), Some(table))
        };
        Ok(ClFft {
            plan,
            context,
            scratch,
            table,
        })
    }

    pub fn n(&self) -> usize {
        self.plan.n
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Enqueue the transform of `data` (n complex floats) in place, after `wait`. Returns the
    /// event of the last command; nothing is waited for here.
    pub fn forward(
        &self,
        session: &mut ClSession,
        data: ClMem,
        wait: &[cl_event],
    ) -> Result<ClEvent, ApiError> {
        if session.context.get() != self.context {
            let mut e = cl_error("clhip::fft::forward", cl3::error_codes::CL_INVALID_CONTEXT);
            e.detail = "the FFT plan was made on another session's context".into();
            return Err(e);
        }
        let n = self.plan.n;
        if let ClMem::Buffer(m) = data {
            let size = cl3::memory::get_mem_object_info(m, cl3::memory::CL_MEM_SIZE)
                .call("clGetMemObjectInfo")?
                .to_size();
            if size < n * ELEM {
                let mut e = cl_error(
                    "clhip::fft::forward",
                    cl3::error_codes::CL_INVALID_BUFFER_SIZE,
                );
                e.detail = format!("buffer of {size} bytes for n = {n} complex floats");
                return Err(e);
            }
        }
        let (Some(scratch), Some(table)) = (&self.scratch, &self.table) else {
            // n = 1: the transform is the identity; a marker still orders after `wait`.
            // SAFETY: the queue is valid; `wait` is a slice of events the caller holds.
            let ev = unsafe {
                cl3::command_queue::enqueue_marker_with_wait_list(
                    session.queue.get(),
                    wait.len() as u32,
                    if wait.is_empty() {
                        std::ptr::null()
                    } else {
                        wait.as_ptr()
                    },
                )
            }
            .call("clEnqueueMarkerWithWaitList")?;
            return Ok(ClEvent(ev));
        };
        let scratch = ClMem::Buffer(scratch.0);
        let table = ClMem::Buffer(table.0);
        let mut src = data;
        let mut dst = scratch;
        let mut last: Option<ClEvent> = None;
        for p in &self.plan.passes {
            let ev = {
                let prev: Vec<cl_event> = match &last {
                    Some(e) => vec![e.0],
                    None => wait.to_vec(),
                };
                session.launch(
                    p.kernel(),
                    n / p.radix as usize,
                    &[
                        ClArg::Mem(src),
                        ClArg::Mem(dst),
                        ClArg::Mem(table),
                        ClArg::U32(p.tw_off),
                        ClArg::U32(n as u32),
                        ClArg::U32(p.ns),
                    ],
                    &prev,
                )?
            };
            last = Some(ev);
            std::mem::swap(&mut src, &mut dst);
        }
        let last = last.expect("n > 1 has at least one pass");
        if self.plan.final_copy {
            // `src` is scratch here: the last pass wrote it.
            return session.launch(
                "ccopy",
                n,
                &[ClArg::Mem(src), ClArg::Mem(data), ClArg::U32(n as u32)],
                &[last.0],
            );
        }
        Ok(last)
    }
}

/// Keeps the last [`ClFft`] and re-plans only when the size (or the session) changes.
#[derive(Default)]
pub struct FftCache {
    current: Option<ClFft>,
}

impl FftCache {
    /// The plan for `n` on `session`, created on first use.
    pub fn get(&mut self, session: &ClSession, n: usize) -> Result<&ClFft, ApiError> {
        let fresh = match &self.current {
            Some(f) => f.n() == n && f.context == session.context.get(),
            None => false,
        };
        if !fresh {
            self.current = None;
            let plan = crate::calls::scoped(crate::calls::FFT_PLAN, || ClFft::new(session, n));
            self.current = Some(plan?);
        }
        Ok(self.current.as_ref().expect("set above"))
    }

    /// [`ClFft::forward`] through the cached plan.
    pub fn forward(
        &mut self,
        session: &mut ClSession,
        data: ClMem,
        n: usize,
        wait: &[cl_event],
    ) -> Result<ClEvent, ApiError> {
        // Plan first (needs &ClSession), then launch (needs &mut ClSession).
        self.get(session, n)?;
        self.current
            .as_ref()
            .expect("planned above")
            .forward(session, data, wait)
    }
}

/// One-shot forward FFT of `data` (n complex floats) in place: plans, uploads the twiddles,
/// enqueues, and releases its buffers (OpenCL frees them once the queued passes finish). Use
/// [`ClFft`] or [`FftCache`] to transform the same size repeatedly without re-uploading.
pub fn forward(
    session: &mut ClSession,
    data: ClMem,
    n: usize,
    wait: &[cl_event],
) -> Result<ClEvent, ApiError> {
    ClFft::new(session, n)?.forward(session, data, wait)
}

#[cfg(test)]
mod tests;
