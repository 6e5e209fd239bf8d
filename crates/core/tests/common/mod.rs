//! What the tiering tests share: a small two-device volume, a driver
//! that completes every operation handed out, and quanta of given device
//! latencies.

use tiermux_core::observe::DeviceObservation;
use tiermux_core::policy::{DeviceRole, DeviceSpec, VolumeSpec};
use tiermux_core::{Dispatcher, Observation};

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

/// One 200 ms quantum in which each device completed 100 reads at mean
/// latencies `perf_us` and `cap_us`.
pub fn quantum(now_ns: u64, perf_us: u64, cap_us: u64) -> Observation {
    let device = |us: u64| DeviceObservation {
        read_ops: 100,
        read_latency_sum_ns: 100 * us * 1000,
        latency_sum_ns: 100 * us * 1000,
        ..Default::default()
    };
    Observation {
        now_ns,
        interval_ns: 200_000_000,
        devices: vec![device(perf_us), device(cap_us)],
        ..Observation::default()
    }
}

/// The value of `name` in a policy's controller state.
pub fn get(state: &[(&str, f64)], name: &str) -> f64 {
    state
        .iter()
        .find(|(k, _)| *k == name)
        .unwrap_or_else(|| panic!("no {name} in {state:?}"))
        .1
}
