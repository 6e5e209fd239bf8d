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
    /// [`NOT_YET`] when the layer holds it until an earlier operation
    /// completes (and then names it in [`Layer::completed`]'s answer).
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

    /// The operation submitted earlier has completed. Returns an
    /// operation the layer held and now lets go, if any.
    fn completed(&mut self, dir: Op) -> Option<Released>;

    /// Whether the operation that just completed (or a sync) is to be
    /// reported failed ([`crate::faults::Injected`]).
    fn fails(&mut self, op: crate::faults::FaultOp) -> bool {
        let _ = op;
        false
    }
}

/// A deadline that a later completion gives ([`Layer::submitted`]).
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

    fn completed(&mut self, dir: Op) -> Option<Released> {
        self.model.complete(dir);
        None
    }
}

/// A disk array's timing ([`tiermux_device::array::ArrayTiming`]): it
/// holds the operations that arrive while the array is busy and lets the
/// next go when the one in service completes, in its elevator's order.
pub struct EmulatedArray {
    timing: tiermux_device::array::ArrayTiming<u64>,
}

/// The arrays a device config can name (`array = "..."`).
pub use tiermux_device::array::ARRAYS;

impl EmulatedArray {
    /// The array `name` (see [`ARRAYS`]) for a device of `block_bytes`
    /// blocks, or `None` for an unknown name.
    pub fn new(name: &str, block_bytes: u64) -> Option<EmulatedArray> {
        let timing = tiermux_device::array::ArrayTiming::named(name, block_bytes)?;
        Some(EmulatedArray { timing })
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
        match self.timing.submit(now_ns, dir, bytes, addr, token) {
            Some(started) => started.done_ns,
            None => NOT_YET,
        }
    }

    fn completed(&mut self, _dir: Op) -> Option<Released> {
        let started = self.timing.complete()?;
        Some(Released {
            token: started.tag,
            deadline_ns: started.done_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layer is the shared array timing (tested in the device crate).
    #[test]
    fn the_array_layer_names_its_array() {
        let mut a = EmulatedArray::new("raid5-hibachi", 4096).unwrap();
        assert_eq!(a.describe(), "emulated array raid5-hibachi");
        let first = a.submitted(0, Op::Write, 4096, 1_000_000, 0, 7);
        assert!(first > 4_000_000 && first != NOT_YET, "{first}");
        // The array is busy: the next waits and is let go when the first
        // completes.
        assert_eq!(a.submitted(0, Op::Write, 4096, 9, 0, 8), NOT_YET);
        let next = a.completed(Op::Write).expect("the waiting write starts");
        assert_eq!(next.token, 8);
        assert!(next.deadline_ns > first + 4_000_000, "{next:?}");
        assert_eq!(a.completed(Op::Write), None);
        assert!(EmulatedArray::new("raid6", 4096).is_none());
    }

    #[test]
    fn emulated_timing_follows_the_profile() {
        let p = tiermux_device::find_builtin("fixed:1000").unwrap();
        let mut e = Emulated::new(&p, 1).unwrap();
        assert_eq!(e.describe(), "emulated fixed:1000");
        // One operation at a time at 1000 ops/s: 1 ms each, queued.
        assert_eq!(e.submitted(0, Op::Read, 4096, 0, 0, 1), 1_000_000);
        assert_eq!(e.submitted(0, Op::Write, 4096, 1, 0, 2), 2_000_000);
        assert_eq!(e.completed(Op::Read), None);
        assert_eq!(e.completed(Op::Write), None);
    }
}
