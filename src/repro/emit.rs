//! The case's steps as C: each path's allocation and poison (paths.rs), each handover of the
//! case's sync (sync.rs), each op's sequence (ops/*.rs), in clhip's order. The handovers are
//! decided here, at generation time, from the path and the sync, so the program holds only the
//! calls this case makes, in the order it makes them.

use crate::model::{Api, Op, PathKind, SyncMode};

use super::ReproCase;
use super::kernels;

pub(super) const COMMON: &str = include_str!("templates/common.c");

/// The text after a template's `/*@ name @*/` line, up to the next such line.
pub(super) fn section(template: &'static str, name: &str) -> &'static str {
    let marker = format!("/*@ {name} @*/\n");
    let Some(start) = template.find(&marker) else {
        unreachable!("template section `{name}` is missing")
    };
    let rest = &template[start + marker.len()..];
    let end = rest.find("/*@ ").unwrap_or(rest.len());
    &rest[..end]
}

/// What [`body`] needs around it: the template sections, the kernels and the constants.
pub(super) struct Body {
    /// Common sections the body calls, in dependency order.
    pub common: Vec<&'static str>,
    /// OpenCL kernels launched.
    pub cl_kernels: Vec<&'static str>,
    /// CUDA kernels launched (cuda pairs).
    pub cuda_kernels: Vec<&'static str>,
    /// Constants and tables (`static const ...`) before the functions.
    pub constants: String,
    /// `int main(void)`.
    pub main: String,
    /// cuBLAS / cuSOLVER needed (cuda pairs).
    pub blas: bool,
    pub solver: bool,
}

/// Who may touch a shared allocation now (paths.rs `Owner`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    OpenCl,
    Peer,
}

/// What the next owner does with the memory (sync.rs `Access`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    fn reads(self) -> bool {
        self != Access::Write
    }

    fn map_flags(self) -> &'static str {
        match self {
            Access::Read => "CL_MAP_READ",
            Access::Write => "CL_MAP_WRITE_INVALIDATE_REGION",
            Access::ReadWrite => "CL_MAP_READ | CL_MAP_WRITE",
        }
    }
}

/// One shared allocation, as the generator tracks it: C variables `<v>_buf`, `<v>_svm`,
/// `<v>_peer`, ... and the state sync.rs keeps at run time (owner, live mappings).
struct Mem {
    v: &'static str,
    path: PathKind,
    peer: Api,
    /// Complex elements, as a C expression.
    len: String,
    owner: Owner,
    mapped: bool,
    svm_mapped: bool,
}

impl Mem {
    fn bytes(&self) -> String {
        format!("8 * {}", self.len)
    }

    /// The kernel argument OpenCL takes for it: a buffer object or an SVM (raw) pointer.
    fn arg(&self) -> String {
        if self.cl_is_svm() {
            format!("svm({}_svm)", self.v)
        } else {
            format!("mem({}_buf)", self.v)
        }
    }

    fn cl_is_svm(&self) -> bool {
        matches!(
            self.path,
            PathKind::ClSvmCoarse
                | PathKind::ClSvmFine
                | PathKind::DevicePtrAsClArg
                | PathKind::ClSvmCoarseMemcpy
                | PathKind::ClSvmFineMemcpy
        )
    }

    fn is_memcpy(&self) -> bool {
        matches!(
            self.path,
            PathKind::ClSvmCoarseMemcpy | PathKind::ClSvmFineMemcpy
        )
    }
}

/// C statements with an indent of four, and fresh names for events.
#[derive(Default)]
struct Out {
    text: String,
    events: usize,
}

impl Out {
    fn line(&mut self, s: impl AsRef<str>) {
        for l in s.as_ref().lines() {
            if l.is_empty() {
                self.text.push('\n');
            } else {
                self.text.push_str("    ");
                self.text.push_str(l);
                self.text.push('\n');
            }
        }
    }

    fn comment(&mut self, s: &str) {
        self.line(format!("/* {s} */"));
    }

    /// Prints a step, so that a crash's last line says where it happened.
    fn step(&mut self, s: &str) {
        self.line(format!("puts(\"-- {}\");", s.replace('"', "\\\"")));
    }

    fn event(&mut self, stem: &str) -> String {
        self.events += 1;
        format!("{stem}{}", self.events)
    }
}

/// `launch(...)` of `kernel` over `global` work-items.
fn launch_call(kernel: &str, global: &str, args: &[String], wait: Option<&str>) -> String {
    format!(
        "launch(\"{kernel}\", {global}, {}, (struct arg[]){{{}}}, {});",
        args.len(),
        args.join(", "),
        waits(wait)
    )
}

/// A C wait list from an optional event variable.
fn waits(ev: Option<&str>) -> String {
    match ev {
        Some(e) => format!("1, &{e}"),
        None => "0, NULL".into(),
    }
}

/// The generator as the case uses it.
struct Gen<'a> {
    case: &'a ReproCase,
    out: Out,
    decls: Vec<String>,
    /// The sync of the handover where the peer takes OpenCL's output (the plant's target).
    take_sync: SyncMode,
    /// Common sections the handovers and paths call.
    extra: Vec<&'static str>,
}

