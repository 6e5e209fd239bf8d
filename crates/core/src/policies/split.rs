//! Splitting: each block lives on exactly one device, chosen once by a hash
//! of its address so that a fraction `split_rate` of the address space (and
//! of the accesses of any workload uniform over it) is on device 0. Nothing
//! ever moves. The Orthus paper uses it as the bound a perfect static
//! division of load reaches (§3.1, eqs. 8 and 9).

use super::{param_err, Registered};
use crate::params::Params;
use crate::policy::{Ctx, Policy, PolicyError, VolumeSpec};
use crate::rng::splitmix64;
use crate::types::DeviceIndex;
use crate::types::{Access, Outcome};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "split",
    summary: "static split: a fraction split_rate of blocks lives on the fast device, the rest on the slow one",
    build,
};

fn build(p: &Params, vol: &VolumeSpec, seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err("split");
    let rate = p.f64_in("split_rate", 0.5, 0.0, 1.0).map_err(&e)?;
    if vol.devices.len() < 2 {
        return Err(PolicyError::Volume {
            policy: "split".into(),
            message: format!("needs 2 devices, the volume has {}", vol.devices.len()),
        });
    }
    Ok(Box::new(Split {
        threshold: if rate >= 1.0 {
            u64::MAX
        } else {
            (rate * 2f64.powi(64)) as u64
        },
        all_fast: rate >= 1.0,
        salt: splitmix64(seed ^ 0x5EED_5EED),
        vol_blocks: vol.num_blocks,
        fast: 0,
        slow: (vol.devices.len() - 1) as DeviceIndex,
    }))
}

/// Static splitting.
pub struct Split {
    threshold: u64,
    all_fast: bool,
    salt: u64,
    vol_blocks: u64,
    /// The first device, which holds a fraction `split_rate` of blocks.
    fast: DeviceIndex,
    /// The last device, which holds the rest.
    slow: DeviceIndex,
}

impl Split {
    /// The device that holds `block`.
    #[inline]
    pub fn device_of(&self, block: u64) -> DeviceIndex {
        if self.all_fast || splitmix64(block ^ self.salt) < self.threshold {
            self.fast
        } else {
            self.slow
        }
    }
}

impl Policy for Split {
    fn name(&self) -> &str {
        "split"
    }
    fn address_space(&self, device: usize) -> u64 {
        if device == self.fast as usize || device == self.slow as usize {
            self.vol_blocks
        } else {
            0
        }
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        ctx.plan
            .client(self.device_of(access.block), access.op, access.block);
        Outcome::NotApplicable
    }
}
