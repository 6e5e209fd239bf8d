//! Hard disks and RAID-5 arrays of them, as service times that depend on
//! where the head is: a request that starts where the previous one ended
//! only transfers; any other seeks (time growing with the square root of
//! the distance, Ruemmler and Wilkes' short-seek shape) and waits half a
//! rotation on average. So sequential and random writes differ as on a
//! real disk, which the pipe-and-channels model ([`crate::model`]) cannot
//! express. [`Raid5`] serves requests one at a time (fio's
//! `ioengine=sync`, as the Hibachi paper replays its flushes); with many
//! in flight, each member disk queues its own
//! ([`crate::array::ArrayTiming`]).

/// One disk's mechanics.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskSpec {
    /// Where the numbers come from.
    pub source: &'static str,
    /// Capacity, bytes.
    pub capacity_bytes: u64,
    /// Spindle speed.
    pub rpm: f64,
    /// Seek to the next track, ms.
    pub track_seek_ms: f64,
    /// Mean seek between uniformly random places, ms, for reads.
    pub average_read_seek_ms: f64,
    /// The same for writes (the head settles longer).
    pub average_write_seek_ms: f64,
    /// Sustained transfer rate, bytes per second.
    pub transfer_bytes_per_s: f64,
}

/// Seagate Enterprise Capacity 3.5 HDD v4, 6 TB, 7,200 rpm, SAS 12 Gb/s
/// (ST6000NM0034), the Hibachi paper's array disks.
pub fn st6000nm0034() -> DiskSpec {
    DiskSpec {
        source: "Seagate Enterprise Capacity 3.5 HDD v4 data sheet: 7,200 rpm, average seek 8.5 ms read / 9.5 ms write, sustained transfer 226 MB/s (figures as published by the vendor, not measured here); track-to-track seek 0.5 ms is a typical value, not from the data sheet",
        capacity_bytes: 6_000_000_000_000,
        rpm: 7200.0,
        track_seek_ms: 0.5,
        average_read_seek_ms: 8.5,
        average_write_seek_ms: 9.5,
        transfer_bytes_per_s: 226e6,
    }
}

/// E[sqrt(d / D)] for the distance d between two uniformly random places
/// on a stroke of D: with density 2(1 - u), the integral of 2 sqrt(u)(1 - u)
/// over [0, 1] is 8/15.
const MEAN_SQRT_DISTANCE: f64 = 8.0 / 15.0;

/// A disk with a head position.
#[derive(Clone, Debug)]
pub struct Disk {
    spec: DiskSpec,
    head_bytes: u64,
}

impl Disk {
    /// A disk with its head at the start.
    pub fn new(spec: DiskSpec) -> Disk {
        assert!(spec.capacity_bytes > 0 && spec.transfer_bytes_per_s > 0.0 && spec.rpm > 0.0);
        Disk {
            spec,
            head_bytes: 0,
        }
    }

    /// Seek time over `distance_bytes`, ms: the track-to-track time plus
    /// a square-root share of the full stroke, scaled so that random seeks
    /// average the data sheet's figure.
    pub fn seek_ms(&self, distance_bytes: u64, write: bool) -> f64 {
        if distance_bytes == 0 {
            return 0.0;
        }
        let average = if write {
            self.spec.average_write_seek_ms
        } else {
            self.spec.average_read_seek_ms
        };
        let t = self.spec.track_seek_ms;
        let full_stroke = t + (average - t) / MEAN_SQRT_DISTANCE;
        let u = (distance_bytes as f64 / self.spec.capacity_bytes as f64).min(1.0);
        t + (full_stroke - t) * u.sqrt()
    }

    /// Half a rotation, ms: the mean wait for the sector after a seek.
    pub fn rotational_latency_ms(&self) -> f64 {
        30_000.0 / self.spec.rpm
    }

    /// Time to bring the head over `offset_bytes`, ms. Where the previous
    /// request ended: nothing. A little further on the same track: the
    /// platter turns to it. Behind on the same track (rewriting what was
    /// just read): it turns nearly once round. Elsewhere: a seek and half
    /// a rotation on average.
    fn position_ms(&self, offset_bytes: u64, write: bool) -> f64 {
        let rotation_ms = 2.0 * self.rotational_latency_ms();
        let track_bytes = self.spec.transfer_bytes_per_s * rotation_ms / 1e3;
        let distance = offset_bytes.abs_diff(self.head_bytes);
        let turn_ms = distance as f64 / self.spec.transfer_bytes_per_s * 1e3;
        if distance == 0 {
            0.0
        } else if (distance as f64) < track_bytes {
            if offset_bytes > self.head_bytes {
                turn_ms
            } else {
                rotation_ms - turn_ms
            }
        } else {
            self.seek_ms(distance, write) + self.rotational_latency_ms()
        }
    }

