//! Least-recently-used replacement.

use super::list::{impl_links, prefetch_links, Links, List, NIL};
use super::{restore_free_list, Admitted, Replacement, VICTIM_SCAN_LIMIT};

/// An LRU node: 16 bytes (ARC's nodes also record their list).
#[derive(Clone, Copy, Debug)]
struct LruNode {
    block: u64,
    prev: u32,
    next: u32,
}

impl_links!(LruNode);

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
    fn prefetch(&self, slot: u32, stage: crate::prefetch::Stage) {
        prefetch_links(&self.nodes, slot, stage);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
