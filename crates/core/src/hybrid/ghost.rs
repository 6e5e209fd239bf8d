//! A ghost cache: the page numbers of recently evicted pages, no data, in
//! recency order, bounded in size.

use std::collections::BTreeMap;

use crate::map::BlockMap;

/// Recently evicted pages, most recent last.
#[derive(Clone, Debug, Default)]
pub struct Ghost {
    order: BTreeMap<u64, u64>,
    seq_of: BlockMap<u64>,
    next_seq: u64,
}

impl Ghost {
    /// Pages remembered.
    pub fn len(&self) -> usize {
        self.seq_of.len()
    }

    /// True when no page is remembered.
    pub fn is_empty(&self) -> bool {
        self.seq_of.is_empty()
    }

    /// Remembers `page` as the most recently evicted, forgetting the
    /// oldest beyond `capacity`.
    pub fn push(&mut self, page: u64, capacity: usize) {
        self.take(page);
        self.next_seq += 1;
        self.order.insert(self.next_seq, page);
        self.seq_of.insert(page, self.next_seq);
        while self.seq_of.len() > capacity {
            let (_, old) = self.order.pop_first().expect("not empty");
            self.seq_of.remove(&old);
        }
    }

    /// True when `page` is remembered.
    pub fn contains(&self, page: u64) -> bool {
        self.seq_of.contains_key(&page)
    }

    /// Forgets `page`; true when it was remembered (a ghost hit).
    pub fn take(&mut self, page: u64) -> bool {
        match self.seq_of.remove(&page) {
            Some(s) => {
                self.order.remove(&s);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_most_recent_within_capacity() {
        let mut g = Ghost::default();
        for p in 0..5 {
            g.push(p, 3);
        }
        assert_eq!(g.len(), 3);
        assert!(!g.take(1));
        assert!(g.take(3));
        g.push(2, 3);
        g.push(9, 3);
        g.push(8, 3);
        assert!(!g.take(4), "pushed out by 2, 9 and 8");
        assert!(g.take(2) && g.take(9) && g.take(8));
        assert!(g.is_empty());
    }
}
