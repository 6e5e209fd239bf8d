//! The volume in-process: randomized reads and writes (aligned and not, up
//! to 32 in flight) against a byte model, with clean restarts and crashes,
//! for every policy family and write mode the engine serves, on real
//! reactors in wall-clock time and on the simulated reactor in virtual time.
//!
//! A crash ends the event loop as a killed process would
//! ([`Runtime::crash`]): the thread-pool reactor's workers finish the
//! operation they are running, the simulated reactor decides by a seeded
//! coin flip which operations in flight happened; operations not yet
//! started never happen, and journal records not committed are lost. Every
//! acknowledged write must then read back exactly; bytes of writes in
//! flight at the crash may hold old or new data and are not checked until
//! written again.

use crate::common;

use common::{
    check_reads_after_trim, config, config_with_slow, data_dir, seed_base, stamp, version_of,
    Backend, Harness, BS, MODES, VOL_BYTES,
};
use tiermux_core::rng::Rng;
use tiermux_engine::buf::AlignedBuf;
use tiermux_engine::Request;

struct InFlight {
    id: u64,
    write: bool,
    offset: usize,
    data: Vec<u8>,
}

/// One randomized run.
struct Spec<'a> {
    tag: &'a str,
    policy: &'a str,
    extra: &'a str,
    /// Lines added to the slow device's table.
    slow: &'a str,
    seed: u64,
    /// Requests to issue.
    ops: usize,
    /// Restart about once every this many loop iterations.
    restart_every: u64,
    /// Whether a restart is a crash half of the time (else always clean).
    crash: bool,
    /// Devices in memory (tmpfs) rather than on disk.
    memory: bool,
    backend: Backend,
}

/// What a run checked, and what it leaves behind to compare runs.
#[derive(Debug, PartialEq)]
struct Outcome {
    reads: u64,
    bytes: u64,
    crashes: u64,
    /// Device operations that carried several consecutive blocks.
    merged_ops: u64,
    /// Bytes read and written per device, and requests (for determinism).
    fingerprint: Vec<u64>,
}

/// Runs `spec`: random requests with restarts (crashes when asked),
/// checking every read against the model.
fn run(spec: &Spec<'_>) -> Outcome {
    let dir = data_dir(spec.tag, spec.memory);
    let cfg = config_with_slow(&dir, spec.policy, spec.extra, spec.slow);
    let mut rng = Rng::new(spec.seed);
    let mut model: Vec<Option<u8>> = vec![Some(0); VOL_BYTES];
    let reopen_backend = |n: u64| match spec.backend {
        Backend::Sim(seed) => Backend::Sim(seed ^ n.wrapping_mul(0x9E37_79B9)),
        b if spec.crash => {
            let _ = b;
            Backend::Threads
        }
        b => b,
    };
    let mut restarts = 0;
    let mut h = Harness::open(&cfg, reopen_backend(restarts));
    let mut inflight: Vec<InFlight> = Vec::new();
    let mut next_id = 1u64;
    let mut out = Outcome {
        reads: 0,
        bytes: 0,
        crashes: 0,
        merged_ops: 0,
        fingerprint: Vec::new(),
    };
    let mut fingerprint = vec![0u64; FINGERPRINT_LEN];
    let hot = VOL_BYTES / 8;
    let mut issued = 0;
    while issued < spec.ops || !inflight.is_empty() {
        while issued < spec.ops && inflight.len() < 32 {
            let Some(f) = random_request(&mut rng, &inflight, hot, &mut next_id) else {
                break;
            };
            h.submit(f.0, f.1);
            inflight.push(f.2);
            issued += 1;
            if rng.below(200) == 0 {
                h.submit(next_id, Request::Flush);
                next_id += 1;
            }
        }
        h.step();
        settle(&mut h, &mut inflight, &mut model, spec, &mut out);
        if rng.below(spec.restart_every) != 0 {
            continue;
        }
        note(&h, &mut fingerprint);
        out.merged_ops += h.vol().stats().merged_ops;
        if spec.crash && rng.below(2) == 0 {
            // Requests not yet handed to the volume were never sent.
            h.client.to_submit.clear();
            h.rt.crash();
            out.crashes += 1;
            for f in inflight.drain(..) {
                if f.write {
                    model[f.offset..f.offset + f.data.len()].fill(None);
                }
            }
        } else {
            while !inflight.is_empty() {
                h.step();
                settle(&mut h, &mut inflight, &mut model, spec, &mut out);
            }
            h.close();
        }
        restarts += 1;
        h = Harness::open(&cfg, reopen_backend(restarts));
        assert!(!h.vol().recovery().fresh);
    }
    h.idle();
    let st = h.vol().stats();
    assert_eq!(st.contract_violations, 0);
    assert_eq!(st.device_errors, 0);
    out.merged_ops += st.merged_ops;
    note(&h, &mut fingerprint);
    h.close();
    std::fs::remove_dir_all(&dir).ok();
    out.fingerprint = fingerprint;
    out
}

