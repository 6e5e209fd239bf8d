//! Synthetic block traces shaped like the MSR Cambridge traces, from
//! documented parameters, for the studies those traces cannot be
//! redistributed for (`tiermux trace generate`).
//!
//! A request is a read with probability `1 - write_ratio`. Its size comes
//! from `size_mix`.
//!
//! A read continues the previous read (the next byte after it) with
//! probability `read_sequential_probability`; otherwise it starts at a
//! page drawn by Zipfian frequency (`read_zipf_theta`) over the working
//! set less the `read_host_cache_pages` most popular (served by the
//! host's cache).
//!
//! A write continues one of `write_streams` interleaved sequential
//! streams, picked at random, with probability
//! `write_sequential_probability` (files and logs written front to back
//! by several writers at once: consecutive pages written at different
//! times). A stream moves to a new place, uniform over the working set,
//! after `write_stream_mean_bytes` on average. Otherwise a write either
//! rewrites the place of a recent write that was not a stream's
//! (probability `write_rewrite_probability`, the distance back in such
//! writes exponential with mean `write_rewrite_mean_distance`: the strong
//! write-after-write recency Hibachi §II finds) or starts at a page drawn
//! by its own Zipfian frequency (`write_zipf_theta`). Popular read pages
//! and popular write pages are scattered over the volume by two
//! different permutations. Arrivals are Poisson with mean gap
//! `mean_interarrival_us`; with `burst_mean_requests` above 0 they come
//! in bursts of that many requests on average (a geometric count), each
//! burst followed by an idle gap, exponential with mean `burst_idle_us`
//! (an on/off source: a block trace's busy periods and the idle time
//! between them).

use anyhow::{bail, Context, Result};
use tiermux_core::rng::{splitmix64, Rng};
use tiermux_core::zipf::Zipf;
use tiermux_core::Op;

use crate::permute::Scatter;
use crate::request::{BlockTrace, Request};

/// The parameters of a synthetic trace.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthSpec {
    /// Requests to generate.
    pub requests: u64,
    /// Bytes of the address range requests start in.
    pub working_set_bytes: u64,
    /// Page size that addresses are aligned to.
    pub page_bytes: u64,
    /// Share of requests that write.
    pub write_ratio: f64,
    /// Request sizes in bytes and their weights.
    pub size_mix: Vec<(u32, f64)>,
    /// Zipfian skew of read start pages, in (0, 1).
    pub read_zipf_theta: f64,
    /// The most popular read pages, absorbed by the server's own cache
    /// and so never read from storage: storage-level reads keep their
    /// frequency skew but lose their short reuse distances (Zhou et al.'s
    /// second-level workloads, which Hibachi §II cites).
    pub read_host_cache_pages: u64,
    /// Zipfian skew of write start pages that are not rewrites, in (0, 1).
    pub write_zipf_theta: f64,
    /// Probability that a write (not sequential) rewrites a recent write.
    pub write_rewrite_probability: f64,
    /// Mean distance back, in writes, of a rewrite.
    pub write_rewrite_mean_distance: f64,
    /// The largest write that updates a place in place (rewrite or
    /// Zipfian start); larger writes carry bulk data and always continue
    /// a write stream.
    pub write_update_max_bytes: u32,
    /// Probability that a read continues the previous read.
    pub read_sequential_probability: f64,
    /// Probability that a write continues one of the write streams.
    pub write_sequential_probability: f64,
    /// Sequential write streams interleaved (at least 1).
    pub write_streams: u64,
    /// Mean bytes a write stream writes before it moves elsewhere.
    pub write_stream_mean_bytes: u64,
    /// Mean time between requests, µs (within a burst, when there are
    /// bursts).
    pub mean_interarrival_us: f64,
    /// Mean requests per burst; 0 for Poisson arrivals with no bursts.
    pub burst_mean_requests: f64,
    /// Mean idle time after a burst, µs.
    pub burst_idle_us: f64,
    /// Random seed.
    pub seed: u64,
}

/// Writes remembered for rewrites.
const REWRITE_WINDOW: usize = 1 << 16;

