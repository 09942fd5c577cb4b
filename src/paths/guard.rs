//! Guard zones: bytes of a known word just past the end of every buffer a case allocates, and
//! just before its start where clhip chooses where the case's view lies in its allocation,
//! checked once the case is over. A driver that writes past what it was asked (a copy engine
//! rounding a transfer up, a kernel whose bounds check was miscompiled, a map that writes back
//! a whole page) leaves no trace in the case's own data: a write that lands in memory nobody
//! reads is found only here, and is a `fail` naming the buffer, the offset and the bytes.
//!
//! Sizes. The guard after a view runs from its end to the end of the 4 KiB page that holds
//! the view's end plus [`GUARD_MIN_BYTES`]: at least 64 bytes (a cache line; one complex
//! element is 8), and every byte a 4 KiB MMU page leaves writable past the end. An
//! out-of-bounds write within that page faults on no driver, and on 4 KiB pages it corrupts
//! whatever lies next door (legacy-rocm-build#664: one driver faults, another hides it), so the
//! guard covers exactly the span no page protection can. Offsets count from the allocation's
//! start, which every allocator here aligns to at least 64 bytes (host memory and SVM to a
//! page). Where clhip chooses the view's place (host memory it allocates itself, the SVM of
//! the `cl-svm-*` paths), one page before the view is a guard too: the view stays
//! page-aligned, as zero-copy USE_HOST_PTR wants.
//!
//! Each guard holds its own word ([`guard_word`]): a driver copy that runs one element long
//! from one guarded buffer into another carries the source's guard word, which differs from
//! the destination's and names where it came from.
//!
//! Where the API fixes where the view starts there is a guard after it only: a buffer object
//! is indexed from its start (a view inside one is a sub-buffer, a path of its own), and a
//! device allocation is exported, imported or opened from its start. Memory another process
//! or API allocates (the IPC exporter's, the Vulkan broker's) is allocated with the guard
//! after the view, and the peer maps it whole. OpenCL's USE_HOST_PTR buffer has no guard of its
//! own: the memory it wraps has, checked through its owner. What no case guards: the FFT
//! plan's scratch and twiddles, which are the worker's, not one case's, the `placement` op's
//! reference buffers on the peer, and the peer libraries' workspaces, none of which a path
//! hands over (docs/paths.md#guard-zones).

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;

use cl3::memory::CL_MEM_READ_WRITE;
use num_complex::Complex32;

use crate::model::{BIT_EXACT, CaseError, Mismatch, Phase};
use crate::runtimes::device::{AllocKind, DeviceAlloc, DeviceRuntime};
use crate::runtimes::opencl::{ClEvent, ClMem, ClResultExt, ClSession};
use crate::runtimes::{PeerPtr, PeerRuntime};

/// The fewest guard bytes after any view: a cache line.
pub const GUARD_MIN_BYTES: usize = 64;
/// The page whose end the guard after a view reaches.
pub const GUARD_PAGE: usize = 4096;
/// The guard before a view, where clhip places the view: one page, so the view stays
/// page-aligned.
pub const FRONT_GUARD_BYTES: usize = 4096;
/// The guard words' high bytes; the low byte tells one allocation's guard from the next.
const GUARD_WORD_BASE: u32 = 0x5AFE_6A00;

const ELEM: usize = size_of::<Complex32>();

/// Where a case's view lies in one allocation, in bytes: `front` guard bytes, the `view`, and
/// `back` guard bytes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub front: usize,
    pub view: usize,
    pub back: usize,
}

impl Layout {
    /// The layout of a `view`-byte view, with a front guard when `front`. A view that is not
    /// a whole number of 32-bit words has its guard start at the next word (guards are filled
    /// and read by the word).
    pub fn new(view: usize, front: bool) -> Self {
        let front = if front { FRONT_GUARD_BYTES } else { 0 };
        let end = front + view.next_multiple_of(4);
        let back = (end + GUARD_MIN_BYTES).next_multiple_of(GUARD_PAGE) - front - view;
        Layout { front, view, back }
    }

