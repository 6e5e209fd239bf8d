//! The discrete-event simulator: runs a policy (through the core's
//! dispatcher) over simulated devices, clients and a workload, in virtual
//! time, deterministically for a given seed.
//!
//! Every block carries a version. Writes create versions; each simulated
//! device stores, per address, the version last written there; a read
//! returns what its device holds when it completes. The always-on checker
//! verifies that every read returns a version at least as new as the last
//! acknowledged write of its block (and one that was actually written), so a
//! policy that serves stale data fails every run, not only in tests.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tiermux_core::rng::Rng;
use tiermux_core::{
    build_policy, Access, Dispatcher, Histogram, ObservationBuilder, Op, Outcome, NO_TAG,
};

use crate::config::{volume_spec, ClientMode, ConfigError, Resolved};
mod arrays;
mod contents;
pub mod converge;
mod failure;
mod kv;
mod loadx;
mod merged;
mod prefill;
mod results;

pub use loadx::{load_unit_workers, run, run_sharing};
pub use prefill::PrefillShare;
pub use results::{DeviceResult, KvResult, RunResult, Sample};

use crate::trace_run::TraceCursor;
use crate::workload::Workload;
use tiermux_device::{DeviceCounters, SimDevice};

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configuration is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The policy could not be built.
    #[error("{0}")]
    Policy(#[from] tiermux_core::PolicyError),
    /// A read returned stale data: a policy bug.
    #[error("consistency violation: {0}")]
    Consistency(String),
    /// The run panicked: a bug, reported for this run so that the sweep's
    /// other runs are not lost with it.
    #[error("internal error (a bug in tiermux): {0}")]
    Panicked(String),
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Io {
        flight: u32,
        index: tiermux_core::PlanIndex,
        device: u8,
        dir: Op,
        addr: u64,
        data: u32,
        submitted_ns: u64,
    },
    /// A merged request of several blocks' operations completes
    /// (`merged.rs`).
    IoRun {
        slot: u32,
        device: u8,
        dir: Op,
        submitted_ns: u64,
    },
    Issue {
        worker: u32,
    },
    /// A key-value client's command reaches the cache (`kv.rs`).
    KvCommand {
        worker: u32,
        key: u64,
        start_ns: u64,
    },
    Arrival,
    Tick,
    Sample,
    LoadChange,
    /// The configured device fails (`failure.rs`).
    DeviceFails {
        device: u8,
    },
    /// A member disk of an array device completes an operation
    /// (`arrays.rs`).
    ArrayWake {
        device: u8,
    },
}

/// When an event happens, in the queue: by time, then in the order the
/// events were pushed (`seq`, unique), so that runs are deterministic. The
/// event itself waits in `Simulator::event_slots` at `slot`, which keeps
/// the heap's entries small: the three are packed into one integer whose
/// order is theirs (time in the high 64 bits, then `seq` in 40 bits, then
/// `slot` in 24), so that the heap compares and moves 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct EventKey(u128);

/// Bits of [`EventKey`] that hold the event's slot.
const EVENT_SLOT_BITS: u32 = 24;
/// Bits of [`EventKey`] that hold the event's push order.
const EVENT_SEQ_BITS: u32 = 64 - EVENT_SLOT_BITS;

