//! Cache replacement over slots: LRU and ARC.
//!
//! A cache of `capacity` blocks owns slots `0..capacity`. The caller keeps the
//! block-to-slot mapping (the placement map's `slot` field, or a plain map in
//! `replay`); the replacement keeps recency order over slots and, for ARC,
//! its ghost lists. Admitting a block into a full cache evicts a victim; the
//! caller may veto victims (a locked or dirty block) and the replacement then
//! looks further from the cold end, up to [`VICTIM_SCAN_LIMIT`] candidates.

use serde::{Deserialize, Serialize};

use crate::map::BlockMap;

/// How many candidates past a vetoed victim the replacement examines before
/// giving up on an admission.
pub const VICTIM_SCAN_LIMIT: usize = 64;

const NIL: u32 = u32::MAX;

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

#[derive(Clone, Copy, Debug)]
struct Node {
    block: u64,
    prev: u32,
    next: u32,
    list: u8,
}

/// An intrusive doubly linked list over an arena of nodes; head is MRU.
#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
    len: usize,
}

/// Nodes that carry list links.
trait Links {
    fn prev(&self) -> u32;
    fn next(&self) -> u32;
    fn set_prev(&mut self, v: u32);
    fn set_next(&mut self, v: u32);
}

macro_rules! impl_links {
    ($t:ty) => {
        impl Links for $t {
            fn prev(&self) -> u32 {
                self.prev
            }
            fn next(&self) -> u32 {
                self.next
            }
            fn set_prev(&mut self, v: u32) {
                self.prev = v;
            }
            fn set_next(&mut self, v: u32) {
                self.next = v;
            }
        }
    };
}

impl_links!(Node);
impl_links!(LruNode);

/// An LRU node: 16 bytes (ARC's nodes also record their list).
#[derive(Clone, Copy, Debug)]
struct LruNode {
    block: u64,
    prev: u32,
    next: u32,
}

impl List {
    const fn new() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    #[inline]
    fn push_front<N: Links>(&mut self, nodes: &mut [N], i: u32) {
        nodes[i as usize].set_prev(NIL);
        nodes[i as usize].set_next(self.head);
        if self.head != NIL {
            nodes[self.head as usize].set_prev(i);
        } else {
            self.tail = i;
        }
        self.head = i;
        self.len += 1;
    }

    #[inline]
    fn unlink<N: Links>(&mut self, nodes: &mut [N], i: u32) {
        let (prev, next) = (nodes[i as usize].prev(), nodes[i as usize].next());
        if prev != NIL {
            nodes[prev as usize].set_next(next);
        } else {
            self.head = next;
        }
        if next != NIL {
            nodes[next as usize].set_prev(prev);
        } else {
            self.tail = prev;
        }
        self.len -= 1;
    }
}

/// Least-recently-used replacement.
#[derive(Clone, Debug)]
pub struct Lru {
    nodes: Vec<LruNode>,
    list: List,
    free: Vec<u32>,
}

impl Lru {
    /// An empty LRU cache with `capacity` slots.
    pub fn new(capacity: usize) -> Self {
        assert!(capacity < NIL as usize, "cache too large");
        Lru {
            nodes: vec![
                LruNode {
                    block: 0,
                    prev: NIL,
                    next: NIL,
                };
                capacity
            ],
            list: List::new(),
            free: (0..capacity as u32).rev().collect(),
        }
    }
}

impl Replacement for Lru {
    fn capacity(&self) -> usize {
        self.nodes.len()
    }
    fn len(&self) -> usize {
        self.list.len
    }
    fn block_at(&self, slot: u32) -> u64 {
        self.nodes[slot as usize].block
    }
    #[inline]
    fn on_hit(&mut self, slot: u32) {
        if self.list.head != slot {
            self.list.unlink(&mut self.nodes, slot);
            self.list.push_front(&mut self.nodes, slot);
        }
    }
    #[inline]
    fn admit(&mut self, block: u64, can_evict: &mut dyn FnMut(u64) -> bool) -> Option<Admitted> {
        if let Some(slot) = self.free.pop() {
            self.nodes[slot as usize].block = block;
            self.list.push_front(&mut self.nodes, slot);
            return Some(Admitted { slot, victim: None });
        }
        let mut cand = self.list.tail;
        for _ in 0..VICTIM_SCAN_LIMIT {
            if cand == NIL {
                break;
            }
            let victim = self.nodes[cand as usize].block;
            if can_evict(victim) {
                self.list.unlink(&mut self.nodes, cand);
                self.nodes[cand as usize].block = block;
                self.list.push_front(&mut self.nodes, cand);
                return Some(Admitted {
                    slot: cand,
                    victim: Some(victim),
                });
            }
            cand = self.nodes[cand as usize].prev;
        }
        None
    }
    fn remove(&mut self, slot: u32) {
        self.list.unlink(&mut self.nodes, slot);
        self.free.push(slot);
    }
    fn coldest(&self, limit: usize, out: &mut Vec<u32>) {
        let mut c = self.list.tail;
        while c != NIL && out.len() < limit {
            out.push(c);
            c = self.nodes[c as usize].prev;
        }
    }
    fn restore(&mut self, placed: &[(u32, u64)]) -> Result<(), String> {
        self.free = restore_free_list(self.nodes.len(), self.list.len, placed)?;
        for &(slot, block) in placed {
            self.nodes[slot as usize].block = block;
            self.list.push_front(&mut self.nodes, slot);
        }
        Ok(())
    }
}

