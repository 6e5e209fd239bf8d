//! Classic inclusive caching over two devices, as a building block.
//!
//! A cache device holds copies of blocks whose home is a backing device
//! (by default device 0 over device 1; the volume's roles say which). The
//! cache keeps a slot
//! per cached block, replaces with LRU or ARC and writes in one of three
//! modes. Every caching policy (classic, NHC, SIB, LBICA) is a
//! [`CachePolicy`] over a [`Scheduler`] that only decides, per request,
//! whether a miss is admitted and whether a clean hit is served by the cache,
//! and adjusts those decisions on ticks.

use super::param_err;
use crate::dirty_order::DirtyOrder;
use crate::map::{Entry, PlacementMap};
use crate::observe::Observation;
use crate::params::Params;
use crate::policy::{Ctx, DeviceRole, LockView, Policy, PolicyError, TickCtx, VolumeSpec};
use crate::replacement::{new_replacement, Replacement, ReplacementKind};
use crate::types::{Access, DeviceIndex, Job, Op, Outcome, Purpose};

/// The two devices a cache works between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachePair {
    /// The device holding cached copies, in slots it allocates.
    pub cache: DeviceIndex,
    /// The device the cache is in front of, holding every block at its
    /// block number.
    pub backing: DeviceIndex,
}

