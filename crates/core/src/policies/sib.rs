//! SIB+ and SIB++: the SIB load balancer (Orthus §6.4) as the Orthus authors
//! reimplemented it in Open CAS (`josehu07/ocf-mf`, branch
//! `kernel_vel_5_sib`, `sib_monitor_without_window_func`; ALGORITHMS.md).
//!
//! SIB learns the cache device's peak throughput, then bypasses requests
//! when the cache device looks saturated. It works per request (the "+" of
//! SIB+: the original SIB bypasses whole processes) and routes a fraction
//! `load_admit` of clean read hits to the cache, the rest to the capacity
//! device, like NHC. SIB+ never admits read misses (SIB uses the fast device
//! as a write buffer); SIB++ admits them.
//!
//! Every `window_ms` (50 ms) window measures the front-end (client)
//! throughput in bytes/s, the cache device's throughput (bytes/s read and
//! written) and the front end's mean read latency. The controller cycles
//! through three phases:
//!
//! - **Wait.** `load_admit` stays where it was (1 at the start) until the
//!   read miss ratio is stable: two
//!   consecutive `stable_window_ms` (100 ms) samples within
//!   `stable_tolerance` (0.1 %) and at most `max_miss_ratio` (30 %) missing,
//!   as NHC's State 1 (`stable.rs`).
//! - **Exploration.** Each window measures at `load_admit − step` (1 %, not
//!   below `min_load_admit`, 50 %). If the front-end throughput beat the
//!   previous window's, the lower value is kept and the window's cache
//!   throughput and latency are recorded (their running mean and variance,
//!   and the lowest latency); otherwise `load_admit` goes back. After more
//!   than `samples` (5) recorded windows, inference begins.
//! - **Inference.** Each window computes the z-score of the cache device's
//!   throughput against what was recorded. While z > −`z_threshold` (4: the
//!   device runs at its learned peak, saturated) and the latency is above
//!   (1 + `latency_slack`) × the lowest recorded, a counter climbs; on the
//!   window after it reaches `confirm_windows − 1` (3) SIB measures one
//!   window at `load_admit − step`, keeps that value, and records the window
//!   if the front end got faster. A latency at the minimum resets the
//!   counter. While z ≤ −`z_threshold` the counter falls; on the window
//!   after it reaches −(`confirm_windows` − 1) the workload has changed:
//!   everything recorded is forgotten and SIB waits again.
//!
//! Two quirks of the authors' code are kept. The z-score divides by
//! √(s² / (n − 1)), where s² is already the sample variance of the n
//! recorded windows, a deviation √(n − 1) times smaller than the sample's
//! (`z_sample_std = true` uses s); and with s² = 0 a window counts as z = 0
//! when above 85 % of the mean, else as z = −5. `latency_slack` (0 by
//! default, the code's strict comparison) and `min_window_ops` (a window
//! stretches until it holds that many client requests) are ours.

use super::cache::{CachePair, CachePolicy, Scheduler};
use super::stable::{StableRule, StableWait};
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
    /// Recorded windows exploration collects before inference (it stops
    /// after one more than this, as the code's `num_elements > 5`).
    pub samples: u64,
    /// |z| bound between "at the learned peak" and "workload changed".
    pub z_threshold: f64,
    /// Use the recorded windows' sample deviation in z, not the code's
    /// √(s² / (n − 1)).
    pub z_sample_std: bool,
    /// Windows in a row that act (the code's counter reaching ±3 and one
    /// more window).
    pub confirm_windows: u32,
    /// Latency above (1 + slack) × the lowest recorded counts as high.
    pub latency_slack: f64,
    /// Requests a window must contain before it counts.
    pub min_window_ops: u64,
    /// When the miss ratio is stable enough to explore.
    pub stable: StableRule,
}

