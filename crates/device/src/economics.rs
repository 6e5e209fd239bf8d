//! What a device costs besides time: power by state, price, mean time to
//! failure and write endurance, and the models the TICA paper builds on
//! them: the energy of a run (its equation 2), the reliability of one
//! device (equation 3) and of redundant cache configurations (equations 4
//! and 5), the price of a cache configuration and a device's lifetime.

/// A device's power by state, W (the TICA paper's Table 1 columns).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerW {
    /// While reading.
    pub read_w: f64,
    /// While writing.
    pub write_w: f64,
    /// While idle.
    pub idle_w: f64,
}

/// Power, price, failure rate and endurance of one device class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Economics {
    /// Short name (`dram`, `c-ssd`, `ro-ssd`, `wo-ssd`).
    pub name: &'static str,
    /// Power while reading, W.
    pub read_power_w: f64,
    /// Power while writing, W.
    pub write_power_w: f64,
    /// Power while idle, W.
    pub idle_power_w: f64,
    /// Price, dollars per GB.
    pub price_per_gb: f64,
    /// Mean time to failure, hours.
    pub mttf_hours: f64,
    /// Writes per GB of capacity the device endures (its full-device
    /// writes); `None` for unlimited (DRAM).
    pub endurance_writes_per_gb: Option<f64>,
}

/// Where the numbers of [`TICA_TABLE1`] come from.
pub const TICA_TABLE1_SOURCE: &str =
    "TICA (Salkhordeh et al.) Table 1: MTTF, $/GB, writes/GB, read/write/idle power";

/// TICA Table 1: DRAM, a consumer SSD (C-SSD), the read-optimized and the
/// write-optimized SSD.
pub const TICA_TABLE1: [Economics; 4] = [
    Economics {
        name: "dram",
        read_power_w: 4.0,
        write_power_w: 4.0,
        idle_power_w: 4.0,
        price_per_gb: 7.875,
        mttf_hours: 4.0e6,
        endurance_writes_per_gb: None,
    },
    Economics {
        name: "c-ssd",
        read_power_w: 3.3,
        write_power_w: 3.4,
        idle_power_w: 0.07,
        price_per_gb: 0.375,
        mttf_hours: 1.5e6,
        endurance_writes_per_gb: Some(750.0),
    },
    Economics {
        name: "ro-ssd",
        read_power_w: 3.3,
        write_power_w: 3.4,
        idle_power_w: 0.07,
        price_per_gb: 0.74,
        mttf_hours: 2.0e6,
        endurance_writes_per_gb: Some(1171.0),
    },
    Economics {
        name: "wo-ssd",
        read_power_w: 2.4,
        write_power_w: 3.1,
        idle_power_w: 1.3,
        price_per_gb: 0.842,
        mttf_hours: 2.0e6,
        endurance_writes_per_gb: Some(6416.0),
    },
];

impl Economics {
    /// Its power by state.
    pub fn power(&self) -> PowerW {
        PowerW {
            read_w: self.read_power_w,
            write_w: self.write_power_w,
            idle_w: self.idle_power_w,
        }
    }
}

/// The Table 1 entry named `name`.
pub fn tica_table1(name: &str) -> Option<Economics> {
    TICA_TABLE1.iter().copied().find(|e| e.name == name)
}

/// Days in a year, as the paper's mission time and endurance ratings in
/// drive writes per day count them.
pub const DAYS_PER_YEAR: f64 = 365.0;

/// Hours in the year the paper's equation 3 uses as its mission time.
pub const HOURS_PER_YEAR: f64 = DAYS_PER_YEAR * 24.0;

/// Equation 3: the probability that a device with `mttf_hours` survives
/// `hours`, failures being exponentially distributed.
pub fn reliability(mttf_hours: f64, hours: f64) -> f64 {
    assert!(
        mttf_hours > 0.0 && hours >= 0.0,
        "MTTF and time are positive"
    );
    (-hours / mttf_hours).exp()
}

/// Equation 5: a mirrored pair (uCache's and S-RAC's two WO-SSDs) loses
/// data only when both fail; returns the unreliability (probability of
/// loss) over `hours`.
pub fn mirror_unreliability(a: &Economics, b: &Economics, hours: f64) -> f64 {
    (1.0 - reliability(a.mttf_hours, hours)) * (1.0 - reliability(b.mttf_hours, hours))
}

/// Equation 4: TICA loses data when the WO-SSD fails together with the
/// device holding the other copy, the DRAM for a share `alpha` of dirty
/// data and the RO-SSD for the rest; returns the unreliability over
/// `hours`.
pub fn tica_unreliability(
    wo: &Economics,
    ro: &Economics,
    dram: &Economics,
    alpha: f64,
    hours: f64,
) -> f64 {
    assert!((0.0..=1.0).contains(&alpha), "alpha is a share");
    let fail = |e: &Economics| 1.0 - reliability(e.mttf_hours, hours);
    alpha * fail(wo) * fail(dram) + (1.0 - alpha) * fail(wo) * fail(ro)
}

/// What one device did in a run, for [`energy_j`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activity {
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
    /// The device's read latency, s (the paper's RLat).
    pub read_latency_s: f64,
    /// The device's write latency, s (WLat).
    pub write_latency_s: f64,
    /// The run's length, s.
    pub duration_s: f64,
}

