//! The on-disk cache of compiled kernels: NVRTC cubins, hiprtc code objects and OpenCL program
//! binaries. Every worker of a run (and every run on the machine) compiles the same sources for
//! the same device; compiling once saves each fresh worker a compile (about 0.3 s for NVRTC).
//!
//! Safety over speed:
//! - The key is the whole compile, written out in full: compiler (name, version and library),
//!   target (arch or device), driver version, options and the source text's length and hash.
//!   An entry is used only when its stored key equals the wanted key byte for byte, so a
//!   hash collision of file names is a miss, never a wrong kernel.
//! - The payload's own checksum is stored: a truncated or corrupted entry is a miss.
//! - Entries are written to a temporary file and renamed: a reader never sees half an entry,
//!   and two workers writing the same entry at once both leave a complete one.
//! - A binary that the runtime then refuses to load is forgotten ([`KernelCache::forget`]) and
//!   compiled again, so a cache from another driver install can only cost a compile.
//! - Only regular files are read, at most [`crate::input::KERNEL_CACHE_ENTRY_LIMIT`] bytes, and
//!   a link is never followed: an entry that is a link (to `/dev/zero`, say), a FIFO, a device
//!   or too large is dropped with a warning and compiled again, never read. A worker must not
//!   run out of memory or block on its cache: that would be filed as the case's crash or
//!   timeout.
//!
//! `CLHIP_KERNEL_CACHE` picks the directory; `off` (or an empty value) turns the cache off.
//! The default is `$XDG_CACHE_HOME/clhip/kernels`, else `$HOME/.cache/clhip/kernels`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::hash::fnv1a64;
use crate::input::{KERNEL_CACHE_ENTRY_LIMIT, Links};
use crate::keyed_file::{self, Format};

/// Environment variable naming the cache directory, or `off`.
pub const ENV: &str = "CLHIP_KERNEL_CACHE";

const MAGIC: &[u8] = b"clhip-kernel-cache/1\n";

/// What a compile depends on. Every field goes into the stored key verbatim.
#[derive(Debug, Clone)]
pub struct CompileKey<'a> {
    /// `NVRTC 13.0 (/usr/local/cuda/.../libnvrtc.so.13.0.88)`, `hiprtc 6.3 (...)`, or the
    /// OpenCL platform and device version.
    pub compiler: &'a str,
    /// `sm_90`, `gfx908:sramecc+:xnack-`, or the OpenCL device name.
    pub target: &'a str,
    pub driver: &'a str,
    pub options: &'a str,
    pub source: &'a str,
}

impl CompileKey<'_> {
    fn text(&self) -> String {
        format!(
            "compiler: {}\ntarget: {}\ndriver: {}\noptions: {}\nsource: {} bytes, fnv1a64 {:016x}\n",
            self.compiler,
            self.target,
            self.driver,
            self.options,
            self.source.len(),
            fnv1a64(self.source.as_bytes())
        )
    }
}

/// A cache directory, or none (the cache is off).
#[derive(Debug, Clone)]
pub struct KernelCache {
    dir: Option<PathBuf>,
    /// The largest entry read or written: [`KERNEL_CACHE_ENTRY_LIMIT`] but in tests.
    limit: u64,
}

impl KernelCache {
    /// The cache the environment asks for (see the module's documentation).
    pub fn from_env() -> Self {
        let dir = match std::env::var_os(ENV) {
            Some(v) if v.is_empty() || v == "off" => None,
            Some(v) => Some(PathBuf::from(v)),
            None => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
                .map(|base| base.join("clhip").join("kernels")),
        };
        KernelCache {
            dir,
            limit: KERNEL_CACHE_ENTRY_LIMIT,
        }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        KernelCache {
            dir: Some(dir.into()),
            limit: KERNEL_CACHE_ENTRY_LIMIT,
        }
    }

    pub fn off() -> Self {
        KernelCache {
            dir: None,
            limit: KERNEL_CACHE_ENTRY_LIMIT,
        }
    }

    fn entry(&self, key: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{:016x}.bin", fnv1a64(key.as_bytes()))))
    }