impl SibConfig {
    /// Reads SIB's parameters.
    pub fn from_params(p: &Params, policy: &str) -> Result<Self, PolicyError> {
        let e = param_err(policy);
        let ms = |key: &str, default: f64| -> Result<u64, PolicyError> {
            Ok((p.f64_in(key, default, 0.01, 600_000.0).map_err(&e)? * 1e6) as u64)
        };
        Ok(SibConfig {
            window_ns: ms("window_ms", 50.0)?,
            step: p.f64_in("step", 0.01, 1e-4, 0.5).map_err(&e)?,
            min_load_admit: p.f64_in("min_load_admit", 0.5, 0.0, 1.0).map_err(&e)?,
            samples: p.u64_in("samples", 5, 1, 1 << 20).map_err(&e)?,
            z_threshold: p.f64_in("z_threshold", 4.0, 0.0, 1e6).map_err(&e)?,
            z_sample_std: p.bool("z_sample_std", false).map_err(&e)?,
            confirm_windows: p.u64_in("confirm_windows", 4, 1, 1000).map_err(&e)? as u32,
            latency_slack: p.f64_in("latency_slack", 0.0, -1.0, 100.0).map_err(&e)?,
            min_window_ops: p.u64_in("min_window_ops", 64, 1, 1 << 40).map_err(&e)?,
            stable: StableRule {
                window_ns: ms("stable_window_ms", 100.0)?,
                tolerance: p.f64_in("stable_tolerance", 0.001, 0.0, 1.0).map_err(&e)?,
                noise_aware: p.bool("noise_aware", false).map_err(&e)?,
                max_miss_ratio: p.f64_in("max_miss_ratio", 0.3, 0.0, 1.0).map_err(&e)?,
                min_reads: 1,
            },
        })
    }
}

/// One window's measurements.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    ns: u64,
    client_ops: u64,
    client_bytes: u64,
    client_read_ops: u64,
    client_read_latency_sum_ns: u64,
    cache: DeviceTotals,
}

impl Window {
    fn add(&mut self, o: &Observation, cache: usize) {
        self.ns += o.interval_ns;
        self.client_ops += o.client_ops;
        self.client_bytes += o.client_bytes;
        self.client_read_ops += o.client_read_ops;
        self.client_read_latency_sum_ns += o.client_read_latency_sum_ns;
        if let Some(d) = o.devices.get(cache) {
            self.cache.add(d);
        }
    }
    fn per_s(&self, x: u64) -> f64 {
        x as f64 * 1e9 / self.ns.max(1) as f64
    }
    fn front_bytes_per_s(&self) -> f64 {
        self.per_s(self.client_bytes)
    }
    fn cache_bytes_per_s(&self) -> f64 {
        self.per_s(self.cache.bytes)
    }
    /// The front end's mean read latency (the code's CAS device read ticks
    /// per read), None in a window without reads.
    fn read_latency_ns(&self) -> Option<f64> {
        (self.client_read_ops > 0)
            .then(|| self.client_read_latency_sum_ns as f64 / self.client_read_ops as f64)
    }
}

/// What exploration and inference recorded: the cache device's throughput
/// (running mean and variance, Welford) and the lowest front-end latency.
#[derive(Clone, Copy, Debug)]
struct Learned {
    n: u64,
    mean: f64,
    m2: f64,
    min_latency_ns: f64,
}

impl Default for Learned {
    fn default() -> Self {
        Learned {
            n: 0,
            mean: 0.0,
            m2: 0.0,
            min_latency_ns: f64::INFINITY,
        }
    }
}

impl Learned {
    fn record(&mut self, w: &Window) {
        let x = w.cache_bytes_per_s();
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
        if let Some(latency_ns) = w.read_latency_ns() {
            self.min_latency_ns = self.min_latency_ns.min(latency_ns);
        }
    }
    /// The z-score of a cache throughput, as the code computes it.
    fn z(&self, bytes_per_s: f64, sample_std: bool) -> f64 {
        let var = if self.n < 2 {
            0.0
        } else {
            self.m2 / (self.n - 1) as f64
        };
        if var <= 0.0 {
            return if bytes_per_s > 0.85 * self.mean {
                0.0
            } else {
                -5.0
            };
        }
        let sd = if sample_std {
            var.sqrt()
        } else {
            (var / (self.n - 1) as f64).sqrt()
        };
        (bytes_per_s - self.mean) / sd
    }
}