/// The most write streams a trace may interleave.
pub const MAX_WRITE_STREAMS: u64 = 1 << 16;

/// The presets' request-size mix (mean 9,216 bytes; the TICA paper's
/// Table 2 gives means of 9,144 (rsrch_0), 9,296 (wdev_0) and 9,220
/// (ts_0) bytes per request).
const MSR_SIZE_MIX: [(u32, f64); 5] = [
    (4096, 0.67),
    (8192, 0.15),
    (16384, 0.10),
    (32768, 0.05),
    (65536, 0.03),
];

/// Presets by name: `(name, requests, write share, what is matched)`.
/// Requests and write shares are the TICA paper's Table 2 (read and write
/// request counts) for rsrch_0, wdev_0 and ts_0. stg_0 has no published
/// statistics in the papers at hand (the Hibachi paper's Table I is lost
/// in its text); its write share 0.85 and request count are chosen to sit
/// among the others. Working set, skews, recency and sequentiality are
/// chosen for all four to show the properties Hibachi §II measures, not
/// fitted to any trace.
pub const PRESETS: [(&str, u64, f64, &str); 4] = [
    (
        "rsrch_0",
        1_433_655,
        1_300_030.0 / 1_433_655.0,
        "requests, write share, mean size (TICA Table 2)",
    ),
    (
        "wdev_0",
        1_143_261,
        913_732.0 / 1_143_261.0,
        "requests, write share, mean size (TICA Table 2)",
    ),
    (
        "stg_0",
        1_500_000,
        0.85,
        "nothing published at hand: requests and write share chosen",
    ),
    (
        "ts_0",
        1_801_734,
        1_485_042.0 / 1_801_734.0,
        "requests, write share, mean size (TICA Table 2)",
    ),
];

impl SynthSpec {
    /// The preset `name`: one of [`PRESETS`], else a workload of the TICA
    /// paper's Table 2 ([`crate::tica_table2`]), whose request count,
    /// write share and mean request size it matches (the size mix is the
    /// presets' blended with single pages or 64 KiB requests).
    pub fn preset(name: &str) -> Result<SynthSpec> {
        if let Some(&(_, requests, write_ratio, _)) = PRESETS.iter().find(|p| p.0 == name) {
            return Ok(Self::msr_like(requests, write_ratio));
        }
        let Some(w) = crate::tica_table2::workload(name) else {
            let table = crate::tica_table2::TABLE2.iter().map(|w| w.name);
            let names: Vec<&str> = PRESETS
                .iter()
                .map(|p| p.0)
                .chain(table.filter(|n| PRESETS.iter().all(|p| p.0 != *n)))
                .collect();
            bail!(
                "unknown trace preset '{name}' (known: {})",
                names.join(", ")
            );
        };
        let mut spec = Self::msr_like(w.requests(), w.write_share());
        spec.size_mix =
            crate::tica_table2::mix_with_mean(&MSR_SIZE_MIX, 4096, w.mean_request_bytes());
        Ok(spec)
    }

    /// The presets' shared model with `requests` and `write_ratio`.
    fn msr_like(requests: u64, write_ratio: f64) -> SynthSpec {
        SynthSpec {
            requests,
            working_set_bytes: 1 << 30,
            page_bytes: 4096,
            write_ratio,
            size_mix: MSR_SIZE_MIX.to_vec(),
            read_zipf_theta: 0.9,
            read_host_cache_pages: 4096,
            write_zipf_theta: 0.9,
            write_rewrite_probability: 0.5,
            write_rewrite_mean_distance: 200.0,
            write_update_max_bytes: 16 << 10,
            read_sequential_probability: 0.2,
            write_sequential_probability: 0.2,
            write_streams: 4,
            write_stream_mean_bytes: 1 << 20,
            mean_interarrival_us: 1000.0,
            burst_mean_requests: 0.0,
            burst_idle_us: 0.0,
            seed: 1,
        }
    }

