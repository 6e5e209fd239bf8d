//! The key-value front of the simulator: clients send commands to the
//! key-value layer's machine (`tiermux-kv`: the cache or the store), and
//! the machine's
//! block-aligned storage requests become block accesses of the volume,
//! run by the policy over the simulated devices like any client's.
//!
//! The volume's blocks hold bytes here (a logical store applied when a
//! request's last block completes), since the machine reads back what it
//! wrote. The block version checker still checks every block read, and a
//! second checker checks every value a GET returns: a value names its key
//! and version in its first bytes, and its length and filler follow from
//! them, so a GET must return a whole value of its own key that is not
//! older than the last SET acknowledged before it began.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use foldhash::{HashMap, HashMapExt};

use bytes::Bytes;
use tiermux_core::rng::{splitmix64, Rng};
use tiermux_core::NO_TAG;
use tiermux_core::{Access, Histogram, Op};
use tiermux_kv::{Command, IoKind, IoRequest, Machine, Reply, Summary};

use super::contents::Contents;
use super::prefill::PrefillShare;
use super::{Ev, Req, Simulator, Versions};
use crate::cachebench::ValueSizes;
use crate::kvconfig::KvSpec;
use crate::workload::{volume_blocks_needed, Workload};

/// A client command chosen by [`Ev::KvCommand`] when it names no key.
pub(super) const CHOOSE_KEY: u64 = u64::MAX;

/// Key numbers from here up are the lone keys, each used once.
const FIRST_LONE_KEY: u64 = 1 << 40;

/// A storage request of the cache in flight on the volume.
#[derive(Clone)]
struct KvIo {
    id: tiermux_kv::IoId,
    offset: u64,
    len_bytes: u64,
    write: Option<Bytes>,
    blocks_left: u32,
}

/// What a command in flight was, for its reply.
#[derive(Clone, Copy, Debug)]
enum What {
    /// A GET; `then_set` when a read-modify-write's SET follows it.
    Get {
        min_version: u32,
        then_set: bool,
        lone: bool,
    },
    Set {
        version: u32,
        bytes: u32,
    },
    Del {
        version: u32,
    },
    Scan,
}

#[derive(Clone, Copy, Debug)]
struct KvOp {
    worker: u32,
    start_ns: u64,
    key: u64,
    what: What,
}

/// The key-value clients' state and the machine.
#[derive(Clone)]
pub(super) struct KvFront {
    spec: KvSpec,
    /// The value sizes `spec.value_sizes` names.
    value_table: Option<&'static ValueSizes>,
    machine: Machine,
    keys: Workload,
    rng: Rng,
    store: Contents,
    ios: Vec<Option<KvIo>>,
    free_ios: Vec<u32>,
    ops: HashMap<u64, KvOp>,
    next_tag: u64,
    versions: VersionBook,
    /// The newest DEL issued of each key deleted so far (its version).
    dels: HashMap<u64, u32>,
    /// Blocks in flight: readers (> 0) or a writer (-1).
    busy_blocks: HashMap<u64, i32>,
    next_lone: u64,
    /// GET latencies since measuring began.
    pub(super) get_latency: Histogram,
    /// The machine's counters when measuring began.
    pub(super) stats_at_warmup: Summary,
    /// SETs the machine refused with an error ("the store is full"), all
    /// run long and when measuring began.
    pub(super) refused: u64,
    pub(super) refused_at_warmup: u64,
    /// SETs of the prefill the machine refused (their keys start unset).
    pub(super) prefill_refused: u64,
    /// When each CPU core is next free, with `cpu_cores` set (soonest
    /// first).
    cores_free_at: Option<BinaryHeap<Reverse<u64>>>,
}

/// The version checker's state of every key: an array over the
/// workload's key space (up to [`DENSE_VERSION_KEYS`]), a map for the lone
/// keys and any beyond it. A key never written reads as version 0.
#[derive(Clone)]
struct VersionBook {
    dense: Vec<Versions>,
    sparse: HashMap<u64, Versions>,
}

/// The most keys whose versions [`VersionBook`] keeps in its array (8
/// bytes a key: 1 GiB).
const DENSE_VERSION_KEYS: u64 = 1 << 27;

