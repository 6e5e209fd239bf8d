//! Zero-time replay: a trace's accesses through a policy, with no timing.
//!
//! [`replay`] drives a [`Dispatcher`] the way the simulator and the engine
//! do, but completes every device operation the moment it is handed out,
//! so each access (with the fills, evictions and flushes it causes) is
//! finished before the next one starts. What it measures is placement:
//! hits per serving device (for reads and writes apart), misses, device
//! operations per purpose, and the writes that reach the storage (the
//! home device) as the requests a driver would send it, optionally as a
//! log: the home writes handed out together, grouped into runs of
//! consecutive blocks ([`runs`], as the simulator and the engine
//! merge them). A flush of a run of dirty pages is one request; flushes
//! handed out one after another are requests of their own, as the
//! Hibachi authors' simulator logs them for replay.
//! Controllers that tune themselves on measured latency (NHC, SIB, LBICA)
//! get no ticks here and keep their initial settings; run them in the
//! simulator to see them tune.
//!
//! [`hit_ratio`] is the fast path for pure replacement (LRU, ARC): the same
//! algorithms without the dispatcher or the placement map.

use tiermux_core::dispatch::merge::{merge_key, runs};
use tiermux_core::policy::{DeviceRole, DeviceSpec, VolumeSpec};
use tiermux_core::replacement::{HitRatioCache, ReplacementKind};
use tiermux_core::types::MAX_DEVICES;
use tiermux_core::{
    build_policy, Access, Dispatcher, Op, Outcome, Params, PolicyError, Purpose, Ready,
};

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

/// The length buckets of [`ReplayStats::run_length_histogram`], in pages.
pub const RUN_LENGTH_BUCKETS: [&str; 10] = [
    "1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65-128", "129-256", ">256",
];

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
    /// Read accesses.
    pub read_accesses: u64,
    /// Read hits, by the device that served them.
    pub read_hits_by_device: [u64; MAX_DEVICES],
    /// Write accesses that found their block cached.
    pub write_hits: u64,
    /// Device reads, by device and purpose (client, admit, flush, migrate).
    pub reads: [[u64; Purpose::COUNT]; MAX_DEVICES],
    /// Device writes, by device and purpose.
    pub writes: [[u64; Purpose::COUNT]; MAX_DEVICES],
    /// Blocks written to the home device (the storage), every purpose.
    pub storage_blocks: u64,
    /// Write requests to the home device (the storage), each a run of
    /// consecutive blocks handed out together: counts by length class
    /// (class `k` holds lengths in `(2^(k-1), 2^k]`, class 0 length 1).
    pub storage_run_classes: Vec<u64>,
    /// The storage write requests (first block, blocks), in order, when
    /// the replay keeps a log.
    pub storage_log: Option<Vec<(u64, u64)>>,
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

    /// Fraction of reads that hit.
    pub fn read_hit_ratio(&self) -> f64 {
        self.read_hits_by_device.iter().sum::<u64>() as f64 / self.read_accesses.max(1) as f64
    }

    /// Fraction of reads served by device `d`.
    pub fn read_hit_ratio_on(&self, d: usize) -> f64 {
        self.read_hits_by_device[d] as f64 / self.read_accesses.max(1) as f64
    }

    /// Write accesses.
    pub fn write_accesses(&self) -> u64 {
        self.accesses - self.read_accesses
    }

    /// Fraction of writes that found their block cached.
    pub fn write_hit_ratio(&self) -> f64 {
        self.write_hits as f64 / self.write_accesses().max(1) as f64
    }

    /// Operations on device `d` (reads and writes, every purpose).
    pub fn device_ops(&self, d: usize) -> u64 {
        self.reads[d].iter().sum::<u64>() + self.writes[d].iter().sum::<u64>()
    }

    /// Blocks written to device `d`, every purpose.
    pub fn blocks_written(&self, d: usize) -> u64 {
        self.writes[d].iter().sum()
    }

    /// Runs of storage writes.
    pub fn storage_runs(&self) -> u64 {
        self.storage_run_classes.iter().sum()
    }

    /// Storage write requests by length, in the buckets of
    /// [`RUN_LENGTH_BUCKETS`] (the length classes, the longest together).
    pub fn run_length_histogram(&self) -> [u64; RUN_LENGTH_BUCKETS.len()] {
        let mut buckets = [0; RUN_LENGTH_BUCKETS.len()];
        for (class, &requests) in self.storage_run_classes.iter().enumerate() {
            buckets[class.min(RUN_LENGTH_BUCKETS.len() - 1)] += requests;
        }
        buckets
    }

    /// The length class of a run of `blocks` (see `storage_run_classes`).
    pub fn run_class(blocks: u64) -> usize {
        assert!(blocks > 0, "an empty run");
        (64 - (blocks - 1).leading_zeros()) as usize
    }

    /// Counts the home writes of `batch` (operations handed out together)
    /// as requests, runs of consecutive blocks, and hands each to `sink`.
    /// `home_writes` is scratch.
    fn storage_requests(
        &mut self,
        batch: &[Ready],
        home: u8,
        home_writes: &mut Vec<Ready>,
        sink: StorageSink<'_>,
    ) {
        home_writes.clear();
        home_writes.extend(
            batch
                .iter()
                .filter(|r| r.io.device == home && r.io.dir == Op::Write),
        );
        home_writes.sort_by_key(merge_key);
        let mut first = 0;
        for len in runs(home_writes, usize::MAX) {
            let start = home_writes[first].io.addr;
            self.storage_request(start, len as u64);
            sink(start, len as u64);
            first += len;
        }
    }

    /// Counts one storage write request of `blocks` blocks from `start`.
    fn storage_request(&mut self, start: u64, blocks: u64) {
        self.storage_blocks += blocks;
        let class = Self::run_class(blocks);
        if self.storage_run_classes.len() <= class {
            self.storage_run_classes.resize(class + 1, 0);
        }
        self.storage_run_classes[class] += 1;
        if let Some(log) = &mut self.storage_log {
            log.push((start, blocks));
        }
    }
}