impl EventKey {
    #[inline]
    fn new(t: u64, seq: u64, slot: u32) -> EventKey {
        assert!(
            seq < 1 << EVENT_SEQ_BITS && slot < 1 << EVENT_SLOT_BITS,
            "event {seq} in slot {slot}: more events than the queue's key holds"
        );
        EventKey((t as u128) << 64 | (seq << EVENT_SLOT_BITS | slot as u64) as u128)
    }
    /// When the event happens, ns.
    #[inline]
    fn t(self) -> u64 {
        (self.0 >> 64) as u64
    }
    /// Where the event waits in `Simulator::event_slots`.
    #[inline]
    fn slot(self) -> u32 {
        (self.0 as u32) & ((1 << EVENT_SLOT_BITS) - 1)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Sub {
    /// The client request, or the key-value cache's storage request.
    req: u32,
    block: u64,
    version: u32,
    min_version: u32,
    /// `req` is a key-value storage request (`kv.rs`).
    kv: bool,
    /// A failed read of this access was tried again (`failure.rs`).
    retried: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct Req {
    start_ns: u64,
    op: Option<Op>,
    blocks_left: u32,
    bytes: u64,
    worker: u32,
}

/// What one sample interval of the time series counts: less than a
/// [`Window`], since a sample reports a mean latency, not quantiles.
#[derive(Clone, Copy, Default)]
struct SampleWindow {
    requests: u64,
    latency_sum_ns: u128,
    read_hits: u64,
    read_misses: u64,
}

impl SampleWindow {
    /// Mean latency of the interval's requests, ns (0 when none).
    fn mean_latency_ns(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / self.requests as f64
        }
    }
}

/// Counters that are snapshotted at the end of warm-up.
#[derive(Clone, Default)]
struct Window {
    requests: u64,
    bytes: u64,
    /// Bytes the clients wrote.
    write_bytes: u64,
    /// Client requests and their summed latency, ns, by operation (reads
    /// first).
    op_requests: [u64; 2],
    op_latency_sum_ns: [f64; 2],
    latency: Histogram,
    read_hits: u64,
    read_misses: u64,
}

const MAX_OPEN_OUTSTANDING: usize = 1 << 20;

/// How many requests ahead the simulator hints a block's map entry and
/// version, its policy state, and the state that state points at.
/// (0 is the request after the one being issued.)
const PREFETCH_ENTRY_AHEAD: usize = 2;
const PREFETCH_FIRST_AHEAD: usize = 1;
const PREFETCH_SECOND_AHEAD: usize = 0;

/// The dispatcher's tag of the request in slot `rid` when it covers several
/// blocks and is submitted as one access: the dispatcher reports its block
/// `i` with this tag plus `i` (see `Simulator::sub_of`). A one-block
/// request's tag is its sub's index, below 2^32.
#[inline]
fn range_tag(rid: u32) -> u64 {
    (rid as u64 + 1) << 32
}

/// Stores `value` in a free slot of `items` (reusing `free`), returning its index.
#[inline]
fn slab_insert<T>(items: &mut Vec<T>, free: &mut Vec<u32>, value: T) -> u32 {
    match free.pop() {
        Some(i) => {
            items[i as usize] = value;
            i
        }
        None => {
            items.push(value);
            (items.len() - 1) as u32
        }
    }
}

/// The version checker's state of one block.
#[derive(Clone, Copy, Debug, Default)]
struct Versions {
    /// Versions written (submitted) so far.
    issued: u32,
    /// The newest version whose write was acknowledged.
    acked: u32,
}

/// The largest volume whose placement map the simulator keeps dense
/// (16 bytes a block: 2 GiB).
const DENSE_MAP_MAX_BLOCKS: u64 = 1 << 27;

/// A simulation in progress.
pub struct Simulator {
    r: Resolved,
    dispatcher: Dispatcher,
    devices: Vec<SimDevice>,
    /// Per device: the disk array whose queue times its operations
    /// instead of its model (`array.rs` in the device crate).
    arrays: Vec<Option<arrays::SimArray>>,
    /// Whether any device is an array.
    any_array: bool,
    content: Vec<Vec<u32>>,
    /// Per block: the versions written and acknowledged so far, side by side
    /// so that an access's submission and acknowledgement touch one cache
    /// line.
    versions: Vec<Versions>,
    workload: Workload,
    events: BinaryHeap<Reverse<EventKey>>,
    /// The events queued in `events`, by slot, and the free slots.
    event_slots: Vec<Ev>,
    free_event_slots: Vec<u32>,
    seq: u64,
    now: u64,
    subs: Vec<Sub>,
    free_subs: Vec<u32>,
    reqs: Vec<Req>,
    free_reqs: Vec<u32>,
    /// Per request slot: the subs of a request of several blocks, which is
    /// submitted as one access (see [`range_tag`]).
    req_subs: Vec<Vec<u32>>,
    obs: ObservationBuilder,
    tick_ns: Option<u64>,
    /// A closed-loop worker's think time between requests.
    think_ns: u64,
    block_size: u64,
    warmup_ns: u64,
    end_ns: u64,
    measuring: bool,
    window: Window,
    dev_at_warmup: Vec<DeviceCounters>,
    sample_ns: u64,
    sample_acc: SampleWindow,
    sample_dev_bytes: Vec<u64>,
    samples: Vec<Sample>,
    running_workers: u32,
    retiring: u32,
    next_worker: u32,
    open_rate: f64,
    load_factor: f64,
    /// The load (`Sample::load`) integrated over the sample interval so
    /// far, load × ns, and the time up to which it is integrated.
    load_integral: f64,
    load_integrated_to_ns: u64,
    rng: Rng,
    reads_checked: u64,
    dropped: u64,
    events_processed: u64,
    violation: Option<String>,
    /// The key-value clients, in a key-value run.
    kv: Option<kv::KvFront>,
    /// Where a trace run is in its trace.
    trace: Option<TraceCursor>,
    /// Merged device requests in flight (`merged.rs`).
    merging: merged::Merging,
    /// Devices that have failed (bit per device).
    dead_devices: u8,
    /// What the run's device failure did, once it happened.
    failure: Option<crate::failure::FailureResult>,
}

/// Each device's timing model, seeded from the run's seed.
fn device_models(r: &Resolved) -> Vec<SimDevice> {
    let cfg = &r.cfg;
    r.devices
        .iter()
        .enumerate()
        .map(|(d, (_, m))| {
            let seed = tiermux_core::rng::splitmix64(cfg.seed ^ (d as u64 + 1) << 48);
            SimDevice::seeded(m.clone(), seed)
        })
        .collect()
}

impl Simulator {
    /// Builds a simulator for a validated configuration.
    pub fn new(r: Resolved) -> Result<Self, SimError> {
        let cfg = &r.cfg;
        let volume = volume_spec(cfg, &r.devices, r.volume_blocks);
        let policy = build_policy(&cfg.policy, &r.params, &volume, cfg.seed)?;
        Self::with_policy(r, policy)
    }

    /// Builds a simulator that runs `policy` (for policies outside the
    /// registry, such as test doubles) instead of the configured one.
    pub fn with_policy(
        r: Resolved,
        policy: Box<dyn tiermux_core::Policy>,
    ) -> Result<Self, SimError> {
        let cfg = &r.cfg;
        let tick_ns = policy.tick_interval_ns();
        let content = (0..r.devices.len())
            .map(|d| vec![0u32; policy.address_space(d) as usize])
            .collect();
        let home = volume_spec(cfg, &r.devices, r.volume_blocks)
            .home()
            .ok_or_else(|| {
                SimError::Config(ConfigError::new(
                    "roles",
                    "the simulator needs a device with the role 'home'",
                ))
            })?;
        let mut dispatcher = Dispatcher::new(policy, home);
        // The simulator keeps per-block state for the whole volume anyway
        // (`versions`): a dense map trades 16 bytes a block for lookups
        // without hashing, up to volumes of 2 GiB of entries.
        if r.volume_blocks <= DENSE_MAP_MAX_BLOCKS {
            dispatcher.make_map_dense(r.volume_blocks);
        }
        let (devices, arrays) = (device_models(&r), arrays::arrays_of(&r));
        let n_dev = devices.len();
        let workload = Workload::new(
            &cfg.workload,
            r.working_set,
            r.volume_blocks,
            cfg.seed ^ 0x5157,
        );
        let warmup_ns = (cfg.warmup_s * 1e9) as u64;
        let end_ns = (cfg.duration_s * 1e9) as u64;
        Ok(Simulator {
            dispatcher,
            devices,
            any_array: arrays.iter().any(Option::is_some),
            arrays,
            content,
            versions: vec![Versions::default(); r.volume_blocks as usize],
            workload,
            events: BinaryHeap::new(),
            event_slots: Vec::new(),
            free_event_slots: Vec::new(),
            seq: 0,
            now: 0,
            subs: Vec::new(),
            free_subs: Vec::new(),
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            req_subs: Vec::new(),
            obs: ObservationBuilder::new(n_dev, 0, cfg.block_size as u64),
            tick_ns,
            think_ns: (cfg.client.think_time_us * 1e3) as u64,
            block_size: cfg.block_size as u64,
            warmup_ns,
            end_ns,
            measuring: warmup_ns == 0,
            window: Window::default(),
            dev_at_warmup: vec![DeviceCounters::default(); n_dev],
            sample_ns: ((cfg.sample_interval_ms * 1e6) as u64).max(1),
            sample_acc: SampleWindow::default(),
            sample_dev_bytes: vec![0; n_dev],
            samples: Vec::new(),
            running_workers: 0,
            retiring: 0,
            next_worker: 0,
            open_rate: 0.0,
            load_factor: 1.0,
            load_integral: 0.0,
            load_integrated_to_ns: 0,
            rng: Rng::new(cfg.seed ^ 0xC11E),
            reads_checked: 0,
            dropped: 0,
            events_processed: 0,
            violation: None,
            kv: kv::front_for(&r),
            trace: r.trace.clone().map(TraceCursor::new),
            merging: merged::Merging::default(),
            dead_devices: 0,
            failure: None,
            r,
        })
    }

    #[inline]
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        let slot = slab_insert(&mut self.event_slots, &mut self.free_event_slots, ev);
        self.events.push(Reverse(EventKey::new(t, self.seq, slot)));
    }

    fn prefill(&mut self) {
        let cfg = &self.r.cfg;
        let n = cfg
            .prefill_blocks
            .unwrap_or(cfg.cache_blocks)
            .min(self.r.working_set);
        self.dispatcher.reserve_entries(n as usize);
        for rank in 0..n {
            let block = self.workload.block_of_rank(rank);
            if !self.dispatcher.warm(block) {
                break;
            }
        }
    }

    /// Runs to the end and returns the measurements.
    pub fn run(self) -> Result<RunResult, SimError> {
        self.run_sharing(None)
    }

    /// Runs to the end, a key-value run starting from `share`'s prefill
    /// where it holds one for the run, and returns the measurements.
    pub fn run_sharing(mut self, share: Option<&PrefillShare>) -> Result<RunResult, SimError> {
        match self.r.cfg.kv.as_ref().map(|k| k.prefill) {
            Some(true) => self.kv_prefill(share),
            Some(false) => {}
            // A trace run starts cold: its hot blocks are not known ahead.
            None if self.r.cfg.prefill && self.trace.is_none() => self.prefill(),
            None => {}
        }
        let schedule = self.r.cfg.client.schedule.clone();
        match self.r.client {
            ClientMode::Closed { workers } => {
                self.set_workers((workers as f64 * schedule.factor(0.0)).round().max(1.0) as u32);
            }
            ClientMode::Open { rate_ops_per_s } => {
                self.open_rate = rate_ops_per_s;
                self.load_factor = schedule.factor(0.0);
                self.push(0, Ev::Arrival);
            }
            ClientMode::Recorded { .. } => self.push_recorded_arrival(),
            ClientMode::Load { .. } => unreachable!("load is resolved by run()"),
        }
        for t in schedule.change_points(self.r.cfg.duration_s, 0.01) {
            self.push((t * 1e9) as u64, Ev::LoadChange);
        }
        if let Some(t) = self.tick_ns {
            self.push(t, Ev::Tick);
        }
        self.push(self.sample_ns, Ev::Sample);
        self.schedule_failure();
        while let Some(Reverse(key)) = self.events.pop() {
            if key.t() > self.end_ns {
                break;
            }
            self.now = key.t();
            let ev = self.event_slots[key.slot() as usize];
            self.free_event_slots.push(key.slot());
            if !self.measuring && self.now >= self.warmup_ns {
                self.start_measuring();
            }
            self.events_processed += 1;
            match ev {
                Ev::Io {
                    flight,
                    index,
                    device,
                    dir,
                    addr,
                    data,
                    submitted_ns,
                } => self.io_done(flight, index, device, dir, addr, data, submitted_ns),
                Ev::IoRun {
                    slot,
                    device,
                    dir,
                    submitted_ns,
                } => self.run_done(slot, device, dir, submitted_ns),
                Ev::Issue { worker } => self.issue(worker),
                Ev::KvCommand {
                    worker,
                    key,
                    start_ns,
                } => self.kv_command(worker, key, start_ns),
                Ev::Arrival => self.arrival(),
                Ev::Tick => self.tick(),
                Ev::Sample => self.sample(),
                Ev::LoadChange => self.load_change(),
                Ev::DeviceFails { device } => self.device_fails(device),
                Ev::ArrayWake { device } => self.array_wake(device as usize),
            }
            if let Some(v) = self.violation.take() {
                return Err(SimError::Consistency(v));
            }
        }
        self.now = self.end_ns;
        if !self.measuring {
            self.start_measuring();
        }
        Ok(self.finish())
    }

    fn set_workers(&mut self, target: u32) {
        let effective = self.running_workers - self.retiring;
        if target > effective {
            let mut add = target - effective;
            let cancel = add.min(self.retiring);
            self.retiring -= cancel;
            add -= cancel;
            for _ in 0..add {
                let w = self.next_worker;
                self.next_worker += 1;
                self.running_workers += 1;
                self.push(self.now, Ev::Issue { worker: w });
            }
        } else {
            self.retiring += effective - target;
        }
    }

    fn load_change(&mut self) {
        self.integrate_load();
        let t_s = self.now as f64 / 1e9;
        let f = self.r.cfg.client.schedule.factor(t_s);
        match self.r.client {
            ClientMode::Closed { workers } => {
                self.set_workers((workers as f64 * f).round().max(1.0) as u32)
            }
            ClientMode::Open { .. } | ClientMode::Load { .. } => self.load_factor = f,
            ClientMode::Recorded { .. } => {}
        }
    }

    /// Schedules the trace's next request at its recorded time, sped up.
    fn push_recorded_arrival(&mut self) {
        let ClientMode::Recorded { speedup } = self.r.client else {
            unreachable!("recorded arrivals in a recorded-time run only")
        };
        if let Some(t) = self.trace.as_ref().and_then(|c| c.next_time_ns()) {
            let at = ((t as f64 / speedup) as u64).max(self.now);
            self.push(at, Ev::Arrival);
        }
    }

    /// Ends a trace run once its last request is done: the measurements
    /// stop there, not at `duration_s`.
    fn end_if_trace_done(&mut self) {
        let outstanding = self.reqs.len() - self.free_reqs.len();
        if outstanding == 0 && self.trace.as_ref().is_some_and(|c| c.is_done()) {
            self.end_ns = self.end_ns.min(self.now);
        }
    }

    fn arrival(&mut self) {
        let outstanding = self.reqs.len() - self.free_reqs.len();
        if outstanding < MAX_OPEN_OUTSTANDING {
            self.issue(u32::MAX);
        } else {
            self.dropped += 1;
            if let Some(c) = self.trace.as_mut() {
                c.next_request();
            }
        }
        if let ClientMode::Recorded { .. } = self.r.client {
            return self.push_recorded_arrival();
        }
        if self.trace.as_ref().is_some_and(|c| c.is_done()) {
            return;
        }
        let rate = self.open_rate * self.load_factor;
        if rate > 0.0 {
            let gap = self.rng.exponential(1e9 / rate).max(1.0) as u64;
            self.push(self.now + gap, Ev::Arrival);
        }
    }

    fn issue(&mut self, worker: u32) {
        if self.kv.is_some() {
            return self.kv_issue(worker, kv::CHOOSE_KEY);
        }
        let g = match self.trace.as_mut() {
            None => self.workload.next(self.now),
            Some(c) => match c.next_request() {
                Some(g) => g,
                None => {
                    // The trace is done: this worker stops.
                    if worker != u32::MAX {
                        self.integrate_load();
                        self.running_workers -= 1;
                    }
                    return self.end_if_trace_done();
                }
            },
        };
        if let Some((first, end)) = g.discard {
            self.discard(first, end);
        }
        self.prefetch_ahead(g.block);
        let req = Req {
            start_ns: self.now,
            op: Some(g.op),
            blocks_left: g.blocks,
            bytes: g.blocks as u64 * self.block_size,
            worker,
        };
        let rid = slab_insert(&mut self.reqs, &mut self.free_reqs, req);
        if g.blocks == 1 {
            let sid = self.block_sub(rid, g.block, g.op, false);
            self.dispatcher
                .submit(sid as u64, Access::one(g.block, g.op));
        } else {
            if self.req_subs.len() <= rid as usize {
                self.req_subs.resize_with(rid as usize + 1, Vec::new);
            }
            let mut subs = std::mem::take(&mut self.req_subs[rid as usize]);
            subs.clear();
            for i in 0..g.blocks as u64 {
                subs.push(self.block_sub(rid, g.block + i, g.op, false));
            }
            self.req_subs[rid as usize] = subs;
            self.dispatcher
                .submit(range_tag(rid), Access::range(g.block, g.blocks, g.op));
        }
        self.drain();
    }

    /// The sub of the block the dispatcher reports with `tag`.
    #[inline]
    fn sub_of(&self, tag: u64) -> u32 {
        if tag >> 32 == 0 {
            tag as u32
        } else {
            self.sub_in_range(tag)
        }
    }

    /// The sub of a block of a request submitted as one access.
    #[inline(never)]
    fn sub_in_range(&self, tag: u64) -> u32 {
        self.req_subs[(tag >> 32) as usize - 1][(tag & u32::MAX as u64) as usize]
    }

    /// The workload frees blocks `first..end`: the policy drops what it
    /// keeps of them, under each block's lock and ahead of any later
    /// access (the dispatcher takes work in order), with no I/O and no
    /// time. The workload reads none of them before writing it again.
    fn discard(&mut self, first: u64, end: u64) {
        for block in self.dispatcher.discard(first, end) {
            self.dispatcher.submit_trim(NO_TAG, block);
        }
    }

    /// Hints the state of the next requests' blocks to the CPU (see
    /// `tiermux_core::prefetch`): the per-block arrays of a large volume
    /// (map, version checker, replacement nodes, device contents) are far
    /// larger than the CPU's caches, and hinting a few requests ahead lets
    /// their memory accesses overlap. Each stage reads what the stage before
    /// it hinted one request earlier. A workload that cannot be looked
    /// ahead (it changes with time) hints only `block`, the request being
    /// issued: its map entry and version.
    #[inline]
    fn prefetch_ahead(&mut self, block: u64) {
        use tiermux_core::prefetch::{prefetch_at, Stage};
        let Some(b) = self.peek_block(PREFETCH_ENTRY_AHEAD) else {
            self.dispatcher.prefetch_entry(block);
            prefetch_at(&self.versions, block as usize);
            return;
        };
        self.dispatcher.prefetch_entry(b);
        prefetch_at(&self.versions, b as usize);
        if let Some(b) = self.peek_block(PREFETCH_FIRST_AHEAD) {
            let e = self.dispatcher.prefetch_state(b, Stage::First);
            let home = self.dispatcher.map().home();
            for d in 0..self.content.len().min(tiermux_core::map::LOC_DEVICES) {
                if d as u8 != home && e.valid_on(d as u8) {
                    prefetch_at(&self.content[d], e.loc(d as u8) as usize);
                }
            }
        }
        if let Some(b) = self.peek_block(PREFETCH_SECOND_AHEAD) {
            self.dispatcher.prefetch_state(b, Stage::Second);
        }
    }

    /// The first block of the request `k` places after the next one: from
    /// the trace, or from the workload when it can look ahead.
    #[inline]
    fn peek_block(&mut self, k: usize) -> Option<u64> {
        match self.trace.as_ref() {
            Some(c) => c.peek_block(k),
            None => self.workload.peek_block(k),
        }
    }

    /// Records an access to `block` for request `req` with the version
    /// checker and returns its tag for the dispatcher.
    fn block_sub(&mut self, req: u32, block: u64, op: Op, kv: bool) -> u32 {
        let b = block as usize;
        let (version, min_version) = match op {
            Op::Write => {
                self.versions[b].issued += 1;
                (self.versions[b].issued, 0)
            }
            Op::Read => (0, self.versions[b].acked),
        };
        let sub = Sub {
            req,
            block,
            version,
            min_version,
            kv,
            retried: false,
        };
        slab_insert(&mut self.subs, &mut self.free_subs, sub)
    }

    fn drain(&mut self) {
        loop {
            if let Some(first) = self.dispatcher.pop_ready() {
                if self.issue_ready(first) {
                    continue;
                }
                // Nothing else was ready, and submitting makes nothing
                // ready: go on to the acknowledgements.
            }
            let Some(a) = self.dispatcher.pop_acked() else {
                break;
            };
            if a.failed {
                self.failed_sub(a);
            } else {
                let sid = self.sub_of(a.tag);
                self.acked_sub(sid, a.access.op, a.outcome, a.payload as u32);
            }
        }
    }

    /// Asserts that `addr` is inside device `d`: a policy that addresses
    /// past it has a bug.
    #[inline(always)]
    fn assert_addressable(&self, d: usize, addr: u64) {
        assert!(
            (addr as usize) < self.content[d].len(),
            "policy '{}' addressed block {addr} of device {d}, which has {}",
            self.dispatcher.policy().name(),
            self.content[d].len()
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn io_done(
        &mut self,
        flight: u32,
        index: tiermux_core::PlanIndex,
        device: u8,
        dir: Op,
        addr: u64,
        data: u32,
        submitted_ns: u64,
    ) {
        let d = device as usize;
        self.assert_addressable(d, addr);
        self.devices[d].complete(dir);
        if self.is_dead(device) {
            self.dispatcher.fail(flight, index);
            return self.drain();
        }
        self.obs
            .device_op(d, dir, self.block_size, self.now - submitted_ns);
        let payload = match dir {
            Op::Read => self.content[d][addr as usize] as u64,
            Op::Write => {
                self.content[d][addr as usize] = data;
                0
            }
        };
        self.dispatcher.complete(flight, index, payload);
        self.drain();
    }

    fn acked_sub(&mut self, sid: u32, op: Op, outcome: Outcome, payload: u32) {
        let s = self.subs[sid as usize];
        self.free_subs.push(sid);
        let b = s.block as usize;
        match op {
            Op::Read => {
                self.reads_checked += 1;
                if (payload < s.min_version || payload > self.versions[b].issued)
                    && self.violation.is_none()
                {
                    {
                        self.violation = Some(format!(
                            "policy '{}' at t={} ns: read of block {} returned version {payload}, but version {} was acknowledged before the read (latest written {})",
                            self.dispatcher.policy().name(),
                            self.now,
                            s.block,
                            s.min_version,
                            self.versions[b].issued
                        ));
                    }
                }
            }
            Op::Write => {
                if s.version > self.versions[b].acked {
                    self.versions[b].acked = s.version;
                }
            }
        }
        self.obs.outcome(op, outcome);
        if s.kv {
            return self.kv_block_done(s.req);
        }
        if op == Op::Read {
            let (hit, miss) = match outcome {
                Outcome::Hit(_) => (1, 0),
                Outcome::Miss => (0, 1),
                Outcome::NotApplicable => (0, 0),
            };
            self.window.read_hits += hit;
            self.window.read_misses += miss;
            self.sample_acc.read_hits += hit;
            self.sample_acc.read_misses += miss;
        }
        self.block_done(s.req);
    }

    /// One block of client request `rid` is done.
    fn block_done(&mut self, rid: u32) {
        let req = &mut self.reqs[rid as usize];
        req.blocks_left = req
            .blocks_left
            .checked_sub(1)
            .expect("more blocks acknowledged than requested");
        if req.blocks_left == 0 {
            let req = *req;
            self.free_reqs.push(rid);
            self.request_done(req);
        }
    }

    fn request_done(&mut self, req: Req) {
        self.record_request(&req);
        self.next_for_worker(req.worker);
        self.end_if_trace_done();
    }

    /// Counts a finished request in the measurements.
    fn record_request(&mut self, req: &Req) {
        let lat = self.now - req.start_ns;
        let op = req.op.expect("request op");
        self.obs.client_op(op, req.bytes, lat);
        if self.measuring {
            self.window.requests += 1;
            self.window.bytes += req.bytes;
            if op == Op::Write {
                self.window.write_bytes += req.bytes;
            }
            let i = usize::from(op == Op::Write);
            self.window.op_requests[i] += 1;
            self.window.op_latency_sum_ns[i] += lat as f64;
            self.window.latency.record(lat);
        }
        self.sample_acc.requests += 1;
        self.sample_acc.latency_sum_ns += lat as u128;
    }

    /// A closed-loop worker finished a request: it retires, or issues its
    /// next after its think time.
    fn next_for_worker(&mut self, worker: u32) {
        if worker == u32::MAX {
            return;
        }
        if self.retiring > 0 {
            self.retiring -= 1;
            self.running_workers -= 1;
        } else {
            let think = self.think_ns;
            if think == 0 {
                self.issue(worker);
            } else {
                self.push(self.now + think, Ev::Issue { worker });
            }
        }
    }

    fn tick(&mut self) {
        for (i, d) in self.devices.iter().enumerate() {
            let (r, w) = d.inflight();
            self.obs.inflight(i, r, w);
        }
        let obs = self.obs.finish(self.now);
        self.dispatcher.tick(obs);
        self.obs.reset();
        self.drain();
        if let Some(t) = self.tick_ns {
            self.push(self.now + t, Ev::Tick);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EventKey;

    #[test]
    fn event_keys_order_by_time_then_push_order_and_give_back_their_fields() {
        let max_slot = (1 << super::EVENT_SLOT_BITS) - 1;
        let keys = [
            EventKey::new(5, 1, max_slot),
            EventKey::new(5, 2, 0),
            EventKey::new(6, 0, 7),
            EventKey::new(u64::MAX, (1 << super::EVENT_SEQ_BITS) - 1, 3),
        ];
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1], "{pair:?}");
        }
        assert_eq!((keys[0].t(), keys[0].slot()), (5, max_slot));
        assert_eq!((keys[2].t(), keys[2].slot()), (6, 7));
        assert_eq!((keys[3].t(), keys[3].slot()), (u64::MAX, 3));
    }

    #[test]
    #[should_panic(expected = "more events than the queue's key holds")]
    fn an_event_slot_past_the_key_is_refused() {
        EventKey::new(0, 0, 1 << super::EVENT_SLOT_BITS);
    }
}
