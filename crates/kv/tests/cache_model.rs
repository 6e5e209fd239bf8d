//! The cache against a model, over the in-memory driver that completes
//! storage requests in random order and fails some: a lookup returns the
//! key's value when it was submitted or nothing, never what a later set
//! wrote (a connection's commands answer in order), and never an expired
//! value.

use crate::common;

use std::collections::HashMap;

use bytes::Bytes;
use common::seed_base;
use tiermux_core::rng::Rng;
use tiermux_kv::mem::MemStorage;
use tiermux_kv::{Cache, CacheConfig, Command, RegionEviction, Reply};

/// What a reply may say: the (value, expiry) the key held when the
/// command was submitted (`None` for absent).
struct Open {
    key: Vec<u8>,
    submitted_ms: u64,
    allowed: Vec<Option<(Vec<u8>, u64)>>,
    is_get: bool,
}

struct Harness {
    cache: Cache,
    disk: MemStorage,
    current: HashMap<Vec<u8>, Option<(Vec<u8>, u64)>>,
    open: HashMap<u64, Open>,
    next_tag: u64,
    now_ms: u64,
    hits: u64,
    gets: u64,
}

impl Harness {
    fn new(cfg: CacheConfig, seed: u64) -> Harness {
        let disk = MemStorage::new(cfg.volume_bytes, seed);
        Harness {
            cache: Cache::new(cfg).expect("a valid configuration"),
            disk,
            current: HashMap::new(),
            open: HashMap::new(),
            next_tag: 0,
            now_ms: 1,
            hits: 0,
            gets: 0,
        }
    }

    fn submit(&mut self, cmd: Command) {
        let tag = self.next_tag;
        self.next_tag += 1;
        let (key, is_get) = match &cmd {
            Command::Get { key } | Command::Exists { key } => {
                (key.to_vec(), matches!(cmd, Command::Get { .. }))
            }
            Command::Set { key, .. } | Command::Del { key } => (key.to_vec(), false),
            Command::Scan { .. } => unreachable!("the cache takes no scans"),
        };
        let now = self.current.get(&key).cloned().flatten();
        self.open.insert(
            tag,
            Open {
                key: key.clone(),
                submitted_ms: self.now_ms,
                allowed: vec![now],
                is_get,
            },
        );
        let change = match &cmd {
            Command::Set {
                value,
                expires_at_ms,
                ..
            } => Some(Some((value.to_vec(), *expires_at_ms))),
            Command::Del { .. } => Some(None),
            _ => None,
        };
        if let Some(v) = change {
            self.current.insert(key, v);
        }
        self.cache.submit(tag, cmd, self.now_ms);
        self.pump();
    }

    fn pump(&mut self) {
        while let Some(req) = self.cache.pop_io() {
            self.disk.submit(req);
        }
        while let Some((tag, reply)) = self.cache.pop_reply() {
            self.check(tag, reply);
        }
    }

    fn complete(&mut self, n: usize) {
        for _ in 0..n {
            let Some((id, result)) = self.disk.complete_one() else {
                break;
            };
            self.cache.complete(id, result.as_deref().map_err(|e| *e));
            self.pump();
        }
    }

    fn drain(&mut self) {
        self.pump();
        while self.disk.in_flight() > 0 {
            self.complete(1);
        }
        assert!(
            self.open.is_empty(),
            "{} commands never answered",
            self.open.len()
        );
        assert_eq!(self.cache.io_in_flight(), 0);
    }

    fn live(o: &Open, v: &Option<(Vec<u8>, u64)>) -> bool {
        matches!(v, Some((_, exp)) if *exp == 0 || *exp > o.submitted_ms)
    }

    fn check(&mut self, tag: u64, reply: Reply) {
        let o = self
            .open
            .remove(&tag)
            .expect("a reply for a command in flight");
        let key = String::from_utf8_lossy(&o.key).into_owned();
        match reply {
            Reply::Value(Some(v)) => {
                assert!(o.is_get);
                let ok = o
                    .allowed
                    .iter()
                    .any(|a| Self::live(&o, a) && a.as_ref().is_some_and(|(x, _)| x[..] == v[..]));
                assert!(
                    ok,
                    "GET {key} returned a value it did not hold when the GET was submitted ({} bytes)",
                    v.len()
                );
                self.hits += 1;
                self.gets += 1;
            }
            Reply::Value(None) => self.gets += 1,
            Reply::Count(1) => {
                assert!(
                    o.allowed.iter().any(|a| Self::live(&o, a)),
                    "{key} counted as present but never was"
                );
            }
            Reply::Count(0) | Reply::Stored => {}
            other => panic!("unexpected reply {other:?} for {key}"),
        }
    }
}

