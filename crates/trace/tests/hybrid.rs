//! The hybrid DRAM + NVRAM caches (Hibachi, Hybrid-LRU, Hybrid-ARC) in
//! zero-time replay: outcomes with an independent source, and the
//! behaviours the Hibachi paper describes.

use crate::common;

use common::skewed;
use tiermux_core::replacement::ReplacementKind;
use tiermux_core::rng::Rng;
use tiermux_core::{Op, Params};
use tiermux_trace::replay::{hit_ratio, ReplayStats, TraceVolume};

fn volume(cache_pages: u64) -> TraceVolume {
    TraceVolume {
        cache_pages,
        dram_share: Some(0.5),
        reserve_pages: 1,
        ssd_pair: false,
    }
}

fn run(policy: &str, params: &Params, accesses: &[(u64, Op)], cache_pages: u64) -> ReplayStats {
    common::run(policy, params, accesses, volume(cache_pages))
}

/// With reads only, Hybrid-LRU's clean cache fills DRAM and borrows all of
/// NVRAM: it is LRU over the two together, hit for hit.
#[test]
fn hybrid_lru_reads_alone_are_lru_over_both_devices() {
    let a = skewed(60_000, 3_000, 0, 1);
    for cache in [64, 500, 1_600] {
        let s = run("hybrid-lru", &Params::new(), &a, cache);
        let lru = hit_ratio(a.iter().map(|x| x.0), ReplacementKind::Lru, cache as usize);
        assert_eq!(s.read_hit_ratio(), lru, "{cache} pages");
        assert_eq!(s.read_accesses, 60_000);
        assert!(s.read_hit_ratio_on(0) > 0.0 && s.read_hit_ratio_on(1) > 0.0);
        assert_eq!(s.blocks_written(3), 0, "no device 3");
        assert_eq!(s.storage_runs(), 0, "reads write nothing home");
    }
}

/// A rewrite of a cached page is a write hit, absorbed by NVRAM; nothing
/// reaches the storage until the dirty pages no longer fit.
#[test]
fn writes_are_absorbed_until_nvram_is_full() {
    for policy in ["hibachi", "hybrid-lru", "hybrid-arc"] {
        let a: Vec<(u64, Op)> = (0..20).chain(0..20).map(|p| (p * 7, Op::Write)).collect();
        let s = run(policy, &Params::new(), &a, 64);
        assert_eq!(s.write_hits, 20, "{policy}");
        assert_eq!(s.blocks_written(2), 0, "{policy}: nothing flushed yet");
        // 40 dirty pages in an NVRAM of 32: 8 flushed, one at a time.
        let a: Vec<(u64, Op)> = (0..40).map(|p| (p * 7, Op::Write)).collect();
        let s = run(policy, &Params::new(), &a, 64);
        assert_eq!(s.blocks_written(2), 8, "{policy}");
        assert_eq!(s.storage_runs(), 8, "{policy}");
    }
}

/// Hibachi's Right Transformation: a run of consecutive dirty pages longer
/// than the threshold is flushed in one sequential write, and the storage
/// log holds it as one run; Hybrid-LRU flushes page by page.
#[test]
fn hibachi_flushes_long_dirty_runs_in_one_write() {
    // 12 consecutive pages written between scattered ones, then more
    // scattered writes that overflow NVRAM.
    let mut a: Vec<(u64, Op)> = (0..12)
        .flat_map(|i| [(1000 + i, Op::Write), (5000 + 7 * i, Op::Write)])
        .collect();
    a.extend((0..40).map(|p| (p * 13, Op::Write)));
    let s = run("hibachi", &Params::new(), &a, 64);
    let log = s.storage_log.as_ref().unwrap();
    assert_eq!(log[0], (1000, 12), "{log:?}");
    let l = run("hybrid-lru", &Params::new(), &a, 64);
    assert!(
        l.storage_log.unwrap().iter().all(|r| r.1 == 1),
        "LRU order alternates"
    );
    // Below the threshold, Hibachi flushes the LRU dirty page alone.
    let p = Params::new().with("run_threshold", tiermux_core::ParamValue::Int(12));
    let s = run("hibachi", &p, &a, 64);
    assert_eq!(s.storage_log.unwrap()[0], (1000, 1));
}

