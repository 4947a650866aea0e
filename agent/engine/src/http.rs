//! A minimal HTTP/1.1 client connection. Hand-written on httparse rather than a full
//! client library because the engine must count every byte on the wire (status line
//! and headers included) and never store a body; and because a load generator's cost
//! per request is the product.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::wire::pb::ErrorKind;

/// A connection's read buffer starts small (most responses' headers and many bodies fit)
/// and grows only for response headers that do not fit, up to MAX_HEAD_BYTES: memory is
/// what limits how many connections one engine can hold open.
pub const INITIAL_BUFFER_BYTES: usize = 8 * 1024;
const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

#[derive(Debug)]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
    /// Nothing of a response arrived: on a reused keep-alive connection this is the
    /// server having closed it while idle, and the request may be sent again.
    pub nothing_received: bool,
}

impl Failure {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure { kind, message: message.into(), nothing_received: false }
    }
}

#[derive(Debug, PartialEq)]
pub struct Response {
    pub status: u16,
    /// Status line, headers and body, as received.
    pub bytes_in: u64,
    /// The connection can carry another request.
    pub reusable: bool,
}

/// What an https target needs for the handshake.
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// Connects (TCP, then TLS for https); `timeout` bounds each of the two. `buffer` is the
/// read buffer to use (recycled from a closed connection, or new).
pub async fn connect(addr: SocketAddr, timeout: Duration, tls: Option<&Tls>, buffer: Vec<u8>) -> Result<Connection, Failure> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Err(_) => return Err(Failure::new(ErrorKind::ConnectTimeout, format!("connect to {addr}: no answer within {timeout:?}"))),
        Ok(Err(e)) => {
            let kind = match e.kind() {
                io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
                io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
                _ => local_exhaustion(&e).unwrap_or(ErrorKind::Other),
            };
            return Err(Failure::new(kind, format!("connect to {addr}: {e}")));
        }
        Ok(Ok(stream)) => stream,
    };
    // Requests are written whole; Nagle would only delay them.
    stream.set_nodelay(true).map_err(|e| Failure::new(ErrorKind::Other, format!("set TCP_NODELAY: {e}")))?;
    let stream = match tls {
        None => Stream::Plain(stream),
        Some(tls) => {
            let handshake = TlsConnector::from(Arc::clone(&tls.config)).connect(tls.server_name.clone(), stream);
            match tokio::time::timeout(timeout, handshake).await {
                Err(_) => return Err(Failure::new(ErrorKind::Tls, format!("TLS handshake with {addr}: no answer within {timeout:?}"))),
                Ok(Err(e)) => return Err(Failure::new(ErrorKind::Tls, format!("TLS handshake with {addr}: {e}"))),
                Ok(Ok(stream)) => Stream::Tls(Box::new(stream)),
            }
        }
    };
    Ok(Connection { stream, buf: buffer, start: 0, end: 0, received: 0 })
}

/// Plain TCP or TLS; an enum rather than a trait object keeps plain HTTP free of dynamic calls.
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

pub struct Connection {
    stream: Stream,
    buf: Vec<u8>,
    /// Unconsumed received bytes are buf[start..end].
    start: usize,
    end: usize,
    /// Bytes received during the current exchange.
    received: u64,
}

enum Body {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

impl Connection {
    /// Sends one request and reads its whole response, discarding the body.
    pub async fn exchange(&mut self, request: &[u8], head_request: bool) -> Result<Response, Failure> {
        self.received = 0;
        if let Err(e) = self.stream.write_all(request).await {
            return Err(Failure { nothing_received: true, ..io_failure("sending the request", &e) });
        }
        let (status, body, mut reusable) = loop {
            let (consumed, status, body, reusable) = self.read_head(head_request).await?;
            self.start += consumed;
            // An interim 1xx (100 Continue) is followed by the real response.
            if !(100..200).contains(&status) || status == 101 {
                break (status, body, reusable);
            }
        };
        match body {
            Body::None => {}
            Body::Length(n) => self.skip(n).await?,
            Body::Chunked => self.skip_chunked().await?,
            Body::UntilClose => {
                self.skip_to_close().await?;
                reusable = false;
            }
        }
        // We never pipeline: bytes beyond the response mean the framing went wrong.
        reusable &= self.start == self.end;
        Ok(Response { status, bytes_in: self.received, reusable })
    }

