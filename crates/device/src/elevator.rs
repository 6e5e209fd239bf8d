//! One disk's request queue as Linux's mq-deadline orders it (the default
//! scheduler for rotating disks, and what each member disk of an md array
//! runs): [`Elevator`].
//!
//! When the disk frees, the next request is chosen so:
//! - Requests go out in batches of one direction. A batch continues with
//!   the waiting request of its direction at the lowest address at or
//!   after where the batch's last request started, for up to
//!   [`FIFO_BATCH`] requests.
//! - A new batch prefers reads: writes get a batch when none waits to be
//!   read, or when reads have been chosen over waiting writes
//!   [`WRITES_STARVED`] times.
//! - A new batch starts from the direction's oldest request when that has
//!   waited its expiry ([`READ_EXPIRE_NS`], [`WRITE_EXPIRE_NS`]) or when no
//!   request of the direction lies ahead of its last position; otherwise
//!   it continues from that position.

use std::collections::{BTreeMap, BTreeSet};

use tiermux_core::Op;

/// How long a waiting read may be passed over by the elevator, ns
/// (mq-deadline's `read_expire`, 500 ms).
pub const READ_EXPIRE_NS: u64 = 500_000_000;

/// How long a waiting write may be passed over, ns (mq-deadline's
/// `write_expire`, 5 s).
pub const WRITE_EXPIRE_NS: u64 = 5_000_000_000;

/// Requests dispatched in one batch of one direction (mq-deadline's
/// `fifo_batch`).
pub const FIFO_BATCH: u32 = 16;

/// How many times a new batch may go to reads while writes wait
/// (mq-deadline's `writes_starved`).
pub const WRITES_STARVED: u32 = 2;

/// A request waiting for the disk, as it comes out of the queue.
#[derive(Clone, Debug)]
pub struct Queued<T> {
    /// When it joined the queue, ns.
    pub arrived_ns: u64,
    /// Read or write.
    pub dir: Op,
    /// Where it starts on the disk, bytes.
    pub offset_bytes: u64,
    /// How much it moves, bytes.
    pub bytes: u64,
    /// The caller's tag.
    pub tag: T,
}

/// The requests of one direction waiting for the disk.
#[derive(Clone, Debug)]
struct DirQueue<T> {
    /// By (offset, arrival number).
    by_offset: BTreeMap<(u64, u64), Queued<T>>,
    /// By (arrival number, offset): the oldest first.
    by_arrival: BTreeSet<(u64, u64)>,
    /// Where the last request dispatched in this direction started.
    latest_offset_bytes: u64,
    /// How long a request may wait before it is served first, ns.
    expire_ns: u64,
}

impl<T> DirQueue<T> {
    fn new(expire_ns: u64) -> DirQueue<T> {
        DirQueue {
            by_offset: BTreeMap::new(),
            by_arrival: BTreeSet::new(),
            latest_offset_bytes: 0,
            expire_ns,
        }
    }

    fn insert(&mut self, seq: u64, q: Queued<T>) {
        self.by_arrival.insert((seq, q.offset_bytes));
        self.by_offset.insert((q.offset_bytes, seq), q);
    }

    /// The request at the lowest address at or after the last started.
    fn ahead(&self) -> Option<(u64, u64)> {
        let from = (self.latest_offset_bytes, 0);
        self.by_offset.range(from..).next().map(|(&key, _)| key)
    }

    /// The oldest request, by (offset, arrival number).
    fn oldest(&self) -> Option<(u64, u64)> {
        self.by_arrival.first().map(|&(seq, offset)| (offset, seq))
    }

    /// Whether the oldest request has waited its expiry at `now_ns`.
    fn expired(&self, now_ns: u64) -> bool {
        self.oldest().is_some_and(|key| {
            now_ns.saturating_sub(self.by_offset[&key].arrived_ns) >= self.expire_ns
        })
    }

    /// Removes the request `key` to dispatch it.
    fn take(&mut self, key: (u64, u64)) -> Queued<T> {
        let q = self
            .by_offset
            .remove(&key)
            .expect("the chosen request waits");
        let removed = self.by_arrival.remove(&(key.1, key.0));
        assert!(removed, "a waiting request is listed by arrival");
        self.latest_offset_bytes = q.offset_bytes;
        q
    }
}

/// One disk's queue of waiting requests, ordered as mq-deadline orders
/// them (see the module's text). `T` is the caller's tag for a request.
#[derive(Clone, Debug)]
pub struct Elevator<T> {
    /// Waiting reads and writes.
    queues: [DirQueue<T>; 2],
    /// The current batch's direction and how many it has dispatched.
    batch_dir: Op,
    batching: u32,
    /// How many new batches went to reads while writes waited.
    starved: u32,
    /// Requests inserted so far (their arrival numbers).
    arrived: u64,
}

impl<T> Default for Elevator<T> {
    fn default() -> Self {
        Elevator {
            queues: [
                DirQueue::new(READ_EXPIRE_NS),
                DirQueue::new(WRITE_EXPIRE_NS),
            ],
            // mq-deadline starts as if its last batch wrote.
            batch_dir: Op::Write,
            batching: 0,
            starved: 0,
            arrived: 0,
        }
    }
}

/// The index of `dir` in per-direction arrays.
fn dir_index(dir: Op) -> usize {
    match dir {
        Op::Read => 0,
        Op::Write => 1,
    }
}

