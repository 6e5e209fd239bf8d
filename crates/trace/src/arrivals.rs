//! How a trace's requests arrive: the gaps between consecutive requests
//! and the bursts they form, read as the synthetic generator's on/off
//! source (`trace generate`'s `mean_interarrival_us`,
//! `burst_mean_requests` and `burst_idle_us`), so that a real trace's
//! arrivals can be fitted and regenerated (`tiermux trace info`).

use crate::request::BlockTrace;

/// A gap longer than this many times the median gap ends a burst. Gaps
/// within a burst are exponential in the generator, so one in a million
/// of them (e^-(20 ln 2)) passes for idle.
pub const IDLE_OVER_MEDIAN: u64 = 20;

/// The shortest threshold for an idle gap, ns, so that a trace whose
/// median gap is zero (requests issued together) still has one.
pub const MIN_IDLE_GAP_NS: u64 = 1_000;

/// Gaps between consecutive requests, in trace order (a request earlier
/// than the one before it counts as a gap of zero).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arrivals {
    /// Gaps counted (requests less one).
    pub gaps: u64,
    /// Sum of the gaps, ns.
    pub total_ns: u64,
    /// Sum of the squared gaps, ns².
    pub total_sq_ns2: u128,
    /// The median gap, ns.
    pub median_gap_ns: u64,
    /// Gaps longer than the idle threshold ([`Arrivals::idle_threshold_ns`]).
    pub idle_gaps: u64,
    /// Sum of those gaps, ns.
    pub idle_total_ns: u64,
}

/// The generator's parameters that give these arrivals on average.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstFit {
    /// Mean gap within a burst, µs.
    pub mean_interarrival_us: f64,
    /// Mean requests per burst.
    pub burst_mean_requests: f64,
    /// Mean idle time after a burst (beyond a gap within one), µs.
    pub burst_idle_us: f64,
}

impl Arrivals {
    /// The gaps of `trace`.
    pub fn of(trace: &BlockTrace) -> Arrivals {
        let mut gaps: Vec<u64> = trace
            .requests
            .windows(2)
            .map(|w| w[1].time_ns.saturating_sub(w[0].time_ns))
            .collect();
        let mut a = Arrivals {
            gaps: gaps.len() as u64,
            // Saturating: an unordered trace's forward gaps can add up to
            // more than its span.
            total_ns: gaps.iter().fold(0u64, |t, &g| t.saturating_add(g)),
            total_sq_ns2: gaps
                .iter()
                .fold(0u128, |t, &g| t.saturating_add(g as u128 * g as u128)),
            ..Arrivals::default()
        };
        if gaps.is_empty() {
            return a;
        }
        let mid = gaps.len() / 2;
        a.median_gap_ns = *gaps.select_nth_unstable(mid).1;
        let threshold = a.idle_threshold_ns();
        for &g in gaps.iter().filter(|&&g| g > threshold) {
            a.idle_gaps += 1;
            a.idle_total_ns = a.idle_total_ns.saturating_add(g);
        }
        debug_assert!(a.idle_total_ns <= a.total_ns);
        a
    }

    /// Gaps longer than this end a burst, ns.
    pub fn idle_threshold_ns(&self) -> u64 {
        IDLE_OVER_MEDIAN
            .saturating_mul(self.median_gap_ns)
            .max(MIN_IDLE_GAP_NS)
    }

    /// Mean gap, µs.
    pub fn mean_gap_us(&self) -> f64 {
        self.total_ns as f64 / self.gaps.max(1) as f64 / 1e3
    }

    /// Coefficient of variation of the gaps: 1 for Poisson arrivals, more
    /// for bursty ones.
    pub fn gap_cv(&self) -> f64 {
        let n = self.gaps.max(1) as f64;
        let mean = self.total_ns as f64 / n;
        let var = (self.total_sq_ns2 as f64 / n - mean * mean).max(0.0);
        if mean > 0.0 {
            var.sqrt() / mean
        } else {
            0.0
        }
    }

    /// Share of the trace's span spent in idle gaps.
    pub fn idle_share(&self) -> f64 {
        self.idle_total_ns as f64 / self.total_ns.max(1) as f64
    }

    /// The generator's parameters for these arrivals, if any gap is idle
    /// and any is not. As in the generator, idle times are taken to be
    /// exponential: their mean is the idle gaps' mean excess over the
    /// threshold, and idle times shorter than the threshold, which hide
    /// among the gaps within bursts, are counted back from it (a share
    /// e^(-threshold / mean) of the bursts has an idle gap that passes).
    pub fn burst_fit(&self) -> Option<BurstFit> {
        let busy_gaps = self.gaps - self.idle_gaps;
        if self.idle_gaps == 0 || busy_gaps == 0 {
            return None;
        }
        let threshold_ns = self.idle_threshold_ns() as f64;
        let in_burst_ns = (self.total_ns - self.idle_total_ns) as f64 / busy_gaps as f64;
        let excess_ns = self.idle_total_ns as f64 / self.idle_gaps as f64 - threshold_ns;
        debug_assert!(excess_ns > 0.0, "idle gaps are over the threshold");
        let bursts =
            (self.idle_gaps as f64 * (threshold_ns / excess_ns).exp()).min(self.gaps as f64);
        Some(BurstFit {
            mean_interarrival_us: in_burst_ns / 1e3,
            // Requests over bursts (an idle gap ends each burst but the
            // last).
            burst_mean_requests: (self.gaps + 1) as f64 / (bursts + 1.0),
            burst_idle_us: excess_ns / 1e3,
        })
    }

