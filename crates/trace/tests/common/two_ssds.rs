//! Replays on the four-device shape of TICA and its baselines, for the
//! test files of those policies.

use tiermux_core::{Op, Params};
use tiermux_trace::replay::{ReplayStats, TraceVolume};

/// DRAM of 50 pages (TICA's write partition is 5 of them by default; the
/// baselines keep no dirty data in DRAM), two SSDs of `ssd_pages` each,
/// one reserve page per cache device.
pub fn volume(ssd_pages: u64) -> TraceVolume {
    TraceVolume {
        cache_pages: ssd_pages,
        dram_share: Some(50.0 / ssd_pages as f64),
        reserve_pages: 1,
        ssd_pair: true,
    }
}

/// Replays `accesses` with `policy` and its default parameters over
/// [`volume`].
pub fn run(policy: &str, accesses: &[(u64, Op)], ssd_pages: u64) -> ReplayStats {
    super::run(policy, &Params::new(), accesses, volume(ssd_pages))
}
