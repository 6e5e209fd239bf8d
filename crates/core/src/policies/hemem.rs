//! HeMem, classic hotness-based tiering (Raybuck et al., SOSP '21), as the
//! MOST paper runs it on storage: per-segment read and write counts (hot
//! at 8, every count halved when one passes 18); every quantum (200 ms)
//! hot capacity segments are promoted into free performance-device slots,
//! or swapped with the coldest performance segments that are not hot. New
//! data (the first write to a segment, MOST §3.2.2; reads before it find
//! nothing to place) is allocated on the performance device while it has
//! room. Hot data is served only from the performance device, so the
//! capacity device's bandwidth goes unused under load (MOST §2.2).

use super::tiered::{tiered_policy_methods, Tiered};
use super::Registered;
use crate::observe::Observation;
use crate::params::Params;
use crate::policy::{Ctx, Policy, PolicyError, TickCtx, VolumeSpec};
use crate::tiering::migrator::Allowed;
use crate::tiering::tiers::Class;
use crate::types::{Access, Op, Outcome};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "hemem",
    summary:
        "classic tiering: hot segments promoted to the fast device every quantum, served only there",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(HeMem {
        t: Tiered::build("hemem", p, vol, seed)?,
    }))
}

/// The HeMem policy.
pub struct HeMem {
    t: Tiered,
}

/// Serves one access of a tiering policy that never offloads: reads from
/// the current copy (the performance copy when both are), writes to the
/// segment's tier, and a segment's first write allocates it on the
/// performance device when `allocate` and a slot is free.
pub(super) fn serve(t: &mut Tiered, access: Access, allocate: bool, ctx: &mut Ctx<'_>) -> Outcome {
    let (segment, first) = t.record(access);
    let d = match access.op {
        Op::Read => t.tiers.read(access.block, false, ctx),
        Op::Write => {
            if first && allocate && t.tiers.class(segment) == Class::Capacity {
                t.tiers.allocate(segment);
            }
            t.tiers.write(access.block, false, ctx)
        }
    };
    if d == t.tiers.perf() {
        Outcome::Hit(d)
    } else {
        Outcome::Miss
    }
}

impl Policy for HeMem {
    tiered_policy_methods!();
    fn name(&self) -> &str {
        "hemem"
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        serve(&mut self.t, access, true, ctx)
    }
    fn on_tick(&mut self, obs: &Observation, ctx: &mut TickCtx<'_>) {
        self.t.now_ns = obs.now_ns;
        let t = &mut self.t;
        t.migrator
            .tier(&mut t.tiers, &t.heat, Allowed::BOTH, obs.now_ns, ctx.jobs);
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        self.t.state()
    }
}
