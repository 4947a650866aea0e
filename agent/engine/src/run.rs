//! One job from barrier start to the final report: starts the clients at the agreed
//! wall-clock time, reports every interval (aligned to wall-clock multiples of the
//! interval), follows adjust and stop, and reports the last, partial interval once
//! in-flight requests have ended.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::job::{Job, Load};
use crate::stats::Stats;
use crate::wire::pb;

/// What the clients follow; changed by adjust and stop.
#[derive(Debug, Clone, Copy)]
pub struct Control {
    pub clients: u32,
    pub think: Duration,
    pub stopped: bool,
}

impl Control {
    pub fn runs(&self, client: u32) -> bool {
        !self.stopped && client < self.clients
    }
}

/// What every client of the job reads.
pub struct Shared {
    pub job: Job,
    pub stats: RefCell<Stats>,
}

/// The handle main uses to steer a running job.
#[derive(Clone)]
pub struct Steering(Rc<watch::Sender<Control>>);

impl Steering {
    pub fn adjust(&self, load: Load) {
        let Load::Closed { clients, think } = load;
        self.0.send_modify(|c| (c.clients, c.think) = (clients, think));
    }

    pub fn stop(&self) {
        self.0.send_modify(|c| c.stopped = true);
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn sleep_until_ms(at_ms: i64) {
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
}

impl Run {
    pub fn new(job: Job) -> Self {
        let Load::Closed { clients, think } = job.load;
        let (sender, control) = watch::channel(Control { clients, think, stopped: false });
        let stats = RefCell::new(Stats::new(&job));
        Run { shared: Rc::new(Shared { job, stats }), control, steering: Steering(Rc::new(sender)) }
    }

    pub fn steering(&self) -> Steering {
        self.steering.clone()
    }

    /// Produces the load and calls `report` for every interval, the last one with final set.
    pub async fn execute(mut self, mut report: impl FnMut(pb::IntervalReport)) {
        let job = &self.shared.job;
        let interval = job.interval_ms as i64;
        let end_ms = job.start_at_ms.max(now_ms()) + job.duration_ms as i64;
        tokio::select! {
            () = sleep_until_ms(job.start_at_ms) => {}
            _ = self.control.wait_for(|c| c.stopped) => {}
        }
        let mut interval_start = now_ms() / interval * interval;
        let mut clients: Vec<JoinHandle<()>> = Vec::new();
        loop {
            let control = *self.control.borrow_and_update();
            if control.stopped {
                break;
            }
            self.spawn_missing(&mut clients, control.clients);
            let boundary = interval_start + interval;
            tokio::select! {
                () = sleep_until_ms(boundary.min(end_ms)) => {
                    if now_ms() >= end_ms {
                        break;
                    }
                    report(self.shared.stats.borrow_mut().take_report(job, interval_start, false));
                    interval_start = boundary;
                }
                _ = self.control.changed() => {}
            }
        }
        self.steering.stop();
        for client in clients {
            // Clients end after their in-flight request, which the request timeout bounds.
            let _ = client.await;
        }
        report(self.shared.stats.borrow_mut().take_report(job, interval_start, true));
    }

    /// Starts clients 0..wanted that are not running (all at first; new ones after adjust up).
    fn spawn_missing(&self, clients: &mut Vec<JoinHandle<()>>, wanted: u32) {
        for id in 0..wanted {
            let index = id as usize;
            if index < clients.len() && !clients[index].is_finished() {
                continue;
            }
            let client = Client::new(id, Rc::clone(&self.shared), self.control.clone());
            let handle = tokio::task::spawn_local(client.run());
            if index < clients.len() {
                clients[index] = handle;
            } else {
                clients.push(handle);
            }
        }
    }
}
