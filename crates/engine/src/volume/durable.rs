//! The durable entry of a block while plans change it: what the journal
//! may say about a block before and after its plan runs, so that a crash
//! never leaves the map pointing at space being written or reused (see
//! `ARCHITECTURE.md`, "Crash safety").

use tiermux_core::dispatch::{MapEvent, NO_TAG};
use tiermux_core::safe::{
    changed_copies, current_copies as valid, drop_devices, pre_entry, relocated, strip_flags,
};
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
                    if f.failed && !rmw && req.op == Op::Write {
                        req.error = rustix::io::Errno::IO.raw_os_error();
                    }
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
    fn evictions_are_recorded_before_the_slot_is_reused() {
        let home = 1;
        let (r, grew) = reduction(e(0b11, 0, 5), e(0b10, 0, 0), home);
        assert_eq!((r, grew), (e(0b10, 0, 0), false));
        let (_, grew) = reduction(e(0b10, 0, 0), e(0b11, 0, 3), home);
        assert!(grew);
    }
}
