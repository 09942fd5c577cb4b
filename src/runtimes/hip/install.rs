//! One ROCm install per process.
//!
//! Every ROCm library clhip loads (hiprtc, rocBLAS, rocSOLVER, the HSA runtime) comes from the
//! directory the chosen libamdhip64 was loaded from, never from a search of its own: on a host
//! with several installs, a rocBLAS of another release would otherwise pull a second
//! libamdhip64 (its own DT_NEEDED soname) into the process, and two HIP runtimes in one process
//! are not a configuration anyone supports or that a result could be trusted from.
//!
//! Two guards, both naming the files involved:
//! - before loading: the library's ELF dynamic section. A DT_NEEDED libamdhip64 or
//!   libhsa-runtime64 soname other than the one mapped means the loader would bring a second
//!   copy; the library is then not loaded at all.
//! - after loading: /proc/self/maps must show exactly one libamdhip64 and one libhsa-runtime64
//!   file (indirect dependencies escape the first guard). A mix drops the library again and
//!   refuses it.
//!
//! Either refusal reads `mixed ROCm install: ...`, which a cell reports as `unsupported`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The two libraries a process must map exactly once: HIP and the HSA runtime under it.
pub const SINGLETONS: [&str; 2] = ["libamdhip64.so", "libhsa-runtime64.so"];

