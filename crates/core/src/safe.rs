//! Safe entries: what a block's entry may say while its plan's operations
//! run, and what it becomes when some of them failed.
//!
//! A decision changes the map before its operations run (a fill's slot is
//! taken, a write-back copy is marked dirty). Until they finish, the only
//! entry that is true whatever they do is the *pre-entry*: the entry from
//! before the decision without every copy the plan overwrites, drops or
//! moves. Drivers that persist the map record it before the operations
//! start (the engine's durable entries), and the dispatcher falls back to
//! it when an operation failed, so that a failed write never leaves the map
//! pointing at space whose content is unknown, and a failed read never
//! stands for a copy made from it.

use crate::map::{Entry, LOC_DEVICES};
use crate::types::{DeviceIndex, MAX_DEVICES};

/// `e` without the policy's flags.
pub fn strip_flags(mut e: Entry) -> Entry {
    e.flags = 0;
    e
}

/// The copies (bit per device) that hold the block's current data: the
/// dirty ones when any copy is dirty, else every present, fresh copy.
pub fn current_copies(e: &Entry) -> u8 {
    let v = e.present & !e.stale;
    if e.dirty != 0 {
        v & e.dirty
    } else {
        v
    }
}

/// `e` without its copies on `devices`, never dropping the home copy.
pub fn drop_devices(mut e: Entry, devices: u8, home: DeviceIndex) -> Entry {
    let devices = devices & !(1 << home);
    for d in 0..MAX_DEVICES as u8 {
        if devices & (1 << d) != 0 {
            e.drop_copy(d);
        }
    }
    e
}

/// Devices present in both entries at different locations.
pub fn relocated(old: &Entry, new: &Entry) -> u8 {
    (0..LOC_DEVICES as u8)
        .filter(|&d| old.present & new.present & (1 << d) != 0 && old.loc(d) != new.loc(d))
        .fold(0, |m, d| m | 1 << d)
}

/// Devices whose copy in `old` is not kept as it is in `new`: gone, or at
/// another location.
pub fn changed_copies(old: &Entry, new: &Entry) -> u8 {
    (old.present & !new.present) | relocated(old, new)
}

/// The entry of a decision's own block while its plan runs: `old` (before
/// the decision) without the copies the plan writes (`written`, bit per
/// device) and those the decision (`new`) drops or moves. The only current
/// copy of a dirty block is kept even when overwritten in place (as a disk
/// overwrites a sector: afterwards it holds the old or the new version).
pub fn pre_entry(old: Entry, new: Entry, written: u8, home: DeviceIndex) -> Entry {
    let old = strip_flags(old);
    let dropped = current_copies(&old) & !current_copies(&new);
    let removed = (written | changed_copies(&old, &new) | dropped) & !(1 << home);
    if current_copies(&old) & !removed == 0 {
        // Every current copy is being replaced. A dirty block's copy is the
        // only current data (home is older), so it stays; a clean block
        // falls back to its home copy.
        if old.dirty != 0 {
            return old;
        }
        return Entry {
            present: 1 << home,
            ..Entry::default()
        };
    }
    drop_devices(old, removed, home)
}

/// What failed in a plan, as bits per device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    /// Devices the plan writes (every write, failed or not).
    pub written: u8,
    /// Devices with a write that failed or was skipped because the read
    /// it copies failed.
    pub writes: u8,
    /// Devices with a client read that failed.
    pub client_reads: u8,
}

impl Failures {
    /// Adds what failed in `other`.
    pub fn merge(&mut self, other: Failures) {
        self.written |= other.written;
        self.writes |= other.writes;
        self.client_reads |= other.client_reads;
    }

    /// True when nothing failed.
    pub fn is_empty(&self) -> bool {
        self.writes == 0 && self.client_reads == 0
    }
}

/// The entry a block takes when operations of its plan failed: `old` was
/// its entry before the decision and `new` is its entry now.
///
/// - When a write failed, the pre-entry: no copy whose space the plan
///   wrote is trusted, except a dirty block's only copy (see
///   [`pre_entry`]). A failed flush so leaves the block dirty, and a failed
///   fill leaves it unplaced.
/// - A clean copy that could not be read is dropped when the home copy is
///   current (it serves the block from then on); a dirty copy that could
///   not be read is dropped when another dirty copy remains (a block kept
///   on two devices, read from the other from then on); the only current
///   copy stays, dirty or placed away from home.
pub fn after_failure(old: Entry, new: Entry, f: Failures, home: DeviceIndex) -> Entry {
    let mut t = if f.writes != 0 {
        landed_writes(new, f, home).unwrap_or_else(|| pre_entry(old, new, f.written, home))
    } else {
        strip_flags(new)
    };
    if t.dirty == 0 && t.valid_on(home) {
        t = drop_devices(t, f.client_reads & t.present, home);
    } else if t.dirty != 0 {
        let failed = f.client_reads & current_copies(&t);
        if current_copies(&t) & !failed != 0 {
            t = drop_devices(t, failed, home);
        }
    }
    t.flags = new.flags;
    t
}

