//! A minimal HTTP/1.1 client connection. Hand-written on httparse rather than a full
//! client library because the engine must count every byte on the wire (status line
//! and headers included) and never store a body; and because a load generator's cost
//! per request is the product.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use crate::capture::Inspection;
use crate::dial::{dial, Stream};
use crate::failure::Failure;
use crate::head::{self, Body, RecentHead};
use crate::reactor::Reactor;
use crate::socket::Socket;
use crate::timer::Timer;
use crate::wire::pb::ErrorKind;

/// A connection's read buffer starts small (most responses' headers and many bodies fit)
/// and grows only for response headers that do not fit, up to MAX_HEAD_BYTES: memory is
/// what limits how many connections one engine can hold open.
pub const INITIAL_BUFFER_BYTES: usize = 8 * 1024;
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Size of the engine's one buffer that bodies are read into and dropped: a 30 KB body takes
/// one read instead of four into a connection's 8 KiB buffer.
pub const DISCARD_BUFFER_BYTES: usize = 64 * 1024;

#[derive(Debug, PartialEq)]
pub struct Response {
    pub status: u16,
    /// Status line, headers and body, as received.
    pub bytes_in: u64,
    /// The connection can carry another request.
    pub reusable: bool,
    /// From the request fully written to the first response byte read, and from there to the last.
    pub waiting: Duration,
    pub receiving: Duration,
    /// When the last byte was read (the end of the read that brought it).
    pub done: Instant,
}

pub use crate::dial::{Handshakes, Tls};

/// Connects (dial.rs) and wraps the stream in a Connection reading into `buffer` (recycled
/// from a closed connection, or new).
pub async fn connect(
    addr: SocketAddr,
    started: Instant,
    timer: &mut Timer,
    tls: Option<&Tls>,
    buffer: Vec<u8>,
    reactor: &Rc<Reactor>,
    spare: Option<Socket>,
) -> Result<(Connection, Handshakes), Failure> {
    let (stream, handshakes) = dial(addr, started, timer, tls, reactor, spare).await?;
    Ok((
        Connection { stream, buf: buffer, start: 0, end: 0, received: 0, received_in_all: 0, read_at: None },
        handshakes,
    ))
}

pub struct Connection {
    stream: Stream,
    buf: Vec<u8>,
    /// Unconsumed received bytes are buf[start..end].
    start: usize,
    end: usize,
    /// Bytes received during the current exchange, and over the connection's life.
    received: u64,
    received_in_all: u64,
    /// When the current exchange read its first and its latest bytes.
    read_at: Option<ReadTimes>,
}

#[derive(Clone, Copy)]
struct ReadTimes {
    first: Instant,
    last: Instant,
}

