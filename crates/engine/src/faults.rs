//! Injected device errors: which operations of a device fail with EIO, and
//! the layer ([`Injected`]) that makes a real device's operations fail
//! that way (`[device.faults]` in a volume's config), for testing the
//! engine's error handling on real files. The simulated reactor's machine
//! applies the same [`FaultSpec`] to files (`reactor/faults.rs`).
//!
//! Under the layer the operation itself runs: a read's buffer is filled and
//! then reported failed, a write reaches the file and is reported failed
//! (one of the outcomes a real failing device has).

use tiermux_core::rng::Rng;
use tiermux_core::Op;

use crate::emulate::Layer;

/// Which operations of a file fail, and how often.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultSpec {
    /// Fraction of reads that fail.
    pub read_error_rate: f64,
    /// Fraction of writes that fail.
    pub write_error_rate: f64,
    /// Fraction of syncs that fail.
    pub sync_error_rate: f64,
    /// Operations on the file that succeed before any may fail.
    pub start_after_ops: u64,
}

impl FaultSpec {
    /// A device that fails every operation from now on.
    pub fn dead() -> FaultSpec {
        FaultSpec {
            read_error_rate: 1.0,
            write_error_rate: 1.0,
            sync_error_rate: 1.0,
            start_after_ops: 0,
        }
    }
}

/// The kind of a file operation, as faults see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    /// A read.
    Read,
    /// A write.
    Write,
    /// A sync.
    Sync,
}

impl FaultSpec {
    /// Whether operation number `nth` (from 1) of the device, an `op`,
    /// fails.
    pub fn fails(&self, op: FaultOp, nth: u64, rng: &mut Rng) -> bool {
        if nth <= self.start_after_ops {
            return false;
        }
        let rate = match op {
            FaultOp::Read => self.read_error_rate,
            FaultOp::Write => self.write_error_rate,
            FaultOp::Sync => self.sync_error_rate,
        };
        rate >= 1.0 || (rate > 0.0 && rng.next_f64() < rate)
    }

    /// Refuses rates outside 0..=1, naming the field.
    pub fn check(&self) -> Result<(), String> {
        for (name, r) in [
            ("read_error_rate", self.read_error_rate),
            ("write_error_rate", self.write_error_rate),
            ("sync_error_rate", self.sync_error_rate),
        ] {
            if !(0.0..=1.0).contains(&r) {
                return Err(format!("{name} must be between 0 and 1, got {r}"));
            }
        }
        Ok(())
    }
}

impl FaultOp {
    /// The fault kind of a data operation.
    pub fn of(dir: Op) -> FaultOp {
        match dir {
            Op::Read => FaultOp::Read,
            Op::Write => FaultOp::Write,
        }
    }
}

/// A layer that fails a device's operations as a [`FaultSpec`] says.
pub struct Injected {
    spec: FaultSpec,
    rng: Rng,
    ops: u64,
}

impl Injected {
    /// Errors as `spec` says, drawn from `seed`.
    pub fn new(spec: FaultSpec, seed: u64) -> Injected {
        Injected {
            spec,
            rng: Rng::new(seed),
            ops: 0,
        }
    }
}

impl Layer for Injected {
    fn describe(&self) -> String {
        let s = &self.spec;
        format!(
            "injected errors (reads {} %, writes {} %, syncs {} % after {} operations)",
            s.read_error_rate * 100.0,
            s.write_error_rate * 100.0,
            s.sync_error_rate * 100.0,
            s.start_after_ops
        )
    }

    fn submitted(
        &mut self,
        _now_ns: u64,
        _dir: Op,
        _bytes: u64,
        _addr: u64,
        _purpose: usize,
        _token: u64,
    ) -> u64 {
        0
    }

    fn completed(&mut self, _dir: Op) {}

    fn fails(&mut self, op: FaultOp) -> bool {
        self.ops += 1;
        self.spec.fails(op, self.ops, &mut self.rng)
    }
}