const T1: u8 = 1;
const T2: u8 = 2;
const B1: u8 = 3;
const B2: u8 = 4;

/// Adaptive replacement cache (ARC): recency list T1, frequency list T2 and
/// their ghosts B1 and B2, with the adaptive target size `p` of T1.
#[derive(Clone, Debug)]
pub struct Arc {
    cap: usize,
    nodes: Vec<Node>,
    t1: List,
    t2: List,
    free: Vec<u32>,
    ghosts: Vec<Node>,
    b1: List,
    b2: List,
    ghost_free: Vec<u32>,
    ghost_index: BlockMap<u32>,
    p: f64,
}

impl Arc {
    /// An empty ARC cache with `capacity` slots (and as many ghost entries).
    pub fn new(capacity: usize) -> Self {
        assert!(capacity < NIL as usize, "cache too large");
        let blank = Node {
            block: 0,
            prev: NIL,
            next: NIL,
            list: 0,
        };
        Arc {
            cap: capacity,
            nodes: vec![blank; capacity],
            t1: List::new(),
            t2: List::new(),
            free: (0..capacity as u32).rev().collect(),
            ghosts: vec![blank; capacity + 1],
            b1: List::new(),
            b2: List::new(),
            ghost_free: (0..capacity as u32 + 1).rev().collect(),
            ghost_index: BlockMap::default(),
            p: 0.0,
        }
    }

    /// The current target size of T1.
    pub fn target_t1(&self) -> f64 {
        self.p
    }

    fn list_mut(&mut self, l: u8) -> &mut List {
        match l {
            T1 => &mut self.t1,
            T2 => &mut self.t2,
            B1 => &mut self.b1,
            _ => &mut self.b2,
        }
    }

    fn ghost_push(&mut self, which: u8, block: u64) {
        let g = match self.ghost_free.pop() {
            Some(g) => g,
            None => {
                // Ghost space is bounded by the cache size; drop the oldest
                // ghost of the longer list (cannot happen in the textbook
                // algorithm, but vetoed victims may perturb the bounds).
                let from = if self.b1.len >= self.b2.len { B1 } else { B2 };
                self.ghost_drop_lru(from);
                self.ghost_free.pop().expect("ghost freed")
            }
        };
        self.ghosts[g as usize].block = block;
        self.ghosts[g as usize].list = which;
        let mut l = *self.list_mut(which);
        l.push_front(&mut self.ghosts, g);
        *self.list_mut(which) = l;
        self.ghost_index.insert(block, g);
    }

    fn ghost_remove(&mut self, g: u32) {
        let which = self.ghosts[g as usize].list;
        let mut l = *self.list_mut(which);
        l.unlink(&mut self.ghosts, g);
        *self.list_mut(which) = l;
        self.ghost_index.remove(&self.ghosts[g as usize].block);
        self.ghost_free.push(g);
    }

    fn ghost_drop_lru(&mut self, which: u8) {
        let tail = self.list_mut(which).tail;
        if tail != NIL {
            self.ghost_remove(tail);
        }
    }

    /// Evicts from T1 or T2 per ARC's REPLACE; the victim becomes a ghost
    /// (unless `to_ghost` is false). Returns the freed slot and the victim.
    fn replace(
        &mut self,
        in_b2: bool,
        to_ghost: bool,
        can_evict: &mut dyn FnMut(u64) -> bool,
    ) -> Option<(u32, u64)> {
        let t1_len = self.t1.len as f64;
        let prefer_t1 =
            self.t1.len >= 1 && ((in_b2 && t1_len == self.p.floor()) || t1_len > self.p);
        let order = if prefer_t1 { [T1, T2] } else { [T2, T1] };
        for l in order {
            let mut cand = self.list_mut(l).tail;
            for _ in 0..VICTIM_SCAN_LIMIT {
                if cand == NIL {
                    break;
                }
                let victim = self.nodes[cand as usize].block;
                if can_evict(victim) {
                    let mut list = *self.list_mut(l);
                    list.unlink(&mut self.nodes, cand);
                    *self.list_mut(l) = list;
                    if to_ghost {
                        self.ghost_push(if l == T1 { B1 } else { B2 }, victim);
                    }
                    return Some((cand, victim));
                }
                cand = self.nodes[cand as usize].prev;
            }
        }
        None
    }

    fn place(&mut self, slot: u32, block: u64, l: u8) {
        self.nodes[slot as usize].block = block;
        self.nodes[slot as usize].list = l;
        let mut list = *self.list_mut(l);
        list.push_front(&mut self.nodes, slot);
        *self.list_mut(l) = list;
    }
}

