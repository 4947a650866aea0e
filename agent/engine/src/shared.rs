//! The state of a running job that every driver (closed.rs, open.rs, visitors.rs, and their
//! connections in conns.rs) reads: the `Control` they follow, and the `Shared` job, statistics
//! and budget. run.rs owns both and steers them; the drivers only read and count.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;

use crate::capture::Pool;
use crate::h2pool::H2Pool;
use crate::head::RecentHead;
use crate::http::DISCARD_BUFFER_BYTES;
use crate::job::Job;
use crate::load::Think;
use crate::reactor::Reactor;
use crate::stats::Stats;

/// What the drivers follow; changed by ramps, adjust and stop.
#[derive(Debug, Clone, Copy)]
pub struct Control {
    pub stopped: bool,
    /// Closed and users models: clients 0..clients run.
    pub clients: u32,
    /// Open model.
    pub rate_per_s: f64,
    pub think: Think,
}

impl Control {
    pub fn runs(&self, client: u32) -> bool {
        !self.stopped && client < self.clients
    }
}

/// What every driver of the job reads.
pub struct Shared {
    pub job: Job,
    pub stats: RefCell<Stats>,
    pub in_flight: Cell<u64>,
    /// Readiness of the plain TCP sockets (see `reactor.rs`).
    pub reactor: Rc<Reactor>,
    /// Where every connection's response bodies are read and dropped (see `Connection::exchange`).
    pub discard: RefCell<Vec<u8>>,
    /// The last head read for each (request, target): `recent_head`. O(requests × targets).
    recent_heads: Vec<RefCell<RecentHead>>,
    /// What journey requests keep of their responses while they are read (capture.rs).
    pub inspections: RefCell<Pool>,
    started: Cell<u64>,
    /// The request budget (0: none); the job's, raised when a lost agent's share is handed over.
    max_requests: Rc<Cell<u64>>,
    /// Clients that completed their sessions' repetitions: not started again.
    retired: RefCell<HashSet<u32>>,
    /// The job's HTTP/2 connections, shared by its drivers (h2pool.rs).
    pub h2: H2Pool,
}

impl Shared {
    /// `max_requests`: the budget, which its owner (the run's steering) may raise.
    pub fn new(job: Job, reactor: Rc<Reactor>, max_requests: Rc<Cell<u64>>) -> Self {
        Shared {
            stats: RefCell::new(Stats::new(&job)),
            h2: H2Pool::new(&job),
            recent_heads: (0..job.requests.len() * job.targets.len()).map(|_| RefCell::default()).collect(),
            job,
            in_flight: Cell::new(0),
            reactor,
            discard: RefCell::new(vec![0; DISCARD_BUFFER_BYTES]),
            inspections: RefCell::default(),
            started: Cell::new(0),
            max_requests,
            retired: RefCell::new(HashSet::new()),
        }
    }

    /// A user found no row of a unique feed left: with `stop_user` it ends, counted as stopped
    /// under `slot`; with `stop_run` the engine's load ends (`take_ticket`), not counted.
    pub fn out_of_rows(&self, slot: usize) {
        if !self.feed_halted() {
            self.stats.borrow_mut().user_stopped(slot);
        }
    }

    /// Permission to start one more request: false once the budget is spent.
    pub fn take_ticket(&self) -> bool {
        if self.feed_halted() {
            return false; // a unique feed ran out of rows and the plan stops the run
        }
        let started = self.started.get();
        let budget = self.max_requests.get();
        if budget > 0 && started >= budget {
            return false;
        }
        self.started.set(started + 1);
        true
    }

    pub fn recent_head(&self, target: usize, request: usize) -> &RefCell<RecentHead> {
        &self.recent_heads[request * self.job.targets.len() + target]
    }

    /// Every request of the budget started and ended (never with no budget), or a unique
    /// feed's rows ran out under `stop_run` and the requests in flight ended: the load is done.
    pub fn budget_spent(&self) -> bool {
        let budget = self.max_requests.get();
        let spent = budget > 0 && self.started.get() >= budget;
        (spent || self.feed_halted()) && self.in_flight.get() == 0
    }

    fn feed_halted(&self) -> bool {
        self.job.journeys.as_ref().and_then(|j| j.feed.as_ref()).is_some_and(|f| f.halted())
    }

    pub fn retire(&self, client: u32) {
        self.retired.borrow_mut().insert(client);
    }

    pub fn is_retired(&self, client: u32) -> bool {
        self.retired.borrow().contains(&client)
    }
}
