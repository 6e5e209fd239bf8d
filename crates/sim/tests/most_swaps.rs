//! MOST and HeMem under load on the bench's emulated pair
//! (`experiments/most-swaps-under-load.toml`): uniform reads over a working
//! set a little larger than the fast device, 32 in flight. HeMem swaps
//! segments whose heat differs only by sampling noise, and the migration
//! keeps the capacity device busy; MOST, which runs HeMem's quantum while
//! its offload ratio moves, inherits the swaps unless
//! `swap_while_offloading = false`, and then uses both devices; but not
//! after a low-load phase, whose swaps leave the capacity device looking
//! slower than the performance device.

use std::path::Path;

use tiermux_core::Op;
use tiermux_device::calibrate::closed_loop_throughput;
use tiermux_device::lookup_profile;
use tiermux_sim::experiment::Experiment;

mod common;
use common::{get, run_file};

const FILE: &str = "most-swaps-under-load.toml";

/// Both devices' closed-loop 4 KiB read throughput at 32 in flight,
/// requests per second: the most any placement can serve.
fn limit_ops_per_s() -> f64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(FILE);
    let exp = Experiment::load(&path).unwrap();
    let cfg = &exp.runs[0].1;
    cfg.devices
        .iter()
        .map(|name| {
            let model = lookup_profile(name, &cfg.profiles)
                .unwrap()
                .model()
                .unwrap();
            closed_loop_throughput(&model, Op::Read, 4096, 32)
        })
        .sum()
}

#[test]
fn hemem_churns_and_most_escapes_only_without_swaps_from_a_loaded_start() {
    let limit = limit_ops_per_s();
    for (k, r) in run_file(FILE, &|_| true) {
        // Only MOST without swaps, from the start under load, escapes.
        let swaps =
            get(&k, "params.swap_while_offloading") != "false" || get(&k, "label") != "most";
        let share = r.throughput_ops_per_s / limit;
        let migrated: u64 = r.devices.iter().map(|d| d.migrated_bytes).sum();
        if swaps {
            // HeMem, MOST as it runs by default, and MOST either way after
            // a low-load phase in which HeMem's quantum swapped freely:
            // segments keep moving both ways, the migration keeps the
            // capacity device slower than the performance one (so the
            // offload ratio stays 0), and the pair serves well under half
            // its limit.
            assert!(migrated > 0, "{}: no migration", r.policy);
            assert!(share < 0.5, "{}: {share:.2} of the limit", r.policy);
        } else {
            // The bar for the bench: 0.85 of the limit.
            assert_eq!(migrated, 0, "MOST without swaps migrated");
            assert!(share >= 0.85, "MOST: {share:.2} of the limit");
        }
    }
}
