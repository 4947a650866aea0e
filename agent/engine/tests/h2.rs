//! HTTP/2 by prior knowledge (h2c) against an in-process server on the h2 crate: streams per
//! connection bounded by the plan and by the server's SETTINGS, a graceful GOAWAY that loses
//! nothing, RST_STREAM counted by code, and an HTTP/1.1 server named as one.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use loadfleet_engine::wire::pb::{self, ErrorKind};
use support::*;

/// What the h2c test server does.
#[derive(Clone, Copy, Default)]
struct Behaviour {
    /// Its SETTINGS_MAX_CONCURRENT_STREAMS (0: none).
    max_concurrent: u32,
    /// A graceful GOAWAY after this many requests on a connection (0: never).
    goaway_after: u64,
}

#[derive(Default)]
struct H2Counts {
    responses: AtomicU64,
    connections: AtomicU64,
    /// Streams open at once on one connection, at most.
    most_concurrent: AtomicU64,
    resets: AtomicU64,
}

/// /ok answers "hello"; /refused resets with REFUSED_STREAM, /internal with INTERNAL_ERROR.
fn start_h2c_server(behaviour: Behaviour) -> (String, Arc<H2Counts>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let counts = Arc::new(H2Counts::default());
    let served = Arc::clone(&counts);
    thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                served.connections.fetch_add(1, Ordering::Relaxed);
                tokio::task::spawn_local(serve(stream, behaviour, Arc::clone(&served)));
            }
        });
    });
    (url, counts)
}

