//! Redirects of a journey request (RequestSpec.max_redirects, docs/plans.md "Redirects"):
//! which responses are followed, where a hop may go, and the hop's request.
//!
//! Followed: 301, 302, 303, 307 and 308 with a Location header, up to the request's limit;
//! any other response (300, 304, a 3xx without Location, a redirect past the limit) is the
//! one measured and judged. A hop goes only to the origin (scheme, host, port) of a job
//! target: the engine connects only to the addresses the agent resolved for its targets and
//! checked against its allow-list, so a Location naming any other origin is refused here,
//! before a socket could open (ERROR_KIND_REDIRECT_REFUSED, the origin in the message).
//!
//! The hop's request is the previous one sent again to the new URL (RFC 9110 §15.4): 307 and
//! 308 keep the method and the body; 303 (but for HEAD), and 301 or 302 after a POST, become
//! a GET without the body and its headers (Content-Type and the rest of the Fetch standard's
//! request-body headers); Authorization is dropped when the hop changes origin. Host and
//! Cookie are written for the new URL, the Cookie from the user's jar.

use url::Url;

use crate::phases::Phases;
use crate::template::MAX_REQUEST_BYTES;

/// The most redirects a request may follow (validate says so too: plan/journeys.py).
pub const MAX_REDIRECTS_LIMIT: u32 = 20;
/// The most of a refused Location quoted in the error's message.
const MAX_QUOTED_BYTES: usize = 200;

/// How a followed redirect changes the request's method (RFC 9110 §15.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewrite {
    /// Method and body as they were.
    Keep,
    /// A GET without a body.
    ToGet,
}

/// How the request sent with `method` goes on after a response of `status`; None when the
/// status is no redirect the engine follows.
pub fn rewrite(status: u16, method: &[u8]) -> Option<Rewrite> {
    match status {
        307 | 308 => Some(Rewrite::Keep),
        303 if method == b"HEAD" => Some(Rewrite::Keep),
        303 => Some(Rewrite::ToGet),
        301 | 302 if method == b"POST" => Some(Rewrite::ToGet),
        301 | 302 => Some(Rewrite::Keep),
        _ => None,
    }
}

/// Where a hop goes: a job target and the URL on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub target: usize,
    pub url: Url,
}

impl Hop {
    /// The request target of the hop's request line: path and query (a fragment is never sent).
    pub fn path_and_query(&self) -> &str {
        &self.url[url::Position::BeforePath..url::Position::AfterQuery]
    }
}

/// The origins of a job's targets, in target order. O(targets), built once per job.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    bases: Vec<Url>,
}

impl Origins {
    /// The origins of targets with these base URLs; or the first that is no URL.
    pub fn new<'u>(urls: impl IntoIterator<Item = &'u str>) -> Result<Origins, String> {
        let mut bases = Vec::new();
        for (t, text) in urls.into_iter().enumerate() {
            bases.push(Url::parse(text).map_err(|e| format!("targets[{t}].url '{text}': {e}"))?);
        }
        Ok(Origins { bases })
    }

    /// The URL `path` (path and query) of target `target`.
    pub fn url_of(&self, target: usize, path: &str) -> Result<Url, String> {
        self.bases[target].join(path).map_err(|e| format!("'{path}': {e}"))
    }

    /// Where a response to `from` whose Location is `location` sends the next request: a
    /// target of the same origin; or why the hop is refused.
    pub fn locate(&self, from: &Url, location: &[u8]) -> Result<Hop, String> {
        let text = std::str::from_utf8(location).map_err(|_| format!("Location {} is not text", quote(location)))?;
        let url = from.join(text).map_err(|e| format!("Location {}: {e}", quote(location)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("Location {}: not an http or https URL", quote(location)));
        }
        match self.bases.iter().position(|base| same_origin(base, &url)) {
            Some(target) => Ok(Hop { target, url }),
            None => Err(format!("redirect to {} refused: no target of the plan", url.origin().ascii_serialization())),
        }
    }
}

/// Whether two URLs have one origin (scheme, host, port).
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme() && a.host() == b.host() && a.port_or_known_default() == b.port_or_known_default()
}

fn quote(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(MAX_QUOTED_BYTES)];
    let more = if bytes.len() > shown.len() { "..." } else { "" };
    format!("'{}{more}'", String::from_utf8_lossy(shown))
}

/// The method, path and headers of a request the engine wrote, and its body.
struct Sent<'a> {
    method: &'a [u8],
    path: &'a [u8],
    headers: &'a [u8],
    body: &'a [u8],
}

