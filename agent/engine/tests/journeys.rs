//! Journeys end to end (issue 30): the engine against a small login app on 127.0.0.1 —
//! GET /login gives a form with a CSRF token and a session cookie; POST /login with the
//! token and the cookie logs in; GET /account says "Welcome" to a logged-in session. Checks,
//! extractions, the cookie jar, on_fail rules and their counts, and the static path left as
//! it was.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use loadfleet_engine::wire::pb;
use support::*;

/// What the login app saw.
#[derive(Default)]
struct Seen {
    /// Session id -> its CSRF token.
    tokens: HashMap<String, String>,
    logins: u64,
    refused: u64,
    /// The raw bytes of the first request for each path.
    first_request: HashMap<String, Vec<u8>>,
}

struct App {
    url: String,
    seen: Arc<Mutex<Seen>>,
}

/// The login app. /login (GET): a new session cookie and its token in a form; /login (POST):
/// 200 and `auth` cookie for the session's token, else 403; /account: "Welcome, user N" with
/// the `auth` cookie, else "Please log in"; /static/N: N bytes.
fn start_app() -> App {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = Arc::clone(&seen);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&shared);
            thread::spawn(move || serve(stream, &seen));
        }
    });
    App { url, seen }
}

struct Request {
    method: String,
    path: String,
    cookies: HashMap<String, String>,
    body: String,
}

fn read_request(reader: &mut BufReader<TcpStream>, seen: &Mutex<Seen>) -> Option<Request> {
    let mut raw = Vec::new();
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    raw.extend_from_slice(line.as_bytes());
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let (mut length, mut cookies) = (0, HashMap::new());
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        raw.extend_from_slice(header.as_bytes());
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("cookie:") {
            for pair in header[7..].trim().split("; ") {
                if let Some((k, v)) = pair.split_once('=') {
                    cookies.insert(k.to_string(), v.to_string());
                }
            }
        }
        if header == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    raw.extend_from_slice(&body);
    seen.lock().unwrap().first_request.entry(path.clone()).or_insert(raw);
    Some(Request { method, path, cookies, body: String::from_utf8_lossy(&body).into_owned() })
}

