//! Importing results files into the store: files named one by one, or directories of CI
//! artifacts searched for `*.json` results files. Each file is read once through
//! [`crate::input`], judged by the results loader, and stored in a transaction of its own, in
//! the order of the runs' start times. A file already imported (by content) is skipped; a JSON
//! file of another kind found in a directory is skipped and named; a corrupt one is an error
//! naming it, and the other files are imported all the same.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};

use super::store::{NewResult, NewRun, Store};
use crate::report::{Loaded, RunReport};

/// What an import did, file by file.
#[derive(Debug, Default)]
pub struct Imported {
    /// Files stored, in the order stored (by start time), with the loader's problems (an
    /// interrupted run, a summary that disagrees...): stored as they are, and shown.
    pub stored: Vec<(PathBuf, Vec<String>)>,
    /// Files whose content is in the store already: with the file it was imported from.
    pub already: Vec<(PathBuf, String)>,
    /// JSON files found in a directory that are not results files: with what they are.
    pub not_results: Vec<(PathBuf, String)>,
    /// Files that could not be imported, each message naming its file.
    pub errors: Vec<String>,
}

/// A file to import: where from, and whether the user named it (a file named is expected to
/// be a results file; one found in a directory may be any JSON).
struct Candidate {
    path: PathBuf,
    named: bool,
}

/// The results files named, and the `*.json` files under the directories named (links to
/// directories are not followed: an artifact tree can link back into itself).
fn candidates(inputs: &[PathBuf], errors: &mut Vec<String>) -> Vec<Candidate> {
    let mut out = Vec::new();
    for input in inputs {
        match std::fs::metadata(input) {
            Ok(m) if m.is_dir() => {
                for entry in walkdir::WalkDir::new(input).sort_by_file_name() {
                    match entry {
                        Ok(e)
                            if e.file_type().is_file()
                                && e.path()
                                    .extension()
                                    .is_some_and(|x| x.eq_ignore_ascii_case("json")) =>
                        {
                            out.push(Candidate {
                                path: e.into_path(),
                                named: false,
                            });
                        }
                        Ok(_) => {}
                        Err(e) => errors.push(format!(
                            "{}: cannot search: {}",
                            e.path().unwrap_or(input).display(),
                            e.io_error().map_or(e.to_string(), ToString::to_string)
                        )),
                    }
                }
            }
            Ok(_) => out.push(Candidate {
                path: input.clone(),
                named: true,
            }),
            Err(e) => errors.push(format!("{}: cannot read: {e}", input.display())),
        }
    }
    out
}

/// The content hash a file is known by in the store.
pub fn content_hash(text: &str) -> String {
    format!(
        "fnv1a64:{:016x}:{}",
        crate::hash::fnv1a64(text.as_bytes()),
        text.len()
    )
}

/// What the first look at a file found.
enum Kind {
    /// A results file or journal, and the run's start time (empty if it has none: the loader
    /// will say so).
    Results { started_at: String },
    /// JSON of another kind: what it is.
    Other(String),
}

/// Tells a results file (or a run's journal) from other JSON without judging it: a file that
/// is not JSON at all, or not whole, is a corrupt file and an error.
fn look(path: &Path, text: &str) -> anyhow::Result<Kind> {
    #[derive(Deserialize)]
    struct Head {
        schema: Option<serde_json::Value>,
        started_at: Option<serde_json::Value>,
    }
    #[derive(Deserialize)]
    struct JournalHead {
        schema: String,
        report: Head,
    }
    let started = |h: &Head| {
        h.started_at
            .as_ref()
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    if let Some(Ok(j)) = text.lines().next().map(serde_json::from_str::<JournalHead>)
        && j.schema == crate::output::JOURNAL_SCHEMA
    {
        return Ok(Kind::Results {
            started_at: started(&j.report),
        });
    }
    let head: Head = serde_json::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}:{}:{}: {e}", path.display(), e.line(), e.column()))?;
    Ok(match &head.schema {
        Some(serde_json::Value::String(s)) if s.starts_with("clhip-results/") => Kind::Results {
            started_at: started(&head),
        },
        Some(serde_json::Value::String(s)) => Kind::Other(format!("schema `{s}`")),
        Some(_) => Kind::Other("a `schema` that is no string".into()),
        None => Kind::Other("no `schema` field".into()),
    })
}

