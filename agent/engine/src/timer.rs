//! Timeouts for one driver's requests, which run one after the other, on one tokio timer per
//! kind of timeout instead of one per request.
//!
//! A tokio timer per request costs an insertion into the timer wheel when the request first
//! waits and a removal when it ends: about 3 % of the engine's CPU per keep-alive request in
//! profiles. Moving a registered timer to a later deadline is a single atomic update (the
//! wheel re-files it only when its old slot comes up), and a driver's deadlines only move
//! forward, so each driver keeps its timers and moves them for every request.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

pub struct Timer {
    sleep: Pin<Box<Sleep>>,
    timeout: Duration,
}

impl Timer {
    /// A timer for `timeout` after each start; not in the wheel until first used.
    pub fn new(timeout: Duration) -> Self {
        let sleep = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
        Timer { sleep, timeout }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The output of `future`, or None if the timeout after `started` passes first.
    pub async fn run<F: Future>(&mut self, started: Instant, future: F) -> Option<F::Output> {
        let deadline = started + self.timeout;
        self.sleep.as_mut().reset(deadline.into());
        tokio::select! {
            biased;
            output = future => Some(output),
            () = self.sleep.as_mut() => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_timer_serves_deadlines_one_after_the_other() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let ms = Duration::from_millis;
            let mut timer = Timer::new(ms(200));
            for _ in 0..3 {
                let ended = timer.run(Instant::now(), tokio::time::sleep(ms(10))).await;
                assert_eq!(ended, Some(()), "ends before its deadline");
            }
            let started = Instant::now();
            let slow = timer.run(started, tokio::time::sleep(ms(1000))).await;
            assert_eq!(slow, None, "times out");
            let waited = started.elapsed();
            assert!(waited >= ms(200) && waited < ms(700), "timed out after {waited:?}");
            // After it fired, the timer serves the next requests again.
            let quick = timer.run(Instant::now(), tokio::time::sleep(ms(10))).await;
            assert_eq!(quick, Some(()));
            let never = timer.run(Instant::now(), std::future::pending::<()>()).await;
            assert_eq!(never, None);
        });
    }
}
