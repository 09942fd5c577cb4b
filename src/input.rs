//! Reading a file that a user, or a directory the user points at, names: case files,
//! baselines, expectation files, results files and journals, probe files, figures, bench
//! files and kernel cache entries.
//!
//! A path can name anything: `/dev/zero` or `/dev/urandom` never end, a FIFO blocks its reader
//! until a writer comes, a file can be sparse and terabytes long, or grow while it is read.
//! Every reader here therefore opens without blocking (`O_NONBLOCK`: a FIFO's open returns at
//! once), checks what it opened (`fstat` on the open descriptor, so the check is of the file
//! read, not of whatever the path named a moment earlier), takes regular files only, and reads
//! at most a stated limit per kind of file. Anything else is an error naming the file and what
//! it is, never a read.
//!
//! This module is below everything: it imports nothing of the crate, so any layer (the
//! runtimes' kernel cache included) may use it.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A case file (TOML). The shipped matrix is 5 KiB.
pub const CASES_LIMIT: u64 = 4 * MIB;
/// A baseline (`case-id,outcome` lines). A full matrix's is about 30 KiB.
pub const BASELINE_LIMIT: u64 = 16 * MIB;
/// One expectation file (TOML).
pub const EXPECTATIONS_LIMIT: u64 = 16 * MIB;
/// A `clhip probe --json` file.
pub const PROBE_LIMIT: u64 = 16 * MIB;
/// An SVG figure for `report --html --figure`.
pub const FIGURE_LIMIT: u64 = 16 * MIB;
/// A results file, a run's `.partial` journal, a shard, a `diff` or `repro --from` input, a
/// bench file. A full matrix's results are about 2 MiB.
pub const RESULTS_LIMIT: u64 = 512 * MIB;
/// One kernel cache entry: a compiled program binary with its key.
pub const KERNEL_CACHE_ENTRY_LIMIT: u64 = 256 * MIB;
/// An OpenCL ICD `.icd` file: one line naming a library.
pub const ICD_FILE_LIMIT: u64 = 64 * KIB;

/// Whether a symbolic link at the path itself is followed to what it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// A link to a regular file is read; a link to anything else is refused like that thing.
    Follow,
    /// A link is refused, whatever it names (`O_NOFOLLOW`): for files this program writes
    /// itself, where a link is never its own.
    Refuse,
}

/// What was wrong with a file that was not read.
#[derive(Debug)]
pub enum Problem {
    /// open or read failed.
    Io(std::io::Error),
    /// A character device, a FIFO, a directory...: what the path named instead of a file.
    NotRegular(&'static str),
    /// Larger than the limit for its kind, by its size before the read.
    TooBig { what: String, size: u64, limit: u64 },
    /// Grew past the limit while being read.
    Grew { what: String, limit: u64 },
    /// Not UTF-8 where text is wanted; the offset of the first bad byte.
    NotUtf8 { at: usize },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Io(e) => write!(f, "cannot read: {e}"),
            Problem::NotRegular(kind) => write!(f, "{kind}, not a regular file"),
            Problem::TooBig { what, size, limit } => write!(
                f,
                "{}, over the {} limit for {what}",
                size_text(*size),
                size_text(*limit)
            ),
            Problem::Grew { what, limit } => write!(
                f,
                "grew past the {} limit for {what} while being read",
                size_text(*limit)
            ),
            Problem::NotUtf8 { at } => write!(f, "not UTF-8 text (invalid byte at offset {at})"),
        }
    }
}

/// A file that was not read, and why: `{path}: {problem}`.
#[derive(Debug)]
pub struct ReadError {
    pub path: PathBuf,
    pub problem: Problem,
}