/// Where the controller is in its cycle.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Until the miss ratio is stable; load_admit keeps its value.
    Wait,
    /// Stepping down while the front end gets faster; `base` is the value
    /// kept so far (the window runs at one step below it).
    Explore { base: f64 },
    /// Watching the cache device's throughput; `lowered` marks a window run
    /// at a value just stepped down to.
    Infer { lowered: bool },
}

/// The SIB scheduler (run by a [`CachePolicy`]).
pub struct Sib {
    name: &'static str,
    admit_misses: bool,
    cfg: SibConfig,
    rng: Rng,
    load_admit: f64,
    phase: Phase,
    stable_wait: StableWait,
    window: Window,
    prev_front_bytes_per_s: Option<f64>,
    learned: Learned,
    /// The code's `tendency_flag`: up while saturated, down while changed.
    tendency: i64,
    last_z: f64,
    retrainings: u64,
}

impl Sib {
    /// A SIB scheduler waiting for a stable miss ratio; `admit_misses` makes
    /// it SIB++.
    pub fn new(name: &'static str, admit_misses: bool, cfg: SibConfig, seed: u64) -> Self {
        Sib {
            name,
            admit_misses,
            cfg,
            rng: Rng::new(seed ^ 0x0053_4942),
            load_admit: 1.0,
            phase: Phase::Wait,
            stable_wait: StableWait::default(),
            window: Window::default(),
            prev_front_bytes_per_s: None,
            learned: Learned::default(),
            tendency: 0,
            last_z: 0.0,
            retrainings: 0,
        }
    }

    fn stepped_down(&self, from: f64) -> f64 {
        let next = ((from - self.cfg.step) * 1e6).round() / 1e6;
        next.max(self.cfg.min_load_admit)
    }

    /// Back to the wait. As in the code, `load_admit` keeps its value until
    /// exploration starts again from 1.
    fn wait(&mut self) {
        self.phase = Phase::Wait;
        self.stable_wait.restart();
        self.prev_front_bytes_per_s = None;
        self.learned = Learned::default();
        self.tendency = 0;
    }

    fn explore_from(&mut self, base: f64) {
        self.phase = Phase::Explore { base };
        self.load_admit = self.stepped_down(base);
    }

    fn explore(&mut self, base: f64, w: &Window) {
        let front = w.front_bytes_per_s();
        let faster = self.prev_front_bytes_per_s.is_some_and(|prev| front > prev);
        self.prev_front_bytes_per_s = Some(front);
        let base = if faster {
            self.learned.record(w);
            self.load_admit
        } else {
            base
        };
        if self.learned.n > self.cfg.samples {
            self.phase = Phase::Infer { lowered: false };
            self.load_admit = base;
        } else {
            self.explore_from(base);
        }
    }

