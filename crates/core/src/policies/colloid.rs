//! Colloid (Vuppalapati and Agarwal, SOSP '24) on HeMem, as the MOST paper
//! runs it: every quantum (200 ms) it compares the devices' access
//! latencies and migrates hot segments away from the slower one, so that
//! the latencies meet. Three registry entries:
//!
//! - `colloid`: reads only (the original ignores writes); a device's
//!   latency is its smoothed mean read latency, θ = 0.05, EWMA weight 1/16;
//! - `colloid+`: the MOST paper's variant that counts writes too: latency
//!   by Little's law over all operations (occupancy over arrival rate);
//! - `colloid++`: `colloid+` with θ = 0.2 and EWMA weight 0.01, which the
//!   MOST paper found more robust to device latency spikes.
//!
//! How much access probability to move per quantum (`shift`): `expr3`,
//! the authors' default, `dp = |O_D − β O_A| / ((I_D + I_A)(β O_A / I_A +
//! O_D / I_D))` with `β = I_D / I_A` (O occupancy, I arrival rate, D the
//! performance device, A the capacity device); or `binary`, a step of
//! `delta` = 0.05 halved on every change of direction down to `epsilon` =
//! 0.01. The segments moved are the hottest of the loaded device by
//! decayed access counts (HeMem's counters), swapped pairwise with colder
//! ones when the performance device is full, under the migration cap.
//! While the latencies are equal within θ nothing moves. A device not
//! measured yet counts as idle (latency 0) once the other is measured;
//! before either is, hot data is promoted as HeMem does. A performance
//! device that completes nothing for a second is drained (`DRAINED_NS`):
//! its smoothed signals are forgotten, and while it stays idle its latency
//! is its unloaded read latency, the lowest interval mean read latency it
//! has shown. An idle capacity device keeps its last latency (below).
//! With `drained_latency = "unloaded"` either device that completes
//! nothing for a second is drained, and a drained device's latency is its
//! unloaded latency as the variant measures it: the lowest interval mean
//! of single-block reads for `colloid`, of all operations for `colloid+`
//! and `colloid++`.

use super::hemem::serve;
use super::tiered::{tiered_policy_methods, Tiered};
use super::{param_err, Registered};
use crate::observe::Observation;
use crate::params::Params;
use crate::policy::{Ctx, Policy, PolicyError, TickCtx, VolumeSpec};
use crate::tiering::latency::{DeviceLatency, IdleLatency, LatencySignals, DEFAULT_ALPHA};
use crate::tiering::migrator::Allowed;
use crate::types::{Access, Outcome};

/// Registry entry of the original (reads only).
pub const REGISTERED: Registered = Registered {
    name: "colloid",
    summary: "tiering that migrates hot data to equalize the devices' read latencies (reads only)",
    build: |p, v, s| build("colloid", p, v, s),
};

/// Registry entry of the variant that counts writes.
pub const REGISTERED_PLUS: Registered = Registered {
    name: "colloid+",
    summary: "colloid counting writes: Little's-law latency over all operations",
    build: |p, v, s| build("colloid+", p, v, s),
};

/// Registry entry of the variant with robust parameters.
pub const REGISTERED_PLUS_PLUS: Registered = Registered {
    name: "colloid++",
    summary: "colloid+ with theta 0.2 and EWMA weight 0.01",
    build: |p, v, s| build("colloid++", p, v, s),
};

/// How long the performance device completes nothing before Colloid takes
/// its latency to be its unloaded one. Colloid's monitor (`colloid-mon.c`)
/// smooths integer counters of occupancy and arrivals, weight 1/16 every
/// 10 ms, and a tier whose smoothed arrivals are zero has its unloaded read
/// latency (`MIN_LOCAL_LAT`, `MIN_REMOTE_LAT`: it counts reads, `DRd`); an
/// idle tier's counters fall to zero within about a second. A
/// floating-point average never reaches zero: without this, a device that
/// demotions have emptied keeps the latency it had under load for good,
/// and nothing is promoted back to it.
///
/// tiermux knows a device's unloaded read latency only as the lowest
/// interval mean read latency it has shown, and does this for the
/// performance device only: the capacity device's reads are often segment
/// moves (1 MiB requests), so its lowest mean can be far above a 4 KiB
/// read's, and with it Colloid++ stopped offloading in MOST Figure 5's
/// write-only bursts (docs/performance.md). An idle capacity device keeps
/// the latency it last had, as before.
const DRAINED_NS: u64 = 1_000_000_000;

/// Which devices count as drained after `DRAINED_NS` without
/// completions, and what latency a drained device has.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Drained {
    /// The performance device only, at its lowest interval mean read
    /// latency (`drained_latency = "perf-read"`, the default).
    PerfRead,
    /// Either device, at its unloaded latency as the variant measures it:
    /// single-block reads, or all operations for the variants that count
    /// writes (`drained_latency = "unloaded"`).
    Unloaded,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Shift {
    Expr3,
    Binary {
        step: f64,
        delta_min: f64,
        last_up: Option<bool>,
    },
}

