//! Every file clhip reads from a path the user gives (case files, baselines, expectation files,
//! results files and journals, merge and diff inputs, `repro --from`, probe files, figures)
//! and every kernel cache entry: a device, a FIFO or a file too large is refused at once with
//! an error naming the file and what it is, never read until killed or waited on forever. A
//! byte-order mark is not part of the first line, and a results file with impossible times is
//! refused.
//!
//! Each run has a time limit and a memory limit, so that a reader that does block or
//! read without end fails its test rather than hanging it or taking the machine's memory.

#[macro_use]
mod support;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_clhip");
/// A real results file of 4 cases, which `report` reads as complete and consistent.
const RESULTS: &str = "reports/nvidia-h100-580.159.04-cuda13.0-planted-skip-signal.json";

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// The largest resident set of clhip and of each worker it reaped, in KiB.
    max_rss_kib: u64,
}

/// clhip with `args` and `env`, in 4 GiB of data (RLIMIT_DATA: what is written, not the address
/// space that threads and allocators reserve, which grows with the machine's cores), killed (with its workers) after
/// `limit`: then no exit code, and its stderr says so.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, for its resource usage"
)]
fn clhip_within(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Ran {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -d 4194304 && exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("clhip starts");
    let pid = child.id() as i32;
    let readers: Vec<_> = [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ]
    .into_iter()
    .map(|mut r| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    })
    .collect();
    let started = Instant::now();
    let mut status = 0;
    // SAFETY: plain data, filled in by wait4.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // wait4, not Child::try_wait: its usage is clhip's and its reaped workers' together.
        // SAFETY: `pid` is this test's unreaped child; `status` and `usage` outlive the call.
        let reaped = unsafe { nix::libc::wait4(pid, &mut status, nix::libc::WNOHANG, &mut usage) };
        if reaped == pid {
            break;
        }
        assert_eq!(reaped, 0, "wait4: {}", std::io::Error::last_os_error());
        if started.elapsed() > limit {
            let group = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            let mut out = readers.into_iter().map(|r| r.join().unwrap());
            return Ran {
                code: None,
                stdout: out.next().unwrap(),
                stderr: format!(
                    "{}\n(killed: still running after {limit:?}: a reader blocked)",
                    out.next().unwrap()
                ),
                max_rss_kib: 0,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = readers.into_iter().map(|r| r.join().unwrap());
    Ran {
        code: nix::libc::WIFEXITED(status).then(|| nix::libc::WEXITSTATUS(status)),
        stdout: out.next().unwrap(),
        stderr: out.next().unwrap(),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    }
}

fn clhip(args: &[&str]) -> Ran {
    clhip_within(args, &[], Duration::from_secs(60))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clhip-readers-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fifo(at: &Path) {
    nix::unistd::mkfifo(at, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// A sparse file of `len` bytes: no disk taken.
fn sparse(at: &Path, len: u64) {
    std::fs::File::create(at).unwrap().set_len(len).unwrap();
}

/// Every command line that reads `bad` from a user path, with what it writes (which must not
/// appear).
fn readers_of(bad: &str, out: &Path) -> Vec<(Vec<String>, Option<PathBuf>)> {
    let o = |name: &str| out.join(name);
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    vec![
        (s(&["run", "--cases", bad, "--json"]), Some(o("cases.json"))),
        (
            s(&["run", "--baseline", bad, "--json"]),
            Some(o("baseline.json")),
        ),
        (
            s(&["run", "--expectations", bad, "--json"]),
            Some(o("expectations.json")),
        ),
        (s(&["report", bad]), None),
        (s(&["report", "--html", bad, "-o"]), Some(o("report.html"))),
        (
            s(&["report", "--html", RESULTS, "--figure", bad, "-o"]),
            Some(o("figure.html")),
        ),
        (s(&["diff", bad, RESULTS]), None),
        (s(&["diff", RESULTS, bad]), None),
        (s(&["merge", bad, RESULTS, "-o"]), Some(o("merged.json"))),
        (s(&["list", "--probe", bad]), None),
        (
            s(&[
                "repro",
                "nvidia0+cuda0/copy/finish/handoff/n=1",
                "--from",
                bad,
                "-o",
            ]),
            Some(o("repro")),
        ),
        (s(&["repro", "--all", bad, "-o"]), Some(o("repro-all"))),
    ]
    .into_iter()
    .map(|(mut args, output)| {
        if let Some(p) = &output {
            args.push(path(p));
        }
        (args, output)
    })
    .collect()
}

/// Each reader of [`readers_of`] `bad` exits 2 at once with `{bad}: {what}`, writing nothing.
fn every_reader_refuses(bad: &Path, what: &str, scratch_name: &str) {
    let out = scratch(scratch_name);
    let want = format!("{}: {what}", bad.display());
    // Every reader's answer, then the verdict: a planted break shows each reader it reaches.
    let mut wrong = Vec::new();
    for (args, output) in readers_of(bad.to_str().unwrap(), &out) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = clhip(&args);
        if r.code != Some(2) || !r.stderr.contains(&want) {
            wrong.push(format!("clhip {args:?}: exit {:?}: {}", r.code, r.stderr));
        }
        if let Some(p) = output.filter(|p| p.exists()) {
            wrong.push(format!("clhip {args:?} wrote {}", p.display()));
        }
    }
    assert!(
        wrong.is_empty(),
        "want `{want}` and exit 2 from every reader:\n{}",
        wrong.join("\n")
    );
}

fn dev_zero_and_dev_urandom_are_refused_by_every_reader_never_read() {
    for dev in ["/dev/zero", "/dev/urandom"] {
        every_reader_refuses(
            Path::new(dev),
            "a character device, not a regular file",
            "devices",
        );
    }
}

fn a_fifo_is_refused_by_every_reader_never_waited_on() {
    let dir = scratch("fifo");
    let f = dir.join("input");
    fifo(&f);
    every_reader_refuses(&f, "a FIFO (named pipe), not a regular file", "fifo-out");
    // An expectations directory holding a FIFO among its files.
    let expectations = dir.join("expectations");
    std::fs::create_dir(&expectations).unwrap();
    fifo(&expectations.join("pipe.toml"));
    let r = clhip(&["run", "--expectations", expectations.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}: a FIFO (named pipe), not a regular file",
            expectations.join("pipe.toml").display()
        )),
        "{}",
        r.stderr
    );
}

fn a_huge_sparse_file_is_refused_by_its_size_with_the_limit_for_its_kind() {
    let dir = scratch("huge");
    let huge = dir.join("huge");
    sparse(&huge, 1 << 40);
    let h = huge.to_str().unwrap();
    for (args, limit) in [
        (vec!["run", "--cases", h], "4 MiB limit for a case file"),
        (vec!["run", "--baseline", h], "16 MiB limit for a baseline"),
        (
            vec!["run", "--expectations", h],
            "16 MiB limit for an expectation file",
        ),
        (vec!["report", h], "512 MiB limit for a results file"),
        (vec!["diff", RESULTS, h], "512 MiB limit for a results file"),
        (vec!["list", "--probe", h], "16 MiB limit for a probe file"),
    ] {
        let r = clhip(&args);
        assert_eq!(r.code, Some(2), "clhip {args:?}: {}", r.stderr);
        let want = format!("{h}: 1 TiB, over the {limit}");
        assert!(r.stderr.contains(&want), "clhip {args:?}: {}", r.stderr);
    }
    // Just over the limit is over it.
    let cases = dir.join("cases.toml");
    sparse(&cases, (4 << 20) + 1);
    let r = clhip(&["run", "--cases", cases.to_str().unwrap()]);
    assert!(
        r.stderr
            .contains("4194305 bytes, over the 4 MiB limit for a case file"),
        "{}",
        r.stderr
    );
}

/// `text` with a UTF-8 byte-order mark before it, at `dir/name`.
fn with_bom(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
    let p = dir.join(name);
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend_from_slice(text);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn a_byte_order_mark_is_not_part_of_a_baselines_first_entry() {
    let dir = scratch("bom-baseline");
    let f = with_bom(&dir, "baseline.csv", b"a/b/c,fail\nd/e/f,crash\n");
    let b = clhip::expectations::Baseline::load(&f).unwrap();
    assert_eq!(
        b.known.get("a/b/c"),
        Some(&clhip::model::OutcomeKind::Fail),
        "{:?}",
        b.known
    );
    assert_eq!(b.known.len(), 2);
}

fn a_byte_order_mark_changes_nothing_in_a_case_file_expectation_file_or_results_file() {
    let dir = scratch("bom");
    let probe = "tests/fixtures/mi100-like-probe.json";
    let list = |extra: &[&str]| {
        let mut args = vec!["list", "--probe", probe];
        args.extend_from_slice(extra);
        let r = clhip(&args);
        assert_eq!(r.code, Some(0), "clhip {args:?}: {}", r.stderr);
        r.stdout
    };

    let cases = with_bom(
        &dir,
        "cases.toml",
        &std::fs::read("cases/default.toml").unwrap(),
    );
    assert_eq!(
        list(&["--cases", cases.to_str().unwrap()]),
        list(&["--cases", "cases/default.toml"])
    );

    let plain = "cases/expectations/mi100-rocm-6.x.toml";
    let bom = with_bom(&dir, "mi100.toml", &std::fs::read(plain).unwrap());
    let annotated = list(&["--expectations", bom.to_str().unwrap()]);
    assert!(annotated.contains("expect unsupported"), "{annotated}");
    assert_eq!(
        annotated.replace(bom.to_str().unwrap(), plain),
        list(&["--expectations", plain])
    );

    let results = with_bom(&dir, "results.json", &std::fs::read(RESULTS).unwrap());
    let (a, b) = (
        clhip(&["report", RESULTS]),
        clhip(&["report", results.to_str().unwrap()]),
    );
    assert_eq!(b.code, a.code, "{}", b.stderr);
    assert_eq!(b.stdout, a.stdout);
}

fn a_results_file_with_an_impossible_time_is_refused_naming_the_file_and_result() {
    let dir = scratch("times");
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(RESULTS).unwrap()).unwrap();
    assert_eq!(clhip(&["report", RESULTS]).code, Some(0));
    let id = good["results"][1]["id"].as_str().unwrap().to_string();
    let planted = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        edit(&mut v);
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        p
    };
    let negative = planted("negative.json", &|v| {
        v["results"][1]["duration_s"] = (-0.25).into()
    });
    let r = clhip(&["report", negative.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}: corrupt: result `{id}` has duration_s -0.25",
            negative.display()
        )),
        "{}",
        r.stderr
    );
    // diff and merge read through the same loader.
    let r = clhip(&["diff", RESULTS, negative.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("has duration_s -0.25"), "{}", r.stderr);

    let wall = planted("wall.json", &|v| v["wall_s"] = (-3.0).into());
    let r = clhip(&["report", wall.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}: corrupt: the run's wall_s is -3",
            wall.display()
        )),
        "{}",
        r.stderr
    );
}

