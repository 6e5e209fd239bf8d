//! TICA's background work (moves, demotions, flushes), its recovery from
//! a saved map and from failed operations, trims, and the [`Policy`] it
//! presents.

use super::{
    Choice, Page, Ssds, Status, Tica, DRAM, JOB_DEMOTE, JOB_FLUSH, JOB_MOVE, JOB_REBALANCE,
    JOB_RELEASE, RO, WO,
};
use crate::map::{Entry, PlacementMap};
use crate::policy::{Ctx, LockView, Policy, TickCtx};
use crate::types::{Access, DeviceIndex, Io, Job, Op, Outcome, Purpose, NO_DEP};

/// The locks of every block but `block`.
struct AllBut<'a> {
    locks: &'a dyn LockView,
    block: u64,
}

impl LockView for AllBut<'_> {
    fn is_locked(&self, block: u64) -> bool {
        block != self.block && self.locks.is_locked(block)
    }
}

impl Tica {
    /// Plans a queued job whose block is now locked. A job whose page has
    /// changed since it was queued does nothing.
    fn start(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        let b = job.block;
        let Some(page) = self.pages.get(&b).copied() else {
            return;
        };
        match (job.kind, page.status) {
            (JOB_MOVE, Status::MoveQueued) => self.copy_down(b, DRAM, &[RO], true, ctx),
            (JOB_DEMOTE, Status::DemoteQueued) => {
                self.copy_down(b, DRAM, self.demote_levels(), false, ctx);
            }
            (JOB_FLUSH, Status::Evicting) => {
                let e = ctx.map.get(b);
                let on = self.levels_of(&e);
                let Some(level) = [RO, WO, DRAM]
                    .into_iter()
                    .find(|&l| on & (1 << l) != 0 && e.dirty_on(self.dev(l)))
                else {
                    return;
                };
                let src = (self.dev(level), e.loc(self.dev(level)) as u64);
                ctx.plan
                    .copy(None, src, (self.home, b), Purpose::Flush, false);
                ctx.map.entry_mut(b).dirty = 0;
                self.counters.flushes += 1;
            }
            (JOB_MOVE | JOB_DEMOTE | JOB_FLUSH | JOB_RELEASE | JOB_REBALANCE, _) => {}
            (k, _) => panic!("TICA queues no job of kind {k}"),
        }
    }

    /// Copies `b` from level `from` to the levels `to` (one read, a write
    /// to each), keeping the `from` copy until the job finishes; without a
    /// slot on every level of `to`, a move waits again and a demotion
    /// drops the page.
    fn copy_down(&mut self, b: u64, from: usize, to: &[usize], dirty: bool, ctx: &mut Ctx<'_>) {
        let e = ctx.map.get(b);
        let src = self.dev(from);
        let slots = if self.levels_of(&e) & (1 << from) == 0 {
            None
        } else {
            self.take_slots(&e, to, true)
        };
        let Some((_, slots)) = slots else {
            if dirty {
                self.refresh(b, ctx.map, Status::MoveWaiting);
            } else {
                self.counters.drops += 1;
                self.forget(b);
                self.drop_copies_except(b, ctx.map, 0, false);
            }
            return;
        };
        let read = ctx.plan.push(Io {
            device: src,
            dir: Op::Read,
            addr: e.loc(src) as u64,
            purpose: Purpose::Migrate,
            after: NO_DEP,
            acks: false,
            part: 0,
        });
        for &(level, slot) in &slots[..to.len()] {
            let dst = self.dev(level);
            ctx.plan.copy(
                Some(read),
                (src, e.loc(src) as u64),
                (dst, slot as u64),
                Purpose::Migrate,
                false,
            );
            let en = ctx.map.entry_mut(b);
            en.present |= 1 << dst;
            en.set_loc(dst, slot);
            if dirty {
                en.dirty |= 1 << dst;
            }
        }
        if dirty {
            self.counters.moves += 1;
        } else {
            self.counters.demotions += 1;
        }
        self.refresh(b, ctx.map, Status::Copying);
    }

