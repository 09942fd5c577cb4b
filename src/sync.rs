//! What every path's handovers share: the access the next owner makes, OpenCL's waits and
//! events, the release and acquire of imported memory, and the semaphores of the `semaphore`
//! sync. How each path hands its memory over is its room's (paths/), which calls in here;
//! this module knows no path's memory.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::ptr;
use std::rc::Rc;

use cl3::memory::{CL_MAP_READ, CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION};
use cl3::types::cl_event;

use crate::model::{CaseError, PathKind, Phase, SyncMode};
use crate::runtimes::PeerRuntime;
use crate::runtimes::device::DeviceRuntime;
use crate::runtimes::opencl::{ClEvent, ClSemaphore, ClSession, ExternalMemoryFns, cl_error};
use crate::runtimes::vulkan::{Broker, ExportedSemaphore, SemaphoreKind};

/// What the next owner will do with the memory. Writing only lets a copy skip its read and a
/// map use CL_MAP_WRITE_INVALIDATE_REGION.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub(crate) fn reads(self) -> bool {
        self != Access::Write
    }

    pub(crate) fn map_flags(self) -> u64 {
        match self {
            Access::Read => CL_MAP_READ,
            Access::Write => CL_MAP_WRITE_INVALIDATE_REGION,
            Access::ReadWrite => CL_MAP_READ | CL_MAP_WRITE,
        }
    }
}

pub(crate) fn wait_list(last: Option<&ClEvent>) -> Vec<cl_event> {
    last.map(|e| vec![e.0]).unwrap_or_default()
}

pub(crate) fn raw_wait(waits: &[cl_event]) -> (u32, *const cl_event) {
    if waits.is_empty() {
        (0, ptr::null())
    } else {
        (waits.len() as u32, waits.as_ptr())
    }
}

/// A semaphore fault planted in a handover (tests only), which the case must come out non-pass
/// for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemaphoreFault {
    /// OpenCL does not signal after its work: the peer's wait never ends, and the case must
    /// end as a timeout naming that wait.
    SkipSignal,
    /// OpenCL waits on another semaphore, one the broker signalled at once, and on the right
    /// one only before its next signal, while the peer's work is held back by a spin kernel:
    /// OpenCL reads before the peer has written, a stale read to be caught. Planted on
    /// OpenCL's side because on H200s a peer waiting on a decoy was never caught, even with
    /// OpenCL's work held back 200 ms: NVIDIA's OpenCL (580) appears to finish its work
    /// before clEnqueueSignalSemaphoresKHR returns.
    WrongSemaphore,
}

/// One binary semaphore of the Vulkan broker, imported by OpenCL and by the peer.
struct Imported {
    exported: ExportedSemaphore,
    cl: ClSemaphore,
    peer: u64,
}

/// The broker's binary semaphores that order the handovers of one shared allocation: the side that
/// gives the memory up signals after its work, the side that takes it waits before its own,
/// each on its device queue, and the host waits for neither. One semaphore per direction: a
/// binary semaphore's wait consumes the signal that is pending when the wait *runs*, and the
/// host enqueues the next handover's wait before the last one's has run. With one semaphore
/// for both directions, OpenCL's wait could take OpenCL's own signal that the peer had not
/// yet consumed (a stale read, seen at n=1 on H200s), and the peer's wait would then wait
/// behind its own signal (a hang). Per direction, the signal of handover k+2 runs only after
/// the other direction's wait, which follows the wait of handover k on the same queue; so
/// made, both semaphore paths passed all 64 cases on two H200s.
pub(crate) struct SemaphoreLink {
    broker: Rc<Broker>,
    /// OpenCL signals, the peer waits.
    to_peer: Imported,
    /// The peer signals, OpenCL waits.
    to_cl: Imported,
    /// The wrong-semaphore plant's decoys, each signalled by the broker when made and
    /// imported by OpenCL, each waited on once: made with the link, so that OpenCL's wrong
    /// wait comes at once (a decoy made at the wait let the peer finish meanwhile, and the case
    /// pass), and one per wait (a binary semaphore signalled again before its wait has run
    /// is undefined, and hung a case).
    decoys: Vec<(ExportedSemaphore, ClSemaphore)>,
    decoys_used: usize,
    /// Under that plant OpenCL still owes `to_cl` its wait (taken before its next signal, so
    /// that each signal is still waited on once).
    cl_owes_wait: bool,
    handovers: u32,
}

