//! The volume: a block address space served by a policy over real devices.
//!
//! The volume is driven by one event loop (see `tiermux-server`). Client
//! requests come in through [`Volume::submit`]; each block of a request is
//! one access to the core's [`Dispatcher`], whose plans the volume performs
//! on the devices through the loop's [`Reactor`]. Device completions come
//! back through [`Volume::on_completion`], and finished requests leave
//! through [`Volume::end_batch`], which first makes the placement map's
//! records durable.
//!
//! Metadata ordering (why an acknowledged write survives a crash):
//! - before a plan's operations reach the kernel, the durable entry of its
//!   block loses every copy the plan overwrites or drops (and an evicted
//!   block loses its slot), so a crash mid-plan never leaves the map
//!   pointing at half-written or reused space;
//! - after the plan has finished, the block's new entry is recorded, and a
//!   write is acknowledged only after that record is committed.
//!
//! [`Reactor::wait`] submits queued operations only after `end_batch` has
//! committed the journal, which gives the first rule without extra waits.

use std::collections::VecDeque;

use tiermux_core::dispatch::{MapEvent, NO_TAG};
use tiermux_core::map::LOC_DEVICES;
use tiermux_core::policy::{DeviceSpec, VolumeSpec};
use tiermux_core::{build_policy, Access, Dispatcher, Entry, ObservationBuilder, Op, Outcome};

use crate::buf::AlignedBuf;
use crate::config::VolumeConfig;
use crate::device::Device;
use crate::journal::{Metadata, Recovery, VolumeShape};
use crate::reactor::{Completion, Reactor};
use crate::slab::Slab;

/// Largest request the volume accepts, bytes.
pub const MAX_REQUEST_BYTES: u32 = 32 << 20;

const KIND_SHIFT: u32 = 56;
const KIND_DEV_IO: u64 = 1;
const KIND_EMU_WAIT: u64 = 2;
const KIND_SYNC: u64 = 3;

/// The volume's reactor tokens are below this value (the runtime gives the
/// rest to the front end).
pub const VOLUME_TOKEN_LIMIT: u64 = (KIND_SYNC + 1) << KIND_SHIFT;

/// A client access's tag: request slot, an RMW-read flag and the block's
/// index within the request.
const BLOCK_BITS: u32 = 20;
const RMW_BIT: u64 = 1 << BLOCK_BITS;
const SLOT_SHIFT: u32 = BLOCK_BITS + 1;

fn client_tag(slot: usize, rmw: bool, index: u64) -> u64 {
    (slot as u64) << SLOT_SHIFT | if rmw { RMW_BIT } else { 0 } | index
}

fn split_tag(tag: u64) -> (usize, bool, usize) {
    (
        (tag >> SLOT_SHIFT) as usize,
        tag & RMW_BIT != 0,
        (tag & (RMW_BIT - 1)) as usize,
    )
}

/// A client request.
#[derive(Debug)]
pub enum Request {
    /// Read `len` bytes at `offset`.
    Read {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
    },
    /// Write `data` at `offset`; `fua` makes it durable before the reply.
    Write {
        /// Byte offset.
        offset: u64,
        /// The bytes to write.
        data: Vec<u8>,
        /// Force unit access.
        fua: bool,
    },
    /// Write `len` zero bytes at `offset`.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Force unit access.
        fua: bool,
    },
    /// Make every acknowledged write durable.
    Flush,
    /// Discard a range (advisory: accepted, the data stays readable).
    Trim {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
    },
}

/// A finished request.
#[derive(Debug)]
pub struct Done {
    /// The caller's id for the request.
    pub id: u64,
    /// 0, or the errno of a failure.
    pub error: i32,
    /// For a successful read: the buffer holding the data at `data_offset`.
    pub data: Option<AlignedBuf>,
    /// Where the read data starts in `data`.
    pub data_offset: usize,
    /// Read length, bytes.
    pub len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for other requests' read-modify-writes on its blocks.
    Blocked,
    /// Reading partial blocks before writing them.
    Rmw,
    /// Block accesses in flight.
    Access,
    /// Syncing devices and the journal (flush, FUA).
    Sync,
}