    /// Bookkeeping when every operation of a job has completed.
    fn finish(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        let b = job.block;
        for (level, slot) in self.releases.remove(&b).unwrap_or_default() {
            self.levels[level].release(slot);
        }
        match self.pages.get(&b).map(|p| p.status) {
            Some(Status::Copying) => {
                // The copy is written: the DRAM copy leaves.
                let on = self.pages[&b].on;
                self.forget(b);
                self.drop_copies_except(b, ctx.map, on & !(1 << DRAM), false);
                self.refresh(b, ctx.map, Status::Idle);
                if let Some(p) = self.pages.get_mut(&b) {
                    p.ssd_hit = false; // it has just arrived there
                }
                self.drain_if_exposed(b, ctx.jobs);
            }
            Some(Status::Evicting) if job.kind == JOB_FLUSH => {
                if ctx.map.get(b).dirty == 0 {
                    self.forget(b);
                    self.drop_copies_except(b, ctx.map, 0, false);
                } else {
                    // The flush was repaired as failed: the page stays dirty.
                    self.refresh(b, ctx.map, Status::Idle);
                }
            }
            _ => {}
        }
        if job.kind != JOB_REBALANCE {
            self.rebalance(ctx.map, ctx.locks, ctx.jobs);
            return;
        }
        // The job's block is still locked, by the job alone, with no
        // operation in flight: it may be the victim the job waited for.
        self.rebalance_queued = false;
        let locks = AllBut {
            locks: ctx.locks,
            block: b,
        };
        self.rebalance(ctx.map, &locks, ctx.jobs);
    }

    /// Keeps only the copies a consistent page has: the dirty ones when
    /// any is dirty (DRAM's rather than RO's beside WO's), else the first
    /// clean one in read order (both of a mirrored pair).
    fn normalize(&mut self, b: u64, map: &mut PlacementMap) {
        let e = map.get(b);
        let on = self.levels_of(&e);
        let dirty = (0..3).fold(0u8, |m, i| {
            m | (u8::from(on & (1 << i) != 0 && e.dirty_on(self.dev(i))) << i)
        });
        let mut keep = if dirty != 0 { dirty } else { on };
        if keep & (1 << DRAM) != 0 && keep & (1 << RO) != 0 {
            keep &= !(1 << RO);
        }
        let pair = 1 << RO | 1 << WO;
        let mirrored = self.ssds == Ssds::Mirrored && keep & !pair == 0;
        if dirty == 0 && !mirrored {
            keep &= keep.wrapping_neg(); // the lowest level only
        }
        // Stale copies and those not kept leave.
        let present = (0..3).fold(0u8, |m, i| {
            m | (u8::from(e.present & (1 << self.dev(i)) != 0) << i)
        });
        if present & !keep != 0 {
            self.drop_copies_except(b, map, keep, false);
        }
    }

    /// Rebuilds the cache from a saved map, whatever copies its entries
    /// hold (a page reads from its current copies; the others leave with
    /// its next write or eviction).
    fn restore_from(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        assert!(self.pages.is_empty(), "restore into a fresh cache");
        let mut used: Vec<Vec<bool>> = self
            .levels
            .iter()
            .map(|l| vec![false; l.physical as usize])
            .collect();
        let mut placed = Vec::new();
        for (b, e) in map.iter() {
            let mut cached = false;
            for (i, used) in used.iter_mut().enumerate() {
                let dev = self.dev(i);
                if e.present & (1 << dev) != 0 {
                    crate::slots::claim(used, b, dev, e.loc(dev))?;
                    cached = true;
                }
            }
            if cached {
                placed.push(b);
            }
        }
        for (l, used) in self.levels.iter_mut().zip(&used) {
            l.set_used(used);
        }
        placed.sort_unstable();
        // The map is kept as it is: changes made here would not reach a
        // driver's journal, and a slot freed here could be refilled while
        // a saved entry still names it.
        for b in placed {
            self.next_seq();
            self.refresh(b, map, Status::Idle);
        }
        Ok(())
    }

    /// After failed operations: keeps the copies both `target` and the
    /// map hold at the same place (and a dirty copy of `target` whose slot
    /// is still free), and brings the page's state in step.
    fn repair_to(&mut self, b: u64, target: Entry, map: &mut PlacementMap) {
        let now = map.get(b);
        let mut keep = target;
        for i in 0..3 {
            let dev = self.dev(i);
            let here = now.present & (1 << dev) != 0;
            let same = here && target.valid_on(dev) && now.loc(dev) == target.loc(dev);
            let reclaimed =
                !here && target.dirty_on(dev) && self.levels[i].reclaim(target.loc(dev));
            if !(same || reclaimed) {
                keep.drop_copy(dev);
                if here {
                    self.levels[i].release(now.loc(dev));
                }
            }
        }
        map.set(b, keep);
        self.normalize(b, map);
        self.refresh(b, map, Status::Idle);
    }

