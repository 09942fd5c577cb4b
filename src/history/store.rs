//! The history store: one SQLite file that holds every imported run and its results, so that
//! a year of nights is read in one query instead of a year of JSON files parsed again.
//!
//! Tables (the file can be read with any SQLite client):
//! - `runs`: one row per imported results file: the file as given, its content hash (a file
//!   already imported is skipped by it), start time, seed, clhip version (and commit where the
//!   file records one), status and problems as the loader judged them, fingerprint lines,
//!   selection (JSON).
//! - `cases`: case ids, interned.
//! - `reasons`: outcome reasons, interned (most repeat night after night).
//! - `results`: per run and case, the outcome kind, verdict, expectation, duration and reason.
//! - `measures`: per run and case, optional numbers by name beside the duration (peak host or
//!   device memory, once results files carry them): a results file without them stores none.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, bail};
use rusqlite::{Connection, OptionalExtension, params};

use crate::model::{OutcomeKind, Verdict};

/// `PRAGMA application_id` of a history store: "clhH". A SQLite file without it is some other
/// program's database, and is not written.
const APPLICATION_ID: i32 = 0x636c_6848;
/// `PRAGMA user_version`: the layout below. A store of another version is refused.
pub const STORE_VERSION: i32 = 1;

const LAYOUT: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    file TEXT NOT NULL,
    content_hash TEXT NOT NULL UNIQUE,
    bytes INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    seed INTEGER NOT NULL,
    clhip_version TEXT NOT NULL,
    clhip_commit TEXT,
    status TEXT NOT NULL,
    problems TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    selection TEXT,
    imported_at TEXT NOT NULL
);
CREATE INDEX runs_by_start ON runs (started_at, id);
CREATE TABLE cases (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE reasons (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE TABLE results (
    case_id INTEGER NOT NULL REFERENCES cases (id),
    run INTEGER NOT NULL REFERENCES runs (id),
    outcome TEXT NOT NULL,
    verdict TEXT NOT NULL,
    expectation TEXT NOT NULL,
    duration_s REAL NOT NULL,
    reason INTEGER NOT NULL REFERENCES reasons (id),
    PRIMARY KEY (case_id, run)
) WITHOUT ROWID;
CREATE TABLE measures (
    case_id INTEGER NOT NULL REFERENCES cases (id),
    run INTEGER NOT NULL REFERENCES runs (id),
    name TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (case_id, name, run)
) WITHOUT ROWID;
";

/// An open history store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// A run to store.
pub struct NewRun<'a> {
    pub file: &'a str,
    pub content_hash: &'a str,
    pub bytes: u64,
    pub started_at: &'a str,
    pub seed: u64,
    pub clhip_version: &'a str,
    pub clhip_commit: Option<&'a str>,
    pub status: &'a str,
    pub problems: &'a [String],
    pub fingerprint: &'a [String],
    pub selection: Option<String>,
}

/// One case's result in a run to store.
pub struct NewResult {
    pub case: String,
    pub outcome: OutcomeKind,
    pub verdict: Verdict,
    pub expectation: String,
    pub duration_s: f64,
    pub reason: String,
    /// Optional numbers beside the duration, by name.
    pub measures: Vec<(String, f64)>,
}

/// A stored run.
#[derive(Debug, Clone)]
pub struct Run {
    pub id: i64,
    pub file: String,
    pub started_at: String,
    pub seed: u64,
    pub clhip_version: String,
    pub clhip_commit: Option<String>,
    pub status: String,
    pub problems: Vec<String>,
    pub fingerprint: Vec<String>,
}

/// One stored result, without its reason (read on demand: [`Store::reason`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoredResult {
    pub case_id: i64,
    pub run: i64,
    pub outcome: OutcomeKind,
    pub verdict: Verdict,
    pub duration_s: f64,
}

/// The stored spelling of a verdict.
pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::ExpectedNonPass => "expected-non-pass",
        Verdict::CaughtStaleRead => "caught-stale-read",
        Verdict::UnexpectedPass => "unexpected-pass",
        Verdict::Flaky => "flaky",
        Verdict::Regression => "regression",
        Verdict::HarnessError => "harness-error",
    }
}

fn verdict_from(name: &str) -> Option<Verdict> {
    [
        Verdict::Pass,
        Verdict::ExpectedNonPass,
        Verdict::CaughtStaleRead,
        Verdict::UnexpectedPass,
        Verdict::Flaky,
        Verdict::Regression,
        Verdict::HarnessError,
    ]
    .into_iter()
    .find(|v| verdict_name(*v) == name)
}

