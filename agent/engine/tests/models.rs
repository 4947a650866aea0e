//! Load models against a test server: open-model rate accuracy and coordinated-omission
//! correction, budgets, user populations, sessions, ramps and adjust.

mod support;

use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use loadfleet_engine::wire::pb;
use pb::engine_command::Command;
use support::*;

fn open_share(rate_per_s: f64, stages: Vec<pb::Stage>) -> pb::LoadShare {
    let open = pb::OpenModel { rate_per_s, poisson: false, max_connections: 64 };
    pb::LoadShare { model: Some(pb::load_share::Model::Open(open)), stages }
}

#[test]
fn open_model_holds_its_rate_within_one_percent() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(open_job(&server.url, "/ok/100", 2000.0, false, 10_000));
    let requests = total(&reports, |s| s.requests);
    let scheduled = total(&reports, |s| s.scheduled);
    assert_eq!(total(&reports, |s| s.not_sent), 0);
    assert_eq!(requests, scheduled, "every scheduled request was sent and ended");
    let rate = requests as f64 / 10.0;
    assert!((rate - 2000.0).abs() <= 20.0, "2000/s asked, {rate}/s achieved");
    // Every send's lag is in the sum (no send is due to the microsecond), none more than the worst.
    let lag_sum = total(&reports, |s| s.send_lag_sum_us);
    let worst = reports.iter().flat_map(|r| &r.stats).map(|s| s.max_send_lag_us).max().unwrap_or(0);
    assert!(lag_sum > 0 && lag_sum <= worst * scheduled, "send lags summed to {lag_sum} µs, worst {worst} µs");
    // Every full interval, not just the total, is on rate.
    for report in &reports[1..reports.len() - 1] {
        let n: u64 = report.stats.iter().map(|s| s.scheduled).sum();
        assert!((n as f64 - 2000.0).abs() <= 20.0, "interval {} scheduled {n}", report.interval_start_ms);
    }
}

#[test]
fn a_light_open_load_reuses_few_connections() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(open_job(&server.url, "/ok/10", 200.0, false, 2000));
    let requests = total(&reports, |s| s.requests);
    assert_eq!(requests, 400);
    // 200/s of ~0.1 ms requests need about one connection, not one per request.
    let opened = total(&reports, |s| s.connections_opened);
    assert!(opened <= 4, "{opened} connections for {requests} requests");
}

#[test]
fn poisson_arrivals_average_the_rate() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(open_job(&server.url, "/ok/1", 1000.0, true, 5_000));
    let requests = total(&reports, |s| s.requests) as f64;
    // Poisson counts over 5 s have a standard deviation of sqrt(5000) = 71 (1.4%).
    assert!((requests - 5000.0).abs() < 250.0, "{requests} requests");
}

/// wrk2's argument, in numbers: at a constant 500/s for 10 s (5,000 requests), a 1 s stall
/// delays the 500 requests due during it by 1000..0 ms (evenly), i.e. 10% of all requests.
/// The slowest 1% are then those due in the first tenth of the stall: p99 ~ 900 ms, max ~
/// 1,000 ms, p50 untouched. A closed model with 4 clients sees the same stall in only 4
/// requests out of thousands: its p99 stays small and only its max shows the stall.
#[test]
fn a_stall_shows_in_the_open_models_percentiles_not_the_closed_ones() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let spec = open_job(&server.url, "/stallable", 500.0, false, 10_000);
    let until_start = Duration::from_millis((spec.start_at_ms - now_ms()) as u64);
    server.stall(until_start + Duration::from_secs(4), Duration::from_secs(1));
    let open = latency(&engine.run(spec));
    assert!((4950..=5050).contains(&open.len()), "{} responses", open.len());
    let (p50, p99, max) = (open.value_at_quantile(0.5), open.value_at_quantile(0.99), open.max());
    assert!((800_000..=1_000_000).contains(&p99), "open p99 {p99} µs, expected ~900 ms");
    assert!((950_000..=1_150_000).contains(&max), "open max {max} µs, expected ~1 s");
    assert!(p50 < 20_000, "open p50 {p50} µs");

    let server = start_server();
    let mut engine = Engine::spawn();
    let spec = closed_job(&[(&server.url, 1)], vec![get("r", "/stallable", 1)], 4, 10_000, 1000);
    let until_start = Duration::from_millis((spec.start_at_ms - now_ms()) as u64);
    server.stall(until_start + Duration::from_secs(4), Duration::from_secs(1));
    let closed = latency(&engine.run(spec));
    assert!(closed.value_at_quantile(0.99) < 100_000, "closed p99 {} µs", closed.value_at_quantile(0.99));
    assert!(closed.max() >= 900_000, "closed max {} µs", closed.max());
}

