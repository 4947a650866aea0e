//! Several scenarios in one job (docs/proposals/scenarios.md §5.1): the real engine binary
//! against a server on 127.0.0.1 runs each scenario from its own start to its own end and
//! reports every scenario's rows, tagged with its name, on the one grid of the outer job.

mod support;

use loadfleet_engine::wire::pb;
use pb::engine_command::Command;
use support::*;

const INTERVAL_MS: u32 = 500;

fn closed(clients: u32) -> pb::LoadShare {
    pb::LoadShare {
        model: Some(pb::load_share::Model::Closed(pb::ClosedModel { clients, think: None })),
        stages: vec![],
    }
}

/// A scenario of `clients` closed users sending request `request` (a /slow/20 GET) for `duration_ms`.
fn scenario(
    name: &str,
    url: &str,
    request: &str,
    clients: u32,
    duration_ms: u32,
    start_after_ms: u32,
) -> pb::ScenarioSpec {
    let job = closed_job(&[(url, 1)], vec![get(request, "/slow/20", 1)], clients, duration_ms, INTERVAL_MS);
    pb::ScenarioSpec { name: name.into(), job: Some(job), start_after_ms }
}

/// The outer job: its start on the grid, its interval; the load is the scenarios'.
fn job_of(scenarios: Vec<pb::ScenarioSpec>) -> pb::JobSpec {
    let grid = closed_job(&[("http://127.0.0.1:9", 1)], vec![], 0, 1, INTERVAL_MS);
    pb::JobSpec {
        job_id: "scenarios".into(),
        start_at_ms: grid.start_at_ms,
        interval_ms: INTERVAL_MS,
        scenarios,
        ..Default::default()
    }
}

/// Requests of `scenario` in each report, in order.
fn requests_per_report(reports: &[pb::IntervalReport], scenario: &str) -> Vec<u64> {
    reports.iter().map(|r| r.stats.iter().filter(|s| s.scenario == scenario).map(|s| s.requests).sum()).collect()
}

#[test]
fn two_scenarios_with_offsets_report_rows_per_scenario_on_one_grid() {
    let server = start_server();
    let spec = job_of(vec![
        scenario("browse", &server.url, "home", 2, 2000, 0),
        scenario("buy", &server.url, "pay", 1, 1000, 1000),
    ]);
    let start = spec.start_at_ms;
    let reports = Engine::spawn().run(spec);
    // collect() checked the grid is contiguous and the last report final; it starts at the barrier.
    assert_eq!(reports[0].interval_start_ms, start);
    assert!(reports.iter().all(|r| (r.interval_start_ms - start) % i64::from(INTERVAL_MS) == 0));
    for row in reports.iter().flat_map(|r| &r.stats) {
        let expected = if row.scenario == "browse" { "home" } else { "pay" };
        assert!(["browse", "buy"].contains(&row.scenario.as_str()) && row.request == expected, "{row:?}");
    }
    let buy = requests_per_report(&reports, "buy");
    let browse = requests_per_report(&reports, "browse");
    assert_eq!(&buy[..2], [0, 0], "buy starts 1 s after the barrier: {buy:?}");
    assert!(buy[2] > 0 && browse[0] > 0, "browse {browse:?}, buy {buy:?}");
    let served = server.served.responses.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(browse.iter().sum::<u64>() + buy.iter().sum::<u64>(), served);
}

#[test]
fn an_idle_scenario_starts_when_adjusted() {
    let server = start_server();
    let mut engine = Engine::spawn();
    engine.send(Command::Start(job_of(vec![
        scenario("busy", &server.url, "a", 1, 2000, 0),
        scenario("idle", &server.url, "b", 0, 2000, 0),
    ])));
    let first = match engine.next_event() {
        Some(pb::engine_event::Event::Interval(report)) => report,
        other => panic!("expected an interval, got {other:?}"),
    };
    engine.send(Command::ScenarioAdjust(pb::ScenarioAdjust { scenario: 1, load: Some(closed(2)), max_requests: 0 }));
    engine.send(Command::ScenarioAdjust(pb::ScenarioAdjust { scenario: 7, load: Some(closed(9)), max_requests: 0 }));
    let reports = engine.collect();
    assert_eq!(requests_per_report(std::slice::from_ref(&first), "idle"), [0]);
    assert!(requests_per_report(&first_and(&first, &reports), "busy")[0] > 0);
    let idle = requests_per_report(&reports, "idle");
    assert!(idle[idle.len() - 2] > 0, "2 users after the adjust: {idle:?}");
}

fn first_and(first: &pb::IntervalReport, rest: &[pb::IntervalReport]) -> Vec<pb::IntervalReport> {
    std::iter::once(first.clone()).chain(rest.iter().cloned()).collect()
}

#[test]
fn the_budget_of_one_scenario_ends_only_it() {
    let server = start_server();
    let mut capped = scenario("capped", &server.url, "a", 1, 2000, 0);
    capped.job.as_mut().unwrap().max_requests = 5;
    let spec = job_of(vec![capped, scenario("steady", &server.url, "b", 1, 2000, 0)]);
    let reports = Engine::spawn().run(spec);
    assert_eq!(requests_per_report(&reports, "capped").iter().sum::<u64>(), 5);
    let steady = requests_per_report(&reports, "steady");
    assert!(reports.len() >= 4 && steady[3] > 0, "steady runs its 2 s: {steady:?}");
}