impl Gen<'_> {
    fn device(&self) -> bool {
        self.case.peer.api != Api::Host
    }

    fn uses(&mut self, section: &'static str) {
        if !self.extra.contains(&section) {
            self.extra.push(section);
        }
    }

    fn declare(&mut self, d: impl Into<String>) {
        let d = d.into();
        if !self.decls.contains(&d) {
            self.decls.push(d);
        }
    }

    fn mem(&self, v: &'static str, len: &str) -> Mem {
        Mem {
            v,
            path: self.case.path,
            peer: self.case.peer.api,
            len: len.to_string(),
            owner: Owner::OpenCl,
            mapped: false,
            svm_mapped: false,
        }
    }

    /// Shared::create and its poison (paths.rs).
    fn create(&mut self, m: &Mem) {
        let (v, bytes, len) = (m.v, m.bytes(), m.len.clone());
        let device = self.device();
        self.declare("cl_int err;");
        self.declare(format!("uint64_t {v}_peer;"));
        let use_host = |g: &mut Self, host: &str| {
            g.declare(format!("cl_mem {v}_buf;"));
            g.out.line(format!(
                "CHECK(CL, ({v}_buf = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, {bytes}, (void *)(uintptr_t){host}, &err), err));"
            ));
        };
        self.out
            .step(&format!("{} memory {v} of {len} complex floats", m.path));
        match m.path {
            PathKind::Copy => {
                self.out
                    .comment("copy: an OpenCL buffer; data crosses through host staging memory");
                self.declare(format!("cl_mem {v}_buf;"));
                self.declare(format!("uint64_t {v}_staging;"));
                self.out.line(format!(
                    "CHECK(CL, ({v}_buf = clCreateBuffer(context, CL_MEM_READ_WRITE, {bytes}, NULL, &err), err));\n{v}_staging = host_alloc({len});"
                ));
                if device {
                    self.declare(format!("CUdeviceptr {v}_dev;"));
                    self.out.line(format!(
                        "CHECK(CU, cuMemAlloc(&{v}_dev, {bytes}));\n{v}_peer = {v}_dev;"
                    ));
                } else {
                    self.out.line(format!("{v}_peer = {v}_staging;"));
                }
            }
            PathKind::ClSvmCoarse | PathKind::ClSvmFine => {
                let fine = m.path == PathKind::ClSvmFine;
                self.uses("svm_alloc");
                self.declare(format!("void *{v}_svm;"));
                self.out.line(format!(
                    "{v}_svm = svm_alloc({}, {bytes});\n{v}_peer = (uint64_t)(uintptr_t){v}_svm; /* the peer uses the SVM pointer itself */",
                    fine as u8
                ));
            }
            PathKind::UseHostPtr => {
                self.declare(format!("uint64_t {v}_host;"));
                self.out.line(format!("{v}_host = host_alloc({len});"));
                use_host(self, &format!("{v}_host"));
                self.out.line(format!("{v}_peer = {v}_host;"));
            }
            PathKind::PinnedUseHostPtr => {
                self.declare(format!("void *{v}_pinned;"));
                self.out.line(format!(
                    "CHECK(CU, cuMemHostAlloc(&{v}_pinned, {bytes}, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));"
                ));
                use_host(self, &format!("{v}_pinned"));
                self.out
                    .line(format!("{v}_peer = (uint64_t)(uintptr_t){v}_pinned;"));
            }
            PathKind::DeviceUseHostPtr | PathKind::ManagedUseHostPtr => {
                self.declare(format!("CUdeviceptr {v}_dev;"));
                if m.path == PathKind::DeviceUseHostPtr {
                    self.out.comment(
                        "a device allocation handed to CL_MEM_USE_HOST_PTR as if it were host memory",
                    );
                    self.out
                        .line(format!("CHECK(CU, cuMemAlloc(&{v}_dev, {bytes}));"));
                } else {
                    self.out.line(format!(
                        "CHECK(CU, cuMemAllocManaged(&{v}_dev, {bytes}, CU_MEM_ATTACH_GLOBAL));"
                    ));
                }
                use_host(self, &format!("{v}_dev"));
                self.out.line(format!("{v}_peer = {v}_dev;"));
            }
            PathKind::DevicePtrAsClArg => {
                self.declare(format!("CUdeviceptr {v}_dev;"));
                self.declare(format!("void *{v}_svm;"));
                self.out.comment(
                    "OpenCL kernels take the device pointer through clSetKernelArgSVMPointer",
                );
                self.out.line(format!(
                    "CHECK(CU, cuMemAlloc(&{v}_dev, {bytes}));\n{v}_svm = (void *)(uintptr_t){v}_dev;\n{v}_peer = {v}_dev;"
                ));
            }
            PathKind::ClSvmCoarseMemcpy | PathKind::ClSvmFineMemcpy => {
                let fine = m.path == PathKind::ClSvmFineMemcpy;
                self.uses("svm_alloc");
                self.declare(format!("void *{v}_svm;"));
                self.declare(format!("CUdeviceptr {v}_dev;"));
                self.out.comment("SVM for OpenCL; the peer's own memory, filled and drained by cuMemcpy on the SVM pointer");
                self.out.line(format!(
                    "{v}_svm = svm_alloc({}, {bytes});\nCHECK(CU, cuMemAlloc(&{v}_dev, {bytes}));\n{v}_peer = {v}_dev;",
                    fine as u8
                ));
            }
            other => unreachable!("path {other} is refused by check_covered"),
        }
        // Poison: what each side allocated, filled by that side (paths.rs Shared::poison).
        self.out
            .comment("new memory holds the poison word, written by the API that allocated it");
        let cl_owned = !matches!(m.path, PathKind::DevicePtrAsClArg);
        if cl_owned {
            self.declare("uint32_t poison = POISON;");
            if m.cl_is_svm() {
                self.out.line(format!(
                    "CHECK(CL, clEnqueueSVMMemFill(queue, {v}_svm, &poison, 4, {bytes}, 0, NULL, NULL));"
                ));
            } else {
                self.out.line(format!(
                    "CHECK(CL, clEnqueueFillBuffer(queue, {v}_buf, &poison, 4, 0, {bytes}, 0, NULL, NULL));"
                ));
            }
            self.out.line("CHECK(CL, clFinish(queue));");
        }
        let peer_owned = !matches!(m.path, PathKind::ClSvmCoarse | PathKind::ClSvmFine);
        if peer_owned {
            self.out.line(format!(
                "peer_upload({v}_peer, poison_vec({len}), {len});\npeer_synchronize();"
            ));
        }
    }

    /// Shared::release (paths.rs): both sides let go, mappings undone, memory freed.
    fn release(&mut self, m: &Mem) {
        let v = m.v;
        self.out.step(&format!("release {v}"));
        self.out
            .line("CHECK(CL, clFinish(queue));\npeer_synchronize();");
        if m.mapped {
            self.out.line(format!(
                "CHECK(CL, clEnqueueUnmapMemObject(queue, {v}_buf, {v}_map, 0, NULL, NULL));"
            ));
        }
        if m.svm_mapped {
            self.out.line(format!(
                "CHECK(CL, clEnqueueSVMUnmap(queue, {v}_svm, 0, NULL, NULL));"
            ));
        }
        self.out.line("CHECK(CL, clFinish(queue));");
        let lines = match m.path {
            PathKind::Copy if m.peer == Api::Host => format!(
                "CHECK(CL, clReleaseMemObject({v}_buf));\nfree((void *)(uintptr_t){v}_staging);"
            ),
            PathKind::Copy => format!(
                "CHECK(CL, clReleaseMemObject({v}_buf));\nfree((void *)(uintptr_t){v}_staging);\nCHECK(CU, cuMemFree({v}_dev));"
            ),
            PathKind::ClSvmCoarse | PathKind::ClSvmFine => {
                format!("clSVMFree(context, {v}_svm);")
            }
            PathKind::UseHostPtr => format!(
                "CHECK(CL, clReleaseMemObject({v}_buf));\nfree((void *)(uintptr_t){v}_host);"
            ),
            PathKind::PinnedUseHostPtr => format!(
                "CHECK(CL, clReleaseMemObject({v}_buf));\nCHECK(CU, cuMemFreeHost({v}_pinned));"
            ),
            PathKind::DeviceUseHostPtr | PathKind::ManagedUseHostPtr => {
                format!("CHECK(CL, clReleaseMemObject({v}_buf));\nCHECK(CU, cuMemFree({v}_dev));")
            }
            PathKind::DevicePtrAsClArg => format!("CHECK(CU, cuMemFree({v}_dev));"),
            PathKind::ClSvmCoarseMemcpy | PathKind::ClSvmFineMemcpy => {
                format!("clSVMFree(context, {v}_svm);\nCHECK(CU, cuMemFree({v}_dev));")
            }
            other => unreachable!("path {other} is refused by check_covered"),
        };
        self.out.line(lines);
    }

    /// clFinish, or clWaitForEvents on the last command under `event` (sync.rs finish_or_wait).
    fn finish_or_wait(&mut self, sync: SyncMode, ev: Option<&str>) {
        match (sync, ev) {
            (SyncMode::Event, Some(e)) => self
                .out
                .line(format!("CHECK(CL, clWaitForEvents(1, &{e}));")),
            _ => self.out.line("CHECK(CL, clFinish(queue));"),
        }
    }

    fn svm_map(&mut self, m: &mut Mem, last: Option<&str>, access: Access) {
        let v = m.v;
        self.out.line(format!(
            "CHECK(CL, clEnqueueSVMMap(queue, CL_TRUE, {}, {v}_svm, {}, {}, NULL));",
            access.map_flags(),
            m.bytes(),
            waits(last)
        ));
        m.svm_mapped = true;
    }

    fn svm_unmap(&mut self, m: &mut Mem) -> String {
        let ev = self.out.event("unmapped");
        self.declare(format!("cl_event {ev};"));
        self.out.line(format!(
            "CHECK(CL, clEnqueueSVMUnmap(queue, {}_svm, 0, NULL, &{ev}));",
            m.v
        ));
        m.svm_mapped = false;
        ev
    }

    /// sync.rs `to_peer`: hand `m` to the peer after OpenCL work ending with `last`.
    fn hand_to_peer(&mut self, m: &mut Mem, sync: SyncMode, last: Option<&str>, access: Access) {
        if m.owner == Owner::Peer {
            return;
        }
        let v = m.v;
        self.out.comment(&format!(
            "hand {v} to the peer (sync {sync}{})",
            if sync == SyncMode::None {
                ": nothing orders the peer after OpenCL"
            } else {
                ""
            }
        ));
        match (m.path, sync) {
            (PathKind::Copy, _) => {
                // copy_to_peer: a non-blocking read into staging, waited for per the mode.
                if access.reads() {
                    let ev = self.out.event("read");
                    self.declare(format!("cl_event {ev};"));
                    self.out.line(format!(
                        "CHECK(CL, clEnqueueReadBuffer(queue, {v}_buf, CL_FALSE, 0, {}, (void *)(uintptr_t){v}_staging, {}, &{ev}));",
                        m.bytes(),
                        waits(last)
                    ));
                    if sync != SyncMode::None {
                        self.finish_or_wait(sync, Some(&ev));
                    }
                } else if sync != SyncMode::None {
                    self.finish_or_wait(sync, None);
                }
                if m.peer != Api::Host {
                    self.out.line(format!(
                        "peer_upload({v}_dev, (const float *)(uintptr_t){v}_staging, {});",
                        m.len
                    ));
                }
            }
            _ if m.is_memcpy() => {
                match sync {
                    SyncMode::Map => self.svm_map(m, last, access),
                    SyncMode::None => {}
                    _ => self.finish_or_wait(sync, last),
                }
                if access.reads() {
                    self.out.line(format!(
                        "CHECK(CU, cuMemcpy({v}_dev, (CUdeviceptr)(uintptr_t){v}_svm, {}));",
                        m.bytes()
                    ));
                }
            }
            (_, SyncMode::None) => {}
            (p, SyncMode::Finish | SyncMode::Event) if p.shares_one_address() => {
                self.finish_or_wait(sync, last)
            }
            (PathKind::ClSvmCoarse | PathKind::ClSvmFine, SyncMode::Map) => {
                self.svm_map(m, last, access)
            }
            (p, SyncMode::Map) if p.is_use_host_ptr() => {
                self.declare(format!("void *{v}_map;"));
                self.out.line(format!(
                    "CHECK(CL, ({v}_map = clEnqueueMapBuffer(queue, {v}_buf, CL_TRUE, {}, 0, {}, {}, NULL, &err), err));",
                    access.map_flags(),
                    m.bytes(),
                    waits(last)
                ));
                self.uses("map_check");
                self.out.line(format!("check_mapped({v}_map, {v}_peer);"));
                m.mapped = true;
            }
            (p, SyncMode::Finish) if p.is_use_host_ptr() => {
                self.out.line("CHECK(CL, clFinish(queue));")
            }
            (path, sync) => unreachable!("sync {sync} on {path} is refused when cases are built"),
        }
        m.owner = Owner::Peer;
    }

    /// sync.rs `to_cl`: hand `m` back to OpenCL after the peer's work; the event the next
    /// OpenCL command must wait on, if any.
    fn hand_to_cl(&mut self, m: &mut Mem, sync: SyncMode) -> Option<String> {
        if m.owner == Owner::OpenCl {
            return None;
        }
        let v = m.v;
        self.out
            .comment(&format!("hand {v} back to OpenCL (sync {sync})"));
        match sync {
            SyncMode::None => {}
            SyncMode::Event => {
                if m.peer != Api::Host {
                    self.out.line("peer_event_sync();");
                }
            }
            _ => self.out.line("peer_synchronize();"),
        }
        let mut ready = None;
        match (m.path, sync) {
            (PathKind::Copy, _) => {
                if m.peer != Api::Host {
                    self.out.line(format!(
                        "peer_download({v}_dev, (float *)(uintptr_t){v}_staging, {});",
                        m.len
                    ));
                }
                let ev = self.out.event("written");
                self.declare(format!("cl_event {ev};"));
                self.out.line(format!(
                    "CHECK(CL, clEnqueueWriteBuffer(queue, {v}_buf, CL_FALSE, 0, {}, (void *)(uintptr_t){v}_staging, 0, NULL, &{ev}));",
                    m.bytes()
                ));
                match sync {
                    SyncMode::Finish => self.out.line("CHECK(CL, clFinish(queue));"),
                    SyncMode::Event => {
                        self.out
                            .line(format!("CHECK(CL, clWaitForEvents(1, &{ev}));"));
                        ready = Some(ev);
                    }
                    _ => {}
                }
            }
            _ if m.is_memcpy() => {
                self.out.line(format!(
                    "CHECK(CU, cuMemcpy((CUdeviceptr)(uintptr_t){v}_svm, {v}_dev, {}));",
                    m.bytes()
                ));
                if m.svm_mapped {
                    ready = Some(self.svm_unmap(m));
                }
            }
            (_, SyncMode::None) => {}
            (p, SyncMode::Finish | SyncMode::Event) if p.shares_one_address() => {}
            (PathKind::ClSvmCoarse | PathKind::ClSvmFine, SyncMode::Map) => {
                ready = Some(self.svm_unmap(m));
            }
            (p, SyncMode::Map) if p.is_use_host_ptr() => {
                if m.mapped {
                    let ev = self.out.event("unmapped");
                    self.declare(format!("cl_event {ev};"));
                    self.out.line(format!(
                        "CHECK(CL, clEnqueueUnmapMemObject(queue, {v}_buf, {v}_map, 0, NULL, &{ev}));"
                    ));
                    m.mapped = false;
                    ready = Some(ev);
                }
            }
            (p, SyncMode::Finish) if p.is_use_host_ptr() => {}
            (path, sync) => unreachable!("sync {sync} on {path} is refused when cases are built"),
        }
        m.owner = Owner::OpenCl;
        ready
    }

    /// ops::take_output: the handover where the peer takes OpenCL's output, which the
    /// skip-sync plant leaves out.
    fn take_output(&mut self, m: &mut Mem, last: Option<&str>, access: Access) {
        let sync = self.take_sync;
        if sync != self.case.sync {
            self.out.comment(&format!(
                "PLANTED (skip-sync): clhip runs sync {} here; it is left out",
                self.case.sync
            ));
        }
        self.hand_to_peer(m, sync, last, access);
    }

    /// A kernel launch statement whose event the next step waits on; returns its variable.
    fn launch(
        &mut self,
        kernel: &str,
        global: &str,
        args: &[String],
        wait: Option<&str>,
    ) -> String {
        let ev = self.out.event("ev");
        self.declare(format!("cl_event {ev};"));
        self.out.line(format!(
            "{ev} = {}",
            launch_call(kernel, global, args, wait)
        ));
        ev
    }

    /// A kernel launch whose event nothing waits on.
    fn launch_only(&mut self, kernel: &str, global: &str, args: &[String], wait: Option<&str>) {
        self.out.line(launch_call(kernel, global, args, wait));
    }

    /// ops::produce_on_cl: OpenCL's kernel writes `data` into `m` from a staging buffer.
    fn produce_on_cl(&mut self, m: &mut Mem, data: &str) -> String {
        let v = m.v;
        self.declare(format!("cl_mem {v}_in;"));
        self.out.step(&format!("OpenCL writes {data} into {v}"));
        self.out.line(format!(
            "{v}_in = device_buffer({});\nwrite_buffer({v}_in, {data}, {});",
            m.bytes(),
            m.bytes()
        ));
        let ready = self.hand_to_cl(m, self.case.sync);
        let ev = self.launch(
            "ccopy",
            &m.len.clone(),
            &[format!("mem({v}_in)"), m.arg(), format!("u32({})", m.len)],
            ready.as_deref(),
        );
        self.out.line(format!("clReleaseMemObject({v}_in);"));
        ev
    }

    /// ops::consume_on_cl and the read after it: `m` copied by OpenCL into `out` (floats).
    fn consume_on_cl(&mut self, m: &Mem, ready: Option<&str>, out: &str) {
        let v = m.v;
        self.declare(format!("cl_mem {v}_out;"));
        self.out.step(&format!("OpenCL reads {v} back"));
        self.out
            .line(format!("{v}_out = device_buffer({});", m.bytes()));
        self.launch_only(
            "ccopy",
            &m.len.clone(),
            &[m.arg(), format!("mem({v}_out)"), format!("u32({})", m.len)],
            ready,
        );
        self.out
            .line(format!("read_buffer({v}_out, {out}, {});", m.bytes()));
    }
}