/// A random read or write of up to three blocks (aligned or not, mostly in
/// the hot eighth) whose blocks no request in flight touches; `None` when
/// the one drawn would overlap.
fn random_request(
    rng: &mut Rng,
    inflight: &[InFlight],
    hot: usize,
    next_id: &mut u64,
) -> Option<(u64, Request, InFlight)> {
    let region = if rng.below(4) == 0 { VOL_BYTES } else { hot };
    let aligned = rng.below(3) != 0;
    let len = if aligned {
        BS * (1 + rng.below(3) as usize)
    } else {
        1 + rng.below(3 * BS as u64) as usize
    };
    let mut offset = rng.below((region - len) as u64) as usize;
    if aligned {
        offset -= offset % BS;
    }
    // Whole blocks touched must not be in flight (read-modify-write makes
    // block-level conflicts real conflicts).
    let (b0, b1) = (offset / BS, (offset + len - 1) / BS);
    if inflight.iter().any(|f| {
        let (c0, c1) = (f.offset / BS, (f.offset + f.data.len().max(1) - 1) / BS);
        b0 <= c1 && c0 <= b1
    }) {
        return None;
    }
    let write = rng.below(10) < 4;
    let id = *next_id;
    *next_id += 1;
    let (req, data) = if write {
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let fua = rng.below(20) == 0;
        let req = Request::Write {
            offset: offset as u64,
            data: AlignedBuf::from_slice(&data),
            fua,
        };
        (req, data)
    } else {
        let req = Request::Read {
            offset: offset as u64,
            len: len as u32,
        };
        (req, vec![0; len])
    };
    let f = InFlight {
        id,
        write,
        offset,
        data,
    };
    Some((id, req, f))
}

/// A run's fingerprint: bytes read and written per device (up to four),
/// then requests, then bytes a tiering policy moved.
const REQUESTS: usize = 8;
const MOVED_BYTES: usize = 9;
const FINGERPRINT_LEN: usize = 10;

fn note(h: &Harness, fingerprint: &mut [u64]) {
    let v = h.vol();
    for (i, d) in v.devices().iter().enumerate() {
        fingerprint[2 * i] += d.counters.read_bytes;
        fingerprint[2 * i + 1] += d.counters.write_bytes;
    }
    fingerprint[REQUESTS] += v.stats().requests;
    // Bytes a tiering policy copied between devices (promotions,
    // demotions, mirroring, cleaning).
    fingerprint[MOVED_BYTES] += v
        .policy()
        .controller_state()
        .iter()
        .filter(|(k, _)| {
            matches!(
                *k,
                "promoted_bytes" | "demoted_bytes" | "mirror_bytes" | "cleaned_bytes"
            )
        })
        .map(|&(_, v)| v as u64)
        .sum::<u64>();
}

/// Applies finished requests to the model and checks reads against it.
fn settle(
    h: &mut Harness,
    inflight: &mut Vec<InFlight>,
    model: &mut [Option<u8>],
    spec: &Spec<'_>,
    out: &mut Outcome,
) {
    for d in std::mem::take(&mut h.client.done) {
        assert_eq!(d.error, 0, "request {} failed", d.id);
        let Some(pos) = inflight.iter().position(|f| f.id == d.id) else {
            continue; // a flush
        };
        let f = inflight.swap_remove(pos);
        if f.write {
            for (i, &b) in f.data.iter().enumerate() {
                model[f.offset + i] = Some(b);
            }
        } else {
            let data = d.data.as_ref().expect("read data");
            let got = &data[d.data_offset..d.data_offset + f.data.len()];
            for (i, &b) in got.iter().enumerate() {
                if let Some(want) = model[f.offset + i] {
                    assert_eq!(
                        b,
                        want,
                        "{} {} (seed {}): byte {} read {b}, last acknowledged write {want}",
                        spec.policy,
                        spec.extra,
                        spec.seed,
                        f.offset + i
                    );
                    out.bytes += 1;
                }
            }
            out.reads += 1;
        }
    }
}

