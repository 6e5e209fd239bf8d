//! The TICA paper's Table 2: the 17 workloads of its evaluation, each by
//! its total request size and its read and write request counts. The
//! synthetic trace presets of the same names ([`crate::synth`]) match these
//! three columns; everything else about them is the presets' shared model.

/// One workload of TICA Table 2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    /// Preset name: the table's name in lower case, spaces as `_`.
    pub name: &'static str,
    /// Bytes requested in all ("GB" and "TB" read as 10^9 and 10^12).
    pub total_bytes: f64,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
}

impl Workload {
    /// Requests in all.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes
    }

    /// The share of requests that write.
    pub fn write_share(&self) -> f64 {
        self.writes as f64 / self.requests() as f64
    }

    /// Mean bytes per request.
    pub fn mean_request_bytes(&self) -> f64 {
        self.total_bytes / self.requests() as f64
    }
}

const fn w(name: &'static str, total_bytes: f64, reads: u64, writes: u64) -> Workload {
    Workload {
        name,
        total_bytes,
        reads,
        writes,
    }
}

/// TICA Table 2, in the table's order.
pub const TABLE2: [Workload; 17] = [
    w("tpcc", 43.932e9, 1_352_983, 581_112),
    w("webserver", 7.607e9, 418_951, 270_569),
    w("devtoolrel", 3.133e9, 108_507, 52_032),
    w("livemapsbe", 15.646e9, 294_493, 115_862),
    w("msnfs", 10.251e9, 644_573, 349_485),
    w("exchange", 9.795e9, 158_011, 502_716),
    w("postmark", 19.437e9, 1_272_148, 3_172_014),
    w("stg_1", 91.815e9, 1_400_409, 796_452),
    w("rsrch_0", 13.11e9, 133_625, 1_300_030),
    w("src1_2", 1.65e12, 21_112_615, 16_302_998),
    w("wdev_0", 10.628e9, 229_529, 913_732),
    w("ts_0", 16.612e9, 316_692, 1_485_042),
    w("usr_0", 51.945e9, 904_483, 1_333_406),
    w("hm_1", 9.45e9, 580_896, 28_415),
    w("mds_0", 11.4e9, 143_973, 1_067_061),
    w("prn_0", 63.44e9, 602_480, 4_983_406),
    w("prxy_0", 61.03e9, 383_524, 12_135_444),
];

/// The Table 2 workload named `name`.
pub fn workload(name: &str) -> Option<Workload> {
    TABLE2.iter().copied().find(|w| w.name == name)
}

/// `mix` (request sizes and weights) blended with single `page_bytes`
/// requests (for a smaller mean) or with requests of its largest size
/// (for a larger one) so that its mean is `mean_bytes`, which must lie
/// between those two sizes.
pub fn mix_with_mean(mix: &[(u32, f64)], page_bytes: u32, mean_bytes: f64) -> Vec<(u32, f64)> {
    let total: f64 = mix.iter().map(|s| s.1).sum();
    let mix_mean = mix.iter().map(|&(b, p)| b as f64 * p).sum::<f64>() / total;
    let largest = mix.iter().map(|s| s.0).max().expect("a size");
    let other = if mean_bytes < mix_mean {
        page_bytes
    } else {
        largest
    };
    assert!(
        (mean_bytes - other as f64) * (mean_bytes - mix_mean) <= 0.0,
        "mean {mean_bytes} outside [{other}, {mix_mean}]"
    );
    // A share k of the mix and 1 - k of `other` has mean `mean_bytes`.
    let k = (mean_bytes - other as f64) / (mix_mean - other as f64);
    let mut out: Vec<(u32, f64)> = mix.iter().map(|&(b, p)| (b, k * p / total)).collect();
    match out.iter_mut().find(|s| s.0 == other) {
        Some(s) => s.1 += 1.0 - k,
        None => out.push((other, 1.0 - k)),
    }
    out.retain(|s| s.1 > 0.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Means from the table, by hand: TPCC 43.932e9 / 1,934,095.
    #[test]
    fn the_table_gives_counts_shares_and_means() {
        let t = workload("tpcc").unwrap();
        assert_eq!(t.requests(), 1_934_095);
        assert!((t.mean_request_bytes() - 22_714.5).abs() < 0.1);
        // The counts are used; the table's printed 95 % for Prxy_0 does not
        // follow from them.
        assert!((workload("prxy_0").unwrap().write_share() - 0.969_365).abs() < 1e-6);
        assert_eq!(TABLE2.len(), 17);
    }

    #[test]
    fn blended_mixes_have_the_asked_mean() {
        let mix = [(4096, 0.5), (12288, 0.5)]; // mean 8,192
        for want in [4096.0, 5000.0, 8192.0, 10_000.0, 12288.0] {
            let m = mix_with_mean(&mix, 4096, want);
            let total: f64 = m.iter().map(|s| s.1).sum();
            let mean: f64 = m.iter().map(|&(b, p)| b as f64 * p).sum();
            assert!(
                (total - 1.0).abs() < 1e-12 && (mean - want).abs() < 1e-6,
                "{want}: {m:?}"
            );
        }
    }
}
