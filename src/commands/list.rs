//! `clhip list`: the ids of the cases `run` would execute, here or on the machine a saved
//! probe describes, with each case's expectation where expectation files are given.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clhip::expectations::Expectations;
use clhip::plan;
use clhip::probe::Probe;

use super::outputs::Stdout;
use super::{check_expectations, existing_dir, load_matrix, note, skip_globs, skip_source};

#[derive(clap::Args)]
pub struct ListArgs {
    /// Globs (`*` wildcard) or substrings of case ids.
    filters: Vec<String>,
    /// Case matrix file (default: the built-in cases/default.toml).
    #[arg(long)]
    cases: Option<PathBuf>,
    /// List for a saved `probe --json` of another machine instead of this one: what a
    /// runner there would execute.
    #[arg(long, conflicts_with = "rocm_path")]
    probe: Option<PathBuf>,
    /// The ROCm installs whose HIP devices to pair (as `run --rocm-path`, repeatable).
    #[arg(long, value_parser = existing_dir)]
    rocm_path: Vec<PathBuf>,
    /// Show each case's expectation from these expectation files (a file or directory),
    /// picked by the probe's fingerprint.
    #[arg(long)]
    expectations: Option<PathBuf>,
    /// Only the pairs of these GPUs, as `run --devices`.
    #[arg(long, value_delimiter = ',')]
    devices: Vec<String>,
    /// Mark the cases this glob or substring of case ids matches as skipped, as `run --skip`.
    #[arg(long, value_name = "GLOB")]
    skip: Vec<String>,
    /// Configuration file of named profiles, as `run --config`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Show what `run --profile NAME` would: its skips, and its expectations unless
    /// --expectations is given.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
}

pub fn list(mut args: ListArgs) -> anyhow::Result<ExitCode> {
    // Inputs first: a bad configuration or case file fails before anything is probed.
    let profile = clhip::config::select(args.config.as_deref(), args.profile.as_deref())?;
    if let Some(p) = &profile {
        note(&format!(
            "clhip: profile `{}` of {}",
            p.name,
            p.file.display()
        ));
        args.expectations = args.expectations.take().or(p.expectations.clone());
    }
    let skips = skip_globs(profile.as_ref(), &args.skip)?;
    let matrix = load_matrix(args.cases.as_deref())?;
    let probe = match &args.probe {
        Some(f) => load_probe(f)?,
        None => plan::probe_machine(&args.rocm_path)?,
    };
    let known = args
        .expectations
        .as_deref()
        .map(|p| Expectations::load(p, &probe.fingerprint()))
        .transpose()?;
    if let Some(k) = &known {
        let names: Vec<String> = k
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        note(&format!(
            "clhip: expectation files that apply: {}",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ));
        check_expectations(k, &matrix, &probe)?;
        if names.is_empty() {
            for line in k.notes() {
                note(&format!("clhip: {line}"));
            }
        }
    }
    let mut text = String::new();
    for case in plan::planned_cases(&probe, &matrix, &args.filters, &args.devices)? {
        text.push_str(&case.id());
        if let Some(by) = skip_source(&case.id(), &skips, known.as_ref()) {
            text.push_str(&format!("  skip ({by})"));
        } else if let Some(rule) = known.as_ref().and_then(|k| k.rule(&case)) {
            text.push_str(&format!(
                "  expect {} ({}: {})",
                rule.describe(),
                rule.at,
                rule.source
            ));
        }
        text.push('\n');
    }
    Stdout::new().write(&clhip::escape::terminal_text(&text))?;
    Ok(ExitCode::SUCCESS)
}

/// A saved `clhip probe --json`: of this schema, or of none (written before the tag).
fn load_probe(file: &Path) -> anyhow::Result<Probe> {
    let text = clhip::input::read_text("a probe file", file, clhip::input::PROBE_LIMIT)?;
    #[derive(serde::Deserialize)]
    struct Tag {
        schema: Option<String>,
    }
    if let Ok(Tag {
        schema: Some(schema),
    }) = serde_json::from_str(&text)
        && schema != clhip::probe::PROBE_SCHEMA
    {
        anyhow::bail!(
            "{}: schema `{schema}`, but this clhip reads `{}` probe files",
            file.display(),
            clhip::probe::PROBE_SCHEMA
        );
    }
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not a `clhip probe --json` file: {e}",
            file.display(),
            e.line(),
            e.column()
        )
    })
}
