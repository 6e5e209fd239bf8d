//! The store against a model, over the in-memory driver that completes
//! storage requests in random order, fails some, and crashes (every
//! request in flight dropped, each write landing on a random subset of its
//! blocks). A GET answers the value of the newest SET or DEL submitted
//! before it (or a later one); after a crash and reopen, every key holds
//! its last acknowledged value or one submitted after it; a SCAN answers
//! keys in order with such values. The volume is small, so the cleaner and
//! checkpoints run all the time.

use std::collections::HashMap;

use bytes::Bytes;
use tiermux_core::rng::Rng;
use tiermux_kv::mem::MemStorage;
use tiermux_kv::{Command, Reply, Store, StoreConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Pending,
    Acked,
    Failed,
    /// A DEL of an absent key: it wrote nothing.
    Void,
}

type Value = Option<Vec<u8>>;

#[derive(Debug)]
enum What {
    Get,
    Exists,
    Change(usize),
    Scan { start: Vec<u8>, count: u32 },
}

struct Open {
    key: Vec<u8>,
    what: What,
    /// Entries of the key's history before this one had been acknowledged.
    floor: usize,
    /// The newest entry of the key's history at submission.
    latest: usize,
    /// Every key's newest entry at submission (for a scan).
    latest_all: Option<HashMap<Vec<u8>, (usize, usize)>>,
}

struct Harness {
    store: Store,
    disk: MemStorage,
    cfg: StoreConfig,
    hist: HashMap<Vec<u8>, Vec<(Value, Status)>>,
    open: HashMap<u64, Open>,
    next_tag: u64,
    exact: bool,
    rng: Rng,
    keys: Vec<Vec<u8>>,
    pub gets_found: u64,
}

fn cfg() -> StoreConfig {
    StoreConfig {
        volume_bytes: 2 << 20,
        index_bytes: 16 << 10,
        max_write_bytes: 64 << 10,
        checkpoint_every_bytes: 256 << 10,
        ..StoreConfig::default()
    }
}

/// Checkpoints only when the cleaner needs one, so the log between a
/// checkpoint's head and the tail is what recovery has.
fn rare_checkpoints() -> StoreConfig {
    StoreConfig {
        checkpoint_every_bytes: 64 << 20,
        ..cfg()
    }
}

impl Harness {
    fn new(seed: u64, nkeys: usize, fail_per_million: u32) -> Harness {
        Harness::with(cfg(), seed, nkeys, fail_per_million)
    }

    fn with(cfg: StoreConfig, seed: u64, nkeys: usize, fail_per_million: u32) -> Harness {
        let disk = MemStorage::new(cfg.volume_bytes, seed);
        let keys: Vec<Vec<u8>> = (0..nkeys)
            .map(|i| format!("key{i:04}").into_bytes())
            .collect();
        let hist = keys
            .iter()
            .map(|k| (k.clone(), vec![(None, Status::Acked)]))
            .collect();
        let mut h = Harness {
            store: Store::open(cfg.clone()).expect("a valid configuration"),
            disk,
            cfg,
            hist,
            open: HashMap::new(),
            next_tag: 0,
            exact: fail_per_million == 0,
            rng: Rng::new(seed ^ 0x5eed),
            keys,
            gets_found: 0,
        };
        h.settle();
        assert_eq!(h.store.state(), Ok(true), "a fresh store opens");
        h.disk.fail_per_million(fail_per_million);
        h
    }

    fn floor(&self, key: &[u8]) -> usize {
        let h = &self.hist[key];
        (0..h.len())
            .rev()
            .find(|&i| h[i].1 == Status::Acked)
            .expect("an acknowledged entry")
    }

    /// The newest entry of a key's history that was not refused.
    fn latest(&self, key: &[u8]) -> usize {
        let h = &self.hist[key];
        (0..h.len())
            .rev()
            .find(|&i| !matches!(h[i].1, Status::Failed | Status::Void))
            .expect("an acknowledged entry")
    }

