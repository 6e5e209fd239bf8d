//! NHC in write-back at its steady state on the bench's emulated pair
//! (`experiments/nhc-write-back-steady.toml`): 95 % reads, 32 in flight,
//! 120 s. NHC stops admitting misses, so its cache evicts nothing, and
//! dirty blocks pile up to the flusher's high watermark; a dirty block's
//! reads can only be served by the cache, so NHC has fewer and fewer hits
//! to send to the capacity device and falls well short of the pair's
//! limit. With `offload_clean_ratio` the flusher holds dirty data at that
//! share of the cache while NHC offloads, and NHC keeps its gain.

use tiermux_sim::RunResult;

use crate::common;
use common::{device_ops_per_s, get, run_file};

const FILE: &str = "nhc-write-back-steady.toml";
const CACHE_BLOCKS: f64 = 65536.0;

/// The dirty blocks of a run's last time-series sample.
fn final_dirty_blocks(r: &RunResult) -> f64 {
    let last = r.samples.last().expect("a time series");
    last.controller
        .iter()
        .find(|(k, _)| k == "dirty_blocks")
        .expect("the cache reports its dirty blocks")
        .1
}

#[test]
fn nhc_keeps_its_gain_in_write_back_when_it_cleans_while_offloading() {
    // The pair's limit for 95 % reads at 32 in flight, as `tiermux bench`
    // computes its simulated one.
    let limit: f64 = device_ops_per_s(FILE, 0.95, 32).iter().sum();
    let runs = run_file(FILE, &|_| true);
    assert_eq!(runs.len(), 6);
    for (k, r) in &runs {
        let share = r.throughput_ops_per_s / limit;
        let dirty = final_dirty_blocks(r) / CACHE_BLOCKS;
        let ratio = get(k, "params.offload_clean_ratio");
        let run = format!("{}, offload_clean_ratio {ratio}", get(k, "label"));
        eprintln!("{run}: {share:.3} of the limit, {dirty:.3} dirty");
        match ratio {
            "" => continue,
            "1.0" => {
                // The paper's NHC: the cache is mostly dirty and NHC serves
                // little more than classic caching's fast device alone.
                assert!(dirty >= 0.75, "{run}: {dirty:.3} dirty");
                assert!(share < 0.7, "{run}: {share:.3} of the limit");
            }
            target => {
                let target: f64 = target.parse().unwrap();
                // Flushes queued to the target, at most 8 in flight, and
                // writes landing meanwhile.
                assert!(
                    dirty <= target + 64.0 / CACHE_BLOCKS,
                    "{run}: {dirty:.3} dirty"
                );
                assert!(share >= 0.8, "{run}: {share:.3} of the limit");
            }
        }
    }
}
