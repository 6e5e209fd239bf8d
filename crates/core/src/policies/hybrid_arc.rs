//! Hybrid-ARC, the Hibachi paper's second baseline (§V-A): DRAM caches
//! clean pages and NVRAM is split between clean and dirty pages by an
//! ARC-like target moved by clean and dirty ghost caches (the same
//! adaptation as Hibachi's, `adaptation = "paper"` or `"code"`), with LRU
//! victims on both sides. See `crate::hybrid`.

use super::hibachi::adaptation;
use super::Registered;
use crate::hybrid::{Hybrid, Rules};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "hybrid-arc",
    summary: "Hybrid-ARC: DRAM clean cache + NVRAM split between clean and dirty pages by ghost caches, LRU victims (the Hibachi paper's baseline)",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let rules = Rules {
        name: "hybrid-arc",
        clean_by_frequency: false,
        adaptation: Some(adaptation(p, "hybrid-arc")?),
        run_threshold: None,
        keep_frequent_dirty: false,
        promote_read_hits: false,
    };
    Ok(Box::new(Hybrid::build(rules, p, vol)?))
}
