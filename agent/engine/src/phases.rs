//! Where a response's time went: queueing (for a free worker, connection or HTTP/2 stream),
//! connecting, the TLS handshake, waiting for the first byte and receiving the rest (k6's
//! http_req_blocked-like wait, _connecting, _tls_handshaking, _waiting, _receiving).
//! Per interval each phase is kept as an exact sum, count and maximum, which merge across
//! engines and agents by adding; waiting also as an HDR histogram, for its percentiles.
//! (Only one histogram: the controller decodes every histogram of every row it merges.)

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::histogram::{encode_histogram, new_histogram, record_us};
use crate::wire::pb;

/// The phases of one response. `connect` and `tls` only when its request opened a connection;
/// `queueing` 0 when nothing waited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    pub queueing: Duration,
    pub connect: Option<Duration>,
    pub tls: Option<Duration>,
    pub waiting: Duration,
    pub receiving: Duration,
}

/// One phase over an interval, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Total {
    count: u64,
    sum_us: u64,
    max_us: u64,
}

impl Total {
    fn add(&mut self, duration: Duration) -> u64 {
        let us = duration.as_micros() as u64;
        self.count += 1;
        self.sum_us += us;
        self.max_us = self.max_us.max(us);
        us
    }
}

/// The phases of one (target, request name) over one interval.
pub struct PhaseStats {
    queueing: Total,
    connect: Total,
    tls: Total,
    waiting: Total,
    receiving: Total,
    waiting_histogram: Histogram<u64>,
}

impl Default for PhaseStats {
    fn default() -> Self {
        PhaseStats {
            queueing: Total::default(),
            connect: Total::default(),
            tls: Total::default(),
            waiting: Total::default(),
            receiving: Total::default(),
            waiting_histogram: new_histogram(),
        }
    }
}

impl PhaseStats {
    pub fn record(&mut self, phases: &Phases) {
        self.queueing.add(phases.queueing);
        if let Some(connect) = phases.connect {
            self.connect.add(connect);
        }
        if let Some(tls) = phases.tls {
            self.tls.add(tls);
        }
        let waiting_us = self.waiting.add(phases.waiting);
        record_us(&mut self.waiting_histogram, waiting_us);
        self.receiving.add(phases.receiving);
    }

    /// Zeroes everything for the next interval.
    pub fn reset(&mut self) {
        (self.queueing, self.connect, self.tls, self.waiting, self.receiving) = Default::default();
        self.waiting_histogram.reset();
    }

    /// Fills the phase fields of an interval's row.
    pub fn write_to(&self, row: &mut pb::IntervalStats) {
        (row.queueing_count, row.queueing_sum_us, row.queueing_max_us) =
            (self.queueing.count, self.queueing.sum_us, self.queueing.max_us);
        (row.connect_count, row.connect_sum_us, row.connect_max_us) =
            (self.connect.count, self.connect.sum_us, self.connect.max_us);
        (row.tls_count, row.tls_sum_us, row.tls_max_us) = (self.tls.count, self.tls.sum_us, self.tls.max_us);
        (row.waiting_count, row.waiting_sum_us, row.waiting_max_us) =
            (self.waiting.count, self.waiting.sum_us, self.waiting.max_us);
        (row.receiving_count, row.receiving_sum_us, row.receiving_max_us) =
            (self.receiving.count, self.receiving.sum_us, self.receiving.max_us);
        row.waiting_histogram = encode_histogram(&self.waiting_histogram);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn totals_are_exact_and_connect_counts_only_new_connections() {
        let mut stats = PhaseStats::default();
        stats.record(&Phases { queueing: ms(2), connect: Some(ms(3)), tls: None, waiting: ms(10), receiving: ms(1) });
        let (waiting, receiving) = (ms(30), Duration::from_micros(1500));
        stats.record(&Phases { queueing: Duration::ZERO, connect: None, tls: None, waiting, receiving });
        let mut row = pb::IntervalStats::default();
        stats.write_to(&mut row);
        assert_eq!((row.queueing_count, row.queueing_sum_us, row.queueing_max_us), (2, 2000, 2000), "0 µs counts");
        assert_eq!((row.connect_count, row.connect_sum_us, row.connect_max_us), (1, 3000, 3000));
        assert_eq!((row.tls_count, row.tls_sum_us), (0, 0));
        assert_eq!((row.waiting_count, row.waiting_sum_us, row.waiting_max_us), (2, 40_000, 30_000));
        assert_eq!((row.receiving_count, row.receiving_sum_us, row.receiving_max_us), (2, 2500, 1500));
        let histogram: Histogram<u64> = Deserializer::new().deserialize(&mut row.waiting_histogram.as_slice()).unwrap();
        assert_eq!(histogram.len(), 2);
        assert!(histogram.equivalent(histogram.max(), 30_000));

        stats.reset();
        let mut empty = pb::IntervalStats::default();
        stats.write_to(&mut empty);
        assert_eq!(empty, pb::IntervalStats::default(), "nothing carries over to the next interval");
    }
}
