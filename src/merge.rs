//! Joining the shards of one run (`--partition`) from several runners into one results file.
//! Shards must be of one run: the same driver fingerprint, clhip version and build, plant, seed,
//! filters, case matrix, plan and partition count, and each shard given once. Anything else is refused. The
//! shards' cases are then disjoint: `load` refuses a file holding a case of a shard it does not
//! hold. A merge that lacks some shards is made, but its status says which
//! are missing: the merged run is complete only when every shard is there and complete.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};

use crate::partition::Partition;
use crate::report::{self, RunReport, RunStatus, Selection};

/// The merged run of `shards` (results files), or why they do not belong together.
pub fn merge(shards: &[&Path]) -> anyhow::Result<RunReport> {
    let Some((first_path, rest)) = shards.split_first() else {
        bail!("nothing to merge: name the shards' results files");
    };
    let (mut merged, first_selection) = load(first_path)?;
    let mut held: HashMap<Partition, &Path> = first_selection
        .held()
        .into_iter()
        .map(|p| (p, *first_path))
        .collect();
    let mut status = worse(RunStatus::Complete, own_status(&merged.status));
    for path in rest {
        let (shard, selection) = load(path)?;
        same_run(
            (first_path, &merged, &first_selection),
            (path, &shard, &selection),
        )?;
        for p in selection.held() {
            if let Some(other) = held.insert(p, path) {
                bail!(
                    "shard {p} is in both {} and {}: each shard of a run is merged once",
                    other.display(),
                    path.display()
                );
            }
        }
        status = worse(status, own_status(&shard.status));
        merged.started_at = merged.started_at.min(shard.started_at);
        merged.wall_s = merged.wall_s.max(shard.wall_s);
        merged.results.extend(shard.results);
        merged.not_run.extend(shard.not_run);
        merged.stale_baseline.extend(shard.stale_baseline);
        merged.broken_vendors.extend(shard.broken_vendors);
    }
    merged
        .results
        .sort_by(|a, b| match (a.work.case(), b.work.case()) {
            (Some(x), Some(y)) => x.cmp(y),
            _ => a.id.cmp(&b.id),
        });
    merged.not_run.sort();
    merged.stale_baseline.sort();
    merged.stale_baseline.dedup();
    merged.broken_vendors.sort();
    merged.broken_vendors.dedup();
    let mut shards_held: Vec<Partition> = held.into_keys().collect();
    shards_held.sort();
    let selection = Selection {
        shards: shards_held,
        ..first_selection
    };
    let missing = selection.missing();
    // An incomplete shard says more than the missing ones (its cases not run are listed), and
    // the missing shards stay on record in the selection.
    merged.status = match status {
        RunStatus::Complete if !missing.is_empty() => RunStatus::MissingShards { missing },
        other => other,
    };
    merged.selection = Some(selection);
    merged.command = std::iter::once("clhip merge".to_string())
        .chain(shards.iter().map(|p| p.display().to_string()))
        .collect();
    merged.summary = report::Summary::of(&merged.results);
    Ok(merged)
}

/// A shard and what it selected, refused if it contradicts itself or does not say which shard
/// of what it is.
fn load(path: &Path) -> anyhow::Result<(RunReport, Selection)> {
    let loaded = report::load(path).with_context(|| format!("reading shard {}", path.display()))?;
    if let Some(p) = loaded.problems.iter().find(|p| p.contains("inconsistent")) {
        bail!("{p}");
    }
    match loaded.report.selection.clone() {
        Some(selection) => Ok((loaded.report, selection)),
        None => bail!(
            "{}: the file does not record its partition, filters or plan (clhip {} did not), so it cannot be shown to be a shard of the same run as the others: merge shards run by this clhip",
            path.display(),
            loaded.report.clhip_version
        ),
    }
}

