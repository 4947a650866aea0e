//! The connections of one client (closed model) or worker (open model): at most one per
//! target, reused when keep-alive is on. `request` sends one request and records it.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use url::Url;

use crate::capture::Inspection;
use crate::compose::{compose, now_ms, Destination};
use crate::h2lane::Lane;
use crate::h2send::{self, H2Ended, H2Exchange};
use crate::head::RecentHead;
use crate::hop;
use crate::http::{self, Connection, Handshakes};
use crate::inspect::{judge, Judged, Seen};
use crate::journey::OnFail;
use crate::phases::Phases;
use crate::redirect;
use crate::shared::Shared;
use crate::socket::Socket;
use crate::stats::Outcome;
use crate::timer::Timer;
use crate::user::{UserState, RETAINED_BUFFER_BYTES};
use crate::wire::pb::ErrorKind;

/// How long a client waits after a connect failed for want of the generator's own
/// descriptors or ports: one frees only when another connection closes, and retrying at
/// once would spin.
const LOCAL_EXHAUSTION_PAUSE: Duration = Duration::from_millis(1);

/// A connect can fail without ever waiting (socket() failing with EMFILE, bind() with
/// EADDRNOTAVAIL): a client without think time would then loop without yielding and starve
/// the runtime (its timers, its reports). So a failed connect always yields, and waits a
/// little when the generator itself ran out.
async fn pause_after_failed_connect(kind: ErrorKind) {
    if matches!(kind, ErrorKind::LocalFds | ErrorKind::LocalPorts) {
        tokio::time::sleep(LOCAL_EXHAUSTION_PAUSE).await;
    } else {
        tokio::task::yield_now().await;
    }
}

/// A kept-alive connection and the statistics slot of the last request it carried.
struct Held {
    connection: Connection,
    owner: usize,
}

/// How a request ended; `at` (when its response's last byte was read) for responses only.
struct Ended {
    outcome: Outcome,
    bytes_in: u64,
    bytes_out: u64,
    at: Option<Instant>,
}

/// How a user's request ended: whether a response came (of any status), and what the user
/// does next (a journey's on_fail and on_missing rules; Continue for a static request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub responded: bool,
    pub then: OnFail,
}

/// What one exchange sends and reads: the request's bytes, whether it is a HEAD, the head
/// remembered for it, and (journey requests only) where its response is kept.
struct Exchange<'a> {
    wire: &'a [u8],
    head: bool,
    recent_head: &'a RefCell<RecentHead>,
    inspection: Option<&'a mut Inspection>,
}

impl Ended {
    fn failed(kind: ErrorKind, message: String, bytes_out: u64) -> Self {
        Ended { outcome: Outcome::Failed { kind, message }, bytes_in: 0, bytes_out, at: None }
    }

    /// A request that went on to a redirect's hop, which ended `next`: how the hop ended,
    /// with the bytes and phases of both.
    fn then(&self, next: Ended) -> Ended {
        let outcome = match (&self.outcome, next.outcome) {
            (Outcome::Response { phases: before, .. }, Outcome::Response { status, phases }) => {
                Outcome::Response { status, phases: redirect::add_phases(before, &phases) }
            }
            (_, outcome) => outcome,
        };
        Ended {
            outcome,
            bytes_in: self.bytes_in + next.bytes_in,
            bytes_out: self.bytes_out + next.bytes_out,
            at: next.at,
        }
    }

    /// The response's queueing with the wait before its driver began it added (open model:
    /// from its due time until a worker took it up; `due` is `started` otherwise).
    fn queued_since(mut self, due: Instant, started: Instant) -> Ended {
        if let Outcome::Response { phases, .. } = &mut self.outcome {
            phases.queueing += started.saturating_duration_since(due);
        }
        self
    }

    /// A request whose redirect was refused (never sent), with the bytes of what it exchanged.
    fn refused(&self, message: String) -> Ended {
        let outcome = Outcome::Failed { kind: ErrorKind::RedirectRefused, message };
        Ended { outcome, bytes_in: self.bytes_in, bytes_out: self.bytes_out, at: None }
    }
}

/// A journey request: its target, its index in the job, and its statistics slot.
#[derive(Debug, Clone, Copy)]
struct Route {
    target: usize,
    request: usize,
    slot: usize,
}

