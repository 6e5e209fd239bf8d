//! A stand-alone cache for hit-ratio studies.

use super::{new_replacement, Replacement, ReplacementKind};
use crate::map::BlockMap;

/// A stand-alone cache for hit-ratio studies: a block-to-slot map plus a
/// replacement. Used by `tiermux replay` and by tests.
pub struct HitRatioCache {
    index: BlockMap<u32>,
    repl: Box<dyn Replacement>,
    /// Number of hits so far.
    pub hits: u64,
    /// Number of misses so far.
    pub misses: u64,
}

impl HitRatioCache {
    /// An empty cache of `capacity` blocks.
    pub fn new(kind: ReplacementKind, capacity: usize) -> Self {
        let mut index = BlockMap::default();
        index.reserve(capacity);
        HitRatioCache {
            index,
            repl: new_replacement(kind, capacity),
            hits: 0,
            misses: 0,
        }
    }

    /// References `block`; returns true on a hit. Misses are admitted.
    #[inline]
    pub fn access(&mut self, block: u64) -> bool {
        if let Some(&slot) = self.index.get(&block) {
            self.repl.on_hit(slot);
            self.hits += 1;
            return true;
        }
        self.misses += 1;
        if let Some(a) = self.repl.admit(block, &mut |_| true) {
            if let Some(v) = a.victim {
                self.index.remove(&v);
            }
            self.index.insert(block, a.slot);
        }
        false
    }

    /// Hit ratio so far, in [0, 1].
    pub fn hit_ratio(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recent() {
        let mut c = HitRatioCache::new(ReplacementKind::Lru, 3);
        for b in [1, 2, 3] {
            assert!(!c.access(b));
        }
        assert!(c.access(1));
        assert!(!c.access(4)); // evicts 2
        assert!(c.access(1) && c.access(3) && c.access(4));
        assert!(!c.access(2));
    }

    #[test]
    fn arc_resists_scan() {
        // A hot set re-referenced between long scans stays cached under ARC
        // but not under LRU.
        let run = |kind| {
            let mut c = HitRatioCache::new(kind, 100);
            let mut next_scan = 1_000_000u64;
            for _round in 0..50 {
                for _ in 0..3 {
                    for b in 0..60 {
                        c.access(b);
                    }
                }
                for _ in 0..200 {
                    c.access(next_scan);
                    next_scan += 1;
                }
            }
            c.hit_ratio()
        };
        let lru = run(ReplacementKind::Lru);
        let arc = run(ReplacementKind::Arc);
        assert!(arc > lru + 0.1, "arc {arc} lru {lru}");
    }
}