/// Splits a request the engine itself wrote (compose.rs, or `write_hop`).
fn split(request: &[u8]) -> Sent<'_> {
    let head_end = request.windows(4).position(|w| w == b"\r\n\r\n").map_or(request.len(), |at| at + 2);
    let line_end = request.windows(2).position(|w| w == b"\r\n").unwrap_or(head_end);
    let line = &request[..line_end];
    let mut parts = line.splitn(3, |&b| b == b' ');
    let method = parts.next().unwrap_or_default();
    let path = parts.next().unwrap_or_default();
    let body = request.get(head_end + 2..).unwrap_or_default();
    Sent { method, path, headers: &request[(line_end + 2).min(head_end)..head_end], body }
}

/// The method of a request the engine wrote.
pub fn method_of(request: &[u8]) -> &[u8] {
    split(request).method
}

/// The path and query of a request the engine wrote.
pub fn path_of(request: &[u8]) -> &str {
    std::str::from_utf8(split(request).path).unwrap_or("/")
}

/// Headers a hop never copies: written anew for the new URL (Host, Cookie), or counted anew
/// (Content-Length).
const REWRITTEN: [&[u8]; 3] = [b"host", b"cookie", b"content-length"];
/// Headers of a body (the Fetch standard's request-body header names): gone with the body.
const OF_BODY: [&[u8]; 5] =
    [b"content-type", b"content-encoding", b"content-language", b"content-location", b"transfer-encoding"];

/// What a hop's request is made of besides the previous request.
#[derive(Debug, Clone, Copy)]
pub struct HopRequest<'a> {
    pub rewrite: Rewrite,
    pub path: &'a str,
    /// The new target's Host header.
    pub host: &'a str,
    /// The jar's Cookie value for the new URL (empty: no Cookie header).
    pub cookie: &'a [u8],
    /// The hop changes origin: Authorization is not sent on.
    pub cross_origin: bool,
}

