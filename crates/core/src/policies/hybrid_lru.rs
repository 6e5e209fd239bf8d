//! Hybrid-LRU, the Hibachi paper's first baseline (§V-A): DRAM a clean
//! cache, NVRAM a write buffer, both LRU; clean pages may borrow free
//! NVRAM and are evicted first when NVRAM is needed; NVRAM overflow
//! flushes the LRU dirty page (which, clean at the LRU end, is the next
//! to go). No ghosts. See `crate::hybrid`.

use super::Registered;
use crate::hybrid::{Hybrid, Rules};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "hybrid-lru",
    summary: "Hybrid-LRU: DRAM clean LRU cache + NVRAM dirty LRU write buffer (the Hibachi paper's baseline)",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let rules = Rules {
        name: "hybrid-lru",
        clean_by_frequency: false,
        adaptation: None,
        run_threshold: None,
        keep_frequent_dirty: false,
        promote_read_hits: false,
    };
    Ok(Box::new(Hybrid::build(rules, p, vol)?))
}
