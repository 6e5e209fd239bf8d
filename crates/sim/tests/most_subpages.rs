//! MOST Figure 7c (`experiments/most-fig7c-subpages.toml`): 4 KiB writes
//! from 128 threads until a drop to 8. With subpages, a write to a
//! mirrored segment may go to either copy, so once the load drops the
//! offload ratio alone takes the writes back to the performance device,
//! with no migration; without them (the paper's segment-only tracking) a
//! segment written on its capacity copy keeps taking its writes there
//! until it is copied back whole, which is migration, and slower.
//!
//! The file's run shortened: the drop at 60 s instead of 400 s (the
//! mirrored class is smaller, the behaviour the same), 150 s in all.

use crate::common;
use common::{get, run_file_with, sampled as ctl};
use tiermux_sim::sim::Sample;
use tiermux_sim::workload::Schedule;

const FILE: &str = "most-fig7c-subpages.toml";
const DROP_S: f64 = 60.0;

/// The sample that ends at `t_s`.
fn at(samples: &[Sample], t_s: f64) -> &Sample {
    samples
        .iter()
        .find(|s| (s.t_s - t_s).abs() < 1e-6)
        .unwrap_or_else(|| panic!("no sample at {t_s} s"))
}

/// Bytes copied towards the performance device so far, or down to the
/// capacity device as a demotion: every move but mirroring.
fn moved_back_bytes(s: &Sample) -> f64 {
    ["promoted_bytes", "demoted_bytes", "cleaned_bytes"]
        .iter()
        .map(|n| ctl(s, n))
        .sum()
}

#[test]
fn subpages_return_writes_by_routing_and_segments_by_migration() {
    let runs = run_file_with(FILE, &|_| true, &|cfg| {
        cfg.duration_s = 150.0;
        cfg.client.schedule = Schedule::Steps {
            times_s: vec![DROP_S],
            factors: vec![0.0625],
        };
    });
    assert_eq!(runs.len(), 2);
    for (k, r) in runs {
        let subpages = get(&k, "params.subpages") == "true";
        let s = &r.samples;
        let before = at(s, DROP_S);
        let share = |t: f64| ctl(at(s, t), "capacity_write_share");
        // Under load both variants send a large share of writes to the
        // capacity device through the mirrored class.
        assert!(
            share(DROP_S) > 0.2,
            "subpages {subpages}: {:.3} of writes offloaded before the drop",
            share(DROP_S)
        );
        let end = s.last().unwrap();
        if subpages {
            // The ratio falls by 0.02 a 200 ms quantum from at most 1,
            // once the smoothed latencies have followed the drop (about
            // 2 s): every write is back on the performance device within
            // 15 s, and nothing was copied back or demoted.
            assert_eq!(share(DROP_S + 15.0), 0.0, "writes still offloaded");
            assert_eq!(
                moved_back_bytes(end),
                moved_back_bytes(before),
                "data copied back after the drop"
            );
        } else {
            // After the ratio has reached 0, the segments whose valid copy
            // is the capacity device's still take their writes there ...
            assert!(
                share(DROP_S + 15.0) > 0.2,
                "{:.3} of writes on the capacity device 15 s after the drop",
                share(DROP_S + 15.0)
            );
            // ... until they are copied back up, under the migration cap.
            assert!(
                ctl(end, "cleaned_bytes") > ctl(before, "cleaned_bytes") + 8e6,
                "copied back after the drop: {} bytes",
                ctl(end, "cleaned_bytes") - ctl(before, "cleaned_bytes")
            );
            assert!(
                ctl(end, "capacity_write_share") < 0.5 * share(DROP_S + 15.0),
                "{:.3} of writes still on the capacity device at the end",
                ctl(end, "capacity_write_share")
            );
        }
    }
}
