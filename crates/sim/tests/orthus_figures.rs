//! The Orthus paper's statements about its Figures 4, 5, 7, 8 and 13 and Table 2,
//! checked on the experiment files users run (runs selected from them where
//! the whole file would take too long). Each test quotes the statement.
//! Where our result departs from the paper, `docs/reproduction.md` shows
//! why; the tests below hold the rows that match, and the experiment that
//! shows the cause of one cell that does not (Figure 8).

use std::collections::BTreeMap;

use tiermux_sim::RunResult;

use crate::common;
use common::{get, run_file};

fn gb_per_s(r: &RunResult) -> f64 {
    r.throughput_bytes_per_s / 1e9
}

/// Figure 5 (§3): "for Optane+Flash, the optimal split rate for a
/// read-heavy workload is 90%, while it is about 60% when the workload is
/// write-heavy". The paper gives no concurrency; at 4 workers we find 0.9
/// and 0.6 (80 % writes), and the read-heavy optimum is the higher one at
/// every concurrency the file sweeps.
#[test]
fn figure5_read_heavy_optimum_is_above_write_heavy() {
    let runs = run_file("orthus-fig5-split-vs-write-ratio.toml", &|k| {
        get(k, "devices") == "optane-905p+flash-970pro"
            && ["0.0", "0.8"].contains(&get(k, "workload.write_ratio"))
    });
    let mut best: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
    for (k, r) in &runs {
        let slot = best
            .entry((
                get(k, "client.workers").to_string(),
                get(k, "workload.write_ratio").to_string(),
            ))
            .or_insert((0.0, 0.0));
        if r.throughput_ops_per_s > slot.0 {
            *slot = (
                r.throughput_ops_per_s,
                get(k, "params.split_rate").parse().unwrap(),
            );
        }
    }
    for workers in ["4", "8", "16", "32"] {
        let read = best[&(workers.to_string(), "0.0".to_string())].1;
        let write = best[&(workers.to_string(), "0.8".to_string())].1;
        eprintln!("{workers} workers: read-heavy optimum {read}, write-heavy {write}");
        assert!(read > write, "{workers} workers: {read} vs {write}");
        if workers == "4" {
            assert!((read - 0.9).abs() < 0.051 && (write - 0.6).abs() < 0.051);
        }
    }
}

/// Figure 7 (§6.1.1): "with 95% hit ratio and Load-2.0, NHC obtains
/// improvements of 21%, 32%, 54% for DRAM+NVM, NVM+Optane, and
/// Optane+Flash" and "reduces average latency by 19%, 25%, 39%". Each gain
/// and each reduction within 25 % of the paper's, with the file's NHC
/// options and with the paper's settings, and the gains in the paper's
/// order.
#[test]
fn figure7_load2_gains_are_the_papers_within_25_percent() {
    let runs = run_file("orthus-fig7-hierarchies.toml", &|k| {
        get(k, "client.load") == "2.0"
            && get(k, "workload.hit_ratio") == "0.95"
            && !get(k, "devices").starts_with("flashsim")
    });
    let pairs = [
        ("dram+nvm", 0.21, 0.19),
        ("nvm+optane-905p", 0.32, 0.25),
        ("optane-905p+flash-970pro", 0.54, 0.39),
    ];
    for label in ["options", "paper settings"] {
        let find = |devices: &str, policy: &str| {
            runs.iter()
                .find(|(k, _)| {
                    get(k, "label") == label
                        && get(k, "devices") == devices
                        && get(k, "policy") == policy
                })
                .map(|(_, r)| r)
                .unwrap_or_else(|| panic!("no run {label} {devices} {policy}"))
        };
        let mut gains = Vec::new();
        for (devices, paper_gain, paper_cut) in pairs {
            let (nhc, classic) = (find(devices, "nhc"), find(devices, "classic"));
            let gain = nhc.throughput_ops_per_s / classic.throughput_ops_per_s - 1.0;
            let cut = 1.0 - nhc.mean_latency_us / classic.mean_latency_us;
            eprintln!("{label}, {devices}: +{gain:.3} (paper +{paper_gain}), latency -{cut:.3} (paper -{paper_cut})");
            assert!(
                (gain / paper_gain - 1.0).abs() <= 0.25,
                "{label} {devices}: {gain}"
            );
            assert!(
                (cut / paper_cut - 1.0).abs() <= 0.25,
                "{label} {devices}: {cut}"
            );
            gains.push(gain);
        }
        assert!(gains.windows(2).all(|w| w[0] < w[1]), "{label}: {gains:?}");
    }
}

/// Table 2 (§6.1.3): "Optimizing throughput or average latency ... increases
/// tail latency ... When NHC is configured with P99 latency as the target
/// metric, Orthus-CAS has better tail latency ... than it does with other
/// targets."
#[test]
fn table2_throughput_target_raises_p99() {
    let runs = run_file("orthus-table2-targets.toml", &|_| true);
    for devices in ["nvm+optane-905p", "optane-905p+flash-970pro"] {
        let p99 = |target: &str| {
            runs.iter()
                .find(|(k, _)| get(k, "devices") == devices && get(k, "params.target") == target)
                .map(|(_, r)| r.p99_latency_us)
                .unwrap()
        };
        let (throughput, tail) = (p99("throughput"), p99("p99_latency"));
        eprintln!(
            "{devices}: p99 {throughput:.0} µs (throughput target) vs {tail:.0} µs (p99 target)"
        );
        assert!(throughput > tail * 1.1, "{devices}: {throughput} vs {tail}");
    }
}

