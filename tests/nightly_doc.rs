//! The CI jobs of docs/nightly.md ("A nightly CI job") run as written, on the first OpenCL
//! device (PoCL on CI): the shell lines of the GitLab job and of the GitHub Actions workflow
//! are taken from the page's code blocks and run, each shard's with its index, then the merge
//! job's, in one directory (where the CI systems' artifacts would carry `results/`), with the
//! `clhip` under test on the PATH, `CASES` set to a few cases and the page's `clhip.toml` in the
//! directory. What the build steps and the actions do (build clhip, move artifacts) is the CI
//! system's, and left out. Each shard must apply the profile; the merged run must be complete,
//! its JUnit where the job publishes it, one test case per case.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

const DOC: &str = include_str!("../docs/nightly.md");

/// A few cases, spread over all three shards.
const CASES: &str = "*/copy/*/handoff/*";

/// One CI job: its shell scripts (each run as one `bash -e` script), and how many shards
/// of it run (1 for a job that is not split).
struct Job {
    name: String,
    scripts: Vec<String>,
    shards: usize,
}

/// The `yaml` code block of the page's section "A nightly CI job" holding `marker`.
fn yaml_block(marker: &str) -> &'static str {
    let section = DOC
        .split("\n## ")
        .find(|s| s.starts_with("A nightly CI job"))
        .expect("docs/nightly.md has a section \"A nightly CI job\"");
    section
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("no yaml block with `{marker}`"))
}

/// The page's `clhip.toml`: the `toml` code block of the section "A nightly CI job".
fn config_block() -> &'static str {
    let section = DOC
        .split("\n## ")
        .find(|s| s.starts_with("A nightly CI job"))
        .expect("docs/nightly.md has a section \"A nightly CI job\"");
    let block = section
        .split("```toml\n")
        .nth(1)
        .expect("a toml block: the jobs' clhip.toml");
    block.split("```").next().unwrap()
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// GitLab: each top-level job's `script` items (comments left out), one line a script, as
/// GitLab runs them; `parallel: N` shards.
fn gitlab_jobs(yaml: &str) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    let mut script_indent: Option<usize> = None;
    for line in yaml.lines() {
        let t = line.trim_start();
        if t.is_empty() {
            continue;
        }
        if indent(line) == 0 {
            script_indent = None;
            let name = t.trim_end_matches(':');
            if !["variables", "before_script", "stages"].contains(&name) {
                jobs.push(Job {
                    name: name.to_string(),
                    scripts: Vec::new(),
                    shards: 1,
                });
            }
            continue;
        }
        let Some(job) = jobs.last_mut() else { continue };
        if let Some(n) = t.strip_prefix("parallel: ") {
            job.shards = n.parse().expect("parallel: N");
        }
        match script_indent {
            Some(i) if indent(line) > i => {
                if let Some(cmd) = t.strip_prefix("- ") {
                    job.scripts.push(cmd.to_string());
                }
            }
            _ => script_indent = (t == "script:").then(|| indent(line)),
        }
    }
    jobs.retain(|j| !j.scripts.is_empty());
    jobs
}

/// GitHub Actions: each job's `run` steps (a block is one script) but the one that builds
/// clhip; `matrix: shard: [..]` shards, `${{ matrix.shard }}` standing for the index.
fn github_jobs(yaml: &str) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    let mut in_jobs = false;
    let mut step_name = String::new();
    let mut block: Option<(usize, String)> = None;
    let finish = |jobs: &mut Vec<Job>, block: &mut Option<(usize, String)>| {
        if let (Some((_, script)), Some(job)) = (block.take(), jobs.last_mut()) {
            job.scripts.push(script);
        }
    };
    for line in yaml.lines() {
        let t = line.trim_start();
        if let Some((i, script)) = &mut block {
            if !t.is_empty() && indent(line) > *i {
                script.push_str(t);
                script.push('\n');
                continue;
            }
            finish(&mut jobs, &mut block);
        }
        if t.is_empty() {
            continue;
        }
        if indent(line) == 0 {
            in_jobs = t == "jobs:";
            continue;
        }
        if !in_jobs {
            continue;
        }
        if indent(line) == 2 {
            jobs.push(Job {
                name: t.trim_end_matches(':').to_string(),
                scripts: Vec::new(),
                shards: 1,
            });
            continue;
        }
        let Some(job) = jobs.last_mut() else { continue };
        if let Some(list) = t.strip_prefix("shard: [") {
            job.shards = list.trim_end_matches(']').split(',').count();
        }
        let item = t.strip_prefix("- ").unwrap_or(t);
        if t.starts_with("- ") {
            step_name.clear();
        }
        if let Some(name) = item.strip_prefix("name: ") {
            step_name = name.to_string();
        } else if let Some(run) = item.strip_prefix("run: ") {
            if step_name == "Build clhip" {
                continue;
            }
            if run == "|" {
                block = Some((indent(line), String::new()));
            } else {
                job.scripts.push(format!("{run}\n"));
            }
        }
    }
    finish(&mut jobs, &mut block);
    jobs.retain(|j| !j.scripts.is_empty());
    jobs
}

