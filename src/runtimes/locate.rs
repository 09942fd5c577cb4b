//! Finding the device runtimes' libraries at run time. Nothing GPU-related is linked at build
//! time: one binary tests several ROCm installs side by side, and a missing library is an
//! `unsupported` cell with the list of names and paths tried, not a start-up failure.
//!
//! The bottom of runtimes/: it imports nothing of runtimes, so that every runtime (hip/, cuda/,
//! vulkan/) can open its libraries through it. What the probe makes of a search is
//! [`runtime_status`](super::runtime_status); each runtime probes itself (`hip::probe`,
//! `cuda::probe`).

use std::path::{Path, PathBuf};

use libloading::Library;
use serde::{Deserialize, Serialize};

/// One name or path handed to dlopen, and why it did not load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub candidate: String,
    pub error: String,
}

/// dlopen each candidate in order; the first that loads wins.
pub fn open_first(candidates: &[String]) -> Result<(Library, String), Vec<Attempt>> {
    let mut tried = Vec::new();
    for c in candidates {
        // SAFETY: loading a vendor runtime runs its initialisers; that is the point.
        match unsafe { Library::new(c) } {
            Ok(lib) => return Ok((lib, c.clone())),
            Err(e) => tried.push(Attempt {
                candidate: c.clone(),
                error: error_chain(&e),
            }),
        }
    }
    Err(tried)
}

/// The file the loader mapped for `lib<stem>.so*`: `libcublas.so` is a symlink to something like
/// `libcublas.so.13.1.0.3`, and the real name is what a fingerprint should carry.
pub fn mapped_file(stem: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let prefix = format!("lib{stem}.so");
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .map(str::to_string)
}

/// libloading's Display says only "dlopen failed"; dlerror()'s text is in the source.
fn error_chain(e: &dyn std::error::Error) -> String {
    match e.source() {
        Some(s) => s.to_string(),
        None => e.to_string(),
    }
}

/// ROCm install roots in the order a user means them: the explicit flag, `ROCM_PATH`, then
/// `/opt/rocm` and versioned `/opt/rocm-*` (newest name last, as ls sorts them).
pub fn rocm_roots(rocm_path: Option<&Path>) -> Vec<PathBuf> {
    // An explicit install is searched alone: comparing two ROCm installs must never silently
    // test whichever one /opt/rocm happens to point at.
    if let Some(p) = rocm_path {
        return vec![p.to_path_buf()];
    }
    let mut roots = Vec::new();
    if let Some(p) = std::env::var_os("ROCM_PATH") {
        roots.push(PathBuf::from(p));
    }
    roots.push(PathBuf::from("/opt/rocm"));
    if let Ok(entries) = std::fs::read_dir("/opt") {
        let mut versioned: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rocm-"))
            })
            .collect();
        versioned.sort();
        roots.extend(versioned);
    }
    roots.dedup();
    roots
}

/// libamdhip64 candidates: sonames 7, 6, 5 under each root's lib/, then the loader path.
pub fn hip_candidates(rocm_path: Option<&Path>) -> Vec<String> {
    const SONAMES: [&str; 3] = ["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"];
    let mut out = Vec::new();
    for root in rocm_roots(rocm_path) {
        for so in SONAMES {
            out.push(root.join("lib").join(so).display().to_string());
        }
    }
    // Only the explicit path when the user named one: comparing two installs must never
    // silently fall back to whatever the loader finds first.
    if rocm_path.is_none() {
        out.extend(SONAMES.iter().map(|s| s.to_string()));
    }
    out
}

/// libcuda is the driver API and ships with the kernel driver, not the toolkit: the loader
/// path is where it lives.
pub fn cuda_candidates() -> Vec<String> {
    vec!["libcuda.so.1".into(), "libcuda.so".into()]
}

/// hipRuntimeGetVersion: major*10^7 + minor*10^5 + patch (HIP_VERSION in hip_version.h).
pub fn hip_version(v: i32) -> String {
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

/// cuDriverGetVersion: 1000*major + 10*minor.
pub fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_decode_per_header_encoding() {
        assert_eq!(hip_version(50_221_153), "5.2.21153");
        assert_eq!(hip_version(60_342_134), "6.3.42134");
        assert_eq!(cuda_version(13000), "13.0");
        assert_eq!(cuda_version(12080), "12.8");
    }

    #[test]
    fn an_explicit_rocm_path_is_searched_alone_then_first() {
        let c = hip_candidates(Some(Path::new("/x/rocm-6.2")));
        assert_eq!(c[0], "/x/rocm-6.2/lib/libamdhip64.so.7");
        assert!(c.iter().all(|s| s.starts_with("/x/rocm-6.2/")), "{c:?}");
        let c = hip_candidates(None);
        assert_eq!(c.last().unwrap(), "libamdhip64.so.5");
    }
}
