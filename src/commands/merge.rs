//! `clhip merge`: the shards of a partitioned run joined into one results file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clhip::output;
use clhip::report::{self, RunStatus};

use super::note;

#[derive(clap::Args)]
pub struct MergeArgs {
    /// The shards' results files.
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// The merged results file.
    #[arg(long, short = 'o')]
    output: PathBuf,
    /// Also write the merged run as JUnit XML to this file: a suite per pair, with its time.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

/// Exit 1 when the merge is not a whole run (a shard missing or incomplete).
pub fn merge(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let MergeArgs {
        shards,
        output,
        junit,
    } = args;
    let target = output::check("-o", &output)?;
    let junit = output::check_given("--junit", junit.as_deref())?;
    let inputs: Vec<(&str, &Path)> = shards.iter().map(|p| ("shard", p.as_path())).collect();
    let outs: Vec<(&str, &output::Target)> = std::iter::once(("-o", &target))
        .chain(junit.iter().map(|j| ("--junit", j)))
        .collect();
    output::refuse_collisions(&outs, &inputs)?;
    let paths: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let merged = clhip::merge::merge(&paths)?;
    report::write_json(&merged, &target)?;
    if let Some(j) = &junit {
        report::write_junit(&merged, j)?;
    }
    note(&format!(
        "clhip: merged {} shards ({} results) into {}: {}",
        shards.len(),
        merged.results.len(),
        output.display(),
        merged.status.describe()
    ));
    Ok(if merged.status == RunStatus::Complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
