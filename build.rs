//! Makes `PathKind` and the room dispatch from the rooms themselves, so that a new path is one
//! file of src/paths/ plus rows in cases/ (docs/paths.md, "Adding a path").
//!
//! Each room, `src/paths/<family>.rs`, declares the paths it implements in one
//! `declare_paths! { ... }` block, which is also Rust: paths/mod.rs's macro checks the same
//! block again at compile time. cases/paths.toml gives the paths' order. Written to OUT_DIR:
//!
//! - `path_kind.rs`, included by model.rs: the enum (names, docs, order) and the facts the
//!   declarations state, which the model needs and cannot ask the rooms for (it sits below
//!   them);
//! - `rooms.rs`, included by paths/mod.rs: one `mod` per room and `room()`.
//!
//! A declaration this script cannot read fails the build, naming its file and line.
//!
//! It also records the commit this is built from (`CLHIP_GIT_COMMIT`, `CLHIP_GIT_DIRTY`: see
//! `build_identity`), and tells the unit tests what this machine has (`test_gates`): a unit test runs under
//! Rust's own harness, which can report a test ignored only if it is marked so when built, so
//! the tests that need a driver are marked `ignore` with the reason where its files are absent.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One path as its room declares it.
struct Declared {
    variant: String,
    name: String,
    doc: Vec<String>,
    /// The room's module (its file stem) and absolute file.
    module: String,
    file: String,
    /// The room's `hands_over_only_by` sync (a `SyncMode` variant), if any.
    only_by: Option<String>,
    finding: bool,
    /// `src/paths/<file>:<line>`, for errors.
    at: String,
}

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    // A new room, an edited declaration or a reordered list all change what is generated.
    println!("cargo::rerun-if-changed=cases/paths.toml");
    println!("cargo::rerun-if-changed=src/paths");
    test_gates();
    build_identity(Path::new(&root));
    match generate(Path::new(&root)) {
        Ok((kinds, rooms)) => {
            let write = |name: &str, text: String| {
                let file = Path::new(&out).join(name);
                std::fs::write(&file, text)
                    .unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
            };
            write("path_kind.rs", kinds);
            write("rooms.rs", rooms);
        }
        Err(errors) => {
            for e in errors {
                println!("cargo::error={e}");
            }
        }
    }
}

