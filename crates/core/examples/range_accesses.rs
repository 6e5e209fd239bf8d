//! What deciding a request as one range access saves the dispatcher, side
//! by side in one run: a pass-through volume serves requests of K blocks,
//! submitted either as K one-block accesses or as one access of K blocks;
//! every operation completes at once (no devices), so the time is the
//! dispatcher's and the policy's alone.
//!
//! ```sh
//! cargo run --release -p tiermux-core --example range_accesses
//! ```
//!
//! Prints, per request size, nanoseconds per block both ways and their
//! ratio. For machine-independent figures, run it under
//! `valgrind --tool=cachegrind` with `RANGE_ACCESSES_MODE=one` or
//! `RANGE_ACCESSES_MODE=range` (only that way) and `RANGE_ACCESSES_K=K`
//! (only that size), and divide the instructions by the blocks it prints.

use std::time::Instant;

use tiermux_core::policy::{DeviceRole, DeviceSpec, VolumeSpec};
use tiermux_core::{build_policy, Access, Dispatcher, Op, Params};

const VOLUME_BLOCKS: u64 = 1 << 20;
/// Blocks served per size and way.
const BLOCKS_PER_CASE: u64 = 4 << 20;

fn dispatcher() -> Dispatcher {
    let vol = VolumeSpec {
        num_blocks: VOLUME_BLOCKS,
        block_size: 4096,
        devices: vec![DeviceSpec {
            name: "file".into(),
            capacity_blocks: VOLUME_BLOCKS,
            role: DeviceRole::Home,
        }],
    };
    let policy = build_policy("passthrough", &Params::new(), &vol, 1).expect("passthrough");
    Dispatcher::new(policy, 0)
}

/// Serves `BLOCKS_PER_CASE` blocks of reads and writes in requests of `k`
/// blocks, as one access each (`range`) or block by block; returns the
/// nanoseconds per block.
fn serve(k: u32, range: bool) -> f64 {
    let mut d = dispatcher();
    let requests = BLOCKS_PER_CASE / k as u64;
    let mut acked = 0u64;
    let start = Instant::now();
    for r in 0..requests {
        let first = (r * k as u64 * 7919) % (VOLUME_BLOCKS - k as u64);
        let op = if r % 4 == 0 { Op::Write } else { Op::Read };
        let tag = r << 16;
        if range {
            d.submit(tag, Access::range(first, k, op));
        } else {
            for i in 0..k as u64 {
                d.submit(tag + i, Access::one(first + i, op));
            }
        }
        while let Some(ready) = d.pop_ready() {
            d.complete(ready.flight, ready.index, ready.io.addr);
        }
        while let Some(a) = d.pop_acked() {
            assert_eq!(a.tag - tag, a.access.block - first, "a block's tag");
            acked += 1;
        }
    }
    let ns = start.elapsed().as_nanos() as f64;
    assert_eq!(acked, requests * k as u64);
    assert!(d.is_idle());
    ns / acked as f64
}

fn main() {
    let mode = std::env::var("RANGE_ACCESSES_MODE").unwrap_or_default();
    println!("blocks per request   block by block ns/block   one access ns/block   ratio");
    let sizes: Vec<u32> = match std::env::var("RANGE_ACCESSES_K") {
        Ok(k) => vec![k.parse().expect("RANGE_ACCESSES_K: blocks per request")],
        Err(_) => vec![1, 8, 64, 256],
    };
    for k in sizes {
        let one = (mode != "range").then(|| serve(k, false));
        let range = (mode != "one").then(|| serve(k, true));
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let ratio = match (one, range) {
            (Some(o), Some(r)) => format!("{:.2}", o / r),
            _ => "-".into(),
        };
        println!(
            "{k:>18}   {:>23}   {:>19}   {ratio:>5}",
            show(one),
            show(range)
        );
    }
    println!("blocks per size and way: {BLOCKS_PER_CASE}");
}