impl std::fmt::Debug for SemaphoreLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreLink")
            .field("broker", &self.broker)
            .field("handovers", &self.handovers)
            .finish_non_exhaustive()
    }
}

/// The peer's import of a semaphore fd: a successful import owns the fd (CUDA's and HIP's
/// rule), a refused one leaves it to be closed here.
fn import_peer_semaphore(dev: &mut dyn DeviceRuntime, fd: OwnedFd) -> Result<u64, CaseError> {
    let sem = dev.import_semaphore_fd(fd.as_raw_fd())?;
    let _ = fd.into_raw_fd();
    Ok(sem)
}

/// OpenCL's import of one of the broker's semaphores, through an opaque fd of its own.
fn import_to_cl(
    s: &ClSession,
    broker: &Broker,
    exported: &ExportedSemaphore,
) -> Result<ClSemaphore, CaseError> {
    broker.semaphore_fd(exported).and_then(|fd| {
        ClSemaphore::import_opaque_fd(s, fd).map_err(|e| {
            s.import_refusal(
                e,
                "OpenCL would not import the Vulkan broker's semaphore",
                ("CL_DEVICE_SEMAPHORE_IMPORT_HANDLE_TYPES_KHR", 0x204D),
                ("CL_SEMAPHORE_HANDLE_OPAQUE_FD_KHR", 0x2055),
            )
        })
    })
}

impl Imported {
    /// A binary semaphore of the broker on the peer's GPU, one opaque fd imported by the peer
    /// and another by OpenCL; what was made is undone on a refusal.
    fn create(
        s: &ClSession,
        dev: &mut dyn DeviceRuntime,
        broker: &Broker,
    ) -> Result<Self, CaseError> {
        let exported = broker.semaphore(SemaphoreKind::Binary)?;
        let peer = match broker
            .semaphore_fd(&exported)
            .and_then(|fd| import_peer_semaphore(dev, fd))
        {
            Ok(sem) => sem,
            Err(e) => {
                broker.destroy_semaphore(exported);
                return Err(e.with_note(&broker_note(broker)));
            }
        };
        match import_to_cl(s, broker, &exported) {
            Ok(cl) => Ok(Imported { exported, cl, peer }),
            Err(e) => {
                dev.destroy_semaphore(peer);
                broker.destroy_semaphore(exported);
                Err(e.with_note(&broker_note(broker)))
            }
        }
    }

    fn release(self, dev: Option<&mut dyn DeviceRuntime>, broker: &Broker) {
        drop(self.cl);
        if let Some(dev) = dev {
            dev.destroy_semaphore(self.peer);
        }
        broker.destroy_semaphore(self.exported);
    }
}

impl SemaphoreLink {
    /// Both directions' semaphores. What is missing for them (a peer without semaphores, an
    /// OpenCL without cl_khr_external_semaphore_opaque_fd, no Vulkan, a refused import) is
    /// `Unsupported` with its reason; anything made before a refusal is undone.
    fn create(
        s: &ClSession,
        peer: &mut dyn PeerRuntime,
        path: PathKind,
        orders: bool,
    ) -> Result<Self, CaseError> {
        if !orders {
            return Err(CaseError::unsupported(format!(
                "the semaphore sync orders device work on shared memory; on {path} the data \
                 cross in copies the host waits for, or by map/unmap"
            )));
        }
        let label = peer.peer().label();
        let dev = peer
            .as_device()
            .ok_or_else(|| CaseError::unsupported(format!("{label} has no external semaphores")))?;
        for ext in [
            "cl_khr_external_semaphore",
            "cl_khr_external_semaphore_opaque_fd",
        ] {
            if !s.has_extension(ext) {
                return Err(CaseError::unsupported(format!(
                    "the OpenCL device lacks {ext}, so it cannot import the Vulkan broker's \
                     semaphore"
                )));
            }
        }
        let broker = dev.vulkan()?;
        let to_peer = Imported::create(s, dev, &broker)?;
        let to_cl = match Imported::create(s, dev, &broker) {
            Ok(i) => i,
            Err(e) => {
                to_peer.release(Some(dev), &broker);
                return Err(e);
            }
        };
        let mut link = SemaphoreLink {
            broker,
            to_peer,
            to_cl,
            decoys: Vec::new(),
            decoys_used: 0,
            cl_owes_wait: false,
            handovers: 0,
        };
        if WRONG_SEMAPHORE.get() {
            for _ in 0..DECOYS {
                if let Err(e) = link.add_decoy(s) {
                    link.release(peer);
                    return Err(e);
                }
            }
        }
        Ok(link)
    }

