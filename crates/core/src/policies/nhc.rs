//! Non-hierarchical caching (NHC), the Orthus paper's Algorithm 1.
//!
//! Classic caching plus two decision points: `data_admit` (are read misses
//! admitted?) and `load_admit` (the fraction of clean read hits the cache
//! serves; the rest go to the capacity device). The scheduler:
//!
//! - **State 1** runs classic caching (`data_admit` on, `load_admit` 1) until
//!   the read hit ratio is stable: two consecutive measurement windows of
//!   `stable_window_ms` agree within `stable_tolerance` and the miss ratio is
//!   at most `max_miss_ratio`.
//! - **State 2** turns `data_admit` off, remembers the miss ratio and
//!   hill-climbs `load_admit`: it measures the target metric for one window
//!   each at `la`, `la + step` and `la - step` (values outside [0, 1] count
//!   as worst), and moves to the best, staying when the middle is best. When
//!   staying at 1.0 it allows `rounds_at_one` more rounds, then returns to
//!   State 1. After each step, a hit ratio below `(1 - hit_drop_fraction)`
//!   times the one remembered on entering State 2 is a workload change and
//!   restarts State 1 (the paper's line 17).
//!
//! Defaults follow the paper (§5: 5 ms windows, 2 % steps, 0.1 % stability
//! over 100 ms, quit tuning as soon as it settles at 1.0; α of line 17 is
//! not given, we use 0.1). The authors' code values are options
//! (ALGORITHMS.md): `step = 0.01`, `max_miss_ratio = 0.2` (tune only when
//! at most 20 % of reads miss, restart above it) and `max_miss_drift = 0.2`
//! (restart when the miss ratio moves 20 points from its value on entering
//! State 2); both are off by default. Three options of ours help where the
//! paper's settings meet small or noisy windows (`docs/reproduction.md`
//! measures each): `min_window_ops` stretches a window until it holds that
//! many completed requests (slow hierarchies, such as FlashSim's, otherwise
//! tune on a handful of requests), `noise_aware` widens the stability test
//! to three standard errors of the sampled hit ratio, and `rounds_at_one`
//! allows that many more rounds at 1.0 before returning to State 1.
//!
//! In write-back, a dirty block's reads can only be served by the cache,
//! and a cache that no longer admits misses evicts nothing, so dirty blocks
//! pile up to the flusher's high watermark and NHC has fewer and fewer hits
//! to send away. `offload_clean_ratio` (off by default, as the paper) makes
//! the flusher hold dirty data at that share of the cache while NHC sends
//! some clean hits to the capacity device (`docs/experiments.md`).

use super::cache::{CachePair, CachePolicy, Scheduler};
use super::stable::{StableRule, StableWait};
use super::{param_err, Registered};
use crate::hist::Histogram;
use crate::observe::Observation;
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};
use crate::rng::Rng;

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "nhc",
    summary: "non-hierarchical caching (Orthus): classic caching that offloads excess read load to the capacity device",
    build,
};

/// What the scheduler maximizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Bytes per second moved by all devices (block-layer statistics).
    Throughput,
    /// Client operations per second.
    ClientThroughput,
    /// Mean end-to-end read latency (minimized).
    MeanLatency,
    /// Mean of the worst 1 % of end-to-end latencies (minimized).
    TailLatency,
}

/// The scheduler's parameters a running volume can change: all of them.
pub const NHC_LIVE_PARAMS: &[&str] = &[
    "step",
    "window_ms",
    "stable_window_ms",
    "stable_tolerance",
    "noise_aware",
    "hit_drop_fraction",
    "max_miss_ratio",
    "max_miss_drift",
    "min_window_ops",
    "rounds_at_one",
    "always_admit",
    "target",
    "offload_clean_ratio",
];

