//! Redirects end to end (RequestSpec.max_redirects): the engine against a small app on
//! 127.0.0.1 whose log of requests the counts are compared with. /hop/N answers 302 to
//! /hop/N-1 with a cookie `hN`, /hop/0 says which cookies came; /post/S answers status S to
//! /echo, which logs the method and body it got; /away answers 302 to another listener's
//! origin, which is no target and must never see a connection. Also ${agent}.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use loadfleet_engine::wire::pb;
use support::*;

/// One request the app got: method, path, Cookie header and body.
#[derive(Debug, Clone)]
struct Logged {
    method: String,
    path: String,
    cookie: String,
    body: String,
}

struct App {
    url: String,
    log: Arc<Mutex<Vec<Logged>>>,
    /// `/away` sends here: a listener no request may reach.
    elsewhere: TcpListener,
}

impl App {
    fn count(&self, matches: impl Fn(&Logged) -> bool) -> u64 {
        self.log.lock().unwrap().iter().filter(|l| matches(l)).count() as u64
    }
}

fn start_app() -> App {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let away = format!("http://{}/", elsewhere.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::clone(&log);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (log, away) = (Arc::clone(&shared), away.clone());
            thread::spawn(move || serve(stream, &log, &away));
        }
    });
    App { url, log, elsewhere }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Logged> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let (mut length, mut cookie) = (0, String::new());
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("cookie:") {
            cookie = header[7..].trim().to_string();
        }
        if header == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Logged { method, path, cookie, body: String::from_utf8_lossy(&body).into_owned() })
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Logged>>, away: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader) {
        let (status, headers, body) = respond(&request, away);
        log.lock().unwrap().push(request);
        let response = format!("HTTP/1.1 {status} X\r\n{headers}Content-Length: {}\r\n\r\n{body}", body.len());
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn respond(request: &Logged, away: &str) -> (u16, String, String) {
    let path = request.path.as_str();
    if let Some(n) = path.strip_prefix("/hop/").and_then(|n| n.parse::<u32>().ok()) {
        if n == 0 {
            return (200, String::new(), format!("arrived with [{}]", request.cookie));
        }
        // Absolute and relative references in turn: /hop/3 -> "2" (relative) -> "/hop/1".
        let next = if n % 2 == 0 { format!("/hop/{}", n - 1) } else { (n - 1).to_string() };
        return (302, format!("Location: {next}\r\nSet-Cookie: h{n}=1; Path=/\r\n"), "moved".into());
    }
    if let Some(status) = path.strip_prefix("/post/") {
        return (status.parse().unwrap_or(500), "Location: /echo\r\n".into(), String::new());
    }
    match path {
        "/echo" => (200, String::new(), format!("{} {}", request.method, request.body)),
        "/away" => (302, format!("Location: {away}\r\n"), String::new()),
        _ if path.starts_with("/agent/") => (200, String::new(), String::new()),
        _ => (404, String::new(), String::new()),
    }
}

fn job(url: &str, request: pb::RequestSpec, clients: u32) -> pb::JobSpec {
    closed_job(&[(url, 1)], vec![request], clients, 400, 200)
}

fn redirecting(name: &str, method: &str, path: &str, max_redirects: u32) -> pb::RequestSpec {
    pb::RequestSpec { method: method.into(), max_redirects, ..get(name, path, 1) }
}

#[test]
fn hops_are_followed_counted_as_the_server_saw_them_and_carry_their_cookies() {
    let app = start_app();
    let mut request = redirecting("chain", "GET", "/hop/3", 5);
    let arrived =
        pb::Check { name: "arrived".into(), body_contains: "[h3=1; h2=1; h1=1]".into(), ..Default::default() };
    request.checks = vec![arrived];
    let reports = Engine::spawn().run(job(&app.url, request, 2));
    let (starts, hops) = (app.count(|l| l.path == "/hop/3"), app.count(|l| l.path != "/hop/3"));
    assert!(starts > 5, "{starts} requests");
    assert_eq!(total(&reports, |s| s.requests), starts, "a request and its hops count once");
    assert_eq!(total(&reports, |s| s.redirects), hops, "every hop the server served, and no other");
    assert_eq!(hops, 3 * starts);
    assert_eq!(total(&reports, |s| s.status_2xx), starts, "the status is the last response's");
    let passed = reports.iter().flat_map(|r| &r.stats).flat_map(|s| &s.checks).map(|c| (c.passed, c.failed));
    assert_eq!(passed.fold((0, 0), |(p, f), (a, b)| (p + a, f + b)), (starts, 0), "checks judge the last response");
    assert_eq!(total(&reports, |s| s.waiting_count), starts, "one response measured per request");
}

#[test]
fn past_its_limit_the_redirect_is_the_response_measured() {
    let app = start_app();
    let reports = Engine::spawn().run(job(&app.url, redirecting("chain", "GET", "/hop/3", 1), 1));
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 5);
    assert_eq!(total(&reports, |s| s.redirects), requests, "one hop each");
    assert_eq!(total(&reports, |s| s.status_3xx), requests, "/hop/2's 302 is the answer");
    assert_eq!(app.count(|l| l.path == "/hop/2"), requests);
    assert_eq!(app.count(|l| l.path == "/hop/1"), 0);
    assert_eq!(total(&reports, |s| s.check_failed), 0, "a 3xx passes the implicit status check");
}

