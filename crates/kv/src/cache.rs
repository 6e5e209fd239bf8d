//! Cache mode, shaped like CacheLib over Cerberus: a DRAM cache in front of
//! a Small Object Cache (items up to `small_item_max_bytes`) and a Large
//! Object Cache (larger items), both on one tiermux volume, so that every
//! hierarchy policy manages the devices underneath.
//!
//! A lookup tries DRAM, then the flash cache that may hold the key; a flash
//! hit is promoted to DRAM. Items DRAM evicts go to flash. A set or delete
//! changes DRAM at once and removes every flash copy of the key (the small
//! cache's removal queues behind the bucket's earlier changes), so a key
//! has at most one flash copy and no lookup returns a value older than the
//! last acknowledged set. A flash read that a set or delete overtook still
//! answers its own (concurrent) lookup but is not promoted.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt};

use bytes::Bytes;

use crate::command::{Command, Reply};
use crate::dram::{Dram, DramItem};
use crate::io::{IoId, IoQueue, IoRequest, BLOCK_BYTES};
use crate::item::{self, MAX_KEY_BYTES};
use crate::loc::{Loc, LocStats, RegionEviction};
use crate::soc::{Found, Soc, SocStats, BUCKET_BYTES, BUCKET_ITEM_BYTES};

/// How a cache is laid out and sized.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    /// Bytes of the volume the flash caches use (from offset 0).
    pub volume_bytes: u64,
    /// The DRAM cache's budget, bytes.
    pub dram_bytes: u64,
    /// The share of the volume given to the small-object cache (0 to 1).
    pub soc_share: f64,
    /// Items whose encoding is at most this go to the small-object cache.
    pub small_item_max_bytes: u32,
    /// Bytes of a large-object region.
    pub region_bytes: u32,
    /// Regions held in DRAM at once: the open one and those being written
    /// (CacheLib's in-memory buffers, two per clean region it keeps; one
    /// clean region by default, so two).
    pub region_buffers: u32,
    /// The largest write of a region's flush; a region is written in
    /// pieces of this size, one after another, as CacheLib's navy does
    /// (`deviceMaxWriteSize`, 1 MiB in CacheBench). 0: the whole region
    /// in one write.
    pub max_write_bytes: u32,
    /// Discard (TRIM) each evicted region on the volume before reusing it.
    pub trim_regions: bool,
    /// Which large-object region is evicted when a clean one is needed.
    pub region_eviction: RegionEviction,
    /// Bytes of items that may wait for a large-object region when none
    /// can take them now (CacheLib's parcel memory); past it, an item
    /// DRAM evicts is dropped.
    pub insert_queue_bytes: u64,
    /// Tells this cache's buckets from those an earlier run left.
    pub generation: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            volume_bytes: 1 << 30,
            dram_bytes: 64 << 20,
            soc_share: 1.0 / 3.0,
            small_item_max_bytes: 2048,
            region_bytes: 1 << 20,
            region_buffers: 2,
            max_write_bytes: 1 << 20,
            trim_regions: true,
            region_eviction: RegionEviction::Lru,
            insert_queue_bytes: 256 << 20,
            generation: 1,
        }
    }
}

/// A configuration the cache cannot take, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ConfigError {
    /// The field at fault.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn bad(field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        problem: problem.into(),
    }
}

/// Checks that a flash cache of `flash_bytes` fits a volume of
/// `volume_bytes`: whole 4 KiB blocks, at least one, no more than the
/// volume. The caller names its own setting in the error.
pub fn check_flash_bytes(flash_bytes: u64, volume_bytes: u64) -> Result<(), String> {
    if flash_bytes > 0 && flash_bytes.is_multiple_of(BLOCK_BYTES) && flash_bytes <= volume_bytes {
        Ok(())
    } else {
        Err(format!(
            "{flash_bytes} bytes is not a positive multiple of 4096 no larger than the {volume_bytes}-byte volume"
        ))
    }
}

impl CacheConfig {
    /// Bytes of the small-object cache (whole buckets).
    pub fn soc_bytes(&self) -> u64 {
        (self.volume_bytes as f64 * self.soc_share) as u64 / BUCKET_BYTES as u64
            * BUCKET_BYTES as u64
    }

