//! A TICA cache without one of its devices. Every dirty page has two
//! copies, so the loss of any one cache device loses nothing: the dead
//! device's copies leave the map, the pages that kept a single dirty copy
//! are flushed home, and from then on writes go home (write-through)
//! while reads are served by the surviving copies or home.

use super::{Status, Tica, JOB_FLUSH};
use crate::policy::TickCtx;
use crate::types::{DeviceIndex, Job};

impl Tica {
    /// Takes `device` out of service; false when it is not a cache level.
    pub(super) fn retire(&mut self, device: DeviceIndex, ctx: &mut TickCtx<'_>) -> bool {
        let Some(level) = (0..3).find(|&l| self.dev(l) == device) else {
            return false;
        };
        if self.dead & (1 << level) != 0 {
            return true;
        }
        self.dead |= 1 << level;
        self.levels[level].retire();
        let blocks: Vec<u64> = ctx
            .map
            .iter()
            .filter(|(_, e)| e.present & (1 << device) != 0)
            .map(|(b, _)| b)
            .collect();
        for b in blocks {
            self.retire_copy(b, device, ctx);
        }
        // Dirty data drains home; a page being copied drains when its job
        // finishes.
        let dirty: Vec<u64> = self
            .pages
            .iter()
            .filter(|(_, p)| p.dirty && p.on != 0)
            .map(|(&b, _)| b)
            .collect();
        for b in dirty {
            self.drain(b, ctx.jobs);
        }
        self.rebalance(ctx.map, ctx.locks, ctx.jobs);
        true
    }

    /// Queues a flush of dirty page `b`, unless one is queued or a job is
    /// copying it.
    pub(super) fn drain(&mut self, b: u64, jobs: &mut Vec<Job>) {
        let status = self.pages[&b].status;
        if !matches!(status, Status::Evicting | Status::Copying) {
            self.update(b, |p| p.status = Status::Evicting);
            jobs.push(Job::one(b, JOB_FLUSH));
        }
    }

    /// Drops `b`'s copy on the dead `device`, unless it is the block's only
    /// current copy: then it stays, at risk, and reads of the block go to
    /// it (and fail while the device does).
    fn retire_copy(&mut self, b: u64, device: DeviceIndex, ctx: &mut TickCtx<'_>) {
        let e = ctx.map.get(b);
        if self.levels_of(&e) == 0 && e.dirty_on(device) {
            return;
        }
        let status = self.pages.get(&b).map_or(Status::Idle, |p| p.status);
        ctx.map.entry_mut(b).drop_copy(device);
        ctx.map.normalize(b);
        self.refresh(b, ctx.map, status);
    }
}
