//! A user's cookie jar: the RFC 6265 rules (domain and host-only, path, Max-Age over
//! Expires, Secure, HttpOnly, replacement, deletion) are cookie_store's, wrapped for a load
//! generator's needs:
//!
//! - cookie_store allocates on every lookup (`matches` collects a Vec and walks nested
//!   maps), so the `Cookie:` value of a request is cached: recomputed only when the jar
//!   changed, or when the earliest expiry in it has passed (both bump a generation counter).
//!   Per request URL (a key the job gives each (target, path)) the jar keeps which cookies
//!   matched at which generation, 16 bytes a key, and one rendered value for the last
//!   selection: a journey whose requests all get the same cookies renders it once.
//! - cookie_store has no bound and keeps expired cookies: here a jar holds at most
//!   `max_cookies` cookies (default 16, at most 64) of at most `max_bytes` together (default
//!   8 KiB, at most 64 KiB), each at most 4 KiB (RFC 6265 §6.1's minimum, measured as it
//!   says: name, value and attributes, i.e. the Set-Cookie value's length). A cookie past
//!   the caps evicts the oldest (counted); expired cookies are purged on every store and
//!   when a lookup passes the earliest expiry. So a jar holds at most about 2 × max_bytes
//!   (cookie_store's copy and the keys kept here) plus map overhead.
//! - Time is the caller's (`now_ms`, Unix milliseconds), so expiry is tested without
//!   waiting: Max-Age counts from the `now_ms` of the store, Expires is a date.

use cookie_store::{Cookie, CookieError, CookieStore};
use url::Url;

pub const DEFAULT_MAX_COOKIES: usize = 16;
pub const DEFAULT_MAX_BYTES: usize = 8 * 1024;
/// A cookie's bytes (RFC 6265 §6.1: at least 4096 must be kept).
pub const MAX_COOKIE_BYTES: usize = 4096;
/// The largest `max_cookies` (a key's selection is a 64-bit mask).
pub const MAX_COOKIES_LIMIT: usize = 64;
/// The largest `max_bytes`: a jar lives as long as its user, 10,000 users to an engine.
pub const MAX_BYTES_LIMIT: usize = 64 * 1024;

/// A jar's caps, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JarLimits {
    max_cookies: usize,
    max_bytes: usize,
}

impl Default for JarLimits {
    fn default() -> Self {
        JarLimits { max_cookies: DEFAULT_MAX_COOKIES, max_bytes: DEFAULT_MAX_BYTES }
    }
}

impl JarLimits {
    /// `max_cookies` in 1..=64, `max_bytes` in 4096..=65536 (a jar must hold one cookie of
    /// the RFC's size); the message names the field.
    pub fn new(max_cookies: usize, max_bytes: usize) -> Result<JarLimits, String> {
        if !(1..=MAX_COOKIES_LIMIT).contains(&max_cookies) {
            return Err(format!("cookies.max_cookies {max_cookies} is not in 1..={MAX_COOKIES_LIMIT}"));
        }
        if !(MAX_COOKIE_BYTES..=MAX_BYTES_LIMIT).contains(&max_bytes) {
            return Err(format!("cookies.max_bytes {max_bytes} is not in {MAX_COOKIE_BYTES}..={MAX_BYTES_LIMIT}"));
        }
        Ok(JarLimits { max_cookies, max_bytes })
    }
}

/// What a Set-Cookie did to the jar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    Added,
    /// A cookie of the same name, domain and path was replaced (it keeps its age).
    Replaced,
    /// An expired cookie (Max-Age=0, an Expires in the past) removed its namesake.
    Deleted,
    /// An expired cookie with no namesake: nothing to do.
    AlreadyExpired,
    Refused(Refusal),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not UTF-8.
    NotText,
    /// Over MAX_COOKIE_BYTES.
    TooLong { bytes: usize },
    /// Not a cookie (no name=value pair).
    Invalid,
    /// A Domain attribute the request's host is not in (RFC 6265 §5.3 step 6).
    OtherDomain,
}

/// What the jar did, for the interval's figures; `take_counts` returns and zeroes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JarCounts {
    pub stored: u64,
    pub deleted: u64,
    pub refused: u64,
    /// Oldest cookies dropped to keep the caps.
    pub evicted: u64,
    /// Cookies purged because they expired.
    pub expired: u64,
    /// Times a key's matching cookies were worked out again (the cache missed).
    pub recomputed: u64,
}

