//! loadfleet's native engine: produces one driver's share of a run's load and reports
//! exact per-interval statistics over the stdio protocol of `proto/loadfleet/v1/engine.proto`.
//!
//! Everything runs on one thread (a current-thread tokio runtime): the agent starts one
//! engine per core, so there is nothing to share across threads and no locking on the
//! hot path.

pub mod builtins;
pub mod capture;
pub mod checks;
pub mod closed;
pub mod compose;
pub mod conns;
pub mod dial;
pub mod encode;
pub mod extract;
pub mod failure;
pub mod feed;
pub mod h2conn;
pub mod h2error;
pub mod h2lane;
pub mod h2live;
pub mod h2pool;
pub mod h2request;
pub mod h2send;
pub mod h2target;
pub mod head;
pub mod histogram;
pub mod hop;
pub mod http;
pub mod inspect;
pub mod jar;
pub mod job;
pub mod journey;
pub mod load;
pub mod open;
pub mod pattern;
pub mod phases;
pub mod reactor;
pub mod redirect;
pub mod response;
pub mod rng;
pub mod row;
pub mod run;
pub mod scenarios;
pub mod shared;
pub mod socket;
pub mod stats;
pub mod target;
pub mod template;
pub mod timer;
pub mod tls;
pub mod user;
pub mod vars;
pub mod visitors;
pub mod wire;
