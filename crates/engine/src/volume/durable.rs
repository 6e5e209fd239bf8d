//! The durable entry of a block while plans change it: what the journal
//! may say about a block before and after its plan runs, so that a crash
//! never leaves the map pointing at space being written or reused (see
//! `ARCHITECTURE.md`, "Crash safety").

use tiermux_core::dispatch::{MapEvent, NO_TAG};
use tiermux_core::map::LOC_DEVICES;
use tiermux_core::{Entry, Op};

use super::{split_tag, Phase, Volume};

impl Volume {
    pub(super) fn on_map_event(&mut self, ev: MapEvent) {
        match ev {
            MapEvent::Decided(d) => match d.own {
                Some(own) => {
                    for (b, old, new) in d.changes {
                        if own.contains(&b) {
                            let pre = pre_entry(old, new, d.written_devices, self.home);
                            self.meta.record(b, pre);
                        } else {
                            let (pre, grew) = reduction(old, new, self.home);
                            if grew {
                                self.stats.contract_violations += 1;
                                eprintln!("tiermux: policy '{}' added a copy of block {b} while deciding blocks {own:?}; not persisted until that block is written again", self.dispatcher.policy().name());
                            }
                            self.meta.record(b, pre);
                        }
                    }
                }
                None => {
                    // Changes without I/O (ticks, finished jobs) can only
                    // drop copies or flags: record no more than what the
                    // durable entry already backs with data.
                    for (b, _, new) in d.changes {
                        let (safe, _) = reduction(self.meta.durable(b), new, self.home);
                        self.meta.record(b, safe);
                    }
                }
            },
            MapEvent::Finished(f) => {
                self.meta.record(f.block, f.entry);
                if f.tag != NO_TAG {
                    let (idx, rmw, _) = split_tag(f.tag);
                    let req = self
                        .reqs
                        .get_mut(idx)
                        .expect("request of a finished flight");
                    req.open_flights = req
                        .open_flights
                        .checked_sub(1)
                        .expect("more plans finished than submitted");
                    if !rmw && req.op == Op::Write && req.phase == Phase::Access {
                        req.pending = req
                            .pending
                            .checked_sub(1)
                            .expect("more blocks written than requested");
                        if req.pending == 0 {
                            self.request_accessed(idx);
                        }
                    } else if req.replied && req.open_flights == 0 {
                        self.reqs.remove(idx);
                    }
                }
            }
        }
    }
}

fn strip_flags(mut e: Entry) -> Entry {
    e.flags = 0;
    e
}

/// Copies that hold the block's current data.
fn valid(e: &Entry) -> u8 {
    let v = e.present & !e.stale;
    if e.dirty != 0 {
        v & e.dirty
    } else {
        v
    }
}

fn drop_devices(mut e: Entry, devices: u8, home: u8) -> Entry {
    let devices = devices & !(1 << home);
    for d in 0..tiermux_core::types::MAX_DEVICES as u8 {
        if devices & (1 << d) != 0 {
            e.drop_copy(d);
        }
    }
    e
}

/// Devices present in both entries at different locations.
fn relocated(old: &Entry, new: &Entry) -> u8 {
    (0..LOC_DEVICES as u8)
        .filter(|&d| old.present & new.present & (1 << d) != 0 && old.loc(d) != new.loc(d))
        .fold(0, |m, d| m | 1 << d)
}

/// Devices whose copy in `old` is not kept as it is in `new`: gone, or at
/// another location.
fn changed_copies(old: &Entry, new: &Entry) -> u8 {
    (old.present & !new.present) | relocated(old, new)
}

/// The durable entry of a decision's own block while its plan runs: the
/// old entry without the copies the plan overwrites and those the decision
/// drops or moves. The only current copy of a dirty block is kept even when
/// overwritten in place (as a disk overwrites a sector).
pub(super) fn pre_entry(old: Entry, new: Entry, written: u8, home: u8) -> Entry {
    let old = strip_flags(old);
    let dropped = valid(&old) & !valid(&new);
    let removed = (written | changed_copies(&old, &new) | dropped) & !(1 << home);
    if valid(&old) & !removed == 0 {
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

/// The durable entry of a block another decision touched (an eviction):
/// only copies both entries agree on. Also says whether `new` has copies
/// `old` lacks (which a decision must not add to another block).
pub(super) fn reduction(old: Entry, new: Entry, home: u8) -> (Entry, bool) {
    let old = strip_flags(old);
    let new = strip_flags(new);
    let grew = valid(&new) & !valid(&old) != 0 || relocated(&old, &new) & !(1 << home) != 0;
    if old == new {
        return (new, false);
    }
    let removed = (changed_copies(&old, &new) | (valid(&old) & !valid(&new))) & !(1 << home);
    let mut r = drop_devices(old, removed, home);
    // Dirtiness cleared without I/O is not trusted; dirtiness added is.
    r.dirty |= new.dirty & r.present;
    if valid(&r) == 0 {
        r = Entry {
            present: 1 << home,
            ..Entry::default()
        };
    }
    (r, grew)
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

    #[test]
    fn pre_entries_never_point_at_space_being_written() {
        let home = 1;
        // Write-back hit on a clean cached block: the cache copy is dropped
        // while it is overwritten.
        assert_eq!(
            pre_entry(e(0b11, 0, 5), e(0b11, 0b01, 5), 0b01, home),
            e(0b10, 0, 0)
        );
        // Dirty hit overwritten in place: unchanged (the only copy).
        assert_eq!(
            pre_entry(e(0b11, 0b01, 5), e(0b11, 0b01, 5), 0b01, home),
            e(0b11, 0b01, 5)
        );
        // Flush (writes home): keeps the dirty cache copy.
        assert_eq!(
            pre_entry(e(0b11, 0b01, 5), e(0b11, 0, 5), 0b10, home),
            e(0b11, 0b01, 5)
        );
        // Admission: nothing to drop before the fill.
        assert_eq!(
            pre_entry(e(0b10, 0, 0), e(0b11, 0, 7), 0b01, home),
            e(0b10, 0, 0)
        );
        // Write-through hit: the cache copy is dropped, home stays.
        assert_eq!(
            pre_entry(e(0b11, 0, 5), e(0b11, 0, 5), 0b11, home),
            e(0b10, 0, 0)
        );
    }

    #[test]
    fn evictions_are_recorded_before_the_slot_is_reused() {
        let home = 1;
        let (r, grew) = reduction(e(0b11, 0, 5), e(0b10, 0, 0), home);
        assert_eq!((r, grew), (e(0b10, 0, 0), false));
        let (_, grew) = reduction(e(0b10, 0, 0), e(0b11, 0, 3), home);
        assert!(grew);
    }
}
