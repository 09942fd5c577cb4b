//! Joining the shards of one run (`--partition`) from several runners into one results file.
//! Shards must describe the same driver: the same fingerprint, seed and results schema; a case
//! may appear in only one shard. The merged run is complete only if every shard is.

use std::path::Path;

use anyhow::{Context, bail};

use crate::report::{self, RunReport, RunStatus};

/// The merged run of `shards` (results files), or why they do not belong together.
pub fn merge(shards: &[&Path]) -> anyhow::Result<RunReport> {
    let Some((first_path, rest)) = shards.split_first() else {
        bail!("nothing to merge: name the shards' results files");
    };
    let mut merged = load(first_path)?;
    let mut seen: std::collections::HashMap<String, String> = merged
        .results
        .iter()
        .map(|r| (r.id.clone(), first_path.display().to_string()))
        .collect();
    for path in rest {
        let shard = load(path)?;
        if shard.fingerprint != merged.fingerprint {
            let ours = merged.fingerprint.lines();
            let theirs = shard.fingerprint.lines();
            let differ: Vec<String> = theirs
                .iter()
                .filter(|l| !ours.contains(l))
                .map(|l| format!("  {}: {l}", path.display()))
                .chain(
                    ours.iter()
                        .filter(|l| !theirs.contains(l))
                        .map(|l| format!("  {}: {l}", first_path.display())),
                )
                .collect();
            bail!(
                "{} and {} were not made on the same driver; their fingerprints differ in:\n{}",
                first_path.display(),
                path.display(),
                differ.join("\n")
            );
        }
        if shard.seed != merged.seed {
            bail!(
                "{} has seed {} and {} seed {}: shards of one run share its seed",
                first_path.display(),
                merged.seed,
                path.display(),
                shard.seed
            );
        }
        for r in &shard.results {
            if let Some(other) = seen.insert(r.id.clone(), path.display().to_string()) {
                bail!(
                    "case `{}` is in both {other} and {}: shards of one run are disjoint",
                    r.id,
                    path.display()
                );
            }
        }
        merged.started_at = merged.started_at.min(shard.started_at);
        merged.wall_s = merged.wall_s.max(shard.wall_s);
        merged.results.extend(shard.results);
        merged.not_run.extend(shard.not_run);
        merged.stale_baseline.extend(shard.stale_baseline);
        merged.broken_vendors.extend(shard.broken_vendors);
        merged.status = worse(merged.status, shard.status);
    }
    merged
        .results
        .sort_by(|a, b| match (a.work.case(), b.work.case()) {
            (Some(x), Some(y)) => x.cmp(y),
            _ => a.id.cmp(&b.id),
        });
    merged.stale_baseline.sort();
    merged.stale_baseline.dedup();
    merged.broken_vendors.sort();
    merged.broken_vendors.dedup();
    merged.command = std::iter::once("clhip merge".to_string())
        .chain(shards.iter().map(|p| p.display().to_string()))
        .collect();
    merged.summary = report::Summary::of(&merged.results);
    Ok(merged)
}

fn load(path: &Path) -> anyhow::Result<RunReport> {
    let loaded = report::load(path).with_context(|| format!("reading shard {}", path.display()))?;
    if let Some(p) = loaded.problems.iter().find(|p| p.contains("inconsistent")) {
        bail!("{p}");
    }
    Ok(loaded.report)
}

/// An incomplete shard makes the merged run incomplete.
fn worse(a: RunStatus, b: RunStatus) -> RunStatus {
    match (&a, &b) {
        (RunStatus::Complete, _) => b,
        _ => a,
    }
}
