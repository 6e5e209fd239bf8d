//! Store mode, shaped like Orthus-KV's Wisckey: a persistent key-value
//! store whose values live in a log on the volume and whose keys sit in an
//! index in DRAM (`index.rs`), checkpointed to the volume (`ckpt.rs`) and
//! rebuilt at start from the checkpoint and the log after it
//! (`recover.rs`). The volume's policy (classic caching or NHC, in
//! write-around as in the paper) caches the log's blocks on the fast
//! device.
//!
//! - A put or delete is appended to the log (`log.rs`: group commit, one
//!   write in flight) and answered when its write finishes, so an answered
//!   put survives a crash of the process. Until then its value is pending
//!   in DRAM: a later command sees it, as Redis's order asks.
//! - A get reads the key's record (one read of the blocks it spans) and
//!   checks its checksum, key and position; a record that moved meanwhile
//!   is looked up again, a damaged one answers an error, never a value.
//! - A scan walks the index in key order from a start key.
//! - The cleaner (`gc.rs`) copies live records from the log's tail to its
//!   head and frees the space, as Wisckey's value-log garbage collection.
//!
//! Like the cache, the store does no I/O and reads no clock.

mod ckpt;
mod gc;
pub mod index;
mod log;
pub mod meta;
pub mod record;
mod recover;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;

use bytes::Bytes;

use crate::command::{Command, Reply};
use crate::io::{IoId, IoKind, IoQueue, IoRequest, BLOCK_BYTES};
use crate::item::MAX_KEY_BYTES;
use ckpt::Checkpointer;
use gc::Cleaner;
use index::Index;
use log::{Entry, LogWriter};
use meta::{block_ceil, block_floor, entry_bytes, Layout, Ptr};
use record::{Decoded, Kind};
use recover::{Progress, Recovery};

/// How a store is laid out and run.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// Bytes of the volume the store uses (from offset 0).
    pub volume_bytes: u64,
    /// Bytes of each of the two checkpoint slots; bounds the keys' total
    /// size (each key takes its length plus 14 bytes).
    pub index_bytes: u64,
    /// Checkpoint after this many bytes of log (0: an eighth of the log).
    pub checkpoint_every_bytes: u64,
    /// Clean when less than this share of the log is free.
    pub gc_free_share: f64,
    /// Refuse puts that would make live records more than this share of
    /// the log (the cleaner needs dead space to work).
    pub max_live_share: f64,
    /// Bytes of the largest log write (a group commit); a record is at most
    /// this less a block.
    pub max_write_bytes: u32,
    /// Seeds the checksums of a store this formats.
    pub generation: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            volume_bytes: 1 << 30,
            index_bytes: 32 << 20,
            checkpoint_every_bytes: 0,
            gc_free_share: 0.2,
            max_live_share: 0.7,
            max_write_bytes: 1 << 20,
            generation: 1,
        }
    }
}

pub use crate::cache::ConfigError;

fn bad(field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        problem: problem.into(),
    }
}

impl StoreConfig {
    /// Where the store's regions lie.
    pub fn layout(&self) -> Layout {
        Layout::new(self.volume_bytes, self.index_bytes)
    }

    /// Bytes of the largest record.
    pub fn max_record_bytes(&self) -> u64 {
        self.max_write_bytes as u64 - BLOCK_BYTES
    }

    fn reserve_bytes(&self) -> u64 {
        3 * self.max_write_bytes as u64
    }

    /// Bytes of live records the store takes before it refuses puts.
    pub fn max_live_bytes(&self) -> u64 {
        let usable = self.layout().log_bytes.saturating_sub(self.reserve_bytes());
        (usable as f64 * self.max_live_share) as u64
    }

    fn checkpoint_every(&self) -> u64 {
        match self.checkpoint_every_bytes {
            0 => self.layout().log_bytes / 8,
            n => n,
        }
    }

