//! The sizes `explore` draws for an op, as proptest strategies: small and odd sizes, sizes just
//! below, at and just past a page (4 KiB) or a huge page (2 MiB), and any size up to the limit;
//! powers of two for the FFT ops; any dimension for the matrix ops. Each shrinks toward its
//! smallest size (proptest's binary search), so that a failure that needs a buffer past a
//! boundary shrinks to the first size past it.

use proptest::strategy::{BoxedStrategy, Strategy, Union};

use crate::cases::{self, Limits};
use crate::model::Op;

/// A page: a buffer that straddles one spans two.
pub const PAGE: usize = 4 << 10;
/// A huge page (and the granularity of many GPU allocators).
pub const HUGE_PAGE: usize = 2 << 20;
/// Bytes of one complex f32 element.
const ELEMENT: usize = 8;
/// How far from a boundary, in elements, a size near one may fall.
const NEAR: usize = 3;
/// The sizes the small-size strategy draws from, up to this.
const SMALL: usize = 2048;

/// The largest size `op` takes whose one shared buffer holds at most `max_bytes`, within the
/// harness's own limits (a size `run` would take from a case file); None when none does.
pub fn largest(op: Op, max_bytes: usize) -> Option<usize> {
    let harness = cases::max_size(op, &Limits::HARNESS)?;
    let elements = max_bytes / ELEMENT;
    let fits = match op {
        Op::Fft | Op::Pipeline => {
            let below = if elements == 0 {
                return None;
            } else {
                1usize << elements.ilog2()
            };
            (below >= 2).then_some(below)
        }
        Op::Gemm | Op::Cholesky => (elements >= 1).then(|| elements.isqrt()),
        Op::Handoff | Op::Placement | Op::Reuse => (elements >= 1).then_some(elements),
    }?;
    Some(fits.min(harness))
}

/// The sizes `op` is explored at, up to [`largest`]`(op, max_bytes)`; None when no size fits.
pub fn sizes(op: Op, max_bytes: usize) -> Option<BoxedStrategy<usize>> {
    let max = largest(op, max_bytes)?;
    Some(match op {
        Op::Fft | Op::Pipeline => (1..=max.ilog2()).prop_map(|k| 1usize << k).boxed(),
        Op::Gemm | Op::Cholesky => {
            Union::new_weighted(vec![(1, (1..=max).boxed()), (1, (1..=max.min(64)).boxed())])
                .boxed()
        }
        Op::Handoff | Op::Placement | Op::Reuse => {
            let mut choices = vec![(2, (1..=max).boxed()), (2, (1..=max.min(SMALL)).boxed())];
            for boundary in [PAGE, HUGE_PAGE] {
                if let Some(near) = near_boundaries(boundary / ELEMENT, max) {
                    choices.push((3, near));
                }
            }
            Union::new_weighted(choices).boxed()
        }
    })
}

