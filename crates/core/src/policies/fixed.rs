//! Fixed placement, shared by `split` and `stripe`: each block lives on
//! exactly one of two devices (the first and the last of the volume), at
//! its own block number, chosen once by a [`Layout`]; nothing ever moves.
//! So each of the two devices must be as large as the volume.

use crate::policy::{Ctx, Policy, PolicyError, VolumeSpec};
use crate::types::{Access, DeviceIndex, Outcome};

/// Which of the two devices holds a block.
pub trait Layout: Send {
    /// True when `block` lives on the first (fast) device.
    fn on_fast(&self, block: u64) -> bool;
}

/// A fixed placement by `layout`.
pub struct Fixed<L> {
    name: &'static str,
    layout: L,
    vol_blocks: u64,
    /// The first device.
    fast: DeviceIndex,
    /// The last device.
    slow: DeviceIndex,
}

impl<L: Layout + 'static> Fixed<L> {
    /// The policy `name` placing blocks by `layout` over `vol`'s first and
    /// last devices; refuses a volume of fewer than two devices.
    pub fn build(
        name: &'static str,
        vol: &VolumeSpec,
        layout: L,
    ) -> Result<Box<dyn Policy>, PolicyError> {
        if vol.devices.len() < 2 {
            return Err(PolicyError::Volume {
                policy: name.into(),
                message: format!("needs 2 devices, the volume has {}", vol.devices.len()),
            });
        }
        Ok(Box::new(Fixed {
            name,
            layout,
            vol_blocks: vol.num_blocks,
            fast: 0,
            slow: (vol.devices.len() - 1) as DeviceIndex,
        }))
    }
}

impl<L: Layout> Fixed<L> {
    /// The device that holds `block`.
    #[inline]
    pub fn device_of(&self, block: u64) -> DeviceIndex {
        if self.layout.on_fast(block) {
            self.fast
        } else {
            self.slow
        }
    }
}

impl<L: Layout> Policy for Fixed<L> {
    fn name(&self) -> &str {
        self.name
    }
    fn address_space(&self, device: usize) -> u64 {
        if device == self.fast as usize || device == self.slow as usize {
            self.vol_blocks
        } else {
            0
        }
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        for part in 0..access.blocks {
            let block = access.block + part as u64;
            ctx.plan
                .client_part(self.device_of(block), access.op, block, part as u16);
        }
        Outcome::NotApplicable
    }
    fn max_access_blocks(&self) -> u32 {
        super::RANGE_DECISION_BLOCKS
    }
}