    /// Where the head is: the byte after the last request served.
    pub fn head_bytes(&self) -> u64 {
        self.head_bytes
    }

    /// Serves one request and returns its time, ms.
    pub fn serve(&mut self, offset_bytes: u64, size_bytes: u64, write: bool) -> f64 {
        let transfer_ms = size_bytes as f64 / self.spec.transfer_bytes_per_s * 1e3;
        let position_ms = self.position_ms(offset_bytes, write);
        self.head_bytes = offset_bytes + size_bytes;
        position_ms + transfer_ms
    }
}

/// One operation on a member disk of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskOp {
    /// Which member disk.
    pub disk: usize,
    /// Where on that disk, bytes.
    pub offset_bytes: u64,
    /// How much it moves, bytes.
    pub bytes: u64,
    /// Whether it writes.
    pub write: bool,
}

/// Where a RAID-5 array (left-symmetric, as Linux md lays it out by
/// default) keeps data and parity, and which member-disk operations a
/// client read or write needs. A write covering whole stripes writes data
/// and parity to every disk; a partial stripe first reads what parity
/// needs (the old data and parity, or the untouched data, whichever is
/// fewer chunks, as md chooses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raid5Layout {
    /// Member disks.
    pub disks: usize,
    /// Bytes of a chunk (what one disk holds of a stripe).
    pub chunk_bytes: u64,
}

/// How many stripes a write covered whole, and in part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StripesWritten {
    /// Written whole: no reads.
    pub full: u64,
    /// Written in part: parity needed reads.
    pub partial: u64,
}

impl Raid5Layout {
    /// `disks` disks with `chunk_bytes` chunks.
    pub fn new(disks: usize, chunk_bytes: u64) -> Raid5Layout {
        assert!(disks >= 3, "RAID-5 needs at least three disks");
        assert!(
            chunk_bytes > 0 && chunk_bytes.is_multiple_of(512),
            "chunks are whole sectors"
        );
        Raid5Layout { disks, chunk_bytes }
    }

    fn data_disks(&self) -> u64 {
        self.disks as u64 - 1
    }

    /// The parity disk of `stripe` (left-symmetric: parity moves left).
    fn parity_disk(&self, stripe: u64) -> usize {
        let n = self.disks as u64;
        (n - 1 - stripe % n) as usize
    }

    /// The disk holding data chunk `i` of `stripe`.
    fn data_disk(&self, stripe: u64, i: u64) -> usize {
        let n = self.disks as u64;
        ((self.parity_disk(stripe) as u64 + 1 + i) % n) as usize
    }

    /// Appends to `ops` the member reads of a client read of `size_bytes`
    /// at `offset_bytes`: one per chunk it covers.
    pub fn plan_read(&self, offset_bytes: u64, size_bytes: u64, ops: &mut Vec<DiskOp>) {
        let chunk = self.chunk_bytes;
        let (mut at, end) = (offset_bytes, offset_bytes + size_bytes);
        while at < end {
            let (data_chunk, within) = (at / chunk, at % chunk);
            let len = (chunk - within).min(end - at);
            let (stripe, i) = (
                data_chunk / self.data_disks(),
                data_chunk % self.data_disks(),
            );
            ops.push(DiskOp {
                disk: self.data_disk(stripe, i),
                offset_bytes: stripe * chunk + within,
                bytes: len,
                write: false,
            });
            at += len;
        }
    }

    /// Appends to `reads` and `writes` the member operations of a client
    /// write of `size_bytes` at `offset_bytes`: the reads parity needs
    /// first, then the writes.
    pub fn plan_write(
        &self,
        offset_bytes: u64,
        size_bytes: u64,
        reads: &mut Vec<DiskOp>,
        writes: &mut Vec<DiskOp>,
    ) -> StripesWritten {
        assert!(size_bytes > 0, "an empty write");
        let stripe_bytes = self.chunk_bytes * self.data_disks();
        let mut stripes = StripesWritten::default();
        let end = offset_bytes + size_bytes;
        let mut at = offset_bytes;
        while at < end {
            let stripe = at / stripe_bytes;
            let stripe_end = ((stripe + 1) * stripe_bytes).min(end);
            let start = at - stripe * stripe_bytes;
            if self.plan_stripe(stripe, start, stripe_end - at, reads, writes) {
                stripes.full += 1;
            } else {
                stripes.partial += 1;
            }
            at = stripe_end;
        }
        stripes
    }

