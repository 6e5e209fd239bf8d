//! The driver the tracking tests share: a volume whose operations
//! complete in random order, a version per device location, and the checks
//! described in `tracking.rs`.

use std::collections::{HashMap, HashSet};

use tiermux_core::dispatch::MapEvent;
use tiermux_core::observe::DeviceObservation;
use tiermux_core::policy::{DeviceRole, DeviceSpec, VolumeSpec};
use tiermux_core::rng::Rng;
use tiermux_core::{build_policy, Access, Dispatcher, Observation, Op, ParamValue, Params};

/// Blocks in the volumes.
const VOL_BLOCKS: u64 = 200;
/// Blocks each cache device holds.
const CACHE_BLOCKS: u64 = 24;

/// Two devices: a cache of `CACHE_BLOCKS` over a home of `VOL_BLOCKS`.
pub fn volume() -> VolumeSpec {
    VolumeSpec {
        num_blocks: VOL_BLOCKS,
        block_size: 4096,
        devices: vec![
            DeviceSpec {
                name: "fast".into(),
                capacity_blocks: CACHE_BLOCKS,
                role: DeviceRole::Cache,
            },
            DeviceSpec {
                name: "slow".into(),
                capacity_blocks: VOL_BLOCKS,
                role: DeviceRole::Home,
            },
        ],
    }
}

/// Two stacked caches (a small fast one over a larger middle one) over the
/// home device.
pub fn volume3() -> VolumeSpec {
    let mut v = volume();
    v.devices.insert(
        1,
        DeviceSpec {
            name: "middle".into(),
            capacity_blocks: CACHE_BLOCKS * 2,
            role: DeviceRole::Cache,
        },
    );
    v
}

/// TICA's hierarchy: DRAM, a read-optimized and a write-optimized SSD
/// over the home device.
pub fn volume4() -> VolumeSpec {
    let mut v = volume();
    v.devices[0].capacity_blocks = CACHE_BLOCKS / 2;
    for name in ["ro", "wo"] {
        v.devices.insert(
            v.devices.len() - 1,
            DeviceSpec {
                name: name.into(),
                capacity_blocks: CACHE_BLOCKS,
                role: DeviceRole::Cache,
            },
        );
    }
    v
}

/// The volume each policy runs on: TICA needs its four devices.
pub fn volume_for(policy: &str) -> VolumeSpec {
    if tiermux_core::policies::tica::on_dram_and_two_ssds(policy) {
        volume4()
    } else {
        volume()
    }
}

/// `policy`'s parameters for these runs: `write_mode`, and windows and
/// quanta short enough for its controller to act within a run.
pub fn params(policy: &str, write_mode: &str) -> Params {
    let mut p = Params::new();
    if matches!(
        policy,
        "split" | "stripe" | "passthrough" | "hybrid-lru" | "hybrid-arc"
    ) || tiermux_core::policies::tica::on_dram_and_two_ssds(policy)
    {
        return p;
    }
    if policy == "hibachi" {
        // Short runs of dirty pages are flushed together.
        p.set("run_threshold", ParamValue::Int(2));
        return p;
    }
    if matches!(
        policy,
        "hemem" | "most" | "batman" | "colloid" | "colloid+" | "colloid++"
    ) {
        p.set("segment_blocks", ParamValue::Int(4));
        p.set("quantum_ms", ParamValue::Float(0.1));
        p.set("hot_threshold", ParamValue::Int(2));
        p.set("cooling_threshold", ParamValue::Int(6));
        if policy == "batman" {
            p.set("perf_access_share", ParamValue::Float(0.5));
        }
        if policy.starts_with("colloid") {
            p.set("latency_alpha", ParamValue::Float(1.0));
        }
        if policy == "most" {
            p.set("ratio_step", ParamValue::Float(0.25));
            p.set("latency_alpha", ParamValue::Float(1.0));
            p.set("clean_min_rewrite_distance", ParamValue::Float(1.0));
        }
        return p;
    }
    let s = |v: &str| ParamValue::Str(v.into());
    p.set("write_mode", s(write_mode));
    p.set("dirty_high_ratio", ParamValue::Float(0.3));
    p.set("dirty_low_ratio", ParamValue::Float(0.1));
    p.set("flush_max_inflight", ParamValue::Int(2));
    if policy != "classic" && policy != "stacked" {
        p.set("window_ms", ParamValue::Float(0.1));
    }
    if policy == "nhc" || policy.starts_with("sib") {
        p.set("min_window_ops", ParamValue::Int(4));
    }
    p
}

