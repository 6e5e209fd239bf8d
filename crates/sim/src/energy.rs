//! The energy of a run, as the TICA paper's equation 2 counts it: every
//! read of a device costs its read latency at read power, every write its
//! write latency at write power, and the rest of the measured time is idle
//! at idle power. Devices whose profile gives no power are left out.

use tiermux_device::economics::{energy_j, Activity};
use tiermux_device::{lookup_profile, PowerW};

use crate::config::SimConfig;

/// What equation 2 needs of one device: its power, and the latencies it
/// charges per operation (the profile's QD1 4 KiB latencies, the paper's
/// RLat and WLat).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DevicePower {
    /// Power by state.
    pub power: PowerW,
    /// Charged per read, s.
    pub read_latency_s: f64,
    /// Charged per write, s.
    pub write_latency_s: f64,
}

/// Each configured device's power, where its profile gives one.
pub fn device_powers(cfg: &SimConfig) -> Vec<Option<DevicePower>> {
    cfg.devices
        .iter()
        .map(|name| {
            let spec = lookup_profile(name, &cfg.profiles)?;
            Some(DevicePower {
                power: spec.power?,
                read_latency_s: spec.read.latency_us_4k / 1e6,
                write_latency_s: spec.write.latency_us_4k / 1e6,
            })
        })
        .collect()
}

impl DevicePower {
    /// Joules for `reads` and `writes` over `duration_s`.
    pub fn energy_j(&self, reads: u64, writes: u64, duration_s: f64) -> f64 {
        let a = Activity {
            reads,
            writes,
            read_latency_s: self.read_latency_s,
            write_latency_s: self.write_latency_s,
            duration_s,
        };
        energy_j(&self.power, &a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equation 2 by hand for the TICA WO-SSD over one second: 1,000
    /// reads of 104 µs at 2.4 W, 500 writes of 40 µs at 3.1 W, the rest
    /// idle at 1.3 W: 0.2496 + 0.062 + 0.876 * 1.3 = 1.4504 J.
    #[test]
    fn a_profile_with_power_is_charged_by_equation_2() {
        let cfg = SimConfig {
            devices: vec!["wo-ssd".into(), "hdd".into()],
            ..SimConfig::default()
        };
        let p = device_powers(&cfg);
        assert!(p[1].is_none(), "the hdd profile gives no power");
        let j = p[0].unwrap().energy_j(1000, 500, 1.0);
        assert!((j - 1.4504).abs() < 1e-9, "{j}");
    }
}
