//! What a running case tells the process watching it before a call that may never return: a
//! wait on a semaphore that another API is to signal, say. A worker that then stops answering
//! is timed out by the runner, and the last call announced here says where it most likely
//! hangs. Imports nothing of the crate but the model: anything below the worker may announce.

use std::sync::OnceLock;

use crate::model::ApiError;

type Announcer = Box<dyn Fn(&str) + Send + Sync>;

/// Set once by the worker: sends each announcement to the parent at once.
static ANNOUNCER: OnceLock<Announcer> = OnceLock::new();

/// Installs where [`announce`] sends calls (the worker's protocol). A second call is ignored.
pub fn set_announcer(f: Announcer) {
    let _ = ANNOUNCER.set(f);
}

/// Tells whoever watches this process that the case is about to enter (or has enqueued) `call`,
/// which may block it for good; nothing without a watcher.
pub fn announce(call: &str) {
    if let Ok(mut last) = LAST.lock() {
        call.clone_into(&mut last);
    }
    if let Some(f) = ANNOUNCER.get() {
        f(call);
    }
}

static LAST: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// The last call announced in this process.
pub fn last_announced() -> String {
    LAST.lock().map(|l| l.clone()).unwrap_or_default()
}

/// Where the peer's queue stands, seen from the host while OpenCL waits on a semaphore the
/// peer is to signal.
pub enum QueueState {
    /// Work (the signal among it) still to run.
    Busy,
    /// Everything enqueued has run, the signal included.
    Idle,
    /// The queue stopped on an error (a fault): the signal will never run.
    Failed(ApiError),
}

pub type QueueWatch = Box<dyn Fn() -> QueueState>;

thread_local! {
    static WATCH: std::cell::RefCell<Option<QueueWatch>> = const { std::cell::RefCell::new(None) };
}

/// While set, a host wait on OpenCL (a blocking read) also watches the peer's queue: a peer
/// that faulted, or that ran its signal while OpenCL's wait never ended, must not leave the
/// host blocked until the runner's timeout.
pub fn watch_peer_queue(watch: Option<QueueWatch>) {
    WATCH.with(|w| *w.borrow_mut() = watch);
}

/// The peer's queue state, when it is being watched.
pub fn peer_queue() -> Option<QueueState> {
    WATCH.with(|w| w.borrow().as_ref().map(|f| f()))
}