/// Versions stored at (device, address), and the last acknowledged write.
struct World {
    stored: HashMap<(u8, u64), u64>,
    acked: HashMap<u64, u64>,
    next_version: u64,
    pending: Vec<tiermux_core::Ready>,
    reads_checked: u64,
    label: String,
    devices: usize,
    /// Operations that fail, per thousand.
    fail_per_mille: u64,
    /// Every version written to each block.
    issued: HashMap<u64, Vec<u64>>,
    /// Blocks with a failed write or a trim since their last acknowledged
    /// write.
    uncertain: HashSet<u64>,
    /// Whether the run submits trims, and their tags.
    trims: bool,
    trimmed: HashSet<u64>,
    failed_reads: u64,
    /// Cache places a block's saved entry may name while its plan runs
    /// (its pre-entry), with the block, until the plan finishes.
    guarded: HashMap<(u8, u64), u64>,
    /// The pre-entries of blocks whose plans run: what a failure would
    /// fall back to.
    pre_entries: HashMap<u64, tiermux_core::Entry>,
    /// Points at which the loss of each cache device was checked, and the
    /// most blocks each loss would have cost at one point.
    failure_points: u64,
    most_lost: [u64; 8],
    /// A device that has died: every operation on it fails, and a write
    /// to it reaches nothing.
    dead: Option<u8>,
    /// Blocks whose newest data was only on the dead device when it died
    /// (until written again): their reads may fail.
    at_risk: HashSet<u64>,
    at_risk_failed_reads: u64,
    /// With live changes: the policy's name and running parameters, which
    /// random changes replace now and then.
    live: Option<(String, Params)>,
    /// Live changes applied, and those the config checks refused.
    live_changes: u64,
    live_refused: u64,
}

impl World {
    fn drive(
        &mut self,
        d: &mut Dispatcher,
        rng: &mut Rng,
        steps: usize,
        writes: &mut HashMap<u64, u64>,
    ) {
        // Tags start again each round (the volume is idle between rounds).
        writes.clear();
        let mut tag = 0u64;
        for step in 0..steps {
            match rng.below(10) {
                0..=3 => {
                    // One block, or now and then a range of 2 to 6 (the
                    // dispatcher reports block `i` with tag `tag + i`).
                    let blocks = match rng.below(4) {
                        0 => 2 + rng.below(5),
                        _ => 1,
                    };
                    let first = rng.below(VOL_BLOCKS / 2 - blocks + 1);
                    let op = if rng.below(3) == 0 {
                        Op::Write
                    } else {
                        Op::Read
                    };
                    let first_tag = tag + 1;
                    for block in first..first + blocks {
                        tag += 1;
                        if op == Op::Write {
                            self.next_version += 1;
                            writes.insert(tag, self.next_version);
                            self.issued
                                .entry(block)
                                .or_default()
                                .push(self.next_version);
                        }
                    }
                    d.submit(first_tag, Access::range(first, blocks as u32, op));
                }
                5 if self.trims => {
                    // A discard of 1 to 8 blocks (whole segments at
                    // times): each block it trims then reads as some
                    // earlier version (checked like a failed write's).
                    let first = rng.below(VOL_BLOCKS / 2);
                    for block in d.discard(first, first + 1 + rng.below(8)) {
                        tag += 1;
                        self.trimmed.insert(tag);
                        d.submit_trim(tag, block);
                    }
                }
                4 => {
                    // The fast device looks overloaded (10x the others'
                    // latency), so that load-balancing controllers act.
                    let devices = (0..self.devices)
                        .map(|i| DeviceObservation {
                            read_ops: 10,
                            read_latency_sum_ns: if i == 0 { 1_000_000 } else { 100_000 },
                            latency_sum_ns: if i == 0 { 1_000_000 } else { 100_000 },
                            inflight_reads: if i == 0 { 10 } else { 1 },
                            ..Default::default()
                        })
                        .collect();
                    let obs = Observation {
                        now_ns: step as u64 * 100_000,
                        interval_ns: 100_000,
                        devices,
                        ..Observation::default()
                    };
                    d.tick(&obs);
                }
                6 if self.live.is_some() && rng.below(4) == 0 => self.change_live(d, rng),
                _ => {}
            }
            self.pump(d, rng, writes, false);
            if self.fail_per_mille == 0 {
                self.count_single_failure_losses(d);
            }
        }
        self.pump(d, rng, writes, true);
        assert!(d.is_idle());
    }