impl ReadError {
    /// Nothing is there: for readers to which a missing file is no error (a cache miss).
    pub fn is_missing(&self) -> bool {
        matches!(&self.problem, Problem::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

// No `source()`: the I/O error is already in the message, and `{:#}` would print it twice.
impl std::error::Error for ReadError {}

/// The whole of the regular file at `path` (links followed), at most `limit` bytes; `what` (a
/// case file, a baseline) names the kind of file in the error when it is larger.
pub fn read_regular(what: &str, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    read_regular_with(what, path, limit, Links::Follow)
}

/// [`read_regular`], with links followed or refused.
pub fn read_regular_with(
    what: &str,
    path: &Path,
    limit: u64,
    links: Links,
) -> Result<Vec<u8>, ReadError> {
    let error = |problem| ReadError {
        path: path.to_path_buf(),
        problem,
    };
    let (file, size) = open(path, links).map_err(error)?;
    if size > limit {
        return Err(error(Problem::TooBig {
            what: what.to_string(),
            size,
            limit,
        }));
    }
    read_at_most(what, file, size, limit).map_err(error)
}

/// What `reader` holds, if no more than `limit` bytes. `size` (the file's size when opened) is
/// a hint only: a file may shrink or grow while read, or be a /proc file of size 0. Reading one
/// byte past the limit, and never more, tells a file that grew past it.
fn read_at_most(what: &str, reader: impl Read, size: u64, limit: u64) -> Result<Vec<u8>, Problem> {
    let mut bytes = Vec::with_capacity(usize::try_from(size.min(limit)).unwrap_or(0));
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Problem::Io)?;
    if bytes.len() as u64 > limit {
        return Err(Problem::Grew {
            what: what.to_string(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text, without a leading byte-order mark (which editors on some
/// systems write, and which would otherwise be part of the first line).
pub fn read_text(what: &str, path: &Path, limit: u64) -> Result<String, ReadError> {
    let bytes = read_regular(what, path, limit)?;
    let mut text = String::from_utf8(bytes).map_err(|e| ReadError {
        path: path.to_path_buf(),
        problem: Problem::NotUtf8 {
            at: e.utf8_error().valid_up_to(),
        },
    })?;
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}

/// The regular file at `path` (links followed), opened for reading: for readers that read
/// parts of a file themselves.
pub fn open_regular(path: &Path) -> Result<File, ReadError> {
    open(path, Links::Follow)
        .map(|(f, _)| f)
        .map_err(|problem| ReadError {
            path: path.to_path_buf(),
            problem,
        })
}

/// The open file and its size, if `path` is a regular file.
fn open(path: &Path, links: Links) -> Result<(File, u64), Problem> {
    // Look before opening: opening a device can itself do something (a tape rewinds, a
    // watchdog starts). The look can be raced; the check of the open descriptor below cannot.
    let named = match links {
        Links::Follow => std::fs::metadata(path),
        Links::Refuse => std::fs::symlink_metadata(path),
    }
    .map_err(Problem::Io)?;
    regular(&named)?;
    let mut flags = OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    if links == Links::Refuse {
        flags |= OFlag::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(|e| {
            // O_NOFOLLOW's refusal of a link that replaced the file since the look.
            if links == Links::Refuse && e.raw_os_error() == Some(nix::libc::ELOOP) {
                Problem::NotRegular("a symbolic link")
            } else {
                Problem::Io(e)
            }
        })?;
    let opened = file.metadata().map_err(Problem::Io)?;
    regular(&opened)?;
    Ok((file, opened.len()))
}

fn regular(meta: &Metadata) -> Result<(), Problem> {
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(Problem::NotRegular(kind))
}

/// `4 MiB`, `1 TiB`, or exactly (`4194305 bytes`): a size just over a limit must not read as
/// the limit.
fn size_text(bytes: u64) -> String {
    for (unit, name) in [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (MIB, "MiB"),
        (KIB, "KiB"),
    ] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("clhip-input-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// `f()`, or a failure after 10 s: a reader that blocks must fail its test, not hang it.
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the read returned within 10 s")
    }

    fn refused(path: &Path) -> String {
        let p = path.to_path_buf();
        let err = within_10s(move || read_regular("a test file", &p, MIB))
            .expect_err("not read")
            .to_string();
        assert!(
            err.starts_with(&format!("{}: ", path.display())),
            "names the file: {err}"
        );
        err
    }

    #[test]
    fn a_regular_file_is_read_whole_and_a_link_to_it_followed() {
        let d = dir("regular");
        let f = d.join("a.txt");
        std::fs::write(&f, "abc\n").unwrap();
        assert_eq!(read_regular("x", &f, 4).unwrap(), b"abc\n");
        let link = d.join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(read_text("x", &link, 4).unwrap(), "abc\n");
        assert!(open_regular(&link).is_ok());
    }

    #[test]
    fn devices_are_refused_without_reading() {
        for (dev, kind) in [
            ("/dev/zero", "a character device"),
            ("/dev/urandom", "a character device"),
            ("/dev/null", "a character device"),
        ] {
            let err = refused(Path::new(dev));
            assert!(
                err.contains(&format!("{kind}, not a regular file")),
                "{err}"
            );
        }
        let err = refused(&dir("dir"));
        assert!(err.contains("a directory, not a regular file"), "{err}");
    }

    #[test]
    fn a_fifo_is_refused_at_once_not_waited_on() {
        let d = dir("fifo");
        let fifo = d.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = refused(&fifo);
        assert!(
            err.contains("a FIFO (named pipe), not a regular file"),
            "{err}"
        );
        let p = fifo.clone();
        assert!(within_10s(move || open_regular(&p)).is_err());
    }

    #[test]
    fn a_link_to_a_device_is_refused_as_the_device_and_refused_links_are_never_followed() {
        let d = dir("links");
        let link = d.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(refused(&link).contains("a character device"));
        let f = d.join("f");
        std::fs::write(&f, "x").unwrap();
        let to_file = d.join("to-file");
        std::os::unix::fs::symlink(&f, &to_file).unwrap();
        for l in [&link, &to_file] {
            let err = read_regular_with("x", l, MIB, Links::Refuse).unwrap_err();
            assert!(
                err.to_string()
                    .contains("a symbolic link, not a regular file"),
                "{err}"
            );
        }
        assert_eq!(
            read_regular_with("x", &f, MIB, Links::Refuse).unwrap(),
            b"x"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused_by_its_size_before_any_read() {
        let d = dir("big");
        let f = d.join("sparse");
        // Sparse: a terabyte that takes no disk, and that a read would never finish.
        File::create(&f).unwrap().set_len(1 << 40).unwrap();
        let p = f.clone();
        let err = within_10s(move || read_regular("a case file", &p, 4 * MIB))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "{}: 1 TiB, over the 4 MiB limit for a case file",
                f.display()
            )
        );
        // One byte over is over; the limit itself is not.
        std::fs::write(&f, [b'x'; 11]).unwrap();
        assert!(matches!(
            read_regular("x", &f, 10).unwrap_err().problem,
            Problem::TooBig { size: 11, .. }
        ));
        assert_eq!(read_regular("x", &f, 11).unwrap().len(), 11);
    }

    #[test]
    fn a_file_longer_than_its_size_says_is_caught_at_the_limit() {
        // /proc files say they are empty and are not: what a file that grows while read looks
        // like to the reader.
        let status = Path::new("/proc/self/status");
        if !status.exists() {
            return;
        }
        let err = read_regular("a status", status, 16).unwrap_err();
        assert!(
            matches!(err.problem, Problem::Grew { limit: 16, .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .ends_with("grew past the 16 bytes limit for a status while being read"),
            "{err}"
        );
        assert!(read_regular("a status", status, MIB).unwrap().len() > 16);
    }

    /// A file that never ends: what a regular file appended to faster than it is read looks
    /// like. It fails after 1 MiB so that a reader without a limit ends too, in a failed test.
    struct Endless {
        served: u64,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.served >= MIB {
                return Err(std::io::Error::other("read past 1 MiB"));
            }
            buf.fill(b'x');
            self.served += buf.len() as u64;
            Ok(buf.len())
        }
    }

    #[test]
    fn a_file_that_grows_while_read_is_read_one_byte_past_the_limit_and_no_further() {
        let mut endless = Endless { served: 0 };
        let got = read_at_most("a log", &mut endless, 10, 100);
        assert!(
            matches!(&got, Err(Problem::Grew { limit: 100, .. })),
            "{got:?}"
        );
        assert_eq!(endless.served, 101);
        assert_eq!(
            got.unwrap_err().to_string(),
            "grew past the 100 bytes limit for a log while being read"
        );
    }

    #[test]
    fn text_loses_a_leading_byte_order_mark_and_must_be_utf8() {
        let d = dir("text");
        let f = d.join("t");
        std::fs::write(&f, "\u{feff}a,pass\n\u{feff}").unwrap();
        assert_eq!(read_text("x", &f, MIB).unwrap(), "a,pass\n\u{feff}");
        std::fs::write(&f, b"ok\xff").unwrap();
        let err = read_text("x", &f, MIB).unwrap_err().to_string();
        assert!(
            err.ends_with("not UTF-8 text (invalid byte at offset 2)"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_file_is_missing_and_named() {
        let p = Path::new("/nonexistent/clhip-input-test");
        let err = read_regular("x", p, MIB).unwrap_err();
        assert!(err.is_missing());
        assert!(
            err.to_string()
                .starts_with("/nonexistent/clhip-input-test: cannot read: "),
            "{err}"
        );
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(12), "12 bytes");
        assert_eq!(size_text(64 * KIB), "64 KiB");
        assert_eq!(size_text(512 * MIB), "512 MiB");
        assert_eq!(size_text(4 * MIB + 1), "4194305 bytes");
        assert_eq!(size_text(3 * MIB / 2), "1536 KiB");
        assert_eq!(size_text(1 << 40), "1 TiB");
    }
}
