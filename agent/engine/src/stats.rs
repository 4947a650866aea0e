//! Per-interval statistics for every (target, request name), drained into one
//! IntervalReport per interval.

use hdrhistogram::Histogram;

use crate::histogram::{encode_histogram, new_histogram, record_us};
use crate::job::Job;
use crate::phases::{PhaseStats, Phases};
use crate::wire::pb;

/// A send this much after it was due counts as late (timer resolution is 1 ms).
const LATE_AFTER_US: u64 = 1000;
/// Error messages sent per interval; enough to see what is wrong without a flood.
const ERROR_SAMPLES_PER_INTERVAL: usize = 10;
/// ErrorKind values (stats.proto), UNSPECIFIED included: a slot's error counts are indexed by
/// them (`error_index`). ERROR_KIND_CHECK (10) is never counted there (a response came), only
/// sampled. The HTTP/2 kinds are 20..=27; REDIRECT_REFUSED (40) has the last index.
const ERROR_KINDS: usize = 29;
const REDIRECT_REFUSED_INDEX: usize = 28;

fn error_index(kind: pb::ErrorKind) -> usize {
    match kind {
        pb::ErrorKind::RedirectRefused => REDIRECT_REFUSED_INDEX,
        kind => kind as usize,
    }
}

fn error_kind(index: usize) -> i32 {
    match index {
        REDIRECT_REFUSED_INDEX => pb::ErrorKind::RedirectRefused as i32,
        index => index as i32,
    }
}
/// The implicit status check's statuses (unless a check of the request names statuses).
pub const IMPLICIT_OK: std::ops::Range<u16> = 200..400;

/// How one request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Response { status: u16, phases: Phases },
    Failed { kind: pb::ErrorKind, message: String },
}

struct Slot {
    requests: u64,
    status: [u64; 5],
    errors: [u64; ERROR_KINDS],
    bytes_in: u64,
    bytes_out: u64,
    opened: u64,
    closed: u64,
    /// A gauge, not reset per interval: open connections whose last request was this slot's.
    active: u64,
    /// A gauge too: users in progress whose current or last request is this slot's.
    users: u64,
    /// A gauge too: HTTP/2 streams open (past queueing, response not ended) of this slot.
    streams: u64,
    latency: Histogram<u64>,
    phases: PhaseStats,
    // Open model: sends due, sent late, the worst lag, and dropped for want of a connection;
    // the lags of every send summed (the controller weighs their mean against the latency).
    scheduled: u64,
    sent_late: u64,
    max_send_lag_us: u64,
    not_sent: u64,
    send_lag_sum_us: u64,
    /// Passed and failed per check of the slot's request name (Journeys::check_names), and
    /// responses that failed at least one; users stopped and sessions restarted by plan rules.
    checks: Vec<[u64; 2]>,
    check_failed: u64,
    users_stopped: u64,
    sessions_restarted: u64,
    /// Redirect hops followed by the slot's requests (redirect.rs).
    redirects: u64,
}

impl Slot {
    fn new(checks: usize) -> Self {
        Slot {
            requests: 0,
            status: [0; 5],
            errors: [0; ERROR_KINDS],
            bytes_in: 0,
            bytes_out: 0,
            opened: 0,
            closed: 0,
            active: 0,
            users: 0,
            streams: 0,
            latency: new_histogram(),
            phases: PhaseStats::default(),
            scheduled: 0,
            sent_late: 0,
            max_send_lag_us: 0,
            not_sent: 0,
            send_lag_sum_us: 0,
            checks: vec![[0; 2]; checks],
            check_failed: 0,
            users_stopped: 0,
            sessions_restarted: 0,
            redirects: 0,
        }
    }

