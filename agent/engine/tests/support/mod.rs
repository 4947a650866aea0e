//! What the engine's integration tests drive: the real engine binary over its stdio
//! protocol, and a small HTTP/1.1 server on 127.0.0.1 that counts what it served.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use loadfleet_engine::wire::pb;
use prost::Message;

/// Counts of a test server: responses fully written and their bytes.
#[derive(Default)]
pub struct Served {
    pub responses: AtomicU64,
    pub bytes: AtomicU64,
    pub connections: AtomicU64,
    /// While set, /stallable answers only after this moment.
    pub stall_until: std::sync::Mutex<Option<Instant>>,
    /// The Host header of the last request.
    pub last_host: std::sync::Mutex<Option<String>>,
    /// Deliberate delays (/slow, /dribble, a TLS handshake delay) as they happened: on a busy
    /// machine a thread sleeps longer than asked.
    pub delays: AtomicU64,
    pub delayed_us: AtomicU64,
}

impl Served {
    /// Sleeps `ms` and counts the time it took.
    fn delay(&self, ms: u64) {
        let started = Instant::now();
        thread::sleep(Duration::from_millis(ms));
        self.count_delay(started.elapsed());
    }

    fn count_delay(&self, delay: Duration) {
        self.delays.fetch_add(1, Ordering::Relaxed);
        self.delayed_us.fetch_add(delay.as_micros() as u64, Ordering::Relaxed);
    }

    /// The mean of the delays so far, in ms.
    pub fn mean_delay_ms(&self) -> f64 {
        self.delayed_us.load(Ordering::Relaxed) as f64 / self.delays.load(Ordering::Relaxed).max(1) as f64 / 1000.0
    }
}

pub struct TestServer {
    pub url: String,
    pub served: Arc<Served>,
}

impl TestServer {
    /// From `after` on, for `length`, every /stallable request waits (a server hiccup).
    pub fn stall(&self, after: Duration, length: Duration) {
        let served = Arc::clone(&self.served);
        thread::spawn(move || {
            thread::sleep(after);
            *served.stall_until.lock().unwrap() = Some(Instant::now() + length);
        });
    }
}

/// Paths: /ok/N (N-byte body, Content-Length), /chunked/N (N bytes in 3 chunks),
/// /close/N (body delimited by closing), /slow/MS (answers after MS ms), /dribble/MS (the
/// headers and half of a 10-byte body at once, the other half MS ms later), /status/CODE,
/// /stallable (see `TestServer::stall`), and broken answers: /cut/N (closes after N of 2N
/// promised body bytes), /garbage (not HTTP), /bighead (80 KB of headers).
pub fn start_server() -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(Served::default());
    let counts = Arc::clone(&served);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counts = Arc::clone(&counts);
            counts.connections.fetch_add(1, Ordering::Relaxed);
            thread::spawn(move || serve_connection(stream, &counts));
        }
    });
    TestServer { url, served }
}

fn serve_connection(stream: TcpStream, served: &Served) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader, served) {
        let Some((response, close)) = respond(&request, &mut writer, served) else {
            return;
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
        served.responses.fetch_add(1, Ordering::Relaxed);
        served.bytes.fetch_add(response.len() as u64, Ordering::Relaxed);
        if close || request.close {
            return;
        }
    }
}

/// What the test server needs of a request.
struct Received {
    path: String,
    head_request: bool,
    /// The client asked to close the connection after the response.
    close: bool,
}

/// The next request on the connection, its body read; None when the client closed it.
fn read_request(reader: &mut BufReader<TcpStream>, served: &Served) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let head_request = line.starts_with("HEAD ");
    let (mut length, mut close) = (0usize, false);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return None;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        close |= lower.starts_with("connection:") && lower.contains("close");
        if lower.starts_with("host:") {
            *served.last_host.lock().unwrap() = Some(header[5..].trim().to_string());
        }
        if header == "\r\n" {
            break;
        }
    }
    let mut body_in = vec![0; length];
    reader.read_exact(&mut body_in).ok()?;
    Some(Received { path, head_request, close })
}

