//! Waiting for a stable read miss ratio, as Orthus-CAS does before it tunes
//! (NHC's State 1) and as the authors' SIB does before it trains.
//!
//! The wait samples the read miss ratio over consecutive windows of
//! `window_ns` (counters reset each window, as the authors' later code
//! does) and ends when two consecutive windows agree within `tolerance` and
//! the miss ratio is at most `max_miss_ratio`.

use crate::observe::Observation;

/// When a read miss ratio counts as stable.
#[derive(Clone, Debug)]
pub struct StableRule {
    /// Length of one sample, ns.
    pub window_ns: u64,
    /// Largest hit-ratio change between consecutive samples still "stable".
    pub tolerance: f64,
    /// Widen the tolerance to three standard errors of the sampled ratio.
    pub noise_aware: bool,
    /// A miss ratio above this is never stable enough to act on.
    pub max_miss_ratio: f64,
    /// Reads a sample must contain before it counts (it stretches until then).
    pub min_reads: u64,
}

/// One wait for a stable miss ratio.
#[derive(Clone, Debug, Default)]
pub struct StableWait {
    ns: u64,
    reads: u64,
    misses: u64,
    prev_hit_ratio: Option<f64>,
}

impl StableWait {
    /// Starts the wait again: the next sample is the first.
    pub fn restart(&mut self) {
        *self = StableWait::default();
    }

    /// Adds one tick's observation; returns the miss ratio of the sample
    /// that just closed when it agrees with the one before under `rule`.
    pub fn tick(&mut self, obs: &Observation, rule: &StableRule) -> Option<f64> {
        self.ns += obs.interval_ns;
        self.reads += obs.read_hits + obs.read_misses;
        self.misses += obs.read_misses;
        if self.ns < rule.window_ns || self.reads < rule.min_reads {
            return None;
        }
        let miss = if self.reads == 0 {
            1.0
        } else {
            self.misses as f64 / self.reads as f64
        };
        let hit = 1.0 - miss;
        let mut tol = rule.tolerance;
        if rule.noise_aware {
            // Difference of two independent window estimates: 3 standard errors.
            tol = tol.max(3.0 * (2.0 * hit * miss / self.reads as f64).sqrt());
        }
        let stable = self
            .prev_hit_ratio
            .is_some_and(|prev| (hit - prev).abs() <= tol);
        self.prev_hit_ratio = Some(hit);
        self.ns = 0;
        self.reads = 0;
        self.misses = 0;
        (stable && miss <= rule.max_miss_ratio).then_some(miss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(hits: u64, misses: u64) -> Observation {
        Observation {
            interval_ns: 50_000_000,
            read_hits: hits,
            read_misses: misses,
            ..Default::default()
        }
    }

    fn rule() -> StableRule {
        StableRule {
            window_ns: 100_000_000,
            tolerance: 0.001,
            noise_aware: false,
            max_miss_ratio: 0.3,
            min_reads: 1,
        }
    }

    #[test]
    fn two_agreeing_samples_end_the_wait() {
        let (mut w, r) = (StableWait::default(), rule());
        // First sample (two ticks): nothing to compare with.
        assert_eq!(w.tick(&obs(900, 100), &r), None);
        assert_eq!(w.tick(&obs(900, 100), &r), None);
        // Second sample moves by 5 points: not stable.
        assert_eq!(w.tick(&obs(950, 50), &r), None);
        assert_eq!(w.tick(&obs(950, 50), &r), None);
        // Third (545 misses in 11,000 reads) agrees with the second within
        // 0.1 %.
        assert_eq!(w.tick(&obs(950, 50), &r), None);
        assert_eq!(w.tick(&obs(9_505, 495), &r), Some(545.0 / 11_000.0));
    }

    #[test]
    fn a_high_miss_ratio_is_never_stable() {
        let (mut w, r) = (StableWait::default(), rule());
        for _ in 0..10 {
            assert_eq!(w.tick(&obs(600, 400), &r), None);
        }
    }

    #[test]
    fn restart_forgets_the_last_sample() {
        let (mut w, r) = (StableWait::default(), rule());
        w.tick(&obs(950, 50), &r);
        w.tick(&obs(950, 50), &r);
        w.restart();
        w.tick(&obs(950, 50), &r);
        assert_eq!(w.tick(&obs(950, 50), &r), None);
    }
}