fn build(
    name: &'static str,
    p: &Params,
    vol: &VolumeSpec,
    seed: u64,
) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err(name);
    let t = Tiered::build(name, p, vol, seed)?;
    let robust = name == "colloid++";
    let theta = p
        .f64_in("theta", if robust { 0.2 } else { 0.05 }, 0.0, 0.99)
        .map_err(&e)?;
    let alpha = p
        .f64_in(
            "latency_alpha",
            if robust { 0.01 } else { DEFAULT_ALPHA },
            0.0001,
            1.0,
        )
        .map_err(&e)?;
    let shift = match p
        .choice("shift", "expr3", &["expr3", "binary"])
        .map_err(&e)?
        .as_str()
    {
        "binary" => Shift::Binary {
            step: p.f64_in("delta", 0.05, 0.0001, 1.0).map_err(&e)?,
            delta_min: p.f64_in("epsilon", 0.01, 0.0001, 1.0).map_err(&e)?,
            last_up: None,
        },
        _ => Shift::Expr3,
    };
    let drained = match p
        .choice("drained_latency", "perf-read", &["perf-read", "unloaded"])
        .map_err(&e)?
        .as_str()
    {
        "unloaded" => Drained::Unloaded,
        _ => Drained::PerfRead,
    };
    let mut latency = LatencySignals::new(vol.devices.len(), alpha);
    latency.set_idle(IdleLatency::from_params(p, IdleLatency::Keep).map_err(&e)?);
    Ok(Box::new(Colloid {
        name,
        latency,
        theta,
        writes: name != "colloid",
        shift,
        drained,
        t,
    }))
}

/// The Colloid policies.
pub struct Colloid {
    name: &'static str,
    t: Tiered,
    latency: LatencySignals,
    theta: f64,
    /// Whether latency counts writes (Little's law over all operations).
    writes: bool,
    shift: Shift,
    drained: Drained,
}

impl Colloid {
    fn latency_ns(&self, d: &DeviceLatency, drained: bool) -> Option<f64> {
        if drained {
            match self.drained {
                Drained::PerfRead => d.lowest_read_ns,
                Drained::Unloaded if self.writes => d.lowest_all_ns,
                Drained::Unloaded => d.lowest_block_read_ns.or(d.lowest_read_ns),
            }
        } else if self.writes {
            d.little_ns()
        } else {
            d.read_ns.get()
        }
    }

    /// The share of access probability to move this quantum, toward the
    /// performance device when `up`.
    fn shift_size(&mut self, perf: &DeviceLatency, cap: &DeviceLatency, up: bool) -> f64 {
        match &mut self.shift {
            Shift::Expr3 => expr3(perf, cap).unwrap_or(0.05),
            Shift::Binary {
                step,
                delta_min,
                last_up,
            } => {
                if last_up.is_some_and(|l| l != up) {
                    *step = (*step / 2.0).max(*delta_min);
                }
                *last_up = Some(up);
                *step
            }
        }
    }

    /// Whether device `d` counts as drained: it has completed nothing for
    /// `DRAINED_NS`, and it is the performance device unless
    /// `drained_latency` is `unloaded`.
    fn drained(&self, d: usize) -> bool {
        let eligible = self.drained == Drained::Unloaded || d == self.t.tiers.perf() as usize;
        eligible && self.latency.device(d).idle_ns >= DRAINED_NS
    }

    /// Device `d`'s latency, ns: its unloaded latency once it is drained.
    fn device_latency_ns(&self, d: usize) -> Option<f64> {
        self.latency_ns(self.latency.device(d), self.drained(d))
    }
}

/// Colloid's `COLLOID_EXPR3` shift size, or `None` before both devices
/// have arrivals.
fn expr3(perf: &DeviceLatency, cap: &DeviceLatency) -> Option<f64> {
    let (od, id) = (perf.occupancy.get()?, perf.arrivals_per_s.get()?);
    let (oa, ia) = (cap.occupancy.get()?, cap.arrivals_per_s.get()?);
    if id <= 0.0 || ia <= 0.0 {
        return None;
    }
    let beta = id / ia;
    let den = (id + ia) * (beta * oa / ia + od / id);
    (den > 0.0).then(|| ((od - beta * oa).abs() / den).clamp(0.0, 1.0))
}

impl Policy for Colloid {
    tiered_policy_methods!();

    fn name(&self) -> &str {
        self.name
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        serve(&mut self.t, access, true, ctx)
    }
    fn on_tick(&mut self, obs: &Observation, ctx: &mut TickCtx<'_>) {
        self.t.now_ns = obs.now_ns;
        self.latency.observe(obs);
        let (p, h) = (self.t.tiers.perf() as usize, self.t.tiers.home() as usize);
        for d in [p, h] {
            if self.drained(d) {
                self.latency.forget(d);
            }
        }
        let (perf, cap) = (*self.latency.device(p), *self.latency.device(h));
        let now = obs.now_ns;
        // A device not measured yet while the other is counts as idle
        // (latency 0), as in MOST: load then moves toward it, which
        // measures it.
        let measured = match (self.device_latency_ns(p), self.device_latency_ns(h)) {
            (None, None) => (None, None),
            (lp, lc) => (Some(lp.unwrap_or(0.0)), Some(lc.unwrap_or(0.0))),
        };
        match measured {
            (Some(lp), Some(lc)) if lp > (1.0 + self.theta) * lc => {
                let dp = self.shift_size(&perf, &cap, false);
                let t = &mut self.t;
                t.migrator
                    .demote_share(&mut t.tiers, &t.heat, dp, now, ctx.jobs);
            }
            (Some(lp), Some(lc)) if lp < (1.0 - self.theta) * lc => {
                let dp = self.shift_size(&perf, &cap, true);
                let t = &mut self.t;
                t.migrator
                    .promote_share(&mut t.tiers, &t.heat, dp, now, ctx.jobs);
            }
            (Some(_), Some(_)) => {} // balanced: no migration
            _ => {
                let t = &mut self.t;
                t.migrator
                    .tier(&mut t.tiers, &t.heat, Allowed::BOTH, now, ctx.jobs);
            }
        }
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        let (p, h) = (self.t.tiers.perf() as usize, self.t.tiers.home() as usize);
        let us = |d: usize| self.device_latency_ns(d).unwrap_or(0.0) / 1e3;
        let mut v = vec![("latency_perf_us", us(p)), ("latency_cap_us", us(h))];
        v.extend(self.t.state());
        v
    }
}
