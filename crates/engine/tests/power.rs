//! Power cuts in virtual time: the real volume on the simulated reactor,
//! whose machine keeps every write not yet synced apart and, at a power
//! cut, loses, keeps or tears each one independently and out of order
//! (`reactor/power.rs`), journal included. Between power cuts the run also
//! crashes the process (the kernel keeps what it was handed) and restarts
//! cleanly.
//!
//! Every block write is whole blocks stamped with the block's number and a
//! version, so a read tells exactly which write it returns. After each
//! restart every block written so far is read and checked:
//! - a write acknowledged before a completed FLUSH, or with FUA, reads back
//!   (or a later write to its block does);
//! - after a crash, every acknowledged write reads back (or a write to its
//!   block that was in flight);
//! - no block ever returns data that was not written to it: a stamp of
//!   another block or an unknown version, or a block that is neither a
//!   stamp nor zeros;
//! - recovery never refuses the volume a power cut left behind.
//!
//! Every device discards the space the volume stops using; a simulated
//! discard fills its range with bytes no write stamps, so a discard of a
//! place still in use shows up as a foreign block.

use crate::common;

use common::{
    config_with_slow, data_dir, seed_base, stamp, version_of, Harness, BS, MODES, VOL_BYTES,
};
use tiermux_core::rng::Rng;
use tiermux_engine::buf::AlignedBuf;
use tiermux_engine::reactor::power::Machine;
use tiermux_engine::Request;

const BLOCKS: usize = VOL_BYTES / BS;
/// What the test knows about each block.
struct Model {
    /// Versions issued so far (the latest issued).
    issued: Vec<u32>,
    /// The latest acknowledged version.
    acked: Vec<u32>,
    /// The latest version made durable (acknowledged before a completed
    /// flush, or with FUA).
    durable: Vec<u32>,
}

struct InFlight {
    id: u64,
    kind: Kind,
    first: usize,
    versions: Vec<u32>,
}

enum Kind {
    Read,
    Write {
        fua: bool,
    },
    /// A flush, with the acknowledged versions it covers.
    Flush(Vec<u32>),
}

struct Run {
    seed: u64,
    policy: &'static str,
    extra: &'static str,
    /// Lines added to the slow (home) device's table.
    slow: &'static str,
    ops: usize,
}

#[derive(Debug, Default)]
struct Counts {
    power_cuts: u64,
    crashes: u64,
    blocks_checked: u64,
    live_reads: u64,
    discarded_blocks: u64,
}

/// One randomized run of `run.ops` requests with restarts.
fn power_run(tag: &str, run: &Run) -> Counts {
    let dir = data_dir(tag, true);
    let mut cfg = config_with_slow(&dir, run.policy, run.extra, run.slow);
    for d in &mut cfg.devices {
        d.discard = true;
    }
    let machine = Machine::new();
    let mut rng = Rng::new(run.seed);
    let mut m = Model {
        issued: vec![0; BLOCKS],
        acked: vec![0; BLOCKS],
        durable: vec![0; BLOCKS],
    };
    let mut counts = Counts::default();
    let mut boots = 0u64;
    let mut h = Harness::open_on(&cfg, run.seed ^ 0x5eed, &machine);
    let mut inflight: Vec<InFlight> = Vec::new();
    let mut next_id = 1;
    let mut issued = 0;
    let what = |m: &str| format!("{} {} (seed {}): {m}", run.policy, run.extra, run.seed);
    while issued < run.ops {
        while issued < run.ops && inflight.len() < 32 {
            let Some(f) = random_request(&mut rng, &mut m, &inflight, &mut next_id) else {
                break;
            };
            h.submit(f.0, f.1);
            inflight.push(f.2);
            issued += 1;
        }
        h.step();
        settle(&mut h, &mut inflight, &mut m, &mut counts, &what);
        if rng.below(40) != 0 {
            continue;
        }
        let kind = rng.below(4);
        counts.discarded_blocks += h.vol().stats().discarded_blocks;
        if kind == 3 {
            while !inflight.is_empty() {
                h.step();
                settle(&mut h, &mut inflight, &mut m, &mut counts, &what);
            }
            h.close();
        } else {
            // Requests not yet handed to the volume were never sent; reads
            // and flushes in flight are forgotten, writes may have happened.
            h.client.to_submit.clear();
            inflight.retain(|f| matches!(f.kind, Kind::Write { .. }));
            if kind == 2 {
                h.rt.crash();
                counts.crashes += 1;
            } else {
                h.rt.power_cut();
                counts.power_cuts += 1;
            }
        }
        boots += 1;
        let crash_writes = std::mem::take(&mut inflight);
        h = Harness::open_on(&cfg, run.seed ^ boots.wrapping_mul(0x9E37_79B9), &machine);
        check_all(&mut h, &mut m, kind >= 2, &crash_writes, &mut counts, &what);
    }
    counts.discarded_blocks += h.vol().stats().discarded_blocks;
    h.close();
    std::fs::remove_dir_all(&dir).ok();
    counts
}

