//! Classic caching: every read miss is admitted and every hit is served by
//! the cache device (LRU or ARC; write-around, write-through or write-back).

use super::cache::{CacheConfig, CacheCore, JOB_FLUSH};
use crate::map::PlacementMap;
use crate::params::Params;
use crate::policy::{Ctx, Policy, PolicyError, Registered, TickCtx, VolumeSpec};
use crate::types::{Access, Job, Op, Outcome};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "classic",
    summary: "classic inclusive caching: admit every miss, serve every hit from the cache (replacement, write_mode)",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Classic {
        core: CacheCore::new(CacheConfig::from_params(p, vol, "classic")?),
        vol_blocks: vol.num_blocks,
    }))
}

/// Classic caching.
pub struct Classic {
    core: CacheCore,
    vol_blocks: u64,
}

impl Policy for Classic {
    fn name(&self) -> &str {
        "classic"
    }
    fn address_space(&self, device: usize) -> u64 {
        self.core.address_space(device, self.vol_blocks)
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        match access.op {
            Op::Read => self.core.read(access.block, ctx, true, &mut || true),
            Op::Write => self.core.write(access.block, ctx),
        }
    }
    fn start_job(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        if job.kind == JOB_FLUSH {
            self.core.start_flush(job, ctx);
        }
    }
    fn finish_job(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        if job.kind == JOB_FLUSH {
            self.core.finish_flush(ctx);
        }
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("cached_blocks", self.core.cached_blocks() as f64),
            ("dirty_blocks", self.core.dirty_blocks() as f64),
        ]
    }
    fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        self.core.warm(block, map)
    }
}