impl CachePair {
    /// The first device of `vol` with the cache role over the home device.
    pub fn of(vol: &VolumeSpec, policy: &str) -> Result<Self, PolicyError> {
        let err = |message: String| PolicyError::Volume {
            policy: policy.into(),
            message,
        };
        let cache = vol.with_role(DeviceRole::Cache).next().ok_or_else(|| {
            err(format!(
                "needs a device with the role 'cache' (and a home device); the volume has {} device(s) with roles {}",
                vol.devices.len(),
                vol.devices.iter().map(|d| d.role.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        let backing = vol
            .home()
            .ok_or_else(|| err("needs a device with the role 'home' behind its cache".into()))?;
        if backing <= cache {
            return Err(err(format!(
                "the cache (device {cache}) must come before the home device (device {backing})"
            )));
        }
        Ok(CachePair { cache, backing })
    }
}

/// Job kind: write a dirty cached block back to its home.
pub const JOB_FLUSH: u8 = 1;

/// Entry flag: a flush job for this block is queued.
const FLAG_FLUSH_QUEUED: u8 = 1;

/// How writes are handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Writes go to the home device; misses are not admitted. A write hit
    /// updates the cached copy too (Open CAS) or invalidates it.
    Around,
    /// Writes go to both devices; misses are admitted.
    Through,
    /// Writes go to the cache only and are flushed later; misses admitted.
    Back,
}

impl WriteMode {
    /// Short name: wa, wt or wb.
    pub fn short(self) -> &'static str {
        match self {
            WriteMode::Around => "wa",
            WriteMode::Through => "wt",
            WriteMode::Back => "wb",
        }
    }
}

/// Settings of a [`CacheCore`].
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Blocks the cache holds.
    pub capacity_blocks: usize,
    /// Replacement algorithm.
    pub replacement: ReplacementKind,
    /// Write handling.
    pub write_mode: WriteMode,
    /// Whether a read miss is acknowledged only after the cache fill (`fill =
    /// "sync"`, the paper's model: Tmiss = 1/Rhi + 1/Rlo) or as soon as the
    /// data is read (`"async"`, the default, as Open CAS backfills).
    pub fill_sync: bool,
    /// Write-around: update (true, Open CAS) or invalidate a cached copy.
    pub around_hit_updates: bool,
    /// Start flushing when dirty blocks exceed this fraction of the cache.
    pub dirty_high_ratio: f64,
    /// Stop flushing below this fraction.
    pub dirty_low_ratio: f64,
    /// Most flushes in flight at once.
    pub flush_max_inflight: u32,
}

impl CacheConfig {
    /// Reads the caching parameters shared by every caching policy.
    pub fn from_params(
        p: &Params,
        vol: &VolumeSpec,
        pair: CachePair,
        policy: &str,
    ) -> Result<Self, PolicyError> {
        let e = param_err(policy);
        let dev = vol.devices[pair.cache as usize].capacity_blocks;
        let capacity_blocks = p.u64_in("cache_blocks", dev, 1, dev.max(1)).map_err(&e)? as usize;
        let replacement = match p
            .choice("replacement", "lru", &["lru", "arc"])
            .map_err(&e)?
            .as_str()
        {
            "arc" => ReplacementKind::Arc,
            _ => ReplacementKind::Lru,
        };
        let write_mode = match p
            .choice("write_mode", "wa", &["wa", "wt", "wb"])
            .map_err(&e)?
            .as_str()
        {
            "wt" => WriteMode::Through,
            "wb" => WriteMode::Back,
            _ => WriteMode::Around,
        };
        let fill_sync = p.choice("fill", "async", &["sync", "async"]).map_err(&e)? == "sync";
        let around_hit_updates = p
            .choice("wa_write_hit", "update", &["update", "invalidate"])
            .map_err(&e)?
            == "update";
        let dirty_high_ratio = p.f64_in("dirty_high_ratio", 0.9, 0.0, 1.0).map_err(&e)?;
        let dirty_low_ratio = p.f64_in("dirty_low_ratio", 0.8, 0.0, 1.0).map_err(&e)?;
        if dirty_low_ratio > dirty_high_ratio {
            return Err(e(crate::params::ParamError::new(
                "dirty_low_ratio",
                format!(
                    "must not exceed dirty_high_ratio ({dirty_high_ratio}), got {dirty_low_ratio}"
                ),
            )));
        }
        let flush_max_inflight = p.u64_in("flush_max_inflight", 8, 1, 1 << 16).map_err(&e)? as u32;
        Ok(CacheConfig {
            capacity_blocks,
            replacement,
            write_mode,
            fill_sync,
            around_hit_updates,
            dirty_high_ratio,
            dirty_low_ratio,
            flush_max_inflight,
        })
    }
}

/// Classic caching state: the replacement and dirty bookkeeping.
pub struct CacheCore {
    /// Settings.
    pub cfg: CacheConfig,
    /// The cache device and the device behind it.
    pub pair: CachePair,
    repl: Box<dyn Replacement>,
    dirty_blocks: u64,
    /// The dirty slots, least recently written first: the flusher's
    /// order. Counted with `dirty_blocks`.
    dirty_order: DirtyOrder,
    flushes_queued: u32,
    flushing: bool,
    scan: Vec<u32>,
    /// False once the cache device was taken out of service: nothing is
    /// admitted, clean copies are no longer read, dirty ones still are
    /// (and flushed) until they are overwritten.
    in_service: bool,
    /// A flush failed: no more are queued until the next write or tick, so
    /// a failing device is not retried in a tight loop.
    flush_paused: bool,
    /// The dirty share the scheduler asks the flusher to hold now, below
    /// the watermarks (see [`Scheduler::dirty_target_ratio`]).
    dirty_target: Option<f64>,
}

/// How often a cache that drains dirty blocks wants a tick when its
/// scheduler asks for none, ns: flushes that could not be queued (their
/// block was busy) are tried again this often.
pub const DRAIN_TICK_NS: u64 = 50_000_000;

/// The caching parameters a running volume can change (see
/// [`crate::Policy::live_params`]); the slot count and the replacement
/// algorithm need a restart.
pub const CACHE_LIVE_PARAMS: &[&str] = &[
    "write_mode",
    "dirty_high_ratio",
    "dirty_low_ratio",
    "flush_max_inflight",
    "fill",
    "wa_write_hit",
];

impl CacheCore {
    /// An empty cache.
    pub fn new(cfg: CacheConfig, pair: CachePair) -> Self {
        let repl = new_replacement(cfg.replacement, cfg.capacity_blocks);
        let dirty_order = DirtyOrder::new(cfg.capacity_blocks);
        CacheCore {
            cfg,
            pair,
            repl,
            dirty_blocks: 0,
            dirty_order,
            flushes_queued: 0,
            flushing: false,
            scan: Vec::new(),
            in_service: true,
            flush_paused: false,
            dirty_target: None,
        }
    }

    /// Sets the dirty share the scheduler wants the flusher to hold, when
    /// it is below the watermarks (None: the watermarks alone).
    pub fn set_dirty_target(&mut self, ratio: Option<f64>) {
        if let Some(r) = ratio {
            assert!(
                (0.0..=1.0).contains(&r),
                "a dirty share is in [0, 1], got {r}"
            );
        }
        self.dirty_target = ratio;
    }

    /// Applies changed settings on a running volume. The slot count and
    /// the replacement algorithm must not change. Leaving write-back with
    /// dirty blocks starts draining them: every dirty block is flushed,
    /// whatever the watermarks, while new writes follow the new mode.
    pub fn set_config(&mut self, cfg: CacheConfig, ctx: &mut TickCtx<'_>) {
        assert_eq!(
            cfg.capacity_blocks, self.cfg.capacity_blocks,
            "a running cache keeps its slot count"
        );
        assert_eq!(
            cfg.replacement, self.cfg.replacement,
            "a running cache keeps its replacement algorithm"
        );
        self.cfg = cfg;
        self.flushing = false;
        self.schedule_flushes(ctx.map, ctx.locks, ctx.jobs, false);
    }

    /// True while dirty blocks are left in a mode other than write-back:
    /// they are being flushed.
    pub fn draining(&self) -> bool {
        self.cfg.write_mode != WriteMode::Back && self.dirty_blocks > 0
    }

    /// Address space per device: the cache's slots, the whole volume on
    /// the backing device, nothing elsewhere.
    pub fn address_space(&self, device: usize, vol_blocks: u64) -> u64 {
        if device == self.pair.cache as usize {
            self.cfg.capacity_blocks as u64
        } else if device == self.pair.backing as usize {
            vol_blocks
        } else {
            0
        }
    }

    /// Blocks currently cached.
    pub fn cached_blocks(&self) -> usize {
        self.repl.len()
    }

    /// Cached blocks newer than their home copy.
    pub fn dirty_blocks(&self) -> u64 {
        self.dirty_blocks
    }

    /// True while the cache device is in service.
    pub fn in_service(&self) -> bool {
        self.in_service
    }

    /// Whether written data may have its only copy on `devices` (see
    /// [`crate::Policy::may_keep_sole_copies`]): only write-back keeps
    /// data newer than the backing device, on the cache device.
    pub fn may_keep_sole_copies(&self, devices: u8) -> bool {
        self.cfg.write_mode == WriteMode::Back && devices & (1 << self.pair.cache) != 0
    }

    /// Takes `device` out of service if it is the cache device (see
    /// [`crate::Policy::take_out_of_service`]); the backing device cannot
    /// be done without.
    pub fn take_out_of_service(&mut self, device: DeviceIndex) -> bool {
        if device == self.pair.cache {
            self.in_service = false;
            true
        } else {
            false
        }
    }

    /// Brings the cache's own state (slots, replacement, dirty count) in
    /// step with `block`'s entry changing from `now` to `target` after
    /// failed operations, and returns the entry to store: `target`, without
    /// a cache copy that `now` does not hold at the same slot (that slot
    /// may have been given to another block meanwhile).
    pub fn reconcile(&mut self, now: Entry, mut target: Entry) -> Entry {
        let cache = self.pair.cache;
        let held = now.valid_on(cache);
        let same_slot = held && target.valid_on(cache) && target.loc(cache) == now.loc(cache);
        if held && !same_slot {
            self.repl.remove(now.loc(cache));
            if now.dirty_on(cache) {
                self.uncount_dirty(now.loc(cache));
            }
        }
        if !same_slot && target.present & (1 << cache) != 0 {
            // A copy the decision had dropped (a write that replaced it
            // failed): its slot is gone, and the block is what the other
            // copies hold.
            target.drop_copy(cache);
        }
        if same_slot {
            match (now.dirty_on(cache), target.dirty_on(cache)) {
                (false, true) => {
                    // A flush that failed.
                    self.count_dirty(now.loc(cache));
                    self.flush_paused = true;
                }
                (true, false) => self.uncount_dirty(now.loc(cache)),
                _ => {}
            }
        }
        target
    }

    /// Serves a read. `admit_miss` says whether a miss may be admitted;
    /// `hit_to_cache` is asked, for clean hits only, whether the cache (true)
    /// or the home device (false) serves it. Dirty hits always use the cache.
    pub fn read(
        &mut self,
        block: u64,
        ctx: &mut Ctx<'_>,
        admit_miss: bool,
        hit_to_cache: &mut dyn FnMut() -> bool,
    ) -> Outcome {
        let CachePair { cache, backing } = self.pair;
        let e = ctx.map.get(block);
        if !self.in_service && e.valid_on(cache) && !e.dirty_on(cache) {
            if ctx.may_write {
                self.invalidate(block, ctx.map);
            }
            ctx.plan.client(backing, Op::Read, block);
            return Outcome::Hit(backing);
        }
        if e.valid_on(cache) {
            let served = if e.dirty_on(cache) || hit_to_cache() {
                self.repl.on_hit(e.loc(cache));
                ctx.plan.client(cache, Op::Read, e.loc(cache) as u64);
                cache
            } else {
                ctx.plan.client(backing, Op::Read, block);
                backing
            };
            return Outcome::Hit(served);
        }
        let r = ctx.plan.client(backing, Op::Read, block);
        if admit_miss && ctx.may_write {
            if let Some(slot) = self.admit(block, ctx.map, ctx.locks, ctx.jobs) {
                ctx.plan.copy(
                    Some(r),
                    (backing, block),
                    (cache, slot as u64),
                    Purpose::Admit,
                    self.cfg.fill_sync,
                );
            }
        }
        Outcome::Miss
    }

    /// Serves a write according to the write mode. When `allocate_miss` is
    /// false a write miss goes to the home device without taking a cache
    /// slot, whatever the mode (hits are handled as the mode says).
    pub fn write(&mut self, block: u64, ctx: &mut Ctx<'_>, allocate_miss: bool) -> Outcome {
        let CachePair { cache, backing } = self.pair;
        let e = ctx.map.get(block);
        let hit = e.valid_on(cache);
        let outcome = if hit {
            Outcome::Hit(cache)
        } else {
            Outcome::Miss
        };
        if !self.in_service {
            // The new data replaces any cached copy, dirty or not.
            self.invalidate(block, ctx.map);
            ctx.plan.client(backing, Op::Write, block);
            return outcome;
        }
        match self.cfg.write_mode {
            WriteMode::Through => {
                let slot = if hit {
                    self.repl.on_hit(e.loc(cache));
                    // Both copies get the new data (a block left dirty by
                    // write-back is clean after this write).
                    self.mark_clean(block, ctx.map);
                    Some(e.loc(cache))
                } else if allocate_miss {
                    self.admit(block, ctx.map, ctx.locks, ctx.jobs)
                } else {
                    None
                };
                if let Some(slot) = slot {
                    ctx.plan.client(cache, Op::Write, slot as u64);
                }
                ctx.plan.client(backing, Op::Write, block);
            }
            WriteMode::Around => {
                if hit {
                    if self.cfg.around_hit_updates {
                        self.repl.on_hit(e.loc(cache));
                        self.mark_clean(block, ctx.map);
                        ctx.plan.client(cache, Op::Write, e.loc(cache) as u64);
                    } else {
                        self.invalidate(block, ctx.map);
                    }
                }
                ctx.plan.client(backing, Op::Write, block);
            }
            WriteMode::Back => {
                let slot = if hit {
                    self.repl.on_hit(e.loc(cache));
                    Some(e.loc(cache))
                } else if allocate_miss {
                    self.admit(block, ctx.map, ctx.locks, ctx.jobs)
                } else {
                    None
                };
                match slot {
                    Some(slot) => {
                        ctx.plan.client(cache, Op::Write, slot as u64);
                        self.mark_dirty(block, ctx.map);
                    }
                    None => {
                        ctx.plan.client(backing, Op::Write, block);
                    }
                }
            }
        }
        // Write-back flushes above its watermark; other modes drain what
        // write-back left dirty.
        self.flush_paused = false;
        self.schedule_flushes(ctx.map, ctx.locks, ctx.jobs, false);
        outcome
    }

    /// Hints a coming access to the block whose entry is `e` (see
    /// [`crate::prefetch`]): its replacement state, when it is cached.
    #[inline]
    pub fn prefetch(&self, e: &Entry, stage: crate::prefetch::Stage) {
        if e.valid_on(self.pair.cache) {
            self.repl.prefetch(e.loc(self.pair.cache), stage);
        }
    }

    /// Notes a hit on the block in `slot` (replacement order).
    pub fn touch(&mut self, slot: u32) {
        self.repl.on_hit(slot);
    }

    /// Marks the cached copy of `block` newer than its home copy.
    pub fn mark_dirty(&mut self, block: u64, map: &mut PlacementMap) {
        let cache = self.pair.cache;
        let en = map.entry_mut(block);
        assert!(
            en.present & (1 << cache) != 0,
            "block {block} is not cached"
        );
        let slot = en.loc(cache);
        if en.dirty & (1 << cache) == 0 {
            en.dirty |= 1 << cache;
            self.count_dirty(slot);
        } else {
            // Rewritten: the newest write again.
            assert!(
                self.slot_dirty(slot),
                "block {block} is dirty in slot {slot}, which is not"
            );
            self.dirty_order.written(slot);
        }
    }

    /// Marks the cached copy of `block` as current at home too (the plan
    /// writes both copies).
    fn mark_clean(&mut self, block: u64, map: &mut PlacementMap) {
        let cache = self.pair.cache;
        let e = map.get(block);
        if e.dirty_on(cache) {
            map.entry_mut(block).dirty &= !(1 << cache);
            self.uncount_dirty(e.loc(cache));
        }
    }

    /// Drops the cached copy of `block` (which must be clean or about to be
    /// overwritten at home).
    pub fn invalidate(&mut self, block: u64, map: &mut PlacementMap) {
        let cache = self.pair.cache;
        let e = map.get(block);
        if e.valid_on(cache) {
            self.repl.remove(e.loc(cache));
            if e.dirty_on(cache) {
                self.uncount_dirty(e.loc(cache));
            }
            map.entry_mut(block).drop_copy(cache);
            map.normalize(block);
        }
    }

    /// Counts the copy in `slot` as newly dirty (written now).
    fn count_dirty(&mut self, slot: u32) {
        assert!(!self.slot_dirty(slot), "slot {slot} counted dirty twice");
        self.dirty_order.written(slot);
        self.dirty_blocks += 1;
        debug_assert_eq!(self.dirty_order.len() as u64, self.dirty_blocks);
    }

    /// Counts the copy in `slot` as no longer dirty.
    fn uncount_dirty(&mut self, slot: u32) {
        assert!(self.dirty_blocks > 0, "dirty block count underflow");
        self.dirty_order.remove(slot);
        self.dirty_blocks -= 1;
    }

    /// Whether the copy in `slot` is counted dirty.
    fn slot_dirty(&self, slot: u32) -> bool {
        self.dirty_order.contains(slot)
    }

    /// Finds a slot for `block`, evicting a clean, unlocked victim if the
    /// cache is full. Returns `None` when every candidate is dirty or busy
    /// (then flushes are queued so that later admissions succeed).
    pub fn admit(
        &mut self,
        block: u64,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) -> Option<u32> {
        if !self.in_service {
            return None;
        }
        let cache = self.pair.cache;
        let admitted = {
            let m: &PlacementMap = map;
            // The map's dirty bit first: in a cache full of dirty data
            // most candidates fail it, and it is cheaper than the lock
            // table's lookup.
            self.repl.admit(block, &mut |v| {
                !m.get(v).dirty_on(cache) && !locks.is_locked(v)
            })
        };
        let Some(a) = admitted else {
            if self.cfg.write_mode == WriteMode::Back {
                self.schedule_flushes(map, locks, jobs, true);
            }
            return None;
        };
        assert!(!self.slot_dirty(a.slot), "slot {} evicted dirty", a.slot);
        if let Some(v) = a.victim {
            map.entry_mut(v).drop_copy(cache);
            map.normalize(v);
        }
        let en = map.entry_mut(block);
        en.present |= 1 << cache;
        en.stale &= !(1 << cache);
        en.set_loc(cache, a.slot);
        Some(a.slot)
    }

    /// Queues flushes of the least recently written dirty blocks while dirty data is above
    /// the high watermark (until it falls below the low one), or now when
    /// `force` (an admission found only dirty victims).
    pub fn schedule_flushes(
        &mut self,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
        force: bool,
    ) {
        // A cache out of service is not read to flush: its dirty blocks
        // stay at risk until overwritten (or until a restart finds the
        // device working).
        if !self.in_service || self.flush_paused {
            return;
        }
        if self.cfg.write_mode != WriteMode::Back {
            self.schedule_drain(map, locks, jobs);
            return;
        }
        let cap = self.cfg.capacity_blocks as f64;
        let target = self.dirty_target.unwrap_or(1.0);
        let high = self.cfg.dirty_high_ratio.min(target);
        let low = self.cfg.dirty_low_ratio.min(target);
        if self.dirty_blocks as f64 > high * cap {
            self.flushing = true;
        } else if self.dirty_blocks as f64 <= low * cap {
            self.flushing = false;
        }
        // Refill the flush queue in batches: scan only once it has drained
        // to half, so writes do not rescan the cold end one by one.
        let refill_at = self.cfg.flush_max_inflight / 2;
        if !(self.flushing || force) || self.flushes_queued > refill_at {
            return;
        }
        self.queue_oldest(map, locks, jobs);
    }

    /// Queues flushes of every dirty block, at most `flush_max_inflight`
    /// at once (a mode other than write-back with dirty blocks left).
    fn schedule_drain(
        &mut self,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) {
        if self.dirty_blocks > 0 {
            self.queue_oldest(map, locks, jobs);
        }
    }

    /// Queues flushes of the least recently written dirty blocks until
    /// `flush_max_inflight` are queued. Those already queued or busy (a
    /// bounded few) are passed over; a busy one is found again by a later
    /// call (a completion, a write or a tick).
    fn queue_oldest(&mut self, map: &mut PlacementMap, locks: &dyn LockView, jobs: &mut Vec<Job>) {
        self.scan.clear();
        let want = self
            .cfg
            .flush_max_inflight
            .saturating_sub(self.flushes_queued) as usize;
        self.scan
            .extend(self.dirty_order.oldest_first().take(want * 8 + 16));
        for i in 0..self.scan.len() {
            if self.flushes_queued >= self.cfg.flush_max_inflight {
                break;
            }
            let slot = self.scan[i];
            let b = self.repl.block_at(slot);
            let e = map.get(b);
            assert!(
                e.dirty_on(self.pair.cache) && e.loc(self.pair.cache) == slot,
                "slot {slot} is counted dirty but block {b} is not dirty there"
            );
            self.queue_flush(b, map, locks, jobs);
        }
    }

    /// Queues a flush of `block` if it is dirty, not queued already and
    /// not busy.
    fn queue_flush(
        &mut self,
        block: u64,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) {
        let e = map.get(block);
        if e.dirty_on(self.pair.cache)
            && e.flags & FLAG_FLUSH_QUEUED == 0
            && !locks.is_locked(block)
        {
            map.entry_mut(block).flags |= FLAG_FLUSH_QUEUED;
            self.flushes_queued += 1;
            jobs.push(Job::one(block, JOB_FLUSH));
        }
    }

    /// Plans a flush job: copy the dirty cached block home and mark it clean.
    pub fn start_flush(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        let e = ctx.map.get(job.block);
        if e.flags & FLAG_FLUSH_QUEUED != 0 {
            ctx.map.entry_mut(job.block).flags &= !FLAG_FLUSH_QUEUED;
        }
        let CachePair { cache, backing } = self.pair;
        if e.valid_on(cache) && e.dirty_on(cache) {
            ctx.plan.copy(
                None,
                (cache, e.loc(cache) as u64),
                (backing, job.block),
                Purpose::Flush,
                false,
            );
            ctx.map.entry_mut(job.block).dirty &= !(1 << cache);
            self.uncount_dirty(e.loc(cache));
        }
        ctx.map.normalize(job.block);
    }

    /// Lets flushing resume after a failed flush (each write and tick does).
    pub fn resume_flushing(&mut self) {
        self.flush_paused = false;
    }

    /// Bookkeeping when a flush completes; keeps flushing if needed.
    pub fn finish_flush(&mut self, ctx: &mut TickCtx<'_>) {
        assert!(self.flushes_queued > 0, "more flushes finished than queued");
        self.flushes_queued -= 1;
        self.schedule_flushes(ctx.map, ctx.locks, ctx.jobs, false);
    }

    /// Rebuilds the replacement state and dirty count from a saved map.
    pub fn restore(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        let mut placed = Vec::new();
        let mut dirty = 0;
        let mut flagged = Vec::new();
        let cache = self.pair.cache;
        for (block, e) in map.iter() {
            if e.dirty_on(cache) && !e.valid_on(cache) {
                return Err(format!(
                    "block {block} is dirty in a cache slot it does not hold"
                ));
            }
            if e.valid_on(cache) {
                placed.push((e.loc(cache), block));
                dirty += u64::from(e.dirty_on(cache));
            }
            if e.flags != 0 {
                flagged.push(block);
            }
        }
        // Recency is not saved; restore in slot order so that a restart is
        // deterministic.
        placed.sort_unstable();
        self.repl.restore(&placed)?;
        self.dirty_order.clear();
        self.dirty_blocks = 0;
        for &(slot, block) in &placed {
            if map.get(block).dirty_on(cache) {
                self.count_dirty(slot);
            }
        }
        assert_eq!(self.dirty_blocks, dirty, "dirty copies counted by slot");
        for b in flagged {
            map.entry_mut(b).flags = 0;
            map.normalize(b);
        }
        Ok(())
    }

    /// Places `block` in a free slot without I/O.
    pub fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        let cache = self.pair.cache;
        if map.get(block).valid_on(cache) {
            return true;
        }
        if !self.in_service {
            return false;
        }
        match self.repl.admit(block, &mut |_| false) {
            Some(a) => {
                let en = map.entry_mut(block);
                en.present |= 1 << cache;
                en.set_loc(cache, a.slot);
                true
            }
            None => false,
        }
    }
}

/// The per-request decisions of a caching policy and the controller that
/// tunes them. A [`CachePolicy`] asks its scheduler and does the rest.
pub trait Scheduler: Send {
    /// Registry name of the policy.
    fn name(&self) -> &'static str;
    /// Whether a read miss is admitted into the cache now (asked once per
    /// miss, so a scheduler may draw at random).
    fn admit_read_miss(&mut self) -> bool {
        true
    }
    /// Whether a write miss may take a cache slot now.
    fn allocate_write_miss(&self) -> bool {
        true
    }
    /// Asked for each clean read hit: serve it from the cache (true) or
    /// from the home device (false).
    fn hit_to_cache(&mut self) -> bool {
        true
    }
    /// How often [`Scheduler::on_tick`] wants to run, ns.
    fn tick_interval_ns(&self) -> Option<u64> {
        None
    }
    /// Feeds the controller one interval's observation; `pair` says which
    /// of its devices are the cache and the backing device.
    fn on_tick(&mut self, obs: &Observation, pair: CachePair) {
        let _ = (obs, pair);
    }
    /// The share of the cache that dirty blocks should be flushed down to
    /// now, when the scheduler wants fewer than the flusher's watermarks
    /// keep (a dirty block's reads can only be served by the cache); None:
    /// the watermarks alone. Asked after every tick.
    fn dirty_target_ratio(&self) -> Option<f64> {
        None
    }
    /// Controller variables for time series.
    fn state(&self, out: &mut Vec<(&'static str, f64)>) {
        let _ = out;
    }
    /// The scheduler's parameters a running volume can change.
    fn live_params(&self) -> &'static [&'static str] {
        &[]
    }
    /// Re-reads the parameters of [`Scheduler::live_params`] from a whole
    /// table that has passed the config file's checks.
    fn reconfigure(&mut self, p: &Params) -> Result<(), PolicyError> {
        let _ = p;
        Ok(())
    }
}

/// A caching policy: a [`CacheCore`] driven by a [`Scheduler`].
pub struct CachePolicy<S> {
    core: CacheCore,
    sched: S,
    vol: VolumeSpec,
}

impl<S: Scheduler> CachePolicy<S> {
    /// Caching over `vol` with the cache settings in `p`, scheduled by `sched`.
    pub fn build(p: &Params, vol: &VolumeSpec, sched: S) -> Result<Self, PolicyError> {
        let pair = CachePair::of(vol, sched.name())?;
        Ok(CachePolicy {
            core: CacheCore::new(CacheConfig::from_params(p, vol, pair, sched.name())?, pair),
            sched,
            vol: vol.clone(),
        })
    }
}

impl<S: Scheduler> Policy for CachePolicy<S> {
    fn name(&self) -> &str {
        self.sched.name()
    }
    fn address_space(&self, device: usize) -> u64 {
        self.core.address_space(device, self.vol.num_blocks)
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        match access.op {
            Op::Read => {
                let admit = self.sched.admit_read_miss();
                let sched = &mut self.sched;
                self.core
                    .read(access.block, ctx, admit, &mut || sched.hit_to_cache())
            }
            Op::Write => {
                let allocate = self.sched.allocate_write_miss();
                self.core.write(access.block, ctx, allocate)
            }
        }
    }
    fn prefetch(&self, _block: u64, entry: &Entry, stage: crate::prefetch::Stage) {
        self.core.prefetch(entry, stage);
    }
    fn start_job(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        if job.kind == JOB_FLUSH {
            self.core.start_flush(job, ctx);
        }
    }
    fn finish_job(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        if job.kind == JOB_FLUSH {
            self.core.finish_flush(ctx);
        }
    }
    fn tick_interval_ns(&self) -> Option<u64> {
        let drain = self.core.draining().then_some(DRAIN_TICK_NS);
        self.sched.tick_interval_ns().or(drain)
    }
    fn live_params(&self) -> Vec<&'static str> {
        let mut names = CACHE_LIVE_PARAMS.to_vec();
        names.extend_from_slice(self.sched.live_params());
        names
    }
    fn reconfigure(&mut self, p: &Params, ctx: &mut TickCtx<'_>) -> Result<(), PolicyError> {
        let cfg = CacheConfig::from_params(p, &self.vol, self.core.pair, self.sched.name())?;
        self.sched.reconfigure(p)?;
        self.core.set_config(cfg, ctx);
        Ok(())
    }
    fn on_tick(&mut self, obs: &Observation, ctx: &mut TickCtx<'_>) {
        self.sched.on_tick(obs, self.core.pair);
        self.core.set_dirty_target(self.sched.dirty_target_ratio());
        self.core.resume_flushing();
        self.core
            .schedule_flushes(ctx.map, ctx.locks, ctx.jobs, false);
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        let mut out = Vec::new();
        self.sched.state(&mut out);
        out.push(("cached_blocks", self.core.cached_blocks() as f64));
        out.push(("dirty_blocks", self.core.dirty_blocks() as f64));
        out
    }
    fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        self.core.warm(block, map)
    }
    fn trim(&mut self, block: u64, ctx: &mut Ctx<'_>) {
        self.core.invalidate(block, ctx.map);
    }
    fn repair(&mut self, block: u64, target: Entry, ctx: &mut TickCtx<'_>) {
        let target = self.core.reconcile(ctx.map.get(block), target);
        ctx.map.set(block, target);
    }
    fn take_out_of_service(&mut self, device: DeviceIndex, _ctx: &mut TickCtx<'_>) -> bool {
        self.core.take_out_of_service(device)
    }
    fn may_keep_sole_copies(&self, devices: u8) -> bool {
        self.core.may_keep_sole_copies(devices)
    }
    fn restore(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        self.core.restore(map)
    }
    fn layout(&self) -> &str {
        "cache"
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
