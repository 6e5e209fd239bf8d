//! What the tiering tests share: a small two-device volume and a driver
//! that completes every operation handed out.

use tiermux_core::policy::{DeviceRole, DeviceSpec, VolumeSpec};
use tiermux_core::Dispatcher;

/// Blocks per segment in these volumes.
pub const SEGMENT_BLOCKS: u64 = 4;
/// Segments the fast device holds.
pub const SLOTS: u64 = 4;

/// A fast device of `SLOTS` segments over a 64-block home device.
pub fn volume() -> VolumeSpec {
    let dev = |name: &str, capacity_blocks, role| DeviceSpec {
        name: name.into(),
        capacity_blocks,
        role,
    };
    VolumeSpec {
        num_blocks: 64,
        block_size: 4096,
        devices: vec![
            dev("fast", SLOTS * SEGMENT_BLOCKS, DeviceRole::Tier),
            dev("slow", 64, DeviceRole::Home),
        ],
    }
}

/// Completes every operation handed out and drops the acknowledgements.
pub fn settle(d: &mut Dispatcher) {
    loop {
        if let Some(r) = d.pop_ready() {
            d.complete(r.flight, r.index, 0);
        } else if d.pop_acked().is_none() {
            break;
        }
    }
}
