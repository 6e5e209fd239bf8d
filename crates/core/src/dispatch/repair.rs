//! Plans whose device operations failed: bringing their blocks' entries
//! to what the devices still hold (through [`crate::Policy::repair`]), deciding
//! whether the client's access failed, and giving up a device.

use super::{Dispatcher, Work};
use crate::map::Entry;
use crate::policy::TickCtx;
use crate::safe::{after_failure, current_copies, Failures};
use crate::types::{DeviceIndex, Op, Purpose};

impl Dispatcher {
    /// Brings the entries of a plan whose operations failed to what the
    /// devices still hold, through the policy. A read's block that other
    /// readers share is repaired when the last of them lets go (they may be
    /// reading the same copies). The failures are the plan's, not the
    /// block's: in a plan of several blocks, every block is repaired as if
    /// each failed operation had been its own, which may drop copies that
    /// are good but never keeps one that is not.
    pub(super) fn repair(&mut self, fid: u32) {
        let f = &self.flights[fid as usize];
        let work = f.work;
        let exclusive = f.exclusive;
        let written = f
            .ios
            .iter()
            .filter(|io| io.dir == Op::Write)
            .fold(0u8, |m, io| m | 1 << io.device);
        let failures = Failures {
            written,
            ..f.failures
        };
        let pre = std::mem::take(&mut self.flights[fid as usize].pre);
        for (b, &old) in (work.block()..work.end()).zip(&pre) {
            let alone = exclusive || self.locks.0.get(&b).is_some_and(|st| st.readers == 1);
            if alone {
                self.repair_block(b, old, failures);
                continue;
            }
            // A read beside other readers (which may be reading the same
            // copy): repaired when the last of them lets go of the block.
            let d = self
                .deferred_repairs
                .entry(b)
                .or_insert((old, Failures::default()));
            d.1.writes |= failures.writes;
            d.1.written |= failures.written;
            d.1.client_reads |= failures.client_reads;
        }
        self.flights[fid as usize].pre = pre;
        self.note_changes(None, 0);
    }

    /// Brings `block`'s entry to what the devices still hold after
    /// `failures`, given its entry `old` before the failed plan decided.
    pub(super) fn repair_block(&mut self, block: u64, old: Entry, failures: Failures) {
        let now = self.map.get(block);
        let target = after_failure(old, now, failures, self.map.home());
        if target == now {
            return;
        }
        self.stats.repairs += 1;
        self.jobs.clear();
        let mut ctx = TickCtx {
            map: &mut self.map,
            locks: &self.locks,
            jobs: &mut self.jobs,
        };
        self.policy.repair(block, target, &mut ctx);
        self.queue_jobs();
    }

    /// Whether a plan with failed operations fails its client's `block`:
    /// a read fails when its client read did (settled when acknowledged); a
    /// write fails unless every current copy of the block, after the
    /// repair, is one of the plan's own writes of it that succeeded (a
    /// write-through write whose cache half failed still succeeds: home
    /// holds the data). A write to a device where any of the plan's writes
    /// failed counts as failed.
    pub(super) fn write_failed(&self, fid: u32, block: u64) -> bool {
        let f = &self.flights[fid as usize];
        let Work::Client { access, .. } = f.work else {
            return false;
        };
        let part = (block - access.block) as u16;
        if access.op == Op::Read {
            return match access.blocks {
                1 => f.client_failed,
                _ => f.failed_parts.contains(&part),
            };
        }
        let written_ok = f
            .ios
            .iter()
            .filter(|io| io.dir == Op::Write && io.purpose == Purpose::Client && io.part == part)
            .fold(0u8, |m, io| m | 1 << io.device)
            & !f.failures.writes;
        let current = current_copies(&self.map.get(block));
        current == 0 || current & !written_ok != 0
    }

    /// Takes `device` out of service after it kept failing: the policy
    /// stops placing data there and serves what it can from elsewhere.
    /// Returns false when the policy cannot do without the device (then
    /// its operations keep failing and reach the clients).
    pub fn take_out_of_service(&mut self, device: DeviceIndex) -> bool {
        self.jobs.clear();
        let mut ctx = TickCtx {
            map: &mut self.map,
            locks: &self.locks,
            jobs: &mut self.jobs,
        };
        let done = self.policy.take_out_of_service(device, &mut ctx);
        self.note_changes(None, 0);
        self.queue_jobs();
        self.pump();
        done
    }
}
