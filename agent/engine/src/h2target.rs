//! The HTTP version a target is loaded with (job.proto `HttpProtocol`): HTTP/1.1 as before,
//! or HTTP/2 over TLS (ALPN h2), over cleartext by prior knowledge (h2c), or ALPN's choice
//! (auto); and how many streams one HTTP/2 connection carries at once.

use std::cell::Cell;
use std::sync::Arc;

use crate::wire::pb;

/// Streams one HTTP/2 connection carries at once when the plan says nothing: a handful, so
/// that a closed model of 100 clients opens 10 connections rather than 1 (one connection per
/// engine would hide how a server spreads connections over its workers), and far below every
/// common server's SETTINGS_MAX_CONCURRENT_STREAMS (nginx 128, HAProxy 100).
pub const DEFAULT_MAX_STREAMS: u32 = 10;
/// The most a plan may ask for; RFC 9113 suggests servers allow at least 100.
pub const MAX_MAX_STREAMS: u32 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    H2,
    H2c,
    Auto,
}

pub struct H2Target {
    pub protocol: Protocol,
    /// Streams per connection at most (1..=MAX_MAX_STREAMS).
    pub max_streams: u32,
    /// `auto` only: set once the first handshake's ALPN chose (true: h2).
    negotiated_h2: Cell<Option<bool>>,
}

impl H2Target {
    /// The target's protocol and streams; errors start with the field at fault.
    pub fn from_proto(target: &pb::Target, https: bool) -> Result<H2Target, String> {
        let protocol = match pb::HttpProtocol::try_from(target.protocol) {
            Ok(pb::HttpProtocol::Http1) => Protocol::Http1,
            Ok(pb::HttpProtocol::H2) => Protocol::H2,
            Ok(pb::HttpProtocol::H2c) => Protocol::H2c,
            Ok(pb::HttpProtocol::Auto) => Protocol::Auto,
            Err(_) => return Err(format!("protocol: {} is not a protocol this engine knows", target.protocol)),
        };
        match (protocol, https) {
            (Protocol::H2c, true) => {
                return Err(format!("protocol: h2c is HTTP/2 over cleartext TCP; '{}' is https (use h2)", target.url))
            }
            (Protocol::H2 | Protocol::Auto, false) => {
                return Err(format!("protocol: h2 and auto need TLS (ALPN); '{}' is http (use h2c)", target.url))
            }
            _ => {}
        }
        let max_streams = match target.max_streams {
            0 => DEFAULT_MAX_STREAMS,
            n if n > MAX_MAX_STREAMS => return Err(format!("max_streams: {n} is above {MAX_MAX_STREAMS}")),
            n => n,
        };
        Ok(H2Target { protocol, max_streams, negotiated_h2: Cell::new(None) })
    }

    /// Whether requests go over HTTP/2 (for `auto`, until its first handshake: yes).
    #[inline]
    pub fn speaks_h2(&self) -> bool {
        match self.protocol {
            Protocol::Http1 => false,
            Protocol::H2 | Protocol::H2c => true,
            Protocol::Auto => self.negotiated_h2.get().unwrap_or(true),
        }
    }

    /// `auto`: what ALPN chose, kept for every later request.
    pub fn negotiated(&self, h2: bool) {
        self.negotiated_h2.set(Some(h2));
    }

    /// The handshake's configuration: the job's, with ALPN's offer for h2 and auto.
    pub fn tls_config(&self, config: &Arc<rustls::ClientConfig>) -> Arc<rustls::ClientConfig> {
        let alpn: &[&[u8]] = match self.protocol {
            Protocol::Http1 | Protocol::H2c => return Arc::clone(config),
            Protocol::H2 => &[b"h2"],
            Protocol::Auto => &[b"h2", b"http/1.1"],
        };
        let mut config = (**config).clone();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str, protocol: pb::HttpProtocol, max_streams: u32) -> pb::Target {
        pb::Target { url: url.into(), weight: 1, protocol: protocol.into(), max_streams, ..Default::default() }
    }

    #[test]
    fn protocols_match_their_scheme_and_streams_are_bounded() {
        use pb::HttpProtocol::*;
        let ok = |url, p, n| H2Target::from_proto(&target(url, p, n), url.starts_with("https"));
        assert_eq!(ok("http://a", Http1, 0).unwrap().max_streams, DEFAULT_MAX_STREAMS);
        assert!(!ok("http://a", Http1, 0).unwrap().speaks_h2());
        assert!(ok("http://a", H2c, 5).unwrap().speaks_h2());
        assert_eq!(ok("https://a", H2, 1000).unwrap().max_streams, 1000);
        let err = ok("https://a", H2c, 0).err().unwrap();
        assert!(err.starts_with("protocol: h2c") && err.contains("https://a"), "{err}");
        assert!(ok("http://a", H2, 0).err().unwrap().starts_with("protocol: h2 and auto need TLS"));
        assert!(ok("http://a", Auto, 0).is_err());
        assert_eq!(ok("https://a", H2, 1001).err().unwrap(), "max_streams: 1001 is above 1000");
    }

    #[test]
    fn auto_follows_alpn_and_offers_both() {
        let auto = H2Target::from_proto(&target("https://a", pb::HttpProtocol::Auto, 0), true).unwrap();
        assert!(auto.speaks_h2());
        auto.negotiated(false);
        assert!(!auto.speaks_h2());
        let config = auto.tls_config(&crate::tls::client_config(false));
        assert_eq!(config.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
    }
}
