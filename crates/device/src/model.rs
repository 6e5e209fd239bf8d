//! Device models in virtual time.
//!
//! A device is a two-stage pipeline, which fixes each operation's completion
//! time when it is submitted (no per-device events):
//!
//! 1. The **pipe**: one FIFO server shared by every operation. Its cost per
//!    operation is `fixed + bytes * per_byte`, separately for reads and
//!    writes, so it carries the device's peak IOPS and bandwidth and the
//!    read/write asymmetry. Writes can slow later reads (interference), many
//!    concurrent writes can slow each other (contention, as on Optane DCPM),
//!    and a garbage-collection pause can block it every N written bytes.
//! 2. The **channels**: the rest of the operation's latency, served on one
//!    of `channels` FIFO servers chosen by a hash of the address (internal
//!    parallelism: dies, heads), or with no queueing when `channels` is 0.
//!
//! Throughput therefore rises with concurrency until the pipe (or the
//! channels) saturate, as in the Orthus paper's Figure 2.
//!
//! Latency varies: a [`Tail`] makes a small share of operations slower in
//! the channel stage (a mixture fitted to published percentiles), drawn
//! from the device's seeded generator, so tails exist without queueing and
//! a run stays deterministic for its seed. A fixed-rate
//! device (R ops/s, one at a time) is the pipe alone with cost 1/R; it
//! exists to check the simulator against the paper's analytical model.

use tiermux_core::rng::{splitmix64, Rng};
use tiermux_core::Op;

/// The slow operations of one direction: with probability `slow_prob` an
/// operation's latency is `slow_factor` times its usual latency, with
/// `slower_prob` it is `slower_factor` times (the extra time is spent in
/// the channel stage, so it adds latency, not pipe occupancy).
#[derive(Clone, Copy, Debug, PartialEq, Default, serde::Serialize)]
pub struct Tail {
    /// Share of operations at `slow_factor`.
    pub slow_prob: f64,
    /// Latency multiplier of those operations.
    pub slow_factor: f64,
    /// Share of operations at `slower_factor`.
    pub slower_prob: f64,
    /// Latency multiplier of those operations.
    pub slower_factor: f64,
}

impl Tail {
    /// The mixture whose 99th and 99.9th percentiles (of latency at one
    /// operation in flight) are `p99_over_p50` and `p999_over_p50` times
    /// the median: 0.99 % of operations at the first, 0.11 % at the
    /// second, so that 1.1 % are at least the first and 0.11 % at least
    /// the second. Without a 99.9th percentile, 1.1 % are at the first.
    pub fn from_percentiles(p99_over_p50: f64, p999_over_p50: Option<f64>) -> Tail {
        match p999_over_p50 {
            Some(p999) => Tail {
                slow_prob: 0.0099,
                slow_factor: p99_over_p50,
                slower_prob: 0.0011,
                slower_factor: p999,
            },
            None => Tail {
                slow_prob: 0.011,
                slow_factor: p99_over_p50,
                slower_prob: 0.0,
                slower_factor: 1.0,
            },
        }
    }

    /// True when every operation takes its usual time.
    pub fn is_none(&self) -> bool {
        self.slow_prob == 0.0 && self.slower_prob == 0.0
    }

    /// The latency multiplier for a uniform draw `u` in [0, 1).
    fn factor(&self, u: f64) -> f64 {
        if u < self.slower_prob {
            self.slower_factor
        } else if u < self.slower_prob + self.slow_prob {
            self.slow_factor
        } else {
            1.0
        }
    }
}

/// Cost of one direction: `fixed_ns + bytes * ns_per_byte` for each stage.
#[derive(Clone, Copy, Debug, PartialEq, Default, serde::Serialize)]
pub struct DirModel {
    /// Pipe cost per operation, ns.
    pub pipe_fixed_ns: f64,
    /// Pipe cost per byte, ns.
    pub pipe_ns_per_byte: f64,
    /// Channel (latency) cost per operation, ns.
    pub access_fixed_ns: f64,
    /// Channel cost per byte, ns.
    pub access_ns_per_byte: f64,
    /// Slow operations (none by default).
    pub tail: Tail,
}