    /// Zeroes the interval's counts; the gauges (connections, users, streams) carry over.
    fn start_interval(&mut self) {
        (self.requests, self.bytes_in, self.bytes_out, self.opened, self.closed) = (0, 0, 0, 0, 0);
        (self.scheduled, self.sent_late, self.max_send_lag_us, self.not_sent) = (0, 0, 0, 0);
        self.send_lag_sum_us = 0;
        (self.check_failed, self.users_stopped, self.sessions_restarted, self.redirects) = (0, 0, 0, 0);
        self.checks.fill([0; 2]);
        self.status = [0; 5];
        self.errors = [0; ERROR_KINDS];
        self.latency.reset();
        self.phases.reset();
    }

    /// The interval's row of this slot, of `target` and `request` (whose checks are `checks`).
    fn row(&self, target: String, request: String, checks: &[String]) -> pb::IntervalStats {
        let mut row = pb::IntervalStats {
            target,
            request,
            requests: self.requests,
            status_1xx: self.status[0],
            status_2xx: self.status[1],
            status_3xx: self.status[2],
            status_4xx: self.status[3],
            status_5xx: self.status[4],
            errors: self
                .errors
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(index, &count)| pb::ErrorCount { kind: error_kind(index), count })
                .collect(),
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            connections_opened: self.opened,
            connections_closed: self.closed,
            active_connections: self.active,
            users: self.users,
            active_streams: self.streams,
            latency_histogram: encode_histogram(&self.latency),
            scheduled: self.scheduled,
            sent_late: self.sent_late,
            max_send_lag_us: self.max_send_lag_us,
            not_sent: self.not_sent,
            send_lag_sum_us: self.send_lag_sum_us,
            checks: checks
                .iter()
                .zip(&self.checks)
                .map(|(name, &[passed, failed])| pb::CheckCount { name: name.clone(), passed, failed })
                .collect(),
            check_failed: self.check_failed,
            checks_reported: true, // every response is judged, by its checks or the implicit one
            users_stopped: self.users_stopped,
            sessions_restarted: self.sessions_restarted,
            redirects: self.redirects,
            latency_missing: false, // the engine measures every response
            ..Default::default()    // latency_buckets: the agent's form, not the engine's
        };
        self.phases.write_to(&mut row);
        row
    }

    fn is_quiet(&self) -> bool {
        self.requests == 0
            && self.opened == 0
            && self.closed == 0
            && self.active == 0
            && self.users == 0
            && self.streams == 0
            && self.scheduled == 0
            && self.not_sent == 0
            && self.users_stopped == 0
            && self.sessions_restarted == 0
    }
}

/// One of the first errors or check failures of the interval.
struct Sample {
    slot: usize,
    kind: pb::ErrorKind,
    message: String,
    /// ERROR_KIND_CHECK: the check's counter among its request name's checks.
    check: Option<usize>,
}

pub struct Stats {
    slots: Vec<Slot>,
    names: usize,
    /// Per request name: its checks' names (Journeys::check_names; none without journeys).
    /// O(requests × 32 checks), for the run's length.
    check_names: Vec<Vec<String>>,
    samples: Vec<Sample>,
}

impl Stats {
    pub fn new(job: &Job) -> Self {
        let names = job.names.len();
        let check_names = match &job.journeys {
            Some(journeys) => journeys.check_names.clone(),
            None => vec![Vec::new(); names],
        };
        let slots = (0..job.targets.len() * names).map(|index| Slot::new(check_names[index % names].len())).collect();
        Stats { slots, names, check_names, samples: Vec::new() }
    }

    pub fn slot(&self, target: usize, name: usize) -> usize {
        target * self.names + name
    }

    /// A static request ended: a response fails the implicit status check outside 200-399.
    pub fn record(&mut self, slot: usize, outcome: Outcome, latency_us: u64, bytes_in: u64, bytes_out: u64) {
        if let Outcome::Response { status, .. } = outcome {
            self.slots[slot].check_failed += u64::from(!IMPLICIT_OK.contains(&status));
        }
        self.count(slot, outcome, latency_us, bytes_in, bytes_out);
    }

