//! Discards (TRIM): telling a device which space the volume no longer uses,
//! on the devices configured with `discard = true`.
//!
//! When a record drops or moves a copy, the journal keeps its place as a
//! candidate (`journal/freed.rs`). A place may be discarded only when no
//! state the volume can come back to names it, and when nothing reuses it:
//!
//! - **Power cuts.** Until a mark covers the record, a power cut brings back
//!   the entry that names the place, so candidates wait for a completed mark
//!   (the same rule that holds writes to released places; `marks.rs`).
//! - **Reuse.** Only the places of current copies are candidates: their
//!   release quarantines them, so any write reusing one before the mark is
//!   held. Once the discard is issued, every write to the place waits
//!   until it completes, so a reuse always lands after it. A block whose
//!   lock is held may still be reading its old place in a plan that is
//!   running: no discard. A place a held write or the block's own entry
//!   names again is reused already: no discard (these writes would wait
//!   for it, so this saves a useless discard, not data).
//!
//! Skipped candidates are not tried again (after the mark, a reuse is no
//! longer held, so a later check could not see it): discarding is best
//! effort, the map's correctness never depends on it. Contiguous places
//! on one device become one operation. A device that cannot discard
//! (`EOPNOTSUPP`) stops being asked.

use std::collections::HashSet;

use tiermux_core::{Op, Ready};

use super::{token, Volume, KIND_DISCARD};
use crate::journal::{place_of, FreedPlace};
use crate::reactor::Reactor;
use crate::slab::Slab;

/// Freed places that wait for a mark before the volume asks for one
/// itself (4,096 places of 4 KiB are 16 MiB of space).
pub(super) const DISCARD_BATCH_PLACES: usize = 4096;

/// Most blocks one discard operation covers (8 MiB of 4 KiB blocks):
/// large enough that freeing a few segments is one call, small enough
/// that the power-loss models, which keep a copy of what a discard leaves
/// until a sync, never hold a large one.
const MAX_DISCARD_BLOCKS: u64 = 2048;

/// One discard in flight: device, first address and blocks.
struct DiscardOp {
    device: u8,
    addr: u64,
    blocks: u64,
}

/// Discards in flight and their counters.
#[derive(Default)]
pub(super) struct Discards {
    /// Devices that discard (bit per device).
    pub(super) devices: u8,
    ops: Slab<DiscardOp>,
    /// Places with a discard in flight: writes there wait.
    busy: HashSet<(u8, u64)>,
    /// Reused buffer of covered candidates.
    covered: Vec<FreedPlace>,
    /// Discard operations completed.
    pub(super) ops_completed: u64,
    /// Blocks they covered.
    pub(super) blocks_discarded: u64,
    /// Candidates skipped because the place may be in use.
    pub(super) skipped: u64,
    /// Discards that failed.
    pub(super) failed: u64,
}

impl Discards {
    /// Discards on `devices` (bit per device).
    pub(super) fn on(devices: u8) -> Discards {
        Discards {
            devices,
            ..Default::default()
        }
    }

    /// True while a discard of (`device`, `addr`) is in flight.
    pub(super) fn busy(&self, device: u8, addr: u64) -> bool {
        !self.busy.is_empty() && self.busy.contains(&(device, addr))
    }

