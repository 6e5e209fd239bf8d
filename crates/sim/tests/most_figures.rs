//! The MOST paper's statements about its Figure 4 (static workloads),
//! checked on runs of `experiments/most-fig4-static.toml`, Optane P4800X
//! over a PCIe 3 NVMe drive (MOST Table 1). Each test quotes the statement.
//! Where our result departs from the paper (MOST at 1.5x to 2.0x), the
//! cause is shown in `docs/reproduction.md`.

use std::collections::BTreeMap;

use tiermux_sim::RunResult;

use crate::common;
use common::{get, run_file};

/// The Optane/NVMe runs of `policies` at intensity `load`, read-only or
/// write-only, keyed by policy.
fn runs(label: &str, load: &str, policies: &[&str]) -> BTreeMap<String, RunResult> {
    run_file("most-fig4-static.toml", &|k| {
        get(k, "label") == label
            && get(k, "devices").starts_with("optane")
            && get(k, "client.load") == load
            && policies.contains(&get(k, "policy"))
    })
    .into_iter()
    .map(|(k, r)| (get(&k, "policy").to_string(), r))
    .collect()
}

fn state(r: &RunResult, name: &str) -> f64 {
    r.controller
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("{} reports no {name}", r.policy))
        .1
}

/// The mean of the controller's `name` over the samples after the 20 s
/// warm-up (the signals oscillate around their balance from one 200 ms
/// quantum to the next, so one moment's values say little).
fn measured_mean(r: &RunResult, name: &str) -> f64 {
    common::sampled_mean_after(r, name, 20.0)
}

/// The ceiling of any policy on this pair at 4 KiB: both devices' MOST
/// Table 1 bandwidths at once, in requests per second.
fn both_devices_ops_per_s(write: bool) -> f64 {
    let capacity_gb_per_s = if write { 1.5 } else { 1.0 };
    (2.2 + capacity_gb_per_s) * 1e9 / 4096.0
}

/// "Under low load, the latency of accessing the performance device is
/// lower than that of the capacity device, and so traffic is routed to the
/// performance device; in these conditions, MOST operates like classic
/// tiering" (§3.2.1). Within 1 % of HeMem at 0.5x.
#[test]
fn under_low_load_most_is_classic_tiering() {
    for label in ["read-only", "write-only"] {
        let r = runs(label, "0.5", &["hemem", "most"]);
        let (h, m) = (&r["hemem"], &r["most"]);
        let ratio = m.throughput_ops_per_s / h.throughput_ops_per_s;
        assert!((ratio - 1.0).abs() < 0.01, "{label}: MOST/HeMem {ratio:.3}");
        // The capacity device is idle until MOST offloads to it once (its
        // latency counts as 0 until measured): one growth step, one
        // segment, is mirrored, and then the ratio returns to 0.
        assert!(state(m, "mirrored_segments") <= 1.0, "{label}");
        assert!(state(m, "offload_ratio") < 0.5, "{label}");
    }
}

/// "Under high load, MOST offloads traffic from the performance device to
/// the capacity device until the end-to-end latency between the two
/// devices is equalized" (§3.2.1), with "only a small amount of mirrored
/// data" (§2.3); HeMem "does not offload traffic to the capacity device
/// once the performance device's bandwidth is saturated" (§4.1). At 16x
/// (96 threads) MOST reaches at least 1.35x HeMem reading and 1.5x writing,
/// within the two devices' combined bandwidth, with the devices' smoothed
/// latencies, averaged over the measured time, within 15 % and less than
/// 5 % of the capacity mirrored.
#[test]
fn under_high_load_most_uses_both_devices() {
    for (label, write, min_gain) in [("read-only", false, 1.35), ("write-only", true, 1.5)] {
        let r = runs(label, "16.0", &["hemem", "most"]);
        let (h, m) = (&r["hemem"], &r["most"]);
        let gain = m.throughput_ops_per_s / h.throughput_ops_per_s;
        assert!(gain >= min_gain, "{label}: MOST/HeMem {gain:.3}");
        assert!(
            m.throughput_ops_per_s <= both_devices_ops_per_s(write),
            "{label}: {} ops/s exceeds both devices",
            m.throughput_ops_per_s
        );
        assert_eq!(h.devices[1].bytes_per_s, 0.0, "{label}: HeMem offloaded");
        let (lp, lc) = (
            measured_mean(m, "latency_perf_us"),
            measured_mean(m, "latency_cap_us"),
        );
        assert!(
            (lp - lc).abs() <= 0.15 * lc,
            "{label}: latencies {lp:.1} and {lc:.1} us"
        );
        let volume_bytes = 458_752.0 * 4096.0;
        let mirrored = state(m, "mirrored_bytes") / volume_bytes;
        assert!(
            mirrored > 0.0 && mirrored < 0.05,
            "{label}: mirrored {mirrored:.3}"
        );
    }
}

/// The scaled capacities do not decide the results: MOST at two scales
/// (`experiments/most-scale-check.toml`, the paper's / 1000 and / 2000)
/// gives the same throughput within 2 %, reading at 16x and writing at
/// 2.0x (where it has just begun to offload).
#[test]
fn results_do_not_depend_on_the_capacity_scale() {
    let runs = run_file("most-scale-check.toml", &|k| {
        get(k, "policy") == "most"
            && matches!(
                (get(k, "workload.write_ratio"), get(k, "client.load")),
                ("0.0", "16.0") | ("1.0", "2.0")
            )
    });
    let mut by_case: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for (k, r) in &runs {
        let case = (
            get(k, "workload.write_ratio").into(),
            get(k, "client.load").into(),
        );
        by_case
            .entry(case)
            .or_default()
            .push(r.throughput_ops_per_s);
    }
    assert_eq!(by_case.len(), 2);
    for (case, x) in by_case {
        assert_eq!(x.len(), 2, "{case:?}");
        let ratio = x[1] / x[0];
        assert!((ratio - 1.0).abs() < 0.02, "{case:?}: {x:?}");
    }
}
