//! TICA (Salkhordeh, Ebrahimi and Asadi, "Reliable Write-Back for I/O
//! Caching in Heterogeneous SSDs"): a three-level write-back cache of a
//! DRAM, a read-optimized SSD (RO) and a write-optimized SSD (WO) over a
//! home disk. The machinery TICA-EF, TICA-WED and TICA-A share.
//!
//! - **Reads** look in DRAM, then RO, then WO. A miss is read from home
//!   into the DRAM's read partition (LRU). An SSD hit updates the SSDs'
//!   LRU order and is not promoted.
//! - **Writes** keep two copies: one in the DRAM's write partition and
//!   one on WO, both written before the acknowledgement; older copies are
//!   dropped (the paper also TRIMs them). A mover job then copies the DRAM
//!   copy to RO and frees the DRAM page, leaving the page dirty on RO and
//!   WO. When the write partition is full and cannot grow, the paper
//!   stalls the write until the mover frees a page; here the write goes
//!   to RO and WO directly, which costs the client one RO write, as the
//!   stall would, and keeps the read partition.
//! - **SSD space.** WO holds every dirty page and, under WED, pages
//!   evicted from DRAM (clean); RO holds dirty pages the mover has
//!   moved. When either is over capacity, the SSDs' LRU page leaves both:
//!   a clean one at once, a dirty one after a flush job has written it
//!   home (from RO, the faster reader).
//! - **DRAM read-partition victims** are dropped (EF) or copied to WO by a
//!   demotion job (WED); TICA-A chooses per window ([`adapt`]). Every
//!   victim enters the evicted queue (EQ, a ghost as large as the DRAM)
//!   that TICA-A's capacity identifier reads.
//! - **Partition sizes** follow Algorithm 1: the write partition starts at
//!   `write_share` of the DRAM, grows by 2^-(ws - def) pages when a write
//!   finds it full, and shrinks by 2^(ws - def) (not below def) when a read
//!   miss finds the read partition full.
//!
//! No single device failure loses acknowledged data: a dirty page always
//! has two copies (DRAM + WO, or RO + WO), except after a failed write
//! leaves one. As in `crate::hybrid`, each device keeps `reserve_blocks`
//! slots back, so that a page can arrive before its victim's job has run.
//!
//! The same machine runs the paper's baselines ([`Ssds::Mirrored`]): a
//! DRAM over two like SSDs kept as a RAID-1 pair. A write is written to
//! both SSDs (no dirty data in DRAM, so no single point of failure, as
//! the paper modifies uCache), a DRAM victim a baseline admits is copied
//! to both, reads of a mirrored page alternate between the two, and a
//! baseline's [`rules::Rules`] decide admissions, cached writes and
//! second rounds.

pub mod adapt;
mod degraded;
pub mod rules;
mod upkeep;

use std::collections::BTreeSet;

use crate::hybrid::ghost::Ghost;
use crate::map::{BlockMap, Entry, PlacementMap};
use crate::policy::{Ctx, DeviceRole, LockView, PolicyError, VolumeSpec};
use crate::slots::SlotPool;
use crate::types::{DeviceIndex, Job, Op, Outcome};
use adapt::{Adaptive, Mode, Seen};
use rules::Rules;

/// Job kind: copy a page from the DRAM's write partition to RO.
pub const JOB_MOVE: u8 = 1;
/// Job kind: copy a DRAM read-partition victim to WO (WED).
pub const JOB_DEMOTE: u8 = 2;
/// Job kind: write a dirty SSD victim home, then drop its copies.
pub const JOB_FLUSH: u8 = 3;
/// Job kind: free the slots of dirty copies a write replaced, once the
/// write has finished (the job waits for the block's lock).
pub const JOB_RELEASE: u8 = 4;
/// Job kind: rebalance once the block's lock is free, the block itself
/// then a possible victim (queued when every victim rebalancing could
/// take was locked, so that an idle cache is back within its sizes).
pub const JOB_REBALANCE: u8 = 5;

