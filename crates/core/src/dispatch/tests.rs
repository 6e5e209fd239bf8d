//! The dispatcher's locking of ranges and its repair of failed reads.

use super::*;
use crate::policy::TickCtx;

/// Every access writes or reads device 0 at the block; a job copies its
/// range from device 1 to device 0, gathered when the flag says so.
struct Direct(bool);

impl Policy for Direct {
    fn name(&self) -> &str {
        "direct"
    }
    fn address_space(&self, _device: usize) -> u64 {
        1 << 20
    }
    fn decide(&mut self, a: Access, ctx: &mut Ctx<'_>) -> Outcome {
        ctx.plan.client(0, a.op, a.block);
        Outcome::NotApplicable
    }
    fn start_job(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        ctx.plan.gather = self.0;
        for b in job.block..job.block + job.blocks as u64 {
            ctx.plan.copy(None, (1, b), (0, b), Purpose::Migrate, false);
        }
    }
    fn finish_job(&mut self, _job: Job, _ctx: &mut TickCtx<'_>) {}
}

fn ready(d: &mut Dispatcher) -> Vec<Ready> {
    std::iter::from_fn(|| d.pop_ready()).collect()
}

/// A read that fails beside another reader of the same block leaves
/// the clean cached copy until the other reader is done, then drops it
/// (the block is read from home afterwards).
/// Classic caching of 100 blocks: a 10-block cache over home.
fn classic_over_home() -> Dispatcher {
    use crate::policy::{DeviceRole, DeviceSpec, VolumeSpec};
    let device = |name: &str, capacity_blocks, role| DeviceSpec {
        name: name.into(),
        capacity_blocks,
        role,
    };
    let vol = VolumeSpec {
        num_blocks: 100,
        block_size: 4096,
        devices: vec![
            device("fast", 10, DeviceRole::Cache),
            device("slow", 100, DeviceRole::Home),
        ],
    };
    let policy = crate::build_policy("classic", &crate::Params::new(), &vol, 1).unwrap();
    Dispatcher::new(policy, 1)
}

#[test]
fn a_failed_shared_read_is_repaired_when_the_last_reader_leaves() {
    let mut d = classic_over_home();
    assert!(d.warm(7));
    let read = Access::one(7, Op::Read);
    d.submit(1, read);
    d.submit(2, read);
    let rs = ready(&mut d);
    assert_eq!(rs.len(), 2);
    assert!(rs.iter().all(|r| r.io.device == 0), "both hit the cache");
    d.fail(rs[0].flight, rs[0].index);
    let acked: Vec<Acked> = std::iter::from_fn(|| d.pop_acked()).collect();
    assert!(acked[0].failed);
    assert!(
        d.map().get(7).valid_on(0),
        "the other reader still reads it"
    );
    d.complete(rs[1].flight, rs[1].index, 9);
    assert!(!d.map().get(7).valid_on(0), "dropped once both are done");
    assert_eq!(d.stats().repairs, 1);
    // The next read goes home.
    d.submit(3, read);
    assert_eq!(ready(&mut d)[0].io.device, 1);
}

#[test]
fn a_range_job_waits_for_its_blocks_and_later_writes_wait_for_it() {
    let mut d = Dispatcher::new(Box::new(Direct(false)), 1);
    let write = |block| Access::one(block, Op::Write);
    // A write in the middle of the range is in flight first.
    d.submit(1, write(700));
    let w1 = ready(&mut d);
    assert_eq!(w1.len(), 1);
    // The 512-block move holds blocks 512..1024 but 700, where it waits.
    d.submit_job(Job {
        block: 512,
        blocks: 512,
        kind: 0,
    });
    assert!(ready(&mut d).is_empty());
    // Later writes inside the range queue behind the move, wherever they
    // fall; one outside the range runs.
    d.submit(2, write(512));
    d.submit(3, write(1023));
    d.submit(4, write(5));
    let w4 = ready(&mut d);
    assert_eq!(w4.iter().map(|r| r.tag).collect::<Vec<_>>(), vec![4]);
    d.complete(w4[0].flight, w4[0].index, 0);
    assert!(ready(&mut d).is_empty());
    // The middle write finishes: the move holds all 512 locks and starts
    // its reads.
    d.complete(w1[0].flight, w1[0].index, 0);
    let reads = ready(&mut d);
    assert_eq!(reads.len(), 512);
    assert!(reads
        .iter()
        .all(|r| r.tag == NO_TAG && r.io.dir == Op::Read));
    let mut writes = Vec::new();
    for r in &reads {
        d.complete(r.flight, r.index, 0);
        writes.extend(ready(&mut d));
    }
    assert_eq!(writes.len(), 512, "only the move's own writes");
    assert!(writes.iter().all(|r| r.tag == NO_TAG));
    for r in &writes[..511] {
        d.complete(r.flight, r.index, 0);
    }
    assert!(ready(&mut d).is_empty(), "writes wait for the whole move");
    d.complete(writes[511].flight, writes[511].index, 0);
    let tags: Vec<u64> = ready(&mut d).iter().map(|r| r.tag).collect();
    assert_eq!(tags, vec![2, 3]);
    // The move and the writes to 512 and 1023 waited.
    assert_eq!(d.stats().lock_waits, 3);
}

/// Reads device 0 at the block and records whether it was allowed to
/// write (it holds the block's lock alone or exclusively).
struct RecordsMayWrite(std::sync::Arc<std::sync::Mutex<Vec<bool>>>);

impl Policy for RecordsMayWrite {
    fn name(&self) -> &str {
        "records-may-write"
    }
    fn address_space(&self, _device: usize) -> u64 {
        1 << 20
    }
    fn decide(&mut self, a: Access, ctx: &mut Ctx<'_>) -> Outcome {
        self.0.lock().unwrap().push(ctx.may_write);
        ctx.plan.client(0, a.op, a.block);
        Outcome::NotApplicable
    }
}

/// A reader may write only while it holds the block alone: whether it
/// took the lock itself or was granted it as a waiter, beside other
/// readers or not.
#[test]
fn a_reader_may_write_only_while_it_reads_alone() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut d = Dispatcher::new(Box::new(RecordsMayWrite(seen.clone())), 1);
    let read = Access::one(5, Op::Read);
    let write = Access::one(5, Op::Write);
    // Two readers side by side: the first alone, the second shares.
    d.submit(1, read);
    d.submit(2, read);
    let rs = ready(&mut d);
    for r in &rs {
        d.complete(r.flight, r.index, 0);
    }
    // Alone again once both are done.
    d.submit(3, read);
    let rs = ready(&mut d);
    d.complete(rs[0].flight, rs[0].index, 0);
    // Two readers wait behind a writer and are granted the lock together;
    // then one waits alone behind a writer.
    d.submit(4, write);
    d.submit(5, read);
    d.submit(6, read);
    let w = ready(&mut d);
    assert_eq!(w.len(), 1, "the readers wait for the writer");
    d.complete(w[0].flight, w[0].index, 0);
    let rs = ready(&mut d);
    assert_eq!(rs.len(), 2);
    for r in &rs {
        d.complete(r.flight, r.index, 0);
    }
    d.submit(7, write);
    d.submit(8, read);
    let w = ready(&mut d);
    d.complete(w[0].flight, w[0].index, 0);
    let rs = ready(&mut d);
    d.complete(rs[0].flight, rs[0].index, 0);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![true, false, true, true, false, false, true, true]
    );
    assert_eq!(std::iter::from_fn(|| d.pop_acked()).count(), 8);
    assert!(d.is_idle());
}

