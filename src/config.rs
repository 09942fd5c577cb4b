//! Configuration files: named profiles of `run`'s settings, so that a CI job says
//! `--profile nightly` instead of repeating its jobs, time limit, expectation files, retries,
//! outputs and skips on every command line (nextest's profiles). `clhip.toml` in the working
//! directory is read when no `--config FILE` is given; flags given on the command line win
//! over the profile's values, and `--skip` adds to its skips.
//!
//! ```toml
//! version = 1
//!
//! # What every profile starts from, and what a run without --profile gets.
//! [profile.default]
//! timeout = 60
//! skip = ["*/ipc/*"]
//!
//! [profile.nightly]
//! jobs = 4
//! retries = 2
//! expectations = "cases/expectations"
//! json = "out/results.json"
//! junit = "out/junit.xml"
//! markdown = "out/results.md"
//! html = "out/results.html"
//! skip = ["rocm*+hip*/vmm-fd+cl-import/semaphore/*"]
//! require = ["arch: gfx908"]
//! ```
//!
//! Relative paths are relative to the directory that holds the configuration file, so that a
//! profile means the same files wherever clhip is started from.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::cases::{InputError, locate, parse_toml};

/// The file read when no `--config` is given, in the working directory.
pub const DEFAULT_FILE: &str = "clhip.toml";
/// The profile a run gets without `--profile`, and that every other profile starts from.
pub const DEFAULT_PROFILE: &str = "default";

/// Longest per-case limit: a week is already more than any nightly job waits.
pub const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;
/// Shortest: a worker takes longer than this to start, so less would only time out the harness.
pub const MIN_TIMEOUT_S: f64 = 0.1;
/// `--jobs`: worker processes at once per GPU.
pub const MAX_JOBS: u16 = 256;
/// `--retries`: reruns of a case that came out worse than expected.
pub const MAX_RETRIES: u32 = 10;

/// A per-case time limit in seconds, checked against the bounds a run accepts.
pub fn check_timeout(t: f64) -> Result<f64, String> {
    if !(MIN_TIMEOUT_S..=MAX_TIMEOUT_S).contains(&t) {
        return Err(format!(
            "a time limit must be at least {MIN_TIMEOUT_S} s and at most {MAX_TIMEOUT_S} s (a week), not {t}"
        ));
    }
    Ok(t)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: Spanned<u32>,
    #[serde(default)]
    profile: BTreeMap<String, Spanned<ProfileFile>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    jobs: Option<Spanned<i64>>,
    timeout: Option<Spanned<f64>>,
    retries: Option<Spanned<i64>>,
    expectations: Option<Spanned<String>>,
    json: Option<Spanned<String>>,
    junit: Option<Spanned<String>>,
    markdown: Option<Spanned<String>>,
    html: Option<Spanned<String>>,
    #[serde(default)]
    skip: Vec<Spanned<String>>,
    #[serde(default)]
    require: Vec<Spanned<String>>,
}

/// A glob of case ids a profile leaves out, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileSkip {
    pub glob: String,
    /// `file:line`.
    pub at: String,
}

/// One profile as a run applies it: each setting the profile (or the default profile it
/// starts from) gives, paths resolved against the file's directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    pub name: String,
    pub file: PathBuf,
    pub jobs: Option<u16>,
    pub timeout: Option<f64>,
    pub retries: Option<u32>,
    pub expectations: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub html: Option<PathBuf>,
    /// The default profile's skips, then this profile's.
    pub skips: Vec<ProfileSkip>,
    /// Patterns a line of the machine's fingerprint must match (`run --require`), the
    /// default profile's and this one's.
    pub require: Vec<String>,
}

/// A configuration file, parsed and checked: every profile in it, valid or the file is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub path: PathBuf,
    profiles: BTreeMap<String, Profile>,
}

impl Config {
    /// Reads and checks `path`; any fault is an error at its line.
    pub fn load(path: &Path) -> Result<Config, InputError> {
        let text =
            crate::input::read_text("a configuration file", path, crate::input::CASES_LIMIT)?;
        Config::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Config, InputError> {
        let raw: File = parse_toml(path, text)?;
        let err = |span: Range<usize>, msg: String| locate(path, text, span.start, msg);
        if *raw.version.get_ref() != 1 {
            return Err(err(
                raw.version.span(),
                format!(
                    "unsupported configuration-file version {} (this clhip reads version 1)",
                    raw.version.get_ref()
                ),
            ));
        }
        let base = path.parent().unwrap_or(Path::new(""));
        let mut profiles = BTreeMap::new();
        for (name, p) in &raw.profile {
            profiles.insert(
                name.clone(),
                one_profile(name, p.get_ref(), path, text, base)?,
            );
        }
        // Every profile starts from the default one: what it leaves unset, the default sets.
        if let Some(default) = profiles.get(DEFAULT_PROFILE).cloned() {
            for (name, p) in profiles.iter_mut() {
                if name != DEFAULT_PROFILE {
                    inherit(p, &default);
                }
            }
        }
        Ok(Config {
            path: path.to_path_buf(),
            profiles,
        })
    }

    /// The profiles' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.profiles.keys().map(String::as_str).collect()
    }