    /// The disk operations that write `len` bytes at `start` within
    /// `stripe`; returns whether the stripe is written whole.
    fn plan_stripe(
        &self,
        stripe: u64,
        start: u64,
        len: u64,
        reads: &mut Vec<DiskOp>,
        writes: &mut Vec<DiskOp>,
    ) -> bool {
        let chunk = self.chunk_bytes;
        let base = stripe * chunk;
        let parity = self.parity_disk(stripe);
        let first = start / chunk;
        let last = (start + len - 1) / chunk;
        // The byte range within a chunk that the write touches on any
        // chunk (parity covers the union).
        let (lo, hi) = if first == last {
            (start % chunk, (start + len - 1) % chunk + 1)
        } else {
            (0, chunk)
        };
        let op = |disk, offset_bytes, bytes, write| DiskOp {
            disk,
            offset_bytes,
            bytes,
            write,
        };
        for i in first..=last {
            let s = if i == first { start % chunk } else { 0 };
            let e = if i == last {
                (start + len - 1) % chunk + 1
            } else {
                chunk
            };
            writes.push(op(self.data_disk(stripe, i), base + s, e - s, true));
        }
        writes.push(op(parity, base + lo, hi - lo, true));
        let touched = last - first + 1;
        if start == 0 && len == chunk * self.data_disks() {
            return true;
        }
        let untouched = self.data_disks() - touched;
        // Read-modify-write (old data and old parity) when that reads
        // fewer chunks than reconstructing from the untouched data.
        if touched < untouched {
            for i in first..=last {
                reads.push(op(self.data_disk(stripe, i), base + lo, hi - lo, false));
            }
            reads.push(op(parity, base + lo, hi - lo, false));
        } else {
            // Reconstruct-write: the untouched data.
            for i in (0..self.data_disks()).filter(|i| !(first..=last).contains(i)) {
                reads.push(op(self.data_disk(stripe, i), base + lo, hi - lo, false));
            }
        }
        false
    }
}

/// A RAID-5 array ([`Raid5Layout`]) of identical disks serving one client
/// request at a time, as fio's `ioengine=sync` submits them: each request's
/// member operations run on their disks at once, and the next request
/// starts when the slowest is done.
#[derive(Clone, Debug)]
pub struct Raid5 {
    layout: Raid5Layout,
    disks: Vec<Disk>,
    /// Total service time so far, ms.
    pub busy_ms: f64,
    /// Bytes written by clients.
    pub written_bytes: u64,
    /// Stripes written whole.
    pub full_stripes: u64,
    /// Stripes written in part (parity needed reads).
    pub partial_stripes: u64,
}

impl Raid5 {
    /// `disks` disks of `spec` with `chunk_bytes` chunks.
    pub fn new(spec: DiskSpec, disks: usize, chunk_bytes: u64) -> Raid5 {
        Raid5 {
            layout: Raid5Layout::new(disks, chunk_bytes),
            disks: (0..disks).map(|_| Disk::new(spec.clone())).collect(),
            busy_ms: 0.0,
            written_bytes: 0,
            full_stripes: 0,
            partial_stripes: 0,
        }
    }

    /// The Hibachi paper's array: six ST6000NM0034 disks in md RAID-5,
    /// with md's default 512 KiB chunk.
    pub fn hibachi_paper() -> Raid5 {
        Raid5::new(st6000nm0034(), 6, HIBACHI_CHUNK_BYTES)
    }

    /// Serves a client write of `size_bytes` at `offset_bytes`; returns
    /// its time, ms.
    pub fn write(&mut self, offset_bytes: u64, size_bytes: u64) -> f64 {
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        let stripes = self
            .layout
            .plan_write(offset_bytes, size_bytes, &mut reads, &mut writes);
        self.full_stripes += stripes.full;
        self.partial_stripes += stripes.partial;
        let t = self.phase(&reads) + self.phase(&writes);
        self.busy_ms += t;
        self.written_bytes += size_bytes;
        t
    }

    /// Serves a client read of `size_bytes` at `offset_bytes` (the data
    /// chunks it covers, from their disks at once); returns its time, ms.
    pub fn read(&mut self, offset_bytes: u64, size_bytes: u64) -> f64 {
        let mut ops = Vec::new();
        self.layout.plan_read(offset_bytes, size_bytes, &mut ops);
        let t = self.phase(&ops);
        self.busy_ms += t;
        t
    }

    /// Runs operations on their disks in parallel (each disk in order);
    /// the phase lasts as long as the busiest disk.
    fn phase(&mut self, ops: &[DiskOp]) -> f64 {
        let mut per_disk = vec![0.0; self.disks.len()];
        for op in ops {
            per_disk[op.disk] += self.disks[op.disk].serve(op.offset_bytes, op.bytes, op.write);
        }
        per_disk.into_iter().fold(0.0, f64::max)
    }

    /// Client write throughput so far, bytes per second.
    pub fn write_bytes_per_s(&self) -> f64 {
        if self.busy_ms == 0.0 {
            return 0.0;
        }
        self.written_bytes as f64 / (self.busy_ms / 1e3)
    }
}

