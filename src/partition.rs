//! Spreading one run over several runners (nextest's `--partition hash:m/n`): each case goes to
//! the shard its id hashes to, so a case's shard does not depend on which other cases a filter
//! kept, and the shards of one plan are disjoint and cover it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `hash:m/n`: shard `m` (1-based) of `n`. Results files record it as that text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Partition {
    pub shard: u64,
    pub of: u64,
}

impl FromStr for Partition {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}`: expected `hash:M/N` with 1 <= M <= N, e.g. hash:1/3");
        let spec = s.strip_prefix("hash:").ok_or_else(bad)?;
        let (m, n) = spec.split_once('/').ok_or_else(bad)?;
        let shard: u64 = m.trim().parse().map_err(|_| bad())?;
        let of: u64 = n.trim().parse().map_err(|_| bad())?;
        if of == 0 || shard == 0 || shard > of {
            return Err(bad());
        }
        Ok(Partition { shard, of })
    }
}

impl TryFrom<String> for Partition {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Partition> for String {
    fn from(p: Partition) -> String {
        p.to_string()
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hash:{}/{}", self.shard, self.of)
    }
}

impl Partition {
    /// The one shard of an unpartitioned run: the whole plan.
    pub const WHOLE: Partition = Partition { shard: 1, of: 1 };

    /// Every shard of a plan split `of` ways.
    pub fn all(of: u64) -> impl Iterator<Item = Partition> {
        (1..=of).map(move |shard| Partition { shard, of })
    }

    /// Whether the case with this id belongs to this shard.
    pub fn contains(&self, id: &str) -> bool {
        crate::hash::fnv1a64(id.as_bytes()) % self.of == self.shard - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_nonsense_is_refused() {
        assert_eq!(
            "hash:2/3".parse::<Partition>().unwrap(),
            Partition { shard: 2, of: 3 }
        );
        for bad in [
            "hash:0/3",
            "hash:4/3",
            "hash:1/0",
            "count:1/2",
            "hash:1",
            "hash:a/b",
            "",
        ] {
            assert!(bad.parse::<Partition>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_partition_is_recorded_as_its_spec() {
        let p = Partition { shard: 2, of: 3 };
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"hash:2/3\"");
        assert_eq!(
            serde_json::from_str::<Partition>("\"hash:2/3\"").unwrap(),
            p
        );
        assert!(serde_json::from_str::<Partition>("\"hash:4/3\"").is_err());
        assert_eq!(
            Partition::all(3).collect::<Vec<_>>(),
            [1, 2, 3].map(|shard| Partition { shard, of: 3 })
        );
        assert!(Partition::WHOLE.contains("anything"));
    }

    #[test]
    fn shards_are_disjoint_cover_and_ignore_other_cases() {
        let ids: Vec<String> = (0..1000)
            .map(|i| format!("pocl0+host/copy/finish/fft/n={i}"))
            .collect();
        let parts: Vec<Partition> = (1..=3).map(|m| Partition { shard: m, of: 3 }).collect();
        for id in &ids {
            assert_eq!(parts.iter().filter(|p| p.contains(id)).count(), 1, "{id}");
        }
        // Roughly even.
        for p in &parts {
            let n = ids.iter().filter(|id| p.contains(id)).count();
            assert!((250..420).contains(&n), "{p}: {n}");
        }
    }
}
