//! https targets: keep-alive and a handshake per request against a real TLS server;
//! handshake failures are counted as TLS errors.

mod support;

use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use loadfleet_engine::wire::pb::ErrorKind;
use support::*;

#[test]
fn https_with_keep_alive_and_with_a_handshake_per_request() {
    let server = start_tls_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(closed_job(&[(&server.url, 1)], vec![get("r", "/", 1)], 3, 1000, 500));
    thread::sleep(Duration::from_millis(100));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 100, "{requests} requests");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(requests, server.served.responses.load(Ordering::Relaxed));
    assert_eq!(total(&reports, |s| s.connections_opened), 3, "one TLS connection per client");

    let server = start_tls_server();
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[(&server.url, 1)], vec![get("r", "/", 1)], 2, 1000, 500);
    spec.keep_alive = false;
    let reports = engine.run(spec);
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 20);
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert_eq!(total(&reports, |s| s.connections_opened), requests, "a handshake per request");
}

#[test]
fn failed_handshakes_are_tls_errors() {
    // TLS spoken to a plain HTTP server.
    let plain = start_server();
    let url = plain.url.replace("http://", "https://");
    let mut engine = Engine::spawn();
    let reports = engine.run(closed_job(&[(&url, 1)], vec![get("r", "/", 1)], 2, 500, 250));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 0);
    assert_eq!(errors_of(&reports, ErrorKind::Tls), requests);

    // A self-signed certificate when verification is asked for.
    let server = start_tls_server();
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[(&server.url, 1)], vec![get("r", "/", 1)], 1, 500, 250);
    spec.tls_verify = true;
    let reports = engine.run(spec);
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 0);
    assert_eq!(errors_of(&reports, ErrorKind::Tls), requests);
    assert!(
        reports.iter().flat_map(|r| &r.error_samples).any(|e| e.message.contains("certificate")),
        "the message says what was wrong with the certificate"
    );
}
