//! Observations: what a driver measured over one controller interval.
//!
//! The simulator and the engine both fill an [`ObservationBuilder`] as
//! operations complete and hand the resulting [`Observation`] to the policy's
//! controller on every tick, so a controller sees the same quantities in
//! virtual time and in wall-clock time.

use crate::hist::Histogram;
use crate::types::{Op, Outcome};

/// Per-device counters over one interval.
#[derive(Clone, Debug, Default)]
pub struct DeviceObservation {
    /// Completed read operations.
    pub read_ops: u64,
    /// Completed write operations.
    pub write_ops: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Sum of operation latencies (submission to completion), ns.
    pub latency_sum_ns: u64,
    /// Sum of read latencies, ns.
    pub read_latency_sum_ns: u64,
    /// Completed reads of a single block (not merged with neighbours): the
    /// reads a latency probe of one block at a time would time.
    pub block_read_ops: u64,
    /// Sum of the latencies of those single-block reads, ns.
    pub block_read_latency_sum_ns: u64,
    /// Latency distribution of the interval's operations.
    pub latency: Histogram,
    /// Operations outstanding at the end of the interval, reads.
    pub inflight_reads: u32,
    /// Operations outstanding at the end of the interval, writes.
    pub inflight_writes: u32,
}

impl DeviceObservation {
    /// Bytes moved in either direction.
    pub fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes
    }
    /// Operations in either direction.
    pub fn ops(&self) -> u64 {
        self.read_ops + self.write_ops
    }
    /// Mean latency of the interval's operations, ns (0 when idle).
    pub fn mean_latency_ns(&self) -> f64 {
        let n = self.ops();
        if n == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / n as f64
        }
    }
}

/// One device's counters summed over several observations, for controllers
/// whose window spans several ticks (no histogram, so summing is cheap).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceTotals {
    /// Completed read operations.
    pub read_ops: u64,
    /// Completed write operations.
    pub write_ops: u64,
    /// Bytes moved in either direction.
    pub bytes: u64,
    /// Sum of operation latencies, ns.
    pub latency_sum_ns: u64,
}

impl DeviceTotals {
    /// Adds one interval's counters.
    pub fn add(&mut self, d: &DeviceObservation) {
        self.read_ops += d.read_ops;
        self.write_ops += d.write_ops;
        self.bytes += d.bytes();
        self.latency_sum_ns += d.latency_sum_ns;
    }
    /// Operations in either direction.
    pub fn ops(&self) -> u64 {
        self.read_ops + self.write_ops
    }
    /// Mean latency, ns (None when no operation completed).
    pub fn mean_latency_ns(&self) -> Option<f64> {
        let n = self.ops();
        (n > 0).then(|| self.latency_sum_ns as f64 / n as f64)
    }
}

/// Everything a controller sees about one interval.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// Driver time at the end of the interval, ns.
    pub now_ns: u64,
    /// Length of the interval, ns.
    pub interval_ns: u64,
    /// Per-device counters, indexed by device.
    pub devices: Vec<DeviceObservation>,
    /// Client requests completed.
    pub client_ops: u64,
    /// Client read requests completed.
    pub client_read_ops: u64,
    /// Client bytes completed.
    pub client_bytes: u64,
    /// Sum of client read latencies, ns.
    pub client_read_latency_sum_ns: u64,
    /// End-to-end latency distribution of client requests.
    pub client_latency: Histogram,
    /// Read accesses that hit a cache device.
    pub read_hits: u64,
    /// Read accesses that missed.
    pub read_misses: u64,
    /// Write accesses that hit.
    pub write_hits: u64,
    /// Write accesses that missed.
    pub write_misses: u64,
}

impl Observation {
    /// Read miss ratio of the interval (None without reads).
    pub fn read_miss_ratio(&self) -> Option<f64> {
        let n = self.read_hits + self.read_misses;
        (n > 0).then(|| self.read_misses as f64 / n as f64)
    }
    /// Device bytes per second over all devices.
    pub fn device_bytes_per_s(&self) -> f64 {
        let b: u64 = self.devices.iter().map(|d| d.bytes()).sum();
        b as f64 * 1e9 / self.interval_ns.max(1) as f64
    }
    /// Client operations per second.
    pub fn client_ops_per_s(&self) -> f64 {
        self.client_ops as f64 * 1e9 / self.interval_ns.max(1) as f64
    }
    /// Mean client read latency, ns (None without reads).
    pub fn mean_read_latency_ns(&self) -> Option<f64> {
        (self.client_read_ops > 0)
            .then(|| self.client_read_latency_sum_ns as f64 / self.client_read_ops as f64)
    }
}

/// Accumulates one interval's observation.
#[derive(Clone, Debug)]
pub struct ObservationBuilder {
    current: Observation,
    started_ns: u64,
    block_bytes: u64,
}

