//! The hybrid cache's background work (flushes, migrations), its
//! recovery from a saved map and from failed operations, trims, and the
//! [`Policy`] it presents.

use super::{After, Hybrid, Kind, Page, DRAM, JOB_FLUSH, JOB_MIGRATE, NVRAM};
use crate::map::{Entry, PlacementMap};
use crate::policy::{Ctx, Policy, TickCtx};
use crate::types::{Access, DeviceIndex, Job, Op, Outcome, Purpose};

impl Hybrid {
    /// Plans a queued job whose blocks are now locked.
    fn start(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        match job.kind {
            JOB_FLUSH => {
                // A run is read whole from NVRAM, then written home in
                // one sequential write.
                ctx.plan.gather = true;
                let nvram = self.level(NVRAM).device;
                for b in job.block..job.block + job.blocks as u64 {
                    let e = ctx.map.get(b);
                    let queued = self
                        .pages
                        .get(&b)
                        .is_some_and(|p| p.after != After::Nothing);
                    if queued && e.valid_on(nvram) && e.dirty_on(nvram) {
                        let src = (nvram, e.loc(nvram) as u64);
                        ctx.plan
                            .copy(None, src, (self.home, b), Purpose::Flush, false);
                        ctx.map.entry_mut(b).dirty &= !(1 << nvram);
                        self.counters.flushed_pages += 1;
                    }
                }
            }
            JOB_MIGRATE => self.start_migration(job.block, ctx),
            k => panic!("hybrid caches queue no job of kind {k}"),
        }
    }

    fn start_migration(&mut self, b: u64, ctx: &mut Ctx<'_>) {
        let Some(page) = self.pages.get(&b).copied() else {
            return;
        };
        if !page.migrating || page.kind != Kind::Clean {
            return;
        }
        self.update(b, |p| p.migrating = false);
        let e = ctx.map.get(b);
        let Some((from, src_dev, src_slot)) = self.copy_of(&e) else {
            return;
        };
        let to = page.level;
        let slot = if from == to {
            None
        } else {
            self.level_mut(to).alloc()
        };
        let Some(slot) = slot else {
            // Already there, or no slot free: it stays where it is.
            self.update(b, |p| p.level = from);
            return;
        };
        let dst_dev = self.level(to).device;
        ctx.plan.copy(
            None,
            (src_dev, src_slot as u64),
            (dst_dev, slot as u64),
            Purpose::Migrate,
            false,
        );
        let en = ctx.map.entry_mut(b);
        en.drop_copy(src_dev);
        en.present |= 1 << dst_dev;
        en.set_loc(dst_dev, slot);
        self.releases.insert(b, (from, src_slot));
        self.counters.migrations += 1;
    }

    /// Bookkeeping when every operation of a job has completed.
    fn finish(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        match job.kind {
            JOB_FLUSH => {
                for b in job.block..job.block + job.blocks as u64 {
                    match self.pages.get(&b).map(|p| p.after) {
                        Some(After::Evict) => {
                            self.forget(b);
                            self.drop_copies(b, ctx.map);
                            self.ghost_dirty.push(b, self.total_capacity() as usize);
                        }
                        Some(After::Clean) => self.update(b, |p| {
                            p.kind = Kind::Clean;
                            p.after = After::Nothing;
                            p.seq = 0;
                        }),
                        _ => {}
                    }
                }
            }
            JOB_MIGRATE => {
                if let Some((level, slot)) = self.releases.remove(&job.block) {
                    self.level_mut(level).release(slot);
                }
            }
            k => panic!("hybrid caches queue no job of kind {k}"),
        }
        self.rebalance(ctx.map, ctx.locks, ctx.jobs);
    }

    /// Rebuilds the cache from a saved map: pages in DRAM are clean, pages
    /// in NVRAM clean or dirty; frequencies restart at 1 (clean) and 0.
    fn restore_from(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        assert!(self.pages.is_empty(), "restore into a fresh cache");
        let mut used: [Vec<bool>; 2] = [Vec::new(), Vec::new()];
        for (i, u) in used.iter_mut().enumerate() {
            *u = vec![false; self.levels[i].as_ref().map_or(0, |l| l.physical as usize)];
        }
        let mut placed = Vec::new();
        for (b, e) in map.iter() {
            let on: Vec<usize> = (0..2)
                .filter(|&i| {
                    self.levels[i]
                        .as_ref()
                        .is_some_and(|l| e.present & (1 << l.device) != 0)
                })
                .collect();
            let level = match on[..] {
                [] => continue,
                [l] => l,
                _ => return Err(format!("block {b} has copies in DRAM and NVRAM")),
            };
            let dev = self.level(level).device;
            if e.stale & (1 << dev) != 0 {
                return Err(format!("block {b} has a stale copy on device {dev}"));
            }
            if level == DRAM && e.dirty_on(dev) {
                return Err(format!("block {b} is dirty in DRAM"));
            }
            crate::slots::claim(&mut used[level], b, dev, e.loc(dev))?;
            placed.push((b, level, e.dirty_on(dev)));
        }
        for (level, used) in self.levels.iter_mut().zip(&used) {
            if let Some(l) = level.as_mut() {
                l.set_used(used);
            }
        }
        placed.sort_unstable();
        for (b, level, dirty) in placed {
            let seq = self.next_seq();
            let kind = if dirty { Kind::Dirty } else { Kind::Clean };
            self.adopt(b, page(kind, level, seq));
        }
        Ok(())
    }