/// A dirty block whose every current copy in `new` is one the plan wrote,
/// some of them successfully: `new` without the copies whose writes
/// failed. The copies that were written hold the block's newest data (a
/// write that reached one device of two), so they stand; falling back to
/// the pre-entry instead would give up that data, and with it the
/// acknowledged data before it when the decision had moved the block's
/// copies (their space may have been reused since). None otherwise.
fn landed_writes(new: Entry, f: Failures, home: DeviceIndex) -> Option<Entry> {
    let current = current_copies(&new);
    let all_written = current & !f.written == 0;
    let landed = current & !f.writes;
    if new.dirty == 0 || !all_written || landed == 0 {
        return None;
    }
    let t = drop_devices(strip_flags(new), current & f.writes, home);
    debug_assert_eq!(current_copies(&t), landed);
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(present: u8, dirty: u8, slot: u32) -> Entry {
        Entry {
            present,
            dirty,
            stale: 0,
            flags: 0,
            loc: [slot, 0, 0],
        }
    }

    const HOME: u8 = 1;

    #[test]
    fn pre_entries_never_point_at_space_being_written() {
        // Write-back hit on a clean cached block: the cache copy is dropped
        // while it is overwritten.
        assert_eq!(
            pre_entry(e(0b11, 0, 5), e(0b11, 0b01, 5), 0b01, HOME),
            e(0b10, 0, 0)
        );
        // Dirty hit overwritten in place: unchanged (the only copy).
        assert_eq!(
            pre_entry(e(0b11, 0b01, 5), e(0b11, 0b01, 5), 0b01, HOME),
            e(0b11, 0b01, 5)
        );
        // Flush (writes home): keeps the dirty cache copy.
        assert_eq!(
            pre_entry(e(0b11, 0b01, 5), e(0b11, 0, 5), 0b10, HOME),
            e(0b11, 0b01, 5)
        );
        // Admission: nothing to drop before the fill.
        assert_eq!(
            pre_entry(e(0b10, 0, 0), e(0b11, 0, 7), 0b01, HOME),
            e(0b10, 0, 0)
        );
        // Write-through hit: the cache copy is dropped, home stays.
        assert_eq!(
            pre_entry(e(0b11, 0, 5), e(0b11, 0, 5), 0b11, HOME),
            e(0b10, 0, 0)
        );
    }

    #[test]
    fn failed_operations_leave_only_copies_that_hold_the_blocks_data() {
        let fail = |written, writes, client_reads| Failures {
            written,
            writes,
            client_reads,
        };
        // A fill that failed: the block stays unplaced.
        assert_eq!(
            after_failure(e(0b10, 0, 0), e(0b11, 0, 7), fail(0b01, 0b01, 0), HOME),
            e(0b10, 0, 0)
        );
        // A flush whose read or write failed: the block stays dirty.
        assert_eq!(
            after_failure(e(0b11, 0b01, 5), e(0b11, 0, 5), fail(0b10, 0b10, 0), HOME),
            e(0b11, 0b01, 5)
        );
        // A write-back miss whose write failed: the new slot is not trusted.
        assert_eq!(
            after_failure(e(0b10, 0, 0), e(0b11, 0b01, 9), fail(0b01, 0b01, 0), HOME),
            e(0b10, 0, 0)
        );
        // A write-through hit whose home write failed: home is what the
        // device left, the cache copy (written) is not trusted either.
        assert_eq!(
            after_failure(e(0b11, 0, 5), e(0b11, 0, 5), fail(0b11, 0b10, 0), HOME),
            e(0b10, 0, 0)
        );
        // A clean cached copy that could not be read is dropped; a dirty
        // one stays.
        assert_eq!(
            after_failure(e(0b11, 0, 5), e(0b11, 0, 5), fail(0, 0, 0b01), HOME),
            e(0b10, 0, 0)
        );
        assert_eq!(
            after_failure(e(0b11, 0b01, 5), e(0b11, 0b01, 5), fail(0, 0, 0b01), HOME),
            e(0b11, 0b01, 5)
        );
        // A dirty copy that could not be read, with a second dirty copy on
        // device 2: dropped, the second serves.
        let two = Entry {
            present: 0b111,
            dirty: 0b101,
            stale: 0,
            flags: 0,
            loc: [5, 0, 7],
        };
        let second = Entry {
            present: 0b110,
            dirty: 0b100,
            loc: [0, 0, 7],
            ..two
        };
        assert_eq!(after_failure(two, two, fail(0, 0, 0b001), HOME), second);
        // Both unreadable: both stay (nothing else holds the data).
        assert_eq!(after_failure(two, two, fail(0, 0, 0b101), HOME), two);
        // A mirrored write to new slots whose write to device 0 failed:
        // the copy on device 2 holds the newest data and stands (the old
        // slots may have been reused since the decision).
        let moved = Entry {
            loc: [9, 0, 11],
            ..two
        };
        let landed = Entry {
            present: 0b110,
            dirty: 0b100,
            loc: [0, 0, 11],
            ..two
        };
        assert_eq!(
            after_failure(two, moved, fail(0b101, 0b001, 0), HOME),
            landed
        );
        // Both writes failed: back to the copies from before.
        assert_eq!(after_failure(two, moved, fail(0b101, 0b101, 0), HOME), two);
        // A plan that wrote device 0 only, beside a dirty copy on device 2
        // it did not write: not a landed write (the pre-entry stands).
        assert_eq!(after_failure(two, moved, fail(0b001, 0b001, 0), HOME), two);
        // A home read that failed changes nothing.
        assert_eq!(
            after_failure(e(0b10, 0, 0), e(0b10, 0, 0), fail(0, 0, 0b10), HOME),
            e(0b10, 0, 0)
        );
    }
}
