use super::*;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clhip-output-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn directories_sockets_and_empty_paths_are_refused() {
    let d = tmpdir("dirs");
    assert!(
        check("--json", &d)
            .unwrap_err()
            .to_string()
            .contains("is a directory")
    );
    let slash = PathBuf::from(format!("{}/", d.join("x").display()));
    assert!(check("--json", &slash).is_err());
    assert!(check("--json", Path::new("")).is_err());
    let under_file = d.join("f");
    std::fs::write(&under_file, "x").unwrap();
    assert!(check("--json", &under_file.join("r.json")).is_err());
}

#[test]
fn device_nodes_are_written_in_place_and_links_through() {
    let null = check("--json", Path::new("/dev/null")).unwrap();
    assert!(matches!(null.kind, Kind::Sink { .. }));
    write(&null, b"{}").unwrap();
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    let d = tmpdir("links");
    let real = d.join("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = d.join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let t = check("--json", &link).unwrap();
    write(&t, b"new").unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
}

#[test]
fn outputs_may_not_be_each_other_or_an_input() {
    let d = tmpdir("collide");
    let a = check("--json", &d.join("a.json")).unwrap();
    let a2 = check("--junit", &d.join("./a.json")).unwrap();
    let err = refuse_collisions(&[("--json", &a), ("--junit", &a2)], &[]).unwrap_err();
    assert!(err.to_string().contains("same file"), "{err}");
    let cases = d.join("cases.toml");
    std::fs::write(&cases, "version = 1").unwrap();
    let over = check("--json", &cases).unwrap();
    let err = refuse_collisions(&[("--json", &over)], &[("--cases", &cases)]).unwrap_err();
    assert!(err.to_string().contains("input"), "{err}");
    let n1 = check("--json", Path::new("/dev/null")).unwrap();
    let n2 = check("--junit", Path::new("/dev/null")).unwrap();
    refuse_collisions(&[("--json", &n1), ("--junit", &n2)], &[]).unwrap();
}

#[test]
fn long_names_make_short_temporaries() {
    let d = tmpdir("long");
    let name = format!("{}.json", "r".repeat(250));
    let t = check("--json", &d.join(&name)).unwrap();
    write(&t, b"x").unwrap();
    assert_eq!(std::fs::read_to_string(d.join(&name)).unwrap(), "x");
    let j = Journal::start(&t, &serde_json::json!({"schema": JOURNAL_SCHEMA})).unwrap();
    let j = j.unwrap();
    assert!(j.path().file_name().unwrap().len() <= 255);
    j.finish();
}

#[test]
fn a_live_journal_refuses_a_second_run_and_a_dead_ones_is_kept() {
    let d = tmpdir("journal");
    let t = check("--json", &d.join("r.json")).unwrap();
    let head = serde_json::json!({"schema": JOURNAL_SCHEMA});
    let live = Journal::start(&t, &head).unwrap().unwrap();
    let err = Journal::start(&t, &head).err().unwrap();
    assert!(err.to_string().contains("another clhip run"), "{err}");
    // The first run dies: its journal stays, unlocked.
    let path = live.path().to_path_buf();
    drop(live);
    std::fs::write(&path, "the dead run's only record\n").unwrap();
    let again = Journal::start(&t, &head).unwrap().unwrap();
    let kept = d.join("r.json.partial.1");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        "the dead run's only record\n"
    );
    again.finish();
}

