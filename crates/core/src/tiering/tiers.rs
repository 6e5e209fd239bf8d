//! Where tiering policies keep segments: each segment of the volume is in
//! one class, and this module plans the moves between classes as jobs over
//! the segment's blocks. Shared by HeMem, MOST and the other tiering
//! policies, so that each of them only decides *which* segment moves.
//!
//! Classes (MOST §3.1):
//! - [`Class::Capacity`]: the tiered class on the capacity device;
//! - [`Class::Performance`]: the tiered class on the performance device;
//! - [`Class::Mirrored`]: a copy on each device, each subpage clean,
//!   invalid on the performance device or invalid on the capacity device
//!   (MOST §3.2.4).
//!
//! Layout. The capacity device is the volume's home: it holds every block
//! at its own number, and a block without a placement-map entry is there.
//! A segment on the performance device has a slot there (`slot x
//! segment_blocks + subpage` is each block's location), and its blocks'
//! map entries say which copy is current, in the map's own terms, so the
//! engine's journal makes them crash-safe as it does cache entries:
//!
//! | state of a block                    | present | dirty | stale |
//! |-------------------------------------|---------|-------|-------|
//! | capacity class (no entry)           | C       |       |       |
//! | performance class                   | P, C    | P     |       |
//! | mirrored, clean                     | P, C    |       |       |
//! | mirrored, invalid on P              | P, C    |       | P     |
//! | mirrored, invalid on C              | P, C    | P     |       |
//!
//! "Dirty on P" is what a single copy on the performance device means: the
//! capacity device's space for the block holds nothing current. That space
//! stays reserved (the home layout), so the volume is as large as the
//! capacity device and the performance device adds speed, not capacity.
//! Policies account capacity as MOST does instead ([`Tiers::used_segments`]
//! counts each segment once and each mirrored segment twice), treating the
//! volume as the hierarchy's total capacity.
//!
//! A block of a performance or mirrored segment may also have no copy on
//! the performance device (never copied there, or trimmed); it is then read
//! from the capacity device, and a write puts it at its location.

use crate::map::{BlockMap, Entry, PlacementMap};
use crate::policy::{Ctx, DeviceRole, PolicyError, VolumeSpec};
use crate::safe::current_copies;
use crate::types::{DeviceIndex, Job, Op, Purpose};

use super::budget::Direction;

/// Which class a segment is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// One copy, on the capacity device.
    Capacity,
    /// One copy, on the performance device.
    Performance,
    /// A copy on each device.
    Mirrored,
}

/// A class change, as a job's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Move {
    /// Capacity class to performance class: copy every block up.
    Promote = 1,
    /// Performance or mirrored class to capacity class: copy the blocks
    /// only the performance copy holds down, free the slot.
    Demote = 2,
    /// Into the mirrored class: make both copies of every block current.
    Mirror = 3,
    /// Mirrored class to performance class: drop the capacity copy (only
    /// when every subpage of the performance copy is valid; else demote).
    Unmirror = 4,
    /// Rewrite every invalid subpage of a mirrored segment from its valid
    /// copy.
    Clean = 5,
}

impl Move {
    /// The move a job's kind names.
    pub fn of_kind(kind: u8) -> Option<Move> {
        Some(match kind {
            1 => Move::Promote,
            2 => Move::Demote,
            3 => Move::Mirror,
            4 => Move::Unmirror,
            5 => Move::Clean,
            _ => return None,
        })
    }

