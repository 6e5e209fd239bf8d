//! The volume: a block address space served by a policy over real devices.
//!
//! The volume is driven by the engine's event loop ([`crate::runtime`]).
//! Client requests come in through [`Volume::submit`]; each block of a
//! request is one access to the core's [`Dispatcher`], whose plans the
//! volume performs on the devices through the loop's [`Reactor`]
//! (`device_io`). Device completions come back through
//! [`Volume::on_completion`], and finished requests leave through
//! [`Volume::end_batch`], which first makes the placement map's records
//! durable.
//!
//! Metadata ordering (why an acknowledged write survives a crash; the
//! entries recorded are in `durable`):
//! - before a plan's operations reach the kernel, the durable entry of its
//!   block loses every copy the plan overwrites or drops (and an evicted
//!   block loses its slot), so a crash mid-plan never leaves the map
//!   pointing at half-written or reused space;
//! - after the plan has finished, the block's new entry is recorded, and a
//!   write is acknowledged only after that record is committed.
//!
//! [`Reactor::wait`] submits queued operations only when the loop waits,
//! and the loop commits the journal just before every wait, which gives
//! the first rule without extra waits.

use std::collections::VecDeque;

use tiermux_core::{Access, Dispatcher, ObservationBuilder, Op, Outcome};

mod bufpool;
mod device_io;
mod discards;
mod durable;
mod emu_waits;
mod health;
mod marks;
mod merged_io;
mod open;
mod reconfigure;
mod request;

use bufpool::BufPool;
pub use health::OUT_OF_SERVICE_AFTER_ERRORS;
pub use open::OpenError;
pub use reconfigure::ReconfigureError;
use request::{client_tag, split_tag, Phase, Req};
pub use request::{Done, Request};

use crate::buf::AlignedBuf;
use crate::config::VolumeConfig;
use crate::device::Device;
use crate::journal::{Metadata, Recovery};
use crate::reactor::Reactor;
use crate::slab::Slab;

/// Largest request the volume accepts, bytes.
pub const MAX_REQUEST_BYTES: u32 = 32 << 20;

const KIND_SHIFT: u32 = 56;
const KIND_DEV_IO: u64 = 1;
const KIND_EMU_WAIT: u64 = 2;
const KIND_MARK: u64 = 3;
const KIND_MERGED_IO: u64 = 4;
const KIND_MERGED_WAIT: u64 = 5;
const KIND_DISCARD: u64 = 6;

/// The volume's reactor tokens are below this value (the runtime gives the
/// rest to the front end).
pub const VOLUME_TOKEN_LIMIT: u64 = (KIND_DISCARD + 1) << KIND_SHIFT;

/// The payload of a client read that read straight into its request's
/// buffer (otherwise a read's payload is the pool buffer it filled).
const IN_PLACE: u64 = u64::MAX;

struct DevOp {
    flight: u32,
    index: tiermux_core::PlanIndex,
    device: u8,
    dir: Op,
    /// Pool buffer read into or written from; `None` for client writes and
    /// for client reads in place.
    buf: Option<u32>,
    submitted_ns: u64,
    /// When emulated timing lets it complete ([`crate::emulate::NOT_YET`]
    /// while a disk array's queue holds it).
    deadline_ns: u64,
    result: i32,
    /// Its transfer has completed (it may still wait for its deadline).
    transferred: bool,
}

/// Cumulative volume counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct VolumeStats {
    /// Client requests finished.
    pub requests: u64,
    /// Read accesses that hit.
    pub read_hits: u64,
    /// Read accesses that missed.
    pub read_misses: u64,
    /// Device operations that failed.
    pub device_errors: u64,
    /// Policy decisions that broke the persistence contract (must stay 0).
    pub contract_violations: u64,
    /// Marks completed (flushes, FUA writes, and writes to released
    /// locations waiting for one; see `volume/marks.rs`).
    pub marks: u64,
    /// Device writes that waited for a mark.
    pub writes_held: u64,
    /// Client block reads that failed and were tried again.
    pub read_retries: u64,
    /// Client requests answered with an I/O error.
    pub failed_requests: u64,
    /// Blocks whose copies a trim released (blocks trimmed that held no
    /// copy beyond home are not counted).
    pub trimmed_blocks: u64,
    /// Block entries repaired after failed device operations.
    pub repairs: u64,
    /// Devices taken out of service (bit per device).
    pub out_of_service: u8,
    /// Vectored device operations that merged consecutive blocks.
    pub merged_ops: u64,
    /// Block operations carried by merged ones.
    pub merged_blocks: u64,
    /// Merged operations that failed or fell short and were retried block
    /// by block.
    pub merged_retries: u64,
    /// Discard operations completed (`discard = true` devices).
    pub discards: u64,
    /// Blocks of space they discarded.
    pub discarded_blocks: u64,
    /// Freed places not discarded because they might be in use again.
    pub discards_skipped: u64,
    /// Discard operations that failed.
    pub discards_failed: u64,
}

