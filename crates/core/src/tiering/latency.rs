//! Per-device latency signals for tiering controllers, from the
//! observations every controller receives.
//!
//! An [`Observation`] already holds one interval's device counters (the
//! block-layer statistics MOST differences per interval). This module
//! smooths them: for each device an exponentially weighted moving average
//! of the interval's mean read latency, mean write latency and mean latency
//! over both, and, for Colloid, of its occupancy (operations in flight) and
//! arrival rate, whose ratio is the latency by Little's law.
//!
//! The weight of a new interval is `alpha`. MOST leaves the constant
//! unspecified; Colloid uses 1/16, which is the default here for every
//! signal. An interval in which a device completed no operation of a kind
//! leaves that average unchanged (an idle device has no latency to report,
//! and pulling the average toward zero would make it look fast), unless
//! [`IdleLatency::Unloaded`] is asked for: then an idle interval folds the
//! lowest interval mean the device has shown (its unloaded latency, as far
//! as it has been seen) into the mean over all operations, and an interval
//! without reads folds the lowest read mean into the read latency, so that
//! a latency measured under a load that has gone does not stay forever.

use crate::observe::{DeviceObservation, Observation};

/// Colloid's EWMA weight, the default for every signal.
pub const DEFAULT_ALPHA: f64 = 1.0 / 16.0;

/// What an interval in which a device completed nothing does to its mean
/// latency over all operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdleLatency {
    /// Leaves it as it was.
    #[default]
    Keep,
    /// Folds in the lowest interval mean the device has shown.
    Unloaded,
}

impl IdleLatency {
    /// Reads the `idle_latency` parameter (`keep` or `unloaded`), given
    /// the policy's default.
    pub fn from_params(
        p: &crate::params::Params,
        default: IdleLatency,
    ) -> Result<IdleLatency, crate::params::ParamError> {
        let default = match default {
            IdleLatency::Keep => "keep",
            IdleLatency::Unloaded => "unloaded",
        };
        Ok(
            match p
                .choice("idle_latency", default, &["keep", "unloaded"])?
                .as_str()
            {
                "unloaded" => IdleLatency::Unloaded,
                _ => IdleLatency::Keep,
            },
        )
    }
}

/// One smoothed value; empty until its first sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ewma {
    value: Option<f64>,
}

impl Ewma {
    /// Folds in `sample` with weight `alpha` (the first sample is taken
    /// as is).
    pub fn update(&mut self, sample: f64, alpha: f64) {
        assert!(
            sample.is_finite(),
            "a latency sample must be finite: {sample}"
        );
        self.value = Some(match self.value {
            None => sample,
            Some(v) => v + alpha * (sample - v),
        });
    }

    /// The smoothed value, if any sample arrived.
    pub fn get(&self) -> Option<f64> {
        self.value
    }
}

/// The smoothed signals of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceLatency {
    /// Mean read latency, ns.
    pub read_ns: Ewma,
    /// Mean write latency, ns.
    pub write_ns: Ewma,
    /// Mean latency of all operations, ns.
    pub all_ns: Ewma,
    /// Operations in flight at the end of each interval.
    pub occupancy: Ewma,
    /// Completed operations per second.
    pub arrivals_per_s: Ewma,
    /// The lowest interval mean latency over all operations, ns.
    pub lowest_all_ns: Option<f64>,
    /// The lowest interval mean read latency, ns.
    pub lowest_read_ns: Option<f64>,
    /// The lowest interval mean latency of single-block reads, ns: the
    /// device's unloaded read latency as far as it has been seen, free of
    /// merged requests such as segment moves.
    pub lowest_block_read_ns: Option<f64>,
    /// How long the device has completed nothing, ns (whole intervals).
    pub idle_ns: u64,
}

