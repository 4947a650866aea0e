//! A job as the engine runs it: the JobSpec checked once and turned into what the hot
//! path needs (resolved addresses, request bytes rendered per target, weighted choices).

use std::time::Duration;

use crate::journey::{host_header, Journey, Journeys};
use crate::load::{Load, Think};
use crate::rng::WeightedChoice;
use crate::target::{parse_target, Target};
use crate::wire::pb;

pub const DEFAULT_INTERVAL_MS: u32 = 1000;
const DEFAULT_CONNECT_TIMEOUT_MS: u32 = 3000;
const DEFAULT_REQUEST_TIMEOUT_MS: u32 = 10000;
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

pub struct Request {
    /// Index into `Job::names`: several requests may share a name.
    pub name: usize,
    /// HEAD responses carry no body whatever their headers say.
    pub head: bool,
    /// The complete request (line, headers, body) for each target, in target order.
    pub wire: Vec<Vec<u8>>,
}

/// One step of a user session.
pub struct SessionStep {
    pub request: usize,
    pub think_after: Think,
}

pub struct Session {
    /// Once per user before the steps (a login), and again after a restart.
    pub once: Vec<SessionStep>,
    /// Never empty.
    pub steps: Vec<SessionStep>,
    /// 0: until the end of the job.
    pub repeat: u32,
}

pub struct Job {
    pub id: String,
    pub targets: Vec<Target>,
    pub requests: Vec<Request>,
    pub names: Vec<String>,
    pub target_choice: WeightedChoice,
    pub request_choice: WeightedChoice,
    pub keep_alive: bool,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub start_at_ms: i64,
    pub duration_ms: u64,
    pub interval_ms: u64,
    pub load: Load,
    pub session: Option<Session>,
    /// 0: no budget.
    pub max_requests: u64,
    /// None: no request has a template, an extraction or a check (journey.rs).
    pub journeys: Option<Journeys>,
    /// The scenario the job is (JobSpec.scenarios); "" for a plain job.
    pub scenario: String,
}

impl Job {
    /// Checks the spec, then builds the job from it; the error names every field that is
    /// wrong (`validate`), in the order of the spec's fields.
    pub fn from_spec(spec: &pb::JobSpec) -> Result<Job, String> {
        // A job of one scenario: an agent that splits scenarios needs an engine that runs them
        // (docs/proposals/scenarios.md §11); refused with a message, never a crash.
        if !spec.scenarios.is_empty() {
            return Err("scenarios: a scenario's job cannot have scenarios of its own".into());
        }
        let checked = validate(spec).map_err(|problems| problems.join("; "))?;
        Ok(build(spec, checked))
    }

    /// The journey of request `request`, if it takes the journey path.
    pub fn journey(&self, request: usize) -> Option<(&Journeys, &Journey)> {
        let journeys = self.journeys.as_ref()?;
        Some((journeys, journeys.journey(request)?))
    }
}

/// What checking a spec worked out, which building the job takes over rather than do again:
/// the targets (a host is resolved once, and one that does not resolve is a problem of the
/// spec) and the load.
struct Checked {
    targets: Vec<Target>,
    load: Load,
    journeys: Option<Journeys>,
}

/// Every problem of the spec, each starting with its field's path; or, when there is none,
/// what the checks worked out.
fn validate(spec: &pb::JobSpec) -> Result<Checked, Vec<String>> {
    let mut problems = Vec::new();
    let targets = check_targets(spec, &mut problems);
    check_requests(spec, &mut problems);
    let (name_of, names) = request_names(spec);
    let journeys = Journeys::build(spec, &name_of, names.len()).unwrap_or_else(|more| {
        problems.extend(more);
        None
    });
    let load = check_load(spec, &mut problems);
    check_session(spec, &mut problems);
    if spec.duration_ms == 0 {
        problems.push("duration_ms: must be above 0".into());
    }
    match load {
        Some(load) if problems.is_empty() => Ok(Checked { targets, load, journeys }),
        _ => Err(problems),
    }
}

/// The job of a spec `validate` passed.
fn build(spec: &pb::JobSpec, Checked { targets, load, journeys }: Checked) -> Job {
    let (names, requests) = build_requests(spec);
    Job {
        id: spec.job_id.clone(),
        targets,
        requests,
        names,
        target_choice: target_choice(spec).expect("validated"),
        request_choice: request_choice(spec).expect("validated"),
        keep_alive: spec.keep_alive,
        connect_timeout: millis_or(spec.connect_timeout_ms, DEFAULT_CONNECT_TIMEOUT_MS),
        request_timeout: millis_or(spec.request_timeout_ms, DEFAULT_REQUEST_TIMEOUT_MS),
        start_at_ms: spec.start_at_ms,
        duration_ms: u64::from(spec.duration_ms),
        interval_ms: u64::from(if spec.interval_ms == 0 { DEFAULT_INTERVAL_MS } else { spec.interval_ms }),
        load,
        session: build_session(spec),
        max_requests: spec.max_requests,
        journeys,
        scenario: String::new(),
    }
}

