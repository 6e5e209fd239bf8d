//! What every tiering policy (HeMem, MOST) holds and does alike: the
//! segment classes ([`Tiers`]), access counters ([`HeatMap`]), the
//! migrator under its bandwidth cap, the tuning quantum, and the
//! parameters those take. Each policy file adds only its decisions.

use crate::map::{Entry, PlacementMap};
use crate::params::Params;
use crate::policy::{PolicyError, TickCtx, VolumeSpec};
use crate::rng::Rng;
use crate::tiering::budget::{Direction, MigrationBudget, DEFAULT_WINDOW_NS};
use crate::tiering::heat::{HeatMap, DEFAULT_COOLING_THRESHOLD, DEFAULT_HOT_THRESHOLD};
use crate::tiering::migrator::Migrator;
use crate::tiering::tiers::{Class, Tiers};
use crate::types::{Access, Job, Op};

use super::param_err;

/// Default tuning quantum: 200 ms, HeMem's and MOST's interval for storage.
pub const DEFAULT_QUANTUM_MS: f64 = 200.0;

/// Default migration cap, MB/s: the MOST authors' harness migrates up to
/// 200 MB per 200 ms interval.
pub const DEFAULT_MIGRATE_MB_PER_S: f64 = 1000.0;

/// The state every tiering policy shares.
pub struct Tiered {
    /// Segment classes and performance-device slots.
    pub tiers: Tiers,
    /// Per-segment access counters.
    pub heat: HeatMap,
    /// Moves under the bandwidth cap.
    pub migrator: Migrator,
    /// Random draws for routing.
    pub rng: Rng,
    /// Tuning quantum, ns.
    pub quantum_ns: u64,
    /// The driver's time at the last tick, ns.
    pub now_ns: u64,
    block_size: u32,
    heat_unit: HeatUnit,
}

/// What one count of a segment's heat stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeatUnit {
    /// One client request that touches the segment, however many of its
    /// blocks it covers: access frequency, as MOST's per-segment 8-bit
    /// counters count it (the default).
    Request,
    /// Every block of a request: a 2 MiB write counts 512 times, and
    /// passes the cooling threshold many times over by itself.
    Block,
}

impl HeatUnit {
    /// The names `heat_unit` takes, in [`HeatUnit`] order.
    const NAMES: &'static [&'static str] = &["request", "block"];
}

/// The parameters every tiering policy shares that a running volume can
/// change (the segment size needs a restart).
pub const TIERED_LIVE_PARAMS: &[&str] = &[
    "hot_threshold",
    "cooling_threshold",
    "quantum_ms",
    "migrate_mb_per_s",
    "max_moves_inflight",
    "swap_min_ratio",
    "heat_unit",
];

/// The shared settings a running volume can change.
struct TieredSettings {
    hot: u32,
    cooling: u32,
    quantum_ms: f64,
    bytes_per_s: f64,
    max_inflight: u32,
    swap_min_ratio: f64,
    heat_unit: HeatUnit,
}

impl TieredSettings {
    fn from_params(name: &str, p: &Params) -> Result<TieredSettings, PolicyError> {
        let e = param_err(name);
        let hot = p
            .u64_in("hot_threshold", DEFAULT_HOT_THRESHOLD as u64, 1, 1 << 20)
            .map_err(&e)? as u32;
        let cooling = p
            .u64_in(
                "cooling_threshold",
                DEFAULT_COOLING_THRESHOLD as u64,
                hot as u64,
                1 << 30,
            )
            .map_err(&e)? as u32;
        let quantum_ms = p
            .f64_in("quantum_ms", DEFAULT_QUANTUM_MS, 0.01, 600_000.0)
            .map_err(&e)?;
        let mb_per_s = p
            .f64_in("migrate_mb_per_s", DEFAULT_MIGRATE_MB_PER_S, 0.001, 1e6)
            .map_err(&e)?;
        let max_inflight = p.u64_in("max_moves_inflight", 8, 1, 1024).map_err(&e)? as u32;
        let swap_min_ratio = p.f64_in("swap_min_ratio", 1.0, 1.0, 1e6).map_err(&e)?;
        let heat_unit = match p
            .choice("heat_unit", "request", HeatUnit::NAMES)
            .map_err(&e)?
            .as_str()
        {
            "request" => HeatUnit::Request,
            _ => HeatUnit::Block,
        };
        Ok(TieredSettings {
            hot,
            cooling,
            quantum_ms,
            bytes_per_s: mb_per_s * 1e6,
            max_inflight,
            swap_min_ratio,
            heat_unit,
        })
    }

