//! The TICA paper's baselines in zero-time replay: uCache, S-RAC and the
//! plain RAID-1 cache on a DRAM over a mirrored SSD pair, with outcomes an LRU argument gives
//! exactly, and the behaviour that tells the two apart (uCache admits by
//! past reuse, S-RAC by the reuse its access kinds go on to have).

use crate::common;
use crate::common::two_ssds;

use common::skewed;
use tiermux_core::Op;
use tiermux_trace::replay::ReplayStats;
use two_ssds::run;

/// Each page of a stream read twice in a row and never again.
fn read_twice(pages: u64) -> Vec<(u64, Op)> {
    (0..pages).flat_map(|p| [(p, Op::Read); 2]).collect()
}

/// A cyclic scan over 200 pages misses an LRU DRAM of 50 every time, so
/// no page is read again while in DRAM and uCache writes nothing to the
/// SSDs. Pages read twice in a row hit DRAM on their second read (read
/// hit ratio exactly 1/2) and every one that leaves DRAM, all but the 50
/// it holds at the end, is written to both SSDs.
#[test]
fn ucache_admits_exactly_the_pages_read_again_in_dram() {
    let scan: Vec<(u64, Op)> = (0..10_000).map(|i| (i % 200, Op::Read)).collect();
    let s = run("ucache", &scan, 500);
    assert_eq!(s.read_hit_ratio(), 0.0);
    assert_eq!(s.blocks_written(1) + s.blocks_written(2), 0);

    let twice = read_twice(1_000);
    let s = run("ucache", &twice, 500);
    assert_eq!(s.read_hit_ratio(), 0.5);
    assert_eq!(s.read_hit_ratio_on(0), 0.5, "every hit in DRAM");
    assert_eq!(s.blocks_written(1), 950);
    assert_eq!(s.blocks_written(2), 950);
}

/// The plain RAID-1 cache admits every page leaving DRAM: on the cyclic
/// scan where uCache writes nothing, each of the 10,000 reads misses, and
/// the first 150 pages leave DRAM for both SSDs; after the first pass
/// every read hits: the 50 pages DRAM took last stay there (SSD hits are
/// not promoted, so nothing displaces them) and the rest are on the SSDs
/// (500 pages each). DRAM hits: 49 passes of 50.
#[test]
fn raid1_admits_every_page_leaving_dram() {
    let scan: Vec<(u64, Op)> = (0..10_000).map(|i| (i % 200, Op::Read)).collect();
    let s = run("raid1", &scan, 500);
    assert_eq!(s.read_hit_ratio(), 1.0 - 200.0 / 10_000.0);
    assert_eq!(s.read_hit_ratio_on(0), 49.0 * 50.0 / 10_000.0);
    assert_eq!(s.blocks_written(1), 150);
    assert_eq!(s.blocks_written(1), s.blocks_written(2), "mirrored");
}

/// The same pages read twice are never read a third time: S-RAC learns
/// that a read after a read is not followed by another access and stops
/// admitting such DRAM victims, writing the SSDs a small fraction of what
/// uCache writes, for the same hits.
#[test]
fn s_rac_keeps_blocks_without_future_reuse_off_the_ssds() {
    let twice = read_twice(1_000);
    let srac = run("s-rac", &twice, 500);
    let ucache = run("ucache", &twice, 500);
    assert_eq!(srac.read_hit_ratio(), ucache.read_hit_ratio());
    let writes = |s: &ReplayStats| s.blocks_written(1) + s.blocks_written(2);
    assert!(
        writes(&srac) * 10 < writes(&ucache),
        "{} vs {}",
        writes(&srac),
        writes(&ucache)
    );
}

/// On a mixed workload every SSD write of a baseline goes to both SSDs,
/// reads of mirrored pages alternate between them, and no dirty page is
/// kept in DRAM: a write hit is served on the SSDs.
#[test]
fn baselines_mirror_every_ssd_write_and_share_the_reads() {
    let a = skewed(60_000, 3_000, 30, 7);
    for policy in ["ucache", "s-rac"] {
        let s = run(policy, &a, 500);
        assert_eq!(s.blocks_written(1), s.blocks_written(2), "{policy}");
        assert!(s.blocks_written(1) > 0, "{policy}");
        let (ro, wo) = (s.read_hit_ratio_on(1), s.read_hit_ratio_on(2));
        assert!(
            ro > 0.0 && (ro - wo).abs() < 0.01 * ro.max(wo) + 1e-3,
            "{policy}: {ro} vs {wo}"
        );
        assert!(s.write_hit_ratio() > 0.0, "{policy}");
    }
}

/// Pages written once and never read again, among reads cycling over 100
/// pages: S-RAC learns that a first write is not followed by another
/// access and writes such pages home, sparing the SSDs, while uCache
/// writes every one to both SSDs. The cycle misses a DRAM of 50 (LRU), so
/// no page is read again there and uCache never admits one: its read hits
/// are exactly 0, where S-RAC, seeing the reads return, keeps the pages.
#[test]
fn s_rac_writes_write_once_data_around_the_ssds() {
    let mut a = Vec::new();
    for i in 0..40_000u64 {
        a.push((i % 100, Op::Read));
        a.push((1_000_000 + i, Op::Write));
    }
    let srac = run("s-rac", &a, 500);
    let ucache = run("ucache", &a, 500);
    let writes = |s: &ReplayStats| s.blocks_written(1) + s.blocks_written(2);
    assert_eq!(writes(&ucache), 2 * 40_000);
    assert!(writes(&srac) * 20 < writes(&ucache), "{}", writes(&srac));
    assert!(srac.storage_blocks > 39_000, "{}", srac.storage_blocks);
    assert_eq!(ucache.read_hit_ratio(), 0.0);
    assert!(srac.read_hit_ratio() > 0.9, "{}", srac.read_hit_ratio());
}
