//! What the volume tests share: the volume's config, the test as the event
//! loop's front end, and the modes (policy and write mode) they run.

use std::path::{Path, PathBuf};

use tiermux_engine::reactor::power::Machine;
use tiermux_engine::reactor::{
    fallback::ThreadReactor, sim::SimReactor, uring::UringReactor, Reactor,
};
use tiermux_engine::{Done, Flow, Frontend, Io, Request, Runtime, Volume, VolumeConfig};

pub const VOL_BYTES: usize = 4 << 20;
pub const BS: usize = 4096;

/// Every block write in the randomized tests is whole blocks stamped with
/// the block's number and a version, so a read tells exactly which write
/// it returns.
const MAGIC: u32 = 0x7e57_da7a;

/// The content of version `v` of `block` (version 0 is the zeros a block
/// starts with).
pub fn stamp(block: usize, v: u32) -> Vec<u8> {
    let mut b = vec![0u8; BS];
    if v > 0 {
        for w in b.chunks_exact_mut(16) {
            w[0..8].copy_from_slice(&(block as u64).to_le_bytes());
            w[8..12].copy_from_slice(&v.to_le_bytes());
            w[12..16].copy_from_slice(&MAGIC.to_le_bytes());
        }
    }
    b
}

/// Which version of `block` the bytes are, or why they are none.
pub fn version_of(block: usize, bytes: &[u8]) -> Result<u32, String> {
    if bytes.iter().all(|&b| b == 0) {
        return Ok(0);
    }
    let v = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if bytes[..] != stamp(block, v)[..] {
        let owner = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
        return Err(format!(
            "holds neither zeros nor one of its versions (first stamp: block {owner}, version {v})"
        ));
    }
    Ok(v)
}

/// A number added to the seeds of the randomized campaigns, read from
/// `TIERMUX_TEST_SEED` (0 when unset), so that a long run can try cases the
/// default seeds never reach. A failure names the seed it ran with.
pub fn seed_base() -> u64 {
    std::env::var("TIERMUX_TEST_SEED").map_or(0, |s| {
        s.parse().expect("TIERMUX_TEST_SEED is a whole number")
    })
}

/// Which reactor a test runs on.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    /// io_uring (or threads where io_uring is unavailable).
    Uring,
    /// The thread-pool fallback.
    Threads,
    /// Virtual time, seeded.
    Sim(u64),
}