impl VersionBook {
    fn new(key_space: u64) -> VersionBook {
        VersionBook {
            dense: vec![Versions::default(); key_space.min(DENSE_VERSION_KEYS) as usize],
            sparse: HashMap::new(),
        }
    }

    fn get(&self, key: u64) -> Versions {
        match self.dense.get(key as usize) {
            Some(v) => *v,
            None => self.sparse.get(&key).copied().unwrap_or_default(),
        }
    }

    fn get_mut(&mut self, key: u64) -> &mut Versions {
        match self.dense.get_mut(key as usize) {
            Some(v) => v,
            None => self.sparse.entry(key).or_default(),
        }
    }
}

/// A deterministic size in `min..=max` for `seed`.
fn size_between(min: u32, max: u32, seed: u64) -> u32 {
    min + (splitmix64(seed) % (max - min + 1) as u64) as u32
}

impl KvFront {
    /// The front for a run: the machine over a volume of `volume_bytes`,
    /// keys chosen by the run's workload; a store formats its volume, in
    /// zero time.
    pub(super) fn new(
        spec: &KvSpec,
        workload: &crate::workload::WorkloadSpec,
        keys: u64,
        volume_bytes: u64,
        seed: u64,
    ) -> KvFront {
        let machine = Machine::new(spec.machine_config(volume_bytes, seed))
            .expect("the key-value spec was validated");
        let key_space = volume_blocks_needed(workload, keys);
        let mut front = KvFront {
            spec: spec.clone(),
            value_table: spec.value_table(),
            machine,
            keys: Workload::new(workload, keys, key_space, seed ^ 0x4B56),
            rng: Rng::new(seed ^ 0x4B56_C11E),
            store: Contents::zeroed(volume_bytes as usize),
            ios: Vec::new(),
            free_ios: Vec::new(),
            ops: HashMap::new(),
            next_tag: 0,
            versions: VersionBook::new(key_space),
            dels: HashMap::new(),
            busy_blocks: HashMap::new(),
            next_lone: FIRST_LONE_KEY,
            get_latency: Histogram::new(),
            stats_at_warmup: Summary::default(),
            refused: 0,
            refused_at_warmup: 0,
            prefill_refused: 0,
            cores_free_at: spec.cpu_cores.map(|n| (0..n).map(|_| Reverse(0)).collect()),
        };
        front.settle_at_once(&mut Vec::new());
        while front.machine.pop_reply().is_some() {}
        front
    }

    /// The machine's counters so far.
    pub(super) fn stats(&self) -> Summary {
        self.machine.summary()
    }

    /// Performs the machine's storage requests at once, until it has none;
    /// notes the blocks written.
    fn settle_at_once(&mut self, written: &mut Vec<u64>) {
        while let Some(io) = self.machine.pop_io() {
            let at = io.offset as usize;
            match io.kind {
                IoKind::Write { data, .. } => {
                    self.store.write(at, &data);
                    let first = io.offset / tiermux_kv::BLOCK_BYTES;
                    let n = data.len() as u64 / tiermux_kv::BLOCK_BYTES;
                    written.extend(first..first + n);
                    self.machine.complete(io.id, Ok(&[]));
                }
                IoKind::Read { len_bytes } => {
                    let end = at + len_bytes as usize;
                    let (m, store) = (&mut self.machine, &self.store);
                    m.complete(io.id, Ok(&store[at..end]));
                }
                IoKind::Trim { len_bytes } => {
                    self.store.zero(at, len_bytes as usize);
                    self.machine.complete(io.id, Ok(&[]));
                }
            }
        }
    }

    fn key_bytes(&self, key: u64) -> Bytes {
        let s = &self.spec;
        let digits = key.to_string();
        let len =
            (size_between(s.key_bytes_min, s.key_bytes_max, key) as usize).max(digits.len() + 1);
        let mut k = Vec::with_capacity(len);
        k.push(b'k');
        k.resize(len - digits.len(), b'0');
        k.extend_from_slice(digits.as_bytes());
        Bytes::from(k)
    }

    fn value_len(&self, key: u64, version: u32) -> u32 {
        let s = &self.spec;
        let seed = key ^ (version as u64) << 44;
        match self.value_table {
            Some(t) => t.size_for(splitmix64(seed)),
            None => size_between(s.value_bytes_min, s.value_bytes_max, seed),
        }
    }

