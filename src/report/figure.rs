//! An SVG figure for the HTML page (`clhip report --html --figure`, the interop bench's plot):
//! parsed as XML and written anew from a whitelist of drawing elements and attributes, so that
//! the page it joins still reaches nothing outside itself.
//!
//! A blacklist of patterns (`href="http`, `url(http`) is always one spelling short: spaces
//! around `=`, `url( ...)`, an entity for a letter, a namespace prefix, `<animate>` setting an
//! `href`. Here nothing is looked for: every element must be one that only draws, every
//! attribute one that takes numbers, colours or font names, and its value (entities resolved)
//! may hold no character that could start a reference (no `(`, `:`, `/`, `;`). What is written
//! into the page is the parsed figure, every text and value escaped again, never the file's
//! own bytes, so that the browser's HTML parser reads exactly what was checked.

use std::fmt::Write as _;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use crate::escape::html_text;

/// The only namespace a figure may declare: SVG's own.
const SVG_NAMESPACE: &str = "http://www.w3.org/2000/svg";

/// Elements that draw and do nothing else: no `a`, `use`, `image`, `style`, `script`,
/// `foreignObject`, `animate`/`set` (which can set an `href`), filters (`feImage` loads) or
/// paint servers (referenced by `url(#..)`).
const ELEMENTS: &[&str] = &[
    "svg", "g", "title", "desc", "rect", "circle", "ellipse", "line", "polyline", "polygon",
    "path", "text", "tspan",
];

/// Attributes that take numbers, lengths, colours, keywords or font names: presentation and
/// geometry only. No `href` of any namespace, no `style`, no `on*` handler, no `id` or
/// `class` (which could clash with the page's).
const ATTRIBUTES: &[&str] = &[
    "xmlns",
    "version",
    "width",
    "height",
    "viewBox",
    "preserveAspectRatio",
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "cx",
    "cy",
    "r",
    "rx",
    "ry",
    "dx",
    "dy",
    "d",
    "points",
    "transform",
    "fill",
    "fill-opacity",
    "fill-rule",
    "stroke",
    "stroke-width",
    "stroke-dasharray",
    "stroke-dashoffset",
    "stroke-linecap",
    "stroke-linejoin",
    "stroke-opacity",
    "opacity",
    "font-family",
    "font-size",
    "font-weight",
    "font-style",
    "text-anchor",
    "dominant-baseline",
];

/// `transform`'s functions (SVG 1.1 7.6): the only words with a `(` a figure may hold.
const TRANSFORMS: &[&str] = &["matrix", "translate", "scale", "rotate", "skewX", "skewY"];

/// An SVG figure embedded in the page (`clhip bench interop --svg`), inline so that the page
/// stays one file with nothing outside it. Made only by [`Figure::inline`].
#[derive(Debug, Clone)]
pub struct Figure {
    pub(super) title: String,
    /// The figure as checked and written anew: markup the page may hold as it is.
    pub(super) svg: String,
}

