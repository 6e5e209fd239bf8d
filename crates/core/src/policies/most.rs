//! MOST, mirror-optimized storage tiering (Tu et al., the MOST paper):
//! HeMem's tiering plus a small mirrored class of the hottest segments,
//! whose reads and writes go to the capacity device with probability
//! `offloadRatio`. Every quantum (200 ms) Algorithm 1 moves the ratio by
//! `ratio_step` until the devices' smoothed latencies are equal within θ;
//! at `offload_ratio_max` it grows the mirrored class instead (by
//! `mirror_step_mb` of the hottest performance segments, up to
//! `mirror_max_fraction` of capacity), or, when the class is full, swaps
//! its coldest segment for a hotter one. Migration runs only away from the
//! slower device (§3.2.3): towards the performance device it is HeMem's
//! quantum, whose hot segments take the slots of colder ones when none is
//! free (the cold ones move down only to make room); towards the capacity
//! device the mirrored class does the work. New data is allocated on the capacity device
//! with probability `offloadRatio` (§3.2.2). A write to a mirrored subpage
//! updates one copy and marks the other invalid (§3.2.4); a background
//! cleaner rewrites invalid copies of segments whose rewrite distance
//! (reads per write since the segment was first accessed, from counters
//! that are never cooled: Table 3's `rewriteReadCounter` and
//! `rewriteCounter`) is at least `clean_min_rewrite_distance`. When free
//! capacity falls below `reclaim_free_fraction`, the coldest mirrored
//! segment drops a copy. As the paper prints it, the class grows up to
//! `mirror_max_fraction` whatever the free capacity (`mirror_growth =
//! "to_maximum"`), so that on a volume filled to the watermark each
//! segment copied in is reclaimed at the next quantum, and the class
//! copies segments without end; `"above_watermark"` grows it only into
//! free capacity above the watermark, and counts it as at its largest
//! (Algorithm 1's "mirrored class is maximized") when none is left
//! (`docs/reproduction.md`, MOST Figure 7a).
//!
//! Choices where the paper gives no value, as parameters: the latency is
//! each device's mean over reads and writes, EWMA-smoothed with
//! `latency_alpha` = 0.25 (a signal that follows a load step within about
//! four quanta); a device with no latency sample yet counts as latency 0
//! (an idle device); an interval in which a device completes nothing
//! folds the lowest interval mean it has shown into its latency
//! (`idle_latency = "unloaded"`), so that a latency measured under a load
//! that has gone decays instead of holding the offload ratio at 0 for
//! good (`docs/reproduction.md`, MOST Figure 5; `keep` holds the last
//! value);
//! the cleaning threshold is 8 reads per write; `rewrite_counters =
//! "cooled"` takes the rewrite distance from HeMem's cooled counts
//! instead (an earlier reading, under which a write is forgotten within a
//! few coolings; `docs/reproduction.md`, MOST Figure 7d). `swap_while_offloading`
//! (default true) lets HeMem's quantum swap segments while the offload
//! ratio is above 0; false keeps it to promotions into free slots then,
//! so that under load data moves down only into the mirrored class
//! (`experiments/most-swaps-under-load.toml` shows why, and the shared
//! `swap_min_ratio` that stops the swapping at its source).
//!
//! `subpages = false` is the paper's "naive implementation based only on
//! segments" (§3.2.4), for Figure 7c: a mirrored segment's copies are
//! valid or invalid as a whole, so once a write has gone to one copy
//! every later read and write of the segment goes there too, until the
//! segment is copied whole again; while Algorithm 1 migrates only to the
//! performance device (the ratio at 0, the performance device the
//! faster), mirrored segments whose valid copy is the capacity device's
//! are copied back up (a [`Move::Clean`], hottest first, under the
//! migration cap). The placement map still knows each block's copies, so
//! the routing rule changes where data goes and never which copy is read.

