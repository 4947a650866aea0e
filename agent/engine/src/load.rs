//! The load a job asks for: the model, its think times, its ramps, and the level
//! (clients or rate) at any moment of the run.

use std::time::Duration;

use crate::rng::Rng;
use crate::wire::pb;

/// Requests per second an open model keeps up with per connection before it needs more;
/// only used to size the default connection pool.
const DEFAULT_MAX_CONNECTIONS: u32 = 1024;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Think {
    None,
    Fixed(Duration),
    Uniform(Duration, Duration),
    Exponential(Duration),
}

impl Think {
    pub fn from_proto(think: Option<&pb::ThinkTime>) -> Result<Think, String> {
        use pb::think_time::Distribution;
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        Ok(match think.and_then(|t| t.distribution.as_ref()) {
            None | Some(Distribution::FixedMs(0)) => Think::None,
            Some(Distribution::FixedMs(v)) => Think::Fixed(ms(*v)),
            Some(Distribution::Uniform(u)) if u.min_ms > u.max_ms => {
                return Err(format!("uniform think time {}..{} ms: min is above max", u.min_ms, u.max_ms))
            }
            Some(Distribution::Uniform(u)) => Think::Uniform(ms(u.min_ms), ms(u.max_ms)),
            Some(Distribution::ExponentialMeanMs(0)) => Think::None,
            Some(Distribution::ExponentialMeanMs(v)) => Think::Exponential(ms(*v)),
        })
    }

    pub fn sample(&self, rng: &mut Rng) -> Duration {
        match *self {
            Think::None => Duration::ZERO,
            Think::Fixed(d) => d,
            Think::Uniform(low, high) => low + (high - low).mul_f64(rng.unit()),
            Think::Exponential(mean) => mean.mul_f64(rng.exponential()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Model {
    Closed { clients: u32 },
    Open { rate_per_s: f64, poisson: bool, max_connections: u32 },
    Users { users: u32, spawn_rate_per_s: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    pub target: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub model: Model,
    pub think: Think,
    pub stages: Vec<Stage>,
}

impl Load {
    pub fn from_proto(share: &pb::LoadShare) -> Result<Load, String> {
        use pb::load_share::Model as M;
        let (model, think) = match share.model.as_ref() {
            None => return Err("no load model".into()),
            Some(M::Closed(c)) => (Model::Closed { clients: c.clients }, Think::from_proto(c.think.as_ref())?),
            Some(M::Open(o)) => {
                if !(o.rate_per_s.is_finite() && o.rate_per_s >= 0.0) {
                    return Err(format!("open rate {} is not a rate", o.rate_per_s));
                }
                let max_connections = if o.max_connections == 0 { DEFAULT_MAX_CONNECTIONS } else { o.max_connections };
                (Model::Open { rate_per_s: o.rate_per_s, poisson: o.poisson, max_connections }, Think::None)
            }
            Some(M::Users(u)) => {
                if !(u.spawn_rate_per_s.is_finite() && u.spawn_rate_per_s > 0.0) {
                    return Err(format!("spawn rate {} must be above 0", u.spawn_rate_per_s));
                }
                let model = Model::Users { users: u.users, spawn_rate_per_s: u.spawn_rate_per_s };
                (model, Think::from_proto(u.think.as_ref())?)
            }
        };
        let stages: Vec<Stage> = share
            .stages
            .iter()
            .map(|s| Stage { duration: Duration::from_millis(u64::from(s.duration_ms)), target: s.target })
            .collect();
        if stages.iter().any(|s| !(s.target.is_finite() && s.target >= 0.0)) {
            return Err("stage targets must be numbers of at least 0".into());
        }
        if !stages.is_empty() && matches!(model, Model::Users { .. }) {
            return Err("stages ramp closed or open models; users grow by their spawn rate".into());
        }
        Ok(Load { model, think, stages })
    }

    /// Clients (closed, users) or requests per second (open) `elapsed` after the load began.
    pub fn level_at(&self, elapsed: Duration) -> f64 {
        let start = match self.model {
            Model::Closed { clients } => f64::from(clients),
            Model::Open { rate_per_s, .. } => rate_per_s,
            Model::Users { users, spawn_rate_per_s } => {
                return (spawn_rate_per_s * elapsed.as_secs_f64()).floor().min(f64::from(users));
            }
        };
        let (mut from, mut at) = (start, Duration::ZERO);
        for stage in &self.stages {
            if elapsed < at + stage.duration {
                let progress = (elapsed - at).as_secs_f64() / stage.duration.as_secs_f64();
                return from + (stage.target - from) * progress;
            }
            (from, at) = (stage.target, at + stage.duration);
        }
        from
    }

    pub fn is_open(&self) -> bool {
        matches!(self.model, Model::Open { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn stages_ramp_linearly_then_hold() {
        let load = Load {
            model: Model::Open { rate_per_s: 0.0, poisson: false, max_connections: 10 },
            think: Think::None,
            stages: vec![Stage { duration: ms(60_000), target: 500.0 }, Stage { duration: ms(120_000), target: 500.0 }],
        };
        assert_eq!(load.level_at(ms(0)), 0.0);
        assert_eq!(load.level_at(ms(30_000)), 250.0);
        assert_eq!(load.level_at(ms(100_000)), 500.0);
        assert_eq!(load.level_at(ms(999_000)), 500.0);
    }

    #[test]
    fn users_grow_at_the_spawn_rate_up_to_the_population() {
        let load =
            Load { model: Model::Users { users: 10, spawn_rate_per_s: 4.0 }, think: Think::None, stages: vec![] };
        assert_eq!(load.level_at(ms(0)), 0.0);
        assert_eq!(load.level_at(ms(1_100)), 4.0);
        assert_eq!(load.level_at(ms(60_000)), 10.0);
    }

    #[test]
    fn think_times_follow_their_distribution() {
        let mut rng = Rng::new(1);
        let uniform = Think::Uniform(ms(5), ms(10));
        let samples: Vec<Duration> = (0..10_000).map(|_| uniform.sample(&mut rng)).collect();
        assert!(samples.iter().all(|d| *d >= ms(5) && *d <= ms(10)));
        let mean = samples.iter().sum::<Duration>() / 10_000;
        assert!((mean.as_secs_f64() - 0.0075).abs() < 0.0002, "uniform mean {mean:?}");
        let exponential = Think::Exponential(ms(100));
        let mean = (0..20_000).map(|_| exponential.sample(&mut rng)).sum::<Duration>() / 20_000;
        assert!((mean.as_secs_f64() - 0.1).abs() < 0.004, "exponential mean {mean:?}");
    }
}
