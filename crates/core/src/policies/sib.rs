//! SIB+ and SIB++: the SIB load balancer (Orthus §6.4) as the Orthus authors
//! reimplemented it for a block cache (ALGORITHMS.md).
//!
//! SIB learns the cache device's peak throughput, then bypasses requests
//! when the cache device looks saturated. It works per request (the "+" of
//! SIB+: the original SIB bypasses whole processes) and routes a fraction
//! `load_admit` of clean read hits to the cache, the rest to the capacity
//! device, like NHC. SIB+ never admits read misses (SIB uses the fast device
//! as a write buffer); SIB++ admits them.
//!
//! Every `window_ms` (50 ms) window the controller measures the front-end
//! (client) throughput, the cache device's throughput (bytes/s) and the
//! cache device's mean latency:
//!
//! - **Training.** Starting at `load_admit` = 1, while the front-end
//!   throughput rises from one window to the next, lower `load_admit` by
//!   `step` (1 %, never below `min_load_admit`, 50 %) and record the cache
//!   device's throughput (its running mean and variance) and the lowest
//!   cache-device latency seen. When the throughput stops rising, or the
//!   floor is reached, switch to inference.
//! - **Inference.** Each window computes the z-score of the cache device's
//!   throughput against what training learned. While z > −`z_threshold` (the
//!   device runs at its learned peak: saturated) and its latency stays above
//!   (1 + `latency_slack`) × the learned minimum for `confirm_windows`
//!   windows in a row, lower `load_admit` by one step. When z ≤
//!   −`z_threshold` for `confirm_windows` windows in a row the workload has
//!   changed: restart training from `load_admit` = 1.
//!
//! `latency_slack` (the meaning of "above its minimum") is ours: the
//! description gives no tolerance. The σ used in z is at least 1 % of the
//! mean, so that one training window does not make every later window an
//! outlier.

use super::cache::{CachePair, CachePolicy, Scheduler};
use super::{param_err, Registered};
use crate::observe::{DeviceTotals, Observation};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};
use crate::rng::Rng;

/// Registry entry for SIB+ (no read-miss admission).
pub const REGISTERED_PLUS: Registered = Registered {
    name: "sib+",
    summary: "SIB per request: learns the cache device's peak, bypasses read hits when saturated; read misses not admitted",
    build: build_plus,
};

/// Registry entry for SIB++ (read misses admitted).
pub const REGISTERED_PLUS_PLUS: Registered = Registered {
    name: "sib++",
    summary: "SIB+ that also admits read misses into the cache",
    build: build_plus_plus,
};

fn build_plus(p: &Params, vol: &VolumeSpec, seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let sched = Sib::new("sib+", false, SibConfig::from_params(p, "sib+")?, seed);
    Ok(Box::new(CachePolicy::build(p, vol, sched)?))
}

fn build_plus_plus(
    p: &Params,
    vol: &VolumeSpec,
    seed: u64,
) -> Result<Box<dyn Policy>, PolicyError> {
    let sched = Sib::new("sib++", true, SibConfig::from_params(p, "sib++")?, seed);
    Ok(Box::new(CachePolicy::build(p, vol, sched)?))
}

/// SIB's tunable settings.
#[derive(Clone, Debug)]
pub struct SibConfig {
    /// Measurement window, ns.
    pub window_ns: u64,
    /// load_admit step.
    pub step: f64,
    /// Lowest load_admit SIB uses.
    pub min_load_admit: f64,
    /// |z| bound between "at the learned peak" and "workload changed".
    pub z_threshold: f64,
    /// Consecutive windows needed before acting.
    pub confirm_windows: u32,
    /// Latency above (1 + slack) × the learned minimum counts as high.
    pub latency_slack: f64,
    /// Requests a window must contain before it counts.
    pub min_window_ops: u64,
}

