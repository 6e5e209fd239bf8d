//! The Large Object Cache: CacheLib's BlockCache. The volume range is cut
//! into regions; items are appended to the open region's buffer in DRAM,
//! a full region is written in pieces of at most `max_write_bytes`, each
//! issued when the one before completes (as navy's `Device::write` does),
//! and a DRAM index maps each key's hash to its place. A pool of clean
//! regions is kept ready (as CacheLib's reclaim does): when it runs low,
//! a sealed region is evicted whole, its items leave the index, and, with
//! `trim_regions`, its bytes are discarded on the volume (a TRIM) before
//! it is reused, so that the volume sees the next write there as new
//! data. Which region goes is
//! [`RegionEviction`]'s choice: by default the least recently read, as
//! CacheLib's region LRU (its default, `blockCacheLru`) moves a region to
//! the head of its list on every lookup it answers; or the oldest written
//! (FIFO).
//!
//! Items in the open region or in one being written are read from its
//! buffer; a sealed region with reads in flight is not evicted, so a read
//! always finds the bytes it was sent for. The item's key and checksum are
//! verified on every read all the same.
//!
//! An insert that finds no region to append to (every buffer being
//! written, or no clean region yet) waits in a queue and is appended when
//! a buffer frees, as CacheLib reschedules an insert its allocator asks to
//! retry; it is rejected only when the queue's bytes would pass
//! `max_waiting_bytes` (CacheLib's parcel memory). A waiting item is not
//! found by lookups (CacheLib's navy does not see puts in flight either),
//! and a newer insert or a removal of its key cancels it.

use std::collections::{BTreeMap, VecDeque};

use foldhash::{HashMap, HashMapExt};

use bytes::Bytes;

use crate::io::{round_up_blocks, IoId, IoKind, IoQueue, BLOCK_BYTES};
use crate::item;
use crate::soc::Found;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Open,
    Flushing,
    Sealed,
    /// Evicted, its discard in flight.
    Trimming,
}

/// Clean regions the cache keeps ready, evicting ahead of need.
const CLEAN_REGIONS: usize = 2;

/// Which sealed region the large-object cache evicts when it needs a
/// clean one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RegionEviction {
    /// The region least recently read (a lookup it answers puts it last
    /// in the eviction order), as CacheLib's default region LRU.
    #[default]
    Lru,
    /// The region written longest ago, whatever was read from it.
    Fifo,
}

