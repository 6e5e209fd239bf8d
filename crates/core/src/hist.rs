//! Log-linear latency histogram with bounded relative error.
//!
//! Values (nanoseconds) are bucketed by their power of two and then into
//! `2^SUB_BITS` linear sub-buckets, so every recorded value is reported
//! within 1/128 (0.8 %) of its true value. Recording is a few integer
//! operations; merging and resetting are linear in the bucket count.

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
const GROUPS: usize = 64 - SUB_BITS as usize + 1;

/// A latency histogram over `u64` nanoseconds.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
    min: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let group = (shift + 1) as usize;
    let sub = ((v >> shift) - SUB) as usize;
    group * SUB as usize + sub
}

#[inline]
fn bucket_mid(b: usize) -> u64 {
    let group = b / SUB as usize;
    let sub = (b % SUB as usize) as u64;
    if group == 0 {
        return sub;
    }
    let shift = (group - 1) as u32;
    let low = (SUB + sub) << shift;
    low + ((1u64 << shift) >> 1)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; GROUPS * SUB as usize],
            total: 0,
            sum: 0,
            max: 0,
            min: u64::MAX,
        }
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.total += 1;
        self.sum += v as u128;
        if v > self.max {
            self.max = v;
        }
        if v < self.min {
            self.min = v;
        }
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Exact mean of the recorded values (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// Largest recorded value (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` in [0, 1], within 0.8 % (0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_mid(b).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Mean of the values above quantile `q` (the "worst 1 %" for q = 0.99).
    pub fn tail_mean(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let keep = ((1.0 - q.clamp(0.0, 1.0)) * self.total as f64 - 1e-9)
            .ceil()
            .max(1.0) as u64;
        let mut left = keep;
        let mut acc = 0.0;
        for (b, &c) in self.counts.iter().enumerate().rev() {
            if c == 0 {
                continue;
            }
            let take = c.min(left);
            acc += take as f64 * bucket_mid(b).clamp(self.min, self.max) as f64;
            left -= take;
            if left == 0 {
                break;
            }
        }
        acc / keep as f64
    }

    /// Adds every value of `other` into `self`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
        self.min = self.min.min(other.min);
    }

    /// Forgets every value.
    pub fn clear(&mut self) {
        if self.total != 0 {
            self.counts.iter_mut().for_each(|c| *c = 0);
        }
        self.total = 0;
        self.sum = 0;
        self.max = 0;
        self.min = u64::MAX;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn quantiles_within_relative_error() {
        let mut h = Histogram::new();
        let mut vals = Vec::new();
        let mut r = Rng::new(1);
        for _ in 0..50_000 {
            let v = (r.exponential(50_000.0) as u64).max(1);
            vals.push(v);
            h.record(v);
        }
        vals.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = vals[((q * vals.len() as f64).ceil() as usize).max(1) - 1] as f64;
            let got = h.quantile(q) as f64;
            assert!(
                (got - exact).abs() / exact < 0.01,
                "q={q} exact={exact} got={got}"
            );
        }
        let mean = vals.iter().sum::<u64>() as f64 / vals.len() as f64;
        assert!((h.mean() - mean).abs() < 1e-6 * mean);
    }

    #[test]
    fn small_values_exact_and_tail_mean() {
        let mut h = Histogram::new();
        for v in 0..100u64 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 49);
        assert_eq!(h.quantile(1.0), 99);
        assert_eq!(h.tail_mean(0.99), 99.0);
        assert!((h.tail_mean(0.9) - 94.5).abs() < 1e-9);
        let mut g = Histogram::new();
        g.merge(&h);
        assert_eq!(g.count(), 100);
        g.clear();
        assert_eq!(g.count(), 0);
        assert_eq!(g.quantile(0.5), 0);
    }
}