    /// A journey request ended; a response `failed` a check or not (inspect.rs judged it).
    pub fn record_judged(
        &mut self,
        slot: usize,
        outcome: Outcome,
        (latency_us, bytes_in, bytes_out): (u64, u64, u64),
        failed: bool,
    ) {
        if matches!(outcome, Outcome::Response { .. }) {
            self.slots[slot].check_failed += u64::from(failed);
        }
        self.count(slot, outcome, latency_us, bytes_in, bytes_out);
    }

    /// One check (counter `check` of the slot's request name) passed or failed.
    pub fn check(&mut self, slot: usize, check: usize, passed: bool) {
        self.slots[slot].checks[check][usize::from(!passed)] += 1;
    }

    /// A failed check's description, into the interval's bounded sample.
    pub fn check_failed_sample(&mut self, slot: usize, check: usize, message: String) {
        if self.samples.len() < ERROR_SAMPLES_PER_INTERVAL {
            self.samples.push(Sample { slot, kind: pb::ErrorKind::Check, message, check: Some(check) });
        }
    }

    /// A user ended by a plan rule (on_fail or on_missing: stop).
    pub fn user_stopped(&mut self, slot: usize) {
        self.slots[slot].users_stopped += 1;
    }

    /// A request followed `hops` redirects (counted whatever its end).
    pub fn redirected(&mut self, slot: usize, hops: u32) {
        self.slots[slot].redirects += u64::from(hops);
    }

    /// A user's session started again (on_fail or on_missing: restart).
    pub fn session_restarted(&mut self, slot: usize) {
        self.slots[slot].sessions_restarted += 1;
    }

    fn count(&mut self, slot: usize, outcome: Outcome, latency_us: u64, bytes_in: u64, bytes_out: u64) {
        let s = &mut self.slots[slot];
        s.requests += 1;
        s.bytes_in += bytes_in;
        s.bytes_out += bytes_out;
        match outcome {
            Outcome::Response { status, phases } => {
                let class = usize::from(status / 100).clamp(1, 5) - 1;
                s.status[class] += 1;
                record_us(&mut s.latency, latency_us);
                s.phases.record(&phases);
            }
            Outcome::Failed { kind, message } => {
                s.errors[error_index(kind)] += 1;
                if self.samples.len() < ERROR_SAMPLES_PER_INTERVAL {
                    self.samples.push(Sample { slot, kind, message, check: None });
                }
            }
        }
    }

    /// Open model: a request fell due.
    pub fn scheduled(&mut self, slot: usize) {
        self.slots[slot].scheduled += 1;
    }

    /// Open model: a request went out `lag_us` after it was due. Every lag is summed, the
    /// small ones too: a thousand sends 0.8 ms late are 0.8 ms of each one's latency.
    pub fn sent(&mut self, slot: usize, lag_us: u64) {
        let s = &mut self.slots[slot];
        if lag_us > LATE_AFTER_US {
            s.sent_late += 1;
        }
        s.max_send_lag_us = s.max_send_lag_us.max(lag_us);
        s.send_lag_sum_us = s.send_lag_sum_us.saturating_add(lag_us);
    }

    /// Open model: a due request found no free connection in time and was not sent.
    pub fn not_sent(&mut self, slot: usize) {
        self.slots[slot].not_sent += 1;
    }

    pub fn connection_opened(&mut self, slot: usize) {
        self.slots[slot].opened += 1;
        self.slots[slot].active += 1;
    }

    pub fn connection_closed(&mut self, owner: usize) {
        let s = &mut self.slots[owner];
        s.closed += 1;
        s.active = s.active.saturating_sub(1);
    }

    /// A kept-alive connection now belongs to the slot of the request it last carried.
    pub fn connection_moved(&mut self, from: usize, to: usize) {
        if from != to {
            self.slots[from].active = self.slots[from].active.saturating_sub(1);
            self.slots[to].active += 1;
        }
    }

    /// An HTTP/2 stream of the slot went out (h2send.rs), or ended.
    pub fn stream_opened(&mut self, slot: usize) {
        self.slots[slot].streams += 1;
    }

