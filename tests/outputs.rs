//! What clhip writes, and where it refuses to: every command's outputs are checked before
//! anything runs, only regular files and sinks are written, nothing is made in /dev nor a
//! directory the user did not ask for, no output is an input or another run's results, and one
//! output's failure loses no other.
//!
//! A test that cannot run here (no loop device and no `mknod`, no OpenCL) is reported ignored
//! with its reason, which is why this file has its own harness.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        Trial::ignorable_test(
            "a_block_device_is_never_written_by_any_command",
            a_block_device_is_never_written_by_any_command,
        ),
        Trial::test(
            "no_file_is_made_in_dev_and_no_directory_unasked",
            no_file_is_made_in_dev_and_no_directory_unasked,
        ),
        Trial::test(
            "sinks_are_written_and_other_character_devices_refused_before_the_run",
            sinks_are_written_and_other_character_devices_refused_before_the_run,
        ),
        Trial::test(
            "an_output_inside_an_input_directory_or_on_the_journal_is_refused",
            an_output_inside_an_input_directory_or_on_the_journal_is_refused,
        ),
        Trial::test(
            "repro_refuses_the_users_files_before_running_anything",
            repro_refuses_the_users_files_before_running_anything,
        ),
        Trial::ignorable_test(
            "repro_replaces_its_own_earlier_files_and_nothing_edited",
            repro_replaces_its_own_earlier_files_and_nothing_edited,
        ),
        Trial::test(
            "a_failed_output_loses_no_other_and_the_journal_keeps_the_results",
            a_failed_output_loses_no_other_and_the_journal_keeps_the_results,
        ),
        Trial::test(
            "an_output_aimed_at_a_live_runs_results_is_refused",
            an_output_aimed_at_a_live_runs_results_is_refused,
        ),
        Trial::test(
            "help_and_version_to_a_full_stdout_fail",
            help_and_version_to_a_full_stdout_fail,
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_clhip")
}

