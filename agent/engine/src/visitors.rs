//! Open model with a session (Tsung's arrival phases): users arrive at the rate whatever the
//! server does, and each walks the session on a connection of its own, to the one target
//! picked at its arrival (as a Tsung user keeps its server), thinking between steps, then
//! leaves. A slow server does not slow the arrivals down: it keeps its users
//! longer, so the users in progress grow (what Tsung's "users" graph shows).
//!
//! Latency of a user's first request counts from its arrival (the due time, as for the open
//! model's requests); the later ones from when the user sends them, after its think time.
//! A user whose request ends without a response (refused, timed out, reset) leaves, as a
//! Tsung user's session is aborted on an error: what piles up on a failing server is its
//! backlog, not users who would have given up.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use crate::conns::Connections;
use crate::shared::{Control, Shared};
use crate::user::{follow, UserState, Walker};

/// The users in progress of one job, at most `max` (the open model's `max_connections`:
/// each user holds its own connection). An arrival beyond it is counted as not sent, so
/// the engine's memory stays bounded by `max` users whatever the server does.
pub struct Visitors {
    live: Cell<u32>,
    max: u32,
    arrived: Cell<u64>,
    all_left: Notify,
}

impl Visitors {
    pub fn new(max: u32) -> Self {
        Visitors { live: Cell::new(0), max, arrived: Cell::new(0), all_left: Notify::new() }
    }

    /// A user arrives at `due` (counted as scheduled) and starts the session with a request
    /// to `target`, whose ticket the scheduler has taken.
    pub fn arrive(
        self: &Rc<Self>,
        shared: &Rc<Shared>,
        control: &watch::Receiver<Control>,
        due: Instant,
        target: usize,
    ) {
        let session = shared.job.session.as_ref().expect("visitors walk the job's session");
        // The session's first request: its first `once` step's, if it has one.
        let request = session.once.first().unwrap_or(&session.steps[0]).request;
        let first = shared.stats.borrow().slot(target, shared.job.requests[request].name);
        shared.stats.borrow_mut().scheduled(first);
        if self.live.get() >= self.max {
            shared.stats.borrow_mut().not_sent(first);
            return;
        }
        self.live.set(self.live.get() + 1);
        self.arrived.set(self.arrived.get() + 1);
        shared.stats.borrow_mut().user_enters(first);
        // Each user its own stream of think times (and of choices in the session).
        let seed = self.arrived.get() << 32 | u64::from(std::process::id());
        let visit = visit(Rc::clone(self), Rc::clone(shared), control.clone(), due, target, first, seed);
        tokio::task::spawn_local(visit);
    }

    /// Returns once every user has left (after the run is stopped, each ends its request).
    pub async fn all_left(&self) {
        loop {
            let notified = self.all_left.notified(); // registered before the check: no lost wake-up
            if self.live.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

async fn visit(
    visitors: Rc<Visitors>,
    shared: Rc<Shared>,
    mut control: watch::Receiver<Control>,
    due: Instant,
    target: usize,
    mut slot: usize,
    seed: u64,
) {
    let job = &shared.job;
    let session = job.session.as_ref().expect("visitors walk the job's session");
    // An open-model user walks its session once unless it says how many times.
    let mut walker = Walker::new(session, session.repeat.max(1));
    // The seed's high half is the user's arrival, from 1.
    let mut user = UserState::new(job, (seed >> 32).saturating_sub(1), seed);
    let mut connections = Connections::new(&shared);
    let mut due = Some(due);
    while let Some(step) = walker.next(&mut user) {
        if control.borrow().stopped {
            break;
        }
        if user.starved {
            shared.out_of_rows(slot);
            break;
        }
        if let Some(at) = due {
            shared.stats.borrow_mut().sent(slot, at.elapsed().as_micros() as u64);
        } else {
            if !shared.take_ticket() {
                break;
            }
            // The same target all session long: a user re-picking one per request would hold a
            // connection to each it picked (measured: up to 1.8 per user over 4 targets).
            let next = shared.stats.borrow().slot(target, job.requests[step.request].name);
            shared.stats.borrow_mut().user_moves(slot, next);
            slot = next;
        }
        let sent = connections.request_for(target, step.request, due.take(), &mut user).await;
        if !sent.responded || !follow(&shared, slot, sent.then, &mut user, Some(&mut walker)) {
            break;
        }
        think(step.think_after.sample(&mut user.rng), &mut control).await;
    }
    connections.close_all();
    shared.stats.borrow_mut().user_leaves(slot);
    visitors.live.set(visitors.live.get() - 1);
    if visitors.live.get() == 0 {
        visitors.all_left.notify_waiters();
    }
}

/// Waits `pause`, or less if the run stops.
async fn think(pause: Duration, control: &mut watch::Receiver<Control>) {
    if !pause.is_zero() {
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = control.wait_for(|c| c.stopped) => {}
        }
    }
}