    fn pump(&mut self, d: &mut Dispatcher, rng: &mut Rng, writes: &HashMap<u64, u64>, drain: bool) {
        loop {
            self.check_events(d, writes);
            while let Some(r) = d.pop_ready() {
                self.check_guard(d, &r);
                self.pending.push(r);
            }
            while let Some(a) = d.pop_acked() {
                match a.access.op {
                    // Settled when the plan finishes (`check_events`).
                    Op::Write => {}
                    Op::Read if a.failed && self.at_risk.contains(&a.access.block) => {
                        self.at_risk_failed_reads += 1
                    }
                    Op::Read if a.failed => self.failed_reads += 1,
                    Op::Read if self.uncertain.contains(&a.access.block) => {
                        let written = self.issued.get(&a.access.block);
                        assert!(
                            a.payload == 0 || written.is_some_and(|w| w.contains(&a.payload)),
                            "{}: block {} read version {}, never written to it",
                            self.label,
                            a.access.block,
                            a.payload
                        );
                        self.reads_checked += 1;
                    }
                    Op::Read => {
                        let want = self.acked.get(&a.access.block).copied().unwrap_or(0);
                        assert_eq!(
                            a.payload, want,
                            "{}: block {} read a stale version",
                            self.label, a.access.block
                        );
                        self.reads_checked += 1;
                    }
                }
            }
            if self.pending.is_empty() || (!drain && rng.below(3) == 0) {
                return;
            }
            let r = self
                .pending
                .swap_remove(rng.below(self.pending.len() as u64) as usize);
            let key = (r.io.device, r.io.addr);
            if Some(r.io.device) == self.dead {
                d.fail(r.flight, r.index);
                continue;
            }
            if rng.below(1000) < self.fail_per_mille {
                // A failed write reaches its location or not.
                if r.io.dir == Op::Write && rng.below(2) == 0 {
                    let v = if r.io.purpose == tiermux_core::Purpose::Client {
                        writes[&r.tag]
                    } else {
                        r.src_payload
                    };
                    self.stored.insert(key, v);
                }
                d.fail(r.flight, r.index);
                continue;
            }
            let payload = match r.io.dir {
                Op::Read => self.stored.get(&key).copied().unwrap_or(0),
                Op::Write => {
                    let v = if r.io.purpose == tiermux_core::Purpose::Client {
                        writes[&r.tag]
                    } else {
                        r.src_payload
                    };
                    self.stored.insert(key, v);
                    0
                }
            };
            d.complete(r.flight, r.index, payload);
        }
    }
}

