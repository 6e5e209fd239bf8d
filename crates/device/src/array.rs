//! A disk array's timing as a queue ([`ArrayTiming`]): what the engine
//! emulates in front of a file and the simulator runs in virtual time.
//!
//! The array serves one request at a time. Requests that arrive while it
//! is busy wait, and when it frees, the next is chosen as Linux's
//! mq-deadline (the default scheduler for rotating disks) chooses it:
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
//!
//! A request is priced when it starts, from where the heads are then, so
//! the order in which requests happen to arrive while the array is busy
//! changes what they cost only through the choices above.
//!
//! Because a request's completion time is known only when it starts, the
//! queue hands back each started request with a caller's tag (an event,
//! an operation's token): [`ArrayTiming::submit`] starts it at once on an
//! idle array, and [`ArrayTiming::complete`], called when the request in
//! service is done, starts the next.

use std::collections::{BTreeMap, BTreeSet};

use tiermux_core::Op;

use crate::disk::{st6000nm0034, Disk, Raid5};

/// The arrays a device can name (`array = "..."` in an engine config,
/// `array:NAME` as a simulator device): the Hibachi paper's RAID-5, and
/// one of its disks alone.
pub const ARRAYS: &[&str] = &["raid5-hibachi", "disk-st6000"];

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

/// What serves an array's operations.
#[derive(Clone, Debug)]
enum Mechanics {
    Raid5(Raid5),
    Disk(Disk),
}

impl Mechanics {
    fn serve(&mut self, dir: Op, offset_bytes: u64, bytes: u64) -> f64 {
        match (self, dir) {
            (Mechanics::Raid5(a), Op::Read) => a.read(offset_bytes, bytes),
            (Mechanics::Raid5(a), Op::Write) => a.write(offset_bytes, bytes),
            (Mechanics::Disk(d), _) => d.serve(offset_bytes, bytes, dir == Op::Write),
        }
    }

    /// An operation that continues the one before it: the transfer only.
    fn extend(&mut self, dir: Op, bytes: u64) -> f64 {
        match self {
            Mechanics::Raid5(a) => a.extend(bytes, dir == Op::Write),
            Mechanics::Disk(d) => {
                // The head is where the last operation ended.
                let at = d.head_bytes();
                d.serve(at, bytes, dir == Op::Write)
            }
        }
    }
}

/// A request waiting for the array.
#[derive(Clone, Debug)]
struct Waiting<T> {
    arrived_ns: u64,
    dir: Op,
    offset_bytes: u64,
    bytes: u64,
    tag: T,
}

/// A request the array has just started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started<T> {
    /// When it completes, ns.
    pub done_ns: u64,
    /// How long the array works on it, ns.
    pub service_ns: u64,
    /// The tag it was submitted with.
    pub tag: T,
}

/// The requests of one direction waiting for the array.
#[derive(Clone, Debug)]
struct DirQueue<T> {
    /// By (offset, arrival number).
    by_offset: BTreeMap<(u64, u64), Waiting<T>>,
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