    fn submit(&mut self, cmd: Command) {
        let tag = self.next_tag;
        self.next_tag += 1;
        let key = match &cmd {
            Command::Get { key } | Command::Exists { key } | Command::Del { key } => key.to_vec(),
            Command::Set { key, .. } => key.to_vec(),
            Command::Scan { start, .. } => start.to_vec(),
        };
        let (floor, latest) = match self.hist.contains_key(&key) {
            true => (self.floor(&key), self.latest(&key)),
            false => (0, 0),
        };
        let what = match &cmd {
            Command::Get { .. } => What::Get,
            Command::Exists { .. } => What::Exists,
            Command::Set { value, .. } => self.change(&key, Some(value.to_vec())),
            Command::Del { .. } => self.change(&key, None),
            Command::Scan { start, count, .. } => What::Scan {
                start: start.to_vec(),
                count: *count,
            },
        };
        let latest_all = matches!(what, What::Scan { .. }).then(|| {
            self.hist
                .keys()
                .map(|k| (k.clone(), (self.floor(k), self.latest(k))))
                .collect()
        });
        self.open.insert(
            tag,
            Open {
                key,
                what,
                floor,
                latest,
                latest_all,
            },
        );
        self.store.submit(tag, cmd, 0);
    }

    fn change(&mut self, key: &[u8], v: Value) -> What {
        let h = self.hist.get_mut(key).expect("a known key");
        h.push((v, Status::Pending));
        What::Change(h.len() - 1)
    }

    /// The values a key may answer with: from the newest entry at
    /// submission when nothing fails, else from the last acknowledged one.
    fn allowed(&self, key: &[u8], floor: usize, latest: usize) -> Vec<Value> {
        let from = if self.exact { latest } else { floor };
        self.hist[key][from..]
            .iter()
            .map(|(v, _)| v.clone())
            .collect()
    }

    fn check(&mut self, tag: u64, reply: Reply) {
        let o = self.open.remove(&tag).expect("a reply to an open command");
        match (o.what, reply) {
            (What::Get, Reply::Value(v)) => {
                let v = v.map(|b| b.to_vec());
                self.gets_found += v.is_some() as u64;
                let ok = self.allowed(&o.key, o.floor, o.latest);
                assert!(
                    ok.contains(&v),
                    "GET {:?} answered {v:?}, allowed {ok:?}",
                    o.key
                );
            }
            (What::Exists, Reply::Count(n)) => {
                let ok = self.allowed(&o.key, o.floor, o.latest);
                assert!(
                    ok.iter().any(|v| v.is_some() as u64 == n),
                    "EXISTS {:?} said {n}",
                    o.key
                );
            }
            (What::Change(i), r) => {
                let h = self.hist.get_mut(&o.key).expect("a known key");
                h[i].1 = match r {
                    Reply::Stored | Reply::Count(1) => Status::Acked,
                    Reply::Count(0) => Status::Void,
                    Reply::Error(e) if e.contains("full") => Status::Failed,
                    Reply::Error(e) if !self.exact => {
                        assert!(e.contains("log failed"), "unexpected error {e}");
                        Status::Failed
                    }
                    r => panic!("a change of {:?} answered {r:?}", o.key),
                };
            }
            (What::Scan { start, count }, Reply::Entries(es)) => {
                let latest = o.latest_all.expect("a scan's snapshot");
                assert!(es.len() <= count as usize);
                for w in es.windows(2) {
                    assert!(w[0].0 < w[1].0, "scan out of order");
                }
                for (k, v) in es {
                    assert!(k[..] >= start[..], "scan before its start");
                    let (f, l) = latest[&k[..]];
                    let ok = self.allowed(&k, f, l);
                    assert!(
                        ok.contains(&Some(v.to_vec())),
                        "SCAN gave {k:?} a value it never had"
                    );
                }
            }
            (_, Reply::Error(e)) if !self.exact => {
                assert!(
                    e.contains("reading") || e.contains("checksum"),
                    "unexpected error {e}"
                );
            }
            (w, r) => panic!("{w:?} on {:?} answered {r:?}", o.key),
        }
    }

    /// Hands requests to the driver and checks replies.
    fn drain(&mut self) {
        while let Some(req) = self.store.pop_io() {
            self.disk.submit(req);
        }
        while let Some((tag, reply)) = self.store.pop_reply() {
            self.check(tag, reply);
        }
    }

    fn step_io(&mut self) {
        if let Some((id, result)) = self.disk.complete_one() {
            self.store.complete(id, result.as_deref().map_err(|e| *e));
        }
        self.drain();
    }

    /// Completes everything in flight.
    fn settle(&mut self) {
        self.drain();
        while self.disk.in_flight() > 0 {
            self.step_io();
        }
    }

