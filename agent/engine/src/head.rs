//! A response's head (status line and headers), read with httparse: what the engine needs of
//! it, which is the status, how the body is framed and whether the connection can carry
//! another request.

use std::mem::MaybeUninit;

use crate::failure::Failure;
use crate::wire::pb::ErrorKind;

const MAX_HEADERS: usize = 64;

/// How the body that follows a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head, its final empty line included.
    pub length: usize,
    pub status: u16,
    pub body: Body,
    /// The connection may carry another request once the body is read.
    pub reusable: bool,
}

/// The head at the start of `buf`, if `buf` holds all of it. `head_request`: the response to a
/// HEAD request, which has no body whatever its headers say. Headers are read in order: a later
/// Content-Length replaces an earlier one, chunked wins over any length, and `Connection`
/// overrides the version's default.
fn parse(buf: &[u8], head_request: bool) -> Result<Option<Head>, Failure> {
    // Uninitialised: zeroing 64 headers (2 KiB) per response is work for nothing.
    let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let length =
        match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut response, buf, &mut headers) {
            Ok(httparse::Status::Complete(length)) => length,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(Failure::new(ErrorKind::Protocol, format!("malformed response: {e}"))),
        };
    let status = response.code.unwrap_or(0);
    let mut body = Body::UntilClose;
    let mut reusable = response.version == Some(1);
    // Every response's headers go through this loop: names are told apart by length first.
    for h in response.headers.iter() {
        match h.name.len() {
            14 if h.name.eq_ignore_ascii_case("content-length") => {
                let length =
                    parse_length(h.value).ok_or_else(|| Failure::new(ErrorKind::Protocol, "invalid Content-Length"))?;
                if body != Body::Chunked {
                    body = Body::Length(length);
                }
            }
            17 if h.name.eq_ignore_ascii_case("transfer-encoding") && contains_token(h.value, b"chunked") => {
                body = Body::Chunked;
            }
            10 if h.name.eq_ignore_ascii_case("connection") => {
                if contains_token(h.value, b"close") {
                    reusable = false;
                } else if contains_token(h.value, b"keep-alive") {
                    reusable = true;
                }
            }
            _ => {}
        }
    }
    if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        body = Body::None;
    }
    Ok(Some(Head { length, status, body, reusable }))
}

/// Heads longer than this are parsed every time rather than remembered.
const MAX_REMEMBERED_BYTES: usize = 1024;

/// The last head read for one (target, request): a server answers the same request with the
/// same head, but for a Date header that changes once a second, and comparing its ~250 bytes
/// with the next response's costs a twentieth of parsing them (httparse took half of the
/// engine's user-space instructions per keep-alive request). A response whose first bytes are
/// the remembered head has that head: the head ends at its empty line, so nothing after it
/// can change what it says. Anything else is parsed, and remembered in turn.
#[derive(Default)]
pub struct RecentHead {
    bytes: Vec<u8>,
    head: Option<Head>,
}

impl RecentHead {
    /// What `parse` says of `buf`. `head_request` must be the same at every call (it is a
    /// property of the request).
    pub fn read(&mut self, buf: &[u8], head_request: bool) -> Result<Option<Head>, Failure> {
        if let Some(head) = self.head {
            if buf.starts_with(&self.bytes) {
                return Ok(Some(head));
            }
        }
        let parsed = parse(buf, head_request)?;
        if let Some(head) = parsed.filter(|head| head.length <= MAX_REMEMBERED_BYTES) {
            self.bytes.clear();
            self.bytes.extend_from_slice(&buf[..head.length]);
            self.head = Some(head);
        }
        Ok(parsed)
    }
}

