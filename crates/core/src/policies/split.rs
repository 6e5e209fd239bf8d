//! Splitting: each block lives on exactly one device, chosen once by a hash
//! of its address so that a fraction `split_rate` of the address space (and
//! of the accesses of any workload uniform over it) is on device 0. Nothing
//! ever moves ([`super::fixed`]). The Orthus paper uses it as the bound a
//! perfect static division of load reaches (§3.1, eqs. 8 and 9).

use super::fixed::{Fixed, Layout};
use super::{param_err, Registered};
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};
use crate::rng::splitmix64;

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "split",
    summary: "static split: a fraction split_rate of blocks lives on the fast device, the rest on the slow one",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err("split");
    let rate = p.f64_in("split_rate", 0.5, 0.0, 1.0).map_err(&e)?;
    let layout = SplitLayout {
        threshold: if rate >= 1.0 {
            u64::MAX
        } else {
            (rate * 2f64.powi(64)) as u64
        },
        all_fast: rate >= 1.0,
        salt: splitmix64(seed ^ 0x5EED_5EED),
    };
    Fixed::build("split", vol, layout)
}

/// A block is on the fast device when its salted hash falls below the
/// threshold.
struct SplitLayout {
    threshold: u64,
    all_fast: bool,
    salt: u64,
}

impl Layout for SplitLayout {
    #[inline]
    fn on_fast(&self, block: u64) -> bool {
        self.all_fast || splitmix64(block ^ self.salt) < self.threshold
    }
}