    /// Checks the sizes fit together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.index_bytes == 0 || !self.index_bytes.is_multiple_of(BLOCK_BYTES) {
            return Err(bad(
                "index_bytes",
                format!("{} is not a positive multiple of 4096", self.index_bytes),
            ));
        }
        let w = self.max_write_bytes as u64;
        if w < 64 << 10 || !w.is_multiple_of(BLOCK_BYTES) {
            return Err(bad(
                "max_write_bytes",
                format!("{w} is not a multiple of 4096 of at least 64 KiB"),
            ));
        }
        if self.layout().log_bytes < 16 * w {
            return Err(bad(
                "volume_bytes",
                format!(
                    "{} leaves {} bytes of log after two index slots of {}; the log needs at least 16 writes of {w}",
                    self.volume_bytes,
                    self.layout().log_bytes,
                    self.index_bytes
                ),
            ));
        }
        if !(0.01..=0.5).contains(&self.gc_free_share) {
            return Err(bad(
                "gc_free_share",
                format!("{} is not between 0.01 and 0.5", self.gc_free_share),
            ));
        }
        if !(0.05..=0.95).contains(&self.max_live_share) {
            return Err(bad(
                "max_live_share",
                format!("{} is not between 0.05 and 0.95", self.max_live_share),
            ));
        }
        Ok(())
    }
}

/// Counters of a store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// GETs answered.
    pub gets: u64,
    /// GETs that found their key.
    pub get_hits: u64,
    /// GETs that found a value not yet on the volume.
    pub pending_hits: u64,
    /// Puts answered as stored.
    pub puts: u64,
    /// Record reads issued for GETs and scans.
    pub record_reads: u64,
    /// Deletes that removed a key.
    pub dels: u64,
    /// Scans answered.
    pub scans: u64,
    /// Log writes finished.
    pub log_writes: u64,
    /// Log writes that failed.
    pub log_write_failures: u64,
    /// Bytes of records the log received.
    pub log_record_bytes: u64,
    /// Live records the cleaner copied.
    pub moved: u64,
    /// Log bytes the cleaner freed.
    pub cleaned_bytes: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Records read from the log at open.
    pub recovered_records: u64,
    /// Reads whose record failed its checks though the index still named it.
    pub damaged_reads: u64,
}

#[derive(Clone, Debug)]
struct Pending {
    value: Option<Bytes>,
    count: u32,
}

#[derive(Debug, Clone, Copy)]
enum Purpose {
    Get { tag: u64 },
    Scan { scan: u64, slot: usize },
    Clean { base: u64 },
}

#[derive(Clone, Debug)]
struct Read {
    key: Bytes,
    ptr: Ptr,
    phys: u64,
    len: u64,
    purpose: Purpose,
}

#[derive(Clone, Debug)]
struct ScanOp {
    tag: u64,
    with_values: bool,
    entries: Vec<(Bytes, Option<Bytes>)>,
    waiting: u32,
    error: Option<String>,
}

#[derive(Clone)]
enum Phase {
    Opening(Box<Recovery>),
    Ready,
    Failed(String),
}

/// The store machine: commands in, storage requests out, completions in,
/// replies out.
#[derive(Clone)]
pub struct Store {
    cfg: StoreConfig,
    layout: Layout,
    phase: Phase,
    io: IoQueue,
    replies: VecDeque<(u64, Reply)>,
    waiting: VecDeque<(u64, Command)>,
    index: Index,
    pending: BTreeMap<Bytes, Pending>,
    pending_entry_bytes: u64,
    queued_bytes: u64,
    log: LogWriter,
    reads: HashMap<IoId, Read>,
    deferred: Vec<Read>,
    scans: HashMap<u64, ScanOp>,
    next_scan: u64,
    cleaner: Cleaner,
    ckpt: Option<Checkpointer>,
    stats: StoreStats,
}