/// A cache miss's read from home feeds the fill of the cache; a hit's read
/// feeds nothing.
#[test]
fn a_read_feeds_a_copy_only_when_a_later_write_copies_it() {
    let mut d = classic_over_home();
    let read = Access::one(3, Op::Read);
    d.submit(1, read);
    let miss = ready(&mut d);
    assert_eq!((miss.len(), miss[0].io.device), (1, 1), "a miss reads home");
    assert!(d.feeds_copy(miss[0].flight, miss[0].index));
    d.complete(miss[0].flight, miss[0].index, 5);
    let fill = ready(&mut d);
    assert_eq!((fill[0].io.device, fill[0].src_payload), (0, 5));
    assert!(!d.feeds_copy(fill[0].flight, fill[0].index));
    d.complete(fill[0].flight, fill[0].index, 0);
    d.submit(2, read);
    let hit = ready(&mut d);
    assert_eq!(hit[0].io.device, 0, "then it hits");
    assert!(!d.feeds_copy(hit[0].flight, hit[0].index));
}

/// A gathering plan's writes wait for all of its reads, whatever order
/// they complete in, and then come out together in plan order, each with
/// its own read's data; a failed read's write is skipped and the plan
/// still finishes.
#[test]
fn a_gathering_plan_writes_after_its_last_read_in_plan_order() {
    let mut d = Dispatcher::new(Box::new(Direct(true)), 1);
    d.submit_job(Job {
        block: 10,
        blocks: 4,
        kind: 0,
    });
    let reads = ready(&mut d);
    assert_eq!(reads.len(), 4);
    assert!(reads.iter().all(|r| r.io.dir == Op::Read));
    // Complete in reverse order; the read of block 11 fails.
    for r in reads.iter().rev().take(3) {
        if r.io.addr == 11 {
            d.fail(r.flight, r.index);
        } else {
            d.complete(r.flight, r.index, 100 + r.io.addr);
        }
        assert!(
            ready(&mut d).is_empty(),
            "a write left before the last read"
        );
    }
    d.complete(reads[0].flight, reads[0].index, 110);
    let writes = ready(&mut d);
    let got: Vec<(u64, u64)> = writes.iter().map(|w| (w.io.addr, w.src_payload)).collect();
    assert_eq!(got, vec![(10, 110), (12, 112), (13, 113)]);
    assert!(writes
        .iter()
        .all(|w| w.io.dir == Op::Write && w.io.device == 0));
    for w in &writes {
        d.complete(w.flight, w.index, 0);
    }
    assert!(d.is_idle(), "the plan finished");
    assert_eq!(d.stats().failed_ops, 2, "the read and its skipped write");
}