impl Replacement for Arc {
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.t1.len + self.t2.len
    }
    fn block_at(&self, slot: u32) -> u64 {
        self.nodes[slot as usize].block
    }
    fn on_hit(&mut self, slot: u32) {
        let l = self.nodes[slot as usize].list;
        let mut list = *self.list_mut(l);
        list.unlink(&mut self.nodes, slot);
        *self.list_mut(l) = list;
        self.place(slot, self.nodes[slot as usize].block, T2);
    }
    fn admit(&mut self, block: u64, can_evict: &mut dyn FnMut(u64) -> bool) -> Option<Admitted> {
        let c = self.cap as f64;
        if self.cap == 0 {
            return None;
        }
        if let Some(&g) = self.ghost_index.get(&block) {
            let in_b1 = self.ghosts[g as usize].list == B1;
            let (b1, b2) = (self.b1.len.max(1) as f64, self.b2.len.max(1) as f64);
            let old_p = self.p;
            if in_b1 {
                self.p = (self.p + (b2 / b1).max(1.0)).min(c);
            } else {
                self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
            }
            self.ghost_remove(g);
            let (slot, victim) = match self.free.pop() {
                Some(s) => (s, None),
                None => match self.replace(!in_b1, true, can_evict) {
                    Some((s, v)) => (s, Some(v)),
                    None => {
                        self.p = old_p;
                        self.ghost_push(if in_b1 { B1 } else { B2 }, block);
                        return None;
                    }
                },
            };
            self.place(slot, block, T2);
            return Some(Admitted { slot, victim });
        }
        // Not in T1, T2, B1 or B2.
        let l1 = self.t1.len + self.b1.len;
        let total = l1 + self.t2.len + self.b2.len;
        let mut freed: Option<(u32, u64)> = None;
        if l1 >= self.cap {
            if self.t1.len < self.cap {
                self.ghost_drop_lru(B1);
                if self.free.is_empty() {
                    freed = Some(self.replace(false, true, can_evict)?);
                }
            } else {
                // T1 holds the whole cache: evict its LRU without a ghost.
                freed = Some(self.replace(false, false, can_evict)?);
            }
        } else if total >= self.cap {
            if total >= 2 * self.cap {
                self.ghost_drop_lru(B2);
            }
            if self.free.is_empty() {
                freed = Some(self.replace(false, true, can_evict)?);
            }
        }
        let (slot, victim) = match freed {
            Some((s, v)) => (s, Some(v)),
            None => (self.free.pop()?, None),
        };
        self.place(slot, block, T1);
        Some(Admitted { slot, victim })
    }
    fn remove(&mut self, slot: u32) {
        let l = self.nodes[slot as usize].list;
        let mut list = *self.list_mut(l);
        list.unlink(&mut self.nodes, slot);
        *self.list_mut(l) = list;
        self.free.push(slot);
    }
    fn coldest(&self, limit: usize, out: &mut Vec<u32>) {
        for list in [self.t1, self.t2] {
            let mut c = list.tail;
            while c != NIL && out.len() < limit {
                out.push(c);
                c = self.nodes[c as usize].prev;
            }
        }
    }
    fn restore(&mut self, placed: &[(u32, u64)]) -> Result<(), String> {
        self.free = restore_free_list(self.cap, self.len(), placed)?;
        for &(slot, block) in placed {
            self.place(slot, block, T1);
        }
        Ok(())
    }
}

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
    use crate::rng::Rng;

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
    fn lru_veto_skips_to_next_candidate() {
        let mut l = Lru::new(2);
        let a = l.admit(10, &mut |_| true).unwrap();
        l.admit(11, &mut |_| true).unwrap();
        // 10 is coldest; veto it, so 11 goes.
        let r = l.admit(12, &mut |b| b != 10).unwrap();
        assert_eq!(r.victim, Some(11));
        assert_eq!(l.block_at(a.slot), 10);
        assert!(l.admit(13, &mut |_| false).is_none());
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

    #[test]
    fn arc_invariants_hold_under_random_use() {
        let mut a = Arc::new(50);
        let mut index: BlockMap<u32> = BlockMap::default();
        let mut r = Rng::new(9);
        for _ in 0..100_000 {
            let b = if r.below(2) == 0 {
                r.below(60)
            } else {
                r.below(400)
            };
            if let Some(&s) = index.get(&b) {
                if r.below(20) == 0 {
                    a.remove(s);
                    index.remove(&b);
                } else {
                    a.on_hit(s);
                }
            } else if let Some(ad) = a.admit(b, &mut |_| true) {
                if let Some(v) = ad.victim {
                    assert!(index.remove(&v).is_some());
                }
                index.insert(b, ad.slot);
            }
            assert_eq!(a.len(), index.len());
            assert!(a.len() <= 50);
            assert!(a.b1.len + a.b2.len + a.len() <= 101);
            assert!((0.0..=50.0).contains(&a.p));
        }
        for (&b, &s) in &index {
            assert_eq!(a.block_at(s), b);
            assert!(!a.ghost_index.contains_key(&b));
        }
    }
}
