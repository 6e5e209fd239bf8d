//! MOST's optimizer (Algorithm 1 of the MOST paper): every tuning interval
//! it compares the two devices' smoothed latencies and moves the offload
//! ratio, the share of mirrored reads (and of new writes) sent to the
//! capacity device, so that the latencies meet. It also says what the
//! migrator may do. Shared by MOST on a block volume and Cerberus in the
//! key-value layer.
//!
//! Algorithm 1, with `L_P` and `L_C` the performance and capacity devices'
//! latencies:
//!
//! - `L_P > (1 + θ) L_C`: raise the ratio by `ratio_step`; at
//!   `offloadRatioMax` instead enlarge the mirrored class (or, when it is at
//!   its largest, improve its hotness) and migrate only toward the capacity
//!   device;
//! - `L_P < (1 − θ) L_C`: lower the ratio by `ratio_step`; at 0 instead
//!   migrate only toward the performance device;
//! - otherwise the latencies are equal within θ: stop all migration.
//!
//! Which migrations run while the ratio is still moving: Algorithm 1 as
//! printed says nothing (its "only migrate to ..." lines sit under the
//! ratio's limits), and by default both directions are allowed then
//! ([`MigrationRule::Algorithm1`]). §3.2.3 ("Migration Regulation") states
//! a rule for every interval: migrate only away from the device with the
//! higher latency, none when they are equal ([`MigrationRule::AwayFromSlower`]).
//! Defaults are the paper's: θ = 0.05, ratioStep = 0.02, and no tail cap
//! (offloadRatioMax = 1).

/// Which migrations the migrator may start until the next tuning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Promotions and demotions both.
    Both,
    /// Only moves that put data on the capacity device.
    ToCapacityOnly,
    /// Only moves that put data on the performance device.
    ToPerformanceOnly,
    /// None: the devices are balanced.
    Stop,
}

/// Which migrations run while the offload ratio moves (see the module
/// documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MigrationRule {
    /// Algorithm 1 as printed: both directions until the ratio reaches a
    /// limit.
    #[default]
    Algorithm1,
    /// §3.2.3: always only away from the slower device.
    AwayFromSlower,
}

/// What Algorithm 1 asks of the mirrored class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorChange {
    /// Nothing.
    None,
    /// Grow it by its growth step.
    Enlarge,
    /// At its largest: swap its coldest segments for hotter ones.
    ImproveHotness,
}

/// One tuning's outcome.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The offload ratio from now on.
    pub offload_ratio: f64,
    /// What the mirrored class should do.
    pub mirror: MirrorChange,
    /// Which migrations may run.
    pub migration: Migration,
}

/// MOST's offload-ratio controller.
#[derive(Clone, Debug)]
pub struct OffloadController {
    steps: u32,
    max_steps: u32,
    ratio_step: f64,
    theta: f64,
    rule: MigrationRule,
}

impl OffloadController {
    /// A controller at ratio 0 (classic tiering) that moves the ratio by
    /// `ratio_step` up to `ratio_max`, treating latencies within `theta`
    /// (relative) as equal.
    pub fn new(ratio_step: f64, theta: f64, ratio_max: f64) -> OffloadController {
        assert!(
            ratio_step > 0.0 && ratio_step <= 1.0,
            "ratioStep must be in (0, 1], got {ratio_step}"
        );
        assert!(
            (0.0..1.0).contains(&theta),
            "θ must be in [0, 1), got {theta}"
        );
        assert!(
            (0.0..=1.0).contains(&ratio_max),
            "offloadRatioMax must be in [0, 1], got {ratio_max}"
        );
        // The ratio moves in whole steps, so "at the maximum" is exact.
        let max_steps = (ratio_max / ratio_step + 1e-9).floor() as u32;
        OffloadController {
            steps: 0,
            max_steps,
            ratio_step,
            theta,
            rule: MigrationRule::Algorithm1,
        }
    }

    /// Sets which migrations run while the ratio moves.
    pub fn set_rule(&mut self, rule: MigrationRule) {
        self.rule = rule;
    }

    /// Takes on new settings while running: the ratio stays the nearest
    /// whole number of new steps to where it was, at most the new maximum.
    pub fn retune(&mut self, ratio_step: f64, theta: f64, ratio_max: f64) {
        let (ratio, rule) = (self.offload_ratio(), self.rule);
        *self = OffloadController::new(ratio_step, theta, ratio_max);
        self.rule = rule;
        self.steps = ((ratio / ratio_step).round() as u32).min(self.max_steps);
    }

    /// The current offload ratio.
    pub fn offload_ratio(&self) -> f64 {
        self.steps as f64 * self.ratio_step
    }

    /// One tuning interval: the devices' latencies (any unit, the same for
    /// both) and whether the mirrored class is at its largest.
    pub fn tune(&mut self, perf_latency: f64, cap_latency: f64, mirror_full: bool) -> Decision {
        assert!(
            perf_latency >= 0.0 && cap_latency >= 0.0,
            "latencies must be non-negative: {perf_latency}, {cap_latency}"
        );
        let (mut mirror, mut migration) = (MirrorChange::None, Migration::Both);
        if perf_latency > (1.0 + self.theta) * cap_latency {
            if self.steps == self.max_steps {
                mirror = if mirror_full {
                    MirrorChange::ImproveHotness
                } else {
                    MirrorChange::Enlarge
                };
                migration = Migration::ToCapacityOnly;
            } else {
                self.steps += 1;
            }
            if self.rule == MigrationRule::AwayFromSlower {
                migration = Migration::ToCapacityOnly;
            }
        } else if perf_latency < (1.0 - self.theta) * cap_latency {
            if self.steps == 0 {
                migration = Migration::ToPerformanceOnly;
            } else {
                self.steps -= 1;
            }
            if self.rule == MigrationRule::AwayFromSlower {
                migration = Migration::ToPerformanceOnly;
            }
        } else {
            migration = Migration::Stop;
        }
        Decision {
            offload_ratio: self.offload_ratio(),
            mirror,
            migration,
        }
    }
}

