//! Every way a request can fail is counted under its own kind, and the engine goes on.

mod support;

use loadfleet_engine::wire::pb::ErrorKind;
use support::*;

fn failures_of(path: &str, url: &str, request_timeout_ms: u32) -> (u64, Vec<(ErrorKind, u64)>) {
    let mut engine = Engine::spawn();
    let mut spec = closed_job(&[(url, 1)], vec![get("r", path, 1)], 2, 500, 250);
    spec.connect_timeout_ms = 200;
    spec.request_timeout_ms = request_timeout_ms;
    let reports = engine.run(spec);
    let requests = total(&reports, |s| s.requests);
    let kinds = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Protocol,
        ErrorKind::Other,
    ];
    (requests, kinds.iter().map(|k| (*k, errors_of(&reports, *k))).filter(|(_, n)| *n > 0).collect())
}

#[test]
fn each_failure_has_its_kind() {
    let server = start_server();
    for (path, kind) in
        [("/cut/5000", ErrorKind::Reset), ("/garbage", ErrorKind::Protocol), ("/bighead", ErrorKind::Protocol)]
    {
        let (requests, kinds) = failures_of(path, &server.url, 2000);
        assert!(requests > 0, "{path}");
        assert_eq!(kinds, vec![(kind, requests)], "{path}");
    }
    let (requests, kinds) = failures_of("/slow/1000", &server.url, 100);
    assert_eq!(kinds, vec![(ErrorKind::Timeout, requests)]);

    let (requests, kinds) = failures_of("/", &closed_port_url(), 2000);
    assert_eq!(kinds, vec![(ErrorKind::ConnectRefused, requests)]);

    let (_listener, url, _fillers) = unanswering_listener();
    let (requests, kinds) = failures_of("/", &url, 2000);
    assert!(requests > 0);
    assert_eq!(kinds, vec![(ErrorKind::ConnectTimeout, requests)]);
}
