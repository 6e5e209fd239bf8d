//! A traditional write-back SSD cache on a RAID-1 pair, under a DRAM: the
//! "traditional RAID 1 configurations" the TICA paper sets against its
//! own in Fig. 6 (two like SSDs, or one RO-SSD and one WO-SSD, "mixed").
//!
//! It is the machine uCache and S-RAC run on (`crate::tica`, mirrored)
//! with no filter: every write is cached on both SSDs, and every clean
//! page leaving DRAM (a read miss, which DRAM took first) is copied to
//! both, so read misses reach the SSDs as in the write-back caches the
//! paper's §3 measures (its Fig. 3 CWAF). Reads of a mirrored page
//! alternate between the two SSDs.

use super::Registered;
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};
use crate::tica::rules::Rules;
use crate::tica::{Choice, Ssds, Tica};
use crate::types::Op;

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "raid1",
    summary:
        "DRAM over a RAID-1 SSD pair caching every write and read miss (write-back, no filter)",
    build,
};

/// Admits everything.
#[derive(Debug, Default)]
struct AdmitAll {
    admitted: u64,
}

impl Rules for AdmitAll {
    fn note(&mut self, _block: u64, _op: Op) {}

    fn admit_victim(&mut self, _block: u64, _reused: bool) -> bool {
        self.admitted += 1;
        true
    }

    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("admitted_victims", self.admitted as f64)]
    }
}

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let rules = Box::new(AdmitAll::default());
    Ok(Box::new(Tica::build(
        "raid1",
        Choice::Rules(rules),
        Ssds::Mirrored,
        p,
        vol,
    )?))
}