    fn random_command(&mut self) -> Command {
        // A fifth of the keys take four fifths of the commands, so the
        // rest stay live long enough for the cleaner to move them.
        let n = self.keys.len() as u64;
        let i = match self.rng.below(5) {
            0 => self.rng.below(n),
            _ => self.rng.below(n / 5),
        };
        let key = Bytes::from(self.keys[i as usize].clone());
        match self.rng.below(100) {
            0..=39 => Command::Get { key },
            40..=44 => Command::Exists { key },
            45..=84 => {
                let len = match self.rng.below(10) {
                    0 => 0,
                    1 => 5000 + self.rng.below(20_000) as usize,
                    _ => self.rng.below(3000) as usize,
                };
                let fill = self.rng.next_u64() as u8;
                Command::Set {
                    key,
                    value: Bytes::from(vec![fill; len]),
                    expires_at_ms: 0,
                }
            }
            85..=94 => Command::Del { key },
            _ => Command::Scan {
                start: key,
                count: 1 + self.rng.below(10) as u32,
                with_values: true,
            },
        }
    }

    fn run(&mut self, steps: u32) {
        for _ in 0..steps {
            let room = self.open.len() < 32;
            if (room && self.rng.below(100) < 45) || self.disk.in_flight() == 0 {
                let cmd = self.random_command();
                self.submit(cmd);
                self.drain();
            } else {
                self.step_io();
            }
        }
    }

    /// Crashes, reopens on the same bytes, and checks every key holds its
    /// last acknowledged value or a later one; then takes what it holds as
    /// the model.
    fn crash_and_reopen(&mut self) {
        self.disk.crash();
        for (_, o) in self.open.drain() {
            if let What::Change(i) = o.what {
                self.hist.get_mut(&o.key).expect("a known key")[i].1 = Status::Failed;
            }
        }
        self.store = Store::open(self.cfg.clone()).expect("a valid configuration");
        let saved = self.disk.fail_per_million_now();
        self.disk.fail_per_million(0);
        self.settle();
        assert_eq!(self.store.state(), Ok(true), "the store reopens");
        let keys = self.keys.clone();
        let mut held = HashMap::new();
        for k in &keys {
            let allowed = self.allowed(k, self.floor(k), self.floor(k));
            let tag = self.next_tag;
            self.next_tag += 1;
            self.store.submit(
                tag,
                Command::Get {
                    key: Bytes::from(k.clone()),
                },
                0,
            );
            while self.store.pop_reply().is_none_or(|(t, r)| {
                assert_eq!(t, tag);
                let Reply::Value(v) = r else {
                    panic!("GET answered {r:?}")
                };
                let v = v.map(|b| b.to_vec());
                assert!(
                    allowed.contains(&v),
                    "after a crash {k:?} holds {v:?}, allowed {allowed:?}"
                );
                held.insert(k.clone(), v);
                false
            }) {
                while let Some(req) = self.store.pop_io() {
                    self.disk.submit(req);
                }
                let (id, r) = self.disk.complete_one().expect("a read in flight");
                self.store.complete(id, r.as_deref().map_err(|e| *e));
            }
        }
        for (k, v) in held {
            self.hist.insert(k, vec![(v, Status::Acked)]);
        }
        self.disk.fail_per_million(saved);
    }
}

#[test]
fn gets_see_the_newest_change_with_cleaning_and_checkpoints() {
    for seed in 1..=6 {
        let mut h = Harness::new(seed, 150, 0);
        h.run(20_000);
        h.settle();
        let s = h.store.stats();
        assert!(s.moved > 0 && s.cleaned_bytes > 0, "the cleaner ran: {s:?}");
        assert!(s.checkpoints > 2, "checkpoints were written: {s:?}");
        assert!(h.gets_found > 1000, "gets found values");
        assert_eq!(s.damaged_reads, 0);
    }
}

#[test]
fn failed_requests_never_answer_a_wrong_value() {
    for seed in 10..=13 {
        let mut h = Harness::new(seed, 150, 20_000);
        h.run(20_000);
        h.settle();
        assert!(h.disk.failed > 50, "failures were injected");
        assert!(h.store.stats().log_write_failures > 0);
    }
}

#[test]
fn every_acknowledged_change_survives_crashes() {
    let mut crashes = 0;
    for seed in 20..=25 {
        let c = if seed < 23 { cfg() } else { rare_checkpoints() };
        let mut h = Harness::with(c, seed, 120, if seed % 2 == 0 { 0 } else { 5_000 });
        for _ in 0..60 {
            let steps = 50 + h.rng.below(800) as u32;
            h.run(steps);
            h.crash_and_reopen();
            crashes += 1;
        }
        let (head, _, _) = h.store.log_positions();
        assert!(head > 3 * (2 << 20), "the log went round several times");
    }
    assert_eq!(crashes, 360);
}

