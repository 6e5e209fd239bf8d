//! Device operations as the engine performs them: the operations the
//! dispatcher hands out together that go to consecutive addresses of one
//! device, in one direction, are one request to the device model, of up to
//! [`MERGE_MAX_BLOCKS`] blocks (`tiermux_core::dispatch::merge`, which the
//! engine uses for its vectored calls). A device then sees a large
//! sequential request, a segment move or a long flush as the few large
//! transfers a real device gets from the engine, and is timed by its
//! model at that size.
//!
//! Each block's operation is still completed on its own, when the merged
//! request completes. Operations that merge with nothing are submitted in
//! the order the dispatcher handed them out, as before merging existed, so
//! a run in which nothing merges is timed exactly as without it.

use tiermux_core::dispatch::merge::{merge_key, runs, MERGE_MAX_BLOCKS};
use tiermux_core::{Op, PlanIndex, Purpose, Ready, NO_TAG};

use super::{Ev, Simulator};

/// One block's operation within a merged request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Part {
    flight: u32,
    index: PlanIndex,
    addr: u64,
    /// The version a write stores.
    data: u32,
}

/// The merged requests in flight and the scratch space for grouping a
/// batch.
#[derive(Default)]
pub(super) struct Merging {
    /// Operations popped together, in the dispatcher's order.
    batch: Vec<Ready>,
    /// The batch's positions in [`merge_key`] order.
    order: Vec<u32>,
    /// The batch in [`merge_key`] order.
    sorted: Vec<Ready>,
    /// Per batch position: where its run starts in `sorted` and how long
    /// it is (0 for a run's members after its first in dispatcher order).
    role: Vec<(u32, u32)>,
    /// The parts of each merged request in flight, by slot.
    parts: Vec<Vec<Part>>,
    free_parts: Vec<u32>,
    /// Merged requests submitted, and the blocks they covered.
    pub(super) merged_ops: u64,
    pub(super) merged_blocks: u64,
}

impl Simulator {
    /// Submits `first`, popped from the dispatcher, and every other
    /// operation it has ready, merging those on consecutive addresses;
    /// returns whether there were others (when not, none is ready now).
    #[inline(always)]
    pub(super) fn issue_ready(&mut self, first: Ready) -> bool {
        let Some(second) = self.dispatcher.pop_ready() else {
            self.submit_one(first);
            return false;
        };
        self.issue_with_others(first, second);
        true
    }

    #[inline(never)]
    fn issue_with_others(&mut self, first: Ready, second: Ready) {
        let mut batch = std::mem::take(&mut self.merging.batch);
        batch.push(first);
        batch.push(second);
        while let Some(r) = self.dispatcher.pop_ready() {
            batch.push(r);
        }
        self.issue_batch(&batch);
        batch.clear();
        self.merging.batch = batch;
    }

    /// Groups `batch` into runs and submits each run when its first
    /// operation in dispatcher order comes up.
    fn issue_batch(&mut self, batch: &[Ready]) {
        let m = &mut self.merging;
        let (mut order, mut sorted, mut role) = (
            std::mem::take(&mut m.order),
            std::mem::take(&mut m.sorted),
            std::mem::take(&mut m.role),
        );
        order.clear();
        order.extend(0..batch.len() as u32);
        order.sort_by_key(|&i| merge_key(&batch[i as usize]));
        sorted.clear();
        sorted.extend(order.iter().map(|&i| batch[i as usize]));
        role.clear();
        role.resize(batch.len(), (0, 0));
        let mut at = 0usize;
        for len in runs(&sorted, MERGE_MAX_BLOCKS) {
            let members = &order[at..at + len];
            let leader = *members.iter().min().expect("a run is not empty");
            role[leader as usize] = (at as u32, len as u32);
            at += len;
        }
        for (i, &(start, len)) in role.iter().enumerate() {
            match len {
                0 => {}
                1 => self.submit_one(batch[i]),
                _ => self.submit_run(&sorted[start as usize..(start + len) as usize]),
            }
        }
        let m = &mut self.merging;
        (m.order, m.sorted, m.role) = (order, sorted, role);
    }

    /// The version a write operation stores.
    #[inline]
    fn write_data(&self, r: &Ready) -> u32 {
        match r.io.dir {
            Op::Write if r.io.purpose == Purpose::Client => {
                debug_assert_ne!(r.tag, NO_TAG);
                self.subs[self.sub_of(r.tag) as usize].version
            }
            Op::Write => r.src_payload as u32,
            Op::Read => 0,
        }
    }

