//! A disk array's timing as a queue ([`ArrayTiming`]): what the engine
//! emulates in front of a file and the simulator runs in virtual time.
//!
//! The array serves one request at a time. Requests that arrive while it
//! is busy wait, and when it frees, the next is chosen as a block layer's
//! elevator would choose it (Linux's mq-deadline, the default scheduler
//! for rotating disks): the waiting request at the lowest address at or
//! after the head, wrapping round to the lowest address (a one-way scan,
//! C-LOOK), unless the oldest waiting read has waited longer than 500 ms
//! or the oldest write longer than 5 s (mq-deadline's `read_expire` and
//! `write_expire`), which is then served first. A request is priced when
//! it starts, from where the heads are then, so the order in which
//! requests happen to arrive while the array is busy does not change what
//! they cost. mq-deadline's preference for reads over writes and its
//! dispatch batches are not modelled.
//!
//! Because a request's completion time is known only when it starts, the
//! queue hands back each started request with a caller's tag (an event,
//! an operation's token): [`ArrayTiming::submit`] starts it at once on an
//! idle array, and [`ArrayTiming::complete`], called when the request in
//! service is done, starts the next.

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
    /// Waiting requests by (offset, arrival number).
    by_offset: std::collections::BTreeMap<(u64, u64), Waiting<T>>,
    /// Waiting reads and writes by (arrival number, offset): the oldest
    /// first.
    arrivals: [std::collections::BTreeSet<(u64, u64)>; 2],
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
            by_offset: Default::default(),
            arrivals: Default::default(),
            arrived: 0,
        })
    }

    /// The array's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Requests waiting (not counting the one in service).
    pub fn waiting(&self) -> usize {
        self.by_offset.len()
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
        if self.busy_until_ns.is_none() {
            debug_assert!(self.by_offset.is_empty(), "an idle array has a queue");
            return Some(self.start(w, now_ns));
        }
        let seq = self.arrived;
        self.arrived += 1;
        self.arrivals[dir_index(dir)].insert((seq, w.offset_bytes));
        self.by_offset.insert((w.offset_bytes, seq), w);
        None
    }

    /// The request in service is done: starts the elevator's next choice,
    /// if any request waits, and returns it.
    pub fn complete(&mut self) -> Option<Started<T>> {
        let done_ns = self
            .busy_until_ns
            .take()
            .expect("a request completes on a busy array");
        let key = self.next_key(done_ns)?;
        let w = self
            .by_offset
            .remove(&key)
            .expect("the chosen request waits");
        let removed = self.arrivals[dir_index(w.dir)].remove(&(key.1, key.0));
        assert!(removed, "a waiting request is listed by arrival");
        let start_ns = done_ns.max(w.arrived_ns);
        Some(self.start(w, start_ns))
    }

    /// The waiting request to serve next when the array frees at
    /// `free_ns`: the oldest expired one, else the next by address from
    /// the head (wrapping round).
    fn next_key(&self, free_ns: u64) -> Option<(u64, u64)> {
        let expired = [(Op::Read, READ_EXPIRE_NS), (Op::Write, WRITE_EXPIRE_NS)]
            .into_iter()
            .filter_map(|(dir, expire_ns)| {
                let &(seq, offset) = self.arrivals[dir_index(dir)].first()?;
                let w = &self.by_offset[&(offset, seq)];
                (free_ns.saturating_sub(w.arrived_ns) > expire_ns).then_some((seq, offset))
            })
            .min();
        if let Some((seq, offset)) = expired {
            return Some((offset, seq));
        }
        let head = self.last.map_or(0, |(_, end)| end);
        self.by_offset
            .range((head, 0)..)
            .next()
            .or_else(|| self.by_offset.iter().next())
            .map(|(&key, _)| key)
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

    /// Requests that wait are served in address order from the head,
    /// wrapping round to the lowest, whatever order they arrived in, so
    /// every arrival order of the same waiting requests costs the same.
    #[test]
    fn waiting_requests_are_served_by_address_from_the_head() {
        let addrs = [9_000_000u64, 100, 5_000_000, 2_000_000, 7_000_000, 300];
        let mut ends = Vec::new();
        for rotate in 0..addrs.len() {
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
                assert_eq!(
                    order,
                    [5_000_000, 7_000_000, 9_000_000, 100, 300, 2_000_000],
                    "{name}, arrivals rotated by {rotate}"
                );
                ends.push((name, served.last().unwrap().1));
            }
        }
        for name in ARRAYS {
            let mut mine = ends.iter().filter(|e| e.0 == name).map(|e| e.1);
            let first = mine.next().unwrap();
            assert!(mine.all(|e| e == first), "{name}: {ends:?}");
        }
    }

    /// A read that the scan keeps passing over (a stream of writes just
    /// ahead of the head) is served once it has waited 500 ms, and a
    /// write once it has waited 5 s.
    #[test]
    fn a_request_passed_over_too_long_is_served_first() {
        for (dir, expire_ns) in [(Op::Read, READ_EXPIRE_NS), (Op::Write, WRITE_EXPIRE_NS)] {
            let mut a = ArrayTiming::named("disk-st6000", 4096).unwrap();
            let mut s = a.submit(0, Op::Write, 4096, 1_000_000, 0).unwrap();
            assert!(a.submit(0, dir, 4096, 10, 1).is_none());
            // Each completion brings a random write ahead of the head.
            let mut next_addr = 1_000_000u64;
            let waited_ns = loop {
                next_addr += 100_000;
                assert!(a
                    .submit(s.done_ns - 1, Op::Write, 4096, next_addr, 2)
                    .is_none());
                s = a.complete().unwrap();
                if s.tag == 1 {
                    break s.done_ns - s.service_ns;
                }
                assert!(s.done_ns < 2 * expire_ns, "{dir:?} starved");
            };
            assert!(waited_ns > expire_ns, "{dir:?} served after {waited_ns} ns");
            assert!(
                waited_ns < expire_ns + 50_000_000,
                "{dir:?} served after {waited_ns} ns"
            );
        }
    }
}