    fn insert(&mut self, seq: u64, w: Waiting<T>) {
        self.by_arrival.insert((seq, w.offset_bytes));
        self.by_offset.insert((w.offset_bytes, seq), w);
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
    fn take(&mut self, key: (u64, u64)) -> Waiting<T> {
        let w = self
            .by_offset
            .remove(&key)
            .expect("the chosen request waits");
        let removed = self.by_arrival.remove(&(key.1, key.0));
        assert!(removed, "a waiting request is listed by arrival");
        self.latest_offset_bytes = w.offset_bytes;
        w
    }
}

/// A disk array's timing ([`Raid5`], or one [`Disk`]): requests are served
/// one at a time, in the elevator's order (see the module's text), each
/// taking what the array's head positions make it take when it starts. A
/// request that waited and continues the one served before it in the same
/// direction costs its transfer only (a block layer merges adjacent
/// requests while they wait: a volume issues a client request block by
/// block), and a request of several blocks costs the same as its blocks
/// submitted one after another, so that a driver's merging of requests
/// does not change the array's timing. `T` is the caller's tag for a
/// request.
#[derive(Clone, Debug)]
pub struct ArrayTiming<T> {
    array: Mechanics,
    name: String,
    block_bytes: u64,
    /// When the request in service completes; `None` when idle.
    busy_until_ns: Option<u64>,
    /// The last request started: direction and the byte after it.
    last: Option<(Op, u64)>,
    /// Waiting reads and writes.
    queues: [DirQueue<T>; 2],
    /// The current batch's direction and how many it has dispatched.
    batch_dir: Op,
    batching: u32,
    /// How many new batches went to reads while writes waited.
    starved: u32,
    arrived: u64,
}

/// The index of `dir` in per-direction arrays.
fn dir_index(dir: Op) -> usize {
    match dir {
        Op::Read => 0,
        Op::Write => 1,
    }
}

impl<T> ArrayTiming<T> {
    /// The array `name` (see [`ARRAYS`]) addressed in blocks of
    /// `block_bytes`, or `None` for an unknown name.
    pub fn named(name: &str, block_bytes: u64) -> Option<ArrayTiming<T>> {
        assert!(block_bytes > 0, "an array addressed in empty blocks");
        let array = match name {
            "raid5-hibachi" => Mechanics::Raid5(Raid5::hibachi_paper()),
            "disk-st6000" => Mechanics::Disk(Disk::new(st6000nm0034())),
            _ => return None,
        };
        Some(ArrayTiming {
            array,
            name: name.to_string(),
            block_bytes,
            busy_until_ns: None,
            last: None,
            queues: [
                DirQueue::new(READ_EXPIRE_NS),
                DirQueue::new(WRITE_EXPIRE_NS),
            ],
            // mq-deadline starts as if its last batch wrote.
            batch_dir: Op::Write,
            batching: 0,
            starved: 0,
            arrived: 0,
        })
    }

    /// The array's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Requests waiting (not counting the one in service).
    pub fn waiting(&self) -> usize {
        self.queues.iter().map(|q| q.by_offset.len()).sum()
    }

    /// Submits an operation of `bytes` at block `addr` at `now_ns`,
    /// tagged `tag`. On an idle array it starts at once and is returned;
    /// otherwise it waits, and a later [`ArrayTiming::complete`] starts
    /// it.
    pub fn submit(
        &mut self,
        now_ns: u64,
        dir: Op,
        bytes: u64,
        addr: u64,
        tag: T,
    ) -> Option<Started<T>> {
        let w = Waiting {
            arrived_ns: now_ns,
            dir,
            offset_bytes: addr * self.block_bytes,
            bytes: bytes.max(1),
            tag,
        };
        let seq = self.arrived;
        self.arrived += 1;
        self.queues[dir_index(dir)].insert(seq, w);
        if self.busy_until_ns.is_some() {
            return None;
        }
        assert_eq!(self.waiting(), 1, "an idle array has a queue");
        let w = self.dispatch(now_ns).expect("a request waits");
        Some(self.start(w, now_ns))
    }

    /// The request in service is done: starts the elevator's next choice,
    /// if any request waits, and returns it.
    pub fn complete(&mut self) -> Option<Started<T>> {
        let done_ns = self
            .busy_until_ns
            .take()
            .expect("a request completes on a busy array");
        let w = self.dispatch(done_ns)?;
        let start_ns = done_ns.max(w.arrived_ns);
        Some(self.start(w, start_ns))
    }

