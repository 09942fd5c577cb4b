//! `clhip explore` on the first OpenCL device (PoCL on CI), for 30 s each: with a planted
//! corruption that fires only when a buffer runs past 2 MiB (`--plant straddle-2mib`), it is
//! found, every failure is shrunk to the first size past the boundary, `run` runs the shrunk
//! case again by its id, and the reproducer written fails when built and run; on the clean
//! driver, nothing fails though shapes past 2 MiB were explored. Without OpenCL those are
//! ignored, unless CLHIP_REQUIRE_OPENCL=1, when they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clhip::model::{FailReason, Outcome, OutcomeKind};
use clhip::report::{RunStatus, load};
use libtest_mimic::{Arguments, Failed, Trial};

/// The first size whose buffer (complex f32) runs past 2 MiB.
const FIRST_PAST_2MIB: usize = (2 << 20) / 8 + 1;
/// The 32-bit word the plant flips: the first past 2 MiB.
const FLIPPED_WORD: usize = (2 << 20) / 4;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-explore-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn clhip(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clhip"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if ok { Ok(()) } else { Err(what().into()) }
}

fn n_of(id: &str) -> usize {
    id.rsplit_once("/n=")
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in {id}"))
}

/// Every case of the explored matrix on PoCL is a handoff here: its pattern check names the
/// first wrong word, which the plant decides.
fn planted() -> Result<(), Failed> {
    let dir = scratch("planted");
    let out = clhip(
        &[
            "explore",
            "--budget",
            "30s",
            "--seed",
            "7",
            "--ops",
            "handoff",
            "--plant",
            "straddle-2mib",
            "-o",
            "found",
        ],
        &dir,
    );
    let all = text(&out);
    ensure(out.status.code() == Some(1), || {
        format!("a found failure exits 1\n{all}")
    })?;
    let loaded = load(&dir.join("found/results.json")).map_err(|e| format!("{e:#}\n{all}"))?;
    let report = loaded.report;
    ensure(
        report.status == RunStatus::Complete && loaded.problems.is_empty(),
        || format!("{:?} {:?}", report.status, loaded.problems),
    )?;
    ensure(report.seed == 7, || format!("seed {}", report.seed))?;
    // The verdicts are earned: every case past 2 MiB fails at the flipped word, every case
    // within it passes.
    let mut past = 0;
    for r in &report.results {
        let n = n_of(&r.id);
        match &r.outcome {
            Outcome::Fail {
                reason: FailReason::Mismatch(m),
            } if n >= FIRST_PAST_2MIB => {
                ensure(m.index == FLIPPED_WORD, || format!("{}: {m}", r.id))?;
                past += 1;
            }
            Outcome::Pass { .. } if n < FIRST_PAST_2MIB => {}
            other => return Err(format!("{}: {other:?}", r.id).into()),
        }
    }
    ensure(past > 0, || format!("no case past 2 MiB\n{all}"))?;

    // Each failure shrunk to the first size past the boundary, listed in found.toml.
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let found = std::fs::read_to_string(dir.join("found/found.toml"))?;
    let matrix = clhip::cases::Matrix::parse(Path::new("found.toml"), &found)
        .map_err(|e| format!("{e}\n{found}"))?;
    ensure(!matrix.groups.is_empty(), || found.clone())?;
    for g in &matrix.groups {
        ensure(g.sizes == [FIRST_PAST_2MIB], || {
            format!("not shrunk to the boundary: {g:?}\n{stdout}")
        })?;
    }
    let reruns: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("run again: "))
        .collect();
    ensure(reruns.len() == matrix.groups.len(), || stdout.clone())?;

    // `run` takes the shrunk case's id and gives the same wrong word.
    let rerun = reruns[0];
    ensure(
        rerun.starts_with("clhip run --seed 7 --plant straddle-2mib --cases found/found.toml '"),
        || rerun.to_string(),
    )?;
    let id = rerun
        .rsplit_once(" '")
        .map(|(_, id)| id.trim_end_matches('\''))
        .unwrap_or_default();
    ensure(n_of(id) == FIRST_PAST_2MIB, || id.to_string())?;
    let again = clhip(
        &[
            "run",
            "--seed",
            "7",
            "--plant",
            "straddle-2mib",
            "--cases",
            "found/found.toml",
            "--json",
            "again.json",
            id,
        ],
        &dir,
    );
    ensure(again.status.code() == Some(1), || text(&again))?;
    let again = load(&dir.join("again.json"))?.report;
    ensure(
        again.results.len() == 1 && again.results[0].id == id,
        || format!("{:?}", again.results),
    )?;
    // By their words: a bit-exact mismatch's errors are NaN, which equals nothing.
    let want = report
        .results
        .iter()
        .find(|r| r.id == id)
        .map(|r| r.outcome.reason());
    let got = again.results[0].outcome.reason();
    ensure(Some(&got) == want.as_ref(), || format!("{got} vs {want:?}"))?;

    // Every failure's reproducer fails when built and run, at the flipped word.
    for k in 1..=matrix.groups.len() {
        let repro = dir.join(format!("found/repro-{k}"));
        let source = std::fs::read_to_string(repro.join("repro.c"))
            .map_err(|e| format!("{}: {e}\n{stdout}", repro.display()))?;
        ensure(
            source.contains(&format!("/n={FIRST_PAST_2MIB}")) && source.contains("PLANTED"),
            || source.lines().take(12).collect::<Vec<_>>().join("\n"),
        )?;
        let built = Command::new("sh").arg(repro.join("build.sh")).output()?;
        ensure(built.status.success(), || text(&built))?;
        let ran = Command::new(repro.join("repro")).output()?;
        let said = text(&ran);
        ensure(ran.status.code() == Some(1), || {
            format!("the reproducer must see wrong data: {said}")
        })?;
        ensure(said.contains(&format!("first at [{FLIPPED_WORD}]")), || {
            said.clone()
        })?;
    }
    Ok(())
}

