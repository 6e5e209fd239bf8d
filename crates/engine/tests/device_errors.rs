//! Device errors in virtual time: the real volume on the simulated reactor,
//! whose machine fails chosen devices' reads, writes and syncs with EIO
//! (`reactor/faults.rs`; a failed write may or may not have reached the
//! device). Randomized whole-block requests (stamped, as in the power-cut
//! test) run with clean restarts, and every reply is checked:
//! - a read never returns data that was not written to its block;
//! - a read returns exactly the last acknowledged write, unless a write to
//!   that block failed or a trim covered it since (then any earlier version
//!   of the block);
//! - where the data is still on a working device, nothing fails: with
//!   errors only on the cache devices of a write-through or write-around
//!   cache, every read and write succeeds;
//! - a cache device that dies is taken out of service: write-through and
//!   write-around lose nothing and fail no read or write; write-back keeps
//!   serving every block whose newest data is elsewhere, and the blocks
//!   whose newest data was only on the dead device are reported at risk.

use crate::common;

use common::{config, data_dir, stamp, version_of, Harness, BS, MODES, VOL_BYTES};
use tiermux_core::rng::Rng;
use tiermux_engine::buf::AlignedBuf;
use tiermux_engine::reactor::faults::FaultSpec;
use tiermux_engine::reactor::power::Machine;
use tiermux_engine::{Request, VolumeConfig};

const BLOCKS: usize = VOL_BYTES / BS;

/// What the test knows about each block.
struct Model {
    issued: Vec<u32>,
    acked: Vec<u32>,
    /// A write to the block failed since its last acknowledged one.
    uncertain: Vec<bool>,
}

/// What each request in flight was.
enum Sent {
    Read {
        first: usize,
        n: usize,
    },
    Write {
        first: usize,
        versions: Vec<u32>,
        fua: bool,
    },
    /// A discard: the blocks then read as some earlier version.
    Trim {
        first: usize,
        n: usize,
    },
    Flush,
}

/// Which failures a run tolerates.
#[derive(Clone, Copy)]
struct Expect {
    /// Reads never fail.
    reads_spared: bool,
    /// Writes never fail...
    writes_spared: bool,
    /// ...except FUA writes, whose sync reports blocks at risk.
    fua_at_risk: bool,
}

impl Expect {
    /// Reads and writes may fail.
    const ANY: Expect = Expect {
        reads_spared: false,
        writes_spared: false,
        fua_at_risk: true,
    };