pub struct Connections {
    shared: Rc<Shared>,
    /// One per target, so that weighted target picks can keep connections alive.
    held: Vec<Option<Held>>,
    /// Read buffers of closed connections, for the next ones (no allocation per connect),
    /// and their sockets when they can be reused (see `socket.rs`). At most one of each
    /// per target.
    spare_buffers: Vec<Vec<u8>>,
    spare_sockets: Vec<Socket>,
    /// The connect and request timeouts of this driver's requests (see `timer.rs`).
    connect_timer: Timer,
    request_timer: Timer,
    /// A redirect's previous request, while its hop's is built (redirect.rs): one request's
    /// bytes, kept for the next hop; shrunk back to RETAINED_BUFFER_BYTES after the hops, as a
    /// user's buffers are.
    hop_buf: Vec<u8>,
    /// This driver's lane on HTTP/2 connections (h2pool.rs), from its first HTTP/2 request.
    lane: Option<Lane>,
}

impl Connections {
    pub fn new(shared: &Rc<Shared>) -> Self {
        Connections {
            shared: Rc::clone(shared),
            held: shared.job.targets.iter().map(|_| None).collect(),
            spare_buffers: Vec::new(),
            spare_sockets: Vec::new(),
            connect_timer: Timer::new(shared.job.connect_timeout),
            request_timer: Timer::new(shared.job.request_timeout),
            hop_buf: Vec::new(),
            lane: None,
        }
    }

    /// Sends request number `request` to target number `target` and records how it ended;
    /// whether a response came (of any status), not a transport error. Latency runs from `due`
    /// (when the request was meant to go out), or from now.
    pub async fn request(&mut self, target: usize, request: usize, due: Option<Instant>) -> bool {
        let shared = Rc::clone(&self.shared);
        let slot = shared.stats.borrow().slot(target, shared.job.requests[request].name);
        shared.in_flight.set(shared.in_flight.get() + 1);
        let started = Instant::now();
        let due = due.unwrap_or(started);
        let spec = &shared.job.requests[request];
        let exchange = Exchange {
            wire: &spec.wire[target],
            head: spec.head,
            recent_head: shared.recent_head(target, request),
            inspection: None,
        };
        let ended = self.send(target, exchange, slot, started).await.queued_since(due, started);
        let Ended { outcome, bytes_in, bytes_out, at } = ended;
        let latency_us = at.map_or(0, |at| (at - due).as_micros() as u64);
        shared.stats.borrow_mut().record(slot, outcome, latency_us, bytes_in, bytes_out);
        shared.in_flight.set(shared.in_flight.get() - 1);
        at.is_some()
    }

    /// A request of `user`: on the journey path when the request has a journey (built from
    /// the user's state, its response judged), else as `request`.
    pub async fn request_for(
        &mut self,
        target: usize,
        request: usize,
        due: Option<Instant>,
        user: &mut UserState,
    ) -> Sent {
        if self.shared.job.journey(request).is_none() {
            let responded = self.request(target, request, due).await;
            return Sent { responded, then: OnFail::Continue };
        }
        let shared = Rc::clone(&self.shared);
        let (journeys, journey) = shared.job.journey(request).expect("looked at above");
        let slot = shared.stats.borrow().slot(target, shared.job.requests[request].name);
        let started = Instant::now();
        let due = due.unwrap_or(started);
        let now_ms = now_ms();
        let to = Destination { request, target, keep_alive: shared.job.keep_alive };
        if let Err(message) = compose(journeys, journey, to, user, now_ms) {
            let outcome = Outcome::Failed { kind: ErrorKind::Template, message: format!("not sent: {message}") };
            shared.stats.borrow_mut().record(slot, outcome, 0, 0, 0);
            user.request_done();
            // Nothing awaited the request: a user whose every request is refused must still yield.
            tokio::task::yield_now().await;
            return Sent { responded: false, then: OnFail::Continue };
        }
        shared.in_flight.set(shared.in_flight.get() + 1);
        let mut inspection = shared.inspections.borrow_mut().take();
        inspection.start(journey.needs_body, journeys.max_body_bytes);
        let exchange = Exchange {
            wire: &user.write_buf,
            head: journey.head,
            recent_head: shared.recent_head(target, request),
            inspection: Some(&mut inspection),
        };
        let mut ended = self.send(target, exchange, slot, started).await.queued_since(due, started);
        let mut last_url = None;
        if journey.max_redirects > 0 {
            let (hops, url) =
                self.follow(Route { target, request, slot }, &mut ended, &mut inspection, user, now_ms).await;
            shared.stats.borrow_mut().redirected(slot, hops);
            last_url = url;
        }
        let at = ended.at;
        let latency_us = at.map_or(0, |at| (at - due).as_micros() as u64);
        let url = last_url.as_ref().unwrap_or(&journeys.urls[journeys.url_key(request, target)]);
        let seen = Seen { status: 0, latency_us, url, now_ms };
        let then = record_journey(&shared, (request, slot), ended, seen, &inspection, user);
        shared.inspections.borrow_mut().give_back(inspection, journeys.max_body_bytes);
        user.request_done();
        shared.in_flight.set(shared.in_flight.get() - 1);
        Sent { responded: at.is_some(), then }
    }