impl DirModel {
    /// Pipe time of an operation of `bytes`, ns.
    pub fn pipe_ns(&self, bytes: u64) -> f64 {
        (self.pipe_fixed_ns + bytes as f64 * self.pipe_ns_per_byte).max(0.0)
    }
    /// Channel time of an operation of `bytes`, ns.
    pub fn access_ns(&self, bytes: u64) -> f64 {
        (self.access_fixed_ns + bytes as f64 * self.access_ns_per_byte).max(0.0)
    }
}

/// Everything that defines a device's timing.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceModel {
    /// Reads.
    pub read: DirModel,
    /// Writes.
    pub write: DirModel,
    /// Channel count; 0 means the latency stage never queues.
    pub channels: u32,
    /// Read pipe cost grows by this factor times the recent write fraction.
    pub write_interference: f64,
    /// Writes in flight above which write pipe cost grows (0 = never).
    pub write_contention_threads: u32,
    /// Growth of write pipe cost per `write_contention_threads` extra writers.
    pub write_contention_factor: f64,
    /// A pause of `gc_pause_ns` blocks the pipe after every this many written bytes (0 = never).
    pub gc_every_bytes: u64,
    /// Length of a garbage-collection pause, ns.
    pub gc_pause_ns: f64,
}

impl DeviceModel {
    /// A device that serves `ops_per_s` operations per second, one at a time,
    /// whatever their size or direction.
    pub fn fixed_rate(ops_per_s: f64) -> Self {
        let d = DirModel {
            pipe_fixed_ns: 1e9 / ops_per_s,
            ..DirModel::default()
        };
        DeviceModel {
            read: d,
            write: d,
            channels: 0,
            write_interference: 0.0,
            write_contention_threads: 0,
            write_contention_factor: 0.0,
            gc_every_bytes: 0,
            gc_pause_ns: 0.0,
        }
    }
}

/// Cumulative counters of a simulated device.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceCounters {
    /// Completed-or-submitted reads.
    pub read_ops: u64,
    /// Submitted writes.
    pub write_ops: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Time the pipe was busy, ns.
    pub busy_ns: f64,
    /// Bytes written per purpose (client, admit, flush, migrate).
    pub write_bytes_by_purpose: [u64; 4],
    /// Bytes read per purpose.
    pub read_bytes_by_purpose: [u64; 4],
    /// Garbage-collection pauses taken.
    pub gc_pauses: u64,
}

/// A simulated device: a model plus its queue state.
#[derive(Clone, Debug)]
pub struct SimDevice {
    /// The timing model.
    pub model: DeviceModel,
    pipe_free_ns: f64,
    channel_free_ns: Vec<f64>,
    write_fraction: f64,
    written_since_gc: u64,
    inflight_reads: u32,
    inflight_writes: u32,
    /// Draws which operations are slow ([`Tail`]).
    rng: Rng,
    /// Cumulative counters.
    pub counters: DeviceCounters,
}

const WRITE_EWMA_WEIGHT: f64 = 1.0 / 64.0;

impl SimDevice {
    /// An idle device whose slow operations are drawn with a fixed seed.
    pub fn new(model: DeviceModel) -> Self {
        SimDevice::seeded(model, 0x5EED_DE71)
    }

    /// An idle device whose slow operations are drawn from `seed`.
    pub fn seeded(model: DeviceModel, seed: u64) -> Self {
        let channels = model.channels as usize;
        SimDevice {
            model,
            pipe_free_ns: 0.0,
            channel_free_ns: vec![0.0; channels],
            write_fraction: 0.0,
            written_since_gc: 0,
            inflight_reads: 0,
            inflight_writes: 0,
            rng: Rng::new(seed),
            counters: DeviceCounters::default(),
        }
    }

    /// Operations in flight (reads, writes).
    pub fn inflight(&self) -> (u32, u32) {
        (self.inflight_reads, self.inflight_writes)
    }