/// The response to `request` (see `start_server`) and whether the connection closes after
/// it; None when the connection ends at once (a broken answer, written here).
fn respond(request: &Received, writer: &mut TcpStream, served: &Served) -> Option<(String, bool)> {
    let mut parts = request.path.trim_start_matches('/').splitn(2, '/');
    let kind = parts.next().unwrap_or("");
    let n: usize = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let body = "x".repeat(n);
    let response = match kind {
        "ok" => {
            format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n{}", if request.head_request { "" } else { &body })
        }
        "chunked" => {
            let (a, b) = (n / 3, n / 3);
            let c = n - a - b;
            format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{a:x}\r\n{}\r\n{b:x};ext=1\r\n{}\r\n{c:x}\r\n{}\r\n0\r\nX-Trailer: t\r\n\r\n",
                    &body[..a], &body[a..a + b], &body[a + b..])
        }
        "close" => return Some((format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{body}"), true)),
        "slow" => {
            served.delay(n as u64);
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string()
        }
        "dribble" => {
            let first = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
            writer.write_all(first.as_bytes()).and_then(|()| writer.flush()).ok()?;
            served.delay(n as u64);
            served.bytes.fetch_add(first.len() as u64, Ordering::Relaxed);
            "world".to_string()
        }
        "status" => format!("HTTP/1.1 {n} X\r\nContent-Length: 0\r\n\r\n"),
        // The same request gets a body one byte longer every other response.
        "alternating" => {
            let length = n + (served.responses.load(Ordering::Relaxed) % 2) as usize;
            format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n{}", "x".repeat(length))
        }
        "stallable" => {
            let until = *served.stall_until.lock().unwrap();
            if let Some(until) = until.filter(|u| *u > Instant::now()) {
                thread::sleep(until - Instant::now());
            }
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_string()
        }
        "cut" => {
            let _ = writer.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", 2 * n).as_bytes());
            return None;
        }
        "garbage" => {
            let _ = writer.write_all(b"HTTP/1.1 2x0 \x01\r\nzz\r\n\r\n");
            return None;
        }
        "bighead" => format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\nContent-Length: 0\r\n\r\n", "h".repeat(80_000)),
        _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string(),
    };
    Some((response, false))
}

/// A listener on 127.0.0.1 that never accepts and whose queue is full, so new
/// connections get no answer (a connect timeout). Keep it alive while in use.
pub fn unanswering_listener() -> (socket2::Socket, String, Vec<std::net::TcpStream>) {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    socket.listen(0).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    // Fill the accept queue; later SYNs are dropped.
    let fillers =
        (0..3).filter_map(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()).collect();
    (socket, format!("http://{addr}"), fillers)
}

/// A server slow to accept: its accept queue (backlog 0) is full, so the kernel drops new
/// SYNs, until `stall` has passed; then it accepts and serves as `start_server`. A client's
/// handshake completes when its SYN is sent again after the kernel's retransmission timeout.
pub fn start_stalled_server(stall: Duration) -> TestServer {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    socket.listen(0).unwrap();
    let listener: TcpListener = socket.into();
    let addr = listener.local_addr().unwrap();
    let filler =
        TcpStream::connect_timeout(&addr, Duration::from_millis(500)).expect("the one connection the queue holds");
    let served = Arc::new(Served::default());
    let counts = Arc::clone(&served);
    thread::spawn(move || {
        thread::sleep(stall);
        drop(filler);
        for stream in listener.incoming().flatten() {
            let counts = Arc::clone(&counts);
            counts.connections.fetch_add(1, Ordering::Relaxed);
            thread::spawn(move || serve_connection(stream, &counts));
        }
    });
    TestServer { url: format!("http://{addr}"), served }
}

/// A port on 127.0.0.1 that nothing listens on.
pub fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

pub fn open_job(url: &str, path: &str, rate_per_s: f64, poisson: bool, duration_ms: u32) -> pb::JobSpec {
    let mut spec = closed_job(&[(url, 1)], vec![get("r", path, 1)], 1, duration_ms, 1000);
    let open = pb::OpenModel { rate_per_s, poisson, max_connections: 64 };
    spec.load = Some(pb::LoadShare { model: Some(pb::load_share::Model::Open(open)), stages: vec![] });
    spec
}

/// The latency histogram of all responses in `reports`.
pub fn latency(reports: &[pb::IntervalReport]) -> hdrhistogram::Histogram<u64> {
    use hdrhistogram::serialization::Deserializer;
    let mut all = loadfleet_engine::histogram::new_histogram();
    for s in reports.iter().flat_map(|r| &r.stats).filter(|s| !s.latency_histogram.is_empty()) {
        let h: hdrhistogram::Histogram<u64> =
            Deserializer::new().deserialize(&mut s.latency_histogram.as_slice()).unwrap();
        all.add(h).unwrap();
    }
    all
}

pub fn get(name: &str, path: &str, weight: u32) -> pb::RequestSpec {
    pb::RequestSpec { name: name.into(), method: "GET".into(), path: path.into(), weight, ..Default::default() }
}

/// A closed-model job starting at the next interval boundary at least 200 ms away.
pub fn closed_job(
    targets: &[(&str, u32)],
    requests: Vec<pb::RequestSpec>,
    clients: u32,
    duration_ms: u32,
    interval_ms: u32,
) -> pb::JobSpec {
    let interval = i64::from(interval_ms);
    let start_at_ms = (now_ms() + 200 + interval) / interval * interval;
    pb::JobSpec {
        job_id: "test".into(),
        targets: targets
            .iter()
            .map(|(url, weight)| pb::Target { url: url.to_string(), weight: *weight, ..Default::default() })
            .collect(),
        requests,
        keep_alive: true,
        connect_timeout_ms: 1000,
        request_timeout_ms: 2000,
        load: Some(pb::LoadShare {
            model: Some(pb::load_share::Model::Closed(pb::ClosedModel { clients, think: None })),
            stages: vec![],
        }),
        start_at_ms,
        duration_ms,
        interval_ms,
        ..Default::default()
    }
}

/// The engine binary under test; killed when dropped so that a failing test leaves nothing behind.
pub struct Engine {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
}

impl Engine {
    pub fn spawn() -> Engine {
        Engine::spawn_under(&[])
    }

    /// The engine started through `wrapper` (e.g. `prlimit --nofile=24:24 --`), if any.
    pub fn spawn_under(wrapper: &[&str]) -> Engine {
        let engine = env!("CARGO_BIN_EXE_loadfleet-engine");
        let mut command = match wrapper.split_first() {
            None => Command::new(engine),
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(engine);
                c
            }
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start loadfleet-engine");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let mut engine = Engine { child, stdin, stdout };
        match engine.next_event() {
            Some(pb::engine_event::Event::Ready(_)) => engine,
            other => panic!("expected ready, got {other:?}"),
        }
    }

    pub fn send(&mut self, command: pb::engine_command::Command) {
        let bytes = pb::EngineCommand { command: Some(command) }.encode_length_delimited_to_vec();
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(&bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The next event, or None when the engine closed stdout.
    pub fn next_event(&mut self) -> Option<pb::engine_event::Event> {
        let mut length = 0usize;
        let mut shift = 0;
        loop {
            let mut byte = [0u8];
            if self.stdout.read(&mut byte).ok()? == 0 {
                return None;
            }
            length |= usize::from(byte[0] & 0x7f) << shift;
            shift += 7;
            if byte[0] & 0x80 == 0 {
                break;
            }
        }
        let mut payload = vec![0; length];
        self.stdout.read_exact(&mut payload).expect("whole frame");
        pb::EngineEvent::decode(payload.as_slice()).expect("an EngineEvent").event
    }

    /// Runs a job to its end: every interval report, checking the protocol's promises
    /// (a report per interval, the last one final, then finished, then exit 0).
    pub fn run(&mut self, spec: pb::JobSpec) -> Vec<pb::IntervalReport> {
        self.send(pb::engine_command::Command::Start(spec));
        self.collect()
    }

    pub fn collect(&mut self) -> Vec<pb::IntervalReport> {
        let mut reports: Vec<pb::IntervalReport> = Vec::new();
        loop {
            match self.next_event() {
                Some(pb::engine_event::Event::Interval(report)) => {
                    assert!(!reports.last().is_some_and(|r| r.r#final), "a report after the final one");
                    reports.push(report)
                }
                Some(pb::engine_event::Event::Finished(_)) => break,
                other => panic!("unexpected event {other:?}"),
            }
        }
        assert!(reports.last().expect("at least one report").r#final);
        for pair in reports.windows(2) {
            assert_eq!(pair[1].interval_start_ms - pair[0].interval_start_ms, i64::from(pair[0].interval_ms));
        }
        assert!(self.wait_exit(Duration::from_secs(5)).expect("exits after finished").success());
        reports
    }

    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sum of a counter over every report and row.
pub fn total(reports: &[pb::IntervalReport], field: impl Fn(&pb::IntervalStats) -> u64) -> u64 {
    reports.iter().flat_map(|r| &r.stats).map(field).sum()
}

pub fn errors_of(reports: &[pb::IntervalReport], kind: pb::ErrorKind) -> u64 {
    total(reports, |s| s.errors.iter().filter(|e| e.kind == kind as i32).map(|e| e.count).sum())
}

/// Responses counted in the latency histograms.
pub fn histogram_count(reports: &[pb::IntervalReport]) -> u64 {
    use hdrhistogram::serialization::Deserializer;
    reports
        .iter()
        .flat_map(|r| &r.stats)
        .filter(|s| !s.latency_histogram.is_empty())
        .map(|s| {
            let h: hdrhistogram::Histogram<u64> =
                Deserializer::new().deserialize(&mut s.latency_histogram.as_slice()).expect("V2 histogram");
            h.len()
        })
        .sum()
}

/// An https server on 127.0.0.1 with a fresh self-signed certificate: answers every
/// request with "hello" (keep-alive), counting responses.
pub fn start_tls_server() -> TestServer {
    start_tls_server_with_handshake_delay(Duration::ZERO)
}

/// As `start_tls_server`, but the server waits `delay` after accepting a connection before
/// it answers the client's hello (a server slow to handshake).
pub fn start_tls_server_with_handshake_delay(delay: Duration) -> TestServer {
    let acceptor = self_signed_acceptor();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let served = Arc::new(Served::default());
    let counts = Arc::clone(&served);
    thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                counts.connections.fetch_add(1, Ordering::Relaxed);
                tokio::task::spawn_local(serve_tls_connection(stream, acceptor.clone(), delay, Arc::clone(&counts)));
            }
        });
    });
    TestServer { url, served }
}

/// A TLS acceptor with a fresh self-signed certificate for localhost and 127.0.0.1.
fn self_signed_acceptor() -> tokio_rustls::TlsAcceptor {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// One connection of `start_tls_server_with_handshake_delay`: the handshake after `delay`,
/// then "hello" to every request until the client closes or asks to.
async fn serve_tls_connection(
    stream: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    delay: Duration,
    counts: Arc<Served>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    if !delay.is_zero() {
        let started = std::time::Instant::now();
        tokio::time::sleep(delay).await;
        counts.count_delay(started.elapsed());
    }
    let Ok(tls) = acceptor.accept(stream).await else { return };
    let mut stream = tokio::io::BufReader::new(tls);
    loop {
        let mut line = String::new();
        let mut close = false;
        loop {
            line.clear();
            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            close |= line.to_ascii_lowercase().starts_with("connection: close");
            if line == "\r\n" {
                break;
            }
        }
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        if stream.write_all(response).await.is_err() || stream.flush().await.is_err() {
            return;
        }
        counts.responses.fetch_add(1, Ordering::Relaxed);
        counts.bytes.fetch_add(response.len() as u64, Ordering::Relaxed);
        if close {
            let _ = stream.shutdown().await;
            return;
        }
    }
}