#[test]
fn budgets_are_exact_and_end_the_job_early() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[(&server.url, 1)], vec![get("r", "/ok/10", 1)], 4, 30_000, 500);
    spec.max_requests = 777;
    let reports = engine.run(spec);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(total(&reports, |s| s.requests), 777);
    assert_eq!(server.served.responses.load(Ordering::Relaxed), 777);
    assert!(reports.len() < 10, "the job ended when the budget was spent, not after 30 s");

    let mut engine = Engine::spawn();
    let mut spec = open_job(&server.url, "/ok/10", 1000.0, false, 30_000);
    spec.max_requests = 500;
    let reports = engine.run(spec);
    assert_eq!(total(&reports, |s| s.requests), 500);
    assert_eq!(total(&reports, |s| s.scheduled), 500);
}

#[test]
fn users_arrive_at_the_spawn_rate() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[(&server.url, 1)], vec![get("r", "/slow/10", 1)], 0, 3000, 500);
    let users = pb::UsersModel { users: 10, spawn_rate_per_s: 5.0, think: None };
    spec.load = Some(pb::LoadShare { model: Some(pb::load_share::Model::Users(users)), stages: vec![] });
    let reports = engine.run(spec);
    let active: Vec<u64> = reports.iter().map(|r| r.stats.iter().map(|s| s.active_connections).sum()).collect();
    // 5 users/s: about 2-3 users after 0.5 s, 5 after 1 s, all 10 from 2 s on.
    assert!((2..=3).contains(&active[0]), "active connections per 500 ms: {active:?}");
    assert!((4..=5).contains(&active[1]), "active connections per 500 ms: {active:?}");
    assert!(active.windows(2).take(4).all(|w| w[0] <= w[1]), "users only arrive: {active:?}");
    assert_eq!(active[4], 10, "active connections per 500 ms: {active:?}");
    assert_eq!(total(&reports, |s| s.connections_opened), 10);
    // Each user keeps its connection: as many users as connections at every interval's end,
    // and none once the job has ended.
    let users: Vec<u64> = reports.iter().map(|r| r.stats.iter().map(|s| s.users).sum()).collect();
    assert_eq!(users[..users.len() - 1], active[..active.len() - 1], "users per 500 ms");
    assert_eq!(users.last(), Some(&0), "users per 500 ms: {users:?}");
}

/// A client thinking between requests is still a user, with no connection open when each
/// request has its own: 4 users at every interval's end, and (almost) no connection.
#[test]
fn thinking_clients_are_users() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[(&server.url, 1)], vec![get("r", "/ok/10", 1)], 4, 2000, 500);
    spec.keep_alive = false;
    let think = Some(pb::ThinkTime { distribution: Some(pb::think_time::Distribution::FixedMs(200)) });
    spec.load = Some(pb::LoadShare {
        model: Some(pb::load_share::Model::Closed(pb::ClosedModel { clients: 4, think })),
        stages: vec![],
    });
    let reports = engine.run(spec);
    let sum = |r: &pb::IntervalReport, f: fn(&pb::IntervalStats) -> u64| r.stats.iter().map(f).sum::<u64>();
    for report in &reports[..reports.len() - 1] {
        assert_eq!(sum(report, |s| s.users), 4, "users at {}", report.interval_start_ms);
        // (a request of a few hundred µs in every 200 ms may be in flight at an interval's end)
        assert!(sum(report, |s| s.active_connections) < 4, "connections at {}", report.interval_start_ms);
    }
    assert!(total(&reports, |s| s.requests) >= 4 * 8, "every client went on after thinking");
    assert_eq!(sum(reports.last().unwrap(), |s| s.users), 0, "no user once the job has ended");
}