#[test]
fn a_fifo_is_refused_as_an_output() {
    let d = tmpdir("fifo");
    let f = d.join("f.json");
    nix::unistd::mkfifo(&f, nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert!(
        check("--json", &f)
            .unwrap_err()
            .to_string()
            .contains("FIFO")
    );
}

#[test]
fn a_character_device_that_is_not_a_sink_is_refused() {
    // /dev/full fails every write: a stand-in for any device that is not /dev/null or a
    // terminal.
    let err = check("--json", Path::new("/dev/full")).unwrap_err();
    assert!(err.to_string().contains("not a sink"), "{err}");
    let t = check("--json", Path::new("/dev/null")).unwrap();
    assert_eq!(
        t.kind,
        Kind::Sink {
            rdev: std::fs::metadata("/dev/null").unwrap().rdev()
        }
    );
}

#[test]
fn nothing_is_made_in_dev_nor_a_directory_unasked() {
    let absent = PathBuf::from(format!("/dev/clhip-test-{}", std::process::id()));
    let err = check("--json", &absent).unwrap_err();
    assert!(err.to_string().contains("inside /dev"), "{err}");
    assert!(!absent.exists());
    let d = tmpdir("mkdir");
    let missing = d.join("missing").join("r.json");
    let err = check("--json", &missing).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!d.join("missing").exists());
    // A default location may be made.
    let t = check_with("--json", &missing, Parent::MayCreate).unwrap();
    assert_eq!(t.kind, Kind::File);
    assert!(d.join("missing").is_dir());
    // But never under /dev.
    let under_dev = PathBuf::from(format!("/dev/clhip-test-{}/r.json", std::process::id()));
    assert!(check_with("--json", &under_dev, Parent::MayCreate).is_err());
    assert!(!absent.exists());
}

#[test]
fn standard_output_and_error_are_written_through_their_descriptors() {
    assert_eq!(
        check("--json", Path::new("/dev/stdout")).unwrap().kind,
        Kind::Descriptor(1)
    );
    assert_eq!(
        check("--json", Path::new("/dev/fd/2")).unwrap().kind,
        Kind::Descriptor(2)
    );
    assert_eq!(
        check("--json", Path::new("/proc/self/fd/2")).unwrap().kind,
        Kind::Descriptor(2)
    );
    // Another descriptor: written through if it was opened for writing, never if for
    // reading only.
    let d = tmpdir("descriptor");
    let input = d.join("cases.toml");
    std::fs::write(&input, "version = 1\n").unwrap();
    let reading = File::open(&input).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&reading);
    let err = check("--json", Path::new(&format!("/dev/fd/{fd}"))).unwrap_err();
    assert!(err.to_string().contains("for reading only"), "{err}");
    assert_eq!(std::fs::read_to_string(&input).unwrap(), "version = 1\n");
    let out = d.join("out.json");
    let writing = File::create(&out).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&writing);
    let t = check("--json", Path::new(&format!("/dev/fd/{fd}"))).unwrap();
    assert_eq!(t.kind, Kind::Descriptor(fd));
    write(&t, b"{}").unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{}");
    // A link to /dev/stderr is /dev/stderr.
    let link = d.join("err.json");
    std::os::unix::fs::symlink("/dev/stderr", &link).unwrap();
    assert_eq!(check("--json", &link).unwrap().kind, Kind::Descriptor(2));
}

#[test]
fn an_output_inside_an_input_directory_is_refused() {
    let d = tmpdir("indir");
    let exp = d.join("expectations");
    std::fs::create_dir_all(exp.join("sub")).unwrap();
    for inside in [exp.join("new.toml"), exp.join("sub").join("r.json")] {
        let t = check("--markdown", &inside).unwrap();
        let err =
            refuse_collisions(&[("--markdown", &t)], &[("--expectations", &exp)]).unwrap_err();
        assert!(
            err.to_string().contains("inside the --expectations"),
            "{err}"
        );
    }
    // A sibling whose name begins the same is not inside.
    std::fs::create_dir_all(d.join("expectations2")).unwrap();
    let beside = check("--markdown", &d.join("expectations2").join("x.toml")).unwrap();
    refuse_collisions(&[("--markdown", &beside)], &[("--expectations", &exp)]).unwrap();
}

#[test]
fn the_journal_is_an_output_too() {
    let d = tmpdir("journal-out");
    let json = check("--json", &d.join("r.json")).unwrap();
    let journal = json.journal_target().unwrap();
    let md = check("--markdown", &d.join("r.json.partial")).unwrap();
    let err = refuse_collisions(
        &[
            ("--json", &json),
            ("journal", &journal),
            ("--markdown", &md),
        ],
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("same file"), "{err}");
}