    /// After failed operations: keeps the copies both `target` and the
    /// map hold at the same place (and a dirty only copy whose slot is
    /// still free), and brings the page's state in step.
    fn repair_to(&mut self, b: u64, target: Entry, map: &mut PlacementMap) {
        let now = map.get(b);
        let mut keep = target;
        let mut kept = None;
        for i in 0..2 {
            let Some(dev) = self.levels[i].as_ref().map(|l| l.device) else {
                continue;
            };
            let here = now.present & (1 << dev) != 0;
            let same = here && target.valid_on(dev) && now.loc(dev) == target.loc(dev);
            let reclaimed =
                !here && target.dirty_on(dev) && self.level_mut(i).reclaim(target.loc(dev));
            if same && self.is_dead(i) && target.dirty_on(dev) {
                // The only copy of a dirty page, on a device out of
                // service: kept, at risk, outside the cache.
                continue;
            }
            if (same && !self.is_dead(i)) || reclaimed {
                kept = Some((i, target.dirty_on(dev)));
            } else {
                keep.drop_copy(dev);
                if here {
                    self.level_mut(i).release(now.loc(dev));
                }
            }
        }
        let old = self.forget(b);
        map.set(b, keep);
        if let Some((level, dirty)) = kept {
            let kind = if dirty { Kind::Dirty } else { Kind::Clean };
            let mut p = page(kind, level, old.map_or(0, |p| p.seq));
            p.freq = old.map_or(p.freq, |o| o.freq);
            self.adopt(b, p);
        }
    }

    /// Places `b` as a clean page without I/O, where there is room.
    fn warm_page(&mut self, b: u64, map: &mut PlacementMap) -> bool {
        if self.pages.contains_key(&b) {
            return true;
        }
        let Some(level) = (0..2).find(|&i| {
            self.levels[i]
                .as_ref()
                .is_some_and(|l| l.resident < l.capacity)
        }) else {
            return false;
        };
        let slot = self.level_mut(level).alloc().expect("room below capacity");
        crate::slots::place_copy(map, b, self.level(level).device, slot);
        let seq = self.next_seq();
        self.adopt(b, page(Kind::Clean, level, seq));
        true
    }
}

/// A page placed now.
fn page(kind: Kind, level: usize, seq: u64) -> Page {
    Page {
        freq: if kind == Kind::Clean { 1 } else { 0 },
        seq,
        kind,
        level,
        after: After::Nothing,
        migrating: false,
    }
}

impl Policy for Hybrid {
    fn name(&self) -> &str {
        self.rules.name
    }
    fn address_space(&self, device: usize) -> u64 {
        Hybrid::address_space(self, device)
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
        vec![
            ("cached_blocks", self.pages.len() as f64),
            ("clean_blocks", self.clean_pages() as f64),
            ("dirty_blocks", self.dirty_pages() as f64),
            ("clean_target_blocks", self.clean_target()),
            ("flushed_blocks", self.counters.flushed_pages as f64),
            ("flush_jobs", self.counters.flushes as f64),
            ("migrations", self.counters.migrations as f64),
            ("agings", self.counters.agings as f64),
        ]
    }
    fn layout(&self) -> &str {
        "hybrid"
    }
    fn restore(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        self.restore_from(map)
    }
    fn trim(&mut self, block: u64, ctx: &mut Ctx<'_>) {
        // A page at risk on a device out of service has a copy but no
        // page.
        self.forget(block);
        self.drop_copies(block, ctx.map);
    }
    fn repair(&mut self, block: u64, target: Entry, ctx: &mut TickCtx<'_>) {
        self.repair_to(block, target, ctx.map);
    }
    fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        self.warm_page(block, map)
    }
    fn take_out_of_service(&mut self, device: DeviceIndex, ctx: &mut TickCtx<'_>) -> bool {
        self.retire(device, ctx)
    }
    fn may_keep_sole_copies(&self, devices: u8) -> bool {
        // Dirty pages have one copy, in NVRAM; DRAM holds clean ones.
        devices & (1 << self.level(NVRAM).device) != 0
    }
}
