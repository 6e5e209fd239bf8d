//! Space the map gave up, for discards: the places (device, address) whose
//! copies a record dropped or moved away, on the devices that discard.
//!
//! A place is only a candidate here. It may be discarded once a completed
//! mark covers the record that freed it (before that, a power cut brings
//! back the entry naming it), and only if nothing reused it meanwhile; the
//! volume decides that (`volume/discards.rs`).

use std::collections::VecDeque;

use tiermux_core::types::MAX_DEVICES;
use tiermux_core::Entry;

/// A place a record gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreedPlace {
    /// The record's sequence number: a mark above it covers the release.
    pub seq: u64,
    /// The block whose copy was there.
    pub block: u64,
    /// The device.
    pub device: u8,
    /// The address on the device, in blocks.
    pub addr: u64,
}

/// The places freed on discarding devices, in record order.
#[derive(Default)]
pub(super) struct Freed {
    /// Devices that discard (bit per device).
    pub(super) devices: u8,
    queue: VecDeque<FreedPlace>,
}

impl Freed {
    /// Notes the places of `old`'s current copies that `new` no longer
    /// keeps there: dropped, or moved to another address. `place(d, e)`
    /// says where `e` keeps the block on device `d`.
    ///
    /// A stale copy given up is not a candidate: its release quarantines
    /// nothing (its content is no block's data), so a write reusing its
    /// place before the next mark is not held, and a discard at that mark
    /// could not see the reuse.
    pub(super) fn note(
        &mut self,
        seq: u64,
        block: u64,
        old: &Entry,
        new: &Entry,
        place: impl Fn(u8, &Entry) -> u64,
    ) {
        let candidates = old.present & !old.stale & self.devices;
        if candidates == 0 {
            return;
        }
        for d in 0..MAX_DEVICES as u8 {
            if candidates & (1 << d) == 0 {
                continue;
            }
            let at = place(d, old);
            if new.present & (1 << d) == 0 || place(d, new) != at {
                self.queue.push_back(FreedPlace {
                    seq,
                    block,
                    device: d,
                    addr: at,
                });
            }
        }
    }

    /// Moves the places whose release records are below `seq` (a mark
    /// covering them completed) to `out`, in record order.
    pub(super) fn covered(&mut self, seq: u64, out: &mut Vec<FreedPlace>) {
        while self.queue.front().is_some_and(|f| f.seq < seq) {
            out.push(self.queue.pop_front().expect("checked"));
        }
    }

    /// Places waiting for a mark.
    pub(super) fn waiting(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(present: u8, stale: u8, slot: u32) -> Entry {
        Entry {
            present,
            dirty: 0,
            stale,
            flags: 0,
            loc: [slot, 0, 0],
        }
    }

    /// Device 0 allocates slots; device 1 is home (the block's address).
    fn place(block: u64) -> impl Fn(u8, &Entry) -> u64 {
        move |d, e| if d == 0 { e.loc[0] as u64 } else { block }
    }

    #[test]
    fn dropped_and_moved_copies_are_freed_kept_ones_are_not() {
        let mut f = Freed {
            devices: 0b11,
            ..Freed::default()
        };
        // Evicted from slot 5.
        f.note(1, 7, &e(0b11, 0, 5), &e(0b10, 0, 0), place(7));
        // Moved from slot 6 to slot 9.
        f.note(2, 8, &e(0b11, 0, 6), &e(0b11, 0, 9), place(8));
        // Made stale in place: its space is still held.
        f.note(3, 9, &e(0b11, 0, 4), &e(0b11, 0b01, 4), place(9));
        // A stale copy given up: not a candidate.
        f.note(4, 9, &e(0b11, 0b01, 4), &e(0b10, 0, 0), place(9));
        // Added: nothing freed.
        f.note(5, 3, &e(0b10, 0, 0), &e(0b11, 0, 2), place(3));
        // The home copy dropped (a tiered block moved up).
        f.note(6, 4, &e(0b10, 0, 0), &e(0b01, 0, 3), place(4));
        let mut out = Vec::new();
        f.covered(u64::MAX, &mut out);
        let got: Vec<(u64, u8, u64)> = out.iter().map(|p| (p.block, p.device, p.addr)).collect();
        assert_eq!(got, vec![(7, 0, 5), (8, 0, 6), (4, 1, 4)]);
    }

    #[test]
    fn only_discarding_devices_and_covered_records_are_given() {
        let mut f = Freed {
            devices: 0b01,
            ..Freed::default()
        };
        f.note(1, 4, &e(0b10, 0, 0), &e(0b01, 0, 3), place(4));
        assert_eq!(f.waiting(), 0, "device 1 does not discard");
        f.note(1, 7, &e(0b11, 0, 5), &e(0b10, 0, 0), place(7));
        f.note(2, 8, &e(0b11, 0, 6), &e(0b10, 0, 0), place(8));
        let mut out = Vec::new();
        f.covered(2, &mut out);
        assert_eq!(out.len(), 1, "the mark covers records below 2 only");
        assert_eq!((out[0].block, out[0].addr), (7, 5));
        assert_eq!(f.waiting(), 1);
    }
}