    /// Profile `name`; an error naming the file and the profiles it has when there is none.
    pub fn profile(&self, name: &str) -> anyhow::Result<&Profile> {
        self.profiles.get(name).ok_or_else(|| {
            let names = self.names();
            anyhow::anyhow!(
                "{}: no profile `{name}` (it has {})",
                self.path.display(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )
        })
    }

    /// The default profile, if the file has one.
    pub fn default_profile(&self) -> Option<&Profile> {
        self.profiles.get(DEFAULT_PROFILE)
    }
}

fn inherit(p: &mut Profile, default: &Profile) {
    p.jobs = p.jobs.or(default.jobs);
    p.timeout = p.timeout.or(default.timeout);
    p.retries = p.retries.or(default.retries);
    for (mine, theirs) in [
        (&mut p.expectations, &default.expectations),
        (&mut p.json, &default.json),
        (&mut p.junit, &default.junit),
        (&mut p.markdown, &default.markdown),
        (&mut p.html, &default.html),
    ] {
        if mine.is_none() {
            mine.clone_from(theirs);
        }
    }
    // Skips add up: what hangs the driver under the default profile hangs it under any.
    let own = std::mem::take(&mut p.skips);
    p.skips = default.skips.iter().cloned().chain(own).collect();
    let own = std::mem::take(&mut p.require);
    p.require = default.require.iter().cloned().chain(own).collect();
}

fn one_profile(
    name: &str,
    raw: &ProfileFile,
    path: &Path,
    text: &str,
    base: &Path,
) -> Result<Profile, InputError> {
    let err = |span: Range<usize>, msg: String| {
        locate(path, text, span.start, format!("profile `{name}`: {msg}"))
    };
    let jobs = match &raw.jobs {
        Some(j) => match u16::try_from(*j.get_ref()) {
            Ok(n) if (1..=MAX_JOBS).contains(&n) => Some(n),
            _ => {
                return Err(err(
                    j.span(),
                    format!("`jobs` must be 1 to {MAX_JOBS}, not {}", j.get_ref()),
                ));
            }
        },
        None => None,
    };
    let retries = match &raw.retries {
        Some(r) => match u32::try_from(*r.get_ref()) {
            Ok(n) if n <= MAX_RETRIES => Some(n),
            _ => {
                return Err(err(
                    r.span(),
                    format!("`retries` must be 0 to {MAX_RETRIES}, not {}", r.get_ref()),
                ));
            }
        },
        None => None,
    };
    let timeout = match &raw.timeout {
        Some(t) => Some(
            check_timeout(*t.get_ref()).map_err(|m| err(t.span(), format!("`timeout`: {m}")))?,
        ),
        None => None,
    };
    let path_of = |key: &str, v: &Option<Spanned<String>>| -> Result<Option<PathBuf>, InputError> {
        match v {
            Some(s) if s.get_ref().trim().is_empty() => {
                Err(err(s.span(), format!("`{key}` is an empty path")))
            }
            Some(s) => Ok(Some(base.join(s.get_ref()))),
            None => Ok(None),
        }
    };
    let mut skips = Vec::new();
    for g in &raw.skip {
        if g.get_ref().trim().is_empty() {
            return Err(err(
                g.span(),
                "an empty `skip` glob would leave out every case".into(),
            ));
        }
        skips.push(ProfileSkip {
            glob: g.get_ref().clone(),
            at: format!(
                "{}:{}",
                path.display(),
                locate(path, text, g.span().start, "").line
            ),
        });
    }
    let mut require = Vec::new();
    for r in &raw.require {
        if r.get_ref().trim().is_empty() {
            return Err(err(
                r.span(),
                "an empty `require` pattern would match any machine".into(),
            ));
        }
        require.push(r.get_ref().clone());
    }
    Ok(Profile {
        name: name.to_string(),
        file: path.to_path_buf(),
        jobs,
        timeout,
        retries,
        expectations: path_of("expectations", &raw.expectations)?,
        json: path_of("json", &raw.json)?,
        junit: path_of("junit", &raw.junit)?,
        markdown: path_of("markdown", &raw.markdown)?,
        html: path_of("html", &raw.html)?,
        skips,
        require,
    })
}

/// The profile a run applies: `--profile NAME` from `--config FILE`, else from [`DEFAULT_FILE`]
/// in the working directory; without `--profile`, the file's default profile if it has one.
/// `None` when no file is named or found and no profile asked for.
pub fn select(config: Option<&Path>, profile: Option<&str>) -> anyhow::Result<Option<Profile>> {
    let file = match config {
        Some(f) => Config::load(f)?,
        None => {
            let here = Path::new(DEFAULT_FILE);
            if here.exists() {
                Config::load(here)?
            } else if let Some(name) = profile {
                anyhow::bail!(
                    "--profile {name}: no configuration file ({DEFAULT_FILE} in the working directory, or --config FILE)"
                );
            } else {
                return Ok(None);
            }
        }
    };
    match profile {
        Some(name) => Ok(Some(file.profile(name)?.clone())),
        None => match file.default_profile() {
            Some(p) => Ok(Some(p.clone())),
            // A file named on the command line that gives the run nothing is a mistake.
            None if config.is_some() => anyhow::bail!(
                "{}: no --profile given and no [profile.{DEFAULT_PROFILE}] in it",
                file.path.display()
            ),
            None => Ok(None),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"version = 1

[profile.default]
timeout = 60
skip = ["*/ipc/*"]

[profile.nightly]
jobs = 4
retries = 2
expectations = "cases/expectations"
json = "out/results.json"
skip = ["*/fft/*"]
require = ["arch: gfx908"]
"#;

    #[test]
    fn a_profile_starts_from_the_default_one_and_resolves_paths_by_the_file() {
        let c = Config::parse(Path::new("ci/clhip.toml"), FILE).unwrap();
        assert_eq!(c.names(), ["default", "nightly"]);
        let n = c.profile("nightly").unwrap();
        assert_eq!(
            (n.jobs, n.retries, n.timeout),
            (Some(4), Some(2), Some(60.0))
        );
        assert_eq!(
            n.expectations.as_deref(),
            Some(Path::new("ci/cases/expectations"))
        );
        assert_eq!(n.json.as_deref(), Some(Path::new("ci/out/results.json")));
        assert_eq!(n.junit, None);
        let skips: Vec<(&str, &str)> = n
            .skips
            .iter()
            .map(|s| (s.glob.as_str(), s.at.as_str()))
            .collect();
        assert_eq!(
            skips,
            [
                ("*/ipc/*", "ci/clhip.toml:5"),
                ("*/fft/*", "ci/clhip.toml:12")
            ]
        );
        assert_eq!(n.require, ["arch: gfx908"]);
        let d = c.default_profile().unwrap();
        assert_eq!((d.jobs, d.skips.len()), (None, 1));
        let e = c.profile("nighty").unwrap_err().to_string();
        assert!(
            e.contains("ci/clhip.toml: no profile `nighty` (it has `default`, `nightly`)"),
            "{e}"
        );
    }

    #[test]
    fn malformed_files_name_file_and_line() {
        let at = |text: &str| {
            let e = Config::parse(Path::new("clhip.toml"), text).unwrap_err();
            (e.line, e.to_string())
        };
        let (line, e) = at(&FILE.replace("jobs = 4", "jobs = 0"));
        assert_eq!(line, 8, "{e}");
        assert!(
            e.contains("profile `nightly`: `jobs` must be 1 to 256, not 0"),
            "{e}"
        );
        let (line, e) = at(&FILE.replace("retries = 2", "retries = 11"));
        assert_eq!(line, 9, "{e}");
        let (line, e) = at(&FILE.replace("timeout = 60", "timeout = 0"));
        assert_eq!(line, 4, "{e}");
        assert!(e.contains("`timeout`"), "{e}");
        let (line, e) = at(&FILE.replace("retries = 2", "retires = 2"));
        assert_eq!(line, 9, "{e}");
        assert!(e.contains("retires"), "{e}");
        let (line, e) = at(&FILE.replace("\"*/fft/*\"", "\"\""));
        assert_eq!(line, 12, "{e}");
        let (line, e) = at(&FILE.replace("jobs = 4", "jobs = \"four\""));
        assert_eq!(line, 8, "{e}");
        let (line, e) = at(&FILE.replace("[\"arch: gfx908\"]", "[\" \"]"));
        assert_eq!(line, 13, "{e}");
        assert!(e.contains("`require`"), "{e}");
        let (line, e) = at(&FILE.replace("version = 1", "version = 2"));
        assert_eq!(line, 1, "{e}");
        let (line, e) = at(&FILE.replace("json = \"out/results.json\"", "json = \"\""));
        assert_eq!(line, 11, "{e}");
        assert!(e.starts_with("clhip.toml:11:"), "{e}");
    }

    #[test]
    fn timeouts_take_whole_and_fractional_seconds_within_bounds() {
        let c = Config::parse(
            Path::new("c.toml"),
            "version = 1\n[profile.a]\ntimeout = 0.5\n[profile.b]\ntimeout = 30\n",
        )
        .unwrap();
        assert_eq!(c.profile("a").unwrap().timeout, Some(0.5));
        assert_eq!(c.profile("b").unwrap().timeout, Some(30.0));
        assert!(check_timeout(MAX_TIMEOUT_S + 1.0).is_err());
        assert!(check_timeout(MIN_TIMEOUT_S / 2.0).is_err());
    }
}
