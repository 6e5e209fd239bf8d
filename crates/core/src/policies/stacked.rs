//! Stacked caching: several cache devices, fastest first, over a home
//! device (DRAM over NVRAM over disk). Each level is a classic cache of the
//! home device with its own slots and replacement ([`CacheCore`]). A read
//! is served by the fastest level holding the block, or by home, and fills
//! every faster level. Writes:
//! - `wa`: home, and every cached copy is updated (or invalidated, with
//!   `wa_write_hit = "invalidate"`);
//! - `wt`: home, the top level (allocating a slot there) and every other
//!   cached copy;
//! - `wb`: the top level only (allocating there), marked dirty; copies on
//!   slower levels are dropped, being older; the top level flushes straight
//!   to home. Only the top level ever holds dirty data.

use super::cache::{CacheConfig, CacheCore, CachePair, WriteMode, JOB_FLUSH};
use super::Registered;
use crate::map::{Entry, PlacementMap};
use crate::params::Params;
use crate::policy::{Ctx, DeviceRole, Policy, PolicyError, TickCtx, VolumeSpec};
use crate::types::{Access, DeviceIndex, Job, Op, Outcome, Purpose};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "stacked",
    summary: "classic caching on every cache device, fastest first, over the home device (DRAM over NVRAM over disk)",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let top = CachePair::of(vol, "stacked")?;
    let cfg = CacheConfig::from_params(p, vol, top, "stacked")?;
    let levels = vol
        .with_role(DeviceRole::Cache)
        .map(|cache| {
            let pair = CachePair {
                cache,
                backing: top.backing,
            };
            let mut c = cfg.clone();
            if cache != top.cache {
                c.capacity_blocks = vol.devices[cache as usize].capacity_blocks as usize;
            }
            CacheCore::new(c, pair)
        })
        .collect();
    Ok(Box::new(Stacked {
        levels,
        home: top.backing,
        vol_blocks: vol.num_blocks,
        cfg,
    }))
}

/// Stacked caching (see the module documentation).
pub struct Stacked {
    /// One cache per level, fastest first.
    levels: Vec<CacheCore>,
    home: DeviceIndex,
    vol_blocks: u64,
    cfg: CacheConfig,
}

impl Stacked {
    /// The fastest level holding a current copy of `block`.
    /// Levels out of service hold only dirty copies that still count.
    fn holder(&self, block: u64, map: &PlacementMap) -> Option<usize> {
        let e = map.get(block);
        self.levels.iter().position(|l| {
            let d = l.pair.cache;
            e.valid_on(d) && (l.in_service() || e.dirty_on(d))
        })
    }

    fn read(&mut self, block: u64, ctx: &mut Ctx<'_>) -> Outcome {
        let e = ctx.map.get(block);
        let holder = self.holder(block, ctx.map);
        let (dev, addr, outcome, above) = match holder {
            Some(i) => {
                let d = self.levels[i].pair.cache;
                self.levels[i].touch(e.loc(d));
                (d, e.loc(d) as u64, Outcome::Hit(d), i)
            }
            None => (self.home, block, Outcome::Miss, self.levels.len()),
        };
        let r = ctx.plan.client(dev, Op::Read, addr);
        if ctx.may_write {
            for level in &mut self.levels[..above] {
                if let Some(slot) = level.admit(block, ctx.map, ctx.locks, ctx.jobs) {
                    let dst = (level.pair.cache, slot as u64);
                    ctx.plan.copy(
                        Some(r),
                        (dev, addr),
                        dst,
                        Purpose::Admit,
                        self.cfg.fill_sync,
                    );
                }
            }
        }
        outcome
    }

