//! Tests of the write-back flusher's order (`cache.rs`).

use super::*;
use crate::replacement::ReplacementKind;

struct NoLocks;
impl LockView for NoLocks {
    fn is_locked(&self, _: u64) -> bool {
        false
    }
}

/// A write-back cache of `slots` blocks on device 0 over device 1 that
/// flushes above half full, down to none, one flush at a time.
fn core(slots: usize) -> CacheCore {
    let cfg = CacheConfig {
        capacity_blocks: slots,
        replacement: ReplacementKind::Lru,
        write_mode: WriteMode::Back,
        fill_sync: false,
        around_hit_updates: true,
        dirty_high_ratio: 0.5,
        dirty_low_ratio: 0.0,
        flush_max_inflight: 1,
    };
    CacheCore::new(
        cfg,
        CachePair {
            cache: 0,
            backing: 1,
        },
    )
}

/// Writes `block` into the cache as a write-back write hit or miss does.
fn write(c: &mut CacheCore, map: &mut PlacementMap, block: u64) {
    let e = map.get(block);
    if e.valid_on(0) {
        c.touch(e.loc(0));
    } else {
        c.admit(block, map, &NoLocks, &mut Vec::new())
            .expect("a free slot");
    }
    c.mark_dirty(block, map);
}

/// Flushes one block at a time and returns them in order.
fn flush_all(c: &mut CacheCore, map: &mut PlacementMap) -> Vec<u64> {
    let mut order = Vec::new();
    loop {
        let mut jobs = Vec::new();
        c.schedule_flushes(map, &NoLocks, &mut jobs, true);
        let Some(job) = jobs.pop() else {
            return order;
        };
        assert!(jobs.is_empty(), "one flush at a time");
        // What `start_flush` and `finish_flush` do to the bookkeeping.
        map.entry_mut(job.block).flags &= !FLAG_FLUSH_QUEUED;
        c.mark_clean(job.block, map);
        c.flushes_queued -= 1;
        order.push(job.block);
    }
}

#[test]
fn the_least_recently_written_block_is_flushed_first() {
    let mut c = core(8);
    let mut map = PlacementMap::new(1);
    for b in [10, 11, 12, 13] {
        write(&mut c, &mut map, b);
    }
    // A read hit on 10 does not change the order; a rewrite of 11 makes
    // it the newest write.
    c.touch(map.get(10).loc(0));
    write(&mut c, &mut map, 11);
    assert_eq!(c.dirty_blocks(), 4);
    assert_eq!(flush_all(&mut c, &mut map), [10, 12, 13, 11]);
    assert_eq!(c.dirty_blocks(), 0);
    // Written again after their flush: dirty again, in the new order.
    for b in [13, 10] {
        write(&mut c, &mut map, b);
    }
    assert_eq!(flush_all(&mut c, &mut map), [13, 10]);
}