    /// The layout of a view of `len` complex elements.
    pub fn elements(len: usize, front: bool) -> Self {
        Layout::new(len.max(1) * ELEM, front)
    }

    pub fn total(&self) -> usize {
        self.front + self.view + self.back
    }

    /// The guard regions as (byte offset in the allocation, bytes, before the view).
    fn regions(&self) -> impl Iterator<Item = (usize, usize, bool)> {
        let tail = self.front + self.view.next_multiple_of(4);
        [
            (0, self.front, true),
            (tail, self.front + self.view + self.back - tail, false),
        ]
        .into_iter()
        .filter(|&(_, bytes, _)| bytes > 0)
    }
}

/// Who reads and writes a guard, at the allocation's start.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Side {
    /// OpenCL: a buffer object (offsets within it) or an SVM allocation.
    OpenCl(ClMem),
    /// The peer runtime, through its upload and download, at this address.
    Peer(usize),
    /// Pageable host memory clhip allocated itself, read and written in place.
    Host(usize),
}

/// The guard zones of one allocation.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// What the allocation is, for a failure: `copy path's OpenCL buffer`.
    pub name: String,
    pub side: Side,
    pub layout: Layout,
    pub word: u32,
}

thread_local! {
    /// The guards of the allocations made since [`collect`] began, while a room allocates.
    static COLLECTED: RefCell<Option<Vec<Guard>>> = const { RefCell::new(None) };
    /// The next guard's word.
    static NEXT_WORD: Cell<u32> = const { Cell::new(0) };
    /// The plain OpenCL buffers of the case running on this thread, each retained until
    /// checked: see [`arm_case_buffers`].
    static CASE_BUFFERS: RefCell<Option<Vec<Guard>>> = const { RefCell::new(None) };
}

/// A fresh guard word: [`GUARD_WORD_BASE`] with the next low byte, so that neighbouring
/// allocations differ.
pub(crate) fn guard_word() -> u32 {
    let k = NEXT_WORD.get();
    NEXT_WORD.set(k.wrapping_add(1));
    GUARD_WORD_BASE | (k & 0xFF)
}

fn record(guard: Guard) {
    COLLECTED.with_borrow_mut(|c| {
        if let Some(list) = c {
            list.push(guard);
        }
    });
}

/// Runs `make` (a room's allocations) and returns what it made with the guards of every
/// allocation made through this module meanwhile, whatever `make` returned (a room that fails
/// halfway frees what it made, and the guards go with it).
pub(crate) fn collect<T>(make: impl FnOnce() -> T) -> (T, Vec<Guard>) {
    let outer = COLLECTED.replace(Some(Vec::new()));
    let made = make();
    let guards = COLLECTED.replace(outer).unwrap_or_default();
    (made, guards)
}

/// `len` complex elements of the peer's host memory (pageable memory clhip allocates in every
/// peer), with a guard before and after. Free it with [`free_host`].
pub(crate) fn alloc_host(
    peer: &mut dyn PeerRuntime,
    len: usize,
    name: &str,
) -> Result<PeerPtr, CaseError> {
    let layout = Layout::elements(len, true);
    let whole = peer.alloc_host(layout.total() / ELEM)?;
    record(Guard {
        name: name.to_string(),
        side: Side::Host(whole.addr),
        layout,
        word: guard_word(),
    });
    Ok(PeerPtr {
        addr: whole.addr + layout.front,
        len,
    })
}

/// The whole allocation (guards included) under what [`alloc_host`] returned, for a caller
/// that frees it through another handle of the same peer.
pub(crate) fn host_whole(view: PeerPtr) -> PeerPtr {
    let layout = Layout::elements(view.len, true);
    PeerPtr {
        addr: view.addr - layout.front,
        len: layout.total() / ELEM,
    }
}

/// Free what [`alloc_host`] returned.
pub(crate) fn free_host(peer: &mut dyn PeerRuntime, view: PeerPtr) {
    peer.free_host(host_whole(view));
}