impl Store {
    /// Opens the store at `path`, making a new one there when `create` allows it and nothing
    /// (or an empty file) is there. A file that is not a history store, or one of another
    /// version, is refused naming it, and is not written.
    pub fn open(path: &Path, create: bool) -> anyhow::Result<Store> {
        let shown = path.display();
        let exists = match std::fs::metadata(path) {
            Ok(m) if m.is_file() => m.len() > 0,
            Ok(_) => bail!("{shown}: not a regular file, so no history store"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(e).with_context(|| format!("{shown}: cannot read")),
        };
        if !exists && !create {
            bail!(
                "{shown}: no history store there (give results files or directories to import into a new one)"
            );
        }
        let conn = Connection::open(path).with_context(|| format!("{shown}: cannot open"))?;
        let not_ours = |why: String| anyhow::anyhow!("{shown}: not a clhip history store ({why})");
        let (app, version): (i32, i32) = conn
            .query_row(
                "SELECT application_id, user_version FROM pragma_application_id, pragma_user_version",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| not_ours(e.to_string()))?;
        if exists {
            if app != APPLICATION_ID {
                return Err(not_ours(format!(
                    "a SQLite file of application id {app:#x}, not {APPLICATION_ID:#x}"
                )));
            }
            if version != STORE_VERSION {
                bail!(
                    "{shown}: a history store of layout {version}; this clhip reads layout {STORE_VERSION}"
                );
            }
        }
        // A night's import is one transaction: a crash loses at most the file being imported.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .with_context(|| format!("{shown}: setting up"))?;
        conn.pragma_update(None, "foreign_keys", true)
            .with_context(|| format!("{shown}: setting up"))?;
        if !exists {
            conn.execute_batch(&format!(
                "BEGIN; {LAYOUT} PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {STORE_VERSION}; COMMIT;"
            ))
            .with_context(|| format!("{shown}: making a new history store"))?;
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn context(&self, what: &str) -> String {
        format!("{}: {what}", self.path.display())
    }

    /// The file a content hash was imported from, if it was.
    pub fn imported_as(&self, content_hash: &str) -> anyhow::Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT file FROM runs WHERE content_hash = ?1",
                [content_hash],
                |r| r.get(0),
            )
            .optional()
            .with_context(|| self.context("reading runs"))
    }

    /// Stores one run and its results, all or nothing.
    pub fn insert_run(&mut self, run: &NewRun<'_>, results: &[NewResult]) -> anyhow::Result<i64> {
        let context = self.context(&format!("storing {}", run.file));
        let tx = self.conn.transaction().context(context.clone())?;
        let id = {
            tx.execute(
                "INSERT INTO runs (file, content_hash, bytes, started_at, seed, clhip_version,
                    clhip_commit, status, problems, fingerprint, selection, imported_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    run.file,
                    run.content_hash,
                    i64::try_from(run.bytes).unwrap_or(i64::MAX),
                    run.started_at,
                    // SQLite integers are signed: the seed's 64 bits are kept as they are.
                    i64::from_ne_bytes(run.seed.to_ne_bytes()),
                    run.clhip_version,
                    run.clhip_commit,
                    run.status,
                    run.problems.join("\n"),
                    run.fingerprint.join("\n"),
                    run.selection,
                    crate::report::rfc3339_utc(std::time::SystemTime::now()),
                ],
            )
            .context(context.clone())?;
            let id = tx.last_insert_rowid();
            {
                let mut find_case = tx
                    .prepare_cached("SELECT id FROM cases WHERE name = ?1")
                    .context(context.clone())?;
                let mut add_case = tx
                    .prepare_cached("INSERT INTO cases (name) VALUES (?1)")
                    .context(context.clone())?;
                let mut find_reason = tx
                    .prepare_cached("SELECT id FROM reasons WHERE text = ?1")
                    .context(context.clone())?;
                let mut add_reason = tx
                    .prepare_cached("INSERT INTO reasons (text) VALUES (?1)")
                    .context(context.clone())?;
                let mut add_result = tx
                    .prepare_cached(
                        "INSERT INTO results (case_id, run, outcome, verdict, expectation, duration_s, reason)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )
                    .context(context.clone())?;
                let mut add_measure = tx
                    .prepare_cached(
                        "INSERT INTO measures (case_id, run, name, value) VALUES (?1, ?2, ?3, ?4)",
                    )
                    .context(context.clone())?;
                for r in results {
                    let case_id = match find_case
                        .query_row([&r.case], |row| row.get::<_, i64>(0))
                        .optional()
                        .context(context.clone())?
                    {
                        Some(c) => c,
                        None => {
                            add_case.execute([&r.case]).context(context.clone())?;
                            tx.last_insert_rowid()
                        }
                    };
                    let reason_id = match find_reason
                        .query_row([&r.reason], |row| row.get::<_, i64>(0))
                        .optional()
                        .context(context.clone())?
                    {
                        Some(x) => x,
                        None => {
                            add_reason.execute([&r.reason]).context(context.clone())?;
                            tx.last_insert_rowid()
                        }
                    };
                    add_result
                        .execute(params![
                            case_id,
                            id,
                            r.outcome.name(),
                            verdict_name(r.verdict),
                            r.expectation,
                            r.duration_s,
                            reason_id
                        ])
                        .with_context(|| format!("{context}: case {}", r.case))?;
                    for (name, value) in &r.measures {
                        add_measure
                            .execute(params![case_id, id, name, value])
                            .with_context(|| format!("{context}: case {} {name}", r.case))?;
                    }
                }
            }
            id
        };
        tx.commit().context(context)?;
        Ok(id)
    }

    /// Every stored run, oldest first (by start time; runs that started in the same second in
    /// the order they were imported).
    pub fn runs(&self) -> anyhow::Result<Vec<Run>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, file, started_at, seed, clhip_version, clhip_commit, status, problems,
                    fingerprint FROM runs ORDER BY started_at, id",
            )
            .with_context(|| self.context("reading runs"))?;
        let lines = |s: String| -> Vec<String> {
            if s.is_empty() {
                Vec::new()
            } else {
                s.split('\n').map(str::to_string).collect()
            }
        };
        let rows = stmt
            .query_map([], |r| {
                Ok(Run {
                    id: r.get(0)?,
                    file: r.get(1)?,
                    started_at: r.get(2)?,
                    seed: u64::from_ne_bytes(r.get::<_, i64>(3)?.to_ne_bytes()),
                    clhip_version: r.get(4)?,
                    clhip_commit: r.get(5)?,
                    status: r.get(6)?,
                    problems: lines(r.get(7)?),
                    fingerprint: lines(r.get(8)?),
                })
            })
            .with_context(|| self.context("reading runs"))?;
        rows.collect::<Result<_, _>>()
            .with_context(|| self.context("reading runs"))
    }

    /// Every case id: store id to name.
    pub fn cases(&self) -> anyhow::Result<HashMap<i64, String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, name FROM cases")
            .with_context(|| self.context("reading cases"))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .with_context(|| self.context("reading cases"))?;
        rows.collect::<Result<_, _>>()
            .with_context(|| self.context("reading cases"))
    }

    /// Every stored result, by case, each case's in no particular order.
    pub fn results(&self, mut each: impl FnMut(StoredResult)) -> anyhow::Result<()> {
        let context = self.context("reading results");
        let mut stmt = self
            .conn
            .prepare("SELECT case_id, run, outcome, verdict, duration_s FROM results")
            .context(context.clone())?;
        let mut rows = stmt.query([]).context(context.clone())?;
        while let Some(r) = rows.next().context(context.clone())? {
            let outcome = r.get_ref(2)?.as_str().context(context.clone())?;
            let verdict = r.get_ref(3)?.as_str().context(context.clone())?;
            each(StoredResult {
                case_id: r.get(0)?,
                run: r.get(1)?,
                outcome: OutcomeKind::from_str(outcome)
                    .map_err(|e| anyhow::anyhow!("{context}: {e}"))?,
                verdict: verdict_from(verdict)
                    .with_context(|| format!("{context}: unknown verdict `{verdict}`"))?,
                duration_s: r.get(4)?,
            });
        }
        Ok(())
    }

    /// Every stored measure: (case id, run, name, value).
    pub fn measures(&self, mut each: impl FnMut(i64, i64, &str, f64)) -> anyhow::Result<()> {
        let context = self.context("reading measures");
        let mut stmt = self
            .conn
            .prepare("SELECT case_id, run, name, value FROM measures")
            .context(context.clone())?;
        let mut rows = stmt.query([]).context(context.clone())?;
        while let Some(r) = rows.next().context(context.clone())? {
            each(
                r.get(0)?,
                r.get(1)?,
                r.get_ref(2)?.as_str().context(context.clone())?,
                r.get(3)?,
            );
        }
        Ok(())
    }

    /// The reason stored for a case in a run.
    pub fn reason(&self, case_id: i64, run: i64) -> anyhow::Result<String> {
        self.conn
            .query_row(
                "SELECT reasons.text FROM results JOIN reasons ON reasons.id = results.reason
                 WHERE results.case_id = ?1 AND results.run = ?2",
                [case_id, run],
                |r| r.get(0),
            )
            .with_context(|| self.context("reading a reason"))
    }
}
