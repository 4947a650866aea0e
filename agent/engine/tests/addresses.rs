//! Targets with the addresses the agent resolved: the engine connects only to those, in
//! turn, and never resolves the URL's host; the Host header still comes from the URL.

mod support;

use std::sync::atomic::Ordering;

use support::*;

fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://")
}

#[test]
fn an_unresolvable_host_is_reached_at_the_given_address() {
    let server = start_server();
    let port = host_port(&server.url).rsplit(':').next().unwrap().to_string();
    let url = format!("http://no-such-host.invalid:{port}");
    let mut spec = closed_job(&[(&url, 1)], vec![get("r", "/ok/10", 1)], 2, 500, 250);
    spec.targets[0].addresses = vec![host_port(&server.url).to_string()];
    let reports = Engine::spawn().run(spec);
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 20, "{requests} requests");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    assert!(reports.iter().flat_map(|r| &r.stats).all(|s| s.target == url), "statistics keep the URL as the target");
    assert_eq!(*server.served.last_host.lock().unwrap(), Some(format!("no-such-host.invalid:{port}")));

    // Without addresses the engine resolves the host itself, and this one does not resolve.
    let mut engine = Engine::spawn();
    engine.send(loadfleet_engine::wire::pb::engine_command::Command::Start(closed_job(
        &[(&url, 1)],
        vec![get("r", "/", 1)],
        1,
        500,
        250,
    )));
    match engine.next_event() {
        Some(loadfleet_engine::wire::pb::engine_event::Event::Failed(failed)) => {
            assert!(failed.message.contains("cannot resolve 'no-such-host.invalid"), "{}", failed.message)
        }
        other => panic!("expected failed, got {other:?}"),
    }
}

#[test]
fn connections_go_to_the_addresses_in_turn() {
    let (a, b) = (start_server(), start_server());
    let mut spec = closed_job(&[("http://cluster.invalid:80", 1)], vec![get("r", "/ok/10", 1)], 1, 500, 250);
    spec.keep_alive = false;
    spec.targets[0].addresses = vec![host_port(&a.url).to_string(), host_port(&b.url).to_string()];
    let reports = Engine::spawn().run(spec);
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 20, "{requests} requests");
    assert_eq!(total(&reports, |s| s.status_2xx), requests);
    let (to_a, to_b) = (a.served.connections.load(Ordering::Relaxed), b.served.connections.load(Ordering::Relaxed));
    assert_eq!(to_a + to_b, requests, "a connection per request");
    assert!(to_a.abs_diff(to_b) <= 1, "round robin: {to_a} and {to_b}");
}
