//! The DRAM cache: items by key in LRU order under a byte budget. Items it
//! evicts are handed back for the flash caches below it.

use bytes::Bytes;
use lru::LruCache;

/// Bytes charged per item beside its key and value (hash table entry, LRU
/// links, the item's own fields), so that many tiny items cannot overrun
/// the budget.
pub const ITEM_OVERHEAD_BYTES: u64 = 64;

/// An item held in DRAM.
#[derive(Debug, Clone)]
pub struct DramItem {
    /// The value.
    pub value: Bytes,
    /// Milliseconds since the epoch after which it is gone; 0 never.
    pub expires_at_ms: u64,
    /// The flash caches hold this same item (it was promoted from there
    /// and not changed since), so evicting it needs no flash write.
    pub on_flash: bool,
}

/// An LRU cache of items under a byte budget.
#[derive(Clone)]
pub struct Dram {
    items: LruCache<Bytes, DramItem>,
    used_bytes: u64,
    budget_bytes: u64,
}

fn charge_bytes(key: &[u8], item: &DramItem) -> u64 {
    key.len() as u64 + item.value.len() as u64 + ITEM_OVERHEAD_BYTES
}

impl Dram {
    /// An empty cache that holds at most `budget_bytes`.
    pub fn new(budget_bytes: u64) -> Dram {
        Dram {
            items: LruCache::unbounded(),
            used_bytes: 0,
            budget_bytes,
        }
    }

    /// The item of `key`, marked most recently used.
    pub fn get(&mut self, key: &[u8]) -> Option<&DramItem> {
        self.items.get(key)
    }

    /// Whether `key` is held (without touching its recency).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.items.contains(key)
    }

    /// Inserts or replaces an item as the most recently used and pushes
    /// the least recently used items out to `evicted` until the budget
    /// holds. An item larger than the whole budget is not kept (it goes to
    /// `evicted` at once).
    pub fn insert(&mut self, key: Bytes, item: DramItem, evicted: &mut Vec<(Bytes, DramItem)>) {
        let charge = charge_bytes(&key, &item);
        self.remove(&key);
        if charge > self.budget_bytes {
            evicted.push((key, item));
            return;
        }
        self.used_bytes += charge;
        self.items.push(key, item);
        while self.used_bytes > self.budget_bytes {
            let (k, v) = self.items.pop_lru().expect("bytes used means items held");
            self.used_bytes -= charge_bytes(&k, &v);
            evicted.push((k, v));
        }
    }

    /// Removes the item of `key`, returning it.
    pub fn remove(&mut self, key: &[u8]) -> Option<DramItem> {
        let item = self.items.pop(key)?;
        self.used_bytes -= charge_bytes(key, &item);
        Some(item)
    }

    /// Bytes charged for the items held.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item is held.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(len: usize) -> DramItem {
        DramItem {
            value: Bytes::from(vec![7; len]),
            expires_at_ms: 0,
            on_flash: false,
        }
    }

    #[test]
    fn evicts_least_recently_used_to_stay_in_budget() {
        let per = 1 + 100 + ITEM_OVERHEAD_BYTES;
        let mut d = Dram::new(3 * per);
        let mut out = Vec::new();
        for k in [b"a", b"b", b"c"] {
            d.insert(Bytes::from_static(k), item(100), &mut out);
        }
        assert!(out.is_empty());
        assert!(d.get(b"a").is_some());
        d.insert(Bytes::from_static(b"d"), item(100), &mut out);
        assert_eq!(
            out.iter().map(|(k, _)| k.as_ref()).collect::<Vec<_>>(),
            vec![&b"b"[..]]
        );
        assert_eq!(d.used_bytes(), 3 * per);
        d.insert(Bytes::from_static(b"huge"), item(10_000), &mut out);
        assert_eq!(out.last().map(|(k, _)| k.as_ref()), Some(&b"huge"[..]));
        assert_eq!(d.len(), 3);
        assert!(d.remove(b"a").is_some());
        assert_eq!(d.used_bytes(), 2 * per);
    }
}
