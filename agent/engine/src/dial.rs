//! Opening a connection: TCP through the engine's reactor, or TCP then TLS through tokio's,
//! each bounded by the request's timer, and a failure named by its kind (refused, timed out,
//! the generator's own ports or descriptors). http.rs speaks HTTP/1.1 on what this opens.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::failure::Failure;
use crate::reactor::Reactor;
use crate::socket::Socket;
use crate::timer::Timer;
use crate::wire::pb::ErrorKind;

/// How long opening a connection took: the TCP handshake, then the TLS one (https).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handshakes {
    pub connect: Duration,
    pub tls: Option<Duration>,
}

/// What an https target needs for the handshake.
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// Connects (TCP, then TLS for https) from `started` (now); `timer`'s timeout bounds each of
/// the two. Plain TCP goes through the engine's reactor on `spare` (a socket a closed connection
/// left, see `socket.rs`) or a new socket; https through tokio's.
pub async fn dial(
    addr: SocketAddr,
    started: Instant,
    timer: &mut Timer,
    tls: Option<&Tls>,
    reactor: &Rc<Reactor>,
    spare: Option<Socket>,
) -> Result<(Stream, Handshakes), Failure> {
    Ok(match tls {
        None => {
            let socket = Socket::connect(reactor, addr, spare).map_err(|e| connect_failure(addr, e))?;
            match timer.run(started, socket.connected()).await {
                None => return Err(no_answer(addr, timer.timeout())),
                Some(Err(e)) => return Err(connect_failure(addr, e)),
                Some(Ok(())) => (Stream::Plain(socket), Handshakes { connect: started.elapsed(), tls: None }),
            }
        }
        // Boxed: a TLS handshake's future is large, and it would otherwise make every request's
        // future (moved once per request) as large.
        Some(tls) => Box::pin(connect_tls(addr, timer, tls, started)).await?,
    })
}

async fn connect_tls(
    addr: SocketAddr,
    timer: &mut Timer,
    tls: &Tls,
    started: Instant,
) -> Result<(Stream, Handshakes), Failure> {
    let timeout = timer.timeout();
    let stream = match timer.run(started, TcpStream::connect(addr)).await {
        None => return Err(no_answer(addr, timeout)),
        Some(Err(e)) => return Err(connect_failure(addr, e)),
        Some(Ok(stream)) => stream,
    };
    let connected = Instant::now();
    // The handshake's messages are written whole; Nagle would only delay them.
    stream.set_nodelay(true).map_err(|e| Failure::new(ErrorKind::Other, format!("set TCP_NODELAY: {e}")))?;
    let handshake = TlsConnector::from(Arc::clone(&tls.config)).connect(tls.server_name.clone(), stream);
    match timer.run(connected, handshake).await {
        None => Err(Failure::new(ErrorKind::Tls, format!("TLS handshake with {addr}: no answer within {timeout:?}"))),
        Some(Err(e)) => Err(Failure::new(ErrorKind::Tls, format!("TLS handshake with {addr}: {e}"))),
        Some(Ok(stream)) => {
            let handshakes = Handshakes { connect: connected - started, tls: Some(connected.elapsed()) };
            Ok((Stream::Tls(Box::new(stream)), handshakes))
        }
    }
}

fn connect_failure(addr: SocketAddr, e: io::Error) -> Failure {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
        io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => local_exhaustion(&e).unwrap_or(ErrorKind::Other),
    };
    Failure::new(kind, format!("connect to {addr}: {e}"))
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

fn no_answer(addr: SocketAddr, timeout: Duration) -> Failure {
    Failure::new(ErrorKind::ConnectTimeout, format!("connect to {addr}: no answer within {timeout:?}"))
}

/// Plain TCP or TLS; an enum rather than a trait object keeps plain HTTP free of dynamic calls.
pub enum Stream {
    Plain(Socket),
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
