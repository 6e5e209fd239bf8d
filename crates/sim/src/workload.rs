//! Synthetic workloads: which block each request touches, and whether it
//! reads or writes.
//!
//! Items are ranked `0..working_set_blocks` (rank 0 is the hottest) and a
//! bijective permutation spreads ranks over the block space (`scramble`).
//! Writes can be confined to the hottest `write_set_fraction` of the ranks,
//! which sets the dirty-read ratio of write-back caches (Orthus §6.1.2). A
//! hot-spot shift moves the whole working set by an offset at a given time.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use tiermux_core::rng::{splitmix64, Rng};
use tiermux_core::Op;

use crate::cachebench::KeyClasses;
use crate::spikes::{SpikeWriter, WriteSpike};

/// Access pattern over the working set's ranks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Pattern {
    /// Every item equally likely (HFIO).
    Uniform,
    /// Zipfian with skew `theta` in (0, 1) (YCSB's generator).
    Zipf {
        /// Skew.
        theta: f64,
    },
    /// `hot_fraction` of the items receive `hot_access_fraction` of accesses.
    Hotset {
        /// Fraction of items that are hot.
        hot_fraction: f64,
        /// Fraction of accesses that go to hot items.
        hot_access_fraction: f64,
    },
    /// YCSB-D: writes insert new items; reads favour recent inserts (Zipf
    /// over recency with skew `theta`).
    Latest {
        /// Skew of the recency distribution.
        theta: f64,
    },
    /// MOST's read-latest: writes insert new items; a read goes to the
    /// newest `hot_fraction` of the working set with probability
    /// `hot_access_fraction` (MOST §4.1: 20 % of newly written blocks are
    /// read with 90 % probability), otherwise to an older item.
    Recent {
        /// Fraction of the working set, the newest inserts, that is hot.
        hot_fraction: f64,
        /// Fraction of reads that go to the hot items.
        hot_access_fraction: f64,
    },
    /// Every request takes the next item of a sequential stream, in
    /// order, wrapping at the end of the stream (MOST's sequential
    /// writes). The working set is cut into `streams` equal regions, each
    /// written in order by its own stream, and requests take the streams
    /// in turn: a closed loop of N workers over N streams is N threads each
    /// writing its own log.
    Sequential {
        /// Independent streams (1: one stream over the whole working set).
        #[serde(default = "one_u32")]
        streams: u32,
    },
    /// The key popularity of one of CacheBench's production configs, by
    /// name ([`crate::cachebench::MIXES`]), scaled to the working set: MOST
    /// Table 4's mixes as CacheBench generates them.
    Cachebench {
        /// The mix: `flat-kvcache`, `graph-leader`, `kvcache-reg` or
        /// `kvcache-wc`.
        mix: String,
    },
}

pub use tiermux_core::zipf::Zipf;

/// Everything that defines a workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// The access pattern.
    #[serde(default = "default_pattern")]
    pub pattern: Pattern,
    /// Items in the working set, in blocks. When absent the simulator sizes
    /// it from the cache and `hit_ratio` (HFIO's method).
    #[serde(default)]
    pub working_set_blocks: Option<u64>,
    /// Target hit ratio for a uniform working set: W = cache / hit_ratio.
    #[serde(default)]
    pub hit_ratio: Option<f64>,
    /// Fraction of requests that write.
    #[serde(default)]
    pub write_ratio: f64,
    /// Writes touch only the hottest fraction of items (1 = all).
    #[serde(default = "one")]
    pub write_set_fraction: f64,
    /// Blocks per request.
    #[serde(default = "one_u32")]
    pub request_blocks: u32,
    /// Spread ranks over the block space with a bijection.
    #[serde(default)]
    pub scramble: bool,
    /// Time of a hot-spot shift, s.
    #[serde(default)]
    pub shift_at_s: Option<f64>,
    /// How far the working set moves at the shift, blocks (default: its size).
    #[serde(default)]
    pub shift_blocks: Option<u64>,
    /// At the shift, lay the ranks out from the working set's end backwards
    /// instead of moving them to other blocks: the same items, the hot spot
    /// moved from the start to the end (Orthus Fig. 12b, on a store whose
    /// keys all exist).
    #[serde(default)]
    pub shift_reverses: bool,
    /// Change the write ratio every this many seconds (Orthus Fig. 13b).
    #[serde(default)]
    pub write_ratio_period_s: Option<f64>,
    /// Highest write ratio drawn at each change (uniform in [0, max]).
    #[serde(default = "half")]
    pub write_ratio_max: f64,
    /// Log patterns (`sequential`, `latest`, `recent`) only: the log frees
    /// space in aligned chunks of this many blocks, as log-structured
    /// applications do, so that policies that place new data (MOST's
    /// dynamic allocation) see each rewrite as new data. A sequential log,
    /// which rewrites its whole working set, discards each chunk just
    /// before its writes enter it; `latest` and `recent` discard a chunk
    /// once all of it has left the working set (is older than the newest
    /// `working_set` inserts), which needs one chunk more of volume and a
    /// volume that is a whole number of chunks. A read never goes to a
    /// block discarded and not written since.
    #[serde(default)]
    pub discard_chunk_blocks: Option<u64>,
    /// Groups of the hottest items written together every so often, ahead
    /// of the other requests ([`crate::spikes`]; MOST Figure 7d).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_spikes: Vec<WriteSpike>,
}