    /// One more decoy for the wrong-semaphore plant, signalled now by the broker's own queue.
    fn add_decoy(&mut self, s: &ClSession) -> Result<(), CaseError> {
        let exported = self.broker.semaphore(SemaphoreKind::Binary)?;
        let signalled = import_to_cl(s, &self.broker, &exported)
            .and_then(|cl| self.broker.signal_now(&exported).map(|()| cl));
        match signalled {
            Ok(cl) => {
                self.decoys.push((exported, cl));
                Ok(())
            }
            Err(e) => {
                self.broker.destroy_semaphore(exported);
                Err(e)
            }
        }
    }

    /// The next unused decoy of the wrong-semaphore plant, already signalled.
    fn signalled_decoy(&mut self, s: &ClSession) -> Result<&ClSemaphore, CaseError> {
        if self.decoys_used == self.decoys.len() {
            self.add_decoy(s)?;
        }
        self.decoys_used += 1;
        Ok(&self.decoys[self.decoys_used - 1].1)
    }

    /// Destroys every import and the broker's semaphores, once both sides are idle.
    pub(crate) fn release(self, peer: &mut dyn PeerRuntime) {
        let SemaphoreLink {
            broker,
            to_peer,
            to_cl,
            decoys,
            ..
        } = self;
        to_peer.release(peer.as_device(), &broker);
        to_cl.release(peer.as_device(), &broker);
        for (exported, cl) in decoys {
            drop(cl);
            broker.destroy_semaphore(exported);
        }
    }
}

/// Which Vulkan device and driver made the semaphore, for a refusal's reason.
fn broker_note(broker: &Broker) -> String {
    format!(
        "semaphore exported by Vulkan device {} ({}, {})",
        broker.survey.name, broker.survey.driver, broker.survey.uuid
    )
}

/// The memory's semaphore (`slot`), made at its first handover; `orders` is whether the
/// semaphore sync means something on `path` (its room says).
fn link<'m>(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    slot: &'m mut Option<SemaphoreLink>,
    path: PathKind,
    orders: bool,
) -> Result<&'m mut SemaphoreLink, CaseError> {
    if slot.is_none() {
        *slot = Some(SemaphoreLink::create(s, peer, path, orders)?);
        // From the first semaphore on, OpenCL's reads watch the peer's stream: a peer that
        // faults never signals, and OpenCL would wait on it for good.
        crate::blocking::watch_peer_queue(device(peer)?.queue_watch());
    }
    slot.as_mut()
        .ok_or_else(|| CaseError::Harness("the semaphore made above is gone".into()))
}

fn device(peer: &mut dyn PeerRuntime) -> Result<&mut dyn DeviceRuntime, CaseError> {
    let label = peer.peer().label();
    peer.as_device()
        .ok_or_else(|| CaseError::unsupported(format!("{label} has no external semaphores")))
}

