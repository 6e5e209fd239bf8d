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

    /// An operation of `bytes` at block address `addr`, known to the
    /// volume as `token`, is submitted at `now_ns` (the loop's clock);
    /// returns the earliest time it may complete, 0 for no constraint, or
    /// [`NOT_YET`] when the layer holds it until it knows (and then hands
    /// it back from [`Layer::take_released`]).
    /// `purpose` indexes [`tiermux_core::Purpose`].
    fn submitted(
        &mut self,
        now_ns: u64,
        dir: Op,
        bytes: u64,
        addr: u64,
        purpose: usize,
        token: u64,
    ) -> u64;

    /// The operation submitted earlier has completed.
    fn completed(&mut self, dir: Op);

    /// When the layer needs [`Layer::wake`] next, ns on the loop's clock
    /// (a disk array's member disk completes an operation), if ever.
    fn next_wake_ns(&self) -> Option<u64> {
        None
    }

    /// The loop's clock reached `now_ns`, at or after
    /// [`Layer::next_wake_ns`].
    fn wake(&mut self, now_ns: u64) {
        let _ = now_ns;
    }

    /// Moves to `out` the operations the layer held and now lets go,
    /// each with its deadline.
    fn take_released(&mut self, out: &mut Vec<Released>) {
        let _ = out;
    }

    /// Whether the operation that just completed (or a sync) is to be
    /// reported failed ([`crate::faults::Injected`]).
    fn fails(&mut self, op: crate::faults::FaultOp) -> bool {
        let _ = op;
        false
    }
}

/// A deadline that the layer gives later ([`Layer::submitted`]).
pub const NOT_YET: u64 = u64::MAX;

/// An operation a layer held and now lets go: the token it was submitted
/// with and the earliest time it may complete, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// The volume's token for the operation.
    pub token: u64,
    /// When it may complete, ns on the loop's clock.
    pub deadline_ns: u64,
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

    fn submitted(
        &mut self,
        now_ns: u64,
        dir: Op,
        bytes: u64,
        addr: u64,
        purpose: usize,
        _token: u64,
    ) -> u64 {
        self.model.submit(now_ns, dir, bytes, addr, purpose)
    }

    fn completed(&mut self, dir: Op) {
        self.model.complete(dir);
    }
}

/// A disk array's timing ([`tiermux_device::array::ArrayTiming`]): it
/// holds each operation until the array's member disks have started its
/// last part, and wakes at each time a member disk completes one.
pub struct EmulatedArray {
    timing: tiermux_device::array::ArrayTiming<u64>,
    /// Operations whose completion the last call made known.
    started: Vec<tiermux_device::array::Started<u64>>,
    /// Held operations let go, not yet taken.
    released: Vec<Released>,
}

/// The arrays a device config can name (`array = "..."`).
pub use tiermux_device::array::ARRAYS;

impl EmulatedArray {
    /// The array `name` (see [`ARRAYS`] and
    /// [`tiermux_device::array::RAID5_SHAPE`]) for a device of
    /// `block_bytes` blocks; an error names what is wrong with the name.
    pub fn new(name: &str, block_bytes: u64) -> Result<EmulatedArray, String> {
        let timing = tiermux_device::array::ArrayTiming::named(name, block_bytes)?;
        Ok(EmulatedArray {
            timing,
            started: Vec::new(),
            released: Vec::new(),
        })
    }

    /// Moves what the array made known to the released list, except
    /// `own` (the operation being submitted), whose deadline it returns.
    fn settle(&mut self, own: Option<u64>) -> u64 {
        let mut deadline_ns = NOT_YET;
        for s in self.started.drain(..) {
            if Some(s.tag) == own {
                deadline_ns = s.done_ns;
            } else {
                self.released.push(Released {
                    token: s.tag,
                    deadline_ns: s.done_ns,
                });
            }
        }
        deadline_ns
    }
}

impl Layer for EmulatedArray {
    fn describe(&self) -> String {
        format!("emulated array {}", self.timing.name())
    }

    fn submitted(
        &mut self,
        now_ns: u64,
        dir: Op,
        bytes: u64,
        addr: u64,
        _purpose: usize,
        token: u64,
    ) -> u64 {
        self.timing
            .submit(now_ns, dir, bytes, addr, token, &mut self.started);
        self.settle(Some(token))
    }

    fn completed(&mut self, _dir: Op) {}

    fn next_wake_ns(&self) -> Option<u64> {
        self.timing.next_event_ns()
    }

    fn wake(&mut self, now_ns: u64) {
        self.timing.advance(now_ns, &mut self.started);
        self.settle(None);
    }

    fn take_released(&mut self, out: &mut Vec<Released>) {
        out.append(&mut self.released);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layer is the shared array timing (tested in the device crate):
    /// a write on an idle array has its deadline at once on one disk; on
    /// the RAID-5 it waits for its parity reads, and a wake at the reads'
    /// completion lets it go.
    #[test]
    fn the_array_layer_holds_what_waits_for_its_disks() {
        let mut disk = EmulatedArray::new("disk-st6000", 4096).unwrap();
        let first = disk.submitted(0, Op::Write, 4096, 1_000_000, 0, 7);
        assert!(first > 4_000_000 && first != NOT_YET, "{first}");
        assert_eq!(disk.submitted(0, Op::Write, 4096, 9, 0, 8), NOT_YET);
        assert_eq!(disk.next_wake_ns(), Some(first));
        disk.wake(first);
        let mut out = Vec::new();
        disk.take_released(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].token, 8);
        assert!(out[0].deadline_ns > first + 4_000_000, "{out:?}");
        let mut raid = EmulatedArray::new("raid5-hibachi", 4096).unwrap();
        assert_eq!(raid.describe(), "emulated array raid5-hibachi");
        assert_eq!(raid.submitted(0, Op::Write, 4096, 1_000_000, 0, 9), NOT_YET);
        let reads_done = raid.next_wake_ns().expect("the parity reads run");
        raid.wake(reads_done);
        out.clear();
        raid.take_released(&mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].token == 9 && out[0].deadline_ns > reads_done + 4_000_000);
        assert!(EmulatedArray::new("raid6", 4096).is_err());
    }

    #[test]
    fn emulated_timing_follows_the_profile() {
        let p = tiermux_device::find_builtin("fixed:1000").unwrap();
        let mut e = Emulated::new(&p, 1).unwrap();
        assert_eq!(e.describe(), "emulated fixed:1000");
        // One operation at a time at 1000 ops/s: 1 ms each, queued.
        assert_eq!(e.submitted(0, Op::Read, 4096, 0, 0, 1), 1_000_000);
        assert_eq!(e.submitted(0, Op::Write, 4096, 1, 0, 2), 2_000_000);
        e.completed(Op::Read);
        e.completed(Op::Write);
    }
}