    /// Drains `b`'s dirty data home when a device is out of service or
    /// the page is down to one copy.
    fn drain_if_exposed(&mut self, b: u64, jobs: &mut Vec<Job>) {
        let exposed = |p: &Page| p.dirty && p.on != 0 && (self.dead != 0 || p.on.count_ones() == 1);
        if self.pages.get(&b).is_some_and(exposed) {
            self.drain(b, jobs);
        }
    }

    /// Places `b` as a clean page without I/O: in DRAM's read partition,
    /// else where an admitted DRAM victim goes (WO, or both SSDs of a
    /// mirrored pair), where there is room.
    fn warm_page(&mut self, b: u64, map: &mut PlacementMap) -> bool {
        if self.pages.contains_key(&b) {
            return true;
        }
        let ssds = self.demote_levels();
        let levels: &[usize] =
            if (self.dram_clean.len() as u64) < self.read_partition() && self.room(DRAM) {
                &[DRAM]
            } else if ssds.iter().all(|&l| self.room(l)) {
                ssds
            } else {
                return false;
            };
        let Some((on, slots)) = self.take_slots(&map.get(b), levels, true) else {
            return false;
        };
        for &(level, slot) in &slots[..levels.len()] {
            crate::slots::place_copy(map, b, self.dev(level), slot);
        }
        let seq = self.next_seq();
        self.adopt(
            b,
            Page {
                seq,
                status: Status::Idle,
                on,
                dirty: false,
                reused: false,
                ssd_hit: false,
            },
        );
        true
    }
}

impl Policy for Tica {
    fn name(&self) -> &str {
        self.name
    }
    fn address_space(&self, device: usize) -> u64 {
        Tica::address_space(self, device)
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        match access.op {
            Op::Read => self.read(access.block, ctx),
            Op::Write => self.write(access.block, ctx),
        }
    }
    fn start_job(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        self.start(job, ctx);
    }
    fn finish_job(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        self.finish(job, ctx);
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        let dirty = self.pages.values().filter(|p| p.dirty).count();
        let c = &self.counters;
        let mut state = vec![
            ("cached_blocks", self.pages.len() as f64),
            ("dirty_blocks", dirty as f64),
            ("dram_clean_blocks", self.dram_clean.len() as f64),
            ("dram_dirty_blocks", self.dram_dirty as f64),
            ("ro_blocks", self.levels[RO].resident as f64),
            ("wo_blocks", self.levels[WO].resident as f64),
            ("write_partition_blocks", self.write_partition),
            (
                "wed_mode",
                f64::from(self.mode() == super::adapt::Mode::Wed),
            ),
            ("moves", c.moves as f64),
            ("demotions", c.demotions as f64),
            ("drops", c.drops as f64),
            ("flushed_blocks", c.flushes as f64),
            ("partition_bypasses", c.partition_bypasses as f64),
            ("home_writes", c.home_writes as f64),
            ("mode_switches", self.switches() as f64),
            ("readds", c.readds as f64),
        ];
        if let Choice::Rules(r) = &self.choice {
            state.extend(r.state());
        }
        state
    }
    fn layout(&self) -> &str {
        match self.ssds {
            Ssds::ReadWrite => "tica",
            Ssds::Mirrored => "ssd-mirror",
        }
    }
    fn restore(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        self.restore_from(map)
    }
    fn trim(&mut self, block: u64, ctx: &mut Ctx<'_>) {
        if self.forget(block).is_some() {
            self.drop_copies_except(block, ctx.map, 0, false);
        }
    }
    fn repair(&mut self, block: u64, target: Entry, ctx: &mut TickCtx<'_>) {
        self.repair_to(block, target, ctx.map);
        self.drain_if_exposed(block, ctx.jobs);
    }
    fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        self.dead == 0 && self.warm_page(block, map)
    }
    fn take_out_of_service(&mut self, device: DeviceIndex, ctx: &mut TickCtx<'_>) -> bool {
        self.retire(device, ctx)
    }
    fn may_keep_sole_copies(&self, devices: u8) -> bool {
        // A dirty page is on WO and on DRAM or RO (mirrored: on both SSDs).
        let has = |level: usize| devices & (1 << self.dev(level)) != 0;
        let other = has(RO) || (self.ssds == Ssds::ReadWrite && has(DRAM));
        has(WO) && other
    }
}
