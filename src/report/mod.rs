//! What people and machines read after a run: the JSON results file (the record a matrix diff is
//! made from), support matrices as text, Markdown and HTML, JUnit XML for CI, run diffs, and the
//! live console.
//! One file per format; everything public is re-exported here, so `crate::report::X` paths stay.

mod console;
mod diff;
mod figure;
mod html;
mod json;
mod junit;
mod markdown;
mod matrix;

pub use console::ConsoleReporter;
pub use diff::{Movement, Only, RunDiff, diff, render_diff, render_diff_markdown};
pub use figure::Figure;
pub use html::{render_diff_html, render_html, render_html_with_figures};
pub use json::{
    Loaded, Planted, RunReport, RunStatus, SCHEMA, Selection, Summary, closing_line, journal_head,
    judge, load, load_json, load_text, rfc3339_utc, write_json,
};
pub use junit::write_junit;
pub use markdown::render_markdown;
pub use matrix::{outcome_line, outcome_line_from, render_matrix};

#[cfg(test)]
mod tests;
