//! The run's shared store of case data: files in a directory the runner makes for the run
//! ([`DIR_ENV`]), so that a 2048 x 2048 Cholesky input and its f64 reference are made once per
//! run (or a few times, by workers that need them at the same moment), not once per worker. A
//! worker's cache ([`super::DataCache`]) lives as long as the worker, and a fault ends a worker
//! by design: on an H100 the full matrix made the Cholesky inputs of n = 2048 in 32 workers,
//! 30 s of worker time, and its data 67-85 s in all; with the store, 32 s.
//!
//! An entry is a [`keyed_file`] (as the kernel cache's are): written whole or not at all, naming
//! its key and the build that wrote it, with a checksum of its payload. Anything else
//! (missing, short, another key or build, a checksum that differs) is a miss, and the value is
//! made afresh: the store can save time, never change a verdict.
//!
//! The values are flat arrays of numbers, so the image is written by hand ([`Shareable`]):
//! each array after its length, as its bytes in this machine's order (an entry lives within
//! one run on one machine). A serde format crate would write the same bytes one number at a
//! time through its visitor, slower than making some of the values.

use std::path::{Path, PathBuf};

use crate::keyed_file::{self, Format};
use crate::reference::PipelineReference;

/// Environment variable: the run's shared data directory, set by the runner for its workers.
/// Unset (a worker run by hand, a test), each worker makes its own data.
pub const DIR_ENV: &str = "CLHIP_DATA_DIR";

/// How fast an entry is assumed to be read back, in bytes a second: a value is stored only
/// where making it took longer than reading it would at this rate, about four times what a
/// read costs on a 2-core CI machine (32 MiB in 40-55 ms). On that machine an FFT input of
/// 2^22 points (32 MiB, made in 35-40 ms) is not worth a file; a 2048 x 2048 Cholesky input
/// (64 MiB, made in about a second) is.
pub const READ_RATE: f64 = 256.0 * 1024.0 * 1024.0;

/// Whether a value of `bytes` that took `made_in` to make is worth storing.
pub fn worth_storing(bytes: usize, made_in: std::time::Duration) -> bool {
    made_in.as_secs_f64() * READ_RATE >= bytes as f64
}

const MAGIC: &[u8] = b"clhip-data/1\n";

/// A value that can be written to the store and read back exactly.
pub trait Shareable: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn take(input: &mut &[u8]) -> Option<Self>;
}

fn take_bytes<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, rest) = input.split_at_checked(n)?;
    *input = rest;
    Some(head)
}

/// A number or complex number: its bytes are its value ([`bytemuck::Pod`]).
macro_rules! shareable_number {
    ($($t:ty),*) => {$(
        impl Shareable for $t {
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(bytemuck::bytes_of(self));
            }
            fn take(input: &mut &[u8]) -> Option<Self> {
                take_bytes(input, size_of::<$t>()).map(bytemuck::pod_read_unaligned)
            }
        }
    )*};
}
shareable_number!(u32, u64, usize, f32, f64);

/// An array of numbers, written as its bytes in one copy: 64 MiB in tens of milliseconds,
/// where a number at a time took longer than making an FFT input.
impl<T: bytemuck::Pod> Shareable for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) {
        self.len().put(out);
        out.extend_from_slice(bytemuck::cast_slice(self));
    }
    fn take(input: &mut &[u8]) -> Option<Self> {
        let len = usize::take(input)?;
        let bytes = take_bytes(input, len.checked_mul(size_of::<T>())?)?;
        let mut v = vec![T::zeroed(); len];
        bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
        Some(v)
    }
}

impl<T: Shareable, const N: usize> Shareable for [T; N] {
    fn put(&self, out: &mut Vec<u8>) {
        for x in self {
            x.put(out);
        }
    }
    fn take(input: &mut &[u8]) -> Option<Self> {
        let items: Option<Vec<T>> = (0..N).map(|_| T::take(input)).collect();
        items?.try_into().ok()
    }
}

impl<A: Shareable, B: Shareable> Shareable for (A, B) {
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out);
        self.1.put(out);
    }
    fn take(input: &mut &[u8]) -> Option<Self> {
        Some((A::take(input)?, B::take(input)?))
    }
}

impl<A: Shareable, B: Shareable> Shareable for Result<A, B> {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Ok(a) => {
                0u32.put(out);
                a.put(out);
            }
            Err(b) => {
                1u32.put(out);
                b.put(out);
            }
        }
    }
    fn take(input: &mut &[u8]) -> Option<Self> {
        match u32::take(input)? {
            0 => Some(Ok(A::take(input)?)),
            1 => Some(Err(B::take(input)?)),
            _ => None,
        }
    }
}

