//! A small fast random source and weighted choice; load generation needs speed and
//! reproducible spreads, not cryptographic quality.

/// xorshift64* (Vigna): one multiply per draw.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that neighbouring seeds give unrelated streams; never 0.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed with mean 1 (Poisson arrival gaps, memoryless think times).
    pub fn exponential(&mut self) -> f64 {
        -(1.0 - self.unit()).ln()
    }

    /// Uniform in 0..n (n > 0), by multiply-shift (Lemire), bias below 2^-32 for our n.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Picks an index with probability proportional to its weight.
#[derive(Debug, Clone)]
pub struct WeightedChoice {
    cumulative: Vec<u64>,
}

impl WeightedChoice {
    /// `None` when no weight is above zero.
    pub fn new(weights: impl IntoIterator<Item = u64>) -> Option<Self> {
        let mut total = 0u64;
        let cumulative: Vec<u64> = weights
            .into_iter()
            .map(|w| {
                total += w;
                total
            })
            .collect();
        (total > 0).then_some(WeightedChoice { cumulative })
    }

    pub fn pick(&self, rng: &mut Rng) -> usize {
        if self.cumulative.len() == 1 {
            return 0;
        }
        let total = *self.cumulative.last().expect("non-empty");
        let point = rng.below(total);
        // First index whose cumulative weight exceeds the point; zero weights are never picked.
        self.cumulative.partition_point(|&c| c <= point)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_choice_follows_weights_and_skips_zero() {
        let choice = WeightedChoice::new([3, 0, 1]).unwrap();
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 3];
        for _ in 0..400_000 {
            counts[choice.pick(&mut rng)] += 1;
        }
        assert_eq!(counts[1], 0);
        let share = f64::from(counts[0]) / 400_000.0;
        assert!((share - 0.75).abs() < 0.005, "share of weight 3 was {share}");
    }

    #[test]
    fn all_zero_weights_are_refused() {
        assert!(WeightedChoice::new([0, 0]).is_none());
    }
}
