//! Latency signals of a device that completes nothing. An idle device
//! reports no latency, so a smoothed latency measured under a load that
//! has gone would stay for good.
//!
//! Colloid, on a device that demotions have emptied: while the performance
//! device looks slower, Colloid moves its hot segments off it, until it
//! serves nothing, and nothing would come back. Colloid's own monitor
//! smooths integer counters, which drain to zero within about a second of
//! idleness, and a tier with no smoothed arrivals has its unloaded
//! latency; hot data is then promoted again. tiermux forgets an idle
//! performance device's signals after a second (`DRAINED_NS`) and takes
//! the lowest interval mean read latency it has shown as its latency.
//! With `drained_latency = "unloaded"` it drains an idle capacity device
//! too, to the lowest latency it has shown, where by default that device
//! keeps the latency it had under load.
//!
//! MOST, on a capacity device whose one operation in a quiet interval (a
//! cleaning write) was slow: with the signal kept, the device looks slower
//! than a loaded performance device for good and the offload ratio stays
//! 0. MOST's default `idle_latency = "unloaded"` folds the lowest interval
//! mean the device has shown into each idle interval, and the ratio rises.

use tiermux_core::observe::DeviceObservation;
use tiermux_core::{build_policy, Access, Dispatcher, Observation, Op, ParamValue, Params};

use crate::common;
use common::{settle, volume, SEGMENT_BLOCKS, SLOTS};

const QUANTUM_NS: u64 = 200_000_000;

/// A device's quantum: `ops` reads of `latency_us` each, with as many in
/// flight at its end as Little's law gives (`None`: it completed nothing).
fn device(load: Option<(u64, u64)>) -> DeviceObservation {
    let Some((ops, latency_us)) = load else {
        return DeviceObservation::default();
    };
    let sum_ns = ops * latency_us * 1000;
    DeviceObservation {
        read_ops: ops,
        read_latency_sum_ns: sum_ns,
        latency_sum_ns: sum_ns,
        inflight_reads: (sum_ns / QUANTUM_NS) as u32,
        ..Default::default()
    }
}

fn quantum(q: u64, perf: Option<(u64, u64)>, cap: Option<(u64, u64)>) -> Observation {
    Observation {
        now_ns: q * QUANTUM_NS,
        interval_ns: QUANTUM_NS,
        devices: vec![device(perf), device(cap)],
        ..Observation::default()
    }
}

/// Reads every block of the first `SLOTS` segments `times` times.
fn read_hot(d: &mut Dispatcher, tag: &mut u64, times: u32) {
    for _ in 0..times {
        for block in 0..SLOTS * SEGMENT_BLOCKS {
            *tag += 1;
            d.submit(*tag, Access::one(block, Op::Read));
        }
        settle(d);
    }
}

fn get(d: &Dispatcher, name: &str) -> f64 {
    let state = d.policy().controller_state();
    state.iter().find(|(k, _)| *k == name).unwrap().1
}

/// `policy` over the test volume with its hot segments on the
/// performance device, and parameter `name` set to `value` when given.
fn warmed(policy: &str, name: &str, value: Option<&str>) -> Dispatcher {
    let mut params = Params::new();
    params.set("segment_blocks", ParamValue::Int(SEGMENT_BLOCKS as i64));
    if let Some(v) = value {
        params.set(name, ParamValue::Str(v.into()));
    }
    let mut d = Dispatcher::new(build_policy(policy, &params, &volume(), 1).unwrap(), 1);
    for block in 0..SLOTS * SEGMENT_BLOCKS {
        assert!(d.warm(block));
    }
    d
}

/// Colloid empties a slow-looking performance device, and once that
/// device has been idle for a second promotes the hot segments back.
fn empties_then_refills(policy: &str) {
    let mut d = warmed(policy, "drained_latency", None);
    let mut tag = 0;
    // Lightly loaded: the performance device at 20 µs, the capacity
    // device at 100 µs; nothing moves.
    let mut q = 1;
    read_hot(&mut d, &mut tag, 3);
    d.tick(&quantum(q, Some((100, 20)), Some((100, 100))));
    settle(&mut d);
    assert_eq!(get(&d, "demoted_bytes"), 0.0, "{policy}");
    // Loaded: the performance device at 2 ms, the capacity device at 50 µs.
    while get(&d, "perf_segments") > 0.0 {
        q += 1;
        assert!(q <= 20, "{policy}: the performance device never emptied");
        read_hot(&mut d, &mut tag, 3);
        d.tick(&quantum(q, Some((10_000, 2_000)), Some((10_000, 50))));
        settle(&mut d);
    }
    let demoted = get(&d, "demoted_bytes");
    assert_eq!(demoted, (SLOTS * SEGMENT_BLOCKS * 4096) as f64, "{policy}");
    // The performance device now serves nothing. For four quanta (0.8 s)
    // it keeps its latency and nothing moves; the fifth drains it, and its
    // latency is the 20 µs it showed unloaded.
    for idle in 1..=6 {
        q += 1;
        read_hot(&mut d, &mut tag, 3);
        d.tick(&quantum(q, None, Some((10_000, 50))));
        settle(&mut d);
        let promoted = get(&d, "promoted_bytes");
        if idle < 5 {
            assert_eq!(promoted, 0.0, "{policy}: promoted after {idle} idle quanta");
            // Still above the capacity device's 50 µs (by more than θ).
            assert!(get(&d, "latency_perf_us") >= 100.0, "{policy}");
        } else {
            assert!(
                promoted > 0.0,
                "{policy}: nothing promoted after {idle} idle quanta"
            );
            assert_eq!(get(&d, "latency_perf_us"), 20.0, "{policy}");
        }
    }
    assert_eq!(get(&d, "demoted_bytes"), demoted, "{policy}: demoted again");
}

