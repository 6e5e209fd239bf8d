//! uCache (Jiang, Che, Xiong and Ma, "uCache: A Utility-Aware Multilevel
//! SSD Cache Management Policy", HPCC 2013) as the TICA paper runs it: a
//! DRAM over an SSD cache whose DRAM level filters what enters the SSD,
//! modified (as the TICA paper says) to have no single point of failure:
//! the SSD level is a RAID-1 pair of like SSDs, and writes are written to
//! both at once.
//!
//! How faithful (no code of uCache is public; `docs/tica.md`): a read miss
//! is filled into DRAM only, never the SSD ("avoids writing read misses
//! to the SSD"); a clean page leaving DRAM enters the SSDs only when it
//! was read again while in DRAM, our reading of the utility filter; the
//! SSDs are one LRU. uCache's DRAM write buffer, which aggregates small
//! writes into large ones, is not modelled: every write is one page to
//! each SSD.

use super::Registered;
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};
use crate::tica::rules::Rules;
use crate::tica::{Choice, Ssds, Tica};
use crate::types::Op;

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "ucache",
    summary: "uCache: DRAM over a RAID-1 SSD pair, read misses kept off the SSDs, DRAM victims read again admitted",
    build,
};

/// uCache's filter: DRAM victims read again while in DRAM enter the SSDs.
#[derive(Debug, Default)]
struct ReuseFilter {
    admitted: u64,
    refused: u64,
}

impl Rules for ReuseFilter {
    fn note(&mut self, _block: u64, _op: Op) {}

    fn admit_victim(&mut self, _block: u64, reused: bool) -> bool {
        if reused {
            self.admitted += 1;
        } else {
            self.refused += 1;
        }
        reused
    }

    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("admitted_victims", self.admitted as f64),
            ("refused_victims", self.refused as f64),
        ]
    }
}

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let rules = Box::new(ReuseFilter::default());
    Ok(Box::new(Tica::build(
        "ucache",
        Choice::Rules(rules),
        Ssds::Mirrored,
        p,
        vol,
    )?))
}