    fn write(&mut self, block: u64, ctx: &mut Ctx<'_>) -> Outcome {
        let outcome = match self.holder(block, ctx.map) {
            Some(i) => Outcome::Hit(self.levels[i].pair.cache),
            None => Outcome::Miss,
        };
        let mode = self.cfg.write_mode;
        // The top level takes the write (allocating) unless writes go around.
        let top_slot = match mode {
            WriteMode::Around => None,
            _ => self.slot_or_admit(0, block, ctx),
        };
        if let Some(slot) = top_slot {
            ctx.plan
                .client(self.levels[0].pair.cache, Op::Write, slot as u64);
        }
        let written_back = mode == WriteMode::Back && top_slot.is_some();
        // Every other cached copy is updated, or dropped when it would be
        // older than the top level's dirty copy.
        let first_other = usize::from(top_slot.is_some());
        for i in first_other..self.levels.len() {
            let e = ctx.map.get(block);
            let d = self.levels[i].pair.cache;
            if !e.valid_on(d) {
                continue;
            }
            if written_back
                || !self.levels[i].in_service()
                || (mode == WriteMode::Around && !self.cfg.around_hit_updates)
            {
                self.levels[i].invalidate(block, ctx.map);
            } else {
                self.levels[i].touch(e.loc(d));
                ctx.plan.client(d, Op::Write, e.loc(d) as u64);
            }
        }
        if written_back {
            self.levels[0].mark_dirty(block, ctx.map);
            self.levels[0].resume_flushing();
            self.levels[0].schedule_flushes(ctx.map, ctx.locks, ctx.jobs, false);
        } else {
            ctx.plan.client(self.home, Op::Write, block);
        }
        outcome
    }

    /// The block's slot on level `i`, admitting it if needed.
    fn slot_or_admit(&mut self, i: usize, block: u64, ctx: &mut Ctx<'_>) -> Option<u32> {
        let level = &mut self.levels[i];
        let e = ctx.map.get(block);
        if !level.in_service() {
            level.invalidate(block, ctx.map);
            return None;
        }
        if e.valid_on(level.pair.cache) {
            level.touch(e.loc(level.pair.cache));
            return Some(e.loc(level.pair.cache));
        }
        level.admit(block, ctx.map, ctx.locks, ctx.jobs)
    }
}

impl Policy for Stacked {
    fn name(&self) -> &str {
        "stacked"
    }
    fn address_space(&self, device: usize) -> u64 {
        self.levels
            .iter()
            .map(|l| l.address_space(device, self.vol_blocks))
            .max()
            .unwrap_or(0)
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        match access.op {
            Op::Read => self.read(access.block, ctx),
            Op::Write => self.write(access.block, ctx),
        }
    }
    fn start_job(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        assert_eq!(job.kind, JOB_FLUSH, "stacked caching queues only flushes");
        self.levels[0].start_flush(job, ctx);
    }
    fn finish_job(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        assert_eq!(job.kind, JOB_FLUSH, "stacked caching queues only flushes");
        self.levels[0].finish_flush(ctx);
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        const NAMES: [&str; 3] = ["cached_blocks", "cached_blocks_1", "cached_blocks_2"];
        let mut out: Vec<_> = self
            .levels
            .iter()
            .zip(NAMES)
            .map(|(l, n)| (n, l.cached_blocks() as f64))
            .collect();
        out.push(("dirty_blocks", self.levels[0].dirty_blocks() as f64));
        out
    }
    fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        self.levels.iter_mut().any(|l| l.warm(block, map))
    }
    fn trim(&mut self, block: u64, ctx: &mut Ctx<'_>) {
        for level in &mut self.levels {
            level.invalidate(block, ctx.map);
        }
    }
    fn repair(&mut self, block: u64, mut target: Entry, ctx: &mut TickCtx<'_>) {
        let now = ctx.map.get(block);
        for level in &mut self.levels {
            target = level.reconcile(now, target);
        }
        ctx.map.set(block, target);
    }
    fn take_out_of_service(&mut self, device: DeviceIndex, _ctx: &mut TickCtx<'_>) -> bool {
        self.levels
            .iter_mut()
            .any(|l| l.take_out_of_service(device))
    }
    fn may_keep_sole_copies(&self, devices: u8) -> bool {
        // Only the top level holds dirty data.
        self.levels[0].may_keep_sole_copies(devices)
    }
    fn restore(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        for (i, level) in self.levels.iter_mut().enumerate() {
            if i > 0 {
                if let Some((b, _)) = map.iter().find(|(_, e)| e.dirty_on(level.pair.cache)) {
                    return Err(format!(
                        "block {b} is dirty on cache level {i}; only the top level holds dirty data"
                    ));
                }
            }
            level.restore(map)?;
        }
        Ok(())
    }
    fn layout(&self) -> &str {
        "stacked"
    }
}
