//! The Small Object Cache: a hash table of 4 KiB buckets on the volume,
//! CacheLib's BigHash. A key lives in one bucket, chosen by its hash; a
//! bucket keeps its items oldest first and drops the oldest to make room.
//! DRAM holds only a 64-bit Bloom filter per bucket, so a lookup of an
//! absent key usually costs no read.
//!
//! Every change is a read-modify-write of the bucket. Operations on a
//! bucket run one after another: while a bucket is busy its image in DRAM,
//! with every queued change applied, is the bucket's state, and changes
//! that arrive during a write are written next. A lookup costs a read of
//! the bucket, as BigHash's does, even when the bucket is busy: it waits
//! for the write in flight, shares a read with the lookups waiting beside
//! it, and is answered from the image when that read ends. (Answered from
//! the image at once, a bucket that a stream of changes keeps busy served
//! its lookups from DRAM for nothing.) A bucket whose content is unknown
//! (a failed read or write) is *poisoned*: it reads as empty until a write
//! of a fresh image succeeds, so an old copy of a removed item can never
//! come back.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt};

use bytes::Bytes;

use crate::io::{IoId, IoKind, IoQueue, BLOCK_BYTES};
use crate::item;

/// Bytes of a bucket.
pub const BUCKET_BYTES: usize = BLOCK_BYTES as usize;
/// Bytes of a bucket's header: CRC32, item count, pad, generation.
const BUCKET_HEADER_BYTES: usize = 16;
/// Bytes a bucket has for items.
pub const BUCKET_ITEM_BYTES: usize = BUCKET_BYTES - BUCKET_HEADER_BYTES;

/// An item kept in a bucket image, as its encoding on the volume (header,
/// key, value), so that writing the bucket copies it without encoding it
/// again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    encoded: Bytes,
}

impl Held {
    /// The item of this key, value and expiry.
    fn new(key: &[u8], value: &[u8], expires_at_ms: u64) -> Held {
        let mut encoded = Vec::with_capacity(item::encoded_len(key.len(), value.len()));
        item::encode(key, value, expires_at_ms, &mut encoded);
        Held {
            encoded: Bytes::from(encoded),
        }
    }

    fn view(&self) -> item::ItemRef<'_> {
        item::decode_covered(&self.encoded)
            .expect("a held item is whole")
            .0
    }

    fn key(&self) -> &[u8] {
        self.view().key
    }

    fn bytes(&self) -> usize {
        self.encoded.len()
    }
}

/// A bucket's items, oldest first.
#[derive(Debug, Clone, Default)]
struct Image {
    items: Vec<Held>,
}

impl Image {
    fn used_bytes(&self) -> usize {
        self.items.iter().map(Held::bytes).sum()
    }

    fn find(&self, key: &[u8]) -> Option<&Held> {
        self.items.iter().find(|h| h.key() == key)
    }

    fn remove(&mut self, key: &[u8]) -> bool {
        let before = self.items.len();
        self.items.retain(|h| h.key() != key);
        self.items.len() != before
    }

    fn insert(&mut self, h: Held) {
        assert!(
            h.bytes() <= BUCKET_ITEM_BYTES,
            "an item of {} bytes in a bucket",
            h.bytes()
        );
        self.remove(h.key());
        self.items.push(h);
        let mut used = self.used_bytes();
        while used > BUCKET_ITEM_BYTES {
            used -= self.items.remove(0).bytes();
        }
    }

    fn encode(&self, generation: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(BUCKET_BYTES);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(self.items.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 2]);
        out.extend_from_slice(&generation.to_le_bytes());
        for h in &self.items {
            out.extend_from_slice(&h.encoded);
        }
        assert!(out.len() <= BUCKET_BYTES);
        out.resize(BUCKET_BYTES, 0);
        let crc = crc32fast::hash(&out[4..]);
        out[0..4].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The image a bucket's bytes hold: empty unless they are an intact
    /// bucket of this generation. The bucket's CRC covers its items, so
    /// they are not checked one by one; they share one copy of the bytes.
    fn decode(buf: &[u8], generation: u64) -> Image {
        if buf.len() != BUCKET_BYTES
            || crc32fast::hash(&buf[4..]) != u32::from_le_bytes(buf[0..4].try_into().expect("4"))
            || u64::from_le_bytes(buf[8..16].try_into().expect("8")) != generation
        {
            return Image::default();
        }
        let count = u16::from_le_bytes(buf[4..6].try_into().expect("2")) as usize;
        let mut ends = Vec::with_capacity(count);
        let mut at = BUCKET_HEADER_BYTES;
        for _ in 0..count {
            let Some((_, len)) = item::decode_covered(&buf[at..]) else {
                return Image::default();
            };
            at += len;
            ends.push(at - BUCKET_HEADER_BYTES);
        }
        let shared = Bytes::copy_from_slice(&buf[BUCKET_HEADER_BYTES..at]);
        let mut start = 0;
        // The loop above found each item whole, so each slice is one.
        let items = ends
            .into_iter()
            .map(|end| {
                let encoded = shared.slice(start..end);
                start = end;
                Held { encoded }
            })
            .collect();
        Image { items }
    }