impl Default for OffloadController {
    fn default() -> OffloadController {
        OffloadController::new(0.02, 0.05, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While the ratio climbs or falls, Algorithm 1 as printed lets both
    /// directions migrate; §3.2.3's rule only migrates away from the
    /// slower device.
    #[test]
    fn the_migration_rule_decides_what_runs_while_the_ratio_moves() {
        let mut printed = OffloadController::new(0.1, 0.05, 1.0);
        let mut text = OffloadController::new(0.1, 0.05, 1.0);
        text.set_rule(MigrationRule::AwayFromSlower);
        assert_eq!(printed.tune(200.0, 100.0, false).migration, Migration::Both);
        assert_eq!(
            text.tune(200.0, 100.0, false).migration,
            Migration::ToCapacityOnly
        );
        assert_eq!(printed.tune(50.0, 100.0, false).migration, Migration::Both);
        assert_eq!(
            text.tune(50.0, 100.0, false).migration,
            Migration::ToPerformanceOnly
        );
        text.retune(0.02, 0.05, 1.0);
        assert_eq!(
            text.tune(200.0, 100.0, false).migration,
            Migration::ToCapacityOnly,
            "retuning keeps the rule"
        );
    }

    #[test]
    fn retuning_keeps_the_ratio_to_the_nearest_new_step_within_the_new_maximum() {
        let mut c = OffloadController::new(0.1, 0.05, 1.0);
        for _ in 0..4 {
            c.tune(200.0, 100.0, false);
        }
        assert!((c.offload_ratio() - 0.4).abs() < 1e-12);
        c.retune(0.25, 0.05, 1.0);
        assert!(
            (c.offload_ratio() - 0.5).abs() < 1e-12,
            "{}",
            c.offload_ratio()
        );
        c.retune(0.25, 0.05, 0.3);
        assert!(
            (c.offload_ratio() - 0.25).abs() < 1e-12,
            "{}",
            c.offload_ratio()
        );
        // At the new maximum the next overload grows the mirror instead.
        let d = c.tune(200.0, 100.0, false);
        assert_eq!((d.offload_ratio, d.mirror), (0.25, MirrorChange::Enlarge));
    }

    #[test]
    fn an_overloaded_performance_device_raises_the_ratio_step_by_step() {
        let mut c = OffloadController::default();
        for i in 1..=3 {
            let d = c.tune(200.0, 100.0, false);
            assert!((d.offload_ratio - 0.02 * i as f64).abs() < 1e-12);
            assert_eq!(
                (d.mirror, d.migration),
                (MirrorChange::None, Migration::Both)
            );
        }
    }

    #[test]
    fn latencies_within_theta_stop_migration_and_hold_the_ratio() {
        let mut c = OffloadController::default();
        c.tune(200.0, 100.0, false);
        for (p, cap) in [(104.9, 100.0), (95.1, 100.0), (100.0, 100.0)] {
            let d = c.tune(p, cap, false);
            assert_eq!(d.migration, Migration::Stop, "{p} vs {cap}");
            assert!((d.offload_ratio - 0.02).abs() < 1e-12);
        }
    }

    #[test]
    fn at_ratio_zero_an_idle_performance_device_pulls_data_back() {
        let mut c = OffloadController::default();
        let d = c.tune(50.0, 100.0, false);
        assert_eq!(d.offload_ratio, 0.0);
        assert_eq!(d.migration, Migration::ToPerformanceOnly);
        c.tune(200.0, 100.0, false);
        let d = c.tune(50.0, 100.0, false);
        assert_eq!((d.offload_ratio, d.migration), (0.0, Migration::Both));
    }

    /// With a tail cap of 0.1 the ratio stops at 0.1; then the mirrored
    /// class grows, and once it is full its hotness improves, migrating
    /// only toward the capacity device.
    #[test]
    fn at_the_cap_the_mirrored_class_grows_then_improves() {
        let mut c = OffloadController::new(0.02, 0.05, 0.1);
        for _ in 0..5 {
            c.tune(300.0, 100.0, false);
        }
        assert!((c.offload_ratio() - 0.1).abs() < 1e-12);
        let d = c.tune(300.0, 100.0, false);
        assert_eq!(
            (d.mirror, d.migration),
            (MirrorChange::Enlarge, Migration::ToCapacityOnly)
        );
        let d = c.tune(300.0, 100.0, true);
        assert_eq!(d.mirror, MirrorChange::ImproveHotness);
        assert!((d.offload_ratio - 0.1).abs() < 1e-12);
    }

    /// The ratio never leaves [0, offloadRatioMax] over random latencies.
    #[test]
    fn the_ratio_stays_in_range() {
        let mut rng = crate::rng::Rng::new(3);
        let mut c = OffloadController::new(0.02, 0.05, 0.5);
        for _ in 0..10_000 {
            let d = c.tune(rng.next_f64() * 200.0, rng.next_f64() * 200.0, false);
            assert!(
                (0.0..=0.5 + 1e-12).contains(&d.offload_ratio),
                "{}",
                d.offload_ratio
            );
        }
    }
}