/// Receives each storage write request of a replay as it is made: its
/// first block and its length in blocks (for a model of the storage that
/// needs them in order, without keeping them all).
pub type StorageSink<'a> = &'a mut dyn FnMut(u64, u64);

/// Replays `accesses` through `dispatcher` in zero time and counts them;
/// `home` is the storage device whose writes are counted as requests (and
/// logged when `log_storage`).
pub fn replay(
    dispatcher: &mut Dispatcher,
    accesses: impl IntoIterator<Item = Access>,
    home: u8,
    log_storage: bool,
) -> ReplayStats {
    replay_with(dispatcher, accesses, home, log_storage, &mut |_, _| {})
}

/// [`replay`], handing each storage write request to `sink` as well.
pub fn replay_with(
    dispatcher: &mut Dispatcher,
    accesses: impl IntoIterator<Item = Access>,
    home: u8,
    log_storage: bool,
    sink: StorageSink<'_>,
) -> ReplayStats {
    let mut s = ReplayStats {
        storage_log: log_storage.then(Vec::new),
        ..ReplayStats::default()
    };
    let mut scratch = (Vec::new(), Vec::new());
    for (tag, access) in accesses.into_iter().enumerate() {
        dispatcher.submit(tag as u64, access);
        s.read_accesses += (access.op == Op::Read) as u64;
        settle(dispatcher, &mut s, access.op, home, &mut scratch, sink);
    }
    assert!(dispatcher.is_idle(), "zero-time replay left work in flight");
    s
}

/// Completes everything the dispatcher hands out, including what the
/// completions release, and counts the acknowledgements (of an access of
/// `op`). Each pass takes what is ready at once, as a driver would, and
/// completes it in the order handed out; `scratch` holds the batch and
/// its home writes, and `sink` receives the storage write requests.
fn settle(
    dispatcher: &mut Dispatcher,
    s: &mut ReplayStats,
    op: Op,
    home: u8,
    scratch: &mut (Vec<Ready>, Vec<Ready>),
    sink: StorageSink<'_>,
) {
    let (batch, home_writes) = scratch;
    loop {
        batch.clear();
        batch.extend(std::iter::from_fn(|| dispatcher.pop_ready()));
        let mut progressed = !batch.is_empty();
        s.storage_requests(batch, home, home_writes, sink);
        for r in batch.iter() {
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
                Outcome::Hit(d) => {
                    s.hits_by_device[d as usize] += 1;
                    match op {
                        Op::Read => s.read_hits_by_device[d as usize] += 1,
                        Op::Write => s.write_hits += 1,
                    }
                }
                Outcome::Miss => s.misses += 1,
                Outcome::NotApplicable => s.not_applicable += 1,
            }
        }
        if !progressed {
            break;
        }
    }
}