    /// The migration budget's refill window: the quantum, at least the
    /// default window.
    fn window_ns(&self) -> u64 {
        DEFAULT_WINDOW_NS.max((self.quantum_ms * 1e6) as u64)
    }
}

impl Tiered {
    /// Reads the shared parameters (`segment_blocks`, `hot_threshold`,
    /// `cooling_threshold`, `quantum_ms`, `migrate_mb_per_s`,
    /// `max_moves_inflight`, `swap_min_ratio`) and builds the state for
    /// policy `name`.
    pub fn build(
        name: &str,
        p: &Params,
        vol: &VolumeSpec,
        seed: u64,
    ) -> Result<Tiered, PolicyError> {
        let e = param_err(name);
        let segment_blocks = p.u64_in("segment_blocks", 512, 1, 1 << 14).map_err(&e)? as u32;
        let s = TieredSettings::from_params(name, p)?;
        let tiers = Tiers::new(name, vol, segment_blocks)?;
        let segment_bytes = segment_blocks as u64 * vol.block_size as u64;
        let mut migrator = Migrator::new(
            MigrationBudget::new(s.bytes_per_s, s.window_ns()),
            segment_bytes,
            s.max_inflight,
        );
        migrator.set_swap_min_ratio(s.swap_min_ratio);
        Ok(Tiered {
            tiers,
            heat: HeatMap::new(s.hot, s.cooling),
            migrator,
            rng: Rng::new(seed ^ 0x7469_6572),
            quantum_ns: (s.quantum_ms * 1e6) as u64,
            now_ns: 0,
            block_size: vol.block_size,
            heat_unit: s.heat_unit,
        })
    }

    /// Re-reads [`TIERED_LIVE_PARAMS`] from a checked table (see
    /// [`crate::Policy::reconfigure`]); counts, classes and moves running
    /// are kept.
    pub fn reconfigure(&mut self, name: &str, p: &Params) -> Result<(), PolicyError> {
        let s = TieredSettings::from_params(name, p)?;
        self.heat.set_thresholds(s.hot, s.cooling);
        self.migrator
            .set_limits(s.bytes_per_s, s.window_ns(), s.max_inflight);
        self.migrator.set_swap_min_ratio(s.swap_min_ratio);
        self.quantum_ns = (s.quantum_ms * 1e6) as u64;
        self.heat_unit = s.heat_unit;
        Ok(())
    }

    /// Counts an access of one block, `access.block`, in its segment's
    /// heat (per [`HeatUnit`]: once per request and segment, so a piece
    /// that continues a request counts only where it enters a new
    /// segment), and returns the segment; true as the second value when
    /// the access is the segment's first write (its allocation: a read
    /// before it finds nothing written, MOST §3.2.2).
    #[inline]
    pub fn record(&mut self, access: Access) -> (u64, bool) {
        debug_assert_eq!(access.blocks, 1, "tiering decides one block at a time");
        let (segment, offset) = self.tiers.locate(access.block);
        let counts = match self.heat_unit {
            HeatUnit::Request => !access.continues || offset == 0,
            HeatUnit::Block => true,
        };
        if counts {
            self.heat.record(segment, access.op, 1);
        }
        let first_write = match access.op {
            Op::Write => self.tiers.note_write(segment),
            Op::Read => {
                self.tiers.touch(segment);
                false
            }
        };
        (segment, first_write)
    }