impl RegionEviction {
    /// The eviction a configuration names: `"lru"` or `"fifo"`.
    pub fn from_name(name: &str) -> Option<RegionEviction> {
        match name {
            "lru" => Some(RegionEviction::Lru),
            "fifo" => Some(RegionEviction::Fifo),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
struct Region {
    state: State,
    /// Reads in flight.
    readers: u32,
    /// The region's place in the eviction order while it is sealed (its
    /// key in `Loc::sealed`).
    stamp: u64,
    /// Hashes of the items appended since the region was opened.
    hashes: Vec<u64>,
    /// The region's bytes while it is open.
    buf: Vec<u8>,
    /// The region's bytes while they are being written (shared with the
    /// write).
    written: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    region: u32,
    offset: u32,
    len: u32,
}

/// An insert waiting for a region to append to.
#[derive(Clone, Debug)]
struct Waiting {
    hash: u64,
    /// Tells this insert from a later one of the same hash.
    seq: u64,
    key: Bytes,
    value: Bytes,
    expires_at_ms: u64,
}

#[derive(Clone, Debug)]
enum Pending {
    /// A region's write, `done` of its bytes written before this request.
    Flush {
        region: u32,
        done: usize,
    },
    Trim(u32),
    Read {
        region: u32,
        tag: u64,
        key: Bytes,
        at: usize,
        len: usize,
    },
}

/// Counters of the large-object cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocStats {
    /// Item reads issued.
    pub reads: u64,
    /// Region writes issued.
    pub region_writes: u64,
    /// Regions evicted.
    pub evictions: u64,
    /// Evicted regions discarded on the volume.
    pub trims: u64,
    /// Inserts that waited for a region buffer.
    pub queued: u64,
    /// Items not stored: no region to append to, and the wait queue full.
    pub dropped: u64,
    /// Storage requests that failed.
    pub io_errors: u64,
}

/// The large-object cache over `regions` regions from byte `base`.
#[derive(Clone)]
pub struct Loc {
    base: u64,
    region_bytes: u32,
    regions: Vec<Region>,
    index: HashMap<u64, Slot>,
    open: Option<u32>,
    /// Sealed regions by stamp: the first is evicted first.
    sealed: BTreeMap<u64, u32>,
    next_stamp: u64,
    eviction: RegionEviction,
    free: Vec<u32>,
    /// Regions whose discard is in flight.
    trimming: u32,
    trim_regions: bool,
    max_buffers: u32,
    /// The largest write a region's flush issues; the next one waits for
    /// it (0: the whole region in one write).
    max_write_bytes: u32,
    flushing: u32,
    ios: HashMap<IoId, Pending>,
    /// Inserts waiting for a region, oldest first; cancelled ones stay
    /// until they reach the front.
    waiting: VecDeque<Waiting>,
    /// The live waiting insert of each hash: its `seq` and encoded bytes.
    waiting_live: HashMap<u64, (u64, u32)>,
    /// Encoded bytes of the live waiting inserts.
    waiting_bytes: u64,
    max_waiting_bytes: u64,
    next_seq: u64,
    stats: LocStats,
}

impl Loc {
    /// An empty cache of `regions` regions of `region_bytes` from byte
    /// `base`, with at most `max_buffers` regions in DRAM (the open one and
    /// those being written); `trim_regions` discards evicted regions;
    /// inserts wait for a region up to `max_waiting_bytes` of items;
    /// `eviction` picks the region to evict.
    pub fn new(
        base: u64,
        region_bytes: u32,
        regions: u32,
        max_buffers: u32,
        trim_regions: bool,
        max_waiting_bytes: u64,
        eviction: RegionEviction,
    ) -> Loc {
        assert!(
            base.is_multiple_of(BLOCK_BYTES) && (region_bytes as u64).is_multiple_of(BLOCK_BYTES)
        );
        assert!(
            regions >= 2 && max_buffers >= 1,
            "{regions} regions, {max_buffers} buffers"
        );
        Loc {
            base,
            region_bytes,
            regions: (0..regions)
                .map(|_| Region {
                    state: State::Free,
                    readers: 0,
                    stamp: 0,
                    hashes: Vec::new(),
                    buf: Vec::new(),
                    written: Bytes::new(),
                })
                .collect(),
            index: HashMap::new(),
            open: None,
            sealed: BTreeMap::new(),
            next_stamp: 0,
            eviction,
            free: (0..regions).rev().collect(),
            trimming: 0,
            trim_regions,
            max_buffers,
            max_write_bytes: 0,
            flushing: 0,
            ios: HashMap::new(),
            waiting: VecDeque::new(),
            waiting_live: HashMap::new(),
            waiting_bytes: 0,
            max_waiting_bytes,
            next_seq: 0,
            stats: LocStats::default(),
        }
    }

    /// Writes each region in requests of at most `max_write_bytes` (a
    /// multiple of 4096), one after another, as CacheLib's navy writes a
    /// region in `deviceMaxWriteSize` pieces (1 MiB in CacheBench); 0
    /// writes the whole region at once.
    pub fn with_max_write_bytes(mut self, max_write_bytes: u32) -> Loc {
        assert!((max_write_bytes as u64).is_multiple_of(BLOCK_BYTES));
        self.max_write_bytes = max_write_bytes;
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> LocStats {
        self.stats
    }

    /// The largest item (encoded) a region takes.
    pub fn max_item_bytes(&self) -> usize {
        self.region_bytes as usize
    }

    /// Whether the index names `key`'s hash.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.index.contains_key(&crate::hash_key(key))
    }

    /// Forgets `key`, and cancels its waiting insert.
    pub fn remove(&mut self, key: &[u8]) {
        let hash = crate::hash_key(key);
        self.index.remove(&hash);
        self.cancel_waiting(hash);
    }

    /// Appends an item, or queues it until a region can take it; false if
    /// it was dropped (no region, and the queue full).
    pub fn insert(
        &mut self,
        key: Bytes,
        value: Bytes,
        expires_at_ms: u64,
        io: &mut IoQueue,
    ) -> bool {
        let len = item::encoded_len(key.len(), value.len());
        assert!(
            len <= self.max_item_bytes(),
            "an item of {len} bytes for a region"
        );
        let hash = crate::hash_key(&key);
        self.index.remove(&hash);
        self.cancel_waiting(hash);
        self.drain_waiting(io);
        if self.waiting.is_empty() {
            if let Some(r) = self.room_for(len, io) {
                self.append(r, hash, &key, &value, expires_at_ms);
                return true;
            }
        }
        if self.waiting_bytes + len as u64 > self.max_waiting_bytes {
            self.stats.dropped += 1;
            return false;
        }
        self.next_seq += 1;
        let seq = self.next_seq;
        self.waiting_live.insert(hash, (seq, len as u32));
        self.waiting_bytes += len as u64;
        self.waiting.push_back(Waiting {
            hash,
            seq,
            key,
            value,
            expires_at_ms,
        });
        self.stats.queued += 1;
        self.compact_waiting();
        true
    }

    /// Drops the waiting insert of `hash`, if any. It stays in the queue,
    /// dead, until it reaches the front or the queue is compacted.
    fn cancel_waiting(&mut self, hash: u64) {
        if let Some((_, len)) = self.waiting_live.remove(&hash) {
            self.waiting_bytes -= len as u64;
            self.compact_waiting();
        }
    }

    /// Removes the dead inserts from the queue once they outnumber the
    /// live ones (and 16), so that its memory stays within twice the live
    /// inserts'.
    fn compact_waiting(&mut self) {
        if self.waiting.len() > 2 * self.waiting_live.len() + 16 {
            let live = &self.waiting_live;
            self.waiting
                .retain(|w| live.get(&w.hash).is_some_and(|&(seq, _)| seq == w.seq));
            assert_eq!(self.waiting.len(), self.waiting_live.len());
        }
    }

    /// Appends waiting inserts, oldest first, while a region takes them.
    fn drain_waiting(&mut self, io: &mut IoQueue) {
        while let Some(w) = self.waiting.front() {
            let len = match self.waiting_live.get(&w.hash) {
                Some(&(seq, len)) if seq == w.seq => len,
                // Cancelled.
                _ => {
                    self.waiting.pop_front();
                    continue;
                }
            };
            let Some(r) = self.room_for(len as usize, io) else {
                return;
            };
            let w = self.waiting.pop_front().expect("the front item");
            self.waiting_live.remove(&w.hash);
            self.waiting_bytes -= len as u64;
            self.append(r, w.hash, &w.key, &w.value, w.expires_at_ms);
        }
        assert_eq!(self.waiting_bytes, 0, "bytes counted for no waiting insert");
    }

    /// The open region, sealed and replaced first if `len` more bytes do
    /// not fit; `None` if no region can be opened now.
    fn room_for(&mut self, len: usize, io: &mut IoQueue) -> Option<u32> {
        if let Some(r) = self.open {
            if self.regions[r as usize].buf.len() + len > self.region_bytes as usize {
                self.seal(r, io);
            }
        }
        self.open.or_else(|| self.open_region(io))
    }

    fn append(&mut self, r: u32, hash: u64, key: &[u8], value: &[u8], expires_at_ms: u64) {
        let region = &mut self.regions[r as usize];
        let offset = region.buf.len() as u32;
        item::encode(key, value, expires_at_ms, &mut region.buf);
        let len = region.buf.len() as u32 - offset;
        assert!(region.buf.len() <= self.region_bytes as usize);
        region.hashes.push(hash);
        self.index.insert(
            hash,
            Slot {
                region: r,
                offset,
                len,
            },
        );
    }

    fn open_region(&mut self, io: &mut IoQueue) -> Option<u32> {
        if self.flushing + 1 > self.max_buffers {
            return None;
        }
        if self.free.is_empty() {
            self.reclaim(io);
        }
        let r = self.free.pop()?;
        let region = &mut self.regions[r as usize];
        assert_eq!(region.state, State::Free);
        region.state = State::Open;
        region.buf.reserve_exact(self.region_bytes as usize);
        self.open = Some(r);
        self.reclaim(io);
        Some(r)
    }

    /// Evicts sealed regions without reads in flight, first in the
    /// eviction order first, until the clean pool is full (counting those
    /// being discarded).
    fn reclaim(&mut self, io: &mut IoQueue) {
        while self.free.len() + (self.trimming as usize) < CLEAN_REGIONS {
            let Some((&stamp, &r)) = self
                .sealed
                .iter()
                .find(|(_, &r)| self.regions[r as usize].readers == 0)
            else {
                return;
            };
            self.sealed.remove(&stamp);
            self.evict(r, io);
        }
    }

    /// Puts sealed region `r` last in the eviction order.
    fn track(&mut self, r: u32) {
        let region = &mut self.regions[r as usize];
        assert_eq!(region.state, State::Sealed);
        self.sealed.remove(&region.stamp);
        self.next_stamp += 1;
        region.stamp = self.next_stamp;
        self.sealed.insert(region.stamp, r);
    }

    /// Evicts sealed region `r`: its items leave the index, and it is
    /// discarded on the volume (or freed at once without trims).
    fn evict(&mut self, r: u32, io: &mut IoQueue) {
        self.forget(r);
        self.stats.evictions += 1;
        if !self.trim_regions {
            self.free.push(r);
            return;
        }
        self.regions[r as usize].state = State::Trimming;
        self.trimming += 1;
        let len_bytes = self.region_bytes;
        let id = io.push(self.region_offset(r), IoKind::Trim { len_bytes });
        self.stats.trims += 1;
        self.ios.insert(id, Pending::Trim(r));
    }

    /// Drops the index entries that point into region `r` and frees it.
    fn forget(&mut self, r: u32) {
        let region = &mut self.regions[r as usize];
        for h in region.hashes.drain(..) {
            if self.index.get(&h).is_some_and(|s| s.region == r) {
                self.index.remove(&h);
            }
        }
        region.state = State::Free;
    }

    fn seal(&mut self, r: u32, io: &mut IoQueue) {
        self.open = None;
        let region = &mut self.regions[r as usize];
        assert_eq!(region.state, State::Open);
        // The buffer itself goes to the write, without a copy; the region
        // keeps a share of it to answer lookups until the write ends.
        let blocks_len = round_up_blocks(region.buf.len() as u64) as usize;
        let mut data = std::mem::take(&mut region.buf);
        data.resize(blocks_len, 0);
        let data = Bytes::from(data);
        region.written = data;
        region.state = State::Flushing;
        self.flushing += 1;
        self.stats.region_writes += 1;
        self.write_piece(r, 0, io);
    }

    /// Bytes of region `r`'s write from `done` that one request carries.
    fn piece_bytes(&self, r: u32, done: usize) -> usize {
        let left = self.regions[r as usize].written.len() - done;
        assert!(left > 0 && done.is_multiple_of(BLOCK_BYTES as usize));
        match self.max_write_bytes {
            0 => left,
            max => (max as usize).min(left),
        }
    }

    /// Issues the write of region `r`'s bytes from `done` on, as much of
    /// them as one request may carry.
    fn write_piece(&mut self, r: u32, done: usize, io: &mut IoQueue) {
        let len = self.piece_bytes(r, done);
        let data = self.regions[r as usize].written.slice(done..done + len);
        let id = io.push(
            self.region_offset(r) + done as u64,
            IoKind::Write {
                data,
                durable: false,
            },
        );
        self.ios.insert(id, Pending::Flush { region: r, done });
    }

    /// Appends what waits and writes the open region now (for a shutdown
    /// or a test).
    pub fn flush_open(&mut self, io: &mut IoQueue) {
        self.drain_waiting(io);
        if let Some(r) = self.open {
            if !self.regions[r as usize].buf.is_empty() {
                self.seal(r, io);
            }
        }
    }

    fn region_offset(&self, r: u32) -> u64 {
        self.base + r as u64 * self.region_bytes as u64
    }

    /// Looks `key` up; the answer goes to `found` now or when a read ends.
    pub fn lookup(&mut self, tag: u64, key: Bytes, io: &mut IoQueue, found: &mut Vec<Found>) {
        let Some(&slot) = self.index.get(&crate::hash_key(&key)) else {
            found.push(Found { tag, item: None });
            return;
        };
        let region = &mut self.regions[slot.region as usize];
        match region.state {
            State::Open | State::Flushing => {
                let at = slot.offset as usize;
                let bytes = match region.state {
                    State::Open => &region.buf[..],
                    _ => &region.written[..],
                };
                found.push(read_item(&bytes[at..at + slot.len as usize], tag, &key));
            }
            State::Sealed => {
                let start = slot.offset as u64 / BLOCK_BYTES * BLOCK_BYTES;
                let end = round_up_blocks(slot.offset as u64 + slot.len as u64);
                region.readers += 1;
                let offset = self.region_offset(slot.region) + start;
                let id = io.push(
                    offset,
                    IoKind::Read {
                        len_bytes: (end - start) as u32,
                    },
                );
                self.stats.reads += 1;
                let at = (slot.offset as u64 - start) as usize;
                let pending = Pending::Read {
                    region: slot.region,
                    tag,
                    key,
                    at,
                    len: slot.len as usize,
                };
                self.ios.insert(id, pending);
            }
            State::Free | State::Trimming => {
                unreachable!("the index names a free region")
            }
        }
    }

    /// Takes the completion of request `id` if it is this cache's.
    pub fn complete(
        &mut self,
        id: IoId,
        result: Result<&[u8], i32>,
        io: &mut IoQueue,
        found: &mut Vec<Found>,
    ) -> bool {
        let Some(p) = self.ios.remove(&id) else {
            return false;
        };
        self.stats.io_errors += result.is_err() as u64;
        match p {
            Pending::Flush { region: r, done } => {
                let end = done + self.piece_bytes(r, done);
                if result.is_ok() && end < self.regions[r as usize].written.len() {
                    self.write_piece(r, end, io);
                    return true;
                }
                // A piece that failed ends the flush: the region is dropped.
                self.flushing -= 1;
                let region = &mut self.regions[r as usize];
                region.written = Bytes::new();
                if result.is_ok() {
                    region.state = State::Sealed;
                    self.track(r);
                } else {
                    self.forget(r);
                    self.free.push(r);
                }
            }
            Pending::Trim(r) => {
                // A failed discard leaves bytes no index entry names.
                self.trimming -= 1;
                let region = &mut self.regions[r as usize];
                assert_eq!(region.state, State::Trimming);
                region.state = State::Free;
                self.free.push(r);
            }
            Pending::Read {
                region,
                tag,
                key,
                at,
                len,
            } => {
                let reg = &mut self.regions[region as usize];
                reg.readers = reg.readers.checked_sub(1).expect("a read in flight");
                let answer = match result {
                    Ok(bytes) if bytes.len() >= at + len => {
                        read_item(&bytes[at..at + len], tag, &key)
                    }
                    _ => Found { tag, item: None },
                };
                if answer.item.is_some() && self.eviction == RegionEviction::Lru {
                    self.track(region);
                }
                found.push(answer);
            }
        }
        // A finished request may free a buffer or make a region evictable.
        self.drain_waiting(io);
        true
    }
}

/// The answer for `key` from an item's bytes: found only if they hold an
/// intact item of this key.
fn read_item(bytes: &[u8], tag: u64, key: &[u8]) -> Found {
    let item = item::decode(bytes)
        .filter(|(it, _)| it.key == key)
        .map(|(it, _)| (Bytes::copy_from_slice(it.value), it.expires_at_ms));
    Found { tag, item }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of 4 regions of 8 KiB with one buffer: an item of 5 KiB
    /// fills a region, so the second insert seals the first region and
    /// has no buffer until its write completes.
    fn one_buffer(max_waiting_bytes: u64) -> (Loc, IoQueue) {
        (
            Loc::new(0, 8192, 4, 1, false, max_waiting_bytes, RegionEviction::Lru),
            IoQueue::default(),
        )
    }

    fn value(byte: u8) -> Bytes {
        Bytes::from(vec![byte; 5000])
    }

    /// Completes every request in the queue (reads see only what these
    /// requests wrote).
    fn complete_all(loc: &mut Loc, io: &mut IoQueue) {
        complete_on(loc, io, &mut Vec::new());
    }

    /// The value a lookup of `key` answers now (from a buffer).
    fn buffered(loc: &mut Loc, io: &mut IoQueue, key: &'static [u8]) -> Option<Bytes> {
        let mut found = Vec::new();
        loc.lookup(7, Bytes::from_static(key), io, &mut found);
        assert_eq!(found.len(), 1, "answered from a buffer");
        found.pop().unwrap().item.map(|(v, _)| v)
    }

    /// Completes every request in the queue against `disk`: writes land
    /// there, reads return what it holds.
    fn complete_on(loc: &mut Loc, io: &mut IoQueue, disk: &mut Vec<u8>) {
        while let Some(req) = io.pop() {
            io.completed();
            let at = req.offset as usize;
            let end = at + req.len_bytes() as usize;
            if disk.len() < end {
                disk.resize(end, 0);
            }
            let read = match &req.kind {
                IoKind::Write { data, .. } => {
                    disk[at..end].copy_from_slice(data);
                    Vec::new()
                }
                IoKind::Read { .. } => disk[at..end].to_vec(),
                IoKind::Trim { .. } => Vec::new(),
            };
            let mut found = Vec::new();
            assert!(loc.complete(req.id, Ok(&read), io, &mut found));
        }
    }

    /// Six regions of one 5,000-byte item each: keys 0 to 3 written
    /// (0, 1 and 2 sealed, 3 open), key 0 read back, then keys 4 and 5:
    /// opening their regions evicts two sealed ones. Which keys are left.
    fn left_after_reading_the_oldest(eviction: RegionEviction) -> Vec<u8> {
        let mut loc = Loc::new(0, 8192, 6, 1, false, 1 << 20, eviction);
        let (mut io, mut disk) = (IoQueue::default(), Vec::new());
        let key = |k: u8| Bytes::from(vec![b'k', k]);
        for k in 0..4 {
            assert!(loc.insert(key(k), value(k), 0, &mut io));
            complete_on(&mut loc, &mut io, &mut disk);
        }
        let mut found = Vec::new();
        loc.lookup(1, key(0), &mut io, &mut found);
        assert!(found.is_empty(), "key 0 is read from the volume");
        let read = io.pop().expect("the read");
        io.completed();
        let at = read.offset as usize;
        let bytes = disk[at..at + read.len_bytes() as usize].to_vec();
        assert!(loc.complete(read.id, Ok(&bytes), &mut io, &mut found));
        assert_eq!(
            found.pop().and_then(|f| f.item).map(|(v, _)| v),
            Some(value(0))
        );
        for k in 4..6 {
            assert!(loc.insert(key(k), value(k), 0, &mut io));
            complete_on(&mut loc, &mut io, &mut disk);
        }
        assert_eq!(loc.stats().evictions, 2);
        (0..6).filter(|&k| loc.contains(&key(k))).collect()
    }

    #[test]
    fn lru_keeps_the_region_a_lookup_read_and_fifo_does_not() {
        assert_eq!(
            left_after_reading_the_oldest(RegionEviction::Lru),
            vec![0, 3, 4, 5],
            "LRU evicts the regions of keys 1 and 2, read least recently"
        );
        assert_eq!(
            left_after_reading_the_oldest(RegionEviction::Fifo),
            vec![2, 3, 4, 5],
            "FIFO evicts the two written first"
        );
    }

    #[test]
    fn an_insert_waits_for_a_buffer_and_lands_when_one_frees() {
        let (mut loc, mut io) = one_buffer(1 << 20);
        assert!(loc.insert(Bytes::from_static(b"a"), value(1), 0, &mut io));
        assert!(loc.insert(Bytes::from_static(b"b"), value(2), 0, &mut io));
        assert_eq!(loc.stats().queued, 1);
        assert!(loc.waiting_bytes > 5000);
        assert!(!loc.contains(b"b"), "a waiting item is not found");
        complete_all(&mut loc, &mut io);
        assert_eq!(loc.waiting_bytes, 0);
        assert_eq!(buffered(&mut loc, &mut io, b"b"), Some(value(2)));
        assert_eq!(loc.stats().dropped, 0);
    }

    #[test]
    fn a_removal_or_a_newer_insert_cancels_a_waiting_insert() {
        let (mut loc, mut io) = one_buffer(1 << 20);
        assert!(loc.insert(Bytes::from_static(b"a"), value(1), 0, &mut io));
        assert!(loc.insert(Bytes::from_static(b"b"), value(2), 0, &mut io));
        assert!(loc.insert(Bytes::from_static(b"c"), value(3), 0, &mut io));
        loc.remove(b"b");
        assert!(loc.insert(Bytes::from_static(b"c"), value(4), 0, &mut io));
        complete_all(&mut loc, &mut io);
        assert!(!loc.contains(b"b"), "a removed key came back");
        assert_eq!(buffered(&mut loc, &mut io, b"c"), Some(value(4)));
        assert_eq!(loc.waiting_bytes, 0);
    }

    #[test]
    fn cancelled_inserts_do_not_pile_up_in_the_queue() {
        let (mut loc, mut io) = one_buffer(1 << 20);
        assert!(loc.insert(Bytes::from_static(b"a"), value(1), 0, &mut io));
        for i in 0..1000u32 {
            let key = Bytes::from(format!("k{}", i % 3));
            assert!(loc.insert(key.clone(), Bytes::from(vec![1u8; 100]), 0, &mut io));
            if i % 2 == 0 {
                loc.remove(&key);
            }
        }
        assert!(loc.waiting.len() <= 2 * 3 + 16, "{}", loc.waiting.len());
        complete_all(&mut loc, &mut io);
        assert_eq!(loc.waiting_bytes, 0);
        assert!(loc.waiting.is_empty());
    }

    #[test]
    fn an_insert_past_the_queue_bytes_is_dropped() {
        let (mut loc, mut io) = one_buffer(6000);
        assert!(loc.insert(Bytes::from_static(b"a"), value(1), 0, &mut io));
        assert!(loc.insert(Bytes::from_static(b"b"), value(2), 0, &mut io));
        assert!(!loc.insert(Bytes::from_static(b"c"), value(3), 0, &mut io));
        assert_eq!((loc.stats().queued, loc.stats().dropped), (1, 1));
        complete_all(&mut loc, &mut io);
        assert!(loc.contains(b"b") && !loc.contains(b"c"));
    }

    #[test]
    fn without_a_queue_an_insert_with_no_buffer_is_dropped() {
        let (mut loc, mut io) = one_buffer(0);
        assert!(loc.insert(Bytes::from_static(b"a"), value(1), 0, &mut io));
        assert!(!loc.insert(Bytes::from_static(b"b"), value(2), 0, &mut io));
        assert_eq!((loc.stats().queued, loc.stats().dropped), (0, 1));
    }
}

#[cfg(test)]
mod piece_tests {
    use super::*;

    /// Four regions of 64 KiB written in pieces of 16 KiB, two buffers;
    /// thirteen 5,000-byte items fill the first region, and the
    /// fourteenth seals it.
    fn sealed_first_region() -> (Loc, IoQueue) {
        let mut loc = Loc::new(0, 64 << 10, 4, 2, false, 1 << 20, RegionEviction::Lru)
            .with_max_write_bytes(16 << 10);
        let mut io = IoQueue::default();
        for k in 0..14u8 {
            assert!(loc.insert(
                Bytes::from(vec![b'k', k]),
                Bytes::from(vec![k; 5000]),
                0,
                &mut io
            ));
        }
        assert_eq!(loc.stats().region_writes, 1);
        (loc, io)
    }

    #[test]
    fn a_region_is_written_one_piece_after_another() {
        let (mut loc, mut io) = sealed_first_region();
        let mut offsets = Vec::new();
        while let Some(req) = io.pop() {
            assert!(io.pop().is_none(), "one piece in flight at a time");
            assert_eq!(req.len_bytes(), 16 << 10);
            offsets.push(req.offset);
            let mut found = Vec::new();
            loc.lookup(1, Bytes::from_static(b"k\x00"), &mut io, &mut found);
            assert!(found[0].item.is_some(), "answered from the buffer");
            io.completed();
            assert!(loc.complete(req.id, Ok(&[]), &mut io, &mut found));
        }
        assert_eq!(offsets, [0, 16 << 10, 32 << 10, 48 << 10]);
        assert_eq!(loc.regions[0].state, State::Sealed);
    }

    #[test]
    fn a_failed_piece_ends_the_write_and_drops_the_region() {
        let (mut loc, mut io) = sealed_first_region();
        let first = io.pop().unwrap();
        io.completed();
        let mut found = Vec::new();
        assert!(loc.complete(first.id, Err(5), &mut io, &mut found));
        assert!(io.pop().is_none(), "no piece after a failure");
        assert!(!loc.contains(b"k\x00"), "the region's items are gone");
        assert!(loc.contains(b"k\x0d"), "the open region's stay");
    }
}
