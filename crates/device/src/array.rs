//! A disk array's timing as queues ([`ArrayTiming`]): what the engine
//! emulates in front of a file and the simulator runs in virtual time.
//!
//! Each member disk serves one operation at a time from a queue of its
//! own, ordered as mq-deadline orders it ([`crate::elevator`]), as Linux
//! queues each member of an md array. A client request becomes member
//! operations ([`Raid5Layout`]): a read, the chunks it covers; a write,
//! the reads its parity needs and then the writes. Members work at once,
//! so requests on different disks overlap, and a request completes when
//! its last member operation does. An operation is priced when it starts,
//! from where its disk's head is then.
//!
//! Writes that continue one another (a volume issues a client request
//! block by block) are what md's stripe cache and the block layer's
//! merging make them:
//! - a write that continues a write still waiting for its parity reads
//!   joins it: the two complete together, and only the first read;
//! - a write that continues one still in flight whose writes have started
//!   reads nothing (the stripe cache holds the data and parity);
//! - a request of several blocks reads what its first block alone would,
//!   so that it costs what its blocks submitted one after another cost,
//!   and a driver's merging does not change the array's timing.
//!
//! Time: a request's completion time is known once the last of its member
//! operations has started. The caller submits requests in time order and
//! advances the array to each time a member operation completes
//! ([`ArrayTiming::next_event_ns`], [`ArrayTiming::advance`]); each call
//! hands back, with the caller's tag, the requests whose completion time
//! became known.

use tiermux_core::Op;

use crate::disk::{st6000nm0034, Disk, DiskOp, Raid5Layout, HIBACHI_CHUNK_BYTES};
use crate::elevator::Elevator;

/// The arrays a device can name by a fixed name (`array = "..."` in an
/// engine config, `array:NAME` as a simulator device): the Hibachi
/// paper's RAID-5, and one of its disks alone. Any other RAID-5 of those
/// disks is named by its shape ([`RAID5_SHAPE`]).
pub const ARRAYS: &[&str] = &["raid5-hibachi", "disk-st6000"];

/// How a RAID-5 of ST6000NM0034 disks is named by its shape:
/// `raid5-<disks>x<chunk>`, the chunk in KiB (`k`) or MiB (`m`), as
/// `raid5-4x64k`. `raid5-hibachi` is `raid5-6x512k`.
pub const RAID5_SHAPE: &str = "raid5-<disks>x<chunk>, as raid5-4x64k";

/// Member disks a RAID-5 may have (md allows more; past this, model
/// runs slow down for no case anyone has asked about).
pub const RAID5_DISKS: std::ops::RangeInclusive<usize> = 3..=32;

/// Chunk sizes a RAID-5 may have, bytes: powers of two from a page to
/// 64 MiB, as md accepts.
pub const RAID5_CHUNK_BYTES: std::ops::RangeInclusive<u64> = 4096..=(64 << 20);

/// The layout an array name gives: a RAID-5's, or `None` for one disk;
/// an error names what is wrong with the name.
pub fn parse_array(name: &str) -> Result<Option<Raid5Layout>, String> {
    match name {
        "raid5-hibachi" => return Ok(Some(Raid5Layout::new(6, HIBACHI_CHUNK_BYTES))),
        "disk-st6000" => return Ok(None),
        _ => {}
    }
    let unknown = || {
        format!(
            "unknown array '{name}' (known: {}, or {RAID5_SHAPE})",
            ARRAYS.join(", ")
        )
    };
    let shape = name.strip_prefix("raid5-").ok_or_else(unknown)?;
    let (disks, chunk) = shape.split_once('x').ok_or_else(unknown)?;
    let disks: usize = disks.parse().map_err(|_| unknown())?;
    let (number, unit) = chunk.split_at(chunk.len().saturating_sub(1));
    let shift = match unit {
        "k" | "K" => 10,
        "m" | "M" => 20,
        _ => return Err(unknown()),
    };
    let chunk_bytes = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(unknown)?;
    if !RAID5_DISKS.contains(&disks) {
        return Err(format!(
            "array '{name}': a RAID-5 here has {} to {} disks",
            RAID5_DISKS.start(),
            RAID5_DISKS.end()
        ));
    }
    if !chunk_bytes.is_power_of_two() || !RAID5_CHUNK_BYTES.contains(&chunk_bytes) {
        return Err(format!(
            "array '{name}': the chunk is a power of two from 4k to 64m"
        ));
    }
    Ok(Some(Raid5Layout::new(disks, chunk_bytes)))
}

