//! How one exchange failed: what the connection (http.rs) and the response head's reader
//! (head.rs) return, and what a driver records as the request's error.

use crate::wire::pb::ErrorKind;

#[derive(Debug)]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
    /// Nothing of a response arrived: on a reused keep-alive connection this is the
    /// server having closed it while idle, and the request may be sent again.
    pub nothing_received: bool,
}

impl Failure {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure { kind, message: message.into(), nothing_received: false }
    }
}
