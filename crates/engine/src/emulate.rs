//! Layers around a device: code that sees every operation of one device
//! between the volume and the device's file, without knowing what the file
//! is. Emulated timing is one ([`Emulated`]); fault injection, throttles and
//! statistics are others of the same shape.

use tiermux_core::Op;
use tiermux_device::{ProfileSpec, SimDevice};

/// Something that sees each operation of a device.
pub trait Layer: Send {
    /// What the layer does, for logs ("emulated optane-905p").
    fn describe(&self) -> String;

    /// An operation of `bytes` at block address `addr` is submitted at
    /// `now_ns` (the loop's clock); returns the earliest time it may
    /// complete, or 0 for no constraint. `purpose` indexes
    /// [`tiermux_core::Purpose`].
    fn submitted(&mut self, now_ns: u64, dir: Op, bytes: u64, addr: u64, purpose: usize) -> u64;

    /// The operation submitted earlier has completed.
    fn completed(&mut self, dir: Op);

    /// Whether the operation that just completed (or a sync) is to be
    /// reported failed ([`crate::faults::Injected`]).
    fn fails(&mut self, op: crate::faults::FaultOp) -> bool {
        let _ = op;
        false
    }
}

/// A device's timing from a profile: each operation is submitted to the
/// profile's model at its submission time, and completes no earlier than
/// the model says the modelled device would finish it.
pub struct Emulated {
    model: SimDevice,
    profile: String,
}

impl Emulated {
    /// The timing of `profile`, its slow operations drawn from `seed`;
    /// errors name the profile's bad field.
    pub fn new(profile: &ProfileSpec, seed: u64) -> Result<Emulated, tiermux_device::ProfileError> {
        Ok(Emulated {
            model: SimDevice::seeded(profile.model()?, seed),
            profile: profile.name.clone(),
        })
    }
}

impl Layer for Emulated {
    fn describe(&self) -> String {
        format!("emulated {}", self.profile)
    }

    fn submitted(&mut self, now_ns: u64, dir: Op, bytes: u64, addr: u64, purpose: usize) -> u64 {
        self.model.submit(now_ns, dir, bytes, addr, purpose)
    }

    fn completed(&mut self, dir: Op) {
        self.model.complete(dir);
    }
}

/// A disk array's timing ([`tiermux_device::disk::Raid5`]): operations
/// are served one at a time in submission order, each taking what the
/// array's head positions make it take. An operation that continues the
/// previous one in the same direction while that one is still queued or
/// in service merges with it (the volume issues a client request block by
/// block; a kernel's block layer would merge them before the disks saw
/// them).
pub struct EmulatedArray {
    array: tiermux_device::disk::Raid5,
    name: String,
    block_bytes: u64,
    free_at_ns: u64,
    /// The last operation: direction and the byte after it.
    last: Option<(Op, u64)>,
}

/// The arrays a device config can name (`array = "..."`).
pub const ARRAYS: &[&str] = &["raid5-hibachi"];

impl EmulatedArray {
    /// The array `name` (see [`ARRAYS`]) for a device of `block_bytes`
    /// blocks, or `None` for an unknown name.
    pub fn new(name: &str, block_bytes: u64) -> Option<EmulatedArray> {
        let array = match name {
            "raid5-hibachi" => tiermux_device::disk::Raid5::hibachi_paper(),
            _ => return None,
        };
        Some(EmulatedArray {
            array,
            name: name.to_string(),
            block_bytes,
            free_at_ns: 0,
            last: None,
        })
    }
}

impl Layer for EmulatedArray {
    fn describe(&self) -> String {
        format!("emulated array {}", self.name)
    }

    fn submitted(&mut self, now_ns: u64, dir: Op, bytes: u64, addr: u64, _purpose: usize) -> u64 {
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
        self.free_at_ns = start + (ms * 1e6) as u64;
        self.free_at_ns
    }

    fn completed(&mut self, _dir: Op) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One request at a time: a second random write waits for the first.
    #[test]
    fn the_array_serves_one_operation_at_a_time() {
        let mut a = EmulatedArray::new("raid5-hibachi", 4096).unwrap();
        assert_eq!(a.describe(), "emulated array raid5-hibachi");
        let first = a.submitted(0, Op::Write, 4096, 1_000_000, 0);
        let second = a.submitted(0, Op::Write, 4096, 200_000_000, 0);
        assert!(
            first > 4_000_000 && second > 2 * 4_000_000,
            "{first} {second}"
        );
        // A whole stripe written after the first write's time.
        let third = a.submitted(second + 1, Op::Write, 5 * (512 << 10), 0, 0);
        assert!(third > second);
        // Blocks that continue it while it is queued merge: they add
        // their transfer only.
        let now = third + 1;
        let start = a.submitted(now, Op::Write, 4096, 10_000, 0);
        let next = a.submitted(now + 10, Op::Write, 4096, 10_001, 0);
        let transfer_ns = (2.0 * 4096.0 / 226e6 * 1e9) as u64;
        assert!(next - start <= transfer_ns + 1, "{}", next - start);
        let apart = a.submitted(next + 1, Op::Write, 4096, 10_002, 0);
        assert!(
            apart - next > 1_000_000,
            "not merged once the array is idle"
        );
        assert!(EmulatedArray::new("raid6", 4096).is_none());
    }

    #[test]
    fn emulated_timing_follows_the_profile() {
        let p = tiermux_device::find_builtin("fixed:1000").unwrap();
        let mut e = Emulated::new(&p, 1).unwrap();
        assert_eq!(e.describe(), "emulated fixed:1000");
        // One operation at a time at 1000 ops/s: 1 ms each, queued.
        assert_eq!(e.submitted(0, Op::Read, 4096, 0, 0), 1_000_000);
        assert_eq!(e.submitted(0, Op::Write, 4096, 1, 0), 2_000_000);
        e.completed(Op::Read);
        e.completed(Op::Write);
    }
}
