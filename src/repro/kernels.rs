//! clhip's own kernel sources (`kernels/`), trimmed to the kernels a case launches and the
//! helpers they call, comments dropped, as C string literals.

const CL_FILES: [&str; 3] = [
    include_str!("../../kernels/pattern.cl"),
    include_str!("../../kernels/elementwise.cl"),
    include_str!("../../kernels/fft.cl"),
];

const HIP_PRELUDE: &str = include_str!("../../kernels/prelude.hip");
const HIP_FILES: [&str; 2] = [
    include_str!("../../kernels/pattern.hip"),
    include_str!("../../kernels/elementwise.hip"),
];

/// `src` without `//` and `/* */` comments; string literals (prelude.hip's `#error` text holds
/// a `/*`) are kept whole.
fn strip_comments(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('"') {
            let end = after.find('"').map_or(after.len(), |i| i + 1);
            out.push('"');
            out.push_str(&after[..end]);
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// A top-level item of a kernel file: a function (named by the identifier before its first
/// `(`) or a preprocessor line (no name).
struct Item {
    name: Option<String>,
    text: String,
}

fn items(src: &str) -> Vec<Item> {
    let src = strip_comments(src);
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for line in src.lines() {
        let trimmed = line.trim_end();
        if depth == 0 && current.trim().is_empty() {
            current.clear();
            if trimmed.trim_start().starts_with('#') {
                out.push(Item {
                    name: None,
                    text: trimmed.to_string(),
                });
                continue;
            }
            if trimmed.trim().is_empty() {
                continue;
            }
        }
        current.push_str(trimmed);
        current.push('\n');
        for c in trimmed.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        let closed = depth == 0 && (trimmed.ends_with('}') || trimmed.ends_with(';'));
        if closed {
            let head = current.split('(').next().unwrap_or_default();
            let name = head
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .rfind(|w| !w.is_empty())
                .map(str::to_string);
            out.push(Item {
                name,
                text: std::mem::take(&mut current),
            });
        }
    }
    out
}

/// The items of `files` named in `wanted`, the helpers they call (transitively), and every
/// preprocessor line when `keep_preprocessor`, in source order.
fn select(files: &[&str], wanted: &[&str], keep_preprocessor: bool) -> String {
    let all: Vec<Item> = files.iter().flat_map(|f| items(f)).collect();
    let mut keep: Vec<bool> = all
        .iter()
        .map(|i| match &i.name {
            Some(n) => wanted.contains(&n.as_str()),
            None => keep_preprocessor,
        })
        .collect();
    loop {
        let mut grew = false;
        for (k, item) in all.iter().enumerate() {
            let Some(name) = &item.name else { continue };
            if keep[k] {
                continue;
            }
            let called = format!("{name}(");
            if all
                .iter()
                .zip(&keep)
                .any(|(other, &kept)| kept && other.text.contains(&called))
            {
                keep[k] = true;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    let mut out = String::new();
    for (item, kept) in all.iter().zip(keep) {
        if kept {
            out.push_str(&item.text);
            if !item.text.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

/// The OpenCL C of kernels `names` (kernels/*.cl).
pub fn opencl(names: &[&str]) -> String {
    select(&CL_FILES, names, false)
}

/// The HIP/CUDA C++ of kernels `names` (kernels/*.hip behind prelude.hip), for NVRTC or
/// hiprtc.
pub fn peer(names: &[&str]) -> String {
    let mut files = vec![HIP_PRELUDE];
    files.extend(HIP_FILES);
    // The prelude's items (its guard, macro, typedefs and clhip_gid) are every kernel's.
    let mut wanted = names.to_vec();
    wanted.extend(["clhip_gid", "clhip_u32", "clhip_u64"]);
    // The prelude's guard against a compiler other than NVRTC or hiprtc has nothing to guard
    // in a reproducer, which hands the text to one of them.
    select(&files, &wanted, true)
        .lines()
        .filter(|l| !l.starts_with("#if") && !l.starts_with("#error") && !l.starts_with("#endif"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `text` as a C string literal, one source line per literal line.
pub fn c_string(name: &str, text: &str) -> String {
    let mut out = format!("static const char *{name} =\n");
    for line in text.lines() {
        out.push_str(&format!(
            "    {}\n",
            crate::escape::c_string(&format!("{line}\n"))
        ));
    }
    out.push_str("    ;\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_comes_with_its_helpers_and_nothing_else() {
        let src = opencl(&["pattern_fill"]);
        assert!(src.contains("__kernel void pattern_fill("), "{src}");
        assert!(src.contains("inline uint clhip_pattern_word("), "{src}");
        assert!(!src.contains("pattern_check"), "{src}");
        assert!(!src.contains("//") && !src.contains("/*"), "{src}");
        let fft = opencl(&["fft_radix8", "ccopy"]);
        assert!(
            fft.contains("clhip_dft4(") && fft.contains("clhip_cmul("),
            "{fft}"
        );
        assert!(
            !fft.contains("fft_radix2") && !fft.contains("cadd"),
            "{fft}"
        );
    }

    #[test]
    fn cuda_kernels_keep_the_prelude() {
        let src = peer(&["clhip_pattern_fill"]);
        assert!(
            src.contains("#define CLHIP_KERNEL extern \"C\" __global__"),
            "{src}"
        );
        assert!(
            src.contains("typedef unsigned long long clhip_u64;"),
            "{src}"
        );
        assert!(src.contains("clhip_gid()"), "{src}");
        assert!(src.contains("clhip_pattern_word("), "{src}");
        assert!(!src.contains("clhip_pattern_check"), "{src}");
        assert!(!src.contains("#error") && !src.contains("#if"), "{src}");
    }
}
