//! A driver's lane on the job's HTTP/2 connections (h2pool.rs), held while the driver lives.

use std::rc::Rc;

use crate::shared::Shared;

/// A driver's lane, given back when the driver ends (or its connections are dropped).
pub struct Lane {
    pub index: usize,
    pool: Rc<Shared>,
}

impl Lane {
    pub fn take(shared: &Rc<Shared>) -> Self {
        Lane { index: shared.h2.take_lane(), pool: Rc::clone(shared) }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.pool.h2.free_lane(self.index);
    }
}