    pub fn stream_closed(&mut self, slot: usize) {
        self.slots[slot].streams = self.slots[slot].streams.saturating_sub(1);
    }

    /// A user began (a client's first request; an open-model request fell due).
    pub fn user_enters(&mut self, slot: usize) {
        self.slots[slot].users += 1;
    }

    /// A user went on to a request of another slot.
    pub fn user_moves(&mut self, from: usize, to: usize) {
        if from != to {
            self.user_leaves(from);
            self.user_enters(to);
        }
    }

    /// A user ended (its client stopped; its open-model request ended or was not sent).
    pub fn user_leaves(&mut self, slot: usize) {
        self.slots[slot].users = self.slots[slot].users.saturating_sub(1);
    }

    /// Everything since the last report, which starts the next interval from zero.
    pub fn take_report(&mut self, job: &Job, interval_start_ms: i64, last: bool) -> pb::IntervalReport {
        let mut stats = Vec::new();
        for (index, s) in self.slots.iter_mut().enumerate() {
            if s.is_quiet() {
                continue;
            }
            let (target, name) = (index / self.names, index % self.names);
            stats.push(s.row(job.targets[target].url.clone(), job.names[name].clone(), &self.check_names[name]));
            s.start_interval();
        }
        let error_samples = self
            .samples
            .drain(..)
            .map(|Sample { slot, kind, message, check }| pb::ErrorSample {
                target: job.targets[slot / self.names].url.clone(),
                request: job.names[slot % self.names].clone(),
                kind: kind as i32,
                message,
                check: check.map(|c| self.check_names[slot % self.names][c].clone()).unwrap_or_default(),
            })
            .collect();
        pb::IntervalReport {
            interval_start_ms,
            interval_ms: job.interval_ms as u32,
            stats,
            error_samples,
            r#final: last,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_job() -> Job {
        let spec = pb::JobSpec {
            job_id: "j".into(),
            targets: vec![pb::Target { url: "http://127.0.0.1:8080".into(), weight: 1, ..Default::default() }],
            requests: vec![pb::RequestSpec {
                name: "r".into(),
                method: "GET".into(),
                path: "/".into(),
                weight: 1,
                ..Default::default()
            }],
            load: Some(pb::LoadShare {
                model: Some(pb::load_share::Model::Open(pb::OpenModel {
                    rate_per_s: 10.0,
                    poisson: false,
                    max_connections: 4,
                })),
                stages: vec![],
            }),
            duration_ms: 1000,
            interval_ms: 1000,
            ..Default::default()
        };
        Job::from_spec(&spec).unwrap()
    }

    #[test]
    fn every_send_lag_is_summed_exactly_and_the_next_interval_starts_from_zero() {
        let job = open_job();
        let mut stats = Stats::new(&job);
        let slot = stats.slot(0, 0);
        for lag_us in [0, 3, 790, 1000, 1001, 2500] {
            stats.scheduled(slot);
            stats.sent(slot, lag_us);
        }
        let row = &stats.take_report(&job, 0, false).stats[0];
        assert_eq!((row.scheduled, row.sent_late, row.max_send_lag_us), (6, 2, 2500));
        assert_eq!(row.send_lag_sum_us, 5294, "the on-time lags too");
        stats.scheduled(slot);
        stats.sent(slot, 7);
        assert_eq!(stats.take_report(&job, 1000, false).stats[0].send_lag_sum_us, 7);
    }

    #[test]
    fn a_sum_of_lags_saturates_rather_than_wraps() {
        let job = open_job();
        let mut stats = Stats::new(&job);
        let slot = stats.slot(0, 0);
        stats.scheduled(slot);
        stats.sent(slot, u64::MAX - 1);
        stats.sent(slot, 5);
        assert_eq!(stats.take_report(&job, 0, false).stats[0].send_lag_sum_us, u64::MAX);
    }
}
