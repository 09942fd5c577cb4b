//! Where results go. Every output path is checked before the first case runs, so a bad path
//! never costs a run; writing never destroys anything it should not: a device node is written
//! in place (`--json /dev/null` stays a device), a symbolic link is written through (the link
//! stays a link), a regular file is replaced through a short-named temporary sibling and a
//! rename (so a crash mid-write leaves the old file whole), and no output may be another output
//! or one of the run's inputs.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, bail};
use nix::fcntl::{Flock, FlockArg};

/// An output path, resolved and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As the user gave it, for messages.
    pub given: PathBuf,
    /// What is written: the path itself, or the file a symbolic link leads to.
    pub path: PathBuf,
    /// A device node, FIFO or similar: written in place, never renamed over.
    pub special: bool,
}

/// [`check`] for an output that was asked for, and nothing for one that was not.
pub fn check_given(what: &str, given: Option<&Path>) -> anyhow::Result<Option<Target>> {
    given.map(|p| check(what, p)).transpose()
}

/// Resolves and checks one output path: not a directory, not a socket, its directory exists
/// (or is created) and takes a new file. `what` names the option in errors (`--json`).
pub fn check(what: &str, given: &Path) -> anyhow::Result<Target> {
    if given.as_os_str().is_empty() {
        bail!("{what}: an empty path");
    }
    if given.as_os_str().to_string_lossy().ends_with('/') {
        bail!("{what} {}: names a directory, not a file", given.display());
    }
    let path = match std::fs::symlink_metadata(given) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(given).with_context(|| {
            format!(
                "{what} {}: a symbolic link whose target cannot be resolved",
                given.display()
            )
        })?,
        _ => given.to_path_buf(),
    };
    let special = match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => bail!("{what} {}: is a directory", given.display()),
        Ok(m) if m.file_type().is_socket() => {
            bail!("{what} {}: is a socket, not a file", given.display())
        }
        // Opening a FIFO for writing waits for a reader, forever if none comes: the results
        // of a whole run would hang on it. Write a file and read that instead.
        Ok(m) if m.file_type().is_fifo() => bail!(
            "{what} {}: is a FIFO; results go to a file (or a device such as /dev/null)",
            given.display()
        ),
        Ok(m) => !m.is_file(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e).with_context(|| format!("{what} {}", given.display())),
    };
    if !special {
        let dir = parent_dir(&path);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("{what} {}: creating {}", given.display(), dir.display()))?;
        // A file the run could not create at the end would lose the whole run: try now.
        let probe = temp_name(&dir);
        File::create(&probe)
            .and_then(|_| std::fs::remove_file(&probe))
            .with_context(|| {
                format!(
                    "{what} {}: cannot create files in {}",
                    given.display(),
                    dir.display()
                )
            })?;
    }
    Ok(Target {
        given: given.to_path_buf(),
        path,
        special,
    })
}

