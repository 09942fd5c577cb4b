//! Shrinking one failure with proptest's shrinking: its size's value tree is simplified while
//! the case keeps giving the outcome seen, and complicated back when it does not (proptest's
//! `TestRunner` loop, one step at a time, since each step is a case a worker runs and the next
//! step depends on its outcome).

use proptest::strategy::ValueTree;

/// A failure's size being shrunk.
pub struct Shrinker {
    tree: Box<dyn ValueTree<Value = usize>>,
    /// The last size that gave the outcome seen: the shrunk size once [`Shrinker::next`] has
    /// none.
    pub smallest: usize,
    /// Each size tried, and whether it gave the outcome seen.
    pub tried: Vec<(usize, bool)>,
    max_steps: usize,
    done: bool,
}

impl Shrinker {
    /// Shrinks from the tree's current size, which gave the outcome seen; at most `max_steps`
    /// sizes are tried.
    pub fn new(mut tree: Box<dyn ValueTree<Value = usize>>, max_steps: usize) -> Self {
        let smallest = tree.current();
        let done = !tree.simplify();
        Shrinker {
            tree,
            smallest,
            tried: Vec::new(),
            max_steps,
            done,
        }
    }

    /// The next size to try, or None when shrinking is over.
    pub fn next(&self) -> Option<usize> {
        (!self.done && self.tried.len() < self.max_steps).then(|| self.tree.current())
    }

    /// What the size [`Shrinker::next`] gave: `same`, the outcome seen.
    pub fn record(&mut self, same: bool) {
        let n = self.tree.current();
        self.tried.push((n, same));
        if same {
            self.smallest = n;
            self.done = !self.tree.simplify();
        } else {
            self.done = !self.tree.complicate();
        }
    }

    /// Whether shrinking stopped at its step limit rather than at a size it could not shrink.
    pub fn ran_out(&self) -> bool {
        !self.done && self.tried.len() >= self.max_steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;
    use proptest::test_runner::TestRunner;

    fn tree(from: usize) -> Box<dyn ValueTree<Value = usize>> {
        // A range whose draw is `from`: proptest's binary search toward 1.
        let mut runner = TestRunner::deterministic();
        (from..=from)
            .prop_map(|n| n)
            .boxed()
            .new_tree(&mut runner)
            .unwrap()
    }

    #[test]
    fn binary_search_finds_the_smallest_failing_size_and_never_takes_a_pass() {
        let mut runner = TestRunner::deterministic();
        let t = (1..=1_000_000usize).boxed().new_tree(&mut runner).unwrap();
        let from = t.current();
        assert!(from > 1000, "{from}");
        let mut s = Shrinker::new(t, 100);
        while let Some(n) = s.next() {
            s.record(n >= 777);
        }
        assert_eq!(s.smallest, 777);
        assert!(!s.ran_out());
        assert!(s.tried.iter().all(|&(n, same)| same == (n >= 777)));
        assert!(s.tried.len() < 40, "{:?}", s.tried);
    }

    #[test]
    fn a_size_that_cannot_shrink_is_kept_and_the_step_limit_holds() {
        let s = Shrinker::new(tree(5), 100);
        assert_eq!(s.next(), None);
        assert_eq!(s.smallest, 5);
        let mut runner = TestRunner::deterministic();
        let t = (1..=1_000_000usize).boxed().new_tree(&mut runner).unwrap();
        let from = t.current();
        let mut s = Shrinker::new(t, 3);
        while s.next().is_some() {
            s.record(true);
        }
        assert_eq!(s.tried.len(), 3);
        assert!(s.ran_out());
        assert!(s.smallest < from);
    }
}