/// The devices a trace is replayed on: one cache of `cache_pages`, or,
/// with `dram_share`, a DRAM cache of that share of them over an NVRAM
/// cache of the rest (each with `reserve_pages` more, the slots a hybrid
/// cache keeps for pages arriving at a full cache), over a home device
/// holding every page up to the largest the trace names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceVolume {
    /// Pages the caches hold in all; with `ssd_pair`, the pages of each
    /// SSD.
    pub cache_pages: u64,
    /// The share of them in a first (DRAM) cache device, if two; with
    /// `ssd_pair`, the DRAM's size as a share of one SSD (0.1 if unset).
    pub dram_share: Option<f64>,
    /// Pages added to each cache device beyond its share.
    pub reserve_pages: u64,
    /// TICA's shape: a DRAM, then a read- and a write-optimized SSD of
    /// `cache_pages` each, over home.
    pub ssd_pair: bool,
}

impl TraceVolume {
    /// One cache of `cache_pages` over home.
    pub fn single(cache_pages: u64) -> TraceVolume {
        TraceVolume {
            cache_pages,
            dram_share: None,
            reserve_pages: 0,
            ssd_pair: false,
        }
    }

    /// The shape policy `name` with `params` builds on, from the one
    /// `dram_share` describes or TICA's: its caches of `cache_pages`, and
    /// a reserve page on each cache device for the policies that keep one
    /// (the hybrid caches, TICA). The error is the first shape's.
    pub fn fitting(
        name: &str,
        params: &Params,
        cache_pages: u64,
        dram_share: Option<f64>,
    ) -> Result<TraceVolume, PolicyError> {
        let mut first = None;
        for ssd_pair in [false, true] {
            let v = TraceVolume {
                cache_pages: 4,
                dram_share,
                reserve_pages: 1,
                ssd_pair,
            };
            match build_policy(name, params, &v.spec(1), 1) {
                Ok(p) => {
                    let reserve = matches!(p.layout(), "hybrid" | "tica" | "ssd-mirror");
                    return Ok(TraceVolume {
                        cache_pages,
                        reserve_pages: u64::from(reserve),
                        ..v
                    });
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.expect("a shape was tried"))
    }

    /// The volume for pages up to `max_page`.
    pub fn spec(&self, max_page: u64) -> VolumeSpec {
        let num_blocks = max_page + 1;
        let dev = |name: &str, capacity_blocks: u64, role| DeviceSpec {
            name: name.into(),
            capacity_blocks,
            role,
        };
        let extra = self.reserve_pages;
        let mut devices = Vec::new();
        match (self.ssd_pair, self.dram_share) {
            (true, share) => {
                let dram = (self.cache_pages as f64 * share.unwrap_or(0.1)).round() as u64;
                devices.push(dev("dram", dram.max(1) + extra, DeviceRole::Cache));
                devices.push(dev("ro-ssd", self.cache_pages + extra, DeviceRole::Cache));
                devices.push(dev("wo-ssd", self.cache_pages + extra, DeviceRole::Cache));
            }
            (false, None) => {
                devices.push(dev("cache", self.cache_pages + extra, DeviceRole::Cache))
            }
            (false, Some(share)) => {
                let dram = (self.cache_pages as f64 * share).round() as u64;
                devices.push(dev("dram", dram + extra, DeviceRole::Cache));
                devices.push(dev(
                    "nvram",
                    self.cache_pages - dram + extra,
                    DeviceRole::Cache,
                ));
            }
        }
        devices.push(dev("home", num_blocks, DeviceRole::Home));
        VolumeSpec {
            num_blocks,
            block_size: 512,
            devices,
        }
    }
}

/// A two-device volume for a trace: a cache of `cache_pages` over a home
/// device holding every page up to the largest the trace names.
pub fn trace_volume(pages: impl IntoIterator<Item = u64>, cache_pages: u64) -> VolumeSpec {
    TraceVolume::single(cache_pages).spec(pages.into_iter().max().unwrap_or(0))
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
    replay_accesses(
        name,
        params,
        pages.map(|p| (p, Op::Read)),
        TraceVolume::single(cache_pages),
        false,
    )
}

/// Runs the registered policy `name` with `params` on page reads and
/// writes over `volume` (`accesses` is read twice: for the volume's size,
/// then to replay); `log_storage` keeps the storage writes' log.
pub fn replay_accesses(
    name: &str,
    params: &Params,
    accesses: impl Iterator<Item = (u64, Op)> + Clone,
    volume: TraceVolume,
    log_storage: bool,
) -> Result<ReplayStats, PolicyError> {
    replay_accesses_with(name, params, accesses, volume, log_storage, &mut |_, _| {})
}

/// [`replay_accesses`], handing each storage write request to `sink` as
/// well.
pub fn replay_accesses_with(
    name: &str,
    params: &Params,
    accesses: impl Iterator<Item = (u64, Op)> + Clone,
    volume: TraceVolume,
    log_storage: bool,
    sink: StorageSink<'_>,
) -> Result<ReplayStats, PolicyError> {
    let max_page = accesses.clone().map(|a| a.0).max().unwrap_or(0);
    let volume = volume.spec(max_page);
    let policy = build_policy(name, params, &volume, 1)?;
    let home = volume.home().expect("trace volumes have a home device");
    let mut dispatcher = Dispatcher::new(policy, home);
    Ok(replay_with(
        &mut dispatcher,
        accesses.map(|(block, op)| Access::one(block, op)),
        home,
        log_storage,
        sink,
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

    /// The sink receives the storage write requests the log keeps, in the
    /// same order, on a workload of writes that flushes.
    #[test]
    fn the_sink_sees_what_the_log_keeps() {
        let accesses: Vec<(u64, Op)> = pages(20_000, 9)
            .into_iter()
            .enumerate()
            .map(|(i, p)| (p, if i % 2 == 0 { Op::Write } else { Op::Read }))
            .collect();
        let volume = TraceVolume::fitting("hibachi", &Params::new(), 64, Some(0.5)).unwrap();
        let mut seen = Vec::new();
        let s = replay_accesses_with(
            "hibachi",
            &Params::new(),
            accesses.iter().copied(),
            volume,
            true,
            &mut |start, blocks| seen.push((start, blocks)),
        )
        .unwrap();
        assert!(seen.len() > 1000, "{} requests", seen.len());
        assert_eq!(s.storage_runs(), seen.len() as u64);
        assert_eq!(s.storage_log.unwrap(), seen);
    }

    /// Each request counts in the bucket its length falls in: 1, 2, 3-4,
    /// ... 129-256, and everything longer together.
    #[test]
    fn requests_fall_in_their_length_buckets() {
        let mut s = ReplayStats::default();
        for (start, blocks) in [(0, 1), (10, 1), (20, 2), (30, 3), (40, 4), (50, 5)] {
            s.storage_request(start, blocks);
        }
        for blocks in [128, 129, 256, 257, 100_000] {
            s.storage_request(1_000_000, blocks);
        }
        assert_eq!(s.run_length_histogram(), [2, 1, 2, 1, 0, 0, 0, 1, 2, 2]);
        assert_eq!(s.storage_runs(), 11);
        assert_eq!(
            s.storage_blocks,
            1 + 1 + 2 + 3 + 4 + 5 + 128 + 129 + 256 + 257 + 100_000
        );
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
            let volume = TraceVolume::fitting(reg.name, &params, 100, None)
                .unwrap_or_else(|e| panic!("{}: {e}", reg.name));
            let s = replay_accesses(
                reg.name,
                &params,
                p.iter().map(|&b| (b, Op::Read)),
                volume,
                false,
            )
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