impl Shareable for PipelineReference {
    fn put(&self, out: &mut Vec<u8>) {
        self.fft.put(out);
        self.magnitude.put(out);
    }
    fn take(input: &mut &[u8]) -> Option<Self> {
        Some(PipelineReference {
            fft: Vec::take(input)?,
            magnitude: Vec::take(input)?,
        })
    }
}

/// The store of one run, in `dir`.
#[derive(Debug, Clone)]
pub struct SharedData {
    dir: PathBuf,
    /// Which build writes and reads here: another build's data may differ.
    build: String,
}

impl SharedData {
    /// The store the runner named in [`DIR_ENV`], if any.
    pub fn from_env() -> Option<Self> {
        let dir = std::env::var_os(DIR_ENV).filter(|v| !v.is_empty())?;
        Some(SharedData::at(dir))
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        SharedData {
            dir: dir.into(),
            build: crate::build_id::BuildId::this().describe(),
        }
    }

    fn key(&self, what: &str, seed: u64, n: usize) -> String {
        format!("{what}\nseed {seed:016x}\nn {n}\nbuild {}\n", self.build)
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!(
            "{:016x}.data",
            crate::hash::fnv1a64(key.as_bytes())
        ))
    }

    /// The value stored for `(what, seed, n)`, if a whole, matching entry is there.
    pub fn load<T: Shareable>(&self, what: &str, seed: u64, n: usize) -> Option<T> {
        let key = self.key(what, seed, n);
        let bytes = std::fs::read(self.path(&key)).ok()?;
        decode(&bytes, &key)
    }

    /// Stores `value` (about `bytes` long) for `(what, seed, n)`. A store that cannot be
    /// written (a full disk) is left as it is: the next worker makes the value again.
    pub fn store<T: Shareable>(&self, what: &str, seed: u64, n: usize, value: &T, bytes: usize) {
        let key = self.key(what, seed, n);
        let path = self.path(&key);
        let tmp = self.dir.join(format!(
            ".{}-{}.tmp",
            std::process::id(),
            path.file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
        ));
        let _ = keyed_file::write(&path, &tmp, &encode(value, &key, bytes));
    }
}

/// The store's entries: payloads of tens of MiB, so a checksum over words, not bytes.
const FORMAT: Format = Format {
    magic: MAGIC,
    checksum: crate::hash::fnv1a64_words,
};

fn encode<T: Shareable>(value: &T, key: &str, bytes: usize) -> Vec<u8> {
    FORMAT.encode(key, bytes, |out| value.put(out))
}

fn decode<T: Shareable>(bytes: &[u8], key: &str) -> Option<T> {
    let mut payload = FORMAT.decode(bytes, key)?;
    let value = T::take(&mut payload)?;
    // Bytes left over mean the entry is not what this type wrote.
    payload.is_empty().then_some(value)
}

/// Makes the run's store: a fresh directory `clhip-data-<pid>-*` in the system's temporary
/// directory, removed when the returned guard drops. Directories left by runs whose process is
/// gone (a runner killed with SIGKILL, a reboot without a clean /tmp) are removed first.
pub fn make_run_dir() -> std::io::Result<tempfile::TempDir> {
    let base = std::env::temp_dir();
    remove_orphans(&base);
    tempfile::Builder::new()
        .prefix(&format!("clhip-data-{}-", std::process::id()))
        .tempdir_in(base)
}

