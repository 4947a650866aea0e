//! Phase timings against servers that are slow at one thing each: a delay in accepting, in
//! the TLS handshake, before the first byte, or inside the body shows up in its own phase
//! (within 10 % of the delay as the server measured it), and not in the others.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use hdrhistogram::serialization::Deserializer;
use loadfleet_engine::wire::pb;
use support::*;

const DELAY_MS: u64 = 300;

/// Per phase over all rows: (count, mean in ms, max in ms).
struct Phase {
    count: u64,
    mean_ms: f64,
    max_ms: f64,
}

fn phase(reports: &[pb::IntervalReport], field: fn(&pb::IntervalStats) -> (u64, u64, u64)) -> Phase {
    let rows: Vec<(u64, u64, u64)> = reports.iter().flat_map(|r| &r.stats).map(field).collect();
    let count: u64 = rows.iter().map(|r| r.0).sum();
    let sum_us: u64 = rows.iter().map(|r| r.1).sum();
    let max_us = rows.iter().map(|r| r.2).max().unwrap_or(0);
    Phase { count, mean_ms: sum_us as f64 / count.max(1) as f64 / 1000.0, max_ms: max_us as f64 / 1000.0 }
}

fn connect(r: &[pb::IntervalReport]) -> Phase {
    phase(r, |s| (s.connect_count, s.connect_sum_us, s.connect_max_us))
}
fn tls(r: &[pb::IntervalReport]) -> Phase {
    phase(r, |s| (s.tls_count, s.tls_sum_us, s.tls_max_us))
}
fn waiting(r: &[pb::IntervalReport]) -> Phase {
    phase(r, |s| (s.waiting_count, s.waiting_sum_us, s.waiting_max_us))
}
fn receiving(r: &[pb::IntervalReport]) -> Phase {
    phase(r, |s| (s.receiving_count, s.receiving_sum_us, s.receiving_max_us))
}

fn queueing(r: &[pb::IntervalReport]) -> Phase {
    phase(r, |s| (s.queueing_count, s.queueing_sum_us, s.queueing_max_us))
}

fn responses(reports: &[pb::IntervalReport]) -> u64 {
    total(reports, |s| s.status_1xx + s.status_2xx + s.status_3xx + s.status_4xx + s.status_5xx)
}

fn assert_within_10_percent(what: &str, measured_ms: f64, expected_ms: f64) {
    assert!(
        (measured_ms - expected_ms).abs() <= 0.1 * expected_ms,
        "{what}: {measured_ms:.1} ms, expected {expected_ms:.1} ms ± 10 %"
    );
}

fn assert_small(what: &str, measured_ms: f64, delay_ms: f64) {
    assert!(measured_ms <= 0.1 * delay_ms, "{what}: {measured_ms:.1} ms took part of a {delay_ms} ms delay elsewhere");
}

fn job(url: &str, path: &str, keep_alive: bool) -> pb::JobSpec {
    let mut spec = closed_job(&[(url, 1)], vec![get("r", path, 1)], 4, 1500, 500);
    spec.keep_alive = keep_alive;
    spec.connect_timeout_ms = 5000;
    spec
}

#[test]
fn a_slow_first_byte_is_waiting() {
    let server = start_server();
    let reports = Engine::spawn().run(job(&server.url, &format!("/slow/{DELAY_MS}"), false));
    let responses = responses(&reports);
    assert!(responses >= 6, "{responses} responses");
    let delay = server.served.mean_delay_ms();
    assert!(delay >= DELAY_MS as f64, "the server delayed {delay} ms");
    let waiting = waiting(&reports);
    assert_eq!(waiting.count, responses);
    assert_within_10_percent("waiting", waiting.mean_ms, delay);
    assert_small("connect", connect(&reports).mean_ms, delay);
    assert_eq!(connect(&reports).count, responses, "a new connection per request");
    assert_eq!(tls(&reports).count, 0, "plain http has no TLS phase");
    let receiving = receiving(&reports);
    assert_eq!(receiving.count, responses);
    assert_small("receiving", receiving.mean_ms, delay);
    let queueing = queueing(&reports);
    assert_eq!((queueing.count, queueing.max_ms), (responses, 0.0), "a closed model's client never waits");

    // The time-to-first-byte histogram holds every response, and its median is the delay.
    let mut histogram = loadfleet_engine::histogram::new_histogram();
    for row in reports.iter().flat_map(|r| &r.stats).filter(|s| !s.waiting_histogram.is_empty()) {
        let h: hdrhistogram::Histogram<u64> =
            Deserializer::new().deserialize(&mut row.waiting_histogram.as_slice()).unwrap();
        histogram.add(h).unwrap();
    }
    assert_eq!(histogram.len(), responses);
    assert_within_10_percent("waiting p50", histogram.value_at_quantile(0.5) as f64 / 1000.0, delay);
}