/// A volume over opened devices.
pub struct Volume {
    cfg: VolumeConfig,
    dispatcher: Dispatcher,
    devices: Vec<Device>,
    meta: Metadata,
    pool: BufPool,
    ops: Slab<DevOp>,
    /// Vectored operations over consecutive blocks (`merged_io`); their
    /// blocks' operations are in `ops` too.
    merged: Slab<merged_io::MergedOp>,
    /// Operations in `ops` or `merged` whose transfer is done, waiting for
    /// their emulated device's completion time.
    emu_waits: emu_waits::EmuWaits,
    /// The operations the dispatcher handed out in one pass, performed
    /// together so that consecutive ones merge (kept for its allocation).
    batch: Vec<tiermux_core::Ready>,
    reqs: Slab<Req>,
    blocked: VecDeque<usize>,
    rmw_busy: tiermux_core::map::BlockMap<u32>,
    finished: Vec<usize>,
    obs: ObservationBuilder,
    next_tick_ns: Option<u64>,
    tick_interval_ns: Option<u64>,
    home: u8,
    /// Blocks the policy addresses on each device (every device operation
    /// is checked against it).
    address_spaces: Vec<u64>,
    stats: VolumeStats,
    recovery: Recovery,
    marks: marks::Marks,
    /// A metadata error met while handling a completion, reported by the
    /// next [`Volume::end_batch`].
    meta_error: Option<crate::journal::MetaError>,
    health: health::Health,
    discards: discards::Discards,
}

fn token(kind: u64, index: usize) -> u64 {
    kind << KIND_SHIFT | index as u64
}

/// The kind and the index a [`token`] was made of.
fn split_token(t: u64) -> (u64, usize) {
    (t >> KIND_SHIFT, (t & ((1 << KIND_SHIFT) - 1)) as usize)
}

impl Volume {
    /// Client-visible size, bytes.
    pub fn size_bytes(&self) -> u64 {
        self.cfg.size_bytes
    }

    /// Block size, bytes.
    pub fn block_size(&self) -> u32 {
        self.cfg.block_size
    }

    /// What recovery found when the volume was opened.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The devices (names, counters, whether O_DIRECT is on).
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The policy's name and controller state.
    pub fn policy(&self) -> &dyn tiermux_core::Policy {
        self.dispatcher.policy()
    }

    /// Cumulative counters.
    pub fn stats(&self) -> VolumeStats {
        VolumeStats {
            marks: self.marks.completed,
            writes_held: self.marks.writes_held,
            repairs: self.dispatcher.stats().repairs,
            out_of_service: self.health.out_of_service_mask(),
            discards: self.discards.ops_completed,
            discarded_blocks: self.discards.blocks_discarded,
            discards_skipped: self.discards.skipped,
            discards_failed: self.discards.failed,
            ..self.stats
        }
    }

    /// Blocks whose newest data is only on device `d` (dirty there): what a
    /// failing cache device puts at risk.
    pub fn at_risk_blocks(&self, d: u8) -> u64 {
        self.dispatcher
            .map()
            .iter()
            .filter(|(_, e)| e.dirty_on(d))
            .count() as u64
    }

    /// True when no request, device operation or background job is in flight.
    pub fn is_idle(&self) -> bool {
        let idle = self.reqs.is_empty()
            && self.ops.is_empty()
            && self.dispatcher.is_idle()
            && self.marks_idle()
            && self.discards.idle();
        assert!(
            !idle || self.emu_waits.len() == 0,
            "operations wait for emulated time with nothing in flight"
        );
        assert!(
            !idle || self.pool.held() == 0,
            "{} block buffers held with nothing in flight",
            self.pool.held()
        );
        idle
    }

    /// True when requests have finished and wait for
    /// [`Volume::end_batch`] (the loop must not block before handing them
    /// out).
    pub fn has_finished(&self) -> bool {
        !self.finished.is_empty()
    }