fn default_pattern() -> Pattern {
    Pattern::Uniform
}
fn one() -> f64 {
    1.0
}
fn half() -> f64 {
    0.5
}
fn one_u32() -> u32 {
    1
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            pattern: Pattern::Uniform,
            working_set_blocks: None,
            hit_ratio: None,
            write_ratio: 0.0,
            write_set_fraction: 1.0,
            request_blocks: 1,
            scramble: false,
            shift_at_s: None,
            shift_blocks: None,
            shift_reverses: false,
            write_ratio_period_s: None,
            write_ratio_max: 0.5,
            discard_chunk_blocks: None,
            write_spikes: Vec::new(),
        }
    }
}

/// One generated request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenRequest {
    /// Read or write.
    pub op: Op,
    /// First block.
    pub block: u64,
    /// Number of blocks.
    pub blocks: u32,
    /// Blocks `first..end` to discard before this request (see
    /// [`WorkloadSpec::discard_chunk_blocks`]).
    pub discard: Option<(u64, u64)>,
}

/// A running generator for a [`WorkloadSpec`].
#[derive(Clone)]
pub struct Workload {
    pattern: Pattern,
    working_set: u64,
    volume_blocks: u64,
    write_ratio: f64,
    write_set: u64,
    request_blocks: u32,
    perm: Option<(u64, u64)>,
    shift_at_ns: Option<u64>,
    shift: u64,
    shift_reverses: bool,
    zipf: Option<Zipf>,
    classes: Option<KeyClasses>,
    hot_items: u64,
    hot_access: f64,
    inserted: u64,
    /// Per sequential stream: the next rank, within its region.
    cursors: Vec<u64>,
    /// Ranks per sequential stream.
    stream_items: u64,
    next_stream: usize,
    ratio_period_ns: Option<u64>,
    ratio_max: f64,
    next_ratio_change_ns: u64,
    discard_chunk: Option<u64>,
    rng: Rng,
    spikes: SpikeWriter,
    /// Requests generated ahead of their turn, oldest first
    /// ([`Workload::peek_block`]).
    ahead: VecDeque<GenRequest>,
}

/// The smallest number of blocks a volume needs for this workload.
pub fn volume_blocks_needed(spec: &WorkloadSpec, working_set: u64) -> u64 {
    let shift = if spec.shift_at_s.is_some() && !spec.shift_reverses {
        spec.shift_blocks.unwrap_or(working_set)
    } else {
        0
    };
    let blocks = working_set + shift + spec.request_blocks as u64;
    match (&spec.pattern, spec.discard_chunk_blocks) {
        // One chunk of room for the chunk being discarded, and whole chunks.
        (Pattern::Latest { .. } | Pattern::Recent { .. }, Some(chunk)) if chunk > 0 => {
            (blocks + chunk).div_ceil(chunk) * chunk
        }
        _ => blocks,
    }
}

