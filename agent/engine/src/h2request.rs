//! A request's HTTP/1.1 rendering (job.rs for static requests, compose.rs for a journey's) as
//! an HTTP/2 request: the Host header becomes :authority, the connection-specific headers
//! HTTP/2 forbids (RFC 9113 8.2.2) are left out, the rest are sent as written. And an HTTP/2
//! response's head written back as HTTP/1.1, for what a journey inspects (cookies, checks).

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;

/// Headers a rendering may carry (ours plus a plan's); more is an error, not a truncation.
const MAX_HEADERS: usize = 128;
/// Connection-specific fields, which an HTTP/2 request must not carry.
const HOP_BY_HOP: [&str; 6] = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"];

#[derive(Debug)]
pub struct Converted {
    pub request: http::Request<()>,
    pub body: Bytes,
}

/// `wire`: a complete HTTP/1.1 request with its body; `https`: the :scheme.
pub fn to_h2(wire: &[u8], https: bool) -> Result<Converted, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    let length = match parsed.parse(wire) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Err("HTTP/2: the request's head is incomplete".into()),
        Err(e) => return Err(format!("HTTP/2: the request cannot be sent: {e}")),
    };
    let host = parsed.headers.iter().find(|h| h.name.eq_ignore_ascii_case("host")).map_or(&b""[..], |h| h.value);
    let scheme = if https { "https" } else { "http" };
    let uri = format!("{scheme}://{}{}", String::from_utf8_lossy(host), parsed.path.unwrap_or("/"));
    let mut builder =
        http::Request::builder().method(parsed.method.unwrap_or("GET")).uri(uri).version(http::Version::HTTP_2);
    for header in parsed.headers.iter() {
        if !HOP_BY_HOP.iter().any(|h| header.name.eq_ignore_ascii_case(h)) {
            builder = builder.header(header.name, header.value);
        }
    }
    let request = builder.body(()).map_err(|e| format!("HTTP/2: the request cannot be sent: {e}"))?;
    Ok(Converted { request, body: Bytes::copy_from_slice(&wire[length..]) })
}

/// The last request converted for each target: a static request's rendering is the same every
/// time, so it is parsed and built once, not per request (a journey's, which changes, is
/// converted each time). Bounds: one rendering per target.
pub struct Conversions {
    last: Vec<RefCell<Option<Last>>>,
}

/// A rendering and what it converted to.
type Last = (Vec<u8>, Rc<Converted>);

impl Conversions {
    pub fn new(targets: usize) -> Self {
        Conversions { last: (0..targets).map(|_| RefCell::default()).collect() }
    }

    /// `wire` (a request to `target`) as an HTTP/2 request, as `to_h2` converts it.
    pub fn convert(&self, target: usize, wire: &[u8], https: bool) -> Result<Rc<Converted>, String> {
        let mut last = self.last[target].borrow_mut();
        if let Some((held, converted)) = last.as_ref() {
            if held.as_slice() == wire {
                return Ok(Rc::clone(converted));
            }
        }
        let converted = Rc::new(to_h2(wire, https)?);
        *last = Some((wire.to_vec(), Rc::clone(&converted)));
        Ok(converted)
    }
}

/// The size of a response's head as HTTP/1.1 would write it ("HTTP/1.1 200 OK\r\n", each
/// "name: value\r\n", the empty line): what `bytes_in` counts for it, on either version.
pub fn head_bytes<T>(response: &http::Response<T>) -> u64 {
    let fields: usize = response.headers().iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum();
    (17 + fields + 2) as u64
}

/// The response's head as HTTP/1.1 (status line, fields, empty line).
pub fn http1_head<T>(response: &http::Response<T>) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {} \r\n", response.status().as_u16()).into_bytes();
    for (name, value) in response.headers() {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_becomes_authority_and_hop_by_hop_headers_go() {
        let wire = b"POST /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: loadfleet-engine\r\n\
                     X-Test: yes\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        let Converted { request, body } = to_h2(wire, true).unwrap();
        assert_eq!(request.method(), "POST");
        assert_eq!(request.uri().to_string(), "https://127.0.0.1:8080/a?b=1");
        assert_eq!(request.version(), http::Version::HTTP_2);
        let names: Vec<&str> = request.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["user-agent", "x-test", "content-length"]);
        assert_eq!(&body[..], b"hello");
        assert!(to_h2(b"GET / HTTP/1.1\r\nHost: a\r\n", false).unwrap_err().contains("incomplete"));
    }

    #[test]
    fn a_request_sent_again_is_converted_once_and_another_anew() {
        let conversions = Conversions::new(2);
        let a = conversions.convert(1, b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n", false).unwrap();
        let again = conversions.convert(1, b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n", false).unwrap();
        assert!(Rc::ptr_eq(&a, &again));
        let b = conversions.convert(1, b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n", false).unwrap();
        assert_eq!(b.request.uri().path(), "/b");
        let other_target = conversions.convert(0, b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n", true).unwrap();
        assert_eq!(other_target.request.uri().scheme_str(), Some("https"));
        assert!(conversions.convert(0, b"GET / HTTP/1.1\r\n", false).is_err());
    }

    #[test]
    fn a_response_head_reads_back_as_http1() {
        let response = http::Response::builder().status(404).header("set-cookie", "a=1").body(()).unwrap();
        let head = http1_head(&response);
        assert_eq!(head, b"HTTP/1.1 404 \r\nset-cookie: a=1\r\n\r\n");
        assert_eq!(head_bytes(&response), ("HTTP/1.1 200 OK\r\n".len() + "set-cookie: a=1\r\n".len() + 2) as u64);
    }
}