/// A run in another pid namespace sharing this directory looks dead from here; removing its
/// directory costs that run only its sharing (a miss, then a store that cannot be written).
fn remove_orphans(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("clhip-data-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::{Complex32, Complex64};

    fn store() -> (tempfile::TempDir, SharedData) {
        let dir = tempfile::tempdir().expect("temp dir");
        let shared = SharedData::at(dir.path());
        (dir, shared)
    }

    #[test]
    fn every_kind_of_value_comes_back_exactly() {
        let (_dir, s) = store();
        let inputs = [0, 1, 2].map(|k| {
            vec![
                Complex32::new(k as f32, -0.5),
                Complex32::new(f32::MIN_POSITIVE, f32::NAN),
            ]
        });
        s.store("gemm inputs", 7, 2, &inputs, 0);
        let back: [Vec<Complex32>; 3] = s.load("gemm inputs", 7, 2).expect("stored");
        let bits = |v: &[Vec<Complex32>; 3]| -> Vec<(u32, u32)> {
            v.iter()
                .flatten()
                .map(|z| (z.re.to_bits(), z.im.to_bits()))
                .collect()
        };
        assert_eq!(bits(&back), bits(&inputs), "NaN payloads too, bit for bit");
        let refs: (Result<Vec<Complex64>, usize>, usize) = (Ok(vec![Complex64::new(1.0, 2.0)]), 3);
        s.store("cholesky references", 7, 1, &refs, 0);
        assert_eq!(
            s.load::<(Result<Vec<Complex64>, usize>, usize)>("cholesky references", 7, 1),
            Some(refs)
        );
        let failed: (Result<Vec<Complex64>, usize>, usize) = (Err(5), 0);
        s.store("cholesky references", 8, 1, &failed, 0);
        assert_eq!(s.load("cholesky references", 8, 1), Some(failed));
        let pipeline = PipelineReference {
            fft: vec![Complex64::new(0.25, -1.0)],
            magnitude: vec![3.0, 4.0],
        };
        s.store("pipeline reference", 1, 1, &pipeline, 0);
        assert_eq!(s.load("pipeline reference", 1, 1), Some(pipeline));
    }

    #[test]
    fn another_key_or_build_is_a_miss() {
        let (dir, s) = store();
        s.store("fft input", 1, 4, &vec![1u32, 2, 3], 0);
        assert_eq!(s.load::<Vec<u32>>("fft input", 1, 4), Some(vec![1, 2, 3]));
        assert_eq!(s.load::<Vec<u32>>("fft input", 2, 4), None, "another seed");
        assert_eq!(s.load::<Vec<u32>>("fft input", 1, 8), None, "another size");
        assert_eq!(
            s.load::<Vec<u32>>("fft reference", 1, 4),
            None,
            "another value"
        );
        let other = SharedData {
            build: "another build".into(),
            ..SharedData::at(dir.path())
        };
        assert_eq!(
            other.load::<Vec<u32>>("fft input", 1, 4),
            None,
            "another build"
        );
        assert_eq!(
            s.load::<Vec<u64>>("fft input", 1, 4),
            None,
            "another type's image"
        );
    }

    /// Every single-bit flip of a stored entry, and every truncation, reads as a miss, never
    /// as another value.
    #[test]
    fn a_damaged_entry_is_a_miss() {
        let (_dir, s) = store();
        let value = vec![Complex32::new(1.0, 2.0), Complex32::new(-3.0, 0.5)];
        s.store("fft input", 3, 2, &value, 0);
        let key = s.key("fft input", 3, 2);
        let path = s.path(&key);
        let good = std::fs::read(&path).expect("entry");
        assert_eq!(decode::<Vec<Complex32>>(&good, &key), Some(value.clone()));
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[i] ^= 1 << bit;
                assert_eq!(
                    decode::<Vec<Complex32>>(&bad, &key),
                    None,
                    "bit {bit} of byte {i}"
                );
            }
        }
        for len in 0..good.len() {
            assert_eq!(
                decode::<Vec<Complex32>>(&good[..len], &key),
                None,
                "{len} bytes"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(decode::<Vec<Complex32>>(&longer, &key), None);
        std::fs::write(&path, &good[..good.len() - 1]).expect("write");
        assert_eq!(s.load::<Vec<Complex32>>("fft input", 3, 2), None);
    }

    #[test]
    fn only_what_took_longer_to_make_than_to_read_is_stored() {
        use std::time::Duration;
        let mib = 1 << 20;
        assert!(
            !worth_storing(32 * mib, Duration::from_millis(40)),
            "an FFT input"
        );
        assert!(
            worth_storing(64 * mib, Duration::from_millis(900)),
            "a Cholesky input"
        );
        assert!(worth_storing(256 * mib, Duration::from_secs(1)));
        assert!(!worth_storing(256 * mib + 1, Duration::from_secs(1)));
    }

    #[test]
    fn a_store_that_cannot_be_written_is_left_alone() {
        let s = SharedData::at("/nonexistent/clhip-data");
        s.store("fft input", 1, 1, &vec![1u32], 0);
        assert_eq!(s.load::<Vec<u32>>("fft input", 1, 1), None);
    }

    #[test]
    fn a_dead_run_s_directory_is_removed_and_a_live_one_kept() {
        let base = tempfile::tempdir().expect("temp dir");
        // pid_max is at most 2^22: this pid is never a live process.
        let dead = base.path().join("clhip-data-2147483646-x");
        let live = base
            .path()
            .join(format!("clhip-data-{}-y", std::process::id()));
        let other = base.path().join("clhip-other-1");
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).expect("dir");
        }
        remove_orphans(base.path());
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists());
    }
}