    /// The direction the move's bytes are counted in.
    pub fn direction(self) -> Direction {
        match self {
            Move::Promote => Direction::Promote,
            Move::Demote | Move::Unmirror => Direction::Demote,
            Move::Mirror => Direction::Mirror,
            Move::Clean => Direction::Clean,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Placed {
    class: Class,
    slot: u32,
    /// A move is queued or running.
    busy: bool,
}

/// Segment classes, performance-device slots and the moves between them.
#[derive(Clone, Debug)]
pub struct Tiers {
    perf: DeviceIndex,
    home: DeviceIndex,
    segment_blocks: u32,
    num_blocks: u64,
    /// Segments with a slot on the performance device.
    placed: BlockMap<Placed>,
    free_slots: Vec<u32>,
    slots: u32,
    mirrored: u32,
    /// One bit per segment: written or read since the volume started.
    touched: Vec<u64>,
    touched_count: u64,
    /// One bit per segment: written since the volume started (or since a
    /// discard covered it whole). The first write allocates (MOST §3.2.2).
    written: Vec<u64>,
    /// Mirrored segments with an invalid subpage, in segment order.
    unclean: std::collections::BTreeSet<u64>,
    /// Blocks copied by moves, per direction.
    moved_blocks: [u64; Direction::COUNT],
}

impl Tiers {
    /// The tiers of `vol` for policy `name`: the first device is the
    /// performance device, the home device the capacity device; segments
    /// of `segment_blocks` blocks.
    pub fn new(name: &str, vol: &VolumeSpec, segment_blocks: u32) -> Result<Tiers, PolicyError> {
        let err = |message: String| PolicyError::Volume {
            policy: name.into(),
            message,
        };
        let home = vol
            .home()
            .ok_or_else(|| err("needs a home (capacity) device".into()))?;
        if vol.devices.len() != 2 || home != 1 {
            return Err(err(format!(
                "tiers a performance device over a home device: needs 2 devices, the second the home, the volume has {}",
                vol.devices.len()
            )));
        }
        if vol.devices[0].role == DeviceRole::Home {
            return Err(err("the performance device cannot be the home".into()));
        }
        assert!(segment_blocks >= 1, "a segment has at least one block");
        let slots = vol.devices[0].capacity_blocks / segment_blocks as u64;
        if slots == 0 {
            return Err(err(format!(
                "the performance device ({} blocks) holds no segment of {segment_blocks} blocks",
                vol.devices[0].capacity_blocks
            )));
        }
        let slots = u32::try_from(slots).map_err(|_| err("too many segments".into()))?;
        let segments = vol.num_blocks.div_ceil(segment_blocks as u64);
        Ok(Tiers {
            perf: 0,
            home,
            segment_blocks,
            num_blocks: vol.num_blocks,
            placed: BlockMap::default(),
            free_slots: (0..slots).rev().collect(),
            slots,
            mirrored: 0,
            touched: vec![0; segments.div_ceil(64) as usize],
            touched_count: 0,
            written: vec![0; segments.div_ceil(64) as usize],
            unclean: Default::default(),
            moved_blocks: [0; Direction::COUNT],
        })
    }

    /// The performance device.
    pub fn perf(&self) -> DeviceIndex {
        self.perf
    }

    /// The capacity (home) device.
    pub fn home(&self) -> DeviceIndex {
        self.home
    }

    /// Blocks per segment.
    pub fn segment_blocks(&self) -> u32 {
        self.segment_blocks
    }

    /// Segments in the volume.
    pub fn segments(&self) -> u64 {
        self.num_blocks.div_ceil(self.segment_blocks as u64)
    }

    /// Slots (segments) on the performance device.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Free slots on the performance device.
    pub fn free_slots(&self) -> u32 {
        self.free_slots.len() as u32
    }

    /// Segments in the mirrored class.
    pub fn mirrored(&self) -> u32 {
        self.mirrored
    }

    /// Segments accessed since the start, and mirrored ones once more: the
    /// capacity MOST would use for them.
    pub fn used_segments(&self) -> u64 {
        self.touched_count + self.mirrored as u64
    }

    /// Blocks moved so far, per direction ([`Direction::index`]).
    pub fn moved_blocks(&self, d: Direction) -> u64 {
        self.moved_blocks[d.index()]
    }

    /// The segment holding `block` and the block's subpage in it.
    #[inline]
    pub fn locate(&self, block: u64) -> (u64, u32) {
        let s = self.segment_blocks as u64;
        (block / s, (block % s) as u32)
    }

    /// The class of `segment`.
    #[inline]
    pub fn class(&self, segment: u64) -> Class {
        self.placed
            .get(&segment)
            .map_or(Class::Capacity, |p| p.class)
    }

    /// True while a move of `segment` is queued or running.
    pub fn is_busy(&self, segment: u64) -> bool {
        self.placed.get(&segment).is_some_and(|p| p.busy)
    }

    /// Every segment with a slot, with its class (unordered).
    pub fn placed(&self) -> impl Iterator<Item = (u64, Class)> + '_ {
        self.placed.iter().map(|(&s, p)| (s, p.class))
    }

    /// Notes an access to `segment`; true the first time.
    #[inline]
    pub fn touch(&mut self, segment: u64) -> bool {
        self.set_touched(segment, true)
    }

    /// Notes a write to `segment` (an access too); true the first time, when
    /// the write is the segment's allocation. A read before it does not
    /// allocate: a block never written holds nothing to place.
    #[inline]
    pub fn note_write(&mut self, segment: u64) -> bool {
        self.touch(segment);
        !set_bit(&mut self.written, segment, true)
    }

    /// Marks `segment` as accessed or as never accessed; returns true when
    /// that changed its mark.
    fn set_touched(&mut self, segment: u64, touched: bool) -> bool {
        let was = set_bit(&mut self.touched, segment, touched);
        let changed = was != touched;
        if changed {
            if touched {
                self.touched_count += 1;
            } else {
                self.touched_count -= 1;
            }
        }
        changed
    }

    fn perf_loc(&self, slot: u32, subpage: u32) -> u32 {
        let loc = slot as u64 * self.segment_blocks as u64 + subpage as u64;
        u32::try_from(loc).expect("performance-device locations fit 32 bits")
    }

    fn blocks_of(&self, segment: u64) -> std::ops::Range<u64> {
        let first = segment * self.segment_blocks as u64;
        first..(first + self.segment_blocks as u64).min(self.num_blocks)
    }

    /// Puts the segment of `block`, which must be in the capacity class and
    /// idle, in the performance class without copying anything (a new
    /// allocation: its blocks are copied there as they are written). False
    /// when no slot is free.
    pub fn allocate(&mut self, segment: u64) -> bool {
        assert_eq!(
            self.class(segment),
            Class::Capacity,
            "segment {segment} is placed"
        );
        if self.is_busy(segment) {
            return false;
        }
        let Some(slot) = self.free_slots.pop() else {
            return false;
        };
        self.placed.insert(
            segment,
            Placed {
                class: Class::Performance,
                slot,
                busy: false,
            },
        );
        true
    }

    /// Where a read of `block` goes: the performance device, the capacity
    /// device, or either when both copies are current (`None`).
    #[inline]
    pub fn read_choices(&self, map: &PlacementMap, block: u64) -> Option<DeviceIndex> {
        let cur = current_copies(&map.get(block));
        let both = 1 << self.perf | 1 << self.home;
        if cur & both == both {
            None
        } else if cur & 1 << self.perf != 0 {
            Some(self.perf)
        } else {
            Some(self.home)
        }
    }

    /// Plans a client read of `block` from the device [`Tiers::read_choices`]
    /// names, or, when both copies are current, from the capacity device if
    /// `to_capacity`. Returns the device read.
    pub fn read(&self, block: u64, to_capacity: bool, ctx: &mut Ctx<'_>) -> DeviceIndex {
        let d = self.read_choices(ctx.map, block).unwrap_or(if to_capacity {
            self.home
        } else {
            self.perf
        });
        let addr = if d == self.perf {
            ctx.map.get(block).loc(d) as u64
        } else {
            block
        };
        ctx.plan.client(d, Op::Read, addr);
        d
    }

    /// True when mirrored `segment` has an invalid subpage on either copy.
    pub fn is_unclean(&self, segment: u64) -> bool {
        self.unclean.contains(&segment)
    }

    /// Mirrored segments with an invalid subpage on either copy, in order.
    pub fn unclean(&self) -> impl Iterator<Item = u64> + '_ {
        self.unclean.iter().copied()
    }

    /// Subpages of the mirrored class that are not clean (current on both
    /// copies), counted over the unclean segments' blocks in `map`.
    pub fn invalid_mirrored_subpages(&self, map: &PlacementMap) -> u64 {
        let (p, h) = (self.perf, self.home);
        self.unclean
            .iter()
            .flat_map(|&s| self.blocks_of(s))
            .filter(|&b| {
                let e = map.get(b);
                !(e.valid_on(p) && e.valid_on(h) && e.dirty == 0)
            })
            .count() as u64
    }

    /// Plans a client write of `block`: to the performance copy, or (when
    /// `to_capacity`, or the segment is in the capacity class) to the
    /// capacity device. Returns the device written.
    pub fn write(&mut self, block: u64, to_capacity: bool, ctx: &mut Ctx<'_>) -> DeviceIndex {
        let (segment, subpage) = self.locate(block);
        let placed = self
            .placed
            .get(&segment)
            .copied()
            .filter(|pl| pl.class != Class::Capacity);
        let (p, h) = (self.perf, self.home);
        match placed {
            Some(pl) if !(to_capacity && pl.class == Class::Mirrored) => {
                let loc = self.perf_loc(pl.slot, subpage);
                ctx.plan.client(p, Op::Write, loc as u64);
                let e = ctx.map.entry_mut(block);
                let was_clean_mirror = e.valid_on(p) && e.valid_on(h) && e.dirty == 0;
                e.present |= 1 << p | 1 << h;
                e.stale &= !(1 << p);
                e.dirty = 1 << p;
                e.set_loc(p, loc);
                if pl.class == Class::Mirrored && was_clean_mirror {
                    self.unclean.insert(segment);
                }
                p
            }
            Some(_) => {
                // A mirrored subpage written on the capacity device: the
                // performance copy, if any, is now invalid.
                ctx.plan.client(h, Op::Write, block);
                let e = ctx.map.entry_mut(block);
                e.dirty = 0;
                if e.present & 1 << p != 0 {
                    e.stale |= 1 << p;
                    self.unclean.insert(segment);
                }
                ctx.map.normalize(block);
                h
            }
            None => {
                ctx.plan.client(h, Op::Write, block);
                ctx.map.set(
                    block,
                    Entry {
                        present: 1 << h,
                        ..Entry::default()
                    },
                );
                h
            }
        }
    }

    /// Claims `segment` for a move: false when another move of it is
    /// queued or running, the move does not apply to its class, or (a
    /// promotion) no slot is free. A promotion reserves its slot here, so
    /// that moves queued together never count one free slot twice.
    pub fn claim(&mut self, segment: u64, m: Move) -> bool {
        let class = self.class(segment);
        let fits = match m {
            Move::Promote => class == Class::Capacity,
            Move::Demote => class != Class::Capacity,
            Move::Mirror => class == Class::Performance,
            Move::Unmirror | Move::Clean => class == Class::Mirrored,
        };
        if !fits || self.is_busy(segment) || segment >= self.segments() {
            return false;
        }
        if m == Move::Promote {
            let Some(slot) = self.free_slots.pop() else {
                return false;
            };
            // A capacity segment has no record; hold the slot in a busy
            // one until the move starts.
            self.placed.insert(
                segment,
                Placed {
                    class: Class::Capacity,
                    slot,
                    busy: true,
                },
            );
        } else {
            self.placed
                .get_mut(&segment)
                .expect("a placed segment has a record")
                .busy = true;
        }
        true
    }

    /// The job that carries out a claimed move of `segment`.
    pub fn job(&self, segment: u64, m: Move) -> Job {
        let r = self.blocks_of(segment);
        Job {
            block: r.start,
            blocks: (r.end - r.start) as u32,
            kind: m as u8,
        }
    }

    /// Plans a claimed move whose blocks' locks are now held. Returns the
    /// blocks copied.
    pub fn start(&mut self, job: Job, ctx: &mut Ctx<'_>) -> u64 {
        let m = Move::of_kind(job.kind).expect("a tiering job names a move");
        let (segment, _) = self.locate(job.block);
        if m != Move::Promote {
            self.unclean.remove(&segment);
        }
        let copied = match (m, self.class(segment)) {
            (Move::Promote, Class::Capacity) => {
                let slot = self.slot_of(segment);
                self.set_placed(segment, Class::Performance, slot);
                self.copy_up(segment, slot, false, ctx)
            }
            (Move::Demote, Class::Performance | Class::Mirrored) => self.copy_down(segment, ctx),
            (Move::Mirror, Class::Performance) => {
                let slot = self.slot_of(segment);
                self.set_placed(segment, Class::Mirrored, slot);
                self.copy_up(segment, slot, true, ctx) + self.clean_down(segment, ctx)
            }
            (Move::Unmirror, Class::Mirrored) => self.unmirror(segment, ctx),
            (Move::Clean, Class::Mirrored) => {
                let slot = self.slot_of(segment);
                self.copy_up(segment, slot, true, ctx) + self.clean_down(segment, ctx)
            }
            _ => 0,
        };
        self.moved_blocks[m.direction().index()] += copied;
        copied
    }

    /// Ends a move whose operations are all done: frees a demoted
    /// segment's slot and lets the segment move again.
    pub fn finish(&mut self, job: Job) {
        let (segment, _) = self.locate(job.block);
        self.release(segment);
    }

    /// Gives up the claim on `segment` (a move finished, or was never
    /// queued): a segment left in the capacity class frees its slot.
    pub fn release(&mut self, segment: u64) {
        let p = self
            .placed
            .get_mut(&segment)
            .expect("a claimed segment has a record");
        assert!(p.busy, "segment {segment} released but not claimed");
        p.busy = false;
        if p.class == Class::Capacity {
            self.free_slots.push(p.slot);
            self.placed.remove(&segment);
        }
        self.assert_slots_add_up();
    }

    /// Every slot is either free or held by exactly one placed segment.
    fn assert_slots_add_up(&self) {
        assert_eq!(
            self.placed.len() + self.free_slots.len(),
            self.slots as usize,
            "{} placed segments and {} free slots, of {} slots",
            self.placed.len(),
            self.free_slots.len(),
            self.slots
        );
    }

    fn slot_of(&self, segment: u64) -> u32 {
        self.placed[&segment].slot
    }

    fn set_placed(&mut self, segment: u64, class: Class, slot: u32) {
        let p = self
            .placed
            .get_mut(&segment)
            .expect("a claimed segment has a record");
        if (p.class == Class::Mirrored) != (class == Class::Mirrored) {
            if class == Class::Mirrored {
                self.mirrored += 1;
            } else {
                self.mirrored = self.mirrored.checked_sub(1).expect("mirrored count");
            }
        }
        p.class = class;
        p.slot = slot;
    }

    /// Copies every block the performance copy lacks up to it; `clean`
    /// leaves both copies current (mirroring), else the performance copy
    /// is the only one.
    fn copy_up(&mut self, segment: u64, slot: u32, clean: bool, ctx: &mut Ctx<'_>) -> u64 {
        let (p, h) = (self.perf, self.home);
        let mut copied = 0;
        for (i, block) in self.blocks_of(segment).enumerate() {
            let loc = self.perf_loc(slot, i as u32);
            let e = ctx.map.get(block);
            if !e.valid_on(p) {
                ctx.plan
                    .copy(None, (h, block), (p, loc as u64), Purpose::Migrate, false);
                copied += 1;
            }
            let e = ctx.map.entry_mut(block);
            let newer_on_p = e.dirty_on(p) && e.valid_on(p);
            e.present |= 1 << p | 1 << h;
            e.stale &= !(1 << p);
            e.set_loc(p, loc);
            e.dirty = if clean || newer_on_p { e.dirty } else { 1 << p };
        }
        copied
    }

    /// Copies every block only the performance copy holds down, leaving
    /// both copies current.
    fn clean_down(&mut self, segment: u64, ctx: &mut Ctx<'_>) -> u64 {
        let mut copied = 0;
        for block in self.blocks_of(segment) {
            if self.copy_down_if_only_up(block, ctx) {
                ctx.map.entry_mut(block).dirty = 0;
                copied += 1;
            }
        }
        copied
    }

    /// Plans a copy of `block` down to the capacity device when only its
    /// performance copy is current; true when it did.
    fn copy_down_if_only_up(&self, block: u64, ctx: &mut Ctx<'_>) -> bool {
        let (p, h) = (self.perf, self.home);
        let e = ctx.map.get(block);
        let only_up = e.dirty_on(p) && e.valid_on(p);
        if only_up {
            ctx.plan.copy(
                None,
                (p, e.loc(p) as u64),
                (h, block),
                Purpose::Migrate,
                false,
            );
        }
        only_up
    }

    /// Moves the segment to the capacity class: blocks only the
    /// performance copy holds are copied down; the slot is freed when the
    /// job finishes.
    fn copy_down(&mut self, segment: u64, ctx: &mut Ctx<'_>) -> u64 {
        let h = self.home;
        let mut copied = 0;
        for block in self.blocks_of(segment) {
            copied += u64::from(self.copy_down_if_only_up(block, ctx));
            ctx.map.set(
                block,
                Entry {
                    present: 1 << h,
                    ..Entry::default()
                },
            );
        }
        let slot = self.slot_of(segment);
        self.set_placed(segment, Class::Capacity, slot);
        copied
    }

    /// MOST's reclamation of a mirrored segment: when every block's
    /// performance copy is current, the capacity copy is dropped (no I/O);
    /// otherwise the performance copy is (a demotion).
    fn unmirror(&mut self, segment: u64, ctx: &mut Ctx<'_>) -> u64 {
        let p = self.perf;
        let all_valid = self.blocks_of(segment).all(|b| ctx.map.get(b).valid_on(p));
        if !all_valid {
            return self.copy_down(segment, ctx);
        }
        for block in self.blocks_of(segment) {
            ctx.map.entry_mut(block).dirty = 1 << p;
        }
        let slot = self.slot_of(segment);
        self.set_placed(segment, Class::Performance, slot);
        0
    }

    /// Places `block` on the performance device without I/O (pre-warming):
    /// its segment gets a slot if it has none. False when none is free.
    pub fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        let (segment, subpage) = self.locate(block);
        self.note_write(segment);
        if self.class(segment) == Class::Capacity && !self.allocate(segment) {
            return false;
        }
        let slot = self.slot_of(segment);
        let loc = self.perf_loc(slot, subpage);
        let (p, h) = (self.perf, self.home);
        let e = map.entry_mut(block);
        e.present = 1 << p | 1 << h;
        e.dirty = 1 << p;
        e.set_loc(p, loc);
        true
    }