    /// What `load` makes of `key`'s binary: the cached one where a valid one is stored and
    /// `load` takes it, else `compile()`'s, stored once `load` has taken it. A cached binary
    /// that `load` refuses (another driver's, say) is dropped and compiled afresh, so a stale
    /// cache only costs a compile; the fresh binary's refusal is the caller's error. Cache
    /// trouble of any kind (unreadable, corrupt, a full disk) only means compiling.
    pub fn load<T, E>(
        &self,
        key: &CompileKey<'_>,
        compile: impl FnOnce() -> Result<Vec<u8>, E>,
        mut load: impl FnMut(&[u8]) -> Result<T, E>,
    ) -> Result<T, E> {
        let text = key.text();
        if let Some(hit) = self.read(&text) {
            match load(&hit) {
                Ok(loaded) => return Ok(loaded),
                Err(_) => self.forget(key),
            }
        }
        let binary = compile()?;
        let loaded = load(&binary)?;
        self.write(&text, &binary);
        Ok(loaded)
    }

    /// The cached binary for `key`, if a valid one is stored.
    pub fn lookup(&self, key: &CompileKey<'_>) -> Option<Vec<u8>> {
        self.read(&key.text())
    }

    /// Stores `binary` as the result of compiling `key`.
    pub fn store(&self, key: &CompileKey<'_>, binary: &[u8]) {
        if !binary.is_empty() {
            self.write(&key.text(), binary);
        }
    }

    /// Drops the entry for `key`: its binary was refused by the runtime.
    pub fn forget(&self, key: &CompileKey<'_>) {
        if let Some(path) = self.entry(&key.text()) {
            let _ = std::fs::remove_file(path);
        }
    }

    fn read(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.entry(key)?;
        match crate::input::read_regular_with(
            "a kernel cache entry",
            &path,
            self.limit,
            Links::Refuse,
        ) {
            Ok(bytes) => decode(&bytes, key),
            Err(e) if e.is_missing() => None,
            Err(e) => {
                // Removing a link removes the link, never what it names.
                let dropped = match std::fs::remove_file(&path) {
                    Ok(()) => "dropped".to_string(),
                    Err(why) => format!("cannot drop it ({why})"),
                };
                let _ = writeln!(
                    std::io::stderr(),
                    "clhip: warning: kernel cache entry {e}; {dropped}, compiling afresh"
                );
                None
            }
        }
    }

    fn write(&self, key: &str, binary: &[u8]) {
        let (Some(dir), Some(path)) = (&self.dir, self.entry(key)) else {
            return;
        };
        let entry = encode(key, binary);
        // An entry too large to be read back would only be dropped and compiled again.
        if entry.len() as u64 > self.limit {
            return;
        }
        let tmp = dir.join(format!(
            ".{}-{}.tmp",
            std::process::id(),
            fnv1a64(key.as_bytes()) & 0xffff
        ));
        let _ = std::fs::create_dir_all(dir).and_then(|()| keyed_file::write(&path, &tmp, &entry));
    }
}

const FORMAT: Format = Format {
    magic: MAGIC,
    checksum: fnv1a64,
};

fn encode(key: &str, binary: &[u8]) -> Vec<u8> {
    FORMAT.encode(key, binary.len(), |out| out.extend_from_slice(binary))
}