/// Refuses an output that is another output or an input (`--json` over `--cases`), by
/// device and inode where the file exists and by resolved path where it does not. Character
/// devices may repeat: two outputs to /dev/null destroy nothing.
pub fn refuse_collisions(
    outputs: &[(&str, &Target)],
    inputs: &[(&str, &Path)],
) -> anyhow::Result<()> {
    for (i, (what, t)) in outputs.iter().enumerate() {
        if is_char_device(&t.path) {
            continue;
        }
        for (other, u) in &outputs[..i] {
            if same_file(&t.path, &u.path) {
                bail!(
                    "{what} {} and {other} {} are the same file: one would overwrite the other",
                    t.given.display(),
                    u.given.display()
                );
            }
        }
        for (input, p) in inputs {
            if same_file(&t.path, p) {
                bail!(
                    "{what} {} is the {input} file {}: writing it would destroy the run's input",
                    t.given.display(),
                    p.display()
                );
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to `target`: in place for a special file, else through a temporary sibling
/// and a rename.
pub fn write(target: &Target, bytes: &[u8]) -> anyhow::Result<()> {
    if target.special {
        let mut f = OpenOptions::new()
            .write(true)
            .open(&target.path)
            .with_context(|| format!("opening {}", target.path.display()))?;
        return f
            .write_all(bytes)
            .and_then(|()| f.flush())
            .with_context(|| format!("writing {}", target.path.display()));
    }
    let tmp = temp_name(&parent_dir(&target.path));
    let result = (|| {
        let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &target.path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), target.path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A short hidden name in `dir`, whatever the length of the output's own name (a name near
/// the file system's 255-byte limit must not make a longer temporary one).
fn temp_name(dir: &Path) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".clhip-{}-{n}.tmp", std::process::id()))
}

fn is_char_device(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => absolute(a) == absolute(b),
    }
}

/// `path` made absolute with its directory resolved, for files that do not exist yet.
fn absolute(path: &Path) -> PathBuf {
    let dir = std::fs::canonicalize(parent_dir(path)).unwrap_or_else(|_| parent_dir(path));
    match path.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    }
}

/// The results of a run as it goes: one JSON line per finished case, after a header line,
/// flushed as each lands, in `NAME.partial` beside a regular-file target. A runner that dies
/// loses no finished case, and the complete results file is not replaced by a partial one. On
/// a clean end (the full results written) it is removed.
pub struct Journal {
    path: PathBuf,
    /// Locked for as long as the run holds it.
    file: Flock<File>,
}

/// The first line of a journal.
pub const JOURNAL_SCHEMA: &str = "clhip-journal/1";

impl Journal {
    /// Starts the journal of `target` with `header` (a JSON value with a `schema` field of
    /// [`JOURNAL_SCHEMA`]); `None` for a special-file target, which keeps no partial file. The
    /// journal is locked for the run: a second run writing the same results file is refused,
    /// and the journal of an earlier run that died (unlocked) is kept under a new name, never
    /// overwritten: it may hold that run's only record.
    pub fn start(target: &Target, header: &serde_json::Value) -> anyhow::Result<Option<Self>> {
        if target.special {
            return Ok(None);
        }
        let dir = parent_dir(&target.path);
        let name = target
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = if name.len() + ".partial".len() <= 240 {
            dir.join(format!("{name}.partial"))
        } else {
            dir.join(format!(".clhip-{}.partial", std::process::id()))
        };
        if let Ok(existing) = OpenOptions::new().read(true).write(true).open(&path) {
            match Flock::lock(existing, FlockArg::LockExclusiveNonblock) {
                Err(_) => bail!(
                    "{} is being written by another clhip run (its journal {} is locked): two runs would overwrite each other's results",
                    target.given.display(),
                    path.display()
                ),
                Ok(_unlocked_on_drop) => {
                    let journal_name = path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let kept = (1..)
                        .map(|k| dir.join(format!("{journal_name}.{k}")))
                        .find(|p| !p.exists())
                        .unwrap_or_else(|| path.with_extension("partial.old"));
                    std::fs::rename(&path, &kept).with_context(|| {
                        format!("keeping an earlier run's journal {}", path.display())
                    })?;
                    let _ = writeln!(
                        std::io::stderr(),
                        "clhip: warning: {} is the journal of an earlier run that did not finish; kept as {}",
                        path.display(),
                        kept.display()
                    );
                }
            }
        }
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut file = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            anyhow::anyhow!(
                "{} is being written by another clhip run ({} locked: {e})",
                target.given.display(),
                path.display()
            )
        })?;
        writeln!(file, "{header}").with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(Journal { path, file }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one result line. An error here is reported by the caller and the run goes on:
    /// the full results are still written at the end.
    pub fn append(&mut self, line: &serde_json::Value) -> anyhow::Result<()> {
        writeln!(self.file, "{line}")
            .and_then(|()| self.file.flush())
            .with_context(|| format!("appending to {}", self.path.display()))
    }

    /// The run's results are written in full: the journal has served. Removed while still
    /// locked, so no other run can take it in between.
    pub fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("clhip-output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn directories_sockets_and_empty_paths_are_refused() {
        let d = tmpdir("dirs");
        assert!(
            check("--json", &d)
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
        let slash = PathBuf::from(format!("{}/", d.join("x").display()));
        assert!(check("--json", &slash).is_err());
        assert!(check("--json", Path::new("")).is_err());
        let under_file = d.join("f");
        std::fs::write(&under_file, "x").unwrap();
        assert!(check("--json", &under_file.join("r.json")).is_err());
    }

    #[test]
    fn device_nodes_are_written_in_place_and_links_through() {
        let null = check("--json", Path::new("/dev/null")).unwrap();
        assert!(null.special);
        write(&null, b"{}").unwrap();
        assert!(
            std::fs::metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device()
        );
        let d = tmpdir("links");
        let real = d.join("real.json");
        std::fs::write(&real, "old").unwrap();
        let link = d.join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let t = check("--json", &link).unwrap();
        write(&t, b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn outputs_may_not_be_each_other_or_an_input() {
        let d = tmpdir("collide");
        let a = check("--json", &d.join("a.json")).unwrap();
        let a2 = check("--junit", &d.join("./a.json")).unwrap();
        let err = refuse_collisions(&[("--json", &a), ("--junit", &a2)], &[]).unwrap_err();
        assert!(err.to_string().contains("same file"), "{err}");
        let cases = d.join("cases.toml");
        std::fs::write(&cases, "version = 1").unwrap();
        let over = check("--json", &cases).unwrap();
        let err = refuse_collisions(&[("--json", &over)], &[("--cases", &cases)]).unwrap_err();
        assert!(err.to_string().contains("input"), "{err}");
        let n1 = check("--json", Path::new("/dev/null")).unwrap();
        let n2 = check("--junit", Path::new("/dev/null")).unwrap();
        refuse_collisions(&[("--json", &n1), ("--junit", &n2)], &[]).unwrap();
    }

    #[test]
    fn long_names_make_short_temporaries() {
        let d = tmpdir("long");
        let name = format!("{}.json", "r".repeat(250));
        let t = check("--json", &d.join(&name)).unwrap();
        write(&t, b"x").unwrap();
        assert_eq!(std::fs::read_to_string(d.join(&name)).unwrap(), "x");
        let j = Journal::start(&t, &serde_json::json!({"schema": JOURNAL_SCHEMA})).unwrap();
        let j = j.unwrap();
        assert!(j.path().file_name().unwrap().len() <= 255);
        j.finish();
    }

    #[test]
    fn a_live_journal_refuses_a_second_run_and_a_dead_ones_is_kept() {
        let d = tmpdir("journal");
        let t = check("--json", &d.join("r.json")).unwrap();
        let head = serde_json::json!({"schema": JOURNAL_SCHEMA});
        let live = Journal::start(&t, &head).unwrap().unwrap();
        let err = Journal::start(&t, &head).err().unwrap();
        assert!(err.to_string().contains("another clhip run"), "{err}");
        // The first run dies: its journal stays, unlocked.
        let path = live.path().to_path_buf();
        drop(live);
        std::fs::write(&path, "the dead run's only record\n").unwrap();
        let again = Journal::start(&t, &head).unwrap().unwrap();
        let kept = d.join("r.json.partial.1");
        assert_eq!(
            std::fs::read_to_string(&kept).unwrap(),
            "the dead run's only record\n"
        );
        again.finish();
    }

    #[test]
    fn a_fifo_is_refused_as_an_output() {
        let d = tmpdir("fifo");
        let f = d.join("f.json");
        nix::unistd::mkfifo(&f, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(
            check("--json", &f)
                .unwrap_err()
                .to_string()
                .contains("FIFO")
        );
    }
}