/// Refuses a shard unless it is another shard of the first one's run.
fn same_run(
    (first_path, first, x): (&Path, &RunReport, &Selection),
    (path, shard, y): (&Path, &RunReport, &Selection),
) -> anyhow::Result<()> {
    let (a, b) = (first_path.display(), path.display());
    if shard.fingerprint != first.fingerprint {
        let ours = first.fingerprint.lines();
        let theirs = shard.fingerprint.lines();
        let differ: Vec<String> = theirs
            .iter()
            .filter(|l| !ours.contains(l))
            .map(|l| format!("  {b}: {l}"))
            .chain(
                ours.iter()
                    .filter(|l| !theirs.contains(l))
                    .map(|l| format!("  {a}: {l}")),
            )
            .collect();
        bail!(
            "{a} and {b} were not made on the same driver; their fingerprints differ in:\n{}",
            differ.join("\n")
        );
    }
    if shard.seed != first.seed {
        bail!(
            "{a} has seed {} and {b} seed {}: shards of one run share its seed",
            first.seed,
            shard.seed
        );
    }
    if shard.clhip_version != first.clhip_version {
        bail!(
            "{a} was made by clhip {} and {b} by clhip {}: shards of one run come from one clhip",
            first.clhip_version,
            shard.clhip_version
        );
    }
    if shard.build != first.build {
        let describe = |r: &RunReport| {
            r.build
                .as_ref()
                .map_or("not recorded".into(), |b| b.describe())
        };
        bail!(
            "{a} was made by clhip built from {} and {b} by one built from {}: shards of one run \
             come from one build",
            describe(first),
            describe(shard)
        );
    }
    if shard.planted != first.planted {
        let describe = |r: &RunReport| {
            r.planted
                .as_ref()
                .map_or("no plant".into(), |p| p.describe())
        };
        bail!(
            "{a} was planted with {} and {b} with {}: shards of one run share its plant",
            describe(first),
            describe(shard)
        );
    }
    let differ = |what: &str, ours: String, theirs: String| -> anyhow::Result<()> {
        if ours != theirs {
            bail!(
                "{a} and {b} are not shards of one run: their {what} differ ({a}: {ours}; {b}: {theirs})"
            );
        }
        Ok(())
    };
    differ(
        "filters",
        format!("{:?}", x.filters),
        format!("{:?}", y.filters),
    )?;
    differ(
        "devices",
        format!("{:?}", x.devices),
        format!("{:?}", y.devices),
    )?;
    differ("case matrices", x.matrix.clone(), y.matrix.clone())?;
    differ(
        "plans",
        format!("{} cases, {}", x.planned, x.plan),
        format!("{} cases, {}", y.planned, y.plan),
    )?;
    let split = |s: &Selection| match s.held().first() {
        Some(p) if p.of > 1 => format!("hash:_/{}", p.of),
        _ => "none, the whole plan".to_string(),
    };
    differ("partitions", split(x), split(y))?;
    Ok(())
}

/// A shard's status as far as the merge goes: which shards are missing is worked out afresh
/// from those joined, so a merge that lacked some is complete once they are added.
fn own_status(status: &RunStatus) -> RunStatus {
    match status {
        RunStatus::MissingShards { .. } => RunStatus::Complete,
        other => other.clone(),
    }
}

