//! Opening an HTTP/2 connection with hyperium's `h2` crate (no framing of our own): TCP or
//! TCP+TLS through dial.rs, ALPN's answer checked, the client handshake, and the connection's
//! task spawned on the engine's LocalSet. What a server that does not speak HTTP/2 answers is
//! noted (`Sniff`), so that its failure says why rather than "protocol error".

use std::io;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::dial::{dial, Handshakes, Stream};
use crate::failure::Failure;
use crate::h2live::{Live, Sniff};
use crate::h2target::Protocol;
use crate::shared::Shared;
use crate::timer::Timer;
use crate::wire::pb::ErrorKind;

/// Flow-control windows we grant the server: per stream, and for the whole connection. They
/// bound what the h2 crate may buffer for us (we read every DATA frame as it comes); larger
/// than the RFC's 64 KiB default so that a body of a few hundred KB is not paced by our
/// WINDOW_UPDATEs.
const STREAM_WINDOW_BYTES: u32 = 1 << 20;
const CONNECTION_WINDOW_BYTES: u32 = 16 << 20;

pub enum Opened {
    H2(Live, Handshakes),
    /// `auto`: ALPN chose HTTP/1.1; the request goes the HTTP/1.1 way.
    Http1,
}

/// Connects to target `target` and starts HTTP/2 on it; its connection is counted under
/// `slot` until it ends.
pub async fn open(
    shared: &Rc<Shared>,
    target: usize,
    slot: usize,
    started: Instant,
    timer: &mut Timer,
) -> Result<Opened, Failure> {
    let spec = &shared.job.targets[target];
    let addr = spec.next_addr();
    let (stream, handshakes) = dial(addr, started, timer, spec.tls.as_ref(), &shared.reactor, None).await?;
    if let Stream::Tls(tls) = &stream {
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        match spec.h2.protocol {
            Protocol::Auto => spec.h2.negotiated(h2),
            Protocol::H2 if !h2 => {
                let message = format!(
                    "TLS to {addr}: the server did not select h2 by ALPN, so it does not speak HTTP/2 there \
                     (targets.protocol h2; auto falls back to HTTP/1.1)"
                );
                return Err(Failure::new(ErrorKind::H2Protocol, message));
            }
            _ => {}
        }
        if !h2 {
            return Ok(Opened::Http1);
        }
    }
    let sniff = Rc::new(Sniff::default());
    let io = Sniffed { inner: stream, sniff: Rc::clone(&sniff) };
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(STREAM_WINDOW_BYTES).initial_connection_window_size(CONNECTION_WINDOW_BYTES);
    let handshake = builder.handshake::<_, Bytes>(io);
    let (send, connection) = match timer.run(started, handshake).await {
        None => {
            return Err(Failure::new(ErrorKind::ConnectTimeout, format!("HTTP/2 handshake with {addr}: no answer")))
        }
        Some(Err(e)) => return Err(Failure::new(ErrorKind::H2Protocol, format!("HTTP/2 handshake with {addr}: {e}"))),
        Some(Ok(pair)) => pair,
    };
    shared.stats.borrow_mut().connection_opened(slot);
    // The task holds the job's state weakly: the pool (in Shared) holds the connection's
    // SendRequest, and a strong reference back would keep both alive for ever.
    let weak: Weak<Shared> = Rc::downgrade(shared);
    tokio::task::spawn_local(async move {
        // Its error, if any, reaches every stream in progress: they record it.
        let _ = connection.await;
        if let Some(shared) = weak.upgrade() {
            shared.stats.borrow_mut().connection_closed(slot);
        }
    });
    Ok(Opened::H2(Live { send, sniff }, handshakes))
}

/// The connection's stream, its first bytes read noted.
struct Sniffed {
    inner: Stream,
    sniff: Rc<Sniff>,
}

impl AsyncRead for Sniffed {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        // Only the first five bytes are kept (a comparison per read after them).
        this.sniff.note(&buf.filled()[before..]);
        polled
    }
}

impl AsyncWrite for Sniffed {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_answer_is_recognised_across_reads() {
        let sniff = Sniff::default();
        sniff.note(b"HT");
        assert!(!sniff.answered_http1());
        sniff.note(b"TP/1.1 400 Bad Request");
        assert!(sniff.answered_http1());
        let h2 = Sniff::default();
        h2.note(&[0, 0, 18, 4, 0, 0]);
        assert!(!h2.answered_http1());
    }
}