/// The payload of an entry whose stored key is `key` and whose checksum holds.
fn decode(bytes: &[u8], key: &str) -> Option<Vec<u8>> {
    FORMAT
        .decode(bytes, key)
        .filter(|payload| !payload.is_empty())
        .map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn key(source: &str) -> CompileKey<'_> {
        CompileKey {
            compiler: "NVRTC 13.0",
            target: "sm_90",
            driver: "580.159.04",
            options: "--std=c++17",
            source,
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("clhip-kcache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A runtime that takes any binary: what was loaded is the binary itself.
    fn as_is(binary: &[u8]) -> Result<Vec<u8>, ()> {
        Ok(binary.to_vec())
    }

    #[test]
    fn a_cached_binary_the_runtime_refuses_is_replaced_by_a_fresh_one() {
        let cache = KernelCache::at(dir("refused"));
        let k = key("src");
        let _ = cache.load(&k, || Ok::<_, ()>(b"stale".to_vec()), as_is);
        // A runtime that takes only the fresh binary: the stale one is dropped, the fresh one
        // compiled, loaded and stored in its place.
        let picky = |b: &[u8]| {
            if b == b"fresh" {
                Ok(b.to_vec())
            } else {
                Err(())
            }
        };
        let compiles = Cell::new(0);
        let fresh = || {
            compiles.set(compiles.get() + 1);
            Ok(b"fresh".to_vec())
        };
        assert_eq!(cache.load(&k, fresh, picky), Ok(b"fresh".to_vec()));
        assert_eq!(cache.load(&k, fresh, picky), Ok(b"fresh".to_vec()));
        assert_eq!(compiles.get(), 1, "the fresh binary was stored");
        // A fresh binary the runtime refuses is the caller's error and is not stored.
        let other = key("other");
        assert_eq!(
            cache.load(
                &other,
                || Ok(b"bad".to_vec()),
                |_: &[u8]| Err::<(), _>("refused")
            ),
            Err("refused")
        );
        assert!(cache.lookup(&other).is_none());
    }

    #[test]
    fn a_second_compile_of_the_same_key_is_a_hit() {
        let cache = KernelCache::at(dir("hit"));
        let compiles = Cell::new(0);
        let compile = || -> Result<Vec<u8>, ()> {
            compiles.set(compiles.get() + 1);
            Ok(vec![1, 2, 3])
        };
        assert_eq!(cache.load(&key("a"), compile, as_is), Ok(vec![1, 2, 3]));
        assert_eq!(cache.load(&key("a"), compile, as_is), Ok(vec![1, 2, 3]));
        assert_eq!(compiles.get(), 1);
    }

    #[test]
    fn any_change_of_source_target_driver_or_compiler_is_a_miss() {
        let cache = KernelCache::at(dir("miss"));
        let compiles = Cell::new(0);
        let compile = || -> Result<Vec<u8>, ()> {
            compiles.set(compiles.get() + 1);
            Ok(vec![compiles.get() as u8])
        };
        let base = key("a");
        let _ = cache.load(&base, compile, as_is);
        let variants = [
            CompileKey {
                source: "b",
                ..base.clone()
            },
            CompileKey {
                target: "sm_80",
                ..base.clone()
            },
            CompileKey {
                driver: "590.1",
                ..base.clone()
            },
            CompileKey {
                compiler: "NVRTC 13.1",
                ..base.clone()
            },
            CompileKey {
                options: "",
                ..base.clone()
            },
        ];
        for v in &variants {
            let _ = cache.load(v, compile, as_is);
        }
        assert_eq!(compiles.get(), 1 + variants.len());
    }

    #[test]
    fn a_corrupt_truncated_or_foreign_entry_is_compiled_again() {
        let d = dir("corrupt");
        let cache = KernelCache::at(&d);
        let k = key("src");
        let _ = cache.load(&k, || Ok::<_, ()>(vec![7; 64]), as_is);
        let path = cache.entry(&k.text()).unwrap();
        let good = std::fs::read(&path).unwrap();
        let flipped = {
            let mut b = good.clone();
            let last = b.len() - 9; // a payload byte, not the checksum
            b[last] ^= 1;
            b
        };
        // The same file name holding another key's entry: what a name collision would look like.
        let foreign = encode(&key("other").text(), &[7; 64]);
        for bad in [
            flipped,
            good[..good.len() - 3].to_vec(),
            foreign,
            Vec::new(),
        ] {
            std::fs::write(&path, &bad).unwrap();
            let got = cache.load(&k, || Ok::<_, ()>(vec![9; 8]), as_is);
            assert_eq!(got, Ok(vec![9; 8]));
            std::fs::write(&path, &good).unwrap();
        }
        assert_eq!(
            cache.load(&k, || Ok::<_, ()>(vec![0]), as_is),
            Ok(vec![7; 64])
        );
    }

    /// `load` of `key("src")` in `cache`, compiling `[9; 8]` on a miss; a failure after 10 s
    /// rather than a test that hangs on a read that blocks.
    fn load_within_10s(cache: &KernelCache) -> Result<Vec<u8>, ()> {
        let (tx, rx) = std::sync::mpsc::channel();
        let cache = cache.clone();
        std::thread::spawn(move || {
            let _ = tx.send(cache.load(&key("src"), || Ok(vec![9; 8]), as_is));
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the cache answered within 10 s")
    }

    #[test]
    fn an_entry_that_is_a_link_a_fifo_or_too_large_is_dropped_and_compiled_again_never_read() {
        let d = dir("special");
        let cache = KernelCache::at(&d);
        let k = key("src");
        let _ = cache.load(&k, || Ok::<_, ()>(vec![7; 64]), as_is);
        let path = cache.entry(&k.text()).unwrap();
        let valid = d.join("valid-entry");
        std::fs::copy(&path, &valid).unwrap();
        let link = |to: &Path| std::os::unix::fs::symlink(to, &path).unwrap();
        for what in [
            "a link to /dev/zero",
            "a FIFO",
            "a file over the limit",
            "a link to a valid entry",
        ] {
            std::fs::remove_file(&path).unwrap();
            match what {
                "a link to /dev/zero" => link(Path::new("/dev/zero")),
                "a FIFO" => nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap(),
                // Sparse: no disk taken, and a read of it would take the worker's memory.
                "a file over the limit" => std::fs::File::create(&path)
                    .unwrap()
                    .set_len(KERNEL_CACHE_ENTRY_LIMIT + 1)
                    .unwrap(),
                // Even a link to a valid entry: entries are this cache's own files, never links.
                _ => link(&valid),
            }
            assert_eq!(load_within_10s(&cache), Ok(vec![9; 8]), "{what}");
            let now = std::fs::symlink_metadata(&path).unwrap();
            assert!(
                now.is_file() && now.len() < 1024,
                "{what} was replaced by the fresh entry"
            );
            assert_eq!(cache.lookup(&k), Some(vec![9; 8]), "{what}");
        }
        // A directory cannot be dropped like a file: every load compiles, none fails.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_eq!(load_within_10s(&cache), Ok(vec![9; 8]));
        assert_eq!(load_within_10s(&cache), Ok(vec![9; 8]));
    }

    #[test]
    fn a_valid_entry_over_the_limit_is_neither_read_nor_written() {
        let d = dir("limit");
        let k = key("src");
        let roomy = KernelCache::at(&d);
        let _ = roomy.load(&k, || Ok::<_, ()>(vec![7; 64]), as_is);
        let size = std::fs::metadata(roomy.entry(&k.text()).unwrap())
            .unwrap()
            .len();
        let tight = KernelCache {
            limit: size - 1,
            ..roomy.clone()
        };
        assert_eq!(
            tight.lookup(&k),
            None,
            "one byte over the limit is not read"
        );
        assert!(roomy.lookup(&k).is_none(), "and is dropped");
        let _ = tight.load(&k, || Ok::<_, ()>(vec![7; 64]), as_is);
        assert!(roomy.lookup(&k).is_none(), "nor written");
        let exact = KernelCache {
            limit: size,
            ..roomy
        };
        let _ = exact.load(&k, || Ok::<_, ()>(vec![7; 64]), as_is);
        assert_eq!(exact.lookup(&k), Some(vec![7; 64]), "the limit itself is");
    }

    #[test]
    fn forget_and_a_failed_compile_leave_nothing_behind() {
        let cache = KernelCache::at(dir("forget"));
        let k = key("x");
        assert_eq!(
            cache.load(&k, || Err::<Vec<u8>, _>("bad"), |b| Ok(b.to_vec())),
            Err("bad")
        );
        assert!(cache.read(&k.text()).is_none());
        let _ = cache.load(&k, || Ok::<_, ()>(vec![1]), as_is);
        cache.forget(&k);
        assert!(cache.read(&k.text()).is_none());
    }

    #[test]
    fn off_always_compiles() {
        let cache = KernelCache::off();
        let compiles = Cell::new(0);
        for _ in 0..2 {
            let _ = cache.load(
                &key("a"),
                || {
                    compiles.set(compiles.get() + 1);
                    Ok::<_, ()>(vec![1])
                },
                as_is,
            );
        }
        assert_eq!(compiles.get(), 2);
    }
}
