//! Regular expressions of a plan (extractions, body and header checks), compiled once per job
//! on bytes (bodies need not be UTF-8), in linear time. Look-around and backreferences do not
//! exist in this engine (plan validation refuses them, naming the field).
//!
//! Bounds: a pattern is at most MAX_PATTERN_BYTES; its compiled program at most
//! MAX_COMPILED_BYTES and its lazy DFA's cache at most MAX_DFA_BYTES, so a job's regexes hold
//! a few MiB at worst whatever the plan writes.

use regex::bytes::{Regex, RegexBuilder};

/// A pattern's text.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// A compiled pattern's program.
pub const MAX_COMPILED_BYTES: usize = 1 << 20;
/// A compiled pattern's lazy DFA cache.
pub const MAX_DFA_BYTES: usize = 1 << 20;

/// `pattern` compiled, or why not (the regex crate's message, which points at the problem).
pub fn compile(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!("pattern of {} bytes, over the {MAX_PATTERN_BYTES} a pattern may have", pattern.len()));
    }
    RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED_BYTES)
        .dfa_size_limit(MAX_DFA_BYTES)
        .build()
        .map_err(|e| format!("pattern {pattern:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_bytes() {
        let regex = compile(r#"name="csrf" value="([^"]+)""#).unwrap();
        let body = b"\xff<input name=\"csrf\" value=\"t0k\">";
        assert_eq!(regex.captures(body).unwrap().get(1).unwrap().as_bytes(), b"t0k");
    }

    #[test]
    fn look_around_backreferences_and_bad_syntax_are_refused() {
        assert!(compile(r"(?=x)").unwrap_err().contains("look-around"), "{}", compile(r"(?=x)").unwrap_err());
        assert!(compile(r"(a)\1").is_err());
        assert!(compile(r"(unclosed").unwrap_err().starts_with("pattern \"(unclosed\": "));
    }

    #[test]
    fn patterns_are_bounded_in_length_and_compiled_size() {
        assert!(compile(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
        let long = compile(&"a".repeat(MAX_PATTERN_BYTES + 1)).unwrap_err();
        assert_eq!(long, "pattern of 1025 bytes, over the 1024 a pattern may have");
        // Short text, huge program: \w is ~700 Unicode ranges, repeated 1000 times.
        assert!(compile(r"\w{1000}").unwrap_err().contains("exceeds size limit"));
    }
}
