//! MOST's migration regulation (MOST §3.2.3): with the capacity device the
//! slower, migration runs towards the performance device only. When that
//! device is full, a hot capacity segment takes the slot of a colder one,
//! which moves down to make room (the tiering MOST builds on).

use tiermux_core::{build_policy, Access, Dispatcher, Op, ParamValue, Params};

use crate::common;
use common::{get, quantum, settle, volume, SEGMENT_BLOCKS, SLOTS};

/// The performance device full of cold segments 0..4 and segment 8 read
/// hot on the capacity device; then quanta with the given latencies.
/// Returns MOST's state.
fn run(perf_us: u64, cap_us: u64) -> Vec<(&'static str, f64)> {
    let mut params = Params::new();
    params.set("segment_blocks", ParamValue::Int(SEGMENT_BLOCKS as i64));
    let policy = build_policy("most", &params, &volume(), 1).unwrap();
    let mut d = Dispatcher::new(policy, 1);
    for block in 0..SLOTS * SEGMENT_BLOCKS {
        assert!(d.warm(block));
    }
    let mut tag = 0;
    for _ in 0..40 {
        for block in 8 * SEGMENT_BLOCKS..9 * SEGMENT_BLOCKS {
            tag += 1;
            d.submit(tag, Access::one(block, Op::Read));
        }
        settle(&mut d);
    }
    for q in 1..=5 {
        d.tick(&quantum(q * 200_000_000, perf_us, cap_us));
        settle(&mut d);
    }
    d.policy().controller_state()
}

#[test]
fn a_hot_segment_takes_a_cold_ones_slot_when_the_capacity_device_is_slower() {
    let s = run(50, 500);
    assert_eq!(get(&s, "offload_ratio"), 0.0);
    let segment_bytes = (SEGMENT_BLOCKS * 4096) as f64;
    assert_eq!(get(&s, "promoted_bytes"), segment_bytes, "{s:?}");
    assert_eq!(get(&s, "demoted_bytes"), segment_bytes, "{s:?}");
    assert_eq!(get(&s, "perf_segments"), SLOTS as f64);
}
