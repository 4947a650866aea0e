//! A response as journeys' extractors and checks read it: status, header lines, the
//! captured body, the latency, and the body parsed as JSON at most once, when the first
//! JSON matcher asks, then shared by every other JSON matcher of the same response.

use std::cell::OnceCell;

use serde_json::Value;

/// One header line of the response head.
#[derive(Debug, Clone, Copy)]
pub struct HeaderLine<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
}

#[derive(Debug)]
pub struct Response<'a> {
    pub status: u16,
    pub headers: &'a [HeaderLine<'a>],
    /// The captured body (all of it, or its start when `body_truncated`).
    pub body: &'a [u8],
    /// The body was longer than the capture's cap: matchers saw only its start.
    pub body_truncated: bool,
    /// From the request's due time to the response's last byte.
    pub latency_us: u64,
    /// None inside: the body is not JSON (serde_json's depth limit of 128 included).
    json: OnceCell<Option<Value>>,
}

impl<'a> Response<'a> {
    pub fn new(status: u16, headers: &'a [HeaderLine<'a>], body: &'a [u8], latency_us: u64) -> Response<'a> {
        Response { status, headers, body, body_truncated: false, latency_us, json: OnceCell::new() }
    }

    /// The first header named `name` (ASCII case-insensitive), its value without the blanks around it.
    pub fn header(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.headers_named(name).next()
    }

    /// Every header named `name`, in order.
    pub fn headers_named<'n>(&self, name: &'n [u8]) -> impl Iterator<Item = &'a [u8]> + 'n
    where
        'a: 'n,
    {
        self.headers.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.trim_ascii())
    }

    /// The body as JSON, parsed on the first call only; None when it is not JSON.
    pub fn json(&self) -> Option<&Value> {
        self.json.get_or_init(|| serde_json::from_slice(self.body).ok()).as_ref()
    }
}

/// Writes `value` as a value taken from JSON: a string as its characters (unquoted, unescaped),
/// a number, true or false as its JSON text, an array or object as compact JSON. Null is no
/// value: false, nothing written.
pub fn json_text(value: &Value, out: &mut Vec<u8>) -> bool {
    match value {
        Value::Null => return false,
        Value::String(text) => out.extend_from_slice(text.as_bytes()),
        // Writing into a Vec cannot fail.
        other => serde_json::to_writer(&mut *out, other).expect("JSON into a Vec"),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_found_by_name_first_one_first() {
        let headers = [
            HeaderLine { name: b"Set-Cookie", value: b"a=1" },
            HeaderLine { name: b"content-type", value: b" text/html  " },
            HeaderLine { name: b"SET-COOKIE", value: b"b=2" },
        ];
        let response = Response::new(200, &headers, b"", 0);
        assert_eq!(response.header(b"Content-Type"), Some(&b"text/html"[..]));
        assert_eq!(response.header(b"set-cookie"), Some(&b"a=1"[..]));
        assert_eq!(response.headers_named(b"Set-Cookie").collect::<Vec<_>>(), [&b"a=1"[..], b"b=2"]);
        assert_eq!(response.header(b"Location"), None);
    }

    #[test]
    fn the_body_is_parsed_once_and_shared() {
        let response = Response::new(200, &[], br#"{"a": [1, "x"]}"#, 0);
        let first: *const Value = response.json().unwrap();
        let second: *const Value = response.json().unwrap();
        assert_eq!(first, second, "the same parsed value");
        assert!(Response::new(200, &[], b"<html>", 0).json().is_none());
    }

    #[test]
    fn json_values_as_text() {
        let text = |v: Value| {
            let mut out = Vec::new();
            json_text(&v, &mut out).then(|| String::from_utf8(out).unwrap())
        };
        assert_eq!(text(Value::from("a \"b\"")), Some("a \"b\"".to_string()));
        assert_eq!(text(serde_json::json!(12.5)), Some("12.5".to_string()));
        assert_eq!(text(serde_json::json!(true)), Some("true".to_string()));
        assert_eq!(text(serde_json::json!({"k": [1, null]})), Some(r#"{"k":[1,null]}"#.to_string()));
        assert_eq!(text(Value::Null), None);
    }
}