impl DeviceLatency {
    fn observe(&mut self, d: &DeviceObservation, interval_ns: u64, alpha: f64, idle: IdleLatency) {
        let write_latency_sum_ns = d
            .latency_sum_ns
            .checked_sub(d.read_latency_sum_ns)
            .expect("read latency sum exceeds the sum over all operations");
        if d.read_ops > 0 {
            let mean = d.read_latency_sum_ns as f64 / d.read_ops as f64;
            self.read_ns.update(mean, alpha);
            self.lowest_read_ns = Some(self.lowest_read_ns.map_or(mean, |l| l.min(mean)));
        } else if let (IdleLatency::Unloaded, Some(lowest)) = (idle, self.lowest_read_ns) {
            self.read_ns.update(lowest, alpha);
        }
        if d.block_read_ops > 0 {
            let mean = d.block_read_latency_sum_ns as f64 / d.block_read_ops as f64;
            self.lowest_block_read_ns =
                Some(self.lowest_block_read_ns.map_or(mean, |l| l.min(mean)));
        }
        if d.write_ops > 0 {
            self.write_ns
                .update(write_latency_sum_ns as f64 / d.write_ops as f64, alpha);
        }
        self.idle_ns = match d.ops() {
            0 => self.idle_ns.saturating_add(interval_ns),
            _ => 0,
        };
        if d.ops() > 0 {
            let mean = d.latency_sum_ns as f64 / d.ops() as f64;
            self.all_ns.update(mean, alpha);
            self.lowest_all_ns = Some(self.lowest_all_ns.map_or(mean, |l| l.min(mean)));
        } else if let (IdleLatency::Unloaded, Some(lowest)) = (idle, self.lowest_all_ns) {
            self.all_ns.update(lowest, alpha);
        }
        self.occupancy
            .update((d.inflight_reads + d.inflight_writes) as f64, alpha);
        self.arrivals_per_s
            .update(d.ops() as f64 * 1e9 / interval_ns as f64, alpha);
    }

    /// Latency by Little's law, occupancy over arrival rate, ns (None
    /// before the first sample or while nothing arrives).
    pub fn little_ns(&self) -> Option<f64> {
        let (o, a) = (self.occupancy.get()?, self.arrivals_per_s.get()?);
        (a > 0.0).then(|| o / a * 1e9)
    }
}

/// The latency signals of every device of a volume.
#[derive(Clone, Debug)]
pub struct LatencySignals {
    devices: Vec<DeviceLatency>,
    alpha: f64,
    idle: IdleLatency,
}

impl LatencySignals {
    /// Signals for `devices` devices, each new interval weighted `alpha`.
    pub fn new(devices: usize, alpha: f64) -> LatencySignals {
        assert!(
            alpha > 0.0 && alpha <= 1.0,
            "an EWMA weight must be in (0, 1], got {alpha}"
        );
        LatencySignals {
            devices: vec![DeviceLatency::default(); devices],
            alpha,
            idle: IdleLatency::Keep,
        }
    }

    /// Sets what idle intervals do to the mean over all operations.
    pub fn set_idle(&mut self, idle: IdleLatency) {
        self.idle = idle;
    }

    /// Changes the weight of later intervals (the smoothed values so far
    /// are kept).
    pub fn set_alpha(&mut self, alpha: f64) {
        assert!(
            alpha > 0.0 && alpha <= 1.0,
            "an EWMA weight must be in (0, 1], got {alpha}"
        );
        self.alpha = alpha;
    }

    /// Folds in one interval's observation (intervals of zero length are
    /// skipped).
    pub fn observe(&mut self, obs: &Observation) {
        assert_eq!(
            obs.devices.len(),
            self.devices.len(),
            "an observation of another volume"
        );
        if obs.interval_ns == 0 {
            return;
        }
        for (s, d) in self.devices.iter_mut().zip(&obs.devices) {
            s.observe(d, obs.interval_ns, self.alpha, self.idle);
        }
    }

    /// Forgets device `d`'s smoothed signals (its lowest means and idle
    /// time stay): the next interval in which it completes operations
    /// starts them afresh.
    pub fn forget(&mut self, d: usize) {
        let s = &mut self.devices[d];
        *s = DeviceLatency {
            lowest_all_ns: s.lowest_all_ns,
            lowest_read_ns: s.lowest_read_ns,
            lowest_block_read_ns: s.lowest_block_read_ns,
            idle_ns: s.idle_ns,
            ..DeviceLatency::default()
        };
    }