/// Little's law: arrivals at 200/s that each take 100 ms keep 20 requests in progress, and
/// each of them is a user of the open model from its due time until it ends.
#[test]
fn open_model_users_are_the_requests_in_progress() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(open_job(&server.url, "/slow/100", 200.0, false, 3000));
    let users: Vec<u64> = reports.iter().map(|r| r.stats.iter().map(|s| s.users).sum()).collect();
    for n in &users[1..users.len() - 1] {
        assert!((18..=22).contains(n), "users at interval ends: {users:?}");
    }
    assert_eq!(users.last(), Some(&0), "users at interval ends: {users:?}");
}

#[test]
fn sessions_walk_their_steps_and_repeat() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let requests = vec![get("page", "/ok/3000", 1), get("image", "/ok/20000", 1), get("logo", "/ok/500", 1)];
    let mut spec = closed_job(&[(&server.url, 1)], requests, 3, 2000, 1000);
    let think = Some(pb::ThinkTime { distribution: Some(pb::think_time::Distribution::FixedMs(20)) });
    spec.session = Some(pb::Session {
        steps: (0..3).map(|request| pb::SessionStep { request, think_after: think }).collect(),
        repeat: 2,
        ..Default::default()
    });
    let reports = engine.run(spec);
    // 3 users x 2 rounds: every step exactly 6 times, then the users are done.
    for name in ["page", "image", "logo"] {
        assert_eq!(total(&reports, |s| if s.request == name { s.requests } else { 0 }), 6, "{name}");
    }
}

#[test]
fn a_rate_ramp_follows_its_stages() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let mut spec = open_job(&server.url, "/ok/10", 0.0, false, 3000);
    // 0 -> 1000/s over 2 s, then hold for 1 s: 1000 + 1000 requests.
    spec.load = Some(open_share(0.0, vec![pb::Stage { duration_ms: 2000, target: 1000.0 }]));
    let reports = engine.run(spec);
    let requests = total(&reports, |s| s.requests) as f64;
    assert!((requests - 2000.0).abs() < 60.0, "{requests} requests");
    let per_interval: Vec<u64> = reports.iter().map(|r| r.stats.iter().map(|s| s.scheduled).sum()).collect();
    assert!(per_interval[0] < per_interval[1] && per_interval[1] < per_interval[2], "{per_interval:?}");
}

#[test]
fn adjust_changes_the_rate_within_one_interval() {
    let server = start_server();
    let mut engine = Engine::spawn();
    engine.send(Command::Start(open_job(&server.url, "/ok/10", 200.0, false, 3000)));
    let first = match engine.next_event() {
        Some(pb::engine_event::Event::Interval(report)) => report,
        other => panic!("expected an interval, got {other:?}"),
    };
    engine.send(Command::Adjust(open_share(1000.0, vec![])));
    let reports = engine.collect();
    let scheduled = |r: &pb::IntervalReport| r.stats.iter().map(|s| s.scheduled).sum::<u64>();
    assert!((190..=210).contains(&scheduled(&first)), "before: {}", scheduled(&first));
    let next_full = scheduled(&reports[1]);
    assert!((980..=1020).contains(&next_full), "first full interval after adjust: {next_full}");
}

#[test]
fn a_raised_budget_is_spent_exactly_on_top_of_the_first() {
    let server = start_server();
    for open in [false, true] {
        let before = server.served.responses.load(Ordering::Relaxed);
        let mut engine = Engine::spawn();
        let mut spec = if open {
            open_job(&server.url, "/ok/10", 2000.0, false, 30_000)
        } else {
            closed_job(&[(&server.url, 1)], vec![get("r", "/slow/5", 1)], 2, 30_000, 500)
        };
        spec.max_requests = 600;
        spec.start_at_ms = now_ms() + 300;
        engine.send(Command::Start(spec));
        engine.send(Command::Budget(pb::EngineBudget { max_requests: 900 }));
        engine.send(Command::Budget(pb::EngineBudget { max_requests: 100 })); // a budget never shrinks
        let reports = engine.collect();
        thread::sleep(Duration::from_millis(100));
        assert_eq!(total(&reports, |s| s.requests), 900, "open {open}");
        assert_eq!(server.served.responses.load(Ordering::Relaxed) - before, 900, "open {open}");
    }
}