/// The tunable settings of the scheduler.
#[derive(Clone, Debug)]
pub struct NhcConfig {
    /// load_admit step.
    pub step: f64,
    /// Measurement window, ns.
    pub window_ns: u64,
    /// Hit-ratio stability window, ns.
    pub stable_window_ns: u64,
    /// Largest hit-ratio change between stability windows still "stable".
    pub stable_tolerance: f64,
    /// Widen the tolerance to the sampling noise of small windows.
    pub noise_aware: bool,
    /// Relative hit-ratio drop that restarts State 1 (the paper's α).
    pub hit_drop_fraction: f64,
    /// Miss ratio above which tuning is pointless (restart State 1).
    pub max_miss_ratio: f64,
    /// Miss-ratio change from the tuning baseline that restarts State 1.
    pub max_miss_drift: f64,
    /// Requests a window must contain before it counts.
    pub min_window_ops: u64,
    /// Extra tuning rounds allowed at load_admit = 1 before State 1.
    pub rounds_at_one: u32,
    /// Keep admitting read misses while tuning (Figure 12c's variant).
    pub always_admit: bool,
    /// The metric to optimize.
    pub target: Target,
    /// While tuning with some clean hits sent to the capacity device, flush
    /// dirty blocks down to this share of the cache (1: only the flusher's
    /// watermarks, as the paper).
    pub offload_clean_ratio: f64,
}

impl NhcConfig {
    /// Reads the scheduler's parameters.
    pub fn from_params(p: &Params, policy: &str) -> Result<Self, PolicyError> {
        let e = param_err(policy);
        let target = match p
            .choice(
                "target",
                "throughput",
                &[
                    "throughput",
                    "client_throughput",
                    "mean_latency",
                    "p99_latency",
                ],
            )
            .map_err(&e)?
            .as_str()
        {
            "client_throughput" => Target::ClientThroughput,
            "mean_latency" => Target::MeanLatency,
            "p99_latency" => Target::TailLatency,
            _ => Target::Throughput,
        };
        Ok(NhcConfig {
            step: p.f64_in("step", 0.02, 1e-4, 0.5).map_err(&e)?,
            window_ns: (p.f64_in("window_ms", 5.0, 0.01, 60_000.0).map_err(&e)? * 1e6) as u64,
            stable_window_ns: (p
                .f64_in("stable_window_ms", 100.0, 0.01, 600_000.0)
                .map_err(&e)?
                * 1e6) as u64,
            stable_tolerance: p.f64_in("stable_tolerance", 0.001, 0.0, 1.0).map_err(&e)?,
            noise_aware: p.bool("noise_aware", false).map_err(&e)?,
            hit_drop_fraction: p.f64_in("hit_drop_fraction", 0.1, 0.0, 1.0).map_err(&e)?,
            max_miss_ratio: p.f64_in("max_miss_ratio", 1.0, 0.0, 1.0).map_err(&e)?,
            max_miss_drift: p.f64_in("max_miss_drift", 1.0, 0.0, 1.0).map_err(&e)?,
            min_window_ops: p.u64_in("min_window_ops", 1, 1, 1 << 40).map_err(&e)?,
            rounds_at_one: p.u64_in("rounds_at_one", 0, 0, 1000).map_err(&e)? as u32,
            always_admit: p.bool("always_admit", false).map_err(&e)?,
            target,
            offload_clean_ratio: p.f64_in("offload_clean_ratio", 1.0, 0.0, 1.0).map_err(&e)?,
        })
    }
}

fn build(p: &Params, vol: &VolumeSpec, seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let cfg = NhcConfig::from_params(p, "nhc")?;
    Ok(Box::new(CachePolicy::build(p, vol, Nhc::new(cfg, seed))?))
}

/// One measurement accumulated over one or more ticks.
#[derive(Clone, Debug, Default)]
struct Meter {
    ns: u64,
    device_bytes: u64,
    client_ops: u64,
    read_lat_sum_ns: u64,
    read_ops: u64,
    lat: Histogram,
    reads: u64,
    misses: u64,
}

