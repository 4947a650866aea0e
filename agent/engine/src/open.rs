//! Open model: a scheduler makes requests fall due at the rate (evenly or Poisson),
//! whatever the server does; a pool of workers sends them. Latency counts from the due
//! time, so a stalled server shows in the percentiles (coordinated omission corrected,
//! as in wrk2). A request that finds no free worker within the request timeout is
//! counted as not sent. With a session, what falls due is a user's arrival instead
//! (visitors.rs).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};

use crate::conns::Connections;
use crate::rng::Rng;
use crate::shared::{Control, Shared};
use crate::user::UserState;
use crate::visitors::Visitors;

struct Due {
    at: Instant,
    target: usize,
    request: usize,
}

/// Requests that fell due and wait for a worker, and the workers waiting for requests.
#[derive(Default)]
pub struct Backlog {
    queue: RefCell<VecDeque<Due>>,
    /// Idle workers, the most recently idle last: it is woken first, so work goes to
    /// connections that are already open and a light load uses few connections.
    idle: RefCell<Vec<Rc<Notify>>>,
}

impl Backlog {
    fn push(&self, due: Due) {
        self.queue.borrow_mut().push_back(due);
        if let Some(worker) = self.idle.borrow_mut().pop() {
            worker.notify_one();
        }
    }

    /// At the end: whatever is still waiting was never sent.
    pub fn drain_not_sent(&self, shared: &Shared) {
        for due in self.queue.borrow_mut().drain(..) {
            let slot = shared.stats.borrow().slot(due.target, shared.job.requests[due.request].name);
            let mut stats = shared.stats.borrow_mut();
            stats.not_sent(slot);
            stats.user_leaves(slot);
        }
    }
}

/// What falls due at the rate: requests for the workers, or users who walk the session.
pub enum Arrivals {
    Requests(Rc<Backlog>),
    Users(Rc<Visitors>),
}

/// Makes arrivals fall due from `origin` (the load's start) until just before `end`.
pub async fn schedule(
    shared: Rc<Shared>,
    arrivals: Arrivals,
    mut control: watch::Receiver<Control>,
    poisson: bool,
    origin: Instant,
    end: Instant,
) {
    let rng = Rng::new(u64::from(std::process::id()) ^ 0x5eed);
    let end_s = end.duration_since(origin).as_secs_f64();
    // The first request is due at the start.
    let mut scheduler = Scheduler { shared, arrivals, rng, poisson, origin, end_s, last_due_s: 0.0, unit_gap: 0.0 };
    loop {
        let Control { stopped, rate_per_s, .. } = *control.borrow_and_update();
        if stopped {
            return;
        }
        if rate_per_s <= 0.0 {
            // Nothing falls due; look again soon (a ramp may be starting from zero).
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
                _ = control.changed() => {}
            }
            scheduler.last_due_s = origin.elapsed().as_secs_f64();
            continue;
        }
        match scheduler.fall_due(&control, rate_per_s) {
            Fell::AtEnd => return,
            // The budget is spent: wait for more (a lost agent's share handed over) or the end.
            Fell::BudgetSpent => {
                if control.changed().await.is_err() {
                    return;
                }
            }
            Fell::NextAt(next) => tokio::select! {
                () = tokio::time::sleep_until(next.into()) => {}
                _ = control.changed() => {}
            },
        }
    }
}

/// Where the schedule stands. Due times are seconds since `origin` in f64: summing
/// whole-nanosecond gaps instead would drift early (1/300 s is 3,333,333 ns) and let one more
/// request in before the end. The next arrival is due `unit_gap / rate` after the last one;
/// keeping the gap in units of the rate lets a ramp or an adjust change the spacing at once.
struct Scheduler {
    shared: Rc<Shared>,
    arrivals: Arrivals,
    rng: Rng,
    poisson: bool,
    origin: Instant,
    end_s: f64,
    last_due_s: f64,
    unit_gap: f64,
}

/// How far `Scheduler::fall_due` got.
enum Fell {
    /// Nothing more falls due before the end.
    AtEnd,
    BudgetSpent,
    /// Everything due by now fell due; the next arrival is due then.
    NextAt(Instant),
}

impl Scheduler {
    /// Makes every arrival due by now at `rate_per_s` (above 0) fall due.
    fn fall_due(&mut self, control: &watch::Receiver<Control>, rate_per_s: f64) -> Fell {
        let now_s = self.origin.elapsed().as_secs_f64();
        let mut next_s = self.last_due_s + self.unit_gap / rate_per_s;
        while next_s <= now_s {
            // Nothing falls due at or after the end (give or take rounding), however late the
            // run loop notices the end.
            if next_s >= self.end_s - 1e-9 {
                return Fell::AtEnd;
            }
            if !self.shared.take_ticket() {
                return Fell::BudgetSpent;
            }
            self.arrive(control, self.at(next_s));
            self.last_due_s = next_s;
            self.unit_gap = if self.poisson { self.rng.exponential() } else { 1.0 };
            next_s = self.last_due_s + self.unit_gap / rate_per_s;
        }
        Fell::NextAt(self.at(next_s))
    }

    /// One arrival, due at `due`: a request for the workers, or a user.
    fn arrive(&mut self, control: &watch::Receiver<Control>, due: Instant) {
        let (shared, job) = (&self.shared, &self.shared.job);
        let target = job.target_choice.pick(&mut self.rng);
        match &self.arrivals {
            Arrivals::Requests(backlog) => {
                let request = job.request_choice.pick(&mut self.rng);
                let slot = shared.stats.borrow().slot(target, job.requests[request].name);
                let mut stats = shared.stats.borrow_mut();
                stats.scheduled(slot);
                // Each request of the open model is a user of its own, from its due time on.
                stats.user_enters(slot);
                drop(stats);
                backlog.push(Due { at: due, target, request });
            }
            Arrivals::Users(visitors) => visitors.arrive(shared, control, due, target),
        }
    }

    fn at(&self, s: f64) -> Instant {
        self.origin + Duration::from_secs_f64(s)
    }
}

pub async fn work(shared: Rc<Shared>, backlog: Rc<Backlog>, mut control: watch::Receiver<Control>) {
    let job = &shared.job;
    let mut connections = Connections::new(&shared);
    // Each request of the open model is a user of its own: a journey request starts from an
    // empty state (no variables, no cookies).
    let mut user = UserState::new(job, 0, u64::from(std::process::id()) ^ 0x0be7);
    let wake = Rc::new(Notify::new());
    loop {
        let next = backlog.queue.borrow_mut().pop_front();
        let Some(due) = next else {
            if control.borrow_and_update().stopped {
                break;
            }
            backlog.idle.borrow_mut().push(Rc::clone(&wake));
            tokio::select! {
                () = wake.notified() => {}
                _ = control.changed() => backlog.idle.borrow_mut().retain(|w| !Rc::ptr_eq(w, &wake)),
            }
            continue;
        };
        let slot = shared.stats.borrow().slot(due.target, job.requests[due.request].name);
        let lag = due.at.elapsed();
        if lag > job.request_timeout {
            let mut stats = shared.stats.borrow_mut();
            stats.not_sent(slot);
            stats.user_leaves(slot);
            continue;
        }
        shared.stats.borrow_mut().sent(slot, lag.as_micros() as u64);
        user.restart(job);
        connections.request_for(due.target, due.request, Some(due.at), &mut user).await;
        shared.stats.borrow_mut().user_leaves(slot);
        if control.borrow().stopped {
            break;
        }
    }
    connections.close_all();
}