    /// The signals of device `d`.
    pub fn device(&self, d: usize) -> &DeviceLatency {
        &self.devices[d]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(per_device: &[(u64, u64, u64, u64)]) -> Observation {
        // (read ops, read latency sum, write ops, write latency sum)
        Observation {
            interval_ns: 1_000_000,
            devices: per_device
                .iter()
                .map(|&(r, rl, w, wl)| DeviceObservation {
                    read_ops: r,
                    write_ops: w,
                    read_latency_sum_ns: rl,
                    latency_sum_ns: rl + wl,
                    inflight_reads: 2,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_first_sample_is_taken_as_is_then_weighted() {
        let mut s = LatencySignals::new(1, 0.25);
        s.observe(&obs(&[(10, 1_000, 5, 2_000)]));
        let d = s.device(0);
        assert_eq!(d.read_ns.get(), Some(100.0));
        assert_eq!(d.write_ns.get(), Some(400.0));
        assert_eq!(d.all_ns.get(), Some(200.0));
        s.observe(&obs(&[(10, 3_000, 0, 0)]));
        let d = s.device(0);
        assert_eq!(d.read_ns.get(), Some(100.0 + 0.25 * (300.0 - 100.0)));
        assert_eq!(d.write_ns.get(), Some(400.0), "no writes: unchanged");
        assert_eq!(d.all_ns.get(), Some(200.0 + 0.25 * (300.0 - 200.0)));
    }

    #[test]
    fn an_idle_device_keeps_its_latency_and_has_no_littles_law_latency_at_first() {
        let mut s = LatencySignals::new(2, DEFAULT_ALPHA);
        s.observe(&obs(&[(4, 400, 0, 0), (0, 0, 0, 0)]));
        assert_eq!(s.device(1).read_ns.get(), None);
        assert_eq!(s.device(1).little_ns(), None, "nothing arrived");
        s.observe(&obs(&[(0, 0, 0, 0), (0, 0, 0, 0)]));
        assert_eq!(s.device(0).read_ns.get(), Some(100.0));
        // Idle time counts whole idle intervals and restarts with work.
        assert_eq!(s.device(0).idle_ns, 1_000_000);
        assert_eq!(s.device(1).idle_ns, 2_000_000);
        s.forget(1);
        assert_eq!(s.device(1).idle_ns, 2_000_000, "kept by forget");
        s.observe(&obs(&[(1, 100, 0, 0), (0, 0, 0, 0)]));
        assert_eq!(s.device(0).idle_ns, 0);
    }

    /// With `Unloaded`, idle intervals bring a latency measured under load
    /// back toward the lowest interval mean seen, and so do intervals
    /// without reads for the read latency; writes alone keep theirs.
    #[test]
    fn an_idle_device_returns_toward_its_unloaded_latency_when_asked() {
        let mut s = LatencySignals::new(1, 0.5);
        s.set_idle(IdleLatency::Unloaded);
        s.observe(&obs(&[(4, 400, 0, 0)]));
        s.observe(&obs(&[(4, 4_000, 0, 0)]));
        assert_eq!(s.device(0).all_ns.get(), Some(550.0));
        s.observe(&obs(&[(0, 0, 0, 0)]));
        assert_eq!(s.device(0).all_ns.get(), Some(325.0));
        assert_eq!(s.device(0).read_ns.get(), Some(325.0));
        // Writes only: the read latency returns toward its lowest, the
        // write latency keeps its value.
        s.observe(&obs(&[(0, 0, 2, 2_000)]));
        assert_eq!(s.device(0).read_ns.get(), Some(212.5));
        assert_eq!(s.device(0).write_ns.get(), Some(1_000.0));
        let mut keep = LatencySignals::new(1, 0.5);
        keep.observe(&obs(&[(4, 4_000, 0, 0)]));
        keep.observe(&obs(&[(0, 0, 0, 0)]));
        assert_eq!(keep.device(0).all_ns.get(), Some(1_000.0));
        assert_eq!(keep.device(0).read_ns.get(), Some(1_000.0));
    }

    /// Little's law: 2 in flight at 4 operations per ms is 500 µs.
    #[test]
    fn littles_law_latency_is_occupancy_over_arrivals() {
        let mut s = LatencySignals::new(1, 1.0);
        s.observe(&obs(&[(4, 400, 0, 0)]));
        assert_eq!(s.device(0).arrivals_per_s.get(), Some(4_000.0));
        assert_eq!(s.device(0).little_ns(), Some(500_000.0));
    }

    #[test]
    fn a_weight_outside_zero_to_one_is_refused() {
        assert!(std::panic::catch_unwind(|| LatencySignals::new(1, 0.0)).is_err());
        assert!(std::panic::catch_unwind(|| LatencySignals::new(1, 1.5)).is_err());
    }
}