use super::hemem::serve;
use super::tiered::{tiered_policy_methods, Tiered};
use super::{param_err, Registered};
use crate::map::BlockMap;
use crate::observe::Observation;
use crate::params::Params;
use crate::policy::{Ctx, Policy, PolicyError, TickCtx, VolumeSpec};
use crate::tiering::latency::{IdleLatency, LatencySignals};
use crate::tiering::migrator::{ranked, Allowed};
use crate::tiering::offload::{
    Decision, Migration, MigrationRule, MirrorChange, OffloadController,
};
use crate::tiering::tiers::{Class, Move};
use crate::types::{Access, DeviceIndex, Op, Outcome};
use crate::Job;

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "most",
    summary: "mirror-optimized tiering: tiering plus a small mirrored class, offload ratio tuned to equalize device latency",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let t = Tiered::build("most", p, vol, seed)?;
    let s = MostSettings::from_params(p)?;
    let mut most = Most {
        latency: LatencySignals::new(vol.devices.len(), s.latency_alpha),
        controller: OffloadController::new(s.ratio_step, s.theta, s.offload_ratio_max),
        segment_bytes: t.tiers.segment_blocks() as f64 * vol.block_size as f64,
        mirror_max_segments: 0,
        mirror_step_segments: 0,
        reclaim_below_segments: 0,
        mirror_growth_to_maximum: true,
        clean_min_rewrite_distance: None,
        rewrite_counters_cooled: false,
        swap_while_offloading: true,
        subpages: true,
        whole_copy: BlockMap::default(),
        routed: [[0; 2]; 2],
        capacity_share: [0.0; 2],
        clean_share: 1.0,
        t,
    };
    most.apply(&s);
    Ok(Box::new(most))
}

/// MOST's own parameters (beside the tiering ones of [`Tiered`]); a
/// running volume can change every one of them.
struct MostSettings {
    theta: f64,
    ratio_step: f64,
    offload_ratio_max: f64,
    latency_alpha: f64,
    mirror_max_fraction: f64,
    mirror_step_mb: f64,
    reclaim_free_fraction: f64,
    mirror_growth_to_maximum: bool,
    clean_min_rewrite_distance: Option<f64>,
    rewrite_counters_cooled: bool,
    idle_latency: IdleLatency,
    migration_rule: MigrationRule,
    swap_while_offloading: bool,
    subpages: bool,
}

/// The names [`MostSettings`] reads.
const MOST_LIVE_PARAMS: &[&str] = &[
    "theta",
    "ratio_step",
    "offload_ratio_max",
    "latency_alpha",
    "mirror_max_fraction",
    "mirror_step_mb",
    "reclaim_free_fraction",
    "mirror_growth",
    "clean_min_rewrite_distance",
    "cleaning",
    "rewrite_counters",
    "idle_latency",
    "migration_rule",
    "swap_while_offloading",
    "subpages",
];

impl MostSettings {
    fn from_params(p: &Params) -> Result<MostSettings, PolicyError> {
        let e = param_err("most");
        let clean_min = p
            .f64_in("clean_min_rewrite_distance", 8.0, 0.0, 1e9)
            .map_err(&e)?;
        let cleaning = p
            .choice("cleaning", "selective", &["selective", "all", "off"])
            .map_err(&e)?;
        Ok(MostSettings {
            theta: p.f64_in("theta", 0.05, 0.0, 0.99).map_err(&e)?,
            ratio_step: p.f64_in("ratio_step", 0.02, 0.001, 1.0).map_err(&e)?,
            offload_ratio_max: p.f64_in("offload_ratio_max", 1.0, 0.0, 1.0).map_err(&e)?,
            latency_alpha: p.f64_in("latency_alpha", 0.25, 0.001, 1.0).map_err(&e)?,
            mirror_max_fraction: p.f64_in("mirror_max_fraction", 0.2, 0.0, 1.0).map_err(&e)?,
            mirror_step_mb: p.f64_in("mirror_step_mb", 200.0, 0.001, 1e9).map_err(&e)?,
            reclaim_free_fraction: p
                .f64_in("reclaim_free_fraction", 0.025, 0.0, 1.0)
                .map_err(&e)?,
            mirror_growth_to_maximum: p
                .choice(
                    "mirror_growth",
                    "to_maximum",
                    &["to_maximum", "above_watermark"],
                )
                .map_err(&e)?
                == "to_maximum",
            clean_min_rewrite_distance: match cleaning.as_str() {
                "off" => None,
                "all" => Some(0.0),
                _ => Some(clean_min),
            },
            rewrite_counters_cooled: p
                .choice("rewrite_counters", "lifetime", &["lifetime", "cooled"])
                .map_err(&e)?
                == "cooled",
            idle_latency: IdleLatency::from_params(p, IdleLatency::Unloaded).map_err(&e)?,
            migration_rule: match p
                .choice(
                    "migration_rule",
                    "algorithm1",
                    &["algorithm1", "away_from_slower"],
                )
                .map_err(&e)?
                .as_str()
            {
                "away_from_slower" => MigrationRule::AwayFromSlower,
                _ => MigrationRule::Algorithm1,
            },
            swap_while_offloading: p.bool("swap_while_offloading", true).map_err(&e)?,
            subpages: p.bool("subpages", true).map_err(&e)?,
        })
    }
}