fn serve(stream: TcpStream, seen: &Mutex<Seen>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader, seen) {
        let (status, headers, body) = respond(&request, seen);
        let response = format!("HTTP/1.1 {status} X\r\n{headers}Content-Length: {}\r\n\r\n{body}", body.len());
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn respond(request: &Request, seen: &Mutex<Seen>) -> (u16, String, String) {
    let mut seen = seen.lock().unwrap();
    let path = request.path.split('?').next().unwrap_or_default();
    match (request.method.as_str(), path) {
        ("GET", "/login") => {
            let n = seen.tokens.len();
            let (sid, token) = (format!("s{n}"), format!("t{n}+/"));
            seen.tokens.insert(sid.clone(), token.clone());
            let body = format!("<form><input type=\"hidden\" name=\"csrf\" value=\"{token}\"></form>");
            (200, format!("Set-Cookie: sid={sid}; Path=/; HttpOnly\r\n"), body)
        }
        ("POST", "/login") => {
            let sid = request.cookies.get("sid").cloned().unwrap_or_default();
            let expected = seen.tokens.get(&sid).map(|t| format!("csrf={}", t.replace('+', "%2B").replace('/', "%2F")));
            if expected.as_deref() == Some(request.body.as_str()) {
                seen.logins += 1;
                (200, format!("Set-Cookie: auth=ok-{sid}; Path=/\r\n"), "logged in".into())
            } else {
                seen.refused += 1;
                (403, String::new(), "bad token".into())
            }
        }
        ("GET", "/account") => match request.cookies.get("auth") {
            Some(auth) => (200, String::new(), format!("<h1>Welcome, {auth}</h1>")),
            None => (200, String::new(), "Please log in".into()),
        },
        ("GET", path) if path.starts_with("/static/") => {
            let n: usize = path[8..].parse().unwrap_or(0);
            (200, String::new(), "x".repeat(n))
        }
        _ => (404, String::new(), String::new()),
    }
}

fn request(name: &str, method: &str, path: &str) -> pb::RequestSpec {
    pb::RequestSpec { name: name.into(), method: method.into(), path: path.into(), weight: 1, ..Default::default() }
}

fn check(name: &str, on_fail: pb::OnFail) -> pb::Check {
    pb::Check { name: name.into(), on_fail: on_fail as i32, ..Default::default() }
}

fn step(request: u32) -> pb::SessionStep {
    pb::SessionStep { request, think_after: None }
}

/// The login journey: once GET /login (extract csrf), POST /login (csrf=${csrf:url}, checked
/// "logged in": status 200), then GET /account checked "account page" for "Welcome".
fn login_journey(url: &str, token: &str, on_fail: pb::OnFail, clients: u32) -> pb::JobSpec {
    let mut form = request("login form", "GET", "/login");
    form.extracts = vec![pb::Extract {
        var: 0,
        source: Some(pb::extract::Source::FormField("csrf".into())),
        name: "extract csrf".into(),
        ..Default::default()
    }];
    let mut post = request("login", "POST", "/login");
    post.headers = vec![pb::Header { name: "Content-Type".into(), value: "application/x-www-form-urlencoded".into() }];
    post.body = token.as_bytes().to_vec();
    post.checks = vec![pb::Check { status: vec!["200".into()], ..check("logged in", on_fail) }];
    let mut account = request("account", "GET", "/account");
    account.checks = vec![pb::Check { body_contains: "Welcome".into(), ..check("account page", pb::OnFail::Continue) }];
    let mut spec = closed_job(&[(url, 1)], vec![form, post, account], clients, 600, 300);
    spec.variables = vec!["csrf".into()];
    spec.session = Some(pb::Session { once: vec![step(0), step(1)], steps: vec![step(2)], repeat: 0 });
    spec
}

fn rows<'a>(reports: &'a [pb::IntervalReport], request: &'a str) -> impl Iterator<Item = &'a pb::IntervalStats> {
    reports.iter().flat_map(|r| &r.stats).filter(move |s| s.request == request)
}

/// Passed and failed of check `name` of request `request`, over the run.
fn check_counts(reports: &[pb::IntervalReport], request: &str, name: &str) -> (u64, u64) {
    let counts = rows(reports, request).flat_map(|s| &s.checks).filter(|c| c.name == name);
    counts.fold((0, 0), |(p, f), c| (p + c.passed, f + c.failed))
}

fn sum(reports: &[pb::IntervalReport], request: &str, field: impl Fn(&pb::IntervalStats) -> u64) -> u64 {
    rows(reports, request).map(field).sum()
}

#[test]
fn a_login_journey_carries_the_token_and_the_cookie_to_the_account_page() {
    let app = start_app();
    let mut engine = Engine::spawn();
    let reports = engine.run(login_journey(&app.url, "csrf=${csrf:url}", pb::OnFail::Stop, 3));
    let seen = app.seen.lock().unwrap();
    assert_eq!((seen.logins, seen.refused), (3, 0), "each user logged in once, with its own token and cookie");
    assert_eq!(check_counts(&reports, "login form", "extract csrf"), (3, 0));
    assert_eq!(check_counts(&reports, "login", "logged in"), (3, 0));
    let accounts = sum(&reports, "account", |s| s.requests);
    assert!(accounts > 10, "{accounts} account pages");
    assert_eq!(check_counts(&reports, "account", "account page"), (accounts, 0));
    assert_eq!(total(&reports, |s| s.check_failed), 0);
    assert!(reports.iter().flat_map(|r| &r.stats).all(|s| s.checks_reported));
    assert_eq!(total(&reports, |s| s.users_stopped + s.sessions_restarted), 0);
    let post = String::from_utf8_lossy(&seen.first_request["/login"]).into_owned();
    assert!(post.starts_with("GET /login HTTP/1.1\r\n"), "{post}");
}

#[test]
fn a_wrong_token_is_a_failed_check_by_name_and_on_fail_restart_counts_restarts() {
    let app = start_app();
    let mut engine = Engine::spawn();
    let reports = engine.run(login_journey(&app.url, "csrf=wrong", pb::OnFail::Restart, 2));
    let refused = app.seen.lock().unwrap().refused;
    assert!(refused > 4, "the users kept trying: {refused}");
    let (passed, failed) = check_counts(&reports, "login", "logged in");
    assert_eq!((passed, failed), (0, sum(&reports, "login", |s| s.requests)));
    assert_eq!(sum(&reports, "login", |s| s.check_failed), failed, "every 403 failed its check");
    assert_eq!(sum(&reports, "login", |s| s.status_4xx), failed);
    assert_eq!(errors_of(&reports, pb::ErrorKind::Check), 0, "a failed check is never a transport error");
    // Each failure restarted its user's session: once again, and never the account page.
    assert_eq!(total(&reports, |s| s.sessions_restarted), failed);
    assert_eq!(sum(&reports, "account", |s| s.requests), 0);
    let samples: Vec<_> = reports.iter().flat_map(|r| &r.error_samples).collect();
    let sample = samples.iter().find(|e| e.kind == pb::ErrorKind::Check as i32).expect("a check sample");
    assert_eq!((sample.request.as_str(), sample.check.as_str()), ("login", "logged in"));
    assert_eq!(sample.message, "status 403 not in [200]");
}

#[test]
fn on_fail_stop_ends_the_user_and_counts_it() {
    let app = start_app();
    let mut engine = Engine::spawn();
    let reports = engine.run(login_journey(&app.url, "csrf=wrong", pb::OnFail::Stop, 3));
    assert_eq!(app.seen.lock().unwrap().refused, 3, "each user tried once, then stopped");
    assert_eq!(total(&reports, |s| s.users_stopped), 3);
    assert_eq!(sum(&reports, "login", |s| s.requests), 3);
    assert_eq!(total(&reports, |s| s.sessions_restarted), 0);
}

#[test]
fn a_value_the_path_cannot_carry_is_a_template_error_and_nothing_is_sent() {
    let app = start_app();
    let mut engine = Engine::spawn();
    let mut form = request("form", "GET", "/login");
    form.extracts = vec![pb::Extract {
        var: 0,
        source: Some(pb::extract::Source::Regex("name=\"(csrf)".into())),
        default_value: String::new(),
        ..Default::default()
    }];
    // The extracted value goes in the path with a space before it: "/account?x= csrf".
    let mut spaced = request("spaced", "GET", "/account?x=${v}");
    spaced.extracts = vec![pb::Extract {
        var: 0,
        source: Some(pb::extract::Source::Regex("(Please log in)".into())),
        ..Default::default()
    }];
    let mut spec = closed_job(&[(&app.url, 1)], vec![form, spaced], 1, 400, 200);
    spec.variables = vec!["v".into()];
    spec.session = Some(pb::Session { once: vec![step(0)], steps: vec![step(1), step(1)], repeat: 1 });
    let reports = engine.run(spec);
    // The first /account has ?x=csrf; the second would carry "Please log in": refused, unsent.
    assert_eq!(sum(&reports, "spaced", |s| s.requests), 2);
    assert_eq!(errors_of(&reports, pb::ErrorKind::Template), 1);
    let sample = reports.iter().flat_map(|r| &r.error_samples).find(|e| e.kind == pb::ErrorKind::Template as i32);
    let message = &sample.expect("a template sample").message;
    assert!(message.starts_with("not sent: path: ") && message.contains("0x20"), "{message}");
    let seen = app.seen.lock().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&seen.first_request["/account?x=csrf"]).lines().next(),
        Some("GET /account?x=csrf HTTP/1.1")
    );
    assert_eq!(seen.first_request.len(), 2, "the refused request never reached the server");
}

