//! Allocation on a segment's first write (MOST §3.2.2: "When a data block
//! is first written, MOST allocates its location"; classic tiering places
//! new data on the performance device). A read of a segment never written
//! finds nothing to place, so it must not stop the write that follows from
//! allocating: a client that probes a fresh volume (qemu-io reads its first
//! blocks when it opens one) would otherwise send its first writes to the
//! capacity device until a quantum promotes them.

use tiermux_core::{build_policy, Access, Dispatcher, Op, ParamValue, Params};

use crate::common;
use common::{get, settle, volume, SEGMENT_BLOCKS};

/// `policy` over the test volume, nothing placed.
fn fresh(policy: &str) -> Dispatcher {
    let mut params = Params::new();
    params.set("segment_blocks", ParamValue::Int(SEGMENT_BLOCKS as i64));
    Dispatcher::new(build_policy(policy, &params, &volume(), 1).unwrap(), 1)
}

fn perf_segments(d: &Dispatcher) -> f64 {
    get(&d.policy().controller_state(), "perf_segments")
}

/// Whether `block`'s current copy is on the performance device (device 0).
fn on_perf(d: &Dispatcher, block: u64) -> bool {
    let e = d.map().get(block);
    e.present & 1 != 0 && e.dirty & 1 != 0
}

#[test]
fn a_read_before_the_first_write_does_not_stop_its_allocation() {
    for policy in ["hemem", "most", "batman", "colloid"] {
        let mut d = fresh(policy);
        let mut tag = 0;
        let mut submit = |d: &mut Dispatcher, block: u64, op: Op| {
            tag += 1;
            d.submit(tag, Access::one(block, op));
            settle(d);
        };
        // Segment 1: read first, then written.
        submit(&mut d, SEGMENT_BLOCKS, Op::Read);
        assert_eq!(perf_segments(&d), 0.0, "{policy}: a read allocated");
        submit(&mut d, SEGMENT_BLOCKS + 1, Op::Write);
        assert_eq!(perf_segments(&d), 1.0, "{policy}: the first write");
        assert!(on_perf(&d, SEGMENT_BLOCKS + 1), "{policy}");
        // The block read before holds nothing on the performance device
        // and is still read from the capacity device.
        assert_eq!(d.map().get(SEGMENT_BLOCKS).present & 1, 0, "{policy}");
        // Segment 2: written first; a later write is no new allocation.
        submit(&mut d, 2 * SEGMENT_BLOCKS, Op::Write);
        submit(&mut d, 2 * SEGMENT_BLOCKS + 3, Op::Write);
        assert_eq!(perf_segments(&d), 2.0, "{policy}");
        assert!(on_perf(&d, 2 * SEGMENT_BLOCKS + 3), "{policy}");
    }
}