/// Level indices: DRAM, the read-optimized SSD, the write-optimized SSD.
const DRAM: usize = 0;
const RO: usize = 1;
const WO: usize = 2;
/// Read lookup order.
const READ_ORDER: [usize; 3] = [DRAM, RO, WO];
/// Candidates looked at before giving up on finding an unlocked victim.
const VICTIM_SCAN: usize = 64;

/// How a TICA cache chooses where DRAM victims go.
#[derive(Debug)]
pub enum Choice {
    /// Always one mode (TICA-EF, TICA-WED).
    Fixed(Mode),
    /// TICA-A's controller.
    Adaptive(Adaptive),
    /// A baseline's rules (uCache, S-RAC).
    Rules(Box<dyn Rules>),
}

/// How the two SSDs are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ssds {
    /// TICA: a read-optimized SSD (device 1) and a write-optimized one
    /// (device 2) holding different copies.
    ReadWrite,
    /// The baselines: two like SSDs as a RAID-1 pair, every SSD copy on
    /// both.
    Mirrored,
}

/// What is queued or under way for a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// Nothing: a clean DRAM page, or a page on the SSDs only.
    Idle,
    /// A dirty DRAM page whose move to RO is not queued yet.
    MoveWaiting,
    /// A dirty DRAM page whose move to RO is queued.
    MoveQueued,
    /// A clean DRAM victim whose copy to WO is queued (WED).
    DemoteQueued,
    /// A dirty SSD victim whose flush is queued or under way.
    Evicting,
    /// A move or demotion under way: the DRAM copy stays until it
    /// finishes, so that a dirty page keeps two written copies throughout.
    Copying,
}

#[derive(Clone, Copy, Debug)]
struct Page {
    seq: u64,
    status: Status,
    /// Levels holding a current copy (bit per level).
    on: u8,
    /// Whether the copies are newer than home.
    dirty: bool,
    /// Read again in DRAM since it was filled.
    reused: bool,
    /// Read on the SSDs since it arrived there.
    ssd_hit: bool,
}

impl Page {
    fn has(&self, level: usize) -> bool {
        self.on & (1 << level) != 0
    }

    /// Levels counting the page as resident (none while it is leaving).
    fn held(&self) -> u8 {
        match self.status {
            Status::Evicting | Status::DemoteQueued => 0,
            _ => self.on,
        }
    }
}

/// Counters for reports and time series.
#[derive(Clone, Copy, Debug, Default)]
pub struct TicaCounters {
    /// Pages the mover copied from DRAM to RO.
    pub moves: u64,
    /// DRAM victims copied to WO (WED).
    pub demotions: u64,
    /// DRAM victims dropped (EF).
    pub drops: u64,
    /// Dirty SSD victims written home.
    pub flushes: u64,
    /// Writes that found the write partition full and went to RO and WO.
    pub partition_bypasses: u64,
    /// Writes that found no room on the cache devices, or that a
    /// baseline's rules sent around them, and went home.
    pub home_writes: u64,
    /// SSD victims a baseline's rules gave a second round.
    pub readds: u64,
}

/// A TICA cache (see the module documentation).
pub struct Tica {
    name: &'static str,
    choice: Choice,
    ssds: Ssds,
    /// Which SSD of a mirrored pair serves the next read.
    read_turn: usize,
    levels: [SlotPool; 3],
    home: DeviceIndex,
    vol_blocks: u64,
    pages: BlockMap<Page>,
    /// Clean DRAM pages by (recency, block): the read partition.
    dram_clean: BTreeSet<(u64, u64)>,
    /// Idle pages on the SSDs only, by (recency, block).
    ssd_lru: BTreeSet<(u64, u64)>,
    /// Idle dirty pages with an RO copy, by (recency, block).
    ro_dirty: BTreeSet<(u64, u64)>,
    /// Dirty DRAM pages waiting for a move, by (recency, block).
    move_waiting: BTreeSet<(u64, u64)>,
    /// Dirty DRAM pages: the write partition's occupancy.
    dram_dirty: u64,
    /// Queued jobs that will take a slot on each level.
    promised: [u64; 3],
    /// The write partition's size and its default, pages.
    write_partition: f64,
    write_partition_default: f64,
    /// Pages recently evicted from DRAM's read partition.
    evicted: Ghost,
    /// Slots to free when a block's next job finishes: the dirty copies a
    /// write replaced (until the write has finished, a driver's saved
    /// entry may still name them).
    releases: BlockMap<Vec<(usize, u32)>>,
    /// A [`JOB_REBALANCE`] is queued.
    rebalance_queued: bool,
    seq: u64,
    counters: TicaCounters,
    /// Levels taken out of service (bit per level): their copies are
    /// dropped, their slots never reused, and writes go home.
    dead: u8,
}