fn random_command(rng: &mut Rng, version: &mut u64, now_ms: u64) -> Command {
    let key = Bytes::from(format!("key{}", rng.below(300)));
    match rng.below(100) {
        0..=49 => Command::Get { key },
        50..=89 => {
            *version += 1;
            let len = if rng.below(3) == 0 {
                3000 + rng.below(17_000)
            } else {
                8 + rng.below(200)
            } as usize;
            let mut value = format!("v{version}-").into_bytes();
            value.resize(len.max(value.len()), b'x' + (*version % 3) as u8);
            let expires_at_ms = if rng.below(10) == 0 {
                now_ms + rng.below(50)
            } else {
                0
            };
            Command::Set {
                key,
                value: Bytes::from(value),
                expires_at_ms,
            }
        }
        90..=95 => Command::Del { key },
        _ => Command::Exists { key },
    }
}

fn small_config(generation: u64) -> CacheConfig {
    CacheConfig {
        volume_bytes: 8 << 20,
        dram_bytes: 64 << 10,
        soc_share: 0.25,
        small_item_max_bytes: 2048,
        region_bytes: 256 << 10,
        region_buffers: if generation.is_multiple_of(3) { 3 } else { 1 },
        // A region written whole, or in pieces of 64 KiB.
        max_write_bytes: [0, 64 << 10][generation as usize % 2],
        trim_regions: generation.is_multiple_of(2),
        region_eviction: if generation % 4 < 2 {
            RegionEviction::Lru
        } else {
            RegionEviction::Fifo
        },
        // Inserts that find no region: dropped, a few waiting, or all.
        insert_queue_bytes: [0, 32 << 10, 256 << 20][generation as usize % 3],
        generation,
    }
}

fn run(seed: u64, fail_per_million: u32, steps: u32) -> Harness {
    let mut h = Harness::new(small_config(seed), seed);
    h.disk.fail_per_million(fail_per_million);
    let mut rng = Rng::new(seed ^ 0xCAFE);
    let mut version = 0;
    for _ in 0..steps {
        if rng.below(2) == 0 {
            let cmd = random_command(&mut rng, &mut version, h.now_ms);
            h.submit(cmd);
        } else {
            h.complete(rng.below(4) as usize);
        }
        h.now_ms += rng.below(2);
    }
    h.drain();
    h
}

#[test]
fn random_commands_never_return_a_value_the_key_did_not_hold() {
    let base = seed_base();
    for seed in base + 1..=base + 8 {
        let h = run(seed, 0, 20_000);
        let s = h.cache.stats();
        assert!(
            s.flash_hits > 100,
            "seed {seed}: only {} flash hits: the test does not reach flash",
            s.flash_hits
        );
        assert!(
            s.soc.writes > 100 && s.loc.region_writes > 10 && s.loc.evictions > 0,
            "seed {seed}: {s:?}"
        );
        // Sets overtake flash lookups of their key, which answer as absent.
        assert!(s.overtaken_lookups > 0, "seed {seed}: {s:?}");
        // Even seeds discard evicted regions, whose bytes then read as a
        // filler; odd ones reuse them as they are.
        let trims = if seed.is_multiple_of(2) {
            s.loc.evictions
        } else {
            0
        };
        assert_eq!(s.loc.trims, trims, "seed {seed}");
        // Seeds 3 and 6 let no insert wait for a region, 1, 4 and 7 a few,
        // 2, 5 and 8 every one.
        match seed % 3 {
            0 => assert_eq!(s.loc.queued, 0, "seed {seed}"),
            1 => assert!(s.loc.queued > 0, "seed {seed}: {s:?}"),
            _ => assert!(s.loc.queued > 0 && s.loc.dropped == 0, "seed {seed}: {s:?}"),
        }
        assert!(
            h.hits * 10 > h.gets,
            "seed {seed}: {} hits of {} gets",
            h.hits,
            h.gets
        );
    }
}

#[test]
fn failed_and_torn_writes_lose_items_but_never_return_wrong_ones() {
    let base = seed_base();
    for seed in base + 11..=base + 16 {
        let h = run(seed, 20_000, 20_000);
        let s = h.cache.stats();
        assert!(
            h.disk.failed > 50,
            "seed {seed}: only {} failures injected",
            h.disk.failed
        );
        assert!(s.soc.io_errors + s.loc.io_errors == h.disk.failed);
        assert!(s.flash_hits > 50, "seed {seed}: {s:?}");
    }
}

