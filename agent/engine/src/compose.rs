//! A journey request's bytes, built per request into its user's buffer: the request line
//! with the path's template filled, Host and User-Agent as the static path writes them, the
//! header values filled, the jar's cached Cookie header, the body filled, and its
//! Content-Length. Templates refuse values their place cannot carry and requests over
//! MAX_REQUEST_BYTES (template.rs); such a request is not sent (ERROR_KIND_TEMPLATE).

use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::feed::Feed;
use crate::journey::{Journey, Journeys};
use crate::template::{Context, MAX_REQUEST_BYTES};
use crate::user::UserState;

/// The wall clock in Unix milliseconds: ${now_ms}, and cookies' expiry.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Where a request is going and how.
#[derive(Debug, Clone, Copy)]
pub struct Destination {
    pub request: usize,
    pub target: usize,
    pub keep_alive: bool,
}

/// Builds the request into `user.write_buf` (cleared first); or says why it cannot be sent,
/// naming the part ("path: ...", "header X-Token: ...", "body: ...").
pub fn compose(
    journeys: &Journeys,
    journey: &Journey,
    to: Destination,
    user: &mut UserState,
    now_ms: u64,
) -> Result<(), String> {
    let UserState { index, vars, jar, iteration, write_buf: out, rng, row, .. } = user;
    out.clear();
    let held = journeys.feed.as_ref().map(Feed::held);
    let row = held.as_deref().zip(*row).map(|(rows, at)| rows.row(at));
    let mut ctx = Context { vars, row, user: *index, agent: journeys.agent, iteration: *iteration, now_ms, rng };
    out.extend_from_slice(journey.method.as_bytes());
    out.push(b' ');
    journey.path.render_into(out, &mut ctx).map_err(|e| format!("path: {e}"))?;
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(journeys.hosts[to.target].as_bytes());
    out.extend_from_slice(b"\r\nUser-Agent: loadfleet-engine\r\n");
    for (name, value) in &journey.headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        value.render_into(out, &mut ctx).map_err(|e| format!("header {name}: {e}"))?;
        out.extend_from_slice(b"\r\n");
    }
    if let Some(jar) = jar {
        let key = journeys.url_key(to.request, to.target);
        let cookies = jar.header_for(key, &journeys.urls[key], now_ms);
        if !cookies.is_empty() {
            out.extend_from_slice(b"Cookie: ");
            out.extend_from_slice(cookies);
            out.extend_from_slice(b"\r\n");
        }
    }
    let head_end = out.len();
    journey.body.render_into(out, &mut ctx).map_err(|e| format!("body: {e}"))?;
    end_head(out, head_end, journey.always_length, to.keep_alive)
}

/// Puts the head's last lines (Content-Length, Connection: close, the empty line) at
/// `head_end`, before the body that follows it.
fn end_head(out: &mut Vec<u8>, head_end: usize, always_length: bool, keep_alive: bool) -> Result<(), String> {
    let body_bytes = out.len() - head_end;
    let mut tail = [0u8; 64];
    let mut cursor = &mut tail[..];
    if body_bytes > 0 || always_length {
        let _ = write!(cursor, "Content-Length: {body_bytes}\r\n");
    }
    if !keep_alive {
        let _ = cursor.write_all(b"Connection: close\r\n");
    }
    let _ = cursor.write_all(b"\r\n");
    let length = 64 - cursor.len();
    if out.len() + length > MAX_REQUEST_BYTES {
        let bytes = out.len() + length;
        return Err(format!("request of {bytes} bytes, over the {MAX_REQUEST_BYTES} a request may have"));
    }
    out.splice(head_end..head_end, tail[..length].iter().copied());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_ends_before_the_body_with_its_length() {
        let mut out = b"POST / HTTP/1.1\r\nHost: h\r\nhello".to_vec();
        end_head(&mut out, 26, true, false).unwrap();
        assert_eq!(out, b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
        let mut get = b"GET / HTTP/1.1\r\n".to_vec();
        end_head(&mut get, 16, false, true).unwrap();
        assert_eq!(get, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn a_request_over_64_kib_is_refused() {
        let mut out = vec![b'x'; MAX_REQUEST_BYTES - 2];
        let refused = end_head(&mut out, 10, false, true).unwrap_err();
        assert!(refused.contains("over the 65536"), "{refused}");
    }
}
