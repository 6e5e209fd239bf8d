//! Tests of the segment classes and slots (`tiers.rs`).

use super::*;
use crate::policy::{DeviceSpec, LockView};
use crate::types::Plan;

struct NoLocks;
impl LockView for NoLocks {
    fn is_locked(&self, _: u64) -> bool {
        false
    }
}

fn volume() -> VolumeSpec {
    let dev = |capacity_blocks, role| DeviceSpec {
        name: "d".into(),
        capacity_blocks,
        role,
    };
    VolumeSpec {
        num_blocks: 64,
        block_size: 4096,
        devices: vec![dev(16, DeviceRole::Tier), dev(64, DeviceRole::Home)],
    }
}

/// Runs `f` with a context over `map`, returning the plan's operations
/// as (device, dir, addr).
fn with_ctx(map: &mut PlacementMap, f: impl FnOnce(&mut Ctx<'_>)) -> Vec<(DeviceIndex, Op, u64)> {
    let (mut plan, mut jobs) = (Plan::default(), Vec::new());
    let mut ctx = Ctx {
        map,
        locks: &NoLocks,
        plan: &mut plan,
        jobs: &mut jobs,
        may_write: true,
    };
    f(&mut ctx);
    plan.ios
        .iter()
        .map(|io| (io.device, io.dir, io.addr))
        .collect()
}

fn run(
    t: &mut Tiers,
    map: &mut PlacementMap,
    segment: u64,
    m: Move,
) -> Vec<(DeviceIndex, Op, u64)> {
    assert!(t.claim(segment, m), "{m:?} of {segment} refused");
    let job = t.job(segment, m);
    let ios = with_ctx(map, |ctx| {
        t.start(job, ctx);
    });
    t.finish(job);
    ios
}

#[test]
fn moves_between_classes_copy_what_they_must() {
    let mut t = Tiers::new("t", &volume(), 4).unwrap();
    let mut map = PlacementMap::new(1);
    assert_eq!((t.slots(), t.segments()), (4, 16));
    // Promote segment 2 (blocks 8..12): every block copied up, into
    // slot 0 (locations 0..4), the performance copy the only current.
    let ios = run(&mut t, &mut map, 2, Move::Promote);
    assert_eq!(ios.len(), 8);
    assert_eq!(ios[0..2], [(1, Op::Read, 8), (0, Op::Write, 0)]);
    assert_eq!(t.class(2), Class::Performance);
    assert_eq!(t.read_choices(&map, 9), Some(0));
    // Mirror it: every block copied back down; both copies current.
    let ios = run(&mut t, &mut map, 2, Move::Mirror);
    assert_eq!(ios.len(), 8);
    assert!(ios
        .iter()
        .all(|&(d, dir, _)| (d, dir) == (0, Op::Read) || (d, dir) == (1, Op::Write)));
    assert_eq!((t.class(2), t.mirrored()), (Class::Mirrored, 1));
    assert_eq!(t.read_choices(&map, 9), None);
    // A write to the capacity copy of block 9 invalidates its
    // performance copy; one to block 10's performance copy
    // invalidates the capacity copy.
    with_ctx(&mut map, |ctx| {
        assert_eq!(t.write(9, true, ctx), 1);
        assert_eq!(t.write(10, false, ctx), 0);
    });
    assert_eq!(t.read_choices(&map, 9), Some(1));
    assert_eq!(t.read_choices(&map, 10), Some(0));
    assert_eq!(t.unclean().collect::<Vec<_>>(), vec![2]);
    // Cleaning copies exactly those two subpages.
    let ios = run(&mut t, &mut map, 2, Move::Clean);
    assert_eq!(
        ios,
        vec![
            (1, Op::Read, 9),
            (0, Op::Write, 1),
            (0, Op::Read, 2),
            (1, Op::Write, 10)
        ]
    );
    assert_eq!(t.unclean().count(), 0);
    // Unmirror with every performance copy current: no I/O, the
    // capacity copy is dropped.
    assert!(run(&mut t, &mut map, 2, Move::Unmirror).is_empty());
    assert_eq!((t.class(2), t.mirrored()), (Class::Performance, 0));
    assert_eq!(t.read_choices(&map, 11), Some(0));
    // Demote: every block copied down, the slot freed at the end.
    let ios = run(&mut t, &mut map, 2, Move::Demote);
    assert_eq!(ios.len(), 8);
    assert_eq!((t.class(2), t.free_slots()), (Class::Capacity, 4));
    assert!(map.is_empty(), "every block is back on its home only");
}

#[test]
fn a_restart_rebuilds_classes_and_slots() {
    let mut t = Tiers::new("t", &volume(), 4).unwrap();
    let mut map = PlacementMap::new(1);
    run(&mut t, &mut map, 1, Move::Promote);
    run(&mut t, &mut map, 3, Move::Promote);
    run(&mut t, &mut map, 3, Move::Mirror);
    with_ctx(&mut map, |ctx| {
        t.write(13, true, ctx);
    });
    let mut r = Tiers::new("t", &volume(), 4).unwrap();
    r.restore(&map).unwrap();
    assert_eq!(
        (r.class(1), r.class(3)),
        (Class::Performance, Class::Mirrored)
    );
    assert_eq!((r.free_slots(), r.mirrored()), (2, 1));
    assert_eq!(r.unclean().collect::<Vec<_>>(), vec![3]);
    // A block outside its segment's slot is refused.
    map.entry_mut(5).set_loc(0, 10);
    let err = Tiers::new("t", &volume(), 4)
        .unwrap()
        .restore(&map)
        .unwrap_err();
    assert!(err.contains("block 5"), "{err}");
}

#[test]
fn promotions_reserve_their_slots_when_claimed() {
    let mut t = Tiers::new("t", &volume(), 4).unwrap();
    for s in 0..4 {
        assert!(t.claim(s, Move::Promote), "slot for {s}");
    }
    assert!(!t.claim(4, Move::Promote), "a fifth promotion had a slot");
    // Giving up a claim returns its slot.
    t.release(2);
    assert_eq!((t.free_slots(), t.class(2)), (1, Class::Capacity));
    assert!(t.claim(4, Move::Promote));
}

#[test]
fn a_demotion_that_failed_keeps_its_slot() {
    let mut t = Tiers::new("t", &volume(), 4).unwrap();
    let mut map = PlacementMap::new(1);
    run(&mut t, &mut map, 0, Move::Promote);
    let before = map.get(1);
    assert!(t.claim(0, Move::Demote));
    let job = t.job(0, Move::Demote);
    with_ctx(&mut map, |ctx| {
        t.start(job, ctx);
    });
    // Block 1's copy down failed: its only current copy stays up.
    let kept = t.repaired(1, before);
    map.set(1, kept);
    t.finish(job);
    assert_eq!((t.class(0), t.free_slots()), (Class::Performance, 3));
    assert_eq!(t.read_choices(&map, 1), Some(0));
}

#[test]
fn a_segment_trimmed_whole_frees_its_slot_and_is_new_again() {
    let mut t = Tiers::new("t", &volume(), 4).unwrap();
    let mut map = PlacementMap::new(1);
    for s in [1, 2] {
        assert!(t.touch(s));
        run(&mut t, &mut map, s, Move::Promote);
    }
    run(&mut t, &mut map, 2, Move::Mirror);
    assert_eq!((t.free_slots(), t.mirrored(), t.used_segments()), (2, 1, 3));
    // Blocks 4..9 discarded: only segment 1 (blocks 4..8) is covered
    // whole, and only it counts as never accessed again.
    assert_eq!(t.discarded(4, 9), 1..2);
    assert!(!t.touch(2), "segment 2 was covered in part only");
    assert_eq!(t.used_segments(), 2);
    // The slot is freed with the last performance copy, not before.
    for b in 4..7 {
        assert_eq!(t.trim(b, &mut map), None);
        assert_eq!(t.class(1), Class::Performance);
    }
    assert_eq!(t.trim(7, &mut map), Some(1));
    assert_eq!((t.class(1), t.free_slots()), (Class::Capacity, 3));
    assert!(t.touch(1), "the next access to segment 1 is its first");
    assert!(
        t.note_write(1),
        "a read before it, its next write allocates"
    );
    assert!(!t.note_write(1), "one allocation");
    // A mirrored segment trimmed whole leaves the mirrored class; one
    // that a move holds keeps its slot.
    for b in [11, 10, 9] {
        assert_eq!(t.trim(b, &mut map), None);
    }
    assert!(t.claim(2, Move::Unmirror));
    assert_eq!(t.trim(8, &mut map), None, "a busy segment was freed");
    t.release(2);
    assert_eq!(t.trim(8, &mut map), Some(2));
    assert_eq!((t.mirrored(), t.free_slots()), (0, 4));
    assert!(map.iter().all(|(_, e)| e.present == 1 << 1));
}