    /// Lines for `tiermux trace info`.
    pub fn report(&self) -> String {
        if self.gaps == 0 {
            return String::new();
        }
        if self.total_ns == 0 {
            return "arrivals        no times (every request at the same time)\n".to_string();
        }
        let mut s = format!(
            "arrivals        mean gap {:.1} us, CV {:.2} (Poisson: 1); {} gaps over {}x the median ({:.1} us) hold {:.1} % of the span\n",
            self.mean_gap_us(),
            self.gap_cv(),
            self.idle_gaps,
            IDLE_OVER_MEDIAN,
            self.median_gap_ns as f64 / 1e3,
            100.0 * self.idle_share()
        );
        if let Some(f) = self.burst_fit() {
            s += &format!(
                "  as bursts     --set mean_interarrival_us={:.1} --set burst_mean_requests={:.1} --set burst_idle_us={:.0}\n",
                f.mean_interarrival_us, f.burst_mean_requests, f.burst_idle_us
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;
    use crate::synth::SynthSpec;
    use tiermux_core::Op;

    fn at(times_ns: &[u64]) -> BlockTrace {
        let requests = times_ns
            .iter()
            .map(|&time_ns| Request {
                time_ns,
                volume: 0,
                op: Op::Read,
                offset_bytes: 0,
                size_bytes: 4096,
            })
            .collect();
        BlockTrace { requests }
    }

    /// Two bursts of three requests 10 µs apart, 1 ms between them.
    #[test]
    fn counts_gaps_and_the_idle_one() {
        let a = Arrivals::of(&at(&[0, 10_000, 20_000, 1_020_000, 1_030_000, 1_040_000]));
        assert_eq!(
            (a.gaps, a.total_ns, a.median_gap_ns),
            (5, 1_040_000, 10_000)
        );
        assert_eq!((a.idle_gaps, a.idle_total_ns), (1, 1_000_000));
        // The threshold is 200 us, the idle gap's excess over it 800 us,
        // and bursts whose idle time fell under it are counted back.
        let f = a.burst_fit().unwrap();
        assert_eq!(f.mean_interarrival_us, 10.0);
        assert_eq!(f.burst_idle_us, 800.0);
        let bursts = (200.0f64 / 800.0).exp();
        assert!((f.burst_mean_requests - 6.0 / (bursts + 1.0)).abs() < 1e-12);
        // Out of order and simultaneous requests: gaps of zero, and the
        // 1 µs floor on the threshold.
        let a = Arrivals::of(&at(&[5_000, 5_000, 0, 5_000]));
        assert_eq!((a.gaps, a.total_ns, a.median_gap_ns), (3, 5_000, 0));
        assert_eq!((a.idle_gaps, a.idle_threshold_ns()), (1, MIN_IDLE_GAP_NS));
        // Forward jumps that add up past u64 saturate, and so does the
        // threshold over a huge median.
        let a = Arrivals::of(&at(&[0, u64::MAX, 0, u64::MAX]));
        assert_eq!(
            (a.gaps, a.total_ns, a.idle_threshold_ns()),
            (3, u64::MAX, u64::MAX)
        );
        assert!(a.report().contains("mean gap"));
        assert_eq!(Arrivals::of(&at(&[7])), Arrivals::default());
        assert_eq!(Arrivals::default().report(), "");
        assert!(Arrivals::of(&at(&[0, 0])).report().contains("no times"));
    }

    /// The generator's arrivals are fitted back: Poisson ones have a CV
    /// of 1 and almost no idle time; bursty ones give back the
    /// parameters they were drawn with.
    #[test]
    fn fits_the_generators_arrivals() {
        let mut spec = SynthSpec::preset("ts_0").unwrap();
        spec.requests = 200_000;
        let poisson = Arrivals::of(&spec.generate().unwrap());
        assert!(
            (poisson.gap_cv() - 1.0).abs() < 0.02,
            "{}",
            poisson.gap_cv()
        );
        assert!(poisson.idle_share() < 0.001, "{}", poisson.idle_share());
        spec.mean_interarrival_us = 200.0;
        spec.burst_mean_requests = 100.0;
        spec.burst_idle_us = 80_000.0;
        let bursty = Arrivals::of(&spec.generate().unwrap());
        let f = bursty.burst_fit().unwrap();
        let near = |got: f64, want: f64| (got / want - 1.0).abs() < 0.03;
        assert!(near(f.mean_interarrival_us, 200.0), "{f:?}");
        assert!(near(f.burst_mean_requests, 100.0), "{f:?}");
        assert!(near(f.burst_idle_us, 80_000.0), "{f:?}");
        assert!(bursty.gap_cv() > 5.0, "{}", bursty.gap_cv());
    }
}
