//! What every path's reproducer C shares: the writer a path writes its calls into (the
//! reproducer generator in repro/ implements it), the device peer's spelling of them, and the
//! handover steps more than one path makes. Each path's own C sits in its room, beside the
//! Rust it mirrors.

use crate::model::{PathKind, SyncMode};
use crate::paths::PathFacts;
use crate::sync::Access;

use super::Owner;

/// How a device peer's API spells the calls the body makes inline (repro/cuda.rs, hip.rs).
/// `{p}`, `{bytes}`, `{dst}`, `{src}` are filled in.
#[derive(Clone, Copy)]
pub(crate) struct Dialect {
    /// CHECK's tag for the peer's runtime: `CU`, `HIP`.
    pub tag: &'static str,
    /// The declaration of a device allocation `{p}`.
    pub decl: &'static str,
    /// A device allocation `{p}` as the `uint64_t` the peer's functions take.
    pub addr: &'static str,
    /// A device allocation `{p}` as a `void *` (for USE_HOST_PTR, or as an SVM argument).
    pub as_void: &'static str,
    /// An SVM pointer `{p}` as the memcpy's argument type.
    pub svm_arg: &'static str,
    pub alloc: &'static str,
    pub alloc_managed: &'static str,
    pub alloc_pinned: &'static str,
    pub free: &'static str,
    pub free_pinned: &'static str,
    /// The peer's memcpy with the direction inferred from the pointers.
    pub memcpy: &'static str,
    /// The OpenCL handle type of the fd the peer's VMM export gives (cl_khr_external_memory):
    /// an opaque fd from CUDA, a dma-buf from ROCm (runtimes' `GpuMemory::EXPORT_HANDLE`).
    pub vmm_export: &'static str,
}

impl Dialect {
    pub(crate) fn call(&self, template: &str, p: &str, bytes: &str) -> String {
        format!(
            "CHECK({}, {});",
            self.tag,
            template.replace("{p}", p).replace("{bytes}", bytes)
        )
    }

    pub(crate) fn memcpy(&self, dst: &str, src: &str, bytes: &str) -> String {
        format!(
            "CHECK({}, {});",
            self.tag,
            self.memcpy
                .replace("{dst}", dst)
                .replace("{src}", src)
                .replace("{bytes}", bytes)
        )
    }
}