    /// Rebuilds the classes and slots from a map saved before a restart.
    /// Segments with a clean block on both devices are mirrored, other
    /// placed ones are in the performance class. Every placed segment
    /// counts as accessed and written.
    pub fn restore(&mut self, map: &PlacementMap) -> Result<(), String> {
        assert!(self.placed.is_empty(), "restore into fresh tiers");
        let (p, h) = (self.perf, self.home);
        let mut slots: BlockMap<(u32, bool)> = BlockMap::default();
        for (block, e) in map.iter() {
            if e.present & 1 << p == 0 {
                if e.present != 1 << h {
                    return Err(format!("block {block} has copies the tiers do not use"));
                }
                continue;
            }
            let (segment, subpage) = self.locate(block);
            let slot = e.loc(p) / self.segment_blocks;
            if e.loc(p) % self.segment_blocks != subpage || slot >= self.slots {
                return Err(format!(
                    "block {block} is at performance-device location {}, not in its segment's slot",
                    e.loc(p)
                ));
            }
            let clean = e.dirty == 0 && e.stale == 0;
            let s = slots.entry(segment).or_insert((slot, false));
            if s.0 != slot {
                return Err(format!("segment {segment} has blocks in two slots"));
            }
            s.1 |= clean;
        }
        let mut used = vec![false; self.slots as usize];
        for (&segment, &(slot, mirrored)) in &slots {
            if std::mem::replace(&mut used[slot as usize], true) {
                return Err(format!("two segments share performance-device slot {slot}"));
            }
            let class = if mirrored {
                self.mirrored += 1;
                Class::Mirrored
            } else {
                Class::Performance
            };
            self.placed.insert(
                segment,
                Placed {
                    class,
                    slot,
                    busy: false,
                },
            );
            self.note_write(segment);
        }
        self.free_slots = (0..self.slots)
            .rev()
            .filter(|&s| !used[s as usize])
            .collect();
        for (block, e) in map.iter() {
            let (segment, _) = self.locate(block);
            if e.present & 1 << p != 0
                && (e.dirty | e.stale) != 0
                && self.class(segment) == Class::Mirrored
            {
                self.unclean.insert(segment);
            }
        }
        Ok(())
    }

