//! The connections of one client (closed model) or worker (open model): at most one per
//! target, reused when keep-alive is on. `request` sends one request and records it.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::http::{self, Connection};
use crate::run::Shared;
use crate::stats::Outcome;
use crate::wire::pb::ErrorKind;

/// How long a client waits after a connect failed for want of the generator's own
/// descriptors or ports: one frees only when another connection closes, and retrying at
/// once would spin.
const LOCAL_EXHAUSTION_PAUSE: Duration = Duration::from_millis(1);

/// A connect can fail without ever waiting (socket() failing with EMFILE, bind() with
/// EADDRNOTAVAIL): a client without think time would then loop without yielding and starve
/// the runtime (its timers, its reports). So a failed connect always yields, and waits a
/// little when the generator itself ran out.
async fn pause_after_failed_connect(kind: ErrorKind) {
    if matches!(kind, ErrorKind::LocalFds | ErrorKind::LocalPorts) {
        tokio::time::sleep(LOCAL_EXHAUSTION_PAUSE).await;
    } else {
        tokio::task::yield_now().await;
    }
}

/// A kept-alive connection and the statistics slot of the last request it carried.
struct Held {
    connection: Connection,
    owner: usize,
}

pub struct Connections {
    shared: Rc<Shared>,
    /// One per target, so that weighted target picks can keep connections alive.
    held: Vec<Option<Held>>,
    /// Read buffers of closed connections, for the next ones (no allocation per connect).
    spare_buffers: Vec<Vec<u8>>,
}

impl Connections {
    pub fn new(shared: &Rc<Shared>) -> Self {
        Connections { shared: Rc::clone(shared), held: shared.job.targets.iter().map(|_| None).collect(), spare_buffers: Vec::new() }
    }

    /// Sends request number `request` to target number `target` and records how it ended.
    /// Latency runs from `due`: when the request was meant to go out.
    pub async fn request(&mut self, target: usize, request: usize, due: Instant) {
        let shared = Rc::clone(&self.shared);
        let slot = shared.stats.borrow().slot(target, shared.job.requests[request].name);
        shared.in_flight.set(shared.in_flight.get() + 1);
        let (outcome, bytes_in, bytes_out) = self.send(target, request, slot).await;
        let latency_us = due.elapsed().as_micros() as u64;
        shared.stats.borrow_mut().record(slot, outcome, latency_us, bytes_in, bytes_out);
        shared.in_flight.set(shared.in_flight.get() - 1);
    }

    pub fn close_all(&mut self) {
        for target in 0..self.held.len() {
            self.close(target);
        }
    }

    /// One exchange on the target's connection (connecting if needed): outcome, bytes in, bytes out.
    async fn send(&mut self, target: usize, request: usize, slot: usize) -> (Outcome, u64, u64) {
        let shared = Rc::clone(&self.shared);
        let job = &shared.job;
        let request = &job.requests[request];
        let wire = &request.wire[target];
        let mut bytes_out = 0;
        loop {
            let reused = match &mut self.held[target] {
                Some(held) => {
                    shared.stats.borrow_mut().connection_moved(held.owner, slot);
                    held.owner = slot;
                    true
                }
                None => {
                    let buffer = self.spare_buffers.pop().unwrap_or_else(|| vec![0; http::INITIAL_BUFFER_BYTES]);
                    match http::connect(job.targets[target].addr, job.connect_timeout, job.targets[target].tls.as_ref(), buffer).await {
                    Ok(connection) => {
                        shared.stats.borrow_mut().connection_opened(slot);
                        self.held[target] = Some(Held { connection, owner: slot });
                        false
                    }
                    Err(failure) => {
                        pause_after_failed_connect(failure.kind).await;
                        return (Outcome::Failed { kind: failure.kind, message: failure.message }, 0, 0);
                    }
                    }
                }
            };
            let connection = &mut self.held[target].as_mut().expect("held above").connection;
            bytes_out += wire.len() as u64;
            let result = tokio::time::timeout(job.request_timeout, connection.exchange(wire, request.head)).await;
            match result {
                Ok(Ok(response)) => {
                    if !(response.reusable && job.keep_alive) {
                        self.close(target);
                    }
                    return (Outcome::Response { status: response.status }, response.bytes_in, bytes_out);
                }
                Ok(Err(failure)) => {
                    self.close(target);
                    // An idle keep-alive connection the server had already closed: not the
                    // request's fault, so it goes again on a new connection.
                    if reused && failure.nothing_received {
                        continue;
                    }
                    return (Outcome::Failed { kind: failure.kind, message: failure.message }, 0, bytes_out);
                }
                Err(_) => {
                    self.close(target);
                    let message = format!("no complete response within {:?}", job.request_timeout);
                    return (Outcome::Failed { kind: ErrorKind::Timeout, message }, 0, bytes_out);
                }
            }
        }
    }

    fn close(&mut self, target: usize) {
        if let Some(held) = self.held[target].take() {
            self.shared.stats.borrow_mut().connection_closed(held.owner);
            self.spare_buffers.push(held.connection.into_buffer());
        }
    }
}
