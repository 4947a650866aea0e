//! One job from barrier start to the final report: starts the load at the agreed
//! wall-clock time, follows the load's level (ramps, spawn rates, adjust), reports every
//! interval (aligned to wall-clock multiples of the interval), ends at the duration, on
//! stop or when the request budget is spent, and reports the last, partial interval once
//! in-flight requests have ended.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::closed::run_client;
use crate::job::Job;
use crate::load::{Load, Model};
use crate::open::{schedule, work, Arrivals, Backlog};
use crate::reactor::Reactor;
use crate::shared::{Control, Shared};
use crate::visitors::Visitors;
use crate::wire::pb;

/// How often ramps (stages, spawn rates) and the budget are looked at.
const LEVEL_TICK_MS: i64 = 50;

/// The handle main uses to steer a running job.
#[derive(Clone)]
pub struct Steering {
    control: Rc<watch::Sender<Control>>,
    adjusted: Rc<RefCell<Option<Load>>>,
    budget: Rc<Cell<u64>>,
    shared: Rc<Shared>,
}

impl Steering {
    /// A new load, effective at once (its ramps start now).
    pub fn adjust(&self, load: Load) {
        *self.adjusted.borrow_mut() = Some(load);
        self.control.send_modify(|_| {}); // wakes the run loop
    }

    pub fn stop(&self) {
        self.control.send_modify(|c| c.stopped = true);
    }

    /// A new, larger request budget for the whole job (0 or a smaller one changes nothing:
    /// a budget only grows, when a lost agent's share is handed over).
    pub fn raise_budget(&self, max_requests: u64) {
        if self.budget.get() > 0 && max_requests > self.budget.get() {
            self.budget.set(max_requests);
            self.control.send_modify(|_| {}); // wakes the run loop and a waiting scheduler
        }
    }

    /// Rows of the job's unique feed handed to it (a lost share's): its users take them after
    /// the rows it holds. Err: why the rows were refused.
    pub fn append_rows(&self, blocks: &[pb::FeedBlock]) -> Result<(), String> {
        let Some(feed) = self.shared.job.journeys.as_ref().and_then(|j| j.feed.as_ref()) else {
            return Err("the job has no feed".into());
        };
        for block in blocks {
            feed.append(block)?;
        }
        Ok(())
    }
}

/// The time in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