/// An incomplete shard makes the merged run incomplete.
fn worse(a: RunStatus, b: RunStatus) -> RunStatus {
    match (&a, &b) {
        (RunStatus::Complete, _) => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::fingerprint::Fingerprint;
    use crate::model::{Expectation, Outcome};
    use crate::results::{CaseResult, Work};

    /// The plan every shard here is a share of: ids that spread over three shards.
    fn plan() -> Vec<String> {
        (0..30).map(|k| format!("mock/pass/{k}")).collect()
    }

    /// Shard `p` of [`plan`], complete.
    fn shard(p: Partition) -> RunReport {
        let ids = plan();
        let results: Vec<CaseResult> = ids
            .iter()
            .filter(|id| p.contains(id))
            .map(|id| {
                CaseResult::new(
                    id.clone(),
                    Work::Mock(crate::mock::MockAction::Pass),
                    Outcome::pass(),
                    Expectation::Pass,
                    0.01,
                )
            })
            .collect();
        let mut r = RunReport::new(
            7,
            vec!["clhip".into(), "run".into()],
            Fingerprint::default(),
            UNIX_EPOCH,
            1.0,
            results,
        );
        r.selection = Some(Selection {
            filters: vec!["mock".into()],
            devices: Vec::new(),
            matrix: Selection::hash(b"matrix"),
            planned: ids.len(),
            plan: Selection::plan_hash(ids.iter().map(String::as_str)),
            shards: vec![p],
        });
        r
    }

    /// `r` stopped by Ctrl-C before its last case.
    fn interrupted(mut r: RunReport) -> RunReport {
        let last = r.results.pop().expect("a shard with cases");
        r.not_run.push(last.id);
        r.summary = report::Summary::of(&r.results);
        r.status = RunStatus::Interrupted;
        r
    }

    fn of3(m: u64) -> Partition {
        Partition { shard: m, of: 3 }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("clhip-merge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes each run as `s1.json`, `s2.json`, ... in a fresh directory.
    fn files(name: &str, runs: &[RunReport]) -> Vec<PathBuf> {
        let dir = scratch(name);
        runs.iter()
            .enumerate()
            .map(|(i, r)| {
                let path = dir.join(format!("s{}.json", i + 1));
                std::fs::write(&path, serde_json::to_vec_pretty(r).unwrap()).unwrap();
                path
            })
            .collect()
    }

    fn merge_files(paths: &[PathBuf]) -> anyhow::Result<RunReport> {
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        merge(&paths)
    }

    fn refusal(name: &str, runs: &[RunReport]) -> String {
        format!(
            "{:#}",
            merge_files(&files(name, runs)).expect_err("the merge must be refused")
        )
    }

    #[test]
    fn worse_keeps_the_incomplete_status_whichever_side_it_is_on() {
        let stopped = RunStatus::Stopped {
            why: "workers kept dying".into(),
        };
        assert_eq!(
            worse(RunStatus::Complete, RunStatus::Interrupted),
            RunStatus::Interrupted
        );
        assert_eq!(
            worse(RunStatus::Interrupted, RunStatus::Complete),
            RunStatus::Interrupted
        );
        assert_eq!(worse(RunStatus::Complete, stopped.clone()), stopped);
        assert_eq!(worse(stopped.clone(), RunStatus::Complete), stopped);
        assert_eq!(
            worse(RunStatus::Complete, RunStatus::Complete),
            RunStatus::Complete
        );
    }

    #[test]
    fn every_shard_complete_merges_into_a_complete_run_of_the_plan() {
        let paths = files("whole", &[shard(of3(2)), shard(of3(3)), shard(of3(1))]);
        let merged = merge_files(&paths).unwrap();
        assert_eq!(merged.status, RunStatus::Complete);
        assert_eq!(merged.results.len(), plan().len());
        let sel = merged.selection.as_ref().unwrap();
        assert_eq!(sel.shards, [of3(1), of3(2), of3(3)]);
        assert!(sel.missing().is_empty());
        // Written and read back, it is a whole, consistent run.
        let out = scratch("whole-out").join("merged.json");
        std::fs::write(&out, serde_json::to_vec(&merged).unwrap()).unwrap();
        let loaded = report::load(&out).unwrap();
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    }

    #[test]
    fn an_interrupted_shard_makes_the_merge_incomplete_first_or_second() {
        let cut = interrupted(shard(of3(2)));
        for (name, runs) in [
            ("cut-first", [cut.clone(), shard(of3(1)), shard(of3(3))]),
            ("cut-second", [shard(of3(1)), cut.clone(), shard(of3(3))]),
            ("cut-last", [shard(of3(1)), shard(of3(3)), cut.clone()]),
        ] {
            let merged = merge_files(&files(name, &runs)).unwrap();
            assert_eq!(merged.status, RunStatus::Interrupted, "{name}");
            assert_eq!(merged.not_run, cut.not_run, "{name}");
        }
    }

    #[test]
    fn two_shards_of_three_merge_marked_with_the_missing_one_and_the_third_completes_them() {
        let paths = files("two-of-three", &[shard(of3(1)), shard(of3(2))]);
        let merged = merge_files(&paths).unwrap();
        assert_eq!(
            merged.status,
            RunStatus::MissingShards {
                missing: vec![of3(3)]
            }
        );
        assert_eq!(
            merged.status.describe(),
            "incomplete: shard hash:3/3 missing"
        );
        let out = scratch("two-of-three-out").join("two.json");
        std::fs::write(&out, serde_json::to_vec(&merged).unwrap()).unwrap();
        let loaded = report::load(&out).unwrap();
        assert!(
            loaded
                .problems
                .iter()
                .any(|p| p.contains("hash:3/3 missing")),
            "{:?}",
            loaded.problems
        );
        // The missing shard merged in later makes the run whole.
        let third = files("third", &[shard(of3(3))]);
        let whole = merge_files(&[out, third[0].clone()]).unwrap();
        assert_eq!(whole.status, RunStatus::Complete);
        // A missing shard stays on record beside an interrupted one.
        let merged = merge_files(&files(
            "cut-and-missing",
            &[shard(of3(1)), interrupted(shard(of3(2)))],
        ))
        .unwrap();
        assert_eq!(merged.status, RunStatus::Interrupted);
        assert_eq!(merged.selection.unwrap().missing(), [of3(3)]);
    }

    #[test]
    fn shards_of_different_seeds_are_refused() {
        let mut other = shard(of3(2));
        other.seed = 8;
        let err = refusal("seeds", &[shard(of3(1)), other, shard(of3(3))]);
        assert!(err.contains("seed 7") && err.contains("seed 8"), "{err}");
    }

    #[test]
    fn a_shard_given_twice_or_a_case_in_two_shards_is_refused() {
        let err = refusal("twice", &[shard(of3(1)), shard(of3(1))]);
        assert!(err.contains("shard hash:1/3 is in both"), "{err}");
        // Another shard number, but holding a case of the first: caught as not its shard's.
        let mut liar = shard(of3(2));
        liar.results.push(shard(of3(1)).results[0].clone());
        liar.summary = report::Summary::of(&liar.results);
        let err = refusal("liar", &[shard(of3(1)), liar]);
        assert!(err.contains("is not in the shards the file holds"), "{err}");
    }

    #[test]
    fn shards_of_another_run_are_refused_naming_what_differs() {
        type Edit = fn(&mut RunReport);
        let edits: [(&str, Edit, &str); 8] = [
            (
                "build",
                |r| {
                    r.build = Some(crate::build_id::BuildId {
                        commit: "0123456789abcdef0123456789abcdef01234567".into(),
                        dirty: Some(true),
                    })
                },
                "by one built from commit 0123456789ab, dirty: shards of one run come from one build",
            ),
            (
                "plant",
                |r| {
                    r.planted = Some(report::Planted {
                        plant: "flip-element".into(),
                        only: Vec::new(),
                    })
                },
                "planted with no plant and",
            ),
            (
                "filters",
                |r| r.selection.as_mut().unwrap().filters = vec!["other".into()],
                "filters differ",
            ),
            (
                "devices",
                |r| r.selection.as_mut().unwrap().devices = vec!["1".into()],
                "devices differ",
            ),
            (
                "version",
                |r| r.clhip_version = "0.0.1".into(),
                "by clhip 0.0.1",
            ),
            (
                "matrix",
                |r| r.selection.as_mut().unwrap().matrix = Selection::hash(b"other"),
                "case matrices differ",
            ),
            (
                "plan",
                |r| {
                    let sel = r.selection.as_mut().unwrap();
                    sel.planned += 1;
                    sel.plan = Selection::hash(b"another plan");
                },
                "plans differ",
            ),
            (
                "fingerprint",
                |r| r.fingerprint.os_kernel = "Linux 9.9".into(),
                "not made on the same driver",
            ),
        ];
        for (name, edit, says) in edits {
            let mut foreign = shard(of3(2));
            edit(&mut foreign);
            let err = refusal(name, &[shard(of3(1)), foreign]);
            assert!(err.contains(says), "{name}: {err}");
        }
        // A shard of a plan split another number of ways.
        let mut halves = shard(Partition { shard: 2, of: 2 });
        halves.results.clear();
        halves.summary = report::Summary::of(&halves.results);
        let err = refusal("count", &[shard(of3(1)), halves]);
        assert!(err.contains("partitions differ"), "{err}");
        // An unpartitioned run is the one shard of its plan: not a shard of a split one.
        let mut whole = shard(Partition::WHOLE);
        whole.selection.as_mut().unwrap().shards.clear();
        let err = refusal("whole", &[shard(of3(1)), whole]);
        assert!(err.contains("partitions differ"), "{err}");
    }

    #[test]
    fn a_file_that_does_not_record_its_selection_is_refused() {
        let mut old = shard(of3(2));
        old.selection = None;
        let err = refusal("old", &[shard(of3(1)), old]);
        assert!(
            err.contains("does not record its partition, filters or plan"),
            "{err}"
        );
    }

    #[test]
    fn refusals_name_the_lines_and_partitions_that_differ_on_each_side() {
        let mut foreign = shard(of3(2));
        foreign.fingerprint.os_kernel = "Linux 9.9".into();
        let err = refusal("fingerprint-lines", &[shard(of3(1)), foreign]);
        // The header, then the one line that differs, once from each side: no common line.
        assert_eq!(err.lines().count(), 3, "{err}");
        assert!(err.contains("s2.json: os kernel: Linux 9.9"), "{err}");
        assert!(err.contains("s1.json: os kernel: "), "{err}");
        let mut whole = shard(Partition::WHOLE);
        whole.selection.as_mut().unwrap().shards.clear();
        let err = refusal("whole-named", &[whole, shard(of3(1))]);
        assert!(err.contains("none, the whole plan"), "{err}");
    }

    #[test]
    fn merged_cases_come_in_case_order_where_their_ids_sort_otherwise() {
        use crate::model::{Api, Case, ClDeviceRef, Op, Pair, PathKind, Peer, SyncMode};
        let case = |n: usize| Case {
            pair: Pair {
                opencl: ClDeviceRef {
                    platform_index: 0,
                    device_index: 0,
                    label: "pocl0".into(),
                },
                peer: Peer {
                    api: Api::Host,
                    ordinal: 0,
                },
                install: None,
                cl_gpu: None,
            },
            path: PathKind::Copy,
            sync: SyncMode::Finish,
            op: Op::Handoff,
            n,
            env: Default::default(),
        };
        // By id, "n=4096" sorts before "n=512", and "n=1000" before "n=33".
        let sizes = [8, 33, 512, 1000, 4096, 20000];
        let of = |p: Partition| {
            let mut r = shard(p);
            r.results = sizes
                .iter()
                .map(|&n| case(n))
                .filter(|c| p.contains(&c.id()))
                .map(|c| {
                    CaseResult::new(
                        c.id(),
                        Work::Case(c),
                        Outcome::pass(),
                        Expectation::Pass,
                        0.01,
                    )
                })
                .collect();
            r.summary = report::Summary::of(&r.results);
            r
        };
        let shards = [of(of3(1)), of(of3(2)), of(of3(3))];
        let merged = merge_files(&files("case-order", &shards)).unwrap();
        let merged_sizes: Vec<usize> = merged
            .results
            .iter()
            .map(|r| r.work.case().expect("a case").n)
            .collect();
        assert_eq!(merged_sizes, sizes);
    }

    #[test]
    fn a_variants_cases_merge_beside_their_plain_twins() {
        use crate::model::{Api, Case, ClDeviceRef, EnvVariant, Op, Pair, PathKind, Peer};
        let case = |n: usize, env: &EnvVariant| Case {
            pair: Pair {
                opencl: ClDeviceRef {
                    platform_index: 0,
                    device_index: 0,
                    label: "rocm0".into(),
                },
                peer: Peer {
                    api: Api::Hip,
                    ordinal: 0,
                },
                install: None,
                cl_gpu: None,
            },
            path: PathKind::Copy,
            sync: crate::model::SyncMode::Finish,
            op: Op::Handoff,
            n,
            env: env.clone(),
        };
        let sdma = EnvVariant::new([("HSA_ENABLE_SDMA", "0")]).unwrap();
        let all: Vec<Case> = [8, 33, 512]
            .into_iter()
            .flat_map(|n| [case(n, &EnvVariant::default()), case(n, &sdma)])
            .collect();
        let of = |p: Partition| {
            let mut r = shard(p);
            r.results = all
                .iter()
                .filter(|c| p.contains(&c.id()))
                .map(|c| {
                    CaseResult::new(
                        c.id(),
                        Work::Case(c.clone()),
                        Outcome::pass(),
                        Expectation::Pass,
                        0.01,
                    )
                })
                .collect();
            r.summary = report::Summary::of(&r.results);
            r
        };
        let shards = [of(of3(1)), of(of3(2)), of(of3(3))];
        let merged = merge_files(&files("variants", &shards)).unwrap();
        let mut ids: Vec<&str> = merged.results.iter().map(|r| r.id.as_str()).collect();
        ids.sort_unstable();
        let mut want: Vec<String> = all.iter().map(Case::id).collect();
        want.sort_unstable();
        assert_eq!(ids, want);
        // Through the files and back, each variant case is still its own case.
        for r in &merged.results {
            assert_eq!(r.work.case().map(Case::id).as_deref(), Some(r.id.as_str()));
        }
        assert_eq!(
            merged
                .results
                .iter()
                .filter(|r| r.id.ends_with("/env:HSA_ENABLE_SDMA=0"))
                .count(),
            3
        );
    }
}