/// Runs `jobs` in `dir` as their CI system would, shard by shard, then checks what the merge
/// left where `junit` (the path the page publishes) says.
fn run_jobs(
    jobs: &[Job],
    dir: &Path,
    shard_env: &dyn Fn(usize, usize) -> Vec<(String, String)>,
    junit: &str,
) {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_clhip"));
    let path = std::env::join_paths(std::iter::once(exe.parent().unwrap().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    assert_eq!(jobs.len(), 2, "a shard job and a merge job");
    assert_eq!(jobs[0].shards, 3, "{}: three shards", jobs[0].name);
    std::fs::write(dir.join("clhip.toml"), config_block()).unwrap();
    for job in jobs {
        for shard in 1..=job.shards {
            for script in &job.scripts {
                let script = script.replace("${{ matrix.shard }}", &shard.to_string());
                assert!(
                    !script.contains("${{"),
                    "an expression the test does not know: {script}"
                );
                let o = Command::new("bash")
                    .args(["-e", "-c", &script])
                    .current_dir(dir)
                    .env("PATH", &path)
                    .env("CASES", CASES)
                    .envs(shard_env(shard, job.shards))
                    .output()
                    .unwrap();
                assert!(
                    o.status.success(),
                    "{} (shard {shard}): {script}\nexit {:?}\n{}",
                    job.name,
                    o.status.code(),
                    String::from_utf8_lossy(&o.stderr)
                );
                let stderr = String::from_utf8_lossy(&o.stderr);
                if script.contains("clhip run ") {
                    assert!(
                        stderr.contains("clhip: profile `nightly` of clhip.toml"),
                        "{}: the run did not apply the page's profile:\n{stderr}",
                        job.name
                    );
                }
            }
        }
    }
    let run = clhip::report::load(&dir.join("results/run.json"))
        .expect("the merged run")
        .report;
    assert_eq!(run.status, clhip::report::RunStatus::Complete);
    let planned = run.selection.as_ref().unwrap().planned;
    assert!(
        planned >= 3 && run.results.len() == planned,
        "{planned} planned"
    );
    let xml = std::fs::read_to_string(dir.join(junit)).expect("the published JUnit");
    assert_eq!(xml.matches("<testcase ").count(), planned, "{xml}");
    assert!(dir.join("results/run.md").is_file());
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-nightly-doc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The value of `key: VALUE` in `yaml`.
fn value_of<'a>(yaml: &'a str, key: &str) -> &'a str {
    yaml.lines()
        .find_map(|l| l.trim_start().strip_prefix(key))
        .unwrap_or_else(|| panic!("no `{key}`"))
        .trim()
}

fn the_gitlab_job_runs_as_written_on_pocl() {
    support::opencl_device();
    let yaml = yaml_block("parallel:");
    let jobs = gitlab_jobs(yaml);
    let env = |shard: usize, of: usize| {
        vec![
            ("CI_NODE_INDEX".to_string(), shard.to_string()),
            ("CI_NODE_TOTAL".to_string(), of.to_string()),
        ]
    };
    run_jobs(&jobs, &scratch("gitlab"), &env, value_of(yaml, "junit: "));
}

fn the_github_workflow_runs_as_written_on_pocl() {
    support::opencl_device();
    let yaml = yaml_block("runs-on:");
    let jobs = github_jobs(yaml);
    run_jobs(
        &jobs,
        &scratch("github"),
        &|_, _| Vec::new(),
        value_of(yaml, "report_paths: "),
    );
}

/// The extraction itself: every command of both, nothing else.
fn the_jobs_are_read_from_the_page() {
    let gitlab = gitlab_jobs(yaml_block("parallel:"));
    let names: Vec<&str> = gitlab.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["clhip-shard", "clhip-merge"]);
    assert_eq!(gitlab[0].scripts.len(), 2, "{:?}", gitlab[0].scripts);
    assert!(
        gitlab[0].scripts[1].starts_with("clhip run $CASES --profile nightly "),
        "{}",
        gitlab[0].scripts[1]
    );
    let config: toml::Table = config_block()
        .parse()
        .expect("the page's clhip.toml parses");
    assert!(config["profile"].get("nightly").is_some(), "{config:?}");
    assert_eq!(gitlab[1].scripts.len(), 2, "{:?}", gitlab[1].scripts);
    let github = github_jobs(yaml_block("runs-on:"));
    assert_eq!(github.len(), 2);
    assert_eq!(github[0].shards, 3);
    assert_eq!(github[0].scripts.len(), 1, "{:?}", github[0].scripts);
    assert_eq!(
        github[0].scripts[0].lines().count(),
        2,
        "{}",
        github[0].scripts[0]
    );
    assert_eq!(
        github[1].scripts[0].lines().count(),
        2,
        "{}",
        github[1].scripts[0]
    );
    assert!(
        github
            .iter()
            .flat_map(|j| &j.scripts)
            .all(|s| !s.contains("cargo"))
    );
}

tests!(
    the_jobs_are_read_from_the_page,
    the_gitlab_job_runs_as_written_on_pocl,
    the_github_workflow_runs_as_written_on_pocl
);