impl ObservationBuilder {
    /// A builder for `devices` devices whose first interval starts at
    /// `now_ns`, on a volume of `block_bytes`-byte blocks.
    pub fn new(devices: usize, now_ns: u64, block_bytes: u64) -> Self {
        assert!(block_bytes > 0, "a block has a size");
        ObservationBuilder {
            current: Observation {
                devices: vec![DeviceObservation::default(); devices],
                ..Observation::default()
            },
            started_ns: now_ns,
            block_bytes,
        }
    }

    /// Records a completed device operation.
    #[inline]
    pub fn device_op(&mut self, device: usize, dir: Op, bytes: u64, latency_ns: u64) {
        let d = &mut self.current.devices[device];
        match dir {
            Op::Read => {
                d.read_ops += 1;
                d.read_bytes += bytes;
                d.read_latency_sum_ns += latency_ns;
                if bytes == self.block_bytes {
                    d.block_read_ops += 1;
                    d.block_read_latency_sum_ns += latency_ns;
                }
            }
            Op::Write => {
                d.write_ops += 1;
                d.write_bytes += bytes;
            }
        }
        d.latency_sum_ns += latency_ns;
        d.latency.record(latency_ns);
    }

    /// Records a completed client request.
    #[inline]
    pub fn client_op(&mut self, op: Op, bytes: u64, latency_ns: u64) {
        let c = &mut self.current;
        c.client_ops += 1;
        c.client_bytes += bytes;
        if op == Op::Read {
            c.client_read_ops += 1;
            c.client_read_latency_sum_ns += latency_ns;
        }
        c.client_latency.record(latency_ns);
    }

    /// Records how the policy classified an access.
    #[inline]
    pub fn outcome(&mut self, op: Op, outcome: Outcome) {
        let c = &mut self.current;
        match (op, outcome) {
            (Op::Read, Outcome::Hit(_)) => c.read_hits += 1,
            (Op::Read, Outcome::Miss) => c.read_misses += 1,
            (Op::Write, Outcome::Hit(_)) => c.write_hits += 1,
            (Op::Write, Outcome::Miss) => c.write_misses += 1,
            (_, Outcome::NotApplicable) => {}
        }
    }

    /// Sets the outstanding-operation snapshot of a device.
    pub fn inflight(&mut self, device: usize, reads: u32, writes: u32) {
        self.current.devices[device].inflight_reads = reads;
        self.current.devices[device].inflight_writes = writes;
    }

    /// Closes the interval at `now_ns`, returning it, and starts the next.
    /// The returned observation is valid until the next call.
    pub fn finish(&mut self, now_ns: u64) -> &Observation {
        self.current.now_ns = now_ns;
        self.current.interval_ns = now_ns.saturating_sub(self.started_ns);
        self.started_ns = now_ns;
        &self.current
    }

    /// Clears the counters after the caller used [`Self::finish`]'s result.
    pub fn reset(&mut self) {
        let c = &mut self.current;
        for d in &mut c.devices {
            d.read_ops = 0;
            d.write_ops = 0;
            d.read_bytes = 0;
            d.write_bytes = 0;
            d.latency_sum_ns = 0;
            d.read_latency_sum_ns = 0;
            d.block_read_ops = 0;
            d.block_read_latency_sum_ns = 0;
            d.latency.clear();
        }
        c.client_ops = 0;
        c.client_read_ops = 0;
        c.client_bytes = 0;
        c.client_read_latency_sum_ns = 0;
        c.client_latency.clear();
        c.read_hits = 0;
        c.read_misses = 0;
        c.write_hits = 0;
        c.write_misses = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_block_reads_are_counted_apart_from_merged_ones() {
        let mut b = ObservationBuilder::new(2, 0, 4096);
        b.device_op(0, Op::Read, 4096, 10_000);
        b.device_op(0, Op::Read, 4096, 30_000);
        b.device_op(0, Op::Read, 16 * 4096, 200_000);
        b.device_op(0, Op::Write, 4096, 50_000);
        b.device_op(1, Op::Read, 2 * 4096, 70_000);
        let o = b.finish(1_000);
        let (d0, d1) = (&o.devices[0], &o.devices[1]);
        assert_eq!((d0.read_ops, d0.read_latency_sum_ns), (3, 240_000));
        assert_eq!(
            (d0.block_read_ops, d0.block_read_latency_sum_ns),
            (2, 40_000)
        );
        assert_eq!(d0.latency_sum_ns, 290_000);
        assert_eq!((d1.read_ops, d1.block_read_ops), (1, 0));
        b.reset();
        let o = b.finish(2_000);
        assert_eq!(o.devices[0].block_read_ops, 0);
        assert_eq!(o.devices[0].block_read_latency_sum_ns, 0);
    }
}
