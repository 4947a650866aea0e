//! The HDR histogram every latency and waiting time of the engine is kept in: its shape,
//! shared with the Python side (loadfleet.wire.stats), how a duration is recorded, and the
//! encoding the wire carries.

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Bounds shared with the Python side (loadfleet.wire.stats): 1 µs to 1 hour, 3 digits.
const LOWEST_US: u64 = 1;
const HIGHEST_US: u64 = 3_600_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS).expect("valid bounds")
}

/// Records a duration in microseconds; below the lowest bound counts as 1 µs, beyond the
/// highest as the highest.
pub fn record_us(histogram: &mut Histogram<u64>, us: u64) {
    histogram.saturating_record(us.max(LOWEST_US));
}

/// The V2 DEFLATE encoding the wire carries; empty for an empty histogram.
pub fn encode_histogram(histogram: &Histogram<u64>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if !histogram.is_empty() {
        V2DeflateSerializer::new().serialize(histogram, &mut bytes).expect("serialising to memory");
    }
    bytes
}