impl Workload {
    /// A generator over `working_set` items within `volume_blocks` blocks.
    pub fn new(spec: &WorkloadSpec, working_set: u64, volume_blocks: u64, seed: u64) -> Self {
        let working_set = working_set.max(1);
        let zipf = match spec.pattern {
            Pattern::Zipf { theta } | Pattern::Latest { theta } => {
                Some(Zipf::new(working_set, theta))
            }
            _ => None,
        };
        let classes = match &spec.pattern {
            Pattern::Cachebench { mix } => Some(KeyClasses::new(
                crate::cachebench::popularity(mix).expect("a mix checked with the config"),
                working_set,
            )),
            _ => None,
        };
        let (hot_items, hot_access) = match spec.pattern {
            Pattern::Hotset {
                hot_fraction,
                hot_access_fraction,
            }
            | Pattern::Recent {
                hot_fraction,
                hot_access_fraction,
            } => (
                ((hot_fraction * working_set as f64).round() as u64).clamp(1, working_set),
                hot_access_fraction,
            ),
            _ => (working_set, 1.0),
        };
        let streams = match spec.pattern {
            Pattern::Sequential { streams } => (streams as u64).clamp(1, working_set),
            _ => 1,
        };
        let perm = spec.scramble.then(|| {
            // Multiplier coprime with the working-set size: a bijection.
            let mut m = (splitmix64(seed) | 1) % working_set.max(2);
            while gcd(m, working_set) != 1 {
                m += 1;
            }
            (m, splitmix64(seed ^ 1) % working_set)
        });
        Workload {
            pattern: spec.pattern.clone(),
            working_set,
            volume_blocks: volume_blocks.max(1),
            write_ratio: spec.write_ratio,
            write_set: ((spec.write_set_fraction * working_set as f64).round() as u64)
                .clamp(1, working_set),
            request_blocks: spec.request_blocks.max(1),
            perm,
            shift_at_ns: spec.shift_at_s.map(|s| (s * 1e9) as u64),
            shift: spec.shift_blocks.unwrap_or(working_set),
            shift_reverses: spec.shift_reverses,
            zipf,
            classes,
            hot_items,
            hot_access,
            inserted: 0,
            cursors: vec![0; streams as usize],
            stream_items: working_set / streams,
            next_stream: 0,
            ratio_period_ns: spec.write_ratio_period_s.map(|s| (s * 1e9) as u64),
            ratio_max: spec.write_ratio_max,
            next_ratio_change_ns: 0,
            discard_chunk: spec.discard_chunk_blocks.filter(|&n| n > 0),
            rng: Rng::new(seed),
            spikes: SpikeWriter::new(&spec.write_spikes, working_set),
            ahead: VecDeque::new(),
        }
    }

    /// The current write ratio.
    pub fn write_ratio(&self) -> f64 {
        self.write_ratio
    }

    #[inline]
    fn rank(&mut self) -> u64 {
        match &self.pattern {
            Pattern::Uniform => self.rng.below(self.working_set),
            Pattern::Zipf { .. } | Pattern::Latest { .. } => {
                self.zipf.as_ref().expect("zipf").sample(&mut self.rng)
            }
            Pattern::Sequential { .. } => {
                let s = self.next_stream;
                self.next_stream = (s + 1) % self.cursors.len();
                let c = self.cursors[s];
                self.cursors[s] = (c + self.request_blocks as u64) % self.stream_items;
                s as u64 * self.stream_items + c
            }
            Pattern::Cachebench { .. } => self
                .classes
                .as_ref()
                .expect("classes")
                .sample(&mut self.rng),
            Pattern::Hotset { .. } | Pattern::Recent { .. } => {
                if self.hot_items < self.working_set && self.rng.next_f64() >= self.hot_access {
                    self.hot_items + self.rng.below(self.working_set - self.hot_items)
                } else {
                    self.rng.below(self.hot_items)
                }
            }
        }
    }

    #[inline]
    fn place(&self, rank: u64, now_ns: u64) -> u64 {
        let idx = match self.perm {
            Some((m, a)) => {
                ((rank as u128 * m as u128 + a as u128) % self.working_set as u128) as u64
            }
            None => rank,
        };
        let shifted = self.shift_at_ns.is_some_and(|t| now_ns >= t);
        if shifted && self.shift_reverses {
            return self.working_set - 1 - idx;
        }
        let offset = if shifted { self.shift } else { 0 };
        let block = idx + offset;
        // Past the volume only after a shift: skip the division otherwise.
        if block < self.volume_blocks {
            block
        } else {
            block % self.volume_blocks
        }
    }