/// The MOST policy.
pub struct Most {
    t: Tiered,
    latency: LatencySignals,
    controller: OffloadController,
    segment_bytes: f64,
    mirror_max_segments: u32,
    mirror_step_segments: u32,
    reclaim_below_segments: u64,
    /// The mirrored class grows up to its maximum whatever the free
    /// capacity (the paper's reading), not only into free capacity above
    /// the reclaim watermark.
    mirror_growth_to_maximum: bool,
    clean_min_rewrite_distance: Option<f64>,
    /// The rewrite distance from the cooled heat counts, not the
    /// lifetime ones.
    rewrite_counters_cooled: bool,
    swap_while_offloading: bool,
    /// Validity tracked per subpage (MOST §3.2.4), or per segment.
    subpages: bool,
    /// Without subpages: the device whose copy of a mirrored segment is
    /// the valid one, for segments a write has made unclean (entries of
    /// segments clean again are ignored, and dropped each quantum).
    whole_copy: BlockMap<DeviceIndex>,
    /// Client accesses this quantum, by operation (read, write) and device
    /// (performance, capacity).
    routed: [[u64; 2]; 2],
    /// The last quantum's share of client reads and of client writes sent
    /// to the capacity device.
    capacity_share: [f64; 2],
    /// The mirrored class's share of subpages clean (current on both
    /// copies) at the last quantum; 1 when nothing is mirrored.
    clean_share: f64,
}

impl Most {
    /// Re-reads MOST's own live parameters (see [`MOST_LIVE_PARAMS`]).
    fn reconfigure_own(&mut self, p: &Params) -> Result<(), PolicyError> {
        let s = MostSettings::from_params(p)?;
        self.apply(&s);
        Ok(())
    }

    /// Takes on `s`. The offload ratio stays where the controller has
    /// brought it, as near as the new step allows (within the new
    /// maximum); a mirrored class above a smaller maximum stops growing
    /// and shrinks only as reclaiming and swapping take segments out.
    fn apply(&mut self, s: &MostSettings) {
        let segments = self.t.tiers.segments() as f64;
        self.latency.set_alpha(s.latency_alpha);
        self.latency.set_idle(s.idle_latency);
        self.controller
            .retune(s.ratio_step, s.theta, s.offload_ratio_max);
        self.controller.set_rule(s.migration_rule);
        self.mirror_max_segments = (s.mirror_max_fraction * segments).floor() as u32;
        self.mirror_step_segments =
            ((s.mirror_step_mb * 1e6 / self.segment_bytes).ceil() as u32).max(1);
        self.reclaim_below_segments = (s.reclaim_free_fraction * segments).ceil() as u64;
        self.mirror_growth_to_maximum = s.mirror_growth_to_maximum;
        self.clean_min_rewrite_distance = s.clean_min_rewrite_distance;
        self.rewrite_counters_cooled = s.rewrite_counters_cooled;
        self.swap_while_offloading = s.swap_while_offloading;
        self.subpages = s.subpages;
    }

    /// True when this access goes to the capacity copy (or allocates
    /// there), with probability `offloadRatio`.
    fn offload(&mut self) -> bool {
        let r = self.controller.offload_ratio();
        r > 0.0 && self.t.rng.next_f64() < r
    }

    /// Without subpages, the device holding the valid copy of mirrored
    /// `segment` when its copies differ; `None` when both are valid (or
    /// subpages are tracked).
    fn whole_copy(&self, segment: u64) -> Option<DeviceIndex> {
        if self.subpages || !self.t.tiers.is_unclean(segment) {
            return None;
        }
        self.whole_copy.get(&segment).copied()
    }

    /// Serves an access to mirrored `segment`: reads by `offload` where
    /// both copies are valid; writes to one copy, by `offload` while the
    /// segment's copies are both valid and, without subpages, to the valid
    /// copy after that.
    fn serve_mirrored(
        &mut self,
        access: Access,
        segment: u64,
        offload: bool,
        ctx: &mut Ctx<'_>,
    ) -> DeviceIndex {
        let home = self.t.tiers.home();
        let whole = self.whole_copy(segment);
        let to_capacity = whole.map_or(offload, |d| d == home);
        match access.op {
            Op::Read => self.t.tiers.read(access.block, to_capacity, ctx),
            Op::Write => {
                let d = self.t.tiers.write(access.block, to_capacity, ctx);
                if !self.subpages && whole.is_none() && self.t.tiers.is_unclean(segment) {
                    self.whole_copy.insert(segment, d);
                }
                d
            }
        }
    }

    /// Counts a client access served by device `d` in this quantum's
    /// routing shares.
    fn count_route(&mut self, op: Op, d: DeviceIndex) {
        let op = usize::from(op == Op::Write);
        self.routed[op][usize::from(d == self.t.tiers.home())] += 1;
    }

