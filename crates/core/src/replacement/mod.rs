//! Cache replacement over slots: LRU and ARC.
//!
//! One algorithm per file: [`lru`] and [`arc`], over the linked list in
//! `list`; [`hit_ratio`] is a stand-alone cache for hit-ratio studies.
//!
//! A cache of `capacity` blocks owns slots `0..capacity`. The caller keeps the
//! block-to-slot mapping (the placement map's locations, or a plain map in
//! [`HitRatioCache`]); the replacement keeps recency order over slots and, for ARC,
//! its ghost lists. Admitting a block into a full cache evicts a victim; the
//! caller may veto victims (a locked or dirty block) and the replacement then
//! looks further from the cold end, up to [`VICTIM_SCAN_LIMIT`] candidates.

use serde::{Deserialize, Serialize};

/// How many candidates past a vetoed victim the replacement examines before
/// giving up on an admission.
pub const VICTIM_SCAN_LIMIT: usize = 64;

/// Which replacement algorithm a cache uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplacementKind {
    /// Least recently used.
    Lru,
    /// Adaptive replacement cache (Megiddo and Modha, FAST '03).
    Arc,
}

impl std::str::FromStr for ReplacementKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "lru" => Ok(ReplacementKind::Lru),
            "arc" => Ok(ReplacementKind::Arc),
            other => Err(format!(
                "unknown replacement '{other}' (expected lru or arc)"
            )),
        }
    }
}

/// Result of a successful admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// Slot the new block occupies.
    pub slot: u32,
    /// Block evicted to make room, if the cache was full.
    pub victim: Option<u64>,
}

/// Recency bookkeeping for one cache device.
pub trait Replacement: Send {
    /// Number of slots.
    fn capacity(&self) -> usize;
    /// Number of occupied slots.
    fn len(&self) -> usize;
    /// True when no slot is occupied.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The block held by an occupied slot.
    fn block_at(&self, slot: u32) -> u64;
    /// Records a hit on an occupied slot.
    fn on_hit(&mut self, slot: u32);
    /// Admits `block` (not resident). Returns `None` when the cache is full
    /// and `can_evict` vetoed every candidate examined.
    fn admit(&mut self, block: u64, can_evict: &mut dyn FnMut(u64) -> bool) -> Option<Admitted>;
    /// Frees an occupied slot without a ghost entry (invalidation).
    fn remove(&mut self, slot: u32);
    /// Hints that `slot` will be hit soon (see [`crate::prefetch`]): its
    /// node at the first stage, the nodes a hit relinks at the second.
    fn prefetch(&self, slot: u32, stage: crate::prefetch::Stage) {
        let _ = (slot, stage);
    }
    /// Occupied slots from the eviction end, at most `limit` of them.
    fn coldest(&self, limit: usize, out: &mut Vec<u32>);
    /// Fills an empty cache with blocks at given slots (a restart), the
    /// last pair the most recently used. Fails on a slot out of range or
    /// given twice, or when the cache is not empty.
    fn restore(&mut self, placed: &[(u32, u64)]) -> Result<(), String>;
}

/// Checks a restore list against `capacity` and returns the slots left free,
/// in the order a fresh cache hands them out.
fn restore_free_list(
    capacity: usize,
    occupied: usize,
    placed: &[(u32, u64)],
) -> Result<Vec<u32>, String> {
    if occupied != 0 {
        return Err(format!(
            "cannot restore into a cache holding {occupied} blocks"
        ));
    }
    let mut used = vec![false; capacity];
    for &(slot, block) in placed {
        let u = used.get_mut(slot as usize).ok_or_else(|| {
            format!("block {block} is at slot {slot}, beyond the cache's {capacity} slots")
        })?;
        if *u {
            return Err(format!("slot {slot} holds two blocks"));
        }
        *u = true;
    }
    Ok((0..capacity as u32)
        .rev()
        .filter(|&s| !used[s as usize])
        .collect())
}

/// Creates a replacement of the given kind with `capacity` slots.
pub fn new_replacement(kind: ReplacementKind, capacity: usize) -> Box<dyn Replacement> {
    match kind {
        ReplacementKind::Lru => Box::new(Lru::new(capacity)),
        ReplacementKind::Arc => Box::new(Arc::new(capacity)),
    }
}

pub mod arc;
pub mod hit_ratio;
pub(crate) mod list;
pub mod lru;

pub use arc::Arc;
pub use hit_ratio::HitRatioCache;
pub use lru::Lru;
