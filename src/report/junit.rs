//! JUnit XML for CI: one test suite per pair, one test case per case. Written by `run --junit`,
//! and from any results file by `report --junit` and `merge --junit`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestRerun, TestSuite};

use crate::model::{Outcome, OutcomeKind};
use crate::results::CaseResult;

use super::json::RunReport;
use super::matrix::{accepted_note, group_of, is_problem};

/// JUnit XML for CI: one suite per pair (and one for mocks). Agrees with the exit code: an
/// outcome the expectation accepts (a negative control's `fail`, a baseline's known fault) is a
/// success with a note, not a red test. Otherwise `fail` is a failure; `fault`, `crash` and
/// `timeout` are errors; `unsupported` and `skip` are skipped with the reason.
pub fn write_junit(report: &RunReport, target: &crate::output::Target) -> anyhow::Result<()> {
    let junit = junit_report(report);
    let text = junit.to_string().context("encoding JUnit XML")?;
    crate::output::write(target, text.as_bytes())
}

pub(super) fn junit_report(report: &RunReport) -> quick_junit::Report {
    let mut suites: BTreeMap<String, (TestSuite, f64)> = BTreeMap::new();
    for r in &report.results {
        let suite_name = group_of(&r.work);
        let (suite, suite_s) = suites
            .entry(suite_name.clone())
            .or_insert_with(|| (TestSuite::new(suite_name.clone()), 0.0));
        *suite_s += r.duration_s.max(0.0);
        let mut case = TestCase::new(r.id.clone(), junit_status(r));
        case.set_classname(suite_name);
        if let Ok(time) = Duration::try_from_secs_f64(r.duration_s) {
            case.set_time(time);
        }
        if let Some(note) = accepted_note(r) {
            case.set_system_out(note);
        }
        if !r.kernel_log.is_empty() {
            case.set_system_err(r.kernel_log.join("\n"));
        }
        if let Outcome::Warn { warning } = &r.outcome {
            case.add_property(quick_junit::Property::new(
                "clhip.kernel-warning",
                warning.clone(),
            ));
        }
        suite.add_test_case(case);
    }
    let mut junit = quick_junit::Report::new("clhip");
    if let Ok(time) = Duration::try_from_secs_f64(report.wall_s) {
        junit.set_time(time);
    }
    // A suite's time is its cases' time: the pairs' cases run side by side, so no wall clock
    // is a pair's own.
    junit.add_test_suites(suites.into_values().map(|(mut suite, s)| {
        if let Ok(time) = Duration::try_from_secs_f64(s) {
            suite.set_time(time);
        }
        suite
    }));
    junit
}

fn junit_status(r: &CaseResult) -> TestCaseStatus {
    let kind = r.outcome.kind();
    if r.verdict() == crate::model::Verdict::Flaky && !r.outcome.kind().eq(&OutcomeKind::Pass) {
        return flaky_status(r);
    }
    let mut status = match kind {
        OutcomeKind::Pass => return TestCaseStatus::success(),
        // A pass: the kernel's lines go in system-err, and a property says it warned.
        OutcomeKind::Warn => return TestCaseStatus::success(),
        _ if !r.unexpected() && is_problem(kind) => return TestCaseStatus::success(),
        OutcomeKind::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
        OutcomeKind::Fault
        | OutcomeKind::Crash
        | OutcomeKind::Timeout
        | OutcomeKind::Incomplete
        | OutcomeKind::Error => TestCaseStatus::non_success(NonSuccessKind::Error),
        OutcomeKind::Unsupported | OutcomeKind::Skip => TestCaseStatus::skipped(),
    };
    status.set_message(r.outcome.reason()).set_type(kind.name());
    if let Outcome::Crash { stderr_tail, .. } = &r.outcome
        && !stderr_tail.is_empty()
    {
        status.set_description(stderr_tail.clone());
    }
    add_reruns(&mut status, r);
    status
}

/// Reruns as JUnit knows them: a flaky case is a success whose failed first run is a
/// flakyFailure; a case that failed again is a failure with its reruns as rerunFailure.
fn add_reruns(status: &mut TestCaseStatus, r: &CaseResult) {
    for again in &r.reruns {
        let kind = match again.kind() {
            OutcomeKind::Fail => NonSuccessKind::Failure,
            _ => NonSuccessKind::Error,
        };
        if again.kind() == OutcomeKind::Pass {
            continue;
        }
        let mut rerun = TestRerun::new(kind);
        rerun
            .set_message(again.reason())
            .set_type(again.kind().name());
        status.add_rerun(rerun);
    }
}

/// A flaky case: it passed alone after failing in its batch. JUnit's flakyFailure keeps the
/// first run's failure under a success.
fn flaky_status(r: &CaseResult) -> TestCaseStatus {
    let mut status = TestCaseStatus::success();
    let kind = match r.outcome.kind() {
        OutcomeKind::Fail => NonSuccessKind::Failure,
        _ => NonSuccessKind::Error,
    };
    let mut first = TestRerun::new(kind);
    first
        .set_message(r.outcome.reason())
        .set_type(r.outcome.kind().name());
    status.add_rerun(first);
    status
}