#[test]
fn a_volume_that_is_not_a_store_is_refused() {
    let cfg = cfg();
    let mut store = Store::open(cfg).expect("valid");
    let req = store.pop_io().expect("the superblock read");
    let junk = vec![7u8; req.len_bytes() as usize];
    store.complete(req.id, Ok(&junk));
    let why = store.state().expect_err("refused");
    assert!(why.contains("not a store"), "{why}");
    store.submit(
        1,
        Command::Get {
            key: Bytes::from_static(b"k"),
        },
        0,
    );
    let (_, r) = store.pop_reply().expect("an answer");
    assert!(matches!(r, Reply::Error(e) if e.contains("could not open")));
}

#[test]
fn a_set_with_an_expiry_and_an_oversized_value_are_refused() {
    let mut h = Harness::new(99, 4, 0);
    let key = Bytes::from_static(b"key0000");
    for (tag, cmd) in [
        (
            1000,
            Command::Set {
                key: key.clone(),
                value: Bytes::from_static(b"v"),
                expires_at_ms: 5,
            },
        ),
        (
            1001,
            Command::Set {
                key: key.clone(),
                value: Bytes::from(vec![0; 70_000]),
                expires_at_ms: 0,
            },
        ),
    ] {
        h.store.submit(tag, cmd, 0);
        let (t, r) = h.store.pop_reply().expect("an answer at once");
        assert_eq!(t, tag);
        assert!(matches!(r, Reply::Error(_)), "{r:?}");
    }
}

/// Runs the store over `disk` until nothing is in flight, returning the
/// replies.
fn settle_store(store: &mut Store, disk: &mut MemStorage) -> Vec<(u64, Reply)> {
    let mut out = Vec::new();
    loop {
        while let Some(req) = store.pop_io() {
            disk.submit(req);
        }
        while let Some(r) = store.pop_reply() {
            out.push(r);
        }
        match disk.complete_one() {
            Some((id, r)) => store.complete(id, r.as_deref().map_err(|e| *e)),
            None => return out,
        }
    }
}

fn put(key: &str, fill: u8) -> Command {
    // 7-byte keys and 4057-byte values make records of exactly a block.
    Command::Set {
        key: Bytes::from(key.to_string()),
        value: Bytes::from(vec![fill; 4096 - 32 - key.len()]),
        expires_at_ms: 0,
    }
}

fn get(store: &mut Store, disk: &mut MemStorage, key: &str) -> Option<Bytes> {
    store.submit(
        777,
        Command::Get {
            key: Bytes::from(key.to_string()),
        },
        0,
    );
    match settle_store(store, disk).pop() {
        Some((777, Reply::Value(v))) => v,
        r => panic!("GET answered {r:?}"),
    }
}

/// Acknowledges key0001 = B in the log's first block, then X (key0002)
/// alone in the second, and leaves Y (key0003) and A (key0001) submitted
/// together in one write of the third and fourth blocks, in flight.
fn two_block_write_in_flight(cfg: &StoreConfig, seed: u64) -> (Store, MemStorage) {
    let mut disk = MemStorage::new(cfg.volume_bytes, seed);
    let mut store = Store::open(cfg.clone()).expect("valid");
    settle_store(&mut store, &mut disk);
    store.submit(1, put("key0001", b'B'), 0);
    assert_eq!(
        settle_store(&mut store, &mut disk),
        vec![(1, Reply::Stored)]
    );
    store.submit(2, put("key0002", b'X'), 0);
    store.submit(3, put("key0003", b'Y'), 0);
    store.submit(4, put("key0001", b'A'), 0);
    disk.submit(store.pop_io().expect("X's write"));
    assert!(store.pop_io().is_none(), "one write in flight");
    let (id, r) = disk.complete_one().expect("X's write");
    store.complete(id, r.as_deref().map_err(|e| *e));
    let w = store.pop_io().expect("Y and A's write");
    let log_start = cfg.layout().log_start;
    assert_eq!((w.offset, w.len_bytes()), (log_start + 2 * 4096, 2 * 4096));
    disk.submit(w);
    (store, disk)
}

