//! Injected device errors, for the simulated reactor: files that fail some
//! of their reads, writes and syncs with EIO.
//!
//! A failed read leaves its buffer as it was. A failed write may or may not
//! have reached the file (a coin flip), as a device that reports an error
//! mid-transfer may have written some of it. A failed sync makes nothing
//! durable. Files are known by their inode, like the power model's.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use tiermux_core::rng::Rng;

pub use crate::faults::{FaultOp, FaultSpec};

/// Counters of injected errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Reads failed.
    pub reads: u64,
    /// Writes failed.
    pub writes: u64,
    /// Syncs failed.
    pub syncs: u64,
}

/// The faulty files of a machine, by inode.
#[derive(Default)]
pub(crate) struct Faults {
    files: HashMap<(u64, u64), (FaultSpec, u64)>,
    pub(crate) stats: FaultStats,
}

impl Faults {
    /// Makes the file at `path` fail as `spec` says (replacing what it did
    /// before; a default spec heals it).
    pub(crate) fn inject(&mut self, path: &Path, spec: FaultSpec) -> std::io::Result<()> {
        let m = std::fs::metadata(path)?;
        self.files.insert((m.dev(), m.ino()), (spec, 0));
        Ok(())
    }

    /// Whether this operation on `fd` fails.
    pub(crate) fn fails(&mut self, fd: RawFd, op: FaultOp, rng: &mut Rng) -> bool {
        if self.files.is_empty() {
            return false;
        }
        // SAFETY: the reactor keeps `fd` open while an operation on it is
        // performed, which is when this is called.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let Ok(st) = rustix::fs::fstat(fd) else {
            return false;
        };
        let Some((spec, ops)) = self.files.get_mut(&(st.st_dev, st.st_ino)) else {
            return false;
        };
        *ops += 1;
        let fail = spec.fails(op, *ops, rng);
        if fail {
            match op {
                FaultOp::Read => self.stats.reads += 1,
                FaultOp::Write => self.stats.writes += 1,
                FaultOp::Sync => self.stats.syncs += 1,
            }
        }
        fail
    }
}