fn clhip(args: &[&str]) -> Output {
    Command::new(exe()).args(args).output().expect("clhip runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-outputs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `cond`, or the test fails with `why`.
fn ensure(cond: bool, why: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond { Ok(()) } else { Err(why().into()) }
}

/// A refusal before anything ran: exit 2, `says` on stderr, and no case started.
fn refused(o: &Output, args: &[&str], says: &str) -> Result<(), Failed> {
    let err = stderr(o);
    ensure(o.status.code() == Some(2), || {
        format!("{args:?}: exit {:?}, not 2:\n{err}", o.status.code())
    })?;
    ensure(err.contains(says), || {
        format!("{args:?}: no `{says}` in:\n{err}")
    })?;
    ensure(!err.contains("cases, seed"), || {
        format!("{args:?}: refused only after the run began:\n{err}")
    })
}

/// A results file of one mock case.
fn results_file(dir: &Path) -> PathBuf {
    let json = dir.join("run.json");
    let o = clhip(&["run", "--mock-cases", "pass", "--json", s(&json)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    json
}

/// A block device of our own to aim outputs at: a loop device on a file of known bytes where
/// this machine allows it, detached on drop.
struct LoopDevice {
    path: PathBuf,
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}

/// Bytes no output would write: a test pattern, not zeros.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x2545_f491;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn read_device(path: &Path, len: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0; len];
    std::fs::File::open(path)?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// A loop device over `dir/disk.img` holding [`pattern`], or why there is none.
fn loop_device(dir: &Path, len: usize) -> Result<LoopDevice, String> {
    if !Path::new("/dev/loop-control").exists() {
        return Err("no /dev/loop-control".into());
    }
    let img = dir.join("disk.img");
    std::fs::write(&img, pattern(len)).map_err(|e| e.to_string())?;
    let o = Command::new("losetup")
        .args(["--find", "--show"])
        .arg(&img)
        .output()
        .map_err(|e| format!("losetup: {e}"))?;
    if !o.status.success() {
        return Err(format!("losetup: {}", stderr(&o).trim()));
    }
    let path = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    let dev = LoopDevice { path };
    // Only a device that is ours, holding our bytes, is written at.
    match read_device(&dev.path, len) {
        Ok(b) if b == pattern(len) => Ok(dev),
        Ok(_) => Err(format!(
            "{} does not read back the image",
            dev.path.display()
        )),
        Err(e) => Err(format!("reading {}: {e}", dev.path.display())),
    }
}

/// Every command that writes a file, aimed at a block device: each refuses before it runs,
/// and the device keeps its bytes. A loop device of this test's own where the machine allows
/// it; else a block device node made in a temporary directory (major 240, reserved for local
/// use: no driver behind it), which shows the refusal but not the bytes.
fn a_block_device_is_never_written_by_any_command() -> Result<Completion, Failed> {
    let dir = scratch("block");
    let len = 1 << 20;
    let (dev, loop_dev) = match loop_device(&dir, len) {
        Ok(l) => (l.path.clone(), Some(l)),
        Err(why) => {
            let node = dir.join("blk");
            let made = nix::sys::stat::mknod(
                &node,
                nix::sys::stat::SFlag::S_IFBLK,
                nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
                nix::sys::stat::makedev(240, 0),
            );
            if let Err(e) = made {
                return Ok(Completion::ignored_with(format!(
                    "no loop device ({why}) and no block device node (mknod: {e})"
                )));
            }
            eprintln!("no loop device ({why}): a block device node stands in");
            (node, None)
        }
    };
    let results = results_file(&dir);
    let ok = dir.join("ok.json");
    let d = s(&dev);
    let r = s(&results);
    let runs: Vec<Vec<&str>> = vec![
        vec!["run", "--mock-cases", "pass", "--json", d],
        vec![
            "run",
            "--mock-cases",
            "pass",
            "--json",
            s(&ok),
            "--junit",
            d,
        ],
        vec![
            "run",
            "--mock-cases",
            "pass",
            "--json",
            s(&ok),
            "--markdown",
            d,
        ],
        vec!["report", r, "--html", "-o", d],
        vec!["report", r, "-o", d],
        vec!["merge", r, "-o", d],
        vec!["diff", r, r, "-o", d],
        vec!["bench", "interop", "--json", d],
    ];
    for args in &runs {
        let o = clhip(args);
        refused(&o, args, "is a block device")?;
    }
    // Through a symbolic link, too.
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&dev, &link).unwrap();
    let args = ["run", "--mock-cases", "pass", "--json", s(&link)];
    refused(&clhip(&args), &args, "is a block device")?;
    ensure(
        std::fs::metadata(&dev).is_ok_and(|m| m.file_type().is_block_device()),
        || format!("{} is no longer a block device", dev.display()),
    )?;
    if let Some(l) = &loop_dev {
        let now = read_device(&l.path, len).map_err(|e| e.to_string())?;
        ensure(now == pattern(len), || {
            format!("{}: the device's bytes changed", l.path.display())
        })?;
    }
    Ok(Completion::Completed)
}

fn no_file_is_made_in_dev_and_no_directory_unasked() -> Result<(), Failed> {
    let dir = scratch("nowhere");
    let results = results_file(&dir);
    let r = s(&results);
    // A device name that does not exist: never made as a file.
    let absent = PathBuf::from(format!("/dev/clhip-test-{}", std::process::id()));
    let a = s(&absent);
    let missing = dir.join("missing");
    let in_missing = missing.join("x.json");
    let m = s(&in_missing);
    for (args, says) in [
        (
            vec!["run", "--mock-cases", "pass", "--json", a],
            "inside /dev",
        ),
        (vec!["report", r, "-o", a], "inside /dev"),
        (vec!["merge", r, "-o", a], "inside /dev"),
        (vec!["diff", r, r, "-o", a], "inside /dev"),
        (
            vec!["run", "--mock-cases", "pass", "--json", m],
            "does not exist",
        ),
        (
            vec![
                "run",
                "--mock-cases",
                "pass",
                "--markdown",
                m,
                "--json",
                "/dev/null",
            ],
            "does not exist",
        ),
        (vec!["report", r, "--html", "-o", m], "does not exist"),
        (vec!["merge", r, "-o", m], "does not exist"),
        (vec!["diff", r, r, "-o", m], "does not exist"),
    ] {
        let o = clhip(&args);
        let made = absent.exists() || missing.exists();
        let _ = std::fs::remove_file(&absent);
        let _ = std::fs::remove_dir_all(&missing);
        ensure(!made, || {
            format!("{args:?} made {a} or {}", missing.display())
        })?;
        refused(&o, &args, says)?;
    }
    // The default results file's directory is the one clhip makes unasked.
    let cwd = scratch("default-json");
    let o = Command::new(exe())
        .current_dir(&cwd)
        .args(["run", "--mock-cases", "pass"])
        .output()
        .unwrap();
    ensure(o.status.success(), || stderr(&o))?;
    ensure(cwd.join("reports/latest.json").is_file(), || {
        "no reports/latest.json".into()
    })
}

fn sinks_are_written_and_other_character_devices_refused_before_the_run() -> Result<(), Failed> {
    let dir = scratch("sinks");
    let o = clhip(&["run", "--mock-cases", "pass", "--json", "/dev/null"]);
    ensure(o.status.success(), || stderr(&o))?;
    // /dev/stdout is whatever standard output is: here a pipe, which has no name to reopen.
    let o = clhip(&["run", "--mock-cases", "pass", "--json", "/dev/stdout"]);
    let out = String::from_utf8_lossy(&o.stdout);
    ensure(o.status.success(), || stderr(&o))?;
    ensure(out.contains("\"schema\": \"clhip-results/1\""), || {
        format!("no results on stdout:\n{out}")
    })?;
    // And a file the shell opened is written where the shell put it, not replaced.
    let file = dir.join("stdout.json");
    let o = Command::new(exe())
        .args([
            "report",
            s(&results_file(&dir)),
            "--markdown",
            "-o",
            "/dev/stdout",
        ])
        .stdout(std::fs::File::create(&file).unwrap())
        .output()
        .unwrap();
    ensure(o.status.success(), || stderr(&o))?;
    let written = std::fs::read_to_string(&file).unwrap();
    ensure(written.contains("mock/pass/0"), || written.clone())?;
    // /dev/full fails every write; /dev/zero and /dev/random are not sinks either.
    for dev in ["/dev/full", "/dev/zero", "/dev/random"] {
        let args = ["run", "--mock-cases", "pass", "--json", dev];
        refused(&clhip(&args), &args, "not a sink")?;
    }
    Ok(())
}

fn an_output_inside_an_input_directory_or_on_the_journal_is_refused() -> Result<(), Failed> {
    let dir = scratch("inputs");
    let exp = dir.join("expectations");
    std::fs::create_dir_all(&exp).unwrap();
    let rule = exp.join("known.toml");
    std::fs::write(&rule, "# the user's expectations\n").unwrap();
    let results = results_file(&dir);
    let ok = dir.join("ok.json");
    for (args, says) in [
        (
            vec![
                "run",
                "--mock-cases",
                "pass",
                "--expectations",
                s(&exp),
                "--json",
                s(&exp.join("r.json")),
            ],
            "inside the --expectations directory",
        ),
        (
            vec![
                "run",
                "--mock-cases",
                "pass",
                "--expectations",
                s(&exp),
                "--json",
                s(&ok),
                "--markdown",
                s(&exp.join("new.toml")),
            ],
            "inside the --expectations directory",
        ),
        (
            vec![
                "run",
                "--mock-cases",
                "pass",
                "--expectations",
                s(&rule),
                "--json",
                s(&ok),
                "--junit",
                s(&rule),
            ],
            "is the --expectations file",
        ),
        (
            vec![
                "run",
                "--mock-cases",
                "pass",
                "--json",
                s(&ok),
                "--markdown",
                &format!("{}.partial", s(&ok)),
            ],
            "journal of --json",
        ),
        (
            vec!["report", s(&results), "-o", s(&results)],
            "is the results file",
        ),
    ] {
        let o = clhip(&args);
        refused(&o, &args, says)?;
    }
    ensure(
        !exp.join("r.json").exists() && !exp.join("new.toml").exists(),
        || "an output was written into the expectations directory".into(),
    )?;
    ensure(
        std::fs::read_to_string(&rule).unwrap() == "# the user's expectations\n",
        || "the expectation file was overwritten".into(),
    )
}

fn repro_refuses_the_users_files_before_running_anything() -> Result<(), Failed> {
    let dir = scratch("repro-theirs");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("README.md"), "my notes\n").unwrap();
    std::fs::write(out.join("build.sh"), "my build\n").unwrap();
    // A case on a pair no machine has: the run would fail, if it were tried first.
    let args = [
        "repro",
        "nvidia7+cuda7/copy/finish/handoff/n=8",
        "-o",
        s(&out),
    ];
    let o = clhip(&args);
    refused(&o, &args, "clhip did not write it")?;
    let err = stderr(&o);
    ensure(
        !err.contains("not on this machine") && !err.contains("running"),
        || format!("-o was checked only after the case: {err}"),
    )?;
    ensure(
        std::fs::read_to_string(out.join("README.md")).unwrap() == "my notes\n"
            && std::fs::read_to_string(out.join("build.sh")).unwrap() == "my build\n",
        || "the user's files were overwritten".into(),
    )?;
    // A directory whose parent is missing, and a file, are refused as early.
    for (o_dir, says) in [
        (dir.join("no").join("such"), "does not exist"),
        (out.join("README.md"), "not a directory"),
        (PathBuf::from("/dev/clhip-test-repro"), "inside /dev"),
    ] {
        let args = [
            "repro",
            "nvidia7+cuda7/copy/finish/handoff/n=8",
            "-o",
            s(&o_dir),
        ];
        refused(&clhip(&args), &args, says)?;
    }
    ensure(!dir.join("no").exists(), || {
        "made the directory above -o".into()
    })
}

/// Needs OpenCL: the case runs once to learn its outcome.
fn repro_replaces_its_own_earlier_files_and_nothing_edited() -> Result<Completion, Failed> {
    if clhip::runtimes::opencl::test_device().is_none() {
        return Ok(Completion::ignored_with(
            "no OpenCL device to run the case on",
        ));
    }
    let dir = scratch("repro-own");
    let out = dir.join("repro");
    let case = "pocl0+host/copy/finish/handoff/n=8";
    let args = ["repro", case, "--no-shrink", "-o", s(&out)];
    for round in 0..2 {
        let o = clhip(&args);
        ensure(o.status.success(), || {
            format!("round {round}: {}", stderr(&o))
        })?;
    }
    let source = out.join("repro.c");
    let mut edited = std::fs::read_to_string(&source).unwrap();
    edited.push_str("/* a printf while debugging */\n");
    std::fs::write(&source, &edited).unwrap();
    let o = clhip(&args);
    refused(&o, &args, "repro.c is there already")?;
    ensure(stderr(&o).lines().all(|l| !l.contains("running")), || {
        format!("ran the case before refusing: {}", stderr(&o))
    })?;
    ensure(std::fs::read_to_string(&source).unwrap() == edited, || {
        "the edited repro.c was overwritten".into()
    })?;
    Ok(Completion::Completed)
}

/// Waits until `path` has `n` lines (a journal's header and results).
fn wait_for_lines(path: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(path).map_or(0, |t| t.lines().count()) < n {
        assert!(
            Instant::now() < deadline,
            "{} never had {n} lines",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where the run writing `json` keeps its journal.
fn journal_of(json: &Path) -> PathBuf {
    clhip::output::Target {
        given: json.to_path_buf(),
        path: json.to_path_buf(),
        kind: clhip::output::Kind::File,
    }
    .journal_path()
    .unwrap()
}

/// Starts a run of slow mock cases, returns once its journal is there.
fn start_slow_run(
    json: &Path,
    extra: &[&str],
) -> (std::process::Child, std::thread::JoinHandle<String>) {
    let mut child = Command::new(exe())
        .args([
            "run",
            "--mock-cases",
            "slow,slow,slow,slow",
            "--json",
            s(json),
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let drained = std::thread::spawn(move || {
        let mut all = String::new();
        let mut line = String::new();
        while err.read_line(&mut line).unwrap_or(0) > 0 {
            all.push_str(&line);
            line.clear();
        }
        all
    });
    wait_for_lines(&journal_of(json), 1);
    (child, drained)
}

/// The --json file cannot be written at the end (a directory made in its place): the Markdown
/// and JUnit files are written all the same, the exit status is 2, stderr names what failed,
/// and the journal, which holds the results, stays. And the same with --json on /dev/stdout
/// where standard output is /dev/full.
fn a_failed_output_loses_no_other_and_the_journal_keeps_the_results() -> Result<(), Failed> {
    let dir = scratch("failed");
    let results = dir.join("results");
    let others = dir.join("others");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::create_dir_all(&others).unwrap();
    let json = results.join("r.json");
    let md = others.join("r.md");
    let junit = others.join("r.xml");
    let (child, stderr_text) = start_slow_run(&json, &["--markdown", s(&md), "--junit", s(&junit)]);
    std::fs::create_dir(&json).unwrap();
    let status = child.wait_with_output().unwrap().status;
    let err = stderr_text.join().unwrap();
    ensure(status.code() == Some(2), || {
        format!("exit {:?}:\n{err}", status.code())
    })?;
    ensure(
        err.contains(&format!("--json {}: not written", json.display())),
        || err.clone(),
    )?;
    ensure(md.is_file() && junit.is_file(), || {
        format!("the other outputs were not written:\n{err}")
    })?;
    let journal = std::fs::read_to_string(journal_of(&json)).unwrap_or_default();
    // The head and the four results (each case's start has a line of its own).
    let results = journal
        .lines()
        .filter(|l| !l.starts_with("{\"started\""))
        .count();
    ensure(results == 5, || {
        format!("the journal lost results:\n{journal}\n{err}")
    })?;

    let md2 = dir.join("second.md");
    let o = Command::new(exe())
        .args([
            "run",
            "--mock-cases",
            "pass",
            "--json",
            "/dev/stdout",
            "--markdown",
            s(&md2),
        ])
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    let err = stderr(&o);
    ensure(o.status.code() == Some(2), || {
        format!("{:?}: {err}", o.status.code())
    })?;
    ensure(err.contains("--json /dev/stdout: not written"), || {
        err.clone()
    })?;
    ensure(md2.is_file(), || format!("--markdown not written: {err}"))
}

fn an_output_aimed_at_a_live_runs_results_is_refused() -> Result<(), Failed> {
    let dir = scratch("live");
    let results = results_file(&dir);
    let r = s(&results);
    let live = dir.join("live.json");
    let l = s(&live);
    let other = dir.join("other.json");
    // A name near the 255-byte limit has a journal of another name, which other processes
    // must find all the same.
    let long = dir.join(format!("{}.json", "l".repeat(245)));
    let (child, stderr_text) = start_slow_run(&live, &[]);
    let (long_child, long_stderr) = start_slow_run(&long, &[]);
    let checks: Vec<Vec<&str>> = vec![
        vec!["run", "--mock-cases", "pass", "--json", l],
        vec![
            "run",
            "--mock-cases",
            "pass",
            "--json",
            s(&other),
            "--markdown",
            l,
        ],
        vec![
            "run",
            "--mock-cases",
            "pass",
            "--json",
            s(&other),
            "--junit",
            l,
        ],
        vec!["report", r, "-o", l],
        vec!["merge", r, "-o", l],
        vec!["diff", r, r, "-o", l],
        vec!["report", r, "-o", s(&long)],
        vec![
            "run",
            "--mock-cases",
            "pass",
            "--json",
            s(&other),
            "--markdown",
            s(&long),
        ],
    ];
    let mut outcome = Ok(());
    for args in &checks {
        if outcome.is_ok() {
            outcome = refused(&clhip(args), args, "run in progress");
        }
    }
    let status = child.wait_with_output().unwrap().status;
    let err = stderr_text.join().unwrap();
    let long_status = long_child.wait_with_output().unwrap().status;
    let long_err = long_stderr.join().unwrap();
    outcome?;
    ensure(long_status.success(), || {
        format!("the long-named run failed: {long_err}")
    })?;
    ensure(status.success(), || format!("the live run failed: {err}"))?;
    let text = std::fs::read_to_string(&live).unwrap();
    ensure(text.contains("mock/slow/3"), || {
        "the live run's results were overwritten".into()
    })
}

fn help_and_version_to_a_full_stdout_fail() -> Result<(), Failed> {
    for flag in ["--help", "--version", "help"] {
        let o = Command::new(exe())
            .arg(flag)
            .stdout(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .output()
            .unwrap();
        ensure(o.status.code() == Some(2), || {
            format!(
                "{flag} > /dev/full: exit {:?}: {}",
                o.status.code(),
                stderr(&o)
            )
        })?;
        ensure(stderr(&o).contains("writing to standard output"), || {
            stderr(&o)
        })?;
        let o = clhip(&[flag]);
        ensure(o.status.success() && !o.stdout.is_empty(), || {
            format!("{flag}: {:?} {}", o.status.code(), stderr(&o))
        })?;
    }
    Ok(())
}