/// Reads or writes device 0 at each block of an access, deciding up to
/// `.0` blocks at once.
struct Ranges(u32);

impl Policy for Ranges {
    fn name(&self) -> &str {
        "ranges"
    }
    fn address_space(&self, _device: usize) -> u64 {
        1 << 20
    }
    fn decide(&mut self, a: Access, ctx: &mut Ctx<'_>) -> Outcome {
        for part in 0..a.blocks {
            ctx.plan
                .client_part(0, a.op, a.block + part as u64, part as u16);
        }
        Outcome::NotApplicable
    }
    fn max_access_blocks(&self) -> u32 {
        self.0
    }
}

fn acked(d: &mut Dispatcher) -> Vec<Acked> {
    std::iter::from_fn(|| d.pop_acked()).collect()
}

/// An earlier range write waiting for one of its blocks holds its place
/// at the others: a later write to any of them waits for it, so no block
/// sees the later write's data overwritten by the earlier one.
#[test]
fn a_later_write_never_overtakes_an_earlier_one_on_any_block() {
    let mut d = Dispatcher::new(Box::new(Ranges(64)), 1);
    d.submit(1, Access::one(3, Op::Read));
    let r = ready(&mut d);
    // A: blocks 0..8, waits at 3. B: blocks 5..7, arrives later.
    d.submit(100, Access::range(0, 8, Op::Write));
    d.submit(200, Access::range(5, 2, Op::Write));
    // C: a read of block 9, outside both, runs at once.
    d.submit(300, Access::one(9, Op::Read));
    let c = ready(&mut d);
    assert_eq!(c.iter().map(|r| r.tag).collect::<Vec<_>>(), vec![300]);
    d.complete(r[0].flight, r[0].index, 0);
    let a = ready(&mut d);
    let got: Vec<(u64, u64)> = a.iter().map(|r| (r.tag, r.io.addr)).collect();
    let want: Vec<(u64, u64)> = (0..8).map(|i| (100 + i, i)).collect();
    assert_eq!(
        got, want,
        "A runs, one operation per block, tagged per block"
    );
    assert!(a.iter().all(|r| r.flight == a[0].flight), "as one plan");
    for w in &a[..7] {
        d.complete(w.flight, w.index, 0);
    }
    assert!(ready(&mut d).is_empty(), "B waits for all of A");
    d.complete(a[7].flight, a[7].index, 0);
    let b = ready(&mut d);
    assert_eq!(b.iter().map(|r| r.tag).collect::<Vec<_>>(), vec![200, 201]);
    assert_eq!(d.stats().lock_waits, 2);
}

