//! Checks: a named list of conditions a response must all meet ("login form": status 200
//! and the body contains `name="csrf"`). Compiled once per job (status sets as bit sets,
//! regexes, JSON paths, templates); per response the conditions are tested in order and the
//! first that fails is described in at most MAX_DESCRIPTION_BYTES ("status 403 not in
//! [200]"), which the caller puts in the interval's bounded error sample under the check's
//! name. A pass allocates nothing; only a failure writes its description.
//!
//! Conditions: `status` (codes, classes "2xx", ranges "200-299"), `body_contains` and
//! `body_lacks` (templates: "Welcome, ${accounts.username}"), `body_regex`, `header` (equals,
//! contains, regex, absent; the first header of the name), `json_path` (equals: the first
//! node's text as extract.rs writes it; exists: any node, null included) and
//! `latency_below_ms`. A body cut at the capture's cap is said in the description of a
//! body condition that failed on it.

use std::fmt::Write as _;

use regex::bytes::Regex;
use serde_json_path::JsonPath;

use crate::pattern;
use crate::response::{json_text, Response};
use crate::template::{Context, Names, Place, Template};

/// A failure's description (the sample's message).
pub const MAX_DESCRIPTION_BYTES: usize = 200;
/// A check's name: the key of its pass/fail counts, so short.
pub const MAX_NAME_BYTES: usize = 64;
/// A value quoted in a description, before it is cut.
const MAX_QUOTED_BYTES: usize = 60;

/// Status codes as a bit set over 100..=599, with the plan's own writing for messages.
#[derive(Debug, Clone)]
pub struct StatusSet {
    bits: [u64; 10],
    text: String,
}

impl StatusSet {
    /// `items`: codes ("200"), classes ("2xx") or inclusive ranges ("200-299"), all in 100..=599.
    pub fn parse(items: &[&str]) -> Result<StatusSet, String> {
        if items.is_empty() {
            return Err("status: at least one code, class or range".to_string());
        }
        let mut set = StatusSet { bits: [0; 10], text: format!("[{}]", items.join(", ")) };
        for (index, item) in items.iter().enumerate() {
            let (low, high) = status_range(item).ok_or_else(|| {
                format!("status[{index}] '{item}': a code in 100..=599, a class like '2xx' or a range like '200-299'")
            })?;
            (low..=high).for_each(|code| set.bits[usize::from(code / 64)] |= 1 << (code % 64));
        }
        Ok(set)
    }

    pub fn contains(&self, status: u16) -> bool {
        self.bits.get(usize::from(status / 64)).is_some_and(|word| word & (1 << (status % 64)) != 0)
    }
}

fn status_range(item: &str) -> Option<(u16, u16)> {
    let code = |s: &str| s.trim().parse::<u16>().ok().filter(|c| (100..=599).contains(c));
    let (low, high) = if let Some(class) = item.strip_suffix("xx").or_else(|| item.strip_suffix("XX")) {
        let hundreds = code(&format!("{class}00"))?;
        (hundreds, hundreds + 99)
    } else if let Some((low, high)) = item.split_once('-') {
        (code(low)?, code(high)?)
    } else {
        (code(item)?, code(item)?)
    };
    (low <= high).then_some((low, high))
}

#[derive(Debug)]
pub enum HeaderTest {
    Equals(Vec<u8>),
    Contains(Vec<u8>),
    Regex(Regex),
    Absent,
}

impl HeaderTest {
    pub fn regex(pattern: &str) -> Result<HeaderTest, String> {
        Ok(HeaderTest::Regex(pattern::compile(pattern)?))
    }
}

#[derive(Debug)]
pub enum JsonTest {
    Equals(Vec<u8>),
    Exists,
}

#[derive(Debug)]
pub enum Condition {
    Status(StatusSet),
    BodyContains(Template),
    BodyLacks(Template),
    BodyRegex(Regex),
    Header { name: String, test: HeaderTest },
    Json { path: JsonPath, text: String, test: JsonTest },
    LatencyBelow { ms: u32 },
}

impl Condition {
    pub fn status(items: &[&str]) -> Result<Condition, String> {
        StatusSet::parse(items).map(Condition::Status)
    }

