//! The layering of src/, checked from the source: every `crate::` (and `super::`) path in
//! non-test code is an arrow from its file's top-level module to the module it names. Fails on
//! an arrow the layering forbids, and on a circle between modules of different concerns. A
//! source scan, not a compiler pass: comments, string literals and `#[cfg(test)]` items (with
//! the files they load) are left out, so tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Arrows that must not exist: (from, to, why). A name is a top-level module of src/.
const FORBIDDEN: &[(&[&str], &[&str], &str)] = &[
    (
        &["runtimes"],
        &["probe", "report", "runner", "cases", "reference"],
        "runtimes wrap the APIs; they know the model (and the data generators), not the probe, \
         reports, runner, cases or the CPU reference",
    ),
    (
        &["paths", "sync", "ops", "ipc"],
        &["runner"],
        "memory crossing and ops run inside a worker; the runner is above them",
    ),
    (
        &["ipc"],
        &["ops"],
        "the IPC exporter opens its peer through `peer`, below ops (ops -> paths -> ipc)",
    ),
    (
        &["report", "fingerprint", "history"],
        &["runtimes"],
        "reports and history are read on machines without any runtime; the fingerprint has its \
         own records",
    ),
    (
        &["reference", "tolerance", "generate"],
        &["runtimes"],
        "the CPU truth, its bounds and the data know nothing of runtimes",
    ),
    (
        &[
            "report",
            "cases",
            "expectations",
            "merge",
            "consistency",
            "history",
        ],
        &["runner"],
        "results files are read and judged on machines that run nothing: their records live in \
         `results`, below the runner",
    ),
    (
        &["probe"],
        &["pairs"],
        "pairs are made from a probe; the probe does not know pairs",
    ),
];

/// Modules of one concern, which may import each other in a circle: none. Every circle between
/// top-level modules fails the test.
const CONCERNS: &[&[&str]] = &[];

/// One `crate::` path in non-test code.
#[derive(Debug, Clone)]
struct Arrow {
    from: String,
    to: String,
    file: PathBuf,
    line: usize,
    text: String,
}

/// `src` with comments and the contents of string and char literals blanked (newlines kept, so
/// line numbers hold).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || (c[i] == 'b' && next == Some('r')))
            && (i == 0 || !ident(c[i - 1]))
            && {
                let mut j = i + if c[i] == 'b' { 2 } else { 1 };
                while c.get(j) == Some(&'#') {
                    j += 1;
                }
                c.get(j) == Some(&'"')
            }
        {
            // Raw string: r"..", r#".."#, br#".."#.
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while c[j] == '#' {
                hashes += 1;
                j += 1;
            }
            out.push('"');
            i = j + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push('"');
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c[i] == '\'' && (next == Some('\\') || c.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            i += 1;
            while i < c.len() && c[i] != '\'' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            out.push_str("' '");
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `src` (stripped) without its `#[cfg(test)]` items, blanked; the names of the `mod x;` files
/// they load, which are test code too.
fn without_tests(src: &str) -> (String, Vec<String>) {
    let mut out: Vec<char> = src.chars().collect();
    let mut test_mods = Vec::new();
    let text: String = out.iter().collect();
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let start = from + at;
        let chars: Vec<(usize, char)> = text[start..].char_indices().collect();
        // The item ends at the first `;` before any `{`, or at the `}` matching that `{`.
        let mut depth = 0;
        let mut end = text.len();
        for &(k, ch) in &chars {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = start + k + 1;
                    break;
                }
                _ => {}
            }
        }
        let item = &text[start..end];
        if let Some(rest) = item.split("mod ").nth(1)
            && item.trim_end().ends_with(';')
        {
            test_mods.push(rest.trim_end_matches(';').trim().to_string());
        }
        let (a, b) = (text[..start].chars().count(), text[..end].chars().count());
        for ch in &mut out[a..b] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
        from = end;
    }
    (out.into_iter().collect(), test_mods)
}

