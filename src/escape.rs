//! Text from drivers, results files and the command line made inert for where it is written.
//!
//! A reason a driver printed, a kernel log line or a string in a results file can hold anything:
//! terminal escapes (`ESC[2J` clears the screen, OSC 8 makes links), bidi overrides that show
//! text in another order than it runs, HTML, Markdown markup, a `*/` that ends a C comment.
//! Each sink has one function here, and every renderer of that sink passes such text through
//! it: [`terminal_line`] and [`terminal_text`] for the console, [`markdown_text`],
//! [`markdown_code`] and [`markdown_fence`] for Markdown, [`html_template_text`] for the HTML
//! pages (whose template escapes markup), [`html_text`] for markup written by hand (the SVG
//! figure), [`c_comment`] and [`c_string`] for generated C.
//!
//! Control characters are shown, not dropped, so that what a driver printed stays readable:
//! `\x1b` for C0 and DEL, `\u{9b}` for C1, bidi and line-separator characters. The output of
//! each function holds none of them, so escaping twice changes nothing.

use std::fmt::Write as _;

/// Whether `c` must not reach a sink as itself: C0 controls (line breaks and tabs included;
/// each sink says which of those it keeps), DEL, C1 controls, the bidi embeddings, overrides,
/// isolates and marks (CVE-2021-42574, "Trojan Source"), and the Unicode line and paragraph
/// separators.
pub fn is_control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}' | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// `c` as visible text: `\x1b` below U+0080, `\u{202e}` above.
fn push_visible(out: &mut String, c: char) {
    let code = u32::from(c);
    if code < 0x80 {
        let _ = write!(out, "\\x{code:02x}");
    } else {
        let _ = write!(out, "\\u{{{code:x}}}");
    }
}