/// A random request whose blocks no request in flight touches: a read or
/// write of 1 to 3 whole blocks (mostly in the hot eighth), or a flush.
fn random_request(
    rng: &mut Rng,
    m: &mut Model,
    inflight: &[InFlight],
    next_id: &mut u64,
) -> Option<(u64, Request, InFlight)> {
    let id = *next_id;
    if rng.below(40) == 0 {
        *next_id += 1;
        let f = InFlight {
            id,
            kind: Kind::Flush(m.acked.clone()),
            first: 0,
            versions: Vec::new(),
        };
        return Some((id, Request::Flush, f));
    }
    let region = if rng.below(4) == 0 {
        BLOCKS
    } else {
        BLOCKS / 8
    };
    let n = 1 + rng.below(3) as usize;
    let first = rng.below((region - n) as u64) as usize;
    let overlaps = inflight.iter().any(|f| {
        let k = f.versions.len();
        k > 0 && first < f.first + k && f.first < first + n
    });
    if overlaps {
        return None;
    }
    *next_id += 1;
    let offset = (first * BS) as u64;
    if rng.below(10) < 5 {
        let fua = rng.below(20) == 0;
        let mut data = Vec::with_capacity(n * BS);
        let mut versions = Vec::new();
        for b in first..first + n {
            m.issued[b] += 1;
            versions.push(m.issued[b]);
            data.extend_from_slice(&stamp(b, m.issued[b]));
        }
        let req = Request::Write {
            offset,
            data: AlignedBuf::from_slice(&data),
            fua,
        };
        let kind = Kind::Write { fua };
        return Some((
            id,
            req,
            InFlight {
                id,
                kind,
                first,
                versions,
            },
        ));
    }
    let req = Request::Read {
        offset,
        len: (n * BS) as u32,
    };
    let versions = vec![0; n];
    Some((
        id,
        req,
        InFlight {
            id,
            kind: Kind::Read,
            first,
            versions,
        },
    ))
}

/// Applies finished requests to the model; live reads must return the
/// latest acknowledged version exactly.
fn settle(
    h: &mut Harness,
    inflight: &mut Vec<InFlight>,
    m: &mut Model,
    counts: &mut Counts,
    what: &dyn Fn(&str) -> String,
) {
    for d in std::mem::take(&mut h.client.done) {
        assert_eq!(d.error, 0, "{}", what(&format!("request {} failed", d.id)));
        let pos = inflight
            .iter()
            .position(|f| f.id == d.id)
            .expect("known request");
        let f = inflight.swap_remove(pos);
        match f.kind {
            Kind::Flush(covered) => {
                for (dur, c) in m.durable.iter_mut().zip(covered) {
                    *dur = (*dur).max(c);
                }
            }
            Kind::Write { fua } => {
                for (i, &v) in f.versions.iter().enumerate() {
                    m.acked[f.first + i] = v;
                    if fua {
                        m.durable[f.first + i] = v;
                    }
                }
            }
            Kind::Read => {
                let data = d.data.as_ref().expect("read data");
                for i in 0..f.versions.len() {
                    let b = f.first + i;
                    let bytes = &data[d.data_offset + i * BS..d.data_offset + (i + 1) * BS];
                    let got = version_of(b, bytes)
                        .unwrap_or_else(|e| panic!("{}", what(&format!("block {b} {e}"))));
                    assert_eq!(
                        got,
                        m.acked[b],
                        "{}",
                        what(&format!("block {b}: live read"))
                    );
                    counts.live_reads += 1;
                }
            }
        }
    }
}