/// A request whose completion time is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started<T> {
    /// When it completes, ns.
    pub done_ns: u64,
    /// The tag it was submitted with.
    pub tag: T,
}

/// A member operation in a disk's queue or in service: its request, and
/// whether it is of the request's last phase (whose start fixes the
/// request's completion) or one of the reads a write waits for.
#[derive(Clone, Copy, Debug)]
struct OpRef {
    req: u32,
    last_phase: bool,
}

/// One member disk: its head, its queue, and the operation it serves
/// (when that completes, ns).
#[derive(Clone, Debug)]
struct Member {
    disk: Disk,
    queue: Elevator<OpRef>,
    serving: Option<(u64, OpRef)>,
}

/// A client request in the array.
#[derive(Clone, Debug)]
struct Req<T> {
    tag: T,
    /// Tags of writes that joined it.
    joined: Vec<T>,
    start_bytes: u64,
    /// Member writes waiting for the reads.
    writes: Vec<DiskOp>,
    /// Reads not yet complete.
    reads_left: u32,
    /// Last-phase operations not yet started.
    unstarted: u32,
    /// When its last-phase operations started so far complete, ns.
    done_ns: u64,
}

/// Where the last write ended, and whether it is still in the array (its
/// slot) or completes at a known time.
#[derive(Clone, Copy, Debug)]
enum Last {
    Pending { end_bytes: u64, req: u32 },
    Known { end_bytes: u64, done_ns: u64 },
}

/// A disk array's timing (a RAID-5 of disks, or one disk): see the
/// module's text. `T` is the caller's tag for a request.
#[derive(Clone, Debug)]
pub struct ArrayTiming<T> {
    name: String,
    layout: Option<Raid5Layout>,
    block_bytes: u64,
    members: Vec<Member>,
    reqs: Vec<Option<Req<T>>>,
    free: Vec<u32>,
    /// The last write (reads continue one another by the disks' heads
    /// alone).
    last_write: Option<Last>,
    /// Time of the latest call, ns: calls come in time order.
    clock_ns: u64,
    /// Time at least one member was busy, not yet taken, ns.
    busy_ns: u64,
    /// When the members started so far are all done, ns.
    busy_until_ns: u64,
    /// Scratch space for planning.
    scratch: Vec<DiskOp>,
}

impl<T> ArrayTiming<T> {
    /// The array `name` (see [`ARRAYS`] and [`RAID5_SHAPE`]) addressed
    /// in blocks of `block_bytes`; an error names what is wrong with the
    /// name.
    pub fn named(name: &str, block_bytes: u64) -> Result<ArrayTiming<T>, String> {
        assert!(block_bytes > 0, "an array addressed in empty blocks");
        let layout = parse_array(name)?;
        let disks = layout.map_or(1, |l| l.disks);
        let member = || Member {
            disk: Disk::new(st6000nm0034()),
            queue: Elevator::default(),
            serving: None,
        };
        Ok(ArrayTiming {
            name: name.to_string(),
            layout,
            block_bytes,
            members: (0..disks).map(|_| member()).collect(),
            reqs: Vec::new(),
            free: Vec::new(),
            last_write: None,
            clock_ns: 0,
            busy_ns: 0,
            busy_until_ns: 0,
            scratch: Vec::new(),
        })
    }

    /// The array's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Requests whose completion time is not yet known.
    pub fn in_flight(&self) -> usize {
        self.reqs.len() - self.free.len()
    }

