//! LBICA, a load balancer for I/O caches (DATE '19), as the Orthus paper
//! compares against it (§6.4, ALGORITHMS.md).
//!
//! LBICA watches the cache device's queue. When the cache device is under
//! "burst load" it stops allocating new data there: read misses are not
//! admitted and write misses go to the capacity device, which would serve
//! them faster. It never redirects a read hit, which is what separates it
//! from NHC.
//!
//! Every `window_ms` (10 ms) the controller estimates the response time a
//! new request would see on each device: the window's mean latency when the
//! device served requests, otherwise the lowest window mean seen so far
//! (its unloaded latency). The cache device is in burst when its estimate
//! exceeds (1 + `burst_margin`) × the capacity device's, and leaves burst
//! when its estimate falls back to at most the capacity device's. The
//! original paper also picks among write policies by the dominant request
//! type in the queue; under burst all cache-allocating requests (fills and
//! write misses) are redirected here, and the share of writes in the cache
//! device's queue is reported as `lbica_cache_write_share`.

use super::cache::{CachePair, CachePolicy, Scheduler};
use super::{param_err, Registered};
use crate::observe::{DeviceTotals, Observation};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "lbica",
    summary: "LBICA: under burst load on the cache device, stop allocating misses there; never redirects read hits",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err("lbica");
    let sched = Lbica {
        window_ns: (p.f64_in("window_ms", 10.0, 0.01, 60_000.0).map_err(&e)? * 1e6) as u64,
        burst_margin: p.f64_in("burst_margin", 0.0, 0.0, 100.0).map_err(&e)?,
        window: [DeviceTotals::default(); 2],
        window_ns_seen: 0,
        unloaded_latency_ns: [f64::INFINITY; 2],
        burst: false,
        bursts: 0,
        cache_write_share: 0.0,
    };
    Ok(Box::new(CachePolicy::build(p, vol, sched)?))
}

/// The LBICA scheduler (run by a [`CachePolicy`]).
pub struct Lbica {
    window_ns: u64,
    burst_margin: f64,
    window: [DeviceTotals; 2],
    window_ns_seen: u64,
    unloaded_latency_ns: [f64; 2],
    burst: bool,
    bursts: u64,
    cache_write_share: f64,
}

impl Lbica {
    fn estimate_ns(&mut self, device: usize) -> f64 {
        match self.window[device].mean_latency_ns() {
            Some(mean) => {
                self.unloaded_latency_ns[device] = self.unloaded_latency_ns[device].min(mean);
                mean
            }
            None => self.unloaded_latency_ns[device],
        }
    }
}

impl Scheduler for Lbica {
    fn name(&self) -> &'static str {
        "lbica"
    }
    fn admit_read_miss(&mut self) -> bool {
        !self.burst
    }
    fn allocate_write_miss(&self) -> bool {
        !self.burst
    }
    fn tick_interval_ns(&self) -> Option<u64> {
        Some(self.window_ns)
    }
    fn on_tick(&mut self, obs: &Observation, pair: CachePair) {
        for (w, d) in self.window.iter_mut().zip(&obs.devices) {
            w.add(d);
        }
        self.window_ns_seen += obs.interval_ns;
        if self.window_ns_seen < self.window_ns {
            return;
        }
        let cache = self.estimate_ns(pair.cache as usize);
        let home = self.estimate_ns(pair.backing as usize);
        let w = &self.window[pair.cache as usize];
        if w.ops() > 0 {
            self.cache_write_share = w.write_ops as f64 / w.ops() as f64;
        }
        if cache.is_finite() && home.is_finite() {
            if !self.burst && cache > (1.0 + self.burst_margin) * home {
                self.burst = true;
                self.bursts += 1;
            } else if self.burst && cache <= home {
                self.burst = false;
            }
        }
        self.window = [DeviceTotals::default(); 2];
        self.window_ns_seen = 0;
    }
    fn state(&self, out: &mut Vec<(&'static str, f64)>) {
        out.extend([
            ("data_admit", if self.burst { 0.0 } else { 1.0 }),
            ("load_admit", 1.0),
            ("lbica_burst", if self.burst { 1.0 } else { 0.0 }),
            ("lbica_bursts", self.bursts as f64),
            ("lbica_cache_write_share", self.cache_write_share),
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

    fn obs(cache_latency_ns: u64, home_latency_ns: u64) -> Observation {
        let dev = |lat: u64| DeviceObservation {
            read_ops: 10,
            write_ops: 10,
            latency_sum_ns: 20 * lat,
            ..Default::default()
        };
        Observation {
            interval_ns: 10_000_000,
            devices: vec![dev(cache_latency_ns), dev(home_latency_ns)],
            ..Default::default()
        }
    }

    #[test]
    fn burst_stops_allocation_until_the_cache_is_faster_again() {
        let p = Params::default();
        let vol = VolumeSpec {
            num_blocks: 100,
            block_size: 4096,
            devices: vec![
                crate::policy::DeviceSpec {
                    name: "a".into(),
                    capacity_blocks: 10,
                    role: crate::policy::DeviceRole::Cache,
                },
                crate::policy::DeviceSpec {
                    name: "b".into(),
                    capacity_blocks: 100,
                    role: crate::policy::DeviceRole::Home,
                },
            ],
        };
        assert!(build(&p, &vol, 1).is_ok());
        let mut l = Lbica {
            window_ns: 10_000_000,
            burst_margin: 0.0,
            window: [DeviceTotals::default(); 2],
            window_ns_seen: 0,
            unloaded_latency_ns: [f64::INFINITY; 2],
            burst: false,
            bursts: 0,
            cache_write_share: 0.0,
        };
        l.on_tick(&obs(10_000, 100_000), PAIR);
        assert!(l.admit_read_miss() && l.allocate_write_miss());
        l.on_tick(&obs(150_000, 100_000), PAIR);
        assert!(!l.admit_read_miss() && !l.allocate_write_miss());
        assert!(l.hit_to_cache(), "read hits are never redirected");
        assert_eq!(l.cache_write_share, 0.5);
        l.on_tick(&obs(90_000, 100_000), PAIR);
        assert!(l.admit_read_miss());
        assert_eq!(l.bursts, 1);
    }
}