/// Storage writes count as the requests the policy hands out: pages that
/// Hybrid-LRU flushes one eviction at a time are one-page requests even
/// where their addresses follow one another, as the Hibachi authors'
/// simulator logs them for fio (a line per flushed page; a line per run
/// that Hibachi flushes).
#[test]
fn flushes_handed_out_apart_are_requests_apart() {
    let a: Vec<(u64, Op)> = (0..40).map(|p| (p, Op::Write)).collect();
    let l = run("hybrid-lru", &Params::new(), &a, 64);
    let one_by_one: Vec<(u64, u64)> = (0..8).map(|p| (p, 1)).collect();
    assert_eq!(l.storage_log.unwrap(), one_by_one);
    // Hibachi flushes the whole dirty run (NVRAM's 32 pages and the slot
    // it keeps back) in one request.
    let h = run("hibachi", &Params::new(), &a, 64);
    assert_eq!(h.storage_log.unwrap(), vec![(0, 33)]);
}

/// Hibachi's clean cache keeps frequently read pages that LRU would lose
/// to a scan; a read-hot page borrowing NVRAM moves to DRAM.
#[test]
fn hibachi_keeps_frequent_pages_through_a_scan() {
    let mut a = Vec::new();
    for round in 0..20u64 {
        a.extend((0..32).map(|p| (p % 16, Op::Read)));
        a.extend((0..100).map(|i| (10_000 + round * 100 + i, Op::Read)));
    }
    let h = run("hibachi", &Params::new(), &a, 64);
    let l = run("hybrid-lru", &Params::new(), &a, 64);
    assert!(
        h.read_hit_ratio() > 1.5 * l.read_hit_ratio(),
        "{} vs {}",
        h.read_hit_ratio(),
        l.read_hit_ratio()
    );
    assert!(
        h.read_hit_ratio_on(0) > h.read_hit_ratio_on(1),
        "hot pages are read from DRAM"
    );
}

/// Every policy of the family, on a mixed workload: hits and misses add
/// up, every write either hits or misses, and dirty data reaches storage
/// only through flushes.
#[test]
fn counts_add_up_on_mixed_workloads() {
    let a = skewed(40_000, 2_000, 70, 3);
    for policy in ["hibachi", "hybrid-lru", "hybrid-arc"] {
        for cache in [32, 256, 1_024] {
            let s = run(policy, &Params::new(), &a, cache);
            assert_eq!(s.hits() + s.misses, s.accesses, "{policy}");
            assert_eq!(s.accesses, 40_000);
            let flushed = s.writes[2][tiermux_core::Purpose::Flush.index()];
            assert_eq!(s.blocks_written(2), flushed + s.writes[2][0], "{policy}");
            let logged: u64 = s.storage_log.as_ref().unwrap().iter().map(|r| r.1).sum();
            assert_eq!(logged, s.blocks_written(2), "{policy}");
            assert_eq!(s.storage_blocks, s.blocks_written(2), "{policy}");
        }
    }
}

/// Hybrid-ARC's ghosts move NVRAM to clean pages when evicted clean pages
/// come back: a read loop a little larger than DRAM, beside writes that
/// would fill NVRAM, thrashes Hybrid-LRU's DRAM but fits Hybrid-ARC's
/// grown clean cache.
#[test]
fn hybrid_arc_lends_nvram_to_returning_clean_pages() {
    let mut a = Vec::new();
    let mut rng = Rng::new(4);
    for i in 0..30_000u64 {
        a.push((i % 40, Op::Read));
        if i % 2 == 0 {
            a.push((1_000 + rng.below(5_000), Op::Write));
        }
    }
    let arc = run("hybrid-arc", &Params::new(), &a, 64);
    let lru = run("hybrid-lru", &Params::new(), &a, 64);
    assert!(
        lru.read_hit_ratio() < 0.05,
        "LRU's 32 DRAM pages thrash: {}",
        lru.read_hit_ratio()
    );
    assert!(arc.read_hit_ratio() > 0.5, "{}", arc.read_hit_ratio());
    assert!(
        arc.read_hit_ratio_on(1) > 0.1,
        "clean pages borrow NVRAM: {}",
        arc.read_hit_ratio_on(1)
    );
}