/// Writes into `out` (cleared first) the request that follows `previous` to the hop; or why
/// it cannot be sent (a Location making it longer than MAX_REQUEST_BYTES).
pub fn write_hop(previous: &[u8], hop: HopRequest<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    let sent = split(previous);
    let to_get = hop.rewrite == Rewrite::ToGet;
    out.clear();
    out.extend_from_slice(if to_get { b"GET" } else { sent.method });
    out.push(b' ');
    out.extend_from_slice(hop.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(hop.host.as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut had_length = false;
    for line in sent.headers.split(|&b| b == b'\n').filter(|l| l.len() > 1) {
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        let named = |names: &[&[u8]]| names.iter().any(|n| name.eq_ignore_ascii_case(n));
        had_length |= name.eq_ignore_ascii_case(b"content-length");
        let dropped = named(&REWRITTEN)
            || (to_get && named(&OF_BODY))
            || (hop.cross_origin && name.eq_ignore_ascii_case(b"authorization"));
        if !dropped {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    if !hop.cookie.is_empty() {
        out.extend_from_slice(b"Cookie: ");
        out.extend_from_slice(hop.cookie);
        out.extend_from_slice(b"\r\n");
    }
    if !to_get && had_length {
        out.extend_from_slice(format!("Content-Length: {}\r\n", sent.body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if !to_get {
        out.extend_from_slice(sent.body);
    }
    if out.len() > MAX_REQUEST_BYTES {
        return Err(format!(
            "redirect to a request of {} bytes, over the {MAX_REQUEST_BYTES} a request may have",
            out.len()
        ));
    }
    Ok(())
}

/// The phases of a response reached through hops: each phase summed over them (a hop that
/// opened a connection adds its connect and TLS handshake).
pub fn add_phases(a: &Phases, b: &Phases) -> Phases {
    let sum = |x: Option<std::time::Duration>, y: Option<std::time::Duration>| match (x, y) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    };
    Phases {
        queueing: a.queueing + b.queueing,
        connect: sum(a.connect, b.connect),
        tls: sum(a.tls, b.tls),
        waiting: a.waiting + b.waiting,
        receiving: a.receiving + b.receiving,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_follows_rfc_9110() {
        let cases: [(u16, &[u8], Option<Rewrite>); 14] = [
            (301, b"GET", Some(Rewrite::Keep)),
            (301, b"POST", Some(Rewrite::ToGet)),
            (302, b"PUT", Some(Rewrite::Keep)),
            (302, b"POST", Some(Rewrite::ToGet)),
            (303, b"POST", Some(Rewrite::ToGet)),
            (303, b"PUT", Some(Rewrite::ToGet)),
            (303, b"HEAD", Some(Rewrite::Keep)),
            (307, b"POST", Some(Rewrite::Keep)),
            (308, b"DELETE", Some(Rewrite::Keep)),
            (300, b"GET", None),
            (304, b"GET", None),
            (305, b"GET", None),
            (200, b"GET", None),
            (404, b"POST", None),
        ];
        for (status, method, expected) in cases {
            assert_eq!(rewrite(status, method), expected, "{status} after {}", String::from_utf8_lossy(method));
        }
    }

    fn origins() -> Origins {
        Origins::new(["http://127.0.0.1:8080", "https://app.test", "http://[::1]:9000"]).unwrap()
    }

    #[test]
    fn a_hop_lands_on_the_target_of_its_origin() {
        let from = Url::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        let cases: [(&str, usize, &str); 6] = [
            ("/login", 0, "/login"),
            ("next?y=2#frag", 0, "/a/next?y=2"),
            ("http://127.0.0.1:8080/c", 0, "/c"),
            ("https://app.test:443/d", 1, "/d"),
            ("//127.0.0.1:8080/e", 0, "/e"),
            ("http://[::1]:9000/", 2, "/"),
        ];
        for (location, target, path) in cases {
            let hop = origins().locate(&from, location.as_bytes()).unwrap();
            assert_eq!((hop.target, hop.path_and_query()), (target, path), "{location}");
        }
        let tls = Url::parse("https://app.test/x").unwrap();
        assert_eq!(origins().locate(&tls, b"//app.test/e").unwrap().target, 1, "scheme-relative keeps https");
    }

    #[test]
    fn a_hop_to_any_other_origin_is_refused_naming_it() {
        let from = Url::parse("http://127.0.0.1:8080/").unwrap();
        let cases: [(&[u8], &str); 6] = [
            (b"http://127.0.0.1:8081/", "redirect to http://127.0.0.1:8081 refused: no target of the plan"),
            (b"https://127.0.0.1:8080/", "redirect to https://127.0.0.1:8080 refused: no target of the plan"),
            (b"http://localhost:8080/", "redirect to http://localhost:8080 refused: no target of the plan"),
            (b"http://app.test/", "redirect to http://app.test refused: no target of the plan"),
            (b"ftp://127.0.0.1:8080/", "Location 'ftp://127.0.0.1:8080/': not an http or https URL"),
            (b"/\xff", "Location '/\u{fffd}' is not text"),
        ];
        for (location, message) in cases {
            assert_eq!(origins().locate(&from, location), Err(message.to_string()));
        }
    }

    fn hop(rewrite: Rewrite, cross_origin: bool) -> HopRequest<'static> {
        HopRequest { rewrite, path: "/next?a=1", host: "app.test", cookie: b"sid=1", cross_origin }
    }

    const POST: &[u8] =
        b"POST /login HTTP/1.1\r\nHost: h:1\r\nUser-Agent: loadfleet-engine\r\nContent-Type: text/plain\r\n\
Authorization: Basic eA==\r\nCookie: old=1\r\nContent-Length: 5\r\n\r\nhello";

    #[test]
    fn a_get_hop_drops_the_body_and_its_headers() {
        let mut out = Vec::new();
        write_hop(POST, hop(Rewrite::ToGet, false), &mut out).unwrap();
        let expected = "GET /next?a=1 HTTP/1.1\r\nHost: app.test\r\nUser-Agent: loadfleet-engine\r\n\
Authorization: Basic eA==\r\nCookie: sid=1\r\n\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn a_kept_method_keeps_the_body_and_drops_authorization_across_origins() {
        let mut out = Vec::new();
        write_hop(POST, hop(Rewrite::Keep, true), &mut out).unwrap();
        let expected = "POST /next?a=1 HTTP/1.1\r\nHost: app.test\r\nUser-Agent: loadfleet-engine\r\n\
Content-Type: text/plain\r\nCookie: sid=1\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(String::from_utf8(out.clone()).unwrap(), expected);
        let get = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
        let no_cookie = HopRequest { cookie: b"", ..hop(Rewrite::Keep, false) };
        write_hop(get, no_cookie, &mut out).unwrap();
        assert_eq!(out, b"GET /next?a=1 HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n");
        assert_eq!((method_of(get), path_of(get)), (&b"GET"[..], "/"));
    }

    #[test]
    fn a_hop_over_the_request_limit_is_refused() {
        let long = format!("/{}", "a".repeat(MAX_REQUEST_BYTES));
        let refused = write_hop(POST, HopRequest { path: &long, ..hop(Rewrite::Keep, false) }, &mut Vec::new());
        assert!(refused.unwrap_err().contains("over the 65536"));
    }
}
