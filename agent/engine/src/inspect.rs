//! A journey response judged: every Set-Cookie into the user's jar, then the extractions in
//! order (a value into the user's variables; nothing found: the default value, a failed
//! "extract <variable>" check and `on_missing`), then the checks in order (each counted;
//! a failure sampled under its name and `on_fail`), then the implicit status check (200-399)
//! when no check of the request names statuses. What the user does next is the strongest
//! of the failures' rules.

use url::Url;

use crate::capture::Inspection;
use crate::journey::{Journey, Journeys, OnFail};
use crate::response::{HeaderLine, Response};
use crate::stats::{Stats, IMPLICIT_OK};
use crate::template::Context;
use crate::user::UserState;

/// Header lines looked at (head.rs parses at most as many).
const MAX_LINES: usize = 64;

/// What the response was, besides what the inspection kept.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'u> {
    pub status: u16,
    pub latency_us: u64,
    /// The URL the response came from (its Set-Cookie is stored for it): the request's
    /// (`Journeys::urls`), or its last redirect hop's.
    pub url: &'u Url,
    pub now_ms: u64,
}

/// How the response was judged: whether it failed a check (the implicit one included), and
/// what its user does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged {
    pub failed: bool,
    pub then: OnFail,
}

/// Judges the response of `journey`, counting every check under `slot`.
pub fn judge(
    journeys: &Journeys,
    journey: &Journey,
    seen: Seen<'_>,
    inspection: &Inspection,
    user: &mut UserState,
    stats: &mut Stats,
    slot: usize,
) -> Judged {
    let mut lines = [HeaderLine { name: b"", value: b"" }; MAX_LINES];
    let mut count = 0;
    for (name, value) in inspection.header_lines().take(MAX_LINES) {
        if let (Some(jar), true) = (&mut user.jar, name.eq_ignore_ascii_case(b"set-cookie")) {
            jar.store(value, seen.url, seen.now_ms);
        }
        lines[count] = HeaderLine { name, value };
        count += 1;
    }
    let mut response = Response::new(seen.status, &lines[..count], inspection.body(), seen.latency_us);
    response.body_truncated = inspection.truncated();
    let mut judged = Judged { failed: false, then: OnFail::Continue };
    let mut fail = |counter: usize, why: String, then: OnFail, stats: &mut Stats| {
        stats.check_failed_sample(slot, counter, why);
        judged.failed = true;
        judged.then = judged.then.max(then);
    };
    for e in &journey.extractions {
        user.scratch.clear();
        let found = e.extractor.extract(&response, &mut user.scratch).map_err(|m| m.to_string());
        let stored = found.and_then(|()| user.vars.set(e.var, &user.scratch).map_err(|v| v.to_string()));
        stats.check(slot, e.counter, stored.is_ok());
        if let Err(why) = stored {
            // A default over the caps is as good as none: the slot keeps its value.
            let _ = user.vars.set(e.var, &e.default_value);
            fail(e.counter, why, e.on_missing, stats);
        }
    }
    for c in &journey.checks {
        let mut ctx = Context {
            vars: &user.vars,
            row: None,
            user: user.index,
            agent: journeys.agent,
            iteration: user.iteration,
            now_ms: seen.now_ms,
            rng: &mut user.rng,
        };
        let outcome = c.check.evaluate(&response, &mut ctx, &mut user.scratch);
        stats.check(slot, c.counter, outcome == crate::checks::Outcome::Pass);
        if let crate::checks::Outcome::Fail(why) = outcome {
            fail(c.counter, why, c.on_fail, stats);
        }
    }
    if journey.implicit_status && !IMPLICIT_OK.contains(&seen.status) {
        judged.failed = true;
    }
    judged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Job;
    use crate::wire::pb;

    fn job(extracts: Vec<pb::Extract>, checks: Vec<pb::Check>) -> Job {
        let request = pb::RequestSpec {
            name: "login".into(),
            method: "GET".into(),
            path: "/login".into(),
            weight: 1,
            extracts,
            checks,
            ..Default::default()
        };
        let spec = pb::JobSpec {
            targets: vec![pb::Target { url: "http://127.0.0.1:8080".into(), weight: 1, ..Default::default() }],
            requests: vec![request],
            variables: vec!["csrf".into()],
            load: Some(pb::LoadShare {
                model: Some(pb::load_share::Model::Closed(pb::ClosedModel { clients: 1, think: None })),
                stages: vec![],
            }),
            duration_ms: 1000,
            ..Default::default()
        };
        Job::from_spec(&spec).unwrap()
    }

    fn form_field(on_missing: pb::OnFail) -> pb::Extract {
        pb::Extract {
            var: 0,
            source: Some(pb::extract::Source::FormField("csrf".into())),
            on_missing: on_missing as i32,
            default_value: "none".into(),
            ..Default::default()
        }
    }

    fn check(name: &str, body_contains: &str, status: &[&str], on_fail: pb::OnFail) -> pb::Check {
        pb::Check {
            name: name.into(),
            body_contains: body_contains.into(),
            status: status.iter().map(|s| s.to_string()).collect(),
            on_fail: on_fail as i32,
            ..Default::default()
        }
    }

    /// Judges a response of `status` with `head` lines and `body`; the judgement, the user
    /// after it and the interval's report.
    fn judge_response(job: &Job, status: u16, head: &str, body: &str) -> (Judged, UserState, pb::IntervalReport) {
        let (journeys, journey) = job.journey(0).unwrap();
        let mut inspection = Inspection::default();
        inspection.start(journey.needs_body, journeys.max_body_bytes);
        inspection.keep_head(format!("HTTP/1.1 {status} X\r\n{head}\r\n").as_bytes());
        inspection.keep_body(body.as_bytes());
        let mut user = UserState::new(job, 0, 1);
        let mut stats = Stats::new(job);
        let seen = Seen { status, latency_us: 1000, url: &journeys.urls[0], now_ms: 1_700_000_000_000 };
        let judged = judge(journeys, journey, seen, &inspection, &mut user, &mut stats, 0);
        // A request ended, so that the interval has a row for the slot.
        let ended = crate::stats::Outcome::Failed { kind: pb::ErrorKind::Other, message: String::new() };
        stats.record_judged(0, ended, (0, 0, 0), false);
        (judged, user, stats.take_report(job, 0, false))
    }

    fn counts(report: &pb::IntervalReport) -> Vec<(String, u64, u64)> {
        report.stats[0].checks.iter().map(|c| (c.name.clone(), c.passed, c.failed)).collect()
    }

    /// (check, message) of the report's check samples.
    fn check_samples(report: &pb::IntervalReport) -> Vec<(&str, &str)> {
        let checks = report.error_samples.iter().filter(|e| e.kind == pb::ErrorKind::Check as i32);
        checks.map(|e| (e.check.as_str(), e.message.as_str())).collect()
    }

    #[test]
    fn a_found_value_goes_to_the_variables_and_set_cookie_to_the_jar() {
        let job = job(vec![form_field(pb::OnFail::Stop)], vec![check("form", "csrf", &[], pb::OnFail::Stop)]);
        let body = r#"<input name="csrf" value="t0k&amp;1">"#;
        let (judged, mut user, report) = judge_response(&job, 200, "Set-Cookie: sid=s1; Path=/\r\n", body);
        assert_eq!(judged, Judged { failed: false, then: OnFail::Continue });
        assert_eq!(user.vars.get(0), b"t0k&1");
        let journeys = job.journeys.as_ref().unwrap();
        let cookie = user.jar.as_mut().unwrap().header_for(0, &journeys.urls[0], 1_700_000_000_001).to_vec();
        assert_eq!(cookie, b"sid=s1");
        assert_eq!(counts(&report), [("form".into(), 1, 0), ("extract csrf".into(), 1, 0)]);
        assert!(check_samples(&report).is_empty());
    }

    #[test]
    fn nothing_found_stores_the_default_fails_the_extraction_and_the_strongest_rule_wins() {
        let checks = vec![check("form", "csrf", &[], pb::OnFail::Stop)];
        let job = job(vec![form_field(pb::OnFail::Restart)], checks);
        let (judged, user, report) = judge_response(&job, 200, "", "<p>gone</p>");
        assert_eq!(judged, Judged { failed: true, then: OnFail::Stop });
        assert_eq!(user.vars.get(0), b"none");
        assert_eq!(counts(&report), [("form".into(), 0, 1), ("extract csrf".into(), 0, 1)]);
        assert_eq!(check_samples(&report), [("extract csrf", "not found"), ("form", "body lacks 'csrf'")]);
    }

    #[test]
    fn the_implicit_status_check_applies_unless_a_check_names_statuses() {
        let fast = pb::Check { name: "fast".into(), latency_below_ms: 10_000, ..Default::default() };
        let job1 = job(vec![], vec![fast]);
        let (judged, ..) = judge_response(&job1, 500, "", "");
        assert_eq!(judged, Judged { failed: true, then: OnFail::Continue }, "500 is outside 200-399");
        let (judged, ..) = judge_response(&job1, 302, "", "");
        assert!(!judged.failed);
        let job2 = job(vec![], vec![check("gone", "", &["404"], pb::OnFail::Continue)]);
        let (judged, ..) = judge_response(&job2, 404, "", "");
        assert!(!judged.failed, "an expected 404 is no failure");
    }
}
