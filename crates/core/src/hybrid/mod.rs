//! Hybrid DRAM + NVRAM buffer caches in front of a home device (a disk
//! array): the machinery Hibachi, Hybrid-LRU and Hybrid-ARC share.
//!
//! A *clean cache* holds pages equal to their home copy, in DRAM or, when
//! it is allowed to grow past DRAM, in borrowed NVRAM. A *dirty cache*
//! holds pages newer than home, in NVRAM only (the non-volatile device).
//! Each policy is a set of [`Rules`]: how clean victims are chosen (LFU
//! with aging, or LRU), whether ghost caches adapt the clean cache's
//! desired size, whether runs of consecutive dirty pages are flushed
//! together, whether a frequently read dirty page outlives a clean one,
//! and whether read-hot clean pages move from NVRAM to DRAM.
//!
//! A device's *capacity* is its blocks less `reserve_blocks` (1 by
//! default): a page arriving at a full cache takes a reserved slot, and
//! the eviction it causes runs as a job (a dirty victim must be flushed
//! before its slot is reused, and only a job may hold the victim's lock).
//! Between one access and the next, once the jobs have run, every device
//! holds at most its capacity: in zero-time trace replay the caches behave
//! exactly as if the victim had been evicted before the page arrived. When
//! the reserve is used up (many accesses before the jobs run, in real
//! time), a read miss is not cached and a write goes straight home.

mod degraded;
pub mod ghost;
pub mod runs;
mod upkeep;

use std::collections::BTreeSet;

use crate::map::{BlockMap, Entry, PlacementMap};
use crate::policy::{Ctx, DeviceRole, LockView, PolicyError, VolumeSpec};
use crate::slots::SlotPool as Level;
use crate::types::{DeviceIndex, Job, Op, Outcome};
use ghost::Ghost;
use runs::Runs;

/// Job kind: flush a run of dirty NVRAM pages home, then evict or keep
/// each as the queuing decision said.
pub const JOB_FLUSH: u8 = 1;
/// Job kind: move one clean page between DRAM and NVRAM.
pub const JOB_MIGRATE: u8 = 2;

/// How the ghost caches move the clean cache's desired size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adaptation {
    /// The Hibachi paper: a clean ghost hit adds one page; a dirty ghost
    /// hit gives the dirty cache two, or twice |clean ghost| / |dirty
    /// ghost| when the clean ghost is not the smaller.
    Paper,
    /// The authors' simulator (ARC's rule): a clean ghost hit adds
    /// max(1, |dirty ghost| / |clean ghost|), a dirty ghost hit takes
    /// max(1, |clean ghost| / |dirty ghost|).
    Code,
}

/// What distinguishes the members of the family.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// Registry name.
    pub name: &'static str,
    /// Clean victims by least frequency with aging (Hibachi), else LRU.
    pub clean_by_frequency: bool,
    /// Ghost caches adapting the clean cache's desired size, if any.
    pub adaptation: Option<Adaptation>,
    /// Flush the longest run of consecutive dirty pages when it is longer
    /// than this (Hibachi's Right Transformation).
    pub run_threshold: Option<u64>,
    /// Keep the LRU dirty page (flushed, clean) when it is read more often
    /// than the least frequent clean page, evicting that one instead.
    pub keep_frequent_dirty: bool,
    /// Move a clean page read in NVRAM to DRAM when it is read more often
    /// than DRAM's least frequent page.
    pub promote_read_hits: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Clean,
    Dirty,
}

/// What happens to a page when its queued flush finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    Nothing,
    Evict,
    Clean,
}

#[derive(Clone, Copy, Debug)]
struct Page {
    freq: u32,
    seq: u64,
    kind: Kind,
    /// The level the page belongs to (0 DRAM, 1 NVRAM); while a
    /// migration is queued, the one it is moving to.
    level: usize,
    after: After,
    /// A migration is queued and has not started.
    migrating: bool,
}

/// Counters for reports and time series.
#[derive(Clone, Copy, Debug, Default)]
pub struct HybridCounters {
    /// Pages flushed home.
    pub flushed_pages: u64,
    /// Flush jobs (a run counts once).
    pub flushes: u64,
    /// Clean pages moved between DRAM and NVRAM.
    pub migrations: u64,
    /// Frequency halvings.
    pub agings: u64,
}