    /// Follows the redirects of a journey request whose first exchange `ended` (redirect.rs),
    /// each hop a new exchange on its target's connection, with its own timeouts; `ended`
    /// becomes the last exchange's, with the bytes and phases of every hop. Returns the hops
    /// followed and, after a hop, the URL of the last response.
    async fn follow(
        &mut self,
        route: Route,
        ended: &mut Ended,
        inspection: &mut Inspection,
        user: &mut UserState,
        now_ms: u64,
    ) -> (u32, Option<Url>) {
        let shared = Rc::clone(&self.shared);
        let (journeys, journey) = shared.job.journey(route.request).expect("a journey request");
        let mut from = None;
        let mut hops = 0;
        while hops < journey.max_redirects {
            let Outcome::Response { status, .. } = ended.outcome else { break };
            let url = match from.take() {
                Some(url) => url,
                None => match journeys.origins.url_of(route.target, redirect::path_of(&user.write_buf)) {
                    Ok(url) => url,
                    Err(_) => break, // a path the engine wrote is always a URL's
                },
            };
            let hop = match hop::next_hop(journeys, (status, inspection), &url, user, &mut self.hop_buf, now_ms) {
                Some(Ok(hop)) => hop,
                not_followed => {
                    if let Some(Err(message)) = not_followed {
                        *ended = ended.refused(message);
                    }
                    from = Some(url);
                    break;
                }
            };
            inspection.start(journey.needs_body, journeys.max_body_bytes);
            let exchange = Exchange {
                wire: &user.write_buf,
                head: journey.head,
                recent_head: shared.recent_head(hop.target, route.request),
                inspection: Some(inspection),
            };
            let next = self.send(hop.target, exchange, route.slot, Instant::now()).await;
            *ended = ended.then(next);
            hops += 1;
            from = Some(hop.url);
        }
        if self.hop_buf.capacity() > RETAINED_BUFFER_BYTES {
            self.hop_buf = Vec::new();
        }
        (hops, from.filter(|_| hops > 0))
    }

    pub fn close_all(&mut self) {
        for target in 0..self.held.len() {
            self.close(target, false);
        }
        self.lane = None;
    }

    /// One exchange on the target's connection (connecting if needed), from `started`.
    async fn send(&mut self, target: usize, mut exchange: Exchange<'_>, slot: usize, mut started: Instant) -> Ended {
        let shared = Rc::clone(&self.shared);
        let job = &shared.job;
        // handshakes: set when this request opened a connection (the one its response came on).
        let (mut bytes_out, mut handshakes) = (0, None);
        if job.targets[target].h2.speaks_h2() {
            if let Some(ended) = self.send_h2(target, &mut exchange, slot, started).await {
                return ended;
            }
        }
        loop {
            let reused = self.reuse(target, slot);
            if !reused {
                // Awaited here rather than in a helper's future: that one, nested in this
                // future, cost every request ~27 instructions more (bench/engine/instructions.py).
                let (addr, tls) = (job.targets[target].next_addr(), job.targets[target].tls.as_ref());
                let (buffer, spare) = self.recycled(addr.is_ipv6(), tls.is_none());
                let timer = &mut self.connect_timer;
                match http::connect(addr, started, timer, tls, buffer, &shared.reactor, spare).await {
                    Ok((connection, opened)) => {
                        self.hold(target, slot, connection);
                        handshakes = Some(opened);
                        started += opened.connect + opened.tls.unwrap_or_default();
                    }
                    Err(failure) => {
                        pause_after_failed_connect(failure.kind).await;
                        return Ended::failed(failure.kind, failure.message, 0);
                    }
                }
            }
            let connection = &mut self.held[target].as_mut().expect("held or opened above").connection;
            bytes_out += exchange.wire.len() as u64;
            // The request timeout runs from when the request can go (connected, if it had to).
            let (inspection, discard) = (exchange.inspection.as_deref_mut(), &shared.discard);
            let exchanged =
                connection.exchange(exchange.wire, exchange.head, exchange.recent_head, discard, inspection);
            match self.request_timer.run(started, exchanged).await {
                Some(Ok(response)) => return self.responded(target, response, handshakes, bytes_out),
                Some(Err(failure)) => {
                    self.close(target, false);
                    // An idle keep-alive connection the server had already closed: not the
                    // request's fault, so it goes again on a new connection.
                    if reused && failure.nothing_received {
                        started = Instant::now();
                        continue;
                    }
                    return Ended::failed(failure.kind, failure.message, bytes_out);
                }
                None => {
                    self.close(target, false);
                    let message = format!("no complete response within {:?}", job.request_timeout);
                    return Ended::failed(ErrorKind::Timeout, message, bytes_out);
                }
            }
        }
    }

