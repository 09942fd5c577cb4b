//! The API calls a case makes, in order: recorded by a worker, printed by a reproducer, and
//! compared (docs/repro.md, "Calls"). clhip and its reproducer must make the same calls for a
//! reproducer to reproduce anything; this is how a test holds them to it.
//!
//! Recording: with `CLHIP_RECORD_CALLS=DIR`, a worker writes each case's calls to
//! `DIR/<file_name(case id)>`, one line per call as it returns: the call's name, or
//! `<scope>/<name>` inside a [`scoped`] stretch (`open/clCreateContext`). Each API's calls are
//! named in one place (OpenCL's `ClResultExt::call`, the CUDA and HIP status mappers), which
//! calls [`record`]; calls that cannot fail, and the host peer's, call it themselves. Off (the
//! default), a call costs one relaxed atomic load.
//!
//! A reproducer run with `CLHIP_PRINT_CALLS=FILE` writes the same lines to `FILE`, each before
//! its call, with the call's text where clhip writes its name (repro/templates/common.c,
//! `said`); [`canonical`] finds the called function in either.
//!
//! [`normalise`] then keeps the calls that are compared (the case's interop and op calls) and
//! [`compare`] finds the first place two sequences differ. This module imports nothing of the
//! crate: every API's wrapper may call it.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The directory a worker records each case's calls into.
pub const RECORD_ENV: &str = "CLHIP_RECORD_CALLS";

/// The file a reproducer prints its calls into (read by the reproducer, not by clhip).
pub const PRINT_ENV: &str = "CLHIP_PRINT_CALLS";

/// A case is being recorded: the one flag a call reads when recording is off.
static RECORDING: AtomicBool = AtomicBool::new(false);

struct Recorder {
    file: Option<File>,
    /// Innermost last.
    scopes: Vec<&'static str>,
}

static RECORDER: Mutex<Recorder> = Mutex::new(Recorder {
    file: None,
    scopes: Vec::new(),
});

fn recorder() -> std::sync::MutexGuard<'static, Recorder> {
    // A panic while recording leaves lines, not a broken invariant.
    RECORDER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The file a case's calls go to in the recording directory: its id with `/` as `,`.
pub fn file_name(case_id: &str) -> String {
    format!("{}.calls", case_id.replace('/', ","))
}

/// Start recording the case `case_id` if `CLHIP_RECORD_CALLS` names a directory (made if
/// missing). A directory that cannot be written leaves the case unrecorded: a recording is a
/// test's instrument, never a reason for a case to fail; the test then finds no file.
pub fn begin_case(case_id: &str) {
    if let Some(dir) = std::env::var_os(RECORD_ENV).filter(|d| !d.is_empty()) {
        begin_case_in(Path::new(&dir), case_id);
    }
}

/// Start recording the case `case_id` into `dir` (see [`begin_case`]).
pub fn begin_case_in(dir: &Path, case_id: &str) {
    let file = std::fs::create_dir_all(dir)
        .and_then(|()| File::create(dir.join(file_name(case_id))))
        .ok();
    let mut r = recorder();
    r.scopes.clear();
    RECORDING.store(file.is_some(), Ordering::Relaxed);
    r.file = file;
}

/// Stop recording the current case.
pub fn end_case() {
    RECORDING.store(false, Ordering::Relaxed);
    let mut r = recorder();
    r.file = None;
    r.scopes.clear();
}