    fn value(&self, key: u64, version: u32) -> Bytes {
        let len = self.value_len(key, version) as usize;
        let mut v = vec![filler(key, version); len];
        v[..8].copy_from_slice(&key.to_le_bytes());
        v[8..12].copy_from_slice(&version.to_le_bytes());
        v[12..16].copy_from_slice(&(len as u32).to_le_bytes());
        Bytes::from(v)
    }

    /// Why `value`, returned by a GET of `key` that began after version
    /// `min_version` was acknowledged, is wrong; `None` if it is right.
    fn wrong_value(&self, key: u64, min_version: u32, value: &[u8]) -> Option<String> {
        if value.len() < 16 {
            return Some(format!("a value of {} bytes", value.len()));
        }
        let word = |at: usize| u32::from_le_bytes(value[at..at + 4].try_into().expect("4 bytes"));
        let named = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
        let version = word(8);
        let issued = self.versions.get(key).issued;
        if named != key {
            return Some(format!("the value of key {named}"));
        }
        if version < min_version || version > issued {
            return Some(format!(
                "version {version}, where {min_version} was acknowledged first and {issued} is the newest"
            ));
        }
        let want = self.value_len(key, version);
        if value.len() != want as usize || word(12) != want {
            return Some(format!("{} bytes of a {want}-byte value", value.len()));
        }
        (!all_bytes_are(&value[16..], filler(key, version)))
            .then(|| format!("version {version} with damaged bytes"))
    }

    /// Why a GET of `key` that began after version `min_version` was
    /// acknowledged wrongly found nothing: a store keeps every key until a
    /// DEL (a cache may drop any). `None` if nothing is right.
    /// What is wrong with a GET's answer (`None`: absent), if anything.
    fn check_get(&self, key: u64, min_version: u32, value: Option<&[u8]>) -> Option<String> {
        match value {
            Some(v) => self.wrong_value(key, min_version, v),
            None => self.wrongly_absent(key, min_version),
        }
    }

    /// What is wrong with a scan's entries, if anything: the first key
    /// that is not one of ours or whose value was never written to it.
    fn check_scan(&self, entries: &[(Bytes, Bytes)]) -> Option<String> {
        entries.iter().find_map(|(k, v)| match key_number(k) {
            Some(key) => self.wrong_value(key, 0, v),
            None => Some(format!("a scan answered the key {k:?}")),
        })
    }

    /// After a GET, the delay (ns) after which its worker SETs the key:
    /// at once when the mix asks for it, after the backing store's
    /// latency for a lookaside miss; `None` to go on.
    fn set_after_get(&self, hit: bool, then_set: bool, lone: bool) -> Option<u64> {
        let lookaside_miss = !hit && !lone && self.spec.lookaside && !self.spec.is_store();
        if !(then_set || lookaside_miss) {
            return None;
        }
        Some(if hit {
            0
        } else {
            (self.spec.backing_latency_us * 1e3) as u64
        })
    }

    fn wrongly_absent(&self, key: u64, min_version: u32) -> Option<String> {
        let deleted = self.dels.get(&key).is_some_and(|&d| d >= min_version);
        (self.spec.is_store() && min_version > 0 && !deleted).then(|| {
            format!("nothing, where version {min_version} was acknowledged and not deleted")
        })
    }

    /// Sets every key, coldest first, with storage that completes at once
    /// (a store's puts in group commits of 256); a SET the machine
    /// refuses (a full store) is counted in `prefill_refused`, and its key
    /// stays unwritten for the checkers. Returns the volume blocks written, most
    /// recently written first.
    pub(super) fn prefill(&mut self) -> Vec<u64> {
        let keys = self.keys.working_set();
        let mut written: Vec<u64> = Vec::new();
        for rank in (0..keys).rev() {
            let key = self.keys.block_of_rank(rank);
            let version = self.next_version(key);
            let cmd = Command::Set {
                key: self.key_bytes(key),
                value: self.value(key, version),
                expires_at_ms: 0,
            };
            self.machine.submit(key, cmd, 0);
            // A store packs its puts into group commits, as under load.
            if !self.spec.is_store() || rank % 256 == 0 {
                self.settle_at_once(&mut written);
            }
            self.prefill_replies();
        }
        self.settle_at_once(&mut written);
        self.prefill_replies();
        let mut seen = std::collections::HashSet::new();
        written.reverse();
        written.retain(|b| seen.insert(*b));
        written
    }