/// Imports `inputs` into `store`. Errors of single files are collected in the answer, never
/// returned: a corrupt file does not stop the others. An error of the store itself (a full
/// disk) is returned, after which nothing more is imported.
pub fn import(store: &mut Store, inputs: &[PathBuf]) -> anyhow::Result<Imported> {
    let mut done = Imported::default();
    let found = candidates(inputs, &mut done.errors);
    // First look: what each file is, and when its run started, so that runs are stored in
    // the order they ran.
    let mut todo: Vec<(String, Candidate)> = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for c in found {
        let text =
            match crate::input::read_text("a results file", &c.path, crate::input::RESULTS_LIMIT) {
                Ok(t) => t,
                Err(e) => {
                    done.errors.push(e.to_string());
                    continue;
                }
            };
        let hash = content_hash(&text);
        if let Some(file) = store.imported_as(&hash)? {
            done.already.push((c.path, file));
            continue;
        }
        if let Some(first) = seen.get(&hash) {
            done.already.push((c.path, first.display().to_string()));
            continue;
        }
        match look(&c.path, &text) {
            Ok(Kind::Results { started_at }) => {
                seen.insert(hash, c.path.clone());
                todo.push((started_at, c));
            }
            Ok(Kind::Other(what)) if !c.named => done.not_results.push((c.path, what)),
            Ok(Kind::Other(what)) => done.errors.push(format!(
                "{}: not a clhip results file ({what})",
                c.path.display()
            )),
            Err(e) => done.errors.push(format!("{e:#}")),
        }
    }
    todo.sort_by(|a, b| (&a.0, &a.1.path).cmp(&(&b.0, &b.1.path)));
    for (_, c) in todo {
        // Read again: the first look kept no text, so that a year of nights is not held in
        // memory at once. The hash stored is of the text judged here.
        let text =
            match crate::input::read_text("a results file", &c.path, crate::input::RESULTS_LIMIT) {
                Ok(t) => t,
                Err(e) => {
                    done.errors.push(e.to_string());
                    continue;
                }
            };
        match prepare(&c.path, &text) {
            Ok((loaded, results, commit)) => {
                let hash = content_hash(&text);
                if store.imported_as(&hash)?.is_some() {
                    continue;
                }
                let report = &loaded.report;
                let file = c.path.display().to_string();
                let fingerprint = report.fingerprint.lines();
                let selection = report
                    .selection
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()
                    .context("encoding a selection")?;
                let run = NewRun {
                    file: &file,
                    content_hash: &hash,
                    bytes: text.len() as u64,
                    started_at: &report.started_at,
                    seed: report.seed,
                    clhip_version: &report.clhip_version,
                    clhip_commit: commit.as_deref(),
                    status: &report.status.describe(),
                    problems: &loaded.problems,
                    fingerprint: &fingerprint,
                    selection,
                };
                store.insert_run(&run, &results)?;
                done.stored.push((c.path, loaded.problems));
            }
            Err(e) => done.errors.push(format!("{e:#}")),
        }
    }
    Ok(done)
}

/// A results file judged by the loader, with what the store keeps of each result, and the
/// clhip commit it records, if any.
fn prepare(path: &Path, text: &str) -> anyhow::Result<(Loaded, Vec<NewResult>, Option<String>)> {
    let loaded = crate::report::load_text(path, text)?;
    let report: &RunReport = &loaded.report;
    // Checked here, not only among the loader's problems: the store keeps one result per case
    // and run, and which of two a file meant is not for history to guess.
    let mut ids = std::collections::HashSet::new();
    if let Some(r) = report.results.iter().find(|r| !ids.insert(r.id.as_str())) {
        anyhow::bail!(
            "{}: case `{}` has more than one result: not imported",
            path.display(),
            r.id
        );
    }
    let extras = extras(path, text)?;
    let mut measures: HashMap<&str, Vec<(String, f64)>> = extras
        .results
        .iter()
        .map(|r| (r.id.as_str(), r.numbers.clone()))
        .collect();
    let results = report
        .results
        .iter()
        .map(|r| NewResult {
            case: r.id.clone(),
            outcome: r.outcome.kind(),
            verdict: r.verdict(),
            expectation: expectation_name(r.expectation),
            duration_s: r.duration_s,
            reason: r.outcome.reason(),
            measures: measures.remove(r.id.as_str()).unwrap_or_default(),
        })
        .collect();
    Ok((loaded, results, extras.clhip_commit))
}