    /// Ends the quantum's routing count: each operation's share of client
    /// accesses sent to the capacity device (kept when none came).
    fn roll_routes(&mut self) {
        for (op, [perf, cap]) in self.routed.iter().enumerate() {
            if perf + cap > 0 {
                self.capacity_share[op] = *cap as f64 / (perf + cap) as f64;
            }
        }
        self.routed = [[0; 2]; 2];
    }

    /// Forgets the whole copies of segments clean again; then, without
    /// subpages and when Algorithm 1 migrates only to the performance
    /// device (`up`: the ratio is at 0, the performance device the
    /// faster), copies back up the hottest mirrored segments whose valid
    /// copy is the capacity device's, so that their accesses can return
    /// to the performance device.
    fn restore_whole_copies(&mut self, up: bool, jobs: &mut Vec<Job>) {
        let home = self.t.tiers.home();
        let tiers = &self.t.tiers;
        self.whole_copy.retain(|s, _| tiers.is_unclean(*s));
        if self.subpages || !up {
            return;
        }
        let mut down: Vec<(u64, u32)> = self
            .whole_copy
            .iter()
            .filter(|(_, &d)| d == home)
            .map(|(&s, _)| (s, self.t.heat.heat(s).total()))
            .collect();
        down.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let t = &mut self.t;
        for (s, _) in down {
            if !t
                .migrator
                .queue(&mut t.tiers, s, Move::Clean, t.now_ns, jobs)
            {
                break;
            }
        }
    }

    fn tune(&mut self) -> Decision {
        let (p, h) = (self.t.tiers.perf() as usize, self.t.tiers.home() as usize);
        let lp = self.latency.device(p).all_ns.get();
        let lc = self.latency.device(h).all_ns.get();
        let full = self.mirror_room() == 0;
        // A device not measured yet counts as idle: latency 0, so that a
        // saturated performance device starts offloading, which measures
        // the other one.
        self.controller
            .tune(lp.unwrap_or(0.0), lc.unwrap_or(0.0), full)
    }

    /// Free capacity, in segments: the volume's segments less those
    /// accessed and the mirrored ones' second copies.
    fn free_segments(&self) -> u64 {
        let tiers = &self.t.tiers;
        tiers.segments().saturating_sub(tiers.used_segments())
    }

    /// Segments the mirrored class may still grow by: up to its maximum
    /// and, unless it grows to the maximum regardless, no further than
    /// free capacity above the reclaim watermark (a copy made below it
    /// would be reclaimed at the next quantum).
    fn mirror_room(&self) -> u32 {
        let tiers = &self.t.tiers;
        let below_max = self.mirror_max_segments.saturating_sub(tiers.mirrored());
        if self.mirror_growth_to_maximum {
            return below_max;
        }
        let above_watermark = self
            .free_segments()
            .saturating_sub(self.reclaim_below_segments);
        below_max.min(u32::try_from(above_watermark).unwrap_or(u32::MAX))
    }

    fn grow_mirror(&mut self, change: MirrorChange, jobs: &mut Vec<Job>) {
        let room = self.mirror_room();
        let t = &mut self.t;
        let now = t.now_ns;
        match change {
            MirrorChange::None => {}
            MirrorChange::Enlarge => {
                let n = room.min(self.mirror_step_segments) as usize;
                for (s, _) in ranked(&t.tiers, &t.heat, Class::Performance, n, true) {
                    if !t.migrator.queue(&mut t.tiers, s, Move::Mirror, now, jobs) {
                        break;
                    }
                }
            }
            MirrorChange::ImproveHotness => {
                let hot = ranked(&t.tiers, &t.heat, Class::Performance, 1, true);
                let cold = ranked(&t.tiers, &t.heat, Class::Mirrored, 1, false);
                if let (Some(&(h, hh)), Some(&(c, ch))) = (hot.first(), cold.first()) {
                    if hh > ch && t.migrator.queue(&mut t.tiers, c, Move::Unmirror, now, jobs) {
                        t.migrator.queue(&mut t.tiers, h, Move::Mirror, now, jobs);
                    }
                }
            }
        }
    }

    /// Drops a copy of the coldest mirrored segments while free capacity
    /// is below the watermark.
    fn reclaim(&mut self, jobs: &mut Vec<Job>) {
        let free = self.free_segments();
        let t = &mut self.t;
        if free >= self.reclaim_below_segments || t.tiers.mirrored() == 0 {
            return;
        }
        let n = (self.reclaim_below_segments - free) as usize;
        for (s, _) in ranked(&t.tiers, &t.heat, Class::Mirrored, n, false) {
            t.migrator
                .queue(&mut t.tiers, s, Move::Unmirror, t.now_ns, jobs);
        }
    }