/// Figure 13a (§6.4): "SIB+ does not perform well because it does not
/// admit read misses into Optane. SIB++ performs better", and NHC is best.
/// From a cold cache: SIB+ < classic < SIB++ < NHC. From a warm cache,
/// "LBICA performs poorly because it does not redirect any read hits":
/// below three quarters of NHC.
#[test]
fn figure13_static_order() {
    let runs = run_file("orthus-fig13-sib-lbica.toml", &|k| {
        get(k, "label") == "static"
    });
    let gb = |policy: &str, prefill: &str| {
        runs.iter()
            .find(|(k, _)| get(k, "policy") == policy && get(k, "prefill") == prefill)
            .map(|(_, r)| gb_per_s(r))
            .unwrap()
    };
    let cold: Vec<f64> = ["sib+", "classic", "sib++", "nhc"]
        .iter()
        .map(|p| gb(p, "false"))
        .collect();
    eprintln!("cold cache: SIB+, classic, SIB++, NHC = {cold:?} GB/s");
    assert!(cold.windows(2).all(|w| w[0] < w[1]), "{cold:?}");
    let (lbica, nhc) = (gb("lbica", "true"), gb("nhc", "true"));
    eprintln!("warm cache: LBICA {lbica:.2}, NHC {nhc:.2} GB/s");
    assert!(lbica < 0.75 * nhc);
}

/// Figure 4 (§3): "With low concurrency (1 or 4), the caching device ... is
/// not fully utilized and thus optimizing the hit/split rate still improves
/// performance". At concurrency 1 the best split is 1.0 on every
/// hierarchy; at 4, with 5 µs of host time per request, it is within 3 %
/// of the best (without host time our devices saturate sooner:
/// docs/reproduction.md).
#[test]
fn figure4_low_concurrency_maximizes_the_split_rate() {
    let runs = run_file("orthus-fig4-caching-vs-splitting.toml", &|k| {
        get(k, "policy") == "split" && ["1", "4"].contains(&get(k, "client.workers"))
    });
    let mut groups: BTreeMap<(String, String, String), Vec<(f64, String)>> = BTreeMap::new();
    for (k, r) in &runs {
        groups
            .entry((
                get(k, "label").to_string(),
                get(k, "devices").to_string(),
                get(k, "client.workers").to_string(),
            ))
            .or_default()
            .push((
                r.throughput_ops_per_s,
                get(k, "params.split_rate").to_string(),
            ));
    }
    for ((label, devices, workers), points) in &groups {
        let best = points.iter().map(|p| p.0).fold(0.0, f64::max);
        let at_one = points.iter().find(|p| p.1 == "1.0").unwrap().0;
        eprintln!(
            "{label}, {devices}, {workers}: split 1.0 at {:.3} of the best",
            at_one / best
        );
        if workers == "1" {
            assert_eq!(at_one, best, "{label} {devices}");
        } else if label == "host 5 us" {
            assert!(at_one >= 0.97 * best, "{devices}: {}", at_one / best);
        }
    }
}

/// Figure 8 (§6.1.2): "NHC offers more benefits when there are fewer
/// writes". On write-back, Optane+Flash, a 20 % dirty-read ratio, the gain
/// at 50 % writes is below the gain at 10 %, but it first rises at 30 %;
/// `docs/reproduction.md` shows that the Optane SSD's read/write
/// interference causes the rise. With the profile's interference the gain
/// rises from 10 % to 30 % writes; with the same profile without it the
/// two are equal, and classic caching runs at the rates the Optane SSD's
/// 64 KiB reads (2.49 GB/s) and writes (2.28 GB/s) give the mix:
/// 1 / (w / 2.28 + 0.95 (1 - w) / 2.49 + 0.05 (1 - w) / 2.28), hits read
/// and misses filled.
#[test]
fn figure8_write_back_rise_comes_from_interference() {
    let runs = run_file("orthus-fig8-interference.toml", &|k| get(k, "seed") == "1");
    let find = |devices: &str, writes: &str, policy: &str| {
        runs.iter()
            .find(|(k, _)| {
                get(k, "devices") == devices
                    && get(k, "workload.write_ratio") == writes
                    && get(k, "policy") == policy
            })
            .map(|(_, r)| gb_per_s(r))
            .unwrap_or_else(|| panic!("no run {devices} {writes} {policy}"))
    };
    let gain = |devices: &str, writes: &str| {
        find(devices, writes, "nhc") / find(devices, writes, "classic")
    };
    let (with, without) = (
        "optane-905p+flash-970pro",
        "optane-no-interference+flash-970pro",
    );
    let rise = |devices: &str| gain(devices, "0.3") / gain(devices, "0.1");
    let (rise_with, rise_without) = (rise(with), rise(without));
    eprintln!("NHC's gain from 10 % to 30 % writes: x{rise_with:.3} with interference, x{rise_without:.3} without");
    assert!(rise_with > 1.01, "{rise_with}");
    assert!((rise_without - 1.0).abs() < 0.01, "{rise_without}");
    for devices in [with, without] {
        assert!(gain(devices, "0.5") < gain(devices, "0.1"), "{devices}");
    }
    for w in [0.1f64, 0.3, 0.5] {
        let expected = 1.0 / (w / 2.28 + 0.95 * (1.0 - w) / 2.49 + 0.05 * (1.0 - w) / 2.28);
        let got = find(without, &w.to_string(), "classic");
        assert!(
            (got / expected - 1.0).abs() < 0.01,
            "{w}: {got} vs {expected}"
        );
    }
}