/// The body of `case`'s program with data seed `seed`.
pub(super) fn body(case: &ReproCase, seed: u64, skip_sync: bool) -> anyhow::Result<Body> {
    let mut g = Gen {
        case,
        out: Out::default(),
        decls: Vec::new(),
        take_sync: if skip_sync { SyncMode::None } else { case.sync },
        extra: Vec::new(),
    };
    let mut b = Body {
        common: vec![],
        cl_kernels: vec![],
        cuda_kernels: vec![],
        constants: format!(
            "static const uint64_t SEED = {seed:#018x}ull; /* the data seed */\nstatic const size_t N = {};\n",
            case.n
        ),
        main: String::new(),
        blas: false,
        solver: false,
    };
    match case.op {
        Op::Handoff => handoff(&mut g, &mut b),
        Op::Fft => fft(&mut g, &mut b)?,
        Op::Pipeline => pipeline(&mut g, &mut b)?,
        Op::Gemm => gemm(&mut g, &mut b),
        Op::Cholesky => cholesky(&mut g, &mut b),
        other => unreachable!("op {other} is refused by check_covered"),
    }
    for s in g.extra {
        if !b.common.contains(&s) {
            b.common.push(s);
        }
    }
    let decls = drop_unused(&mut g.out.text, &g.decls);
    let mut main = String::from("int main(void)\n{\n");
    for d in merge_declarations(&decls) {
        main.push_str(&format!("    {d}\n"));
    }
    main.push_str("    setvbuf(stdout, NULL, _IOLBF, 0);\n    cl_open();\n");
    if case.peer.api != Api::Host {
        main.push_str("    peer_open();\n");
    }
    main.push_str(&g.out.text);
    main.push_str("}\n");
    b.main = main;
    Ok(b)
}

