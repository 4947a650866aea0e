//! One request over HTTP/2: the driver's lane picks the connection (h2pool.rs), which the
//! request opens if it is the first; the request's HTTP/1.1 rendering (the one the static and
//! the journey paths build) becomes the stream's header fields and body; the response is read
//! to its end and dropped, as on HTTP/1.1. Failures become error kinds (h2error.rs); a request
//! the server never processed (REFUSED_STREAM, above a GOAWAY's last stream id, or never sent
//! on a connection going away) goes once more, on a new connection if it must.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;

use crate::capture::Inspection;
use crate::failure::Failure;
use crate::h2conn::{open, Opened};
use crate::h2error::{h2_failure, Unprocessed};
use crate::h2live::Live;
use crate::h2pool::Slot;
use crate::h2request::Converted;
use crate::phases::Phases;
use crate::shared::Shared;
use crate::stats::Outcome;
use crate::timer::Timer;
use crate::wire::pb::ErrorKind;

/// What one request asks of an HTTP/2 connection.
pub struct H2Exchange<'a> {
    pub target: usize,
    pub slot: usize,
    pub lane: usize,
    pub wire: &'a [u8],
    pub head: bool,
    pub inspection: Option<&'a mut Inspection>,
}

/// How an HTTP/2 request ended (conns.rs records it like an HTTP/1.1 one).
pub struct H2Ended {
    pub outcome: Outcome,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// When the response's last byte came; None without a response.
    pub at: Option<Instant>,
}

impl H2Ended {
    fn failed(failure: Failure, bytes_out: u64) -> Self {
        let outcome = Outcome::Failed { kind: failure.kind, message: failure.message };
        H2Ended { outcome, bytes_in: 0, bytes_out, at: None }
    }
}

/// Sends the request from `started`; None when the target is `auto` and ALPN chose HTTP/1.1
/// (the caller sends it the HTTP/1.1 way).
pub async fn send(
    shared: &Rc<Shared>,
    mut exchange: H2Exchange<'_>,
    started: Instant,
    (connect_timer, request_timer): (&mut Timer, &mut Timer),
) -> Option<H2Ended> {
    let https = shared.job.targets[exchange.target].tls.is_some();
    let converted = match shared.h2.conversions.convert(exchange.target, exchange.wire, https) {
        Ok(converted) => converted,
        Err(message) => return Some(H2Ended::failed(Failure::new(ErrorKind::Template, message), 0)),
    };
    let bytes_out = exchange.wire.len() as u64;
    // At most two tries: the second only for a request the server never processed.
    let mut tried = false;
    loop {
        let slot = shared.h2.slot(exchange.target, exchange.lane);
        let attempt_at = Instant::now();
        let (live, handshakes) = match connection(shared, &exchange, &slot, started, connect_timer).await {
            Ok(Some(pair)) => pair,
            Ok(None) => return None,
            Err(failure) => {
                tokio::task::yield_now().await;
                return Some(H2Ended::failed(failure, 0));
            }
        };
        let from = Instant::now();
        // Waiting for a lane-mate to open the connection is queueing; opening it oneself is
        // connect and TLS.
        let for_connection = if handshakes.is_none() { from - attempt_at } else { Duration::ZERO };
        let gauge = (&**shared, exchange.slot);
        let sent = stream(live.send.clone(), &converted, exchange.head, exchange.inspection.as_deref_mut(), gauge);
        let result = match request_timer.run(from, sent).await {
            Some(Ok(response)) => Ok(response),
            Some(Err(Attempt { error, sent })) => Err(h2_failure(&error, &live.sniff, sent)),
            None => Err((
                Failure::new(ErrorKind::Timeout, format!("no complete response within {:?}", request_timer.timeout())),
                None,
            )),
        };
        match result {
            Ok(mut response) => {
                response.queued += for_connection;
                return Some(responded(response, handshakes, bytes_out));
            }
            Err((failure, unprocessed)) => {
                if unprocessed != Some(Unprocessed::StreamOnly) {
                    shared.h2.discard(exchange.target, &slot);
                }
                if unprocessed.is_some() && !tried {
                    tried = true;
                    continue;
                }
                return Some(H2Ended::failed(failure, bytes_out));
            }
        }
    }
}