fn target_choice(spec: &pb::JobSpec) -> Option<WeightedChoice> {
    WeightedChoice::new(spec.targets.iter().map(|t| u64::from(t.weight)))
}

fn request_choice(spec: &pb::JobSpec) -> Option<WeightedChoice> {
    WeightedChoice::new(spec.requests.iter().map(|r| u64::from(r.weight)))
}

/// The targets that parse (and resolve); a problem for each that does not, and for their weights.
fn check_targets(spec: &pb::JobSpec, problems: &mut Vec<String>) -> Vec<Target> {
    let tls_config = crate::tls::client_config(spec.tls_verify);
    let targets = spec
        .targets
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            parse_target(t, &tls_config, spec.tls_verify).map_err(|e| problems.push(format!("targets[{i}].{e}"))).ok()
        })
        .collect();
    if spec.targets.is_empty() {
        problems.push("targets: at least one target is needed".into());
    } else if target_choice(spec).is_none() {
        problems.push("targets: at least one target needs a weight above 0".into());
    }
    targets
}

fn check_requests(spec: &pb::JobSpec, problems: &mut Vec<String>) {
    for (i, r) in spec.requests.iter().enumerate() {
        if !METHODS.contains(&r.method.as_str()) {
            problems.push(format!("requests[{i}].method: '{}' is not one of {}", r.method, METHODS.join(", ")));
        }
        if !r.path.starts_with('/') || r.path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            problems.push(format!("requests[{i}].path: '{}' must start with '/' and contain no spaces", r.path));
        }
        for (h, header) in r.headers.iter().enumerate() {
            if header.name.is_empty()
                || header.name.bytes().any(|b| !b.is_ascii_graphic() || b == b':')
                || header.value.bytes().any(|b| b == b'\r' || b == b'\n')
            {
                problems.push(format!("requests[{i}].headers[{h}]: '{}' is not a valid header", header.name));
            }
        }
    }
    if request_choice(spec).is_none() {
        problems.push("requests: at least one request with a weight above 0 is needed".into());
    }
}

fn check_load(spec: &pb::JobSpec, problems: &mut Vec<String>) -> Option<Load> {
    match spec.load.as_ref().map(Load::from_proto) {
        Some(Ok(load)) => Some(load),
        Some(Err(e)) => {
            problems.push(format!("load: {e}"));
            None
        }
        None => {
            problems.push("load: no load model".into());
            None
        }
    }
}

/// The session's steps (an empty session is none): requests that exist, think times that
/// parse; `once` steps only before steps.
fn check_session(spec: &pb::JobSpec, problems: &mut Vec<String>) {
    let Some(session) = &spec.session else { return };
    for (field, steps) in [("once", &session.once), ("steps", &session.steps)] {
        for (i, step) in steps.iter().enumerate() {
            if step.request as usize >= spec.requests.len() {
                problems.push(format!("session.{field}[{i}].request: {} is not a request index", step.request));
            }
            if let Err(e) = Think::from_proto(step.think_after.as_ref()) {
                problems.push(format!("session.{field}[{i}].think_after: {e}"));
            }
        }
    }
    if session.steps.is_empty() && !session.once.is_empty() {
        problems.push("session.once: needs steps to go on to".into());
    }
}

/// Each request's name index, and the names (several requests may share one), in order.
fn request_names(spec: &pb::JobSpec) -> (Vec<usize>, Vec<String>) {
    let mut names: Vec<String> = Vec::new();
    let name_of = spec
        .requests
        .iter()
        .map(|r| {
            names.iter().position(|n| n == &r.name).unwrap_or_else(|| {
                names.push(r.name.clone());
                names.len() - 1
            })
        })
        .collect();
    (name_of, names)
}

/// The requests' names (several requests may share one) and each request rendered for every target.
fn build_requests(spec: &pb::JobSpec) -> (Vec<String>, Vec<Request>) {
    let (name_of, names) = request_names(spec);
    let mut requests = Vec::new();
    for (r, name) in spec.requests.iter().zip(name_of) {
        let wire = spec.targets.iter().map(|t| render(r, host_header(&t.url), spec.keep_alive)).collect();
        requests.push(Request { name, head: r.method == "HEAD", wire });
    }
    (names, requests)
}

fn build_session(spec: &pb::JobSpec) -> Option<Session> {
    let session = spec.session.as_ref().filter(|s| !s.steps.is_empty())?;
    let step = |step: &pb::SessionStep| SessionStep {
        request: step.request as usize,
        think_after: Think::from_proto(step.think_after.as_ref()).expect("validated"),
    };
    Some(Session {
        once: session.once.iter().map(step).collect(),
        steps: session.steps.iter().map(step).collect(),
        repeat: session.repeat,
    })
}

fn millis_or(value: u32, default: u32) -> Duration {
    Duration::from_millis(u64::from(if value == 0 { default } else { value }))
}

