//! Connects the generator fails by itself are counted apart from the target's failures:
//! with too few file descriptors (a low RLIMIT_NOFILE) they are LOCAL_FDS, never OTHER.

mod support;

use loadfleet_engine::wire::pb::ErrorKind;
use support::*;

#[test]
fn a_connect_without_a_file_descriptor_is_a_local_fds_error() {
    let server = start_server();
    // Room for the engine's own descriptors (about 20) and a few sockets, not for 64 clients.
    let mut engine = Engine::spawn_under(&["prlimit", "--nofile=40:40", "--"]);
    let reports = engine.run(closed_job(&[(&server.url, 1)], vec![get("r", "/ok/10", 1)], 64, 1000, 500));
    let local = errors_of(&reports, ErrorKind::LocalFds);
    assert!(local > 0, "no LOCAL_FDS error under a limit of 24 descriptors");
    assert_eq!(errors_of(&reports, ErrorKind::Other), 0);
    assert_eq!(errors_of(&reports, ErrorKind::ConnectRefused), 0);
    // The clients that got a descriptor still had answers.
    assert!(total(&reports, |s| s.status_2xx) > 0);
}

#[test]
fn with_enough_descriptors_the_same_job_has_no_local_errors() {
    let server = start_server();
    let mut engine = Engine::spawn();
    let reports = engine.run(closed_job(&[(&server.url, 1)], vec![get("r", "/ok/10", 1)], 64, 1000, 500));
    assert_eq!(errors_of(&reports, ErrorKind::LocalFds), 0);
    assert_eq!(errors_of(&reports, ErrorKind::LocalPorts), 0);
    assert!(total(&reports, |s| s.requests) > 0);
}
