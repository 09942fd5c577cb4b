//! What a worker keeps of the cases' data between cases: the inputs and f64 references of
//! each (op, size). Every path and sync of one (op, size) moves the same data (see
//! [`super::data_seed`]), and the runner hands a worker its cases grouped by (op, size), so a
//! 2048 x 2048 cgemm reference is computed once per worker rather than once per case.
//!
//! Values are shared read-only (`Arc`): an op never writes into what it got from here, so a
//! case cannot leak into the next one through the cache.
//!
//! Below it, the run's [`shared`] store: what one worker of the run made, the others read
//! from a file instead of making it again.

pub mod shared;

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use shared::{Shareable, SharedData};

/// Environment variable: the cache's budget in MiB (default [`DEFAULT_BUDGET_MIB`]); `0`
/// turns it off.
pub const BUDGET_ENV: &str = "CLHIP_DATA_CACHE_MIB";

/// Enough for the largest (op, size) of the default matrix (a 2048 x 2048 cgemm: three inputs
/// and an f64 reference, 160 MiB) several times over, and small next to a GPU host's memory
/// even with 16 workers.
pub const DEFAULT_BUDGET_MIB: usize = 768;

type Key = (&'static str, u64, usize);

struct Entry {
    key: Key,
    value: Arc<dyn Any + Send + Sync>,
    bytes: usize,
}

/// Least recently used entries go first once the budget is exceeded.
pub struct DataCache {
    entries: VecDeque<Entry>,
    held: usize,
    budget: usize,
    shared: Option<SharedData>,
}

impl Default for DataCache {
    fn default() -> Self {
        let mib = std::env::var(BUDGET_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(DEFAULT_BUDGET_MIB);
        DataCache {
            shared: SharedData::from_env(),
            ..DataCache::with_budget(mib << 20)
        }
    }
}

impl DataCache {
    pub fn with_budget(bytes: usize) -> Self {
        DataCache {
            entries: VecDeque::new(),
            held: 0,
            budget: bytes,
            shared: None,
        }
    }

    /// This cache over the run's shared store.
    pub fn over(self, shared: SharedData) -> Self {
        DataCache {
            shared: Some(shared),
            ..self
        }
    }

    /// The value `what` for `(seed, n)`, made by `make` the first time (or read from the run's
    /// shared store, where another worker made it). `bytes` is its size, for the budget.
    pub fn get<T: Any + Send + Sync + Shareable>(
        &mut self,
        what: &'static str,
        seed: u64,
        n: usize,
        bytes: usize,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let key = (what, seed, n);
        if let Some(i) = self.entries.iter().position(|e| e.key == key) {
            let entry = self.entries.remove(i).expect("index from position");
            let hit = entry.value.clone().downcast::<T>();
            self.entries.push_back(entry);
            if let Ok(v) = hit {
                return v;
            }
            // Same key, another type: a programming error in the caller's key names. Make it
            // afresh rather than hand back the wrong thing.
        }
        let value = Arc::new(self.make_or_read(what, seed, n, bytes, make));
        if bytes <= self.budget {
            while self.held + bytes > self.budget {
                match self.entries.pop_front() {
                    Some(old) => self.held -= old.bytes,
                    None => break,
                }
            }
            self.held += bytes;
            self.entries.push_back(Entry {
                key,
                value: value.clone(),
                bytes,
            });
        }
        value
    }

    /// What `make` makes, or the run's shared store holds for `(what, seed, n)`; stored there
    /// when it was slow to make.
    fn make_or_read<T: Shareable>(
        &self,
        what: &'static str,
        seed: u64,
        n: usize,
        bytes: usize,
        make: impl FnOnce() -> T,
    ) -> T {
        if let Some(s) = &self.shared
            && let Some(v) = crate::trace::timed(&format!("data: {what} n={n} (read)"), || {
                s.load(what, seed, n)
            })
        {
            return v;
        }
        let started = std::time::Instant::now();
        let value = crate::trace::timed(&format!("data: {what} n={n}"), make);
        if let Some(s) = &self.shared
            && shared::worth_storing(bytes, started.elapsed())
        {
            crate::trace::timed(&format!("data: {what} n={n} (stored)"), || {
                s.store(what, seed, n, &value, bytes)
            });
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn the_same_key_is_made_once_and_other_keys_apart() {
        let mut cache = DataCache::with_budget(1 << 20);
        let made = Cell::new(0);
        let mut get = |what, seed, n| {
            cache
                .get(what, seed, n, 100, || {
                    made.set(made.get() + 1);
                    vec![seed as u32, n as u32]
                })
                .to_vec()
        };
        assert_eq!(get("a", 1, 2), vec![1, 2]);
        assert_eq!(get("a", 1, 2), vec![1, 2]);
        assert_eq!(made.get(), 1);
        assert_eq!(get("a", 1, 3), vec![1, 3]);
        assert_eq!(get("a", 2, 2), vec![2, 2]);
        assert_eq!(get("b", 1, 2), vec![1, 2]);
        assert_eq!(made.get(), 4);
    }

    #[test]
    fn the_budget_evicts_least_recently_used_and_skips_what_never_fits() {
        let mut cache = DataCache::with_budget(250);
        let made = Cell::new(0);
        let mut get = |seed, bytes| {
            cache.get("x", seed, 1, bytes, || {
                made.set(made.get() + 1);
                seed
            });
        };
        get(1, 100);
        get(2, 100);
        get(1, 100); // 1 is now the most recent
        get(3, 100); // evicts 2
        assert_eq!(made.get(), 3);
        get(1, 100);
        assert_eq!(made.get(), 3, "1 stayed");
        get(2, 100);
        assert_eq!(made.get(), 4, "2 was evicted");
        get(9, 1000);
        get(9, 1000);
        assert_eq!(made.get(), 6, "too big to keep: made each time");
    }

    #[test]
    fn a_key_reused_for_another_type_is_made_afresh() {
        let mut cache = DataCache::with_budget(1000);
        let a: Arc<u32> = cache.get("k", 1, 1, 4, || 7u32);
        let b: Arc<u64> = cache.get("k", 1, 1, 8, || 9u64);
        assert_eq!((*a, *b), (7, 9));
    }

    /// Two workers of one run: what the first made slowly, the second reads from the store
    /// and does not make; what was quick to make, each makes itself.
    #[test]
    fn a_second_worker_reads_what_the_first_made() {
        let dir = tempfile::tempdir().expect("temp dir");
        let worker = || DataCache::with_budget(64 << 20).over(SharedData::at(dir.path()));
        let made = Cell::new(0);
        let slow = |seed: u64| {
            made.set(made.get() + 1);
            // 20 ms is worth a file of up to 5 MiB (shared::READ_RATE).
            std::thread::sleep(std::time::Duration::from_millis(20));
            vec![seed as u32; 1024]
        };
        let mut first = worker();
        let a = first.get("x", 1, 2, 4096, || slow(1));
        let mut second = worker();
        let b = second.get("x", 1, 2, 4096, || slow(9));
        assert_eq!((made.get(), &*a), (1, &*b), "read, not made");
        let c = second.get("x", 2, 2, 4096, || slow(2));
        assert_eq!((made.get(), c[0]), (2, 2), "another seed is made");
        for cache in [&mut first, &mut second] {
            cache.get("quick", 1, 1, 1 << 30, || {
                made.set(made.get() + 1);
                vec![1u32, 2]
            });
        }
        assert_eq!(made.get(), 4, "what is quick to make is not stored");
    }
}
