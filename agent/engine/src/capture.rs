//! What a journey request keeps of its response while the connection reads it: the head's
//! bytes (copied before the body's reads reuse the connection's buffer) and, when an
//! extraction or a check reads the body, the body up to a cap (a chunked body de-chunked,
//! since only chunk data is passed here). The static path keeps nothing (no Inspection).
//!
//! Bounds: a head is at most the connection's 64 KiB head limit; a body at most
//! `max_body_bytes` (JobSpec, 256 KiB by default, at most 16 MiB), beyond which it is cut and
//! marked truncated. Inspections live in a per-engine `Pool` (at most MAX_POOLED kept) and
//! are taken only while a response is read and judged, so their memory grows with the
//! requests in flight, not with the users.

/// Inspections kept for reuse by one engine.
pub const MAX_POOLED: usize = 64;

#[derive(Debug, Default)]
pub struct Inspection {
    head: Vec<u8>,
    body: Vec<u8>,
    capture_body: bool,
    max_body: usize,
    truncated: bool,
}

impl Inspection {
    /// Ready for a new response: the body kept (up to `max_body` bytes) only if `capture_body`.
    pub fn start(&mut self, capture_body: bool, max_body: usize) {
        self.head.clear();
        self.body.clear();
        (self.capture_body, self.max_body, self.truncated) = (capture_body, max_body, false);
    }

    /// The response's head (status line and headers, its empty line included); a later head
    /// (after an interim 1xx) replaces an earlier one, and so does the body it had.
    pub fn keep_head(&mut self, head: &[u8]) {
        self.head.clear();
        self.head.extend_from_slice(head);
        self.body.clear();
        self.truncated = false;
    }

    /// Body bytes as they are read, in order.
    pub fn keep_body(&mut self, bytes: &[u8]) {
        if !self.capture_body {
            return;
        }
        let room = self.max_body - self.body.len();
        if bytes.len() > room {
            self.truncated = true;
        }
        self.body.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    pub fn head(&self) -> &[u8] {
        &self.head
    }

    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body was longer than the cap: only its start was kept.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The head's header lines as (name, value), in order; lines without a colon skipped
    /// (httparse has accepted the head before it is kept, so there are none).
    pub fn header_lines(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut lines = self.head.split(|&b| b == b'\n');
        lines.next(); // the status line
        lines.filter_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let colon = line.iter().position(|&b| b == b':')?;
            Some((&line[..colon], line[colon + 1..].trim_ascii()))
        })
    }
}

/// Inspections of one engine, reused so that a response's head and body cost no allocation
/// once the pool is warm.
#[derive(Debug, Default)]
pub struct Pool {
    kept: Vec<Inspection>,
}

impl Pool {
    pub fn take(&mut self) -> Inspection {
        self.kept.pop().unwrap_or_default()
    }

    /// Keeps `inspection` for the next response unless MAX_POOLED are kept; a buffer past
    /// `max_body` bytes (an outsized head) is given back to the allocator.
    pub fn give_back(&mut self, mut inspection: Inspection, max_body: usize) {
        if self.kept.len() >= MAX_POOLED {
            return;
        }
        inspection.head.clear();
        inspection.body.clear();
        inspection.head.shrink_to(max_body);
        inspection.body.shrink_to(max_body);
        self.kept.push(inspection);
    }

    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_kept_up_to_the_cap_and_marked_cut() {
        let mut inspection = Inspection::default();
        inspection.start(true, 5);
        inspection.keep_head(b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Empty:\r\n\r\n");
        inspection.keep_body(b"abc");
        assert!(!inspection.truncated());
        inspection.keep_body(b"def");
        inspection.keep_body(b"g");
        assert_eq!((inspection.body(), inspection.truncated()), (&b"abcde"[..], true));
        let lines: Vec<_> = inspection.header_lines().collect();
        assert_eq!(lines, [(&b"Set-Cookie"[..], &b"a=1"[..]), (&b"X-Empty"[..], &b""[..])]);
    }

    #[test]
    fn nothing_of_the_body_is_kept_unless_asked() {
        let mut inspection = Inspection::default();
        inspection.start(false, 5);
        inspection.keep_body(b"abc");
        assert_eq!((inspection.body(), inspection.truncated()), (&b""[..], false));
    }

    #[test]
    fn the_pool_keeps_at_most_64() {
        let mut pool = Pool::default();
        for _ in 0..MAX_POOLED + 3 {
            pool.give_back(Inspection::default(), 16);
        }
        assert_eq!(pool.len(), MAX_POOLED);
        let mut big = pool.take();
        big.start(true, 1 << 20);
        big.keep_body(&vec![b'x'; 1 << 20]);
        pool.give_back(big, 1024);
        assert!(pool.take().body.capacity() <= 1024, "an outsized buffer is shrunk back");
    }
}
