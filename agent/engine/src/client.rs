//! One closed-model client: sends a request, waits for the whole response, thinks,
//! and goes again, until the run is stopped or its share shrinks below it.

use std::rc::Rc;
use std::time::Instant;

use tokio::sync::watch;

use crate::http::{self, Connection};
use crate::job::{Job, Request};
use crate::rng::Rng;
use crate::run::{Control, Shared};
use crate::stats::Outcome;
use crate::wire::pb::ErrorKind;

/// A kept-alive connection and the statistics slot of the last request it carried.
struct Held {
    connection: Connection,
    owner: usize,
}

pub struct Client {
    id: u32,
    shared: Rc<Shared>,
    control: watch::Receiver<Control>,
    rng: Rng,
    /// One connection per target, so that weighted target picks can keep connections alive.
    held: Vec<Option<Held>>,
}

impl Client {
    pub fn new(id: u32, shared: Rc<Shared>, control: watch::Receiver<Control>) -> Self {
        let held = shared.job.targets.iter().map(|_| None).collect();
        let seed = u64::from(id) << 32 | u64::from(std::process::id());
        Client { id, shared, control, rng: Rng::new(seed), held }
    }

    pub async fn run(mut self) {
        let shared = Rc::clone(&self.shared);
        let job = &shared.job;
        while self.control.borrow().runs(self.id) {
            let target = job.target_choice.pick(&mut self.rng);
            let request = &job.requests[job.request_choice.pick(&mut self.rng)];
            let slot = shared.stats.borrow().slot(target, request.name);
            let began = Instant::now();
            let (outcome, bytes_in, bytes_out) = self.send(target, request, slot).await;
            let latency_us = began.elapsed().as_micros() as u64;
            shared.stats.borrow_mut().record(slot, outcome, latency_us, bytes_in, bytes_out);

            let think = self.control.borrow().think;
            if !think.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(think) => {}
                    _ = self.control.wait_for(|c| !c.runs(self.id)) => {}
                }
            }
        }
        for target in 0..self.held.len() {
            self.close(target);
        }
    }

    /// One request on the target's connection (connecting if needed): outcome, bytes in, bytes out.
    async fn send(&mut self, target: usize, request: &Request, slot: usize) -> (Outcome, u64, u64) {
        let shared = Rc::clone(&self.shared);
        let job: &Job = &shared.job;
        let wire = &request.wire[target];
        let mut bytes_out = 0;
        loop {
            let reused = match &mut self.held[target] {
                Some(held) => {
                    self.shared.stats.borrow_mut().connection_moved(held.owner, slot);
                    held.owner = slot;
                    true
                }
                None => match http::connect(job.targets[target].addr, job.connect_timeout).await {
                    Ok(connection) => {
                        self.shared.stats.borrow_mut().connection_opened(slot);
                        self.held[target] = Some(Held { connection, owner: slot });
                        false
                    }
                    Err(failure) => return (Outcome::Failed { kind: failure.kind, message: failure.message }, 0, 0),
                },
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
        }
    }
}