impl Meter {
    fn add(&mut self, o: &Observation, tail: bool) {
        self.ns += o.interval_ns;
        self.device_bytes += o.devices.iter().map(|d| d.bytes()).sum::<u64>();
        self.client_ops += o.client_ops;
        self.read_lat_sum_ns += o.client_read_latency_sum_ns;
        self.read_ops += o.client_read_ops;
        if tail {
            self.lat.merge(&o.client_latency);
        }
        self.reads += o.read_hits + o.read_misses;
        self.misses += o.read_misses;
    }
    fn clear(&mut self) {
        let lat = std::mem::take(&mut self.lat);
        *self = Meter::default();
        self.lat = lat;
        self.lat.clear();
    }
    fn miss_ratio(&self) -> Option<f64> {
        (self.reads > 0).then(|| self.misses as f64 / self.reads as f64)
    }
    fn metric(&self, target: Target) -> f64 {
        let secs = self.ns.max(1) as f64 / 1e9;
        match target {
            Target::Throughput => self.device_bytes as f64 / secs,
            Target::ClientThroughput => self.client_ops as f64 / secs,
            Target::MeanLatency => {
                if self.read_ops == 0 {
                    f64::NEG_INFINITY
                } else {
                    -(self.read_lat_sum_ns as f64 / self.read_ops as f64)
                }
            }
            Target::TailLatency => {
                if self.lat.count() == 0 {
                    f64::NEG_INFINITY
                } else {
                    -self.lat.tail_mean(0.99)
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    Center,
    Up,
    Down,
}

/// The NHC scheduler (run by a [`CachePolicy`]).
pub struct Nhc {
    cfg: NhcConfig,
    rng: Rng,
    /// Whether read misses are admitted.
    data_admit: bool,
    /// Fraction of clean read hits served by the cache (the applied value).
    load_admit: f64,
    /// The load_admit value the current probe cycle is centered on.
    center: f64,
    tuning: bool,
    stable_wait: StableWait,
    probe: Probe,
    probe_meter: Meter,
    cycle_meter: Meter,
    f_center: f64,
    f_up: f64,
    base_miss: f64,
    rounds_at_one_used: u32,
    restarts: u64,
}

impl Nhc {
    /// The scheduler in State 1.
    pub fn new(cfg: NhcConfig, seed: u64) -> Self {
        Nhc {
            cfg,
            rng: Rng::new(seed ^ 0x004E_4843),
            data_admit: true,
            load_admit: 1.0,
            center: 1.0,
            tuning: false,
            stable_wait: StableWait::default(),
            probe: Probe::Center,
            probe_meter: Meter::default(),
            cycle_meter: Meter::default(),
            f_center: 0.0,
            f_up: 0.0,
            base_miss: 0.0,
            rounds_at_one_used: 0,
            restarts: 0,
        }
    }

    fn enter_state1(&mut self) {
        self.tuning = false;
        self.data_admit = true;
        self.load_admit = 1.0;
        self.center = 1.0;
        self.stable_wait.restart();
    }

    fn enter_state2(&mut self, miss: f64) {
        self.tuning = true;
        self.data_admit = self.cfg.always_admit;
        self.base_miss = miss;
        self.rounds_at_one_used = 0;
        self.center = 1.0;
        self.begin_cycle();
    }

    fn begin_cycle(&mut self) {
        self.probe = Probe::Center;
        self.load_admit = self.center;
        self.probe_meter.clear();
        self.cycle_meter.clear();
    }

    fn state1_tick(&mut self, obs: &Observation) {
        let rule = StableRule {
            window_ns: self.cfg.stable_window_ns,
            tolerance: self.cfg.stable_tolerance,
            noise_aware: self.cfg.noise_aware,
            max_miss_ratio: self.cfg.max_miss_ratio,
            min_reads: self.cfg.min_window_ops,
        };
        if let Some(miss) = self.stable_wait.tick(obs, &rule) {
            self.enter_state2(miss);
        }
    }

    fn state2_tick(&mut self, obs: &Observation) {
        let tail = self.cfg.target == Target::TailLatency;
        self.probe_meter.add(obs, tail);
        self.cycle_meter.add(obs, false);
        if self.probe_meter.ns < self.cfg.window_ns
            || self.probe_meter.client_ops < self.cfg.min_window_ops
        {
            return;
        }
        let f = self.probe_meter.metric(self.cfg.target);
        self.probe_meter.clear();
        let (step, c) = (self.cfg.step, self.center);
        let can_up = c + step <= 1.0 + 1e-9;
        let can_down = c - step >= -1e-9;
        match self.probe {
            Probe::Center => {
                self.f_center = f;
                self.f_up = f64::NEG_INFINITY;
                if can_up {
                    self.probe = Probe::Up;
                    self.load_admit = (c + step).min(1.0);
                } else if can_down {
                    self.probe = Probe::Down;
                    self.load_admit = (c - step).max(0.0);
                } else {
                    self.decide(f64::NEG_INFINITY);
                }
            }
            Probe::Up => {
                self.f_up = f;
                if can_down {
                    self.probe = Probe::Down;
                    self.load_admit = (c - step).max(0.0);
                } else {
                    self.decide(f64::NEG_INFINITY);
                }
            }
            Probe::Down => self.decide(f),
        }
    }

    /// Ends a probe cycle: moves the center toward the best measurement.
    fn decide(&mut self, f_down: f64) {
        let (step, c) = (self.cfg.step, self.center);
        let best = self.f_center.max(self.f_up).max(f_down);
        let next = if f_down == best {
            c - step
        } else if self.f_up == best {
            c + step
        } else {
            c
        };
        let next = (next.clamp(0.0, 1.0) * 1e6).round() / 1e6;
        if let Some(miss) = self.cycle_meter.miss_ratio() {
            let dropped = 1.0 - miss < (1.0 - self.cfg.hit_drop_fraction) * (1.0 - self.base_miss);
            if dropped
                || miss > self.cfg.max_miss_ratio
                || (miss - self.base_miss).abs() > self.cfg.max_miss_drift
            {
                self.restarts += 1;
                self.enter_state1();
                return;
            }
        }
        if next >= 1.0 && next == c {
            if self.rounds_at_one_used >= self.cfg.rounds_at_one {
                self.enter_state1();
                return;
            }
            self.rounds_at_one_used += 1;
        } else if next < 1.0 {
            self.rounds_at_one_used = 0;
        }
        self.center = next;
        self.begin_cycle();
    }
}

impl Scheduler for Nhc {
    fn name(&self) -> &'static str {
        "nhc"
    }
    fn admit_read_miss(&mut self) -> bool {
        self.data_admit
    }
    fn hit_to_cache(&mut self) -> bool {
        self.load_admit >= 1.0 || self.rng.next_f64() < self.load_admit
    }
    fn tick_interval_ns(&self) -> Option<u64> {
        Some(self.cfg.window_ns.min(self.cfg.stable_window_ns))
    }
    fn on_tick(&mut self, obs: &Observation, _pair: CachePair) {
        if self.tuning {
            self.state2_tick(obs);
        } else {
            self.state1_tick(obs);
        }
    }
    fn live_params(&self) -> &'static [&'static str] {
        NHC_LIVE_PARAMS
    }
    fn reconfigure(&mut self, p: &Params) -> Result<(), PolicyError> {
        let cfg = NhcConfig::from_params(p, "nhc")?;
        let new_target = cfg.target != self.cfg.target;
        self.cfg = cfg;
        // Values measured for another metric cannot be compared with the
        // new one's: the search starts again. Other changes apply from the
        // next window.
        if new_target {
            self.restarts += 1;
            self.enter_state1();
        }
        Ok(())
    }
    fn dirty_target_ratio(&self) -> Option<f64> {
        // At 1 the flusher's watermarks, which are at most 1, decide alone.
        let offloading = self.tuning && self.center < 1.0;
        offloading.then_some(self.cfg.offload_clean_ratio)
    }
    fn state(&self, out: &mut Vec<(&'static str, f64)>) {
        out.extend([
            ("data_admit", if self.data_admit { 1.0 } else { 0.0 }),
            ("load_admit", self.load_admit),
            ("nhc_state", if self.tuning { 2.0 } else { 1.0 }),
            ("nhc_restarts", self.restarts as f64),
        ]);
    }
}
