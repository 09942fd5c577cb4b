//! FNV-1a, 64 bits: the crate's one stable hash. Unlike `DefaultHasher` it is the same across
//! Rust versions and machines, which shard assignment, data seeds and kernel-cache file names
//! all need (a fleet's runners, a rerun months later, another process). Not for security.

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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
}
