//! MOST and HeMem under load on the bench's emulated pair
//! (`experiments/most-swaps-under-load.toml`): uniform reads over a working
//! set a little larger than the fast device, 32 in flight. HeMem swaps
//! segments whose heat differs only by sampling noise, and the migration
//! keeps the capacity device busy; MOST, which runs HeMem's quantum while
//! its offload ratio moves, inherits the swaps unless
//! `swap_while_offloading = false`, and then uses both devices; but not
//! after a low-load phase, whose swaps leave the capacity device looking
//! slower than the performance device. A swap that needs the promoted
//! segment to be four times as hot (`swap_min_ratio = 4`) stops the churn
//! at its source, for HeMem and for MOST. Colloid++ swaps through the same
//! rule, but on this pair it demotes in its first seconds and then holds
//! its placement at either ratio, using both devices.

use crate::common;
use common::{device_ops_per_s, get, run_file};

const FILE: &str = "most-swaps-under-load.toml";

#[test]
fn hemem_churns_unless_a_swap_needs_a_clearly_hotter_segment_and_most_follows() {
    // Each device's closed-loop read throughput at 32 in flight, fastest
    // first: their sum is the most any placement can serve, the first what
    // HeMem can (it serves hot data only there).
    let devices = device_ops_per_s(FILE, 1.0, 32);
    let limit: f64 = devices.iter().sum();
    for (k, r) in run_file(FILE, &|_| true) {
        let (label, ratio) = (get(&k, "label"), get(&k, "params.swap_min_ratio"));
        let no_swaps_from_load =
            label == "most" && get(&k, "params.swap_while_offloading") == "false";
        let share = r.throughput_ops_per_s / limit;
        let migrated: u64 = r.devices.iter().map(|d| d.migrated_bytes).sum();
        let run = format!("{label}, swap ratio {ratio}");
        if ratio == "1.0" && !no_swaps_from_load && label != "colloid++" {
            // HeMem, MOST as it runs by default, and MOST
            // either way after a low-load phase in which HeMem's quantum
            // swapped freely:
            // segments keep moving both ways, the migration keeps the
            // capacity device slower than the performance one (so the
            // offload ratio stays 0), and the pair serves well under half
            // its limit.
            assert!(migrated > 0, "{run}: no migration");
            assert!(share < 0.5, "{run}: {share:.2} of the limit");
        } else if label == "colloid++" {
            // Colloid++ moves load to the capacity device and serves more
            // than the fast device can alone. (With the emulated Flash
            // SSD's earlier profile, whose 1 MiB reads took 14.0 ms
            // instead of 10.2, it churned at ratio 1.)
            assert!(
                r.throughput_ops_per_s >= 1.2 * devices[0],
                "{run}: {:.0} against the fast device's {:.0}",
                r.throughput_ops_per_s,
                devices[0]
            );
        } else if label == "hemem" {
            // Without the churn HeMem serves what the fast device can.
            assert!(
                r.throughput_ops_per_s >= 0.95 * devices[0],
                "{run}: {:.0} against the fast device's {:.0}",
                r.throughput_ops_per_s,
                devices[0]
            );
        } else {
            // The bench's bar for MOST: 0.85 of the limit.
            assert!(share >= 0.85, "{run}: {share:.2} of the limit");
        }
    }
}