/// The first case `list` plans on this machine's OpenCL device; without one the test is ignored
/// (failed under `CLHIP_REQUIRE_OPENCL=1`).
fn a_host_case() -> String {
    support::opencl_device();
    let r = clhip(&["list", "/copy/finish/handoff/n=1"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    r.stdout.lines().next().expect("a copy case").to_string()
}

fn a_kernel_cache_entry_linked_to_dev_zero_or_a_fifo_is_recompiled_not_read() {
    let case = a_host_case();
    let dir = scratch("kernel-cache");
    let cache = dir.join("cache");
    let env = [("CLHIP_KERNEL_CACHE", cache.to_str().unwrap())];
    let json = dir.join("r.json");
    let run = |what: &str| {
        let r = clhip_within(
            &["run", &case, "--json", json.to_str().unwrap()],
            &env,
            Duration::from_secs(120),
        );
        assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
        // A run takes about 120 MiB; reading a /dev/zero entry until the allocation fails,
        // gigabytes.
        assert!(
            r.max_rss_kib < 512 << 10,
            "{what}: a process of the run grew to {} MiB",
            r.max_rss_kib >> 10
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let results = v["results"].as_array().unwrap();
        assert!(!results.is_empty());
        for res in results {
            assert_eq!(res["outcome"]["outcome"], "pass", "{what}: {res}");
        }
    };
    run("an empty cache");
    let entries = || -> Vec<PathBuf> {
        std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "bin"))
            .collect()
    };
    let stored = entries();
    assert!(!stored.is_empty(), "the run compiled into the cache");
    for what in ["a link to /dev/zero", "a FIFO"] {
        for e in &stored {
            std::fs::remove_file(e).unwrap();
            match what {
                "a FIFO" => fifo(e),
                _ => std::os::unix::fs::symlink("/dev/zero", e).unwrap(),
            }
        }
        run(what);
        for e in &stored {
            let m = std::fs::symlink_metadata(e).unwrap();
            assert!(m.is_file(), "{what} at {} was replaced", e.display());
        }
    }
}

fn a_byte_order_mark_in_a_baseline_leaves_its_first_entry_matching_its_case() {
    let case = a_host_case();
    let dir = scratch("bom-run");
    // Known to fail: it now passes, which only a baseline entry matched to it can say.
    let baseline = with_bom(&dir, "baseline.csv", format!("{case},fail\n").as_bytes());
    let json = dir.join("r.json");
    let r = clhip_within(
        &[
            "run",
            &case,
            "--baseline",
            baseline.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
        Duration::from_secs(120),
    );
    assert!(matches!(r.code, Some(0 | 1)), "{}", r.stderr);
    assert!(!r.stderr.contains("matches no case"), "{}", r.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v.get("stale_baseline").is_none(), "{v}");
    assert_eq!(v["summary"]["unexpected_pass"], 1, "{}", v["summary"]);
}

tests!(
    dev_zero_and_dev_urandom_are_refused_by_every_reader_never_read,
    a_fifo_is_refused_by_every_reader_never_waited_on,
    a_huge_sparse_file_is_refused_by_its_size_with_the_limit_for_its_kind,
    a_byte_order_mark_is_not_part_of_a_baselines_first_entry,
    a_byte_order_mark_changes_nothing_in_a_case_file_expectation_file_or_results_file,
    a_results_file_with_an_impossible_time_is_refused_naming_the_file_and_result,
    a_kernel_cache_entry_linked_to_dev_zero_or_a_fifo_is_recompiled_not_read,
    a_byte_order_mark_in_a_baseline_leaves_its_first_entry_matching_its_case
);