    /// Items in the working set.
    pub fn working_set(&self) -> u64 {
        self.working_set
    }

    /// The next request at time `now_ns`.
    #[inline]
    pub fn next(&mut self, now_ns: u64) -> GenRequest {
        match self.ahead.pop_front() {
            Some(g) => g,
            None => self.generate(now_ns),
        }
    }

    /// The first block of the request `k` places after the next one, when
    /// the workload does not depend on the time (no shift, no changing write
    /// ratio, no write spikes): the requests are then generated ahead, in the order they
    /// would be anyway, so looking ahead changes nothing.
    #[inline]
    pub fn peek_block(&mut self, k: usize) -> Option<u64> {
        if self.shift_at_ns.is_some() || self.ratio_period_ns.is_some() || !self.spikes.is_empty() {
            return None;
        }
        while self.ahead.len() <= k {
            let g = self.generate(0);
            self.ahead.push_back(g);
        }
        Some(self.ahead[k].block)
    }

    /// Generates the next request at time `now_ns`.
    fn generate(&mut self, now_ns: u64) -> GenRequest {
        if !self.spikes.is_empty() {
            if let Some(r) = self.spikes.next_rank(now_ns, self.request_blocks as u64) {
                let block = self.place(r, now_ns).min(
                    self.volume_blocks
                        .saturating_sub(self.request_blocks as u64),
                );
                return GenRequest {
                    op: Op::Write,
                    block,
                    blocks: self.request_blocks,
                    discard: None,
                };
            }
        }
        if let Some(p) = self.ratio_period_ns {
            if now_ns >= self.next_ratio_change_ns {
                self.write_ratio = self.rng.next_f64() * self.ratio_max;
                self.next_ratio_change_ns = now_ns + p;
            }
        }
        let write = self.write_ratio > 0.0 && self.rng.next_f64() < self.write_ratio;
        let op = if write { Op::Write } else { Op::Read };
        let mut freed = None;
        let block = if matches!(
            self.pattern,
            Pattern::Latest { .. } | Pattern::Recent { .. }
        ) {
            // Items are the most recent `working_set` inserts; rank 0 is the newest.
            let head = self.working_set + self.inserted;
            if write {
                self.inserted += 1;
                freed = self.chunk_left(head);
                head % self.volume_blocks
            } else {
                let r = self.rank();
                (head - 1 - r) % self.volume_blocks
            }
        } else {
            let mut r = self.rank();
            if write && r >= self.write_set {
                r = if matches!(self.pattern, Pattern::Uniform) {
                    self.rng.below(self.write_set)
                } else {
                    r % self.write_set
                };
            }
            self.place(r, now_ns)
        };
        let block = block.min(
            self.volume_blocks
                .saturating_sub(self.request_blocks as u64),
        );
        let discard = match self.pattern {
            Pattern::Sequential { .. } if write => self.chunk_entered(block),
            _ => freed,
        };
        GenRequest {
            op,
            block,
            blocks: self.request_blocks,
            discard,
        }
    }

    /// The chunk that a sequential write at `block` enters, when it covers
    /// a chunk's first block, as the range to discard (cut at the end of
    /// its stream's region, where the stream wraps).
    fn chunk_entered(&self, block: u64) -> Option<(u64, u64)> {
        let chunk = self.discard_chunk?;
        let last = block + self.request_blocks as u64 - 1;
        let first = block.div_ceil(chunk) * chunk;
        let region_end = (block / self.stream_items + 1) * self.stream_items;
        (first <= last).then(|| (first, (first + chunk).min(region_end)))
    }