    fn bloom(&self) -> u64 {
        self.items
            .iter()
            .fold(0, |b, h| b | bloom_bits(crate::hash_key(h.key())))
    }
}

fn bloom_bits(hash: u64) -> u64 {
    1 << (hash >> 40 & 63) | 1 << (hash >> 46 & 63) | 1 << (hash >> 52 & 63)
}

/// A lookup's answer: the caller's tag and the value found, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The tag the lookup was given.
    pub tag: u64,
    /// The value and its expiry, if the bucket holds the key.
    pub item: Option<(Bytes, u64)>,
}

/// Work queued on a busy bucket before its image is read.
#[derive(Clone, Debug)]
enum Step {
    Lookup { tag: u64, key: Bytes },
    Insert(Held),
    Remove(Bytes),
}

/// A bucket with storage requests in flight.
#[derive(Clone, Debug, Default)]
struct Busy {
    image: Option<Image>,
    queued: VecDeque<Step>,
    write: Option<IoId>,
    /// A read for `lookups` in flight (the image is known).
    lookup_read: Option<IoId>,
    /// Lookups (tag, key) waiting for the next read of the bucket.
    lookups: Vec<(u64, Bytes)>,
    /// The image changed since the last write was issued.
    changed: bool,
}

/// Counters of the small-object cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocStats {
    /// Bucket reads issued.
    pub reads: u64,
    /// Bucket writes issued.
    pub writes: u64,
    /// Lookups answered "absent" by the Bloom filter, with no read.
    pub bloom_rejects: u64,
    /// Storage requests that failed.
    pub io_errors: u64,
}

/// The small-object cache over `buckets` buckets from byte `base` of the volume.
#[derive(Clone)]
pub struct Soc {
    base: u64,
    buckets: u32,
    generation: u64,
    blooms: Vec<u64>,
    poisoned: Vec<bool>,
    busy: HashMap<u32, Busy>,
    ios: HashMap<IoId, u32>,
    stats: SocStats,
}

