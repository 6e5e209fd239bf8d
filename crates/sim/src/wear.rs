//! What a run does to the endurance of its flash devices: the TICA
//! paper's cache write amplification factor (equation 1: writes to the
//! SSDs per write of the workload) and each device's lifetime at the rate
//! the run wrote it. The SSDs are the devices whose profile gives an
//! endurance (`endurance_writes_per_gb`: `ro-ssd` and `wo-ssd` from TICA
//! Table 1, the MOST paper's devices from their ratings); devices without
//! one do not wear out here. Where a profile also gives the warranty
//! period, a run reports MOST §4.2's lifetime under its migration writes.

use tiermux_device::economics::{endurance_years, DAYS_PER_YEAR, HOURS_PER_YEAR};
use tiermux_device::lookup_profile;

use crate::config::SimConfig;

/// A device's rated endurance, from its profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Endurance {
    /// Full-device writes (writes per GB of capacity) it endures.
    pub writes_per_gb: f64,
    /// Years over which the maker warrants them, where the profile says.
    pub warranty_years: Option<f64>,
}

impl Endurance {
    /// The rated drive writes per day: the endurance spread evenly over
    /// the warranty's days (`None` without a warranty period).
    pub fn rated_dwpd(&self) -> Option<f64> {
        let years = self.warranty_years?;
        assert!(years > 0.0, "a warranty of {years} years");
        Some(self.writes_per_gb / (years * DAYS_PER_YEAR))
    }

    /// MOST §4.2's lifetime under migration: years until the device's
    /// endurance is used up when the application writes it at its rated
    /// DWPD and migrations add `migration_dwpd` (so a run that migrates
    /// nothing to it gives the warranty period). `None` without a
    /// warranty period.
    pub fn migration_lifetime_years(&self, migration_dwpd: f64) -> Option<f64> {
        assert!(migration_dwpd >= 0.0, "{migration_dwpd} DWPD");
        let rated = self.rated_dwpd()?;
        Some(self.writes_per_gb / ((rated + migration_dwpd) * DAYS_PER_YEAR))
    }
}

/// Each configured device's endurance, where its profile gives one.
pub fn device_endurance(cfg: &SimConfig) -> Vec<Option<Endurance>> {
    cfg.devices
        .iter()
        .map(|name| {
            let p = lookup_profile(name, &cfg.profiles)?;
            Some(Endurance {
                writes_per_gb: p.endurance_writes_per_gb?,
                warranty_years: p.warranty_years,
            })
        })
        .collect()
}

/// Years a device of `capacity_bytes` that endures `writes_per_gb` lasts
/// when written `written_bytes` every `measured_s`; `None` when the run
/// did not write it.
pub fn lifetime_years(
    writes_per_gb: f64,
    capacity_bytes: u64,
    written_bytes: u64,
    measured_s: f64,
) -> Option<f64> {
    if written_bytes == 0 || measured_s <= 0.0 {
        return None;
    }
    let per_year = written_bytes as f64 / 1e9 * (HOURS_PER_YEAR * 3600.0 / measured_s);
    Some(endurance_years(
        writes_per_gb,
        capacity_bytes as f64 / 1e9,
        per_year,
    ))
}

/// Seconds in a day, the unit of drive writes per day.
const DAY_S: f64 = 86_400.0;

/// Drive writes per day (MOST §4.2): `written_bytes` every `measured_s`,
/// as full writes of a device of `capacity_bytes` a day; `None` without a
/// measured interval or a capacity.
pub fn drive_writes_per_day(
    written_bytes: u64,
    measured_s: f64,
    capacity_bytes: u64,
) -> Option<f64> {
    (measured_s > 0.0 && capacity_bytes > 0)
        .then(|| written_bytes as f64 * (DAY_S / measured_s) / capacity_bytes as f64)
}

/// Equation 1: bytes written to the SSDs over bytes the clients wrote;
/// `None` without SSDs or client writes.
pub fn cwaf(ssd_written_bytes: Option<u64>, client_written_bytes: u64) -> Option<f64> {
    let ssd = ssd_written_bytes?;
    (client_written_bytes > 0).then(|| ssd as f64 / client_written_bytes as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: 282 GB (MOST §4.2's migration to the performance tier)
    /// written to a 750 GB device in a day is 0.376 drive writes per day,
    /// and in 5,000 s 86,400 / 5,000 times that.
    #[test]
    fn drive_writes_per_day_by_hand() {
        let d = drive_writes_per_day(282_000_000_000, 86_400.0, 750_000_000_000).unwrap();
        assert!((d - 0.376).abs() < 1e-12, "{d}");
        let d = drive_writes_per_day(282_000_000_000, 5_000.0, 750_000_000_000).unwrap();
        assert!((d - 0.376 * 86_400.0 / 5_000.0).abs() < 1e-9, "{d}");
        assert_eq!(drive_writes_per_day(1, 0.0, 10), None);
        assert_eq!(drive_writes_per_day(1, 1.0, 0), None);
    }

    /// By hand: a 10 GB WO-SSD (6,416 writes per GB) written 1 GB every
    /// 3,600 s takes 8,760 GB a year, so it lasts 64,160 / 8,760 = 7.324
    /// years.
    #[test]
    fn a_lifetime_by_hand() {
        let y = lifetime_years(6416.0, 10_000_000_000, 1_000_000_000, 3600.0).unwrap();
        assert!((y - 64_160.0 / 8_760.0).abs() < 1e-9, "{y}");
        assert_eq!(lifetime_years(6416.0, 10, 0, 1.0), None);
        assert_eq!(cwaf(Some(300), 100), Some(3.0));
        assert_eq!(cwaf(None, 100), None);
        assert_eq!(cwaf(Some(300), 0), None);
    }

    /// MOST §4.2's own numbers: the P4800X, warranted for 30 DWPD over 5
    /// years, lasts 5.0 years without migration writes and "4.1 years"
    /// with Colloid's 6.6 DWPD of them (5 x 30 / 36.6 = 4.098). The 960,
    /// rated 0.37 DWPD over 3 years, lasts 3 x 0.37 / 3.47 = 0.320 years
    /// (117 days) with 3.1 DWPD of migration writes; the paper's "129
    /// days" leaves out the application's rated writes (3 x 0.37 / 3.1
    /// is 131 days).
    #[test]
    fn most_lifetimes_by_hand() {
        let optane = Endurance {
            writes_per_gb: 30.0 * 365.0 * 5.0,
            warranty_years: Some(5.0),
        };
        assert!((optane.rated_dwpd().unwrap() - 30.0).abs() < 1e-12);
        let y = optane.migration_lifetime_years(0.0).unwrap();
        assert!((y - 5.0).abs() < 1e-12, "{y}");
        let y = optane.migration_lifetime_years(6.6).unwrap();
        assert!((y - 150.0 / 36.6).abs() < 1e-12, "{y}");
        assert_eq!(format!("{y:.1}"), "4.1");
        let nvme = Endurance {
            writes_per_gb: 0.37 * 365.0 * 3.0,
            warranty_years: Some(3.0),
        };
        let days = nvme.migration_lifetime_years(3.1).unwrap() * 365.0;
        assert!((days - 1.11 / 3.47 * 365.0).abs() < 1e-9, "{days}");
        assert_eq!(days.round(), 117.0);
        let unrated = Endurance {
            writes_per_gb: 6416.0,
            warranty_years: None,
        };
        assert_eq!(unrated.migration_lifetime_years(1.0), None);
    }
}