/// OpenCL to the peer: OpenCL releases imported memory (cl_khr_external_memory), signals the
/// semaphore after its work, and flushes so the signal reaches the device; the peer's stream
/// waits for it. No host wait: the peer's next synchronizing call is where a missing signal
/// would hang, so the wait is announced first.
#[allow(clippy::too_many_arguments)]
pub(crate) fn semaphore_to_peer(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    slot: &mut Option<SemaphoreLink>,
    path: PathKind,
    orders: bool,
    imported: Option<*mut c_void>,
    waits: &[cl_event],
    fault: Option<SemaphoreFault>,
) -> Result<(), CaseError> {
    let released = match imported {
        Some(buffer) => Some(release_external(s, buffer, waits)?),
        None => None,
    };
    let mut after = released
        .as_ref()
        .map_or_else(|| waits.to_vec(), |e| vec![e.0]);
    let label = peer.peer().label();
    let link = link(s, peer, slot, path, orders)?;
    link.handovers += 1;
    // The wait the wrong-semaphore plant left out, before OpenCL signals again.
    let owed = if link.cl_owes_wait {
        link.cl_owes_wait = false;
        let ev = wait_watching_peer(s, &link.to_cl.cl)?;
        after.push(ev.0);
        Some(ev)
    } else {
        None
    };
    if fault != Some(SemaphoreFault::SkipSignal) {
        drop(link.to_peer.cl.signal(s, &after).running()?);
        s.flush().running()?;
    }
    drop(owed);
    let dev = device(peer)?;
    let planted = match fault {
        Some(SemaphoreFault::SkipSignal) => "; planted skip-signal: OpenCL never signals it",
        _ => "",
    };
    crate::blocking::announce(&format!(
        "{} on {label}'s stream, for the semaphore OpenCL signals after its work on {path} \
         memory (handover {}{planted})",
        dev.semaphore_wait_call(),
        link.handovers
    ));
    dev.wait_semaphore(link.to_peer.peer)?;
    if fault == Some(SemaphoreFault::WrongSemaphore) {
        // The peer's next work, and the signal after it, come late.
        dev.spin(SPIN_STEPS)?;
    }
    Ok(())
}

/// The peer to OpenCL: the peer's stream signals the semaphore after its work; OpenCL's queue
/// waits for it, then acquires imported memory. Returns the event OpenCL's next command waits
/// on; no host wait.
pub(crate) fn semaphore_to_cl(
    s: &ClSession,
    peer: &mut dyn PeerRuntime,
    slot: &mut Option<SemaphoreLink>,
    path: PathKind,
    orders: bool,
    buffer: Option<*mut c_void>,
) -> Result<Vec<ClEvent>, CaseError> {
    let label = peer.peer().label();
    let link = link(s, peer, slot, path, orders)?;
    let dev = device(peer)?;
    dev.signal_semaphore(link.to_cl.peer)?;
    link.handovers += 1;
    let wrong = WRONG_SEMAPHORE.get();
    crate::blocking::announce(&format!(
        "clEnqueueWaitSemaphoresKHR on OpenCL's queue, for the semaphore {label} signals after \
         its work on {path} memory (handover {}{})",
        link.handovers,
        if wrong {
            "; planted wrong-semaphore: OpenCL waits on a decoy the broker signalled at once"
        } else {
            ""
        }
    ));
    let waited = if wrong {
        link.cl_owes_wait = true;
        let decoy = link.signalled_decoy(s)?;
        wait_watching_peer(s, decoy)?
    } else {
        crate::trace::timed("OpenCL's semaphore wait enqueued", || {
            wait_watching_peer(s, &link.to_cl.cl)
        })?
    };
    match buffer {
        Some(buffer) => Ok(vec![acquire_external(s, buffer, &[waited.0])?]),
        None => Ok(vec![waited]),
    }
}

/// OpenCL's semaphore wait, enqueued on a thread of its own while the host watches the peer's
/// stream ([`crate::blocking::PeerWatch`]).
fn wait_watching_peer(s: &ClSession, sem: &ClSemaphore) -> Result<ClEvent, CaseError> {
    use std::sync::mpsc::RecvTimeoutError;
    let answer = sem.wait_on_thread(s);
    let mut watch = crate::blocking::PeerWatch::start();
    loop {
        match answer.recv_timeout(std::time::Duration::from_micros(500)) {
            Ok(waited) => return waited.map(|w| w.into_event()).running(),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(CaseError::Harness(
                    "the thread enqueueing OpenCL's semaphore wait ended without an answer".into(),
                ));
            }
            Err(RecvTimeoutError::Timeout) => watch.check()?,
        }
    }
}