/// A hybrid DRAM + NVRAM cache (see the module documentation).
pub struct Hybrid {
    rules: Rules,
    /// Level 0 is DRAM (absent when the volume has one cache device),
    /// level 1 NVRAM.
    levels: [Option<Level>; 2],
    home: DeviceIndex,
    vol_blocks: u64,
    pages: BlockMap<Page>,
    /// Clean pages by level, ordered by (frequency or 0, recency, block).
    clean: [BTreeSet<(u32, u64, u64)>; 2],
    /// Dirty pages not queued for flushing, by (recency, block).
    dirty: BTreeSet<(u64, u64)>,
    runs: Runs,
    ghost_clean: Ghost,
    ghost_dirty: Ghost,
    /// The clean cache's desired size, pages.
    clean_target: f64,
    seq: u64,
    freq_sum: u64,
    aging_mean_frequency: f64,
    queued_clean: u64,
    /// A read-hot NVRAM page to move up at the next rebalance.
    pending_promotion: Option<u64>,
    /// Slots to free when a block's migration finishes (its source).
    releases: BlockMap<(usize, u32)>,
    /// Queued migrations into each level, not yet started (each will take
    /// a free slot there).
    promised: [u64; 2],
    counters: HybridCounters,
}

const DRAM: usize = 0;
const NVRAM: usize = 1;
/// Candidates looked at before giving up on finding an unlocked victim.
const VICTIM_SCAN: usize = 64;