    /// Submits an operation at `now_ns`; returns its completion time, ns.
    /// `purpose` indexes the per-purpose byte counters.
    #[inline(always)]
    pub fn submit(&mut self, now_ns: u64, dir: Op, bytes: u64, addr: u64, purpose: usize) -> u64 {
        let m = &self.model;
        let now = now_ns as f64;
        let (dm, is_write) = match dir {
            Op::Read => (&m.read, false),
            Op::Write => (&m.write, true),
        };
        let mut pipe = dm.pipe_ns(bytes);
        if is_write {
            if m.write_contention_threads > 0 && self.inflight_writes >= m.write_contention_threads
            {
                let extra = (self.inflight_writes + 1 - m.write_contention_threads) as f64;
                pipe *= 1.0 + m.write_contention_factor * extra / m.write_contention_threads as f64;
            }
        } else if m.write_interference > 0.0 {
            pipe *= 1.0 + m.write_interference * self.write_fraction;
        }
        let w = if is_write { 1.0 } else { 0.0 };
        self.write_fraction += WRITE_EWMA_WEIGHT * (w - self.write_fraction);
        let start = now.max(self.pipe_free_ns);
        let mut pipe_done = start + pipe;
        self.counters.busy_ns += pipe;
        if is_write && m.gc_every_bytes > 0 {
            self.written_since_gc += bytes;
            if self.written_since_gc >= m.gc_every_bytes {
                self.written_since_gc -= m.gc_every_bytes;
                pipe_done += m.gc_pause_ns;
                self.counters.busy_ns += m.gc_pause_ns;
                self.counters.gc_pauses += 1;
            }
        }
        self.pipe_free_ns = pipe_done;
        let mut access = dm.access_ns(bytes);
        if !dm.tail.is_none() {
            let f = dm.tail.factor(self.rng.next_f64());
            access += (f - 1.0) * (dm.pipe_ns(bytes) + dm.access_ns(bytes));
        }
        let done = if self.channel_free_ns.is_empty() {
            pipe_done + access
        } else {
            let c = (splitmix64(addr) % self.channel_free_ns.len() as u64) as usize;
            let d = pipe_done.max(self.channel_free_ns[c]) + access;
            self.channel_free_ns[c] = d;
            d
        };
        self.count(dir, bytes, purpose);
        // Round up so that a positive service time never completes "now".
        ceil_ns(done).max(now_ns + 1)
    }

    /// Counts an operation submitted to a device that something else
    /// times (a disk array's queue, [`crate::array::ArrayTiming`]), which
    /// serves it for `service_ns` once it starts (0 until it does:
    /// [`SimDevice::note_service`]).
    pub fn note_timed_elsewhere(&mut self, dir: Op, bytes: u64, purpose: usize) {
        self.count(dir, bytes, purpose);
    }

    /// Counts `service_ns` of busy time spent on an operation timed
    /// elsewhere.
    pub fn note_service(&mut self, service_ns: u64) {
        self.counters.busy_ns += service_ns as f64;
    }

    /// Counts a submitted operation.
    #[inline]
    fn count(&mut self, dir: Op, bytes: u64, purpose: usize) {
        let c = &mut self.counters;
        if dir == Op::Write {
            self.inflight_writes += 1;
            c.write_ops += 1;
            c.write_bytes += bytes;
            c.write_bytes_by_purpose[purpose] += bytes;
        } else {
            self.inflight_reads += 1;
            c.read_ops += 1;
            c.read_bytes += bytes;
            c.read_bytes_by_purpose[purpose] += bytes;
        }
    }

    /// Moves `bytes` of a submitted operation from one purpose's counter
    /// to another's: a merged operation is submitted under its first
    /// block's purpose, and its other blocks may have other purposes.
    pub fn recount_purpose(&mut self, dir: Op, bytes: u64, from: usize, to: usize) {
        let by_purpose = match dir {
            Op::Write => &mut self.counters.write_bytes_by_purpose,
            Op::Read => &mut self.counters.read_bytes_by_purpose,
        };
        by_purpose[from] = by_purpose[from]
            .checked_sub(bytes)
            .expect("recounted bytes were counted under their first purpose");
        by_purpose[to] += bytes;
    }