impl World {
    /// Changes one random live parameter of the running policy, checked as
    /// a driver does: a policy built from the whole new table must accept
    /// it (else the change is refused and nothing changes).
    fn change_live(&mut self, d: &mut Dispatcher, rng: &mut Rng) {
        let names = d.policy().live_params();
        let (policy, running) = self.live.as_mut().expect("live changes on");
        if names.is_empty() {
            return;
        }
        let name = names[rng.below(names.len() as u64) as usize];
        let mut next = running.clone();
        next.set(name, random_value(name, rng));
        let vol = volume_for(policy);
        if build_policy(policy, &next, &vol, 0).is_err() {
            self.live_refused += 1;
            return;
        }
        d.reconfigure(&next)
            .unwrap_or_else(|e| panic!("{}: {name}: {e}", self.label));
        *running = next;
        self.live_changes += 1;
    }

    /// A caching policy running in a mode other than write-back flushes
    /// every dirty block once the volume is idle, within a few ticks.
    fn check_drained(&mut self, d: &mut Dispatcher, rng: &mut Rng, writes: &HashMap<u64, u64>) {
        let Some((_, running)) = &self.live else {
            return;
        };
        let mode = match running.get("write_mode") {
            Some(ParamValue::Str(m)) => m.clone(),
            _ => "wa".into(),
        };
        if d.policy().layout() != "cache" || mode == "wb" {
            return;
        }
        for _ in 0..3 {
            if count(d).1 == 0.0 {
                break;
            }
            let obs = Observation {
                devices: vec![DeviceObservation::default(); self.devices],
                ..Observation::default()
            };
            d.tick(&obs);
            self.pump(d, rng, writes, true);
        }
        assert_eq!(
            count(d).1,
            0.0,
            "{}: dirty blocks left in {mode}",
            self.label
        );
    }

    /// For each cache device: the blocks whose acknowledged data (or a
    /// later version in flight) no current copy elsewhere holds, that is,
    /// the blocks the device's failure at this moment would lose.
    fn count_single_failure_losses(&mut self, d: &Dispatcher) {
        let home = d.map().home();
        let mut lost = [0u64; 8];
        for (&b, &v) in &self.acked {
            if self.uncertain.contains(&b) {
                continue;
            }
            // A block whose plan runs falls back to its pre-entry when an
            // operation fails.
            let e = self
                .pre_entries
                .get(&b)
                .copied()
                .unwrap_or_else(|| d.map().get(b));
            let current = tiermux_core::safe::current_copies(&e);
            let holds = |dev: u8| {
                let place = if dev == home { b } else { e.loc(dev) as u64 };
                let got = self.stored.get(&(dev, place)).copied().unwrap_or(0);
                got == v || (got > v && self.issued[&b].contains(&got))
            };
            for (f, n) in lost.iter_mut().enumerate().take(self.devices) {
                let f = f as u8;
                let survives = (0..self.devices as u8)
                    .any(|dev| dev != f && current & (1 << dev) != 0 && holds(dev));
                if f != home && !survives {
                    *n += 1;
                }
            }
        }
        self.failure_points += 1;
        for (m, n) in self.most_lost.iter_mut().zip(lost) {
            *m = (*m).max(n);
        }
    }

    /// A write to a place that a block's saved entry may still name (its
    /// pre-entry while its plan runs) must be that block's own: a driver
    /// that persists the map would otherwise bring back, after a power
    /// cut, an entry pointing at another block's data.
    fn check_guard(&self, d: &Dispatcher, r: &tiermux_core::Ready) {
        let key = (r.io.device, r.io.addr);
        let Some(&owner) = self.guarded.get(&key) else {
            return;
        };
        if r.io.dir != Op::Write || key.0 == d.map().home() {
            return;
        }
        let e = d.map().get(owner);
        assert!(
            e.present & (1 << key.0) != 0 && e.loc(key.0) as u64 == key.1,
            "{}: device {} place {} written while block {owner}'s saved entry may name it (its plan has not finished)",
            self.label,
            key.0,
            key.1
        );
    }

