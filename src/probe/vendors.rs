//! Each OpenCL vendor library (ICD) probed in a child process of its own that loads only that
//! library, under a time limit: the parent's side and the child's.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::isolation::{VendorLine, VendorResult, answer_parent, run_child};
use super::queries::probe_opencl;
use super::records::VendorState;
use crate::runtimes::opencl::{self, VendorLibrary};

/// How long one OpenCL vendor library may take to list its platforms and devices before it is
/// reported as hung and its process group killed. Generous: a GPU driver's first
/// initialisation (firmware load, JIT cache) takes seconds, a hung one takes forever.
pub const VENDOR_PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Overrides [`VENDOR_PROBE_TIMEOUT`], in seconds (tests use a short limit).
pub const VENDOR_TIMEOUT_ENV: &str = "CLHIP_PROBE_VENDOR_TIMEOUT_S";

/// The hidden subcommand that probes the one vendor library its environment names.
pub const VENDOR_CHILD_SUBCOMMAND: &str = "__probe-opencl-vendor";

pub(super) fn vendor_timeout() -> Duration {
    std::env::var(VENDOR_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        // try_: a limit too large for a Duration (1e300) falls back to the default, never panics.
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(VENDOR_PROBE_TIMEOUT)
}

/// The hidden `clhip __probe-opencl-vendor` subcommand: probes whichever vendor library its
/// environment lets the loader see (the parent sets [`opencl::single_vendor_env`]) and answers
/// on stdout with protocol lines: the call about to be made, then the platforms.
pub fn vendor_child_main() -> anyhow::Result<()> {
    let mut send = answer_parent()?;
    // A stage line that cannot be written means the parent is gone; the answer would fail too.
    let (opencl_status, platforms) = probe_opencl(
        &mut |stage| {
            let _ = send(&VendorLine::Stage(stage.to_string()));
        },
        true,
    );
    send(&VendorLine::Answer {
        opencl_status,
        platforms,
    })
}

/// Probe one vendor library in a child process; never fails, what went wrong is the state.
pub(super) fn run_vendor_child(
    exe: &Path,
    vendor: &VendorLibrary,
    limit: Duration,
) -> VendorResult {
    let mut cmd = Command::new(exe);
    cmd.arg(VENDOR_CHILD_SUBCOMMAND)
        .envs(opencl::single_vendor_env(&vendor.library));
    match run_child(cmd, limit) {
        Ok(run) => run.seen.classify(run.timed_out, run.status, limit),
        Err(error) => VendorResult {
            state: VendorState::Failed { error },
            ..VendorResult::default()
        },
    }
}