    /// Sets one parameter by name from text (`--set KEY=VALUE`).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let float = || {
            value
                .parse::<f64>()
                .with_context(|| format!("{key}: '{value}' is not a number"))
        };
        let int = || {
            value
                .parse::<u64>()
                .with_context(|| format!("{key}: '{value}' is not a non-negative integer"))
        };
        match key {
            "requests" => self.requests = int()?,
            "working_set_bytes" => self.working_set_bytes = int()?,
            "page_bytes" => self.page_bytes = int()?,
            "write_ratio" => self.write_ratio = float()?,
            "read_zipf_theta" => self.read_zipf_theta = float()?,
            "write_zipf_theta" => self.write_zipf_theta = float()?,
            "read_host_cache_pages" => self.read_host_cache_pages = int()?,
            "write_rewrite_probability" => self.write_rewrite_probability = float()?,
            "write_rewrite_mean_distance" => self.write_rewrite_mean_distance = float()?,
            "write_update_max_bytes" => {
                self.write_update_max_bytes = u32::try_from(int()?)
                    .with_context(|| format!("{key}: {value} is more than 4 GiB"))?
            }
            "read_sequential_probability" => self.read_sequential_probability = float()?,
            "write_sequential_probability" => self.write_sequential_probability = float()?,
            "write_streams" => self.write_streams = int()?,
            "write_stream_mean_bytes" => self.write_stream_mean_bytes = int()?,
            "mean_interarrival_us" => self.mean_interarrival_us = float()?,
            "burst_mean_requests" => self.burst_mean_requests = float()?,
            "burst_idle_us" => self.burst_idle_us = float()?,
            "seed" => self.seed = int()?,
            _ => bail!("unknown trace parameter '{key}' (known: requests, working_set_bytes, page_bytes, write_ratio, read_zipf_theta, read_host_cache_pages, write_zipf_theta, write_rewrite_probability, write_rewrite_mean_distance, write_update_max_bytes, read_sequential_probability, write_sequential_probability, write_streams, write_stream_mean_bytes, mean_interarrival_us, burst_mean_requests, burst_idle_us, seed)"),
        }
        Ok(())
    }

    /// Refuses parameters outside their ranges, naming the first.
    pub fn validate(&self) -> Result<()> {
        let unit = |name: &str, v: f64| -> Result<()> {
            if !(0.0..=1.0).contains(&v) {
                bail!("{name}: {v} is not in [0, 1]");
            }
            Ok(())
        };
        unit("write_ratio", self.write_ratio)?;
        unit("write_rewrite_probability", self.write_rewrite_probability)?;
        unit(
            "read_sequential_probability",
            self.read_sequential_probability,
        )?;
        unit(
            "write_sequential_probability",
            self.write_sequential_probability,
        )?;
        for (name, theta) in [
            ("read_zipf_theta", self.read_zipf_theta),
            ("write_zipf_theta", self.write_zipf_theta),
        ] {
            if !(theta > 0.0 && theta < 1.0) {
                bail!("{name}: {theta} is not in (0, 1)");
            }
        }
        if self.page_bytes == 0 || self.working_set_bytes < self.page_bytes {
            bail!(
                "working_set_bytes: {} is less than one page of {} bytes",
                self.working_set_bytes,
                self.page_bytes
            );
        }
        if self.read_host_cache_pages * 2 > self.working_set_bytes / self.page_bytes {
            bail!(
                "read_host_cache_pages: {} is more than half the working set's pages",
                self.read_host_cache_pages
            );
        }
        if !matches!(
            self.write_rewrite_mean_distance.partial_cmp(&1.0),
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        ) || !matches!(
            self.mean_interarrival_us.partial_cmp(&0.0),
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        ) {
            bail!("write_rewrite_mean_distance must be at least 1 and mean_interarrival_us non-negative");
        }
        let bursts = self.burst_mean_requests;
        if !(bursts == 0.0 || (1.0..=1e12).contains(&bursts)) {
            bail!("burst_mean_requests: {bursts} is neither 0 (no bursts) nor in [1, 1e12]");
        }
        if !(0.0..=1e15).contains(&self.burst_idle_us) {
            bail!("burst_idle_us: {} is not in [0, 1e15]", self.burst_idle_us);
        }
        if self.write_streams == 0 || self.write_streams > MAX_WRITE_STREAMS {
            bail!(
                "write_streams: {} is not in 1..={MAX_WRITE_STREAMS}",
                self.write_streams
            );
        }
        if self.write_stream_mean_bytes < self.page_bytes {
            bail!(
                "write_stream_mean_bytes: {} is less than one page of {} bytes",
                self.write_stream_mean_bytes,
                self.page_bytes
            );
        }
        if self.size_mix.is_empty()
            || self
                .size_mix
                .iter()
                .any(|&(b, w)| b == 0 || w.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
        {
            bail!("size_mix: every size must be positive with a positive weight");
        }
        Ok(())
    }

    /// Generates the trace.
    pub fn generate(&self) -> Result<BlockTrace> {
        self.validate()?;
        let mut g = Generator::new(self);
        let requests = (0..self.requests).map(|_| g.next()).collect();
        Ok(BlockTrace { requests })
    }
}