/// One call, by the name its wrapper gives it (`clCreateBuffer(CL_MEM_USE_HOST_PTR)`,
/// `cuMemAlloc_v2`), just made. Written at once, so that a worker that dies keeps the calls it
/// made before the one it died in.
pub fn record(name: &str) {
    if !RECORDING.load(Ordering::Relaxed) {
        return;
    }
    let mut r = recorder();
    let line = match r.scopes.last() {
        Some(scope) => format!("{scope}/{name}\n"),
        None => format!("{name}\n"),
    };
    if let Some(f) = r.file.as_mut() {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Run `f` with its calls recorded under `scope` (see [`UNCOMPARED_SCOPES`]).
pub fn scoped<T>(scope: &'static str, f: impl FnOnce() -> T) -> T {
    if !RECORDING.load(Ordering::Relaxed) {
        return f();
    }
    recorder().scopes.push(scope);
    let value = f();
    recorder().scopes.pop();
    value
}

/// The scope of opening an OpenCL device or a peer (enumeration, context, queue, program,
/// a GPU peer's stream, kernels and known-answer check): once per worker in clhip, once per
/// program in a reproducer.
pub const OPEN: &str = "open";

/// The scope of making clhip's FFT plan for a size (its scratch and twiddle buffers).
pub const FFT_PLAN: &str = "fft-plan";

/// The scope of clhip's look, after a case, for a device fault it left pending.
pub const PENDING_FAULT: &str = "pending-fault";

/// The scope of reading the first wrong word back, which a check does only when it found one.
pub const MISMATCH: &str = "mismatch";

/// The scope of calls made for a note beside a verdict, which the reproducer leaves out
/// (placement's timings on the peer's own memory).
pub const NOTE: &str = "note";

/// The scope of filling and checking the guard zones around a case's buffers.
pub const GUARD: &str = "guard";

/// Stretches whose calls are not compared, and why.
pub const UNCOMPARED_SCOPES: &[(&str, &str)] = &[
    (
        OPEN,
        "opening the OpenCL device and the peer: a worker opens them for its first case and \
         keeps them (a GPU peer also runs a known-answer check), a reproducer at its start",
    ),
    (
        FFT_PLAN,
        "the FFT plan's scratch and twiddle buffers: a worker makes them once per size and \
         keeps them, a reproducer at each transform",
    ),
    (
        MISMATCH,
        "reading the first wrong word back, only when a check found one: what a negative \
         control's race leaves differs from run to run",
    ),
    (
        NOTE,
        "placement's timings of the same passes on the peer's own memory, a note beside the \
         verdict that the reproducer leaves out",
    ),
    (
        GUARD,
        "the guard zones' fills before the case and read-backs after it: clhip's own check of \
         the bytes around each buffer, which a reproducer leaves out (its allocations are the \
         case's size; an overrun the guards would catch shows there only as a wrong result or \
         a fault)",
    ),
    (
        PENDING_FAULT,
        "clhip's look for a device fault left pending after the case, which a reproducer \
         leaves to its next call",
    ),
];

/// Calls not compared wherever they are made, and why.
pub const UNCOMPARED_CALLS: &[(&str, &str)] = &[
    (
        "clCreateKernel",
        "kernel objects: a worker makes one per kernel and keeps it, a reproducer one per launch",
    ),
    ("clSetKernelArg", "kernel objects (as clCreateKernel)"),
    (
        "clSetKernelArgSVMPointer",
        "kernel objects (as clCreateKernel)",
    ),
    ("clReleaseKernel", "kernel objects (as clCreateKernel)"),
    (
        "clGetKernelWorkGroupInfo",
        "an info query: the work-group size, asked before each launch on either side",
    ),
    (
        "clGetDeviceInfo",
        "an info query: a worker keeps the device's answers, a reproducer asks where it needs one",
    ),
    (
        "clGetMemObjectInfo",
        "an info query: clhip's FFT checks the size of a buffer it is given",
    ),
    (
        "clGetEventInfo",
        "polling an event while a semaphore wait is watched; a reproducer blocks instead",
    ),
    (
        "cuStreamQuery",
        "polling the peer's stream while OpenCL waits on what the peer is to signal (a watched \
         wait); a reproducer blocks instead",
    ),
    (
        "cuCtxSetCurrent",
        "the context made current: by clhip before each peer operation, by a reproducer once",
    ),
    (
        "hipSetDevice",
        "the device made current: by clhip before each peer operation, by a reproducer once",
    ),
    (
        "cuModuleGetFunction",
        "kernel handles: a worker looks each up once, a reproducer at each launch",
    ),
    (
        "hipModuleGetFunction",
        "kernel handles (as cuModuleGetFunction)",
    ),
    (
        "cuDeviceGetAttribute",
        "an info query: clhip asks whether the device has managed memory before allocating it",
    ),
    (
        "cuMemGetInfo",
        "an info query: clhip asks how much is free before a managed allocation",
    ),
    (
        "hipDeviceGetAttribute",
        "an info query (as cuDeviceGetAttribute)",
    ),
    ("hipMemGetInfo", "an info query (as cuMemGetInfo)"),
    (
        "cublasCreate",
        "a library handle: a worker makes one at its first gemm and keeps it, a reproducer one \
         per program",
    ),
    ("cublasSetStream", "a library handle (as cublasCreate)"),
    ("cublasSetPointerMode", "a library handle (as cublasCreate)"),
    ("cusolverDnCreate", "a library handle (as cublasCreate)"),
    ("cusolverDnSetStream", "a library handle (as cublasCreate)"),
    (
        "rocblas_create_handle",
        "a library handle (as cublasCreate)",
    ),
    ("rocblas_set_stream", "a library handle (as cublasCreate)"),
    (
        "rocblas_set_pointer_mode",
        "a library handle (as cublasCreate)",
    ),
    (
        "cuEventCreate",
        "the event sync's event: a worker makes it when it opens the peer, a reproducer at its \
         first use",
    ),
    (
        "hipEventCreateWithFlags",
        "the event sync's event (as cuEventCreate)",
    ),
];

/// The function a recorded or printed call calls, as compared: the first name a `(` follows
/// (a reproducer writes the call's text, `(m_buf = clCreateBuffer(context, ...), err)`; clhip
/// names some calls with their flag, `clCreateBuffer(CL_MEM_USE_HOST_PTR)`), else the whole
/// text (`cuMemAlloc_v2`); without the `_v2` that CUDA's headers add to some names by macro
/// (`cuMemAlloc` is `cuMemAlloc_v2` in the library).
pub fn canonical(call: &str) -> &str {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let called = call.match_indices('(').find_map(|(at, _)| {
        let start = call[..at].rfind(|c| !ident(c)).map_or(0, |s| s + 1);
        (start < at).then(|| &call[start..at])
    });
    let name = called.unwrap_or(call).trim();
    name.strip_suffix("_v2").unwrap_or(name)
}

/// One recorded line: its scope, if any, and the call.
pub fn parse_line(line: &str) -> (Option<&str>, &str) {
    match line.split_once('/') {
        // A scope is a lower-case word; a call's own text (`(n + 255) / 256`) is not one.
        Some((scope, call))
            if !scope.is_empty() && scope.chars().all(|c| c.is_ascii_lowercase() || c == '-') =>
        {
            (Some(scope), call)
        }
        _ => (None, line),
    }
}

/// Waits for all of one side's work. Several in a row, with no other compared call between,
/// wait for no more than each once: the reproducer writes a sync repeated with nothing between
/// once (repro/emit.rs), and clhip's release finishes OpenCL again after the peer's sync.
pub const SYNCS: &[&str] = &["clFinish", "cuStreamSynchronize", "hipStreamSynchronize"];

/// The compared calls of a recording (one call per line, as [`record`] and a reproducer write
/// them), in order, by their canonical names: the uncompared scopes and calls left out, and a
/// run of [`SYNCS`] with each of its calls once, in first-made order.
pub fn normalise(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Where the current run of syncs started in `out`.
    let mut run = 0;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (scope, name) = parse_line(line);
        if scope.is_some_and(|s| UNCOMPARED_SCOPES.iter().any(|(u, _)| *u == s)) {
            continue;
        }
        let name = canonical(name);
        if UNCOMPARED_CALLS.iter().any(|(u, _)| *u == name) {
            continue;
        }
        if !SYNCS.contains(&name) {
            out.push(name.to_string());
            run = out.len();
        } else if !out[run..].iter().any(|c| c == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// Where two normalised sequences first differ: the index, and each side's call there (`None`
/// past its end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    pub index: usize,
    pub clhip: Option<String>,
    pub repro: Option<String>,
    /// The calls just before the index (both sides make them), for a reader to place it.
    pub before: Vec<String>,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = |c: &Option<String>| c.clone().unwrap_or_else(|| "(no more calls)".into());
        write!(
            f,
            "first difference at call {}: clhip {}, reproducer {} (after {})",
            self.index,
            side(&self.clhip),
            side(&self.repro),
            if self.before.is_empty() {
                "nothing".into()
            } else {
                self.before.join(", ")
            }
        )
    }
}

/// The first difference between clhip's calls and the reproducer's, both normalised; `None`
/// when they are the same sequence.
pub fn compare(clhip: &[String], repro: &[String]) -> Option<Disagreement> {
    compare_until_stopped(clhip, repro, Stopped::default())
}

/// Which side stopped before its last call. A reproducer ends at a refused call, a fault or a
/// wrong word it checks on the way (and a crash), where clhip goes on to release what the
/// case made; clhip's worker dies in a crash or a timeout, where the reproducer may go on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stopped {
    pub clhip: bool,
    pub repro: bool,
}

/// [`compare`], up to where a side stopped: a side that stopped must have made the other's
/// calls up to there (both stopped: up to the first to stop).
pub fn compare_until_stopped(
    clhip: &[String],
    repro: &[String],
    stopped: Stopped,
) -> Option<Disagreement> {
    let end = match (stopped.clhip, stopped.repro) {
        (false, false) => clhip.len().max(repro.len()),
        (false, true) => repro.len(),
        (true, false) => clhip.len(),
        (true, true) => clhip.len().min(repro.len()),
    };
    let index = (0..end).find(|&i| clhip.get(i) != repro.get(i))?;
    Some(Disagreement {
        index,
        clhip: clhip.get(index).cloned(),
        repro: repro.get(index).cloned(),
        before: clhip[index.saturating_sub(3)..index].to_vec(),
    })
}

#[cfg(test)]
mod tests;
