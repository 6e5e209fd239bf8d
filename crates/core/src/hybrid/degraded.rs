//! A hybrid cache without one of its cache devices.
//!
//! DRAM holds clean pages only, so its loss loses nothing: its copies
//! leave the map and the cache goes on with NVRAM alone. NVRAM holds the
//! only copy of every dirty page, so its loss puts those pages at risk:
//! each is flushed home once (a device that still reads can give them
//! back), and a page whose flush fails stays in the map, outside the
//! cache's bookkeeping, so that its reads fail rather than return the
//! older home copy, until a write or a trim replaces it. From then on
//! writes go home, and DRAM caches clean pages read from home.

use super::{After, Hybrid, Kind};
use crate::policy::TickCtx;
use crate::types::DeviceIndex;

impl Hybrid {
    /// Takes `device` out of service; false when it is not a cache level.
    pub(super) fn retire(&mut self, device: DeviceIndex, ctx: &mut TickCtx<'_>) -> bool {
        let Some(level) =
            (0..2).find(|&i| self.levels[i].as_ref().is_some_and(|l| l.device == device))
        else {
            return false;
        };
        if self.is_dead(level) {
            return true;
        }
        let blocks: Vec<u64> = self.pages.keys().copied().collect();
        for b in blocks {
            self.retire_page(b, level, device, ctx);
        }
        assert_eq!(self.promised[level], 0, "a move into a retired level");
        self.level_mut(level).retire();
        self.clean_target = self.clean_target.min(self.total_capacity() as f64);
        self.rebalance(ctx.map, ctx.locks, ctx.jobs);
        true
    }

    /// Whether level `i` is out of service (its slot pool retired).
    pub(super) fn is_dead(&self, i: usize) -> bool {
        self.levels[i].as_ref().is_some_and(|l| l.retired)
    }

    /// Brings page `b` out of the retired `level` (on `device`): a queued
    /// move there stays where it is, a copy there is dropped, and a dirty
    /// page there is flushed home once.
    fn retire_page(&mut self, b: u64, level: usize, device: DeviceIndex, ctx: &mut TickCtx<'_>) {
        let page = self.pages[&b];
        let e = ctx.map.get(b);
        if e.present & (1 << device) == 0 {
            if page.level == level {
                // A move queued into the retired level, not started.
                let other = 1 - level;
                self.update(b, |p| {
                    p.level = other;
                    p.migrating = false;
                });
            }
            return;
        }
        if page.kind == Kind::Dirty {
            // Its flush may be under way already (the map then says
            // clean): the page leaves when the flush succeeds, and stays
            // at risk when it fails.
            match page.after {
                After::Nothing => self.queue_flush(b, 1, Some(b), ctx.jobs),
                After::Clean => self.update(b, |p| p.after = After::Evict),
                After::Evict => {}
            }
            return;
        }
        self.forget(b);
        ctx.map.entry_mut(b).drop_copy(device);
        ctx.map.normalize(b);
    }
}