struct Generator<'a> {
    spec: &'a SynthSpec,
    rng: Rng,
    pages: u64,
    /// The permutations that scatter popular read (0) and write (1)
    /// ranks over the volume.
    scatters: [Scatter; 2],
    reads: Zipf,
    writes: Zipf,
    size_cdf: Vec<f64>,
    recent_writes: Vec<u64>,
    next_read: u64,
    /// The next byte of each write stream.
    streams: Vec<u64>,
    time_us: f64,
    /// Draws the ends of bursts and their idle gaps apart from `rng`, so
    /// that bursts move requests in time and change nothing else.
    bursts: Rng,
}

impl<'a> Generator<'a> {
    fn new(spec: &'a SynthSpec) -> Self {
        let pages = spec.working_set_bytes / spec.page_bytes;
        let total: f64 = spec.size_mix.iter().map(|s| s.1).sum();
        let size_cdf = spec
            .size_mix
            .iter()
            .scan(0.0, |acc, s| {
                *acc += s.1 / total;
                Some(*acc)
            })
            .collect();
        let mut rng = Rng::new(spec.seed);
        let streams = (0..spec.write_streams)
            .map(|_| rng.below(pages) * spec.page_bytes)
            .collect();
        Generator {
            spec,
            rng,
            pages,
            scatters: [
                Scatter::new(pages, splitmix64(spec.seed)),
                Scatter::new(pages, splitmix64(spec.seed ^ 0x5eed_0fff)),
            ],
            reads: Zipf::new(pages, spec.read_zipf_theta),
            writes: Zipf::new(pages, spec.write_zipf_theta),
            size_cdf,
            recent_writes: Vec::with_capacity(REWRITE_WINDOW),
            next_read: 0,
            streams,
            time_us: 0.0,
            bursts: Rng::new(splitmix64(spec.seed ^ 0xb0a5_7000)),
        }
    }

    fn size_bytes(&mut self) -> u32 {
        let u = self.rng.next_f64();
        let i = self
            .size_cdf
            .partition_point(|&c| c <= u)
            .min(self.size_cdf.len() - 1);
        self.spec.size_mix[i].0
    }

    fn write_start(&mut self) -> u64 {
        let s = self.spec;
        if !self.recent_writes.is_empty() && self.rng.next_f64() < s.write_rewrite_probability {
            let back = self.rng.exponential(s.write_rewrite_mean_distance) as usize;
            let n = self.recent_writes.len();
            return self.recent_writes[n - 1 - back.min(n - 1)];
        }
        let rank = self.writes.sample(&mut self.rng);
        self.scatters[1].apply(rank) * s.page_bytes
    }

    fn read_start(&mut self) -> u64 {
        let s = self.spec;
        if self.rng.next_f64() < s.read_sequential_probability {
            return self.next_read;
        }
        let rank = loop {
            let r = self.reads.sample(&mut self.rng);
            if r >= s.read_host_cache_pages {
                break r;
            }
        };
        self.scatters[0].apply(rank) * s.page_bytes
    }

