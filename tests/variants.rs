//! Environment variants on PoCL: a case file's `[[variant]]` for host pairs runs its group's
//! cases a second time in workers started with its variables, under ids with their own last
//! segment, which `list` filters, and `diff` and `merge` read back. Each test runs the real
//! binary; without OpenCL they are ignored, unless CLHIP_REQUIRE_OPENCL=1, when they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clhip::model::{EnvVariant, OutcomeKind};
use clhip::report::{RunReport, load_json};
use libtest_mimic::{Arguments, Failed, Trial};

/// A PoCL variable whose value here is PoCL's own default (no pinning of its worker threads):
/// the variant changes nothing PoCL computes, so both environments must pass.
const VAR: &str = "POCL_AFFINITY";
const VALUE: &str = "0";
const SEGMENT: &str = "/env:POCL_AFFINITY=0";

/// One test of this file: its name and body.
type Test = (&'static str, fn() -> Result<(), Failed>);

fn main() {
    let args = Arguments::from_args();
    let tests: [Test; 3] = [
        (
            "a_host_variant_runs_in_workers_that_have_its_variables",
            a_host_variant_runs_in_workers_that_have_its_variables,
        ),
        (
            "list_filters_the_variant_segment_like_any_other",
            list_filters_the_variant_segment_like_any_other,
        ),
        (
            "shards_of_a_variant_run_merge_and_diff_by_their_ids",
            shards_of_a_variant_run_merge_and_diff_by_their_ids,
        ),
    ];
    let opencl = clhip::runtimes::opencl::test_device().is_some();
    let trials = tests
        .into_iter()
        .map(|(name, test)| Trial::test(name, test).with_ignored_flag(!opencl))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-variants-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Sizes of the one group: enough cases that each of two shards gets some.
const SIZES: [usize; 4] = [64, 128, 256, 512];

/// A case file of one handoff group that also runs under the host variant.
fn case_file(dir: &Path) -> PathBuf {
    let file = dir.join("cases.toml");
    std::fs::write(
        &file,
        format!(
            "version = 1\n\
             [[variant]]\nname = \"pocl-affinity\"\npeers = [\"host\"]\nenv = {{ {VAR} = \"{VALUE}\" }}\n\
             [[group]]\npaths = [\"copy\"]\nsyncs = [\"finish\"]\nops = [\"handoff\"]\nsizes = [64, 128, 256, 512]\nvariants = [\"pocl-affinity\"]\n"
        ),
    )
    .unwrap();
    file
}

fn clhip(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        // The variable must come from the plan, not be inherited from whoever runs the test.
        .env_remove(VAR)
        .output()
        .unwrap()
}

fn run(dir: &Path, extra: &[&str], json: &str) -> Result<(i32, RunReport), Failed> {
    let cases = case_file(dir);
    let json = dir.join(json);
    let mut args = vec!["run", "--timeout", "60", "--cases", cases.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = clhip(&args);
    let report = load_json(&json)
        .map_err(|e| format!("{e}\nstderr: {}", String::from_utf8_lossy(&out.stderr)))?;
    Ok((out.status.code().unwrap_or(-1), report))
}

fn a_host_variant_runs_in_workers_that_have_its_variables() -> Result<(), Failed> {
    let dir = scratch("run");
    let (code, report) = run(&dir, &[], "run.json")?;
    let variant = EnvVariant::new([(VAR, VALUE)]).unwrap();
    let ids: Vec<&str> = report.results.iter().map(|r| r.id.as_str()).collect();
    // The plain environment's cases, then the variant's.
    let plain = SIZES.map(|n| format!("pocl0+host/copy/finish/handoff/n={n}"));
    let want: Vec<String> = plain
        .iter()
        .cloned()
        .chain(plain.iter().map(|id| format!("{id}{SEGMENT}")))
        .collect();
    if ids != want {
        return Err(format!("ids {ids:?}, want {want:?}").into());
    }
    // Each worker checks its own environment against its case's variant before the case: a
    // variant case in a worker without the variable is a harness error naming it, so a pass
    // here is the worker having seen POCL_AFFINITY=0.
    for r in &report.results {
        if r.outcome.kind() != OutcomeKind::Pass {
            return Err(format!("{}: {} {}", r.id, r.outcome.kind(), r.outcome.reason()).into());
        }
        let case = r.work.case().ok_or("a case")?;
        let want_env = if r.id.ends_with(SEGMENT) {
            variant.clone()
        } else {
            EnvVariant::default()
        };
        if case.env != want_env || case.id() != r.id {
            return Err(format!("{}: recorded as {case:?}", r.id).into());
        }
    }
    if code != 0 {
        return Err(format!("exit {code}").into());
    }
    Ok(())
}

fn list_filters_the_variant_segment_like_any_other() -> Result<(), Failed> {
    let dir = scratch("list");
    let cases = case_file(&dir);
    let listed = |filter: &str| -> Result<Vec<String>, Failed> {
        let o = clhip(&["list", "--cases", cases.to_str().unwrap(), filter]);
        if !o.status.success() {
            return Err(String::from_utf8_lossy(&o.stderr).into_owned().into());
        }
        Ok(String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("pocl0+host/"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect())
    };
    let variant = listed(&format!("*{SEGMENT}"))?;
    let plain = listed("*/n=64")?;
    let size = listed("/n=64")?;
    let checks = [
        (
            variant.len() == SIZES.len() && variant.iter().all(|i| i.ends_with(SEGMENT)),
            "variant glob",
        ),
        (
            plain == ["pocl0+host/copy/finish/handoff/n=64"],
            "anchored glob",
        ),
        (size.len() == 2, "substring"),
    ];
    for (ok, what) in checks {
        if !ok {
            return Err(format!("{what}: {variant:?} {plain:?} {size:?}").into());
        }
    }
    Ok(())
}

fn shards_of_a_variant_run_merge_and_diff_by_their_ids() -> Result<(), Failed> {
    let dir = scratch("shards");
    let mut shards = Vec::new();
    for m in 1..=2 {
        let part = format!("hash:{m}/2");
        let (code, report) = run(&dir, &["--partition", &part], &format!("s{m}.json"))?;
        if code != 0 {
            return Err(format!("shard {part}: exit {code}").into());
        }
        shards.push((dir.join(format!("s{m}.json")), report.results.len()));
    }
    let merged = dir.join("merged.json");
    let mut args = vec!["merge"];
    args.extend(shards.iter().map(|(p, _)| p.to_str().unwrap()));
    args.extend(["-o", merged.to_str().unwrap()]);
    let o = clhip(&args);
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned().into());
    }
    let report = load_json(&merged).map_err(|e| e.to_string())?;
    let variants = report
        .results
        .iter()
        .filter(|r| r.id.ends_with(SEGMENT))
        .count();
    if report.results.len() != 2 * SIZES.len() || variants != SIZES.len() {
        return Err(format!(
            "merged {} results, {variants} of the variant",
            report.results.len()
        )
        .into());
    }
    // A whole run against the merge of its shards: the same cases, nothing moved.
    let (_, _) = run(&dir, &[], "whole.json")?;
    let o = clhip(&[
        "diff",
        dir.join("whole.json").to_str().unwrap(),
        merged.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() || !text.contains("0 regressions, 0 fixes, 0 changed, 0 new, 0 removed")
    {
        return Err(format!("diff exit {:?}:\n{text}", o.status.code()).into());
    }
    Ok(())
}