    /// Where the large-object cache starts: the first region boundary
    /// after the small-object cache, so that regions align with the
    /// volume's own units (segments, erase blocks) of their size or less.
    pub fn loc_base(&self) -> u64 {
        self.soc_bytes()
            .next_multiple_of(self.region_bytes.max(1) as u64)
    }

    /// Regions of the large-object cache.
    pub fn regions(&self) -> u64 {
        self.volume_bytes.saturating_sub(self.loc_base()) / self.region_bytes.max(1) as u64
    }

    /// Checks the sizes fit together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(0.0..=1.0).contains(&self.soc_share) {
            return Err(bad(
                "soc_share",
                format!("{} is not between 0 and 1", self.soc_share),
            ));
        }
        if self.region_bytes == 0 || !(self.region_bytes as u64).is_multiple_of(BLOCK_BYTES) {
            return Err(bad(
                "region_bytes",
                format!("{} is not a positive multiple of 4096", self.region_bytes),
            ));
        }
        if self.small_item_max_bytes as usize > BUCKET_ITEM_BYTES {
            return Err(bad(
                "small_item_max_bytes",
                format!(
                    "{} is more than a bucket holds ({BUCKET_ITEM_BYTES})",
                    self.small_item_max_bytes
                ),
            ));
        }
        if self.soc_share > 0.0 && self.soc_bytes() < BUCKET_BYTES as u64 {
            return Err(bad(
                "soc_share",
                "gives the small-object cache less than one bucket",
            ));
        }
        if self.soc_bytes() / BUCKET_BYTES as u64 > u32::MAX as u64 {
            return Err(bad("soc_share", "gives more than 2^32 buckets"));
        }
        if self.soc_share < 1.0 && !(2..=u32::MAX as u64).contains(&self.regions()) {
            return Err(bad(
                "region_bytes",
                format!(
                    "the large-object cache needs 2 to 2^32 regions, and gets {}",
                    self.regions()
                ),
            ));
        }
        if self.region_buffers == 0 {
            return Err(bad("region_buffers", "must be at least 1"));
        }
        if !(self.max_write_bytes as u64).is_multiple_of(BLOCK_BYTES) {
            return Err(bad(
                "max_write_bytes",
                format!(
                    "{} is not a multiple of 4096 (or 0, a region in one write)",
                    self.max_write_bytes
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Exists,
    Del,
}

#[derive(Clone, Debug)]
struct Lookup {
    tag: u64,
    key: Bytes,
    kind: Kind,
    now_ms: u64,
    /// The key's [`Watch::changes`] when the lookup began.
    changes_at_start: u64,
}

/// Lookups in flight for a key, and the sets and deletes of the key since
/// the first of them began: a lookup that one of those overtook answers
/// as absent, since what it reads may be the newer value.
#[derive(Clone, Debug, Default)]
struct Watch {
    readers: u32,
    changes: u64,
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// GETs answered.
    pub gets: u64,
    /// GETs answered from DRAM.
    pub dram_hits: u64,
    /// GETs answered from flash: read from the volume, or from a region
    /// buffer not yet written.
    pub flash_hits: u64,
    /// SETs done.
    pub sets: u64,
    /// Items DRAM evicted to the small-object cache.
    pub to_soc: u64,
    /// Items DRAM evicted to the large-object cache.
    pub to_loc: u64,
    /// Unchanged items promoted from flash that DRAM evicted after their
    /// flash copy was gone, and so wrote again (CacheLib's
    /// `numNvmPutFromClean`).
    pub rewritten_clean: u64,
    /// Flash lookups a set or delete of their key overtook, answered as
    /// absent.
    pub overtaken_lookups: u64,
    /// The small-object cache's counters.
    pub soc: SocStats,
    /// The large-object cache's counters.
    pub loc: LocStats,
}

/// The cache machine: commands in, storage requests out, completions in,
/// replies out. It does no I/O and reads no clock.
#[derive(Clone)]
pub struct Cache {
    cfg: CacheConfig,
    dram: Dram,
    soc: Option<Soc>,
    loc: Option<Loc>,
    io: IoQueue,
    replies: VecDeque<(u64, Reply)>,
    lookups: HashMap<u64, Lookup>,
    next_lookup: u64,
    watches: HashMap<Bytes, Watch>,
    found: Vec<Found>,
    evicted: Vec<(Bytes, DramItem)>,
    stats: CacheStats,
}

impl Cache {
    /// An empty cache.
    pub fn new(cfg: CacheConfig) -> Result<Cache, ConfigError> {
        cfg.validate()?;
        let soc_bytes = cfg.soc_bytes();
        let soc = (soc_bytes > 0)
            .then(|| Soc::new(0, (soc_bytes / BUCKET_BYTES as u64) as u32, cfg.generation));
        let loc = (cfg.soc_share < 1.0).then(|| {
            Loc::new(
                cfg.loc_base(),
                cfg.region_bytes,
                cfg.regions() as u32,
                cfg.region_buffers,
                cfg.trim_regions,
                cfg.insert_queue_bytes,
                cfg.region_eviction,
            )
            .with_max_write_bytes(cfg.max_write_bytes)
        });
        Ok(Cache {
            dram: Dram::new(cfg.dram_bytes),
            soc,
            loc,
            cfg,
            io: IoQueue::default(),
            replies: VecDeque::new(),
            lookups: HashMap::new(),
            next_lookup: 0,
            watches: HashMap::new(),
            found: Vec::new(),
            evicted: Vec::new(),
            stats: CacheStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> CacheStats {
        let mut s = self.stats;
        s.soc = self.soc.as_ref().map(Soc::stats).unwrap_or_default();
        s.loc = self.loc.as_ref().map(Loc::stats).unwrap_or_default();
        s
    }

    /// The largest value a key of `key_len` bytes may have.
    pub fn max_value_bytes(&self, key_len: usize) -> usize {
        let room = match &self.loc {
            Some(l) => l.max_item_bytes(),
            None => self.cfg.small_item_max_bytes as usize,
        };
        room.saturating_sub(item::encoded_len(key_len, 0))
    }

    /// Starts a command; its reply comes out of [`Cache::pop_reply`] with
    /// `tag`, now or after storage requests finish. `now_ms` is the
    /// caller's clock, for expiry.
    pub fn submit(&mut self, tag: u64, cmd: Command, now_ms: u64) {
        match cmd {
            Command::Get { key } => self.get(tag, key, Kind::Get, now_ms),
            Command::Exists { key } => self.get(tag, key, Kind::Exists, now_ms),
            Command::Set {
                key,
                value,
                expires_at_ms,
            } => self.set(tag, key, value, expires_at_ms),
            Command::Del { key } => self.del(tag, key, now_ms),
            Command::Scan { .. } => {
                let msg = "SCAN needs a store: the cache keeps no key order".to_string();
                self.replies.push_back((tag, Reply::Error(msg)));
            }
        }
        self.settle();
    }

    /// The next storage request for the driver.
    pub fn pop_io(&mut self) -> Option<IoRequest> {
        self.io.pop()
    }

    /// A storage request finished: `result` holds the bytes read (empty for
    /// a write) or an errno.
    pub fn complete(&mut self, id: IoId, result: Result<&[u8], i32>) {
        self.io.completed();
        let mut handled = false;
        if let Some(soc) = self.soc.as_mut() {
            handled = soc.complete(id, result, &mut self.io, &mut self.found);
        }
        if !handled {
            let loc = self
                .loc
                .as_mut()
                .expect("a completion for a cache without regions");
            assert!(
                loc.complete(id, result, &mut self.io, &mut self.found),
                "completion of unknown request {id}"
            );
        }
        self.settle();
    }

    /// The next finished command's tag and reply.
    pub fn pop_reply(&mut self) -> Option<(u64, Reply)> {
        self.replies.pop_front()
    }

    /// Storage requests issued and not completed.
    pub fn io_in_flight(&self) -> u64 {
        self.io.in_flight()
    }

    /// Writes the open large-object region (so that a test or a shutdown
    /// sees every item on the volume).
    pub fn flush(&mut self) {
        if let Some(loc) = self.loc.as_mut() {
            loc.flush_open(&mut self.io);
        }
    }

    fn check_key(&mut self, tag: u64, key: &[u8]) -> bool {
        if key.len() > MAX_KEY_BYTES {
            let msg = format!("key of {} bytes is longer than {MAX_KEY_BYTES}", key.len());
            self.replies.push_back((tag, Reply::Error(msg)));
            return false;
        }
        true
    }

    fn get(&mut self, tag: u64, key: Bytes, kind: Kind, now_ms: u64) {
        if !self.check_key(tag, &key) {
            return;
        }
        self.stats.gets += (kind == Kind::Get) as u64;
        if let Some(it) = self.dram.get(&key) {
            let value = (!item::expired(it.expires_at_ms, now_ms)).then(|| it.value.clone());
            self.stats.dram_hits += (kind == Kind::Get && value.is_some()) as u64;
            let reply = match kind {
                Kind::Get => Reply::Value(value),
                Kind::Exists | Kind::Del => Reply::Count(value.is_some() as u64),
            };
            self.replies.push_back((tag, reply));
            return;
        }
        self.probe(tag, key, kind, now_ms);
    }

    /// Looks a key up on flash; returns the lookup's number.
    fn probe(&mut self, tag: u64, key: Bytes, kind: Kind, now_ms: u64) -> u64 {
        let t = self.next_lookup;
        self.next_lookup += 1;
        let w = self.watches.entry(key.clone()).or_default();
        w.readers += 1;
        let l = Lookup {
            tag,
            key: key.clone(),
            kind,
            now_ms,
            changes_at_start: w.changes,
        };
        self.lookups.insert(t, l);
        match (&mut self.loc, &mut self.soc) {
            (Some(loc), _) if loc.contains(&key) => {
                loc.lookup(t, key, &mut self.io, &mut self.found)
            }
            (_, Some(soc)) => soc.lookup(t, key, &mut self.io, &mut self.found),
            _ => self.found.push(Found { tag: t, item: None }),
        }
        t
    }

    fn set(&mut self, tag: u64, key: Bytes, value: Bytes, expires_at_ms: u64) {
        if !self.check_key(tag, &key) {
            return;
        }
        if value.len() > self.max_value_bytes(key.len()) {
            let msg = format!(
                "value of {} bytes is larger than the cache stores ({})",
                value.len(),
                self.max_value_bytes(key.len())
            );
            self.replies.push_back((tag, Reply::Error(msg)));
            return;
        }
        self.stats.sets += 1;
        self.invalidate_flash(&key);
        let item = DramItem {
            value,
            expires_at_ms,
            on_flash: false,
        };
        self.dram.insert(key, item, &mut self.evicted);
        self.replies.push_back((tag, Reply::Stored));
    }

    fn del(&mut self, tag: u64, key: Bytes, now_ms: u64) {
        if !self.check_key(tag, &key) {
            return;
        }
        match self.dram.remove(&key) {
            Some(it) => {
                let n = !item::expired(it.expires_at_ms, now_ms) as u64;
                self.replies.push_back((tag, Reply::Count(n)));
            }
            // The probe is queued before the removal, so it sees the
            // state the delete changes; that change is the delete's own,
            // not one that overtook the probe.
            None => {
                let t = self.probe(tag, key.clone(), Kind::Del, now_ms);
                self.invalidate_flash(&key);
                let changes = self.watches.get(&key).expect("a watched key").changes;
                let l = self.lookups.get_mut(&t).expect("the delete's probe");
                l.changes_at_start = changes;
                return;
            }
        }
        self.invalidate_flash(&key);
    }

    /// Removes every flash copy of `key` and marks its lookups in flight
    /// as overtaken: they answer as absent and promote nothing.
    fn invalidate_flash(&mut self, key: &Bytes) {
        if let Some(w) = self.watches.get_mut(key) {
            w.changes += 1;
        }
        if let Some(loc) = self.loc.as_mut() {
            loc.remove(key);
        }
        if let Some(soc) = self.soc.as_mut() {
            soc.remove(key.clone(), &mut self.io);
        }
    }

    /// Answers finished lookups and moves DRAM's evictions to flash, until
    /// neither has work left.
    fn settle(&mut self) {
        loop {
            if let Some(f) = self.found.pop() {
                self.finish_lookup(f);
            } else if let Some((key, it)) = self.evicted.pop() {
                self.demote(key, it);
            } else {
                break;
            }
        }
    }

    fn finish_lookup(&mut self, f: Found) {
        let l = self
            .lookups
            .remove(&f.tag)
            .expect("an answer for a lookup in flight");
        let w = self.watches.get_mut(&l.key).expect("a watched key");
        w.readers -= 1;
        // Overtaken: the read may have found what a later set wrote, and
        // a connection's commands answer in order, so it finds nothing.
        let fresh = w.changes == l.changes_at_start;
        self.stats.overtaken_lookups += !fresh as u64;
        if w.readers == 0 {
            self.watches.remove(&l.key);
        }
        let item = f
            .item
            .filter(|(_, exp)| fresh && !item::expired(*exp, l.now_ms));
        let reply = match l.kind {
            Kind::Get => {
                self.stats.flash_hits += item.is_some() as u64;
                if let Some((value, exp)) = &item {
                    if fresh && !self.dram.contains(&l.key) {
                        let it = DramItem {
                            value: value.clone(),
                            expires_at_ms: *exp,
                            on_flash: true,
                        };
                        self.dram.insert(l.key.clone(), it, &mut self.evicted);
                    }
                }
                Reply::Value(item.map(|(v, _)| v))
            }
            Kind::Exists | Kind::Del => Reply::Count(item.is_some() as u64),
        };
        self.replies.push_back((l.tag, reply));
    }

    /// Whether the flash cache an item of `len` encoded bytes goes to may
    /// still hold `key` (the small-object cache's Bloom filter never
    /// misses a key it holds; the large-object cache's index is exact).
    fn flash_may_hold(&self, key: &[u8], len: usize) -> bool {
        match (&self.soc, &self.loc) {
            (Some(soc), _) if len <= self.cfg.small_item_max_bytes as usize => soc.may_hold(key),
            (_, Some(loc)) => loc.contains(key),
            _ => false,
        }
    }

    /// Moves an item DRAM evicted to the flash cache its size calls for.
    fn demote(&mut self, key: Bytes, it: DramItem) {
        let len = item::encoded_len(key.len(), it.value.len());
        if it.on_flash {
            if self.flash_may_hold(&key, len) {
                return;
            }
            // Its flash copy was evicted while it sat in DRAM: written
            // again, as CacheLib puts an item its evict callback marked
            // `NvmEvicted`.
            self.stats.rewritten_clean += 1;
        }
        if len <= self.cfg.small_item_max_bytes as usize {
            if let Some(soc) = self.soc.as_mut() {
                self.stats.to_soc += 1;
                soc.insert(key, it.value, it.expires_at_ms, &mut self.io);
                return;
            }
        }
        if let Some(loc) = self.loc.as_mut() {
            self.stats.to_loc += loc.insert(key, it.value, it.expires_at_ms, &mut self.io) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_flash_bytes, CacheConfig};

    #[test]
    fn a_region_write_piece_is_whole_blocks() {
        for (max_write_bytes, ok) in [(0, true), (4096, true), (1 << 20, true), (1000, false)] {
            let cfg = CacheConfig {
                max_write_bytes,
                ..CacheConfig::default()
            };
            match cfg.validate() {
                Ok(()) => assert!(ok, "{max_write_bytes} taken"),
                Err(e) => assert!(
                    !ok && e.field == "max_write_bytes",
                    "{max_write_bytes}: {e}"
                ),
            }
        }
    }

    #[test]
    fn a_flash_cache_is_whole_blocks_within_the_volume() {
        let volume_bytes = 1 << 30;
        for ok in [4096, 1 << 20, volume_bytes] {
            assert_eq!(check_flash_bytes(ok, volume_bytes), Ok(()), "{ok}");
        }
        for bad in [0, 4095, 4097, volume_bytes + 4096] {
            let problem = check_flash_bytes(bad, volume_bytes).unwrap_err();
            assert!(problem.starts_with(&format!("{bad} bytes")), "{problem}");
        }
    }
}