/// The two generated files, or every error found.
fn generate(root: &Path) -> Result<(String, String), Vec<String>> {
    let mut errors = Vec::new();
    let mut declared: BTreeMap<String, Declared> = BTreeMap::new();
    let dir = root.join("src/paths");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| vec![format!("src/paths: {e}")])?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs"))
        .collect();
    files.sort();
    for file in files {
        match read_room(&file) {
            Ok(paths) => {
                for p in paths {
                    if let Some(first) = declared.values().find(|d| d.variant == p.variant) {
                        errors.push(format!(
                            "{}: `{}` is declared at {} too",
                            p.at, p.variant, first.at
                        ));
                    } else if let Some(first) = declared.get(&p.name) {
                        errors.push(format!(
                            "{}: `{}` is declared at {} too",
                            p.at, p.name, first.at
                        ));
                    } else {
                        declared.insert(p.name.clone(), p);
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
    let order = read_order(root).map_err(|e| vec![e])?;
    let mut kinds = Vec::new();
    for name in &order {
        match declared.remove(name) {
            Some(d) => kinds.push(d),
            None if kinds.iter().any(|d| &d.name == name) => {
                errors.push(format!("cases/paths.toml: `{name}` is listed twice"));
            }
            None => errors.push(format!(
                "cases/paths.toml: `{name}` is declared by no room of src/paths/"
            )),
        }
    }
    for d in declared.values() {
        errors.push(format!(
            "{}: path `{}` is not in cases/paths.toml's order (add it where its rows sort)",
            d.at, d.name
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((path_kind(&kinds), rooms(&kinds)))
}

/// The `order` list of cases/paths.toml.
fn read_order(root: &Path) -> Result<Vec<String>, String> {
    let file = "cases/paths.toml";
    let text = std::fs::read_to_string(root.join(file)).map_err(|e| format!("{file}: {e}"))?;
    let table: toml::Table = text.parse().map_err(|e| format!("{file}: {e}"))?;
    let list = table.get("order").and_then(|v| v.as_array());
    let names = list.map(|l| l.iter().map(|v| v.as_str().map(str::to_string)).collect());
    names
        .flatten()
        .ok_or_else(|| format!("{file}: expected `order = [\"copy\", ...]`, a list of path names"))
}

/// A room's `declare_paths!` block: none in a file that is no room (c.rs, buffer.rs).
fn read_room(file: &Path) -> Result<Vec<Declared>, String> {
    let rel = format!(
        "src/paths/{}",
        file.file_name().unwrap_or_default().to_string_lossy()
    );
    let text = std::fs::read_to_string(file).map_err(|e| format!("{rel}: {e}"))?;
    let starts = |l: &str| l.trim_start().starts_with("declare_paths!");
    let mut lines = text.lines().enumerate();
    let Some((start, _)) = lines.by_ref().find(|(_, l)| starts(l)) else {
        return Ok(Vec::new());
    };
    let module = file
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let (mut room, mut only_by, mut finding) = (false, None, false);
    let (mut doc, mut paths) = (Vec::new(), Vec::<Declared>::new());
    for (i, line) in lines.by_ref() {
        let at = format!("{rel}:{}", i + 1);
        let l = line.trim();
        if l == "}" {
            if !room || paths.is_empty() {
                return Err(format!(
                    "{at}: declare_paths! needs `room: Type;` and a path"
                ));
            }
            break;
        }
        if let Some(d) = l.strip_prefix("///") {
            doc.push(d.to_string());
        } else if l.is_empty() || l.starts_with("//") {
        } else if let Some(r) = l.strip_prefix("room:").and_then(|r| r.strip_suffix(';')) {
            ident(r.trim(), &at)?;
            room = true;
        } else if let Some(s) = l
            .strip_prefix("hands_over_only_by:")
            .and_then(|s| s.strip_suffix(';'))
        {
            ident(s.trim(), &at)?;
            only_by = Some(s.trim().to_string());
        } else if l == "pass_note_is_a_finding;" {
            finding = true;
        } else if let Some((variant, name)) = l.strip_suffix(',').and_then(|e| e.split_once("=>")) {
            let (variant, name) = (variant.trim(), name.trim());
            let Some(name) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) else {
                return Err(format!(
                    "{at}: the case-id name `{name}` must be a string literal"
                ));
            };
            ident(variant, &at)?;
            if doc.is_empty() {
                return Err(format!(
                    "{at}: path `{name}` needs a `///` line saying what it is"
                ));
            }
            paths.push(Declared {
                variant: variant.into(),
                name: name.into(),
                doc: std::mem::take(&mut doc),
                module: module.clone(),
                file: file.display().to_string(),
                only_by: None,
                finding: false,
                at,
            });
        } else {
            return Err(format!(
                "{at}: declare_paths! cannot read `{l}` (expected `room: Type;`, \
                 `hands_over_only_by: SyncVariant;`, `pass_note_is_a_finding;`, `/// doc` or \
                 `Variant => \"case-id-name\",`)"
            ));
        }
    }
    if !room {
        return Err(format!(
            "{rel}:{}: declare_paths! is not closed by a `}}` line",
            start + 1
        ));
    }
    if lines.any(|(_, l)| starts(l)) {
        return Err(format!("{rel}: one declare_paths! block a room"));
    }
    for p in &mut paths {
        (p.only_by, p.finding) = (only_by.clone(), finding);
    }
    Ok(paths)
}

/// `s` must be a plain Rust identifier: the generated code pastes it as one.
fn ident(s: &str, at: &str) -> Result<(), String> {
    let mut chars = s.chars();
    let first = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(format!("{at}: `{s}` is no Rust identifier"))
    }
}

/// The enum, through model.rs's `named_enum!`, and the facts of the declarations.
fn path_kind(kinds: &[Declared]) -> String {
    let mut s = String::from(
        "// Generated by build.rs from src/paths/*.rs and cases/paths.toml.\nnamed_enum! {\n    \
         /// How memory owned by one API becomes addressable by the other: each declared by its\n    \
         /// room in src/paths/, in the order of cases/paths.toml.\n    pub enum PathKind {\n",
    );
    for d in kinds {
        for line in &d.doc {
            let _ = writeln!(s, "        ///{line}");
        }
        let _ = writeln!(s, "        {} => {:?},", d.variant, d.name);
    }
    s.push_str("    }\n}\n\nimpl PathKind {\n");
    s.push_str(
        "    /// The one sync by which OpenCL may hand this path's memory over, where its room\n    \
         /// declares one (`hands_over_only_by`): `map` for CL_MEM_USE_HOST_PTR, `acquire-release`\n    \
         /// for imported memory. `finish` without it breaks that rule on purpose.\n    \
         pub fn only_handed_over_by(self) -> Option<SyncMode> {\n        match self {\n",
    );
    for d in kinds {
        let sync = d
            .only_by
            .as_ref()
            .map_or("None".into(), |v| format!("Some(SyncMode::{v})"));
        let _ = writeln!(s, "            PathKind::{} => {sync},", d.variant);
    }
    s.push_str(
        "        }\n    }\n\n    \
         /// Whether a pass on this path carries a finding in its note (where an address came\n    \
         /// from), which reports show beside the measurements.\n    \
         pub fn pass_note_is_a_finding(self) -> bool {\n        match self {\n",
    );
    for d in kinds {
        let _ = writeln!(s, "            PathKind::{} => {},", d.variant, d.finding);
    }
    s.push_str("        }\n    }\n}\n");
    s
}

/// The rooms' modules and the dispatch from a path to its room.
fn rooms(kinds: &[Declared]) -> String {
    let mut s =
        String::from("// Generated by build.rs from src/paths/*.rs and cases/paths.toml.\n");
    let modules: BTreeMap<&str, &str> = kinds
        .iter()
        .map(|d| (d.module.as_str(), d.file.as_str()))
        .collect();
    for (module, file) in modules {
        let _ = writeln!(s, "#[path = {file:?}]\nmod {module};");
    }
    s.push_str("\n/// The room of `path`.\npub(crate) fn room(path: PathKind) -> &'static dyn Path {\n    match path {\n");
    for d in kinds {
        let _ = writeln!(s, "        PathKind::{} => {}::ROOM,", d.variant, d.module);
    }
    s.push_str("    }\n}\n");
    s
}

/// Sets `clhip_test_opencl`, `clhip_test_cuda`, `clhip_test_vulkan` and `clhip_test_hip` where
/// this machine has an OpenCL ICD, libcuda, a Vulkan ICD or libamdhip64, and `clhip_vulkan_loader` where it has the Vulkan
/// loader: the unit tests that need one are marked `ignore`, with the reason, without it. A
/// driver whose files are here but which answers nothing then fails its tests rather than
/// skipping them. `CLHIP_REQUIRE_OPENCL=1` (`_CUDA`, `_VULKAN`, `_HIP`) sets the gate regardless, so a
/// machine that must have the driver fails the tests that need it.
fn test_gates() {
    let gates = [
        "clhip_test_opencl",
        "clhip_test_cuda",
        "clhip_test_vulkan",
        "clhip_vulkan_loader",
        "clhip_test_hip",
    ];
    for gate in gates {
        println!("cargo::rustc-check-cfg=cfg({gate})");
    }
    for var in [
        "CLHIP_REQUIRE_OPENCL",
        "CLHIP_REQUIRE_CUDA",
        "CLHIP_REQUIRE_VULKAN",
        "CLHIP_REQUIRE_HIP",
        "ROCM_PATH",
        "OCL_ICD_VENDORS",
        "OCL_ICD_FILENAMES",
        "VK_ICD_FILENAMES",
        "VK_DRIVER_FILES",
        "LD_LIBRARY_PATH",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let required = |var: &str| std::env::var(var).is_ok_and(|v| v == "1");
    let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
    let opencl_vendors = std::env::var("OCL_ICD_VENDORS").unwrap_or("/etc/OpenCL/vendors".into());
    let opencl = required("CLHIP_REQUIRE_OPENCL")
        || set("OCL_ICD_FILENAMES")
        || files_ending(&[opencl_vendors.as_str()], ".icd");
    let vulkan_icds = [
        "/usr/share/vulkan/icd.d",
        "/usr/local/share/vulkan/icd.d",
        "/etc/vulkan/icd.d",
    ];
    let vulkan = required("CLHIP_REQUIRE_VULKAN")
        || set("VK_ICD_FILENAMES")
        || set("VK_DRIVER_FILES")
        || files_ending(&vulkan_icds, ".json");
    let library_dirs = library_dirs();
    let has_library = |names: &[&str]| {
        library_dirs
            .iter()
            .any(|d| names.iter().any(|n| Path::new(d).join(n).exists()))
    };
    let cuda = required("CLHIP_REQUIRE_CUDA") || has_library(&["libcuda.so.1", "libcuda.so"]);
    let loader = has_library(&["libvulkan.so.1", "libvulkan.so"]);
    let rocm = std::env::var("ROCM_PATH").unwrap_or("/opt/rocm".into());
    let hip = required("CLHIP_REQUIRE_HIP")
        || has_library(&["libamdhip64.so", "libamdhip64.so.5", "libamdhip64.so.6"])
        || Path::new(&rocm).join("lib/libamdhip64.so").exists();
    for (gate, on) in gates.iter().zip([opencl, cuda, vulkan, loader, hip]) {
        if on {
            println!("cargo::rustc-cfg={gate}");
        }
    }
}

/// Whether a directory of `dirs` holds a file named `*suffix`; each directory that exists is
/// watched, so that installing a driver rebuilds with its tests on.
fn files_ending(dirs: &[&str], suffix: &str) -> bool {
    let mut found = false;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        println!("cargo::rerun-if-changed={dir}");
        found |= entries
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with(suffix));
    }
    found
}

/// The directories the dynamic loader searches: LD_LIBRARY_PATH, those ld.so.conf.d names, and
/// the usual system ones.
fn library_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    if let Ok(entries) = std::fs::read_dir("/etc/ld.so.conf.d") {
        for e in entries.filter_map(Result::ok) {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            dirs.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| l.starts_with('/'))
                    .map(str::to_string),
            );
        }
    }
    dirs.extend(
        [
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/lib/wsl/lib",
        ]
        .map(str::to_string),
    );
    dirs
}

/// Sets `CLHIP_GIT_COMMIT` (the commit checked out, or `unknown` outside a git work tree or
/// without git, as in a source tarball) and `CLHIP_GIT_DIRTY` (`true` where tracked files differ
/// from it, `false`, or `unknown`), which `--version` and every results file carry.
fn build_identity(root: &Path) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
    let dirty = match commit {
        Some(_) => git(&["status", "--porcelain", "--untracked-files=no"])
            .map_or("unknown", |s| if s.is_empty() { "false" } else { "true" }),
        None => "unknown",
    };
    println!(
        "cargo::rustc-env=CLHIP_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo::rustc-env=CLHIP_GIT_DIRTY={dirty}");
    // A new commit or a change to the index or the checkout changes both. Edits to tracked
    // files the build reads are seen through their own paths; the rest of the tree (docs/)
    // does not change the binary, and a stale `dirty` there is the price of not rebuilding.
    for what in ["--git-dir", "--git-common-dir"] {
        if let Some(dir) = git(&["rev-parse", what]) {
            let dir = root.join(dir);
            for f in ["HEAD", "index", "packed-refs", "refs/heads"] {
                if dir.join(f).exists() {
                    println!("cargo::rerun-if-changed={}", dir.join(f).display());
                }
            }
        }
    }
    for f in [
        "src",
        "build.rs",
        "Cargo.toml",
        "Cargo.lock",
        "cases",
        "kernels",
    ] {
        if root.join(f).exists() {
            println!("cargo::rerun-if-changed={f}");
        }
    }
}