#[test]
fn a_live_runs_results_file_is_refused_as_any_output() {
    let d = tmpdir("live");
    let head = serde_json::json!({"schema": JOURNAL_SCHEMA});
    for name in ["r.json".to_string(), format!("{}.json", "r".repeat(250))] {
        let path = d.join(&name);
        let t = check("--json", &path).unwrap();
        let live = Journal::start(&t, &head).unwrap().unwrap();
        for what in ["--markdown", "-o"] {
            let err = check(what, &path).unwrap_err();
            assert!(err.to_string().contains("run in progress"), "{err}");
        }
        live.finish();
        // A journal left by a run that died is no obstacle.
        std::fs::write(t.journal_path().unwrap(), "dead\n").unwrap();
        check("-o", &path).unwrap();
    }
}

#[test]
fn a_node_put_in_place_of_a_checked_file_is_not_renamed_over() {
    let d = tmpdir("swapped");
    let path = d.join("r.json");
    let t = check("--json", &path).unwrap();
    // A FIFO stands in for a device node made there after the check.
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = write(&t, b"x").unwrap_err();
    assert!(
        err.to_string().contains("no longer a regular file"),
        "{err}"
    );
    assert!(
        std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn a_new_files_mode_follows_the_request_and_no_temporary_is_left() {
    let d = tmpdir("mode");
    let script = check("-o", &d.join("build.sh")).unwrap();
    write_with_mode(&script, b"#!/bin/sh\n", 0o777).unwrap();
    let mode = std::fs::metadata(&script.path)
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o100, 0, "{mode:o}");
    let plain = check("-o", &d.join("r.json")).unwrap();
    write(&plain, b"{}").unwrap();
    let mode = std::fs::metadata(&plain.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0, "{mode:o}");
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".clhip-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_directory_of_clhips_files_replaces_only_its_own() {
    let d = tmpdir("dir");
    let names = ["repro.c", "README.md"];
    let out = d.join("repro");
    let t = check_dir("-o", &out, &names).unwrap();
    assert!(!out.exists(), "checking makes nothing");
    t.write(&[
        ("repro.c", b"int main;", 0o666),
        ("README.md", b"# r", 0o666),
    ])
    .unwrap();
    // clhip's own earlier files are replaced.
    let again = check_dir("-o", &out, &names).unwrap();
    again
        .write(&[
            ("repro.c", b"int main(void);", 0o666),
            ("README.md", b"# r2", 0o666),
        ])
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("README.md")).unwrap(),
        "# r2"
    );
    // Edited since: the user's now.
    std::fs::write(out.join("repro.c"), "int main(void); /* mine */").unwrap();
    let err = check_dir("-o", &out, &names).unwrap_err();
    assert!(
        err.to_string().contains("repro.c is there already"),
        "{err}"
    );
    // And checked again at the write: edited after the check.
    std::fs::write(out.join("repro.c"), "int main(void);").unwrap();
    let checked = check_dir("-o", &out, &names).unwrap();
    std::fs::write(out.join("README.md"), "# the user's notes").unwrap();
    assert!(
        checked
            .write(&[("repro.c", b"x", 0o666), ("README.md", b"y", 0o666)])
            .is_err()
    );
    assert_eq!(
        std::fs::read_to_string(out.join("README.md")).unwrap(),
        "# the user's notes"
    );
    // A user's file in a directory clhip never wrote to.
    let theirs = d.join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("README.md"), "mine").unwrap();
    let err = check_dir("-o", &theirs, &names).unwrap_err();
    assert!(
        err.to_string().contains("README.md is there already"),
        "{err}"
    );
    // A list that is not clhip's proves nothing.
    std::fs::write(theirs.join(WRITTEN_LIST), "anything").unwrap();
    assert!(check_dir("-o", &theirs, &names).is_err());
    // The directory is made, the ones above it are not.
    let err = check_dir("-o", &d.join("a").join("b"), &names).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    // Not a directory, and not in /dev.
    assert!(check_dir("-o", &out.join("README.md"), &names).is_err());
    assert!(check_dir("-o", Path::new("/dev/clhip-test-repro"), &names).is_err());
}
