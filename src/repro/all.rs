//! `clhip repro --all RUN.json -o DIR`: a reproducer for each kind of non-pass in a run (one
//! per pair, path, sync, op and outcome, shrunk as `repro` shrinks one case) and a pass per
//! pair and path, each in its own directory, with `run-all.sh`, which builds and runs them all
//! and prints clhip's outcome beside each reproducer's, and a README.md that lists them and
//! the cases no reproducer could be written for, with why.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;

use crate::model::{OutcomeKind, is_negative_control};
use crate::report;
use crate::results::Work;

use super::{ReproCase, Request};

/// What `clhip repro --all` is asked for.
#[derive(Debug, Clone)]
pub struct AllRequest {
    /// The results file.
    pub from: PathBuf,
    /// The directory to write into.
    pub output: PathBuf,
    pub no_shrink: bool,
    /// Per-case time limit of the runs that shrink.
    pub timeout_s: f64,
    pub rocm_path: Option<PathBuf>,
}

/// A case of the run chosen to stand for its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub id: String,
    pub kind: OutcomeKind,
    /// Why it was chosen: `a pass of its path`, or the kind of non-pass it stands for.
    pub stands_for: String,
}

/// One case per (pair, path, sync, op, outcome kind) that is not a pass, and one pass per
/// (pair, path), each the smallest of its kind (the cheapest to shrink and to run). A skip and
/// an error are no verdict on the driver and stand for nothing.
pub fn choose(results: &[crate::results::CaseResult]) -> Vec<Chosen> {
    let mut chosen: BTreeMap<String, (usize, Chosen)> = BTreeMap::new();
    for r in results {
        let Work::Case(c) = &r.work else { continue };
        let kind = reproduced_kind(r.outcome.kind());
        let (key, stands_for) = match kind {
            OutcomeKind::Skip | OutcomeKind::Error | OutcomeKind::Incomplete => continue,
            OutcomeKind::Pass => (
                format!("{}/{}/pass", c.pair.id(), c.path),
                "a pass of its path".to_string(),
            ),
            _ => (
                format!("{}/{}/{}/{}/{kind}", c.pair.id(), c.path, c.sync, c.op),
                format!("{kind} of {}/{}/{}", c.path, c.sync, c.op),
            ),
        };
        let this = Chosen {
            id: r.id.clone(),
            kind,
            stands_for,
        };
        match chosen.get(&key) {
            Some((n, _)) if *n <= c.n => {}
            _ => {
                chosen.insert(key, (c.n, this));
            }
        }
    }
    chosen.into_values().map(|(_, c)| c).collect()
}

/// The outcome a reproducer can give for a case clhip saw as `kind`: a pass with a kernel
/// warning crossed its data right, and the program does not read the kernel's log.
fn reproduced_kind(kind: OutcomeKind) -> OutcomeKind {
    match kind {
        OutcomeKind::Warn => OutcomeKind::Pass,
        k => k,
    }
}

/// A reproducer written, or why none was.
#[derive(Debug, Clone)]
pub struct Written {
    pub chosen: Chosen,
    /// Its directory under the output, or why no reproducer was written.
    pub dir: Result<String, String>,
    /// The case as written (after shrinking) and the outcome clhip saw for it.
    pub emitted: Option<(String, OutcomeKind, bool)>,
}

/// The files `--all` writes beside the reproducers' directories.
pub const ALL_FILES: [&str; 2] = ["run-all.sh", "README.md"];

/// Writes every chosen case's reproducer into its own directory under `req.output`, then
/// run-all.sh and README.md; `say` takes each line of progress.
pub fn make_all(req: &AllRequest, say: &mut dyn FnMut(&str)) -> anyhow::Result<Vec<Written>> {
    let out = crate::output::check_dir("-o", &req.output, &ALL_FILES)?;
    let loaded = report::load(&req.from)?;
    let chosen = choose(&loaded.report.results);
    if chosen.is_empty() {
        anyhow::bail!(
            "{}: no case with a verdict on the driver (every result is a skip or an error)",
            req.from.display()
        );
    }
    match std::fs::create_dir(&out.dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("-o {}", req.output.display())),
    }
    let mut written = Vec::new();
    for c in chosen {
        let name = dir_name(&c);
        let made = ReproCase::parse(&c.id)
            .and_then(|case| super::check_covered(&case).map(|()| case))
            .and_then(|_| {
                say(&format!("clhip: {} ({})", c.id, c.stands_for));
                super::make(
                    &Request {
                        case: c.id.clone(),
                        seed: None,
                        output: req.output.join(&name),
                        from: Some(req.from.clone()),
                        no_shrink: req.no_shrink,
                        plant: None,
                        timeout_s: req.timeout_s,
                        rocm_path: req.rocm_path.clone(),
                        shrunk: None,
                    },
                    say,
                )
            });
        written.push(match made {
            Ok(m) => {
                let kind = m.seen.map_or(c.kind, |(k, _)| reproduced_kind(k));
                let negative = is_negative_control(m.case.path, m.case.sync);
                Written {
                    emitted: Some((m.case.to_string(), kind, negative)),
                    dir: Ok(name),
                    chosen: c,
                }
            }
            Err(e) => Written {
                emitted: None,
                dir: Err(format!("{e:#}")),
                chosen: c,
            },
        });
    }
    let script = run_all_sh(&written);
    let readme = readme(&req.from, &written);
    out.write(&[
        (ALL_FILES[0], script.as_bytes(), 0o777),
        (ALL_FILES[1], readme.as_bytes(), 0o666),
    ])?;
    Ok(written)
}