/// `s` with every control character but those `keep` allows shown as visible text.
fn visible(s: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_control(c) && !keep(c) {
            push_visible(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// One line for a terminal: every control character shown as text, a line break included;
/// tabs kept.
pub fn terminal_line(s: &str) -> String {
    visible(s, |c| c == '\t')
}

/// Several lines for a terminal: line breaks (`\n`) and tabs kept, every other control
/// character (a carriage return too: it overwrites what the line showed) shown as text.
pub fn terminal_text(s: &str) -> String {
    visible(s, |c| c == '\n' || c == '\t')
}

/// Text for an HTML template that escapes markup itself (maud's `html!` escapes every value it
/// is given): control characters shown as text, line breaks and tabs kept (a `pre-wrap` block
/// shows them, a tooltip splits at them). `<`, `&` and quotes are left for the template.
pub fn html_template_text(s: &str) -> String {
    visible(s, |c| c == '\n' || c == '\t')
}

/// Text for an HTML or SVG element's content or a quoted attribute value written by hand (the
/// SVG figure's writer): the five markup characters as entities, control characters shown as
/// text (line breaks and tabs kept: a `pre-wrap` block shows them).
pub fn html_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if is_control(c) => push_visible(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// `text`'s lines, trimmed, the blank ones left out, joined with ` / `: one line for a table
/// cell or a list item. Every line break Rust's `lines` misses (a lone `\r`, U+2028) is cut
/// too.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r', '\u{2028}', '\u{2029}', '\u{85}'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Plain text for Markdown (a table cell, a list item, a paragraph): on one line; HTML's `<`,
/// `>` and `&` as entities; every other character CommonMark gives a meaning inline
/// (`` \ ` * _ [ ] ~ ``, an underscore inside a word aside) behind a backslash, and a leading
/// `#`, `+`, `-` or `=` that would start a block too; control characters shown as text. A `|`
/// means something only in a table, whose writer escapes it in every cell (GFM: `\|`).
pub fn markdown_text(s: &str) -> String {
    let line = one_line(s);
    let chars: Vec<char> = line.chars().collect();
    let intraword = |chars: &[char], i: usize| {
        i > 0
            && chars[i - 1].is_alphanumeric()
            && chars.get(i + 1).is_some_and(|c| c.is_alphanumeric())
    };
    let mut out = String::with_capacity(line.len());
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            // An underscore between two letters or digits opens no emphasis (CommonMark 6.2):
            // `CL_INVALID_VALUE` stays as it reads.
            '_' if intraword(&chars, i) => out.push(c),
            '\\' | '`' | '*' | '_' | '[' | ']' | '~' => {
                out.push('\\');
                out.push(c);
            }
            '#' | '+' | '-' | '=' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            c if is_control(c) && c != '\t' => push_visible(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// The longest run of backticks in `s`.
fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `s` as an inline code span on one line: delimited by one backtick more than the longest run
/// in it (CommonMark 6.1), padded with a space where it starts or ends with one, control
/// characters shown as text. Inside a code span `<` and `&` are literal; a `|` is the table's
/// to escape (`\|` splits no GFM cell, and outside a table nothing splits).
pub fn markdown_code(s: &str) -> String {
    let body = visible(&one_line(s), |c| c == '\t');
    let fence = "`".repeat(longest_backtick_run(&body) + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// `s` as a fenced code block with the info string `info` (the report's own, e.g. `text`): the
/// fence one backtick longer than the longest run in `s` (at least three), control characters
/// shown as text (line breaks and tabs kept). Nothing in it can close the block early.
pub fn markdown_fence(info: &str, s: &str) -> String {
    let body = terminal_text(s);
    let fence = "`".repeat((longest_backtick_run(&body) + 1).max(3));
    let newline = if body.is_empty() || body.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!("{fence}{info}\n{body}{newline}{fence}\n")
}

/// Text for inside a C block comment: `*/` and `/*` broken with a space (one would end the
/// comment, the other is `-Wcomment`), `??` too (a trigraph `??/` is a backslash under
/// `-std=c11`), control characters shown as text (line breaks and tabs kept).
pub fn c_comment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = None;
    for c in s.chars() {
        if matches!(
            (last, c),
            (Some('*'), '/') | (Some('/'), '*') | (Some('?'), '?')
        ) {
            out.push(' ');
        }
        if is_control(c) && c != '\n' && c != '\t' {
            push_visible(&mut out, c);
            last = None;
        } else {
            out.push(c);
            last = Some(c);
        }
    }
    out
}

/// `s` as a C string literal, quotes included, in plain ASCII: `\\`, `\"`, `\n`, `\t`, the
/// second `?` of a pair as `\?` (no trigraph), every other byte outside printable ASCII as a
/// three-digit octal escape (an `\x` escape would take the hex digits after it).
pub fn c_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for b in s.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'?' if out.ends_with('?') => out.push_str("\\?"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a driver could print: a terminal escape (clear the screen), an OSC 8 hyperlink, a
    /// carriage return, a C1 CSI, bidi overrides and isolates, a line separator, DEL and NUL.
    const HOSTILE: &str = "a\x1b[2Jb\x1b]8;;https://x.example/\x07link\x1b]8;;\x07\rc\u{9b}31md\u{202e}evil\u{202c}\u{2066}e\u{2069}\u{2028}f\x7fg\0h";

    fn controls(s: &str) -> Vec<char> {
        s.chars().filter(|&c| is_control(c)).collect()
    }

    #[test]
    fn control_characters_are_every_c0_c1_del_bidi_and_separator() {
        for c in [
            '\0', '\x07', '\t', '\n', '\r', '\x1b', '\x1f', '\x7f', '\u{80}', '\u{9b}',
        ] {
            assert!(is_control(c), "{c:?}");
        }
        for c in ['\u{61c}', '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}'] {
            assert!(is_control(c), "{c:?}");
        }
        for c in ('\u{202a}'..='\u{202e}').chain('\u{2066}'..='\u{2069}') {
            assert!(is_control(c), "{c:?}");
        }
        for c in [
            ' ', '~', '\u{a0}', 'é', '\u{2030}', '\u{2065}', '\u{206a}', '😀',
        ] {
            assert!(!is_control(c), "{c:?}");
        }
    }

    #[test]
    fn a_terminal_sees_every_control_character_as_text() {
        let line = terminal_line(HOSTILE);
        assert_eq!(controls(&line), Vec::<char>::new(), "{line}");
        assert_eq!(
            line,
            r"a\x1b[2Jb\x1b]8;;https://x.example/\x07link\x1b]8;;\x07\x0dc\u{9b}31md\u{202e}evil\u{202c}\u{2066}e\u{2069}\u{2028}f\x7fg\x00h"
        );
        assert_eq!(terminal_line("a\tb\nc"), r"a	b\x0ac");
        assert_eq!(terminal_text("a\tb\nc\r"), "a\tb\nc\\x0d");
        // Escaping twice changes nothing: the output holds nothing to escape.
        assert_eq!(terminal_line(&line), line);
    }

    #[test]
    fn html_text_is_never_markup_nor_a_control_character() {
        let html = html_text(&format!("<script>x</script>&\"'{HOSTILE}"));
        assert!(html.starts_with("&lt;script&gt;x&lt;/script&gt;&amp;&quot;&#39;a\\x1b[2Jb"));
        assert_eq!(controls(&html), Vec::<char>::new(), "{html}");
        assert_eq!(html_text("a\nb\tc"), "a\nb\tc");
    }

    #[test]
    fn html_template_text_shows_controls_and_leaves_markup_to_the_template() {
        let shown = html_template_text(&format!("<b>&'{HOSTILE}\n\t"));
        assert!(shown.starts_with("<b>&'a\\x1b[2Jb"), "{shown}");
        assert!(shown.ends_with("\n\t"), "{shown}");
        assert_eq!(
            controls(&shown.replace(['\n', '\t'], "")),
            Vec::<char>::new()
        );
    }

    #[test]
    fn markdown_text_is_one_line_with_no_markup() {
        assert_eq!(
            markdown_text("<script>alert(1)</script> & <img src=x>"),
            "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img src=x&gt;"
        );
        assert_eq!(
            markdown_text(r"a|b `c` *d* _e_ [f](g) ~h~ \i"),
            r"a|b \`c\` \*d\* \_e\_ \[f\](g) \~h\~ \\i"
        );
        assert_eq!(
            markdown_text("CL_INVALID_VALUE _x x_"),
            r"CL_INVALID_VALUE \_x x\_"
        );
        assert_eq!(markdown_text("# h"), r"\# h");
        assert_eq!(markdown_text("- x"), r"\- x");
        assert_eq!(markdown_text("a-b#c"), "a-b#c");
        assert_eq!(
            markdown_text("one\n\ntwo\r\nthree\rfour"),
            "one / two / three / four"
        );
        let md = markdown_text(HOSTILE);
        assert_eq!(controls(&md), Vec::<char>::new(), "{md}");
    }

    #[test]
    fn a_code_span_outlasts_any_backticks_in_it() {
        assert_eq!(markdown_code("pocl0+host/copy"), "`pocl0+host/copy`");
        assert_eq!(markdown_code("a`b"), "``a`b``");
        assert_eq!(markdown_code("``x"), "``` ``x ```");
        assert_eq!(markdown_code("a\nb"), "`a / b`");
        assert_eq!(markdown_code("<b>"), "`<b>`");
        let code = markdown_code(HOSTILE);
        assert_eq!(controls(&code), Vec::<char>::new(), "{code}");
    }

    #[test]
    fn a_fence_outlasts_any_backticks_in_it() {
        assert_eq!(markdown_fence("", "a\nb\n"), "```\na\nb\n```\n");
        assert_eq!(
            markdown_fence("text", "x ```` y"),
            "`````text\nx ```` y\n`````\n"
        );
        let fenced = markdown_fence("", &format!("{HOSTILE}\n```\n"));
        assert!(fenced.starts_with("````\n") && fenced.ends_with("\n````\n"));
        assert_eq!(controls(&fenced.replace('\n', "")), Vec::<char>::new());
    }

    #[test]
    fn a_c_comment_cannot_be_closed_or_opened_from_inside() {
        assert_eq!(c_comment("/opt/rocm-*/lib"), "/opt/rocm-* /lib");
        assert_eq!(c_comment("a /* b */ c"), "a / * b * / c");
        assert_eq!(c_comment("*/*/"), "* / * /");
        assert_eq!(c_comment("what??/"), "what? ?/");
        assert_eq!(c_comment("a\nb\tc\x1bd"), "a\nb\tc\\x1bd");
    }

    #[test]
    fn a_c_string_is_plain_ascii_with_every_byte_escaped_that_could_end_it() {
        assert_eq!(c_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(c_string("a\nb\tc??/ x ? y"), r#""a\nb\tc?\?/ x ? y""#);
        assert_eq!(c_string("???"), r#""?\?\?""#);
        assert_eq!(c_string("\x1b1\u{e9}"), r#""\0331\303\251""#);
    }

    proptest! {
        #[test]
        fn no_sink_lets_a_control_character_or_its_own_markup_through(s in any::<String>()) {
            for (sink, out) in [
                ("terminal_line", terminal_line(&s)),
                ("markdown_text", markdown_text(&s)),
                ("markdown_code", markdown_code(&s)),
            ] {
                prop_assert!(controls(&out).is_empty(), "{sink}: {out:?}");
            }
            for (sink, out) in [
                ("terminal_text", terminal_text(&s)),
                ("html_text", html_text(&s)),
                ("html_template_text", html_template_text(&s)),
                ("c_comment", c_comment(&s)),
            ] {
                prop_assert!(
                    out.chars().all(|c| !is_control(c) || c == '\n' || c == '\t'),
                    "{sink}: {out:?}"
                );
            }
            let html = html_text(&s);
            prop_assert!(!html.contains(['<', '>', '"', '\'']));
            let comment = c_comment(&s);
            prop_assert!(!comment.contains("*/") && !comment.contains("/*") && !comment.contains("??"));
            let md = markdown_text(&s);
            prop_assert!(!md.contains(['<', '>', '\n']));
            let lit = c_string(&s);
            prop_assert!(lit.bytes().all(|b| (0x20..0x7f).contains(&b)));
            prop_assert!(!lit.contains("??"));
            prop_assert!(!lit[1..lit.len() - 1].replace("\\\\", "").replace("\\\"", "").contains('"'));
        }
    }
}