    /// Takes the replies to the prefill's SETs (tagged with their keys,
    /// each set once).
    fn prefill_replies(&mut self) {
        while let Some((key, reply)) = self.machine.pop_reply() {
            match reply {
                Reply::Stored => {
                    let version = self.versions.get(key).issued;
                    self.acked(key, version);
                }
                Reply::Error(_) => self.prefill_refused += 1,
                other => panic!("the reply {other:?} to the prefill's SET of key {key}"),
            }
        }
    }

    fn next_version(&mut self, key: u64) -> u32 {
        let v = self.versions.get_mut(key);
        v.issued += 1;
        v.issued
    }

    fn acked(&mut self, key: u64, version: u32) {
        let v = self.versions.get_mut(key);
        assert!(
            v.issued >= version,
            "version {version} of key {key} acked, never issued"
        );
        v.acked = v.acked.max(version);
    }

    /// Starts a command for `worker`: a SET of `key`, or one the workload
    /// chooses when `key` is [`CHOOSE_KEY`].
    fn start(&mut self, worker: u32, key: u64, start_ns: u64) {
        let s = &self.spec;
        let (key, what) = if key != CHOOSE_KEY {
            (key, None)
        } else {
            let u = self.rng.next_f64();
            if u < s.lone_get {
                self.next_lone += 1;
                (self.next_lone, Some((true, false)))
            } else if u < s.lone_get + s.lone_set {
                self.next_lone += 1;
                (self.next_lone, None)
            } else if u < s.lone_get + s.lone_set + s.del {
                let key = self.keys.next(start_ns).block;
                let version = self.next_version(key);
                self.dels.insert(key, version);
                let tag = self.op(worker, start_ns, key, What::Del { version });
                let cmd = Command::Del {
                    key: self.key_bytes(key),
                };
                self.machine.submit(tag, cmd, start_ns / 1_000_000);
                return;
            } else if u < s.lone_get + s.lone_set + s.del + s.scan {
                let key = self.keys.next(start_ns).block;
                let count = s.scan_length;
                let tag = self.op(worker, start_ns, key, What::Scan);
                let cmd = Command::Scan {
                    start: self.key_bytes(key),
                    count,
                    with_values: true,
                };
                self.machine.submit(tag, cmd, start_ns / 1_000_000);
                return;
            } else {
                let g = self.keys.next(start_ns);
                match g.op {
                    Op::Read => (g.block, Some((false, false))),
                    Op::Write if s.read_modify_write => (g.block, Some((false, true))),
                    Op::Write => (g.block, None),
                }
            }
        };
        let now_ms = start_ns / 1_000_000;
        match what {
            Some((lone, then_set)) => {
                let min_version = self.versions.get(key).acked;
                let what = What::Get {
                    min_version,
                    then_set,
                    lone,
                };
                let tag = self.op(worker, start_ns, key, what);
                let cmd = Command::Get {
                    key: self.key_bytes(key),
                };
                self.machine.submit(tag, cmd, now_ms);
            }
            None => {
                let version = self.next_version(key);
                let value = self.value(key, version);
                let what = What::Set {
                    version,
                    bytes: value.len() as u32,
                };
                let tag = self.op(worker, start_ns, key, what);
                let cmd = Command::Set {
                    key: self.key_bytes(key),
                    value,
                    expires_at_ms: 0,
                };
                self.machine.submit(tag, cmd, now_ms);
            }
        }
    }