/// Whether a header value lists `token` (comma-separated, case-insensitive).
fn contains_token(value: &[u8], token: &[u8]) -> bool {
    // The usual value is the token alone.
    value.eq_ignore_ascii_case(token)
        || value.split(|&b| b == b',').any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

/// A Content-Length value: decimal digits, optionally surrounded by blanks.
fn parse_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_read_as_http_defines_them() {
        assert_eq!(parse_length(b"1024"), Some(1024));
        assert_eq!(parse_length(b" 7 "), Some(7));
        for bad in [&b""[..], b" ", b"-1", b"1e3", b"12 3", b"99999999999999999999999"] {
            assert_eq!(parse_length(bad), None, "{bad:?}");
        }
        assert!(contains_token(b"Keep-Alive", b"keep-alive"));
        assert!(contains_token(b"upgrade, close", b"close"));
        assert!(!contains_token(b"closed", b"close"));
    }

    #[test]
    fn a_head_gives_status_framing_and_reuse() {
        // (status, body, reusable), None while incomplete, or the failure's message.
        type Reading = Result<Option<(u16, Body, bool)>, &'static str>;
        let cases: [(&[u8], bool, Reading); 10] = [
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
                false,
                Ok(Some((200, Body::Length(5), true))),
            ),
            (
                b"HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\nContent-Length: 5\r\n\r\n",
                false,
                Ok(Some((200, Body::Length(5), false))),
            ),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", false, Ok(Some((200, Body::Length(5), false)))),
            (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", false, Ok(Some((200, Body::UntilClose, true)))),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
                false,
                Ok(Some((200, Body::Chunked, true))),
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true, Ok(Some((200, Body::None, true)))),
            (b"HTTP/1.1 204 No Content\r\n\r\n", false, Ok(Some((204, Body::None, true)))),
            (b"HTTP/1.1 200 OK\r\nContent-Len", false, Ok(None)),
            (b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", false, Err("invalid Content-Length")),
            (b"HTTP/9.9 200 OK\r\n\r\n", false, Err("malformed response: invalid HTTP version")),
        ];
        for (buf, head_request, expected) in cases {
            let read = parse(buf, head_request).map(|h| h.map(|h| (h.status, h.body, h.reusable)));
            assert_eq!(
                read.map_err(|f| f.message),
                expected.map_err(String::from),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
        let head = parse(b"HTTP/1.1 200 OK\r\n\r\nbody", false).unwrap().unwrap();
        assert_eq!(head.length, 19, "the head's bytes, not the body's");
    }

    #[test]
    fn a_remembered_head_is_the_parsed_head_of_the_same_bytes() {
        let first: &[u8] = b"HTTP/1.1 200 OK\r\nDate: Fri, 27 Nov 2026 15:00:00 GMT\r\nContent-Length: 3\r\n\r\n";
        let mut recent = RecentHead::default();
        assert_eq!(recent.read(&first[..20], false).unwrap(), None, "incomplete");
        let head = recent.read(&[first, b"abc"].concat(), false).unwrap();
        assert_eq!(head, parse(first, false).unwrap());
        assert_eq!(recent.read(&[first, b"xyz"].concat(), false).unwrap(), head, "the same head, another body");
        assert_eq!(recent.read(&first[..first.len() - 1], false).unwrap(), None, "a prefix is not the head");
        // Any one byte changed is read afresh, and what is read is what parse says.
        for at in 0..first.len() {
            for byte in [b'0', b'9', b'\r', b' ', b'x'] {
                let mut other = first.to_vec();
                other[at] = byte;
                let parsed = parse(&other, false).map_err(|f| f.message);
                assert_eq!(
                    recent.read(&other, false).map_err(|f| f.message),
                    parsed,
                    "{:?}",
                    String::from_utf8_lossy(&other)
                );
                assert_eq!(recent.read(first, false).unwrap(), head);
            }
        }
        let next_second = b"HTTP/1.1 200 OK\r\nDate: Fri, 27 Nov 2026 15:00:01 GMT\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(recent.read(next_second, false).unwrap(), head);
        assert_eq!(recent.bytes, next_second, "the newest head is remembered");
    }

    #[test]
    fn a_long_head_is_not_remembered() {
        let long = format!("HTTP/1.1 200 OK\r\nX-Pad: {}\r\n\r\n", "p".repeat(MAX_REMEMBERED_BYTES));
        let mut recent = RecentHead::default();
        assert!(recent.read(long.as_bytes(), false).unwrap().is_some());
        assert!(recent.head.is_none() && recent.bytes.is_empty());
    }
}
