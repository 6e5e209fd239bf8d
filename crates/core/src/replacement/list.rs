//! The intrusive doubly linked list both replacement algorithms keep their
//! recency order in: nodes live in an arena indexed by slot.

/// No node.
pub(crate) const NIL: u32 = u32::MAX;

/// An intrusive doubly linked list over an arena of nodes; head is MRU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: usize,
}

/// Nodes that carry list links.
pub(crate) trait Links {
    fn prev(&self) -> u32;
    fn next(&self) -> u32;
    fn set_prev(&mut self, v: u32);
    fn set_next(&mut self, v: u32);
}

/// Implements [`Links`] for a node type with `prev` and `next` fields.
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

/// Hints a coming hit on node `i` (see [`crate::prefetch`]): the node
/// itself at the first stage; at the second, the neighbours that unlinking
/// it will write.
#[inline]
pub(super) fn prefetch_links<N: Links>(nodes: &[N], i: u32, stage: crate::prefetch::Stage) {
    use crate::prefetch::{prefetch_at, Stage};
    match stage {
        Stage::First => prefetch_at(nodes, i as usize),
        Stage::Second => {
            if let Some(n) = nodes.get(i as usize) {
                prefetch_at(nodes, n.prev() as usize);
                prefetch_at(nodes, n.next() as usize);
            }
        }
    }
}

impl List {
    pub(crate) const fn new() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn push_front<N: Links>(&mut self, nodes: &mut [N], i: u32) {
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
    pub(crate) fn unlink<N: Links>(&mut self, nodes: &mut [N], i: u32) {
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

pub(crate) use impl_links;