pub async fn sleep_until_ms(at_ms: i64) {
    loop {
        let wait = at_ms - now_ms();
        if wait <= 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

pub struct Run {
    shared: Rc<Shared>,
    control: watch::Receiver<Control>,
    steering: Steering,
    backlog: Rc<Backlog>,
    /// Open model with a session: its users in progress.
    visitors: Option<Rc<Visitors>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Run {
    /// Must be called inside the engine's LocalSet (the reactor starts a local task).
    pub fn new(job: Job) -> std::io::Result<Self> {
        Ok(Run::with_reactor(job, Reactor::new()?))
    }

    /// A run on a reactor it may share with other runs (the scenarios of one job, scenarios.rs).
    pub fn with_reactor(job: Job, reactor: Rc<Reactor>) -> Self {
        let think = job.load.think;
        let (sender, control) = watch::channel(Control { stopped: false, clients: 0, rate_per_s: 0.0, think });
        let budget = Rc::new(Cell::new(job.max_requests));
        let shared = Rc::new(Shared::new(job, reactor, Rc::clone(&budget)));
        let adjusted = Rc::new(RefCell::new(None));
        Run {
            steering: Steering { control: Rc::new(sender), adjusted, budget, shared: Rc::clone(&shared) },
            shared,
            control,
            backlog: Rc::new(Backlog::default()),
            visitors: None,
            tasks: Vec::new(),
        }
    }

    pub fn steering(&self) -> Steering {
        self.steering.clone()
    }

    /// What the run's drivers share: its job and statistics (scenarios.rs takes its reports).
    pub fn shared(&self) -> Rc<Shared> {
        Rc::clone(&self.shared)
    }

    /// Produces the load and calls `report` for every interval, the last one with final set.
    pub async fn execute(self, mut report: impl FnMut(pb::IntervalReport)) {
        let shared = self.shared();
        let last = self.drive(|start| report(interval_report(&shared, start, false))).await;
        report(interval_report(&shared, last, true));
    }

    /// Produces the load from the job's start to its end (duration, stop or budget), calls
    /// `boundary` with each interval's start as the interval ends, and winds down; returns the
    /// start of the last, partial interval. Idle (level 0) until an adjust gives it a level.
    pub async fn drive(mut self, mut boundary_passed: impl FnMut(i64)) -> i64 {
        let job = &Rc::clone(&self.shared).job;
        let interval = job.interval_ms as i64;
        let start_ms = job.start_at_ms.max(now_ms());
        let end_ms = start_ms + job.duration_ms as i64;
        let origin = self.wait_for_start(start_ms).await;
        let mut load = job.load.clone();
        let mut load_since = origin;
        if let Model::Open { poisson, max_connections, .. } = load.model {
            self.start_open(poisson, max_connections, origin, origin + Duration::from_millis(job.duration_ms));
        }
        // Intervals run on the barrier's grid, which is the controller's (the agent converts the
        // barrier into this host's clock), not on this clock's own: an agent whose clock is off by
        // a fraction of an interval still reports on the others' grid.
        let mut interval_start = job.start_at_ms + (now_ms() - job.start_at_ms).max(0) / interval * interval;
        loop {
            self.take_adjusted(&mut load, &mut load_since);
            let control = self.follow_level(&load, load_since.elapsed());
            if control.stopped || self.shared.budget_spent() {
                break;
            }
            if !load.is_open() {
                self.spawn_missing_clients(control.clients);
            }
            let boundary = interval_start + interval;
            let wake = boundary.min(end_ms).min(now_ms() + LEVEL_TICK_MS);
            tokio::select! {
                () = sleep_until_ms(wake) => {
                    let now = now_ms();
                    if now >= end_ms {
                        break;
                    }
                    if now >= boundary {
                        boundary_passed(interval_start);
                        interval_start = boundary;
                    }
                }
                _ = self.control.changed() => {}
            }
        }
        self.wind_down().await;
        interval_start
    }

    /// Waits for the barrier (or a stop before it); returns the load's origin, the instant of
    /// `start_ms`. The load's clock starts at the barrier, not when this task woke up (a few ms
    /// later on a busy host): an open model then schedules exactly rate × duration requests.
    async fn wait_for_start(&mut self, start_ms: i64) -> Instant {
        tokio::select! {
            () = sleep_until_ms(self.shared.job.start_at_ms) => {}
            _ = self.control.wait_for(|c| c.stopped) => {}
        }
        Instant::now() - Duration::from_millis((now_ms() - start_ms).max(0) as u64)
    }

    /// Takes the load main adjusted to, if any, in place of `load`; its ramps start now.
    fn take_adjusted(&self, load: &mut Load, load_since: &mut Instant) {
        if let Some(adjusted) = self.steering.adjusted.borrow_mut().take() {
            if adjusted.is_open() == load.is_open() {
                (*load, *load_since) = (adjusted, Instant::now());
            } else {
                eprintln!("loadfleet-engine: adjust cannot switch between open and closed models; ignored");
            }
        }
    }

    /// Stops the drivers and waits for their requests in flight; what the open model's
    /// backlog still holds was never sent.
    async fn wind_down(&mut self) {
        self.steering.stop();
        for task in self.tasks.drain(..) {
            // Drivers end after their in-flight request, which the request timeout bounds.
            let _ = task.await;
        }
        if let Some(visitors) = &self.visitors {
            visitors.all_left().await; // each after its request in flight, as the drivers above
        }
        self.backlog.drain_not_sent(&self.shared);
    }

    /// Sets the level the load has reached (clients or rate); returns the control now in force.
    fn follow_level(&mut self, load: &Load, elapsed: Duration) -> Control {
        let level = load.level_at(elapsed);
        self.steering.control.send_if_modified(|c| {
            let before = (c.clients, c.rate_per_s, c.think);
            if load.is_open() {
                c.rate_per_s = level;
            } else {
                c.clients = level.round() as u32;
            }
            c.think = load.think;
            before != (c.clients, c.rate_per_s, c.think)
        });
        *self.control.borrow_and_update()
    }

    /// The scheduler, and the workers that send its requests; with a session, the users it
    /// lets arrive (at most `max_connections` at a time) need no workers.
    fn start_open(&mut self, poisson: bool, max_connections: u32, origin: Instant, end: Instant) {
        let (shared, backlog) = (&self.shared, &self.backlog);
        let arrivals = if shared.job.session.is_some() {
            let visitors = Rc::new(Visitors::new(max_connections));
            self.visitors = Some(Rc::clone(&visitors));
            Arrivals::Users(visitors)
        } else {
            Arrivals::Requests(Rc::clone(backlog))
        };
        let schedule = schedule(Rc::clone(shared), arrivals, self.control.clone(), poisson, origin, end);
        self.tasks.push(tokio::task::spawn_local(schedule));
        if self.visitors.is_some() {
            return;
        }
        for _ in 0..max_connections {
            self.tasks.push(tokio::task::spawn_local(work(
                Rc::clone(shared),
                Rc::clone(backlog),
                self.control.clone(),
            )));
        }
    }

    /// Starts clients 0..wanted that are not running (new ones as the level rises).
    fn spawn_missing_clients(&mut self, wanted: u32) {
        for id in 0..wanted {
            let index = id as usize;
            let running = index < self.tasks.len() && !self.tasks[index].is_finished();
            if running || self.shared.is_retired(id) {
                continue;
            }
            let handle = tokio::task::spawn_local(run_client(id, Rc::clone(&self.shared), self.control.clone()));
            if index < self.tasks.len() {
                self.tasks[index] = handle;
            } else {
                self.tasks.push(handle);
            }
        }
    }
}

/// The interval's statistics of a run, with the feed's rows first taken in it (feed.rs).
pub fn interval_report(shared: &Shared, interval_start: i64, last: bool) -> pb::IntervalReport {
    let job = &shared.job;
    let mut report = shared.stats.borrow_mut().take_report(job, interval_start, last);
    if let Some(feed) = job.journeys.as_ref().and_then(|j| j.feed.as_ref()) {
        feed.report_taken(&mut report, &job.targets[0].url, &job.names[0]);
    }
    report
}