#[test]
fn a_static_request_keeps_its_bytes_and_its_status_check() {
    let app = start_app();
    let mut engine = Engine::spawn();
    let requests = vec![request("page", "GET", "/static/5"), request("missing", "GET", "/nothing")];
    let reports = engine.run(closed_job(&[(&app.url, 1)], requests, 1, 400, 200));
    let host = app.url.trim_start_matches("http://");
    let seen = app.seen.lock().unwrap();
    let expected = format!("GET /static/5 HTTP/1.1\r\nHost: {host}\r\nUser-Agent: loadfleet-engine\r\n\r\n");
    assert_eq!(String::from_utf8_lossy(&seen.first_request["/static/5"]), expected);
    assert!(rows(&reports, "page").all(|s| s.checks.is_empty() && s.checks_reported && s.check_failed == 0));
    let missing = sum(&reports, "missing", |s| s.requests);
    assert!(missing > 0);
    assert_eq!(sum(&reports, "missing", |s| s.check_failed), missing, "a 404 fails the implicit status check");
}

#[test]
fn a_chunked_body_is_matched_de_chunked_and_a_body_over_the_cap_only_by_its_start() {
    let server = start_server();
    let mut engine = Engine::spawn();
    // /chunked/300: 300 'x' in three chunks; whole only if the chunk framing is left out.
    let mut chunked = request("chunked", "GET", "/chunked/300");
    chunked.checks = vec![pb::Check { body_regex: "^x{300}$".into(), ..check("whole", pb::OnFail::Continue) }];
    let mut long = request("long", "GET", "/ok/300");
    long.checks = vec![pb::Check { body_regex: "x{200}".into(), ..check("long", pb::OnFail::Continue) }];
    let mut spec = closed_job(&[(&server.url, 1)], vec![chunked, long], 1, 300, 300);
    spec.max_body_bytes = 310;
    let reports = engine.run(spec.clone());
    let chunks = sum(&reports, "chunked", |s| s.requests);
    assert!(chunks > 0);
    assert_eq!(check_counts(&reports, "chunked", "whole"), (chunks, 0));
    spec.max_body_bytes = 100;
    spec.start_at_ms = now_ms() + 200;
    let reports = Engine::spawn().run(spec);
    let longs = sum(&reports, "long", |s| s.requests);
    assert!(longs > 0);
    assert_eq!(check_counts(&reports, "long", "long"), (0, longs));
    let sample = reports.iter().flat_map(|r| &r.error_samples).find(|e| e.check == "long").expect("a sample");
    assert!(sample.message.ends_with("(only the body's first 100 bytes were kept)"), "{}", sample.message);
    assert_eq!(sum(&reports, "long", |s| s.check_failed), longs);
}
