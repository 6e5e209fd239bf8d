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
use crate::types::{Job, Op};

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
];

/// The shared settings a running volume can change.
struct TieredSettings {
    hot: u32,
    cooling: u32,
    quantum_ms: f64,
    bytes_per_s: f64,
    max_inflight: u32,
    swap_min_ratio: f64,
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
        Ok(TieredSettings {
            hot,
            cooling,
            quantum_ms,
            bytes_per_s: mb_per_s * 1e6,
            max_inflight,
            swap_min_ratio,
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
        Ok(())
    }

    /// Counts an access of `block` and returns its segment; true as the
    /// second value when the segment had never been accessed.
    #[inline]
    pub fn record(&mut self, block: u64, op: Op) -> (u64, bool) {
        let (segment, _) = self.tiers.locate(block);
        self.heat.record(segment, op, 1);
        (segment, self.tiers.touch(segment))
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
    /// series: segments per class, bytes copied per direction.
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