    /// Keeps the classes in step with `block`'s entry after operations of
    /// its plan failed ([`crate::policy::Policy::repair`]), and returns the
    /// entry to store. A demotion whose copy down failed leaves the block's
    /// only current copy on the performance device, so its segment keeps
    /// its slot and returns to the performance class.
    pub fn repaired(&mut self, block: u64, target: Entry) -> Entry {
        let p = self.perf;
        if !target.valid_on(p) {
            return target;
        }
        let (segment, subpage) = self.locate(block);
        let placed = self
            .placed
            .get(&segment)
            .copied()
            .expect("a block with a performance copy has a placed segment");
        assert_eq!(
            target.loc(p),
            self.perf_loc(placed.slot, subpage),
            "block {block}'s performance copy is outside its segment's slot"
        );
        if placed.class == Class::Capacity {
            self.set_placed(segment, Class::Performance, placed.slot);
        }
        target
    }

    /// Drops `block`'s performance copy (a trim): the block reads as the
    /// capacity device holds it. When no block of its segment keeps a
    /// performance copy and no move holds the segment, the segment leaves
    /// its class and its slot is freed; returns the segment then. Every
    /// client plan on the slot has set its block's performance copy at
    /// its decision and a trim waits for the block's lock, so no client
    /// I/O on the slot is in flight when it is freed.
    pub fn trim(&mut self, block: u64, map: &mut PlacementMap) -> Option<u64> {
        map.set(
            block,
            Entry {
                present: 1 << self.home,
                ..Entry::default()
            },
        );
        let (segment, _) = self.locate(block);
        let placed = *self.placed.get(&segment)?;
        let p = self.perf;
        // Trims come in ascending order: the blocks after this one are the
        // likeliest to keep a copy, so they are looked at first.
        let r = self.blocks_of(segment);
        let any_up = (block + 1..r.end)
            .chain(r.start..block)
            .any(|b| map.get(b).present & 1 << p != 0);
        if placed.busy || any_up {
            return None;
        }
        self.set_placed(segment, Class::Capacity, placed.slot);
        self.unclean.remove(&segment);
        self.free_slots.push(placed.slot);
        self.placed.remove(&segment);
        self.assert_slots_add_up();
        Some(segment)
    }