    /// Cleans mirrored segments with invalid subpages whose rewrite
    /// distance reaches the threshold.
    fn clean(&mut self, jobs: &mut Vec<Job>) {
        let Some(min) = self.clean_min_rewrite_distance else {
            return;
        };
        let cooled = self.rewrite_counters_cooled;
        let t = &mut self.t;
        let distance = |s: u64| {
            if cooled {
                let h = t.heat.heat(s);
                h.reads as f64 / h.writes.max(1) as f64
            } else {
                // An unclean segment has been written since it was
                // mirrored, so it has a distance.
                t.heat.rewrite_distance(s).unwrap_or(f64::INFINITY)
            }
        };
        let candidates: Vec<u64> = t
            .tiers
            .unclean()
            .filter(|&s| min == 0.0 || distance(s) >= min)
            .collect();
        for s in candidates {
            if !t
                .migrator
                .queue(&mut t.tiers, s, Move::Clean, t.now_ns, jobs)
            {
                break;
            }
        }
    }
}

impl Policy for Most {
    tiered_policy_methods!(MOST_LIVE_PARAMS, Self::reconfigure_own);
    fn name(&self) -> &str {
        "most"
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        let (segment, _) = self.t.tiers.locate(access.block);
        let class = self.t.tiers.class(segment);
        let offload = self.offload();
        if class == Class::Mirrored {
            self.t.record(access);
            let d = self.serve_mirrored(access, segment, offload, ctx);
            self.count_route(access.op, d);
            return Outcome::Hit(d);
        }
        // Tiered data: served where it lives; new data is allocated on
        // the capacity device with probability offloadRatio.
        let outcome = serve(&mut self.t, access, !offload, ctx);
        let d = match outcome {
            Outcome::Hit(d) => d,
            _ => self.t.tiers.home(),
        };
        self.count_route(access.op, d);
        outcome
    }
    fn on_tick(&mut self, obs: &Observation, ctx: &mut TickCtx<'_>) {
        self.t.now_ns = obs.now_ns;
        self.latency.observe(obs);
        let d = self.tune();
        self.grow_mirror(d.mirror, ctx.jobs);
        self.reclaim(ctx.jobs);
        let none = Allowed {
            up: false,
            down: false,
        };
        // Towards the performance device, HeMem's quantum runs whole: a
        // hot segment that finds no free slot takes that of a colder one,
        // which moves down only to make room (§3.2.3's migration to the
        // faster device, on the tiering MOST builds on).
        let allowed = match d.migration {
            // While reads are offloaded (the performance device is under
            // load), a hot segment may still move up into a free slot,
            // but no segment moves down to make room unless asked.
            Migration::Both | Migration::ToPerformanceOnly
                if !self.swap_while_offloading && d.offload_ratio > 0.0 =>
            {
                Allowed {
                    up: true,
                    down: false,
                }
            }
            Migration::Both | Migration::ToPerformanceOnly => Allowed::BOTH,
            Migration::ToCapacityOnly | Migration::Stop => none,
        };
        // Algorithm 1's "only migrate to performance device": the ratio is
        // at 0 and the performance device the faster.
        let to_perf_only = d.migration == Migration::ToPerformanceOnly && d.offload_ratio == 0.0;
        self.restore_whole_copies(to_perf_only, ctx.jobs);
        let t = &mut self.t;
        t.migrator
            .tier(&mut t.tiers, &t.heat, allowed, obs.now_ns, ctx.jobs);
        self.clean(ctx.jobs);
        self.roll_routes();
        let subpages = self.t.tiers.mirrored() as u64 * self.t.tiers.segment_blocks() as u64;
        let invalid = self.t.tiers.invalid_mirrored_subpages(ctx.map);
        self.clean_share = 1.0 - invalid as f64 / subpages.max(1) as f64;
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![("offload_ratio", self.controller.offload_ratio())];
        let (p, h) = (self.t.tiers.perf() as usize, self.t.tiers.home() as usize);
        let us = |d: usize| self.latency.device(d).all_ns.get().unwrap_or(0.0) / 1e3;
        v.push(("latency_perf_us", us(p)));
        v.push(("latency_cap_us", us(h)));
        v.push(("capacity_read_share", self.capacity_share[0]));
        v.push(("capacity_write_share", self.capacity_share[1]));
        v.push(("mirrored_clean_share", self.clean_share));
        v.push(("free_segments", self.free_segments() as f64));
        v.extend(self.t.state());
        v
    }
}