    /// Notes that an operation submitted earlier has completed.
    #[inline]
    pub fn complete(&mut self, dir: Op) {
        match dir {
            Op::Read => {
                self.inflight_reads = self
                    .inflight_reads
                    .checked_sub(1)
                    .expect("a read completed that was not in flight")
            }
            Op::Write => {
                self.inflight_writes = self
                    .inflight_writes
                    .checked_sub(1)
                    .expect("a write completed that was not in flight")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_serves_one_at_a_time() {
        let mut d = SimDevice::new(DeviceModel::fixed_rate(1000.0));
        assert_eq!(d.submit(0, Op::Read, 4096, 0, 0), 1_000_000);
        assert_eq!(d.submit(0, Op::Write, 65536, 1, 0), 2_000_000);
        assert_eq!(d.submit(5_000_000, Op::Read, 1, 2, 0), 6_000_000);
    }

    #[test]
    fn channels_queue_by_address() {
        let mut m = DeviceModel::fixed_rate(1e9);
        m.read.pipe_fixed_ns = 0.0;
        m.read.access_fixed_ns = 100.0;
        m.channels = 2;
        let mut d = SimDevice::new(m);
        let a = d.submit(0, Op::Read, 4096, 7, 0);
        let b = d.submit(0, Op::Read, 4096, 7, 0);
        assert_eq!((a, b), (100, 200), "same address, same channel: FIFO");
    }

    #[test]
    fn a_tail_makes_its_share_of_operations_slower() {
        let mut m = DeviceModel::fixed_rate(1e9);
        m.read.pipe_fixed_ns = 0.0;
        m.read.access_fixed_ns = 10_000.0;
        m.read.tail = Tail::from_percentiles(3.0, Some(10.0));
        let mut d = SimDevice::seeded(m, 1);
        let mut lat: Vec<u64> = (0..100_000)
            .map(|i| {
                let now = i * 1_000_000;
                d.submit(now, Op::Read, 4096, i, 0) - now
            })
            .collect();
        lat.sort_unstable();
        let pct = |q: f64| lat[(q * lat.len() as f64) as usize] as f64 / 10_000.0;
        assert_eq!(pct(0.5), 1.0);
        assert_eq!(pct(0.99), 3.0);
        assert_eq!(pct(0.999), 10.0);
    }

    #[test]
    fn gc_pauses_the_pipe() {
        let mut m = DeviceModel::fixed_rate(1e6);
        m.gc_every_bytes = 8192;
        m.gc_pause_ns = 50_000.0;
        let mut d = SimDevice::new(m);
        d.submit(0, Op::Write, 4096, 0, 0);
        let t = d.submit(0, Op::Write, 4096, 0, 0);
        assert_eq!(t, 2_000 + 50_000);
        assert_eq!(d.counters.gc_pauses, 1);
    }

    /// A merged request's blocks of another purpose move to their own
    /// counter; the totals stay those of the one request.
    #[test]
    fn recounting_moves_bytes_between_purposes() {
        let mut d = SimDevice::new(DeviceModel::fixed_rate(1000.0));
        d.submit(0, Op::Write, 3 * 4096, 0, 0);
        d.recount_purpose(Op::Write, 4096, 0, 3);
        assert_eq!(d.counters.write_bytes_by_purpose, [2 * 4096, 0, 0, 4096]);
        assert_eq!(
            (d.counters.write_ops, d.counters.write_bytes),
            (1, 3 * 4096)
        );
        d.submit(0, Op::Read, 4096, 0, 1);
        d.recount_purpose(Op::Read, 4096, 1, 2);
        assert_eq!(d.counters.read_bytes_by_purpose, [0, 0, 4096, 0]);
        let more = std::panic::catch_unwind(move || d.recount_purpose(Op::Read, 4096, 1, 2));
        assert!(more.is_err(), "bytes never counted cannot move");
    }
}

/// `x.ceil() as u64`, without the call to the C library's `ceil` that the
/// x86_64 baseline makes (it has no rounding instruction before SSE 4.1):
/// the simulator rounds every device completion time.
#[inline]
fn ceil_ns(x: f64) -> u64 {
    // Saturates like `as`: negative and NaN give 0, values past the range
    // the largest, and every value at or above 2^53 is already whole.
    let t = x as u64;
    if (t as f64) < x {
        t.saturating_add(1)
    } else {
        t
    }
}

#[cfg(test)]
mod ceil_tests {
    use super::ceil_ns;

    #[test]
    fn ceil_ns_agrees_with_ceil() {
        let mut rng = tiermux_core::rng::Rng::new(7);
        let specials = [
            0.0,
            -0.0,
            -1.5,
            0.5,
            1.0,
            1.000_000_1,
            4_503_599_627_370_495.5,
            9_007_199_254_740_993.0,
            1e30,
            f64::NAN,
            f64::INFINITY,
        ];
        let random = (0..100_000).map(|_| rng.next_f64() * 1e12);
        for x in specials.into_iter().chain(random) {
            assert_eq!(ceil_ns(x), x.ceil() as u64, "{x}");
        }
    }
}