/// md's default chunk, bytes (512 KiB), as the Hibachi paper's array uses.
pub const HIBACHI_CHUNK_BYTES: u64 = 512 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    /// Random seeks average the data sheet's figure; long sequential
    /// writes run at the transfer rate; random 4 KiB writes at about
    /// 1 / (seek + half a rotation): about 73 per second.
    #[test]
    fn a_disk_is_fast_sequentially_and_slow_at_random() {
        let mut rng = tiermux_core::rng::Rng::new(1);
        let d = Disk::new(st6000nm0034());
        let n = 200_000;
        let mean: f64 = (0..n)
            .map(|_| {
                let (a, b) = (rng.below(6_000_000_000_000), rng.below(6_000_000_000_000));
                d.seek_ms(a.abs_diff(b), true)
            })
            .sum::<f64>()
            / n as f64;
        assert!((mean - 9.5).abs() < 0.05, "mean write seek {mean} ms");
        let mut d = Disk::new(st6000nm0034());
        let seq: f64 = (0..1000u64).map(|i| d.serve(i << 20, 1 << 20, true)).sum();
        let seq_mb_s = 1000.0 * (1 << 20) as f64 / (seq / 1e3) / 1e6;
        assert!((seq_mb_s - 226.0).abs() < 1.0, "{seq_mb_s} MB/s");
        let pages = 6_000_000_000_000 / 4096;
        let rnd: f64 = (0..1000)
            .map(|_| d.serve(rng.below(pages) * 4096, 4096, true))
            .sum();
        let iops = 1000.0 / (rnd / 1e3);
        assert!(
            (60.0..80.0).contains(&iops),
            "{iops} random writes per second"
        );
    }

    /// Whole stripes need no reads; a 4 KiB write reads and writes two
    /// disks (old data and parity).
    #[test]
    fn raid5_writes_full_stripes_without_reads() {
        let mut r = Raid5::hibachi_paper();
        let stripe = 5 * (512 << 10);
        let t = r.write(0, stripe);
        assert_eq!((r.full_stripes, r.partial_stripes), (1, 0));
        // Six disks write 512 KiB each at once.
        let one_chunk_ms = (512 << 10) as f64 / 226e6 * 1e3;
        assert!((t - one_chunk_ms).abs() < 1e-9, "{t}");
        let seq: f64 = (1..200u64).map(|i| r.write(i * stripe, stripe)).sum();
        let mb_s = 199.0 * stripe as f64 / (seq / 1e3) / 1e6;
        assert!(
            (mb_s - 5.0 * 226.0).abs() < 5.0,
            "{mb_s} MB/s: five data disks"
        );
        let mut r = Raid5::hibachi_paper();
        let mut rng = tiermux_core::rng::Rng::new(2);
        let pages = 5 * 6_000_000_000_000 / 4096;
        for _ in 0..500 {
            r.write(rng.below(pages) * 4096, 4096);
        }
        assert_eq!(r.partial_stripes, 500);
        let iops = 500.0 / (r.busy_ms / 1e3);
        // Reading old data and parity takes a seek and half a rotation;
        // writing them back where they were read, nearly a rotation:
        // 1 / (8.5 + 4.17 + 8.33 ms) = 48 per second.
        assert!(
            (44.0..52.0).contains(&iops),
            "{iops} random 4 KiB writes per second"
        );
    }

    /// Reads spread over the data disks: a whole stripe reads five chunks
    /// at once; a page reads from one disk.
    #[test]
    fn raid5_reads_use_the_data_disks_at_once() {
        let mut r = Raid5::hibachi_paper();
        let t = r.read(0, 5 * (512 << 10));
        let one_chunk_ms = (512 << 10) as f64 / 226e6 * 1e3;
        assert!((t - one_chunk_ms).abs() < 1e-9, "{t}");
        // The next stripe's first page is on a disk whose head sits a
        // chunk behind, on the same track: it turns there, no seek.
        let t = r.read(5 * (512 << 10), 4096);
        let turn_ms = ((512 << 10) + 4096) as f64 / 226e6 * 1e3;
        assert!((t - turn_ms).abs() < 1e-9, "{t}");
    }

    /// A run of 256 pages written at once costs a small fraction of the
    /// same pages written at random.
    #[test]
    fn one_long_write_beats_scattered_pages() {
        let mut one = Raid5::hibachi_paper();
        let t_one = one.write(3 << 30, 256 * 4096);
        let mut rnd = Raid5::hibachi_paper();
        let mut rng = tiermux_core::rng::Rng::new(3);
        let pages = 5 * 6_000_000_000_000 / 4096;
        let t_rnd: f64 = (0..256)
            .map(|_| rnd.write(rng.below(pages) * 4096, 4096))
            .sum();
        assert!(
            t_rnd > 100.0 * t_one,
            "random {t_rnd} ms vs one write {t_one} ms"
        );
    }
}
