//! The segment layer of the placement map, for tiering policies that place
//! data in large segments (MOST: 2 MiB of 4 KiB subpages).
//!
//! One [`Segment`] per placed segment holds an [`Entry`] (which devices
//! have a copy, where, and which copies are dirty) and, only once some
//! subpage of some copy is out of date, a bitmap per device of the
//! subpages whose copy there is invalid. This is MOST's per-subpage state
//! (Table 3, §3.2): a subpage of a mirrored segment is clean (valid on
//! both copies), invalid-on-P or invalid-on-C.
//!
//! Memory: a segment without invalid subpages costs its 8-byte key, a
//! 16-byte entry and an 8-byte pointer (32 bytes, plus the hash table's
//! control byte and slack), about 16 KiB per GiB of 2 MiB segments; one
//! with invalid subpages adds `LOC_DEVICES` bitmaps of one bit per subpage
//! (192 bytes for 512 subpages).

use crate::map::{BlockMap, Entry, LOC_DEVICES};
use crate::types::DeviceIndex;

/// Default segment size in blocks: 2 MiB of 4 KiB blocks.
pub const DEFAULT_SEGMENT_BLOCKS: u32 = 512;

/// Per-device bitmaps of invalid subpages.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Invalid {
    words_per_copy: usize,
    bits: Box<[u64]>,
}

impl Invalid {
    fn new(subpages: u32) -> Invalid {
        let words_per_copy = (subpages as usize).div_ceil(64);
        Invalid {
            words_per_copy,
            bits: vec![0; words_per_copy * LOC_DEVICES].into_boxed_slice(),
        }
    }

    fn word(&self, d: DeviceIndex, subpage: u32) -> (usize, u64) {
        assert!((d as usize) < LOC_DEVICES, "device {d} holds no segments");
        let i = d as usize * self.words_per_copy + subpage as usize / 64;
        (i, 1 << (subpage % 64))
    }

    fn copy(&self, d: DeviceIndex) -> &[u64] {
        let start = d as usize * self.words_per_copy;
        &self.bits[start..start + self.words_per_copy]
    }
}

/// Placement of one segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Copies, their locations (in segments) and dirtiness, as for a block.
    pub entry: Entry,
    subpages: u32,
    invalid: Option<Invalid>,
}

impl Segment {
    /// A segment of `subpages` subpages with no copy yet.
    pub fn new(subpages: u32) -> Segment {
        assert!(subpages >= 1, "a segment has at least one subpage");
        Segment {
            entry: Entry::default(),
            subpages,
            invalid: None,
        }
    }

    /// Subpages in the segment.
    pub fn subpages(&self) -> u32 {
        self.subpages
    }

    /// True when device `d` holds a current copy of `subpage`.
    pub fn valid_on(&self, d: DeviceIndex, subpage: u32) -> bool {
        assert!(subpage < self.subpages, "subpage {subpage} out of range");
        self.entry.valid_on(d) && !self.is_invalid(d, subpage)
    }

    /// True when `subpage`'s copy on device `d` is marked out of date.
    pub fn is_invalid(&self, d: DeviceIndex, subpage: u32) -> bool {
        match &self.invalid {
            None => false,
            Some(inv) => {
                let (i, bit) = inv.word(d, subpage);
                inv.bits[i] & bit != 0
            }
        }
    }

    /// Marks `subpage`'s copy on device `d` out of date (a write went to
    /// another copy).
    pub fn invalidate(&mut self, d: DeviceIndex, subpage: u32) {
        assert!(subpage < self.subpages, "subpage {subpage} out of range");
        let inv = self
            .invalid
            .get_or_insert_with(|| Invalid::new(self.subpages));
        let (i, bit) = inv.word(d, subpage);
        inv.bits[i] |= bit;
    }

    /// Marks `subpage`'s copy on device `d` current again.
    pub fn validate(&mut self, d: DeviceIndex, subpage: u32) {
        assert!(subpage < self.subpages, "subpage {subpage} out of range");
        if let Some(inv) = &mut self.invalid {
            let (i, bit) = inv.word(d, subpage);
            inv.bits[i] &= !bit;
            if inv.bits.iter().all(|&w| w == 0) {
                self.invalid = None;
            }
        }
    }

