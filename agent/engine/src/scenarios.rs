//! Several scenarios of one job on one reactor (docs/proposals/scenarios.md §5.1): each
//! scenario's run drives its own load from its own start to its own end, while this owns the
//! one interval grid, the outer job's, and at each boundary joins every scenario's rows, each
//! tagged with its scenario, into one report — also while no scenario runs, so the agent and
//! the controller see every interval. It ends when every scenario has wound down.

use std::rc::Rc;

use crate::job::Job;
use crate::reactor::Reactor;
use crate::run::{interval_report, now_ms, sleep_until_ms, Run, Steering};
use crate::shared::Shared;
use crate::wire::pb;

/// Scenarios one job may hold: each has its own per-job structures (recent heads, journeys,
/// users), so this bounds the engine's memory per job (the plan's validate says the same).
pub const MAX_SCENARIOS: usize = 16;

/// Error samples in one joined report: as many as one run's report holds (stats.rs), so
/// 16 scenarios cannot send 16 times the samples the controller expects.
const ERROR_SAMPLES_PER_REPORT: usize = 10;

/// The jobs of a spec: without `scenarios` the spec's own job (a plain job); with them one
/// job per scenario, in order, each its nested spec with the outer job's id, interval,
/// start (plus the scenario's `start_after_ms`) and timeouts laid over it. A problem of a
/// scenario starts with its path and name: `scenarios[1] (checkout): load: ...`.
pub fn jobs_of(spec: &pb::JobSpec) -> Result<Vec<Job>, String> {
    if spec.scenarios.is_empty() {
        return Ok(vec![Job::from_spec(spec)?]);
    }
    if spec.scenarios.len() > MAX_SCENARIOS {
        return Err(format!("scenarios: {} given, at most {MAX_SCENARIOS}", spec.scenarios.len()));
    }
    let mut problems = Vec::new();
    let mut jobs = Vec::new();
    for (i, scenario) in spec.scenarios.iter().enumerate() {
        let mut nested = scenario.job.clone().unwrap_or_default();
        nested.job_id.clone_from(&spec.job_id);
        nested.interval_ms = spec.interval_ms;
        nested.start_at_ms = spec.start_at_ms + i64::from(scenario.start_after_ms);
        nested.connect_timeout_ms = spec.connect_timeout_ms;
        nested.request_timeout_ms = spec.request_timeout_ms;
        match Job::from_spec(&nested) {
            Ok(job) => jobs.push(Job { scenario: scenario.name.clone(), ..job }),
            Err(e) => problems.push(format!("scenarios[{i}] ({}): {e}", scenario.name)),
        }
    }
    if problems.is_empty() {
        Ok(jobs)
    } else {
        Err(problems.join("; "))
    }
}

pub struct Scenarios {
    runs: Vec<Run>,
    /// The outer job's start and interval: the grid every scenario reports on.
    start_at_ms: i64,
    interval_ms: i64,
}

impl Scenarios {
    /// The runs of `jobs` (jobs_of) on one reactor; `start_at_ms`: the outer
    /// job's start (a scenario's own start may be later).
    pub fn new(jobs: Vec<Job>, start_at_ms: i64, reactor: &Rc<Reactor>) -> Self {
        let interval_ms = jobs.first().map_or(1000, |j| j.interval_ms as i64);
        let runs = jobs.into_iter().map(|job| Run::with_reactor(job, Rc::clone(reactor))).collect();
        Scenarios { runs, start_at_ms, interval_ms }
    }

    /// One steering per scenario, in the spec's order (main routes scenario_adjust by index).
    pub fn steerings(&self) -> Vec<Steering> {
        self.runs.iter().map(Run::steering).collect()
    }

    /// Drives every scenario and calls `report` for every interval of the grid, the last one
    /// (once every scenario has ended) with final set.
    pub async fn execute(self, mut report: impl FnMut(pb::IntervalReport)) {
        let shareds: Vec<Rc<Shared>> = self.runs.iter().map(Run::shared).collect();
        let drives: Vec<_> = self.runs.into_iter().map(|run| tokio::task::spawn_local(run.drive(|_| {}))).collect();
        let all_ended = async {
            for drive in drives {
                let _ = drive.await;
            }
        };
        tokio::pin!(all_ended);
        let start_ms = self.start_at_ms.max(now_ms());
        tokio::select! {
            () = sleep_until_ms(start_ms) => {}
            () = &mut all_ended => {}
        }
        // The barrier's grid, as Run::drive keeps it for a plain job.
        let interval = self.interval_ms;
        let mut interval_start = self.start_at_ms + (now_ms() - self.start_at_ms).max(0) / interval * interval;
        loop {
            tokio::select! {
                () = sleep_until_ms(interval_start + interval) => {
                    report(joined(&shareds, interval_start, false));
                    interval_start += interval;
                }
                () = &mut all_ended => break,
            }
        }
        report(joined(&shareds, interval_start, true));
    }
}

/// Every scenario's rows of the interval, each row tagged with its scenario.
fn joined(shareds: &[Rc<Shared>], interval_start: i64, last: bool) -> pb::IntervalReport {
    let mut out = pb::IntervalReport { interval_start_ms: interval_start, r#final: last, ..Default::default() };
    for shared in shareds {
        let mut part = interval_report(shared, interval_start, last);
        out.interval_ms = part.interval_ms;
        for row in &mut part.stats {
            row.scenario.clone_from(&shared.job.scenario);
        }
        out.stats.append(&mut part.stats);
        let room = ERROR_SAMPLES_PER_REPORT.saturating_sub(out.error_samples.len());
        out.error_samples.extend(part.error_samples.into_iter().take(room));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::tests::spec;

    #[test]
    fn a_scenario_s_job_takes_the_outer_fields_and_its_problems_name_it() {
        let scenario = |name: &str, job: pb::JobSpec, start_after_ms| pb::ScenarioSpec {
            name: name.into(),
            job: Some(job),
            start_after_ms,
        };
        let outer = |scenarios| pb::JobSpec {
            job_id: "outer".into(),
            start_at_ms: 5000,
            interval_ms: 500,
            scenarios,
            ..Default::default()
        };
        let jobs = jobs_of(&outer(vec![scenario("browse", spec(), 0), scenario("buy", spec(), 2000)])).unwrap();
        let seen: Vec<_> =
            jobs.iter().map(|j| (j.scenario.as_str(), j.id.as_str(), j.start_at_ms, j.interval_ms)).collect();
        assert_eq!(seen, [("browse", "outer", 5000, 500), ("buy", "outer", 7000, 500)]);
        let plain = jobs_of(&spec()).unwrap();
        assert_eq!((plain.len(), plain[0].scenario.as_str()), (1, ""));
        let mut nested = spec();
        nested.scenarios = vec![scenario("inner", spec(), 0)];
        let mut no_load = spec();
        no_load.load = None;
        let err = jobs_of(&outer(vec![scenario("a", nested, 0), scenario("b", no_load, 0)])).err().unwrap();
        assert_eq!(
            err,
            "scenarios[0] (a): scenarios: a scenario's job cannot have scenarios of its own; scenarios[1] (b): load: no load model"
        );
    }
}