/// `fault.nvidia0+cuda0.cl-svm-coarse.finish.gemm`; a pass: `pass.nvidia0+cuda0.copy`. Only
/// characters a shell takes inside single quotes and a file system takes in a name.
fn dir_name(c: &Chosen) -> String {
    let parts: Vec<&str> = c.id.split('/').collect();
    let kept = if c.kind == OutcomeKind::Pass {
        &parts[..parts.len().min(2)]
    } else {
        &parts[..parts.len().saturating_sub(1)]
    };
    let name = format!("{}.{}", c.kind, kept.join("."));
    name.chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || "+-_=".contains(ch) || ch == '.' {
                ch
            } else {
                '_'
            }
        })
        .collect()
}

/// The script: build and run each reproducer, map its exit to an outcome as docs/repro.md
/// says, print clhip's beside it, exit 1 if any disagrees or does not build.
fn run_all_sh(written: &[Written]) -> String {
    let mut s = String::from(
        "#!/bin/sh\n\
         # Written by clhip repro --all: builds and runs each reproducer here and prints clhip's\n\
         # outcome beside the reproducer's. Exit 0: each gave clhip's outcome; 1: one did not, or\n\
         # did not build (its build.log and run.log are in its directory). A negative control\n\
         # (no sync, or finish where only map or acquire hands the memory over) may race: pass\n\
         # against fail there is shown as a race, not counted as a disagreement.\n\
         # The reproducer's exit: 0 pass, 1 fail, 2 unsupported, 3 fault, a signal a crash (ROCm's\n\
         # \"Memory access fault by GPU\" abort a fault), killed after CLHIP_REPRO_TIMEOUT seconds\n\
         # (default 600) a timeout.\n\
         cd \"$(dirname \"$0\")\" || exit 2\n\
         disagree=0\n\
         outcome_of() {\n\
         \x20   case $1 in\n\
         \x20   0) echo pass ;;\n\
         \x20   1) echo fail ;;\n\
         \x20   2) echo unsupported ;;\n\
         \x20   3) echo fault ;;\n\
         \x20   124) echo timeout ;;\n\
         \x20   *) if [ \"$1\" -gt 128 ] && grep -q 'Memory access fault by GPU' \"$2\"; then echo fault\n\
         \x20      elif [ \"$1\" -gt 128 ]; then echo crash\n\
         \x20      else echo \"exit $1\"; fi ;;\n\
         \x20   esac\n\
         }\n\
         row() { # directory, clhip's outcome, negative control (yes or no)\n\
         \x20   if ! sh \"$1/build.sh\" >\"$1/build.log\" 2>&1; then\n\
         \x20       got='build failed' code=-\n\
         \x20   else\n\
         \x20       (cd \"$1\" && exec timeout \"${CLHIP_REPRO_TIMEOUT:-600}\" ./repro) >\"$1/run.log\" 2>&1\n\
         \x20       code=$?\n\
         \x20       got=$(outcome_of \"$code\" \"$1/run.log\")\n\
         \x20       [ \"$code\" -gt 128 ] && [ \"$code\" != 124 ] && code=\"$code SIG$(kill -l $((code - 128)))\"\n\
         \x20   fi\n\
         \x20   if [ \"$got\" = \"$2\" ]; then\n\
         \x20       verdict=agrees\n\
         \x20   elif [ \"$3\" = yes ] && [ \"$got $2\" = 'pass fail' -o \"$got $2\" = 'fail pass' ]; then\n\
         \x20       verdict='race (negative control)'\n\
         \x20   else\n\
         \x20       verdict=DISAGREES disagree=1\n\
         \x20   fi\n\
         \x20   printf '%-12s %-28s %-24s %s\\n' \"$2\" \"$got (exit $code)\" \"$verdict\" \"$1\"\n\
         }\n\
         printf '%-12s %-28s %-24s %s\\n' clhip reproducer verdict directory\n",
    );
    for w in written {
        if let (Ok(dir), Some((_, kind, negative))) = (&w.dir, &w.emitted) {
            s.push_str(&format!(
                "row '{dir}' {kind} {}\n",
                if *negative { "yes" } else { "no" }
            ));
        }
    }
    let refused = written.iter().filter(|w| w.dir.is_err()).count();
    if refused > 0 {
        s.push_str(&format!(
            "echo '{refused} case(s) have no reproducer: README.md says why'\n"
        ));
    }
    s.push_str("exit $disagree\n");
    s
}