    /// Marks every subpage of device `d`'s copy current (after the copy was
    /// rewritten whole, or dropped).
    pub fn validate_all(&mut self, d: DeviceIndex) {
        if let Some(inv) = &mut self.invalid {
            let start = d as usize * inv.words_per_copy;
            inv.bits[start..start + inv.words_per_copy].fill(0);
            if inv.bits.iter().all(|&w| w == 0) {
                self.invalid = None;
            }
        }
    }

    /// Subpages whose copy on device `d` is out of date.
    pub fn invalid_count(&self, d: DeviceIndex) -> u32 {
        match &self.invalid {
            None => 0,
            Some(inv) => inv.copy(d).iter().map(|w| w.count_ones()).sum(),
        }
    }
}

/// The segments of a volume that are placed (a sparse map).
#[derive(Clone, Debug)]
pub struct SegmentMap {
    segment_blocks: u32,
    segments: BlockMap<Segment>,
}

impl SegmentMap {
    /// An empty map of segments of `segment_blocks` blocks.
    pub fn new(segment_blocks: u32) -> SegmentMap {
        assert!(segment_blocks >= 1, "a segment has at least one block");
        SegmentMap {
            segment_blocks,
            segments: BlockMap::default(),
        }
    }

    /// Blocks per segment.
    pub fn segment_blocks(&self) -> u32 {
        self.segment_blocks
    }

    /// The segment holding `block` and the block's subpage in it.
    pub fn locate(&self, block: u64) -> (u64, u32) {
        let s = self.segment_blocks as u64;
        (block / s, (block % s) as u32)
    }

    /// The first block of segment `seg`.
    pub fn first_block(&self, seg: u64) -> u64 {
        seg * self.segment_blocks as u64
    }

    /// Segment `seg`, if placed.
    pub fn get(&self, seg: u64) -> Option<&Segment> {
        self.segments.get(&seg)
    }

    /// Segment `seg`, created with no copy when missing.
    pub fn entry_mut(&mut self, seg: u64) -> &mut Segment {
        let n = self.segment_blocks;
        self.segments.entry(seg).or_insert_with(|| Segment::new(n))
    }

    /// Forgets segment `seg`.
    pub fn remove(&mut self, seg: u64) -> Option<Segment> {
        self.segments.remove(&seg)
    }

    /// Placed segments.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// True when no segment is placed.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Every placed segment (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Segment)> + '_ {
        self.segments.iter().map(|(&s, seg)| (s, seg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_subpage_states() {
        let mut m = SegmentMap::new(DEFAULT_SEGMENT_BLOCKS);
        assert_eq!(m.locate(1025), (2, 1));
        assert_eq!(m.first_block(2), 1024);
        // A mirrored segment: copies on the performance (0) and capacity
        // (1) devices.
        let s = m.entry_mut(2);
        s.entry.present = 0b11;
        s.entry.set_loc(0, 7);
        s.entry.set_loc(1, 40);
        assert!(s.valid_on(0, 5) && s.valid_on(1, 5), "clean");
        // A write of subpage 5 went to the capacity copy: invalid-on-P.
        s.invalidate(0, 5);
        assert!(!s.valid_on(0, 5) && s.valid_on(1, 5));
        // Subpage 511 written to the performance copy: invalid-on-C.
        s.invalidate(1, 511);
        assert!(s.valid_on(0, 511) && !s.valid_on(1, 511));
        assert_eq!((s.invalid_count(0), s.invalid_count(1)), (1, 1));
        s.validate(0, 5);
        s.validate_all(1);
        assert_eq!(s.invalid, None, "bitmaps are dropped once all is valid");
        assert_eq!(m.len(), 1);
    }

    #[test]
    #[should_panic(expected = "subpage 512 out of range")]
    fn subpages_are_bounds_checked() {
        Segment::new(512).invalidate(0, 512);
    }
}