    /// The exchange over HTTP/2 (h2send.rs); None when ALPN chose HTTP/1.1 for an `auto` target.
    async fn send_h2(
        &mut self,
        target: usize,
        exchange: &mut Exchange<'_>,
        slot: usize,
        started: Instant,
    ) -> Option<Ended> {
        let shared = Rc::clone(&self.shared);
        let lane = self.lane.get_or_insert_with(|| Lane::take(&shared)).index;
        let inspection = exchange.inspection.as_deref_mut();
        let h2 = H2Exchange { target, slot, lane, wire: exchange.wire, head: exchange.head, inspection };
        let timers = (&mut self.connect_timer, &mut self.request_timer);
        let H2Ended { outcome, bytes_in, bytes_out, at } = h2send::send(&shared, h2, started, timers).await?;
        Some(Ended { outcome, bytes_in, bytes_out, at })
    }

    /// Whether the target has a kept-alive connection; if so, it now carries a request of `slot`.
    /// Inlined: it is on every request's path, and was part of `send` before.
    #[inline]
    fn reuse(&mut self, target: usize, slot: usize) -> bool {
        let Some(held) = &mut self.held[target] else {
            return false;
        };
        self.shared.stats.borrow_mut().connection_moved(held.owner, slot);
        held.owner = slot;
        true
    }

    /// Keeps a new connection for the target, carrying a request of `slot`. Inlined, as the
    /// next one: on the path of every request that opens a connection.
    #[inline]
    fn hold(&mut self, target: usize, slot: usize, connection: Connection) {
        self.shared.stats.borrow_mut().connection_opened(slot);
        self.held[target] = Some(Held { connection, owner: slot });
    }

    /// A read buffer for a new connection and, for plain TCP (`reuses_socket`), a socket of
    /// the address's family (see socket.rs): those of closed connections when there are.
    #[inline]
    fn recycled(&mut self, ipv6: bool, reuses_socket: bool) -> (Vec<u8>, Option<Socket>) {
        let buffer = self.spare_buffers.pop().unwrap_or_else(|| vec![0; http::INITIAL_BUFFER_BYTES]);
        let spare = if reuses_socket { self.spare_socket(ipv6) } else { None };
        (buffer, spare)
    }

    /// How a request that got `response` ended; its connection is closed unless kept alive.
    #[inline]
    fn responded(
        &mut self,
        target: usize,
        response: http::Response,
        handshakes: Option<Handshakes>,
        bytes_out: u64,
    ) -> Ended {
        if !(response.reusable && self.shared.job.keep_alive) {
            self.close(target, true);
        }
        let phases = Phases {
            // HTTP/1.1: the connection is this driver's own; the wait for it is the open
            // model's, added by `queued_since`.
            queueing: Duration::ZERO,
            connect: handshakes.map(|h| h.connect),
            tls: handshakes.and_then(|h| h.tls),
            waiting: response.waiting,
            receiving: response.receiving,
        };
        let outcome = Outcome::Response { status: response.status, phases };
        Ended { outcome, bytes_in: response.bytes_in, bytes_out, at: Some(response.done) }
    }

    /// `ended`: the last response was read to its end and nothing more goes over the connection.
    fn close(&mut self, target: usize, ended: bool) {
        if let Some(held) = self.held[target].take() {
            self.shared.stats.borrow_mut().connection_closed(held.owner);
            let (buffer, socket) = held.connection.close(ended);
            self.spare_buffers.push(buffer);
            self.spare_sockets.extend(socket);
        }
    }

    fn spare_socket(&mut self, ipv6: bool) -> Option<Socket> {
        let index = self.spare_sockets.iter().position(|s| s.is_ipv6() == ipv6)?;
        Some(self.spare_sockets.swap_remove(index))
    }
}

/// Records how a journey request ended; a response judged first (its jar, variables and
/// checks). Returns what its user does next.
fn record_journey(
    shared: &Shared,
    (request, slot): (usize, usize),
    Ended { outcome, bytes_in, bytes_out, .. }: Ended,
    mut seen: Seen<'_>,
    inspection: &Inspection,
    user: &mut UserState,
) -> OnFail {
    let (journeys, journey) = shared.job.journey(request).expect("a journey request");
    let mut stats = shared.stats.borrow_mut();
    let mut judged = Judged { failed: false, then: OnFail::Continue };
    if let Outcome::Response { status, .. } = outcome {
        seen.status = status;
        judged = judge(journeys, journey, seen, inspection, user, &mut stats, slot);
    }
    stats.record_judged(slot, outcome, (seen.latency_us, bytes_in, bytes_out), judged.failed);
    judged.then
}