    /// A client discards blocks `first..end` (bookkeeping, no lock): the
    /// segments the range covers whole count as never accessed nor
    /// written, so that the next write to one is a new allocation. Returns
    /// them.
    pub fn discarded(&mut self, first: u64, end: u64) -> std::ops::Range<u64> {
        let s = self.segment_blocks as u64;
        let end = end.min(self.num_blocks);
        // The volume's last segment may be short: reaching the volume's
        // end covers it whole.
        let short_tail = end == self.num_blocks && !end.is_multiple_of(s);
        let whole = first.div_ceil(s)..end / s + u64::from(short_tail);
        let whole = whole.start..whole.end.max(whole.start);
        for segment in whole.clone() {
            self.set_touched(segment, false);
            set_bit(&mut self.written, segment, false);
        }
        whole
    }
}

/// Sets or clears `segment`'s bit in a one-bit-per-segment map; returns
/// what it was.
#[inline]
fn set_bit(bits: &mut [u64], segment: u64, on: bool) -> bool {
    let (w, bit) = ((segment / 64) as usize, 1u64 << (segment % 64));
    let was = bits[w] & bit != 0;
    if on {
        bits[w] |= bit;
    } else {
        bits[w] &= !bit;
    }
    was
}

#[cfg(test)]
#[path = "tiers_tests.rs"]
mod tests;
