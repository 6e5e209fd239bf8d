//! The placement map: where every block's copies live and whether each copy
//! is current.
//!
//! A block with no entry sits only on its home device and is clean there.
//! An entry records, per device (bit `d` of each mask):
//! - `present`: a copy exists on device `d`;
//! - `dirty`: that copy is newer than the home copy (home is stale);
//! - `stale`: space is held on `d` but its content is out of date.
//!
//! This covers caching (home plus a cached copy), tiering (one copy, moved:
//! the home bit cleared and another set), mirroring (two clean copies) and
//! hierarchies with more than two devices. `loc` holds the block's location
//! on each device that allocates locations (a cache's slot, a tier's
//! segment); such devices are the first [`LOC_DEVICES`] of a hierarchy, and
//! a device that holds the whole volume addresses a block by its number.
//! `flags` is free for the policy.
//!
//! Memory: an [`Entry`] is 16 bytes; with its 8-byte key and the hash
//! table's control byte, a placed block costs 25 bytes at a full table and
//! about 29 to 50 bytes at the table's load factors (7/8 down to 1/2).
//! Metadata is proportional to the number of blocks placed away from their
//! default, not to the volume size. A driver that knows its volume is small
//! can make the map dense ([`PlacementMap::make_dense`]): an entry per
//! block in a vector, 16 bytes per block of the volume, and a lookup is one
//! memory access instead of a hash probe (the simulator does this).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::types::DeviceIndex;

/// How many devices (the first ones of a hierarchy) can hold a location in
/// an [`Entry`]: enough for DRAM + read SSD + write SSD over a disk (TICA).
pub const LOC_DEVICES: usize = 3;

/// A fast hasher for `u64` block numbers (multiplicative, then folded).
#[derive(Default, Clone, Copy)]
pub struct BlockHasher(u64);

impl Hasher for BlockHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        let x = (n ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 32);
    }
}

/// `HashMap` keyed by block numbers with [`BlockHasher`].
pub type BlockMap<V> = HashMap<u64, V, BuildHasherDefault<BlockHasher>>;

/// Placement state of one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Entry {
    /// Devices holding a copy (bit per device).
    pub present: u8,
    /// Copies newer than the home copy.
    pub dirty: u8,
    /// Copies whose space is held but whose content is out of date.
    pub stale: u8,
    /// Free for the policy (for example "eviction pending").
    pub flags: u8,
    /// Location on each of the first [`LOC_DEVICES`] devices, meaningful
    /// where `present` says a copy is; 0 elsewhere.
    pub loc: [u32; LOC_DEVICES],
}

const _: () = assert!(std::mem::size_of::<Entry>() == 16);

impl Entry {
    /// True when device `d` holds a current copy.
    #[inline]
    pub fn valid_on(&self, d: DeviceIndex) -> bool {
        (self.present & !self.stale) & (1 << d) != 0
    }

    /// True when device `d` holds a copy newer than the home copy.
    #[inline]
    pub fn dirty_on(&self, d: DeviceIndex) -> bool {
        self.dirty & (1 << d) != 0
    }

    /// The block's location on device `d`, which must be one of the first
    /// [`LOC_DEVICES`].
    #[inline]
    pub fn loc(&self, d: DeviceIndex) -> u32 {
        assert!((d as usize) < LOC_DEVICES, "device {d} holds no locations");
        self.loc[d as usize]
    }

    /// Sets the block's location on device `d` (one of the first
    /// [`LOC_DEVICES`]).
    #[inline]
    pub fn set_loc(&mut self, d: DeviceIndex, loc: u32) {
        assert!((d as usize) < LOC_DEVICES, "device {d} holds no locations");
        self.loc[d as usize] = loc;
    }

    /// Drops device `d`'s copy: its presence, dirtiness, staleness and
    /// location.
    #[inline]
    pub fn drop_copy(&mut self, d: DeviceIndex) {
        let bit = !(1u8 << d);
        self.present &= bit;
        self.dirty &= bit;
        self.stale &= bit;
        if (d as usize) < LOC_DEVICES {
            self.loc[d as usize] = 0;
        }
    }
}

/// Where the entries live.
#[derive(Clone, Debug)]
enum Storage {
    /// Only non-default entries, hashed by block.
    Sparse(BlockMap<Entry>),
    /// An entry per block of the volume, default ones included.
    Dense(Vec<Entry>),
}

/// The entry of a block placed only on `home`, clean: what a block
/// without an entry has.
#[inline]
fn default_entry(home: DeviceIndex) -> Entry {
    Entry {
        present: 1 << home,
        ..Entry::default()
    }
}