/// After a restart: reads every block ever written and checks it; the
/// version read becomes the block's acknowledged and durable one.
fn check_all(
    h: &mut Harness,
    m: &mut Model,
    same_boot: bool,
    crash_writes: &[InFlight],
    counts: &mut Counts,
    what: &dyn Fn(&str) -> String,
) {
    let in_flight_version = |b: usize| {
        crash_writes
            .iter()
            .find(|f| b >= f.first && b < f.first + f.versions.len())
            .map(|f| f.versions[b - f.first])
    };
    let blocks: Vec<usize> = (0..BLOCKS).filter(|&b| m.issued[b] > 0).collect();
    for chunk in blocks.chunks(64) {
        for (i, &b) in chunk.iter().enumerate() {
            let req = Request::Read {
                offset: (b * BS) as u64,
                len: BS as u32,
            };
            h.submit(i as u64, req);
        }
        h.idle();
        for d in std::mem::take(&mut h.client.done) {
            let b = chunk[d.id as usize];
            assert_eq!(d.error, 0, "{}", what(&format!("reading block {b} failed")));
            let data = d.data.as_ref().expect("read data");
            let bytes = &data[d.data_offset..d.data_offset + BS];
            let v = version_of(b, bytes)
                .unwrap_or_else(|e| panic!("{}", what(&format!("after a restart, block {b} {e}"))));
            let ok = if same_boot {
                v == m.acked[b] || Some(v) == in_flight_version(b)
            } else {
                v >= m.durable[b] && v <= m.issued[b]
            };
            assert!(
                ok,
                "{}",
                what(&format!(
                    "after a {}, block {b} holds version {v}: acknowledged {}, durable {}, issued {}",
                    if same_boot { "crash" } else { "power cut" },
                    m.acked[b],
                    m.durable[b],
                    m.issued[b]
                ))
            );
            m.acked[b] = v;
            m.durable[b] = v;
            counts.blocks_checked += 1;
        }
    }
}

/// At least 2,000 power cuts over every mode, each followed by recovery
/// and a check of every block written. `TIERMUX_POWER_SCALE=N` runs N times
/// as many requests (and about N times as many power cuts): 42 gives more
/// than 100,000. The modes are independent runs, spread over the machine's
/// cores. `TIERMUX_TEST_SEED=N` moves every seed by N.
#[test]
fn flushed_writes_survive_power_cuts_and_no_block_returns_foreign_data() {
    let scale: usize = std::env::var("TIERMUX_POWER_SCALE")
        .ok()
        .map(|s| s.parse().expect("TIERMUX_POWER_SCALE is a whole number"))
        .unwrap_or(1);
    let t0 = std::time::Instant::now();
    let modes: Vec<usize> = (0..MODES.len())
        .filter(|i| std::env::var("POWER_ONLY").map_or(true, |v| v == i.to_string()))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let each: Vec<Counts> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(modes.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = modes.get(k) else { break done };
                        done.push(mode_run(i, scale));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(each.len(), modes.len());
    let mut total = Counts::default();
    for c in &each {
        total.power_cuts += c.power_cuts;
        total.crashes += c.crashes;
        total.blocks_checked += c.blocks_checked;
        total.discarded_blocks += c.discarded_blocks;
    }
    println!(
        "{} power cuts and {} crashes in virtual time, {} blocks checked after them, {} blocks discarded, {:.1} s",
        total.power_cuts,
        total.crashes,
        total.blocks_checked,
        total.discarded_blocks,
        t0.elapsed().as_secs_f64()
    );
    if modes.len() == MODES.len() {
        assert!(total.power_cuts >= 2000 * scale as u64, "{total:?}");
    }
}

/// The run of mode `i` of `MODES`, checked for its reads.
fn mode_run(i: usize, scale: usize) -> Counts {
    let (policy, extra) = MODES[i];
    let c = power_run(
        &format!("power{i}"),
        &Run {
            seed: seed_base() + 3000 + i as u64,
            policy,
            extra,
            slow: "",
            ops: 25_000 * scale,
        },
    );
    // About half of the 25,000 requests read; those in flight at a
    // power cut or crash are forgotten.
    assert!(
        c.live_reads > 8_000 && c.blocks_checked > 10_000,
        "{policy}: {c:?}"
    );
    println!(
        "{policy} {extra:?}: {} power cuts, {} blocks discarded",
        c.power_cuts, c.discarded_blocks
    );
    c
}

/// Power cuts and crashes on volumes whose home device emulates the
/// Hibachi paper's RAID-5: its member disks' queues hold operations until
/// their last disk operation starts and let them go as the array wakes,
/// so a cut finds operations held, released and in service. Every block
/// written reads back as its last acknowledged version or a later one.
#[test]
fn power_cuts_on_an_emulated_array_keep_acknowledged_writes() {
    let policies = [
        ("hibachi", "run_threshold = 2"),
        ("hybrid-lru", ""),
        ("classic", "write_mode = \"wb\""),
    ];
    for (i, &(policy, extra)) in policies.iter().enumerate() {
        let c = power_run(
            &format!("power-array{i}"),
            &Run {
                seed: seed_base() + 7000 + i as u64,
                policy,
                extra,
                slow: "array = \"raid5-hibachi\"",
                ops: 8_000,
            },
        );
        println!(
            "{policy} on the array: {} power cuts, {} crashes, {} blocks checked",
            c.power_cuts, c.crashes, c.blocks_checked
        );
        assert!(
            c.power_cuts >= 30 && c.live_reads > 1_500 && c.blocks_checked > 3_000,
            "{policy}: {c:?}"
        );
    }
}
