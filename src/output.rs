//! Where results go. Every output is checked before the first case runs, against the run's
//! inputs and its other outputs, so a bad path never costs a run; and writing destroys nothing
//! it should not:
//! - Only regular files (new or existing) and sinks are written. A sink is /dev/null, the
//!   terminal, or this process's own standard output or error (`/dev/stdout`, `/dev/fd/2`),
//!   whatever that is: a terminal, a pipe, a file the shell opened. A block device (a disk),
//!   any other character device, a FIFO, a socket or a directory is refused, and no file is
//!   created or replaced inside /dev (but /dev/shm), /proc or /sys.
//! - A missing directory is an error, unless the caller asks for it ([`Parent::MayCreate`], for
//!   a default location the user did not name).
//! - A regular file is replaced whole: a short-named temporary sibling, synced, then a rename,
//!   so a crash mid-write leaves the old file whole. A symbolic link is written through (the
//!   link stays a link).
//! - No output may be another output, an input, a file inside an input directory, or the
//!   results file of a run in progress (its [`Journal`] locked).
//! - In a directory of clhip's files ([`DirTarget`], `repro -o DIR`) only files clhip wrote
//!   there, unchanged since, are replaced.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::fcntl::{Flock, FlockArg, OFlag};

/// What an output is, as checked: how it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file, or one to be made: replaced whole, never written in place.
    File,
    /// A character device that swallows what it is given (/dev/null, the terminal), written
    /// in place. `rdev` is the device checked: a node swapped for another since is not written.
    Sink { rdev: u64 },
    /// One of this process's open descriptors (`/dev/stdout` is 1), written through.
    Descriptor(i32),
}

/// An output path, resolved and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As the user gave it, for messages.
    pub given: PathBuf,
    /// What is written: the path itself, or the file a symbolic link leads to.
    pub path: PathBuf,
    pub kind: Kind,
}

impl Target {
    /// Where the [`Journal`] of a regular-file target goes: `NAME.partial` beside it, or for a
    /// name near the file system's 255-byte limit a short name made from it, so that another
    /// process finds the same journal.
    pub fn journal_path(&self) -> Option<PathBuf> {
        if self.kind != Kind::File {
            return None;
        }
        let name = self.path.file_name()?;
        let dir = parent_dir(&self.path);
        Some(if name.len() + ".partial".len() <= 240 {
            let mut n = OsString::from(name);
            n.push(".partial");
            dir.join(n)
        } else {
            dir.join(format!(
                ".clhip-{:016x}.partial",
                crate::hash::fnv1a64(name.as_bytes())
            ))
        })
    }

    /// The journal as an output of its own, for [`refuse_collisions`]: `--markdown
    /// r.json.partial` beside `--json r.json` would be removed with the journal.
    pub fn journal_target(&self) -> Option<Target> {
        let path = self.journal_path()?;
        Some(Target {
            given: path.clone(),
            path,
            kind: Kind::File,
        })
    }
}

/// What to do when an output's directory does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// Refuse: a typo in a directory name must not scatter results into new directories.
    MustExist,
    /// Make it (and those above it): only for a default location, never for a path the user
    /// typed.
    MayCreate,
}

/// What may be written, for the messages that refuse the rest.
const WRITTEN: &str =
    "clhip writes only regular files, /dev/null, the terminal, /dev/stdout and /dev/stderr";

/// [`check`] for an output that was asked for, and nothing for one that was not.
pub fn check_given(what: &str, given: Option<&Path>) -> anyhow::Result<Option<Target>> {
    given.map(|p| check(what, p)).transpose()
}

/// [`check_with`] a directory that must exist.
pub fn check(what: &str, given: &Path) -> anyhow::Result<Target> {
    check_with(what, given, Parent::MustExist)
}