#[test]
fn an_emptied_performance_device_is_refilled_after_a_second_idle() {
    for policy in ["colloid", "colloid+", "colloid++"] {
        empties_then_refills(policy);
    }
}

/// MOST with `idle_latency` as given (`None`: the default): the capacity
/// device shows 100 µs, then one 1 ms operation, then nothing, while the
/// performance device goes from 20 µs to a loaded 179 µs. Returns the
/// offload ratio and the capacity device's latency signal after 30 quanta.
fn most_after_a_slow_idle_capacity_device(idle_latency: Option<&str>) -> (f64, f64) {
    let mut d = warmed("most", "idle_latency", idle_latency);
    let mut tag = 0;
    read_hot(&mut d, &mut tag, 1);
    d.tick(&quantum(1, Some((100, 20)), Some((100, 100))));
    d.tick(&quantum(2, Some((100, 20)), Some((1, 1_000))));
    settle(&mut d);
    let stuck_us = get(&d, "latency_cap_us");
    assert!(stuck_us > 179.0 * 1.05, "capacity signal {stuck_us} µs");
    for q in 3..33 {
        read_hot(&mut d, &mut tag, 1);
        d.tick(&quantum(q, Some((10_000, 179)), None));
        settle(&mut d);
    }
    (get(&d, "offload_ratio"), get(&d, "latency_cap_us"))
}

#[test]
fn most_offloads_again_once_an_idle_capacity_device_decays() {
    let (ratio, cap_us) = most_after_a_slow_idle_capacity_device(None);
    assert!(
        ratio > 0.0,
        "offload ratio {ratio}, capacity signal {cap_us} µs"
    );
    // The signal decays toward the 100 µs the device showed unloaded.
    assert!(cap_us < 110.0, "capacity signal {cap_us} µs");
    let (ratio, cap_us) = most_after_a_slow_idle_capacity_device(Some("keep"));
    assert_eq!(ratio, 0.0, "kept signal {cap_us} µs");
    assert!(cap_us > 179.0 * 1.05, "kept signal {cap_us} µs");
}

/// Colloid+ with `drained_latency` as given (`None`: the default): the
/// capacity device shows 100 µs unloaded, then 300 µs under load for 40
/// quanta, then nothing for 10 while the performance device, holding
/// every hot segment, is loaded at 193 µs. Returns the bytes demoted in
/// those 10 quanta and the capacity device's latency signal at their end.
fn colloid_with_an_idle_capacity_device(drained: Option<&str>) -> (f64, f64) {
    let mut d = warmed("colloid+", "drained_latency", drained);
    let mut tag = 0;
    read_hot(&mut d, &mut tag, 1);
    d.tick(&quantum(1, Some((10_000, 20)), Some((10_000, 100))));
    for q in 2..42 {
        read_hot(&mut d, &mut tag, 1);
        d.tick(&quantum(q, Some((10_000, 193)), Some((10_000, 300))));
        settle(&mut d);
    }
    let before = get(&d, "demoted_bytes");
    for q in 42..52 {
        read_hot(&mut d, &mut tag, 1);
        d.tick(&quantum(q, Some((10_000, 193)), None));
        settle(&mut d);
    }
    (get(&d, "demoted_bytes") - before, get(&d, "latency_cap_us"))
}

/// By default an idle capacity device keeps the latency it had under
/// load, so a loaded performance device that looks faster than that keeps
/// everything. With `drained_latency = "unloaded"` the capacity device is
/// drained after a second too, its latency is the lowest it has shown
/// (100 µs), and Colloid+ demotes hot segments to it.
#[test]
fn an_idle_capacity_device_drains_to_its_unloaded_latency_when_asked() {
    let (demoted, cap_us) = colloid_with_an_idle_capacity_device(None);
    assert_eq!(demoted, 0.0, "capacity signal {cap_us} µs");
    assert!(cap_us > 193.0, "kept signal {cap_us} µs");
    let (demoted, cap_us) = colloid_with_an_idle_capacity_device(Some("unloaded"));
    assert!(demoted > 0.0, "capacity signal {cap_us} µs");
    assert!(cap_us < 193.0 / 1.05, "drained signal {cap_us} µs");
}