    /// Parses the status line and headers: (bytes consumed, status, body framing, keep-alive).
    async fn read_head(&mut self, head_request: bool) -> Result<(usize, u16, Body, bool), Failure> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(&self.buf[self.start..self.end]) {
                Ok(httparse::Status::Complete(consumed)) => {
                    let status = response.code.unwrap_or(0);
                    let mut body = Body::UntilClose;
                    let mut reusable = response.version == Some(1);
                    for h in response.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let length = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse().ok())
                                .ok_or_else(|| Failure::new(ErrorKind::Protocol, "invalid Content-Length"))?;
                            if !matches!(body, Body::Chunked) {
                                body = Body::Length(length);
                            }
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            if contains_token(h.value, b"chunked") {
                                body = Body::Chunked;
                            }
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            if contains_token(h.value, b"close") {
                                reusable = false;
                            } else if contains_token(h.value, b"keep-alive") {
                                reusable = true;
                            }
                        }
                    }
                    if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
                        body = Body::None;
                    }
                    return Ok((consumed, status, body, reusable));
                }
                Ok(httparse::Status::Partial) => {
                    if self.start == 0 && self.end == self.buf.len() && !self.grow() {
                        return Err(Failure::new(ErrorKind::Protocol, format!("response headers larger than {MAX_HEAD_BYTES} bytes")));
                    }
                    self.fill("the response headers").await?;
                }
                Err(e) => return Err(Failure::new(ErrorKind::Protocol, format!("malformed response: {e}"))),
            }
        }
    }

    /// The read buffer, for the next connection to reuse.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
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
                self.received += n as u64;
                Ok(())
            }
            Err(e) => Err(Failure { nothing_received: self.received == 0, ..io_failure(waiting_for, &e) }),
        }
    }

    async fn skip(&mut self, mut remaining: u64) -> Result<(), Failure> {
        loop {
            let available = (self.end - self.start) as u64;
            let take = available.min(remaining);
            self.start += take as usize;
            remaining -= take;
            if remaining == 0 {
                return Ok(());
            }
            self.fill("the response body").await?;
        }
    }

    async fn skip_chunked(&mut self) -> Result<(), Failure> {
        loop {
            let line = self.read_line().await?;
            let digits = line.split(|&b| b == b';').next().unwrap_or_default();
            let size = std::str::from_utf8(digits).ok().and_then(|d| u64::from_str_radix(d.trim(), 16).ok())
                .ok_or_else(|| Failure::new(ErrorKind::Protocol, "invalid chunk size"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok(());
            }
            self.skip(size).await?;
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

    async fn skip_to_close(&mut self) -> Result<(), Failure> {
        self.start = self.end;
        loop {
            match self.stream.read(&mut self.buf[..]).await {
                Ok(0) => return Ok(()),
                Ok(n) => self.received += n as u64,
                Err(e) => return Err(io_failure("a body delimited by close", &e)),
            }
        }
    }
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

/// A connect that failed for want of the generator's own resources, which says nothing about
/// the target: no ephemeral port left (EADDRNOTAVAIL), no file descriptor (EMFILE, ENFILE).
fn local_exhaustion(e: &io::Error) -> Option<ErrorKind> {
    match e.raw_os_error()? {
        libc::EADDRNOTAVAIL => Some(ErrorKind::LocalPorts),
        libc::EMFILE | libc::ENFILE => Some(ErrorKind::LocalFds),
        _ => None,
    }
}

fn io_failure(doing: &str, e: &io::Error) -> Failure {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => ErrorKind::Reset,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Other,
    };
    Failure::new(kind, format!("{doing}: {e}"))
}
