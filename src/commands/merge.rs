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
}

/// Exit 1 when the merge is not a whole run (a shard missing or incomplete).
pub fn merge(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let MergeArgs { shards, output } = args;
    let target = output::check("-o", &output)?;
    let inputs: Vec<(&str, &Path)> = shards.iter().map(|p| ("shard", p.as_path())).collect();
    output::refuse_collisions(&[("-o", &target)], &inputs)?;
    let paths: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let merged = clhip::merge::merge(&paths)?;
    report::write_json(&merged, &target)?;
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