fn expectation_name(e: crate::model::Expectation) -> String {
    use crate::model::Expectation as E;
    match e {
        E::Pass => "pass".into(),
        E::Unbaselined => "unbaselined".into(),
        E::Known(k) => format!("known {k}"),
        E::KnownFlaky(a, b) => format!("known flake {a} or {b}"),
        E::NegativeControl => "negative-control".into(),
    }
}

/// What a results file carries beyond what this build's records know, for the store's
/// optional numbers: per result, each number it has beside the fields clhip writes today
/// (`peak_rss_bytes`), and each number of an object beside them (`footprint.device_bytes`);
/// and a `clhip_commit` of the run.
#[derive(Deserialize, Default)]
struct Extras {
    #[serde(default)]
    results: Vec<ResultNumbers>,
    #[serde(default)]
    clhip_commit: Option<String>,
}

/// The fields of a result clhip writes today: not measures.
const KNOWN_RESULT_FIELDS: &[&str] = &[
    "id",
    "work",
    "outcome",
    "expectation",
    "duration_s",
    "kernel_log",
    "reruns",
    "fails_only_after",
];

struct ResultNumbers {
    id: String,
    numbers: Vec<(String, f64)>,
}

impl<'de> Deserialize<'de> for ResultNumbers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ResultNumbers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a result")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResultNumbers, A::Error> {
                let mut id = String::new();
                let mut numbers = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "id" {
                        id = map.next_value()?;
                    } else if KNOWN_RESULT_FIELDS.contains(&key.as_str()) {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        match map.next_value::<Numbers>()? {
                            Numbers::One(n) => numbers.push((key, n)),
                            Numbers::Named(named) => numbers
                                .extend(named.into_iter().map(|(k, n)| (format!("{key}.{k}"), n))),
                        }
                    }
                }
                Ok(ResultNumbers { id, numbers })
            }
        }
        d.deserialize_map(V)
    }
}

/// A value beside a result's known fields: a number, an object's numbers, or nothing to keep.
enum Numbers {
    One(f64),
    Named(Vec<(String, f64)>),
}

impl<'de> Deserialize<'de> for Numbers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Numbers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_u64<E>(self, n: u64) -> Result<Numbers, E> {
                Ok(Numbers::One(n as f64))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Numbers, E> {
                Ok(Numbers::One(n as f64))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Numbers, E> {
                Ok(Numbers::One(n))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Numbers, A::Error> {
                let mut named = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if let Some(n) = map.next_value::<serde_json::Value>()?.as_f64() {
                        named.push((key, n));
                    }
                }
                Ok(Numbers::Named(named))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Numbers, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Numbers::Named(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Numbers, E> {
                Ok(Numbers::Named(Vec::new()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Numbers, E> {
                Ok(Numbers::Named(Vec::new()))
            }
            fn visit_unit<E>(self) -> Result<Numbers, E> {
                Ok(Numbers::Named(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// [`Extras`] of a results file, or of a journal (a header line, then one result a line, the
/// last of which may be cut short).
fn extras(path: &Path, text: &str) -> anyhow::Result<Extras> {
    let located = |e: serde_json::Error| {
        anyhow::anyhow!("{}:{}:{}: {e}", path.display(), e.line(), e.column())
    };
    if text
        .lines()
        .next()
        .is_some_and(|l| l.contains(crate::output::JOURNAL_SCHEMA))
    {
        let lines: Vec<&str> = text.lines().skip(1).collect();
        let mut results = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            match serde_json::from_str::<ResultNumbers>(line) {
                Ok(r) => results.push(r),
                Err(_) if i + 1 == lines.len() => {}
                Err(e) => return Err(located(e)),
            }
        }
        return Ok(Extras {
            results,
            clhip_commit: None,
        });
    }
    serde_json::from_str(text).map_err(located)
}