/// A number no other call in this process returns: the test directories
/// carry it, so that tests of different files, which share the process,
/// never share a directory.
pub fn next_dir_number() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A fresh directory for a test's devices: in memory (tmpfs, where the
/// reactor runs device I/O inline) when `memory`, else in the temporary
/// directory (usually a disk filesystem, where I/O is asynchronous and
/// completes out of order).
pub fn data_dir(tag: &str, memory: bool) -> PathBuf {
    let base = if memory && Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let d = base.join(format!(
        "tiermux-voltest-{tag}-{}-{}",
        std::process::id(),
        next_dir_number()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub fn config(dir: &Path, policy: &str, extra: &str) -> VolumeConfig {
    config_with_slow(dir, policy, extra, "")
}

/// As [`config`], with `slow` (lines of the slow device's table) added.
pub fn config_with_slow(dir: &Path, policy: &str, extra: &str, slow: &str) -> VolumeConfig {
    // Splitting and striping place blocks on the fast device at their own
    // addresses.
    let fast = if policy == "split" || policy == "stripe" {
        VOL_BYTES
    } else {
        256 << 10
    };
    // Stacked caching gets a second, larger cache between the two, and
    // Hibachi an NVRAM between its DRAM and home.
    // TICA gets a read- and a write-optimized SSD between its DRAM and
    // home.
    let middle = if policy == "stacked" || policy == "hibachi" {
        "[[device]]\nname = \"middle\"\npath = \"middle.img\"\nsize = 524288\n"
    } else if tiermux_core::policies::tica::on_dram_and_two_ssds(policy) {
        "[[device]]\nname = \"ro\"\npath = \"ro.img\"\nsize = 262144\n[[device]]\nname = \"wo\"\npath = \"wo.img\"\nsize = 262144\n"
    } else {
        ""
    };
    let fast = if tiermux_core::policies::tica::on_dram_and_two_ssds(policy) {
        128 << 10
    } else {
        fast
    };
    let text = format!(
        r#"
size = {VOL_BYTES}
[[device]]
name = "fast"
path = "fast.img"
size = {fast}
{middle}[[device]]
name = "slow"
path = "slow.img"
{slow}
[policy]
name = "{policy}"
{extra}
"#
    );
    VolumeConfig::parse(&text, dir).unwrap()
}

/// The test as the event loop's front end: requests to start, and the
/// finished ones.
#[derive(Default)]
pub struct Client {
    pub to_submit: Vec<(u64, Request)>,
    pub done: Vec<Done>,
}

impl Frontend for Client {
    fn on_done(&mut self, done: Done, _io: &mut Io<'_>) {
        self.done.push(done);
    }
    fn on_ready(&mut self, token: u64, _result: i32, _io: &mut Io<'_>) {
        panic!("the test polls no sockets (token {token})");
    }
    fn before_wait(&mut self, io: &mut Io<'_>) -> Flow {
        for (id, req) in self.to_submit.drain(..) {
            io.submit(id, req);
        }
        if io.volume().is_idle() {
            Flow::Yield // nothing to wait for
        } else {
            Flow::Continue
        }
    }
}

pub struct Harness {
    pub rt: Runtime,
    pub client: Client,
}

impl Harness {
    pub fn open(cfg: &VolumeConfig, backend: Backend) -> Harness {
        let r: Box<dyn Reactor> = match backend {
            Backend::Uring => match UringReactor::new(256) {
                Ok(r) => Box::new(r),
                Err(_) => Box::new(ThreadReactor::new(2).unwrap()),
            },
            Backend::Threads => Box::new(ThreadReactor::new(2).unwrap()),
            Backend::Sim(seed) => Box::new(SimReactor::new(seed, 200_000, 0).unwrap()),
        };
        let mut r = r;
        let vol = Volume::open(cfg, r.as_mut()).unwrap();
        Harness {
            rt: Runtime::new(vol, r),
            client: Client::default(),
        }
    }

    /// A harness on the simulated reactor of `machine`, seeded.
    pub fn open_on(cfg: &VolumeConfig, seed: u64, machine: &Machine) -> Harness {
        let mut r = SimReactor::on_machine(seed, 200_000, 0, machine.clone()).unwrap();
        let vol = Volume::open(cfg, &mut r).unwrap();
        Harness {
            rt: Runtime::new(vol, Box::new(r)),
            client: Client::default(),
        }
    }

    pub fn vol(&self) -> &Volume {
        self.rt.volume()
    }

    pub fn submit(&mut self, id: u64, req: Request) {
        self.client.to_submit.push((id, req));
    }

    /// One loop iteration.
    pub fn step(&mut self) {
        self.rt.step(&mut self.client).unwrap();
    }

    /// Runs until nothing is queued or in flight.
    pub fn idle(&mut self) {
        while !self.client.to_submit.is_empty() || !self.rt.volume().is_idle() {
            self.step();
        }
    }

    /// Closes the volume cleanly.
    pub fn close(mut self) {
        self.idle();
        let mut stop = Stopping;
        self.rt.run(&mut stop).unwrap();
    }
}

/// A front end that has nothing more to do.
pub struct Stopping;

impl Frontend for Stopping {
    fn on_done(&mut self, done: Done, _io: &mut Io<'_>) {
        panic!("request {} finished after the test stopped", done.id);
    }
    fn on_ready(&mut self, _token: u64, _result: i32, _io: &mut Io<'_>) {}
    fn before_wait(&mut self, _io: &mut Io<'_>) -> Flow {
        Flow::Stop
    }
}

/// Every policy family and write mode the engine serves, with parameters
/// that make flushing and tuning happen in short runs.
pub const MODES: &[(&str, &str)] = &[
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
    ("stripe", "stripe_blocks = 4"),
    ("passthrough", ""),
    (
        "stacked",
        "write_mode = \"wb\"\ndirty_high_ratio = 0.3\ndirty_low_ratio = 0.1",
    ),
    ("stacked", "write_mode = \"wt\""),
    (
        "hemem",
        "segment_blocks = 4\nquantum_ms = 0.1\nhot_threshold = 2\ncooling_threshold = 6",
    ),
    (
        "most",
        "segment_blocks = 4\nquantum_ms = 0.1\nhot_threshold = 2\ncooling_threshold = 6\nratio_step = 0.25\nlatency_alpha = 1.0\nclean_min_rewrite_distance = 1.0",
    ),
    (
        "most",
        "segment_blocks = 4\nquantum_ms = 0.1\nhot_threshold = 2\ncooling_threshold = 6\nratio_step = 0.25\nlatency_alpha = 1.0\nsubpages = false",
    ),
    (
        "batman",
        "segment_blocks = 4\nquantum_ms = 0.1\nhot_threshold = 2\ncooling_threshold = 6\nperf_access_share = 0.5",
    ),
    (
        "colloid+",
        "segment_blocks = 4\nquantum_ms = 0.1\nhot_threshold = 2\ncooling_threshold = 6\nlatency_alpha = 1.0",
    ),
    ("hibachi", "run_threshold = 2"),
    ("hybrid-lru", ""),
    ("hybrid-arc", ""),
    ("tica-wed", ""),
    ("tica-a", "smbi_steps = 1"),
    ("ucache", ""),
    ("s-rac", ""),
    ("raid1", ""),
];

/// Reads blocks `0..blocks`, each written once (version 1), and checks
/// that those in `trimmed` read as their home copy (never written: zeros)
/// and the others as version 1.
pub fn check_reads_after_trim(h: &mut Harness, blocks: u64, trimmed: std::ops::Range<u64>) {
    for b in 0..blocks {
        let offset = b * BS as u64;
        let len = BS as u32;
        h.submit(b, Request::Read { offset, len });
    }
    h.idle();
    for d in std::mem::take(&mut h.client.done) {
        let data = d.data.expect("read data");
        let bytes = &data[d.data_offset..d.data_offset + BS];
        let want = if trimmed.contains(&d.id) { 0 } else { 1 };
        assert_eq!(version_of(d.id as usize, bytes), Ok(want), "block {}", d.id);
    }
}
