//! Zero-time replay: a trace's accesses through a policy, with no timing.
//!
//! [`replay`] drives a [`Dispatcher`] the way the simulator and the engine
//! do, but completes every device operation the moment it is handed out,
//! so each access (with the fills, evictions and flushes it causes) is
//! finished before the next one starts. What it measures is placement:
//! hits per serving device, misses, and device operations per purpose.
//! Controllers that tune themselves on measured latency (NHC, SIB, LBICA)
//! get no ticks here and keep their initial settings; run them in the
//! simulator to see them tune.
//!
//! [`hit_ratio`] is the fast path for pure replacement (LRU, ARC): the same
//! algorithms without the dispatcher or the placement map.

use tiermux_core::policy::{DeviceRole, DeviceSpec, VolumeSpec};
use tiermux_core::replacement::{HitRatioCache, ReplacementKind};
use tiermux_core::types::MAX_DEVICES;
use tiermux_core::{build_policy, Access, Dispatcher, Op, Outcome, Params, PolicyError, Purpose};

/// Hit ratio of `pages` through a cache of `capacity` pages.
pub fn hit_ratio(
    pages: impl IntoIterator<Item = u64>,
    kind: ReplacementKind,
    capacity: usize,
) -> f64 {
    let mut c = HitRatioCache::new(kind, capacity);
    for p in pages {
        c.access(p);
    }
    c.hit_ratio()
}

/// What a replay counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Client accesses replayed (one per block).
    pub accesses: u64,
    /// Accesses whose data was on a cache device, by the device that
    /// served them (a policy may serve a hit from home).
    pub hits_by_device: [u64; MAX_DEVICES],
    /// Accesses served by the home device alone.
    pub misses: u64,
    /// Accesses of policies without a notion of hits.
    pub not_applicable: u64,
    /// Device reads, by device and purpose (client, admit, flush, migrate).
    pub reads: [[u64; Purpose::COUNT]; MAX_DEVICES],
    /// Device writes, by device and purpose.
    pub writes: [[u64; Purpose::COUNT]; MAX_DEVICES],
}

impl ReplayStats {
    /// Hits on any device.
    pub fn hits(&self) -> u64 {
        self.hits_by_device.iter().sum()
    }

    /// Fraction of accesses that hit.
    pub fn hit_ratio(&self) -> f64 {
        self.hits() as f64 / self.accesses.max(1) as f64
    }

    /// Operations on device `d` (reads and writes, every purpose).
    pub fn device_ops(&self, d: usize) -> u64 {
        self.reads[d].iter().sum::<u64>() + self.writes[d].iter().sum::<u64>()
    }
}

/// Replays `accesses` through `dispatcher` in zero time and counts them.
pub fn replay(
    dispatcher: &mut Dispatcher,
    accesses: impl IntoIterator<Item = Access>,
) -> ReplayStats {
    let mut s = ReplayStats::default();
    for (tag, access) in accesses.into_iter().enumerate() {
        dispatcher.submit(tag as u64, access);
        settle(dispatcher, &mut s);
    }
    assert!(dispatcher.is_idle(), "zero-time replay left work in flight");
    s
}

/// Completes everything the dispatcher hands out, including what the
/// completions release, and counts the acknowledgements.
fn settle(dispatcher: &mut Dispatcher, s: &mut ReplayStats) {
    loop {
        let mut progressed = false;
        while let Some(r) = dispatcher.pop_ready() {
            progressed = true;
            let d = r.io.device as usize;
            let p = r.io.purpose.index();
            match r.io.dir {
                Op::Read => s.reads[d][p] += 1,
                Op::Write => s.writes[d][p] += 1,
            }
            dispatcher.complete(r.flight, r.index, 0);
        }
        while let Some(a) = dispatcher.pop_acked() {
            progressed = true;
            s.accesses += 1;
            match a.outcome {
                Outcome::Hit(d) => s.hits_by_device[d as usize] += 1,
                Outcome::Miss => s.misses += 1,
                Outcome::NotApplicable => s.not_applicable += 1,
            }
        }
        if !progressed {
            break;
        }
    }
}

/// A two-device volume for a trace: a cache of `cache_pages` over a home
/// device holding every page up to the largest the trace names.
pub fn trace_volume(pages: impl IntoIterator<Item = u64>, cache_pages: u64) -> VolumeSpec {
    let num_blocks = pages.into_iter().max().map_or(1, |m| m + 1);
    VolumeSpec {
        num_blocks,
        block_size: 512,
        devices: vec![
            DeviceSpec {
                name: "cache".into(),
                capacity_blocks: cache_pages,
                role: DeviceRole::Cache,
            },
            DeviceSpec {
                name: "home".into(),
                capacity_blocks: num_blocks,
                role: DeviceRole::Home,
            },
        ],
    }
}

/// Runs the registered policy `name` with `params` on read references to
/// `pages`, over [`trace_volume`] (`pages` is read twice: for the volume's
/// size, then to replay).
pub fn replay_policy(
    name: &str,
    params: &Params,
    pages: impl Iterator<Item = u64> + Clone,
    cache_pages: u64,
) -> Result<ReplayStats, PolicyError> {
    let volume = trace_volume(pages.clone(), cache_pages);
    let policy = build_policy(name, params, &volume, 1)?;
    let home = volume.home().expect("trace volumes have a home device");
    let mut dispatcher = Dispatcher::new(policy, home);
    Ok(replay(
        &mut dispatcher,
        pages.map(|block| Access {
            block,
            op: Op::Read,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiermux_core::ParamValue;

    fn pages(n: usize, seed: u64) -> Vec<u64> {
        let mut rng = tiermux_core::rng::Rng::new(seed);
        (0..n).map(|_| rng.below(500).min(rng.below(500))).collect()
    }

    #[test]
    fn classic_caching_hits_exactly_as_its_replacement_does() {
        let p = pages(50_000, 3);
        for (kind, name) in [(ReplacementKind::Lru, "lru"), (ReplacementKind::Arc, "arc")] {
            let params = Params::new().with("replacement", ParamValue::Str(name.into()));
            let s = replay_policy("classic", &params, p.iter().copied(), 100).unwrap();
            assert_eq!(s.accesses, p.len() as u64);
            assert_eq!(
                s.hit_ratio(),
                hit_ratio(p.iter().copied(), kind, 100),
                "{name}"
            );
            // Every hit is served by the cache; every miss reads home once
            // and fills the cache once.
            assert_eq!(s.hits_by_device[0], s.hits());
            assert_eq!(s.reads[1][Purpose::Client.index()], s.misses);
            assert_eq!(s.writes[0][Purpose::Admit.index()], s.misses);
        }
    }

    #[test]
    fn every_registered_policy_replays() {
        let p = pages(5_000, 4);
        for reg in tiermux_core::REGISTRY {
            let mut params = Params::new();
            if reg.name == "split" {
                params.set("split_rate", ParamValue::Float(0.3));
            }
            if matches!(
                reg.name,
                "hemem" | "most" | "batman" | "colloid" | "colloid+" | "colloid++"
            ) {
                params.set("segment_blocks", ParamValue::Int(4));
            }
            let s = replay_policy(reg.name, &params, p.iter().copied(), 100)
                .unwrap_or_else(|e| panic!("{}: {e}", reg.name));
            assert_eq!(s.accesses, p.len() as u64, "{}", reg.name);
            assert_eq!(
                s.hits() + s.misses + s.not_applicable,
                s.accesses,
                "{}",
                reg.name
            );
        }
    }
}