/// How often `name` occurs in `text` as a whole identifier (a trailing `(` may end it).
fn occurrences(text: &str, name: &str) -> usize {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name)
        .filter(|&(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(ident) && (name.ends_with('(') || !after.is_some_and(ident))
        })
        .count()
}

/// The declarations `body` uses: a plain `T x;` never named is dropped, and one only ever
/// assigned (`x = f(...);`, an event nothing waits on) loses its assignment too.
fn drop_unused(body: &mut String, decls: &[String]) -> Vec<String> {
    let mut kept = Vec::new();
    for d in decls {
        let plain = d
            .strip_suffix(';')
            .filter(|d| !d.contains(['=', ',', '(']))
            .and_then(|d| d.rsplit_once(' '))
            .map(|(_, name)| name.trim_start_matches('*').to_string());
        let Some(name) = plain else {
            kept.push(d.clone());
            continue;
        };
        let assignment = format!("    {name} = ");
        match occurrences(body, &name) {
            0 => {}
            1 if body.contains(&assignment) => *body = body.replacen(&assignment, "    ", 1),
            _ => kept.push(d.clone()),
        }
    }
    kept
}

/// `T a;` and `T b;` as `T a, b;`, in first-seen order; other declarations as they are.
fn merge_declarations(decls: &[String]) -> Vec<String> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    for d in decls {
        let plain = d.strip_suffix(';').and_then(|d| {
            let (ty, name) = d.rsplit_once(' ')?;
            let ok = !d.contains('=') && !d.contains(',') && !d.contains('(');
            ok.then(|| (ty.to_string(), name.to_string()))
        });
        match plain {
            Some((ty, name)) => {
                // `void *x` splits as (`void`, `*x`): the star stays with the name.
                match out
                    .iter_mut()
                    .find(|(t, _)| t.as_deref() == Some(ty.as_str()))
                {
                    Some((_, names)) => names.push_str(&format!(", {name}")),
                    None => out.push((Some(ty), name)),
                }
            }
            None => out.push((None, d.clone())),
        }
    }
    out.into_iter()
        .map(|(ty, rest)| match ty {
            Some(ty) => format!("{ty} {rest};"),
            None => rest,
        })
        .collect()
}

