//! The volume in-process: randomized reads and writes (aligned and not, up
//! to 32 in flight) against a byte model, with clean restarts and crashes,
//! for every policy family and write mode the engine serves.
//!
//! A crash here drops the thread-pool reactor (whose workers finish the
//! operation they are running, as a kernel would) and then the volume
//! without closing it: operations not yet started never happen, journal
//! records not committed are lost. Every acknowledged write must then read
//! back exactly; bytes of writes in flight at the crash may hold old or new
//! data and are not checked until written again.

use std::path::{Path, PathBuf};

use tiermux_core::rng::Rng;
use tiermux_engine::reactor::{
    fallback::ThreadReactor, uring::UringReactor, Completion, Reactor, WAKE_TOKEN,
};
use tiermux_engine::volume::CALLER_TOKEN_BASE;
use tiermux_engine::{Done, Request, Volume, VolumeConfig};

const VOL_BYTES: usize = 4 << 20;
const BS: usize = 4096;

/// A fresh directory for a test's devices: in memory (tmpfs, where the
/// reactor runs device I/O inline) when `memory`, else in the temporary
/// directory (usually a disk filesystem, where I/O is asynchronous and
/// completes out of order).
fn data_dir(tag: &str, memory: bool) -> PathBuf {
    let base = if memory && Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let d = base.join(format!("tiermux-voltest-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn config(dir: &Path, policy: &str, extra: &str) -> VolumeConfig {
    // Splitting places blocks on the fast device at their own addresses.
    let fast = if policy == "split" {
        VOL_BYTES
    } else {
        256 << 10
    };
    let text = format!(
        r#"
size = {VOL_BYTES}
[[device]]
name = "fast"
path = "fast.img"
size = {fast}
[[device]]
name = "slow"
path = "slow.img"
[policy]
name = "{policy}"
{extra}
"#
    );
    VolumeConfig::parse(&text, dir).unwrap()
}

struct Harness {
    vol: Volume,
    r: Box<dyn Reactor>,
    done: Vec<Done>,
    comps: Vec<Completion>,
}

impl Harness {
    fn open(cfg: &VolumeConfig, uring: bool) -> Harness {
        let r: Box<dyn Reactor> = if uring {
            match UringReactor::new(256) {
                Ok(r) => Box::new(r),
                Err(_) => Box::new(ThreadReactor::new(2).unwrap()),
            }
        } else {
            Box::new(ThreadReactor::new(2).unwrap())
        };
        Harness {
            vol: Volume::open(cfg).unwrap(),
            r,
            done: Vec::new(),
            comps: Vec::new(),
        }
    }

    /// One loop iteration: end the batch, wait, handle completions.
    fn step(&mut self) {
        self.vol.end_batch(self.r.as_mut(), &mut self.done).unwrap();
        if !self.done.is_empty() {
            return;
        }
        let deadline = self.vol.next_deadline_ns();
        self.comps.clear();
        self.r.wait(deadline, &mut self.comps).unwrap();
        for c in std::mem::take(&mut self.comps) {
            if c.token != WAKE_TOKEN && c.token < CALLER_TOKEN_BASE {
                self.vol.on_completion(c, self.r.as_mut());
            }
        }
        self.vol.on_time(self.r.as_mut());
    }

    fn idle(&mut self) {
        while !self.vol.is_idle() || !self.done.is_empty() {
            self.step();
            self.done.clear();
        }
        self.vol.end_batch(self.r.as_mut(), &mut self.done).unwrap();
    }
}

struct InFlight {
    id: u64,
    write: bool,
    offset: usize,
    data: Vec<u8>,
}

/// Runs `ops` random requests with restarts (crashes when `crash`) on
/// devices in memory when `memory`; returns (reads checked, bytes checked).
fn run(
    tag: &str,
    policy: &str,
    extra: &str,
    seed: u64,
    ops: usize,
    crash: bool,
    memory: bool,
) -> (u64, u64) {
    let dir = data_dir(tag, memory);
    let cfg = config(&dir, policy, extra);
    let mut rng = Rng::new(seed);
    let mut model: Vec<Option<u8>> = vec![Some(0); VOL_BYTES];
    let mut h = Harness::open(&cfg, !crash);
    let mut inflight: Vec<InFlight> = Vec::new();
    let mut next_id = 1u64;
    let (mut reads, mut bytes) = (0u64, 0u64);
    let hot = VOL_BYTES / 8;
    let mut issued = 0;
    while issued < ops || !inflight.is_empty() {
        // Submit up to 32 non-overlapping requests.
        while issued < ops && inflight.len() < 32 {
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
            // Whole blocks touched must not be in flight (read-modify-write
            // makes block-level conflicts real conflicts).
            let (b0, b1) = (offset / BS, (offset + len - 1) / BS);
            if inflight.iter().any(|f| {
                let (c0, c1) = (f.offset / BS, (f.offset + f.data.len().max(1) - 1) / BS);
                b0 <= c1 && c0 <= b1
            }) {
                break;
            }
            let write = rng.below(10) < 4;
            let id = next_id;
            next_id += 1;
            if write {
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                let fua = rng.below(20) == 0;
                h.vol.submit(
                    id,
                    Request::Write {
                        offset: offset as u64,
                        data: data.clone(),
                        fua,
                    },
                    h.r.as_mut(),
                );
                inflight.push(InFlight {
                    id,
                    write,
                    offset,
                    data,
                });
            } else {
                h.vol.submit(
                    id,
                    Request::Read {
                        offset: offset as u64,
                        len: len as u32,
                    },
                    h.r.as_mut(),
                );
                inflight.push(InFlight {
                    id,
                    write,
                    offset,
                    data: vec![0; len],
                });
            }
            issued += 1;
            if rng.below(200) == 0 {
                h.vol.submit(next_id, Request::Flush, h.r.as_mut());
                next_id += 1;
            }
        }
        h.step();
        settle(
            &mut h,
            &mut inflight,
            &mut model,
            policy,
            extra,
            &mut reads,
            &mut bytes,
        );
        // Now and then: restart cleanly or crash.
        if rng.below(if crash { 60 } else { 400 }) == 0 {
            if crash && rng.below(2) == 0 {
                drop(h.r);
                let v = h.vol;
                drop(v);
                for f in inflight.drain(..) {
                    if f.write {
                        for i in 0..f.data.len() {
                            model[f.offset + i] = None;
                        }
                    }
                }
            } else {
                while !inflight.is_empty() {
                    h.step();
                    settle(
                        &mut h,
                        &mut inflight,
                        &mut model,
                        policy,
                        extra,
                        &mut reads,
                        &mut bytes,
                    );
                }
                h.idle();
                h.vol.close().unwrap();
                drop(h.r);
                drop(h.vol);
            }
            h = Harness::open(&cfg, !crash);
            assert!(!h.vol.recovery().fresh);
        }
    }
    h.idle();
    let st = h.vol.stats();
    assert_eq!(st.contract_violations, 0);
    assert_eq!(st.device_errors, 0);
    h.vol.close().unwrap();
    drop(h);
    std::fs::remove_dir_all(&dir).ok();
    (reads, bytes)
}

/// Applies finished requests to the model and checks reads against it.
fn settle(
    h: &mut Harness,
    inflight: &mut Vec<InFlight>,
    model: &mut [Option<u8>],
    policy: &str,
    extra: &str,
    reads: &mut u64,
    bytes: &mut u64,
) {
    for d in std::mem::take(&mut h.done) {
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
                        "{policy} {extra}: byte {} read {b}, last acknowledged write {want}",
                        f.offset + i
                    );
                    *bytes += 1;
                }
            }
            *reads += 1;
        }
    }
}