    /// A finished move: ends it and starts what waited for it.
    pub fn finish_job(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        let now = self.now_ns;
        self.migrator.finished(&mut self.tiers, job, now, ctx.jobs);
    }

    /// Stores `block`'s entry after failed operations, keeping the classes
    /// in step.
    pub fn repair(&mut self, block: u64, target: Entry, ctx: &mut TickCtx<'_>) {
        let target = self.tiers.repaired(block, target);
        ctx.map.set(block, target);
    }

    /// Restores classes and slots from a saved map.
    pub fn restore(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        self.tiers.restore(map)
    }

    /// Address space on `device`: the performance device's slots, or the
    /// whole volume on the capacity device.
    pub fn address_space(&self, device: usize) -> u64 {
        if device == self.tiers.perf() as usize {
            self.tiers.slots() as u64 * self.tiers.segment_blocks() as u64
        } else if device == self.tiers.home() as usize {
            self.tiers.segments() * self.tiers.segment_blocks() as u64
        } else {
            0
        }
    }

    /// Controller variables shared by every tiering policy, for time
    /// series: segments per class, bytes copied per direction, moves
    /// running, and how many times the heat counts have been halved.
    pub fn state(&self) -> Vec<(&'static str, f64)> {
        let mut per_class = [0u64; 3];
        for (_, c) in self.tiers.placed() {
            per_class[match c {
                Class::Capacity => 0,
                Class::Performance => 1,
                Class::Mirrored => 2,
            }] += 1;
        }
        let bytes = |d| (self.tiers.moved_blocks(d) * self.block_size as u64) as f64;
        let segment_blocks = self.tiers.segment_blocks() as u64;
        vec![
            (
                "cached_blocks",
                ((per_class[1] + per_class[2]) * segment_blocks) as f64,
            ),
            ("perf_segments", per_class[1] as f64),
            ("mirrored_segments", per_class[2] as f64),
            (
                "mirrored_bytes",
                (per_class[2] * self.tiers.segment_blocks() as u64 * self.block_size as u64) as f64,
            ),
            ("promoted_bytes", bytes(Direction::Promote)),
            ("demoted_bytes", bytes(Direction::Demote)),
            ("mirror_bytes", bytes(Direction::Mirror)),
            ("cleaned_bytes", bytes(Direction::Clean)),
            ("moves_inflight", self.migrator.inflight() as f64),
            ("heat_coolings", self.heat.coolings() as f64),
        ]
    }
}