fn handoff(g: &mut Gen, b: &mut Body) {
    b.common = vec!["pattern", "poison", "cl_buffers", "cl_pattern"];
    b.cl_kernels = vec!["pattern_check", "pattern_observe", "pattern_fill"];
    b.cuda_kernels = vec!["clhip_pattern_fill", "clhip_pattern_check"];
    let peer = g.case.peer.label();
    g.declare("uint32_t base = (uint32_t)(SEED ^ (SEED >> 32)), a = base, b = base ^ 0x55555555u, c = base ^ 0xAAAAAAAAu;");
    g.declare("const uint32_t init[4] = {0, 0xFFFFFFFFu, 0, 0};");
    g.declare("uint32_t ra[4], rc[4], seen_b_word = 0;");
    g.declare("size_t seen_b = 0, seen_b_first = 0;");
    g.declare("cl_mem result_a, result_c;");
    g.declare("const cl_uint words = (cl_uint)(2 * N);");
    g.out.comment("ops/handoff.rs: the peer writes pattern a; OpenCL checks it and writes b; the peer checks b and writes c; OpenCL checks c");
    g.out.line("result_a = device_buffer(16);\nwrite_buffer(result_a, init, 16);\nresult_c = device_buffer(16);\nwrite_buffer(result_c, init, 16);");
    let mut m = g.mem("m", "N");
    g.create(&m);
    g.hand_to_peer(&mut m, g.case.sync, None, Access::Write);
    g.out.step(&format!("{peer} writes pattern a"));
    g.out
        .line("peer_fill_pattern(m_peer, N, a);\npeer_synchronize();");
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL checks pattern a, writes pattern b");
    let checked = g.out.event("checked");
    g.declare(format!("cl_event {checked};"));
    g.out.line(format!(
        "{checked} = cl_check_pattern({}, a, words, result_a, 1, b, {});",
        m.arg(),
        waits(ready.as_deref())
    ));
    g.take_output(&mut m, Some(&checked), Access::ReadWrite);
    g.out
        .step(&format!("{peer} checks pattern b, writes pattern c"));
    g.out.line("seen_b = peer_check_pattern(m_peer, N, b, &seen_b_first, &seen_b_word);\npeer_fill_pattern(m_peer, N, c);\npeer_synchronize();");
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL checks pattern c");
    g.out.line(format!(
        "cl_check_pattern({}, c, words, result_c, 0, 0, {});",
        m.arg(),
        waits(ready.as_deref())
    ));
    g.release(&m);
    g.out
        .comment("every step has run: the verdicts, first wrong crossing first (bit-exact)");
    g.out.line(format!(
        "read_buffer(result_a, ra, 16);\nread_buffer(result_c, rc, 16);\n\
         if (cl_pattern_verdict(\"pattern written by {peer}, read by OpenCL\", ra, a, words))\n    return 1;\n\
         if (seen_b) {{\n    printf(\"FAIL: pattern written by OpenCL, read by {peer}: %zu of %u words differ (bit-exact), first at [%zu]: got 0x%08x want 0x%08x\\n\", seen_b, words, seen_b_first, seen_b_word, pattern_word(b, (uint32_t)seen_b_first));\n    return 1;\n}}\n\
         printf(\"pattern written by OpenCL, read by {peer}: %u words bit-exact\\n\", words);\n\
         if (cl_pattern_verdict(\"pattern rewritten by {peer}, read by OpenCL\", rc, c, words))\n    return 1;\n\
         printf(\"PASS: %u words bit-exact across 4 crossings\\n\", words);\nreturn 0;"
    ));
}