impl Tica {
    /// A TICA cache over `vol`, whose first three devices are caches (DRAM,
    /// RO-SSD, WO-SSD, or DRAM and a mirrored SSD pair) over a home device.
    pub fn build(
        name: &'static str,
        choice: Choice,
        ssds: Ssds,
        p: &crate::Params,
        vol: &VolumeSpec,
    ) -> Result<Tica, PolicyError> {
        let err = |message: String| PolicyError::Volume {
            policy: name.into(),
            message,
        };
        let caches: Vec<DeviceIndex> = vol.with_role(DeviceRole::Cache).collect();
        let home = vol.home();
        let Some(home) = home.filter(|&h| caches == [0, 1, 2] && h == 3) else {
            let ssds_named = match ssds {
                Ssds::ReadWrite => "cache (read-optimized SSD), cache (write-optimized SSD)",
                Ssds::Mirrored => "cache (SSD), cache (its mirror)",
            };
            return Err(err(format!(
                "needs four devices with roles cache (DRAM), {ssds_named}, home; the volume has {}",
                vol.devices
                    .iter()
                    .map(|d| d.role.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let e = crate::policies::param_err(name);
        let reserve = p.u64_in("reserve_blocks", 1, 1, 1 << 20).map_err(&e)?;
        // A mirrored pair takes writes on the SSDs: DRAM holds clean pages.
        let write_share = match ssds {
            Ssds::ReadWrite => p.f64_in("write_share", 0.1, 0.0, 1.0).map_err(&e)?,
            Ssds::Mirrored => 0.0,
        };
        let mut levels = Vec::new();
        for d in 0..3u8 {
            let l = SlotPool::new(d, vol.devices[d as usize].capacity_blocks, reserve);
            if l.capacity == 0 {
                return Err(err(format!(
                    "device {d} has {} blocks, not more than reserve_blocks = {reserve}",
                    l.physical
                )));
            }
            levels.push(l);
        }
        let levels: [SlotPool; 3] = levels.try_into().expect("three levels");
        let def = (write_share * levels[DRAM].capacity as f64).floor();
        Ok(Tica {
            name,
            choice,
            ssds,
            read_turn: RO,
            levels,
            home,
            vol_blocks: vol.num_blocks,
            pages: BlockMap::default(),
            dram_clean: BTreeSet::new(),
            ssd_lru: BTreeSet::new(),
            ro_dirty: BTreeSet::new(),
            move_waiting: BTreeSet::new(),
            dram_dirty: 0,
            promised: [0; 3],
            write_partition: def,
            write_partition_default: def,
            evicted: Ghost::default(),
            releases: BlockMap::default(),
            rebalance_queued: false,
            seq: 0,
            counters: TicaCounters::default(),
            dead: 0,
        })
    }

    /// The mode in force now.
    pub fn mode(&self) -> Mode {
        match &self.choice {
            Choice::Fixed(m) => *m,
            Choice::Adaptive(a) => a.mode(),
            Choice::Rules(_) => Mode::Ef,
        }
    }

    /// Times TICA-A changed mode.
    pub fn switches(&self) -> u64 {
        match &self.choice {
            Choice::Adaptive(a) => a.switches,
            Choice::Fixed(_) | Choice::Rules(_) => 0,
        }
    }

    /// Blocks the policy addresses on `device`.
    pub fn address_space(&self, device: usize) -> u64 {
        if device == self.home as usize {
            return self.vol_blocks;
        }
        self.levels
            .iter()
            .find(|l| l.device as usize == device)
            .map_or(0, |l| l.physical as u64)
    }

    fn dev(&self, level: usize) -> DeviceIndex {
        self.levels[level].device
    }

    /// The levels in service holding a current copy in `e` (bit per
    /// level): the dirty copies when any is dirty, else every valid one.
    fn levels_of(&self, e: &Entry) -> u8 {
        let current = crate::safe::current_copies(e);
        let on = (0..3).fold(0, |m, i| {
            m | (u8::from(current & (1 << self.dev(i)) != 0) << i)
        });
        on & !self.dead
    }

    /// The device out of service holding `e`'s only current copy, if
    /// its newest data is nowhere else.
    fn at_risk_copy(&self, e: &Entry) -> Option<DeviceIndex> {
        let current = crate::safe::current_copies(e);
        (e.dirty != 0 && self.levels_of(e) == 0)
            .then(|| {
                (0..3)
                    .map(|l| self.dev(l))
                    .find(|&d| current & (1 << d) != 0)
            })
            .flatten()
    }

    /// Whether `e` has a cache copy newer than home.
    fn dirty_of(&self, e: &Entry) -> bool {
        (0..3).any(|i| e.dirty_on(self.dev(i)))
    }

    /// Adds a page to the ordering structures and counts.
    fn adopt(&mut self, b: u64, mut page: Page) {
        if page.status == Status::Idle && page.dirty && page.has(DRAM) {
            page.status = Status::MoveWaiting;
        }
        self.count(b, &page, true);
        self.pages.insert(b, page);
    }

    /// Removes a page from the ordering structures and counts (not from
    /// the map, not its slots).
    fn forget(&mut self, b: u64) -> Option<Page> {
        let page = self.pages.remove(&b)?;
        self.count(b, &page, false);
        Some(page)
    }

    /// Enters (`add`) or leaves `page`'s ordering sets and counts.
    fn count(&mut self, b: u64, page: &Page, add: bool) {
        let key = (page.seq, b);
        let set = match (page.status, page.dirty, page.has(DRAM)) {
            (Status::Idle, false, true) => Some(&mut self.dram_clean),
            (Status::Idle, _, false) => Some(&mut self.ssd_lru),
            (Status::MoveWaiting, _, _) => Some(&mut self.move_waiting),
            _ => None,
        };
        if let Some(set) = set {
            let changed = if add {
                set.insert(key)
            } else {
                set.remove(&key)
            };
            assert!(changed, "page {b} ordered twice or not at all");
        }
        if page.status == Status::Idle && page.dirty && page.has(RO) && !page.has(DRAM) {
            let changed = if add {
                self.ro_dirty.insert(key)
            } else {
                self.ro_dirty.remove(&key)
            };
            assert!(changed, "dirty RO page {b} ordered twice or not at all");
        }
        let delta = |n: &mut u64| {
            if add {
                *n += 1
            } else {
                *n -= 1
            }
        };
        for (i, l) in self.levels.iter_mut().enumerate() {
            if page.held() & (1 << i) != 0 {
                delta(&mut l.resident);
            }
        }
        let promises = match page.status {
            Status::MoveQueued => 1 << RO,
            Status::DemoteQueued => self.demote_targets(),
            _ => 0,
        };
        for (level, promised) in self.promised.iter_mut().enumerate() {
            if promises & (1 << level) != 0 {
                delta(promised);
            }
        }
        if page.dirty && page.has(DRAM) {
            delta(&mut self.dram_dirty);
        }
    }

    /// Re-reads `b`'s copies from the map into its page, with `status`.
    fn refresh(&mut self, b: u64, map: &PlacementMap, status: Status) {
        let old = self.forget(b);
        let e = map.get(b);
        let on = self.levels_of(&e);
        if on == 0 {
            return;
        }
        self.adopt(
            b,
            Page {
                seq: old.map_or_else(|| self.seq, |p| p.seq),
                status,
                on,
                dirty: self.dirty_of(&e),
                reused: old.is_some_and(|p| p.reused),
                ssd_hit: old.is_some_and(|p| p.ssd_hit),
            },
        );
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The read partition's size, pages.
    fn read_partition(&self) -> u64 {
        self.levels[DRAM]
            .capacity
            .saturating_sub(self.write_partition as u64)
    }

    /// Counts a request for TICA-A, or shows it to a baseline's rules.
    fn note(&mut self, b: u64, op: Op, seen: Seen) {
        match &mut self.choice {
            Choice::Adaptive(a) => a.note(seen),
            Choice::Rules(r) => r.note(b, op),
            Choice::Fixed(_) => {}
        }
    }

    /// Whether a clean DRAM victim goes to the SSDs: under WED, or when a
    /// baseline's rules admit it.
    fn admits(&mut self, b: u64) -> bool {
        let reused = self.pages.get(&b).is_some_and(|p| p.reused);
        if let Choice::Rules(r) = &mut self.choice {
            return r.admit_victim(b, reused);
        }
        self.mode() == Mode::Wed
    }

    /// Whether a client write of `b` is cached (a baseline's rules may
    /// send it home).
    fn caches_write(&mut self, b: u64) -> bool {
        match &mut self.choice {
            Choice::Rules(r) => r.cache_write(b),
            _ => true,
        }
    }

    /// The levels an admitted DRAM victim is copied to: WO, or both SSDs
    /// of a mirrored pair.
    fn demote_levels(&self) -> &'static [usize] {
        match self.ssds {
            Ssds::ReadWrite => &[WO],
            Ssds::Mirrored => &[RO, WO],
        }
    }

    /// [`Tica::demote_levels`] as a bit per level.
    fn demote_targets(&self) -> u8 {
        self.demote_levels().iter().fold(0, |m, &l| m | 1 << l)
    }

    /// The level a read of a page on the levels `on` goes to: the first in
    /// read order, or, for a page on both SSDs of a mirrored pair, each in
    /// turn (RAID-1 reads are balanced).
    fn read_level(&mut self, on: u8) -> Option<usize> {
        let pair = 1 << RO | 1 << WO;
        if self.ssds == Ssds::Mirrored && on & (1 << DRAM) == 0 && on & pair == pair {
            self.read_turn = RO + WO - self.read_turn;
            return Some(self.read_turn);
        }
        READ_ORDER.into_iter().find(|&l| on & (1 << l) != 0)
    }

    /// Serves a read of `b`.
    pub fn read(&mut self, b: u64, ctx: &mut Ctx<'_>) -> Outcome {
        let e = ctx.map.get(b);
        let on = self.levels_of(&e);
        let eq_hit = on & (1 << DRAM) == 0 && self.evicted.take(b);
        self.note(
            b,
            Op::Read,
            Seen {
                read: true,
                dram_hit: on & (1 << DRAM) != 0,
                eq_hit,
                cache_hit: on != 0,
            },
        );
        if let Some(level) = self.read_level(on) {
            let dev = self.dev(level);
            ctx.plan.client(dev, Op::Read, e.loc(dev) as u64);
            if self.pages.contains_key(&b) {
                let seq = self.next_seq();
                self.update(b, |p| {
                    p.seq = seq;
                    if level == DRAM {
                        p.reused = true;
                    } else {
                        p.ssd_hit = true;
                    }
                });
            }
            return Outcome::Hit(dev);
        }
        if let Some(dev) = self.at_risk_copy(&e) {
            // The newest data is only on a device out of service.
            ctx.plan.client(dev, Op::Read, e.loc(dev) as u64);
            return Outcome::Hit(dev);
        }
        let r = ctx.plan.client(self.home, Op::Read, b);
        if !ctx.may_write || self.dead & (1 << DRAM) != 0 {
            return Outcome::Miss;
        }
        if self.dram_clean.len() as u64 >= self.read_partition() {
            let over = self.write_partition - self.write_partition_default;
            self.write_partition =
                (self.write_partition - over.exp2()).max(self.write_partition_default);
        }
        let Some(slot) = self.levels[DRAM].alloc() else {
            return Outcome::Miss;
        };
        let dev = self.dev(DRAM);
        crate::slots::fill_from_home(ctx.map, ctx.plan, r, (self.home, b), (dev, slot));
        let seq = self.next_seq();
        self.adopt(
            b,
            Page {
                seq,
                status: Status::Idle,
                on: 1 << DRAM,
                dirty: false,
                reused: false,
                ssd_hit: false,
            },
        );
        self.rebalance(ctx.map, ctx.locks, ctx.jobs);
        Outcome::Miss
    }

    /// Applies `f` to a page, keeping the structures in step.
    fn update(&mut self, b: u64, f: impl FnOnce(&mut Page)) {
        let mut page = self.forget(b).expect("a cached page");
        f(&mut page);
        self.adopt(b, page);
    }

    /// Serves a write of `b`: two copies, DRAM and WO when the write
    /// partition has room, else RO and WO, else home only.
    pub fn write(&mut self, b: u64, ctx: &mut Ctx<'_>) -> Outcome {
        self.note(b, Op::Write, Seen::default());
        let old = self.pages.get(&b).copied();
        // A write cancels a queued demotion or flush of the page (the job
        // finds the page changed and does nothing).
        let status = match old.map(|p| p.status) {
            Some(Status::MoveQueued) => Status::MoveQueued,
            _ => Status::Idle,
        };
        let in_dram = old.is_some_and(|p| p.dirty && p.has(DRAM));
        let dram_room =
            self.ssds == Ssds::ReadWrite && (in_dram || self.write_partition_has_room());
        let cached = self.caches_write(b);
        let e = ctx.map.get(b);
        let pairs: &[[usize; 2]] = if self.dead != 0 || !cached {
            // Degraded (write-through), or sent home by a baseline's rules.
            &[]
        } else if dram_room {
            &[[DRAM, WO], [RO, WO]]
        } else {
            &[[RO, WO]]
        };
        let seq = self.next_seq();
        self.forget(b);
        // A dirty copy is never overwritten in place: a crash during the
        // write could leave two dirty copies holding different versions.
        let placed = pairs
            .iter()
            .find_map(|pair| self.take_slots(&e, pair, false));
        let keep = placed.map_or(0, |(p, slots)| p & !self.relocated(&e, &slots));
        // Replaced dirty copies stay named by the saved entry until this
        // write finishes: their slots are freed after it.
        let later = e.dirty != 0 && self.levels_of(&e) & !keep != 0;
        self.drop_copies_except(b, ctx.map, keep, later);
        if later {
            ctx.jobs.push(Job::one(b, JOB_RELEASE));
        }
        let Some((pair, slots)) = placed else {
            self.counters.home_writes += 1;
            ctx.plan.client(self.home, Op::Write, b);
            self.rebalance(ctx.map, ctx.locks, ctx.jobs);
            return Outcome::Miss;
        };
        if pair & (1 << DRAM) == 0 {
            self.counters.partition_bypasses += 1;
        }
        for (level, slot) in slots {
            let dev = self.dev(level);
            let en = ctx.map.entry_mut(b);
            en.present |= 1 << dev;
            en.dirty |= 1 << dev;
            en.set_loc(dev, slot);
            ctx.plan.client(dev, Op::Write, slot as u64);
        }
        let first = if pair & (1 << DRAM) != 0 { DRAM } else { RO };
        // A queued move still applies to a page written again in DRAM.
        let status = if first == DRAM { status } else { Status::Idle };
        self.adopt(
            b,
            Page {
                seq,
                status,
                on: pair,
                dirty: true,
                reused: false,
                ssd_hit: false,
            },
        );
        self.rebalance(ctx.map, ctx.locks, ctx.jobs);
        if old.is_some() {
            Outcome::Hit(self.dev(first))
        } else {
            Outcome::Miss
        }
    }

    /// Whether the DRAM write partition takes one more page, after growing
    /// it by 2^-(ws - def) pages if it was full (Algorithm 1, line 6).
    fn write_partition_has_room(&mut self) -> bool {
        if self.dram_dirty >= self.write_partition as u64 {
            let over = self.write_partition - self.write_partition_default;
            self.write_partition =
                (self.write_partition + (-over).exp2()).min(self.levels[DRAM].capacity as f64);
        }
        self.dram_dirty < self.write_partition as u64
    }

    /// Slots for a copy on each of one or two `levels`: the block's own
    /// where `e` holds one (a dirty one only if `reuse_dirty`), else a free
    /// one; `None` (nothing taken) when a level has none free. The levels
    /// (bit per level) and a (level, slot) per level, in order.
    fn take_slots(
        &mut self,
        e: &Entry,
        levels: &[usize],
        reuse_dirty: bool,
    ) -> Option<(u8, [(usize, u32); 2])> {
        assert!((1..=2).contains(&levels.len()), "one or two levels");
        let own =
            |dev: DeviceIndex| e.present & (1 << dev) != 0 && (reuse_dirty || !e.dirty_on(dev));
        let mut got = [(levels[0], 0u32); 2];
        for (k, &level) in levels.iter().enumerate() {
            let dev = self.dev(level);
            let slot = if own(dev) {
                Some(e.loc(dev))
            } else {
                self.levels[level].alloc()
            };
            let Some(slot) = slot else {
                if k == 1 && !own(self.dev(levels[0])) {
                    self.levels[levels[0]].release(got[0].1);
                }
                return None;
            };
            got[k] = (level, slot);
        }
        Some((levels.iter().fold(0, |m, &l| m | 1 << l), got))
    }

    /// The levels (bit per level) where `e` holds a copy at another slot
    /// than `slots` gives.
    fn relocated(&self, e: &Entry, slots: &[(usize, u32); 2]) -> u8 {
        slots.iter().fold(0, |m, &(level, slot)| {
            let dev = self.dev(level);
            let moved = e.present & (1 << dev) != 0 && e.loc(dev) != slot;
            m | u8::from(moved) << level
        })
    }

    /// Drops every cache copy of `b` outside the levels `keep` (bit per
    /// level) and frees its slot, now or, with `later`, when `b`'s next job
    /// finishes; the page must be forgotten already.
    fn drop_copies_except(&mut self, b: u64, map: &mut PlacementMap, keep: u8, later: bool) {
        let e = map.get(b);
        for i in 0..3 {
            let dev = self.dev(i);
            if keep & (1 << i) == 0 && e.present & (1 << dev) != 0 {
                if later {
                    self.releases.entry(b).or_default().push((i, e.loc(dev)));
                } else {
                    self.levels[i].release(e.loc(dev));
                }
                map.entry_mut(b).drop_copy(dev);
            }
        }
        map.normalize(b);
    }

    /// The first page of `set` no lock holds.
    fn unlocked(set: &BTreeSet<(u64, u64)>, locks: &dyn LockView) -> Option<u64> {
        set.iter()
            .take(VICTIM_SCAN)
            .map(|&(_, b)| b)
            .find(|&b| !locks.is_locked(b))
    }

    /// Whether `level` has room for one more page, counting queued jobs.
    fn room(&self, level: usize) -> bool {
        let l = &self.levels[level];
        l.resident + self.promised[level] < l.capacity
    }

    /// Whether DRAM holds more than its read partition or its capacity.
    fn dram_over(&self) -> bool {
        self.dram_clean.len() as u64 > self.read_partition()
            || self.levels[DRAM].resident > self.levels[DRAM].capacity
    }

    /// The pages an SSD level's pressure evicts, least recent first: for
    /// RO under TICA the idle dirty pages with an RO copy, else the pages
    /// on the SSDs only.
    fn ssd_victims(&self, level: usize) -> &BTreeSet<(u64, u64)> {
        if level == RO && self.ssds == Ssds::ReadWrite {
            &self.ro_dirty
        } else {
            &self.ssd_lru
        }
    }

    fn over(&self, level: usize) -> bool {
        let l = &self.levels[level];
        l.resident + self.promised[level] > l.capacity
    }

    /// Restores the invariants: DRAM within its partitions, each SSD
    /// within its capacity, and moves queued for dirty DRAM pages. Where
    /// every victim it could take is locked, it tries again when the
    /// coldest one's lock is free (a [`JOB_REBALANCE`]).
    pub fn rebalance(&mut self, map: &mut PlacementMap, locks: &dyn LockView, jobs: &mut Vec<Job>) {
        for _ in 0..4 * (self.pages.len() + 16) {
            let acted = self.fit_dram(map, locks, jobs)
                || (self.over(WO) && self.evict_ssd(WO, map, locks, jobs))
                || (self.over(RO) && self.evict_ssd(RO, map, locks, jobs))
                || self.schedule_move(map, locks, jobs);
            if !acted {
                self.retry_when_unlocked(jobs);
                return;
            }
        }
        panic!("rebalancing did not settle");
    }

    /// When DRAM or an SSD is still over its size after rebalancing (its
    /// victims were locked), queues a [`JOB_REBALANCE`] on the coldest
    /// victim, unless one is queued.
    fn retry_when_unlocked(&mut self, jobs: &mut Vec<Job>) {
        if self.rebalance_queued {
            return;
        }
        let set = if self.dram_over() {
            &self.dram_clean
        } else if self.over(WO) {
            self.ssd_victims(WO)
        } else if self.over(RO) {
            self.ssd_victims(RO)
        } else {
            return;
        };
        if let Some(&(_, b)) = set.first() {
            self.rebalance_queued = true;
            jobs.push(Job::one(b, JOB_REBALANCE));
        }
    }

    /// Evicts one read-partition page when DRAM is over a partition.
    fn fit_dram(
        &mut self,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) -> bool {
        let Some(b) = self
            .dram_over()
            .then(|| Self::unlocked(&self.dram_clean, locks))
            .flatten()
        else {
            return false;
        };
        self.evicted.push(b, self.levels[DRAM].capacity as usize);
        if self.admits(b) && self.dead & self.demote_targets() == 0 {
            self.update(b, |p| p.status = Status::DemoteQueued);
            jobs.push(Job::one(b, JOB_DEMOTE));
        } else {
            self.counters.drops += 1;
            self.forget(b);
            self.drop_copies_except(b, map, 0, false);
        }
        true
    }

    /// Evicts the SSDs' LRU page (for RO's pressure under TICA, the LRU
    /// page with an RO copy): a clean one now, a dirty one after a flush.
    /// Under rules that re-add, a victim read on the SSDs since it arrived
    /// goes back to the most recent end instead, once.
    fn evict_ssd(
        &mut self,
        level: usize,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) -> bool {
        let readds = matches!(&self.choice, Choice::Rules(r) if r.readds());
        let (mut b, mut readded) = (None, false);
        for _ in 0..VICTIM_SCAN {
            let Some(candidate) = Self::unlocked(self.ssd_victims(level), locks) else {
                break;
            };
            if !(readds && self.pages[&candidate].ssd_hit) {
                b = Some(candidate);
                break;
            }
            let seq = self.next_seq();
            self.update(candidate, |p| {
                p.seq = seq;
                p.ssd_hit = false;
            });
            self.counters.readds += 1;
            readded = true;
        }
        let Some(b) = b else {
            // Only re-added pages (acted: their marks are spent), or none.
            return readded;
        };
        if self.pages[&b].dirty {
            self.update(b, |p| p.status = Status::Evicting);
            jobs.push(Job::one(b, JOB_FLUSH));
        } else {
            self.forget(b);
            self.drop_copies_except(b, map, 0, false);
        }
        true
    }

    /// Queues the move of the oldest waiting dirty DRAM page, making room
    /// on RO first when it has none.
    fn schedule_move(
        &mut self,
        map: &mut PlacementMap,
        locks: &dyn LockView,
        jobs: &mut Vec<Job>,
    ) -> bool {
        let Some(b) = Self::unlocked(&self.move_waiting, locks) else {
            return false;
        };
        if self.dead & (1 << RO) != 0 {
            return false;
        }
        if !self.room(RO) {
            return self.evict_ssd(RO, map, locks, jobs);
        }
        self.update(b, |p| p.status = Status::MoveQueued);
        jobs.push(Job::one(b, JOB_MOVE));
        true
    }
}