/// The lane's connection, opened now if it has none (then with its handshakes); Ok(None):
/// `auto` fell back to HTTP/1.1.
async fn connection<'s>(
    shared: &Rc<Shared>,
    exchange: &H2Exchange<'_>,
    slot: &'s Slot,
    started: Instant,
    timer: &mut Timer,
) -> Result<Option<(&'s Live, Option<crate::dial::Handshakes>)>, Failure> {
    if let Some(live) = slot.get() {
        return Ok(Some((live, None)));
    }
    let (mut opened, mut fell_back) = (None, false);
    let (opened_now, fell_back_now) = (&mut opened, &mut fell_back);
    let (target, slot_index) = (exchange.target, exchange.slot);
    let init = move || async move {
        match open(shared, target, slot_index, started, timer).await? {
            Opened::H2(live, handshakes) => {
                *opened_now = Some(handshakes);
                Ok(live)
            }
            Opened::Http1 => {
                *fell_back_now = true;
                Err(Failure::new(ErrorKind::Other, "ALPN chose HTTP/1.1"))
            }
        }
    };
    match slot.get_or_try_init(init).await {
        Ok(live) => Ok(Some((live, opened))),
        Err(_) if fell_back => Ok(None),
        Err(failure) => Err(failure),
    }
}

/// A response read to its end.
struct Received {
    status: u16,
    bytes_in: u64,
    /// Waiting for a stream the connection allows (max_streams, the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS), and for a connection a lane-mate opened.
    queued: Duration,
    waiting: Duration,
    receiving: Duration,
    done: Instant,
}

/// Why a stream failed, and whether its request had gone out.
struct Attempt {
    error: h2::Error,
    sent: bool,
}

/// One of our HTTP/2 streams, counted open (IntervalStats.active_streams) while this lives:
/// from when the connection let it go out until its response ended, failed or timed out.
struct OpenStream<'a> {
    shared: &'a Shared,
    slot: usize,
}

impl<'a> OpenStream<'a> {
    fn count((shared, slot): (&'a Shared, usize)) -> Self {
        shared.stats.borrow_mut().stream_opened(slot);
        OpenStream { shared, slot }
    }
}

impl Drop for OpenStream<'_> {
    fn drop(&mut self) {
        self.shared.stats.borrow_mut().stream_closed(self.slot);
    }
}

async fn stream(
    send: SendRequest<Bytes>,
    converted: &Converted,
    head: bool,
    mut inspection: Option<&mut Inspection>,
    gauge: (&Shared, usize),
) -> Result<Received, Attempt> {
    let unsent = |error| Attempt { error, sent: false };
    // At once: a fresh clone of the connection's handle has no stream of its own pending.
    let mut send = send.ready().await.map_err(unsent)?;
    let queued_at = Instant::now();
    let end_of_stream = converted.body.is_empty();
    let (response, mut body_stream) = send.send_request(converted.request.clone(), end_of_stream).map_err(unsent)?;
    if !end_of_stream {
        body_stream.send_data(converted.body.clone(), true).map_err(unsent)?;
    }
    // A stream beyond what the connection allows waits in the h2 crate's queue until another
    // ends; `ready` returns when this one has left it. It returns at once when the stream did
    // not fill the connection (the crate's `is_full`, against the streams open now): requests
    // that come together on a connection with room for fewer than all of them count the wait
    // of those beyond it in `waiting`, until the connection is full (then every wait is seen).
    let _send = send.ready().await.map_err(unsent)?;
    let _open = OpenStream::count(gauge);
    let written = Instant::now();
    let queued = written - queued_at;
    let sent = |error| Attempt { error, sent: true };
    let response = response.await.map_err(sent)?;
    let first = Instant::now();
    let status = response.status().as_u16();
    let mut bytes_in = crate::h2request::head_bytes(&response);
    if let Some(inspection) = inspection.as_deref_mut() {
        inspection.keep_head(&crate::h2request::http1_head(&response));
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(sent)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes_in += chunk.len() as u64;
        if let (Some(inspection), false) = (inspection.as_deref_mut(), head) {
            inspection.keep_body(&chunk);
        }
    }
    let done = Instant::now();
    Ok(Received { status, bytes_in, queued, waiting: first - written, receiving: done - first, done })
}

fn responded(received: Received, handshakes: Option<crate::dial::Handshakes>, bytes_out: u64) -> H2Ended {
    let phases = Phases {
        connect: handshakes.map(|h| h.connect),
        tls: handshakes.and_then(|h| h.tls),
        queueing: received.queued,
        waiting: received.waiting,
        receiving: received.receiving,
    };
    H2Ended {
        outcome: Outcome::Response { status: received.status, phases },
        bytes_in: received.bytes_in,
        bytes_out,
        at: Some(received.done),
    }
}