/// The FFT plan's passes as a C table, and the kernels they launch.
fn fft_plan(b: &mut Body, n: usize) -> anyhow::Result<()> {
    let plan = crate::fft::plan(n).map_err(|e| anyhow::anyhow!("{e}"))?;
    let passes: Vec<String> = plan
        .passes
        .iter()
        .map(|p| format!("{{{}, {}, {}}}", p.radix, p.ns, p.tw_off))
        .collect();
    b.constants.push_str(&format!(
        "/* clhip's FFT plan for N (src/fft.rs plan): {{radix, ns, twiddle offset}} per pass */\n\
         static const struct {{ unsigned radix, ns, tw_off; }} FFT_PASSES[] = {{{}}};\n\
         enum {{ FFT_NPASSES = {}, FFT_TWIDDLES = {} }};\n",
        passes.join(", "),
        plan.passes.len(),
        plan.twiddles
    ));
    for p in &plan.passes {
        let k = match p.radix {
            2 => "fft_radix2",
            4 => "fft_radix4",
            _ => "fft_radix8",
        };
        if !b.cl_kernels.contains(&k) {
            b.cl_kernels.push(k);
        }
    }
    if !b.cl_kernels.contains(&"ccopy") {
        b.cl_kernels.push("ccopy");
    }
    Ok(())
}

fn fft(g: &mut Gen, b: &mut Body) -> anyhow::Result<()> {
    b.common = vec![
        "poison",
        "cl_buffers",
        "gen_uniform",
        "gen_cvec",
        "pi",
        "fft_cl",
        "ref_fft",
        "check_fft",
    ];
    fft_plan(b, g.case.n)?;
    let peer = g.case.peer.label();
    g.declare("float *input = complex_vec(SEED, N), *got = malloc(8 * N);");
    g.declare("double *wide = malloc(16 * N), *want;");
    g.out.comment("ops/fft.rs: the peer uploads the input, OpenCL transforms it in place, the peer reads the result");
    let mut m = g.mem("m", "N");
    g.create(&m);
    g.hand_to_peer(&mut m, g.case.sync, None, Access::Write);
    g.out.step(&format!("{peer} uploads the input"));
    g.out
        .line("peer_upload(m_peer, input, N);\npeer_synchronize();");
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL FFT");
    g.declare("cl_event done;");
    g.out.line(format!(
        "done = fft_forward({}, N, {});",
        m.arg(),
        waits(ready.as_deref())
    ));
    g.take_output(&mut m, Some("done"), Access::Read);
    g.out.step(&format!("{peer} reads the result"));
    g.out.line("peer_download(m_peer, got, N);");
    g.release(&m);
    g.out.line(format!(
        "for (size_t i = 0; i < 2 * N; i++)\n    wide[i] = input[i];\nwant = reference_fft(wide, N);\n\
         if (check_fft(\"OpenCL FFT output read by {peer}\", got, want, N))\n    return 1;\n\
         puts(\"PASS: within both bounds\");\nreturn 0;"
    ));
    Ok(())
}

fn pipeline(g: &mut Gen, b: &mut Body) -> anyhow::Result<()> {
    b.common = vec![
        "poison",
        "cl_buffers",
        "gen_uniform",
        "gen_cvec",
        "pi",
        "fft_cl",
        "ref_fft",
        "check_pipeline",
    ];
    b.cl_kernels.push("cadd");
    fft_plan(b, g.case.n)?;
    b.cuda_kernels = vec!["clhip_cscale", "clhip_cmagnitude"];
    let peer = g.case.peer.label();
    g.declare("float *in_a = complex_vec(SEED, N), *in_b = complex_vec(SEED + 1, N), *got = malloc(8 * N);");
    g.declare("float scale = 1.0f / (float)N;");
    g.declare("double *sum = malloc(16 * N), *want;");
    g.declare("cl_mem b_buf, out;");
    g.out.comment("ops/pipeline.rs (seed 000): OpenCL add and FFT, peer scale by 1/N and magnitude, read back through OpenCL");
    g.out.line("b_buf = device_buffer(8 * N);\nwrite_buffer(b_buf, in_b, 8 * N);\nout = device_buffer(8 * N);");
    let mut m = g.mem("m", "N");
    g.create(&m);
    g.hand_to_peer(&mut m, g.case.sync, None, Access::Write);
    g.out.step(&format!("{peer} uploads a"));
    g.out
        .line("peer_upload(m_peer, in_a, N);\npeer_synchronize();");
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL adds b, transforms");
    let added = g.launch(
        "cadd",
        "N",
        &[
            m.arg(),
            "mem(b_buf)".into(),
            m.arg(),
            "u32((cl_uint)N)".into(),
        ],
        ready.as_deref(),
    );
    g.declare("cl_event transformed;");
    g.out.line(format!(
        "transformed = fft_forward({}, N, 1, &{added});",
        m.arg()
    ));
    g.take_output(&mut m, Some("transformed"), Access::ReadWrite);
    g.out.step(&format!("{peer} scales and takes magnitudes"));
    g.out
        .line("peer_scale(m_peer, N, scale);\npeer_magnitude(m_peer, N);\npeer_synchronize();");
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.out.step("OpenCL reads the result back");
    g.launch_only(
        "ccopy",
        "N",
        &[m.arg(), "mem(out)".into(), "u32((cl_uint)N)".into()],
        ready.as_deref(),
    );
    g.release(&m);
    g.out.line(format!(
        "read_buffer(out, got, 8 * N);\n\
         for (size_t i = 0; i < 2 * N; i++)\n    sum[i] = (double)in_a[i] + (double)in_b[i];\nwant = reference_fft(sum, N);\n\
         if (check_pipeline(\"pipeline magnitude (scaled on {peer}) read back through OpenCL\", got, want, scale, N))\n    return 1;\n\
         puts(\"PASS: within the bound\");\nreturn 0;"
    ));
    Ok(())
}