    fn infer(&mut self, lowered: bool, w: &Window) {
        let front = w.front_bytes_per_s();
        if lowered {
            // The window at the value just stepped down to is recorded when
            // the front end got faster; it is not judged.
            if self.prev_front_bytes_per_s.is_some_and(|prev| front > prev) {
                self.learned.record(w);
            }
            self.phase = Phase::Infer { lowered: false };
            return;
        }
        self.prev_front_bytes_per_s = Some(front);
        let z = self.learned.z(w.cache_bytes_per_s(), self.cfg.z_sample_std);
        self.last_z = z;
        let act = i64::from(self.cfg.confirm_windows) - 1;
        if z > -self.cfg.z_threshold {
            let high = w.read_latency_ns().is_some_and(|latency_ns| {
                latency_ns > (1.0 + self.cfg.latency_slack) * self.learned.min_latency_ns
            });
            if !high {
                self.tendency = 0;
            } else if self.tendency >= act {
                self.tendency = 0;
                self.load_admit = self.stepped_down(self.load_admit);
                self.phase = Phase::Infer { lowered: true };
            } else {
                self.tendency += 1;
            }
        } else if self.tendency <= -act {
            self.retrainings += 1;
            self.wait();
        } else {
            self.tendency -= 1;
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
        Some(self.cfg.window_ns.min(self.cfg.stable.window_ns))
    }
    fn on_tick(&mut self, obs: &Observation, pair: CachePair) {
        if self.phase == Phase::Wait {
            if self.stable_wait.tick(obs, &self.cfg.stable).is_some() {
                self.window = Window::default();
                self.explore_from(1.0);
            }
            return;
        }
        self.window.add(obs, pair.cache as usize);
        if self.window.ns < self.cfg.window_ns || self.window.client_ops < self.cfg.min_window_ops {
            return;
        }
        let w = std::mem::take(&mut self.window);
        match self.phase {
            Phase::Wait => unreachable!("the wait returned above"),
            Phase::Explore { base } => self.explore(base, &w),
            Phase::Infer { lowered } => self.infer(lowered, &w),
        }
    }
    fn state(&self, out: &mut Vec<(&'static str, f64)>) {
        let phase = match self.phase {
            Phase::Wait => 0.0,
            Phase::Explore { .. } => 1.0,
            Phase::Infer { .. } => 2.0,
        };
        out.extend([
            ("load_admit", self.load_admit),
            ("data_admit", if self.admit_misses { 1.0 } else { 0.0 }),
            ("sib_phase", phase),
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

    /// A 50 ms window: `front_bytes` client bytes (1,000 reads, 95 % hits),
    /// `cache_bytes` through the cache device, `latency_ns` mean read latency.
    fn obs(front_bytes: u64, cache_bytes: u64, latency_ns: u64) -> Observation {
        let dev = DeviceObservation {
            read_ops: 100,
            read_bytes: cache_bytes,
            ..Default::default()
        };
        Observation {
            interval_ns: 50_000_000,
            client_ops: 1000,
            client_read_ops: 1000,
            client_bytes: front_bytes,
            client_read_latency_sum_ns: 1000 * latency_ns,
            read_hits: 950,
            read_misses: 50,
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

    /// Runs the wait to its end: two 100 ms samples with the same miss ratio.
    fn settle(s: &mut Sib) {
        for _ in 0..4 {
            assert_eq!(s.phase, Phase::Wait);
            s.on_tick(&obs(1000, 1000, 100_000), PAIR);
        }
        assert_eq!(s.phase, Phase::Explore { base: 1.0 });
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn exploration_keeps_a_step_only_when_the_front_end_got_faster() {
        let mut s = sib();
        settle(&mut s);
        assert!(close(s.load_admit, 0.99));
        // The first window has nothing to beat: back to 1, try 0.99 again.
        s.on_tick(&obs(1000, 2000, 100_000), PAIR);
        assert_eq!(s.phase, Phase::Explore { base: 1.0 });
        // Faster: 0.99 is kept and recorded; then 0.98 is tried.
        s.on_tick(&obs(1100, 2000, 100_000), PAIR);
        assert_eq!(s.phase, Phase::Explore { base: 0.99 });
        assert!(close(s.load_admit, 0.98));
        // Slower: 0.98 is not kept.
        s.on_tick(&obs(1050, 2000, 100_000), PAIR);
        assert_eq!(s.phase, Phase::Explore { base: 0.99 });
        assert_eq!(s.learned.n, 1);
        // Five more faster windows: six recorded, inference at 0.94.
        for i in 0..5 {
            s.on_tick(&obs(1100 + 10 * i, 2000, 100_000), PAIR);
        }
        assert_eq!(s.learned.n, 6);
        assert_eq!(s.phase, Phase::Infer { lowered: false });
        assert!(close(s.load_admit, 0.94), "{}", s.load_admit);
    }

    /// Exploration with six recorded windows of 1,000 and 1,001 cache bytes.
    fn inferring() -> Sib {
        let mut s = sib();
        settle(&mut s);
        s.on_tick(&obs(1000, 1000, 100_000), PAIR);
        for i in 0..6 {
            s.on_tick(&obs(1100 + i, 1000 + i % 2, 100_000), PAIR);
        }
        assert_eq!(s.phase, Phase::Infer { lowered: false });
        assert!(close(s.load_admit, 0.94));
        s
    }

    #[test]
    fn inference_steps_down_after_four_saturated_windows() {
        let mut s = inferring();
        // Latency above the recorded minimum, throughput at the peak.
        for _ in 0..3 {
            s.on_tick(&obs(1200, 1000, 150_000), PAIR);
            assert!(close(s.load_admit, 0.94));
        }
        s.on_tick(&obs(1200, 1000, 150_000), PAIR);
        assert!(close(s.load_admit, 0.93));
        assert_eq!(s.phase, Phase::Infer { lowered: true });
        // The window at the new value: faster than the last, so recorded.
        s.on_tick(&obs(1300, 1000, 150_000), PAIR);
        assert_eq!(s.learned.n, 7);
        assert_eq!(s.phase, Phase::Infer { lowered: false });
        // A latency at the minimum resets the count.
        for _ in 0..3 {
            s.on_tick(&obs(1200, 1000, 150_000), PAIR);
        }
        s.on_tick(&obs(1200, 1000, 100_000), PAIR);
        for _ in 0..3 {
            s.on_tick(&obs(1200, 1000, 150_000), PAIR);
        }
        assert!(close(s.load_admit, 0.93));
    }

    #[test]
    fn a_collapse_of_the_cache_throughput_sends_it_back_to_wait() {
        let mut s = inferring();
        // Recorded: 20,000 and 20,020 bytes/s three times each, mean 20,010,
        // s² 120. 995 bytes in 50 ms is 19,900 bytes/s: the code's deviation
        // √(120 / 5) gives z = −22.5, the sample's √120 gives −10.0.
        let z = s.learned.z(19_900.0, false);
        assert!((z - (-110.0 / 24f64.sqrt())).abs() < 1e-6, "{z}");
        assert!((s.learned.z(19_900.0, true) - (-110.0 / 120f64.sqrt())).abs() < 1e-6);
        for _ in 0..3 {
            s.on_tick(&obs(1200, 995, 100_000), PAIR);
            assert_ne!(s.phase, Phase::Wait);
        }
        s.on_tick(&obs(1200, 995, 100_000), PAIR);
        assert_eq!(s.phase, Phase::Wait);
        assert_eq!(s.retrainings, 1);
        // The wait keeps the value it had; exploration starts from 1 again.
        assert!(close(s.load_admit, 0.94));
        settle(&mut s);
        assert!(close(s.load_admit, 0.99));
        assert_eq!(s.learned.n, 0);
    }

    #[test]
    fn never_goes_below_the_floor() {
        let mut s = inferring();
        for _ in 0..1000 {
            s.on_tick(&obs(1200, 1000, 150_000), PAIR);
        }
        assert!(close(s.load_admit, 0.5), "{}", s.load_admit);
    }

    #[test]
    fn an_unstable_miss_ratio_keeps_it_waiting() {
        let mut s = sib();
        for i in 0..40 {
            let mut o = obs(1000, 1000, 100_000);
            // Miss ratio alternating 5 % and 6 %: never within 0.1 %.
            if (i / 2) % 2 == 1 {
                o.read_hits = 940;
                o.read_misses = 60;
            }
            s.on_tick(&o, PAIR);
        }
        assert_eq!(s.phase, Phase::Wait);
        assert_eq!(s.load_admit, 1.0);
    }
}