impl SibConfig {
    /// Reads SIB's parameters.
    pub fn from_params(p: &Params, policy: &str) -> Result<Self, PolicyError> {
        let e = param_err(policy);
        Ok(SibConfig {
            window_ns: (p.f64_in("window_ms", 50.0, 0.01, 60_000.0).map_err(&e)? * 1e6) as u64,
            step: p.f64_in("step", 0.01, 1e-4, 0.5).map_err(&e)?,
            min_load_admit: p.f64_in("min_load_admit", 0.5, 0.0, 1.0).map_err(&e)?,
            z_threshold: p.f64_in("z_threshold", 4.0, 0.0, 1e6).map_err(&e)?,
            confirm_windows: p.u64_in("confirm_windows", 4, 1, 1000).map_err(&e)? as u32,
            latency_slack: p.f64_in("latency_slack", 0.1, 0.0, 100.0).map_err(&e)?,
            min_window_ops: p.u64_in("min_window_ops", 64, 1, 1 << 40).map_err(&e)?,
        })
    }
}

/// One window's measurements.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    ns: u64,
    client_ops: u64,
    cache: DeviceTotals,
}

impl Window {
    fn add(&mut self, o: &Observation, cache: usize) {
        self.ns += o.interval_ns;
        self.client_ops += o.client_ops;
        if let Some(d) = o.devices.get(cache) {
            self.cache.add(d);
        }
    }
    fn per_s(&self, x: u64) -> f64 {
        x as f64 * 1e9 / self.ns.max(1) as f64
    }
}

