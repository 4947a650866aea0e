//! An HTTP/2 stream's failure as data: the h2 crate's error mapped to an error kind (the
//! RST_STREAM codes a server uses under load each have their own; GOAWAY apart from them), and
//! whether the server never processed the request (RFC 9113 8.7), so that it may go again.

use h2::Reason;

use crate::failure::Failure;
use crate::h2live::Sniff;
use crate::http::io_error_kind;
use crate::wire::pb::ErrorKind;

/// A request the server did not process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unprocessed {
    /// REFUSED_STREAM: the stream only; its connection goes on.
    StreamOnly,
    /// Never sent, or above a graceful GOAWAY's last stream id: the connection is going away.
    Connection,
}

/// `sent`: the request went out (its headers were handed to the connection).
pub fn h2_failure(error: &h2::Error, sniff: &Sniff, sent: bool) -> (Failure, Option<Unprocessed>) {
    if sniff.answered_http1() {
        let message = "the server answered the HTTP/2 preface in HTTP/1.x: it does not speak h2c \
                       (targets.protocol h2c; use http1)";
        return (Failure::new(ErrorKind::H2Protocol, message), None);
    }
    let reason = error.reason();
    let message = format!("HTTP/2: {error}");
    if error.is_go_away() && error.is_remote() {
        // The h2 crate fails the streams above the last stream id with the GOAWAY itself; one
        // with NO_ERROR (a graceful shutdown, as nginx after keepalive_requests) ends every
        // stream below that id normally, so a stream it fails was not processed.
        return if reason == Some(Reason::NO_ERROR) || !sent {
            (Failure::new(ErrorKind::H2GoawayUnprocessed, message), Some(Unprocessed::Connection))
        } else {
            (Failure::new(ErrorKind::H2Goaway, message), None)
        };
    }
    if error.is_reset() && error.is_remote() {
        let (kind, unprocessed) = match reason {
            Some(Reason::REFUSED_STREAM) => (ErrorKind::H2RefusedStream, Some(Unprocessed::StreamOnly)),
            Some(Reason::INTERNAL_ERROR) => (ErrorKind::H2RstInternal, None),
            Some(Reason::CANCEL) => (ErrorKind::H2RstCancel, None),
            Some(Reason::ENHANCE_YOUR_CALM) => (ErrorKind::H2RstEnhanceYourCalm, None),
            _ => (ErrorKind::H2RstOther, None),
        };
        return (Failure::new(kind, message), unprocessed);
    }
    if let Some(e) = error.get_io() {
        // A connection that broke before the request went out: it never reached the server.
        return (Failure::new(io_error_kind(e), message), (!sent).then_some(Unprocessed::Connection));
    }
    if !sent {
        // The connection refused a new stream (it is going away or gone): not the server's
        // answer to this request.
        return (Failure::new(ErrorKind::H2GoawayUnprocessed, message), Some(Unprocessed::Connection));
    }
    let kind = match reason {
        Some(Reason::PROTOCOL_ERROR | Reason::FRAME_SIZE_ERROR | Reason::COMPRESSION_ERROR) => ErrorKind::H2Protocol,
        Some(Reason::FLOW_CONTROL_ERROR | Reason::STREAM_CLOSED | Reason::SETTINGS_TIMEOUT) => ErrorKind::H2Protocol,
        _ => ErrorKind::Other,
    };
    (Failure::new(kind, message), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_answering_http1_is_named_whatever_the_error() {
        let sniff = Sniff::default();
        let error = h2::Error::from(Reason::PROTOCOL_ERROR);
        assert_eq!(h2_failure(&error, &sniff, true).0.kind, ErrorKind::H2Protocol);
        let http1 = Sniff::default();
        http1.note(b"HTTP/1.1 400 Bad Request\r\n");
        let (failure, unprocessed) = h2_failure(&error, &http1, true);
        assert!(failure.message.contains("does not speak h2c"), "{}", failure.message);
        assert_eq!(unprocessed, None);
    }

    #[test]
    fn a_stream_refused_before_it_went_out_goes_again() {
        let (error, sniff) = (h2::Error::from(Reason::PROTOCOL_ERROR), Sniff::default());
        let (failure, unprocessed) = h2_failure(&error, &sniff, false);
        assert_eq!((failure.kind, unprocessed), (ErrorKind::H2GoawayUnprocessed, Some(Unprocessed::Connection)));
        let (failure, unprocessed) = h2_failure(&error, &sniff, true);
        assert_eq!((failure.kind, unprocessed), (ErrorKind::H2Protocol, None));
        let other = h2::Error::from(Reason::HTTP_1_1_REQUIRED);
        assert_eq!(h2_failure(&other, &sniff, true).0.kind, ErrorKind::Other);
    }
}
