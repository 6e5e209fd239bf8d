//! Why MOST reads no faster than HeMem at 2.0x on Optane/NVMe: its
//! latency rule, in a closed loop, checked against a closed form on runs of
//! `experiments/most-fig4-host-time.toml`.
//!
//! MOST raises its offload ratio while the performance device's latency is
//! above the capacity device's, and so settles where they are equal
//! (Algorithm 1, within theta). Once it offloads, that common latency is
//! at least the capacity device's unloaded read latency `L_c`. N workers
//! that each spend `h` µs outside the devices per request then complete
//! N / (h + L) requests per second (Little's law), so MOST gains over
//! HeMem's saturated performance device only where N / (h + L_c) exceeds
//! its throughput X_p. With Load-1.0 = X_p · (h + L_1) workers, that is an
//! intensity above (h + L_c) / (h + L_1): about 7.5x with no host time
//! (L_c 82 µs, L_1 11 µs), 2.4x at 40 µs and 1.8x at 80 µs.

use tiermux_core::Op;
use tiermux_device::calibrate::qd1_latency_ns;
use tiermux_device::lookup_profile;
use tiermux_sim::RunResult;

use crate::common;
use common::{get, run_file};

/// The read-only MOST and HeMem runs at 2.0x with `host_us` of host time
/// per request: (HeMem, MOST).
fn at_two_x(host_us: &str) -> (RunResult, RunResult) {
    let mut runs = run_file("most-fig4-host-time.toml", &|k| {
        get(k, "label") == "read-only"
            && get(k, "client.load") == "2.0"
            && get(k, "client.think_time_us") == host_us
            && ["hemem", "most"].contains(&get(k, "policy"))
    });
    assert_eq!(runs.len(), 2, "host time {host_us}");
    runs.sort_by(|a, b| get(&a.0, "policy").cmp(get(&b.0, "policy")));
    let most = runs.pop().unwrap().1;
    let hemem = runs.pop().unwrap().1;
    assert_eq!(
        (hemem.policy.as_str(), most.policy.as_str()),
        ("hemem", "most")
    );
    (hemem, most)
}

/// The capacity device's (`nvme-pcie3`) unloaded 4 KiB read latency, µs.
fn capacity_read_latency_us() -> f64 {
    let model = lookup_profile("nvme-pcie3", &[]).unwrap().model().unwrap();
    qd1_latency_ns(&model, Op::Read, 4096) / 1e3
}

/// Below the threshold intensity MOST keeps every read on the Optane
/// drive: at 2.0x with 40 µs of host time (threshold 2.4x) it is HeMem.
#[test]
fn below_the_threshold_most_is_hemem() {
    let (hemem, most) = at_two_x("40.0");
    let ratio = most.throughput_ops_per_s / hemem.throughput_ops_per_s;
    assert!((ratio - 1.0).abs() < 0.01, "MOST/HeMem {ratio:.3}");
    let capacity_bytes_per_s = most.devices[1].bytes_per_s;
    assert!(capacity_bytes_per_s < 1e6, "{capacity_bytes_per_s}");
}

/// Above it MOST offloads and completes N / (h + L_c) requests per second:
/// at 2.0x with 80 µs of host time (threshold 1.8x), within the 5 % that
/// theta leaves the balance, and above HeMem.
#[test]
fn above_the_threshold_most_settles_at_equal_latency() {
    let (hemem, most) = at_two_x("80.0");
    let predicted = most.workers as f64 / ((80.0 + capacity_read_latency_us()) * 1e-6);
    let ratio = most.throughput_ops_per_s / predicted;
    assert!(
        (ratio - 1.0).abs() < 0.05,
        "MOST {:.0} against N / (h + L_c) = {predicted:.0} ({} workers)",
        most.throughput_ops_per_s,
        most.workers
    );
    assert!(most.throughput_ops_per_s > 1.05 * hemem.throughput_ops_per_s);
}