#[test]
fn a_303_becomes_a_get_and_a_307_keeps_the_method_and_body() {
    for (status, method, body) in [(303, "GET", ""), (302, "GET", ""), (307, "POST", "a=1"), (308, "POST", "a=1")] {
        let app = start_app();
        let mut request = redirecting("post", "POST", &format!("/post/{status}"), 1);
        request.body = b"a=1".to_vec();
        request.headers = vec![pb::Header { name: "Content-Type".into(), value: "text/plain".into() }];
        let reports = Engine::spawn().run(job(&app.url, request, 1));
        let log = app.log.lock().unwrap().clone();
        let echoed: Vec<_> = log.iter().filter(|l| l.path == "/echo").collect();
        assert!(!echoed.is_empty(), "{status}");
        assert!(echoed.iter().all(|l| (l.method.as_str(), l.body.as_str()) == (method, body)), "{status}: {echoed:?}");
        assert_eq!(total(&reports, |s| s.redirects), echoed.len() as u64, "{status}");
    }
}

#[test]
fn a_hop_to_an_origin_that_is_no_target_is_refused_before_any_socket() {
    let app = start_app();
    let reports = Engine::spawn().run(job(&app.url, redirecting("away", "GET", "/away", 3), 1));
    let requests = app.count(|l| l.path == "/away");
    assert!(requests > 2);
    assert_eq!(errors_of(&reports, pb::ErrorKind::RedirectRefused), requests);
    assert_eq!(total(&reports, |s| s.redirects), 0, "a refused hop is not followed");
    assert_eq!(app.count(|l| l.path != "/away"), 0);
    thread::sleep(Duration::from_millis(50));
    assert!(app.elsewhere.accept().is_err(), "nothing connected to the other origin");
    let sample = reports.iter().flat_map(|r| &r.error_samples).next().expect("a sample");
    let origin = format!("http://{}", app.elsewhere.local_addr().unwrap());
    assert_eq!(sample.message, format!("redirect to {origin} refused: no target of the plan"));
}

#[test]
fn agent_is_the_agent_index_the_job_gives() {
    let app = start_app();
    let mut spec = job(&app.url, get("agent", "/agent/${agent}", 1), 1);
    spec.agent_index = 7;
    let reports = Engine::spawn().run(spec);
    let requests = total(&reports, |s| s.requests);
    assert!(requests > 0);
    assert_eq!(app.count(|l| l.path == "/agent/7"), requests);
}
