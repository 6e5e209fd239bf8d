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
    let read = Access {
        block: 7,
        op: Op::Read,
    };
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
fn a_range_job_waits_for_its_blocks_and_writes_wait_for_it() {
    let mut d = Dispatcher::new(Box::new(Direct(false)), 1);
    let write = |block| Access {
        block,
        op: Op::Write,
    };
    // A write in the middle of the range is in flight first.
    d.submit(1, write(700));
    let w1 = ready(&mut d);
    assert_eq!(w1.len(), 1);
    // The 512-block move takes blocks 512..700 and waits at 700.
    d.submit_job(Job {
        block: 512,
        blocks: 512,
        kind: 0,
    });
    assert!(ready(&mut d).is_empty());
    // A write below the move's wait point queues behind it; one above
    // it (not locked yet) and one outside the range run.
    d.submit(2, write(512));
    d.submit(3, write(1023));
    d.submit(4, write(5));
    let w34 = ready(&mut d);
    assert_eq!(w34.iter().map(|r| r.tag).collect::<Vec<_>>(), vec![3, 4]);
    // The middle write finishes: the move now waits at block 1023.
    d.complete(w1[0].flight, w1[0].index, 0);
    assert!(ready(&mut d).is_empty());
    d.complete(w34[1].flight, w34[1].index, 0);
    assert!(ready(&mut d).is_empty());
    // Block 1023 is free: the move holds all 512 locks and starts its
    // reads; the write to block 512 still waits.
    d.complete(w34[0].flight, w34[0].index, 0);
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
    assert_eq!(tags, vec![2]);
    // The move waited at 700 and 1023, the write at 512.
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
    let read = Access {
        block: 5,
        op: Op::Read,
    };
    let write = Access {
        block: 5,
        op: Op::Write,
    };
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
    let read = Access {
        block: 3,
        op: Op::Read,
    };
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