impl Figure {
    /// `svg` as a figure, if it is one SVG image of drawing elements alone (see [`ELEMENTS`]
    /// and [`ATTRIBUTES`]); else why not, with the line: the caller names the file.
    pub fn inline(title: &str, svg: &str) -> Result<Figure, String> {
        Ok(Figure {
            title: title.to_string(),
            svg: sanitize(svg)?,
        })
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    /// The markup the page holds for the figure.
    pub fn svg(&self) -> &str {
        &self.svg
    }
}

/// The figure in an HTML template: its SVG as markup, not as text. This is the one place the
/// page takes markup from outside clhip, and it is the markup [`sanitize`] wrote anew from the
/// whitelist, every text and value in it escaped.
impl maud::Render for Figure {
    fn render(&self) -> maud::Markup {
        maud::PreEscaped(self.svg.clone())
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: u64) -> usize {
    let end = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The figure written anew from what the whitelist lets through, or why it is refused.
fn sanitize(svg: &str) -> Result<String, String> {
    let mut reader = Reader::from_str(svg);
    let config = reader.config_mut();
    config.check_end_names = true;
    config.check_comments = true;
    let mut out = String::with_capacity(svg.len());
    // The open elements; the root is `svg` and nothing may follow its end.
    let mut open: Vec<String> = Vec::new();
    let mut root_done = false;
    loop {
        let at = reader.buffer_position();
        let event = reader.read_event().map_err(|e| {
            format!(
                "line {}: not well-formed XML: {e}",
                line_of(svg, reader.error_position())
            )
        })?;
        let refuse = |what: String| Err(format!("line {}: {what}", line_of(svg, at)));
        match event {
            Event::Eof => break,
            Event::Decl(_) if open.is_empty() && !root_done && out.is_empty() => {}
            Event::Comment(_) => {}
            Event::DocType(_) => {
                return refuse(
                    "a DOCTYPE: its entities could load from outside the file; a figure needs none"
                        .into(),
                );
            }
            Event::PI(_) | Event::Decl(_) => {
                return refuse(
                    "a processing instruction (`<?...?>`): a figure may start with `<?xml ...?>` \
                     and hold none other"
                        .into(),
                );
            }
            Event::Start(e) | Event::Empty(e) if root_done => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                return refuse(format!(
                    "<{}> after the end of <svg>: a figure is one SVG image",
                    html_text(&name)
                ));
            }
            Event::Start(e) => {
                let name = start_tag(&e, open.is_empty(), &mut out).or_else(&refuse)?;
                out.push('>');
                open.push(name);
            }
            Event::Empty(e) => {
                let was_root = open.is_empty();
                start_tag(&e, was_root, &mut out).or_else(&refuse)?;
                out.push_str("/>");
                root_done = was_root;
            }
            Event::End(_) => {
                // The reader checked that it closes the innermost open element.
                let name = open.pop().unwrap_or_default();
                let _ = write!(out, "</{name}>");
                root_done = open.is_empty();
            }
            Event::Text(t) => {
                let text = t
                    .xml10_content()
                    .map_err(|e| format!("line {}: {e}", line_of(svg, at)))?;
                if open.is_empty() {
                    if !text.trim().is_empty() {
                        return refuse("text outside <svg>: a figure is one SVG image".into());
                    }
                } else {
                    out.push_str(&html_text(&text));
                }
            }
            Event::CData(c) => {
                if open.is_empty() {
                    return refuse("CDATA outside <svg>: a figure is one SVG image".into());
                }
                let text = c
                    .xml10_content()
                    .map_err(|e| format!("line {}: {e}", line_of(svg, at)))?;
                out.push_str(&html_text(&text));
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8_lossy(&r).into_owned();
                let c = match r.resolve_char_ref() {
                    Ok(Some(c)) => c,
                    Ok(None) => match name.as_str() {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "quot" => '"',
                        "apos" => '\'',
                        _ => {
                            return refuse(format!(
                                "the entity `&{};`: a figure may use XML's five and character references only",
                                html_text(&name)
                            ));
                        }
                    },
                    Err(e) => return refuse(format!("`&{};`: {e}", html_text(&name))),
                };
                if open.is_empty() {
                    return refuse("text outside <svg>: a figure is one SVG image".into());
                }
                out.push_str(&html_text(&c.to_string()));
            }
        }
    }
    if !root_done {
        return Err(if out.is_empty() {
            "not an SVG image: no <svg> element".to_string()
        } else {
            "not well-formed XML: <svg> is not closed".to_string()
        });
    }
    Ok(out)
}

/// Writes `<name attr="value" ...` of a whitelisted element (without its `>` or `/>`) and
/// returns its name; or why the element or one of its attributes is refused.
fn start_tag(e: &BytesStart, is_root: bool, out: &mut String) -> Result<String, String> {
    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    if is_root && name != "svg" {
        return Err(format!(
            "not an SVG image: its root element is <{}>, not <svg>",
            html_text(&name)
        ));
    }
    if !ELEMENTS.contains(&name.as_str()) {
        return Err(format!(
            "<{}> is not an element a figure may hold (only {}: nothing that links, loads, \
             scripts or styles)",
            html_text(&name),
            ELEMENTS.join(", ")
        ));
    }
    let _ = write!(out, "<{name}");
    for attr in e.attributes() {
        let attr = attr.map_err(|err| format!("<{name}>: {err}"))?;
        let key = String::from_utf8_lossy(attr.key.as_ref()).into_owned();
        if !ATTRIBUTES.contains(&key.as_str()) {
            return Err(format!(
                "<{name} {}=...>: not an attribute a figure may hold (geometry and presentation \
                 only: no href, style, event handler, id or class)",
                html_text(&key)
            ));
        }
        let value = attr
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|err| format!("<{name} {key}=...>: {err}"))?;
        if !value_allowed(&key, &value) {
            return Err(format!(
                "<{name} {key}=\"{}\">: a value a figure may not hold (numbers, lengths, \
                 colours, keywords and font names only: nothing that could refer elsewhere)",
                html_text(&value)
            ));
        }
        let _ = write!(out, " {key}=\"{}\"", html_text(&value));
    }
    Ok(name)
}

/// Whether `value` is one `key` may take: SVG's namespace for `xmlns`; font names for
/// `font-family`; transform functions for `transform`; else numbers, lengths, colours and
/// keywords. None of them can hold `url(`, a scheme's `:` or a path's `/`.
fn value_allowed(key: &str, value: &str) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || " #.,%+-".contains(c);
    match key {
        "xmlns" => value == SVG_NAMESPACE,
        "font-family" => value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " ,'\"-".contains(c)),
        "transform" => {
            value.chars().all(|c| plain(c) || c == '(' || c == ')')
                && value
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .filter(|w| !w.is_empty())
                    .all(|w| TRANSFORMS.contains(&w) || w == "e" || w == "E")
                && value.split('(').skip(1).count() == value.matches(')').count()
        }
        _ => value.chars().all(plain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's own plot passes, written anew with the same elements and attributes.
    #[test]
    fn a_plot_of_drawing_elements_is_inlined_as_parsed() {
        let plot = "<?xml version=\"1.0\"?>\n<!-- clhip -->\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" viewBox=\"0 0 10 10\" font-family=\"'DejaVu Sans', sans-serif\">\n<title>handoff &amp; pipeline &#x3c;GB/s&gt;</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<g transform=\"translate(1, 2) scale(1e-1)\"><polyline points=\"1,2 3,4\" stroke=\"#1f77b4\" stroke-dasharray=\"6 3\"><title>a</title></polyline></g>\n<text x=\"1.5\" y=\"-2\" text-anchor=\"end\"><![CDATA[x < y]]></text></svg>\n";
        let f = Figure::inline("bench.svg", plot).expect("a plain plot");
        assert_eq!(
            f.svg(),
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" viewBox=\"0 0 10 10\" font-family=\"&#39;DejaVu Sans&#39;, sans-serif\">\n<title>handoff &amp; pipeline &lt;GB/s&gt;</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<g transform=\"translate(1, 2) scale(1e-1)\"><polyline points=\"1,2 3,4\" stroke=\"#1f77b4\" stroke-dasharray=\"6 3\"><title>a</title></polyline></g>\n<text x=\"1.5\" y=\"-2\" text-anchor=\"end\">x &lt; y</text></svg>"
        );
    }

    /// Every way out found so far, each spelled as a blacklist would miss it.
    #[test]
    fn every_way_to_reach_outside_is_refused_however_it_is_spelled() {
        let refused = [
            (
                "<svg><image xlink:href = \"https://x.example/a.png\"/></svg>",
                "<image>",
            ),
            (
                "<svg xmlns:xlink=\"http://www.w3.org/1999/xlink\"><rect/></svg>",
                "xmlns:xlink",
            ),
            (
                "<svg><rect fill=\"url( https://x.example/p )\"/></svg>",
                "fill",
            ),
            (
                "<svg><rect fill=\"&#117;rl(https://x.example/p)\"/></svg>",
                "fill",
            ),
            ("<svg><rect style=\"fill: url(https://x)\"/></svg>", "style"),
            (
                "<svg><style>rect { fill: url( https://x.example/p ) }</style></svg>",
                "<style>",
            ),
            ("<svg><style>@import 'x.css';</style></svg>", "<style>"),
            ("<svg><script>alert(1)</script></svg>", "<script>"),
            ("<svg><SCRIPT>alert(1)</SCRIPT></svg>", "<SCRIPT>"),
            (
                "<svg><svg:script>alert(1)</svg:script></svg>",
                "<svg:script>",
            ),
            ("<svg onload=\"f()\"></svg>", "onload"),
            ("<svg OnLoad = 'f()'></svg>", "OnLoad"),
            ("<svg><rect onclick=\"f()\"/></svg>", "onclick"),
            ("<svg><foreignObject/></svg>", "<foreignObject>"),
            (
                "<svg><a href=\"https://x.example/\"><rect/></a></svg>",
                "<a>",
            ),
            (
                "<svg><use href=\"https://x.example/s.svg#a\"/></svg>",
                "<use>",
            ),
            (
                "<svg><rect><set attributeName=\"href\" to=\"https://x\"/></rect></svg>",
                "<set>",
            ),
            (
                "<svg><animate attributeName=\"href\" values=\"https://x\"/></svg>",
                "<animate>",
            ),
            (
                "<svg><filter><feImage href=\"https://x\"/></filter></svg>",
                "<filter>",
            ),
            (
                "<!DOCTYPE svg [<!ENTITY e SYSTEM \"https://x.example/e\">]><svg>&e;</svg>",
                "DOCTYPE",
            ),
            ("<svg><text>&e;</text></svg>", "entity"),
            (
                "<?xml-stylesheet href=\"https://x.example/s.css\"?><svg/>",
                "processing instruction",
            ),
            (
                "<svg><rect transform=\"url(https://x)\"/></svg>",
                "transform",
            ),
            ("<svg xmlns=\"https://x.example/ns\"/>", "xmlns"),
            ("<svg/><script>alert(1)</script>", "after the end of <svg>"),
            ("<html></html>", "root element is <html>"),
            ("", "no <svg> element"),
            ("<svg><rect></svg>", "not well-formed"),
        ];
        for (bad, named) in refused {
            match Figure::inline("f", bad) {
                Ok(f) => panic!("{bad} was inlined as {}", f.svg()),
                Err(why) => assert!(why.contains(named), "{bad}: {why}"),
            }
        }
        let why = Figure::inline("f", "<svg>\n<rect/>\n<image/></svg>").unwrap_err();
        assert!(why.starts_with("line 3: <image>"), "{why}");
    }

    /// What the parser lets through holds nothing the page's own check would flag, whatever
    /// text it carries.
    #[test]
    fn text_in_a_figure_stays_text() {
        let f = Figure::inline(
            "f",
            "<svg><title>&lt;script&gt;alert(1)&lt;/script&gt;</title><text><![CDATA[</svg><img src=x onerror=alert(1)>]]>\u{1b}[2J</text></svg>",
        )
        .unwrap();
        assert_eq!(
            f.svg(),
            "<svg><title>&lt;script&gt;alert(1)&lt;/script&gt;</title><text>&lt;/svg&gt;&lt;img src=x onerror=alert(1)&gt;\\x1b[2J</text></svg>"
        );
    }
}