/// Resolves and checks one output path (see the module's rules). `what` names the option in
/// errors (`--json`). Nothing is written, but a new file's directory is made where `parent`
/// allows it.
pub fn check_with(what: &str, given: &Path, parent: Parent) -> anyhow::Result<Target> {
    let shown = given.display();
    if given.as_os_str().is_empty() {
        bail!("{what}: an empty path");
    }
    if given.as_os_str().as_bytes().ends_with(b"/") {
        bail!("{what} {shown}: names a directory, not a file");
    }
    if let Some(fd) = own_descriptor(given) {
        return check_descriptor(what, given, fd);
    }
    let path = match std::fs::symlink_metadata(given) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(given).with_context(|| {
            format!(
                "{what} {shown}: a symbolic link to nothing (clhip makes no file where a link points)"
            )
        })?,
        _ => given.to_path_buf(),
    };
    let kind = match std::fs::metadata(&path) {
        Ok(m) => {
            let t = m.file_type();
            if m.is_dir() {
                bail!("{what} {shown}: is a directory");
            } else if t.is_block_device() {
                bail!("{what} {shown}: is a block device (a disk or a partition): {WRITTEN}");
            } else if t.is_char_device() {
                if !is_sink(m.rdev()) {
                    bail!("{what} {shown}: is a character device that is not a sink: {WRITTEN}");
                }
                Kind::Sink { rdev: m.rdev() }
            } else if t.is_fifo() {
                // Opening a FIFO for writing waits for a reader, forever if none comes: the
                // results of a whole run would hang on it. Write a file and read that instead.
                bail!(
                    "{what} {shown}: is a FIFO; results go to a file (or /dev/stdout, or /dev/null)"
                );
            } else if t.is_socket() {
                bail!("{what} {shown}: is a socket, not a file");
            } else if !m.is_file() {
                bail!("{what} {shown}: is not a regular file: {WRITTEN}");
            } else {
                Kind::File
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Kind::File,
        Err(e) => return Err(e).with_context(|| format!("{what} {shown}")),
    };
    let target = Target {
        given: given.to_path_buf(),
        path,
        kind,
    };
    if kind == Kind::File {
        let dir = parent_dir(&target.path);
        let real = existing_dir(what, given, &dir, parent)?;
        refuse_system_dir(what, given, &real)?;
        refuse_live_journal(what, &target)?;
        probe_writable(what, given, &real)?;
    }
    Ok(target)
}

/// `dir` resolved, made first where `parent` allows it.
fn existing_dir(what: &str, given: &Path, dir: &Path, parent: Parent) -> anyhow::Result<PathBuf> {
    match std::fs::canonicalize(dir) {
        Ok(real) if real.is_dir() => Ok(real),
        Ok(real) => bail!(
            "{what} {}: {} is not a directory",
            given.display(),
            real.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && parent == Parent::MayCreate => {
            // Where the directory would be made: never under /dev, /proc or /sys.
            let mut above = dir;
            while let Some(up) = above.parent() {
                above = up;
                if let Ok(real) = std::fs::canonicalize(if up.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    up
                }) {
                    refuse_system_dir(what, given, &real)?;
                    break;
                }
            }
            std::fs::create_dir_all(dir).with_context(|| {
                format!("{what} {}: creating {}", given.display(), dir.display())
            })?;
            std::fs::canonicalize(dir).with_context(|| format!("{what} {}", given.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{what} {}: the directory {} does not exist (clhip makes no directory it was not asked for: make it first)",
            given.display(),
            dir.display()
        ),
        Err(e) => Err(e).with_context(|| format!("{what} {}", given.display())),
    }
}

/// Refuses a file in /dev (but /dev/shm, an ordinary tmpfs), /proc or /sys: a name there that
/// is not a device yet may become one, and what looks like a regular file is a kernel
/// interface.
fn refuse_system_dir(what: &str, given: &Path, real_dir: &Path) -> anyhow::Result<()> {
    for root in ["/dev", "/proc", "/sys"] {
        if real_dir.starts_with(root) && !real_dir.starts_with("/dev/shm") {
            bail!(
                "{what} {}: is inside {root}, where clhip makes and replaces no file ({WRITTEN})",
                given.display()
            );
        }
    }
    Ok(())
}

/// Refuses the results file of a run in progress: its journal beside it is locked by that
/// run, which will replace the file when it ends.
fn refuse_live_journal(what: &str, target: &Target) -> anyhow::Result<()> {
    let Some(journal) = target.journal_path() else {
        return Ok(());
    };
    if !std::fs::symlink_metadata(&journal).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let Ok(file) = File::open(&journal) else {
        return Ok(());
    };
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => bail!(
            "{what} {}: is the results file of a clhip run in progress (its journal {} is locked): one would overwrite the other's results",
            target.given.display(),
            journal.display()
        ),
        // Released at once: a dead run's journal is no obstacle.
        _ => Ok(()),
    }
}

/// A file the run could not create at the end would lose the whole run: try now.
fn probe_writable(what: &str, given: &Path, dir: &Path) -> anyhow::Result<()> {
    temp_in(dir, 0o600).map(drop).with_context(|| {
        format!(
            "{what} {}: cannot create files in {}",
            given.display(),
            dir.display()
        )
    })
}

/// A temporary file in `dir` with a short hidden name, whatever the length of the output's own
/// name (a name near the file system's 255-byte limit must not make a longer one); removed on
/// drop unless persisted. `mode` goes through the umask, as for any new file.
fn temp_in(dir: &Path, mode: u32) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(".clhip-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
}

/// The descriptor of this process that `path` names through links: `/dev/stdout` is
/// `/proc/self/fd/1`, `/dev/fd/N` is `/proc/self/fd/N`. Such a path is opened by the shell
/// already (a terminal, a pipe, `> file`), and reopening it by name would not be the same: a
/// pipe has no name, and a file would be replaced instead of written where the shell put it.
fn own_descriptor(path: &Path) -> Option<i32> {
    let fds = PathBuf::from(format!("/proc/{}/fd", std::process::id()));
    let mut p = path.to_path_buf();
    // As many links as the kernel follows.
    for _ in 0..40 {
        let dir = std::fs::canonicalize(parent_dir(&p)).ok()?;
        let name = p.file_name()?;
        if dir == fds {
            return name.to_str()?.parse().ok();
        }
        let next = std::fs::read_link(dir.join(name)).ok()?;
        p = dir.join(next);
    }
    None
}

fn check_descriptor(what: &str, given: &Path, fd: i32) -> anyhow::Result<Target> {
    let shown = given.display();
    let m = std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .with_context(|| format!("{what} {shown}: descriptor {fd} is not open"))?;
    if m.file_type().is_block_device() {
        bail!("{what} {shown}: is a block device (a disk or a partition): {WRITTEN}");
    }
    if m.is_dir() {
        bail!("{what} {shown}: is a directory");
    }
    // Reopened for writing, a descriptor the shell opened for reading (`< cases.toml`,
    // `3< file`) would be an input written over.
    if !open_for_writing(fd) {
        bail!("{what} {shown}: descriptor {fd} is open for reading only: an input, not an output");
    }
    Ok(Target {
        given: given.to_path_buf(),
        path: given.to_path_buf(),
        kind: Kind::Descriptor(fd),
    })
}

/// Whether this process's descriptor `fd` was opened for writing, from its `flags` (octal) in
/// /proc/self/fdinfo.
fn open_for_writing(fd: i32) -> bool {
    let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
        return false;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & OFlag::O_ACCMODE.bits() != OFlag::O_RDONLY.bits())
}

/// /dev/null, the controlling terminal (/dev/tty), or the device this process's standard
/// output or error is (the user's terminal): devices that take any bytes and keep none. Any
/// other character device may be anything: a disk's SCSI generic node, a serial line.
fn is_sink(rdev: u64) -> bool {
    use nix::sys::stat::{major, minor};
    const NULL: (u64, u64) = (1, 3);
    const TTY: (u64, u64) = (5, 0);
    let id = (major(rdev), minor(rdev));
    id == NULL
        || id == TTY
        || [1, 2].iter().any(|fd| {
            std::fs::metadata(format!("/proc/self/fd/{fd}"))
                .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == rdev)
        })
}

