//! TICA (Salkhordeh et al., "Reliable Write-Back for I/O Caching in
//! Heterogeneous SSDs"): DRAM + read-optimized SSD + write-optimized SSD
//! over a disk, dirty pages kept in two copies. TICA-EF drops DRAM
//! read-partition victims (sparing the SSDs' endurance), TICA-WED copies
//! them to the WO-SSD (for hits), and TICA-A switches between the two by
//! the paper's Algorithms 2 and 3. See `crate::tica` for the machinery.

use super::{param_err, Registered};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};
use crate::tica::adapt::{Adaptive, Mode, Thresholds};
use crate::tica::{Choice, Ssds, Tica};

/// Registry entry: TICA-EF.
pub const REGISTERED_EF: Registered = Registered {
    name: "tica-ef",
    summary:
        "TICA-EF: DRAM + RO-SSD + WO-SSD write-back cache, dirty pages twice, DRAM victims dropped",
    build: build_ef,
};

/// Registry entry: TICA-WED.
pub const REGISTERED_WED: Registered = Registered {
    name: "tica-wed",
    summary: "TICA-WED: as TICA-EF, but DRAM victims are copied to the WO-SSD",
    build: build_wed,
};

/// Registry entry: TICA-A.
pub const REGISTERED_A: Registered = Registered {
    name: "tica-a",
    summary: "TICA-A: TICA switching between EF and WED by DRAM thrashing and cold data trapped on the SSDs",
    build: build_a,
};

fn build_ef(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Tica::build(
        "tica-ef",
        Choice::Fixed(Mode::Ef),
        Ssds::ReadWrite,
        p,
        vol,
    )?))
}

fn build_wed(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(Box::new(Tica::build(
        "tica-wed",
        Choice::Fixed(Mode::Wed),
        Ssds::ReadWrite,
        p,
        vol,
    )?))
}

fn build_a(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err("tica-a");
    let t = Thresholds {
        eq_hit_min: p.f64_in("t_min", 0.15, 0.0, 1.0).map_err(&e)?,
        dram_hit_max: p.f64_in("t_max", 0.25, 0.0, 1.0).map_err(&e)?,
        disk_read: p.f64_in("t_hdd", 0.2, 0.0, 1.0).map_err(&e)?,
        read_hit: p.f64_in("t_read", 0.2, 0.0, 1.0).map_err(&e)?,
    };
    let steps = p.u64_in("smbi_steps", 3, 0, 1000).map_err(&e)? as u32;
    // Algorithm 2's window: twice the DRAM's pages (checked by the build).
    let dram_blocks = vol.devices.first().map_or(1, |d| d.capacity_blocks.max(1));
    let choice = Choice::Adaptive(Adaptive::new(t, 2 * dram_blocks, steps));
    Ok(Box::new(Tica::build(
        "tica-a",
        choice,
        Ssds::ReadWrite,
        p,
        vol,
    )?))
}

/// Whether the registered policy `name` runs on a DRAM and two SSDs over
/// a home device (TICA and the baselines its paper compares against), for
/// harnesses that choose a volume by policy.
pub fn on_dram_and_two_ssds(name: &str) -> bool {
    name.starts_with("tica-") || matches!(name, "ucache" | "s-rac" | "raid1")
}