thread_local! {
    /// Set for a case under the wrong-semaphore plant.
    static WRONG_SEMAPHORE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Under the wrong-semaphore plant OpenCL's semaphore waits take a decoy, and the peer's work
/// after each of its waits is held back, so that OpenCL reads before the peer has written:
/// every time, not only when the race happens to go that way.
pub(crate) fn set_wrong_semaphore(on: bool) {
    WRONG_SEMAPHORE.set(on);
}

/// Decoys made with a link under the wrong-semaphore plant: more than any op's waits on the
/// peer (handoff's and pipeline's two); a further wait makes its own.
const DECOYS: usize = 4;

/// Steps per thread of the peer's spin kernel: ~200 ms. On an H100 the plant was caught in 12
/// of the 20 cases where OpenCL reads what the peer wrote with this, and in 11 with ten times
/// as many: OpenCL's kernel often ran only after the CUDA work it had not waited for, however
/// long that took, so a longer spin only made the plant's cases slower.
const SPIN_STEPS: u32 = 100_000_000;

fn external_fns(s: &ClSession) -> Result<ExternalMemoryFns, CaseError> {
    ExternalMemoryFns::resolve(s.device.platform).map_err(|e| CaseError::Unsupported {
        reason: "cl_khr_external_memory entry points".into(),
        error: Some(e),
    })
}

/// clEnqueueAcquireExternalMemObjectsKHR after `waits`: OpenCL takes imported memory from its
/// exporter.
pub fn acquire_external(
    s: &ClSession,
    buffer: *mut c_void,
    waits: &[cl_event],
) -> Result<ClEvent, CaseError> {
    let f = external_fns(s)?;
    let (n, w) = raw_wait(waits);
    let mut ev: cl_event = ptr::null_mut();
    // SAFETY: one imported buffer of this context; the out-event is ours to release.
    let rc = crate::trace::timed("clEnqueueAcquireExternalMemObjectsKHR", || unsafe {
        (f.acquire)(s.queue.get(), 1, &buffer, n, w, &mut ev)
    });
    crate::calls::record("clEnqueueAcquireExternalMemObjectsKHR");
    if rc != 0 {
        return Err(CaseError::Broken(cl_error(
            "clEnqueueAcquireExternalMemObjectsKHR",
            rc,
        )));
    }
    Ok(ClEvent(ev))
}

/// clEnqueueReleaseExternalMemObjectsKHR: OpenCL gives imported memory back, after `waits`.
pub fn release_external(
    s: &ClSession,
    buffer: *mut c_void,
    waits: &[cl_event],
) -> Result<ClEvent, CaseError> {
    let f = external_fns(s)?;
    let (n, w) = raw_wait(waits);
    let mut ev: cl_event = ptr::null_mut();
    // SAFETY: as in acquire_external.
    let rc = crate::trace::timed("clEnqueueReleaseExternalMemObjectsKHR", || unsafe {
        (f.release)(s.queue.get(), 1, &buffer, n, w, &mut ev)
    });
    crate::calls::record("clEnqueueReleaseExternalMemObjectsKHR");
    if rc != 0 {
        return Err(CaseError::Broken(cl_error(
            "clEnqueueReleaseExternalMemObjectsKHR",
            rc,
        )));
    }
    Ok(ClEvent(ev))
}

pub(crate) fn finish_or_wait(
    s: &ClSession,
    sync: SyncMode,
    ev: Option<&ClEvent>,
) -> Result<(), CaseError> {
    match (sync, ev) {
        (SyncMode::Event, Some(ev)) => ev.wait().running(),
        _ => s.finish().running(),
    }
}

/// The first OpenCL command after a handover waits on these.
pub fn raw(events: &[ClEvent]) -> Vec<cl_event> {
    events.iter().map(|e| e.0).collect()
}
