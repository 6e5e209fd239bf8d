//! A disk array's timing as a queue ([`ArrayTiming`]): what the engine
//! emulates in front of a file and the simulator runs in virtual time.

use tiermux_core::Op;

use crate::disk::{st6000nm0034, Disk, Raid5};

/// The arrays a device can name (`array = "..."` in an engine config,
/// `array:NAME` as a simulator device): the Hibachi paper's RAID-5, and
/// one of its disks alone.
pub const ARRAYS: &[&str] = &["raid5-hibachi", "disk-st6000"];

/// What serves an array's operations.
#[derive(Clone, Debug)]
enum Mechanics {
    Raid5(Raid5),
    Disk(Disk),
}

impl Mechanics {
    fn serve(&mut self, dir: Op, offset_bytes: u64, bytes: u64) -> f64 {
        match (self, dir) {
            (Mechanics::Raid5(a), Op::Read) => a.read(offset_bytes, bytes),
            (Mechanics::Raid5(a), Op::Write) => a.write(offset_bytes, bytes),
            (Mechanics::Disk(d), _) => d.serve(offset_bytes, bytes, dir == Op::Write),
        }
    }

    /// An operation that continues the one before it: the transfer only.
    fn extend(&mut self, dir: Op, bytes: u64) -> f64 {
        match self {
            Mechanics::Raid5(a) => a.extend(bytes, dir == Op::Write),
            Mechanics::Disk(d) => {
                // The head is where the last operation ended.
                let at = d.head_bytes();
                d.serve(at, bytes, dir == Op::Write)
            }
        }
    }
}

/// A disk array's timing ([`Raid5`], or one [`Disk`]): operations are served one at a time
/// in submission order, each taking what the array's head positions make
/// it take. An operation that continues the previous one in the same
/// direction while that one is still queued or in service merges with it
/// (a volume issues a client request block by block; a kernel's block
/// layer would merge them before the disks saw them), and a request of
/// several blocks costs the same as its blocks submitted one after
/// another, so that a driver's merging of requests does not change the
/// array's timing.
#[derive(Clone, Debug)]
pub struct ArrayTiming {
    array: Mechanics,
    name: String,
    block_bytes: u64,
    free_at_ns: u64,
    /// The last operation: direction and the byte after it.
    last: Option<(Op, u64)>,
}

impl ArrayTiming {
    /// The array `name` (see [`ARRAYS`]) addressed in blocks of
    /// `block_bytes`, or `None` for an unknown name.
    pub fn named(name: &str, block_bytes: u64) -> Option<ArrayTiming> {
        assert!(block_bytes > 0, "an array addressed in empty blocks");
        let array = match name {
            "raid5-hibachi" => Mechanics::Raid5(Raid5::hibachi_paper()),
            "disk-st6000" => Mechanics::Disk(Disk::new(st6000nm0034())),
            _ => return None,
        };
        Some(ArrayTiming {
            array,
            name: name.to_string(),
            block_bytes,
            free_at_ns: 0,
            last: None,
        })
    }

    /// The array's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Submits an operation of `bytes` at block `addr` at `now_ns`;
    /// returns when it completes, ns (after `now_ns`).
    pub fn submit(&mut self, now_ns: u64, dir: Op, bytes: u64, addr: u64) -> u64 {
        let offset = addr * self.block_bytes;
        let bytes = bytes.max(1);
        let ms = if self.last == Some((dir, offset)) && now_ns < self.free_at_ns {
            self.array.extend(dir, bytes)
        } else if bytes > self.block_bytes {
            // A request of several blocks (a driver merged them) costs
            // what its blocks cost one by one: the first is served, the
            // rest continue it.
            self.array.serve(dir, offset, self.block_bytes)
                + self.array.extend(dir, bytes - self.block_bytes)
        } else {
            self.array.serve(dir, offset, bytes)
        };
        self.last = Some((dir, offset + bytes));
        let start = now_ns.max(self.free_at_ns);
        self.free_at_ns = (start + (ms * 1e6) as u64).max(now_ns + 1);
        self.free_at_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One request at a time: a second random write waits for the first;
    /// blocks that continue a queued write merge with it.
    #[test]
    fn the_array_serves_one_operation_at_a_time() {
        let mut a = ArrayTiming::named("raid5-hibachi", 4096).unwrap();
        let first = a.submit(0, Op::Write, 4096, 1_000_000);
        let second = a.submit(0, Op::Write, 4096, 200_000_000);
        assert!(
            first > 4_000_000 && second > 2 * 4_000_000,
            "{first} {second}"
        );
        // A whole stripe written after the first write's time.
        let third = a.submit(second + 1, Op::Write, 5 * (512 << 10), 0);
        assert!(third > second);
        // Blocks that continue it while it is queued merge: they add
        // their transfer only.
        let now = third + 1;
        let start = a.submit(now, Op::Write, 4096, 10_000);
        let next = a.submit(now + 10, Op::Write, 4096, 10_001);
        let transfer_ns = (2.0 * 4096.0 / 226e6 * 1e9) as u64;
        assert!(next - start <= transfer_ns + 1, "{}", next - start);
        let apart = a.submit(next + 1, Op::Write, 4096, 10_002);
        assert!(
            apart - next > 1_000_000,
            "not merged once the array is idle"
        );
        assert!(ArrayTiming::named("raid6", 4096).is_none());
    }

    /// One disk: a random write seeks and waits for the platter (over 4
    /// ms: half a 7,200 rpm rotation is 4.17 ms); the next block, queued
    /// behind it, only transfers (4 KiB at 226 MB/s, 18 µs); once the
    /// disk is idle the following block still starts where the head is.
    #[test]
    fn one_disk_seeks_once_per_run() {
        let mut d = ArrayTiming::named("disk-st6000", 4096).unwrap();
        let first = d.submit(0, Op::Write, 4096, 1_000_000);
        assert!(first > 4_170_000, "{first}");
        let second = d.submit(0, Op::Write, 4096, 1_000_001);
        let transfer_ns = (4096.0 / 226e6 * 1e9) as u64;
        assert!(second - first <= transfer_ns + 1, "{}", second - first);
        let third = d.submit(second + 5, Op::Write, 4096, 1_000_002);
        assert!(
            third - (second + 5) <= transfer_ns + 1,
            "{}",
            third - second
        );
        let far = d.submit(third + 1, Op::Read, 4096, 5);
        assert!(far - third > 4_000_000, "{}", far - third);
    }

    /// A request of 64 blocks ends when the same blocks submitted one
    /// after another end, on the RAID-5 and on one disk, reading and
    /// writing: merging requests does not change the array's timing.
    #[test]
    fn a_request_of_several_blocks_costs_its_blocks() {
        for name in ARRAYS {
            for dir in [Op::Read, Op::Write] {
                let mut whole = ArrayTiming::named(name, 4096).unwrap();
                let mut blocks = ArrayTiming::named(name, 4096).unwrap();
                // A first request elsewhere, so that both start busy.
                whole.submit(0, dir, 4096, 77_777);
                blocks.submit(0, dir, 4096, 77_777);
                let merged = whole.submit(10, dir, 64 * 4096, 1_000);
                let mut last = 0;
                for k in 0..64 {
                    last = blocks.submit(10, dir, 4096, 1_000 + k);
                }
                let gap = merged.abs_diff(last);
                assert!(gap <= 64, "{name} {dir:?}: {merged} against {last}");
                assert!(merged > 1_000_000, "{name} {dir:?}: {merged}");
            }
        }
    }
}