    /// The chunk whose last block left the working set when the insert at
    /// linear position `head` (the log before wrapping) made the item
    /// `head - working_set` too old, as the range to discard.
    fn chunk_left(&self, head: u64) -> Option<(u64, u64)> {
        let chunk = self.discard_chunk?;
        let oldest_live = head + 1 - self.working_set;
        if !oldest_live.is_multiple_of(chunk) || oldest_live < chunk {
            return None;
        }
        let first = (oldest_live - chunk) % self.volume_blocks;
        assert!(
            self.volume_blocks.is_multiple_of(chunk),
            "a log discarding chunks needs a volume of whole chunks"
        );
        Some((first, first + chunk))
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// How load varies over time: a multiplier of the base concurrency or rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Schedule {
    /// Always 1.
    #[default]
    Constant,
    /// Piecewise constant: `factors[i]` from `times_s[i]` on (1 before the first).
    Steps {
        /// Start of each step, s.
        times_s: Vec<f64>,
        /// Multiplier of each step.
        factors: Vec<f64>,
    },
    /// A day-night cycle like ZippyDB's: `min_factor` at night, 1 at noon.
    Diurnal {
        /// Length of one day, s.
        period_s: f64,
        /// Night-time multiplier.
        min_factor: f64,
    },
    /// Bursts of `factor` lasting `burst_s` every `period_s`.
    Bursts {
        /// Time between burst starts, s.
        period_s: f64,
        /// Burst length, s.
        burst_s: f64,
        /// Multiplier during bursts.
        factor: f64,
    },
}

impl Schedule {
    /// The multiplier at time `t_s`.
    pub fn factor(&self, t_s: f64) -> f64 {
        match self {
            Schedule::Constant => 1.0,
            Schedule::Steps { times_s, factors } => {
                let mut f = 1.0;
                for (t, x) in times_s.iter().zip(factors) {
                    if t_s >= *t {
                        f = *x;
                    }
                }
                f
            }
            Schedule::Diurnal {
                period_s,
                min_factor,
            } => {
                let phase = (t_s / period_s).fract();
                min_factor
                    + (1.0 - min_factor) * (1.0 - (2.0 * std::f64::consts::PI * phase).cos()) / 2.0
            }
            Schedule::Bursts {
                period_s,
                burst_s,
                factor,
            } => {
                if (t_s % period_s) < *burst_s {
                    *factor
                } else {
                    1.0
                }
            }
        }
    }

