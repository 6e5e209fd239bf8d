//! The order in which a write-back cache's dirty slots were last written,
//! least recently first: what its flusher writes home first, as Open CAS's
//! ALRU cleaning policy and dm-writecache do. An intrusive list over the
//! slots: adding, rewriting and cleaning a slot are O(1), and the flusher
//! reads the oldest without looking at clean slots.

use crate::replacement::list::{impl_links, Links, List, NIL};

/// Marks a slot that is not in the list (`older` of a listed slot is a
/// slot or [`NIL`]).
const UNLISTED: u32 = u32::MAX - 1;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// The next more recently written slot (the list's head is the newest).
    prev: u32,
    /// The next less recently written slot.
    next: u32,
}
impl_links!(Node);

/// The dirty slots of one cache, newest write first.
#[derive(Clone, Debug)]
pub(crate) struct DirtyOrder {
    nodes: Vec<Node>,
    list: List,
}

impl DirtyOrder {
    /// No dirty slot among `slots`.
    pub(crate) fn new(slots: usize) -> DirtyOrder {
        assert!(
            slots < UNLISTED as usize,
            "{slots} slots do not fit the list"
        );
        DirtyOrder {
            nodes: vec![
                Node {
                    prev: UNLISTED,
                    next: UNLISTED
                };
                slots
            ],
            list: List::new(),
        }
    }

    /// How many slots are dirty.
    pub(crate) fn len(&self) -> usize {
        self.list.len
    }

    /// Whether `slot` is dirty.
    pub(crate) fn contains(&self, slot: u32) -> bool {
        self.nodes[slot as usize].prev != UNLISTED
    }

    /// `slot` was written: it becomes the newest (listed or not).
    pub(crate) fn written(&mut self, slot: u32) {
        if self.contains(slot) {
            self.list.unlink(&mut self.nodes, slot);
        }
        self.list.push_front(&mut self.nodes, slot);
    }

    /// `slot` is clean (or gone): it leaves the list.
    pub(crate) fn remove(&mut self, slot: u32) {
        assert!(self.contains(slot), "slot {slot} is not dirty");
        self.list.unlink(&mut self.nodes, slot);
        self.nodes[slot as usize] = Node {
            prev: UNLISTED,
            next: UNLISTED,
        };
    }

    /// Every slot clean.
    pub(crate) fn clear(&mut self) {
        while self.list.tail != NIL {
            self.remove(self.list.tail);
        }
    }

    /// The dirty slots, least recently written first.
    pub(crate) fn oldest_first(&self) -> impl Iterator<Item = u32> + '_ {
        let mut at = self.list.tail;
        std::iter::from_fn(move || {
            let slot = at;
            (slot != NIL).then(|| {
                at = self.nodes[slot as usize].prev;
                slot
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(d: &DirtyOrder) -> Vec<u32> {
        d.oldest_first().collect()
    }

    #[test]
    fn slots_leave_in_the_order_they_were_last_written() {
        let mut d = DirtyOrder::new(8);
        assert!(order(&d).is_empty());
        for slot in [5, 2, 7, 0] {
            d.written(slot);
        }
        assert_eq!(order(&d), [5, 2, 7, 0]);
        // A rewrite makes a slot the newest.
        d.written(2);
        assert_eq!(order(&d), [5, 7, 0, 2]);
        d.remove(7);
        assert!(!d.contains(7) && d.contains(5));
        assert_eq!(order(&d), [5, 0, 2]);
        d.remove(5);
        d.remove(2);
        assert_eq!(order(&d), [0]);
        assert_eq!(d.len(), 1);
        d.written(7);
        d.clear();
        assert_eq!((d.len(), order(&d)), (0, vec![]));
        assert!(!(0..8).any(|s| d.contains(s)));
    }

    #[test]
    #[should_panic(expected = "slot 3 is not dirty")]
    fn cleaning_a_clean_slot_is_refused() {
        DirtyOrder::new(4).remove(3);
    }
}