#[test]
fn a_cache_that_waits_for_its_writes_keeps_what_fits() {
    // With every request finished before the next command and room for
    // every item, a set key is a hit until it is deleted or expires.
    let mut cfg = small_config(3);
    cfg.volume_bytes = 64 << 20;
    let mut h = Harness::new(cfg, 3);
    let mut rng = Rng::new(99);
    let mut version = 0;
    let mut misses = 0;
    for _ in 0..5_000 {
        let cmd = random_command(&mut rng, &mut version, h.now_ms);
        let expect_hit = match &cmd {
            Command::Get { key } => h
                .current
                .get(&key[..])
                .cloned()
                .flatten()
                .is_some_and(|(_, e)| e == 0),
            _ => false,
        };
        let before = h.hits;
        h.submit(cmd);
        h.drain();
        misses += (expect_hit && h.hits == before) as u32;
        h.now_ms += 1;
    }
    let s = h.cache.stats();
    assert!(s.flash_hits > 500, "{s:?}");
    assert_eq!(s.loc.dropped, 0);
    // Buckets hold about 4 KiB: a few keys that share a bucket with others
    // may be pushed out (about 75 small keys over 1,024 buckets).
    assert!(misses <= 5, "{misses} misses of keys that were set and fit");
}

#[test]
fn a_new_generation_does_not_read_an_earlier_runs_items() {
    let mut h = run(5, 0, 5_000);
    h.cache.flush();
    h.drain();
    let disk = std::mem::replace(&mut h.disk, MemStorage::new(0, 0));
    let mut h2 = Harness::new(small_config(6), 6);
    h2.disk = disk;
    for k in 0..300 {
        // A set to a neighbour makes the bucket be read and rewritten.
        h2.submit(Command::Set {
            key: Bytes::from(format!("other{k}")),
            value: Bytes::from_static(b"v"),
            expires_at_ms: 0,
        });
        h2.submit(Command::Get {
            key: Bytes::from(format!("key{k}")),
        });
        h2.drain();
    }
    assert_eq!(h2.hits, 0, "a new cache returned items of an earlier run");
}

/// An item promoted from a large-object region stays in DRAM (read there
/// again and again) while fillers pass through DRAM to flash and the
/// region is evicted; when DRAM at last evicts the item, it is written
/// to flash again (CacheLib puts an item its evict callback marked
/// `NvmEvicted`), so a later GET finds it there.
#[test]
fn a_promoted_item_whose_flash_copy_went_is_written_again() {
    let cfg = CacheConfig {
        volume_bytes: 256 << 10,
        dram_bytes: 16 << 10,
        soc_share: 0.0,
        region_bytes: 64 << 10,
        region_buffers: 1,
        ..CacheConfig::default()
    };
    let mut h = Harness::new(cfg, 3);
    let set = |h: &mut Harness, key: String, byte: u8| {
        h.submit(Command::Set {
            key: Bytes::from(key),
            value: Bytes::from(vec![byte; 5000]),
            expires_at_ms: 0,
        });
        h.drain();
    };
    let get_k = |h: &mut Harness| {
        h.submit(Command::Get {
            key: Bytes::from_static(b"k"),
        });
        h.drain();
    };
    set(&mut h, "k".into(), 7);
    for i in 0..5 {
        set(&mut h, format!("early{i}"), 1);
    }
    h.cache.flush();
    h.drain();
    let hits = h.hits;
    get_k(&mut h);
    assert_eq!(
        (h.hits, h.cache.stats().flash_hits),
        (hits + 1, 1),
        "k read from flash"
    );
    let evictions = h.cache.stats().loc.evictions;
    for i in 0..200 {
        set(&mut h, format!("filler{i}"), 2);
        get_k(&mut h);
    }
    let s = h.cache.stats();
    assert!(
        s.loc.evictions >= evictions + 4,
        "every region evicted since: {s:?}"
    );
    assert_eq!(s.flash_hits, 1, "k stayed in DRAM");
    assert_eq!(s.rewritten_clean, 0);
    for i in 0..10 {
        set(&mut h, format!("late{i}"), 3);
    }
    let s = h.cache.stats();
    assert_eq!(
        s.rewritten_clean, 1,
        "k left DRAM with no flash copy: {s:?}"
    );
    h.cache.flush();
    h.drain();
    let hits = h.hits;
    get_k(&mut h);
    assert_eq!(h.hits, hits + 1, "k is found on flash again");
    assert_eq!(h.cache.stats().flash_hits, 2);
}
