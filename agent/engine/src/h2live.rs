//! An HTTP/2 connection as the pool holds it (h2pool.rs), and what its server answered first
//! (h2conn.rs notes it; h2error.rs names a server that answered in HTTP/1.x). A leaf module.

use std::cell::Cell;
use std::rc::Rc;

use bytes::Bytes;
use h2::client::SendRequest;

/// A live HTTP/2 connection: where requests are sent, and what its server answered first.
pub struct Live {
    pub send: SendRequest<Bytes>,
    pub sniff: Rc<Sniff>,
}

/// The first bytes a server sent: "HTTP/" when it answered our HTTP/2 preface in HTTP/1.x.
#[derive(Default)]
pub struct Sniff {
    first: Cell<[u8; 5]>,
    seen: Cell<usize>,
}

impl Sniff {
    pub fn answered_http1(&self) -> bool {
        self.seen.get() == 5 && &self.first.get() == b"HTTP/"
    }

    pub(crate) fn note(&self, bytes: &[u8]) {
        let seen = self.seen.get();
        if seen < 5 {
            let mut first = self.first.get();
            let n = (5 - seen).min(bytes.len());
            first[seen..seen + n].copy_from_slice(&bytes[..n]);
            self.first.set(first);
            self.seen.set(seen + n);
        }
    }
}
