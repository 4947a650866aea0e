//! The job's HTTP/2 connections, shared by its drivers. Each driver that sends over HTTP/2 (a
//! closed-model client, an open-model worker, a visitor) takes a lane, the smallest free
//! number; lanes `k * max_streams .. (k + 1) * max_streams` share connection `k` of a target.
//! A driver sends one request at a time, so a connection never carries more than
//! `max_streams` streams of ours; the server's SETTINGS_MAX_CONCURRENT_STREAMS bounds them
//! further (the h2 crate holds a stream back until the server allows it: queueing).
//!
//! Bounds: lanes in use are the drivers alive (clients, workers or visitors of the engine);
//! connections per target are ceil(largest lane in use + 1 / max_streams). A connection whose
//! lanes are all free is dropped, so a ramp down closes connections.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use tokio::sync::OnceCell;

use crate::h2live::Live;
use crate::h2request::Conversions;
use crate::job::Job;

/// A connection of a target, opened by its first request (the others of its lanes wait for
/// that one); replaced by an empty one when it fails.
pub type Slot = Rc<OnceCell<Live>>;

pub struct H2Pool {
    /// Per target: its connections by number (empty for HTTP/1.1 targets).
    slots: Vec<RefCell<Vec<Slot>>>,
    /// Per target: streams per connection.
    max_streams: Vec<usize>,
    lanes: RefCell<BTreeSet<usize>>,
    /// Each target's last request as HTTP/2 (h2request.rs).
    pub conversions: Conversions,
}

impl H2Pool {
    pub fn new(job: &Job) -> Self {
        H2Pool {
            slots: job.targets.iter().map(|_| RefCell::default()).collect(),
            max_streams: job.targets.iter().map(|t| t.h2.max_streams as usize).collect(),
            lanes: RefCell::default(),
            conversions: Conversions::new(job.targets.len()),
        }
    }

    /// The smallest lane nobody holds.
    pub fn take_lane(&self) -> usize {
        let mut lanes = self.lanes.borrow_mut();
        let lane = (0..).find(|l| !lanes.contains(l)).expect("fewer lanes than usize");
        lanes.insert(lane);
        lane
    }

    /// Gives a lane back; a connection none of whose lanes is held any more is dropped (the
    /// h2 crate then ends it with a GOAWAY once its streams are done).
    pub fn free_lane(&self, lane: usize) {
        let mut lanes = self.lanes.borrow_mut();
        lanes.remove(&lane);
        for (slots, &per) in self.slots.iter().zip(&self.max_streams) {
            let k = lane / per;
            let mut slots = slots.borrow_mut();
            if k < slots.len() && lanes.range(k * per..(k + 1) * per).next().is_none() {
                slots[k] = Slot::default();
            }
        }
    }

    /// The connection slot of `lane` on `target`.
    pub fn slot(&self, target: usize, lane: usize) -> Slot {
        let k = lane / self.max_streams[target];
        let mut slots = self.slots[target].borrow_mut();
        if slots.len() <= k {
            slots.resize_with(k + 1, Slot::default);
        }
        Rc::clone(&slots[k])
    }

    /// Drops `slot` from `target` (it failed), unless it was replaced already.
    pub fn discard(&self, target: usize, slot: &Slot) {
        for held in self.slots[target].borrow_mut().iter_mut() {
            if Rc::ptr_eq(held, slot) {
                *held = Slot::default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(max_streams: &[usize]) -> H2Pool {
        H2Pool {
            slots: max_streams.iter().map(|_| RefCell::default()).collect(),
            max_streams: max_streams.to_vec(),
            lanes: RefCell::default(),
            conversions: Conversions::new(max_streams.len()),
        }
    }

    #[test]
    fn lanes_share_a_connection_max_streams_at_a_time_and_free_ones_are_reused() {
        let pool = pool(&[3]);
        let lanes: Vec<usize> = (0..7).map(|_| pool.take_lane()).collect();
        assert_eq!(lanes, [0, 1, 2, 3, 4, 5, 6]);
        let (first, fourth) = (pool.slot(0, 0), pool.slot(0, 3));
        assert!(Rc::ptr_eq(&first, &pool.slot(0, 2)), "lanes 0..3 share connection 0");
        assert!(!Rc::ptr_eq(&first, &fourth));
        assert_eq!(pool.slots[0].borrow().len(), 2, "connections: ceil(lanes in use / max_streams)");
        pool.free_lane(1);
        assert_eq!(pool.take_lane(), 1, "the smallest free lane first: the set stays dense");
        for lane in [3, 4, 5] {
            pool.free_lane(lane);
        }
        assert!(!Rc::ptr_eq(&fourth, &pool.slot(0, 3)), "a connection with no lane left is dropped");
        assert!(Rc::ptr_eq(&first, &pool.slot(0, 0)));
        pool.discard(0, &first);
        assert!(!Rc::ptr_eq(&first, &pool.slot(0, 0)), "a failed connection is replaced");
    }
}