/// Running mean and variance (Welford).
#[derive(Clone, Copy, Debug, Default)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }
    fn std_dev(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

/// The SIB scheduler (run by a [`CachePolicy`]).
pub struct Sib {
    name: &'static str,
    admit_misses: bool,
    cfg: SibConfig,
    rng: Rng,
    load_admit: f64,
    training: bool,
    window: Window,
    prev_front_ops_per_s: Option<f64>,
    cache_throughput: Moments,
    min_cache_latency_ns: f64,
    saturated_windows: u32,
    changed_windows: u32,
    last_z: f64,
    retrainings: u64,
}

impl Sib {
    /// A SIB scheduler in training; `admit_misses` makes it SIB++.
    pub fn new(name: &'static str, admit_misses: bool, cfg: SibConfig, seed: u64) -> Self {
        Sib {
            name,
            admit_misses,
            cfg,
            rng: Rng::new(seed ^ 0x0053_4942),
            load_admit: 1.0,
            training: true,
            window: Window::default(),
            prev_front_ops_per_s: None,
            cache_throughput: Moments::default(),
            min_cache_latency_ns: f64::INFINITY,
            saturated_windows: 0,
            changed_windows: 0,
            last_z: 0.0,
            retrainings: 0,
        }
    }

    fn start_training(&mut self) {
        self.training = true;
        self.load_admit = 1.0;
        self.prev_front_ops_per_s = None;
        self.cache_throughput = Moments::default();
        self.min_cache_latency_ns = f64::INFINITY;
        self.saturated_windows = 0;
        self.changed_windows = 0;
    }

    fn lower(&mut self) -> bool {
        let next = ((self.load_admit - self.cfg.step) * 1e6).round() / 1e6;
        if next + 1e-9 < self.cfg.min_load_admit {
            return false;
        }
        self.load_admit = next.max(self.cfg.min_load_admit);
        true
    }

    fn train(&mut self, w: &Window) {
        let front = w.per_s(w.client_ops);
        let rising = self.prev_front_ops_per_s.is_none_or(|prev| front > prev);
        if !rising {
            self.training = false;
            return;
        }
        self.prev_front_ops_per_s = Some(front);
        self.cache_throughput.push(w.per_s(w.cache.bytes));
        if let Some(latency_ns) = w.cache.mean_latency_ns() {
            self.min_cache_latency_ns = self.min_cache_latency_ns.min(latency_ns);
        }
        if !self.lower() {
            self.training = false;
        }
    }

    fn infer(&mut self, w: &Window) {
        let m = &self.cache_throughput;
        let sigma = m.std_dev().max(0.01 * m.mean).max(1.0);
        let z = (w.per_s(w.cache.bytes) - m.mean) / sigma;
        self.last_z = z;
        if z > -self.cfg.z_threshold {
            self.changed_windows = 0;
            let high = w.cache.mean_latency_ns().is_some_and(|latency_ns| {
                latency_ns > (1.0 + self.cfg.latency_slack) * self.min_cache_latency_ns
            });
            if high {
                self.saturated_windows += 1;
                if self.saturated_windows >= self.cfg.confirm_windows {
                    self.saturated_windows = 0;
                    self.lower();
                }
            } else {
                self.saturated_windows = 0;
            }
        } else {
            self.saturated_windows = 0;
            self.changed_windows += 1;
            if self.changed_windows >= self.cfg.confirm_windows {
                self.retrainings += 1;
                self.start_training();
            }
        }
    }
}

impl Scheduler for Sib {
    fn name(&self) -> &'static str {
        self.name
    }
    fn admit_read_miss(&mut self) -> bool {
        self.admit_misses
    }
    fn hit_to_cache(&mut self) -> bool {
        self.load_admit >= 1.0 || self.rng.next_f64() < self.load_admit
    }
    fn tick_interval_ns(&self) -> Option<u64> {
        Some(self.cfg.window_ns)
    }
    fn on_tick(&mut self, obs: &Observation, pair: CachePair) {
        self.window.add(obs, pair.cache as usize);
        if self.window.ns < self.cfg.window_ns || self.window.client_ops < self.cfg.min_window_ops {
            return;
        }
        let w = std::mem::take(&mut self.window);
        if self.training {
            self.train(&w);
        } else {
            self.infer(&w);
        }
    }
    fn state(&self, out: &mut Vec<(&'static str, f64)>) {
        out.extend([
            ("load_admit", self.load_admit),
            ("data_admit", if self.admit_misses { 1.0 } else { 0.0 }),
            ("sib_training", if self.training { 1.0 } else { 0.0 }),
            ("sib_z", self.last_z),
            ("sib_retrainings", self.retrainings as f64),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::DeviceObservation;

    const PAIR: CachePair = CachePair {
        cache: 0,
        backing: 1,
    };

    fn obs(client_ops: u64, cache_bytes: u64, cache_latency_ns: u64) -> Observation {
        let dev = DeviceObservation {
            read_ops: 100,
            read_bytes: cache_bytes,
            latency_sum_ns: 100 * cache_latency_ns,
            ..Default::default()
        };
        Observation {
            interval_ns: 50_000_000,
            client_ops,
            devices: vec![dev, DeviceObservation::default()],
            ..Default::default()
        }
    }

    fn sib() -> Sib {
        let p = Params::default();
        Sib::new(
            "sib++",
            true,
            SibConfig::from_params(&p, "sib++").unwrap(),
            1,
        )
    }

    #[test]
    fn trains_while_throughput_rises_then_lowers_when_saturated() {
        let mut s = sib();
        for i in 0..5 {
            s.on_tick(&obs(1000 + 10 * i, 1_000_000, 100_000), PAIR);
        }
        assert!(s.training);
        assert!((s.load_admit - 0.95).abs() < 1e-9, "{}", s.load_admit);
        // Throughput stops rising: inference, load_admit stays.
        s.on_tick(&obs(1000, 1_000_000, 100_000), PAIR);
        assert!(!s.training);
        assert!((s.load_admit - 0.95).abs() < 1e-9);
        // At the learned peak with high latency: one step per 4 windows.
        for _ in 0..8 {
            s.on_tick(&obs(1000, 1_000_000, 200_000), PAIR);
        }
        assert!((s.load_admit - 0.93).abs() < 1e-9, "{}", s.load_admit);
        // Low latency: no change.
        for _ in 0..8 {
            s.on_tick(&obs(1000, 1_000_000, 100_000), PAIR);
        }
        assert!((s.load_admit - 0.93).abs() < 1e-9);
        // Cache throughput collapses for 4 windows: retrain from 1.
        for _ in 0..3 {
            s.on_tick(&obs(1000, 100_000, 100_000), PAIR);
        }
        assert!(!s.training);
        s.on_tick(&obs(1000, 100_000, 100_000), PAIR);
        assert!(s.training);
        assert_eq!(s.load_admit, 1.0);
        assert_eq!(s.retrainings, 1);
    }

    #[test]
    fn never_goes_below_the_floor() {
        let mut s = sib();
        for i in 0..200 {
            s.on_tick(&obs(1000 + 10 * i, 1_000_000, 100_000), PAIR);
        }
        assert!(!s.training);
        assert!((s.load_admit - 0.5).abs() < 1e-9, "{}", s.load_admit);
        for _ in 0..40 {
            s.on_tick(&obs(1000, 1_000_000, 500_000), PAIR);
        }
        assert!((s.load_admit - 0.5).abs() < 1e-9);
    }
}
