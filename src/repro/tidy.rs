//! The last pass over a generated program's text: what a case's steps left that a reader
//! would not write by hand (a sync repeated with nothing between, declarations never used, a
//! helper function nothing calls) is taken out, so that a reproducer is as short as its case.

/// A sync statement repeated with nothing between (a release's wait right after the last
/// step's) waits for nothing more: the second is left out. One after a handover's comment
/// stays, so that every handover shows the sync the case makes.
pub(super) fn collapse_repeated_syncs(text: &str) -> String {
    let syncs = ["peer_synchronize();", "CHECK(CL, clFinish(queue));"];
    let mut out = String::new();
    let mut last_code = "";
    for line in text.lines() {
        let t = line.trim();
        if syncs.contains(&t) && t == last_code {
            continue;
        }
        if !t.starts_with("puts(") {
            last_code = t;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// How often `name` occurs in `text` as a whole identifier (a trailing `(` may end it).
fn occurrences(text: &str, name: &str) -> usize {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name)
        .filter(|&(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            !before.is_some_and(ident) && (name.ends_with('(') || !after.is_some_and(ident))
        })
        .count()
}

/// The declarations `body` uses: a plain `T x;` never named is dropped, and one only ever
/// assigned (`x = f(...);`, an event nothing waits on) loses its assignment too.
pub(super) fn drop_unused(body: &mut String, decls: &[String]) -> Vec<String> {
    let mut kept = Vec::new();
    for d in decls {
        let plain = d
            .strip_suffix(';')
            .filter(|d| !d.contains(['=', ',', '(']))
            .and_then(|d| d.rsplit_once(' '))
            .map(|(_, name)| name.trim_start_matches('*').to_string());
        let Some(name) = plain else {
            kept.push(d.clone());
            continue;
        };
        let assignment = format!("    {name} = ");
        match occurrences(body, &name) {
            0 => {}
            1 if body.contains(&assignment) => *body = body.replacen(&assignment, "    ", 1),
            _ => kept.push(d.clone()),
        }
    }
    kept
}

/// `T a;` and `T b;` as `T a, b;`, in first-seen order; other declarations as they are.
pub(super) fn merge_declarations(decls: &[String]) -> Vec<String> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    for d in decls {
        let plain = d.strip_suffix(';').and_then(|d| {
            let (ty, name) = d.rsplit_once(' ')?;
            let ok = !d.contains('=') && !d.contains(',') && !d.contains('(');
            ok.then(|| (ty.to_string(), name.to_string()))
        });
        match plain {
            Some((ty, name)) => {
                // `void *x` splits as (`void`, `*x`): the star stays with the name.
                match out
                    .iter_mut()
                    .find(|(t, _)| t.as_deref() == Some(ty.as_str()))
                {
                    Some((_, names)) => names.push_str(&format!(", {name}")),
                    None => out.push((Some(ty), name)),
                }
            }
            None => out.push((None, d.clone())),
        }
    }
    out.into_iter()
        .map(|(ty, rest)| match ty {
            Some(ty) => format!("{ty} {rest};"),
            None => rest,
        })
        .collect()
}

/// `program` without the `static` functions nothing calls (a section holds a few; a case
/// calls what its steps need), each with the comment above it, until none is left.
pub(super) fn drop_unused_functions(program: &str) -> String {
    let mut lines: Vec<&str> = program.lines().collect();
    loop {
        let text = lines.join("\n");
        let mut cut = None;
        for (at, line) in lines.iter().enumerate() {
            let Some(head) = line.strip_prefix("static ").filter(|l| l.contains('(')) else {
                continue;
            };
            let before = head.split('(').next().unwrap_or_default();
            let name = before
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default();
            // Called (or named, as `&f`) somewhere besides its own definition.
            let calls =
                occurrences(&text, &format!("{name}(")) + text.matches(&format!("&{name}")).count();
            if name.is_empty() || calls > 1 {
                continue;
            }
            // From its comment (the lines above, back to a blank line or the end of the last
            // item) to its closing brace at the start of a line.
            let mut start = at;
            while start > 0 && {
                let prev = lines[start - 1];
                prev.starts_with("/*") || prev.starts_with("   ") && !prev.ends_with('}')
            } {
                start -= 1;
            }
            let end = if line.trim_end().ends_with('}') {
                at
            } else {
                match lines[at..].iter().position(|l| *l == "}") {
                    Some(k) => at + k,
                    None => continue,
                }
            };
            cut = Some((start, end));
            break;
        }
        match cut {
            Some((start, end)) => {
                lines.drain(start..=end);
                if lines.get(start).is_some_and(|l| l.is_empty())
                    && start > 0
                    && lines[start - 1].is_empty()
                {
                    lines.remove(start);
                }
            }
            None => break,
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}
