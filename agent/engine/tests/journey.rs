//! Journeys built from a JobSpec (journey.rs): which requests take the journey path, check
//! counters in the plan's order, every problem named by request and field, and the bounds.

use loadfleet_engine::jar::JarLimits;
use loadfleet_engine::journey::{Journeys, DEFAULT_MAX_BODY_BYTES, MAX_BODY_BYTES_LIMIT, MAX_CHECKS, MAX_EXTRACTS};
use loadfleet_engine::wire::pb;

fn get(name: &str, path: &str) -> pb::RequestSpec {
    pb::RequestSpec { name: name.into(), method: "GET".into(), path: path.into(), weight: 1, ..Default::default() }
}

fn spec(requests: Vec<pb::RequestSpec>) -> pb::JobSpec {
    pb::JobSpec {
        targets: vec![pb::Target { url: "http://127.0.0.1:8080".into(), weight: 1, ..Default::default() }],
        requests,
        variables: vec!["csrf".into(), "sid".into()],
        ..Default::default()
    }
}

fn build(spec: &pb::JobSpec) -> Result<Option<Journeys>, Vec<String>> {
    let mut names: Vec<&str> = Vec::new();
    let name_of: Vec<usize> = spec
        .requests
        .iter()
        .map(|r| {
            names.iter().position(|n| *n == r.name).unwrap_or_else(|| {
                names.push(&r.name);
                names.len() - 1
            })
        })
        .collect();
    Journeys::build(spec, &name_of, names.len())
}

fn check(name: &str, status: &[&str]) -> pb::Check {
    let status = status.iter().map(|s| s.to_string()).collect();
    pb::Check { name: name.into(), status, body_contains: "ok".into(), ..Default::default() }
}

#[test]
fn a_job_without_templates_extractions_or_checks_has_no_journeys() {
    let mut plain = spec(vec![get("a", "/a?b=$1"), get("b", "/")]);
    plain.requests[1].body = b"{\"price\": \"$5\"}".to_vec();
    assert!(build(&plain).unwrap().is_none());
}

#[test]
fn with_cookies_every_request_takes_the_journey_path_without_only_the_templated() {
    let mut job = spec(vec![get("a", "/a/${csrf}"), get("b", "/b")]);
    let journeys = build(&job).unwrap().unwrap();
    assert!(journeys.journey(0).is_some() && journeys.journey(1).is_some());
    assert_eq!(journeys.jar, Some(JarLimits::default()));
    job.cookies = Some(pb::Cookies { off: true, ..Default::default() });
    let journeys = build(&job).unwrap().unwrap();
    assert!(journeys.jar.is_none());
    assert!(journeys.journey(0).is_some() && journeys.journey(1).is_none(), "the static request stays static");
}

#[test]
fn counters_are_checks_then_extractions_shared_by_requests_of_one_name() {
    let mut first = get("login", "/login");
    first.checks = vec![check("form", &[]), check("fast", &["2xx"])];
    first.extracts =
        vec![pb::Extract { var: 0, source: Some(pb::extract::Source::FormField("csrf".into())), ..Default::default() }];
    let mut second = get("login", "/login2");
    second.checks = vec![check("fast", &[]), check("other", &[])];
    let journeys = build(&spec(vec![first, second])).unwrap().unwrap();
    assert_eq!(journeys.check_names, [["form", "fast", "extract csrf", "other"]]);
    let counters = |r: usize| journeys.journey(r).unwrap().checks.iter().map(|c| c.counter).collect::<Vec<_>>();
    assert_eq!((counters(0), counters(1)), (vec![0, 1], vec![1, 3]));
    let (first, second) = (journeys.journey(0).unwrap(), journeys.journey(1).unwrap());
    assert_eq!(first.extractions[0].counter, 2);
    assert!(!first.implicit_status, "a check names statuses");
    assert!(second.implicit_status && second.needs_body);
}

#[test]
fn a_spec_the_engine_cannot_build_is_refused_naming_request_and_field() {
    let mut bad = get("a", "/a/${nope}");
    bad.headers = vec![pb::Header { name: "X-T".into(), value: "${sid".into() }];
    bad.checks = vec![pb::Check { name: "c".into(), body_regex: "(?=x)".into(), ..Default::default() }];
    bad.extracts = vec![
        pb::Extract { var: 7, source: Some(pb::extract::Source::Status(true)), ..Default::default() },
        pb::Extract { var: 0, source: None, ..Default::default() },
        pb::Extract { var: 0, source: Some(pb::extract::Source::Status(true)), on_missing: 9, ..Default::default() },
    ];
    let mut job = spec(vec![get("ok", "/"), bad]);
    job.max_body_bytes = (MAX_BODY_BYTES_LIMIT + 1) as u32;
    let problems = build(&job).unwrap_err();
    let starts: Vec<&str> = problems.iter().map(|p| p.split(':').next().unwrap()).collect();
    assert_eq!(
        starts,
        [
            "max_body_bytes",
            "requests[1].path",
            "requests[1].headers[0].value",
            "requests[1].checks[0]",
            "requests[1].extracts[0].var",
            "requests[1].extracts[1]",
            "requests[1].extracts[2].on_missing",
        ],
        "{problems:?}"
    );
    assert!(problems[1].contains("unknown variable 'nope'"), "{}", problems[1]);
}

#[test]
fn at_most_16_checks_and_16_extractions_a_request() {
    let mut many = get("a", "/");
    many.checks = (0..=MAX_CHECKS).map(|i| check(&format!("c{i}"), &[])).collect();
    many.extracts = (0..=MAX_EXTRACTS)
        .map(|_| pb::Extract { var: 0, source: Some(pb::extract::Source::Status(true)), ..Default::default() })
        .collect();
    let problems = build(&spec(vec![many])).unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("requests[0].checks: 17 checks, over the 16"), "{}", problems[0]);
    assert!(problems[1].starts_with("requests[0].extracts: 17 extractions, over the 16"), "{}", problems[1]);
}

#[test]
fn the_body_cap_defaults_to_256_kib_and_is_bounded() {
    let cap = |bytes: usize| {
        let mut job = spec(vec![get("a", "/${csrf}")]);
        job.max_body_bytes = bytes as u32;
        build(&job).map(|j| j.unwrap().max_body_bytes)
    };
    assert_eq!(cap(0), Ok(DEFAULT_MAX_BODY_BYTES));
    assert_eq!(cap(1), Ok(1));
    assert_eq!(cap(MAX_BODY_BYTES_LIMIT), Ok(MAX_BODY_BYTES_LIMIT));
    assert_eq!(
        cap(MAX_BODY_BYTES_LIMIT + 1).unwrap_err(),
        ["max_body_bytes: 16777217 is over the 16777216 a response may keep"]
    );
}

#[test]
fn cookies_match_the_paths_fixed_start() {
    let job = spec(vec![get("a", "/shop/cart?item=${csrf}"), get("b", "/user/${sid}/x"), get("c", "${csrf}")]);
    let journeys = build(&job).unwrap().unwrap();
    let paths: Vec<&str> = journeys.urls.iter().map(|u| u.path()).collect();
    assert_eq!(paths, ["/shop/cart", "/user/", "/"]);
    assert_eq!(journeys.hosts, ["127.0.0.1:8080"]);
}