/// Every `crate::` and `super::` path in `code` (stripped, tests removed), as the top-level
/// module it names: (line, top-level module, text). `module` is the file's own module path.
fn paths(code: &str, module: &[String]) -> Vec<(usize, String, String)> {
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for key in ["crate::", "super::"] {
            let mut from = 0;
            while let Some(at) = line[from..].find(key) {
                let start = from + at;
                from = start + key.len();
                if line[..start].chars().next_back().is_some_and(ident) {
                    continue;
                }
                let rest = &line[start + key.len()..];
                // The path's first segment, or each first segment of a `{a, b::c}` group.
                let firsts: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                    let mut depth = 0;
                    let mut items = vec![String::new()];
                    for ch in group.chars() {
                        match ch {
                            '{' => depth += 1,
                            '}' if depth == 0 => break,
                            '}' => depth -= 1,
                            ',' if depth == 0 => items.push(String::new()),
                            _ => items.last_mut().unwrap().push(ch),
                        }
                    }
                    items
                        .iter()
                        .map(|s| {
                            s.trim()
                                .chars()
                                .take_while(|&ch| ident(ch))
                                .collect::<String>()
                        })
                        .filter(|s| !s.is_empty())
                        .collect()
                } else {
                    vec![rest.chars().take_while(|&ch| ident(ch)).collect()]
                };
                let mut shown: String = line[start..]
                    .chars()
                    .take_while(|&ch| ident(ch) || ch == ':')
                    .collect();
                if let Some(group) = line[start + shown.len()..].strip_prefix('{') {
                    shown.push('{');
                    shown.extend(group.chars().take_while(|&ch| ch != '}'));
                    shown.push('}');
                }
                for first in firsts {
                    let target = if key == "crate::" {
                        first
                    } else {
                        // super:: from a file of depth 1 (src/x.rs) names a top-level module;
                        // deeper, it stays within the file's own top-level module.
                        match module.len() {
                            0 | 1 => first,
                            _ => module[0].clone(),
                        }
                    };
                    found.push((n + 1, target, shown.clone()));
                }
            }
        }
    }
    found
}

/// Every .rs file under `dir`, recursively.
fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// `src/runtimes/hip/mod.rs` -> [runtimes, hip]; `src/ops.rs` -> [ops].
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The modules a crate root declares (`mod x;`, `pub mod x;`) in non-test code.
fn declared_modules(root: &Path) -> BTreeSet<String> {
    let (code, _) = without_tests(&strip(&std::fs::read_to_string(root).unwrap()));
    code.split(';')
        .filter_map(|item| {
            let words: Vec<&str> = item.split_whitespace().collect();
            match words.as_slice() {
                [.., "mod", name] if name.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                    Some(name.to_string())
                }
                _ => None,
            }
        })
        .collect()
}

/// The arrows of every non-test file of the library under `src`.
fn arrows(src: &Path) -> Vec<Arrow> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    // The binary's own modules (its commands) import the library as `clhip::`, and no module
    // of the library can import them: they are no layer of it.
    let binary = declared_modules(&src.join("main.rs"));
    let mut texts = BTreeMap::new();
    let mut test_files = BTreeSet::new();
    for file in &files {
        let (code, test_mods) = without_tests(&strip(&std::fs::read_to_string(file).unwrap()));
        let dir = if file
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
        {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        for m in test_mods {
            test_files.insert(dir.join(format!("{m}.rs")));
            test_files.insert(dir.join(&m).join("mod.rs"));
        }
        texts.insert(file.clone(), code);
    }
    let mut out = Vec::new();
    for (file, code) in &texts {
        let module = module_of(src, file);
        // The crate root and the binary (which names the library `clhip::`) are no layer.
        if test_files.contains(file)
            || module.len() == 1 && (module[0] == "lib" || module[0] == "main")
            || binary.contains(&module[0])
        {
            continue;
        }
        for (line, to, text) in paths(code, &module) {
            if to != module[0] && !to.is_empty() && to != "self" {
                out.push(Arrow {
                    from: module[0].clone(),
                    to,
                    file: file
                        .strip_prefix(src.parent().unwrap())
                        .unwrap()
                        .to_path_buf(),
                    line,
                    text,
                });
            }
        }
    }
    out
}