/// A device runtime's allocation of `kind` with a guard after `len` complex elements. The
/// view starts at the allocation's start: an export or IPC handle covers an allocation from
/// there, and OpenCL's import of it indexes from there. Its `ptr` is the view; it frees as
/// any allocation (by its handle and `bytes`).
pub(crate) fn alloc_device(
    dev: &mut dyn DeviceRuntime,
    kind: AllocKind,
    len: usize,
    name: &str,
) -> Result<DeviceAlloc, CaseError> {
    let layout = Layout::elements(len, false);
    let mut alloc = dev.alloc(kind, layout.total() / ELEM)?;
    record(Guard {
        name: name.to_string(),
        side: Side::Peer(alloc.ptr.addr),
        layout,
        word: guard_word(),
    });
    alloc.ptr.len = len;
    Ok(alloc)
}

/// Records the guard of an allocation made elsewhere (another process, the Vulkan broker) at
/// `layout.total()` bytes, which the peer reaches from `addr`.
pub(crate) fn record_peer(addr: usize, layout: Layout, name: &str) {
    record(Guard {
        name: name.to_string(),
        side: Side::Peer(addr),
        layout,
        word: guard_word(),
    });
}

/// clCreateBuffer of `bytes` with a guard after them (a buffer object has no view offset
/// short of a sub-buffer, which is a path of its own).
pub(crate) fn cl_buffer(
    session: &ClSession,
    bytes: usize,
    name: &str,
) -> Result<*mut c_void, CaseError> {
    let (buffer, guard) = guarded_buffer(session, bytes, name)?;
    record(guard);
    Ok(buffer)
}

/// A buffer of `bytes` and a guard after them, and that guard (not yet filled).
pub(crate) fn guarded_buffer(
    session: &ClSession,
    bytes: usize,
    name: &str,
) -> Result<(*mut c_void, Guard), CaseError> {
    let layout = Layout::new(bytes, false);
    // SAFETY: no host pointer; the size is non-zero.
    let buffer = unsafe {
        cl3::memory::create_buffer(
            session.context.get(),
            CL_MEM_READ_WRITE,
            layout.total(),
            ptr::null_mut(),
        )
    }
    .call("clCreateBuffer")
    .refused(name)?;
    let guard = Guard {
        name: name.to_string(),
        side: Side::OpenCl(ClMem::Buffer(buffer)),
        layout,
        word: guard_word(),
    };
    Ok((buffer, guard))
}

/// Enqueues the fill of `g`'s zones through OpenCL (in order on the queue: no wait needed
/// before the next command).
pub(crate) fn fill_on_queue(session: &ClSession, g: &Guard) -> Result<(), CaseError> {
    crate::calls::scoped(crate::calls::GUARD, || {
        if let Side::OpenCl(mem) = g.side {
            for (at, bytes, _) in g.layout.regions() {
                fill_opencl(session, mem, at, bytes, g.word)
                    .refused("OpenCL would not fill a guard zone")?;
            }
        }
        Ok(())
    })
}

/// SVM of `bytes` for `path` (see [`super::svm::svm_alloc`]) with a guard after, and one
/// before when `front`; returns the view's pointer. Free it with [`svm_free`].
pub(crate) fn svm_alloc(
    session: &ClSession,
    path: crate::model::PathKind,
    bytes: usize,
    front: bool,
    name: &str,
) -> Result<*mut c_void, CaseError> {
    let layout = Layout::new(bytes, front);
    let base = super::svm::svm_alloc(session, path, layout.total())?;
    record(Guard {
        name: name.to_string(),
        side: Side::OpenCl(ClMem::Svm(base)),
        layout,
        word: guard_word(),
    });
    // SAFETY: within the allocation just made.
    Ok(unsafe { base.cast::<u8>().add(layout.front) }.cast())
}

/// Free what [`svm_alloc`] returned (with the same `front`).
pub(crate) fn svm_free(session: &ClSession, view: *mut c_void, front: bool) {
    let back_off = if front { FRONT_GUARD_BYTES } else { 0 };
    // SAFETY: `view` is `back_off` bytes into the allocation svm_alloc made.
    super::svm::svm_free(session, unsafe { view.cast::<u8>().sub(back_off) }.cast());
}