/// Refuses an output that is another output, an input (`--json` over `--cases`) or a file
/// inside an input directory (`--markdown` into `--expectations DIR`): by device and inode
/// where the file exists and by resolved path where it does not. Sinks may repeat: two
/// outputs to /dev/null destroy nothing.
pub fn refuse_collisions(
    outputs: &[(&str, &Target)],
    inputs: &[(&str, &Path)],
) -> anyhow::Result<()> {
    for (i, (what, t)) in outputs.iter().enumerate() {
        let Some(id) = identity(t) else {
            continue;
        };
        for (other, u) in &outputs[..i] {
            if identity(u).as_ref() == Some(&id) {
                bail!(
                    "{what} {} and {other} {} are the same file: one would overwrite the other",
                    t.given.display(),
                    u.given.display()
                );
            }
        }
        for (input, p) in inputs {
            let inside = match std::fs::metadata(p) {
                Ok(m) if m.is_dir() => {
                    t.kind == Kind::File && {
                        let dir = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
                        absolute(&t.path).starts_with(dir)
                    }
                }
                _ => false,
            };
            if inside {
                bail!(
                    "{what} {} is inside the {input} directory {}: writing it would change the run's input",
                    t.given.display(),
                    p.display()
                );
            }
            if input_identity(p).as_ref() == Some(&id) {
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

/// What a file is for collisions: its device and inode, or for a file yet to be made, its
/// resolved path.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Inode(u64, u64),
    Path(PathBuf),
}

fn identity(t: &Target) -> Option<Identity> {
    match t.kind {
        Kind::File => {
            Some(input_identity(&t.path).unwrap_or_else(|| Identity::Path(absolute(&t.path))))
        }
        // A pipe or a terminal takes any number of writers; a file the shell opened is a file.
        Kind::Descriptor(fd) => std::fs::metadata(format!("/proc/self/fd/{fd}"))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| Identity::Inode(m.dev(), m.ino())),
        Kind::Sink { .. } => None,
    }
}

fn input_identity(p: &Path) -> Option<Identity> {
    match std::fs::metadata(p) {
        Ok(m) => Some(Identity::Inode(m.dev(), m.ino())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Identity::Path(absolute(p))),
        Err(_) => None,
    }
}

/// Writes `bytes` to `target`: a regular file replaced whole, a sink or a descriptor written
/// in place. A new file's mode is 0o666 less the umask.
pub fn write(target: &Target, bytes: &[u8]) -> anyhow::Result<()> {
    write_with_mode(target, bytes, 0o666)
}

/// [`write`], a new regular file made with `mode` (less the umask): 0o777 for a script.
pub fn write_with_mode(target: &Target, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    match target.kind {
        Kind::File => replace(target, bytes, mode),
        Kind::Sink { rdev } => write_sink(target, rdev, bytes),
        Kind::Descriptor(fd) => write_descriptor(target, fd, bytes),
    }
}

fn replace(target: &Target, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    // Checked before the run, which may have taken hours: a device or a directory put there
    // since is not renamed over.
    if let Ok(m) = std::fs::symlink_metadata(&target.path)
        && !m.is_file()
    {
        bail!(
            "{}: is no longer a regular file (it was when the outputs were checked): not written",
            target.path.display()
        );
    }
    let dir = parent_dir(&target.path);
    let mut tmp = temp_in(&dir, mode)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    tmp.persist(&target.path)
        .map_err(|e| e.error)
        .with_context(|| format!("renaming into {}", target.path.display()))?;
    Ok(())
}

fn write_sink(target: &Target, rdev: u64, bytes: &[u8]) -> anyhow::Result<()> {
    let path = &target.path;
    // No create: a node gone since the check is not made again as a file.
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let m = f
        .metadata()
        .with_context(|| format!("opening {}", path.display()))?;
    if !m.file_type().is_char_device() || m.rdev() != rdev {
        bail!(
            "{}: is no longer the device it was when the outputs were checked: not written",
            path.display()
        );
    }
    f.write_all(bytes)
        .and_then(|()| f.flush())
        .with_context(|| format!("writing {}", path.display()))
}

fn write_descriptor(target: &Target, fd: i32, bytes: &[u8]) -> anyhow::Result<()> {
    let shown = target.given.display();
    let mut f: File = match fd {
        1 => std::io::stdout().as_fd().try_clone_to_owned()?.into(),
        2 => std::io::stderr().as_fd().try_clone_to_owned()?.into(),
        n => {
            // Non-blocking to open: a pipe whose reader has gone would block the open forever.
            let f = OpenOptions::new()
                .append(true)
                .custom_flags(OFlag::O_NONBLOCK.bits())
                .open(format!("/proc/self/fd/{n}"))
                .with_context(|| format!("opening {shown}"))?;
            nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_APPEND))
                .with_context(|| format!("opening {shown}"))?;
            f
        }
    };
    f.write_all(bytes)
        .and_then(|()| f.flush())
        .with_context(|| format!("writing {shown}"))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
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

/// A directory of files clhip writes together (`repro -o DIR`: repro.c, build.sh, README.md),
/// checked before anything runs. The directory itself is made if missing (the user named it),
/// but not the directories above it. A file of those names already there is replaced only if
/// clhip wrote it and it is unchanged since: the list [`WRITTEN_LIST`] in the directory
/// records what clhip wrote, each with a hash of its bytes. A user's own README.md, or a
/// repro.c edited while debugging, is refused, never overwritten.
#[derive(Debug, Clone)]
pub struct DirTarget {
    pub given: PathBuf,
    /// The directory, links followed.
    pub dir: PathBuf,
    /// Each file clhip writes there, as an output: for [`refuse_collisions`].
    pub files: Vec<Target>,
    what: String,
}

/// The list of files clhip wrote into a [`DirTarget`], in it.
pub const WRITTEN_LIST: &str = ".clhip-written";
const WRITTEN_SCHEMA: &str = "clhip-written/1";
/// Larger than anything clhip writes into a directory: a larger file is not clhip's, and is
/// not read to find out.
const MAX_OWN_BYTES: u64 = 16 << 20;

/// Checks `given` as a directory to write `names` into.
pub fn check_dir(what: &str, given: &Path, names: &[&str]) -> anyhow::Result<DirTarget> {
    let shown = given.display();
    if given.as_os_str().is_empty() {
        bail!("{what}: an empty path");
    }
    let dir = match std::fs::symlink_metadata(given) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(given).with_context(|| {
            format!("{what} {shown}: a symbolic link to nothing (clhip makes no directory where a link points)")
        })?,
        _ => given.to_path_buf(),
    };
    let exists = match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => true,
        Ok(_) => bail!("{what} {shown}: not a directory"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e).with_context(|| format!("{what} {shown}")),
    };
    let real = if exists {
        std::fs::canonicalize(&dir).with_context(|| format!("{what} {shown}"))?
    } else {
        let above = parent_dir(&dir);
        match std::fs::canonicalize(&above) {
            Ok(real) if real.is_dir() => real,
            Ok(_) => bail!("{what} {shown}: {} is not a directory", above.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "{what} {shown}: the directory {} does not exist (clhip makes {shown} itself, not the directories above it)",
                above.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("{what} {shown}")),
        }
    };
    refuse_system_dir(what, given, &real)?;
    let in_dir = |name: &str| Target {
        given: given.join(name),
        path: dir.join(name),
        kind: Kind::File,
    };
    let mut files: Vec<Target> = names.iter().map(|n| in_dir(n)).collect();
    files.push(in_dir(WRITTEN_LIST));
    let target = DirTarget {
        given: given.to_path_buf(),
        dir,
        files,
        what: what.to_string(),
    };
    if exists {
        target.refuse_foreign_files()?;
    }
    probe_writable(what, given, &real)?;
    Ok(target)
}