#[test]
fn reads_return_the_last_acknowledged_write_across_restarts() {
    for (i, (policy, extra)) in MODES.iter().enumerate() {
        let out = run(&Spec {
            tag: &format!("clean{i}"),
            policy,
            extra,
            slow: "",
            seed: 11 + i as u64,
            ops: 3000,
            restart_every: 400,
            crash: false,
            memory: i % 2 == 0,
            backend: Backend::Uring,
        });
        assert!(
            out.reads > 1000 && out.bytes > 1_000_000,
            "{policy}: {out:?}"
        );
    }
}

#[test]
fn acknowledged_writes_survive_crashes() {
    for (i, (policy, extra)) in MODES.iter().enumerate() {
        for seed in 0..2 {
            let out = run(&Spec {
                tag: &format!("crash{i}-{seed}"),
                policy,
                extra,
                slow: "",
                seed: 100 + seed + i as u64 * 7,
                ops: 3000,
                restart_every: 60,
                crash: true,
                memory: seed == 1,
                backend: Backend::Threads,
            });
            assert!(out.reads > 1000 && out.bytes > 500_000, "{policy}: {out:?}");
        }
    }
}

/// The same crash test in virtual time: at least 2,000 crash points over
/// every mode, each followed by recovery and the same checks
/// (`TIERMUX_TEST_SEED=N` moves every seed by N).
#[test]
fn acknowledged_writes_survive_crashes_in_virtual_time() {
    let t0 = std::time::Instant::now();
    let (mut crashes, mut merged_ops) = (0, 0);
    for (i, (policy, extra)) in MODES.iter().enumerate() {
        let out = run(&Spec {
            tag: &format!("simcrash{i}"),
            policy,
            extra,
            slow: "",
            seed: seed_base() + 500 + i as u64,
            ops: 20_000,
            restart_every: 12,
            crash: true,
            memory: true,
            backend: Backend::Sim(seed_base() + 900 + i as u64),
        });
        assert!(
            out.reads > 5000 && out.bytes > 2_000_000,
            "{policy}: {out:?}"
        );
        if *policy == "stacked" || *policy == "hibachi" {
            // The middle cache of the three devices read and wrote.
            assert!(out.fingerprint[2] > 0 && out.fingerprint[3] > 0, "{out:?}");
        }
        if matches!(
            *policy,
            "hemem" | "most" | "batman" | "colloid" | "colloid+" | "colloid++"
        ) {
            // Segments moved between the devices, crashes included.
            assert!(
                out.fingerprint[MOVED_BYTES] > 0,
                "{policy}: nothing moved: {out:?}"
            );
            println!(
                "{policy}: {} crash points, {} bytes moved",
                out.crashes, out.fingerprint[MOVED_BYTES]
            );
        }
        if *policy == "hibachi" || tiermux_core::policies::tica::on_dram_and_two_ssds(policy) {
            // Hibachi: DRAM, NVRAM and home, dirty data only on NVRAM (a
            // file). TICA: DRAM, RO- and WO-SSD and home, every device
            // written.
            assert!(out.crashes >= 200, "{policy}: {} crash points", out.crashes);
            println!("{policy}: {} crash points", out.crashes);
        }
        if tiermux_core::policies::tica::on_dram_and_two_ssds(policy) {
            assert!((0..4).all(|d| out.fingerprint[2 * d + 1] > 0), "{out:?}");
        }
        crashes += out.crashes;
        merged_ops += out.merged_ops;
    }
    println!(
        "{crashes} crash points in virtual time ({merged_ops} merged device operations), {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(crashes >= 2000, "{crashes} crash points");
    // Requests of two and three blocks merged into vectored operations,
    // crashes included.
    assert!(merged_ops > 1000, "{merged_ops} merged operations");
}

/// On an emulated disk array, whose member disks' queues hold each
/// operation until its last disk operation starts and let it go when the
/// array wakes at a disk's completion: every read checks out, crashes
/// included, in virtual time and on real threads, for the policies that
/// run over arrays (`TIERMUX_TEST_SEED=N` moves the seeds by N).
#[test]
fn held_operations_of_an_emulated_array_complete_and_read_back() {
    // Each policy with the index of its home device, the array.
    let policies = [
        ("hibachi", "run_threshold = 2", 2),
        ("hybrid-lru", "", 1),
        ("tica-a", "smbi_steps = 1", 3),
        ("classic", "write_mode = \"wb\"", 1),
    ];
    for (i, &(policy, extra, home)) in policies.iter().enumerate() {
        for (backend, ops) in [
            (Backend::Sim(seed_base() + 40 + i as u64), 4000),
            (Backend::Threads, 400),
        ] {
            let out = run(&Spec {
                tag: &format!("array{i}-{ops}"),
                policy,
                extra,
                slow: "array = \"raid5-hibachi\"",
                seed: seed_base() + 30 + i as u64,
                ops,
                restart_every: 40,
                crash: true,
                memory: true,
                backend,
            });
            // A crash drops every request in flight (up to 32). On real
            // threads how many are in flight, and how many crashes the
            // run draws, depend on timing: 127-233 of the 400 requests'
            // reads were checked over five runs, 100 in one with seven
            // crashes. Virtual time repeats its run exactly.
            let min_reads = match backend {
                Backend::Sim(_) => ops as u64 / 4,
                Backend::Threads | Backend::Uring => ops as u64 / 8,
            };
            assert!(
                out.reads > min_reads && out.fingerprint[2 * home] > 0,
                "{policy} {backend:?}: {out:?}"
            );
        }
    }
}

/// Under the simulated reactor the same seed gives the same run.
#[test]
fn virtual_time_runs_are_deterministic() {
    let spec = |tag| Spec {
        tag,
        policy: "nhc",
        extra: "write_mode = \"wb\"\nwindow_ms = 1.0\nmin_window_ops = 8",
        slow: "",
        seed: 77,
        ops: 3000,
        restart_every: 50,
        crash: true,
        memory: true,
        backend: Backend::Sim(78),
    };
    let a = run(&spec("det-a"));
    let b = run(&spec("det-b"));
    assert!(a.crashes > 5, "{a:?}");
    assert_eq!(a, b);
}

#[test]
fn a_warm_cache_restarts_warm() {
    let dir = data_dir("warm", true);
    let cfg = config(&dir, "classic", "write_mode = \"wb\"");
    let read = |id: u64| Request::Read {
        offset: id * BS as u64,
        len: BS as u32,
    };
    let mut h = Harness::open(&cfg, Backend::Uring);
    // Fill the first 32 blocks: read misses admit them.
    for id in 0..32u64 {
        h.submit(id, read(id));
    }
    h.idle();
    assert_eq!(h.vol().stats().read_misses, 32);
    h.close();
    let mut h = Harness::open(&cfg, Backend::Uring);
    assert!(h.vol().recovery().entries >= 32, "{:?}", h.vol().recovery());
    for id in 0..32u64 {
        h.submit(id, read(id));
    }
    h.idle();
    let st = h.vol().stats();
    assert_eq!((st.read_hits, st.read_misses), (32, 0));
    h.close();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn out_of_range_requests_get_errors() {
    let dir = data_dir("range", false);
    let cfg = config(&dir, "passthrough", "");
    let mut h = Harness::open(&cfg, Backend::Uring);
    let size = VOL_BYTES as u64;
    h.submit(
        1,
        Request::Read {
            offset: size - 10,
            len: 11,
        },
    );
    h.submit(
        2,
        Request::Write {
            offset: u64::MAX - 3,
            data: AlignedBuf::from_slice(&[1; 8]),
            fua: false,
        },
    );
    h.submit(
        3,
        Request::Read {
            offset: 0,
            len: 64 << 20,
        },
    );
    h.submit(
        4,
        Request::Trim {
            offset: size,
            len: 1,
        },
    );
    h.submit(
        5,
        Request::Read {
            offset: size - 10,
            len: 10,
        },
    );
    let mut got = Vec::new();
    while got.len() < 5 {
        h.step();
        got.append(&mut h.client.done);
    }
    got.sort_by_key(|d| d.id);
    let errs: Vec<i32> = got.iter().map(|d| d.error).collect();
    let (nospc, overflow) = (
        rustix::io::Errno::NOSPC.raw_os_error(),
        rustix::io::Errno::OVERFLOW.raw_os_error(),
    );
    assert_eq!(errs, vec![nospc, nospc, overflow, nospc, 0]);
    h.close();
    std::fs::remove_dir_all(&dir).ok();
}

/// TRIM releases the copies a write-back cache keeps of the blocks it
/// covers whole, dirty ones too: their slots are free again, the blocks
/// read as their home copies (never written here: zeros), a block only
/// partly covered keeps its data, and the released state survives a
/// restart.
#[test]
fn trim_releases_cached_and_dirty_copies() {
    let dir = data_dir("trim", true);
    let cfg = config(&dir, "classic", "write_mode = \"wb\"");
    let mut h = Harness::open(&cfg, Backend::Sim(11));
    for b in 0..32u64 {
        let data = stamp(b as usize, 1);
        let offset = b * BS as u64;
        h.submit(
            b,
            Request::Write {
                offset,
                data: AlignedBuf::from_slice(&data),
                fua: false,
            },
        );
    }
    h.idle();
    h.client.done.clear();
    assert_eq!(
        h.vol().at_risk_blocks(0),
        32,
        "every write is dirty in the cache"
    );
    // Blocks 8..24 whole, and half of block 24.
    let (offset, len) = (8 * BS as u64, (16 * BS + BS / 2) as u32);
    h.submit(100, Request::Trim { offset, len });
    h.idle();
    let done = h.client.done.pop().expect("the trim's reply");
    assert_eq!((done.id, done.error), (100, 0));
    assert_eq!(h.vol().stats().trimmed_blocks, 16);
    assert_eq!(
        h.vol().at_risk_blocks(0),
        16,
        "the trimmed blocks' copies are released"
    );
    h.close();
    let mut h = Harness::open(&cfg, Backend::Sim(12));
    assert_eq!(h.vol().at_risk_blocks(0), 16, "after a restart too");
    check_reads_after_trim(&mut h, 32, 8..24);
    h.close();
    std::fs::remove_dir_all(&dir).ok();
}

/// A volume with its cache devices (name, in memory or not) in `shm` or
/// `disk`, its home device in `disk`, the `[policy]` table's lines and
/// volume-level lines.
fn mixed_config(
    shm: &std::path::Path,
    disk: &std::path::Path,
    caches: &[(&str, bool)],
    policy: &str,
    volume: &str,
) -> tiermux_engine::VolumeConfig {
    let mut text = format!("size = {VOL_BYTES}\n{volume}\n");
    for (name, in_memory) in caches {
        let dir = if *in_memory { shm } else { disk };
        text += &format!(
            "[[device]]\nname = \"{name}\"\npath = \"{}\"\nsize = 524288\n",
            dir.join(format!("{name}.img")).display()
        );
    }
    text += &format!(
        "[[device]]\nname = \"home\"\npath = \"{}\"\n[policy]\n{policy}\n",
        disk.join("home.img").display()
    );
    tiermux_engine::VolumeConfig::parse(&text, disk).unwrap()
}

/// The two directories of a volume with devices in memory and on disk.
fn shm_and_disk(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let shm = data_dir(tag, true);
    let disk = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "tiermux-{tag}-{}-{}",
        std::process::id(),
        common::next_dir_number()
    ));
    for d in [&shm, &disk] {
        std::fs::remove_dir_all(d).ok();
        std::fs::create_dir_all(d).unwrap();
    }
    assert!(shm.starts_with("/dev/shm"), "no tmpfs at /dev/shm");
    (shm, disk)
}