/// Register a plain OpenCL buffer of the running case (one [`super::DeviceBuffer`]), to be
/// checked by [`check_case_buffers`]. Retained meanwhile, so that its guard outlives the
/// buffer's owner. Outside a case (a benchmark), nothing is kept.
pub(crate) fn keep_case_buffer(guard: Guard) {
    CASE_BUFFERS.with_borrow_mut(|c| {
        if let (Some(list), Side::OpenCl(ClMem::Buffer(b))) = (c, guard.side) {
            // SAFETY: a live buffer; the reference is released in check_case_buffers.
            if unsafe { cl3::memory::retain_mem_object(b) }.is_ok() {
                list.push(guard);
            }
        }
    });
}

/// From now on this thread's plain OpenCL buffers are the running case's, kept for
/// [`check_case_buffers`]. Anything an earlier case left is released unchecked. The guard
/// words start over, so that a case's words (and a failure's bytes) do not depend on which
/// cases its worker ran before.
pub(crate) fn arm_case_buffers() {
    NEXT_WORD.set(0);
    let left = CASE_BUFFERS.replace(Some(Vec::new()));
    release_kept(left.unwrap_or_default());
}

/// Checks the guards of the running case's plain OpenCL buffers when `check` (the case
/// passed so far: a case that already failed or stopped keeps its own reason, and its queue
/// may hold work that never ends), then lets them go.
pub(crate) fn check_case_buffers(session: &ClSession, check: bool) -> Result<(), CaseError> {
    crate::calls::scoped(crate::calls::GUARD, || {
        let kept = CASE_BUFFERS.take().unwrap_or_default();
        let mut first = Ok(());
        if check {
            for g in &kept {
                if let Err(e) = check_opencl(session, g) {
                    first = Err(e);
                    break;
                }
            }
        }
        release_kept(kept);
        first
    })
}

fn release_kept(kept: Vec<Guard>) {
    for g in kept {
        if let Side::OpenCl(ClMem::Buffer(b)) = g.side {
            super::release_buffer(b);
        }
    }
}

/// The guard words of `bytes` bytes, as elements for a peer's upload.
fn guard_elements(word: u32, bytes: usize) -> Vec<Complex32> {
    let w = f32::from_bits(word);
    vec![Complex32::new(w, w); bytes / ELEM]
}

/// Writes every guard's word into its zones, each through its owner, and waits for both
/// sides.
pub(crate) fn fill(
    session: &ClSession,
    peer: &mut dyn PeerRuntime,
    guards: &[Guard],
) -> Result<(), CaseError> {
    crate::calls::scoped(crate::calls::GUARD, || {
        for g in guards {
            for (at, bytes, _) in g.layout.regions() {
                match g.side {
                    Side::OpenCl(mem) => fill_opencl(session, mem, at, bytes, g.word)
                        .refused("OpenCL would not fill a guard zone")?,
                    Side::Peer(base) => peer.upload(
                        PeerPtr {
                            addr: base + at,
                            len: bytes / ELEM,
                        },
                        &guard_elements(g.word, bytes),
                    )?,
                    Side::Host(base) => fill_host(base + at, bytes, g.word),
                }
            }
        }
        session
            .finish()
            .refused("OpenCL would not finish the guard fill")?;
        peer.synchronize()
    })
}

fn fill_host(addr: usize, bytes: usize, word: u32) {
    for i in 0..bytes / 4 {
        // SAFETY: the caller's region lies within a live host allocation of clhip's.
        unsafe { (addr as *mut u32).add(i).write_volatile(word) };
    }
}

fn read_host(addr: usize, bytes: usize) -> Vec<u32> {
    (0..bytes / 4)
        // SAFETY: the caller's region lies within a live host allocation of clhip's.
        .map(|i| unsafe { (addr as *const u32).add(i).read_volatile() })
        .collect()
}