/// A range read is acknowledged block by block, all at once, each block
/// with its own read's payload and tag; a block whose read failed is
/// acknowledged as failed, the others not.
#[test]
fn a_range_read_is_acknowledged_per_block_with_each_blocks_data() {
    let mut d = Dispatcher::new(Box::new(Ranges(64)), 1);
    d.track_changes();
    d.submit(40, Access::range(10, 4, Op::Read));
    let rs = ready(&mut d);
    assert_eq!(rs.len(), 4);
    for r in rs.iter().rev() {
        if r.io.part == 2 {
            d.fail(r.flight, r.index);
        } else {
            d.complete(r.flight, r.index, 1000 + r.io.addr);
        }
        if r.io.part != 0 {
            assert!(
                acked(&mut d).is_empty(),
                "acknowledged before its last read"
            );
        }
    }
    let a = acked(&mut d);
    let got: Vec<(u64, u64, u64, bool)> = a
        .iter()
        .map(|a| (a.tag, a.access.block, a.payload, a.failed))
        .collect();
    assert_eq!(
        got,
        vec![
            (40, 10, 1010, false),
            (41, 11, 1011, false),
            (42, 12, 0, true),
            (43, 13, 1013, false),
        ]
    );
    assert!(a.iter().all(|a| a.access.blocks == 1));
    let finished: Vec<(u64, u64, bool)> = std::iter::from_fn(|| d.pop_event())
        .filter_map(|e| match e {
            MapEvent::Finished(f) => Some((f.tag, f.block, f.failed)),
            MapEvent::Decided(_) => None,
        })
        .collect();
    assert_eq!(
        finished,
        vec![
            (40, 10, false),
            (41, 11, false),
            (42, 12, true),
            (43, 13, false)
        ]
    );
    assert!(d.is_idle());
}

/// An access longer than the policy decides at once is decided in pieces,
/// in block order, each one plan; a policy that decides one block at a
/// time gets one decision per block. Either way every block keeps its tag.
#[test]
fn an_access_is_decided_in_pieces_of_at_most_the_policys_limit() {
    for (limit, plans) in [(4, 3), (1, 10), (64, 1)] {
        let mut d = Dispatcher::new(Box::new(Ranges(limit)), 1);
        d.submit(500, Access::range(20, 10, Op::Write));
        let ws = ready(&mut d);
        let tags: Vec<u64> = ws.iter().map(|r| r.tag).collect();
        assert_eq!(tags, (500..510).collect::<Vec<_>>(), "limit {limit}");
        let addrs: Vec<u64> = ws.iter().map(|r| r.io.addr).collect();
        assert_eq!(addrs, (20..30).collect::<Vec<_>>(), "limit {limit}");
        let mut flights: Vec<u32> = ws.iter().map(|r| r.flight).collect();
        flights.dedup();
        assert_eq!(flights.len(), plans, "limit {limit}");
        for w in &ws {
            d.complete(w.flight, w.index, 0);
        }
        let a = acked(&mut d);
        let blocks: Vec<(u64, u64)> = a.iter().map(|a| (a.tag, a.access.block)).collect();
        assert_eq!(
            blocks,
            (0..10).map(|i| (500 + i, 20 + i)).collect::<Vec<_>>()
        );
        assert!(d.is_idle());
    }
}

/// A policy's plan for several blocks must serve each of them.
#[test]
#[should_panic(expected = "planned no client operation for block 1 of a 2-block access")]
fn a_range_plan_that_skips_a_block_is_refused() {
    struct Skips;
    impl Policy for Skips {
        fn name(&self) -> &str {
            "skips"
        }
        fn address_space(&self, _device: usize) -> u64 {
            1 << 20
        }
        fn decide(&mut self, a: Access, ctx: &mut Ctx<'_>) -> Outcome {
            ctx.plan.client(0, a.op, a.block);
            Outcome::NotApplicable
        }
        fn max_access_blocks(&self) -> u32 {
            8
        }
    }
    let mut d = Dispatcher::new(Box::new(Skips), 1);
    d.submit(1, Access::range(0, 2, Op::Read));
}

/// The pieces of a longer client access after the first are marked as
/// continuing it; a one-block access and the first piece are not.
#[test]
fn the_pieces_after_the_first_continue_their_request() {
    use std::sync::{Arc, Mutex};
    struct Logs(Arc<Mutex<Vec<(u64, u32, bool)>>>);
    impl Policy for Logs {
        fn name(&self) -> &str {
            "logs"
        }
        fn address_space(&self, _device: usize) -> u64 {
            1 << 20
        }
        fn decide(&mut self, a: Access, ctx: &mut Ctx<'_>) -> Outcome {
            self.0
                .lock()
                .unwrap()
                .push((a.block, a.blocks, a.continues));
            for part in 0..a.blocks {
                ctx.plan
                    .client_part(0, a.op, a.block + part as u64, part as u16);
            }
            Outcome::NotApplicable
        }
        fn max_access_blocks(&self) -> u32 {
            2
        }
    }
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut d = Dispatcher::new(Box::new(Logs(log.clone())), 1);
    d.submit(100, Access::range(10, 5, Op::Write));
    d.submit(200, Access::one(20, Op::Read));
    let got = log.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![(10, 2, false), (12, 2, true), (14, 1, true), (20, 1, false)]
    );
}
