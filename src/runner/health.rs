//! Whether a GPU is still there: a fresh process that makes a pair's contexts on it (the
//! worker binary's `__contexts`, the start every worker pays), and its PCI device on the bus.
//! The same process, timed, is what `bench runner` counts as a worker start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::options::RunOptions;
use crate::child::{GroupChild, Line};
use crate::model::Case;

/// The case whose pair `__contexts` opens (JSON), in its environment.
pub const CONTEXTS_CASE_ENV: &str = "CLHIP_CONTEXTS_CASE";

/// Set (to anything): `__contexts` also makes the peer fault once its contexts are made
/// ([`crate::ops::open_pair_and_fault`]), and succeeds when the fault comes.
pub const CONTEXTS_FAULT_ENV: &str = "CLHIP_CONTEXTS_FAULT";

/// Test hook: GPU labels (comma-separated) whose `__contexts` fails for work with no case of
/// its own (mock items), as a GPU that is gone would. Not for users.
pub const MOCK_UNHEALTHY_ENV: &str = "CLHIP_MOCK_UNHEALTHY";

/// Test hook: a directory read in place of /sys/bus/pci/devices. Not for users.
pub const PCI_DEVICES_ENV: &str = "CLHIP_PCI_DEVICES";

/// The child side, `clhip __contexts --gpu LABEL`: opens the pair of the case in
/// [`CONTEXTS_CASE_ENV`], or for mock work, fails if [`MOCK_UNHEALTHY_ENV`] names `gpu`.
pub fn contexts_main(gpu: &str, rocm_path: Option<PathBuf>) -> anyhow::Result<bool> {
    crate::child::die_with_parent("contexts");
    let case = match std::env::var(CONTEXTS_CASE_ENV) {
        Ok(json) => Some(
            serde_json::from_str::<Case>(&json)
                .map_err(|e| anyhow::anyhow!("{CONTEXTS_CASE_ENV}: {e}"))?,
        ),
        Err(_) => None,
    };
    match case {
        Some(case) => {
            let mut state = crate::ops::WorkerState::default();
            state.rocm_path = rocm_path;
            let made = if std::env::var_os(CONTEXTS_FAULT_ENV).is_some() {
                crate::ops::open_pair_and_fault(&mut state, &case)
            } else {
                crate::ops::open_pair(&mut state, &case)
            };
            match made {
                Ok(()) => Ok(true),
                Err(e) => {
                    eprintln!("{}", e.into_outcome().reason());
                    Ok(false)
                }
            }
        }
        None => {
            let unhealthy = std::env::var(MOCK_UNHEALTHY_ENV).unwrap_or_default();
            if unhealthy.split(',').any(|g| g == gpu) {
                eprintln!("mock: {gpu} is unhealthy on request");
                return Ok(false);
            }
            Ok(true)
        }
    }
}

/// Starts `__contexts` for `case`'s pair on `gpu` with `env` on top of the run's, and waits
/// up to `limit`: how long it took, or why it failed. With `fault`, the process also makes
/// the peer fault, and succeeds only when the fault comes.
pub fn open_contexts(
    opts: &RunOptions,
    env: &[(String, String)],
    case: Option<&Case>,
    gpu: &str,
    limit: Duration,
    fault: bool,
) -> Result<Duration, String> {
    let began = Instant::now();
    let case_json = case
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&opts.worker_exe);
    cmd.args(["__contexts", "--gpu", gpu])
        .envs(opts.worker_env.iter().map(|(k, v)| (k, v)))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    if let Some(json) = &case_json {
        cmd.env(CONTEXTS_CASE_ENV, json);
    }
    if fault {
        cmd.env(CONTEXTS_FAULT_ENV, "1");
    }
    let mut child =
        GroupChild::spawn(&mut cmd).map_err(|e| format!("starting `__contexts`: {e}"))?;
    let (_, rx) = child
        .lines("clhip-contexts")
        .map_err(|e| format!("{e:#}"))?;
    let mut last = String::new();
    let mut open = 2;
    while open > 0 {
        let left = limit.saturating_sub(began.elapsed());
        if left.is_zero() {
            let _ = child.kill_and_reap();
            return Err(format!(
                "made no contexts within {:.1} s; killed",
                limit.as_secs_f64()
            ));
        }
        match rx.recv_timeout(left) {
            Ok(Line::Output(l) | Line::Protocol(l)) => last = l,
            Ok(Line::Eof) => open -= 1,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.kill_and_reap().map_err(|e| format!("{e:#}"))?;
    if status.success() {
        Ok(began.elapsed())
    } else {
        Err(format!(
            "{}{}",
            crate::child::describe(status),
            if last.is_empty() {
                String::new()
            } else {
                format!(": {last}")
            }
        ))
    }
}

/// Whether the PCI device `pci` (`domain:bus:device.function`) has left the bus: its sysfs
/// entry is gone while the directory of devices is there.
pub fn pci_gone(pci: &str) -> bool {
    let root = std::env::var_os(PCI_DEVICES_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys/bus/pci/devices"));
    pci_gone_under(&root, pci)
}

fn pci_gone_under(root: &Path, pci: &str) -> bool {
    root.is_dir() && !root.join(pci.to_ascii_lowercase()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pci_device_is_gone_when_its_entry_is_and_the_bus_is_there() {
        let root = std::env::temp_dir().join(format!("clhip-pci-{}", std::process::id()));
        std::fs::create_dir_all(root.join("0000:3b:00.0")).unwrap();
        assert!(!pci_gone_under(&root, "0000:3B:00.0"));
        assert!(pci_gone_under(&root, "0000:5e:00.0"));
        // No sysfs at all (a container): nothing is known to be gone.
        assert!(!pci_gone_under(&root.join("absent"), "0000:5e:00.0"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
