//! One module per API. `opencl` is always one side of a pair; the other side implements
//! [`PeerRuntime`], the interface every path and op uses to act on the peer's side. The host
//! implements it now; the cuda and hip device runtimes implement it with kernels compiled from
//! `kernels/*.hip`.
//!
//! The files form layers: each imports only files below it, so that none reaches itself. At
//! the bottom, `locate` (opening libraries), `text` and `kernel_cache`, the only one `opencl`
//! needs; then `vulkan/` (the broker), `device` (the peer interfaces, re-exported here),
//! `runtime_status` (what the probe records of a runtime), `host`, `gpu` and `gpu/`; then
//! `cuda/` and `hip/`. In those two, `mod.rs` holds the peer: what it holds (`handles`) and how
//! it is made (`load`, `discover`, `kernels`, and hip's `ffi/`) sit below it, and the files that
//! implement its calls (`memory`, `blas`, `interop`) above it.

use crate::model::CaseError;

pub mod cuda;
pub mod device;
pub mod gpu;
pub mod hip;
pub mod host;
pub mod kernel_cache;
pub mod locate;
pub mod opencl;
pub mod runtime_status;
pub mod text;
pub mod vulkan;

pub use device::{PatternCheck, PeerPtr, PeerRuntime};

/// Reads a pattern check kernel's result words (`count`, `first`, `ran`, with `none` the
/// "no index" value the host initialised `first` to) for what they can prove: a kernel that
/// never wrote its ran-marker did not run, which is wrong data for the case (a `fail`). Words
/// that contradict each other (mismatches but no index, an index but no mismatches, more
/// mismatches than words) are also the driver's: it wrote the initial words, ran the kernel and
/// read the words back, so such words are data it got wrong, a `fail` showing what was read.
pub fn check_self_consistent(
    side: &str,
    count: u64,
    first: u64,
    none: u64,
    ran: u64,
    words: u64,
) -> Result<(), CaseError> {
    if ran != words {
        return Err(crate::model::Mismatch {
            what: format!("{side} pattern check kernel did not run: its ran-marker"),
            index: 0,
            got: format!("{ran}"),
            want: format!("{words} (the word count, written by work-item 0)"),
            count: 1,
            len: 1,
            max_abs_err: f64::NAN,
            max_rel_err: f64::NAN,
            bound: 0.0,
            formula: crate::model::BIT_EXACT.into(),
        }
        .into());
    }
    let consistent = if count == 0 {
        first == none
    } else {
        first < words && count <= words
    };
    if consistent {
        return Ok(());
    }
    Err(crate::model::Mismatch {
        what: format!("{side} pattern check's result words contradict each other"),
        index: 0,
        got: format!("{count} mismatches, first index {first:#x}"),
        want: format!(
            "0 mismatches with first index {none:#x}, or 1 to {words} mismatches with first index below {words}"
        ),
        count: 1,
        len: 1,
        max_abs_err: f64::NAN,
        max_rel_err: f64::NAN,
        bound: 0.0,
        formula: crate::model::BIT_EXACT.into(),
    }
    .into())
}

/// Runs the test at `path` of this test binary again in a child process with `env` set to 1,
/// for what must not happen in this one (a context poisoned for the whole process, a crash).
/// Returns how the child ended and its stderr, then its stdout.
#[cfg(test)]
pub(crate) fn run_test_in_child(path: &str, env: &str) -> (std::process::ExitStatus, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let out = std::process::Command::new(exe)
        .args(["--exact", path, "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .output()
        .expect("run the child");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    (out.status, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ran-marker alone decides here: no mismatches, no index, so any marker but the word
    /// count must fail as a kernel that did not run, 0 (the host's initial value) first of all.
    #[test]
    fn a_check_whose_ran_marker_is_not_the_word_count_fails_as_not_run() {
        let words = 4096u64;
        for ran in [0, 1, words - 1, words + 1, u64::MAX] {
            match check_self_consistent("OpenCL", 0, u64::MAX, u64::MAX, ran, words) {
                Err(CaseError::Mismatch(m)) => {
                    assert!(m.what.contains("did not run: its ran-marker"), "{m}");
                    assert_eq!(m.got, ran.to_string());
                    assert!(m.want.starts_with(&words.to_string()), "{m}");
                }
                other => panic!("ran-marker {ran} of {words} words: {other:?}"),
            }
        }
        assert_eq!(
            check_self_consistent("OpenCL", 0, u64::MAX, u64::MAX, words, words),
            Ok(())
        );
    }

    #[test]
    fn a_check_result_that_contradicts_itself_is_the_drivers_fail() {
        let words = 64u64;
        // Mismatches without an index, an index without mismatches, an index past the end,
        // more mismatches than words.
        for (count, first) in [(1, u64::MAX), (0, 3), (1, words), (words + 1, 0)] {
            let got = check_self_consistent("peer", count, first, u64::MAX, words, words);
            // The driver wrote, ran and read those words: their contradiction is its failure.
            assert!(
                matches!(&got, Err(CaseError::Mismatch(m)) if m.what.contains("contradict")),
                "{count} mismatches, first {first}: {got:?}"
            );
        }
        assert_eq!(
            check_self_consistent("peer", words, 0, u64::MAX, words, words),
            Ok(())
        );
    }
}
