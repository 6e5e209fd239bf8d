//! The ARC paper's OLTP trace (Megiddo and Modha, FAST '03), read through
//! the trace format stack: the published LRU hit ratios come out exact.

use std::path::Path;

use tiermux_core::replacement::ReplacementKind;
use tiermux_trace::replay::{hit_ratio, replay_policy};
use tiermux_trace::{read, BlockTrace, Format};

/// The trace's 512-byte pages.
struct Pages<'a>(&'a BlockTrace);

impl Pages<'_> {
    fn pages(&self) -> impl Iterator<Item = u64> + Clone + '_ {
        self.0.pages(512)
    }

    fn page_count(&self) -> u64 {
        self.pages().count() as u64
    }
}

/// The ARC paper's OLTP trace (Megiddo and Modha, FAST '03), kept in
/// the repository's `traces/`. LRU must match Table IV exactly, ARC
/// within 0.05 points.
#[test]
fn oltp_hit_ratios_match_the_arc_paper() {
    // The trace is in the repository (traces/README.md cites the paper).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/arc/OLTP.lis.zst");
    let trace = read(&path, &Format::Arc).unwrap();
    let t = Pages(&trace);
    assert_eq!(t.page_count(), 914_145);
    let table = [
        (1_000, 32.83, 38.93),
        (2_000, 42.47, 46.08),
        (5_000, 53.65, 55.25),
        (10_000, 60.70, 61.87),
        (15_000, 64.63, 65.40),
    ];
    for (n, lru, arc) in table {
        let l = (hit_ratio(t.pages(), ReplacementKind::Lru, n) * 10_000.0).round() / 100.0;
        assert_eq!(l, lru, "LRU {n}");
        let a = hit_ratio(t.pages(), ReplacementKind::Arc, n) * 100.0;
        assert!((a - arc).abs() <= 0.05, "ARC {n}: {a} vs {arc}");
    }
    // One pass of stack distances gives the whole LRU column.
    let mrc = tiermux_trace::mrc::MissRatioCurve::of(t.pages(), t.page_count() as usize);
    assert_eq!(mrc.distinct_pages(), 186_880, "the paper's Table III");
    for (n, lru, _) in table {
        let l = (mrc.hit_ratio(n) * 10_000.0).round() / 100.0;
        assert_eq!(l, lru, "one-pass LRU {n}");
    }
    // Sampling a tenth of the pages (SHARDS-adj) stays within 2.5
    // points of the paper's column (measured: at most 2.04).
    let sampled = tiermux_trace::mrc::SampledCurve::of(t.pages(), 0.1);
    for (n, lru, _) in table {
        let err = (sampled.hit_ratio(n) * 100.0 - lru).abs();
        assert!(err < 2.5, "sampled LRU {n}: {err} points off");
    }
    // Classic caching (LRU by default) through the dispatcher gives
    // Table IV's LRU column too, every hit served by the cache.
    for (n, lru, _) in &table[..3] {
        let s = replay_policy(
            "classic",
            &tiermux_core::Params::new(),
            t.pages(),
            *n as u64,
        )
        .unwrap();
        assert_eq!(
            (s.hit_ratio() * 10_000.0).round() / 100.0,
            *lru,
            "classic {n}"
        );
        assert_eq!(s.hits_by_device[0], s.hits());
    }
}