/// Hibachi's DRAM in memory, its NVRAM and home on disk: after a reboot
/// (a simulated power cut, with the DRAM's file emptied as memory is) the
/// copies the map names on DRAM are forgotten and every block reads what
/// was written to it; the same when a cache device's file is new.
#[test]
fn copies_on_a_device_that_lost_its_contents_are_forgotten() {
    let (shm, disk) = shm_and_disk("lostdram");
    let cfg = mixed_config(
        &shm,
        &disk,
        &[("dram", true), ("nvram", false)],
        "name = \"hibachi\"",
        "",
    );
    let machine = tiermux_engine::reactor::power::Machine::new();
    let blocks = VOL_BYTES / BS / 2;
    let mut h = Harness::open_on(&cfg, 1, &machine);
    for b in 0..blocks {
        let (offset, data) = ((b * BS) as u64, stamp(b, 1));
        h.submit(
            b as u64,
            Request::Write {
                offset,
                data: AlignedBuf::from_slice(&data),
                fua: false,
            },
        );
        h.idle();
    }
    h.submit(u64::MAX, Request::Flush);
    h.idle();
    // Forwards, then backwards: the blocks cached at the end of a pass
    // are read before misses evict them.
    let read_all = |h: &mut Harness, backwards: bool| {
        let order: Vec<usize> = if backwards {
            (0..blocks).rev().collect()
        } else {
            (0..blocks).collect()
        };
        for b in order {
            let offset = (b * BS) as u64;
            h.submit(
                b as u64,
                Request::Read {
                    offset,
                    len: BS as u32,
                },
            );
            h.idle();
            let d = h.client.done.pop().expect("a reply");
            let data = d.data.as_ref().expect("read data");
            let at = d.data_offset;
            assert_eq!(version_of(b, &data[at..at + BS]), Ok(1), "block {b}");
        }
        h.client.done.clear();
    };
    h.client.done.clear();
    read_all(&mut h, false);
    assert!(
        h.vol().devices()[0].counters.write_bytes > 0,
        "no DRAM copy"
    );
    // A clean close makes the map's DRAM copies durable; the power then
    // fails in the next run, before it does anything.
    h.close();
    Harness::open_on(&cfg, 2, &machine).rt.power_cut();
    // Memory loses everything at a power cut.
    std::fs::write(shm.join("dram.img"), vec![0u8; 524288]).unwrap();
    let mut h = Harness::open_on(&cfg, 3, &machine);
    let rec = h.vol().recovery().clone();
    assert_eq!((rec.rebooted, rec.lost_devices), (true, 0b001));
    assert!(rec.forgotten_copies > 0, "{rec:?}");
    read_all(&mut h, true);
    h.close();
    // A new file for the NVRAM: the clean pages it held are forgotten.
    std::fs::remove_file(disk.join("nvram.img")).unwrap();
    let mut h = Harness::open_on(&cfg, 4, &machine);
    let rec = h.vol().recovery().clone();
    assert_eq!((rec.rebooted, rec.lost_devices), (false, 0b010));
    read_all(&mut h, true);
    h.close();
    for d in [&shm, &disk] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A device in memory (tmpfs) that the policy may leave holding the only
/// copy of acknowledged writes, over a home on persistent storage, is
/// refused at open with an error naming it, unless `volatile_ok` accepts
/// the risk. Hibachi's DRAM may be in memory (it holds clean pages only),
/// its NVRAM may not; a write-through cache may be, a write-back one not.
#[test]
fn memory_devices_holding_the_only_copy_of_writes_are_refused() {
    let (shm, disk) = shm_and_disk("volatile");
    let open_with_metadata =
        |meta: &std::path::Path, caches: &[(&str, bool)], policy: &str, volume: &str| {
            let mut cfg = mixed_config(&shm, &disk, caches, policy, volume);
            cfg.metadata_dir = meta.join("meta");
            std::fs::remove_dir_all(&cfg.metadata_dir).ok();
            let mut r = tiermux_engine::reactor::fallback::ThreadReactor::new(1).unwrap();
            let mut v = tiermux_engine::Volume::open(&cfg, &mut r)?;
            v.close(&mut r).unwrap();
            Ok::<(), tiermux_engine::volume::OpenError>(())
        };
    let try_open = |caches: &[(&str, bool)], policy: &str, volume: &str| {
        open_with_metadata(&disk, caches, policy, volume)
    };
    let hibachi = "name = \"hibachi\"";
    let msg = try_open(&[("dram", false), ("nvram", true)], hibachi, "")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("'nvram'") && msg.contains("volatile_ok") && !msg.contains("'dram'"),
        "{msg}"
    );
    try_open(&[("dram", true), ("nvram", false)], hibachi, "").unwrap();
    let both = [("dram", true), ("nvram", true)];
    try_open(&both, hibachi, "volatile_ok = true").unwrap();
    let fast = [("fast", true)];
    let msg = try_open(&fast, "name = \"classic\"\nwrite_mode = \"wb\"", "")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("'fast'") && msg.contains("classic"), "{msg}");
    println!("{msg}");
    try_open(&fast, "name = \"classic\"\nwrite_mode = \"wt\"", "").unwrap();
    // Every device on disk, the metadata in memory: a reboot would forget
    // where the dirty copies are.
    let meta_in_memory = |caches: &[(&str, bool)], policy: &str, volume: &str| {
        open_with_metadata(&shm, caches, policy, volume)
    };
    let on_disk = [("dram", false), ("nvram", false)];
    let msg = meta_in_memory(&on_disk, hibachi, "")
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("metadata directory")
            && msg.contains("/meta")
            && msg.contains("volatile_ok"),
        "{msg}"
    );
    meta_in_memory(&on_disk, hibachi, "volatile_ok = true").unwrap();
    let fast = [("fast", false)];
    meta_in_memory(&fast, "name = \"classic\"\nwrite_mode = \"wt\"", "").unwrap();
    for d in [&shm, &disk] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// A live change is checked like a config file: a write-through cache in