/// Where a path writes its C: the case's statements, declarations and the helpers they call.
pub(crate) trait CWriter {
    /// C statements, each line indented.
    fn line(&mut self, s: &str);
    fn comment(&mut self, s: &str);
    /// A fresh name for an event variable.
    fn event(&mut self, stem: &str) -> String;
    /// A declaration at the top of `main` (once).
    fn declare(&mut self, d: String);
    /// A common section the statements call.
    fn uses(&mut self, section: &'static str);
    /// An OpenCL kernel the path launches.
    fn launches(&mut self, kernel: &'static str);
    /// The device peer's dialect; none for the host.
    fn dialect(&self) -> Option<Dialect>;
    /// A peer sync: nothing for the host, whose work is done when it returns.
    fn peer_sync(&mut self);
    /// Marks the program as one the generator cannot write (a step it has no C for).
    fn refuse(&mut self, why: String);
}

/// One shared allocation, as the generator tracks it: C variables `<v>_buf`, `<v>_svm`,
/// `<v>_peer`, ... and the state the handovers keep at run time (owner, live mappings).
pub(crate) struct CMem {
    pub v: &'static str,
    pub path: PathKind,
    /// Complex elements, as a C expression.
    pub len: String,
    pub owner: Owner,
    pub mapped: bool,
    pub svm_mapped: bool,
}

impl CMem {
    pub(crate) fn bytes(&self) -> String {
        format!("8 * {}", self.len)
    }

    /// The kernel argument OpenCL takes for it: a buffer object or an SVM (raw) pointer.
    pub(crate) fn arg(&self) -> String {
        if super::room(self.path).c_cl_is_svm() {
            format!("svm({}_svm)", self.v)
        } else {
            format!("mem({}_buf)", self.v)
        }
    }
}

/// The device peer's dialect, or the refusal of a path that needs one on the host.
pub(crate) fn device_dialect(c: &mut dyn CWriter, path: PathKind) -> Option<Dialect> {
    let d = c.dialect();
    if d.is_none() {
        c.refuse(format!(
            "path {path} allocates device memory, which the host has none of"
        ));
    }
    d
}

/// The refusal of a handover no case makes (cases are built from the path's syncs).
pub(crate) fn no_such_handover(c: &mut dyn CWriter, path: PathKind, sync: SyncMode) {
    c.refuse(format!(
        "sync {sync} on {path} is refused when cases are built"
    ));
}

/// `map_flags` as C.
pub(crate) fn map_flags(access: Access) -> &'static str {
    match access {
        Access::Read => "CL_MAP_READ",
        Access::Write => "CL_MAP_WRITE_INVALIDATE_REGION",
        Access::ReadWrite => "CL_MAP_READ | CL_MAP_WRITE",
    }
}

/// A C wait list from an optional event variable.
pub(crate) fn waits(ev: Option<&str>) -> String {
    match ev {
        Some(e) => format!("1, &{e}"),
        None => "0, NULL".into(),
    }
}

/// clFinish, or clWaitForEvents on the last command under `event` (sync.rs finish_or_wait).
pub(crate) fn finish_or_wait(c: &mut dyn CWriter, sync: SyncMode, ev: Option<&str>) {
    match (sync, ev) {
        (SyncMode::Event, Some(e)) => c.line(&format!("CHECK(CL, clWaitForEvents(1, &{e}));")),
        _ => c.line("CHECK(CL, clFinish(queue));"),
    }
}

/// [`super::svm_map`] as C.
pub(crate) fn svm_map(c: &mut dyn CWriter, m: &mut CMem, last: Option<&str>, access: Access) {
    let v = m.v;
    c.line(&format!(
        "CHECK(CL, clEnqueueSVMMap(queue, CL_TRUE, {}, {v}_svm, {}, {}, NULL));",
        map_flags(access),
        m.bytes(),
        waits(last)
    ));
    m.svm_mapped = true;
}

/// [`super::svm_unmap`] as C; the event OpenCL's next command waits on.
pub(crate) fn svm_unmap(c: &mut dyn CWriter, m: &mut CMem) -> String {
    let ev = c.event("unmapped");
    c.declare(format!("cl_event {ev};"));
    c.line(&format!(
        "CHECK(CL, clEnqueueSVMUnmap(queue, {}_svm, 0, NULL, &{ev}));",
        m.v
    ));
    m.svm_mapped = false;
    ev
}

/// `Shared::poison` as C: what each side allocated, filled by that side.
pub(crate) fn poison(c: &mut dyn CWriter, m: &CMem, on_cl: bool, on_peer: bool) {
    let (v, bytes, len) = (m.v, m.bytes(), &m.len);
    c.comment("new memory holds the poison word, written by the API that allocated it");
    if on_cl {
        if super::room(m.path).c_cl_is_svm() {
            c.line(&format!(
                "CHECK(CL, clEnqueueSVMMemFill(queue, {v}_svm, &POISON, 4, {bytes}, 0, NULL, NULL));"
            ));
        } else {
            c.line(&format!(
                "CHECK(CL, clEnqueueFillBuffer(queue, {v}_buf, &POISON, 4, 0, {bytes}, 0, NULL, NULL));"
            ));
        }
        c.line("CHECK(CL, clFinish(queue));");
    }
    if on_peer {
        c.uses("poison");
        c.line(&format!(
            "peer_upload({v}_peer, poison_vec({len}), {bytes});"
        ));
        c.peer_sync();
    }
}

/// `shared_address_to_peer` as C.
pub(crate) fn shared_address_to_peer(
    c: &mut dyn CWriter,
    m: &CMem,
    sync: SyncMode,
    last: Option<&str>,
) {
    match sync {
        SyncMode::None => {}
        SyncMode::Finish | SyncMode::Event => finish_or_wait(c, sync, last),
        other => no_such_handover(c, m.path, other),
    }
}

/// [`super::imported_to_peer`] as C: released to its exporter under `acquire-release` (the
/// release waited for), OpenCL's work finished under `finish` (a negative control), nothing
/// under `none`.
pub(crate) fn imported_to_peer(c: &mut dyn CWriter, m: &CMem, sync: SyncMode, last: Option<&str>) {
    match sync {
        SyncMode::None => {}
        SyncMode::Finish => c.line("CHECK(CL, clFinish(queue));"),
        SyncMode::AcquireRelease => {
            let ev = release_external(c, m, last);
            c.line(&format!("CHECK(CL, clWaitForEvents(1, &{ev}));"));
        }
        other => no_such_handover(c, m.path, other),
    }
}

/// [`super::imported_to_cl`] as C: acquired from its exporter under `acquire-release`; the
/// acquire's event is what OpenCL's next command waits on.
pub(crate) fn imported_to_cl(c: &mut dyn CWriter, m: &CMem, sync: SyncMode) -> Option<String> {
    match sync {
        SyncMode::None | SyncMode::Finish => None,
        SyncMode::AcquireRelease => Some(acquire_external(c, m, None)),
        other => {
            no_such_handover(c, m.path, other);
            None
        }
    }
}

/// [`crate::sync::release_external`] as C, after `last`: the release's event.
pub(crate) fn release_external(c: &mut dyn CWriter, m: &CMem, last: Option<&str>) -> String {
    c.uses("cl_external");
    let ev = c.event("released");
    c.declare(format!("cl_event {ev};"));
    c.line(&format!(
        "{ev} = release_external({}_buf, {});",
        m.v,
        waits(last)
    ));
    ev
}

/// [`crate::sync::acquire_external`] as C, after `last`: the acquire's event.
pub(crate) fn acquire_external(c: &mut dyn CWriter, m: &CMem, last: Option<&str>) -> String {
    c.uses("cl_external");
    let ev = c.event("acquired");
    c.declare(format!("cl_event {ev};"));
    c.line(&format!(
        "{ev} = acquire_external({}_buf, {});",
        m.v,
        waits(last)
    ));
    ev
}

/// The imported buffer OpenCL releases and acquires around a semaphore handover, as a C
/// argument: `NULL` for memory that is not imported.
fn imported_arg(m: &CMem) -> String {
    if m.path.is_imported() {
        format!("{}_buf", m.v)
    } else {
        "NULL".into()
    }
}

/// The variable of `m`'s semaphores (sync.rs `SemaphoreLink`), made at its first semaphore
/// handover, as clhip makes its link.
fn link(c: &mut dyn CWriter, m: &CMem) -> String {
    c.uses("cl_external");
    c.uses("semaphore");
    let l = format!("{}_link", m.v);
    c.declare(format!("static struct link {l};"));
    l
}

/// `sync::semaphore_to_peer` as C: imported memory released, OpenCL's signal after its work
/// (and the release), a flush, and the peer's stream waiting; no host wait. The semaphores
/// are made at the first handover of the memory (the extensions checked, the Vulkan broker
/// opened), in `semaphore_to_peer` itself, as clhip makes them.
pub(crate) fn semaphore_to_peer(c: &mut dyn CWriter, m: &CMem, last: Option<&str>) {
    if device_dialect(c, m.path).is_none() {
        return;
    }
    let l = link(c, m);
    c.line(&format!(
        "semaphore_to_peer(&{l}, {}, {});",
        imported_arg(m),
        waits(last)
    ));
}

/// `sync::semaphore_to_cl` as C: the peer's stream signals after its work, OpenCL's queue
/// waits, and imported memory is acquired after the wait; the event OpenCL's next command
/// waits on.
pub(crate) fn semaphore_to_cl(c: &mut dyn CWriter, m: &CMem) -> Option<String> {
    device_dialect(c, m.path)?;
    let l = link(c, m);
    let ev = c.event("waited");
    c.declare(format!("cl_event {ev};"));
    c.line(&format!(
        "{ev} = semaphore_to_cl(&{l}, {});",
        imported_arg(m)
    ));
    Some(ev)
}

/// What `Shared::release` does for the handovers before the room frees its memory: imported
/// memory OpenCL holds goes back to its exporter (and OpenCL finishes), then the semaphores
/// go, both sides idle.
pub(crate) fn release_handovers(c: &mut dyn CWriter, m: &CMem, sync: SyncMode) {
    if m.path.is_imported() && m.owner == Owner::OpenCl {
        c.comment("imported memory OpenCL holds goes back to its exporter before it is freed");
        release_external(c, m, None);
        c.line("CHECK(CL, clFinish(queue));");
    }
    if sync == SyncMode::Semaphore && c.dialect().is_some() {
        let l = link(c, m);
        c.line(&format!("link_release(&{l});"));
    }
}

/// `shared_address_to_cl` as C.
pub(crate) fn shared_address_to_cl(c: &mut dyn CWriter, m: &CMem, sync: SyncMode) {
    match sync {
        SyncMode::None | SyncMode::Finish | SyncMode::Event => {}
        other => no_such_handover(c, m.path, other),
    }
}
