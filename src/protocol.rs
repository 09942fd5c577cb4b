//! The line protocol between the runner and its workers, below both (and below the mocks a
//! worker runs), and the conventions every clhip child shares with its parent: the prefix of a
//! protocol line, and the exit statuses that mean the harness's own failure.
//!
//! Protocol (one JSON object per line, both directions):
//! - parent -> worker, on stdin: [`WorkItem`] `{"id":"...","work":{"case":{...}}}`; EOF ends the
//!   batch.
//! - worker -> parent: [`PROTOCOL_PREFIX`] then a [`WorkerEvent`]:
//!   `@@clhip {"event":"start","id":"..."}` before running an item and
//!   `@@clhip {"event":"done","id":"...","outcome":{...},"duration_s":0.01}` after it, each
//!   flushed at once so that the parent knows which case was in flight when the worker died.
//!
//! Protocol lines go to a private duplicate of the original stdout; the worker's fd 1 is pointed
//! at stderr first, so driver chatter (printf from a runtime, buffered by C stdio and flushed in
//! arbitrary chunks) can never split a protocol line. The parent still ignores unprefixed lines.

use std::fs::File;
use std::io::Write;
use std::sync::Mutex;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::generate::DataKind;
use crate::model::Outcome;
use crate::results::Work;

/// Marks a clhip child's protocol lines (a worker's, a probe's vendor child's, a bench child's)
/// among anything else a driver prints.
pub const PROTOCOL_PREFIX: &str = "@@clhip ";

/// One line on the worker's stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkItem {
    pub id: String,
    pub work: Work,
    /// The case's data when not the seeded draw (`clhip repro` trying simpler inputs); absent
    /// from the line otherwise.
    #[serde(default, skip_serializing_if = "DataKind::is_seeded")]
    pub data: DataKind,
}

/// One protocol line from the worker, after [`PROTOCOL_PREFIX`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum WorkerEvent {
    Start {
        id: String,
    },
    Done {
        id: String,
        outcome: Outcome,
        duration_s: f64,
        /// The case's memory, where its crossing began; absent from a mock and a case
        /// refused before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        footprint: Option<crate::footprint::Footprint>,
    },
    /// Where the running case's memory lies, sent before the case touches it.
    Buffer {
        #[serde(flatten)]
        span: crate::fault::BufferSpan,
    },
    /// The worker's own failure (a panic) while running the current case: a harness error.
    HarnessError {
        reason: String,
    },
    /// A call the running case is about to block in, or has enqueued a wait for: what a
    /// timeout then names.
    Blocking {
        call: String,
    },
}

impl WorkerEvent {
    /// Finds a protocol event in a line of worker output. Returns `None` for driver output, and
    /// an error for a prefixed line that does not parse (a harness bug, never driver noise).
    pub fn parse_line(line: &str) -> Option<Result<WorkerEvent, serde_json::Error>> {
        parse_line(line)
    }

    pub fn to_line(&self) -> anyhow::Result<String> {
        line_of(self)
    }
}

/// Set on a spare worker, which the runner starts before it is needed: the case (JSON) whose
/// runtimes and inputs it makes while it waits for its first work item.
pub const PREPARE_ENV: &str = "CLHIP_WORKER_PREPARE";

/// Writes and flushes one protocol line: the parent must see `start` before the case can crash.
/// One `write` per line under the lock, so lines from the panic hook or the announcer never
/// interleave with another.
pub fn send(protocol: &Mutex<File>, event: &WorkerEvent) -> anyhow::Result<()> {
    let line = event.to_line()?;
    let mut file = protocol.lock().unwrap_or_else(|e| e.into_inner());
    file.write_all(line.as_bytes())
        .and_then(|()| file.flush())
        .context("writing a protocol line to the parent")
}

/// A protocol line: [`PROTOCOL_PREFIX`], `record` as JSON, a newline.
pub fn line_of(record: &impl Serialize) -> anyhow::Result<String> {
    let json = serde_json::to_string(record).context("encoding a protocol line")?;
    Ok(format!("{PROTOCOL_PREFIX}{json}\n"))
}

/// Finds a protocol record in a line of child output. `None` for anything else (driver
/// output), an error for a prefixed line that does not parse (a harness bug, never noise).
pub fn parse_line<T: serde::de::DeserializeOwned>(
    line: &str,
) -> Option<Result<T, serde_json::Error>> {
    let json = line.strip_prefix(PROTOCOL_PREFIX)?;
    Some(serde_json::from_str(json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::MockAction;

    #[test]
    fn protocol_lines_round_trip_and_driver_output_is_not_protocol() {
        let done = WorkerEvent::Done {
            id: "mock/pass/0".into(),
            outcome: Outcome::pass(),
            duration_s: 0.5,
            footprint: None,
        };
        let line = done.to_line().unwrap();
        assert_eq!(
            line,
            "@@clhip {\"event\":\"done\",\"id\":\"mock/pass/0\",\"outcome\":{\"outcome\":\"pass\"},\"duration_s\":0.5}\n"
        );
        let parsed = WorkerEvent::parse_line(line.trim_end()).unwrap().unwrap();
        assert_eq!(parsed, done);
        assert!(WorkerEvent::parse_line("amdgpu: some driver message").is_none());
        assert!(
            WorkerEvent::parse_line("@@clhip {not json")
                .unwrap()
                .is_err()
        );
    }

    #[test]
    fn work_items_encode_as_one_json_line() {
        let item = WorkItem {
            id: "mock/segfault/1".into(),
            work: Work::Mock(MockAction::Segfault),
            data: DataKind::Seeded,
        };
        let json = serde_json::to_string(&item).unwrap();
        assert_eq!(
            json,
            r#"{"id":"mock/segfault/1","work":{"mock":"segfault"}}"#
        );
    }
}
