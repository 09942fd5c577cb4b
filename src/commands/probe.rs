//! `clhip probe`: what this machine has for interop, OpenCL vendor by vendor and runtime by
//! runtime, each probed in a child of its own.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use clhip::probe::{self, Probe};

use super::outputs::write_quietly_on_closed_pipe;
use super::{existing_dir, note};

#[derive(clap::Args)]
pub struct ProbeArgs {
    /// Print the probe as JSON (schema `clhip-probe/1`, the form `list --probe` reads), with
    /// the fingerprint lines that expectation files match.
    #[arg(long)]
    json: bool,
    /// A ROCm install to load HIP from, searched alone (default: $ROCM_PATH, /opt/rocm,
    /// /opt/rocm-*, the loader path). Repeat it for several installs: each is probed in a
    /// process of its own and shown as `hip@<version>`.
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Vec<PathBuf>,
}

pub fn probe(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    // Before any runtime is loaded: what a driver prints must not land in the JSON.
    let mut out = clhip::child::take_stdout_for_protocol()?;
    let exe = std::env::current_exe().context("locating the clhip binary")?;
    let p = probe::probe_isolating_vendors(&exe, &args.rocm_path);
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&p.to_json())?)
    } else {
        clhip::escape::terminal_text(&p.render_with_fingerprint())
    };
    write_quietly_on_closed_pipe(&mut out, &text)?;
    Ok(probe_exit(&p))
}

/// `clhip probe`'s exit status, once all it found is printed: non-zero, naming each vendor and
/// what it did, when a vendor broke while being probed.
fn probe_exit(p: &Probe) -> ExitCode {
    for v in p.broken_vendors() {
        note(&format!("clhip: broken driver: {v}"));
    }
    ExitCode::from(p.exit_status())
}