    /// Times (s) in `[0, end_s)` at which the multiplier may change.
    pub fn change_points(&self, end_s: f64, resolution_s: f64) -> Vec<f64> {
        match self {
            Schedule::Constant => Vec::new(),
            Schedule::Steps { times_s, .. } => {
                times_s.iter().copied().filter(|t| *t < end_s).collect()
            }
            Schedule::Diurnal { .. } => {
                let n = (end_s / resolution_s).ceil() as usize;
                (1..n).map(|i| i as f64 * resolution_s).collect()
            }
            Schedule::Bursts {
                period_s, burst_s, ..
            } => {
                let mut v = Vec::new();
                let mut t = 0.0;
                while t < end_s {
                    v.push(t);
                    if t + burst_s < end_s {
                        v.push(t + burst_s);
                    }
                    t += period_s;
                }
                v
            }
        }
    }
}

impl Workload {
    /// The block holding rank `rank` at time zero (for pre-warming a cache
    /// with the hottest items).
    pub fn block_of_rank(&self, rank: u64) -> u64 {
        if let Pattern::Latest { .. } = self.pattern {
            return (self.working_set - 1 - rank.min(self.working_set - 1)) % self.volume_blocks;
        }
        self.place(rank.min(self.working_set - 1), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_rank_zero_is_hottest() {
        let z = Zipf::new(1000, 0.99);
        let mut r = Rng::new(1);
        let mut counts = vec![0u32; 1000];
        for _ in 0..200_000 {
            counts[z.sample(&mut r) as usize] += 1;
        }
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
    }

    /// The first `n` requests' first blocks and discards.
    fn blocks_and_discards(
        spec: &WorkloadSpec,
        ws: u64,
        vol: u64,
        n: usize,
    ) -> Vec<(u64, Option<(u64, u64)>)> {
        let mut w = Workload::new(spec, ws, vol, 1);
        (0..n)
            .map(|_| {
                let g = w.next(0);
                (g.block, g.discard)
            })
            .collect()
    }

    /// A log that discards ahead frees each aligned chunk as its writes
    /// enter it, cut at the end of the log.
    #[test]
    fn a_sequential_log_discards_each_chunk_it_enters() {
        let spec = WorkloadSpec {
            pattern: Pattern::Sequential { streams: 1 },
            write_ratio: 1.0,
            request_blocks: 2,
            discard_chunk_blocks: Some(4),
            ..WorkloadSpec::default()
        };
        assert_eq!(
            blocks_and_discards(&spec, 10, 12, 7),
            [
                (0, Some((0, 4))),
                (2, None),
                (4, Some((4, 8))),
                (6, None),
                (8, Some((8, 10))),
                (0, Some((0, 4))),
                (2, None)
            ]
        );
    }

    /// Streams write their own regions in order, taking turns; each
    /// discards the chunks of its own region.
    #[test]
    fn sequential_streams_take_turns_each_in_its_region() {
        let spec = WorkloadSpec {
            pattern: Pattern::Sequential { streams: 2 },
            write_ratio: 1.0,
            discard_chunk_blocks: Some(2),
            ..WorkloadSpec::default()
        };
        assert_eq!(
            blocks_and_discards(&spec, 8, 8, 10),
            [
                (0, Some((0, 2))),
                (4, Some((4, 6))),
                (1, None),
                (5, None),
                (2, Some((2, 4))),
                (6, Some((6, 8))),
                (3, None),
                (7, None),
                (0, Some((0, 2))),
                (4, Some((4, 6)))
            ]
        );
    }

    /// Reading the newest items while discarding ahead of the write head
    /// never reads a block discarded and not written since.
    #[test]
    fn read_latest_never_reads_what_it_discarded() {
        for (pattern, chunk, request) in [
            (
                Pattern::Recent {
                    hot_fraction: 0.2,
                    hot_access_fraction: 0.9,
                },
                16,
                1,
            ),
            (Pattern::Latest { theta: 0.9 }, 8, 3),
        ] {
            let spec = WorkloadSpec {
                pattern,
                write_ratio: 0.5,
                request_blocks: request,
                discard_chunk_blocks: Some(chunk),
                ..WorkloadSpec::default()
            };
            let ws = 100;
            let vol = volume_blocks_needed(&spec, ws);
            let mut w = Workload::new(&spec, ws, vol, 5);
            let mut freed = vec![false; vol as usize];
            let mut discards = 0;
            for _ in 0..20_000 {
                let g = w.next(0);
                if let Some((first, end)) = g.discard {
                    assert!(end - first <= chunk && end <= vol);
                    freed[first as usize..end as usize].fill(true);
                    discards += 1;
                }
                let blocks = g.block as usize..(g.block + g.blocks as u64) as usize;
                if g.op == Op::Write {
                    freed[blocks].fill(false);
                } else {
                    assert!(
                        !freed[blocks.clone()].iter().any(|&f| f),
                        "a read of {blocks:?}, discarded and not written since"
                    );
                }
            }
            assert!(discards > 100, "{discards} discards");
        }
    }

    #[test]
    fn sequential_takes_blocks_in_order_and_wraps() {
        let spec = WorkloadSpec {
            pattern: Pattern::Sequential { streams: 1 },
            write_ratio: 1.0,
            request_blocks: 2,
            ..WorkloadSpec::default()
        };
        let mut w = Workload::new(&spec, 10, 12, 1);
        let blocks: Vec<u64> = (0..7).map(|_| w.next(0).block).collect();
        assert_eq!(blocks, [0, 2, 4, 6, 8, 0, 2]);
    }

    /// MOST's read-latest: writes append; 90 % of reads go to the newest
    /// 20 % of the working set (within 4 standard errors).
    #[test]
    fn recent_reads_favour_the_newest_inserts() {
        let spec = WorkloadSpec {
            pattern: Pattern::Recent {
                hot_fraction: 0.2,
                hot_access_fraction: 0.9,
            },
            write_ratio: 0.5,
            ..WorkloadSpec::default()
        };
        let (ws, vol) = (1000u64, 1_000_000u64);
        let mut w = Workload::new(&spec, ws, vol, 9);
        let (mut head, mut reads, mut hot) = (ws, 0u64, 0u64);
        for _ in 0..40_000 {
            let r = w.next(0);
            if r.op == Op::Write {
                assert_eq!(r.block, head, "writes append");
                head += 1;
            } else {
                let age = head - 1 - r.block;
                assert!(age < ws, "a read older than the working set");
                reads += 1;
                hot += (age < ws / 5) as u64;
            }
        }
        let share = hot as f64 / reads as f64;
        let sigma = (0.9f64 * 0.1 / reads as f64).sqrt();
        assert!((share - 0.9).abs() < 4.0 * sigma, "{share}");
    }

    #[test]
    fn write_set_limits_writes() {
        let spec = WorkloadSpec {
            write_ratio: 0.5,
            write_set_fraction: 0.2,
            ..WorkloadSpec::default()
        };
        let mut w = Workload::new(&spec, 1000, 1000, 3);
        let mut writes = 0;
        for _ in 0..10_000 {
            let r = w.next(0);
            if r.op == Op::Write {
                writes += 1;
                assert!(r.block < 200);
            }
        }
        assert!((4500..5500).contains(&writes));
    }

    #[test]
    fn looking_ahead_changes_no_request() {
        for pattern in [
            Pattern::Uniform,
            Pattern::Zipf { theta: 0.9 },
            Pattern::Latest { theta: 0.9 },
            Pattern::Recent {
                hot_fraction: 0.1,
                hot_access_fraction: 0.9,
            },
        ] {
            let spec = WorkloadSpec {
                pattern,
                write_ratio: 0.3,
                write_set_fraction: 0.5,
                scramble: true,
                ..WorkloadSpec::default()
            };
            let mut plain = Workload::new(&spec, 10_000, 20_000, 9);
            let mut peeking = Workload::new(&spec, 10_000, 20_000, 9);
            let mut rng = Rng::new(4);
            for i in 0..20_000u64 {
                let k = rng.below(5) as usize;
                let peeked = peeking.peek_block(k).expect("a workload without time");
                let ahead = peeking.ahead[k];
                assert_eq!(peeked, ahead.block);
                let (a, b) = (plain.next(i), peeking.next(i));
                assert_eq!(a, b, "request {i} of {:?}", spec.pattern);
            }
        }
    }

    #[test]
    fn a_workload_that_changes_with_time_is_not_looked_ahead() {
        let shifting = WorkloadSpec {
            shift_at_s: Some(1.0),
            ..WorkloadSpec::default()
        };
        let varying = WorkloadSpec {
            write_ratio_period_s: Some(1.0),
            ..WorkloadSpec::default()
        };
        for spec in [shifting, varying] {
            let mut w = Workload::new(&spec, 1000, 2000, 1);
            assert_eq!(w.peek_block(0), None);
            assert!(w.ahead.is_empty());
        }
    }

    #[test]
    fn scramble_is_a_bijection_and_shift_moves() {
        let spec = WorkloadSpec {
            scramble: true,
            shift_at_s: Some(1.0),
            ..WorkloadSpec::default()
        };
        let w = Workload::new(&spec, 97, 200, 5);
        let mut seen: Vec<u64> = (0..97).map(|r| w.place(r, 0)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 97);
        assert!(seen.iter().all(|&b| b < 97));
        assert!((0..97).all(|r| w.place(r, 2_000_000_000) >= 97));
    }

    #[test]
    fn a_reversing_shift_keeps_the_items_and_moves_the_hot_spot_to_the_end() {
        let spec = WorkloadSpec {
            shift_at_s: Some(1.0),
            shift_reverses: true,
            ..WorkloadSpec::default()
        };
        assert_eq!(volume_blocks_needed(&spec, 97), 98);
        let w = Workload::new(&spec, 97, 98, 5);
        assert_eq!((w.place(0, 0), w.place(96, 0)), (0, 96));
        assert_eq!(
            (w.place(0, 2_000_000_000), w.place(96, 2_000_000_000)),
            (96, 0)
        );
        let mut after: Vec<u64> = (0..97).map(|r| w.place(r, 2_000_000_000)).collect();
        after.sort_unstable();
        assert_eq!(after, (0..97).collect::<Vec<_>>());
    }

    #[test]
    fn schedules() {
        let d = Schedule::Diurnal {
            period_s: 10.0,
            min_factor: 0.2,
        };
        assert!((d.factor(0.0) - 0.2).abs() < 1e-9);
        assert!((d.factor(5.0) - 1.0).abs() < 1e-9);
        let s = Schedule::Steps {
            times_s: vec![1.0, 2.0],
            factors: vec![2.0, 0.5],
        };
        assert_eq!(
            (s.factor(0.5), s.factor(1.5), s.factor(3.0)),
            (1.0, 2.0, 0.5)
        );
    }
}