/// The [`crate::policy::Policy`] methods every tiering policy implements
/// alike over its `t: Tiered` field: address spaces, the "tiers" layout,
/// moves as jobs, the quantum, restore, trims and discards, warm-up,
/// repair, and live changes of the shared parameters. A policy with live
/// parameters of its own names them and the method that re-reads them:
/// `tiered_policy_methods!(OWN_LIVE_PARAMS, Self::reconfigure_own)`.
macro_rules! tiered_policy_methods {
    () => {
        $crate::policies::tiered::tiered_policy_methods!(
            &[],
            |_: &mut Self, _: &$crate::params::Params| Ok(())
        );
    };
    ($own_live:expr, $reconfigure_own:expr) => {
        fn live_params(&self) -> Vec<&'static str> {
            let mut names = $crate::policies::tiered::TIERED_LIVE_PARAMS.to_vec();
            names.extend_from_slice($own_live);
            names
        }
        fn reconfigure(
            &mut self,
            p: &$crate::params::Params,
            _ctx: &mut $crate::policy::TickCtx<'_>,
        ) -> Result<(), $crate::policy::PolicyError> {
            let name = self.name().to_string();
            self.t.reconfigure(&name, p)?;
            ($reconfigure_own)(self, p)
        }
        fn address_space(&self, device: usize) -> u64 {
            self.t.address_space(device)
        }
        fn layout(&self) -> &str {
            "tiers"
        }
        fn start_job(&mut self, job: $crate::types::Job, ctx: &mut $crate::policy::Ctx<'_>) {
            self.t.tiers.start(job, ctx);
        }
        fn finish_job(&mut self, job: $crate::types::Job, ctx: &mut $crate::policy::TickCtx<'_>) {
            self.t.finish_job(job, ctx);
        }
        fn tick_interval_ns(&self) -> Option<u64> {
            Some(self.t.quantum_ns)
        }
        fn restore(&mut self, map: &mut $crate::map::PlacementMap) -> Result<(), String> {
            self.t.restore(map)
        }
        fn trim(&mut self, block: u64, ctx: &mut $crate::policy::Ctx<'_>) {
            if let Some(segment) = self.t.tiers.trim(block, ctx.map) {
                self.t.heat.forget(segment);
            }
        }
        fn discarded(&mut self, first: u64, end: u64) {
            for segment in self.t.tiers.discarded(first, end) {
                self.t.heat.forget(segment);
            }
        }
        fn warm(&mut self, block: u64, map: &mut $crate::map::PlacementMap) -> bool {
            self.t.tiers.warm(block, map)
        }
        fn repair(
            &mut self,
            block: u64,
            target: $crate::map::Entry,
            ctx: &mut $crate::policy::TickCtx<'_>,
        ) {
            self.t.repair(block, target, ctx);
        }
    };
}
pub(crate) use tiered_policy_methods;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamValue;
    use crate::policy::{DeviceRole, DeviceSpec};
    use crate::types::Op;

    /// HeMem's state on 2048 fast blocks over 8192, counting heat by `unit`.
    fn build(unit: &str) -> Result<Tiered, PolicyError> {
        let dev = |capacity_blocks, role| DeviceSpec {
            name: "d".into(),
            capacity_blocks,
            role,
        };
        let vol = VolumeSpec {
            num_blocks: 8192,
            block_size: 4096,
            devices: vec![dev(2048, DeviceRole::Tier), dev(8192, DeviceRole::Home)],
        };
        let p = Params::new().with("heat_unit", ParamValue::Str(unit.into()));
        Tiered::build("hemem", &p, &vol, 1)
    }

    fn tiered(unit: &str) -> Tiered {
        build(unit).expect("valid parameters")
    }

    /// Hands `t` a write of `blocks` blocks from `first` as the
    /// dispatcher does: one block at a time, all but the first continuing.
    fn write(t: &mut Tiered, first: u64, blocks: u64) {
        for b in first..first + blocks {
            t.record(Access::one(b, Op::Write).continuing(b != first));
        }
    }

    #[test]
    fn a_request_counts_once_in_each_segment_it_touches() {
        let mut t = tiered("request");
        // Blocks 256..1280 of 512-block segments: half of 0, all of 1,
        // half of 2.
        write(&mut t, 256, 1024);
        for s in 0..3 {
            assert_eq!(t.heat.heat(s).writes, 1, "segment {s}");
        }
        assert_eq!(t.heat.heat(3).writes, 0);
        write(&mut t, 600, 1);
        assert_eq!(t.heat.heat(1).writes, 2, "a second request counts again");
        assert_eq!(t.heat.coolings(), 0);
    }

    #[test]
    fn counting_blocks_cools_every_segment_on_one_long_write() {
        let mut t = tiered("block");
        for _ in 0..8 {
            write(&mut t, 2048, 1);
        }
        assert!(
            t.heat.is_hot(4),
            "eight one-block writes make a segment hot"
        );
        // One 2 MiB write of segment 0: 512 counts. Its count passes 18,
        // halves to 9, passes 18 again ten counts later: about 50 coolings.
        write(&mut t, 0, 512);
        assert!(t.heat.coolings() > 20, "{} coolings", t.heat.coolings());
        assert_eq!(
            t.heat.heat(4).writes,
            0,
            "the other segment's counts are gone"
        );
    }

    #[test]
    fn an_unknown_heat_unit_is_refused_by_name() {
        let e = build("bytes").err().expect("refused");
        let msg = e.to_string();
        assert!(
            msg.contains("heat_unit") && msg.contains("request, block"),
            "{msg}"
        );
    }
}
