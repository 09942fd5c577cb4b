//! What a running case tells the process watching it before a call that may never return: a
//! wait on a semaphore that another API is to signal, say. A worker that then stops answering
//! is timed out by the runner, and the last call announced here says where it most likely
//! hangs. Imports nothing of the crate but the model: anything below the worker may announce.

use std::sync::OnceLock;

use crate::model::{ApiError, CaseError};

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

/// Whether the peer's queue is being watched (without looking at it).
pub fn watching() -> bool {
    WATCH.with(|w| w.borrow().is_some())
}

/// The peer's queue state, when it is being watched.
pub fn peer_queue() -> Option<QueueState> {
    WATCH.with(|w| w.borrow().as_ref().map(|f| f()))
}

/// How long OpenCL may go on waiting once the peer's stream has run everything, its signal
/// included: a signal reaches NVIDIA's OpenCL within microseconds; seconds mean never.
pub const SIGNALLED_BUT_WAITING: std::time::Duration = std::time::Duration::from_secs(2);

/// The host's judgement while OpenCL waits on something the peer is to provide: a peer that
/// faulted never will (its fault is the case's outcome); a peer that has run everything while
/// OpenCL still waits is a hang the worker reports itself, rather than the runner's timeout
/// later. A peer still at work is waited for (the runner's timeout still applies).
pub struct PeerWatch {
    started: std::time::Instant,
    idle_since: Option<std::time::Instant>,
}

impl PeerWatch {
    pub fn start() -> Self {
        PeerWatch {
            started: std::time::Instant::now(),
            idle_since: None,
        }
    }

    /// One look at the peer's queue: `Err` ends the wait with the case's outcome.
    pub fn check(&mut self) -> Result<(), CaseError> {
        match peer_queue() {
            Some(QueueState::Failed(e)) if e.is_device_fault() => Err(CaseError::Fault(e)),
            Some(QueueState::Failed(e)) => Err(CaseError::Broken(e)),
            Some(QueueState::Idle) => {
                let since = *self.idle_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() <= SIGNALLED_BUT_WAITING {
                    return Ok(());
                }
                Err(CaseError::Hung {
                    after_s: self.started.elapsed().as_secs_f64(),
                    blocked_in: format!(
                        "{}; the peer's stream had run all its work, its signal included, \
                         {:.1} s before",
                        last_announced(),
                        since.elapsed().as_secs_f64()
                    ),
                })
            }
            Some(QueueState::Busy) | None => {
                self.idle_since = None;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Api;

    fn fault() -> ApiError {
        ApiError {
            api: Api::Cuda,
            call: "cuStreamQuery".into(),
            code: 700,
            name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            detail: String::new(),
        }
    }

    #[test]
    fn a_faulted_peer_ends_the_wait_as_that_fault() {
        watch_peer_queue(Some(Box::new(|| QueueState::Failed(fault()))));
        let r = PeerWatch::start().check();
        watch_peer_queue(None);
        assert!(matches!(r, Err(CaseError::Fault(e)) if e.code == 700));
    }

    #[test]
    fn a_busy_peer_is_waited_for_and_an_idle_one_only_so_long() {
        watch_peer_queue(Some(Box::new(|| QueueState::Busy)));
        let mut w = PeerWatch::start();
        assert!(w.check().is_ok());
        watch_peer_queue(Some(Box::new(|| QueueState::Idle)));
        assert!(
            w.check().is_ok(),
            "idle just now: the signal may be on its way"
        );
        std::thread::sleep(SIGNALLED_BUT_WAITING + std::time::Duration::from_millis(50));
        let r = w.check();
        watch_peer_queue(None);
        match r {
            // The call named is the process's last announcement (other tests announce too).
            Err(CaseError::Hung { blocked_in, .. }) => {
                assert!(blocked_in.contains("had run all its work"), "{blocked_in}")
            }
            other => panic!("{other:?}"),
        }
        assert!(
            PeerWatch::start().check().is_ok(),
            "unwatched: nothing to judge"
        );
    }
}
