//! The key index in DRAM: each live key's newest record, in key order (for
//! scans), with the bytes the keys' records take in the log and the bytes
//! a checkpoint of it takes. Applying a record is the same at run time
//! (when its write finishes) and at recovery (when the log is read back),
//! so both reach the same index.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use super::meta::{entry_bytes, Ptr};
use super::record::Kind;

/// Keys and where their values lie.
#[derive(Clone, Debug, Default)]
pub struct Index {
    map: BTreeMap<Bytes, Ptr>,
    live_bytes: u64,
    checkpoint_bytes: u64,
}

impl Index {
    /// The newest record of `key`.
    pub fn get(&self, key: &[u8]) -> Option<Ptr> {
        self.map.get(key).copied()
    }

    /// Keys indexed.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is indexed.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes the live keys' records take in the log.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes a checkpoint of the index takes.
    pub fn checkpoint_bytes(&self) -> u64 {
        self.checkpoint_bytes
    }

    /// Keys from `start` on, in order.
    pub fn range_from<'a>(&'a self, start: &[u8]) -> impl Iterator<Item = (&'a Bytes, &'a Ptr)> {
        self.map
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Ptr)> {
        self.map.iter()
    }

    /// The oldest position a live record holds.
    pub fn oldest_pos(&self) -> Option<u64> {
        self.map.values().map(|p| p.pos).min()
    }

    /// Applies a record found at `at`. A move counts only if the key's
    /// newest record is still the one it copied. Returns whether the
    /// index changed.
    pub fn apply(&mut self, kind: Kind, key: &Bytes, at: Ptr, from: u64) -> bool {
        match kind {
            Kind::Put => {
                self.set(key, at);
                true
            }
            Kind::Move if self.get(key).is_some_and(|p| p.pos == from) => {
                self.set(key, at);
                true
            }
            Kind::Move | Kind::Pad => false,
            Kind::Del => match self.map.remove(key) {
                Some(old) => {
                    self.live_bytes -= old.len as u64;
                    self.checkpoint_bytes -= entry_bytes(key.len());
                    true
                }
                None => false,
            },
        }
    }

    fn set(&mut self, key: &Bytes, at: Ptr) {
        match self.map.insert(key.clone(), at) {
            Some(old) => self.live_bytes -= old.len as u64,
            None => self.checkpoint_bytes += entry_bytes(key.len()),
        }
        self.live_bytes += at.len as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_counts_only_over_the_record_it_copied() {
        let k = Bytes::from_static(b"k");
        let mut ix = Index::default();
        assert!(ix.apply(Kind::Put, &k, Ptr { pos: 100, len: 40 }, 0));
        assert!(ix.apply(Kind::Put, &k, Ptr { pos: 200, len: 50 }, 0));
        assert!(
            !ix.apply(Kind::Move, &k, Ptr { pos: 300, len: 40 }, 100),
            "stale move"
        );
        assert_eq!(ix.get(b"k"), Some(Ptr { pos: 200, len: 50 }));
        assert!(ix.apply(Kind::Move, &k, Ptr { pos: 400, len: 50 }, 200));
        assert_eq!(
            (ix.live_bytes(), ix.checkpoint_bytes()),
            (50, entry_bytes(1))
        );
        assert!(ix.apply(Kind::Del, &k, Ptr { pos: 500, len: 33 }, 0));
        assert!(
            !ix.apply(Kind::Move, &k, Ptr { pos: 600, len: 50 }, 400),
            "a move after a delete"
        );
        assert_eq!(
            (ix.len(), ix.live_bytes(), ix.checkpoint_bytes()),
            (0, 0, 0)
        );
    }
}