impl<T> Elevator<T> {
    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.queues.iter().map(|q| q.by_offset.len()).sum()
    }

    /// Whether no request waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues a request of `bytes` at `offset_bytes` at `now_ns`.
    pub fn insert(&mut self, now_ns: u64, dir: Op, offset_bytes: u64, bytes: u64, tag: T) {
        let seq = self.arrived;
        self.arrived += 1;
        let q = Queued {
            arrived_ns: now_ns,
            dir,
            offset_bytes,
            bytes,
            tag,
        };
        self.queues[dir_index(dir)].insert(seq, q);
    }

    /// Takes the waiting request to serve next at `now_ns` (see the
    /// module's text), or `None` if none waits.
    pub fn dispatch(&mut self, now_ns: u64) -> Option<Queued<T>> {
        let batch = dir_index(self.batch_dir);
        if self.batching < FIFO_BATCH {
            if let Some(key) = self.queues[batch].ahead() {
                self.batching += 1;
                return Some(self.queues[batch].take(key));
            }
        }
        let reads = !self.queues[0].by_offset.is_empty();
        let writes = !self.queues[1].by_offset.is_empty();
        let writes_turn = writes && {
            self.starved += 1;
            self.starved > WRITES_STARVED
        };
        let dir = match (reads && !writes_turn, writes) {
            (true, _) => Op::Read,
            (false, true) => {
                self.starved = 0;
                Op::Write
            }
            (false, false) => return None,
        };
        let q = &mut self.queues[dir_index(dir)];
        let key = match q.ahead() {
            Some(key) if !q.expired(now_ns) => key,
            _ => q.oldest().expect("the chosen direction has a request"),
        };
        self.batch_dir = dir;
        self.batching = 1;
        Some(q.take(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dispatches every waiting request at `now_ns`; returns their tags
    /// in the order served.
    fn drain(e: &mut Elevator<u32>, now_ns: u64) -> Vec<u32> {
        std::iter::from_fn(|| e.dispatch(now_ns).map(|q| q.tag)).collect()
    }

    /// Requests of one direction that wait are served in address order
    /// from the head; when none lies ahead, from the oldest, and again in
    /// address order from there (mq-deadline's `deadline_fifo_request`).
    #[test]
    fn waiting_requests_are_served_by_address_from_the_head() {
        let addrs = [9_000_000u64, 100, 5_000_000, 2_000_000, 7_000_000, 300];
        // After the three ahead of the head, by arrivals rotated by 0..6.
        let tails: [[u64; 3]; 6] = [
            [100, 300, 2_000_000],
            [100, 300, 2_000_000],
            [2_000_000, 300, 100],
            [2_000_000, 300, 100],
            [300, 2_000_000, 100],
            [300, 2_000_000, 100],
        ];
        for (rotate, tail) in tails.iter().enumerate() {
            let mut e = Elevator::default();
            e.insert(0, Op::Write, 4_000_000, 4096, 99);
            assert_eq!(e.dispatch(0).unwrap().tag, 99);
            for k in 0..addrs.len() {
                let i = (k + rotate) % addrs.len();
                e.insert(1, Op::Write, addrs[i], 4096, i as u32);
            }
            assert_eq!(e.len(), addrs.len());
            let order: Vec<u64> = drain(&mut e, 2)
                .iter()
                .map(|&i| addrs[i as usize])
                .collect();
            let mut expected = vec![5_000_000, 7_000_000, 9_000_000];
            expected.extend(tail);
            assert_eq!(order, expected, "arrivals rotated by {rotate}");
            assert!(e.is_empty());
        }
    }

    /// Batches of 16 in one direction; a new batch goes to reads while
    /// writes wait twice, then to writes (mq-deadline's `fifo_batch` 16
    /// and `writes_starved` 2, traced by hand through
    /// `__dd_dispatch_request`).
    #[test]
    fn reads_are_preferred_in_batches_and_writes_get_every_third() {
        let mut e = Elevator::default();
        e.insert(0, Op::Write, 1_000_000, 4096, 0);
        assert_eq!(e.dispatch(0).unwrap().tag, 0);
        // Tags: writes 1..=40, reads 101..=140, each in address order.
        for k in 1..=40u32 {
            let at = 1_000_000 + 8 * k as u64;
            e.insert(1, Op::Write, at, 4096, k);
            e.insert(1, Op::Read, at + 500_000, 4096, 100 + k);
        }
        let mut expected: Vec<u32> = (1..=15).collect();
        expected.extend(101..=132);
        expected.extend(16..=31);
        expected.extend(133..=140);
        expected.extend(32..=40);
        assert_eq!(drain(&mut e, 2), expected);
    }

    /// A request that a batch's scan keeps passing over (a stream of its
    /// own direction just ahead of the head, one new request per 10 ms
    /// dispatch) is served at the first new batch after it has waited
    /// 500 ms (a read) or 5 s (a write).
    #[test]
    fn a_request_passed_over_too_long_is_served_first() {
        let step_ns = 10_000_000;
        for (dir, expire_ns) in [(Op::Read, READ_EXPIRE_NS), (Op::Write, WRITE_EXPIRE_NS)] {
            let mut e = Elevator::default();
            e.insert(0, dir, 1_000_000, 4096, 0);
            assert_eq!(e.dispatch(0).unwrap().tag, 0);
            e.insert(0, dir, 10, 4096, 1);
            let (mut now, mut next_addr) = (0, 1_000_000u64);
            loop {
                next_addr += 100_000;
                e.insert(now, dir, next_addr, 4096, 2);
                now += step_ns;
                if e.dispatch(now).unwrap().tag == 1 {
                    break;
                }
                assert!(now < 2 * expire_ns, "{dir:?} starved");
            }
            assert!(now >= expire_ns, "{dir:?} served after {now} ns");
            let batch_ns = FIFO_BATCH as u64 * step_ns;
            assert!(now < expire_ns + batch_ns, "{dir:?} served after {now} ns");
        }
    }
}
