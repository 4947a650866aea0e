//! Extractors: take one value from a response into a user's variable. Built once per job
//! (regexes and JSON paths compiled, names checked); per response they write the value into
//! the caller's buffer and allocate nothing else, but for the JSON kinds, whose body is parsed
//! once per response (response.rs) and whose JSONPath query collects its nodes.
//!
//! Kinds: the status; a header by name (the first, case-insensitive); a cookie by name (the
//! last Set-Cookie of that name, the one a browser keeps); a regex's group 1 (the whole match
//! when the regex has no group) at its `occurrence` (0: the first match, as Gatling's
//! find(0)); a JSON pointer (RFC 6901); a JSONPath (RFC 9535) node at `occurrence`; and
//! `form_field`, the value of `<input ... name="NAME" ... value="...">`. A JSON string is its
//! characters, other JSON values their compact text, null is not found.

use std::cell::RefCell;
use std::fmt;

use regex::bytes::{CaptureLocations, Regex};
use serde_json_path::JsonPath;

use crate::pattern;
use crate::response::{json_text, Response};

/// Why an extractor found no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    NotFound,
    /// A JSON extractor on a body that is not JSON.
    NotJson,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Missing::NotFound => "not found",
            Missing::NotJson => "body is not JSON",
        })
    }
}

#[derive(Debug)]
enum Source {
    Status,
    Header(Box<[u8]>),
    Cookie(Box<[u8]>),
    Regex {
        regex: Regex,
        /// Reused by every call: `captures` would allocate per call (regex#219). The engine
        /// runs on one thread, and a call never re-enters.
        locations: RefCell<CaptureLocations>,
        group: usize,
        occurrence: usize,
    },
    JsonPointer(String),
    JsonPath {
        path: JsonPath,
        occurrence: usize,
    },
    FormField(Box<[u8]>),
}

/// One compiled extraction.
#[derive(Debug)]
pub struct Extractor {
    source: Source,
}

/// A header, cookie or field name: not empty, no blank or control byte, at most 256 bytes.
fn name(kind: &str, text: &str) -> Result<Box<[u8]>, String> {
    if text.is_empty() || text.len() > 256 || text.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!("{kind} name {text:?}: 1 to 256 bytes without blanks or control bytes"));
    }
    Ok(text.as_bytes().into())
}

impl Extractor {
    pub fn status() -> Extractor {
        Extractor { source: Source::Status }
    }

    pub fn header(header: &str) -> Result<Extractor, String> {
        Ok(Extractor { source: Source::Header(name("header", header)?) })
    }

    pub fn cookie(cookie: &str) -> Result<Extractor, String> {
        Ok(Extractor { source: Source::Cookie(name("cookie", cookie)?) })
    }

    pub fn regex(pattern: &str, occurrence: usize) -> Result<Extractor, String> {
        let regex = pattern::compile(pattern)?;
        let group = usize::from(regex.captures_len() > 1);
        let locations = RefCell::new(regex.capture_locations());
        Ok(Extractor { source: Source::Regex { regex, locations, group, occurrence } })
    }

    /// `pointer`: empty (the whole document) or starting with `/` (RFC 6901).
    pub fn json_pointer(pointer: &str) -> Result<Extractor, String> {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!("JSON pointer {pointer:?} must start with '/' (RFC 6901)"));
        }
        Ok(Extractor { source: Source::JsonPointer(pointer.to_string()) })
    }

    pub fn json_path(path: &str, occurrence: usize) -> Result<Extractor, String> {
        let path = JsonPath::parse(path).map_err(|e| format!("JSONPath {path:?}: {e}"))?;
        Ok(Extractor { source: Source::JsonPath { path, occurrence } })
    }

    pub fn form_field(field: &str) -> Result<Extractor, String> {
        Ok(Extractor { source: Source::FormField(name("form field", field)?) })
    }

    /// Whether the response's body must be captured for this extractor.
    pub fn needs_body(&self) -> bool {
        !matches!(self.source, Source::Status | Source::Header(_) | Source::Cookie(_))
    }

    /// Appends the value to `out` (the caller clears it), or says why there is none.
    pub fn extract(&self, response: &Response<'_>, out: &mut Vec<u8>) -> Result<(), Missing> {
        let found = match &self.source {
            Source::Status => {
                out.extend_from_slice(itoa3(response.status).as_slice());
                return Ok(());
            }
            Source::Header(header) => response.header(header),
            Source::Cookie(cookie) => {
                response.headers_named(b"set-cookie").filter_map(|v| cookie_value(v, cookie)).last()
            }
            Source::Regex { regex, locations, group, occurrence } => {
                nth_capture(regex, &mut locations.borrow_mut(), *group, *occurrence, response.body)
            }
            Source::JsonPointer(pointer) => {
                let value = response.json().ok_or(Missing::NotJson)?.pointer(pointer);
                return value.filter(|v| json_text(v, out)).map(|_| ()).ok_or(Missing::NotFound);
            }
            Source::JsonPath { path, occurrence } => {
                let nodes = path.query(response.json().ok_or(Missing::NotJson)?);
                let value = nodes.iter().nth(*occurrence);
                return value.filter(|v| json_text(v, out)).map(|_| ()).ok_or(Missing::NotFound);
            }
            Source::FormField(field) => {
                let value = form_field(response.body, field).ok_or(Missing::NotFound)?;
                decode_entities(value, out);
                return Ok(());
            }
        };
        out.extend_from_slice(found.ok_or(Missing::NotFound)?);
        Ok(())
    }
}

