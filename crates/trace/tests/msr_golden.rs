//! LRU and ARC on an MSR-format trace agree with libCacheSim's `cachesim`
//! on the same trace converted by `tiermux trace convert`.
//!
//! The trace is `traces/synthetic/wdev_0-50k.msr.zst` (the `wdev_0`
//! preset, 50,000 requests; see `traces/README.md`). The golden miss
//! ratios are cachesim's output (libCacheSim aa0fc40, four decimals) on
//! that trace converted to `oracleGeneral`, one record per 4 KiB page:
//! `scripts/check-msr-vs-libcachesim.sh` reproduces them.

use std::path::Path;

use tiermux_core::replacement::ReplacementKind;
use tiermux_trace::replay::hit_ratio;
use tiermux_trace::{formats, read, Format};

const CACHESIM_MISS_RATIOS: [(usize, f64, f64); 4] = [
    // (cache pages, LRU, ARC)
    (500, 0.7906, 0.7717),
    (2000, 0.6758, 0.6694),
    (8000, 0.6142, 0.5996),
    (32000, 0.5340, 0.5329),
];

#[test]
fn lru_and_arc_match_libcachesim_on_an_msr_trace() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/synthetic/wdev_0-50k.msr.zst");
    let t = read(&path, &Format::Msr).unwrap();
    assert_eq!(t.requests.len(), 50_000);
    assert_eq!(t.pages(4096).count(), 112_649, "cachesim's request count");
    // The converted file reads back as the same page sequence.
    let dir = std::env::temp_dir().join(format!("tiermux-msr-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let oracle = dir.join("t.oracleGeneral");
    let format = Format::Oracle {
        with_op: false,
        id_unit_bytes: 1,
    };
    formats::write(&t, &oracle, &format, 4096).unwrap();
    let back = read(&oracle, &format).unwrap();
    assert!(back.pages(4096).eq(t.pages(4096)));
    std::fs::remove_dir_all(&dir).unwrap();
    for (pages, lru, arc) in CACHESIM_MISS_RATIOS {
        for (kind, want) in [(ReplacementKind::Lru, lru), (ReplacementKind::Arc, arc)] {
            let miss = 1.0 - hit_ratio(t.pages(4096), kind, pages);
            assert_eq!(
                (miss * 10_000.0).round() / 10_000.0,
                want,
                "{kind:?} at {pages} pages"
            );
        }
    }
}