    /// Takes the waiting request to serve next at `now_ns` (see the
    /// module's text), or `None` if none waits.
    fn dispatch(&mut self, now_ns: u64) -> Option<Waiting<T>> {
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

    /// Starts `w` at `start_ns` and prices it from where the heads are.
    fn start(&mut self, w: Waiting<T>, start_ns: u64) -> Started<T> {
        let (dir, offset, bytes) = (w.dir, w.offset_bytes, w.bytes);
        let ms = if self.last == Some((dir, offset)) && w.arrived_ns < start_ns {
            self.array.extend(dir, bytes)
        } else if bytes > self.block_bytes {
            // A request of several blocks (a driver merged them) costs
            // what its blocks cost one by one: the first is served, the
            // rest continue it.
            self.array.serve(dir, offset, self.block_bytes)
                + self.array.extend(dir, bytes - self.block_bytes)
        } else {
            self.array.serve(dir, offset, bytes)
        };
        self.last = Some((dir, offset + bytes));
        let done_ns = (start_ns + (ms * 1e6) as u64).max(w.arrived_ns + 1);
        self.busy_until_ns = Some(done_ns);
        Started {
            done_ns,
            service_ns: done_ns - start_ns,
            tag: w.tag,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Completes every request of `a` in turn; returns (tag, done) in
    /// the order served.
    fn drain(a: &mut ArrayTiming<u32>, first: Started<u32>) -> Vec<(u32, u64)> {
        let mut served = vec![(first.tag, first.done_ns)];
        while let Some(s) = a.complete() {
            served.push((s.tag, s.done_ns));
        }
        served
    }

    /// One request at a time: a second random write waits for the first
    /// and starts when it completes; blocks that continue a waiting write
    /// add their transfer only; once the array is idle they do not.
    #[test]
    fn the_array_serves_one_operation_at_a_time() {
        let mut a = ArrayTiming::named("raid5-hibachi", 4096).unwrap();
        let first = a.submit(0, Op::Write, 4096, 1_000_000, 1).unwrap();
        assert!(a.submit(0, Op::Write, 4096, 200_000_000, 2).is_none());
        assert_eq!(a.waiting(), 1);
        let second = a.complete().unwrap();
        assert_eq!(second.tag, 2);
        assert!(first.done_ns > 4_000_000, "{first:?}");
        assert_eq!(second.done_ns, first.done_ns + second.service_ns);
        assert!(second.service_ns > 4_000_000, "{second:?}");
        assert!(a.complete().is_none());
        // A whole stripe written on an idle array starts at once.
        let t = second.done_ns + 1;
        let stripe = a.submit(t, Op::Write, 5 * (512 << 10), 0, 3).unwrap();
        assert_eq!(stripe.done_ns, t + stripe.service_ns);
        // Blocks that continue it while it is in service add their
        // transfer only.
        assert!(a.submit(t + 1, Op::Write, 4096, 640, 4).is_none());
        let next = a.complete().unwrap();
        let transfer_ns = (2.0 * 4096.0 / 226e6 * 1e9) as u64;
        assert!(next.service_ns <= transfer_ns + 1, "{next:?}");
        assert!(a.complete().is_none());
        let apart = a.submit(next.done_ns + 1, Op::Write, 4096, 641, 5).unwrap();
        assert!(
            apart.service_ns > 1_000_000,
            "not merged once the array is idle: {apart:?}"
        );
        assert!(ArrayTiming::<u32>::named("raid6", 4096).is_none());
    }

    /// One disk: a random write seeks and waits for the platter (over 4
    /// ms: half a 7,200 rpm rotation is 4.17 ms); the next block, waiting
    /// behind it, only transfers (4 KiB at 226 MB/s, 18 µs); once the disk
    /// is idle the following block still starts where the head is.
    #[test]
    fn one_disk_seeks_once_per_run() {
        let mut d = ArrayTiming::named("disk-st6000", 4096).unwrap();
        let first = d.submit(0, Op::Write, 4096, 1_000_000, 0).unwrap();
        assert!(first.done_ns > 4_170_000, "{first:?}");
        assert!(d.submit(0, Op::Write, 4096, 1_000_001, 1).is_none());
        let second = d.complete().unwrap();
        let transfer_ns = (4096.0 / 226e6 * 1e9) as u64;
        assert!(second.service_ns <= transfer_ns + 1, "{second:?}");
        assert!(d.complete().is_none());
        let at = second.done_ns + 5;
        let third = d.submit(at, Op::Write, 4096, 1_000_002, 2).unwrap();
        assert!(third.service_ns <= transfer_ns + 1, "{third:?}");
        assert!(d.complete().is_none());
        let far = d.submit(third.done_ns + 1, Op::Read, 4096, 5, 3).unwrap();
        assert!(far.service_ns > 4_000_000, "{far:?}");
    }

    /// A request of 64 blocks ends when the same blocks submitted one
    /// after another end, on the RAID-5 and on one disk, reading and
    /// writing: merging requests does not change the array's timing.
    #[test]
    fn a_request_of_several_blocks_costs_its_blocks() {
        for name in ARRAYS {
            for dir in [Op::Read, Op::Write] {
                let mut whole = ArrayTiming::named(name, 4096).unwrap();
                let mut blocks = ArrayTiming::named(name, 4096).unwrap();
                // A first request elsewhere, so that both start busy.
                let w0 = whole.submit(0, dir, 4096, 77_777, 0).unwrap();
                let b0 = blocks.submit(0, dir, 4096, 77_777, 0).unwrap();
                assert!(whole.submit(10, dir, 64 * 4096, 1_000, 1).is_none());
                for k in 0..64 {
                    assert!(blocks.submit(10, dir, 4096, 1_000 + k, 1).is_none());
                }
                let merged = drain(&mut whole, w0).last().unwrap().1;
                let last = drain(&mut blocks, b0).last().unwrap().1;
                let gap = merged.abs_diff(last);
                assert!(gap <= 64, "{name} {dir:?}: {merged} against {last}");
                assert!(merged > 1_000_000, "{name} {dir:?}: {merged}");
            }
        }
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
            for name in ARRAYS {
                let mut a = ArrayTiming::named(name, 4096).unwrap();
                let first = a.submit(0, Op::Write, 4096, 4_000_000, 99).unwrap();
                for k in 0..addrs.len() {
                    let i = (k + rotate) % addrs.len();
                    assert!(a.submit(1, Op::Write, 4096, addrs[i], i as u32).is_none());
                }
                let served = drain(&mut a, first);
                let order: Vec<u64> = served[1..]
                    .iter()
                    .map(|&(i, _)| addrs[i as usize])
                    .collect();
                let mut expected = vec![5_000_000, 7_000_000, 9_000_000];
                expected.extend(tail);
                assert_eq!(order, expected, "{name}, arrivals rotated by {rotate}");
            }
        }
    }

    /// Batches of 16 in one direction; a new batch goes to reads while
    /// writes wait twice, then to writes (mq-deadline's `fifo_batch` 16
    /// and `writes_starved` 2, traced by hand through
    /// `__dd_dispatch_request`).
    #[test]
    fn reads_are_preferred_in_batches_and_writes_get_every_third() {
        for name in ARRAYS {
            let mut a = ArrayTiming::named(name, 4096).unwrap();
            let first = a.submit(0, Op::Write, 4096, 1_000_000, 0).unwrap();
            // Tags: writes 1..=40, reads 101..=140, each in address order.
            for k in 1..=40u32 {
                let at = 1_000_000 + 8 * k as u64;
                assert!(a.submit(1, Op::Write, 4096, at, k).is_none());
                assert!(a.submit(1, Op::Read, 4096, at + 500_000, 100 + k).is_none());
            }
            let order: Vec<u32> = drain(&mut a, first).iter().map(|s| s.0).collect();
            let mut expected: Vec<u32> = (0..=15).collect();
            expected.extend(101..=132);
            expected.extend(16..=31);
            expected.extend(133..=140);
            expected.extend(32..=40);
            assert_eq!(order, expected, "{name}");
        }
    }

    /// A request that a batch's scan keeps passing over (a stream of its
    /// own direction just ahead of the head) is served at the first new
    /// batch after it has waited 500 ms (a read) or 5 s (a write).
    #[test]
    fn a_request_passed_over_too_long_is_served_first() {
        for (dir, expire_ns) in [(Op::Read, READ_EXPIRE_NS), (Op::Write, WRITE_EXPIRE_NS)] {
            let mut a = ArrayTiming::named("disk-st6000", 4096).unwrap();
            let mut s = a.submit(0, dir, 4096, 1_000_000, 0).unwrap();
            assert!(a.submit(0, dir, 4096, 10, 1).is_none());
            // Each completion brings a random request ahead of the head.
            let mut next_addr = 1_000_000u64;
            let mut longest_ns = s.service_ns;
            let waited_ns = loop {
                next_addr += 100_000;
                assert!(a.submit(s.done_ns - 1, dir, 4096, next_addr, 2).is_none());
                s = a.complete().unwrap();
                if s.tag == 1 {
                    break s.done_ns - s.service_ns;
                }
                longest_ns = longest_ns.max(s.service_ns);
                assert!(s.done_ns < 2 * expire_ns, "{dir:?} starved");
            };
            assert!(
                waited_ns >= expire_ns,
                "{dir:?} served after {waited_ns} ns"
            );
            let batch_ns = FIFO_BATCH as u64 * longest_ns;
            assert!(
                waited_ns < expire_ns + batch_ns,
                "{dir:?} served after {waited_ns} ns"
            );
        }
    }
}
