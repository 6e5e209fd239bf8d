//! A disk array's timing as a queue ([`ArrayTiming`]): what the engine
//! emulates in front of a file and the simulator runs in virtual time.

use tiermux_core::Op;

use crate::disk::Raid5;

/// The arrays a device can name (`array = "..."` in an engine config,
/// `array:NAME` as a simulator device).
pub const ARRAYS: &[&str] = &["raid5-hibachi"];

/// A disk array's timing ([`Raid5`]): operations are served one at a time
/// in submission order, each taking what the array's head positions make
/// it take. An operation that continues the previous one in the same
/// direction while that one is still queued or in service merges with it
/// (a volume issues a client request block by block; a kernel's block
/// layer would merge them before the disks saw them).
#[derive(Clone, Debug)]
pub struct ArrayTiming {
    array: Raid5,
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
            "raid5-hibachi" => Raid5::hibachi_paper(),
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
            self.array.extend(bytes, dir == Op::Write)
        } else {
            match dir {
                Op::Read => self.array.read(offset, bytes),
                Op::Write => self.array.write(offset, bytes),
            }
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
}