    fn op(&mut self, worker: u32, start_ns: u64, key: u64, what: What) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.ops.insert(
            tag,
            KvOp {
                worker,
                start_ns,
                key,
                what,
            },
        );
        tag
    }

    /// Marks the blocks of a request busy, asserting the machine's rule
    /// that no read overlaps a write in flight.
    fn take_blocks(&mut self, first: u64, n: u64, write: bool) {
        for b in first..first + n {
            let e = self.busy_blocks.entry(b).or_insert(0);
            assert!(
                *e == 0 || (!write && *e > 0),
                "the key-value cache overlapped a write with another request at block {b}"
            );
            *e = if write { -1 } else { *e + 1 };
        }
    }

    fn release_blocks(&mut self, first: u64, n: u64) {
        for b in first..first + n {
            let e = self.busy_blocks.get_mut(&b).expect("a busy block");
            *e = if *e < 0 { 0 } else { *e - 1 };
            if *e == 0 {
                self.busy_blocks.remove(&b);
            }
        }
    }
}

/// The number of a key the front named (`k`, zeros, its digits).
fn key_number(k: &[u8]) -> Option<u64> {
    std::str::from_utf8(k.strip_prefix(b"k")?)
        .ok()?
        .parse()
        .ok()
}

fn filler(key: u64, version: u32) -> u8 {
    (splitmix64(key ^ (version as u64) << 40) & 0xff) as u8
}

/// Whether every byte of `body` is `fill`: 64 bytes at a time, their
/// eight words folded without a branch so that the compiler can use
/// vector instructions (checking every GET's value byte by byte takes a
/// fifth of a key-value run's time).
fn all_bytes_are(body: &[u8], fill: u8) -> bool {
    let word = u64::from_ne_bytes([fill; 8]);
    let differs = |chunk: &[u8]| {
        chunk.chunks_exact(8).fold(0, |acc, c| {
            acc | (u64::from_ne_bytes(c.try_into().expect("8 bytes")) ^ word)
        })
    };
    let mut blocks = body.chunks_exact(64);
    if blocks.by_ref().any(|b| differs(b) != 0) {
        return false;
    }
    let rest = blocks.remainder();
    let words = rest.len() / 8 * 8;
    differs(&rest[..words]) == 0 && rest[words..].iter().all(|&b| b == fill)
}

/// Where a command's reply leaves its client.
enum Then {
    /// Issue the next command.
    Next,
    /// SET the key after this delay, ns.
    Set { key: u64, after_ns: u64 },
}

impl Simulator {
    fn kv(&mut self) -> &mut KvFront {
        self.kv.as_mut().expect("a key-value run")
    }

    /// A client begins a command now: it reaches the cache after the
    /// command's CPU time.
    pub(super) fn kv_issue(&mut self, worker: u32, key: u64) {
        self.kv_issue_at(worker, key, self.now);
    }

    /// A client begins a command at `start_ns` (now or later).
    fn kv_issue_at(&mut self, worker: u32, key: u64, start_ns: u64) {
        let kv = self.kv();
        let cpu_ns = ((kv.spec.op_cpu_us * 1e3) as u64).max(1);
        let done_ns = match kv.cores_free_at.as_mut() {
            // The command's code runs on the core free soonest, once it is.
            Some(cores) => {
                let Reverse(free_ns) = cores.pop().expect("at least one core");
                let done_ns = free_ns.max(start_ns) + cpu_ns;
                cores.push(Reverse(done_ns));
                done_ns
            }
            None => start_ns + cpu_ns,
        };
        let ev = Ev::KvCommand {
            worker,
            key,
            start_ns,
        };
        self.push(done_ns, ev);
    }

    pub(super) fn kv_command(&mut self, worker: u32, key: u64, start_ns: u64) {
        self.kv().start(worker, key, start_ns);
        self.kv_pump();
    }

    /// Moves the cache's storage requests to the volume and its replies to
    /// their clients until it has none.
    fn kv_pump(&mut self) {
        loop {
            let kv = self.kv();
            if let Some(io) = kv.machine.pop_io() {
                self.kv_submit(io);
            } else if let Some((tag, reply)) = kv.machine.pop_reply() {
                self.kv_reply(tag, reply);
            } else {
                break;
            }
        }
    }

