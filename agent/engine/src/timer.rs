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
use std::time::Instant;

use tokio::time::Sleep;

pub struct Timer {
    sleep: Pin<Box<Sleep>>,
}

impl Default for Timer {
    fn default() -> Self {
        // Not in the wheel until first used.
        Timer {
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
        }
    }
}

impl Timer {
    /// The output of `future`, or None if `deadline` passes first.
    pub async fn run<F: Future>(&mut self, deadline: Instant, future: F) -> Option<F::Output> {
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
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut timer = Timer::default();
            let ms = Duration::from_millis;
            for _ in 0..3 {
                let ended = timer
                    .run(Instant::now() + ms(200), tokio::time::sleep(ms(10)))
                    .await;
                assert_eq!(ended, Some(()), "ends before its deadline");
            }
            let started = Instant::now();
            assert_eq!(
                timer
                    .run(started + ms(50), tokio::time::sleep(ms(1000)))
                    .await,
                None
            );
            let waited = started.elapsed();
            assert!(
                waited >= ms(50) && waited < ms(500),
                "timed out after {waited:?}"
            );
            // After it fired, the timer serves the next deadline again.
            assert_eq!(
                timer
                    .run(Instant::now() + ms(200), tokio::time::sleep(ms(10)))
                    .await,
                Some(())
            );
            assert_eq!(
                timer
                    .run(Instant::now() + ms(20), std::future::pending::<()>())
                    .await,
                None
            );
        });
    }
}