/// Acknowledges key0001 = C in a write that ends where A's block begins,
/// then reopens and checks key0001 holds C.
fn put_c_reopen_and_check(cfg: &StoreConfig, store: &mut Store, disk: &mut MemStorage) {
    store.submit(5, put("key0001", b'C'), 0);
    assert_eq!(settle_store(store, disk), vec![(5, Reply::Stored)]);
    let mut store = Store::open(cfg.clone()).expect("valid");
    settle_store(&mut store, disk);
    assert_eq!(
        get(&mut store, disk, "key0001").map(|v| (v[0], v.len())),
        Some((b'C', 4057)),
        "the acknowledged value, not A"
    );
}

#[test]
fn a_write_cut_short_by_a_crash_is_never_read_after_a_later_one() {
    let cfg = cfg();
    let (_, mut disk) = two_block_write_in_flight(&cfg, 5);
    // The crash lands A's block only.
    disk.crash_landing(|offset| offset == cfg.layout().log_start + 3 * 4096);
    let mut store = Store::open(cfg.clone()).expect("valid");
    settle_store(&mut store, &mut disk);
    assert_eq!(
        get(&mut store, &mut disk, "key0001").map(|v| (v[0], v.len())),
        Some((b'B', 4057))
    );
    // The next boot writes C where X was lost, ending where A begins.
    put_c_reopen_and_check(&cfg, &mut store, &mut disk);
}

#[test]
fn a_failed_write_is_never_read_after_a_later_one() {
    let cfg = cfg();
    let (mut store, mut disk) = two_block_write_in_flight(&cfg, 6);
    // The write fails after landing both its blocks.
    for (id, r) in disk.fail_landing(|_| true) {
        store.complete(id, r.as_deref().map_err(|e| *e));
    }
    let replies: Vec<_> = std::iter::from_fn(|| store.pop_reply()).collect();
    assert_eq!(replies.len(), 3);
    let failed = |r: &&(u64, Reply)| matches!(r.1, Reply::Error(_));
    assert!(replies[1..].iter().all(|r| failed(&r)), "{replies:?}");
    // A shorter write follows at the same place.
    put_c_reopen_and_check(&cfg, &mut store, &mut disk);
}

#[test]
fn reads_still_in_flight_when_an_open_fails_are_ignored() {
    use tiermux_kv::store::meta::Superblock;
    let cfg = StoreConfig {
        volume_bytes: 8 << 20,
        index_bytes: 2 << 20,
        max_write_bytes: 64 << 10,
        ..StoreConfig::default()
    };
    let mut store = Store::open(cfg.clone()).expect("valid");
    let req = store.pop_io().expect("the superblock read");
    // A superblock naming a checkpoint read in two pieces.
    let sb = Superblock {
        seq: 1,
        generation: 1,
        boot: 1,
        volume_bytes: cfg.volume_bytes,
        slot_bytes: cfg.index_bytes,
        ckpt_slot: 0,
        ckpt_len: (2 << 20) - 4096,
        ckpt_crc: 0,
        ckpt_entries: 0,
        ckpt_head: 0,
    };
    let mut blocks = sb.encode();
    blocks.resize(req.len_bytes() as usize, 0);
    store.complete(req.id, Ok(&blocks));
    let pieces: Vec<_> = std::iter::from_fn(|| store.pop_io()).collect();
    assert_eq!(pieces.len(), 2, "{pieces:?}");
    store.complete(pieces[0].id, Err(5));
    assert!(store.state().is_err(), "the open failed");
    let zeros = vec![0; pieces[1].len_bytes() as usize];
    store.complete(pieces[1].id, Ok(&zeros));
    assert_eq!(store.io_in_flight(), 0);
    store.submit(
        1,
        Command::Get {
            key: Bytes::from_static(b"k"),
        },
        0,
    );
    let (_, r) = store.pop_reply().expect("an answer");
    assert!(matches!(r, Reply::Error(e) if e.contains("could not open")));
}

/// A SET of `key` whose 100-byte value carries `n`.
fn small_put(key: &str, n: u32) -> Command {
    let mut v = vec![b'v'; 100];
    v[..4].copy_from_slice(&n.to_le_bytes());
    Command::Set {
        key: Bytes::from(key.to_string()),
        value: Bytes::from(v),
        expires_at_ms: 0,
    }
}