    fn kv_submit(&mut self, io: IoRequest) {
        let bs = self.block_size;
        let first = io.offset / bs;
        let len_bytes = io.len_bytes();
        let n = len_bytes / bs;
        let (op, write) = match io.kind {
            IoKind::Read { .. } => (Op::Read, None),
            IoKind::Write { data, .. } => (Op::Write, Some(data)),
            IoKind::Trim { .. } => return self.kv_trim(io.id, first, n),
        };
        let kv = self.kv();
        kv.take_blocks(first, n, write.is_some());
        let slot = match kv.free_ios.pop() {
            Some(i) => i,
            None => {
                kv.ios.push(None);
                (kv.ios.len() - 1) as u32
            }
        };
        kv.ios[slot as usize] = Some(KvIo {
            id: io.id,
            offset: io.offset,
            len_bytes,
            write,
            blocks_left: n as u32,
        });
        for block in first..first + n {
            let sid = self.block_sub(slot, block, op, true);
            let access = Access::one(block, op).continuing(block != first);
            self.dispatcher.submit(sid as u64, access);
        }
        self.drain();
    }

    /// A discard of blocks `first..first + n`: the policy drops what it
    /// keeps of them, under each block's lock, ahead of any later access
    /// (the dispatcher takes work in order). It plans no I/O and takes no
    /// time, so the machine is told at once that it is done.
    fn kv_trim(&mut self, id: tiermux_kv::IoId, first: u64, n: u64) {
        let kv = self.kv();
        kv.take_blocks(first, n, true);
        kv.release_blocks(first, n);
        let bs = tiermux_kv::BLOCK_BYTES as usize;
        kv.store.zero(first as usize * bs, n as usize * bs);
        for block in self.dispatcher.discard(first, first + n) {
            self.dispatcher.submit_trim(NO_TAG, block);
        }
        self.kv().machine.complete(id, Ok(&[]));
        self.drain();
    }

    /// A block of the cache's request `slot` was acknowledged.
    pub(super) fn kv_block_done(&mut self, slot: u32) {
        let kv = self.kv();
        let io = kv.ios[slot as usize].as_mut().expect("a request in flight");
        io.blocks_left -= 1;
        if io.blocks_left > 0 {
            return;
        }
        let io = kv.ios[slot as usize].take().expect("a request in flight");
        kv.free_ios.push(slot);
        let bs = tiermux_kv::BLOCK_BYTES;
        kv.release_blocks(io.offset / bs, io.len_bytes / bs);
        let at = io.offset as usize;
        match io.write {
            Some(data) => {
                kv.store.write(at, &data);
                kv.machine.complete(io.id, Ok(&[]));
            }
            None => {
                let end = at + io.len_bytes as usize;
                let (m, store) = (&mut kv.machine, &kv.store);
                m.complete(io.id, Ok(&store[at..end]));
            }
        }
        self.kv_pump();
    }

    fn kv_reply(&mut self, tag: u64, reply: Reply) {
        let now = self.now;
        let kv = self.kv.as_mut().expect("a key-value run");
        let op = kv.ops.remove(&tag).expect("a reply to a command in flight");
        let mut then = Then::Next;
        let mut wrong = None;
        let (req_op, bytes) = match (op.what, &reply) {
            (
                What::Get {
                    min_version,
                    then_set,
                    lone,
                },
                Reply::Value(v),
            ) => {
                let hit = v.is_some();
                wrong = kv.check_get(op.key, min_version, v.as_deref());
                kv.get_latency.record(now - op.start_ns);
                if let Some(after_ns) = kv.set_after_get(hit, then_set, lone) {
                    then = Then::Set {
                        key: op.key,
                        after_ns,
                    };
                }
                self.window.read_hits += hit as u64;
                self.window.read_misses += !hit as u64;
                self.sample_acc.read_hits += hit as u64;
                self.sample_acc.read_misses += !hit as u64;
                (Op::Read, v.as_ref().map_or(0, |v| v.len() as u64))
            }
            (What::Set { version, bytes }, Reply::Stored) => {
                kv.acked(op.key, version);
                (Op::Write, bytes as u64)
            }
            (What::Set { .. }, Reply::Error(_)) => {
                // Refused (a full store): the key keeps its acknowledged
                // value, which later GETs check.
                kv.refused += 1;
                (Op::Write, 0)
            }
            (What::Del { version }, Reply::Count(_)) => {
                kv.acked(op.key, version);
                (Op::Write, 0)
            }
            (What::Scan, Reply::Entries(es)) => {
                wrong = wrong.or_else(|| kv.check_scan(es));
                (Op::Read, es.iter().map(|(_, v)| v.len() as u64).sum())
            }
            (what, reply) => {
                let wrong = format!("the reply {reply:?} to {what:?}");
                return self.kv_violation(op.key, &wrong);
            }
        };
        if let Some(wrong) = wrong {
            self.kv_violation(op.key, &wrong);
        }
        let req = Req {
            start_ns: op.start_ns,
            op: Some(req_op),
            blocks_left: 0,
            bytes,
            worker: op.worker,
        };
        self.record_request(&req);
        match then {
            Then::Next => self.next_for_worker(op.worker),
            Then::Set { key, after_ns } => self.kv_issue_at(op.worker, key, now + after_ns),
        }
    }