/// Sizes within [`NEAR`] elements of a multiple of `every` elements, up to `max`: `k *
/// every + d` for `k` from 1 and `d` from `-NEAR` to `NEAR`. Drawn as one index that grows
/// with the size, so that proptest's binary search over it is a search over the sizes: a
/// failure that needs the buffer past a boundary shrinks to the first size of the set past it.
fn near_boundaries(every: usize, max: usize) -> Option<BoxedStrategy<usize>> {
    let near = NEAR;
    let width = 2 * near + 1;
    let most = max.checked_sub(near)? / every;
    if most == 0 || every <= 2 * near {
        return None;
    }
    Some(
        (0..most * width)
            .prop_map(move |i| {
                // Block i / width is the boundary (k - 1) * every, i % width the step from
                // `-NEAR`: increasing in i, since every > 2 * NEAR; within 1..=max, since
                // k * every <= max - NEAR.
                (i / width + 1) * every + i % width - near
            })
            .boxed(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::shrink::Shrinker;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    #[test]
    fn the_largest_size_fits_the_bytes_and_the_op() {
        assert_eq!(largest(Op::Handoff, 1 << 20), Some(131_072));
        assert_eq!(largest(Op::Fft, 1 << 20), Some(131_072));
        assert_eq!(largest(Op::Fft, (1 << 20) + 8), Some(131_072));
        assert_eq!(largest(Op::Gemm, 1 << 20), Some(362));
        assert_eq!(largest(Op::Handoff, 7), None);
        assert_eq!(largest(Op::Fft, 8), None, "a 1-point FFT is no case");
        // The FFT's own range caps it whatever the bytes.
        assert_eq!(largest(Op::Fft, 1 << 40), Some(cases::MAX_FFT));
    }

    /// Every size drawn is one the op takes, within the limit, and the boundaries are met:
    /// sizes past a page and past 2 MiB come up, and odd ones.
    #[test]
    fn drawn_sizes_are_valid_and_reach_the_boundaries() {
        let max_bytes = 4 << 20;
        let mut runner = TestRunner::deterministic();
        for op in [Op::Handoff, Op::Fft, Op::Gemm] {
            let s = sizes(op, max_bytes).unwrap();
            let drawn: Vec<usize> = (0..2000)
                .map(|_| s.new_tree(&mut runner).unwrap().current())
                .collect();
            for &n in &drawn {
                cases::check_size(op, n, &Limits::HARNESS).unwrap();
                assert!(
                    cases::case_bytes(op, n).unwrap().buffer <= max_bytes as u64,
                    "{op} n={n}"
                );
            }
            if op == Op::Handoff {
                // Odd, and 1 to 3 elements past a multiple of the boundary.
                let past = |b: usize| {
                    drawn
                        .iter()
                        .any(|&n| n * 8 > b && (1..=3).contains(&(n * 8 % b / 8)) && n % 2 == 1)
                };
                assert!(
                    past(PAGE) && past(HUGE_PAGE),
                    "no odd size just past a boundary"
                );
                assert!(drawn.iter().any(|&n| n < 16), "no small size");
            }
        }
    }

    /// The smallest size whose buffer runs past 2 MiB, for each op's kind of size.
    fn first_past_huge_page(op: Op) -> usize {
        (1..)
            .find(|&n| cases::case_bytes(op, n).unwrap().buffer > HUGE_PAGE as u64)
            .unwrap_or(0)
    }

    /// A failure that needs the buffer past 2 MiB, found at any drawn size, shrinks with
    /// proptest's shrinking to the first size past the boundary: 262,145 elements, the
    /// 2^19-point FFT, a 513 x 513 matrix.
    #[test]
    fn a_failure_past_2_mib_shrinks_to_the_boundary() {
        let mut runner = TestRunner::deterministic();
        for (max_bytes, op, want) in [
            (4 << 20, Op::Handoff, 262_145),
            (8 << 20, Op::Handoff, 262_145),
            (4 << 20, Op::Fft, 1 << 19),
            (4 << 20, Op::Gemm, 513),
        ] {
            if op != Op::Fft {
                assert_eq!(first_past_huge_page(op), want);
            }
            let fails = |n: usize| cases::case_bytes(op, n).unwrap().buffer > HUGE_PAGE as u64;
            let s = sizes(op, max_bytes).unwrap();
            let mut shrunk = 0;
            for _ in 0..300 {
                let tree = s.new_tree(&mut runner).unwrap();
                if !fails(tree.current()) {
                    continue;
                }
                let mut shrinker = Shrinker::new(tree, 64);
                while let Some(n) = shrinker.next() {
                    shrinker.record(fails(n));
                }
                assert_eq!(shrinker.smallest, want, "{op}: tried {:?}", shrinker.tried);
                shrunk += 1;
            }
            assert!(shrunk > 5, "{op}: only {shrunk} draws failed");
        }
    }
}
