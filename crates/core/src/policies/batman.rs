//! BATMAN (Chou et al., MEMSYS '17) as the MOST paper runs it: tiering
//! that holds the share of accesses served by the performance device at a
//! static target, the ratio of the devices' read bandwidths
//! (`perf_access_share`; 2.2 / (2.2 + 1.0) for MOST Table 1's Optane over
//! PCIe 3 NVMe at 4 KiB). Every quantum (200 ms) it measures the share of
//! the interval's accesses the performance device served; above the target
//! (by more than `tolerance`) it demotes hot segments carrying the excess,
//! below it promotes hot capacity segments. New data and counters are
//! HeMem's.

use super::hemem::serve;
use super::tiered::{tiered_policy_methods, Tiered};
use super::{param_err, Registered};
use crate::observe::Observation;
use crate::params::Params;
use crate::policy::{Ctx, Policy, PolicyError, TickCtx, VolumeSpec};
use crate::tiering::migrator::Allowed;
use crate::types::{Access, Outcome};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "batman",
    summary: "tiering that holds the fast device's share of accesses at the devices' read-bandwidth ratio",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err("batman");
    let t = Tiered::build("batman", p, vol, seed)?;
    Ok(Box::new(Batman {
        target: p
            .f64_in("perf_access_share", 2.2 / 3.2, 0.0, 1.0)
            .map_err(&e)?,
        tolerance: p.f64_in("tolerance", 0.02, 0.0, 1.0).map_err(&e)?,
        perf_accesses: 0,
        accesses: 0,
        t,
    }))
}

/// The BATMAN policy.
pub struct Batman {
    t: Tiered,
    target: f64,
    tolerance: f64,
    perf_accesses: u64,
    accesses: u64,
}

impl Policy for Batman {
    tiered_policy_methods!();
    fn name(&self) -> &str {
        "batman"
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        let o = serve(&mut self.t, access, true, ctx);
        self.accesses += 1;
        self.perf_accesses += u64::from(o == Outcome::Hit(self.t.tiers.perf()));
        o
    }
    fn on_tick(&mut self, obs: &Observation, ctx: &mut TickCtx<'_>) {
        self.t.now_ns = obs.now_ns;
        let share = self.perf_accesses as f64 / self.accesses.max(1) as f64;
        let measured = self.accesses > 0;
        (self.perf_accesses, self.accesses) = (0, 0);
        let t = &mut self.t;
        let now = obs.now_ns;
        if measured && share > self.target + self.tolerance {
            t.migrator
                .demote_share(&mut t.tiers, &t.heat, share - self.target, now, ctx.jobs);
        } else if measured && share < self.target - self.tolerance {
            t.migrator
                .promote_share(&mut t.tiers, &t.heat, self.target - share, now, ctx.jobs);
        } else if !measured {
            t.migrator
                .tier(&mut t.tiers, &t.heat, Allowed::BOTH, now, ctx.jobs);
        }
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        self.t.state()
    }
}
