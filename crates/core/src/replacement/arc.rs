//! Adaptive replacement (ARC, Megiddo and Modha, FAST '03).

use super::list::{impl_links, prefetch_links, Links, List, NIL};
use super::{restore_free_list, Admitted, Replacement, VICTIM_SCAN_LIMIT};
use crate::map::BlockMap;

#[derive(Clone, Copy, Debug)]
struct Node {
    block: u64,
    prev: u32,
    next: u32,
    list: u8,
}

impl_links!(Node);

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
    fn prefetch(&self, slot: u32, stage: crate::prefetch::Stage) {
        prefetch_links(&self.nodes, slot, stage);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

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