    pub fn body_contains(text: &str, names: &Names<'_>) -> Result<Condition, String> {
        let template = Template::parse(text.as_bytes(), names, Place::Body);
        template.map(Condition::BodyContains).map_err(|e| format!("body_contains: {e}"))
    }

    pub fn body_lacks(text: &str, names: &Names<'_>) -> Result<Condition, String> {
        let template = Template::parse(text.as_bytes(), names, Place::Body);
        template.map(Condition::BodyLacks).map_err(|e| format!("body_lacks: {e}"))
    }

    pub fn body_regex(pattern: &str) -> Result<Condition, String> {
        pattern::compile(pattern).map(Condition::BodyRegex).map_err(|e| format!("body_regex: {e}"))
    }

    pub fn header(name: &str, test: HeaderTest) -> Result<Condition, String> {
        if name.is_empty() || name.len() > 256 || name.bytes().any(|b| b <= b' ' || b == 0x7f || b == b':') {
            return Err(format!("header.name {name:?}: 1 to 256 bytes without blanks, colons or control bytes"));
        }
        Ok(Condition::Header { name: name.to_string(), test })
    }

    pub fn json_path(path: &str, test: JsonTest) -> Result<Condition, String> {
        let parsed = JsonPath::parse(path).map_err(|e| format!("json_path.path {path:?}: {e}"))?;
        Ok(Condition::Json { path: parsed, text: path.to_string(), test })
    }

    pub fn latency_below_ms(ms: u32) -> Result<Condition, String> {
        if ms == 0 {
            return Err("latency_below_ms: above 0".to_string());
        }
        Ok(Condition::LatencyBelow { ms })
    }

    fn needs_body(&self) -> bool {
        !matches!(self, Condition::Status(_) | Condition::Header { .. } | Condition::LatencyBelow { .. })
    }
}

/// What a check said of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// The first failing condition, described in at most MAX_DESCRIPTION_BYTES.
    Fail(String),
}

#[derive(Debug)]
pub struct Check {
    name: String,
    conditions: Vec<Condition>,
}

impl Check {
    /// A check named `name` (1 to 64 bytes) of at least one condition.
    pub fn new(name: &str, conditions: Vec<Condition>) -> Result<Check, String> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(format!("check name {name:?}: 1 to {MAX_NAME_BYTES} bytes"));
        }
        if conditions.is_empty() {
            return Err(format!("check '{name}': no condition"));
        }
        Ok(Check { name: name.to_string(), conditions })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the response's body must be captured for this check.
    pub fn needs_body(&self) -> bool {
        self.conditions.iter().any(Condition::needs_body)
    }

    /// Tests the conditions in order; `scratch` holds a rendered template or a JSON value
    /// (the caller keeps it, so its capacity is reused).
    pub fn evaluate(&self, response: &Response<'_>, ctx: &mut Context<'_>, scratch: &mut Vec<u8>) -> Outcome {
        for condition in &self.conditions {
            if let Some(mut description) = failure(condition, response, ctx, scratch) {
                let body_condition = condition.needs_body() && !matches!(condition, Condition::Json { .. });
                if body_condition && response.body_truncated {
                    let _ = write!(description, " (only the body's first {} bytes were kept)", response.body.len());
                }
                return Outcome::Fail(bounded(description));
            }
        }
        Outcome::Pass
    }
}

/// None when `condition` holds, else what failed.
fn failure(
    condition: &Condition,
    response: &Response<'_>,
    ctx: &mut Context<'_>,
    scratch: &mut Vec<u8>,
) -> Option<String> {
    match condition {
        Condition::Status(set) => {
            (!set.contains(response.status)).then(|| format!("status {} not in {}", response.status, set.text))
        }
        Condition::BodyContains(template) | Condition::BodyLacks(template) => {
            scratch.clear();
            if let Err(refused) = template.render_into(scratch, ctx) {
                return Some(format!("body condition's template: {refused}"));
            }
            let contains = find(response.body, scratch);
            match condition {
                Condition::BodyContains(_) => (!contains).then(|| format!("body lacks {}", quoted(scratch))),
                _ => contains.then(|| format!("body contains {}", quoted(scratch))),
            }
        }
        Condition::BodyRegex(regex) => (!regex.is_match(response.body))
            .then(|| format!("body does not match {}", quoted(regex.as_str().as_bytes()))),
        Condition::Header { name, test } => header_failure(name, test, response.header(name.as_bytes())),
        Condition::Json { path, text, test } => json_failure(path, text, test, response, scratch),
        Condition::LatencyBelow { ms } => (response.latency_us >= u64::from(*ms) * 1000)
            .then(|| format!("latency {:.1} ms not below {ms} ms", response.latency_us as f64 / 1000.0)),
    }
}