struct Req {
    id: u64,
    op: Op,
    kind_flush: bool,
    offset: u64,
    len: u32,
    first_block: u64,
    nblocks: u32,
    buf: AlignedBuf,
    pending: u32,
    phase: Phase,
    error: i32,
    fua: bool,
    rmw_blocks: [Option<u64>; 2],
    started_ns: u64,
    /// Block accesses submitted whose plans have not finished; the slot
    /// (and so the tag) stays reserved until they have.
    open_flights: u32,
    /// The reply was handed out.
    replied: bool,
}

struct DevOp {
    flight: u32,
    index: tiermux_core::PlanIndex,
    device: u8,
    dir: Op,
    /// Pool buffer read into or written from; `None` for client writes.
    buf: Option<u32>,
    tag: u64,
    submitted_ns: u64,
    deadline_ns: u64,
    result: i32,
}

/// Reference-counted block buffers for device reads and copies.
struct BufPool {
    bufs: Vec<AlignedBuf>,
    refs: Vec<u32>,
    free: Vec<u32>,
    block_size: usize,
}

impl BufPool {
    fn alloc(&mut self) -> u32 {
        if let Some(id) = self.free.pop() {
            self.refs[id as usize] = 1;
            return id;
        }
        self.bufs.push(AlignedBuf::zeroed(self.block_size));
        self.refs.push(1);
        (self.bufs.len() - 1) as u32
    }
    fn retain(&mut self, id: u32) {
        self.refs[id as usize] += 1;
    }
    fn release(&mut self, id: u32) {
        let r = &mut self.refs[id as usize];
        *r -= 1;
        if *r == 0 {
            self.free.push(id);
        }
    }
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
}

/// A volume over opened devices.
pub struct Volume {
    cfg: VolumeConfig,
    dispatcher: Dispatcher,
    devices: Vec<Device>,
    meta: Metadata,
    pool: BufPool,
    ops: Slab<DevOp>,
    reqs: Slab<Req>,
    blocked: VecDeque<usize>,
    rmw_busy: tiermux_core::map::BlockMap<u32>,
    finished: Vec<usize>,
    obs: ObservationBuilder,
    next_tick_ns: Option<u64>,
    tick_interval_ns: Option<u64>,
    home: u8,
    stats: VolumeStats,
    recovery: Recovery,
}