/// A superblock write can fail after landing. It then names the slot the
/// next checkpoint would write, so the store must not write that slot
/// until a later superblock is known to be on the volume. Here the first
/// checkpoint's superblock write lands and fails; the next superblock write
/// fails without landing, after more SETs have changed the index; then the
/// next write to a checkpoint slot, with new contents, is torn by a crash
/// (all but its first block land). The store must still open with every
/// acknowledged SET.
#[test]
fn a_failed_superblock_write_that_landed_never_names_a_torn_checkpoint() {
    let cfg = cfg();
    let layout = cfg.layout();
    let mut disk = MemStorage::new(cfg.volume_bytes, 3);
    let mut store = Store::open(cfg.clone()).expect("valid");
    settle_store(&mut store, &mut disk);
    let key = |i: u32| format!("key{:04}", i % 400);
    let (mut acked, mut submitted) = (HashMap::new(), HashMap::new());
    let mut pending = std::collections::VecDeque::new();
    let mut parked: Option<(tiermux_kv::IoRequest, u32)> = None;
    let (mut supers_failed, mut torn) = (0, false);
    let fail = |disk: &mut MemStorage, store: &mut Store, land: bool| {
        for (id, r) in disk.fail_landing(|_| land) {
            store.complete(id, r.as_deref().map_err(|e| *e));
        }
    };
    'run: for n in 0..200_000u32 {
        store.submit(n as u64, small_put(&key(n), n), 0);
        submitted.insert(n as u64, key(n));
        loop {
            pending.extend(std::iter::from_fn(|| store.pop_io()));
            for (tag, r) in std::iter::from_fn(|| store.pop_reply()) {
                assert_eq!(r, Reply::Stored);
                acked.insert(submitted[&tag].clone(), tag as u32);
            }
            if parked.as_ref().is_some_and(|p| n > p.1 + 50) {
                // The parked superblock write fails without landing.
                let (req, _) = parked.take().expect("parked");
                disk.submit(req);
                fail(&mut disk, &mut store, false);
                supers_failed = 2;
                continue;
            }
            let Some(req) = pending.pop_front() else {
                break;
            };
            let (offset, len) = (req.offset, req.len_bytes() as usize);
            let new_bytes = match &req.kind {
                tiermux_kv::IoKind::Write { data, .. } => {
                    Some(data[..] != disk.bytes()[offset as usize..offset as usize + len])
                }
                _ => None,
            };
            let is_super = new_bytes.is_some() && offset < 2 * 4096;
            let in_slot = new_bytes.is_some() && offset >= 2 * 4096 && offset < layout.log_start;
            if is_super && supers_failed == 0 {
                disk.submit(req);
                fail(&mut disk, &mut store, true);
                supers_failed = 1;
            } else if is_super && supers_failed == 1 && parked.is_none() {
                parked = Some((req, n));
            } else if in_slot && supers_failed == 2 && new_bytes == Some(true) {
                assert!(len >= 2 * 4096, "a checkpoint of one block cannot tear");
                disk.submit(req);
                disk.crash_landing(|o| o != offset);
                torn = true;
                break 'run;
            } else {
                disk.submit(req);
                let (id, r) = disk.complete_one().expect("the request just submitted");
                store.complete(id, r.as_deref().map_err(|e| *e));
            }
        }
    }
    assert!(torn, "the test reached its crash");
    let mut store = Store::open(cfg.clone()).expect("valid");
    settle_store(&mut store, &mut disk);
    assert_eq!(store.state(), Ok(true), "the store reopens");
    for (k, n) in &acked {
        let v = get(&mut store, &mut disk, k).expect("an acknowledged key");
        let got = u32::from_le_bytes(v[..4].try_into().unwrap());
        assert!(
            got >= *n && key(got) == *k,
            "{k}: SET {got}, {n} acknowledged"
        );
    }
}

/// A scan with values that starts past the last key finds nothing to
/// read; it is answered at once with no entries (it used to wait for reads
/// it never issued, and its client for good).
#[test]
fn a_scan_past_the_last_key_is_answered_empty() {
    let mut h = Harness::new(7, 4, 0);
    h.store.submit(1, put("key0001", 1), 0);
    settle_store(&mut h.store, &mut h.disk);
    for with_values in [true, false] {
        let scan = Command::Scan {
            start: Bytes::from_static(b"key9999"),
            count: 4,
            with_values,
        };
        h.store.submit(2, scan, 0);
        let replies = settle_store(&mut h.store, &mut h.disk);
        assert!(
            matches!(&replies[..], [(2, Reply::Entries(e))] if e.is_empty()),
            "with_values {with_values}: {replies:?}"
        );
    }
}