/// What the loader reads from a shared object's dynamic section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dynamic {
    pub soname: Option<String>,
    pub needed: Vec<String>,
    /// DT_RUNPATH, else DT_RPATH, split at `:`, `$ORIGIN` not yet expanded.
    pub runpath: Vec<String>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn read_at(f: &File, offset: u64, len: u64) -> Option<Vec<u8>> {
    // A dynamic section or its string table is kilobytes; anything past 64 MiB is not one.
    if len > 64 << 20 {
        return None;
    }
    let mut buf = vec![0u8; usize::try_from(len).ok()?];
    f.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// The dynamic section of an x86-64 (ELF64, little-endian) shared object, found through the
/// section headers (SHT_DYNAMIC, whose sh_link is its string table). Reads only the headers and
/// those two sections: rocBLAS is hundreds of megabytes of kernels. None for anything else.
pub fn read_dynamic(path: &Path) -> Option<Dynamic> {
    const SHT_DYNAMIC: u32 = 6;
    const DT_NEEDED: u64 = 1;
    const DT_SONAME: u64 = 14;
    const DT_RPATH: u64 = 15;
    const DT_RUNPATH: u64 = 29;
    // Not a plain open: a FIFO among the libraries would block it.
    let f = crate::input::open_regular(path).ok()?;
    let eh = read_at(&f, 0, 64)?;
    // \x7fELF, ELFCLASS64, ELFDATA2LSB.
    if eh[..4] != *b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let shoff = u64_at(&eh, 0x28)?;
    let shentsize = u64::from(u16_at(&eh, 0x3A)?);
    let shnum = u64::from(u16_at(&eh, 0x3C)?);
    if shentsize < 64 || shnum == 0 {
        return None;
    }
    let shdrs = read_at(&f, shoff, shentsize * shnum)?;
    let section = |i: u64| -> Option<(u32, u64, u64, u32)> {
        let at = usize::try_from(i * shentsize).ok()?;
        Some((
            u32_at(&shdrs, at + 4)?,
            u64_at(&shdrs, at + 0x18)?,
            u64_at(&shdrs, at + 0x20)?,
            u32_at(&shdrs, at + 0x28)?,
        ))
    };
    let (_, dyn_off, dyn_size, link) = (0..shnum)
        .filter_map(section)
        .find(|s| s.0 == SHT_DYNAMIC)?;
    let (_, str_off, str_size, _) = section(u64::from(link))?;
    let dynamic = read_at(&f, dyn_off, dyn_size)?;
    let strtab = read_at(&f, str_off, str_size)?;
    let string = |off: u64| -> Option<String> {
        let rest = strtab.get(usize::try_from(off).ok()?..)?;
        let end = rest.iter().position(|&c| c == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    let mut out = Dynamic::default();
    let (mut rpath, mut runpath) = (None, None);
    for entry in dynamic.chunks_exact(16) {
        let (tag, val) = (u64_at(entry, 0)?, u64_at(entry, 8)?);
        match tag {
            0 => break, // DT_NULL
            DT_NEEDED => out.needed.extend(string(val)),
            DT_SONAME => out.soname = string(val),
            DT_RPATH => rpath = string(val),
            DT_RUNPATH => runpath = string(val),
            _ => {}
        }
    }
    // ld.so ignores DT_RPATH when DT_RUNPATH is present.
    out.runpath = runpath
        .or(rpath)
        .map(|p| {
            p.split(':')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Some(out)
}

/// Where `soname` would be found through `lib`'s own run path (`$ORIGIN` expanded), if there.
/// The loader may find it elsewhere first (LD_LIBRARY_PATH, the cache); this is only for
/// naming the file in a refusal.
pub fn resolve_in_runpath(lib: &Path, dynamic: &Dynamic, soname: &str) -> Option<PathBuf> {
    let origin = lib.parent()?.to_string_lossy().into_owned();
    dynamic
        .runpath
        .iter()
        .map(|d| PathBuf::from(d.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin)))
        .map(|d| d.join(soname))
        .find(|p| p.exists())
}

/// Every distinct file mapped into this process whose name starts with `prefix`, in map order.
pub fn mapped_files(prefix: &str) -> Vec<String> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for path in maps.lines().filter_map(|l| l.split_whitespace().nth(5)) {
        let matches = Path::new(path)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(prefix));
        if matches && !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

/// `mixed ROCm install: ...` naming every file, when this process maps more than one
/// libamdhip64 or more than one libhsa-runtime64; None when it maps at most one of each.
pub fn mixed_now() -> Option<String> {
    let mixes: Vec<String> = SINGLETONS
        .iter()
        .map(|prefix| mapped_files(prefix))
        .filter(|files| files.len() > 1)
        .map(|files| files.join(" and "))
        .collect();
    (!mixes.is_empty())
        .then(|| format!("mixed ROCm install: this process maps {}", mixes.join("; ")))
}

/// `mixed ROCm install: ...` when the HSA runtime this process maps is not one of
/// `install_dir`'s, the directory HIP was loaded from: a library loaded earlier (another
/// install's ROCm OpenCL) brought its HSA runtime, and HIP, needing the same soname, runs on
/// that one. One HSA file is mapped, so [`mixed_now`] cannot see it. None when they agree, and
/// when the install has no HSA runtime of its own to compare with (a layout without one there).
pub fn foreign_hsa(install_dir: &Path) -> Option<String> {
    let prefix = SINGLETONS[1];
    let own: Vec<PathBuf> = std::fs::read_dir(install_dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    if own.is_empty() {
        return None;
    }
    let foreign: Vec<String> = mapped_files(prefix)
        .into_iter()
        .filter(|m| !own.iter().any(|o| o == Path::new(m)))
        .collect();
    (!foreign.is_empty()).then(|| {
        format!(
            "mixed ROCm install: HIP of {} runs on {}, not on its own install's {}",
            install_dir.display(),
            foreign.join(" and "),
            own[0].display()
        )
    })
}

/// Before loading `candidate`: refuse, naming both files, when loading it would put a second
/// libamdhip64 or libhsa-runtime64 into this process: it is itself another copy of one that is
/// mapped, or it needs (DT_NEEDED) a soname of one other than the mapped one's, which the
/// loader would satisfy by loading a second copy. Ok when nothing says so (a file that cannot
/// be read as ELF is left to the loader and to the check after loading).
pub fn preflight(candidate: &Path) -> Result<(), String> {
    let name = candidate
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    for prefix in SINGLETONS {
        let mapped = mapped_files(prefix);
        if name.starts_with(prefix) {
            let canonical = std::fs::canonicalize(candidate).ok();
            let other = mapped
                .iter()
                .find(|m| canonical.as_deref() != Some(Path::new(m.as_str())));
            if let Some(other) = other {
                return Err(format!(
                    "mixed ROCm install: {} is not {other}, which this process already maps; \
                     not loaded",
                    candidate.display()
                ));
            }
        }
    }
    let Some(dynamic) = read_dynamic(candidate) else {
        return Ok(());
    };
    for prefix in SINGLETONS {
        let Some(needed) = dynamic.needed.iter().find(|n| n.starts_with(prefix)) else {
            continue;
        };
        for file in mapped_files(prefix) {
            let soname = read_dynamic(Path::new(&file)).and_then(|d| d.soname);
            if soname.as_deref().is_some_and(|s| s != needed) {
                let second = resolve_in_runpath(candidate, &dynamic, needed).map_or_else(
                    || format!("{needed} from the loader's search path"),
                    |p| p.display().to_string(),
                );
                return Err(format!(
                    "mixed ROCm install: {} needs {needed}, which would load {second} beside \
                     {file} ({}) that this process already maps; not loaded",
                    candidate.display(),
                    soname.unwrap_or_default()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_dynamic_section_of_a_system_library() {
        // libc exists wherever the tests run; its soname is libc.so.6 on glibc systems.
        let libc = mapped_files("libc.so");
        let libc = libc
            .first()
            .expect("glibc's libc.so.6 is mapped into every test process");
        let d = read_dynamic(Path::new(libc)).expect("libc is ELF64");
        assert_eq!(d.soname.as_deref(), Some("libc.so.6"), "{d:?}");
        assert!(d.needed.iter().any(|n| n.starts_with("ld-linux")), "{d:?}");
    }

    #[test]
    fn not_elf_is_none() {
        let p = std::env::temp_dir().join(format!("clhip-not-elf-{}", std::process::id()));
        std::fs::write(&p, b"#!/bin/sh\n").expect("temp file");
        assert_eq!(read_dynamic(&p), None);
        let _ = std::fs::remove_file(&p);
        assert_eq!(read_dynamic(Path::new("/nonexistent/lib.so")), None);
    }

    #[test]
    fn one_install_is_not_mixed() {
        // This test binary maps no ROCm library twice.
        assert_eq!(mixed_now(), None);
    }

    #[test]
    fn runpath_origin_is_expanded() {
        let dir = std::env::temp_dir().join(format!("clhip-runpath-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("b")).expect("temp dir");
        std::fs::write(dir.join("b/libamdhip64.so.6"), b"").expect("temp file");
        let d = Dynamic {
            runpath: vec!["$ORIGIN/../nowhere".into(), "${ORIGIN}/b".into()],
            ..Dynamic::default()
        };
        let found = resolve_in_runpath(&dir.join("librocblas.so.4"), &d, "libamdhip64.so.6");
        assert_eq!(found, Some(dir.join("b/libamdhip64.so.6")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