fn gemm(g: &mut Gen, b: &mut Body) {
    b.common = vec![
        "poison",
        "cl_buffers",
        "gen_uniform",
        "gen_matrix",
        "check_gemm",
    ];
    b.cl_kernels = vec!["ccopy"];
    b.blas = true;
    let peer = g.case.peer.label();
    g.declare("float *a = matrix(SEED, N), *b = matrix(SEED + 1, N), *c = matrix(SEED + 2, N), *got = malloc(8 * N * N);");
    g.declare("cuComplex alpha = {1.0f, 0.0f}, beta = {-0.5f, 0.25f};");
    g.out.comment("ops/gemm.rs: OpenCL writes A, B, C into three allocations of the path; cuBLAS computes C = A B + beta C; OpenCL reads C back");
    let mut ma = g.mem("ma", "N * N");
    let mut mb = g.mem("mb", "N * N");
    let mut mc = g.mem("mc", "N * N");
    g.create(&ma);
    g.create(&mb);
    g.create(&mc);
    let ea = g.produce_on_cl(&mut ma, "a");
    let eb = g.produce_on_cl(&mut mb, "b");
    let ec = g.produce_on_cl(&mut mc, "c");
    g.take_output(&mut ma, Some(&ea), Access::Read);
    g.hand_to_peer(&mut mb, g.case.sync, Some(&eb), Access::Read);
    g.hand_to_peer(&mut mc, g.case.sync, Some(&ec), Access::ReadWrite);
    g.out.step(&format!("cgemm on {peer}"));
    g.out
        .line("peer_cgemm(N, alpha, ma_peer, mb_peer, beta, mc_peer);");
    g.hand_to_cl(&mut ma, g.case.sync);
    g.hand_to_cl(&mut mb, g.case.sync);
    let ready = g.hand_to_cl(&mut mc, g.case.sync);
    g.consume_on_cl(&mc, ready.as_deref(), "got");
    g.release(&mc);
    g.release(&mb);
    g.release(&ma);
    g.out.line(format!(
        "if (check_gemm(\"cgemm on {peer} read back through OpenCL\", got, a, b, c, 1.0, 0.0, -0.5, 0.25, N))\n    return 1;\n\
         puts(\"PASS: within the bound\");\nreturn 0;"
    ));
}

fn cholesky(g: &mut Gen, b: &mut Body) {
    b.common = vec!["poison", "cl_buffers", "gen_hpd", "check_cholesky"];
    b.cl_kernels = vec!["ccopy"];
    b.solver = true;
    let peer = g.case.peer.label();
    g.declare("size_t bad_info_want, want_info;");
    g.declare("float *hpd = hpd_matrix(SEED, N), *non_hpd = non_hpd_matrix(SEED + 1, N, &bad_info_want), *got = malloc(8 * N * N);");
    g.declare("double *want = malloc(16 * N * N), *scratch_l = malloc(16 * N * N);");
    g.declare("int info, bad_info;");
    g.out.comment("ops/cholesky.rs: OpenCL writes an HPD matrix, cuSOLVER's cpotrf factors it in place, OpenCL reads the factor back; then the same memory takes a non-HPD matrix, whose info must be the reference's");
    let mut m = g.mem("m", "N * N");
    g.create(&m);
    let ev = g.produce_on_cl(&mut m, "hpd");
    g.take_output(&mut m, Some(&ev), Access::ReadWrite);
    g.out.step(&format!("cpotrf on {peer} (HPD)"));
    g.out.line("info = peer_cpotrf(N, m_peer);");
    let ready = g.hand_to_cl(&mut m, g.case.sync);
    g.consume_on_cl(&m, ready.as_deref(), "got");
    let ev = g.produce_on_cl(&mut m, "non_hpd");
    g.hand_to_peer(&mut m, g.case.sync, Some(&ev), Access::ReadWrite);
    g.out.step(&format!("cpotrf on {peer} (non-HPD)"));
    g.out.line("bad_info = peer_cpotrf(N, m_peer);");
    g.release(&m);
    g.out.line(format!(
        "/* info must be LAPACK's: 0 if HPD, else the 1-based order of the first non-PD leading minor (rocSOLVER clients) */\n\
         if (info != 0) {{\n    printf(\"FAIL: cpotrf info on {peer} (HPD input): got info = %d want info = 0\\n\", info);\n    return 1;\n}}\n\
         if (reference_cholesky(hpd, N, want) != 0) {{\n    puts(\"ERROR: the generator's HPD matrix did not factor in double\");\n    return 2;\n}}\n\
         if (check_cholesky(\"cpotrf factor on {peer} read back through OpenCL\", got, want, N))\n    return 1;\n\
         want_info = reference_cholesky(non_hpd, N, scratch_l);\n\
         if ((size_t)bad_info != want_info) {{\n    printf(\"FAIL: cpotrf info on {peer} (non-HPD input): got info = %d want info = %zu\\n\", bad_info, want_info);\n    return 1;\n}}\n\
         printf(\"PASS: within the bound; non-HPD info %d as the reference (the generator says %zu)\\n\", bad_info, bad_info_want);\nreturn 0;"
    ));
}

/// The program text around a body: the common sections in order, with the target's own.
pub(super) fn common_sections(names: &[&str]) -> String {
    names.iter().map(|n| section(COMMON, n)).collect()
}