/// Equation 2, one device's term: every read costs its latency at read
/// power, every write its latency at write power, and the rest of the run
/// is idle at idle power; joules. (The paper's equation prices the DRAM's
/// idle time at the RO-SSD's idle power, evidently a typo; each device's
/// own idle power is used here.) The active time is capped at the run's
/// length, so a device busier than one operation at a time is never idle.
pub fn energy_j(p: &PowerW, a: &Activity) -> f64 {
    let read_s = a.reads as f64 * a.read_latency_s;
    let write_s = a.writes as f64 * a.write_latency_s;
    let idle_s = (a.duration_s - read_s - write_s).max(0.0);
    read_s * p.read_w + write_s * p.write_w + idle_s * p.idle_w
}

/// The price of a cache configuration: `(device, GB)` pairs, dollars.
pub fn price(devices: &[(&Economics, f64)]) -> f64 {
    devices.iter().map(|(e, gb)| e.price_per_gb * gb).sum()
}

/// A device's lifetime in years when `written_gb_per_year` reach a device
/// of `capacity_gb` (`None`: it does not wear out).
pub fn lifetime_years(e: &Economics, capacity_gb: f64, written_gb_per_year: f64) -> Option<f64> {
    let writes = e.endurance_writes_per_gb?;
    Some(endurance_years(writes, capacity_gb, written_gb_per_year))
}

/// Years until `written_gb_per_year` use up the endurance of a device of
/// `capacity_gb` that endures `writes_per_gb` full-device writes.
pub fn endurance_years(writes_per_gb: f64, capacity_gb: f64, written_gb_per_year: f64) -> f64 {
    writes_per_gb * capacity_gb / written_gb_per_year.max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> Economics {
        tica_table1(name).unwrap()
    }

    /// Equations 3-5 over one year with Table 1's MTTFs. Golden values
    /// computed by hand from the equations (1 - e^(-8760/MTTF)):
    /// WO and RO 4.3704e-3, DRAM 2.1876e-3. The paper prints 1.14e-5 for
    /// uCache and 1.27e-5 for TICA (alpha 0.8); Table 1's MTTFs give
    /// 1.910e-5 and 1.147e-5 (see docs/reproduction.md).
    #[test]
    fn reliability_follows_equations_3_to_5() {
        let year = HOURS_PER_YEAR;
        assert!((1.0 - reliability(2.0e6, year) - 4.370_421_8e-3).abs() < 1e-10);
        let ucache = mirror_unreliability(&t("wo-ssd"), &t("wo-ssd"), year);
        assert!((ucache - 1.910_058_7e-5).abs() < 1e-11, "{ucache}");
        let tica = tica_unreliability(&t("wo-ssd"), &t("ro-ssd"), &t("dram"), 0.8, year);
        assert!((tica - 1.146_871_8e-5).abs() < 1e-11, "{tica}");
        // All dirty data beside the RO-SSD: a mirror of two equal SSDs.
        let all_ro = tica_unreliability(&t("wo-ssd"), &t("ro-ssd"), &t("dram"), 0.0, year);
        assert!((all_ro - ucache).abs() < 1e-15);
    }

    /// The caches of the evaluation (§5.1: SSDs 10 %, DRAM 1 % of the
    /// working set): TICA's DRAM + RO + WO against uCache's DRAM and two
    /// WO-SSDs, per GB of working set: 0.23695 against 0.24715 dollars.
    #[test]
    fn tica_costs_less_than_a_mirrored_pair() {
        let tica = price(&[(&t("dram"), 0.01), (&t("ro-ssd"), 0.1), (&t("wo-ssd"), 0.1)]);
        let ucache = price(&[(&t("dram"), 0.01), (&t("wo-ssd"), 0.2)]);
        assert!((tica - 0.23695).abs() < 1e-12 && (ucache - 0.24715).abs() < 1e-12);
        assert!((1.0 - tica / ucache - 0.041_270_5).abs() < 1e-6);
    }

    /// Equation 2 by hand for the WO-SSD: 1,000 reads of 100 µs at 2.4 W
    /// (0.24 J), 500 writes of 200 µs at 3.1 W (0.31 J), 0.8 s idle at
    /// 1.3 W (1.04 J) in a 1 s run.
    #[test]
    fn energy_follows_equation_2() {
        let a = Activity {
            reads: 1_000,
            writes: 500,
            read_latency_s: 100e-6,
            write_latency_s: 200e-6,
            duration_s: 1.0,
        };
        assert!((energy_j(&t("wo-ssd").power(), &a) - 1.59).abs() < 1e-12);
        // DRAM draws 4 W whatever it does.
        assert!((energy_j(&t("dram").power(), &a) - 4.0).abs() < 1e-12);
    }

    #[test]
    fn lifetime_scales_with_endurance_and_capacity() {
        // 6,416 full writes of a 100 GB WO-SSD at 64,160 GB a year: 10 years.
        assert_eq!(lifetime_years(&t("wo-ssd"), 100.0, 64_160.0), Some(10.0));
        assert_eq!(lifetime_years(&t("dram"), 1.0, 1.0), None);
    }
}
