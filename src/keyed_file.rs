//! A file that holds one payload under a key, written whole or not at all: the kernel cache's
//! entries (`runtimes::kernel_cache`) and the run's shared data (`ops::data::shared`).
//!
//! An entry is its format's magic, the key's length and bytes, the payload's length and bytes,
//! then a checksum of the payload (lengths and checksum little-endian u64). A reader gets the
//! payload only when the magic, the key, the lengths and the checksum all hold: anything else
//! (another key, a torn or damaged file) is a miss, never another payload.

use std::io::Write;
use std::path::Path;

/// What tells one kind of entry from another.
pub struct Format {
    pub magic: &'static [u8],
    /// Over the payload; a format keeps its checksum for as long as it keeps its magic.
    pub checksum: fn(&[u8]) -> u64,
}

impl Format {
    /// The entry of `key` whose payload `put` appends (about `capacity` bytes).
    pub fn encode(&self, key: &str, capacity: usize, put: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.magic.len() + key.len() + capacity + 24);
        out.extend_from_slice(self.magic);
        out.extend_from_slice(&(key.len() as u64).to_le_bytes());
        out.extend_from_slice(key.as_bytes());
        let len_at = out.len();
        out.extend_from_slice(&0u64.to_le_bytes());
        let payload_at = out.len();
        put(&mut out);
        let len = (out.len() - payload_at) as u64;
        out[len_at..payload_at].copy_from_slice(&len.to_le_bytes());
        let sum = (self.checksum)(&out[payload_at..]);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// The payload of an entry whose stored key is `key` and whose checksum holds.
    pub fn decode<'a>(&self, bytes: &'a [u8], key: &str) -> Option<&'a [u8]> {
        let rest = bytes.strip_prefix(self.magic)?;
        let (key_len, rest) = take_u64(rest)?;
        let (stored_key, rest) = rest.split_at_checked(usize::try_from(key_len).ok()?)?;
        if stored_key != key.as_bytes() {
            return None;
        }
        let (len, rest) = take_u64(rest)?;
        let (payload, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
        let (sum, rest) = take_u64(rest)?;
        (rest.is_empty() && sum == (self.checksum)(payload)).then_some(payload)
    }
}

fn take_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = bytes.split_at_checked(8)?;
    Some((u64::from_le_bytes(head.try_into().ok()?), rest))
}

/// Writes `entry` to `path` through the temporary file `tmp` in the same directory, renamed
/// into place, so that a reader sees the whole entry or none. On an error nothing is left at
/// `tmp`.
pub fn write(path: &Path, tmp: &Path, entry: &[u8]) -> std::io::Result<()> {
    // A new file, never an existing one: a link planted at the temporary name would
    // otherwise have its target overwritten.
    let _ = std::fs::remove_file(tmp);
    let written = std::fs::File::create_new(tmp)
        .and_then(|mut f| f.write_all(entry))
        .and_then(|()| std::fs::rename(tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    written
}