/// A stored cookie's key in cookie_store and what the caps and expiry need of it.
#[derive(Debug)]
struct Entry {
    domain: String,
    path: String,
    name: String,
    bytes: usize,
    /// Unix ms; None: a session cookie.
    expires_ms: Option<u64>,
}

#[derive(Debug)]
pub struct Jar {
    store: CookieStore,
    limits: JarLimits,
    /// Oldest first: replacing a cookie keeps its place.
    entries: Vec<Entry>,
    bytes: usize,
    earliest_expiry_ms: u64,
    generation: u64,
    /// Per URL key: (generation, which entries matched).
    selections: Vec<(u64, u64)>,
    header: Vec<u8>,
    header_of: (u64, u64),
    counts: JarCounts,
}

impl Jar {
    /// An empty jar for `url_keys` request URLs (keys 0..url_keys).
    pub fn new(limits: JarLimits, url_keys: usize) -> Jar {
        Jar {
            store: CookieStore::default(),
            limits,
            entries: Vec::new(),
            bytes: 0,
            earliest_expiry_ms: u64::MAX,
            generation: 1,
            selections: vec![(0, 0); url_keys],
            header: Vec::new(),
            header_of: (0, 0),
            counts: JarCounts::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The stored cookies' bytes, as the caps count them.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Changes whenever what the jar would send may have changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn take_counts(&mut self) -> JarCounts {
        std::mem::take(&mut self.counts)
    }

    /// Stores one Set-Cookie header value received for `url`.
    pub fn store(&mut self, set_cookie: &[u8], url: &Url, now_ms: u64) -> Stored {
        self.purge(now_ms);
        let stored = match self.parse(set_cookie, url) {
            Ok(cookie) => self.keep(cookie, set_cookie.len(), url, now_ms),
            Err(refusal) => Stored::Refused(refusal),
        };
        match stored {
            Stored::Added | Stored::Replaced => self.counts.stored += 1,
            Stored::Deleted => self.counts.deleted += 1,
            Stored::AlreadyExpired => {}
            Stored::Refused(_) => self.counts.refused += 1,
        }
        stored
    }

    fn parse<'a>(&self, set_cookie: &'a [u8], url: &Url) -> Result<Cookie<'a>, Refusal> {
        if set_cookie.len() > MAX_COOKIE_BYTES {
            return Err(Refusal::TooLong { bytes: set_cookie.len() });
        }
        let text = std::str::from_utf8(set_cookie).map_err(|_| Refusal::NotText)?;
        Cookie::parse(text, url).map_err(|e| match e {
            CookieError::DomainMismatch => Refusal::OtherDomain,
            _ => Refusal::Invalid,
        })
    }

    fn keep(&mut self, cookie: Cookie<'_>, bytes: usize, url: &Url, now_ms: u64) -> Stored {
        let entry = Entry {
            domain: String::from(&cookie.domain),
            path: String::from(&cookie.path),
            name: cookie.name().to_string(),
            bytes,
            expires_ms: expiry_ms(&cookie, now_ms),
        };
        let existing =
            self.entries.iter().position(|e| e.name == entry.name && e.domain == entry.domain && e.path == entry.path);
        if entry.expires_ms.is_some_and(|at| at <= now_ms) {
            let Some(index) = existing else { return Stored::AlreadyExpired };
            self.remove(index);
            self.changed();
            return Stored::Deleted;
        }
        if self.store.insert(cookie.into_owned(), url).is_err() {
            return Stored::Refused(Refusal::Invalid);
        }
        let stored = match existing {
            Some(index) => {
                self.bytes = self.bytes - self.entries[index].bytes + entry.bytes;
                self.entries[index] = entry;
                Stored::Replaced
            }
            None => {
                self.bytes += entry.bytes;
                self.entries.push(entry);
                Stored::Added
            }
        };
        while self.entries.len() > self.limits.max_cookies || self.bytes > self.limits.max_bytes {
            self.remove(0);
            self.counts.evicted += 1;
        }
        self.changed();
        stored
    }

    fn remove(&mut self, index: usize) {
        let entry = self.entries.remove(index);
        self.store.remove(&entry.domain, &entry.path, &entry.name);
        self.bytes -= entry.bytes;
    }

    fn changed(&mut self) {
        self.generation += 1;
        self.earliest_expiry_ms = self.entries.iter().filter_map(|e| e.expires_ms).min().unwrap_or(u64::MAX);
    }

    /// Drops the cookies expired at `now_ms`.
    fn purge(&mut self, now_ms: u64) {
        if now_ms < self.earliest_expiry_ms {
            return;
        }
        let before = self.entries.len();
        let mut index = 0;
        while index < self.entries.len() {
            if self.entries[index].expires_ms.is_some_and(|at| at <= now_ms) {
                self.remove(index);
            } else {
                index += 1;
            }
        }
        self.counts.expired += (before - self.entries.len()) as u64;
        self.changed();
    }

    /// The `Cookie:` header's value for a request to `url` (URL key `key`), empty when no
    /// cookie matches: longer paths first, then older first (RFC 6265 §5.4). Panics on a
    /// key past the `url_keys` the jar was made for (keys are the job's, so that is a bug).
    pub fn header_for(&mut self, key: usize, url: &Url, now_ms: u64) -> &[u8] {
        self.purge(now_ms);
        let (generation, mut selection) = self.selections[key];
        if generation != self.generation {
            selection = self.select(url);
            self.selections[key] = (self.generation, selection);
            self.counts.recomputed += 1;
        }
        if self.header_of != (self.generation, selection) {
            self.render(selection);
            self.header_of = (self.generation, selection);
        }
        &self.header
    }

    /// The `Cookie:` header's value for a URL that has no key (a redirect's hop): selected
    /// afresh, not cached.
    pub fn header_for_url(&mut self, url: &Url, now_ms: u64) -> &[u8] {
        self.purge(now_ms);
        let selection = self.select(url);
        if self.header_of != (self.generation, selection) {
            self.render(selection);
            self.header_of = (self.generation, selection);
        }
        &self.header
    }

    /// Which entries cookie_store says `url` gets.
    fn select(&self, url: &Url) -> u64 {
        let mut selection = 0u64;
        for (index, e) in self.entries.iter().enumerate() {
            if self.store.get_any(&e.domain, &e.path, &e.name).is_some_and(|c| c.matches(url)) {
                selection |= 1 << index;
            }
        }
        selection
    }

    fn render(&mut self, selection: u64) {
        let mut order = [0u8; MAX_COOKIES_LIMIT];
        let mut count = 0;
        for index in (0..self.entries.len()).filter(|&i| selection & (1 << i) != 0) {
            order[count] = index as u8;
            count += 1;
        }
        // Index order is age order: sorting by (longer path, index) is RFC 6265's order.
        order[..count].sort_unstable_by_key(|&i| (usize::MAX - self.entries[usize::from(i)].path.len(), i));
        self.header.clear();
        for &index in &order[..count] {
            let e = &self.entries[usize::from(index)];
            let Some(cookie) = self.store.get_any(&e.domain, &e.path, &e.name) else { continue };
            if !self.header.is_empty() {
                self.header.extend_from_slice(b"; ");
            }
            let (name, value) = cookie.name_value();
            self.header.extend_from_slice(name.as_bytes());
            self.header.push(b'=');
            self.header.extend_from_slice(value.as_bytes());
        }
    }

    /// Empty, as at a session's start (a restart); counts and URL keys kept.
    pub fn reset(&mut self) {
        self.store.clear();
        self.entries.clear();
        self.bytes = 0;
        self.changed();
    }
}

/// When `cookie` expires, in Unix ms: Max-Age (from `now_ms`) wins over Expires (RFC 6265
/// §5.3 step 3); neither: a session cookie.
fn expiry_ms(cookie: &Cookie<'_>, now_ms: u64) -> Option<u64> {
    if let Some(max_age) = cookie.max_age() {
        let seconds = u64::try_from(max_age.whole_seconds()).unwrap_or(0);
        return Some(now_ms.saturating_add(seconds.saturating_mul(1000)));
    }
    let at = cookie.expires_datetime()?;
    Some(u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
}
