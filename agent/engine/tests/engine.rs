//! The real engine binary against real sockets on 127.0.0.1: exact counts, byte
//! accounting, connection reuse, weighted spreads, error kinds and the stdio lifecycle.

mod support;

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use loadfleet_engine::wire::pb;
use pb::engine_command::Command;
use support::*;

fn settle() {
    // The server counts a response just after writing it; let it catch up.
    thread::sleep(Duration::from_millis(100));
}

#[test]
fn keep_alive_counts_match_the_server_exactly() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let spec = closed_job(
        &[(&server.url, 1)],
        vec![get("small", "/ok/100", 3), get("chunked", "/chunked/5000", 1)],
        4,
        1500,
        500,
    );
    let start_at = spec.start_at_ms;
    let reports = engine.run(spec);
    settle();

    assert_eq!(reports.len(), 3, "one report per 500 ms interval of a 1.5 s job");
    assert_eq!(reports[0].interval_start_ms, start_at);
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 100, "only {requests} requests");
    assert_eq!(requests, server.served.responses.load(Ordering::Relaxed));
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(total(&reports, |s| s.bytes_in), server.served.bytes.load(Ordering::Relaxed));
    assert_eq!(histogram_count(&reports), requests);
    // Keep-alive: each client opened one connection and closed it at the end.
    assert_eq!(total(&reports, |s| s.connections_opened), 4);
    assert_eq!(total(&reports, |s| s.connections_closed), 4);
    assert_eq!(server.served.connections.load(Ordering::Relaxed), 4);
    // Phases: every response waited and received; only the 4 first requests connected.
    assert_eq!(total(&reports, |s| s.waiting_count), requests);
    assert_eq!(total(&reports, |s| s.receiving_count), requests);
    assert_eq!(total(&reports, |s| s.connect_count), 4);
    let mid: u64 = reports[1].stats.iter().map(|s| s.active_connections).sum();
    assert_eq!(mid, 4, "4 connections open in the middle of the job");
    let small = total(&reports, |s| if s.request == "small" { s.requests } else { 0 });
    let share = small as f64 / requests as f64;
    assert!((share - 0.75).abs() < 0.06, "request weights 3:1 gave {share}");
}

#[test]
fn a_head_that_changes_from_one_response_to_the_next_is_read_each_time() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports =
        engine.run(closed_job(&[(&server.url, 1)], vec![get("alternating", "/alternating/100", 1)], 1, 1000, 500));
    settle();
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 50, "only {requests} requests");
    assert_eq!(requests, server.served.responses.load(Ordering::Relaxed));
    assert_eq!(total(&reports, |s| s.status_2xx), requests, "every response read whole, none misframed");
    assert_eq!(total(&reports, |s| s.bytes_in), server.served.bytes.load(Ordering::Relaxed));
    assert_eq!(total(&reports, |s| s.connections_opened), 1, "the connection stayed in step");
}

#[test]
fn connection_per_request_and_close_delimited_bodies() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let mut spec =
        closed_job(&[(&server.url, 1)], vec![get("ok", "/ok/10", 1), get("close", "/close/700", 1)], 2, 500, 250);
    spec.keep_alive = false;
    let reports = engine.run(spec);
    settle();

    let requests = total(&reports, |s| s.requests);
    assert!(requests > 20);
    assert_eq!(requests, server.served.responses.load(Ordering::Relaxed));
    assert_eq!(total(&reports, |s| s.connections_opened), requests);
    assert_eq!(server.served.connections.load(Ordering::Relaxed), requests);
    assert_eq!(total(&reports, |s| s.bytes_in), server.served.bytes.load(Ordering::Relaxed));
    assert!(total(&reports, |s| s.bytes_out) > requests * 40, "request bytes are counted");
    assert_eq!(total(&reports, |s| s.connect_count), requests, "every response's request connected");
}

#[test]
fn bodies_larger_than_every_buffer_are_read_exactly() {
    // Bodies beyond the connection's 8 KiB buffer and the engine's 64 KiB discard buffer, in
    // every framing; keep-alive goes on after each (the framing ended exactly).
    let server = start_server();
    let mut engine = Engine::spawn();
    let requests =
        vec![get("length", "/ok/200000", 1), get("chunked", "/chunked/300000", 1), get("close", "/close/150000", 1)];
    let reports = engine.run(closed_job(&[(&server.url, 1)], requests, 2, 600, 300));
    settle();
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 30, "only {requests} requests");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(requests, server.served.responses.load(Ordering::Relaxed));
    assert_eq!(total(&reports, |s| s.bytes_in), server.served.bytes.load(Ordering::Relaxed));
    let (closes, opened) = (
        total(&reports, |s| if s.request == "close" { s.requests } else { 0 }),
        total(&reports, |s| s.connections_opened),
    );
    assert_eq!(opened, server.served.connections.load(Ordering::Relaxed));
    // Each client's first connection, then one after every close-delimited body (but its last).
    assert!(
        opened <= 2 + closes && opened + 2 >= 2 + closes,
        "{opened} connections for {closes} close-delimited bodies"
    );
}