    /// Settles finished writes; checks that blocks other than a decision's
    /// own only lose valid copies; guards the places pre-entries name.
    fn check_events(&mut self, d: &mut Dispatcher, writes: &HashMap<u64, u64>) {
        let home = d.map().home();
        while let Some(ev) = d.pop_event() {
            match &ev {
                MapEvent::Decided(dec) if dec.own.is_some() => {
                    let own = dec.own.clone().expect("own blocks");
                    for &(b, old, new) in dec.changes.iter().filter(|c| own.contains(&c.0)) {
                        let pre =
                            tiermux_core::safe::pre_entry(old, new, dec.written_devices, home);
                        self.pre_entries.insert(b, pre);
                        for dev in 0..tiermux_core::map::LOC_DEVICES as u8 {
                            if dev != home && pre.present & (1 << dev) != 0 {
                                self.guarded.insert((dev, pre.loc(dev) as u64), b);
                            }
                        }
                    }
                }
                MapEvent::Finished(f) => {
                    self.guarded.retain(|_, b| *b != f.block);
                    self.pre_entries.remove(&f.block);
                }
                _ => {}
            }
            if let MapEvent::Finished(f) = &ev {
                if self.trimmed.remove(&f.tag) {
                    self.uncertain.insert(f.block);
                } else if let Some(&v) = writes.get(&f.tag) {
                    if f.failed {
                        self.uncertain.insert(f.block);
                    } else {
                        self.acked.insert(f.block, v);
                        self.uncertain.remove(&f.block);
                        self.at_risk.remove(&f.block);
                    }
                }
            }
            check_event(ev);
        }
    }
}

/// Blocks other than a decision's own may only lose valid copies.
fn check_event(ev: MapEvent) {
    {
        if let MapEvent::Decided(dec) = ev {
            let Some(own) = dec.own else {
                return;
            };
            for (b, old, new) in &dec.changes {
                if own.contains(b) {
                    continue;
                }
                let valid = |e: &tiermux_core::Entry| e.present & !e.stale;
                assert_eq!(
                    valid(new) & !valid(old),
                    0,
                    "decision on blocks {own:?} added a copy of block {b}: {old:?} -> {new:?}"
                );
            }
        }
    }
}

/// A random value of live parameter `name`, valid alone (a pair such as
/// the dirty ratios may still disagree, which the checks must refuse).
fn random_value(name: &str, rng: &mut Rng) -> ParamValue {
    let pick = |rng: &mut Rng, of: &[&str]| {
        ParamValue::Str(of[rng.below(of.len() as u64) as usize].into())
    };
    let fraction = |rng: &mut Rng| ParamValue::Float(rng.below(11) as f64 / 10.0);
    match name {
        "write_mode" => pick(rng, &["wa", "wt", "wb"]),
        "fill" => pick(rng, &["sync", "async"]),
        "wa_write_hit" => pick(rng, &["update", "invalidate"]),
        "cleaning" => pick(rng, &["selective", "all", "off"]),
        "rewrite_counters" => pick(rng, &["lifetime", "cooled"]),
        "mirror_growth" => pick(rng, &["above_watermark", "to_maximum"]),
        "idle_latency" => pick(rng, &["keep", "unloaded"]),
        "migration_rule" => pick(rng, &["algorithm1", "away_from_slower"]),
        "heat_unit" => pick(rng, &["request", "block"]),
        "target" => pick(
            rng,
            &[
                "throughput",
                "client_throughput",
                "mean_latency",
                "p99_latency",
            ],
        ),
        "noise_aware" | "always_admit" | "swap_while_offloading" | "subpages" => {
            ParamValue::Bool(rng.below(2) == 0)
        }
        "swap_min_ratio" => ParamValue::Float([1.0, 2.0, 4.0][rng.below(3) as usize]),
        "flush_max_inflight" | "min_window_ops" => ParamValue::Int(1 + rng.below(8) as i64),
        "rounds_at_one" => ParamValue::Int(rng.below(3) as i64),
        "dirty_high_ratio"
        | "dirty_low_ratio"
        | "stable_tolerance"
        | "hit_drop_fraction"
        | "max_miss_ratio"
        | "max_miss_drift"
        | "offload_ratio_max"
        | "offload_clean_ratio"
        | "mirror_max_fraction"
        | "reclaim_free_fraction" => fraction(rng),
        "theta" => ParamValue::Float(rng.below(5) as f64 / 10.0),
        "step" | "ratio_step" => ParamValue::Float([0.01, 0.1, 0.25, 0.5][rng.below(4) as usize]),
        "latency_alpha" => ParamValue::Float([0.1, 0.5, 1.0][rng.below(3) as usize]),
        "window_ms" | "stable_window_ms" => {
            ParamValue::Float([0.05, 0.1, 1.0][rng.below(3) as usize])
        }
        "mirror_step_mb" => ParamValue::Float([0.004, 0.016, 1.0][rng.below(3) as usize]),
        "clean_min_rewrite_distance" => ParamValue::Float(rng.below(4) as f64),
        "hot_threshold" => ParamValue::Int(1 + rng.below(4) as i64),
        "cooling_threshold" => ParamValue::Int(2 + rng.below(8) as i64),
        "quantum_ms" => ParamValue::Float([0.05, 0.1, 1.0][rng.below(3) as usize]),
        "migrate_mb_per_s" => ParamValue::Float([0.01, 1.0, 1000.0][rng.below(3) as usize]),
        "max_moves_inflight" => ParamValue::Int(1 + rng.below(4) as i64),
        other => panic!("live parameter '{other}' has no random values here: add them"),
    }
}