/// Every stream's generator, for the bit-identity test.
pub(super) fn generator_source() -> String {
    common_sections(&[
        "includes",
        "chacha",
        "gen_uniform",
        "gen_cvec",
        "gen_matrix",
        "gen_hpd",
        "pattern",
    ])
}

/// The OpenCL and CUDA kernel sources of a body, as C string literals.
pub(super) fn kernel_strings(b: &Body, cuda: bool) -> String {
    let mut s = format!(
        "/* clhip's kernels this case launches (the kernels/ .cl files), built as clhip builds them */\n{}",
        kernels::c_string("CL_SOURCE", &kernels::opencl(&b.cl_kernels))
    );
    // clhip's CUDA peer compiles its module when it opens, whatever the case launches.
    if cuda {
        s.push_str(&format!(
            "/* clhip's CUDA kernels this case launches (kernels/prelude.hip and the kernels/ .hip files), for NVRTC */\n{}",
            kernels::c_string("CUDA_SOURCE", &kernels::cuda(&b.cuda_kernels))
        ));
    }
    s
}

/// What a target API adds around the body.
pub(super) struct Target {
    /// `#include` lines after the common ones.
    pub includes: String,
    /// The CHECK macro and its function.
    pub check: String,
    /// Constants of the target (`CUDA_ORDINAL`).
    pub constants: String,
    /// The peer's functions.
    pub peer: String,
    /// Whether the target compiles CUDA kernels.
    pub cuda: bool,
}

/// The whole program (without its header comment).
pub(super) fn assemble(case: &ReproCase, b: &Body, t: &Target) -> String {
    let has = |name: &str| b.common.contains(&name);
    let mut s = String::new();
    s.push_str(section(COMMON, "cl_errors"));
    s.push_str(&t.check);
    if has("pattern") || case.peer.api == Api::Host {
        s.push_str(section(COMMON, "pattern"));
    }
    if has("gen_cvec") || has("gen_matrix") || has("gen_hpd") {
        s.push_str(section(COMMON, "chacha"));
    }
    for name in ["gen_uniform", "gen_cvec", "gen_matrix", "gen_hpd"] {
        if has(name) {
            s.push_str(section(COMMON, name));
        }
    }
    let (family, index) = super::label_parts(&case.cl_label).unwrap_or(("cl", 0));
    s.push_str(&format!(
        "\n/* The case */\nstatic const char *CL_FAMILY = \"{family}\"; /* the OpenCL device clhip labels {} */\nenum {{ CL_INDEX = {index} }};\n{}{}",
        case.cl_label, t.constants, b.constants
    ));
    s.push_str(&kernel_strings(b, t.cuda));
    s.push_str(section(COMMON, "cl_open"));
    s.push_str(section(COMMON, "cl_launch"));
    for name in [
        "poison",
        "cl_buffers",
        "svm_alloc",
        "map_check",
        "cl_pattern",
        "pi",
        "fft_cl",
        "ref_fft",
        "check_fft",
        "check_pipeline",
        "check_gemm",
        "check_cholesky",
    ] {
        if has(name) {
            s.push_str(section(COMMON, name));
        }
    }
    if matches!(case.path, PathKind::Copy | PathKind::UseHostPtr) {
        s.push_str(section(COMMON, "host_alloc"));
    }
    s.push_str(&t.peer);
    s.push('\n');
    s.push_str(&b.main);
    let s = drop_unused_functions(&s);
    format!(
        "{}{}{}{s}",
        section(COMMON, "includes"),
        t.includes,
        used_declarations(section(COMMON, "cl_decls"), &s)
    )
}

/// `program` without the `static` functions nothing calls (a section holds a few; a case
/// calls what its steps need), each with the comment above it, until none is left.
fn drop_unused_functions(program: &str) -> String {
    let mut lines: Vec<&str> = program.lines().collect();
    loop {
        let text = lines.join("\n");
        let mut cut = None;
        for (at, line) in lines.iter().enumerate() {
            let Some(head) = line.strip_prefix("static ").filter(|l| l.contains('(')) else {
                continue;
            };
            let before = head.split('(').next().unwrap_or_default();
            let name = before
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default();
            // Called (or named, as `&f`) somewhere besides its own definition.
            let calls =
                occurrences(&text, &format!("{name}(")) + text.matches(&format!("&{name}")).count();
            if name.is_empty() || calls > 1 {
                continue;
            }
            // From its comment (the lines above, back to a blank line or the end of the last
            // item) to its closing brace at the start of a line.
            let mut start = at;
            while start > 0 && {
                let prev = lines[start - 1];
                prev.starts_with("/*") || prev.starts_with("   ") && !prev.ends_with('}')
            } {
                start -= 1;
            }
            let end = if line.trim_end().ends_with('}') {
                at
            } else {
                match lines[at..].iter().position(|l| *l == "}") {
                    Some(k) => at + k,
                    None => continue,
                }
            };
            cut = Some((start, end));
            break;
        }
        match cut {
            Some((start, end)) => {
                lines.drain(start..=end);
                if lines.get(start).is_some_and(|l| l.is_empty())
                    && start > 0
                    && lines[start - 1].is_empty()
                {
                    lines.remove(start);
                }
            }
            None => break,
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// The declarations of `decls` that `program` uses: each function prototype whose name
/// `program` calls; types and constants always.
fn used_declarations(decls: &str, program: &str) -> String {
    let mut out = String::new();
    let mut statement = String::new();
    for line in decls.lines() {
        statement.push_str(line);
        statement.push('\n');
        let open = statement.matches('{').count() > statement.matches('}').count();
        if !(line.ends_with(';') || line.starts_with("/*") || line.ends_with("*/")) || open {
            continue;
        }
        let function = statement
            .split_once('(')
            .and_then(|(head, _)| {
                head.rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
            })
            .filter(|name| name.starts_with("cl") && !statement.starts_with("typedef"));
        match function {
            Some(name) if !program.contains(&format!("{name}(")) => {}
            _ => out.push_str(&statement),
        }
        statement.clear();
    }
    out.push_str(&statement);
    out
}