    /// Where a write of `size_bytes` starts, and which stream it continues
    /// (if any).
    fn write_place(&mut self, size_bytes: u32) -> (u64, Option<usize>) {
        let bulk = size_bytes > self.spec.write_update_max_bytes;
        if bulk || self.rng.next_f64() < self.spec.write_sequential_probability {
            let k = self.rng.below(self.streams.len() as u64) as usize;
            return (self.streams[k], Some(k));
        }
        (self.write_start(), None)
    }

    /// Advances stream `k` past a write ending at `end` bytes, or moves it
    /// elsewhere (once per `write_stream_mean_bytes` on average).
    fn advance_stream(&mut self, k: usize, end: u64, size_bytes: u32) {
        let s = self.spec;
        let moves = size_bytes as f64 / s.write_stream_mean_bytes as f64;
        self.streams[k] = if end >= self.pages * s.page_bytes || self.rng.next_f64() < moves {
            self.rng.below(self.pages) * s.page_bytes
        } else {
            end
        };
    }

    fn remember_write(&mut self, offset_bytes: u64) {
        if self.recent_writes.len() == REWRITE_WINDOW {
            self.recent_writes.drain(..REWRITE_WINDOW / 2);
        }
        self.recent_writes.push(offset_bytes);
    }

    fn next(&mut self) -> Request {
        let s = self.spec;
        let op = if self.rng.next_f64() < s.write_ratio {
            Op::Write
        } else {
            Op::Read
        };
        let size_bytes = self.size_bytes();
        let (mut offset_bytes, stream) = match op {
            Op::Read => (self.read_start(), None),
            Op::Write => self.write_place(size_bytes),
        };
        let limit = self.pages * s.page_bytes;
        if offset_bytes + size_bytes as u64 > limit {
            offset_bytes = limit.saturating_sub(size_bytes as u64) / s.page_bytes * s.page_bytes;
        }
        let end = offset_bytes + size_bytes as u64;
        match (op, stream) {
            (Op::Read, _) => self.next_read = end,
            (Op::Write, Some(k)) => self.advance_stream(k, end, size_bytes),
            (Op::Write, None) => self.remember_write(offset_bytes),
        }
        self.time_us += self.rng.exponential(s.mean_interarrival_us);
        if s.burst_mean_requests > 0.0 && self.bursts.next_f64() * s.burst_mean_requests < 1.0 {
            self.time_us += self.bursts.exponential(s.burst_idle_us);
        }
        Request {
            time_ns: (self.time_us * 1_000.0) as u64,
            volume: 0,
            op,
            offset_bytes,
            size_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::TraceInfo;

    /// The presets' request counts, write shares and mean sizes are the
    /// published ones (TICA Table 2) where there are any.
    #[test]
    fn presets_match_the_published_statistics_they_claim() {
        let published = [
            ("rsrch_0", 133_625, 1_300_030, 13.11e9),
            ("wdev_0", 229_529, 913_732, 10.628e9),
            ("ts_0", 316_692, 1_485_042, 16.612e9),
        ];
        for (name, reads, writes, bytes) in published {
            let t = SynthSpec::preset(name).unwrap().generate().unwrap();
            let i = TraceInfo::of(&t, 4096);
            assert_eq!(i.requests(), reads + writes, "{name}");
            let share = i.writes.requests as f64 / i.requests() as f64;
            let want = writes as f64 / (reads + writes) as f64;
            assert!(
                (share - want).abs() < 0.005,
                "{name}: write share {share} vs {want}"
            );
            let mean = i.mean_request_bytes();
            let want = bytes / (reads + writes) as f64;
            assert!(
                (mean / want - 1.0).abs() < 0.03,
                "{name}: mean size {mean} vs {want}"
            );
        }
    }

    /// Every other TICA Table 2 workload: the write share and mean request
    /// size are the table's; the request count too at full length (checked
    /// on the shortest, DevToolRel), the others scaled to 100,000 here.
    #[test]
    fn table2_presets_match_the_table() {
        for w in crate::tica_table2::TABLE2 {
            let mut spec = SynthSpec::preset(w.name).unwrap();
            assert_eq!(spec.requests, w.requests(), "{}", w.name);
            if w.name != "devtoolrel" {
                spec.requests = 100_000;
            }
            let t = spec.generate().unwrap();
            let i = TraceInfo::of(&t, 4096);
            assert_eq!(i.requests(), spec.requests);
            let share = i.writes.requests as f64 / i.requests() as f64;
            assert!(
                (share - w.write_share()).abs() < 0.01,
                "{}: {share}",
                w.name
            );
            let mean = i.mean_request_bytes() / w.mean_request_bytes();
            // The three MSR presets keep their 9,216-byte mix (within 2 %).
            assert!((mean - 1.0).abs() < 0.03, "{}: mean size x{mean}", w.name);
        }
    }

    /// Writes recur sooner than reads (Hibachi §II's write-after-write
    /// recency), both are skewed, and a seed gives one trace.
    #[test]
    fn writes_recur_soon_and_seeds_repeat() {
        let mut spec = SynthSpec::preset("wdev_0").unwrap();
        spec.requests = 200_000;
        let t = spec.generate().unwrap();
        assert_eq!(t, spec.generate().unwrap());
        let recurrence = |op: Op| {
            let mut last = std::collections::HashMap::new();
            let (mut near, mut repeats) = (0u64, 0u64);
            for (i, r) in t.requests.iter().enumerate().filter(|(_, r)| r.op == op) {
                if let Some(j) = last.insert(r.offset_bytes / 4096, i) {
                    repeats += 1;
                    near += (i - j < 5_000) as u64;
                }
            }
            near as f64 / repeats.max(1) as f64
        };
        let (w, r) = (recurrence(Op::Write), recurrence(Op::Read));
        assert!(
            w > 2.0 * r,
            "share of re-references within 5,000 requests: writes {w}, reads {r}"
        );
        let i = TraceInfo::of(&t, 4096);
        assert!(i.footprint_bytes() <= spec.working_set_bytes);
        spec.seed = 2;
        assert_ne!(t, spec.generate().unwrap());
    }

    /// Writes above `write_update_max_bytes` and a share of the small ones
    /// continue one of the interleaved streams; small writes that do not
    /// keep their recency. Measured on the trace: the share of writes that
    /// start where an earlier write of the trace ended, by size.
    #[test]
    fn bulk_writes_stream_and_small_writes_update() {
        let mut spec = SynthSpec::preset("rsrch_0").unwrap();
        spec.requests = 200_000;
        let continued_share = |t: &BlockTrace, bulk: bool| {
            let mut ends = std::collections::HashSet::new();
            let (mut n, mut continued) = (0u64, 0u64);
            for r in t.requests.iter().filter(|r| r.op == Op::Write) {
                if (r.size_bytes > 16 << 10) == bulk {
                    n += 1;
                    continued += ends.contains(&r.offset_bytes) as u64;
                }
                ends.insert(r.offset_bytes + r.size_bytes as u64);
            }
            continued as f64 / n as f64
        };
        let t = spec.generate().unwrap();
        let (bulk, small) = (continued_share(&t, true), continued_share(&t, false));
        spec.write_update_max_bytes = 1 << 20;
        spec.write_sequential_probability = 0.0;
        let t = spec.generate().unwrap();
        let chance = continued_share(&t, true).max(continued_share(&t, false));
        // Starts that meet an earlier end by chance (hot places written at
        // several sizes): the share without streams.
        assert!(chance < 0.2, "without streams: {chance}");
        // A stream moves on after 1 MiB (~1/40 of its writes), and a small
        // write continues a stream with probability 0.2.
        assert!(bulk > 0.9, "bulk writes continuing a stream: {bulk}");
        assert!(
            (0.15..0.3).contains(&(small - chance)),
            "small writes: {small}, {chance} by chance"
        );
        spec.write_streams = 0;
        assert_eq!(
            spec.generate().unwrap_err().to_string(),
            "write_streams: 0 is not in 1..=65536"
        );
    }

    /// Bursts: a burst ends after `burst_mean_requests` on average, its
    /// idle gap adds `burst_idle_us` on average, so the mean rate is one
    /// request per `mean_interarrival_us + burst_idle_us /
    /// burst_mean_requests`; and bursts move requests in time without
    /// changing which requests they are.
    #[test]
    fn bursts_come_and_go_at_their_means() {
        let mut spec = SynthSpec::preset("ts_0").unwrap();
        spec.requests = 200_000;
        let poisson = spec.generate().unwrap();
        spec.burst_mean_requests = 100.0;
        spec.burst_idle_us = 80_000.0;
        spec.mean_interarrival_us = 200.0;
        let bursty = spec.generate().unwrap();
        let gaps: Vec<f64> = bursty
            .requests
            .windows(2)
            .map(|w| (w[1].time_ns - w[0].time_ns) as f64 / 1e3)
            .collect();
        // Gaps over 5 ms: in-burst gaps almost never (e^-25), and an idle
        // gap with probability e^(-5,000 / 80,000).
        let idle = gaps.iter().filter(|&&g| g > 5_000.0).count() as f64;
        let want = gaps.len() as f64 / 100.0 * (-5_000.0f64 / 80_000.0).exp();
        assert!(
            (idle / want - 1.0).abs() < 0.05,
            "{idle} gaps over 5 ms, {want} expected"
        );
        let span_us = bursty.requests.last().unwrap().time_ns as f64 / 1e3;
        let mean_gap = span_us / gaps.len() as f64;
        assert!(
            (mean_gap / 1000.0 - 1.0).abs() < 0.05,
            "mean gap {mean_gap} us"
        );
        // The requests themselves are the same: only their times move.
        let place = |r: &Request| (r.op, r.offset_bytes, r.size_bytes);
        assert!(poisson
            .requests
            .iter()
            .zip(&bursty.requests)
            .all(|(a, b)| place(a) == place(b)));
        spec.burst_mean_requests = 0.5;
        assert_eq!(
            spec.generate().unwrap_err().to_string(),
            "burst_mean_requests: 0.5 is neither 0 (no bursts) nor in [1, 1e12]"
        );
    }

    /// Share of the reads that start at the tenth most read of the pages
    /// reads start at.
    fn top_decile_share(t: &BlockTrace) -> f64 {
        let mut counts = std::collections::HashMap::new();
        for r in t.requests.iter().filter(|r| r.op == Op::Read) {
            *counts.entry(r.offset_bytes / 4096).or_insert(0u64) += 1;
        }
        let mut c: Vec<u64> = counts.into_values().collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = c[..c.len() / 10].iter().sum();
        top as f64 / c.iter().sum::<u64>() as f64
    }

    /// Storage-level reads keep a frequency skew after the host's cache
    /// has taken the hottest pages.
    #[test]
    fn reads_stay_skewed_below_the_host_cache() {
        let mut spec = SynthSpec::preset("rsrch_0").unwrap();
        spec.requests = 1_000_000;
        spec.write_ratio = 0.0;
        let skewed = top_decile_share(&spec.generate().unwrap());
        spec.read_zipf_theta = 0.01;
        let flat = top_decile_share(&spec.generate().unwrap());
        assert!(
            skewed > 1.5 * flat,
            "top tenth of read pages: {skewed} of reads, {flat} when flat"
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut s = SynthSpec::preset("ts_0").unwrap();
        assert!(SynthSpec::preset("web_0")
            .unwrap_err()
            .to_string()
            .contains("known: rsrch_0, wdev_0, stg_0, ts_0, tpcc, webserver,"));
        s.set("write_ratio", "1.5").unwrap();
        assert_eq!(
            s.generate().unwrap_err().to_string(),
            "write_ratio: 1.5 is not in [0, 1]"
        );
        assert!(s
            .set("colour", "1")
            .unwrap_err()
            .to_string()
            .starts_with("unknown trace parameter 'colour'"));
        assert_eq!(
            s.set("requests", "x").unwrap_err().to_string(),
            "requests: 'x' is not a non-negative integer"
        );
    }
}