async fn serve(stream: tokio::net::TcpStream, behaviour: Behaviour, counts: Arc<H2Counts>) {
    let mut builder = h2::server::Builder::new();
    if behaviour.max_concurrent > 0 {
        builder.max_concurrent_streams(behaviour.max_concurrent);
    }
    let Ok(mut connection) = builder.handshake::<_, Bytes>(stream).await else { return };
    let open = Arc::new(AtomicU64::new(0));
    let mut accepted = 0;
    while let Some(Ok((request, mut respond))) = connection.accept().await {
        accepted += 1;
        if behaviour.goaway_after > 0 && accepted == behaviour.goaway_after {
            connection.graceful_shutdown();
        }
        let now = open.fetch_add(1, Ordering::Relaxed) + 1;
        counts.most_concurrent.fetch_max(now, Ordering::Relaxed);
        let (counts, open) = (Arc::clone(&counts), Arc::clone(&open));
        tokio::task::spawn_local(async move {
            // Held a little, so that streams overlap.
            tokio::time::sleep(Duration::from_millis(2)).await;
            match request.uri().path() {
                "/refused" => respond.send_reset(h2::Reason::REFUSED_STREAM),
                "/internal" => respond.send_reset(h2::Reason::INTERNAL_ERROR),
                _ => {
                    let response = http::Response::builder().status(200).body(()).unwrap();
                    let mut body = respond.send_response(response, false).unwrap();
                    body.send_data(Bytes::from_static(b"hello"), true).unwrap();
                    counts.responses.fetch_add(1, Ordering::Relaxed);
                    open.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            }
            counts.resets.fetch_add(1, Ordering::Relaxed);
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

fn h2c_job(url: &str, path: &str, clients: u32, max_streams: u32) -> pb::JobSpec {
    let mut spec = closed_job(&[(url, 1)], vec![get("r", path, 1)], clients, 600, 300);
    spec.targets[0].protocol = pb::HttpProtocol::H2c.into();
    spec.targets[0].max_streams = max_streams;
    spec
}

#[test]
fn clients_share_connections_up_to_max_streams() {
    let (url, counts) = start_h2c_server(Behaviour::default());
    let reports = Engine::spawn().run(h2c_job(&url, "/ok", 25, 10));
    thread::sleep(Duration::from_millis(100));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 100, "{requests} requests");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(requests, counts.responses.load(Ordering::Relaxed));
    assert_eq!(total(&reports, |s| s.connections_opened), 3, "25 clients at 10 streams a connection");
    assert_eq!(counts.connections.load(Ordering::Relaxed), 3);
    let most = counts.most_concurrent.load(Ordering::Relaxed);
    assert!((2..=10).contains(&most), "{most} streams at once on a connection");
    // Room for every stream: nothing queues (a stream leaves h2's queue at the next write).
    let queueing = mean_us(&reports, |s| (s.queueing_count, s.queueing_sum_us));
    assert!(queueing < 1000.0, "{queueing:.0} µs queueing with streams to spare");
    assert_phases_add_up(&reports);
    let streams = most_streams(&reports);
    assert!((1..=25).contains(&streams), "{streams} streams open at an interval's end, 25 clients");
}

#[test]
fn the_servers_stream_limit_queues_requests() {
    let (url, counts) = start_h2c_server(Behaviour { max_concurrent: 2, ..Default::default() });
    let reports = Engine::spawn().run(h2c_job(&url, "/ok", 8, 10));
    thread::sleep(Duration::from_millis(100));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 50, "{requests} requests");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(requests, counts.responses.load(Ordering::Relaxed));
    assert_eq!(counts.connections.load(Ordering::Relaxed), 1);
    assert_eq!(counts.most_concurrent.load(Ordering::Relaxed), 2, "never more streams than SETTINGS allow");
    // 8 clients on 2 streams, each held 2 ms: a request waits for about 3 others.
    let (queueing, waiting) = (
        mean_us(&reports, |s| (s.queueing_count, s.queueing_sum_us)),
        mean_us(&reports, |s| (s.waiting_count, s.waiting_sum_us)),
    );
    assert_eq!(total(&reports, |s| s.queueing_count), requests, "every response has a queueing phase");
    assert!(queueing >= 2000.0, "{queueing:.0} µs queueing behind a limit of 2 streams");
    assert!(waiting < queueing, "the wait for a stream is queueing, not waiting ({waiting:.0} µs)");
    assert_phases_add_up(&reports);
    let streams = most_streams(&reports);
    assert!((1..=2).contains(&streams), "{streams} streams open at an interval's end on 1 connection × 2");
}

/// Mean of a phase over every row, µs.
fn mean_us(reports: &[pb::IntervalReport], phase: fn(&pb::IntervalStats) -> (u64, u64)) -> f64 {
    let (count, sum) = reports.iter().flat_map(|r| &r.stats).map(phase).fold((0, 0), |a, p| (a.0 + p.0, a.1 + p.1));
    sum as f64 / count.max(1) as f64
}

/// The phases are parts of the latency: their sums add up to at most the latency's sum (from
/// the histogram, whose values are within 0.1 %), and to most of it (writing the request and
/// the h2 handshake are the rest).
fn assert_phases_add_up(reports: &[pb::IntervalReport]) {
    let phases: u64 =
        total(reports, |s| s.queueing_sum_us + s.connect_sum_us + s.tls_sum_us + s.waiting_sum_us + s.receiving_sum_us);
    let histogram = latency(reports);
    let latency_sum = histogram.mean() * histogram.len() as f64;
    assert!(phases as f64 <= latency_sum * 1.001, "phases {phases} µs > latency {latency_sum:.0} µs");
    assert!(phases as f64 >= latency_sum * 0.8, "phases {phases} µs of a latency of {latency_sum:.0} µs");
}

/// Active streams at an interval's end, summed over rows, at most over the intervals.
fn most_streams(reports: &[pb::IntervalReport]) -> u64 {
    reports.iter().map(|r| r.stats.iter().map(|s| s.active_streams).sum()).max().unwrap_or(0)
}

#[test]
fn a_graceful_goaway_loses_no_request() {
    let (url, counts) = start_h2c_server(Behaviour { goaway_after: 40, ..Default::default() });
    let reports = Engine::spawn().run(h2c_job(&url, "/ok", 6, 10));
    thread::sleep(Duration::from_millis(100));
    let requests = total(&reports, |s| s.requests);
    assert!(counts.connections.load(Ordering::Relaxed) > 2, "the server ended connections");
    assert_eq!(
        total(&reports, |s| s.status_2xx),
        requests,
        "{:?}",
        reports.iter().flat_map(|r| &r.error_samples).next()
    );
    assert_eq!(requests, counts.responses.load(Ordering::Relaxed));
}

#[test]
fn resets_are_counted_by_code() {
    for (path, kind, tries) in [("/refused", ErrorKind::H2RefusedStream, 2), ("/internal", ErrorKind::H2RstInternal, 1)]
    {
        let (url, counts) = start_h2c_server(Behaviour::default());
        let reports = Engine::spawn().run(h2c_job(&url, path, 2, 10));
        thread::sleep(Duration::from_millis(100));
        let requests = total(&reports, |s| s.requests);
        assert!(requests > 10, "{path}: {requests} requests");
        assert_eq!(errors_of(&reports, kind), requests, "{path}");
        // A refused stream was not processed: it goes once more before it counts.
        assert_eq!(counts.resets.load(Ordering::Relaxed), tries * requests, "{path}");
    }
}

#[test]
fn h2c_to_an_http1_server_says_so() {
    let server = start_server();
    let reports = Engine::spawn().run(h2c_job(&server.url, "/ok/5", 2, 10));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 0);
    assert_eq!(errors_of(&reports, ErrorKind::H2Protocol), requests);
    let sample = reports.iter().flat_map(|r| &r.error_samples).next().expect("a sample");
    assert!(sample.message.contains("does not speak h2c"), "{}", sample.message);
}

#[test]
fn the_open_model_runs_over_h2c_with_latency_from_the_due_time() {
    let (url, counts) = start_h2c_server(Behaviour::default());
    let mut spec = open_job(&url, "/ok", 400.0, false, 600);
    spec.targets[0].protocol = pb::HttpProtocol::H2c.into();
    let reports = Engine::spawn().run(spec);
    thread::sleep(Duration::from_millis(100));
    let requests = total(&reports, |s| s.requests);
    assert!((200..=240).contains(&requests), "{requests} requests at 400/s for 0.6 s");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(requests, counts.responses.load(Ordering::Relaxed));
    assert_eq!(histogram_count(&reports), requests, "every response's latency is recorded");
    // The server holds each stream 2 ms: latency from the due time includes it.
    assert!(latency(&reports).value_at_quantile(0.5) >= 2000);
}

#[test]
fn over_tls_auto_falls_back_to_http1_and_h2_says_alpn_did_not_choose_it() {
    // The test TLS server offers no ALPN: HTTP/1.1 only.
    let server = start_tls_server();
    let mut spec = closed_job(&[(&server.url, 1)], vec![get("r", "/", 1)], 2, 500, 250);
    spec.targets[0].protocol = pb::HttpProtocol::Auto.into();
    let reports = Engine::spawn().run(spec);
    thread::sleep(Duration::from_millis(100));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 20, "{requests} requests");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(requests, server.served.responses.load(Ordering::Relaxed));

    let mut spec = closed_job(&[(&server.url, 1)], vec![get("r", "/", 1)], 1, 300, 300);
    spec.targets[0].protocol = pb::HttpProtocol::H2.into();
    let reports = Engine::spawn().run(spec);
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 0);
    assert_eq!(errors_of(&reports, ErrorKind::H2Protocol), requests);
    let sample = reports.iter().flat_map(|r| &r.error_samples).next().expect("a sample");
    assert!(sample.message.contains("did not select h2 by ALPN"), "{}", sample.message);
}