#[test]
fn weighted_targets_split_three_to_one() {
    let (a, b) = (start_server(), start_server());
    let mut engine = Engine::spawn();
    let reports = engine.run(closed_job(&[(&a.url, 3), (&b.url, 1)], vec![get("r", "/ok/1", 1)], 4, 1000, 500));
    settle();
    let to_a = total(&reports, |s| if s.target == a.url { s.requests } else { 0 });
    let to_b = total(&reports, |s| if s.target == b.url { s.requests } else { 0 });
    assert_eq!(to_a, a.served.responses.load(Ordering::Relaxed));
    assert_eq!(to_b, b.served.responses.load(Ordering::Relaxed));
    let share = to_a as f64 / (to_a + to_b) as f64;
    assert!((share - 0.75).abs() < 0.02, "3:1 weights gave {share} over {} requests", to_a + to_b);
}

#[test]
fn refused_connections_and_timeouts_are_errors_of_their_kind() {
    let refused = closed_port_url();
    let mut engine = Engine::spawn();
    let reports = engine.run(closed_job(&[(&refused, 1)], vec![get("r", "/", 1)], 2, 300, 100));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 0);
    assert_eq!(errors_of(&reports, pb::ErrorKind::ConnectRefused), requests);
    assert_eq!(total(&reports, |s| s.status_2xx), 0);
    assert_eq!(histogram_count(&reports), 0, "errors have no latency");
    assert!(reports
        .iter()
        .flat_map(|r| &r.error_samples)
        .any(|e| e.target == refused && e.message.contains("refused")));

    let server = start_server();
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[(&server.url, 1)], vec![get("slow", "/slow/400", 1)], 2, 300, 100);
    spec.request_timeout_ms = 100;
    let reports = engine.run(spec);
    assert!(errors_of(&reports, pb::ErrorKind::Timeout) >= 2);
    assert_eq!(total(&reports, |s| s.status_2xx), 0);
}

#[test]
fn status_classes_are_counted() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let requests = vec![get("missing", "/nothing", 1), get("fail", "/status/503", 1), get("moved", "/status/301", 1)];
    let reports = engine.run(closed_job(&[(&server.url, 1)], requests, 2, 300, 100));
    let by_name = |name: &str, field: fn(&pb::IntervalStats) -> u64| {
        total(&reports, |s| if s.request == name { field(s) } else { 0 })
    };
    assert!(by_name("missing", |s| s.status_4xx) > 0);
    assert_eq!(by_name("missing", |s| s.status_4xx), by_name("missing", |s| s.requests));
    assert_eq!(by_name("fail", |s| s.status_5xx), by_name("fail", |s| s.requests));
    assert_eq!(by_name("moved", |s| s.status_3xx), by_name("moved", |s| s.requests));
}

#[test]
fn stop_ends_the_job_early_with_a_final_report() {
    let server = start_server();
    let mut engine = Engine::spawn();
    engine.send(Command::Start(closed_job(&[(&server.url, 1)], vec![get("r", "/ok/1", 1)], 2, 60_000, 1000)));
    thread::sleep(Duration::from_millis(1500));
    let asked = Instant::now();
    engine.send(Command::Stop(pb::EngineStop {}));
    let reports = engine.collect();
    assert!(asked.elapsed() < Duration::from_secs(2), "stop took {:?}", asked.elapsed());
    settle();
    assert_eq!(total(&reports, |s| s.requests), server.served.responses.load(Ordering::Relaxed));
}

#[test]
fn adjust_changes_the_number_of_clients() {
    let server = start_server();
    let mut engine = Engine::spawn();
    engine.send(Command::Start(closed_job(&[(&server.url, 1)], vec![get("r", "/slow/20", 1)], 1, 1500, 500)));
    let first = match engine.next_event() {
        Some(pb::engine_event::Event::Interval(report)) => report,
        other => panic!("expected an interval, got {other:?}"),
    };
    let share = pb::LoadShare {
        model: Some(pb::load_share::Model::Closed(pb::ClosedModel { clients: 5, think: None })),
        stages: vec![],
    };
    engine.send(Command::Adjust(share));
    let reports = engine.collect();
    assert_eq!(
        total(std::slice::from_ref(&first), |s| s.connections_opened) + total(&reports, |s| s.connections_opened),
        5,
        "1 client, then 4 more after adjust"
    );
    let before: u64 = first.stats.iter().map(|s| s.requests).sum();
    let after: u64 = reports[reports.len() - 2].stats.iter().map(|s| s.requests).sum();
    assert!(after > before * 3, "5 clients ({after}) vs 1 client ({before}) of 20 ms requests");
}

#[test]
fn end_of_stdin_ends_the_engine_at_once() {
    let server = start_server();
    let mut engine = Engine::spawn();
    engine.send(Command::Start(closed_job(&[(&server.url, 1)], vec![get("r", "/ok/1", 1)], 2, 60_000, 1000)));
    thread::sleep(Duration::from_millis(500));
    engine.close_stdin();
    assert!(engine.wait_exit(Duration::from_secs(1)).is_some(), "engine still running 1 s after stdin closed");
}

#[test]
fn an_invalid_job_is_refused_with_every_problem_named() {
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[("ftp://127.0.0.1:1", 1)], vec![get("r", "no-slash", 1)], 1, 1000, 1000);
    spec.requests[0].method = "FETCH".into();
    engine.send(Command::Start(spec));
    match engine.next_event() {
        Some(pb::engine_event::Event::Failed(failed)) => {
            for field in ["targets[0].url", "requests[0].method", "requests[0].path"] {
                assert!(failed.message.contains(field), "{field} not in {}", failed.message);
            }
        }
        other => panic!("expected failed, got {other:?}"),
    }
    assert_eq!(engine.wait_exit(Duration::from_secs(2)).expect("exits").code(), Some(1));
}