    fn kv_violation(&mut self, key: u64, wrong: &str) {
        if self.violation.is_none() {
            self.violation = Some(format!(
                "policy '{}' at t={} ns: a command on key {key} got {wrong}",
                self.dispatcher.policy().name(),
                self.now
            ));
        }
    }

    /// Sets every key before the run (or starts from a copy of a front
    /// `share` holds for runs of the same prefill) and warms the policy
    /// with the blocks written, most recent first.
    pub(super) fn kv_prefill(&mut self, share: Option<&PrefillShare>) {
        let front = self.kv.take().expect("a key-value run has a front");
        let prefill = move || {
            let mut front = front;
            let written = front.prefill();
            Prefilled { front, written }
        };
        let filled = match (share, prefill_key(&self.r)) {
            (Some(share), Some(key)) => share.take(&key, prefill),
            _ => prefill(),
        };
        self.kv = Some(filled.front);
        // The run's figures leave the prefill out, warm-up or none.
        let kv = self.kv();
        kv.stats_at_warmup = kv.stats();
        for b in filled.written {
            if !self.dispatcher.warm(b) {
                break;
            }
        }
    }
}

/// A key-value front just after its prefill, and the volume blocks the
/// prefill wrote, most recently written first.
#[derive(Clone)]
pub(super) struct Prefilled {
    front: KvFront,
    written: Vec<u64>,
}

/// Bytes a copy of a prefilled front may write for each key set before
/// the copy costs more than another prefill: a prefill costs about 2.8 µs
/// a key, and a copy about 0.6 ns a byte of the store ever written
/// (zeroing its pages, then copying into them; `docs/performance.md`):
/// their ratio is about 4.7 KB, rounded down.
const COPY_BYTES_PER_KEY_SET: u64 = 4096;

impl Prefilled {
    /// Whether copying this front costs less than prefilling another.
    pub(super) fn cheaper_to_copy(&self) -> bool {
        let keys = self.front.keys.working_set();
        self.front.store.written_bytes() < keys.saturating_mul(COPY_BYTES_PER_KEY_SET)
    }
}

/// What a key-value run's prefill depends on: its key-value spec, its
/// workload, its keys, its volume's bytes and its seed (not its policy,
/// devices or client), as a string equal for runs whose prefilled fronts
/// are equal; none for a run without a prefill.
pub(super) fn prefill_key(r: &crate::config::Resolved) -> Option<String> {
    let spec = r.cfg.kv.as_ref().filter(|k| k.prefill)?;
    let inputs = (
        spec,
        &r.cfg.workload,
        r.working_set,
        r.volume_blocks,
        r.cfg.block_size,
        r.cfg.seed,
    );
    Some(serde_json::to_string(&inputs).expect("the key-value inputs serialize"))
}