fn header_failure(name: &str, test: &HeaderTest, value: Option<&[u8]>) -> Option<String> {
    let Some(value) = value else {
        return (!matches!(test, HeaderTest::Absent)).then(|| format!("header {name} absent"));
    };
    // Quoted only on a failure: a pass allocates nothing.
    let shown = || quoted(value);
    match test {
        HeaderTest::Equals(expected) => {
            (value != expected.as_slice()).then(|| format!("header {name} is {}, not {}", shown(), quoted(expected)))
        }
        HeaderTest::Contains(part) => {
            (!find(value, part)).then(|| format!("header {name} is {}, lacks {}", shown(), quoted(part)))
        }
        HeaderTest::Regex(regex) => (!regex.is_match(value))
            .then(|| format!("header {name} is {}, does not match {}", shown(), quoted(regex.as_str().as_bytes()))),
        HeaderTest::Absent => Some(format!("header {name} present: {}", shown())),
    }
}

fn json_failure(
    path: &JsonPath,
    text: &str,
    test: &JsonTest,
    response: &Response<'_>,
    scratch: &mut Vec<u8>,
) -> Option<String> {
    let Some(document) = response.json() else {
        return Some(format!("json {text}: body is not JSON"));
    };
    let nodes = path.query(document);
    let Some(first) = nodes.first() else {
        return Some(format!("json {text}: no value"));
    };
    let JsonTest::Equals(expected) = test else { return None };
    scratch.clear();
    if !json_text(first, scratch) {
        return Some(format!("json {text} is null, not {}", quoted(expected)));
    }
    (scratch != expected).then(|| format!("json {text} is {}, not {}", quoted(scratch), quoted(expected)))
}

/// Whether `needle` occurs in `haystack` (an empty needle always does).
fn find(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else { return true };
    let mut at = 0;
    while let Some(offset) = haystack.get(at..).and_then(|h| h.iter().position(|&b| b == first)) {
        let start = at + offset;
        if haystack[start + 1..].starts_with(rest) {
            return true;
        }
        at = start + 1;
    }
    false
}

/// `'bytes'`, as text (invalid UTF-8 replaced), cut after MAX_QUOTED_BYTES with "…".
fn quoted(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_QUOTED_BYTES)]);
    let cut = if bytes.len() > MAX_QUOTED_BYTES { "…" } else { "" };
    format!("'{}{cut}'", text.trim_end_matches('\u{fffd}'))
}

/// `description` in at most MAX_DESCRIPTION_BYTES, cut at a character with "…".
fn bounded(mut description: String) -> String {
    if description.len() > MAX_DESCRIPTION_BYTES {
        let mut end = MAX_DESCRIPTION_BYTES - "…".len();
        while !description.is_char_boundary(end) {
            end -= 1;
        }
        description.truncate(end);
        description.push('…');
    }
    description
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_finds_bytes_anywhere() {
        assert!(find(b"abcabd", b"abd"));
        assert!(find(b"abc", b""));
        assert!(!find(b"abcab", b"abd"));
        assert!(!find(b"", b"a"));
        assert!(find(b"a", b"a"));
    }

    #[test]
    fn descriptions_are_cut_at_200_bytes_on_a_character() {
        assert_eq!(bounded("short".into()), "short");
        let long = bounded("é".repeat(150));
        assert!(long.len() <= MAX_DESCRIPTION_BYTES && long.ends_with('…'), "{} bytes", long.len());
        assert_eq!(bounded("x".repeat(200)).len(), 200);
    }

    #[test]
    fn quoted_values_are_cut_at_60_bytes() {
        assert_eq!(quoted(b"ok"), "'ok'");
        assert_eq!(quoted(&[b'a'; 61]), format!("'{}…'", "a".repeat(60)));
        let split = format!("a{}", "é".repeat(30));
        assert_eq!(quoted(split.as_bytes()), format!("'a{}…'", "é".repeat(29)), "a cut character is dropped");
    }
}
