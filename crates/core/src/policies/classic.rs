//! Classic caching: every read miss is admitted and every hit is served by
//! the cache device (LRU or ARC; write-around, write-through or write-back).

use super::cache::{CachePolicy, Scheduler};
use super::Registered;
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "classic",
    summary: "classic inclusive caching: admit every miss, serve every hit from the cache (replacement, write_mode)",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(CachePolicy::build(p, vol, Classic)?))
}

/// Classic caching's scheduler: the defaults (admit everything, serve every
/// hit from the cache) and no controller.
pub struct Classic;

impl Scheduler for Classic {
    fn name(&self) -> &'static str {
        "classic"
    }
}
