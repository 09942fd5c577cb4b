//! What a running case tells the process watching it before a call that may never return: a
//! wait on a semaphore that another API is to signal, say. A worker that then stops answering
//! is timed out by the runner, and the last call announced here says where it most likely
//! hangs. Imports nothing of the crate: anything below the worker may announce.

use std::sync::OnceLock;

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
    if let Some(f) = ANNOUNCER.get() {
        f(call);
    }
}