const MODES: &[(&str, &str)] = &[
    ("classic", "write_mode = \"wa\""),
    ("classic", "write_mode = \"wt\""),
    (
        "classic",
        "write_mode = \"wb\"\ndirty_high_ratio = 0.3\ndirty_low_ratio = 0.1",
    ),
    (
        "nhc",
        "write_mode = \"wb\"\nwindow_ms = 1.0\nmin_window_ops = 8",
    ),
    ("split", ""),
    ("passthrough", ""),
];

#[test]
fn reads_return_the_last_acknowledged_write_across_restarts() {
    for (i, (policy, extra)) in MODES.iter().enumerate() {
        let (reads, bytes) = run(
            &format!("clean{i}"),
            policy,
            extra,
            11 + i as u64,
            3000,
            false,
            i % 2 == 0,
        );
        assert!(
            reads > 1000 && bytes > 1_000_000,
            "{policy}: {reads} reads, {bytes} bytes checked"
        );
    }
}

#[test]
fn acknowledged_writes_survive_crashes() {
    for (i, (policy, extra)) in MODES.iter().enumerate() {
        for seed in 0..2 {
            let (reads, bytes) = run(
                &format!("crash{i}-{seed}"),
                policy,
                extra,
                100 + seed + i as u64 * 7,
                3000,
                true,
                seed == 1,
            );
            assert!(
                reads > 1000 && bytes > 500_000,
                "{policy}: {reads} reads, {bytes} bytes checked"
            );
        }
    }
}