    /// When the next member operation completes, ns: the time to
    /// [`ArrayTiming::advance`] to.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.members
            .iter()
            .filter_map(|m| m.serving.map(|(done, _)| done))
            .min()
    }

    /// Time at least one member disk was busy since the last call, ns.
    pub fn take_busy_ns(&mut self) -> u64 {
        std::mem::take(&mut self.busy_ns)
    }

    /// Submits an operation of `bytes` at block `addr` at `now_ns`,
    /// tagged `tag`. Appends to `out` the requests whose completion time
    /// became known (this one among them if its member operations started
    /// at once).
    pub fn submit(
        &mut self,
        now_ns: u64,
        dir: Op,
        bytes: u64,
        addr: u64,
        tag: T,
        out: &mut Vec<Started<T>>,
    ) {
        self.advance(now_ns, out);
        let (offset, bytes) = (addr * self.block_bytes, bytes.max(1));
        let end_bytes = offset + bytes;
        if dir == Op::Write {
            if let Some(req) = self.try_join(offset, end_bytes) {
                let r = self.reqs[req as usize].as_mut().expect("joined");
                r.joined.push(tag);
                return;
            }
        }
        let slot = self.alloc(Req {
            tag,
            joined: Vec::new(),
            start_bytes: offset,
            writes: Vec::new(),
            reads_left: 0,
            unstarted: 0,
            done_ns: now_ns,
        });
        let cached = dir == Op::Write && self.continues_write(offset, now_ns);
        if dir == Op::Write {
            self.last_write = Some(Last::Pending {
                end_bytes,
                req: slot,
            });
        }
        self.plan(slot, dir, offset, bytes, cached, now_ns);
        self.start_idle(now_ns, out);
    }

    /// Completes every member operation due by `now_ns`, in time order,
    /// starting what waits behind each; appends to `out` the requests
    /// whose completion time became known.
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Started<T>>) {
        assert!(now_ns >= self.clock_ns, "the array's calls go back in time");
        self.clock_ns = now_ns;
        loop {
            let due = self
                .members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.serving.map(|(done, _)| (done, i)))
                .min();
            let Some((t, i)) = due.filter(|&(t, _)| t <= now_ns) else {
                return;
            };
            let (_, op) = self.members[i].serving.take().expect("due");
            if !op.last_phase {
                self.read_done(op.req, t);
            }
            self.start_idle(t, out);
        }
    }

    /// Joins a write of `[offset, end_bytes)` to the last write if that
    /// ends at `offset` and still waits for its reads: its writes are
    /// planned again over both. Returns the joined request's slot.
    fn try_join(&mut self, offset: u64, end_bytes: u64) -> Option<u32> {
        let Some(Last::Pending {
            end_bytes: end,
            req,
        }) = self.last_write
        else {
            return None;
        };
        let r = self.reqs[req as usize].as_mut().expect("pending");
        if end != offset || r.reads_left == 0 {
            return None;
        }
        let start = r.start_bytes;
        let mut writes = std::mem::take(&mut r.writes);
        writes.clear();
        self.plan_writes(start, end_bytes - start, &mut writes);
        self.reqs[req as usize].as_mut().expect("pending").writes = writes;
        self.last_write = Some(Last::Pending { end_bytes, req });
        Some(req)
    }

    /// Whether a write at `offset` continues the last write while that is
    /// in the array (md's stripe cache holds its stripe).
    fn continues_write(&self, offset: u64, now_ns: u64) -> bool {
        match self.last_write {
            Some(Last::Pending { end_bytes, .. }) => end_bytes == offset,
            Some(Last::Known { end_bytes, done_ns }) => end_bytes == offset && done_ns > now_ns,
            None => false,
        }
    }

    fn alloc(&mut self, req: Req<T>) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                assert!(self.reqs[slot as usize].is_none(), "a free slot is empty");
                self.reqs[slot as usize] = Some(req);
                slot
            }
            None => {
                self.reqs.push(Some(req));
                (self.reqs.len() - 1) as u32
            }
        }
    }

    /// Appends the member writes of a client write to `writes`.
    fn plan_writes(&mut self, offset: u64, bytes: u64, writes: &mut Vec<DiskOp>) {
        match self.layout {
            Some(layout) => {
                self.scratch.clear();
                layout.plan_write(offset, bytes, &mut self.scratch, writes);
            }
            None => writes.push(DiskOp {
                disk: 0,
                offset_bytes: offset,
                bytes,
                write: true,
            }),
        }
    }

    /// Queues request `slot`'s member operations: a read's, or a write's
    /// reads (none when `cached`, or on one disk) with its writes to
    /// follow.
    fn plan(&mut self, slot: u32, dir: Op, offset: u64, bytes: u64, cached: bool, now_ns: u64) {
        let mut ops = Vec::new();
        if dir == Op::Read {
            match self.layout {
                Some(layout) => layout.plan_read(offset, bytes, &mut ops),
                None => ops.push(DiskOp {
                    disk: 0,
                    offset_bytes: offset,
                    bytes,
                    write: false,
                }),
            }
            return self.queue_last_phase(slot, ops, now_ns);
        }
        let mut writes = Vec::new();
        self.plan_writes(offset, bytes, &mut writes);
        if let (Some(layout), false) = (self.layout, cached) {
            let first = bytes.min(self.block_bytes);
            self.scratch.clear();
            layout.plan_write(offset, first, &mut ops, &mut self.scratch);
        }
        if ops.is_empty() {
            return self.queue_last_phase(slot, writes, now_ns);
        }
        let r = self.reqs[slot as usize].as_mut().expect("planned");
        r.writes = writes;
        r.reads_left = ops.len() as u32;
        for op in ops {
            let tag = OpRef {
                req: slot,
                last_phase: false,
            };
            self.members[op.disk]
                .queue
                .insert(now_ns, Op::Read, op.offset_bytes, op.bytes, tag);
        }
    }

    /// Queues `ops`, the last phase of request `slot`.
    fn queue_last_phase(&mut self, slot: u32, ops: Vec<DiskOp>, now_ns: u64) {
        assert!(!ops.is_empty(), "a request moves something");
        let r = self.reqs[slot as usize].as_mut().expect("planned");
        r.unstarted = ops.len() as u32;
        r.done_ns = now_ns;
        for op in ops {
            let dir = if op.write { Op::Write } else { Op::Read };
            let tag = OpRef {
                req: slot,
                last_phase: true,
            };
            self.members[op.disk]
                .queue
                .insert(now_ns, dir, op.offset_bytes, op.bytes, tag);
        }
    }

    /// One of request `slot`'s reads completed at `t`; after the last, its
    /// writes are queued.
    fn read_done(&mut self, slot: u32, t: u64) {
        let r = self.reqs[slot as usize].as_mut().expect("a read's request");
        assert!(
            r.reads_left > 0,
            "request {slot} completed more reads than it has"
        );
        r.reads_left -= 1;
        if r.reads_left == 0 {
            let writes = std::mem::take(&mut r.writes);
            self.queue_last_phase(slot, writes, t);
        }
    }

    /// Starts, at `t`, the next operation of every idle member whose
    /// queue has one.
    fn start_idle(&mut self, t: u64, out: &mut Vec<Started<T>>) {
        for i in 0..self.members.len() {
            if self.members[i].serving.is_some() {
                continue;
            }
            let m = &mut self.members[i];
            let Some(q) = m.queue.dispatch(t) else {
                continue;
            };
            assert!(q.arrived_ns <= t, "an operation starts before it is queued");
            let ms = m.disk.serve(q.offset_bytes, q.bytes, q.dir == Op::Write);
            let done_ns = t + ((ms * 1e6) as u64).max(1);
            m.serving = Some((done_ns, q.tag));
            self.busy_ns += done_ns - t.max(self.busy_until_ns).min(done_ns);
            self.busy_until_ns = self.busy_until_ns.max(done_ns);
            if q.tag.last_phase {
                self.last_phase_started(q.tag.req, done_ns, out);
            }
        }
    }

    /// One of request `slot`'s last-phase operations started and
    /// completes at `done_ns`; after the last, the request's completion
    /// time is known and handed back.
    fn last_phase_started(&mut self, slot: u32, done_ns: u64, out: &mut Vec<Started<T>>) {
        let r = self.reqs[slot as usize]
            .as_mut()
            .expect("a started request");
        r.unstarted -= 1;
        r.done_ns = r.done_ns.max(done_ns);
        if r.unstarted > 0 {
            return;
        }
        let r = self.reqs[slot as usize].take().expect("a started request");
        self.free.push(slot);
        if let Some(Last::Pending { end_bytes, req }) = self.last_write {
            if req == slot {
                self.last_write = Some(Last::Known {
                    end_bytes,
                    done_ns: r.done_ns,
                });
            }
        }
        out.push(Started {
            done_ns: r.done_ns,
            tag: r.tag,
        });
        out.extend(r.joined.into_iter().map(|tag| Started {
            done_ns: r.done_ns,
            tag,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::Raid5;

    /// Submits `(now_ns, dir, blocks, addr)` requests tagged by their
    /// index, then advances until all complete; returns each request's
    /// completion time by tag.
    fn run(name: &str, reqs: &[(u64, Op, u64, u64)]) -> Vec<u64> {
        let mut a = ArrayTiming::named(name, 4096).unwrap();
        let mut out = Vec::new();
        for (i, &(now, dir, blocks, addr)) in reqs.iter().enumerate() {
            a.submit(now, dir, blocks * 4096, addr, i, &mut out);
        }
        while let Some(t) = a.next_event_ns() {
            a.advance(t, &mut out);
        }
        assert_eq!(a.in_flight(), 0, "{name}: every request completes");
        let mut done = vec![u64::MAX; reqs.len()];
        for s in out {
            assert_eq!(done[s.tag], u64::MAX, "{name}: request {} twice", s.tag);
            done[s.tag] = s.done_ns;
        }
        for (i, d) in done.iter().enumerate() {
            assert!(
                *d != u64::MAX && *d > reqs[i].0,
                "{name}: request {i} at {d}"
            );
        }
        done
    }

    /// Array names: the fixed ones, RAID-5 shapes, and names that say
    /// what is wrong with them; `raid5-6x512k` is the Hibachi paper's
    /// array under another name and times the same.
    #[test]
    fn arrays_are_named_by_shape() {
        assert_eq!(
            parse_array("raid5-4x64k"),
            Ok(Some(Raid5Layout::new(4, 64 << 10)))
        );
        assert_eq!(
            parse_array("raid5-32x1m"),
            Ok(Some(Raid5Layout::new(32, 1 << 20)))
        );
        assert_eq!(parse_array("disk-st6000"), Ok(None));
        for (bad, says) in [
            ("raid6", "unknown array 'raid6' (known: raid5-hibachi, disk-st6000, or raid5-<disks>x<chunk>"),
            ("raid5-4x64", "unknown array"),
            ("raid5-x64k", "unknown array"),
            ("raid5-4x", "unknown array"),
            ("raid5-4x99999999999999999999k", "unknown array"),
            ("raid5-2x64k", "3 to 32 disks"),
            ("raid5-33x64k", "3 to 32 disks"),
            ("raid5-4x48k", "power of two"),
            ("raid5-4x2k", "power of two"),
            ("raid5-4x128m", "power of two"),
        ] {
            let e = parse_array(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let mut rng = 5u64;
        let reqs: Vec<_> = (0..400)
            .map(|k| {
                let dir = if k % 3 == 0 { Op::Read } else { Op::Write };
                (
                    k * 1_000_000,
                    dir,
                    1 + lcg(&mut rng) % 32,
                    lcg(&mut rng) % (1 << 22),
                )
            })
            .collect();
        assert_eq!(run("raid5-6x512k", &reqs), run("raid5-hibachi", &reqs));
        let four = run("raid5-4x64k", &reqs);
        assert_ne!(four, run("raid5-hibachi", &reqs));
    }

    /// Randomized over shapes and block sizes: chunks smaller and larger
    /// than a block, requests of up to 64 blocks. Every request completes
    /// once, after it was submitted, and the array ends idle.
    #[test]
    fn every_shape_completes_what_it_is_given() {
        for name in ["raid5-3x4k", "raid5-5x64k", "raid5-12x1m", "disk-st6000"] {
            for block_bytes in [512u64, 4096, 65536] {
                let mut a = ArrayTiming::named(name, block_bytes).unwrap();
                let (mut rng, mut now, mut out) = (13u64, 0u64, Vec::new());
                let mut submitted = Vec::new();
                for i in 0..2_000usize {
                    now += lcg(&mut rng) % 2_000_000;
                    let dir = if lcg(&mut rng).is_multiple_of(2) {
                        Op::Read
                    } else {
                        Op::Write
                    };
                    let blocks = 1 + lcg(&mut rng) % 64;
                    let addr = lcg(&mut rng) % (1 << 20);
                    a.submit(now, dir, blocks * block_bytes, addr, i, &mut out);
                    submitted.push(now);
                }
                while let Some(t) = a.next_event_ns() {
                    a.advance(t, &mut out);
                }
                assert_eq!(a.in_flight(), 0, "{name}, {block_bytes} B blocks");
                let mut seen = vec![false; submitted.len()];
                for s in &out {
                    assert!(
                        !seen[s.tag] && s.done_ns > submitted[s.tag],
                        "{name}: {s:?}"
                    );
                    seen[s.tag] = true;
                }
                assert!(seen.iter().all(|&x| x), "{name}, {block_bytes} B blocks");
            }
        }
    }

    /// A small deterministic generator for the randomized tests.
    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *state >> 33
    }

    /// One request at a time (each submitted after the last completes,
    /// as fio's `ioengine=sync` submits): a read of up to a stripe, or a
    /// one-block write, takes what the serial RAID-5 of `disk.rs` takes
    /// for it: the same member operations from the same head positions.
    #[test]
    fn one_request_at_a_time_takes_what_the_serial_array_takes() {
        let mut serial = Raid5::hibachi_paper();
        let mut a = ArrayTiming::named("raid5-hibachi", 4096).unwrap();
        let (mut now, mut rng, mut out) = (0u64, 7u64, Vec::new());
        for i in 0..500u64 {
            let addr = lcg(&mut rng) % (1 << 28);
            let (dir, blocks) = if i % 2 == 0 {
                (Op::Read, 1 + lcg(&mut rng) % 320)
            } else {
                (Op::Write, 1)
            };
            let bytes = blocks * 4096;
            let ms = match dir {
                Op::Read => serial.read(addr * 4096, bytes),
                Op::Write => serial.write(addr * 4096, bytes),
            };
            a.submit(now, dir, bytes, addr, i, &mut out);
            while let Some(t) = a.next_event_ns() {
                a.advance(t, &mut out);
            }
            let s = out.pop().expect("the request completes");
            assert!(out.is_empty() && s.tag == i);
            let expected_ns = ms * 1e6;
            let took_ns = (s.done_ns - now) as f64;
            assert!(
                (took_ns - expected_ns).abs() <= 8.0,
                "request {i} ({dir:?}, {blocks} blocks): {took_ns} ns against {expected_ns}"
            );
            now = s.done_ns + 1_000;
        }
    }

    /// With many random reads in flight, the six member disks seek at
    /// once: 120 random 4 KiB reads over 1 GiB end in under a quarter of
    /// the time one disk takes for them (each disk's queue orders its
    /// share by address, as the one disk's does all of them).
    #[test]
    fn member_disks_serve_at_once() {
        let mut rng = 3u64;
        let reqs: Vec<_> = (0..120)
            .map(|_| (1, Op::Read, 1, lcg(&mut rng) % (1 << 18)))
            .collect();
        let raid = *run("raid5-hibachi", &reqs).iter().max().unwrap();
        let disk = *run("disk-st6000", &reqs).iter().max().unwrap();
        assert!(4 * raid < disk, "RAID-5 {raid} ns, one disk {disk} ns");
        // Two random writes on different member pairs overlap; on the
        // same pair, the second waits. (Block 1,000,000 is data chunk 2 of
        // its stripe; two stripes on, the data and parity disks have moved
        // two places left, to neither of the first pair.)
        let lone = run("raid5-hibachi", &[(0, Op::Write, 1, 1_000_000)])[0];
        // Blocks 0 and 128 are chunks 0 and 1 of stripe 0: data on disks
        // 0 and 1, parity on disk 5 for both.
        let shared = run(
            "raid5-hibachi",
            &[(0, Op::Write, 1, 0), (0, Op::Write, 1, 128)],
        );
        let apart = run(
            "raid5-hibachi",
            &[
                (0, Op::Write, 1, 1_000_000),
                (0, Op::Write, 1, 1_000_000 + 640 * 2),
            ],
        );
        assert!(apart[1] < lone + lone / 10, "{apart:?} against {lone}");
        assert!(shared[1] > shared[0] + lone / 3, "{shared:?}");
    }

    /// A write continuing one still in flight, whose writes have started,
    /// reads nothing: after a whole stripe, the next stripe's first block
    /// adds one transfer on the disks the stripe left their heads at.
    /// Once the array is idle, the same block pays a parity update.
    #[test]
    fn a_write_continuing_one_in_flight_reads_nothing() {
        let stripe = run(
            "raid5-hibachi",
            &[(0, Op::Write, 640, 0), (1, Op::Write, 1, 640)],
        );
        let transfer_ns = (4096.0 / 226e6 * 1e9) as u64;
        assert!(stripe[1] <= stripe[0] + transfer_ns + 1, "{stripe:?}");
        let apart = run(
            "raid5-hibachi",
            &[(0, Op::Write, 640, 0), (stripe[0] + 1, Op::Write, 1, 640)],
        );
        assert!(apart[1] > stripe[0] + 4_000_000, "{apart:?}");
    }

    /// One disk: a random write seeks and waits for the platter (over 4
    /// ms: half a 7,200 rpm rotation is 4.17 ms); the next block, waiting
    /// behind it, only transfers (4 KiB at 226 MB/s, 18 µs); once the disk
    /// is idle the following block still starts where the head is.
    #[test]
    fn one_disk_seeks_once_per_run() {
        let transfer_ns = (4096.0 / 226e6 * 1e9) as u64;
        let d = run(
            "disk-st6000",
            &[(0, Op::Write, 1, 1_000_000), (0, Op::Write, 1, 1_000_001)],
        );
        assert!(d[0] > 4_170_000, "{d:?}");
        assert!(d[1] <= d[0] + transfer_ns + 1, "{d:?}");
        let idle = run(
            "disk-st6000",
            &[
                (0, Op::Write, 1, 1_000_000),
                (d[0] + 5, Op::Write, 1, 1_000_001),
            ],
        );
        assert!(idle[1] <= d[0] + 5 + transfer_ns + 1, "{idle:?}");
        assert!(ArrayTiming::<u32>::named("raid6", 4096).is_err());
    }

    /// A request of 64 blocks ends when the same blocks submitted one
    /// after another end, on the RAID-5 and on one disk, reading and
    /// writing: merging requests does not change the array's timing.
    #[test]
    fn a_request_of_several_blocks_costs_its_blocks() {
        for name in ARRAYS {
            for dir in [Op::Read, Op::Write] {
                // A first request elsewhere, so that both start busy.
                let first = (0, dir, 1, 77_777);
                let whole = run(name, &[first, (10, dir, 64, 1_000)]);
                let mut blocks = vec![first];
                blocks.extend((0..64).map(|k| (10, dir, 1, 1_000 + k)));
                let one_by_one = run(name, &blocks);
                let (merged, last) = (whole[1], *one_by_one[1..].iter().max().unwrap());
                let gap = merged.abs_diff(last);
                assert!(gap <= 64, "{name} {dir:?}: {merged} against {last}");
                assert!(merged > 1_000_000, "{name} {dir:?}: {merged}");
            }
        }
    }

    /// Randomized: mixed reads and writes of 1-64 blocks, random or
    /// continuing the last, at random times. Every request completes
    /// once, after it was submitted; the busy time is at most the span;
    /// and a caller that advances the array to each member completion
    /// gets the times one that only submits (and advances at the end)
    /// gets.
    #[test]
    fn random_requests_complete_once_whatever_the_caller_advances() {
        for name in ARRAYS {
            let mut rng = 11u64;
            let (mut now, mut next_addr) = (0u64, 0u64);
            let reqs: Vec<_> = (0..3_000)
                .map(|_| {
                    now += lcg(&mut rng) % 3_000_000;
                    let dir = if lcg(&mut rng).is_multiple_of(3) {
                        Op::Read
                    } else {
                        Op::Write
                    };
                    let blocks = 1 + lcg(&mut rng) % 64;
                    let addr = if lcg(&mut rng).is_multiple_of(2) {
                        next_addr
                    } else {
                        lcg(&mut rng) % (1 << 24)
                    };
                    next_addr = addr + blocks;
                    (now, dir, blocks, addr)
                })
                .collect();
            let lazy = run(name, &reqs);
            let mut a = ArrayTiming::named(name, 4096).unwrap();
            let (mut out, mut busy) = (Vec::new(), 0);
            for (i, &(t, dir, blocks, addr)) in reqs.iter().enumerate() {
                while let Some(e) = a.next_event_ns().filter(|&e| e <= t) {
                    a.advance(e, &mut out);
                }
                a.submit(t, dir, blocks * 4096, addr, i, &mut out);
                busy += a.take_busy_ns();
            }
            while let Some(e) = a.next_event_ns() {
                a.advance(e, &mut out);
            }
            busy += a.take_busy_ns();
            let mut eager = vec![0; reqs.len()];
            for s in out {
                eager[s.tag] = s.done_ns;
            }
            assert_eq!(eager, lazy, "{name}");
            let span = lazy.iter().max().unwrap();
            assert!(
                busy <= *span && busy > span / 10,
                "{name}: busy {busy} of {span}"
            );
        }
    }
}