impl DirTarget {
    /// Writes each of `files` (name, bytes, mode as for [`write_with_mode`]) into the
    /// directory, made if missing, whatever happened to the others, and records them in the
    /// list. The files are checked again first: the run since the check may have been long.
    pub fn write(&self, files: &[(&str, &[u8], u32)]) -> anyhow::Result<()> {
        match std::fs::create_dir(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && self.dir.is_dir() => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("{} {}: creating it", self.what, self.given.display())
                });
            }
        }
        self.refuse_foreign_files()?;
        let mut written = self.read_list()?;
        let mut failed = Vec::new();
        for &(name, bytes, mode) in files {
            let Some(t) = self
                .files
                .iter()
                .find(|t| t.path.file_name() == Some(name.as_ref()) && name != WRITTEN_LIST)
            else {
                bail!(
                    "{name} is not one of the files checked for {}",
                    self.given.display()
                );
            };
            match write_with_mode(t, bytes, mode) {
                Ok(()) => {
                    written.insert(name.to_string(), crate::hash::fnv1a64(bytes));
                }
                // The old file is whole (replaced or not at all): its entry stays true.
                Err(e) => failed.push(format!("{e:#}")),
            }
        }
        let mut list = format!("{WRITTEN_SCHEMA}\n");
        for (name, hash) in &written {
            list.push_str(&format!("{hash:016x} {name}\n"));
        }
        if let Err(e) = write(&self.files[self.files.len() - 1], list.as_bytes()) {
            failed.push(format!("{e:#}"));
        }
        if !failed.is_empty() {
            bail!("{}", failed.join("; "));
        }
        Ok(())
    }

    /// Refuses a file of the names to be written that clhip did not write, or that changed
    /// since it did.
    fn refuse_foreign_files(&self) -> anyhow::Result<()> {
        let written = self.read_list()?;
        for t in &self.files[..self.files.len() - 1] {
            let name = t.path.file_name().unwrap_or_default().to_string_lossy();
            let ours = match std::fs::symlink_metadata(&t.path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Ok(m) if m.is_file() && m.len() <= MAX_OWN_BYTES => {
                    match (written.get(name.as_ref()), std::fs::read(&t.path)) {
                        (Some(&hash), Ok(bytes)) => crate::hash::fnv1a64(&bytes) == hash,
                        _ => false,
                    }
                }
                _ => false,
            };
            if !ours {
                bail!(
                    "{} {}: {name} is there already, and clhip did not write it or it has changed since: clhip replaces only its own files (move it away, or give another directory)",
                    self.what,
                    self.given.display()
                );
            }
        }
        Ok(())
    }

    /// The list of files clhip wrote here: name to hash. None yet is an empty list; anything
    /// else under its name is refused.
    fn read_list(&self) -> anyhow::Result<BTreeMap<String, u64>> {
        let list = &self.files[self.files.len() - 1];
        let not_ours = || {
            anyhow::anyhow!(
                "{} {}: {WRITTEN_LIST} is there and is not clhip's list of the files it wrote (move it away, or give another directory)",
                self.what,
                self.given.display()
            )
        };
        let mut text = String::new();
        match std::fs::symlink_metadata(&list.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Ok(m) if m.is_file() => {
                File::open(&list.path)
                    .and_then(|f| f.take(64 << 10).read_to_string(&mut text))
                    .map_err(|_| not_ours())?;
            }
            _ => return Err(not_ours()),
        }
        let mut lines = text.lines();
        if lines.next() != Some(WRITTEN_SCHEMA) {
            return Err(not_ours());
        }
        lines
            .map(|line| {
                let (hash, name) = line.split_once(' ').ok_or_else(not_ours)?;
                let hash = u64::from_str_radix(hash, 16).map_err(|_| not_ours())?;
                Ok((name.to_string(), hash))
            })
            .collect()
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

/// A journal line that says a case started (`{"started": ID}`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartLine {
    pub started: String,
}