impl Connection {
    /// Sends one request and reads its whole response, discarding the body: what is not in the
    /// connection's buffer already is read into `discard`, which every connection of the engine
    /// shares (it is only borrowed during a read, never across a wait). `recent`: the last head
    /// read for this request and target, by any connection. `inspection` (journey requests
    /// only; None on the static path): where the head and, if it asks, the body are kept.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        recent: &RefCell<RecentHead>,
        discard: &RefCell<Vec<u8>>,
        mut inspection: Option<&mut Inspection>,
    ) -> Result<Response, Failure> {
        (self.received, self.read_at) = (0, None);
        if let Err(e) = self.stream.write_all(request).await {
            return Err(Failure { nothing_received: true, ..io_failure("sending the request", &e) });
        }
        let written = Instant::now();
        let head::Head { status, body, mut reusable, .. } = loop {
            let head = self.read_head(head_request, recent).await?;
            if let Some(inspection) = inspection.as_deref_mut() {
                // Before the body's reads, which reuse the buffer.
                inspection.keep_head(&self.buf[self.start..self.start + head.length]);
            }
            self.start += head.length;
            // An interim 1xx (100 Continue) is followed by the real response.
            if !(100..200).contains(&head.status) || head.status == 101 {
                break head;
            }
        };
        match body {
            Body::None => {}
            Body::Length(n) => self.skip(n, discard, inspection).await?,
            Body::Chunked => self.skip_chunked(discard, inspection).await?,
            Body::UntilClose => {
                self.skip_to_close(discard, inspection).await?;
                reusable = false;
            }
        }
        // We never pipeline: bytes beyond the response mean the framing went wrong.
        reusable &= self.start == self.end;
        // Every response has bytes of this exchange (a reused connection starts with none left).
        let read = self.read_at.unwrap_or(ReadTimes { first: written, last: written });
        Ok(Response {
            status,
            bytes_in: self.received,
            reusable,
            waiting: read.first - written,
            receiving: read.last - read.first,
            done: read.last,
        })
    }

    /// Reads until the buffer holds the whole status line and headers.
    async fn read_head(&mut self, head_request: bool, recent: &RefCell<RecentHead>) -> Result<head::Head, Failure> {
        loop {
            // A new exchange starts with an empty buffer: nothing to parse before the first read.
            if self.start < self.end {
                if let Some(head) = recent.borrow_mut().read(&self.buf[self.start..self.end], head_request)? {
                    return Ok(head);
                }
            }
            if self.start == 0 && self.end == self.buf.len() && !self.grow() {
                return Err(Failure::new(
                    ErrorKind::Protocol,
                    format!("response headers larger than {MAX_HEAD_BYTES} bytes"),
                ));
            }
            self.fill("the response headers").await?;
        }
    }

    /// Closes the connection: its read buffer for the next connection to reuse, and its socket
    /// too if `ended` (its last response was read to the end and the server closes the
    /// connection) and the socket can be reused (see `Socket::finish`).
    pub fn close(self, ended: bool) -> (Vec<u8>, Option<Socket>) {
        let socket = match self.stream {
            Stream::Plain(socket) if ended => socket.finish(self.received_in_all),
            _ => None,
        };
        (self.buf, socket)
    }

    /// Doubles a full buffer, up to MAX_HEAD_BYTES; false if it may not grow.
    fn grow(&mut self) -> bool {
        if self.buf.len() >= MAX_HEAD_BYTES {
            return false;
        }
        let size = (self.buf.len() * 2).min(MAX_HEAD_BYTES);
        self.buf.resize(size, 0);
        true
    }

    /// Reads more bytes into the buffer (after moving unconsumed bytes to its front).
    async fn fill(&mut self, waiting_for: &str) -> Result<(), Failure> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        match self.stream.read(&mut self.buf[self.end..]).await {
            Ok(0) => Err(Failure {
                nothing_received: self.received == 0,
                ..Failure::new(ErrorKind::Reset, format!("connection closed by the server while reading {waiting_for}"))
            }),
            Ok(n) => {
                self.end += n;
                self.count_received(n);
                Ok(())
            }
            Err(e) => Err(Failure { nothing_received: self.received == 0, ..io_failure(waiting_for, &e) }),
        }
    }

    /// Counts the bytes of a read and notes its time: the first read's is the first byte's, the
    /// latest read's the last byte's once the response is complete (one clock reading per read,
    /// so a response that arrives in one read costs one).
    fn count_received(&mut self, n: usize) {
        let now = Instant::now();
        match &mut self.read_at {
            Some(read) => read.last = now,
            None => self.read_at = Some(ReadTimes { first: now, last: now }),
        }
        self.received += n as u64;
        self.received_in_all += n as u64;
    }

    /// Drops `remaining` body bytes: those buffered, then the rest read into `discard`; each
    /// passed to `capture` first, if there is one.
    async fn skip(
        &mut self,
        mut remaining: u64,
        discard: &RefCell<Vec<u8>>,
        mut capture: Option<&mut Inspection>,
    ) -> Result<(), Failure> {
        let buffered = ((self.end - self.start) as u64).min(remaining);
        if let Some(capture) = capture.as_deref_mut() {
            capture.keep_body(&self.buf[self.start..self.start + buffered as usize]);
        }
        self.start += buffered as usize;
        remaining -= buffered;
        while remaining > 0 {
            // One byte more than the body: a read that comes back short then shows the socket
            // drained (see Socket::poll_read), and the byte after the body, if any (the next
            // chunk's size, or a server's excess), goes back into the connection's buffer.
            let limit = usize::try_from(remaining + 1).unwrap_or(usize::MAX);
            let (n, after) = self.read_into(discard, limit, "the response body").await?;
            if let Some(capture) = capture.as_deref_mut() {
                capture.keep_body(&discard.borrow()[..n]);
            }
            if n == 0 {
                let message = "connection closed by the server while reading the response body";
                return Err(Failure::new(ErrorKind::Reset, message));
            }
            match after {
                Some(byte) => {
                    (self.start, self.end) = (0, 1);
                    self.buf[0] = byte;
                    remaining = 0;
                }
                None => remaining -= n as u64,
            }
        }
        Ok(())
    }

    /// One read into `discard` of at most `limit` bytes (all buffered bytes consumed): the bytes
    /// read before byte number `limit`, and that byte if the read reached it.
    async fn read_into(
        &mut self,
        discard: &RefCell<Vec<u8>>,
        limit: usize,
        waiting_for: &str,
    ) -> Result<(usize, Option<u8>), Failure> {
        debug_assert_eq!(self.start, self.end);
        (self.start, self.end) = (0, 0);
        let read = std::future::poll_fn(|cx| {
            let mut scratch = discard.borrow_mut();
            let length = limit.min(scratch.len());
            let mut buf = ReadBuf::new(&mut scratch[..length]);
            std::task::ready!(Pin::new(&mut self.stream).poll_read(cx, &mut buf))?;
            let n = buf.filled().len();
            Poll::Ready(Ok::<_, io::Error>((n, (n == limit).then(|| scratch[n - 1]))))
        })
        .await;
        match read {
            Ok((n, after)) => {
                self.count_received(n);
                Ok((n - usize::from(after.is_some()), after))
            }
            Err(e) => Err(io_failure(waiting_for, &e)),
        }
    }

    async fn skip_chunked(
        &mut self,
        discard: &RefCell<Vec<u8>>,
        mut capture: Option<&mut Inspection>,
    ) -> Result<(), Failure> {
        loop {
            let line = self.read_line().await?;
            let digits = line.split(|&b| b == b';').next().unwrap_or_default();
            let size = std::str::from_utf8(digits)
                .ok()
                .and_then(|d| u64::from_str_radix(d.trim(), 16).ok())
                .ok_or_else(|| Failure::new(ErrorKind::Protocol, "invalid chunk size"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok(());
            }
            self.skip(size, discard, capture.as_deref_mut()).await?;
            if !self.read_line().await?.is_empty() {
                return Err(Failure::new(ErrorKind::Protocol, "chunk not followed by CRLF"));
            }
        }
    }

    /// The next line without its CRLF (copied: lines here are short).
    async fn read_line(&mut self) -> Result<Vec<u8>, Failure> {
        loop {
            if let Some(at) = self.buf[self.start..self.end].windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[self.start..self.start + at].to_vec();
                self.start += at + 2;
                return Ok(line);
            }
            if self.start == 0 && self.end == self.buf.len() && !self.grow() {
                return Err(Failure::new(ErrorKind::Protocol, "chunk header line too long"));
            }
            self.fill("a chunked body").await?;
        }
    }

    async fn skip_to_close(
        &mut self,
        discard: &RefCell<Vec<u8>>,
        mut capture: Option<&mut Inspection>,
    ) -> Result<(), Failure> {
        if let Some(capture) = capture.as_deref_mut() {
            capture.keep_body(&self.buf[self.start..self.end]);
        }
        self.start = self.end;
        loop {
            let (n, _) = self.read_into(discard, usize::MAX, "a body delimited by close").await?;
            if n == 0 {
                return Ok(());
            }
            if let Some(capture) = capture.as_deref_mut() {
                capture.keep_body(&discard.borrow()[..n]);
            }
        }
    }
}

/// The error kind of a broken exchange's I/O error, on HTTP/1.1 and HTTP/2 (h2error.rs) alike.
pub fn io_error_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => ErrorKind::Reset,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Other,
    }
}

fn io_failure(doing: &str, e: &io::Error) -> Failure {
    Failure::new(io_error_kind(e), format!("{doing}: {e}"))
}