    /// Submits one block's operation alone.
    #[inline(always)]
    fn submit_one(&mut self, r: Ready) {
        let d = r.io.device as usize;
        let ev = Ev::Io {
            flight: r.flight,
            index: r.index,
            device: r.io.device,
            dir: r.io.dir,
            addr: r.io.addr,
            data: self.write_data(&r),
            submitted_ns: self.now,
        };
        let (bytes, purpose) = (self.block_size, r.io.purpose.index());
        self.submit_to_device(d, r.io.dir, bytes, r.io.addr, purpose, ev);
    }

    /// Submits a request to device `d`, whose completion is `ev`: to
    /// the device's model, which says now when it completes, or to its
    /// array's queues, which say so when its last disk operation starts.
    #[inline(always)]
    fn submit_to_device(
        &mut self,
        d: usize,
        dir: Op,
        bytes: u64,
        addr: u64,
        purpose: usize,
        ev: Ev,
    ) {
        if self.any_array && self.arrays[d].is_some() {
            self.devices[d].note_timed_elsewhere(dir, bytes, purpose);
            return self.submit_to_array(d, dir, bytes, addr, ev);
        }
        let done = self.devices[d].submit(self.now, dir, bytes, addr, purpose);
        self.push(done, ev);
    }

    /// Submits `run`, operations on consecutive addresses of one device in
    /// one direction, as one request.
    #[inline(never)]
    fn submit_run(&mut self, run: &[Ready]) {
        let first = run[0].io;
        let d = first.device as usize;
        let bytes = run.len() as u64 * self.block_size;
        let m = &mut self.merging;
        // A free slot keeps its list's memory from its last request.
        let slot = m.free_parts.pop().unwrap_or_else(|| {
            m.parts.push(Vec::new());
            (m.parts.len() - 1) as u32
        });
        // Submitted first: the device counts the bytes under the first
        // block's purpose, and the others are then recounted.
        let ev = Ev::IoRun {
            slot,
            device: first.device,
            dir: first.dir,
            submitted_ns: self.now,
        };
        self.submit_to_device(d, first.dir, bytes, first.addr, first.purpose.index(), ev);
        let m = &mut self.merging;
        let mut parts = std::mem::take(&mut m.parts[slot as usize]);
        parts.clear();
        for (k, r) in run.iter().enumerate() {
            assert_eq!(r.io.addr, first.addr + k as u64, "a merged run has a gap");
            assert!(
                r.io.device == first.device && r.io.dir == first.dir,
                "a merged run spans devices or directions"
            );
            if r.io.purpose != first.purpose {
                self.devices[d].recount_purpose(
                    first.dir,
                    self.block_size,
                    first.purpose.index(),
                    r.io.purpose.index(),
                );
            }
            parts.push(Part {
                flight: r.flight,
                index: r.index,
                addr: r.io.addr,
                data: self.write_data(r),
            });
        }
        let m = &mut self.merging;
        m.parts[slot as usize] = parts;
        m.merged_ops += 1;
        m.merged_blocks += run.len() as u64;
    }

    /// A merged request completed: each of its blocks' operations
    /// completes (or fails, on a dead device) at once.
    #[inline(never)]
    pub(super) fn run_done(&mut self, slot: u32, device: u8, dir: Op, submitted_ns: u64) {
        let parts = std::mem::take(&mut self.merging.parts[slot as usize]);
        let d = device as usize;
        let last = parts.last().expect("a merged request has parts").addr;
        self.assert_addressable(d, last);
        self.devices[d].complete(dir);
        let dead = self.is_dead(device);
        if !dead {
            // One operation, as block-layer statistics count a merged
            // request, and as the engine reports it.
            let bytes = parts.len() as u64 * self.block_size;
            self.obs.device_op(d, dir, bytes, self.now - submitted_ns);
        }
        for p in &parts {
            if dead {
                self.dispatcher.fail(p.flight, p.index);
                continue;
            }
            let payload = match dir {
                Op::Read => self.content[d][p.addr as usize] as u64,
                Op::Write => {
                    self.content[d][p.addr as usize] = p.data;
                    0
                }
            };
            self.dispatcher.complete(p.flight, p.index, payload);
        }
        // The slot keeps the list's memory for its next request.
        self.merging.parts[slot as usize] = parts;
        self.merging.free_parts.push(slot);
        self.drain();
    }
}