/// memory over a persistent home may not become write-back (it would hold
/// the only copy of writes), a policy with no live parameters refuses any
/// change, and a refused change leaves the running parameters as they were.
#[test]
fn live_changes_that_would_be_refused_at_open_are_refused() {
    use tiermux_core::{ParamValue, Params};
    let (shm, disk) = shm_and_disk("live-volatile");
    let open = |caches: &[(&str, bool)], policy: &str| {
        let mut cfg = mixed_config(&shm, &disk, caches, policy, "");
        cfg.metadata_dir = disk.join("meta");
        std::fs::remove_dir_all(&cfg.metadata_dir).ok();
        let mut r = tiermux_engine::reactor::fallback::ThreadReactor::new(1).unwrap();
        let v = tiermux_engine::Volume::open(&cfg, &mut r).unwrap();
        (v, r)
    };
    let set = |name: &str, value: &str| Params::new().with(name, ParamValue::Str(value.into()));
    let (mut v, mut r) = open(&[("fast", true)], "name = \"classic\"\nwrite_mode = \"wt\"");
    let msg = v
        .reconfigure(&set("write_mode", "wb"), &mut r)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("'fast'") && msg.contains("volatile_ok"),
        "{msg}"
    );
    assert_eq!(
        v.params()
            .iter()
            .find(|(k, _)| *k == "write_mode")
            .unwrap()
            .1,
        &ParamValue::Str("wt".into())
    );
    // An unknown name is refused as unknown, however often it is asked for.
    for _ in 0..2 {
        let colour = Params::new().with("colour", ParamValue::Int(3));
        let msg = v.reconfigure(&colour, &mut r).unwrap_err().to_string();
        assert!(msg.contains("'colour': unknown parameter"), "{msg}");
    }
    // Write-around is as safe as write-through.
    let changed = v.reconfigure(&set("write_mode", "wa"), &mut r).unwrap();
    assert_eq!(changed, ["write_mode"]);
    v.close(&mut r).unwrap();

    let (mut v, mut r) = open(&[("dram", false), ("nvram", false)], "name = \"hibachi\"");
    let msg = v
        .reconfigure(
            &Params::new().with("run_threshold", ParamValue::Int(4)),
            &mut r,
        )
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("'run_threshold' cannot change while the volume runs")
            && msg.contains("these can: none"),
        "{msg}"
    );
    v.close(&mut r).unwrap();
    for d in [&shm, &disk] {
        std::fs::remove_dir_all(d).ok();
    }
}