/// Builds the front of a key-value run, or none for a block run.
pub(super) fn front_for(r: &crate::config::Resolved) -> Option<KvFront> {
    let spec = r.cfg.kv.as_ref()?;
    let volume_bytes = r.volume_blocks * r.cfg.block_size as u64;
    Some(KvFront::new(
        spec,
        &r.cfg.workload,
        r.working_set,
        volume_bytes,
        r.cfg.seed,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadSpec;

    fn front() -> KvFront {
        let spec = KvSpec {
            value_bytes_min: 16,
            value_bytes_max: 3000,
            ..KvSpec::default()
        };
        let workload = WorkloadSpec::default();
        let mut f = KvFront::new(&spec, &workload, 100, 64 << 20, 1);
        for _ in 0..3 {
            f.next_version(7);
        }
        f
    }

    #[test]
    fn a_prefill_set_the_store_refuses_leaves_its_key_unset() {
        // An index of 4 KiB holds about 170 of the 1,000 keys.
        let spec = KvSpec {
            mode: "store".into(),
            index_bytes: 4096,
            max_write_bytes: 64 << 10,
            value_bytes_min: 16,
            value_bytes_max: 100,
            ..KvSpec::default()
        };
        let mut f = KvFront::new(&spec, &WorkloadSpec::default(), 1000, 16 << 20, 1);
        f.prefill();
        let keys: Vec<u64> = (0..1000).map(|rank| f.keys.block_of_rank(rank)).collect();
        let unset = keys
            .iter()
            .filter(|&&k| f.versions.get(k).acked == 0)
            .count();
        assert!(
            f.prefill_refused > 500 && f.prefill_refused < 1000,
            "{}",
            f.prefill_refused
        );
        assert_eq!(unset as u64, f.prefill_refused);
        assert_eq!(f.refused, 0, "the run's own SETs");
        assert!(keys.iter().all(|&k| f.versions.get(k).issued == 1));
    }

    #[test]
    fn the_value_checker_refuses_every_kind_of_wrong_value() {
        let f = front();
        let good = f.value(7, 2);
        assert_eq!(f.wrong_value(7, 2, &good), None);
        assert_eq!(f.wrong_value(7, 1, &good), None);
        let too_old = f.wrong_value(7, 3, &good).unwrap();
        assert!(too_old.contains("version 2, where 3"), "{too_old}");
        assert!(f.wrong_value(8, 0, &good).unwrap().contains("key 7"));
        let never_set = f.value(7, 4);
        assert!(f.wrong_value(7, 0, &never_set).is_some());
        let short = &good[..good.len() - 1];
        assert!(f.wrong_value(7, 0, short).unwrap().contains("bytes of a"));
        for at in 16..good.len() {
            let mut damaged = good.to_vec();
            damaged[at] ^= 1;
            let why = f.wrong_value(7, 0, &damaged).unwrap_or_default();
            assert!(
                why.contains("damaged"),
                "byte {at} of {}: {why}",
                good.len()
            );
        }
        assert!(f.wrong_value(7, 0, &good[..10]).is_some());
    }

    /// A key of the workload's space (the array) and a lone key (the map)
    /// keep their versions alike, and a key never written reads as 0.
    #[test]
    fn the_version_book_keeps_dense_and_lone_keys_alike() {
        let mut f = front();
        let lone = FIRST_LONE_KEY + 9;
        for key in [7, lone] {
            let before = f.versions.get(key).issued;
            let v = f.next_version(key);
            assert_eq!(v, before + 1);
            f.acked(key, v);
            assert_eq!(
                (f.versions.get(key).issued, f.versions.get(key).acked),
                (v, v)
            );
            let good = f.value(key, v);
            assert_eq!(f.wrong_value(key, v, &good), None, "key {key}");
            assert!(f.wrong_value(key, 0, &f.value(key, v + 1)).is_some());
        }
        assert_eq!(f.versions.get(lone + 1).issued, 0);
        assert_eq!(f.versions.get(99).acked, 0);
        assert!(f.versions.sparse.len() == 1 && !f.versions.dense.is_empty());
    }

    /// Every length (words and a remainder) and every damaged position.
    #[test]
    fn a_body_is_all_fill_only_when_every_byte_is() {
        for len in 0..200 {
            let body = vec![0xa5u8; len];
            assert!(all_bytes_are(&body, 0xa5));
            for at in 0..len {
                let mut d = body.clone();
                d[at] = 0xa4;
                assert!(!all_bytes_are(&d, 0xa5), "len {len}, byte {at}");
            }
        }
    }

    #[test]
    fn keys_have_their_configured_sizes() {
        let mut f = front();
        f.spec.key_bytes_min = 10;
        f.spec.key_bytes_max = 20;
        for key in [0, 5, 123_456, FIRST_LONE_KEY + 3] {
            let k = f.key_bytes(key);
            assert!((10..=20).contains(&k.len()), "{k:?}");
            assert!(k.ends_with(key.to_string().as_bytes()));
        }
        assert_ne!(f.key_bytes(1), f.key_bytes(10));
    }
}