impl Soc {
    /// An empty cache. `generation` tells this cache's buckets from those
    /// an earlier run left on the volume (which read as empty).
    pub fn new(base: u64, buckets: u32, generation: u64) -> Soc {
        assert!(base.is_multiple_of(BLOCK_BYTES) && buckets > 0);
        Soc {
            base,
            buckets,
            generation,
            blooms: vec![0; buckets as usize],
            poisoned: vec![false; buckets as usize],
            busy: HashMap::new(),
            ios: HashMap::new(),
            stats: SocStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> SocStats {
        self.stats
    }

    fn bucket_of(&self, hash: u64) -> u32 {
        (((hash & 0xffff_ffff) * self.buckets as u64) >> 32) as u32
    }

    fn offset(&self, b: u32) -> u64 {
        self.base + b as u64 * BUCKET_BYTES as u64
    }

    /// Looks `key` up; the answer goes to `found` now or when a read ends.
    pub fn lookup(&mut self, tag: u64, key: Bytes, io: &mut IoQueue, found: &mut Vec<Found>) {
        let hash = crate::hash_key(&key);
        let b = self.bucket_of(hash);
        if let Some(busy) = self.busy.get_mut(&b) {
            match &busy.image {
                Some(_) => {
                    busy.lookups.push((tag, key));
                    if busy.write.is_none() && busy.lookup_read.is_none() {
                        self.read_for_lookups(b, io);
                    }
                }
                None => busy.queued.push_back(Step::Lookup { tag, key }),
            }
            return;
        }
        if self.poisoned[b as usize]
            || self.blooms[b as usize] & bloom_bits(hash) != bloom_bits(hash)
        {
            self.stats.bloom_rejects += !self.poisoned[b as usize] as u64;
            found.push(Found { tag, item: None });
            return;
        }
        self.start(b, None, Step::Lookup { tag, key }, io);
    }

    /// Whether the bucket of `key` may hold it (a removal would find work).
    pub fn may_hold(&self, key: &[u8]) -> bool {
        let hash = crate::hash_key(key);
        let b = self.bucket_of(hash);
        self.busy.contains_key(&b)
            || (!self.poisoned[b as usize]
                && self.blooms[b as usize] & bloom_bits(hash) == bloom_bits(hash))
    }

    /// Stores an item (it must fit a bucket), dropping older ones of its bucket.
    pub fn insert(&mut self, key: Bytes, value: Bytes, expires_at_ms: u64, io: &mut IoQueue) {
        let held = Held::new(&key, &value, expires_at_ms);
        self.change(Step::Insert(held), io);
    }

    /// Removes `key` if its bucket may hold it.
    pub fn remove(&mut self, key: Bytes, io: &mut IoQueue) {
        if self.may_hold(&key) {
            self.change(Step::Remove(key), io);
        }
    }

    fn change(&mut self, step: Step, io: &mut IoQueue) {
        let key = match &step {
            Step::Insert(h) => h.key(),
            Step::Remove(k) => k,
            Step::Lookup { .. } => unreachable!("a lookup is not a change"),
        };
        let b = self.bucket_of(crate::hash_key(key));
        if let Some(busy) = self.busy.get_mut(&b) {
            match busy.image.as_mut() {
                Some(img) => {
                    apply(img, step, &mut Vec::new());
                    busy.changed = true;
                    if busy.write.is_none() && busy.lookup_read.is_none() {
                        self.write(b, io);
                    }
                }
                None => busy.queued.push_back(step),
            }
            return;
        }
        // A poisoned bucket, or one whose filter is empty, holds nothing
        // this cache wrote: start from an empty image without reading.
        let known_empty = self.poisoned[b as usize] || self.blooms[b as usize] == 0;
        self.start(b, known_empty.then(Image::default), step, io);
    }

    fn start(&mut self, b: u32, image: Option<Image>, step: Step, io: &mut IoQueue) {
        let mut busy = Busy::default();
        match image {
            Some(mut img) => {
                apply(&mut img, step, &mut Vec::new());
                busy.image = Some(img);
                busy.changed = true;
                self.busy.insert(b, busy);
                self.write(b, io);
            }
            None => {
                busy.queued.push_back(step);
                self.busy.insert(b, busy);
                self.read(b, io);
            }
        }
    }

    /// Issues a read of bucket `b`.
    fn read(&mut self, b: u32, io: &mut IoQueue) -> IoId {
        let id = io.push(
            self.offset(b),
            IoKind::Read {
                len_bytes: BUCKET_BYTES as u32,
            },
        );
        self.stats.reads += 1;
        self.ios.insert(id, b);
        id
    }

    /// Reads busy bucket `b` for the lookups waiting on it.
    fn read_for_lookups(&mut self, b: u32, io: &mut IoQueue) {
        let id = self.read(b, io);
        let busy = self.busy.get_mut(&b).expect("a busy bucket");
        assert!(busy.write.is_none() && busy.lookup_read.is_none());
        busy.lookup_read = Some(id);
    }

    fn write(&mut self, b: u32, io: &mut IoQueue) {
        let offset = self.offset(b);
        let busy = self.busy.get_mut(&b).expect("a busy bucket");
        let data = busy
            .image
            .as_ref()
            .expect("an image to write")
            .encode(self.generation)
            .into();
        let id = io.push(
            offset,
            IoKind::Write {
                data,
                durable: false,
            },
        );
        busy.write = Some(id);
        busy.changed = false;
        self.stats.writes += 1;
        self.ios.insert(id, b);
    }

    /// Takes the completion of request `id` if it is this cache's: `result`
    /// holds the bytes read (empty for a write) or an errno.
    pub fn complete(
        &mut self,
        id: IoId,
        result: Result<&[u8], i32>,
        io: &mut IoQueue,
        found: &mut Vec<Found>,
    ) -> bool {
        let Some(b) = self.ios.remove(&id) else {
            return false;
        };
        self.stats.io_errors += result.is_err() as u64;
        let busy = self.busy.get_mut(&b).expect("a request of a busy bucket");
        if busy.write == Some(id) {
            busy.write = None;
            self.poisoned[b as usize] = result.is_err();
            if !busy.lookups.is_empty() {
                self.read_for_lookups(b, io);
                return true;
            }
        } else if busy.lookup_read == Some(id) {
            busy.lookup_read = None;
            let img = busy
                .image
                .as_ref()
                .expect("a read for lookups has an image");
            for (tag, key) in busy.lookups.drain(..) {
                found.push(answer(img, tag, &key));
            }
        } else {
            assert!(
                busy.image.is_none(),
                "a read completed for a bucket with an image"
            );
            let mut img = match result {
                Ok(bytes) => Image::decode(bytes, self.generation),
                Err(_) => {
                    self.poisoned[b as usize] = true;
                    Image::default()
                }
            };
            for step in busy.queued.drain(..) {
                busy.changed |= !matches!(step, Step::Lookup { .. });
                apply(&mut img, step, found);
            }
            busy.image = Some(img);
        }
        if busy.changed {
            self.write(b, io);
            return true;
        }
        let busy = self.busy.remove(&b).expect("busy");
        self.blooms[b as usize] = busy.image.map_or(0, |img| img.bloom());
        true
    }
}

fn answer(img: &Image, tag: u64, key: &[u8]) -> Found {
    Found {
        tag,
        item: img.find(key).map(|h| {
            // A copy of its own, so that a value kept in DRAM does not pin
            // the bucket's bytes.
            let it = h.view();
            (Bytes::copy_from_slice(it.value), it.expires_at_ms)
        }),
    }
}

fn apply(img: &mut Image, step: Step, found: &mut Vec<Found>) {
    match step {
        Step::Lookup { tag, key } => found.push(answer(img, tag, &key)),
        Step::Insert(h) => img.insert(h),
        Step::Remove(k) => {
            img.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lookup of a bucket whose write is in flight waits for that write,
    /// then costs a read of its own, and sees the item the write holds.
    #[test]
    fn a_lookup_of_a_busy_bucket_reads_it_after_its_write() {
        let mut soc = Soc::new(0, 4, 1);
        let mut io = IoQueue::default();
        let mut found = Vec::new();
        let key = Bytes::from("k");
        soc.insert(key.clone(), Bytes::from("v"), u64::MAX, &mut io);
        let write = io.pop().expect("the insert's write");
        assert!(matches!(write.kind, IoKind::Write { .. }));
        soc.lookup(7, key.clone(), &mut io, &mut found);
        assert!(
            found.is_empty() && io.pop().is_none(),
            "waits for the write"
        );
        assert!(soc.complete(write.id, Ok(&[]), &mut io, &mut found));
        let read = io.pop().expect("the lookup's read");
        assert!(matches!(read.kind, IoKind::Read { .. }));
        assert!(found.is_empty());
        // A change of the bucket that comes while the read is in flight
        // waits for it.
        let bucket = |k: &Bytes| soc.bucket_of(crate::hash_key(k));
        let other = (0..)
            .map(|i| Bytes::from(format!("k{i}")))
            .find(|k| *k != key && bucket(k) == bucket(&key))
            .unwrap();
        soc.insert(other, Bytes::from("w"), u64::MAX, &mut io);
        assert!(io.pop().is_none(), "no write while the read is in flight");
        assert!(soc.complete(read.id, Ok(&[0; BUCKET_BYTES]), &mut io, &mut found));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].tag, 7);
        assert_eq!(
            found[0].item.as_ref().map(|i| i.0.clone()),
            Some(Bytes::from("v"))
        );
        assert!(matches!(
            io.pop().map(|r| r.kind),
            Some(IoKind::Write { .. })
        ));
        assert_eq!(soc.stats().reads, 1);
    }

    #[test]
    fn a_bucket_image_round_trips_and_a_foreign_one_reads_empty() {
        let mut img = Image::default();
        for i in 0..100u32 {
            img.insert(Held::new(
                format!("key{i}").as_bytes(),
                &[i as u8; 300],
                i as u64,
            ));
        }
        assert!(img.used_bytes() <= BUCKET_ITEM_BYTES);
        assert_eq!(img.items.last().map(|h| h.key()), Some(&b"key99"[..]));
        assert!(img.find(b"key0").is_none(), "the oldest went first");
        let bytes = img.encode(7);
        // The layout: CRC32 of the rest, item count, pad, generation, then
        // each item as `item::encode` lays it out, then zeros.
        let kept: Vec<u32> = (100 - img.items.len() as u32..100).collect();
        let mut expected = vec![0u8; 4];
        expected.extend_from_slice(&(kept.len() as u16).to_le_bytes());
        expected.extend_from_slice(&[0, 0]);
        expected.extend_from_slice(&7u64.to_le_bytes());
        for i in &kept {
            let key = format!("key{i}");
            item::encode(key.as_bytes(), &[*i as u8; 300], *i as u64, &mut expected);
        }
        expected.resize(BUCKET_BYTES, 0);
        let crc = crc32fast::hash(&expected[4..]);
        expected[0..4].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(bytes, expected);
        let back = Image::decode(&bytes, 7);
        assert_eq!(back.items, img.items);
        assert!(
            Image::decode(&bytes, 8).items.is_empty(),
            "another generation"
        );
        let mut torn = bytes.clone();
        torn[100] ^= 1;
        assert!(Image::decode(&torn, 7).items.is_empty());
        // A count past the items the bytes can hold, under a valid CRC
        // (the CRC vouches for the items, the lengths must still fit).
        let mut overcount = bytes.clone();
        overcount[4..6].copy_from_slice(&1000u16.to_le_bytes());
        let crc = crc32fast::hash(&overcount[4..]);
        overcount[0..4].copy_from_slice(&crc.to_le_bytes());
        assert!(Image::decode(&overcount, 7).items.is_empty());
    }
}