fn readme(from: &std::path::Path, written: &[Written]) -> String {
    let md = crate::escape::markdown_text;
    let mut s = format!(
        "# Reproducers of {}\n\n\
         One per kind of non-pass (pair, path, sync, op and outcome) and a pass per pair and \
         path, each shrunk as `clhip repro` shrinks a case. `./run-all.sh` builds and runs them \
         all and prints clhip's outcome beside each reproducer's; it exits 1 if any disagrees.\n\n\
         | directory | case written | clhip | stands for |\n|---|---|---|---|\n",
        md(&from.display().to_string())
    );
    for w in written {
        if let (Ok(dir), Some((case, kind, _))) = (&w.dir, &w.emitted) {
            s.push_str(&format!(
                "| {} | `{}` | {kind} | {} (`{}`) |\n",
                md(dir),
                md(case),
                md(&w.chosen.stands_for),
                md(&w.chosen.id)
            ));
        }
    }
    let refused: Vec<&Written> = written.iter().filter(|w| w.dir.is_err()).collect();
    if !refused.is_empty() {
        s.push_str("\n## No reproducer\n\n| case | clhip | why |\n|---|---|---|\n");
        for w in refused {
            let why = w.dir.as_ref().err().map_or("", String::as_str);
            s.push_str(&format!(
                "| `{}` | {} | {} |\n",
                md(&w.chosen.id),
                w.chosen.kind,
                md(&why.replace('\n', " "))
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Outcome, Pair};
    use crate::results::CaseResult;

    fn result(id: &str, outcome: Outcome) -> CaseResult {
        let case = ReproCase::parse(id).unwrap();
        let c = crate::model::Case {
            pair: Pair {
                opencl: crate::model::ClDeviceRef {
                    platform_index: 0,
                    device_index: 0,
                    label: case.cl_label.clone(),
                },
                peer: case.peer,
                install: None,
                cl_gpu: None,
            },
            path: case.path,
            sync: case.sync,
            op: case.op,
            n: case.n,
            env: Default::default(),
        };
        let e = crate::expectations::Baseline::unbaselined(&c);
        CaseResult::new(id.to_string(), Work::Case(c), outcome, e, 0.0)
    }

    fn fail() -> Outcome {
        Outcome::Unsupported {
            reason: "refused".into(),
            error: None,
        }
    }

    /// One case per kind of non-pass, the smallest; one pass per pair and path; skips and
    /// errors stand for nothing.
    #[test]
    fn one_case_stands_for_each_kind_the_smallest() {
        let results = vec![
            result("pocl0+host/copy/none/fft/n=64", fail()),
            result("pocl0+host/copy/none/fft/n=8", fail()),
            result("pocl0+host/copy/none/fft/n=16", Outcome::pass()),
            result("pocl0+host/copy/finish/fft/n=4", Outcome::pass()),
            result("pocl0+host/copy/none/pipeline/n=8", fail()),
            result(
                "pocl0+host/use-host-ptr/map/fft/n=8",
                Outcome::Skip {
                    reason: "filtered".into(),
                },
            ),
            result(
                "pocl0+host/use-host-ptr/map/fft/n=16",
                Outcome::Error {
                    reason: "harness".into(),
                },
            ),
        ];
        let ids: Vec<(String, OutcomeKind)> = choose(&results)
            .into_iter()
            .map(|c| (c.id, c.kind))
            .collect();
        assert_eq!(
            ids,
            vec![
                (
                    "pocl0+host/copy/none/fft/n=8".to_string(),
                    OutcomeKind::Unsupported
                ),
                (
                    "pocl0+host/copy/none/pipeline/n=8".to_string(),
                    OutcomeKind::Unsupported
                ),
                (
                    "pocl0+host/copy/finish/fft/n=4".to_string(),
                    OutcomeKind::Pass
                ),
            ]
        );
        let c = &choose(&results)[0];
        assert_eq!(dir_name(c), "unsupported.pocl0+host.copy.none.fft");
    }

    /// A pass with a kernel warning is reproduced as a pass (the program reads no kernel log);
    /// a case the run died in stands for nothing.
    #[test]
    fn a_warned_pass_stands_as_a_pass_and_an_incomplete_case_for_nothing() {
        let results = vec![
            result(
                "pocl0+host/copy/finish/fft/n=4",
                Outcome::Warn {
                    warning: "NVRM: Xid 13".into(),
                },
            ),
            result(
                "pocl0+host/use-host-ptr/map/fft/n=8",
                Outcome::Incomplete {
                    reason: "the run died".into(),
                },
            ),
        ];
        let ids: Vec<(String, OutcomeKind)> = choose(&results)
            .into_iter()
            .map(|c| (c.id, c.kind))
            .collect();
        assert_eq!(
            ids,
            [(
                "pocl0+host/copy/finish/fft/n=4".to_string(),
                OutcomeKind::Pass
            )]
        );
    }
}