impl Store {
    /// Opens the store on its volume: formats an empty volume, else
    /// recovers what the volume holds. Commands submitted meanwhile wait.
    pub fn open(cfg: StoreConfig) -> Result<Store, ConfigError> {
        cfg.validate()?;
        let layout = cfg.layout();
        let mut io = IoQueue::default();
        let rec = Recovery::start(
            layout,
            cfg.volume_bytes,
            cfg.generation,
            cfg.max_record_bytes(),
            &mut io,
        );
        Ok(Store {
            log: LogWriter::new(layout, 0, 0, 0, 0),
            cleaner: Cleaner::new(cfg.max_write_bytes as u64),
            cfg,
            layout,
            phase: Phase::Opening(Box::new(rec)),
            io,
            replies: VecDeque::new(),
            waiting: VecDeque::new(),
            index: Index::default(),
            pending: BTreeMap::new(),
            pending_entry_bytes: 0,
            queued_bytes: 0,
            reads: HashMap::new(),
            deferred: Vec::new(),
            scans: HashMap::new(),
            next_scan: 0,
            ckpt: None,
            stats: StoreStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            moved: self.cleaner.moved,
            cleaned_bytes: self.cleaner.freed_bytes,
            ..self.stats
        }
    }

    /// Whether the store has opened; the reason if it could not.
    pub fn state(&self) -> Result<bool, &str> {
        match &self.phase {
            Phase::Opening(_) => Ok(false),
            Phase::Ready => Ok(true),
            Phase::Failed(why) => Err(why),
        }
    }

    /// Keys stored (on the volume).
    pub fn keys(&self) -> usize {
        self.index.len()
    }

    /// The log's head and tail positions and its free bytes.
    pub fn log_positions(&self) -> (u64, u64, u64) {
        (self.log.head, self.log.tail, self.log.free_bytes())
    }

    /// The largest value a key of `key_len` bytes may have.
    pub fn max_value_bytes(&self, key_len: usize) -> usize {
        (self.cfg.max_record_bytes() as usize).saturating_sub(record::HEADER_BYTES + key_len)
    }

    /// Starts a command; its reply comes out of [`Store::pop_reply`] with
    /// `tag`. The store keeps no expiry: a SET with one is refused.
    pub fn submit(&mut self, tag: u64, cmd: Command, _now_ms: u64) {
        match &self.phase {
            Phase::Opening(_) => self.waiting.push_back((tag, cmd)),
            Phase::Failed(why) => {
                let msg = format!("the store could not open: {why}");
                self.replies.push_back((tag, Reply::Error(msg)));
            }
            Phase::Ready => {
                self.run(tag, cmd);
                self.pump();
            }
        }
    }

    /// The next storage request for the driver.
    pub fn pop_io(&mut self) -> Option<IoRequest> {
        self.io.pop()
    }

    /// The next finished command's tag and reply.
    pub fn pop_reply(&mut self) -> Option<(u64, Reply)> {
        self.replies.pop_front()
    }

    /// Storage requests issued and not completed.
    pub fn io_in_flight(&self) -> u64 {
        self.io.in_flight()
    }

    /// A storage request finished: the bytes read (empty for a write) or
    /// an errno.
    pub fn complete(&mut self, id: IoId, result: Result<&[u8], i32>) {
        self.io.completed();
        if let Phase::Failed(_) = self.phase {
            // The rest of a failed open's reads: nothing waits for them.
            return;
        }
        if let Phase::Opening(rec) = &mut self.phase {
            match rec.complete(id, result, &mut self.io) {
                Progress::Busy => {}
                Progress::Done(r) => self.opened(*r),
                Progress::Failed(why) => {
                    self.phase = Phase::Failed(why);
                    for (tag, cmd) in std::mem::take(&mut self.waiting) {
                        self.submit(tag, cmd, 0);
                    }
                }
            }
            return;
        }
        if self.log.owns(id) {
            self.on_write(result.is_ok());
        } else if self.ckpt.as_ref().is_some_and(|c| c.owns(id)) {
            let ckpt = self.ckpt.as_mut().expect("a checkpointer");
            if ckpt.complete(id, result.is_ok(), &mut self.io) {
                self.stats.checkpoints += 1;
            }
        } else {
            let read = self
                .reads
                .remove(&id)
                .expect("a completion of an unknown request");
            self.on_read(read, result);
        }
        self.pump();
    }

    fn opened(&mut self, r: recover::Recovered) {
        let sb = r.sb;
        let tail = r.index.oldest_pos().unwrap_or(r.head).min(sb.ckpt_head);
        let mut log = LogWriter::new(
            self.layout,
            sb.generation,
            sb.boot,
            self.cfg.max_write_bytes as u64,
            self.cfg.reserve_bytes(),
        );
        log.resume(r.head, tail, r.image);
        self.log = log;
        self.index = r.index;
        self.stats.recovered_records = r.records;
        self.ckpt = Some(Checkpointer::new(sb));
        self.phase = Phase::Ready;
        for (tag, cmd) in std::mem::take(&mut self.waiting) {
            self.run(tag, cmd);
        }
        self.pump();
    }

    fn error(&mut self, tag: u64, msg: String) {
        self.replies.push_back((tag, Reply::Error(msg)));
    }

    fn run(&mut self, tag: u64, cmd: Command) {
        let key = match &cmd {
            Command::Get { key } | Command::Exists { key } | Command::Del { key } => key,
            Command::Set { key, .. } => key,
            Command::Scan { start, .. } => start,
        };
        if key.len() > MAX_KEY_BYTES {
            return self.error(
                tag,
                format!("key of {} bytes is longer than {MAX_KEY_BYTES}", key.len()),
            );
        }
        match cmd {
            Command::Get { key } => self.get(tag, key),
            Command::Exists { key } => {
                let n = self.current(&key).is_some() as u64;
                self.replies.push_back((tag, Reply::Count(n)));
            }
            Command::Set {
                key,
                value,
                expires_at_ms,
            } => self.put(tag, key, value, expires_at_ms),
            Command::Del { key } => self.del(tag, key),
            Command::Scan {
                start,
                count,
                with_values,
            } => self.scan(tag, start, count, with_values),
        }
    }

    /// Where the key's current value is: pending in DRAM, or on the volume.
    fn current(&self, key: &[u8]) -> Option<Result<Bytes, Ptr>> {
        match self.pending.get(key) {
            Some(p) => p.value.clone().map(Ok),
            None => self.index.get(key).map(Err),
        }
    }

    fn get(&mut self, tag: u64, key: Bytes) {
        self.stats.gets += 1;
        self.pending_hits_or_read(key, Purpose::Get { tag });
    }

    /// Answers a lookup from pending values, or reads the record.
    fn pending_hits_or_read(&mut self, key: Bytes, purpose: Purpose) {
        match (self.current(&key), purpose) {
            (Some(Err(ptr)), _) => self.read(key, ptr, purpose),
            (found, Purpose::Get { tag }) => {
                let value = found.map(|v| v.expect("a pending value"));
                self.stats.pending_hits +=
                    (value.is_some() && self.pending.contains_key(&key)) as u64;
                self.stats.get_hits += value.is_some() as u64;
                self.replies.push_back((tag, Reply::Value(value)));
            }
            (found, Purpose::Scan { scan, slot }) => {
                let value = found.map(|v| v.expect("a pending value"));
                self.scan_filled(scan, slot, value);
            }
            (_, Purpose::Clean { .. }) => unreachable!("the cleaner reads by position"),
        }
    }

    fn put(&mut self, tag: u64, key: Bytes, value: Bytes, expires_at_ms: u64) {
        if expires_at_ms != 0 {
            return self.error(
                tag,
                "a store keeps values until they are deleted: SET with an expiry needs cache mode"
                    .into(),
            );
        }
        if value.len() > self.max_value_bytes(key.len()) {
            let max = self.max_value_bytes(key.len());
            return self.error(
                tag,
                format!(
                    "value of {} bytes is larger than the store takes ({max})",
                    value.len()
                ),
            );
        }
        let len = record::encoded_len(key.len(), value.len());
        if self.index.live_bytes() + self.queued_bytes + len > self.cfg.max_live_bytes() {
            return self.error(tag, "the store is full".into());
        }
        let new_key = !self.pending.contains_key(&key) && self.index.get(&key).is_none();
        if new_key
            && self.index.checkpoint_bytes() + self.pending_entry_bytes + entry_bytes(key.len())
                > self.cfg.index_bytes
        {
            return self.error(
                tag,
                format!("the key index is full ({} bytes)", self.cfg.index_bytes),
            );
        }
        self.enqueue(tag, Kind::Put, key, Some(value));
    }

    fn del(&mut self, tag: u64, key: Bytes) {
        if self.current(&key).is_none() {
            self.replies.push_back((tag, Reply::Count(0)));
            return;
        }
        self.enqueue(tag, Kind::Del, key, None);
    }

    fn enqueue(&mut self, tag: u64, kind: Kind, key: Bytes, value: Option<Bytes>) {
        let entry = Entry {
            kind,
            key: key.clone(),
            value: value.clone().unwrap_or_default(),
            from: 0,
            tag: Some(tag),
        };
        self.queued_bytes += entry.len();
        let p = self.pending.entry(key.clone()).or_insert_with(|| Pending {
            value: None,
            count: 0,
        });
        if p.count == 0 {
            self.pending_entry_bytes += entry_bytes(key.len());
        }
        p.count += 1;
        p.value = value;
        self.log.user.push_back(entry);
    }

    /// A log write finished: its records now count (or failed).
    fn on_write(&mut self, ok: bool) {
        let done = self.log.complete(ok);
        self.stats.log_writes += 1;
        self.stats.log_write_failures += !ok as u64;
        for (e, ptr) in done {
            if ok {
                self.stats.log_record_bytes += ptr.len as u64;
                self.index.apply(e.kind, &e.key, ptr, e.from);
            }
            let Some(tag) = e.tag else {
                self.cleaner.move_done(ok, &mut self.log);
                continue;
            };
            self.queued_bytes -= e.len();
            let p = self.pending.get_mut(&e.key).expect("a pending key");
            p.count -= 1;
            if p.count == 0 {
                self.pending.remove(&e.key);
                self.pending_entry_bytes -= entry_bytes(e.key.len());
            }
            let reply = match (ok, e.kind) {
                (false, _) => Reply::Error("writing the store's log failed".into()),
                (true, Kind::Del) => {
                    self.stats.dels += 1;
                    Reply::Count(1)
                }
                (true, _) => {
                    self.stats.puts += 1;
                    Reply::Stored
                }
            };
            self.replies.push_back((tag, reply));
        }
    }

    fn maybe_checkpoint(&mut self) {
        let ckpt = self.ckpt.as_mut().expect("an open store");
        if ckpt.busy() {
            return;
        }
        let since = self.log.head - ckpt.sb.ckpt_head;
        let starved = self.cleaner.starved(
            &self.log,
            ckpt.sb.ckpt_head,
            self.cfg.gc_free_share,
            &self.layout,
        );
        if since >= self.cfg.checkpoint_every() || (starved && since > 0) {
            ckpt.start(&self.index, self.log.head, &self.layout, &mut self.io);
        }
    }

    /// Reads a key's record, or defers the read while a log write may
    /// rewrite its blocks.
    fn read(&mut self, key: Bytes, ptr: Ptr, purpose: Purpose) {
        let start = block_floor(ptr.pos);
        let end = block_ceil(ptr.pos + ptr.len as u64);
        let r = Read {
            key,
            ptr,
            phys: self.layout.phys(start),
            len: end - start,
            purpose,
        };
        self.issue_read(r);
    }

    fn issue_read(&mut self, r: Read) {
        if !self.log.clear_of_writes(r.ptr.pos + r.ptr.len as u64) {
            self.deferred.push(r);
            return;
        }
        let id = self.io.push(
            r.phys,
            IoKind::Read {
                len_bytes: r.len as u32,
            },
        );
        self.stats.record_reads += 1;
        self.reads.insert(id, r);
    }

    /// Issues what can go: deferred reads once no write is pending, the
    /// next log write once no read overlaps it; then cleaning and
    /// checkpoints.
    fn pump(&mut self) {
        if !matches!(self.phase, Phase::Ready) {
            return;
        }
        if !self.log.writing() {
            for r in std::mem::take(&mut self.deferred) {
                self.issue_read(r);
            }
            self.log.build();
        }
        if let Some((phys, len)) = self.log.unissued() {
            let overlaps = self
                .reads
                .values()
                .any(|r| r.phys < phys + len && phys < r.phys + r.len);
            if !overlaps {
                self.log.issue(&mut self.io);
            }
        }
        self.clean();
        self.maybe_checkpoint();
    }

    fn on_read(&mut self, r: Read, result: Result<&[u8], i32>) {
        if let Purpose::Clean { base } = r.purpose {
            return self.cleaned(base, result);
        }
        let data = match result {
            Ok(d) => d,
            Err(errno) => {
                return self.read_failed(
                    r.purpose,
                    format!("reading the value failed (errno {errno})"),
                )
            }
        };
        let at = (r.ptr.pos - block_floor(r.ptr.pos)) as usize;
        let generation = self.ckpt.as_ref().expect("an open store").sb.generation;
        let value = match record::decode(&data[at..], generation) {
            Decoded::Record(rec)
                if matches!(rec.kind, Kind::Put | Kind::Move)
                    && rec.pos == r.ptr.pos
                    && rec.len == r.ptr.len as u64
                    && rec.key == &r.key[..] =>
            {
                Some(Bytes::copy_from_slice(rec.value))
            }
            _ => None,
        };
        match value {
            Some(v) => match r.purpose {
                Purpose::Get { tag } => {
                    self.stats.get_hits += 1;
                    self.replies.push_back((tag, Reply::Value(Some(v))));
                }
                Purpose::Scan { scan, slot } => self.scan_filled(scan, slot, Some(v)),
                Purpose::Clean { .. } => unreachable!(),
            },
            // The key changed while the read ran: look again.
            None if self.index.get(&r.key) != Some(r.ptr) || self.pending.contains_key(&r.key) => {
                self.pending_hits_or_read(r.key, r.purpose)
            }
            None => {
                self.stats.damaged_reads += 1;
                self.read_failed(r.purpose, "the stored value failed its checksum".into())
            }
        }
    }

    fn read_failed(&mut self, purpose: Purpose, msg: String) {
        match purpose {
            Purpose::Get { tag } => self.error(tag, msg),
            Purpose::Scan { scan, slot } => {
                let s = self.scans.get_mut(&scan).expect("a scan in flight");
                s.error = Some(msg);
                self.scan_filled(scan, slot, None);
            }
            Purpose::Clean { .. } => unreachable!(),
        }
    }

    /// Up to `count` current keys from `start`, in order: the index's
    /// and the pending ones merged, pending deletes left out.
    fn scan_keys(&self, start: &[u8], count: u32) -> Vec<Bytes> {
        let mut keys: Vec<Bytes> = Vec::new();
        let mut from_index = self.index.range_from(start).peekable();
        let mut from_pending = self
            .pending
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .peekable();
        while keys.len() < count as usize {
            let next = match (from_index.peek(), from_pending.peek()) {
                (None, None) => break,
                (Some((k, _)), Some((q, _))) if k < q => from_index.next().map(|(k, _)| k),
                (Some((k, _)), Some((q, _))) if k == q => {
                    from_index.next();
                    from_pending.next().map(|(k, _)| k)
                }
                (Some(_), None) => from_index.next().map(|(k, _)| k),
                _ => from_pending.next().map(|(k, _)| k),
            };
            let key = next.expect("a key");
            if self.pending.get(key).is_none_or(|p| p.value.is_some()) {
                keys.push(key.clone());
            }
        }
        keys
    }

    fn scan(&mut self, tag: u64, start: Bytes, count: u32, with_values: bool) {
        self.stats.scans += 1;
        let keys = self.scan_keys(&start, count);
        let id = self.next_scan;
        self.next_scan += 1;
        let entries: Vec<_> = keys.iter().map(|k| (k.clone(), None)).collect();
        let waiting = if with_values { keys.len() as u32 } else { 0 };
        self.scans.insert(
            id,
            ScanOp {
                tag,
                with_values,
                entries,
                waiting,
                error: None,
            },
        );
        // Nothing to read: no values asked for, or no key from `start` on.
        if waiting == 0 {
            return self.scan_finish(id);
        }
        for (slot, key) in keys.into_iter().enumerate() {
            self.pending_hits_or_read(key, Purpose::Scan { scan: id, slot });
        }
    }

    fn scan_filled(&mut self, scan: u64, slot: usize, value: Option<Bytes>) {
        let s = self.scans.get_mut(&scan).expect("a scan in flight");
        s.entries[slot].1 = value;
        s.waiting -= 1;
        if s.waiting == 0 {
            self.scan_finish(scan);
        }
    }

    fn scan_finish(&mut self, scan: u64) {
        let s = self.scans.remove(&scan).expect("a scan in flight");
        let reply = match s.error {
            Some(msg) => Reply::Error(msg),
            None if s.with_values => Reply::Entries(
                s.entries
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k, v)))
                    .collect(),
            ),
            None => Reply::Entries(
                s.entries
                    .into_iter()
                    .map(|(k, _)| (k, Bytes::new()))
                    .collect(),
            ),
        };
        self.replies.push_back((s.tag, reply));
    }
}