/// The clean driver: every explored case passes, nothing is found, and the nightly seed is
/// today's date.
fn clean() -> Result<(), Failed> {
    let dir = scratch("clean");
    let out = clhip(
        &[
            "explore", "--budget", "30s", "--ops", "handoff", "-o", "none",
        ],
        &dir,
    );
    let all = text(&out);
    ensure(out.status.code() == Some(0), || all.clone())?;
    let today = clhip::explore::seed::nightly(std::time::SystemTime::now())?;
    ensure(
        String::from_utf8_lossy(&out.stderr).contains(&format!("seed {today} (today's date")),
        || all.clone(),
    )?;
    let report = load(&dir.join("none/results.json"))?.report;
    ensure(report.seed == today, || format!("seed {}", report.seed))?;
    ensure(
        report
            .results
            .iter()
            .all(|r| r.outcome.kind() == OutcomeKind::Pass),
        || all.clone(),
    )?;
    // Not a vacuous pass: shapes the plant would have caught were run.
    ensure(
        report.results.len() > 50
            && report
                .results
                .iter()
                .any(|r| n_of(&r.id) >= FIRST_PAST_2MIB),
        || format!("{} cases\n{all}", report.results.len()),
    )?;
    ensure(
        String::from_utf8_lossy(&out.stdout).contains("no failure found"),
        || all.clone(),
    )?;
    let found = std::fs::read_to_string(dir.join("none/found.toml"))?;
    ensure(found.contains("found no failure"), || found.clone())?;
    ensure(!dir.join("none/repro-1").exists(), || all.clone())?;
    Ok(())
}

/// Bad arguments are refused by name before anything runs.
fn bad_arguments() -> Result<(), Failed> {
    let dir = scratch("bad");
    for (args, says) in [
        (vec!["explore", "--budget", "0s"], "more than nothing"),
        (vec!["explore", "--budget", "soon"], "`soon`"),
        (
            vec!["explore", "--budget", "1s", "--max-bytes", "4"],
            "less than one complex element",
        ),
        (
            vec!["explore", "--budget", "1s", "--max-bytes", "4MB"],
            "unknown unit `MB`",
        ),
        (
            vec!["explore", "--budget", "1s", "--ops", "teleport"],
            "unknown Op `teleport`",
        ),
        (
            vec!["explore", "--budget", "1s", "--cases", "missing.toml"],
            "missing.toml",
        ),
    ] {
        let out = clhip(&args, &dir);
        ensure(out.status.code() == Some(2), || {
            format!("{args:?}\n{}", text(&out))
        })?;
        ensure(String::from_utf8_lossy(&out.stderr).contains(says), || {
            format!("{args:?}: {}", text(&out))
        })?;
    }
    ensure(!dir.join("reports").exists(), || {
        "wrote before refusing".into()
    })?;
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = vec![Trial::test(
        "bad_arguments_are_refused_by_name",
        bad_arguments,
    )];
    type Check = fn() -> Result<(), Failed>;
    let opencl: [(&str, Check); 2] = [
        (
            "a_corruption_past_2_mib_is_found_shrunk_to_the_boundary_and_reproduced",
            planted,
        ),
        ("a_clean_driver_explores_30_s_without_a_failure", clean),
    ];
    let device = clhip::runtimes::opencl::test_device();
    for (name, check) in opencl {
        trials.push(match device {
            Some(_) => Trial::test(name, check),
            None => Trial::test(name, || Err("no OpenCL device".into()))
                .with_kind("ignored: no OpenCL device")
                .with_ignored_flag(true),
        });
    }
    libtest_mimic::run(&args, trials).exit();
}