/// Whether `e` is the default placement on `home` (no entry needed).
#[inline]
fn is_default(home: DeviceIndex, e: &Entry) -> bool {
    e.present == 1 << home && e.dirty == 0 && e.stale == 0 && e.flags == 0
}

/// The placement map of a volume.
#[derive(Clone, Debug)]
pub struct PlacementMap {
    home: DeviceIndex,
    entries: Storage,
    /// When recording: (block, entry before its first change) since the
    /// last [`PlacementMap::take_changes`].
    changes: Option<Vec<(u64, Entry)>>,
}

impl PlacementMap {
    /// An empty map in which every block lives only on `home`.
    pub fn new(home: DeviceIndex) -> Self {
        PlacementMap {
            home,
            entries: Storage::Sparse(BlockMap::default()),
            changes: None,
        }
    }

    /// The entry every block without one has.
    #[inline]
    fn default_entry(&self) -> Entry {
        default_entry(self.home)
    }

    /// Whether `e` is the default placement (no entry needed).
    #[inline]
    fn is_default(&self, e: &Entry) -> bool {
        is_default(self.home, e)
    }

    /// Keeps an entry for every one of `num_blocks` blocks in a vector
    /// (16 bytes each), keeping those already set: for drivers whose volume
    /// is small enough that a lookup by index beats a hash probe. Blocks at
    /// or past `num_blocks` must never be looked up afterwards.
    pub fn make_dense(&mut self, num_blocks: u64) {
        let mut entries = vec![self.default_entry(); num_blocks as usize];
        for (b, e) in self.iter() {
            assert!(
                b < num_blocks,
                "block {b} is past the dense map's {num_blocks}"
            );
            entries[b as usize] = e;
        }
        self.entries = Storage::Dense(entries);
    }

    /// Whether the map keeps an entry for every block ([`PlacementMap::make_dense`]).
    pub fn is_dense(&self) -> bool {
        matches!(self.entries, Storage::Dense(_))
    }

    /// Starts (or stops) recording which blocks change, for a driver that
    /// persists the map. Recording starts with no changes noted.
    pub fn record_changes(&mut self, on: bool) {
        self.changes = on.then(Vec::new);
    }

    /// Moves the changes noted since the last call into `out`: each changed
    /// block once, with its entry before the first change. The current entry
    /// is [`PlacementMap::get`]. Does nothing unless recording.
    pub fn take_changes(&mut self, out: &mut Vec<(u64, Entry)>) {
        if let Some(c) = &mut self.changes {
            out.append(c);
        }
    }

    #[inline]
    fn note(&mut self, block: u64) {
        if let Some(c) = &mut self.changes {
            if !c.iter().any(|&(b, _)| b == block) {
                let old = match &self.entries {
                    Storage::Sparse(m) => m.get(&block).copied(),
                    Storage::Dense(entries) => Some(entries[block as usize]),
                };
                c.push((block, old.unwrap_or(default_entry(self.home))));
            }
        }
    }

    /// The device that holds blocks without an entry.
    pub fn home(&self) -> DeviceIndex {
        self.home
    }

    /// The entry of `block`, or the default placement when it has none.
    #[inline]
    pub fn get(&self, block: u64) -> Entry {
        match &self.entries {
            Storage::Sparse(m) => m.get(&block).copied().unwrap_or(self.default_entry()),
            Storage::Dense(entries) => entries[block as usize],
        }
    }

    /// Starts loading `block`'s entry of a dense map into the CPU's cache
    /// ahead of its lookup, so that the memory access overlaps other work
    /// (a no-op for the hashed map).
    #[inline]
    pub fn prefetch(&self, block: u64) {
        if let Storage::Dense(entries) = &self.entries {
            crate::prefetch::prefetch_at(entries, block as usize);
        }
    }

    /// True when `block` has a non-default entry.
    #[inline]
    pub fn has_entry(&self, block: u64) -> bool {
        match &self.entries {
            Storage::Sparse(m) => m.contains_key(&block),
            Storage::Dense(entries) => !self.is_default(&entries[block as usize]),
        }
    }

    /// Stores the entry of `block`; the default placement removes it.
    #[inline]
    pub fn set(&mut self, block: u64, e: Entry) {
        self.note(block);
        let home = self.home;
        match &mut self.entries {
            Storage::Sparse(m) => {
                if is_default(home, &e) {
                    m.remove(&block);
                } else {
                    m.insert(block, e);
                }
            }
            Storage::Dense(entries) => entries[block as usize] = e,
        }
    }