impl Hybrid {
    /// A hybrid cache over `vol`: the last device with the cache role is
    /// NVRAM, the one before it (if any) DRAM, over the home device.
    pub fn build(rules: Rules, p: &crate::Params, vol: &VolumeSpec) -> Result<Hybrid, PolicyError> {
        let err = |message: String| PolicyError::Volume {
            policy: rules.name.into(),
            message,
        };
        let caches: Vec<DeviceIndex> = vol.with_role(DeviceRole::Cache).collect();
        let home = vol
            .home()
            .ok_or_else(|| err("needs a home device (the disk array)".into()))?;
        if caches.is_empty() || caches.len() > 2 || caches.iter().any(|&c| c > home) {
            return Err(err(format!(
                "needs one or two cache devices (DRAM, then NVRAM) before the home device; the volume has roles {}",
                vol.devices.iter().map(|d| d.role.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        let e = crate::policies::param_err(rules.name);
        let reserve = p.u64_in("reserve_blocks", 1, 1, 1 << 20).map_err(&e)?;
        let aging_mean_frequency = p
            .f64_in("aging_mean_frequency", 5.5, 1.0, 1e9)
            .map_err(&e)?;
        let level = |d: DeviceIndex| -> Result<Level, PolicyError> {
            let l = Level::new(d, vol.devices[d as usize].capacity_blocks, reserve);
            if l.capacity == 0 {
                return Err(err(format!(
                    "device {d} has {} blocks, not more than reserve_blocks = {reserve}",
                    l.physical
                )));
            }
            Ok(l)
        };
        let nvram = level(*caches.last().expect("a cache"))?;
        let dram = if caches.len() == 2 {
            Some(level(caches[0])?)
        } else {
            None
        };
        let dram_capacity = dram.as_ref().map_or(0, |l| l.capacity);
        Ok(Hybrid {
            rules,
            levels: [dram, Some(nvram)],
            home,
            vol_blocks: vol.num_blocks,
            pages: BlockMap::default(),
            clean: [BTreeSet::new(), BTreeSet::new()],
            dirty: BTreeSet::new(),
            runs: Runs::default(),
            ghost_clean: Ghost::default(),
            ghost_dirty: Ghost::default(),
            clean_target: dram_capacity as f64,
            seq: 0,
            freq_sum: 0,
            aging_mean_frequency,
            queued_clean: 0,
            pending_promotion: None,
            releases: BlockMap::default(),
            promised: [0, 0],
            counters: HybridCounters::default(),
        })
    }

    fn level(&self, i: usize) -> &Level {
        self.levels[i].as_ref().expect("the level exists")
    }

    fn level_mut(&mut self, i: usize) -> &mut Level {
        self.levels[i].as_mut().expect("the level exists")
    }

    fn capacity(&self, i: usize) -> u64 {
        self.levels[i].as_ref().map_or(0, |l| l.capacity)
    }

    fn resident(&self, i: usize) -> u64 {
        self.levels[i].as_ref().map_or(0, |l| l.resident)
    }

    fn total_capacity(&self) -> u64 {
        self.capacity(DRAM) + self.capacity(NVRAM)
    }

    /// Pages in the clean cache, including those whose flush will leave
    /// them clean.
    pub fn clean_pages(&self) -> u64 {
        (self.clean[DRAM].len() + self.clean[NVRAM].len()) as u64 + self.queued_clean
    }

    /// Dirty pages not queued for flushing.
    pub fn dirty_pages(&self) -> u64 {
        self.dirty.len() as u64
    }

    /// The clean cache's desired size, pages.
    pub fn clean_target(&self) -> f64 {
        self.clean_target
    }

    /// Blocks the policy addresses on `device`.
    pub fn address_space(&self, device: usize) -> u64 {
        if device == self.home as usize {
            return self.vol_blocks;
        }
        self.levels
            .iter()
            .flatten()
            .find(|l| l.device as usize == device)
            .map_or(0, |l| l.physical as u64)
    }

    fn clean_key(&self, b: u64, p: &Page) -> (u32, u64, u64) {
        let f = if self.rules.clean_by_frequency {
            p.freq
        } else {
            0
        };
        (f, p.seq, b)
    }

    /// Adds a page to the ordering structures and counts.
    fn adopt(&mut self, b: u64, page: Page) {
        match (page.kind, page.after) {
            (Kind::Clean, _) => {
                let k = self.clean_key(b, &page);
                self.clean[page.level].insert(k);
            }
            (Kind::Dirty, After::Nothing) => {
                self.dirty.insert((page.seq, b));
                self.runs.insert(b);
            }
            (Kind::Dirty, After::Clean) => self.queued_clean += 1,
            (Kind::Dirty, After::Evict) => {}
        }
        if page.after != After::Evict {
            self.level_mut(page.level).resident += 1;
        }
        self.promised[page.level] += page.migrating as u64;
        self.freq_sum += page.freq as u64;
        self.pages.insert(b, page);
    }

    /// Removes a page from the ordering structures and counts (not from
    /// the map, not its slots).
    fn forget(&mut self, b: u64) -> Option<Page> {
        let page = self.pages.remove(&b)?;
        match (page.kind, page.after) {
            (Kind::Clean, _) => {
                let k = self.clean_key(b, &page);
                assert!(
                    self.clean[page.level].remove(&k),
                    "clean page {b} unordered"
                );
            }
            (Kind::Dirty, After::Nothing) => {
                assert!(
                    self.dirty.remove(&(page.seq, b)),
                    "dirty page {b} unordered"
                );
                assert!(self.runs.remove(b), "dirty page {b} in no run");
            }
            (Kind::Dirty, After::Clean) => self.queued_clean -= 1,
            (Kind::Dirty, After::Evict) => {}
        }
        if page.after != After::Evict {
            self.level_mut(page.level).resident -= 1;
        }
        self.promised[page.level] -= page.migrating as u64;
        self.freq_sum -= page.freq as u64;
        Some(page)
    }

    /// Applies `f` to a page, keeping the structures in step.
    fn update(&mut self, b: u64, f: impl FnOnce(&mut Page)) {
        let mut page = self.forget(b).expect("a cached page");
        f(&mut page);
        self.adopt(b, page);
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The device and slot holding `b`'s current copy, per the map.
    fn copy_of(&self, e: &Entry) -> Option<(usize, DeviceIndex, u32)> {
        (0..2).find_map(|i| {
            let l = self.levels[i].as_ref()?;
            e.valid_on(l.device).then(|| (i, l.device, e.loc(l.device)))
        })
    }

    /// Serves a read of `b`.
    pub fn read(&mut self, b: u64, ctx: &mut Ctx<'_>) -> Outcome {
        let e = ctx.map.get(b);
        if let Some((_, dev, slot)) = self.copy_of(&e) {
            ctx.plan.client(dev, Op::Read, slot as u64);
            if self
                .pages
                .get(&b)
                .is_some_and(|p| p.after == After::Nothing)
            {
                let seq = self.next_seq();
                self.update(b, |p| {
                    p.freq += 1;
                    if p.kind == Kind::Clean {
                        p.seq = seq;
                    }
                });
                self.age_if_due();
                if ctx.may_write {
                    self.promote_if_hot(b);
                    self.rebalance(ctx.map, ctx.locks, ctx.jobs);
                }
            }
            return Outcome::Hit(dev);
        }
        self.note_ghost(b);
        let r = ctx.plan.client(self.home, Op::Read, b);
        if !ctx.may_write {
            return Outcome::Miss;
        }
        let level = if self.levels[DRAM]
            .as_ref()
            .is_some_and(|l| !l.free.is_empty())
        {
            DRAM
        } else {
            NVRAM
        };
        let Some(slot) = self.level_mut(level).alloc() else {
            return Outcome::Miss;
        };
        let dev = self.level(level).device;
        crate::slots::fill_from_home(ctx.map, ctx.plan, r, (self.home, b), (dev, slot));
        let seq = self.next_seq();
        self.adopt(
            b,
            Page {
                freq: 1,
                seq,
                kind: Kind::Clean,
                level,
                after: After::Nothing,
                migrating: false,
            },
        );
        self.rebalance(ctx.map, ctx.locks, ctx.jobs);
        Outcome::Miss
    }

    /// Serves a write of `b`: into NVRAM, dirty.
    pub fn write(&mut self, b: u64, ctx: &mut Ctx<'_>) -> Outcome {
        let nvram = self.level(NVRAM).device;
        let e = ctx.map.get(b);
        let seq = self.next_seq();
        if let Some(page) = self.pages.get(&b).copied() {
            if e.valid_on(nvram) && !page.migrating && !self.is_dead(NVRAM) {
                // In place: a dirty page (queued for a flush or not) or a
                // clean page borrowing NVRAM.
                ctx.plan.client(nvram, Op::Write, e.loc(nvram) as u64);
                ctx.map.entry_mut(b).dirty |= 1 << nvram;
                if page.after == After::Nothing {
                    self.update(b, |p| {
                        p.kind = Kind::Dirty;
                        p.seq = seq;
                    });
                }
                self.rebalance(ctx.map, ctx.locks, ctx.jobs);
                return Outcome::Hit(nvram);
            }
        } else {
            self.note_ghost(b);
        }
        let hit = self.pages.contains_key(&b);
        let old = self.forget(b);
        let Some(slot) = self.level_mut(NVRAM).alloc() else {
            // No room even in the reserve: write home, drop any copy.
            self.drop_copies(b, ctx.map);
            ctx.plan.client(self.home, Op::Write, b);
            self.rebalance(ctx.map, ctx.locks, ctx.jobs);
            return Outcome::Miss;
        };
        self.drop_copies(b, ctx.map);
        let en = ctx.map.entry_mut(b);
        en.present |= 1 << nvram;
        en.dirty |= 1 << nvram;
        en.set_loc(nvram, slot);
        ctx.plan.client(nvram, Op::Write, slot as u64);
        self.adopt(
            b,
            Page {
                freq: old.map_or(0, |p| p.freq),
                seq,
                kind: Kind::Dirty,
                level: NVRAM,
                after: After::Nothing,
                migrating: false,
            },
        );
        self.rebalance(ctx.map, ctx.locks, ctx.jobs);
        if hit {
            Outcome::Hit(nvram)
        } else {
            Outcome::Miss
        }
    }

    /// Drops every cached copy of `b` from the map and frees its slots
    /// (the page must be forgotten already, its lock held).
    fn drop_copies(&mut self, b: u64, map: &mut PlacementMap) {
        let e = map.get(b);
        for i in 0..2 {
            let Some(dev) = self.levels[i].as_ref().map(|l| l.device) else {
                continue;
            };
            if e.present & (1 << dev) != 0 {
                let slot = e.loc(dev);
                self.level_mut(i).release(slot);
                map.entry_mut(b).drop_copy(dev);
            }
        }
        map.normalize(b);
    }

    /// A ghost hit moves the clean cache's desired size.
    fn note_ghost(&mut self, b: u64) {
        let Some(how) = self.rules.adaptation else {
            return;
        };
        let (cg, dg) = (self.ghost_clean.len() as f64, self.ghost_dirty.len() as f64);
        let delta = if self.ghost_clean.take(b) {
            match how {
                Adaptation::Paper => 1.0,
                Adaptation::Code => (dg / cg.max(1.0)).max(1.0),
            }
        } else if self.ghost_dirty.take(b) {
            -match how {
                Adaptation::Paper if cg < dg => 2.0,
                Adaptation::Paper => 2.0 * cg / dg.max(1.0),
                Adaptation::Code => (cg / dg.max(1.0)).max(1.0),
            }
        } else {
            return;
        };
        let s = self.total_capacity() as f64;
        let lo = s - self.capacity(NVRAM) as f64;
        self.clean_target = (self.clean_target + delta).clamp(lo, s);
    }

    /// LFU-aging: halves every frequency when their mean passes the
    /// threshold.
    fn age_if_due(&mut self) {
        if !self.rules.clean_by_frequency
            || (self.freq_sum as f64) <= self.aging_mean_frequency * self.pages.len() as f64
        {
            return;
        }
        self.counters.agings += 1;
        let blocks: Vec<u64> = self.pages.keys().copied().collect();
        for b in blocks {
            self.update(b, |p| p.freq = p.freq.div_ceil(2));
        }
    }

    /// The least frequent (or least recent) clean page that may be
    /// evicted now, on `levels`.
    fn clean_victim(&self, levels: &[usize], locks: &dyn LockView) -> Option<(u64, u32)> {
        levels
            .iter()
            .filter_map(|&i| {
                self.clean[i]
                    .iter()
                    .take(VICTIM_SCAN)
                    .find(|&&(_, _, b)| !locks.is_locked(b) && !self.pages[&b].migrating)
                    .copied()
            })
            .min()
            .map(|(f, _, b)| (b, f))
    }

    /// Evicts a clean page now (its copy is equal to home).
    fn evict_clean(&mut self, b: u64, map: &mut PlacementMap) {
        self.forget(b).expect("a cached page");
        self.drop_copies(b, map);
        self.ghost_clean.push(b, self.total_capacity() as usize);
    }

    /// Queues a flush of the dirty pages `start..start + len`, after which
    /// `evict` leaves and the others stay, clean.
    fn queue_flush(&mut self, start: u64, len: u64, evict: Option<u64>, jobs: &mut Vec<Job>) {
        for b in start..start + len {
            let after = if Some(b) == evict {
                After::Evict
            } else {
                After::Clean
            };
            self.update(b, |p| p.after = after);
        }
        self.counters.flushes += 1;
        jobs.push(Job {
            block: start,
            blocks: u32::try_from(len).expect("a run fits a job"),
            kind: JOB_FLUSH,
        });
    }

    /// Frees one page's worth of the whole cache; false when nothing can
    /// be evicted now.
    fn evict_one(
        &mut self,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) -> bool {
        let clean_victim = self.clean_victim(&[DRAM, NVRAM], locks);
        let over_target = self.clean_pages() as f64 > self.clean_target;
        if let (true, Some((c, _))) = (over_target || self.dirty.is_empty(), clean_victim) {
            self.evict_clean(c, map);
            return true;
        }
        self.evict_dirty(clean_victim, map, jobs)
    }

    /// The dirty side's eviction: a long run, or the LRU dirty page (kept,
    /// clean, in place of a less frequent clean page, if the rules say so).
    fn evict_dirty(
        &mut self,
        clean_victim: Option<(u64, u32)>,
        map: &mut PlacementMap,
        jobs: &mut Vec<Job>,
    ) -> bool {
        if let (Some(t), Some((start, len))) = (self.rules.run_threshold, self.runs.longest()) {
            if len > t {
                let evict = (start..start + len)
                    .min_by_key(|b| (self.pages[b].freq, self.pages[b].seq))
                    .expect("a run has pages");
                self.queue_flush(start, len, Some(evict), jobs);
                return true;
            }
        }
        let Some(&(_, d)) = self.dirty.first() else {
            return false;
        };
        if let (true, Some((c, f))) = (self.rules.keep_frequent_dirty, clean_victim) {
            if self.pages[&d].freq > f {
                self.evict_clean(c, map);
                self.queue_flush(d, 1, None, jobs);
                return true;
            }
        }
        self.queue_flush(d, 1, Some(d), jobs);
        true
    }

    /// Whether a migration into level `to` would find a slot free.
    fn can_move_to(&self, to: usize) -> bool {
        self.levels[to]
            .as_ref()
            .is_some_and(|l| l.free.len() as u64 > self.promised[to])
    }

    /// Queues a move of clean page `b` to level `to` (which has a slot
    /// free for it: [`Hybrid::can_move_to`]).
    fn queue_migrate(&mut self, b: u64, to: usize, jobs: &mut Vec<Job>) {
        assert!(
            self.can_move_to(to),
            "no slot free for a move to level {to}"
        );
        self.update(b, |p| {
            p.level = to;
            p.migrating = true;
        });
        jobs.push(Job::one(b, JOB_MIGRATE));
    }

    /// Right Reaction: a clean page read in NVRAM more often than DRAM's
    /// least frequent page moves up (DRAM's excess then moves down).
    fn promote_if_hot(&mut self, b: u64) {
        let p = self.pages[&b];
        if !self.rules.promote_read_hits || p.kind != Kind::Clean || p.level != NVRAM || p.migrating
        {
            return;
        }
        let Some(dram) = self.levels[DRAM].as_ref() else {
            return;
        };
        let coldest = self.clean[DRAM].first().map_or(0, |k| k.0);
        if dram.resident < dram.capacity || p.freq > coldest {
            self.pending_promotion = Some(b);
        }
    }

    /// Restores the invariants: the whole cache within its capacity, then
    /// each device within its own, clean pages preferring DRAM.
    pub fn rebalance(&mut self, map: &mut PlacementMap, locks: &dyn LockView, jobs: &mut Vec<Job>) {
        if let Some(b) = self.pending_promotion.take() {
            let movable = self
                .pages
                .get(&b)
                .is_some_and(|p| p.kind == Kind::Clean && !p.migrating && p.level == NVRAM);
            if movable && self.can_move_to(DRAM) {
                self.queue_migrate(b, DRAM, jobs);
            }
        }
        for _ in 0..4 * (self.pages.len() + 16) {
            if self.resident(DRAM) + self.resident(NVRAM) > self.total_capacity() {
                if !self.evict_one(map, locks, jobs) {
                    return;
                }
                continue;
            }
            if !self.fit_levels(map, locks, jobs) {
                return;
            }
        }
        panic!("rebalancing did not settle");
    }

    /// One step of fitting each device to its capacity; false when
    /// nothing is left to do (or nothing can be done now).
    fn fit_levels(
        &mut self,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) -> bool {
        let has_dram = self.levels[DRAM].is_some();
        let (dram_over, dram_room) = (
            self.resident(DRAM) > self.capacity(DRAM),
            has_dram && self.resident(DRAM) < self.capacity(DRAM),
        );
        let nvram_over = self.resident(NVRAM) > self.capacity(NVRAM);
        let nvram_room = self.resident(NVRAM) < self.capacity(NVRAM);
        if dram_over {
            let Some((c, _)) = self.clean_victim(&[DRAM], locks) else {
                return false;
            };
            if nvram_room && self.can_move_to(NVRAM) {
                self.queue_migrate(c, NVRAM, jobs);
            } else {
                self.evict_clean(c, map);
            }
            return true;
        }
        let hottest_up = self.clean[NVRAM]
            .iter()
            .rev()
            .take(VICTIM_SCAN)
            .find(|&&(_, _, b)| !locks.is_locked(b) && !self.pages[&b].migrating)
            .map(|k| k.2);
        if nvram_over {
            match (dram_room && self.can_move_to(DRAM), hottest_up) {
                (true, Some(b)) => self.queue_migrate(b, DRAM, jobs),
                _ => {
                    if let Some((c, _)) = self.clean_victim(&[NVRAM], locks) {
                        self.evict_clean(c, map);
                    } else if !self.evict_dirty(None, map, jobs) {
                        return false;
                    }
                }
            }
            return true;
        }
        if let (true, Some(b)) = (dram_room && self.can_move_to(DRAM), hottest_up) {
            self.queue_migrate(b, DRAM, jobs);
            return true;
        }
        false
    }
}