fn arrivals_job(url: &str, rate_per_s: f64, max_connections: u32, steps: Vec<pb::SessionStep>) -> pb::JobSpec {
    let requests = vec![get("page", "/ok/100", 1), get("logo", "/ok/10", 1), get("slow", "/slow/200", 1)];
    let mut spec = closed_job(&[(url, 1)], requests, 1, 3000, 1000);
    let open = pb::OpenModel { rate_per_s, poisson: false, max_connections };
    spec.load = Some(pb::LoadShare { model: Some(pb::load_share::Model::Open(open)), stages: vec![] });
    spec.session = Some(pb::Session { steps, repeat: 0, ..Default::default() });
    spec
}

fn step(request: u32, think_ms: u32) -> pb::SessionStep {
    let think = Some(pb::ThinkTime { distribution: Some(pb::think_time::Distribution::FixedMs(think_ms)) });
    pb::SessionStep { request, think_after: think }
}

fn of(reports: &[pb::IntervalReport], name: &str, field: fn(&pb::IntervalStats) -> u64) -> u64 {
    total(reports, |s| if s.request == name { field(s) } else { 0 })
}

/// Tsung's arrival phases: 100 users a second arrive whatever the server does, each loads a
/// page, thinks 300 ms, loads the logo and leaves. By Little's law about 30 are in progress
/// at any time; each walks the session once, on a connection of its own.
#[test]
fn open_arrivals_walk_the_session_once_each() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(arrivals_job(&server.url, 100.0, 1000, vec![step(0, 300), step(1, 0)]));
    assert_eq!(of(&reports, "page", |s| s.scheduled), 300, "arrivals over 3 s");
    assert_eq!(of(&reports, "page", |s| s.requests), 300, "each user's first request");
    // Users still thinking when the job ends leave without their second request.
    let logos = of(&reports, "logo", |s| s.requests);
    assert!((255..=280).contains(&logos), "{logos} second requests of 300 users");
    assert_eq!(total(&reports, |s| s.connections_opened), 300, "a connection per user");
    let users: Vec<u64> = reports.iter().map(|r| r.stats.iter().map(|s| s.users).sum()).collect();
    for n in &users[..users.len() - 1] {
        assert!((27..=36).contains(n), "users at interval ends: {users:?}");
    }
    assert_eq!(users.last(), Some(&0), "users at interval ends: {users:?}");
    assert_eq!(server.served.responses.load(Ordering::Relaxed), 300 + logos);
}

/// Users who each take 200 ms arriving at 100/s would be 20 in progress; capped at 5, the
/// arrivals beyond are counted as not sent, and none is lost.
#[test]
fn open_arrivals_beyond_the_cap_are_not_sent() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(arrivals_job(&server.url, 100.0, 5, vec![step(2, 0)]));
    let (scheduled, requests, not_sent) = (
        of(&reports, "slow", |s| s.scheduled),
        of(&reports, "slow", |s| s.requests),
        of(&reports, "slow", |s| s.not_sent),
    );
    assert_eq!(scheduled, 300);
    assert_eq!(requests + not_sent, scheduled, "every arrival sent or counted as not sent");
    assert!((60..=80).contains(&requests), "5 users at a time for 3 s of 200 ms requests: {requests}");
    assert!(reports.iter().all(|r| r.stats.iter().map(|s| s.users).sum::<u64>() <= 5));
}

/// A user whose request fails leaves (Tsung aborts the session): against a refused port each
/// arriving user makes one request, not the three of its session.
#[test]
fn an_arriving_user_leaves_on_a_failed_request() {
    let mut engine = Engine::spawn();
    let reports = engine.run(arrivals_job(&closed_port_url(), 100.0, 1000, vec![step(1, 0), step(1, 0), step(1, 0)]));
    let (scheduled, requests) = (of(&reports, "logo", |s| s.scheduled), of(&reports, "logo", |s| s.requests));
    assert_eq!(scheduled, 300);
    assert_eq!(requests, scheduled, "one request per user");
    let refused: u64 = total(&reports, |s| {
        s.errors.iter().filter(|e| e.kind == pb::ErrorKind::ConnectRefused as i32).map(|e| e.count).sum()
    });
    assert_eq!(refused, requests);
}