    /// True when no discard is in flight.
    pub(super) fn idle(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Runs of consecutive addresses on one device, from sorted places.
fn runs(places: &[(u8, u64)]) -> Vec<(u8, u64, u64)> {
    let mut out: Vec<(u8, u64, u64)> = Vec::new();
    for &(d, a) in places {
        match out.last_mut() {
            Some((ld, la, n)) if *ld == d && *la + *n == a && *n < MAX_DISCARD_BLOCKS => *n += 1,
            _ => out.push((d, a, 1)),
        }
    }
    out
}

impl Volume {
    /// A mark completed: discards the freed places it covers that nothing
    /// can be using (see the module documentation). Runs before the writes
    /// held for the mark are released.
    pub(super) fn start_discards(&mut self, r: &mut dyn Reactor) {
        let mut covered = std::mem::take(&mut self.discards.covered);
        covered.clear();
        self.meta.freed_covered(&mut covered);
        if covered.is_empty() {
            self.discards.covered = covered;
            return;
        }
        let held: HashSet<(u8, u64)> = self.held_writes().map(|io| (io.device, io.addr)).collect();
        let out = self.health.out_of_service_mask();
        let mut places: Vec<(u8, u64)> = Vec::with_capacity(covered.len());
        for f in &covered {
            let entry = self.dispatcher.map().get(f.block);
            let named = entry.present & (1 << f.device) != 0
                && place_of(self.home, f.block, f.device, &entry) == f.addr;
            if self.discards.devices & (1 << f.device) == 0
                || out & (1 << f.device) != 0
                || named
                || held.contains(&(f.device, f.addr))
                || self.discards.busy(f.device, f.addr)
                || self.dispatcher.is_locked(f.block)
            {
                self.discards.skipped += 1;
                continue;
            }
            places.push((f.device, f.addr));
        }
        self.discards.covered = covered;
        places.sort_unstable();
        places.dedup();
        let bs = self.cfg.block_size as u64;
        for (device, addr, blocks) in runs(&places) {
            assert!(
                addr + blocks <= self.address_spaces[device as usize],
                "a discard past the end of device {device}"
            );
            for a in addr..addr + blocks {
                self.discards.busy.insert((device, a));
            }
            let slot = self.discards.ops.insert(DiscardOp {
                device,
                addr,
                blocks,
            });
            let fd = self.devices[device as usize].fd();
            r.discard(fd, addr * bs, blocks * bs, token(KIND_DISCARD, slot));
        }
    }

    /// A discard completed: its places may be written again.
    pub(super) fn on_discard(&mut self, slot: usize, result: i32, r: &mut dyn Reactor) {
        let op = self.discards.ops.remove(slot).expect("discard in flight");
        for a in op.addr..op.addr + op.blocks {
            let was = self.discards.busy.remove(&(op.device, a));
            assert!(was, "a discarded place was not marked busy");
        }
        if result == 0 {
            self.discards.ops_completed += 1;
            self.discards.blocks_discarded += op.blocks;
        } else {
            self.discards.failed += 1;
            let errno = rustix::io::Errno::from_raw_os_error(-result);
            if errno == rustix::io::Errno::OPNOTSUPP || errno == rustix::io::Errno::NOSYS {
                self.discards.devices &= !(1 << op.device);
                self.meta.set_discard_devices(self.discards.devices);
            }
            eprintln!(
                "tiermux: discard on device '{}' failed: {errno}{}",
                self.devices[op.device as usize].name,
                if self.discards.devices & (1 << op.device) == 0 {
                    "; no more discards are sent to it"
                } else {
                    ""
                }
            );
        }
        self.release_held(r);
    }

    /// True when `ready` is a write to a place whose discard is in flight.
    pub(super) fn waits_for_discard(&self, ready: &Ready) -> bool {
        let io = ready.io;
        let busy = self.discards.busy(io.device, io.addr);
        assert!(
            !(busy && io.dir == Op::Read),
            "a read of block {} of device {} while it is discarded",
            io.addr,
            io.device
        );
        busy && io.dir == Op::Write
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_places_on_one_device_become_one_run() {
        let places = [(0, 3), (0, 4), (0, 5), (0, 9), (1, 10), (1, 11)];
        assert_eq!(runs(&places), vec![(0, 3, 3), (0, 9, 1), (1, 10, 2)]);
        let long: Vec<(u8, u64)> = (0..MAX_DISCARD_BLOCKS + 2).map(|a| (0, a)).collect();
        assert_eq!(
            runs(&long),
            vec![(0, 0, MAX_DISCARD_BLOCKS), (0, MAX_DISCARD_BLOCKS, 2)]
        );
    }
}
