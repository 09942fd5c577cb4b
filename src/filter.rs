//! Case-id filters: a glob when the filter has a `*`, else a substring. A leaf module: the
//! parent, the worker and the expectation files all match ids the same way.

/// Whether `id` matches one filter: a glob when it has a `*`, else a substring.
pub fn matches_filter(filter: &str, id: &str) -> bool {
    if !filter.contains('*') {
        return id.contains(filter);
    }
    glob(filter, id)
}

/// A glob whose only wildcard is `*`, anchored at both ends, in time linear in the pattern and
/// the text (a backtracking matcher took over 20 s on `********Z`). Without `?` or classes the
/// pattern is literal pieces between stars: the first must start the text, the last must end
/// it, and each middle piece can be taken at its leftmost occurrence after the one before,
/// since any later choice leaves less room for the rest and none more. `str::find` is linear
/// (two-way search). Hand-written rather than globset, which would also give `?`, `[..]`,
/// `{a,b}` and `\` meanings today's filters do not have.
pub fn glob(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    // split yields at least one piece; with a `*` there are at least two.
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let Some(last) = pieces.next_back() else {
        // No `*` at all: the pattern is the whole text.
        return rest.is_empty();
    };
    // The last piece is matched before the middle ones, so that they cannot use its bytes.
    let Some(middle) = rest.strip_suffix(last) else {
        return false;
    };
    rest = middle;
    for piece in pieces {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Today's semantics, the backtracking original: what the linear glob must agree with.
    fn backtracking_glob(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| backtracking_glob(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && backtracking_glob(rest, &s[1..]),
        }
    }

    proptest::proptest! {
        #[test]
        fn glob_agrees_with_the_backtracking_original(
            p in "[ab*]{0,8}",
            s in "[ab]{0,10}",
        ) {
            proptest::prop_assert_eq!(
                glob(&p, &s),
                backtracking_glob(p.as_bytes(), s.as_bytes()),
                "pattern {:?} text {:?}", p, s
            );
        }
    }

    #[test]
    fn glob_edge_cases() {
        assert!(glob("*", ""));
        assert!(glob("a*a", "aa") && !glob("a*a", "a"));
        assert!(glob("**", "x") && glob("*x*", "x"));
        assert!(!glob("ab*b", "ab"));
        assert!(glob("é*é", "éé") && !glob("é*é", "é"));
        assert!(matches_filter("fft", "a/fft/n=4") && !matches_filter("fft*", "a/fft/n=4"));
    }
}