impl Journal {
    /// Starts the journal of `target` with `header` (a JSON value with a `schema` field of
    /// [`JOURNAL_SCHEMA`]); `None` for a sink or a descriptor, which keeps no partial file. The
    /// journal is locked for the run: a second run writing the same results file is refused,
    /// and the journal of an earlier run that died (unlocked) is kept under a new name, never
    /// overwritten: it may hold that run's only record.
    pub fn start(target: &Target, header: &serde_json::Value) -> anyhow::Result<Option<Self>> {
        let Some(path) = target.journal_path() else {
            return Ok(None);
        };
        let dir = parent_dir(&path);
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

    /// Takes up the journal of `target` that a dead run left, to append to it: the run it
    /// holds goes on (`run --resume`). A journal another run holds (locked) is refused.
    pub fn reopen(target: &Target) -> anyhow::Result<Self> {
        let path = target
            .journal_path()
            .with_context(|| format!("{}: keeps no journal", target.given.display()))?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let file = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
            anyhow::anyhow!(
                "{} is being written by another clhip run (it is locked): not resumed",
                path.display()
            )
        })?;
        Ok(Journal { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records that case `id` started: a run that dies before its result leaves the case
    /// known as the one in flight.
    pub fn started(&mut self, id: &str) -> anyhow::Result<()> {
        let line = serde_json::to_value(StartLine {
            started: id.to_string(),
        })?;
        self.append(&line)
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
mod tests;