/// clEnqueueFillBuffer / clEnqueueSVMMemFill of `word` over `bytes` at byte `at`.
fn fill_opencl(
    session: &ClSession,
    mem: ClMem,
    at: usize,
    bytes: usize,
    word: u32,
) -> Result<(), crate::model::ApiError> {
    let pattern: *const c_void = (&raw const word).cast();
    let queue = session.queue.get();
    // SAFETY: the region lies within the allocation; the 4-byte pattern is copied before the
    // call returns.
    let ev = unsafe {
        match mem {
            ClMem::Buffer(b) => cl3::command_queue::enqueue_fill_buffer(
                queue,
                b,
                pattern,
                4,
                at,
                bytes,
                0,
                ptr::null(),
            )
            .call("clEnqueueFillBuffer"),
            ClMem::Svm(p) => cl3::command_queue::enqueue_svm_mem_fill(
                queue,
                p.cast::<u8>().add(at).cast(),
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

/// Reads back every guard zone, each through its owner, once both sides are idle: the first
/// byte that is not its guard word is a `fail` naming the allocation, its offset and the bytes.
pub(crate) fn check(
    session: &ClSession,
    peer: &mut dyn PeerRuntime,
    guards: &[Guard],
) -> Result<(), CaseError> {
    crate::calls::scoped(crate::calls::GUARD, || {
        for g in guards {
            match g.side {
                Side::OpenCl(_) => check_opencl(session, g)?,
                Side::Peer(base) => {
                    for (at, bytes, before) in g.layout.regions() {
                        let got = peer.download(PeerPtr {
                            addr: base + at,
                            len: bytes / ELEM,
                        })?;
                        let words: Vec<u32> = got
                            .iter()
                            .flat_map(|c| [c.re, c.im])
                            .map(f32::to_bits)
                            .collect();
                        judge(g, at, before, &words)?;
                    }
                }
                Side::Host(base) => {
                    for (at, bytes, before) in g.layout.regions() {
                        judge(g, at, before, &read_host(base + at, bytes))?;
                    }
                }
            }
        }
        Ok(())
    })
}

fn check_opencl(session: &ClSession, g: &Guard) -> Result<(), CaseError> {
    let Side::OpenCl(mem) = g.side else {
        return Ok(());
    };
    for (at, bytes, before) in g.layout.regions() {
        let mut words = vec![0u32; bytes / 4];
        let dst = words.as_mut_ptr().cast::<c_void>();
        let queue = session.queue.get();
        // SAFETY: blocking reads of a region within the allocation into a vector of its size.
        let ev = unsafe {
            match mem {
                ClMem::Buffer(b) => cl3::command_queue::enqueue_read_buffer(
                    queue,
                    b,
                    cl3::types::CL_TRUE,
                    at,
                    bytes,
                    dst,
                    0,
                    ptr::null(),
                )
                .call("clEnqueueReadBuffer"),
                ClMem::Svm(p) => cl3::command_queue::enqueue_svm_mem_cpy(
                    queue,
                    cl3::types::CL_TRUE,
                    dst,
                    p.cast::<u8>().add(at).cast(),
                    bytes,
                    0,
                    ptr::null(),
                )
                .call("clEnqueueSVMMemcpy"),
            }
        }
        .running()?;
        drop(ClEvent(ev));
        judge(g, at, before, &words)?;
    }
    Ok(())
}

/// The verdict on one guard zone that starts at byte `at` of `g`'s allocation and holds
/// `words`.
fn judge(g: &Guard, at: usize, before: bool, words: &[u32]) -> Result<(), CaseError> {
    match guard_mismatch(g, at, before, words) {
        None => Ok(()),
        Some(m) => Err(CaseError::Mismatch(Box::new(m))),
    }
}

/// What a guard zone holding `words` (from byte `at` of the allocation) says, if anything
/// overwrote it. The index is in bytes: from the view's start for the zone after it (so a
/// write one element past a view of n bytes is first at [n]), and before the view's start for
/// the zone before it. Got and want are the eight bytes (one complex element) from the first
/// word that differs, in memory order.
pub(crate) fn guard_mismatch(
    g: &Guard,
    at: usize,
    before: bool,
    words: &[u32],
) -> Option<Mismatch> {
    let first = words.iter().position(|&w| w != g.word)?;
    let count = words.iter().filter(|&&w| w != g.word).count();
    let byte = at + 4 * first;
    let (index, place) = if before {
        (
            g.layout.front - byte,
            format!(
                "the {}-byte guard before the case's {} bytes (index: bytes before the view's start)",
                g.layout.front, g.layout.view
            ),
        )
    } else {
        (
            byte - g.layout.front,
            format!(
                "the {}-byte guard after the case's {} bytes (index: bytes from the view's start)",
                words.len() * 4,
                g.layout.view
            ),
        )
    };
    let bytes = |ws: &[u32]| -> String {
        ws.iter()
            .flat_map(|w| w.to_le_bytes())
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let seen = &words[first..(first + 2).min(words.len())];
    Some(Mismatch {
        what: format!("{}: {place} was overwritten", g.name),
        index,
        got: format!("[{}]", bytes(seen)),
        want: format!("[{}]", bytes(&vec![g.word; seen.len()])),
        count,
        len: words.len(),
        max_abs_err: f64::NAN,
        max_rel_err: f64::NAN,
        bound: 0.0,
        formula: BIT_EXACT.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_reaches_the_page_end_and_is_never_under_a_cache_line() {
        // One element: 8 bytes of view, the rest of the page.
        assert_eq!(
            Layout::elements(1, false),
            Layout {
                front: 0,
                view: 8,
                back: 4088
            }
        );
        // A view that ends 64 bytes or less before a page end runs into the next page.
        let l = Layout::new(4096 - 32, false);
        assert_eq!((l.back, l.total()), (32 + 4096, 8192));
        let l = Layout::new(4096, false);
        assert_eq!(l.back, 4096);
        // The front guard keeps the view page-aligned, and the back guard still ends a page.
        let l = Layout::elements(4097, true);
        assert_eq!(l.front, 4096);
        assert_eq!(l.total() % GUARD_PAGE, 0);
        assert!(l.back >= GUARD_MIN_BYTES);
        // A view that is not whole words has its guard from the next word.
        let l = Layout::new(6, false);
        let regions: Vec<_> = l.regions().collect();
        assert_eq!(regions, vec![(8, 4088, false)]);
    }

    #[test]
    fn an_overwritten_guard_names_the_buffer_the_offset_and_the_bytes() {
        let g = Guard {
            name: "copy path's OpenCL buffer".into(),
            side: Side::Host(0),
            layout: Layout::elements(4, true),
            word: 0x5AFE_6A07,
        };
        let back = g.layout.front + g.layout.view;
        let mut words = vec![g.word; 16];
        assert!(guard_mismatch(&g, back, false, &words).is_none());
        // One element written past the end: the first two words of the back guard.
        words[0] = 0x3F80_0000;
        words[1] = 0x0000_0001;
        let m = guard_mismatch(&g, back, false, &words).expect("an overrun");
        assert_eq!((m.index, m.count, m.len), (32, 2, 16));
        assert_eq!(m.got, "[00 00 80 3f 01 00 00 00]");
        assert_eq!(m.want, "[07 6a fe 5a 07 6a fe 5a]");
        let reason = crate::model::Outcome::mismatch(m).reason();
        assert!(
            reason.starts_with("copy path's OpenCL buffer: the 64-byte guard after the case's 32 bytes (index: bytes from the view's start) was overwritten: 2 of 16 words differ (bit-exact), first at [32]"),
            "{reason}"
        );
        // The last word before the view: 4 bytes before its start.
        let mut front = vec![g.word; 1024];
        front[1023] = 0;
        let m = guard_mismatch(&g, 0, true, &front).expect("an underrun");
        assert_eq!((m.index, m.count), (4, 1));
        assert!(
            m.what.contains("guard before the case's 32 bytes"),
            "{}",
            m.what
        );
    }

    #[test]
    fn host_guards_are_filled_and_an_overrun_is_caught_in_place() {
        let mut peer = crate::runtimes::host::HostPeer;
        let (view, guards) = collect(|| alloc_host(&mut peer, 5, "host memory"));
        let view = view.unwrap();
        assert_eq!(guards.len(), 1);
        assert_eq!(view.addr % GUARD_PAGE, 0, "the view stays page-aligned");
        let g = &guards[0];
        let Side::Host(base) = g.side else {
            panic!("host memory is checked in place")
        };
        assert_eq!(base + FRONT_GUARD_BYTES, view.addr);
        for (at, bytes, _) in g.layout.regions() {
            fill_host(base + at, bytes, g.word);
        }
        let judge_all = || -> Result<(), CaseError> {
            for (at, bytes, before) in g.layout.regions() {
                judge(g, at, before, &read_host(base + at, bytes))?;
            }
            Ok(())
        };
        assert_eq!(judge_all(), Ok(()));
        // The whole view written leaves the guards alone; one element more does not.
        let elems = view.addr as *mut u64;
        unsafe { (0..5).for_each(|i| elems.add(i).write(0x1234)) };
        assert_eq!(judge_all(), Ok(()));
        unsafe { elems.add(5).write(0x1234) };
        match judge_all() {
            Err(CaseError::Mismatch(m)) => {
                assert_eq!((m.index, m.count), (40, 2), "{m}");
                assert_eq!(m.got, "[34 12 00 00 00 00 00 00]");
            }
            other => panic!("an overrun of one element: {other:?}"),
        }
        // And one element before the view.
        unsafe { elems.add(5).write(u64::from(g.word) * 0x1_0000_0001) };
        unsafe { elems.sub(1).write(0) };
        match judge_all() {
            Err(CaseError::Mismatch(m)) => assert_eq!(m.index, 8, "{m}"),
            other => panic!("an underrun of one element: {other:?}"),
        }
        free_host(&mut peer, view);
    }

    /// A plain buffer's guard, through OpenCL (PoCL on CI): the buffer written to its end
    /// passes; eight bytes more fail the case that made it, naming the buffer and the offset.
    /// A case that already failed is not checked.
    #[test]
    fn an_overrun_of_a_plain_buffer_fails_the_case_that_made_it() {
        let Some(dev) = crate::runtimes::opencl::test_device() else {
            return;
        };
        let session = ClSession::open(dev).expect("an OpenCL session");
        let write = |b: &super::super::DeviceBuffer, bytes: usize| {
            let data = vec![0xABu8; bytes];
            // SAFETY: a blocking write within the buffer's allocation (its guard included).
            let ev = unsafe {
                cl3::command_queue::enqueue_write_buffer(
                    session.queue.get(),
                    b.mem,
                    cl3::types::CL_TRUE,
                    0,
                    bytes,
                    data.as_ptr().cast(),
                    0,
                    ptr::null(),
                )
            }
            .expect("clEnqueueWriteBuffer");
            drop(ClEvent(ev));
        };
        for (bytes, checked, caught) in [(64, true, false), (72, true, true), (72, false, false)] {
            arm_case_buffers();
            let b = super::super::DeviceBuffer::named(&session, 64, "a check's result words")
                .expect("a buffer");
            write(&b, bytes);
            drop(b);
            match check_case_buffers(&session, checked) {
                Ok(()) => assert!(!caught, "{bytes} bytes written, checked: {checked}"),
                Err(CaseError::Mismatch(m)) => {
                    assert!(caught, "{bytes} bytes written, checked: {checked}: {m}");
                    assert_eq!((m.index, m.count), (64, 2), "{m}");
                    assert!(
                        m.what.starts_with(
                            "a check's result words: the 4032-byte guard after the case's 64 bytes"
                        ),
                        "{m}"
                    );
                    assert_eq!(m.got, "[ab ab ab ab ab ab ab ab]");
                }
                Err(e) => panic!("{e:?}"),
            }
        }
    }
}