#[test]
fn a_warm_cache_restarts_warm() {
    let dir = data_dir("warm", true);
    let cfg = config(&dir, "classic", "write_mode = \"wb\"");
    let mut h = Harness::open(&cfg, true);
    // Fill the first 32 blocks: read misses admit them.
    for id in 0..32u64 {
        h.vol.submit(
            id,
            Request::Read {
                offset: id * BS as u64,
                len: BS as u32,
            },
            h.r.as_mut(),
        );
    }
    h.idle();
    assert_eq!(h.vol.stats().read_misses, 32);
    h.vol.close().unwrap();
    drop(h);
    let mut h = Harness::open(&cfg, true);
    assert!(h.vol.recovery().entries >= 32, "{:?}", h.vol.recovery());
    for id in 0..32u64 {
        h.vol.submit(
            id,
            Request::Read {
                offset: id * BS as u64,
                len: BS as u32,
            },
            h.r.as_mut(),
        );
    }
    h.idle();
    assert_eq!(
        (h.vol.stats().read_hits, h.vol.stats().read_misses),
        (32, 0)
    );
    drop(h);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn out_of_range_requests_get_errors() {
    let dir = data_dir("range", false);
    let cfg = config(&dir, "passthrough", "");
    let mut h = Harness::open(&cfg, true);
    let size = VOL_BYTES as u64;
    h.vol.submit(
        1,
        Request::Read {
            offset: size - 10,
            len: 11,
        },
        h.r.as_mut(),
    );
    h.vol.submit(
        2,
        Request::Write {
            offset: u64::MAX - 3,
            data: vec![1; 8],
            fua: false,
        },
        h.r.as_mut(),
    );
    h.vol.submit(
        3,
        Request::Read {
            offset: 0,
            len: 64 << 20,
        },
        h.r.as_mut(),
    );
    h.vol.submit(
        4,
        Request::Trim {
            offset: size,
            len: 1,
        },
        h.r.as_mut(),
    );
    h.vol.submit(
        5,
        Request::Read {
            offset: size - 10,
            len: 10,
        },
        h.r.as_mut(),
    );
    let mut got = Vec::new();
    while got.len() < 5 {
        h.step();
        got.append(&mut h.done);
    }
    got.sort_by_key(|d| d.id);
    let errs: Vec<i32> = got.iter().map(|d| d.error).collect();
    let (nospc, overflow) = (
        rustix::io::Errno::NOSPC.raw_os_error(),
        rustix::io::Errno::OVERFLOW.raw_os_error(),
    );
    assert_eq!(errs, vec![nospc, nospc, overflow, nospc, 0]);
    drop(h);
    std::fs::remove_dir_all(&dir).ok();
}