#[test]
fn a_slow_body_is_receiving() {
    let server = start_server();
    let reports = Engine::spawn().run(job(&server.url, &format!("/dribble/{DELAY_MS}"), true));
    let responses = responses(&reports);
    assert!(responses >= 6, "{responses} responses");
    let delay = server.served.mean_delay_ms();
    assert!(delay >= DELAY_MS as f64, "the server delayed {delay} ms");
    let receiving = receiving(&reports);
    assert_eq!(receiving.count, responses);
    assert_within_10_percent("receiving", receiving.mean_ms, delay);
    assert_small("waiting", waiting(&reports).mean_ms, delay);
    // Keep-alive: only the first request of each client opened a connection.
    let connect = connect(&reports);
    assert_eq!(connect.count, 4);
    assert_small("connect", connect.max_ms, delay);
}

/// Connects the way an application does and times it: what a slow-to-accept server costs here.
fn blocking_connect_time(stall: Duration) -> f64 {
    let server = start_stalled_server(stall);
    let addr: SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    let started = Instant::now();
    let _stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connects once the server accepts");
    started.elapsed().as_secs_f64() * 1000.0
}

#[test]
fn a_server_slow_to_accept_is_connect() {
    // While the accept queue is full the kernel drops the SYN; the handshake completes when
    // the client's kernel sends it again, after its retransmission timeout (1 s on Linux).
    let stall = Duration::from_millis(300);
    let reference_ms = blocking_connect_time(stall);
    assert!(reference_ms > 500.0, "the stalled server delayed a plain connect by only {reference_ms:.0} ms");
    let mut spec = job("http://127.0.0.1:1", "/ok/100", true);
    spec.load = Some(pb::LoadShare {
        model: Some(pb::load_share::Model::Closed(pb::ClosedModel { clients: 1, think: None })),
        stages: vec![],
    });
    spec.duration_ms = 1800;
    // The queue stays full until `stall` after the job's first connect (at its start).
    let until_start = Duration::from_millis((spec.start_at_ms - now_ms()).max(0) as u64);
    let server = start_stalled_server(until_start + stall);
    spec.targets[0].url = server.url.clone();
    let reports = Engine::spawn().run(spec);
    let connect = connect(&reports);
    assert_eq!(connect.count, 1, "one client, one kept-alive connection");
    assert_within_10_percent("connect", connect.mean_ms, reference_ms);
    assert!(responses(&reports) > 10);
    assert_small("waiting", waiting(&reports).max_ms, reference_ms);
    assert_small("receiving", receiving(&reports).max_ms, reference_ms);
}

#[test]
fn a_slow_tls_handshake_is_tls() {
    let server = start_tls_server_with_handshake_delay(Duration::from_millis(DELAY_MS));
    let reports = Engine::spawn().run(job(&server.url, "/", false));
    let responses = responses(&reports);
    assert!(responses >= 6, "{responses} responses");
    let delay = server.served.mean_delay_ms();
    assert!(delay >= DELAY_MS as f64, "the server delayed {delay} ms");
    let tls = tls(&reports);
    assert_eq!(tls.count, responses, "a handshake per request");
    assert_within_10_percent("tls", tls.mean_ms, delay);
    assert_eq!(connect(&reports).count, responses);
    assert_small("connect", connect(&reports).mean_ms, delay);
    assert_small("waiting", waiting(&reports).mean_ms, delay);
    assert_small("receiving", receiving(&reports).mean_ms, delay);
}

#[test]
fn an_open_model_waiting_for_a_free_connection_is_queueing() {
    // 2 connections of 50 ms requests serve 40/s; 60/s fall due, so requests wait for one.
    let server = start_server();
    let mut spec = open_job(&server.url, "/slow/50", 60.0, false, 1000);
    if let Some(pb::LoadShare { model: Some(pb::load_share::Model::Open(open)), .. }) = spec.load.as_mut() {
        open.max_connections = 2;
    }
    let reports = Engine::spawn().run(spec);
    let responses = responses(&reports);
    assert!(responses >= 30, "{responses} responses");
    let (queueing, waiting) = (queueing(&reports), waiting(&reports));
    assert_eq!(queueing.count, responses);
    assert!(queueing.mean_ms >= 20.0, "{:.1} ms queueing for a connection", queueing.mean_ms);
    assert_within_10_percent("waiting", waiting.mean_ms, server.served.mean_delay_ms());
    // The phases are parts of the latency (from the due time), and hold nearly all of it.
    let phases_ms = [queueing, connect(&reports), waiting, receiving(&reports)]
        .iter()
        .map(|p| p.mean_ms * p.count as f64)
        .sum::<f64>();
    let histogram = latency(&reports);
    let latency_ms = histogram.mean() * histogram.len() as f64 / 1000.0;
    assert!(phases_ms <= latency_ms * 1.001 && phases_ms >= latency_ms * 0.9, "{phases_ms:.0} of {latency_ms:.0} ms");
}