fn render(r: &pb::RequestSpec, host: &str, keep_alive: bool) -> Vec<u8> {
    let mut head = format!("{} {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: loadfleet-engine\r\n", r.method, r.path);
    let mut has_length = false;
    for h in &r.headers {
        has_length |= h.name.eq_ignore_ascii_case("content-length");
        head.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    if !has_length && (!r.body.is_empty() || r.method == "POST" || r.method == "PUT") {
        head.push_str(&format!("Content-Length: {}\r\n", r.body.len()));
    }
    if !keep_alive {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut wire = head.into_bytes();
    wire.extend_from_slice(&r.body);
    wire
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid spec of one request (scenarios.rs's tests nest it too).
    pub(crate) fn spec() -> pb::JobSpec {
        pb::JobSpec {
            job_id: "j".into(),
            targets: vec![pb::Target { url: "http://127.0.0.1:8080".into(), weight: 1, ..Default::default() }],
            requests: vec![pb::RequestSpec {
                name: "post".into(),
                method: "POST".into(),
                path: "/a?b=1".into(),
                headers: vec![pb::Header { name: "X-Test".into(), value: "yes".into() }],
                body: b"hello".to_vec(),
                weight: 1,
                ..Default::default()
            }],
            keep_alive: false,
            load: Some(pb::LoadShare {
                model: Some(pb::load_share::Model::Closed(pb::ClosedModel { clients: 2, think: None })),
                stages: vec![],
            }),
            duration_ms: 1000,
            ..Default::default()
        }
    }

    #[test]
    fn renders_request_with_host_length_and_close() {
        let job = Job::from_spec(&spec()).unwrap();
        let text = String::from_utf8(job.requests[0].wire[0].clone()).unwrap();
        assert_eq!(
            text,
            "POST /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: loadfleet-engine\r\nX-Test: yes\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\nhello"
        );
        assert_eq!(job.interval_ms, 1000);
        assert_eq!(job.request_timeout, Duration::from_secs(10));
    }

    #[test]
    fn patch_and_options_are_sent_as_written() {
        for method in ["PATCH", "OPTIONS"] {
            let mut s = spec();
            s.requests[0].method = method.into();
            let job = Job::from_spec(&s).unwrap();
            assert!(job.requests[0].wire[0].starts_with(format!("{method} /a?b=1 HTTP/1.1\r\n").as_bytes()));
        }
    }

    #[test]
    fn names_every_bad_field() {
        let mut bad = spec();
        bad.targets[0].url = "ftp://x".into();
        bad.requests[0].method = "BREW".into();
        bad.requests[0].path = "nope".into();
        bad.load = None;
        let err = Job::from_spec(&bad).err().unwrap();
        for field in ["targets[0].url", "requests[0].method", "requests[0].path", "load:"] {
            assert!(err.contains(field), "{field} missing from {err}");
        }
    }

    #[test]
    fn validation_lists_every_problem_in_the_order_of_the_fields() {
        let mut bad = spec();
        bad.targets[0].weight = 0;
        bad.requests[0].headers[0].name = "X Bad".into();
        bad.session = Some(pb::Session {
            steps: vec![
                pb::SessionStep { request: 1, think_after: None },
                pb::SessionStep { request: 0, think_after: None },
            ],
            repeat: 0,
            ..Default::default()
        });
        bad.duration_ms = 0;
        let problems = validate(&bad).err().unwrap();
        assert_eq!(
            problems,
            [
                "targets: at least one target needs a weight above 0",
                "requests[0].headers[0]: 'X Bad' is not a valid header",
                "session.steps[0].request: 1 is not a request index",
                "duration_ms: must be above 0",
            ]
        );
        assert!(validate(&spec()).is_ok());
    }

    #[test]
    fn given_addresses_are_used_in_turn_and_the_host_is_not_resolved() {
        let tls = crate::tls::client_config(false);
        let addresses = vec!["127.0.0.2:8080".to_string(), "[::1]:8081".to_string()];
        let target =
            pb::Target { url: "https://no-such-host.invalid:8443".into(), weight: 1, addresses, ..Default::default() };
        let parsed = parse_target(&target, &tls, false).unwrap();
        let turns: Vec<String> = (0..3).map(|_| parsed.next_addr().to_string()).collect();
        assert_eq!(turns, ["127.0.0.2:8080", "[::1]:8081", "127.0.0.2:8080"]);
        assert!(parsed.tls.is_some(), "the server name comes from the URL");

        let mut spec = spec();
        spec.targets[0].addresses = vec!["127.0.0.1:1".into(), "localhost:80".into()];
        let err = Job::from_spec(&spec).err().unwrap();
        assert!(err.contains("targets[0].addresses[1]: 'localhost:80' is not ip:port"), "{err}");
        spec.targets[0] = pb::Target { url: "http://no-such-host.invalid:80".into(), weight: 1, ..Default::default() };
        let err = Job::from_spec(&spec).err().unwrap();
        assert!(err.contains("targets[0].url: cannot resolve 'no-such-host.invalid:80'"), "{err}");
    }
}