    /// No read or write fails when `spared`.
    fn spared(spared: bool) -> Expect {
        Expect {
            reads_spared: spared,
            writes_spared: spared,
            fua_at_risk: false,
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    reads_checked: u64,
    failed_reads: u64,
    failed_writes: u64,
    failed_flushes: u64,
    /// Vectored operations over several blocks that failed and were
    /// retried block by block.
    merged_retries: u64,
}

struct Run<'a> {
    tag: &'a str,
    policy: &'a str,
    extra: &'a str,
    seed: u64,
    cfg: VolumeConfig,
    machine: Machine,
    m: Model,
    rng: Rng,
    counts: Counts,
}

impl<'a> Run<'a> {
    fn new(tag: &'a str, policy: &'a str, extra: &'a str, seed: u64) -> Run<'a> {
        let dir = data_dir(tag, true);
        let mut cfg = config(&dir, policy, extra);
        // Runs with odd seeds discard freed space on every device (a
        // failing device fails its discards too).
        for d in &mut cfg.devices {
            d.discard = seed % 2 == 1;
        }
        Run {
            tag,
            policy,
            extra,
            seed,
            cfg,
            machine: Machine::new(),
            m: Model {
                issued: vec![0; BLOCKS],
                acked: vec![0; BLOCKS],
                uncertain: vec![false; BLOCKS],
            },
            rng: Rng::new(seed),
            counts: Counts::default(),
        }
    }

    fn what(&self, msg: &str) -> String {
        format!("{} {} (seed {}): {msg}", self.policy, self.extra, self.seed)
    }

    fn open(&self, boot: u64) -> Harness {
        Harness::open_on(&self.cfg, self.seed ^ boot, &self.machine)
    }

    /// Makes every device whose file name is in `files` fail as `spec`.
    fn inject(&self, files: &[&str], spec: FaultSpec) {
        for f in files {
            let path = self.cfg.metadata_dir.parent().unwrap().join(f);
            if path.exists() {
                self.machine.inject_faults(&path, spec).unwrap();
            }
        }
    }

    /// Runs `ops` random requests (up to 32 in flight, on disjoint blocks).
    fn requests(&mut self, h: &mut Harness, ops: usize, expect: Expect) {
        let mut inflight: Vec<(u64, Sent)> = Vec::new();
        let mut next_id = 1u64;
        let mut issued = 0;
        let retries_before = h.vol().stats().merged_retries;
        while issued < ops || !inflight.is_empty() {
            while issued < ops && inflight.len() < 32 {
                let Some((req, sent)) = self.random_request(&inflight) else {
                    break;
                };
                h.submit(next_id, req);
                inflight.push((next_id, sent));
                next_id += 1;
                issued += 1;
            }
            h.step();
            for d in std::mem::take(&mut h.client.done) {
                let pos = inflight.iter().position(|f| f.0 == d.id).unwrap();
                let (_, sent) = inflight.swap_remove(pos);
                self.check(&sent, d, expect);
            }
        }
        self.counts.merged_retries += h.vol().stats().merged_retries - retries_before;
    }

    fn random_request(&mut self, inflight: &[(u64, Sent)]) -> Option<(Request, Sent)> {
        let rng = &mut self.rng;
        if rng.below(40) == 0 {
            return Some((Request::Flush, Sent::Flush));
        }
        let region = if rng.below(4) == 0 {
            BLOCKS
        } else {
            BLOCKS / 8
        };
        let n = 1 + rng.below(3) as usize;
        let first = rng.below((region - n) as u64) as usize;
        let busy = inflight.iter().any(|(_, s)| match s {
            Sent::Read { first: f, n: k } | Sent::Trim { first: f, n: k } => {
                first < f + k && *f < first + n
            }
            Sent::Write {
                first: f, versions, ..
            } => first < f + versions.len() && *f < first + n,
            Sent::Flush => false,
        });
        if busy {
            return None;
        }
        let offset = (first * BS) as u64;
        if rng.below(30) == 0 {
            let len = (n * BS) as u32;
            return Some((Request::Trim { offset, len }, Sent::Trim { first, n }));
        }
        if rng.below(2) == 0 {
            let mut data = Vec::with_capacity(n * BS);
            let mut versions = Vec::new();
            for b in first..first + n {
                self.m.issued[b] += 1;
                versions.push(self.m.issued[b]);
                data.extend_from_slice(&stamp(b, self.m.issued[b]));
            }
            let fua = rng.below(20) == 0;
            return Some((
                Request::Write {
                    offset,
                    data: AlignedBuf::from_slice(&data),
                    fua,
                },
                Sent::Write {
                    first,
                    versions,
                    fua,
                },
            ));
        }
        let len = (n * BS) as u32;
        Some((Request::Read { offset, len }, Sent::Read { first, n }))
    }

    fn check(&mut self, sent: &Sent, d: tiermux_engine::Done, expect: Expect) {
        match sent {
            Sent::Flush => self.counts.failed_flushes += u64::from(d.error != 0),
            Sent::Trim { first, n } => {
                assert_eq!(d.error, 0, "{}", self.what("a trim failed"));
                for b in *first..first + n {
                    self.m.uncertain[b] = true;
                }
            }
            Sent::Write {
                first,
                versions,
                fua,
            } => {
                for (i, &v) in versions.iter().enumerate() {
                    if d.error == 0 {
                        self.m.acked[first + i] = v;
                        self.m.uncertain[first + i] = false;
                    } else {
                        self.m.uncertain[first + i] = true;
                    }
                }
                if d.error != 0 {
                    self.counts.failed_writes += 1;
                    let excused = *fua && expect.fua_at_risk;
                    assert!(
                        !expect.writes_spared || excused,
                        "{}",
                        self.what("a write failed")
                    );
                }
            }
            Sent::Read { first, n } => {
                if d.error != 0 {
                    self.counts.failed_reads += 1;
                    assert!(!expect.reads_spared, "{}", self.what("a read failed"));
                    return;
                }
                let data = d.data.as_ref().expect("read data");
                for b in *first..first + n {
                    let at = d.data_offset + (b - first) * BS;
                    let v = version_of(b, &data[at..at + BS])
                        .unwrap_or_else(|e| panic!("{}", self.what(&format!("block {b} {e}"))));
                    let ok = if self.m.uncertain[b] {
                        v <= self.m.issued[b]
                    } else {
                        v == self.m.acked[b]
                    };
                    assert!(
                        ok,
                        "{}",
                        self.what(&format!(
                            "block {b} read version {v}: acknowledged {}, issued {}, uncertain {}",
                            self.m.acked[b], self.m.issued[b], self.m.uncertain[b]
                        ))
                    );
                    if self.m.uncertain[b] {
                        // What it reads now is what it holds.
                        self.m.acked[b] = v;
                        self.m.uncertain[b] = false;
                    }
                    self.counts.reads_checked += 1;
                }
            }
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.cfg.metadata_dir.parent().unwrap());
        let _ = self.tag;
    }
}

fn is_write_through_or_around(extra: &str) -> bool {
    extra.contains("\"wt\"") || extra.contains("\"wa\"")
}

/// The devices that only hold copies (caches), by file name.
fn cache_files(policy: &str) -> &'static [&'static str] {
    match policy {
        "classic" | "nhc" => &["fast.img"],
        "stacked" => &["fast.img", "middle.img"],
        _ => &[],
    }
}

/// Every mode runs with random read and write errors on its fast devices,
/// then on its home device, with clean restarts between phases.
#[test]
fn random_device_errors_never_return_foreign_data_and_spare_what_home_holds() {
    let flaky = FaultSpec {
        read_error_rate: 0.02,
        write_error_rate: 0.02,
        ..FaultSpec::default()
    };
    let mut total = Counts::default();
    for (i, (policy, extra)) in MODES.iter().enumerate() {
        let tag = format!("eio{i}");
        let mut run = Run::new(&tag, policy, extra, 7000 + i as u64);
        let mut h = run.open(0);
        run.requests(&mut h, 2000, Expect::ANY);
        // Errors on the fast devices: a cache in front of home that does
        // not hold dirty data fails no request.
        let fast: &[&str] = if cache_files(policy).is_empty() {
            &["fast.img"]
        } else {
            cache_files(policy)
        };
        run.inject(fast, flaky);
        let spared = is_write_through_or_around(extra) && !cache_files(policy).is_empty();
        for boot in 1..=3 {
            run.requests(&mut h, 3000, Expect::spared(spared));
            h.close();
            h = run.open(boot);
        }
        // A failed sync gives a cache device up at once (`volume/health.rs`);
        // a FUA write whose sync failed gets an error, reads still do not.
        let syncs_too = FaultSpec {
            sync_error_rate: 0.05,
            ..flaky
        };
        run.inject(fast, syncs_too);
        let reads_spared = Expect {
            reads_spared: spared,
            ..Expect::ANY
        };
        run.requests(&mut h, 3000, reads_spared);
        run.inject(fast, FaultSpec::default());
        // Errors on the home device: they reach the clients, never as
        // wrong data.
        run.inject(&["slow.img"], syncs_too);
        run.requests(&mut h, 4000, Expect::ANY);
        run.inject(&["slow.img"], FaultSpec::default());
        run.requests(&mut h, 2000, Expect::ANY);
        h.close();
        let c = &run.counts;
        assert!(c.reads_checked > 5000, "{policy} {extra}: {c:?}");
        assert!(
            c.failed_reads + c.failed_writes > 0,
            "{policy} {extra}: no error reached a client: {c:?}"
        );
        total.reads_checked += c.reads_checked;
        total.failed_reads += c.failed_reads;
        total.failed_writes += c.failed_writes;
        total.failed_flushes += c.failed_flushes;
        total.merged_retries += c.merged_retries;
    }
    println!("device errors: {total:?}");
    // Failed operations over several blocks were retried block by block
    // (and the checks above held for their blocks).
    assert!(total.merged_retries > 100, "{total:?}");
}

/// A cache device dies mid-run and is taken out of service, and again at
/// a restart while it stays dead.
#[test]
fn a_dead_cache_device_is_taken_out_of_service() {
    let modes: &[(&str, &str)] = &[
        ("classic", "write_mode = \"wa\""),
        ("classic", "write_mode = \"wt\""),
        ("stacked", "write_mode = \"wt\""),
        ("classic", "write_mode = \"wb\""),
        (
            "nhc",
            "write_mode = \"wb\"\nwindow_ms = 1.0\nmin_window_ops = 8",
        ),
    ];
    for (i, (policy, extra)) in modes.iter().enumerate() {
        let tag = format!("dead{i}");
        let mut run = Run::new(&tag, policy, extra, 9100 + i as u64);
        let mut h = run.open(0);
        run.requests(&mut h, 3000, Expect::spared(true));
        let dirty_before = h.vol().at_risk_blocks(0);
        run.inject(&["fast.img"], FaultSpec::dead());
        let safe = is_write_through_or_around(extra);
        run.requests(&mut h, 3000, Expect::spared(safe));
        let stats = h.vol().stats();
        assert_eq!(stats.out_of_service & 1, 1, "{policy} {extra}: {stats:?}");
        if safe {
            assert_eq!(dirty_before, 0);
        } else {
            assert!(
                dirty_before > 0,
                "{policy} {extra}: the test dirtied no block"
            );
            // Blocks dirty on the dead device stay at risk until
            // overwritten; everything else is served.
            assert!(h.vol().at_risk_blocks(0) <= dirty_before);
            assert!(
                run.counts.failed_reads > 0,
                "{policy} {extra}: {:?}",
                run.counts
            );
        }
        // The dead device is not synced: flushes succeed unless blocks
        // are at risk.
        h.submit(u64::MAX, Request::Flush);
        h.idle();
        let flush = h.client.done.pop().expect("the flush's reply");
        assert_eq!(
            flush.error != 0,
            h.vol().at_risk_blocks(0) > 0,
            "{policy} {extra}: flush error {}",
            flush.error
        );
        // A restart with the device still dead: its sync at open fails, it
        // is taken out of service again, and the volume serves as before.
        let at_risk = h.vol().at_risk_blocks(0);
        h.close();
        let mut h = run.open(1);
        assert_eq!(h.vol().stats().out_of_service & 1, 1, "{policy} {extra}");
        assert_eq!(h.vol().at_risk_blocks(0), at_risk, "{policy} {extra}");
        run.requests(&mut h, 2000, Expect::spared(safe));
        h.close();
    }
}

/// TICA keeps every dirty page on two devices, so any one of its cache
/// devices can die without loss: no read fails (a copy that cannot be
/// read is dropped and the read retried on another), once the volume has
/// given the device up no write fails either, no block is at risk,
/// flushes succeed, and the same holds after a restart with the device
/// still dead. (Writes that met the device before it was given up may
/// fail; the checker still requires every read to return the last
/// acknowledged write.)
#[test]
fn tica_loses_nothing_when_any_cache_device_dies() {
    for (i, device) in [0u8, 1, 2].into_iter().enumerate() {
        let counts = tica_device_dies("tica-wed", device, 9300 + i as u64, 3000, 3000);
        println!("{} dead: {counts:?}", TICA_FILES[device as usize]);
    }
}

/// The same at 108 failure points: each TICA policy, each cache device, at
/// twelve seeded moments of a run (after 100 to 1,200 requests).
#[test]
fn tica_loses_nothing_at_108_failure_points() {
    let mut points = 0;
    for policy in ["tica-ef", "tica-wed", "tica-a"] {
        for device in 0..3u8 {
            for k in 0..12u64 {
                let seed = 9400 + 100 * u64::from(device) + k;
                let before = 100 + Rng::new(seed).below(1100) as usize;
                tica_device_dies(policy, device, seed, before, 400);
                points += 1;
            }
        }
    }
    assert_eq!(points, 108);
}

const TICA_FILES: [&str; 3] = ["fast.img", "ro.img", "wo.img"];

/// A TICA volume under `policy` serves `before` checked requests, then
/// cache device `device` dies: the checks of
/// [`tica_loses_nothing_when_any_cache_device_dies`], with `after`
/// requests once the device is given up.
fn tica_device_dies(policy: &str, device: u8, seed: u64, before: usize, after: usize) -> Counts {
    let file = TICA_FILES[device as usize];
    let tag = format!("{policy}-dead{device}-{seed}");
    let extra = if policy == "tica-a" {
        "smbi_steps = 1"
    } else {
        ""
    };
    let mut run = Run::new(&tag, policy, extra, seed);
    let mut h = run.open(0);
    run.requests(&mut h, before, Expect::spared(true));
    run.inject(&[file], FaultSpec::dead());
    let reads_spared = Expect {
        reads_spared: true,
        ..Expect::ANY
    };
    run.requests(&mut h, 500, reads_spared);
    let out = h.vol().stats().out_of_service;
    assert_eq!(out, 1 << device, "{tag}: out of service {out:#b}");
    run.requests(&mut h, after, Expect::spared(true));
    h.idle();
    assert_eq!(h.vol().at_risk_blocks(device), 0, "{tag}");
    h.submit(u64::MAX, Request::Flush);
    h.idle();
    let flush = h.client.done.pop().expect("the flush's reply");
    assert_eq!(flush.error, 0, "{tag}: flush failed");
    h.close();
    let mut h = run.open(1);
    assert_eq!(h.vol().stats().out_of_service, 1 << device, "{tag}");
    run.requests(&mut h, after.min(2000), Expect::spared(true));
    h.close();
    std::mem::take(&mut run.counts)
}

/// Hibachi's DRAM holds clean pages only: when it dies, no read fails and,
/// once it is given up, no write either. Its NVRAM holds the only copy of
/// dirty pages: when it dies, those (and only those) are at risk, their
/// reads fail until they are written again, writes then go home and
/// succeed, and flushes report the risk. Both hold after a restart with
/// the device still dead.
#[test]
fn hibachi_loses_only_nvram_dirty_data_when_a_cache_device_dies() {
    for (i, (file, device)) in [("fast.img", 0u8), ("middle.img", 1)]
        .into_iter()
        .enumerate()
    {
        let tag = format!("hibachi-dead{i}");
        let mut run = Run::new(&tag, "hibachi", "run_threshold = 2", 9500 + i as u64);
        let mut h = run.open(0);
        run.requests(&mut h, 3000, Expect::spared(true));
        h.idle();
        let dirty_before = h.vol().at_risk_blocks(1);
        assert!(dirty_before > 0, "{file}: no dirty page in NVRAM");
        run.inject(&[file], FaultSpec::dead());
        let dram = device == 0;
        let before_given_up = Expect {
            reads_spared: dram,
            ..Expect::ANY
        };
        run.requests(&mut h, 500, before_given_up);
        let out = h.vol().stats().out_of_service;
        assert_eq!(out, 1 << device, "{file}: out of service {out:#b}");
        // Writes go home; a FUA write's sync reports the blocks at risk.
        let given_up = Expect {
            reads_spared: dram,
            writes_spared: true,
            fua_at_risk: !dram,
        };
        run.requests(&mut h, 3000, given_up);
        h.idle();
        let at_risk = h.vol().at_risk_blocks(device);
        if dram {
            assert_eq!(at_risk, 0, "{file}");
        } else {
            assert!(at_risk > 0 && at_risk <= dirty_before, "{file}: {at_risk}");
            assert!(run.counts.failed_reads > 0, "{file}: {:?}", run.counts);
        }
        h.submit(u64::MAX, Request::Flush);
        h.idle();
        let flush = h.client.done.pop().expect("the flush's reply");
        assert_eq!(
            flush.error != 0,
            at_risk > 0,
            "{file}: flush {}",
            flush.error
        );
        h.close();
        let mut h = run.open(1);
        assert_eq!(h.vol().stats().out_of_service, 1 << device, "{file}");
        // Pages at risk are flushed once more at open (and fail again).
        h.idle();
        assert_eq!(h.vol().at_risk_blocks(device), at_risk, "{file}");
        run.requests(&mut h, 2000, given_up);
        h.close();
        println!("{file} dead: {:?}", run.counts);
    }
}
