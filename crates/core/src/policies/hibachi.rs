//! Hibachi (Fan et al., "Hibachi: A Cooperative Hybrid Cache with NVRAM
//! and DRAM for Storage Arrays"): clean pages in DRAM (borrowing NVRAM
//! when the ghosts ask for it) chosen by LFU with aging, dirty pages in
//! NVRAM by LRU; ghost caches adapt the split (the paper's increments by
//! default, the authors' code's with `adaptation = "code"`); read hits
//! count, write hits only refresh; a frequently read dirty page outlives
//! a less frequent clean one; read-hot clean pages move from NVRAM to
//! DRAM; and the longest run of consecutive dirty pages, when longer than
//! `run_threshold` (10), is flushed in one sequential write (its least
//! frequent page evicted, the rest kept clean at the clean cache's LRU
//! end). See `crate::hybrid` for the shared machinery.

use super::{param_err, Registered};
use crate::hybrid::{Adaptation, Hybrid, Rules};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "hibachi",
    summary: "Hibachi: DRAM clean cache (LFU-aging) + NVRAM dirty cache (LRU), ghost-adapted split, sequential dirty-run flushing",
    build,
};

/// Reads the ghost adaptation: `"paper"` (default) or `"code"`.
pub fn adaptation(p: &Params, policy: &str) -> Result<Adaptation, PolicyError> {
    let how = p
        .choice("adaptation", "paper", &["paper", "code"])
        .map_err(param_err(policy))?;
    Ok(if how == "code" {
        Adaptation::Code
    } else {
        Adaptation::Paper
    })
}

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let run_threshold = p
        .u64_in("run_threshold", 10, 1, 1 << 20)
        .map_err(param_err("hibachi"))?;
    let rules = Rules {
        name: "hibachi",
        clean_by_frequency: true,
        adaptation: Some(adaptation(p, "hibachi")?),
        run_threshold: Some(run_threshold),
        keep_frequent_dirty: true,
        promote_read_hits: true,
    };
    Ok(Box::new(Hybrid::build(rules, p, vol)?))
}
