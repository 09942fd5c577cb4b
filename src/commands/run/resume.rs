//! `run --resume`: the journal of a run that died, checked against this run, and what of it
//! is kept, recorded as incomplete, or run again.

use super::*;

/// The journal `path` read and checked against this run: the same seed, case set, flags and
/// driver fingerprint.
pub(super) fn resume_from(
    path: &Path,
    args: &RunArgs,
    outputs: &Outputs,
    selection: &clhip::report::Selection,
    probe: &Probe,
) -> anyhow::Result<Journaled> {
    let journal = clhip::resume::read(path)?;
    let own = outputs.json.journal_path();
    let same_file = |a: &Path, b: &Path| {
        std::fs::canonicalize(a)
            .ok()
            .is_some_and(|a| std::fs::canonicalize(b).ok() == Some(a))
    };
    if !own.as_deref().is_some_and(|own| same_file(own, path)) {
        bail!(
            "--resume {}: is not the journal of --json {} (that is {})",
            path.display(),
            outputs.json.given.display(),
            own.map_or("none".into(), |p| p.display().to_string())
        );
    }
    journal.check_same_run(&args.resume_key(), selection, &probe.fingerprint())?;
    Ok(journal)
}

/// What a resumed run still runs, and the results it keeps: every case the journal has a
/// result for, and each case that was running when the run died as `incomplete`. An
/// incomplete case runs again only when asked (`rerun`) and only if it was not incomplete
/// twice in a row; each is said.
pub(super) fn take_up(
    journal: &Journaled,
    items: Vec<Planned>,
    decided: &mut Vec<clhip::results::CaseResult>,
    rerun: bool,
) -> Resumed {
    let planned: HashMap<String, Planned> =
        items.iter().map(|p| (p.id.clone(), p.clone())).collect();
    let mut kept: Vec<clhip::results::CaseResult> = journal.results.clone();
    let mut in_a_row = journal.incomplete_in_a_row.clone();
    for r in journal.incomplete_results(&planned) {
        *in_a_row.entry(r.id.clone()).or_insert(0) += 1;
        kept.retain(|k| k.id != r.id);
        kept.push(r);
    }
    let mut again = std::collections::HashSet::new();
    for r in &kept {
        let Some(&times) = in_a_row.get(&r.id) else {
            continue;
        };
        if r.outcome.kind() != OutcomeKind::Incomplete {
            continue;
        }
        if times >= 2 {
            note(&format!(
                "clhip: resume: `{}` was running when the run died {times} times in a row: skipped, incomplete",
                r.id
            ));
        } else if rerun {
            note(&format!(
                "clhip: resume: `{}` was running when the run died: incomplete; running it once more (--rerun-incomplete)",
                r.id
            ));
            again.insert(r.id.clone());
        } else {
            note(&format!(
                "clhip: resume: `{}` was running when the run died: incomplete, not run again (--rerun-incomplete runs it once more)",
                r.id
            ));
        }
    }
    // Each newly incomplete case goes to the journal (the next resume counts them); one run
    // again gets its new result in the results.
    let newly: Vec<clhip::results::CaseResult> = kept
        .iter()
        .filter(|r| journal.in_flight.contains(&r.id))
        .cloned()
        .collect();
    kept.retain(|r| !again.contains(&r.id));
    let done: std::collections::HashSet<&str> = kept.iter().map(|r| r.id.as_str()).collect();
    decided.retain(|r| !done.contains(r.id.as_str()));
    let items: Vec<Planned> = items
        .into_iter()
        .filter(|p| !done.contains(p.id.as_str()))
        .collect();
    note(&format!(
        "clhip: resume: {} of the journal's results kept, {} cases to run",
        kept.len(),
        items.len() + decided.len()
    ));
    Resumed {
        items,
        kept,
        newly_incomplete: newly,
    }
}

/// What a resumed run runs and keeps.
pub(super) struct Resumed {
    pub(super) items: Vec<Planned>,
    /// The journal's results, and the new `incomplete` ones, that the results file keeps.
    pub(super) kept: Vec<clhip::results::CaseResult>,
    /// The cases that were running when the run died, for the journal.
    pub(super) newly_incomplete: Vec<clhip::results::CaseResult>,
}
