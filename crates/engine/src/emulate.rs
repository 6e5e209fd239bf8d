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

#[cfg(test)]
mod tests {
    use super::*;

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
