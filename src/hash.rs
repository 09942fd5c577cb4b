//! FNV-1a, 64 bits: the crate's one stable hash. Unlike `DefaultHasher` it is the same across
//! Rust versions and machines, which shard assignment, data seeds and kernel-cache file names
//! all need (a fleet's runners, a rerun months later, another process). Not for security.

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// FNV-1a's step over little-endian 8-byte words (the last, short one byte by byte): an eighth
/// of the steps, for checksums of payloads of tens of MiB (the run's shared data). Any change of
/// one word changes the result, since each step is a bijection of the state. Not `fnv1a64`'s
/// value, and not for names a later run must find again under another build.
pub fn fnv1a64_words(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let h = (&mut words).fold(OFFSET, |h, w| {
        let w: [u8; 8] = w.try_into().unwrap_or_default();
        (h ^ u64::from_le_bytes(w)).wrapping_mul(PRIME)
    });
    words
        .remainder()
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned: shards, data seeds and cache names recorded by earlier runs depend on it.
    #[test]
    fn matches_the_published_fnv1a_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// One flipped bit anywhere, in a whole word or in the short tail, changes the checksum.
    #[test]
    fn a_word_checksum_sees_any_one_flipped_bit() {
        assert_eq!(fnv1a64_words(b""), OFFSET);
        let data: Vec<u8> = (0..21u8).collect();
        let sum = fnv1a64_words(&data);
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[i] ^= 1 << bit;
                assert_ne!(fnv1a64_words(&bad), sum, "bit {bit} of byte {i}");
            }
        }
    }
}