/// Why a volume could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A device problem.
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
    /// A policy problem.
    #[error(transparent)]
    Policy(#[from] tiermux_core::PolicyError),
    /// A metadata problem.
    #[error(transparent)]
    Meta(#[from] crate::journal::MetaError),
    /// The saved map does not suit the policy.
    #[error("metadata in {dir}: {message}")]
    Restore {
        /// The metadata directory.
        dir: String,
        /// The policy's complaint.
        message: String,
    },
}

fn token(kind: u64, index: usize) -> u64 {
    kind << KIND_SHIFT | index as u64
}

impl Volume {
    /// Opens the devices, builds the policy and recovers the saved map.
    pub fn open(cfg: &VolumeConfig, r: &dyn Reactor) -> Result<Volume, OpenError> {
        let bs = cfg.block_size as u64;
        let mut devices = Vec::new();
        for d in &cfg.devices {
            devices.push(Device::open(
                &d.name,
                &d.path,
                d.size_bytes,
                d.direct,
                d.profile.as_ref(),
            )?);
        }
        let spec = VolumeSpec {
            num_blocks: cfg.size_bytes / bs,
            block_size: cfg.block_size,
            devices: cfg
                .devices
                .iter()
                .map(|d| DeviceSpec {
                    name: d.name.clone(),
                    capacity_blocks: d.size_bytes / bs,
                    role: d.role,
                })
                .collect(),
        };
        let policy = build_policy(&cfg.policy, &cfg.params, &spec, cfg.seed)?;
        let home = spec.home().ok_or_else(|| OpenError::Restore {
            dir: cfg.metadata_dir.display().to_string(),
            message: "the engine needs a device with the role 'home' (volumes without one are not served yet)".into(),
        })?;
        let shape = VolumeShape {
            format: crate::journal::FORMAT,
            block_size: cfg.block_size,
            num_blocks: spec.num_blocks,
            devices: (0..devices.len())
                .map(|d| (cfg.devices[d].name.clone(), policy.address_space(d)))
                .collect(),
            policy_family: policy.layout().to_string(),
            seed: cfg.seed,
        };
        for (d, dev) in devices.iter().enumerate() {
            let need = policy.address_space(d) * bs;
            if need > dev.size_bytes {
                return Err(OpenError::Restore {
                    dir: cfg.metadata_dir.display().to_string(),
                    message: format!(
                        "policy addresses {need} bytes of device '{}', which has {}",
                        dev.name, dev.size_bytes
                    ),
                });
            }
        }
        let (meta, map, recovery) = Metadata::open(&cfg.metadata_dir, &shape, home)?;
        let mut dispatcher =
            Dispatcher::with_map(policy, map).map_err(|message| OpenError::Restore {
                dir: cfg.metadata_dir.display().to_string(),
                message,
            })?;
        dispatcher.track_changes();
        let tick_interval_ns = dispatcher.policy().tick_interval_ns();
        let now = r.now_ns();
        Ok(Volume {
            cfg: cfg.clone(),
            dispatcher,
            pool: BufPool {
                bufs: Vec::new(),
                refs: Vec::new(),
                free: Vec::new(),
                block_size: bs as usize,
            },
            obs: ObservationBuilder::new(devices.len(), now),
            devices,
            meta,
            ops: Slab::new(),
            reqs: Slab::new(),
            blocked: VecDeque::new(),
            rmw_busy: Default::default(),
            finished: Vec::new(),
            next_tick_ns: tick_interval_ns.map(|i| now + i),
            tick_interval_ns,
            home,
            stats: VolumeStats::default(),
            recovery,
        })
    }

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
        self.stats
    }

    /// True when no request, device operation or background job is in flight.
    pub fn is_idle(&self) -> bool {
        self.reqs.is_empty() && self.ops.is_empty() && self.dispatcher.is_idle()
    }

    /// True when requests have finished and wait for
    /// [`Volume::end_batch`] (the loop must not block before handing them
    /// out).
    pub fn has_finished(&self) -> bool {
        !self.finished.is_empty()
    }

    /// When the loop must call [`Volume::on_time`] next (policy ticks).
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.next_tick_ns
    }

    /// Checks a request's range: `Err(errno)` when it is out of bounds or
    /// too large.
    pub fn check_range(&self, offset: u64, len: u64) -> Result<(), i32> {
        if len > MAX_REQUEST_BYTES as u64 {
            return Err(rustix::io::Errno::OVERFLOW.raw_os_error());
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.cfg.size_bytes => Ok(()),
            _ => Err(rustix::io::Errno::NOSPC.raw_os_error()),
        }
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
            Request::WriteZeroes { offset, len, fua } => (Op::Write, offset, len, None, fua, false),
            Request::Trim { offset, len } => {
                let error = self.check_range(offset, len as u64).err().unwrap_or(0);
                self.finish_now(id, Op::Write, error, now);
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
        let first_block = offset / bs;
        let nblocks = if flush {
            0
        } else {
            ((offset + len as u64).div_ceil(bs) - first_block) as u32
        };
        let mut buf = AlignedBuf::zeroed(nblocks as usize * bs as usize);
        let mut rmw_blocks = [None, None];
        if op == Op::Write && !flush {
            let start = (offset - first_block * bs) as usize;
            if let Some(d) = &data {
                buf[start..start + d.len()].copy_from_slice(d);
            }
            if offset % bs != 0 {
                rmw_blocks[0] = Some(first_block);
            }
            let end = offset + len as u64;
            let last = first_block + nblocks as u64 - 1;
            if !end.is_multiple_of(bs) && rmw_blocks[0] != Some(last) {
                rmw_blocks[1] = Some(last);
            }
        }
        let idx = self.reqs.insert(Req {
            id,
            op,
            kind_flush: flush,
            offset,
            len,
            first_block,
            nblocks,
            buf,
            pending: 0,
            phase: Phase::Blocked,
            error: 0,
            fua,
            rmw_blocks,
            started_ns: now,
            open_flights: 0,
            replied: false,
        });
        if flush {
            self.start_sync(idx, r);
            return;
        }
        self.try_start(idx, r);
    }

    fn finish_now(&mut self, id: u64, op: Op, error: i32, now: u64) {
        let idx = self.reqs.insert(Req {
            id,
            op,
            kind_flush: false,
            offset: 0,
            len: 0,
            first_block: 0,
            nblocks: 0,
            buf: AlignedBuf::zeroed(0),
            pending: 0,
            phase: Phase::Access,
            error,
            fua: false,
            rmw_blocks: [None, None],
            started_ns: now,
            open_flights: 0,
            replied: false,
        });
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
                    self.dispatcher.submit(
                        tag,
                        Access {
                            block: b,
                            op: Op::Read,
                        },
                    );
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
        let (first, n, op) = (req.first_block, req.nblocks as u64, req.op);
        for i in 0..n {
            self.dispatcher.submit(
                client_tag(idx, false, i),
                Access {
                    block: first + i,
                    op,
                },
            );
        }
        self.drain(r);
    }

    fn start_sync(&mut self, idx: usize, r: &mut dyn Reactor) {
        let req = self.reqs.get_mut(idx).expect("request");
        req.phase = Phase::Sync;
        req.pending = self.devices.len() as u32 + 1;
        for d in &self.devices {
            r.fsync(d.fd(), token(KIND_SYNC, idx));
        }
        r.fsync(self.meta.journal_fd(), token(KIND_SYNC, idx));
    }

    /// Performs what the dispatcher has ready and handles its events.
    fn drain(&mut self, r: &mut dyn Reactor) {
        loop {
            let mut progressed = false;
            while let Some(ev) = self.dispatcher.pop_event() {
                progressed = true;
                self.on_map_event(ev);
            }
            while let Some(ready) = self.dispatcher.pop_ready() {
                progressed = true;
                self.issue(ready, r);
            }
            while let Some(a) = self.dispatcher.pop_acked() {
                progressed = true;
                self.on_acked(a, r);
            }
            if !progressed {
                break;
            }
        }
    }

    fn on_map_event(&mut self, ev: MapEvent) {
        match ev {
            MapEvent::Decided(d) => match d.own {
                Some(own) => {
                    for (b, old, new) in d.changes {
                        if own.contains(&b) {
                            let pre = pre_entry(old, new, d.written_devices, self.home);
                            self.meta.record(b, pre);
                        } else {
                            let (pre, grew) = reduction(old, new, self.home);
                            if grew {
                                self.stats.contract_violations += 1;
                                eprintln!("tiermux: policy '{}' added a copy of block {b} while deciding blocks {own:?}; not persisted until that block is written again", self.dispatcher.policy().name());
                            }
                            self.meta.record(b, pre);
                        }
                    }
                }
                None => {
                    // Changes without I/O (ticks, finished jobs) can only
                    // drop copies or flags: record no more than what the
                    // durable entry already backs with data.
                    for (b, _, new) in d.changes {
                        let (safe, _) = reduction(self.meta.durable(b), new, self.home);
                        self.meta.record(b, safe);
                    }
                }
            },
            MapEvent::Finished(f) => {
                self.meta.record(f.block, f.entry);
                if f.tag != NO_TAG {
                    let (idx, rmw, _) = split_tag(f.tag);
                    let req = self
                        .reqs
                        .get_mut(idx)
                        .expect("request of a finished flight");
                    req.open_flights -= 1;
                    if !rmw && req.op == Op::Write && req.phase == Phase::Access {
                        req.pending -= 1;
                        if req.pending == 0 {
                            self.request_accessed(idx);
                        }
                    } else if req.replied && req.open_flights == 0 {
                        self.reqs.remove(idx);
                    }
                }
            }
        }
    }

    fn issue(&mut self, ready: tiermux_core::Ready, r: &mut dyn Reactor) {
        let io = ready.io;
        let bs = self.cfg.block_size;
        let now = r.now_ns();
        let (ptr, buf): (*mut u8, Option<u32>) = match (io.dir, io.purpose) {
            (Op::Write, tiermux_core::Purpose::Client) => {
                let (idx, _, i) = split_tag(ready.tag);
                let req = self.reqs.get_mut(idx).expect("request of a client write");
                // SAFETY: the offset stays within the request's buffer
                // (block `i` < nblocks), which lives until the request
                // finishes, after all its flights (and so this write) did.
                (unsafe { req.buf.as_mut_ptr().add(i * bs as usize) }, None)
            }
            (Op::Write, _) => {
                let id = ready.src_payload as u32;
                self.pool.retain(id);
                (self.pool.bufs[id as usize].as_mut_ptr(), Some(id))
            }
            (Op::Read, _) => {
                let id = self.pool.alloc();
                (self.pool.bufs[id as usize].as_mut_ptr(), Some(id))
            }
        };
        let dev = &mut self.devices[io.device as usize];
        let deadline_ns = dev.submitted(now, io.dir, bs as u64, io.addr, io.purpose.index());
        let fd = dev.fd();
        if dev.memory_backed {
            r.serve_inline(fd);
        }
        let slot = self.ops.insert(DevOp {
            flight: ready.flight,
            index: ready.index,
            device: io.device,
            dir: io.dir,
            buf,
            tag: ready.tag,
            submitted_ns: now,
            deadline_ns,
            result: 0,
        });
        let offset = io.addr * bs as u64;
        match io.dir {
            // SAFETY: the buffer (a pool buffer with a reference held by this
            // operation, or the request's buffer kept until the request
            // finishes) outlives the operation, which is removed from `ops`
            // only when its completion arrives.
            Op::Read => unsafe { r.read(fd, ptr, bs, offset, token(KIND_DEV_IO, slot)) },
            // SAFETY: as above.
            Op::Write => unsafe { r.write(fd, ptr, bs, offset, token(KIND_DEV_IO, slot)) },
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
        let req = self.reqs.get_mut(idx).expect("request of an ack");
        match (a.access.op, rmw) {
            (Op::Read, false) => {
                let src = &self.pool.bufs[a.payload as usize];
                req.buf[i * bs..(i + 1) * bs].copy_from_slice(src);
                req.pending -= 1;
                if req.pending == 0 {
                    self.request_accessed(idx);
                }
            }
            (Op::Read, true) => {
                // Keep the client's bytes; fill the rest of the block with
                // its current content.
                let src = &self.pool.bufs[a.payload as usize];
                let block_start = (req.first_block + i as u64) * bs as u64;
                let ws = req.offset.max(block_start) - block_start;
                let we = (req.offset + req.len as u64).min(block_start + bs as u64) - block_start;
                let dst = &mut req.buf[i * bs..(i + 1) * bs];
                dst[..ws as usize].copy_from_slice(&src[..ws as usize]);
                dst[we as usize..].copy_from_slice(&src[we as usize..]);
                req.pending -= 1;
                if req.pending == 0 {
                    self.start_access(idx, r);
                }
            }
            _ => {}
        }
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

    /// Handles a completion whose token belongs to the volume.
    pub fn on_completion(&mut self, c: Completion, r: &mut dyn Reactor) {
        let kind = c.token >> KIND_SHIFT;
        let index = (c.token & ((1 << KIND_SHIFT) - 1)) as usize;
        match kind {
            KIND_DEV_IO => {
                let now = r.now_ns();
                let op = self.ops.get_mut(index).expect("device op");
                op.result = c.result;
                if op.deadline_ns > now {
                    let d = op.deadline_ns;
                    r.timer_at(d, token(KIND_EMU_WAIT, index));
                    return;
                }
                self.finish_op(index, now, r);
            }
            KIND_EMU_WAIT => self.finish_op(index, r.now_ns(), r),
            KIND_SYNC => {
                let req = self.reqs.get_mut(index).expect("syncing request");
                if c.result < 0 && req.error == 0 {
                    req.error = -c.result;
                }
                req.pending -= 1;
                if req.pending == 0 {
                    req.phase = Phase::Access;
                    self.finished.push(index);
                }
            }
            _ => panic!("token {:#x} is not the volume's", c.token),
        }
    }

    fn finish_op(&mut self, slot: usize, now: u64, r: &mut dyn Reactor) {
        let op = self.ops.remove(slot).expect("device op");
        let bs = self.cfg.block_size as u64;
        let ok = op.result == bs as i32;
        self.devices[op.device as usize].completed(op.dir, bs);
        self.obs
            .device_op(op.device as usize, op.dir, bs, now - op.submitted_ns);
        if !ok {
            self.stats.device_errors += 1;
            let dev = &self.devices[op.device as usize];
            eprintln!(
                "tiermux: {} on device '{}' failed: {}",
                if op.dir == Op::Read { "read" } else { "write" },
                dev.name,
                if op.result < 0 {
                    rustix::io::Errno::from_raw_os_error(-op.result).to_string()
                } else {
                    format!("short transfer of {} bytes", op.result)
                }
            );
            if op.tag != NO_TAG {
                if let Some(req) = self.reqs.get_mut(split_tag(op.tag).0) {
                    req.error = rustix::io::Errno::IO.raw_os_error();
                }
            }
        }
        let payload = if op.dir == Op::Read {
            op.buf.unwrap_or(0) as u64
        } else {
            0
        };
        self.dispatcher.complete(op.flight, op.index, payload);
        self.drain(r);
        if let Some(id) = op.buf {
            self.pool.release(id);
        }
    }

    /// Feeds the policy's controller when a tick is due.
    pub fn on_time(&mut self, r: &mut dyn Reactor) {
        let now = r.now_ns();
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
        self.drain(r);
    }

    /// Ends a batch of work before the loop waits: commits the journal,
    /// starts FUA syncs and returns the requests that are finished.
    pub fn end_batch(
        &mut self,
        r: &mut dyn Reactor,
        out: &mut Vec<Done>,
    ) -> Result<(), crate::journal::MetaError> {
        self.meta.commit()?;
        let now = r.now_ns();
        let bs = self.cfg.block_size as u64;
        let finished = std::mem::take(&mut self.finished);
        let mut freed_rmw = false;
        for idx in finished {
            let req = self.reqs.get_mut(idx).expect("finished request");
            if req.phase == Phase::Sync && req.pending == u32::MAX {
                self.start_sync(idx, r);
                continue;
            }
            let req = self.reqs.get_mut(idx).expect("finished request");
            req.replied = true;
            let buf = std::mem::replace(&mut req.buf, AlignedBuf::zeroed(0));
            let rmw_blocks = std::mem::take(&mut req.rmw_blocks);
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
            if req.open_flights == 0 {
                self.reqs.remove(idx);
            }
            for b in rmw_blocks.into_iter().flatten() {
                if let Some(c) = self.rmw_busy.get_mut(&b) {
                    *c -= 1;
                    if *c == 0 {
                        self.rmw_busy.remove(&b);
                    }
                    freed_rmw = true;
                }
            }
            self.stats.requests += 1;
            self.obs.client_op(op, len as u64, now - started_ns);
            let is_read = op == Op::Read && !kind_flush && nblocks > 0;
            out.push(Done {
                id,
                error,
                data_offset: (offset - first_block * bs) as usize,
                len,
                data: (is_read && error == 0).then_some(buf),
            });
        }
        if freed_rmw {
            let blocked: Vec<usize> = self.blocked.drain(..).collect();
            for idx in blocked {
                self.try_start(idx, r);
            }
            // Starting them may have finished or queued more work.
            self.meta.commit()?;
        }
        Ok(())
    }

    /// Commits the metadata records queued since the last commit (the
    /// loop calls it before every wait; see the module documentation).
    pub fn commit_metadata(&mut self) -> Result<(), crate::journal::MetaError> {
        self.meta.commit()
    }

    /// Closes the volume cleanly: waits for in-flight work (the caller must
    /// have stopped submitting and keep the loop running until
    /// [`Volume::is_idle`]), then writes a final checkpoint.
    pub fn close(&mut self) -> Result<(), crate::journal::MetaError> {
        self.meta.close()
    }

    /// Metadata records written and checkpoints taken since opening.
    pub fn metadata_counters(&self) -> (u64, u64) {
        (self.meta.records_written, self.meta.checkpoints)
    }
}

fn strip_flags(mut e: Entry) -> Entry {
    e.flags = 0;
    e
}

/// Copies that hold the block's current data.
fn valid(e: &Entry) -> u8 {
    let v = e.present & !e.stale;
    if e.dirty != 0 {
        v & e.dirty
    } else {
        v
    }
}

fn drop_devices(mut e: Entry, devices: u8, home: u8) -> Entry {
    let devices = devices & !(1 << home);
    for d in 0..tiermux_core::types::MAX_DEVICES as u8 {
        if devices & (1 << d) != 0 {
            e.drop_copy(d);
        }
    }
    e
}

/// Devices present in both entries at different locations.
fn relocated(old: &Entry, new: &Entry) -> u8 {
    (0..LOC_DEVICES as u8)
        .filter(|&d| old.present & new.present & (1 << d) != 0 && old.loc(d) != new.loc(d))
        .fold(0, |m, d| m | 1 << d)
}

/// Devices whose copy in `old` is not kept as it is in `new`: gone, or at
/// another location.
fn changed_copies(old: &Entry, new: &Entry) -> u8 {
    (old.present & !new.present) | relocated(old, new)
}

/// The durable entry of a decision's own block while its plan runs: the
/// old entry without the copies the plan overwrites and those the decision
/// drops or moves. The only current copy of a dirty block is kept even when
/// overwritten in place (as a disk overwrites a sector).
fn pre_entry(old: Entry, new: Entry, written: u8, home: u8) -> Entry {
    let old = strip_flags(old);
    let dropped = valid(&old) & !valid(&new);
    let removed = (written | changed_copies(&old, &new) | dropped) & !(1 << home);
    if valid(&old) & !removed == 0 {
        // Every current copy is being replaced. A dirty block's copy is the
        // only current data (home is older), so it stays; a clean block
        // falls back to its home copy.
        if old.dirty != 0 {
            return old;
        }
        return Entry {
            present: 1 << home,
            ..Entry::default()
        };
    }
    drop_devices(old, removed, home)
}

/// The durable entry of a block another decision touched (an eviction):
/// only copies both entries agree on. Also says whether `new` has copies
/// `old` lacks (which a decision must not add to another block).
fn reduction(old: Entry, new: Entry, home: u8) -> (Entry, bool) {
    let old = strip_flags(old);
    let new = strip_flags(new);
    let grew = valid(&new) & !valid(&old) != 0 || relocated(&old, &new) & !(1 << home) != 0;
    if old == new {
        return (new, false);
    }
    let removed = (changed_copies(&old, &new) | (valid(&old) & !valid(&new))) & !(1 << home);
    let mut r = drop_devices(old, removed, home);
    // Dirtiness cleared without I/O is not trusted; dirtiness added is.
    r.dirty |= new.dirty & r.present;
    if valid(&r) == 0 {
        r = Entry {
            present: 1 << home,
            ..Entry::default()
        };
    }
    (r, grew)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(present: u8, dirty: u8, slot: u32) -> Entry {
        Entry {
            present,
            dirty,
            stale: 0,
            flags: 0,
            loc: [slot, 0, 0],
        }
    }

    #[test]
    fn pre_entries_never_point_at_space_being_written() {
        let home = 1;
        // Write-back hit on a clean cached block: the cache copy is dropped
        // while it is overwritten.
        assert_eq!(
            pre_entry(e(0b11, 0, 5), e(0b11, 0b01, 5), 0b01, home),
            e(0b10, 0, 0)
        );
        // Dirty hit overwritten in place: unchanged (the only copy).
        assert_eq!(
            pre_entry(e(0b11, 0b01, 5), e(0b11, 0b01, 5), 0b01, home),
            e(0b11, 0b01, 5)
        );
        // Flush (writes home): keeps the dirty cache copy.
        assert_eq!(
            pre_entry(e(0b11, 0b01, 5), e(0b11, 0, 5), 0b10, home),
            e(0b11, 0b01, 5)
        );
        // Admission: nothing to drop before the fill.
        assert_eq!(
            pre_entry(e(0b10, 0, 0), e(0b11, 0, 7), 0b01, home),
            e(0b10, 0, 0)
        );
        // Write-through hit: the cache copy is dropped, home stays.
        assert_eq!(
            pre_entry(e(0b11, 0, 5), e(0b11, 0, 5), 0b11, home),
            e(0b10, 0, 0)
        );
    }

    #[test]
    fn evictions_are_recorded_before_the_slot_is_reused() {
        let home = 1;
        let (r, grew) = reduction(e(0b11, 0, 5), e(0b10, 0, 0), home);
        assert_eq!((r, grew), (e(0b10, 0, 0), false));
        let (_, grew) = reduction(e(0b10, 0, 0), e(0b11, 0, 3), home);
        assert!(grew);
    }
}
