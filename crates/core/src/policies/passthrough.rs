//! Pass-through: every access goes to the home (last) device, nothing is
//! placed or moved. Over a single device it measures what the driver itself
//! costs (the engine's NBD path against a plain file server); over a
//! hierarchy it is the "capacity device alone" baseline.

use super::Registered;
use crate::params::Params;
use crate::policy::{Ctx, Policy, PolicyError, VolumeSpec};
use crate::types::{Access, Outcome};

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "passthrough",
    summary: "no placement: every access goes to the home device",
    build,
};

fn build(_p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let home = vol.home().ok_or_else(|| PolicyError::Volume {
        policy: "passthrough".into(),
        message: "needs a device with the role 'home'".into(),
    })?;
    Ok(Box::new(Passthrough {
        home,
        vol_blocks: vol.num_blocks,
    }))
}

/// The pass-through policy.
pub struct Passthrough {
    home: u8,
    vol_blocks: u64,
}

impl Policy for Passthrough {
    fn name(&self) -> &str {
        "passthrough"
    }
    fn address_space(&self, device: usize) -> u64 {
        if device == self.home as usize {
            self.vol_blocks
        } else {
            0
        }
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        for part in 0..access.blocks {
            let block = access.block + part as u64;
            ctx.plan
                .client_part(self.home, access.op, block, part as u16);
        }
        Outcome::NotApplicable
    }
    fn max_access_blocks(&self) -> u32 {
        super::RANGE_DECISION_BLOCKS
    }
    fn may_keep_sole_copies(&self, _devices: u8) -> bool {
        false
    }
}