/// A status code's digits (100..=999; others as "000", which no server sends).
fn itoa3(status: u16) -> [u8; 3] {
    if !(100..1000).contains(&status) {
        return *b"000";
    }
    [b'0' + (status / 100) as u8, b'0' + (status / 10 % 10) as u8, b'0' + (status % 10) as u8]
}

/// The value of a Set-Cookie line's cookie if it is named `name` (RFC 6265 §5.2: the pair
/// before the first `;`, split at its first `=`, blanks trimmed).
fn cookie_value<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let pair = line.split(|&b| b == b';').next()?;
    let equals = pair.iter().position(|&b| b == b'=')?;
    (pair[..equals].trim_ascii() == name).then(|| pair[equals + 1..].trim_ascii())
}

/// Group `group` of the `occurrence`th match (0 = the first) of `regex` in `body`.
fn nth_capture<'b>(
    regex: &Regex,
    locations: &mut CaptureLocations,
    group: usize,
    occurrence: usize,
    body: &'b [u8],
) -> Option<&'b [u8]> {
    let mut start = 0;
    for _ in 0..occurrence {
        let matched = regex.captures_read_at(locations, body, start)?;
        // An empty match moves on by a byte, or the same match would come back forever.
        start = if matched.end() > matched.start() { matched.end() } else { matched.end() + 1 };
        if start > body.len() {
            return None;
        }
    }
    regex.captures_read_at(locations, body, start)?;
    let (from, to) = locations.get(group)?;
    Some(&body[from..to])
}

/// The value attribute of the first `<input>` whose name attribute is `field`: a byte scan of
/// the tags, attributes in any order, values in double, single or no quotes; an input with
/// that name and no value has the empty value (HTML's rule).
fn form_field<'b>(body: &'b [u8], field: &[u8]) -> Option<&'b [u8]> {
    let mut at = 0;
    while let Some(lt) = body[at..].iter().position(|&b| b == b'<') {
        let tag = at + lt + 1;
        let is_input = body.get(tag..tag + 5).is_some_and(|t| t.eq_ignore_ascii_case(b"input"))
            && body.get(tag + 5).is_some_and(|&b| b.is_ascii_whitespace() || b == b'/' || b == b'>');
        if !is_input {
            at = tag;
            continue;
        }
        let (attributes, end) = Attributes::of_tag(body, tag + 5);
        if attributes.name == Some(field) {
            return Some(attributes.value.unwrap_or(b""));
        }
        at = end;
    }
    None
}

/// The name and value attributes of one tag.
struct Attributes<'b> {
    name: Option<&'b [u8]>,
    value: Option<&'b [u8]>,
}

impl<'b> Attributes<'b> {
    /// Reads attributes from `at` to the tag's `>`; returns them and where the tag ends.
    fn of_tag(body: &'b [u8], mut at: usize) -> (Attributes<'b>, usize) {
        let mut found = Attributes { name: None, value: None };
        loop {
            while body.get(at).is_some_and(|&b| b.is_ascii_whitespace() || b == b'/') {
                at += 1;
            }
            if body.get(at).is_none_or(|&b| b == b'>') {
                return (found, at);
            }
            let key_start = at;
            while body.get(at).is_some_and(|&b| !b.is_ascii_whitespace() && !matches!(b, b'=' | b'>' | b'/')) {
                at += 1;
            }
            let key = &body[key_start..at];
            let (value, next) = attribute_value(body, at);
            at = next.max(key_start + 1);
            if key.eq_ignore_ascii_case(b"name") {
                found.name = found.name.or(Some(value));
            } else if key.eq_ignore_ascii_case(b"value") {
                found.value = found.value.or(Some(value));
            }
        }
    }
}

/// The value after an attribute's name at `at` (`= "x"`, `='x'`, `=x` or none) and where it ends.
fn attribute_value(body: &[u8], mut at: usize) -> (&[u8], usize) {
    let blanks = |at: usize| at + body[at..].iter().take_while(|b| b.is_ascii_whitespace()).count();
    let after_name = at;
    at = blanks(at);
    if body.get(at) != Some(&b'=') {
        return (b"", after_name);
    }
    at = blanks(at + 1);
    match body.get(at) {
        Some(&quote @ (b'"' | b'\'')) => {
            let length = body[at + 1..].iter().position(|&b| b == quote).unwrap_or(body.len() - at - 1);
            (&body[at + 1..at + 1 + length], (at + 2 + length).min(body.len()))
        }
        _ => {
            let length = body[at..].iter().take_while(|&&b| !b.is_ascii_whitespace() && b != b'>').count();
            (&body[at..at + length], at + length)
        }
    }
}

/// HTML's entities for the characters a form value escapes: &amp; &quot; &#39; &#x27;
/// &apos; &lt; &gt; decoded; any other `&` stays as written.
fn decode_entities(value: &[u8], out: &mut Vec<u8>) {
    const ENTITIES: [(&[u8], u8); 7] = [
        (b"&amp;", b'&'),
        (b"&quot;", b'"'),
        (b"&#39;", b'\''),
        (b"&#x27;", b'\''),
        (b"&apos;", b'\''),
        (b"&lt;", b'<'),
        (b"&gt;", b'>'),
    ];
    let mut at = 0;
    while at < value.len() {
        let entity = (value[at] == b'&').then(|| ENTITIES.iter().find(|(e, _)| value[at..].starts_with(e))).flatten();
        match entity {
            Some((text, byte)) => {
                out.push(*byte);
                at += text.len();
            }
            None => {
                out.push(value[at]);
                at += 1;
            }
        }
    }
}