    /// Mutable access to the entry of `block`, created with the default
    /// placement when missing. Call [`PlacementMap::normalize`] if the edit
    /// may have restored the default.
    #[inline]
    pub fn entry_mut(&mut self, block: u64) -> &mut Entry {
        self.note(block);
        let default = self.default_entry();
        match &mut self.entries {
            Storage::Sparse(m) => m.entry(block).or_insert(default),
            Storage::Dense(entries) => &mut entries[block as usize],
        }
    }

    /// Drops the entry of `block` if it describes the default placement.
    #[inline]
    pub fn normalize(&mut self, block: u64) {
        match &mut self.entries {
            Storage::Sparse(m) => {
                if let Some(e) = m.get(&block) {
                    let e = *e;
                    self.set(block, e);
                }
            }
            // A default entry in a dense map is just the default.
            Storage::Dense(_) => {}
        }
    }

    /// Makes room for `additional` more entries without rehashing (a dense
    /// map has room for every block already).
    pub fn reserve(&mut self, additional: usize) {
        if let Storage::Sparse(m) = &mut self.entries {
            m.reserve(additional);
        }
    }

    /// Number of blocks with a non-default placement (a dense map counts
    /// them, in time proportional to the volume).
    pub fn len(&self) -> usize {
        match &self.entries {
            Storage::Sparse(m) => m.len(),
            Storage::Dense(entries) => entries.iter().filter(|e| !self.is_default(e)).count(),
        }
    }

    /// True when every block has the default placement.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every non-default entry (unordered).
    pub fn iter(&self) -> Box<dyn Iterator<Item = (u64, Entry)> + '_> {
        match &self.entries {
            Storage::Sparse(m) => Box::new(m.iter().map(|(&b, &e)| (b, e))),
            Storage::Dense(entries) => Box::new(
                (0u64..)
                    .zip(entries.iter().copied())
                    .filter(|(_, e)| !self.is_default(e)),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_placement_is_home_only() {
        let mut m = PlacementMap::new(1);
        let e = m.get(42);
        assert_eq!(e.present, 0b10);
        assert!(e.valid_on(1) && !e.valid_on(0));
        assert!(m.is_empty());
        let c = m.entry_mut(42);
        c.present |= 1;
        c.set_loc(0, 7);
        assert_eq!(m.len(), 1);
        assert!(m.get(42).valid_on(0));
        let c = m.entry_mut(42);
        c.present &= !1;
        m.normalize(42);
        assert!(m.is_empty());
    }

    /// A dense map answers as a sparse one over random sets, edits and
    /// normalizations, made dense halfway with entries already set.
    #[test]
    fn a_dense_map_answers_as_a_sparse_one() {
        let mut rng = crate::rng::Rng::new(7);
        let (mut sparse, mut dense) = (PlacementMap::new(1), PlacementMap::new(1));
        for step in 0..20_000u32 {
            if step == 5_000 {
                dense.make_dense(512);
                assert!(dense.is_dense());
            }
            let b = rng.below(512);
            let e = Entry {
                present: [0b10, 0b01, 0b11][rng.below(3) as usize],
                dirty: (rng.below(4) == 0) as u8,
                flags: (rng.below(8) == 0) as u8,
                ..Entry::default()
            };
            match rng.below(3) {
                0 => {
                    sparse.set(b, e);
                    dense.set(b, e);
                }
                _ => {
                    for m in [&mut sparse, &mut dense] {
                        let c = m.entry_mut(b);
                        c.present = e.present;
                        c.dirty = e.dirty;
                        m.normalize(b);
                    }
                }
            }
            let x = rng.below(512);
            assert_eq!(sparse.get(x), dense.get(x), "block {x} at step {step}");
            assert_eq!(sparse.has_entry(x), dense.has_entry(x), "block {x}");
        }
        assert_eq!(sparse.len(), dense.len());
        let mut a: Vec<_> = sparse.iter().collect();
        let mut b: Vec<_> = dense.iter().collect();
        a.sort_by_key(|p| p.0);
        b.sort_by_key(|p| p.0);
        assert_eq!(a, b);
    }

    #[test]
    fn stale_and_dirty_masks() {
        let mut m = PlacementMap::new(1);
        m.set(
            3,
            Entry {
                present: 0b11,
                dirty: 0b01,
                stale: 0b10,
                flags: 0,
                loc: [0; LOC_DEVICES],
            },
        );
        let e = m.get(3);
        assert!(e.valid_on(0) && !e.valid_on(1) && e.dirty_on(0));
    }
}
