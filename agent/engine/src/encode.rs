//! The filters of templates (template.rs): a value as it is, percent-encoded (`:url`) or
//! escaped for the inside of a JSON string (`:json`), appended to a request being built with
//! the request's length bound checked before a byte is written.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    None,
    /// Percent-encoding of all but A-Z a-z 0-9 - . _ ~ (RFC 3986's unreserved).
    Url,
    /// JSON string escaping: `"`, `\` and control bytes.
    Json,
}

/// Appends `value` through `filter`, unless that would make `out` longer than `max_bytes`:
/// then `out` is left as it was and the error is the length it would have had.
pub fn append(out: &mut Vec<u8>, value: &[u8], filter: Filter, max_bytes: usize) -> Result<(), usize> {
    let length = out.len() + value.iter().map(|&b| encoded_len(filter, b)).sum::<usize>();
    if length > max_bytes {
        return Err(length);
    }
    match filter {
        Filter::None => out.extend_from_slice(value),
        Filter::Url => value.iter().for_each(|&b| url_encode(out, b)),
        Filter::Json => value.iter().for_each(|&b| json_escape(out, b)),
    }
    Ok(())
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn encoded_len(filter: Filter, byte: u8) -> usize {
    match filter {
        Filter::None => 1,
        Filter::Url if is_unreserved(byte) => 1,
        Filter::Url => 3,
        Filter::Json => match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        },
    }
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn url_encode(out: &mut Vec<u8>, byte: u8) {
    if is_unreserved(byte) {
        out.push(byte);
    } else {
        out.extend_from_slice(&[b'%', HEX_UPPER[usize::from(byte >> 4)], HEX_UPPER[usize::from(byte & 0x0f)]]);
    }
}

fn json_escape(out: &mut Vec<u8>, byte: u8) {
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0x08 => b'b',
        0x0c => b'f',
        0..0x20 => {
            let hex = |n: u8| HEX_UPPER[usize::from(n)].to_ascii_lowercase();
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hex(byte >> 4), hex(byte & 0x0f)]);
            return;
        }
        _ => {
            out.push(byte);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(value: &[u8], filter: Filter) -> Vec<u8> {
        let mut out = Vec::new();
        append(&mut out, value, filter, usize::MAX).unwrap();
        out
    }

    #[test]
    fn url_keeps_only_unreserved_bytes() {
        assert_eq!(filtered(b"AZaz09-._~", Filter::Url), b"AZaz09-._~");
        assert_eq!(filtered(b"a b&c=d/e?f%+\xff", Filter::Url), b"a%20b%26c%3Dd%2Fe%3Ff%25%2B%FF");
    }

    #[test]
    fn json_escapes_quotes_backslashes_and_control_bytes() {
        assert_eq!(filtered(b"say \"hi\"\\", Filter::Json), b"say \\\"hi\\\"\\\\");
        assert_eq!(filtered(b"\n\r\t\x08\x0c\x01\x1f", Filter::Json), b"\\n\\r\\t\\b\\f\\u0001\\u001f");
        assert_eq!(filtered("caf\u{e9} <>".as_bytes(), Filter::Json), "caf\u{e9} <>".as_bytes());
    }

    #[test]
    fn encoded_lengths_are_what_the_encoders_write() {
        for byte in 0..=255u8 {
            for filter in [Filter::None, Filter::Url, Filter::Json] {
                assert_eq!(filtered(&[byte], filter).len(), encoded_len(filter, byte), "{byte} {filter:?}");
            }
        }
    }

    #[test]
    fn an_append_past_the_bound_changes_nothing() {
        let mut out = b"ab".to_vec();
        assert_eq!(append(&mut out, b" c", Filter::Url, 5), Err(6), "ab%20c");
        assert_eq!(out, b"ab");
        assert_eq!(append(&mut out, b"c d", Filter::None, 5), Ok(()));
        assert_eq!(out, b"abc d");
    }
}