fn count(d: &Dispatcher) -> (f64, f64) {
    if d.policy().layout() == "tiers" {
        // Tiering keeps no per-block counters: count the performance
        // device's copies in the map, which a restart must keep.
        let on_fast: Vec<_> = d.map().iter().filter(|(_, e)| e.valid_on(0)).collect();
        let dirty = on_fast.iter().filter(|(_, e)| e.dirty_on(0)).count();
        return (on_fast.len() as f64, dirty as f64);
    }
    let st = d.policy().controller_state();
    let get = |n: &str| st.iter().find(|(k, _)| *k == n).map(|x| x.1).unwrap_or(0.0);
    (get("cached_blocks"), get("dirty_blocks"))
}

/// Drives `policy` over `vol` through four rounds with a restart after
/// each; returns the most cached and dirty blocks seen at a restart, and
/// the controller state before the last restart.
pub fn exercise(
    policy: &str,
    wm: &str,
    seed: u64,
    vol: &VolumeSpec,
    fail_per_mille: u64,
) -> ((f64, f64), Vec<(String, f64)>) {
    exercise_full(policy, wm, seed, vol, fail_per_mille, None, false)
}

/// [`exercise`], with device `kill` dying (taken out of service while the
/// volume is idle) after the first round and dead through the restarts,
/// and with random changes of the policy's live parameters (see
/// [`World::change_live`]) when `live`; a restart builds the policy with
/// the parameters running then.
pub fn exercise_full(
    policy: &str,
    wm: &str,
    seed: u64,
    vol: &VolumeSpec,
    fail_per_mille: u64,
    kill: Option<u8>,
    live: bool,
) -> ((f64, f64), Vec<(String, f64)>) {
    let home = vol.home().unwrap();
    let build = |p: &Params| build_policy(policy, p, vol, seed).unwrap();
    let mut d = Dispatcher::new(build(&params(policy, wm)), home);
    d.track_changes();
    let mut rng = Rng::new(seed * 31 + 7);
    let mut world = World {
        stored: HashMap::new(),
        acked: HashMap::new(),
        next_version: 0,
        pending: Vec::new(),
        reads_checked: 0,
        label: String::new(),
        devices: vol.devices.len(),
        fail_per_mille,
        issued: HashMap::new(),
        uncertain: HashSet::new(),
        trims: fail_per_mille > 0,
        trimmed: HashSet::new(),
        failed_reads: 0,
        guarded: HashMap::new(),
        pre_entries: HashMap::new(),
        failure_points: 0,
        most_lost: [0; 8],
        dead: None,
        at_risk: HashSet::new(),
        at_risk_failed_reads: 0,
        live: live.then(|| (policy.to_string(), params(policy, wm))),
        live_changes: 0,
        live_refused: 0,
    };
    let mut writes = HashMap::new();
    let mut most = (0.0f64, 0.0f64);
    let mut state = Vec::new();
    for round in 0..4 {
        world.label = format!("{policy} {wm} seed {seed} round {round}");
        if let Some(dev) = kill.filter(|_| round == 1) {
            world.dead = kill;
            let only_there = d
                .map()
                .iter()
                .filter(|(_, e)| tiermux_core::safe::current_copies(e) == 1 << dev);
            world.at_risk.extend(only_there.map(|(b, _)| b));
            assert!(d.take_out_of_service(dev), "{policy}: device {dev} kept");
        }
        world.drive(&mut d, &mut rng, 1500, &mut writes);
        if fail_per_mille == 0 && kill.is_none() {
            world.check_drained(&mut d, &mut rng, &writes);
        }
        let before = count(&d);
        most = (most.0.max(before.0), most.1.max(before.1));
        state = d
            .policy()
            .controller_state()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        // Restart: a fresh policy over the saved map. The seed is the
        // same: split's placement hashes with it.
        let mut saved = tiermux_core::PlacementMap::new(home);
        for (b, mut e) in d.map().iter() {
            e.flags = 0;
            saved.set(b, e);
        }
        let running = world.live.as_ref().map(|l| l.1.clone());
        d = Dispatcher::with_map(build(&running.unwrap_or_else(|| params(policy, wm))), saved)
            .unwrap_or_else(|e| panic!("{policy} {wm}: restore failed: {e}"));
        d.track_changes();
        if let Some(dev) = world.dead {
            // A dead device is taken out of service again at each start
            // (what that queues fails on it).
            assert!(d.take_out_of_service(dev), "{policy}: device {dev} kept");
            world.pump(&mut d, &mut rng, &writes, true);
        }
        assert_eq!(
            count(&d),
            before,
            "{policy} {wm}: restart changed the cache"
        );
    }
    state.push(("failure_points".into(), world.failure_points as f64));
    state.push(("live_changes".into(), world.live_changes as f64));
    state.push(("live_refused".into(), world.live_refused as f64));
    state.push((
        "at_risk_failed_reads".into(),
        world.at_risk_failed_reads as f64,
    ));
    for (dev, &n) in world.most_lost.iter().enumerate().take(vol.devices.len()) {
        state.push((format!("most_lost_without_device_{dev}"), n as f64));
    }
    assert!(
        world.reads_checked > 500,
        "{policy}: {}",
        world.reads_checked
    );
    assert_eq!(
        world.failed_reads > 0,
        fail_per_mille > 0,
        "{policy} {wm}: failed reads"
    );
    (most, state)
}

/// Drives `policy` write-back over `vol` without injected failures,
/// checks that it cached and dirtied blocks and flushed some, and returns
/// its controller state by name.
pub fn exercise_flushing(policy: &str, seed: u64, vol: &VolumeSpec) -> impl Fn(&str) -> f64 {
    let (most, state) = exercise(policy, "wb", seed, vol, 0);
    assert!(most.0 > 0.0 && most.1 > 0.0, "{policy}: {most:?}");
    let get = move |n: &str| {
        let found = state.iter().find(|(k, _)| k == n);
        found.unwrap_or_else(|| panic!("no controller value {n}")).1
    };
    assert!(get("flushed_blocks") > 0.0, "{policy}: nothing flushed");
    get
}
