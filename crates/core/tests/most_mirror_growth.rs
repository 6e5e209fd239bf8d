//! How far MOST's mirrored class grows (MOST §3.2.3): up to its maximum
//! share of capacity; as Algorithm 1 is printed (`mirror_growth =
//! "to_maximum"`) whatever the free capacity, so that on a full volume
//! each segment copied in is reclaimed at the next quantum; with
//! `"above_watermark"` only into free capacity above the reclaim
//! watermark, so that growing and reclaiming do not take turns.

use tiermux_core::{build_policy, Access, Dispatcher, Op, ParamValue, Params};

use crate::common;
use common::{get, quantum, settle, volume, SEGMENT_BLOCKS};

/// Segments in `common::volume()` (64 blocks).
const SEGMENTS: u64 = 16;

/// Writes every block of the first `used` segments, then runs 30
/// overloaded quanta with reads of the first `hot` segments (the hottest,
/// on the performance device) between them, so that no other segment is
/// hot enough to be swapped into a full class. The ratio reaches its
/// maximum in one step, the class may hold 3 segments (20 % of 16) and
/// grows one a quantum, and reclaiming starts below 1 free segment (2.5 %
/// of 16, rounded up). Returns the segments mirrored at the end and the
/// most ever mirrored at once, and the segments copied into the class.
fn run(used: u64, hot: u64, growth: &str) -> (f64, f64, f64) {
    let mut params = Params::new();
    params.set("segment_blocks", ParamValue::Int(SEGMENT_BLOCKS as i64));
    params.set("ratio_step", ParamValue::Float(1.0));
    params.set("mirror_step_mb", ParamValue::Float(0.001));
    params.set("mirror_growth", ParamValue::Str(growth.into()));
    let policy = build_policy("most", &params, &volume(), 1).unwrap();
    let mut d = Dispatcher::new(policy, 1);
    let mut tag = 0;
    let mut access = |d: &mut Dispatcher, op: Op, segments: u64| {
        for block in 0..segments * SEGMENT_BLOCKS {
            tag += 1;
            d.submit(tag, Access::one(block, op));
        }
        settle(d);
    };
    access(&mut d, Op::Write, used);
    let mut most_mirrored: f64 = 0.0;
    for q in 1..=30 {
        access(&mut d, Op::Read, hot);
        // The performance device ten times slower than the capacity device.
        d.tick(&quantum(q * 200_000_000, 500, 50));
        settle(&mut d);
        let s = d.policy().controller_state();
        assert_eq!(get(&s, "offload_ratio"), 1.0, "{s:?}");
        most_mirrored = most_mirrored.max(get(&s, "mirrored_segments"));
    }
    let s = d.policy().controller_state();
    let segment_bytes = (SEGMENT_BLOCKS * 4096) as f64;
    (
        get(&s, "mirrored_segments"),
        most_mirrored,
        get(&s, "mirror_bytes") / segment_bytes,
    )
}

#[test]
fn with_free_capacity_the_class_grows_to_its_maximum_and_stays() {
    for growth in ["above_watermark", "to_maximum"] {
        let (mirrored, most, copied) = run(8, 3, growth);
        assert_eq!((mirrored, most, copied), (3.0, 3.0, 3.0), "{growth}");
    }
}

#[test]
fn near_the_watermark_the_class_takes_only_the_free_capacity_above_it() {
    // 14 of 16 segments used: 2 free, 1 above the watermark.
    assert_eq!(run(SEGMENTS - 2, 1, "above_watermark"), (1.0, 1.0, 1.0));
    // Used to the last segment: nothing to grow into, nothing copied.
    assert_eq!(run(SEGMENTS, 1, "above_watermark"), (0.0, 0.0, 0.0));
}

#[test]
fn growing_to_the_maximum_on_a_full_volume_copies_segments_only_to_reclaim_them() {
    let (mirrored, most, copied) = run(SEGMENTS, 1, "to_maximum");
    assert!(mirrored <= 1.0 && most <= 1.0, "{mirrored} {most}");
    assert!(copied >= 10.0, "copied {copied} segments in 30 quanta");
}