/// Lines naming each forbidden arrow.
fn forbidden(arrows: &[Arrow]) -> Vec<String> {
    let mut out = Vec::new();
    for a in arrows {
        for (from, to, why) in FORBIDDEN {
            if from.contains(&a.from.as_str()) && to.contains(&a.to.as_str()) {
                out.push(format!(
                    "{}:{}: {} -> {} (`{}`): {why}",
                    a.file.display(),
                    a.line,
                    a.from,
                    a.to,
                    a.text
                ));
            }
        }
    }
    out
}

fn concern(module: &str) -> String {
    CONCERNS
        .iter()
        .find(|c| c.contains(&module))
        .map(|c| c.join("+"))
        .unwrap_or_else(|| module.to_string())
}

/// Circles between top-level modules of different concerns: each strongly connected component
/// of the module graph that spans more than one concern, with the arrows that make it.
fn circles(arrows: &[Arrow]) -> Vec<String> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for a in arrows {
        graph.entry(&a.from).or_default().insert(&a.to);
        graph.entry(&a.to).or_default();
    }
    // Reachability closure (the graph has a few dozen nodes).
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(m) = todo.pop() {
            for &n in &graph[m] {
                if seen.insert(n) {
                    todo.push(n);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&str, BTreeSet<&str>> = graph.keys().map(|&m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &m in graph.keys() {
        if done.contains(m) {
            continue;
        }
        let scc: BTreeSet<&str> = graph
            .keys()
            .copied()
            .filter(|&n| n == m || (reachable[m].contains(n) && reachable[n].contains(m)))
            .collect();
        done.extend(scc.iter().copied());
        let concerns: BTreeSet<String> = scc.iter().map(|m| concern(m)).collect();
        if scc.len() > 1 && concerns.len() > 1 {
            let mut lines = vec![format!(
                "circle between concerns {}:",
                concerns.into_iter().collect::<Vec<_>>().join(", ")
            )];
            for a in arrows {
                if scc.contains(a.from.as_str()) && scc.contains(a.to.as_str()) {
                    lines.push(format!(
                        "  {}:{}: {} -> {} (`{}`)",
                        a.file.display(),
                        a.line,
                        a.from,
                        a.to,
                        a.text
                    ));
                }
            }
            out.push(lines.join("\n"));
        }
    }
    out
}

#[test]
fn src_keeps_its_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let arrows = arrows(&src);
    assert!(
        arrows.iter().any(|a| a.from == "ops" && a.to == "paths"),
        "the scan found no arrow it must find (ops -> paths)"
    );
    // A file of a module's directory is that module: src/runner/session.rs is `runner`.
    for (dir, module, to) in [
        ("src/runner/", "runner", "child"),
        ("src/probe/", "probe", "child"),
        ("src/runtimes/hip/", "runtimes", "model"),
    ] {
        assert!(
            arrows
                .iter()
                .any(|a| a.file.starts_with(dir) && a.from == module && a.to == to),
            "the scan found no arrow from a file of {dir} as {module} -> {to}"
        );
    }
    let mut problems = forbidden(&arrows);
    problems.extend(circles(&arrows));
    assert!(
        problems.is_empty(),
        "{} layering violation(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The scan leaves out the binary's modules; a module the library declares too would escape it.
#[test]
fn the_binary_s_modules_are_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let binary = declared_modules(&src.join("main.rs"));
    let library = declared_modules(&src.join("lib.rs"));
    assert!(binary.contains("commands"), "main.rs declares {binary:?}");
    assert!(library.contains("runner"), "lib.rs declares {library:?}");
    let both: Vec<&String> = binary.intersection(&library).collect();
    assert!(
        both.is_empty(),
        "declared by both main.rs and lib.rs, so left out of the scan: {both:?}"
    );
}

#[test]
fn the_scan_sees_paths_only_in_non_test_code() {
    let src = r##"
//! Not this: crate::report
use crate::{model::Case, probe as p};
/* nor crate::report /* nested */ crate::runner */
const S: &str = "crate::report";
const R: &str = r#"crate::report "quoted" "#;
const C: char = '"';
fn f<'a>(x: &'a str) -> &'a str { crate::cases::glob(x) }
#[cfg(test)]
mod tests {
    use crate::report;
}
#[cfg(test)]
mod fixtures;
fn g() { super::gpu::run() }
"##;
    let (code, test_mods) = without_tests(&strip(src));
    assert_eq!(test_mods, ["fixtures"]);
    let module = ["runtimes".to_string(), "cuda".to_string()];
    let found: Vec<(usize, String)> = paths(&code, &module)
        .into_iter()
        .map(|(line, to, _)| (line, to))
        .collect();
    assert_eq!(
        found,
        [
            (3, "model".to_string()),
            (3, "probe".to_string()),
            (8, "cases".to_string()),
            (15, "runtimes".to_string()),
        ]
    );
}

/// A file below a module's directory is that module: `super::` from a room of runner/ stays in
/// the runner, and from runner/mod.rs names a top-level module.
#[test]
fn a_file_of_a_module_directory_is_that_module() {
    let src = Path::new("/x/src");
    let module = |f: &str| module_of(src, &src.join(f));
    assert_eq!(module("runner/session.rs"), ["runner", "session"]);
    assert_eq!(module("runner/mod.rs"), ["runner"]);
    assert_eq!(module("probe/isolation.rs"), ["probe", "isolation"]);
    let to = |code: &str, m: &[String]| -> Vec<String> {
        paths(code, m).into_iter().map(|(_, to, _)| to).collect()
    };
    let code = "use super::control::lock;\nuse crate::child::Tail;\n";
    assert_eq!(to(code, &module("runner/session.rs")), ["runner", "child"]);
    assert_eq!(to(code, &module("runner/mod.rs")), ["control", "child"]);
}

#[test]
fn input_is_below_everything() {
    // Every layer reads user files through it, the runtimes' kernel cache included: any import
    // of the crate there would be a circle, or a runtime reaching above itself.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let up: Vec<String> = arrows(&src)
        .into_iter()
        .filter(|a| a.from == "input")
        .map(|a| format!("{}:{}: `{}`", a.file.display(), a.line, a.text))
        .collect();
    assert!(up.is_empty(), "input imports the crate:\n{}", up.join("\n"));
}

/// Every path a use-tree at the start of `s` names, as its segments: `a::{b, c::{self, d}}` ->
/// `a::b`, `a::c`, `a::c::d` (a `self` segment is dropped: it names its prefix).
fn use_tree(s: &str) -> Vec<Vec<String>> {
    fn tree(c: &[char], i: &mut usize) -> Vec<Vec<String>> {
        let skip = |i: &mut usize| {
            while c.get(*i).is_some_and(|ch| ch.is_whitespace()) {
                *i += 1;
            }
        };
        let mut prefix = Vec::new();
        loop {
            skip(i);
            if c.get(*i) == Some(&'{') {
                *i += 1;
                let mut out = Vec::new();
                loop {
                    skip(i);
                    match c.get(*i) {
                        Some('}') => {
                            *i += 1;
                            break;
                        }
                        Some(',') => *i += 1,
                        None => break,
                        _ => {
                            let before = *i;
                            for rest in tree(c, i) {
                                out.push([prefix.clone(), rest].concat());
                            }
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
                return out;
            }
            let start = *i;
            while c
                .get(*i)
                .is_some_and(|&ch| ch.is_alphanumeric() || ch == '_')
            {
                *i += 1;
            }
            if *i > start {
                let seg: String = c[start..*i].iter().collect();
                if seg != "self" {
                    prefix.push(seg);
                }
            }
            skip(i);
            if c.get(*i) == Some(&':') && c.get(*i + 1) == Some(&':') {
                *i += 2;
            } else {
                return vec![prefix];
            }
        }
    }
    let c: Vec<char> = s.chars().collect();
    tree(&c, &mut 0)
}

/// The file of module `m` (`[runtimes, hip, ffi]` -> src/runtimes/hip/ffi/mod.rs), if any.
fn module_file(src: &Path, m: &[String]) -> Option<PathBuf> {
    let base = m.iter().fold(src.to_path_buf(), |p, s| p.join(s));
    [base.with_extension("rs"), base.join("mod.rs")]
        .into_iter()
        .find(|p| p.is_file())
}

/// File-level arrows inside `src/<top>`: (from, to, line, path text) for every path in non-test
/// code that starts at `crate`, `$crate`, `super`, `self` or a module the file declares, resolved
/// to the deepest module file it names (an item re-exported by a `mod.rs` is that file's).
fn file_arrows(src: &Path, top: &str) -> Vec<(PathBuf, PathBuf, usize, String)> {
    let mut files = Vec::new();
    rust_files(&src.join(top), &mut files);
    files.sort();
    let mut code = BTreeMap::new();
    let mut test_files = BTreeSet::new();
    for file in &files {
        let (text, test_mods) = without_tests(&strip(&std::fs::read_to_string(file).unwrap()));
        let module = module_of(src, file);
        for m in test_mods {
            test_files.extend(module_file(src, &[module.clone(), vec![m]].concat()));
        }
        code.insert(file.clone(), text);
    }
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    for (file, text) in &code {
        if test_files.contains(file) {
            continue;
        }
        let module = module_of(src, file);
        let children: BTreeSet<String> = text
            .split(';')
            .filter_map(|item| {
                let words: Vec<&str> = item.split_whitespace().collect();
                match words.as_slice() {
                    [.., "mod", name] if name.chars().all(ident) => Some(name.to_string()),
                    _ => None,
                }
            })
            .collect();
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        for (k, &(at, ch)) in chars.iter().enumerate() {
            if !ident(ch) || k > 0 && (ident(chars[k - 1].1) || chars[k - 1].1 == ':') {
                continue;
            }
            let head: String = text[at..].chars().take_while(|&c| ident(c)).collect();
            let rest = &text[at + head.len()..];
            if !rest.starts_with("::") {
                continue;
            }
            let base: Vec<String> = match head.as_str() {
                "crate" => Vec::new(),
                "super" => module[..module.len().saturating_sub(1)].to_vec(),
                "self" => module.clone(),
                h if children.contains(h) => [module.clone(), vec![h.to_string()]].concat(),
                _ => continue,
            };
            let line = text[..at].matches('\n').count() + 1;
            let shown: String = text[at..]
                .chars()
                .take_while(|&c| c != ';' && c != '(' && c != '\n')
                .collect();
            for mut segs in use_tree(&rest[2..]) {
                let mut m = base.clone();
                while segs.first().is_some_and(|s| s == "super") {
                    m.pop();
                    segs.remove(0);
                }
                for s in segs {
                    m.push(s);
                    if module_file(src, &m).is_none() {
                        m.pop();
                        break;
                    }
                }
                if let Some(to) = module_file(src, &m)
                    && to != *file
                    && to.starts_with(src.join(top))
                {
                    let arrow = (file.clone(), to, line, shown.trim().to_string());
                    if !out.contains(&arrow) {
                        out.push(arrow);
                    }
                }
            }
        }
    }
    out
}

/// Each circle among the files of `arrows` (a set of files that reach one another), with the
/// arrows that make it.
fn file_circles(src: &Path, arrows: &[(PathBuf, PathBuf, usize, String)]) -> Vec<String> {
    let mut graph: BTreeMap<&Path, BTreeSet<&Path>> = BTreeMap::new();
    for (from, to, ..) in arrows {
        graph.entry(from).or_default().insert(to);
        graph.entry(to).or_default();
    }
    let reach = |from: &Path| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(f) = todo.pop() {
            for &n in &graph[f] {
                if seen.insert(n) {
                    todo.push(n);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&Path, BTreeSet<&Path>> =
        graph.keys().map(|&f| (f, reach(f))).collect();
    let name = |p: &Path| p.strip_prefix(src).unwrap().display().to_string();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &f in graph.keys() {
        if done.contains(f) || !reachable[f].contains(f) {
            continue;
        }
        let circle: BTreeSet<&Path> = graph
            .keys()
            .copied()
            .filter(|&g| reachable[f].contains(g) && reachable[g].contains(f))
            .collect();
        done.extend(circle.iter().copied());
        let mut lines = vec![format!(
            "circle of {} files: {}",
            circle.len(),
            circle
                .iter()
                .map(|p| name(p))
                .collect::<Vec<_>>()
                .join(", ")
        )];
        for (from, to, line, text) in arrows {
            if circle.contains(from.as_path()) && circle.contains(to.as_path()) {
                lines.push(format!(
                    "  {}:{line}: -> {} (`{text}`)",
                    name(from),
                    name(to)
                ));
            }
        }
        out.push(lines.join("\n"));
    }
    out
}

/// The circles among the files of `src/<top>`, after checking that the scan finds each arrow
/// of `must_see` (from, to: file paths below src/), so that a scan finding nothing passes
/// nothing.
fn circles_among_files_of(top: &str, must_see: &[(&str, &str)]) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let arrows = file_arrows(&src, top);
    for (from, to) in must_see {
        assert!(
            arrows
                .iter()
                .any(|(f, t, ..)| f.ends_with(from) && t.ends_with(to)),
            "the scan found no arrow {from} -> {to}: {arrows:#?}"
        );
    }
    file_circles(&src, &arrows)
}

/// Inside runtimes/, files form layers: no file reaches itself through the paths it names (a
/// `mod.rs` that re-exports a child and a child that imports from its `mod.rs` make a circle).
#[test]
fn runtimes_files_form_layers() {
    // Arrows the scan must find: a `use` group over lines, a re-export of a declared child, an
    // inline `crate::` path.
    let circles = circles_among_files_of(
        "runtimes",
        &[
            ("hip/ffi/loader.rs", "hip/ffi/hip.rs"),
            ("hip/mod.rs", "hip/probe.rs"),
            ("gpu.rs", "host.rs"),
        ],
    );
    assert!(
        circles.is_empty(),
        "{} circle(s) between files of src/runtimes:\n{}",
        circles.len(),
        circles.join("\n")
    );
}

/// The runner's and the probe's rooms form layers too: each `mod.rs` is the entry that names
/// its rooms, and a room imports only the rooms below it (a sibling by its own path, never
/// through what `mod.rs` re-exports).
#[test]
fn runner_and_probe_files_form_layers() {
    for (top, must_see) in [
        (
            "runner",
            &[
                ("runner/mod.rs", "runner/schedule.rs"),
                ("runner/session.rs", "runner/worker_process.rs"),
                ("runner/death.rs", "runner/session.rs"),
            ][..],
        ),
        (
            "probe",
            &[
                ("probe/mod.rs", "probe/records.rs"),
                ("probe/installs.rs", "probe/isolation.rs"),
                ("probe/render.rs", "probe/records.rs"),
            ][..],
        ),
    ] {
        let circles = circles_among_files_of(top, must_see);
        assert!(
            circles.is_empty(),
            "{} circle(s) between files of src/{top}:\n{}",
            circles.len(),
            circles.join("\n")
        );
    }
}

#[test]
fn a_use_tree_names_each_path() {
    let names = |s: &str| -> Vec<String> { use_tree(s).iter().map(|p| p.join("::")).collect() };
    assert_eq!(names("a::b;"), ["a::b"]);
    assert_eq!(
        names("a::{b, c::{self, d},\n    e}"),
        ["a::b", "a::c", "a::c::d", "a::e"]
    );
    assert_eq!(names("{x, y::z}"), ["x", "y::z"]);
}

/// A room a driver engineer can read in one sitting: no source file of src/ over 1,000 lines,
/// and main.rs (the command line only) at most 200. A test module's own file (`tests.rs`, loaded
/// by `#[cfg(test)] mod tests;`) counts apart; tests still inline count with their file.
#[test]
fn every_room_is_small_and_main_is_the_command_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut too_long = Vec::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let lines = std::fs::read_to_string(file).unwrap().lines().count();
        let limit = if file.ends_with("src/main.rs") {
            200
        } else {
            1000
        };
        if lines > limit {
            too_long.push(format!(
                "{} has {lines} lines (at most {limit})",
                file.display()
            ));
        }
    }
    assert!(too_long.is_empty(), "{}", too_long.join("\n"));
}