    /// When the loop must call [`Volume::on_time`] next: the policy's
    /// next tick, the earliest time an emulated device finishes an
    /// operation, or the earliest a disk array's member disk does.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        let wakes = self.devices.iter().filter_map(|d| d.next_wake_ns()).min();
        [self.next_tick_ns, self.emu_waits.next_ns(), wakes]
            .into_iter()
            .flatten()
            .min()
    }

    /// Checks a read's or write's range: `Err(errno)` when it is out of
    /// bounds or larger than [`MAX_REQUEST_BYTES`].
    pub fn check_range(&self, offset: u64, len: u64) -> Result<(), i32> {
        if len > MAX_REQUEST_BYTES as u64 {
            return Err(rustix::io::Errno::OVERFLOW.raw_os_error());
        }
        self.check_extent(offset, len)
    }

    /// Checks a write-zeroes' or trim's range (any length): `Err(errno)`
    /// when it is out of bounds.
    pub fn check_extent(&self, offset: u64, len: u64) -> Result<(), i32> {
        match offset.checked_add(len) {
            Some(end) if end <= self.cfg.size_bytes => Ok(()),
            _ => Err(rustix::io::Errno::NOSPC.raw_os_error()),
        }
    }

    /// Starts zeroing `len` bytes at `offset`, the first part of at most
    /// [`MAX_REQUEST_BYTES`]; `end_batch` starts each next part.
    fn start_zeroes(
        &mut self,
        id: u64,
        offset: u64,
        len: u64,
        fua: bool,
        started_ns: u64,
        r: &mut dyn Reactor,
    ) {
        let now = started_ns;
        if len == 0 {
            self.finish_now(id, Op::Write, 0, now);
            return;
        }
        let bs = self.cfg.block_size as u64;
        // Parts after the first start on a block boundary, so that only the
        // first and the last need read-modify-write.
        let part = len.min(MAX_REQUEST_BYTES as u64 - offset % bs);
        // Only the last part syncs for FUA.
        let part_fua = fua && part == len;
        let mut req = Req::new(id, Op::Write, offset, part as u32, None, part_fua, bs, now);
        req.zero_rest = len - part;
        req.fua_rest = fua;
        let idx = self.reqs.insert(req);
        self.try_start(idx, r);
    }

    /// Starts a discard of the blocks that `len` bytes at `offset` cover
    /// whole (a partly covered block keeps its data): each block the
    /// policy has placed away from its default is trimmed under its lock
    /// (see [`tiermux_core::Policy::trim`]); the others hold nothing to
    /// release. The request finishes when every trim has.
    fn start_trim(&mut self, id: u64, offset: u64, len: u64, now: u64, r: &mut dyn Reactor) {
        let bs = self.cfg.block_size as u64;
        let (first, end) = (offset.div_ceil(bs), (offset + len) / bs);
        let placed = self.dispatcher.discard(first, end.max(first));
        if placed.is_empty() {
            self.finish_now(id, Op::Write, 0, now);
            return;
        }
        let mut req = Req::flush(id, now);
        req.kind_flush = false;
        req.fua = false;
        req.phase = Phase::Access;
        req.pending = placed.len() as u32;
        req.open_flights = placed.len() as u32;
        let idx = self.reqs.insert(req);
        self.stats.trimmed_blocks += placed.len() as u64;
        for b in placed {
            self.dispatcher.submit_trim(client_tag(idx, false, 0), b);
        }
        self.drain(r);
    }

    /// Starts a request. Range errors finish it at once with an errno.
    pub fn submit(&mut self, id: u64, req: Request, r: &mut dyn Reactor) {
        let now = r.now_ns();
        let bs = self.cfg.block_size as u64;
        // Write-zeroes has no data: the request buffer starts zeroed.
        let (op, offset, len, data, fua, flush) = match req {
            Request::Read { offset, len } => (Op::Read, offset, len, None, false, false),
            Request::Write { offset, data, fua } => {
                let len = data.len().min(u32::MAX as usize) as u32;
                (Op::Write, offset, len, Some(data), fua, false)
            }
            Request::WriteZeroes { offset, len, fua } => {
                if let Err(errno) = self.check_extent(offset, len as u64) {
                    self.finish_now(id, Op::Write, errno, now);
                    return;
                }
                self.start_zeroes(id, offset, len as u64, fua, now, r);
                return;
            }
            Request::Trim { offset, len } => {
                match self.check_extent(offset, len as u64) {
                    Ok(()) => self.start_trim(id, offset, len as u64, now, r),
                    Err(errno) => self.finish_now(id, Op::Write, errno, now),
                }
                return;
            }
            Request::Flush => (Op::Write, 0, 0, None, true, true),
        };
        if !flush {
            if let Err(errno) = self.check_range(offset, len as u64) {
                self.finish_now(id, op, errno, now);
                return;
            }
            if len == 0 {
                self.finish_now(id, op, 0, now);
                return;
            }
        }
        let req = if flush {
            Req::flush(id, now)
        } else {
            Req::new(id, op, offset, len, data, fua, bs, now)
        };
        let idx = self.reqs.insert(req);
        if flush {
            // Started by the commit before the loop waits.
            self.wait_for_mark(idx);
            return;
        }
        self.try_start(idx, r);
    }

    fn finish_now(&mut self, id: u64, op: Op, error: i32, now: u64) {
        let mut req = Req::flush(id, now);
        req.op = op;
        req.kind_flush = false;
        req.fua = false;
        req.phase = Phase::Access;
        req.error = error;
        let idx = self.reqs.insert(req);
        self.finished.push(idx);
    }

    /// Writes wait while another request read-modify-writes one of their
    /// blocks; otherwise they start (with their own RMW reads if partial).
    fn try_start(&mut self, idx: usize, r: &mut dyn Reactor) {
        let req = self.reqs.get_mut(idx).expect("request");
        if req.op == Op::Write {
            let (first, n) = (req.first_block, req.nblocks as u64);
            let busy = !self.rmw_busy.is_empty()
                && (first..first + n).any(|b| self.rmw_busy.contains_key(&b));
            if busy {
                req.phase = Phase::Blocked;
                self.blocked.push_back(idx);
                return;
            }
            let rmw = req.rmw_blocks;
            if rmw.iter().any(|b| b.is_some()) {
                req.phase = Phase::Rmw;
                for b in rmw.into_iter().flatten() {
                    *self.rmw_busy.entry(b).or_insert(0) += 1;
                    req.pending += 1;
                    req.open_flights += 1;
                }
                let first = req.first_block;
                for b in rmw.into_iter().flatten() {
                    let tag = client_tag(idx, true, b - first);
                    self.dispatcher.submit(tag, Access::one(b, Op::Read));
                }
                self.drain(r);
                return;
            }
        }
        self.start_access(idx, r);
    }

    fn start_access(&mut self, idx: usize, r: &mut dyn Reactor) {
        let req = self.reqs.get_mut(idx).expect("request");
        req.phase = Phase::Access;
        req.pending = req.nblocks;
        req.open_flights += req.nblocks;
        let (first, n, op) = (req.first_block, req.nblocks, req.op);
        // Block `i` of the request is reported with tag `client_tag(idx, false, i)`.
        self.dispatcher
            .submit(client_tag(idx, false, 0), Access::range(first, n, op));
        self.drain(r);
    }

    /// Performs what the dispatcher has ready and handles its events.
    fn drain(&mut self, r: &mut dyn Reactor) {
        loop {
            let mut progressed = false;
            while let Some(ev) = self.dispatcher.pop_event() {
                progressed = true;
                self.on_map_event(ev);
            }
            let mut batch = std::mem::take(&mut self.batch);
            while let Some(ready) = self.dispatcher.pop_ready() {
                progressed = true;
                batch.push(ready);
            }
            if !batch.is_empty() {
                self.issue_batch(&mut batch, r);
            }
            self.batch = batch;
            while let Some(a) = self.dispatcher.pop_acked() {
                progressed = true;
                self.on_acked(a, r);
            }
            if !progressed {
                break;
            }
        }
    }

    fn on_acked(&mut self, a: tiermux_core::Acked, r: &mut dyn Reactor) {
        self.obs.outcome(a.access.op, a.outcome);
        if a.access.op == Op::Read {
            match a.outcome {
                Outcome::Hit(_) => self.stats.read_hits += 1,
                Outcome::Miss => self.stats.read_misses += 1,
                Outcome::NotApplicable => {}
            }
        }
        let (idx, rmw, i) = split_tag(a.tag);
        let bs = self.cfg.block_size as usize;
        if a.failed && a.access.op == Op::Read && self.retry_read(idx, i, rmw, a) {
            return;
        }
        let req = self.reqs.get_mut(idx).expect("request of an ack");
        if a.failed && a.access.op == Op::Read {
            req.error = rustix::io::Errno::IO.raw_os_error();
            req.pending = req
                .pending
                .checked_sub(1)
                .expect("more blocks read than requested");
            if req.pending == 0 {
                if rmw {
                    // The merged blocks cannot be written: the request fails.
                    self.finished.push(idx);
                } else {
                    self.request_accessed(idx);
                }
            }
            return;
        }
        match (a.access.op, rmw) {
            (Op::Read, false) => {
                if a.payload != IN_PLACE {
                    let src = &self.pool.bufs[a.payload as usize];
                    req.buf[i * bs..(i + 1) * bs].copy_from_slice(src);
                }
                req.pending = req
                    .pending
                    .checked_sub(1)
                    .expect("more blocks read than requested");
                if req.pending == 0 {
                    self.request_accessed(idx);
                }
            }
            (Op::Read, true) => {
                // Keep the client's bytes; fill the rest of the block with
                // its current content.
                assert_ne!(a.payload, IN_PLACE, "a merge read in place");
                let src = &self.pool.bufs[a.payload as usize];
                let block_start = (req.first_block + i as u64) * bs as u64;
                let ws = req.offset.max(block_start) - block_start;
                let we = (req.offset + req.len as u64).min(block_start + bs as u64) - block_start;
                let dst = &mut req.buf[i * bs..(i + 1) * bs];
                dst[..ws as usize].copy_from_slice(&src[..ws as usize]);
                dst[we as usize..].copy_from_slice(&src[we as usize..]);
                req.pending = req
                    .pending
                    .checked_sub(1)
                    .expect("more blocks read than requested");
                if req.pending == 0 {
                    if req.error != 0 {
                        // The other block's read failed.
                        self.finished.push(idx);
                    } else {
                        self.start_access(idx, r);
                    }
                }
            }
            _ => {}
        }
    }

    /// A client read of block `i` of request `idx` failed: tries it once
    /// more (the failed plan's repair may have dropped the copy that could
    /// not be read, so the retry reads another one). False when it was
    /// tried already.
    fn retry_read(&mut self, idx: usize, i: usize, rmw: bool, a: tiermux_core::Acked) -> bool {
        let req = self.reqs.get_mut(idx).expect("request of an ack");
        let key = (i as u32) << 1 | u32::from(rmw);
        if req.retried.contains(&key) {
            return false;
        }
        req.retried.push(key);
        req.open_flights += 1;
        self.stats.read_retries += 1;
        self.dispatcher.submit(a.tag, a.access);
        true
    }

    /// Every block access of a request is done.
    fn request_accessed(&mut self, idx: usize) {
        let req = self.reqs.get_mut(idx).expect("request");
        if req.op == Op::Write && req.fua {
            // Synced in `end_batch`, after the journal commit.
            req.phase = Phase::Sync;
            req.pending = u32::MAX;
        }
        self.finished.push(idx);
    }

    /// Finishes the operations whose emulated time is up, and feeds the
    /// policy's controller when a tick is due.
    pub fn on_time(&mut self, r: &mut dyn Reactor) {
        let now = r.now_ns();
        for d in 0..self.devices.len() {
            if self.devices[d].next_wake_ns().is_some_and(|t| t <= now) {
                self.devices[d].wake(now);
                self.collect_released(d);
            }
        }
        self.finish_due_waits(now, r);
        let (Some(due), Some(interval)) = (self.next_tick_ns, self.tick_interval_ns) else {
            return;
        };
        if now < due {
            return;
        }
        for (d, dev) in self.devices.iter().enumerate() {
            self.obs.inflight(d, dev.inflight.0, dev.inflight.1);
        }
        self.dispatcher.tick(self.obs.finish(now));
        self.obs.reset();
        self.next_tick_ns = Some(now.max(due) + interval);
        self.refresh_tick_interval(now);
        self.drain(r);
    }

    /// Ends a batch of work before the loop waits: commits the journal,
    /// starts FUA syncs and returns the requests that are finished.
    pub fn end_batch(
        &mut self,
        r: &mut dyn Reactor,
        out: &mut Vec<Done>,
    ) -> Result<(), crate::journal::MetaError> {
        if let Some(e) = self.meta_error.take() {
            return Err(e);
        }
        self.meta.commit(r)?;
        let now = r.now_ns();
        let finished = std::mem::take(&mut self.finished);
        let mut freed_rmw = false;
        let mut started_parts = false;
        for idx in finished {
            let req = self.reqs.get_mut(idx).expect("finished request");
            if req.phase == Phase::Sync && req.pending == u32::MAX {
                self.wait_for_mark(idx);
                continue;
            }
            if req.zero_rest > 0 && req.error == 0 {
                freed_rmw |= self.next_zero_part(idx, r);
                started_parts = true;
                continue;
            }
            let (done, freed) = self.reply(idx, now);
            freed_rmw |= freed;
            out.push(done);
        }
        if freed_rmw {
            let blocked: Vec<usize> = self.blocked.drain(..).collect();
            for idx in blocked {
                self.try_start(idx, r);
            }
        }
        if freed_rmw || started_parts {
            // Starting requests queued metadata their I/O must not overtake.
            self.meta.commit(r)?;
        }
        self.start_mark(r)
    }

    /// A part of a large write-zeroes finished: starts the next one. True
    /// when the part released read-modify-write blocks others may wait for.
    fn next_zero_part(&mut self, idx: usize, r: &mut dyn Reactor) -> bool {
        let req = self.reqs.get_mut(idx).expect("finished request");
        let (id, next, rest, fua, t0) = (
            req.id,
            req.offset + req.len as u64,
            req.zero_rest,
            req.fua_rest,
            req.started_ns,
        );
        let freed = self.retire(idx);
        self.start_zeroes(id, next, rest, fua, t0, r);
        freed
    }

    /// A request is answered: its slot goes once its plans have finished,
    /// and its read-modify-write blocks are released; true when another
    /// request may have been waiting for one of them.
    fn retire(&mut self, idx: usize) -> bool {
        let req = self.reqs.get_mut(idx).expect("finished request");
        req.replied = true;
        let rmw_blocks = std::mem::take(&mut req.rmw_blocks);
        if req.open_flights == 0 {
            self.reqs.remove(idx);
        }
        let mut freed = false;
        for b in rmw_blocks.into_iter().flatten() {
            if let Some(c) = self.rmw_busy.get_mut(&b) {
                *c -= 1;
                if *c == 0 {
                    self.rmw_busy.remove(&b);
                }
                freed = true;
            }
        }
        freed
    }

    /// The reply to a finished request; also says whether it released
    /// read-modify-write locks other requests may wait for.
    fn reply(&mut self, idx: usize, now: u64) -> (Done, bool) {
        let bs = self.cfg.block_size as u64;
        let req = self.reqs.get_mut(idx).expect("finished request");
        let buf = std::mem::replace(&mut req.buf, AlignedBuf::zeroed(0));
        let (id, error, op, len, offset, first_block, kind_flush, nblocks, started_ns) = (
            req.id,
            req.error,
            req.op,
            req.len,
            req.offset,
            req.first_block,
            req.kind_flush,
            req.nblocks,
            req.started_ns,
        );
        let freed_rmw = self.retire(idx);
        self.stats.requests += 1;
        self.stats.failed_requests += u64::from(error != 0);
        self.obs.client_op(op, len as u64, now - started_ns);
        let is_read = op == Op::Read && !kind_flush && nblocks > 0;
        let done = Done {
            id,
            error,
            data_offset: (offset - first_block * bs) as usize,
            len,
            data: (is_read && error == 0).then_some(buf),
        };
        (done, freed_rmw)
    }

    /// Commits the metadata records queued since the last commit (the
    /// loop calls it before every wait; see the module documentation).
    pub fn commit_metadata(
        &mut self,
        r: &mut dyn Reactor,
    ) -> Result<(), crate::journal::MetaError> {
        self.meta.commit(r)?;
        // Flushes and held writes of requests the front end just submitted
        // wait for a mark.
        self.start_mark(r)
    }

    /// Closes the volume cleanly: waits for in-flight work (the caller must
    /// have stopped submitting and keep the loop running until
    /// [`Volume::is_idle`]), makes every device's data durable, then
    /// writes a final checkpoint (whose entries point at that data).
    pub fn close(&mut self, r: &mut dyn Reactor) -> Result<(), crate::journal::MetaError> {
        let out = self.health.out_of_service_mask();
        for (_, d) in self
            .devices
            .iter()
            .enumerate()
            .filter(|(i, _)| out & (1 << i) == 0)
        {
            r.sync_now(d.fd())
                .map_err(|source| crate::journal::MetaError::Io {
                    path: d.path.clone(),
                    source,
                })?;
        }
        self.meta.close(r)
    }

    /// Metadata records written and checkpoints taken since opening.
    pub fn metadata_counters(&self) -> (u64, u64) {
        (self.meta.records_written, self.meta.checkpoints)
    }
}
