//! The dispatcher: per-block locking around a policy's decisions, and the
//! bookkeeping of the device operations that carry them out.
//!
//! Both worlds use it the same way. The driver submits block accesses;
//! the dispatcher waits for the block's lock, asks the policy to decide
//! *while holding it*, and hands back the operations that are ready to run.
//! The driver performs them (in virtual time or on real devices) and reports
//! completions; the dispatcher releases dependent operations, acknowledges
//! the client once the operations it waits for are done, and frees the lock
//! once every operation of the plan is done.
//!
//! Reads take the lock shared and writes and background jobs take it
//! exclusively, so a decision never sees a block while another plan is
//! changing it. A read decided alone may upgrade to exclusive (to fill a
//! cache); one decided beside other readers may not write.
//!
//! Work covering a range of blocks (a client access of several blocks, a
//! segment move) asks for every block's lock when it arrives: it holds at
//! once those it can have and queues behind earlier work at the others,
//! and runs once it holds them all. Every block's queue is in arrival
//! order, so no work ever waits for later work: ranges never deadlock, and
//! a later write never overtakes an earlier one on any block.
//!
//! A client access of several blocks keeps one tag per block: block
//! `access.block + i` is reported with tag `tag + i` (its operations'
//! [`Ready::tag`], its [`Acked`] and its [`Finished`]), so a driver routes
//! each block's data as if it had submitted the blocks one by one.

use std::collections::VecDeque;

use crate::map::{BlockMap, Entry, PlacementMap};
use crate::observe::Observation;
use crate::policy::{Ctx, LockView, Policy, PolicyError, TickCtx};
use crate::safe::Failures;

mod account;
mod locks;
pub mod merge;
mod repair;
use crate::types::{Access, Io, Job, Op, Outcome, Plan, PlanIndex, Purpose, NO_DEP};
use locks::{Locks, Waiting};

/// A device operation ready to be performed.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    /// The plan it belongs to (pass back to [`Dispatcher::complete`]).
    pub flight: u32,
    /// Its index within the plan.
    pub index: PlanIndex,
    /// The operation.
    pub io: Io,
    /// For a copy's write: the payload its source read completed with.
    pub src_payload: u64,
    /// The tag of the client block the operation serves (the access's tag
    /// plus [`Io::part`]), or [`NO_TAG`] for background jobs.
    pub tag: u64,
}

/// Tag of operations that belong to background jobs.
pub const NO_TAG: u64 = u64::MAX;

/// A block of a client access whose acknowledgement is due (an access of
/// several blocks is acknowledged block by block, all at once).
#[derive(Clone, Copy, Debug)]
pub struct Acked {
    /// The driver's tag for the block (the access's tag plus the block's
    /// index in it).
    pub tag: u64,
    /// The block's access (one block).
    pub access: Access,
    /// How the policy classified it.
    pub outcome: Outcome,
    /// For a read: the payload of the read that served the client.
    pub payload: u64,
    /// The access failed: a device operation serving the client (its read,
    /// or one of its writes) failed. A failed read's payload holds no data.
    /// A write whose plan can still fail or be saved by the repair is
    /// settled by [`Finished::failed`].
    pub failed: bool,
}

/// A change of the placement map, reported when change tracking is on (see
/// [`Dispatcher::track_changes`]): what a decision, a tick or a finished job
/// did to the map, with the entries before and after.
#[derive(Clone, Debug)]
pub struct Decided {
    /// The blocks a decision held locked (one block, or a job's range;
    /// its plan's operations are not yet performed), or `None` for changes
    /// made without I/O (ticks, finished jobs, warming).
    pub own: Option<std::ops::Range<u64>>,
    /// Devices the plan writes (bit per device).
    pub written_devices: u8,
    /// Every changed block with its entry before and after the change, and
    /// the decision's own blocks when the plan writes a device other than
    /// home (their copies there may be overwritten in place, unchanged).
    pub changes: Vec<(u64, Entry, Entry)>,
}

/// A plan whose operations have all completed, reported when change
/// tracking is on: once per block the plan held (a range job reports each
/// of its blocks).
#[derive(Clone, Copy, Debug)]
pub struct Finished {
    /// The tag of the client block (the access's tag plus the block's
    /// index in it), or [`NO_TAG`] for a background job.
    pub tag: u64,
    /// One of the blocks the plan held.
    pub block: u64,
    /// The block's entry when the plan finished, before any waiter decides
    /// (after the repair of a plan with failed operations).
    pub entry: Entry,
    /// The client access failed: its read failed, or (for a write) the
    /// block's current copies after the repair are not all writes of this
    /// plan that succeeded.
    pub failed: bool,
}

/// What [`Dispatcher::pop_event`] reports.
#[derive(Clone, Debug)]
pub enum MapEvent {
    /// The map changed.
    Decided(Decided),
    /// A plan finished.
    Finished(Finished),
}

#[derive(Clone, Copy, Debug)]
enum Work {
    Client {
        tag: u64,
        access: Access,
    },
    Job(Job),
    /// A client's discard of one block (no I/O; see [`Policy::trim`]).
    Trim {
        tag: u64,
        block: u64,
    },
}

impl Work {
    /// The first block the work locks.
    fn block(&self) -> u64 {
        match self {
            Work::Client { access, .. } => access.block,
            Work::Job(j) => j.block,
            Work::Trim { block, .. } => *block,
        }
    }
    /// One past the last block the work locks.
    fn end(&self) -> u64 {
        match self {
            Work::Client { access, .. } => access.end(),
            Work::Job(j) => j.block + j.blocks as u64,
            Work::Trim { block, .. } => block + 1,
        }
    }
    fn exclusive(&self) -> bool {
        !matches!(
            self,
            Work::Client {
                access: Access { op: Op::Read, .. },
                ..
            }
        )
    }
    /// The tag of the `index`-th block of the work.
    #[inline]
    fn block_tag(&self, index: u64) -> u64 {
        match self {
            Work::Client { tag, .. } => tag + index,
            Work::Trim { tag, .. } => *tag,
            Work::Job(_) => NO_TAG,
        }
    }
}

// The work queues and the lock waiters hold `Work` by value: keep it small.
const _: () = assert!(std::mem::size_of::<Work>() <= 24);

struct Flight {
    work: Work,
    exclusive: bool,
    ios: Vec<Io>,
    payloads: Vec<u64>,
    remaining: u32,
    acks_remaining: u32,
    acked: bool,
    outcome: Outcome,
    /// For a client access of one block: the payload of the read that
    /// served it. (An access of several blocks finds each block's in
    /// `payloads`.)
    client_payload: u64,
    /// The entries of the work's blocks before the decision.
    pre: Vec<Entry>,
    /// Operations that failed or were skipped.
    failures: Failures,
    /// An operation the client waits for failed.
    client_failed: bool,
    /// The plan gathers its copies ([`Plan::gather`]).
    gather: bool,
    /// Some operation of the plan waits for another (a copy): otherwise a
    /// completion has no dependents to look for.
    has_deps: bool,
    /// In a gathering plan, the reads not yet completed.
    reads_waiting: u32,
    /// In a gathering plan, the reads that failed (their dependents were
    /// skipped).
    failed_reads: Vec<PlanIndex>,
    /// Per operation, how many later operations copy what it returns;
    /// built on the first [`Dispatcher::copies_fed`] call for the plan.
    fed: Vec<u32>,
    /// For a client access of several blocks: the blocks (their `part`)
    /// whose client operation failed.
    failed_parts: Vec<u16>,
}

/// Counters about the dispatcher itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct DispatchStats {
    /// Accesses and jobs that had to wait for a block lock.
    pub lock_waits: u64,
    /// Background jobs started.
    pub jobs_started: u64,
    /// Plans currently in flight.
    pub in_flight: u64,
    /// Device operations that failed, and operations skipped because the
    /// read they copy failed.
    pub failed_ops: u64,
    /// Blocks whose entries were repaired after failed operations.
    pub repairs: u64,
}

/// Runs a policy: locking, decisions and the operations' life cycle.
pub struct Dispatcher {
    policy: Box<dyn Policy>,
    map: PlacementMap,
    locks: Locks,
    flights: Vec<Flight>,
    free_flights: Vec<u32>,
    plan: Plan,
    jobs: Vec<Job>,
    incoming: VecDeque<Work>,
    /// Work waiting for some of its blocks' locks (by the ids in the
    /// blocks' queues), and the free ids.
    waiting: Vec<Waiting>,
    free_waiting: Vec<u32>,
    /// The waiters a release just granted a lock (scratch).
    granted: Vec<u32>,
    /// Work that was granted the last lock it waited for, to run.
    resumed: VecDeque<Work>,
    /// The most blocks the policy decides at once
    /// ([`Policy::max_access_blocks`]).
    max_access_blocks: u32,
    to_finish: Vec<u32>,
    ready: VecDeque<Ready>,
    acked: VecDeque<Acked>,
    stats: DispatchStats,
    tracking: bool,
    change_buf: Vec<(u64, Entry)>,
    events: VecDeque<MapEvent>,
    /// The entries of the deciding work's blocks before its decision.
    pre: Vec<Entry>,
    /// Failed reads that shared their block's lock, repaired when the
    /// block's last reader lets go: the entry before the first of them,
    /// and what failed.
    deferred_repairs: BlockMap<(Entry, Failures)>,
}

impl Dispatcher {
    /// Wraps `policy`; `home` is the device holding unplaced blocks.
    pub fn new(policy: Box<dyn Policy>, home: u8) -> Self {
        let max_access_blocks = policy.max_access_blocks();
        assert!(
            (1..=u16::MAX as u32 + 1).contains(&max_access_blocks),
            "policy '{}' decides {max_access_blocks} blocks at once",
            policy.name()
        );
        Dispatcher {
            policy,
            map: PlacementMap::new(home),
            locks: Locks(BlockMap::default()),
            flights: Vec::new(),
            free_flights: Vec::new(),
            plan: Plan::default(),
            jobs: Vec::new(),
            incoming: VecDeque::new(),
            waiting: Vec::new(),
            free_waiting: Vec::new(),
            granted: Vec::new(),
            resumed: VecDeque::new(),
            max_access_blocks,
            to_finish: Vec::new(),
            ready: VecDeque::new(),
            acked: VecDeque::new(),
            stats: DispatchStats::default(),
            tracking: false,
            change_buf: Vec::new(),
            events: VecDeque::new(),
            pre: Vec::new(),
            deferred_repairs: BlockMap::default(),
        }
    }

    /// Wraps `policy` over an existing placement map (a restart), after the
    /// policy rebuilt its own state from it with [`Policy::restore`].
    pub fn with_map(mut policy: Box<dyn Policy>, mut map: PlacementMap) -> Result<Self, String> {
        policy.restore(&mut map)?;
        let home = map.home();
        let mut d = Dispatcher::new(policy, home);
        d.map = map;
        Ok(d)
    }

    /// Turns on change tracking: every map change and every finished plan
    /// is reported, in order, through [`Dispatcher::pop_event`], so that a
    /// driver can persist the map in step with the data it describes.
    pub fn track_changes(&mut self) {
        self.tracking = true;
        self.map.record_changes(true);
    }

    /// The next map event (tracking only), in the order they happened. A
    /// plan's changes are reported before [`Dispatcher::pop_ready`] hands out
    /// any of its operations.
    pub fn pop_event(&mut self) -> Option<MapEvent> {
        self.events.pop_front()
    }

    fn note_changes(&mut self, own: Option<std::ops::Range<u64>>, written_devices: u8) {
        if !self.tracking {
            return;
        }
        self.map.take_changes(&mut self.change_buf);
        // A plan that writes copies of its own blocks in place changes no
        // entry, but a driver persisting the map must know those copies are
        // being overwritten: such blocks are reported unchanged.
        let home_bit = 1u8 << self.map.home();
        let in_place = match &own {
            Some(range) if written_devices & !home_bit != 0 => range.clone(),
            _ => 0..0,
        };
        if in_place.end == in_place.start + 1 {
            let b = in_place.start;
            if !self.change_buf.iter().any(|&(c, _)| c == b) {
                self.change_buf.push((b, self.map.get(b)));
            }
        } else if in_place.end > in_place.start {
            // Which of the range's blocks changed already (one pass over the
            // changes, not one per block).
            let mut changed = vec![false; (in_place.end - in_place.start) as usize];
            for &(c, _) in &self.change_buf {
                if in_place.contains(&c) {
                    changed[(c - in_place.start) as usize] = true;
                }
            }
            for (b, seen) in in_place.zip(changed) {
                if !seen {
                    self.change_buf.push((b, self.map.get(b)));
                }
            }
        }
        if self.change_buf.is_empty() {
            return;
        }
        let own_range = own.clone().unwrap_or(0..0);
        let changes = self
            .change_buf
            .drain(..)
            .map(|(b, old)| (b, old, self.map.get(b)))
            .filter(|(b, old, new)| old != new || own_range.contains(b))
            .collect::<Vec<_>>();
        if !changes.is_empty() {
            self.events.push_back(MapEvent::Decided(Decided {
                own,
                written_devices,
                changes,
            }));
        }
    }

    /// The policy (for its name and controller state).
    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// The placement map.
    pub fn map(&self) -> &PlacementMap {
        &self.map
    }

    /// Hints that `block` will be accessed soon (see [`crate::prefetch`]):
    /// starts loading its map entry.
    #[inline]
    pub fn prefetch_entry(&self, block: u64) {
        self.map.prefetch(block);
    }

    /// Hints that `block` will be accessed soon, once its map entry has been
    /// hinted: passes the hint on to the policy's state at `stage`, and
    /// returns the entry (for the driver's own per-location state).
    #[inline]
    pub fn prefetch_state(&self, block: u64, stage: crate::prefetch::Stage) -> Entry {
        let entry = self.map.get(block);
        self.policy.prefetch(block, &entry, stage);
        entry
    }

    /// Whether a later operation of plan `flight` copies the data that its
    /// operation `index` (a read) returns: a driver may read a block that
    /// nothing copies straight into the client's buffer.
    pub fn feeds_copy(&self, flight: u32, index: PlanIndex) -> bool {
        let ios = &self.flights[flight as usize].ios;
        assert!(
            (index as usize) < ios.len(),
            "operation {index} outside plan {flight}"
        );
        ios[index as usize + 1..].iter().any(|io| io.after == index)
    }

    /// How many later operations of plan `flight` copy the data that its
    /// operation `index` returns. Each is handed out once, after `index`
    /// completed (at once, or with the rest of a gathering plan's copies),
    /// so a driver may hand each of them a reference to the buffer
    /// `index` filled.
    pub fn copies_fed(&mut self, flight: u32, index: PlanIndex) -> u32 {
        let f = &mut self.flights[flight as usize];
        assert!(
            (index as usize) < f.ios.len(),
            "operation {index} outside plan {flight}"
        );
        if f.fed.is_empty() {
            f.fed.resize(f.ios.len(), 0);
            for io in f.ios.iter().filter(|io| io.after != NO_DEP) {
                f.fed[io.after as usize] += 1;
            }
        }
        f.fed[index as usize]
    }

    /// Counters about locking and jobs.
    pub fn stats(&self) -> DispatchStats {
        let mut s = self.stats;
        s.in_flight = (self.flights.len() - self.free_flights.len()) as u64;
        s
    }

    /// True while some work holds `block`'s lock (a plan of it may still
    /// have device operations in flight).
    pub fn is_locked(&self, block: u64) -> bool {
        self.locks.is_locked(block)
    }

    /// True when nothing is in flight, waiting or queued.
    pub fn is_idle(&self) -> bool {
        self.flights.len() == self.free_flights.len()
            && self.incoming.is_empty()
            && self.resumed.is_empty()
            && self.ready.is_empty()
            && self.acked.is_empty()
    }

    /// Makes room in the placement map for `additional` more entries (for
    /// a driver about to pre-place that many blocks).
    pub fn reserve_entries(&mut self, additional: usize) {
        self.map.reserve(additional);
    }

    /// Keeps the placement map dense, an entry for each of `num_blocks`
    /// blocks ([`PlacementMap::make_dense`]): for a driver that already
    /// keeps per-block state for the whole volume (the simulator).
    pub fn make_map_dense(&mut self, num_blocks: u64) {
        self.map.make_dense(num_blocks);
    }

    /// Pre-places `block` without I/O (see [`Policy::warm`]).
    pub fn warm(&mut self, block: u64) -> bool {
        let placed = self.policy.warm(block, &mut self.map);
        self.note_changes(None, 0);
        placed
    }

    /// Submits a client access, tagged by the driver: block
    /// `access.block + i` is reported with tag `tag + i`. The policy
    /// decides it in pieces of at most [`Policy::max_access_blocks`]
    /// blocks, one after another in block order.
    // Inlined into the driver: `Access` (three fields) would otherwise be
    // passed in memory and read back whole, a stalled load on the
    // simulator's hottest path (measured: 2 % of its time).
    #[inline(always)]
    pub fn submit(&mut self, tag: u64, access: Access) {
        if access.blocks == 1 {
            let work = Work::Client { tag, access };
            if self.to_finish.is_empty() && self.resumed.is_empty() && self.incoming.is_empty() {
                // What `pump` would take first: start it without the queue.
                self.start(work, false);
            } else {
                self.incoming.push_back(work);
            }
        } else {
            self.queue_pieces(tag, access);
        }
        self.pump();
    }

    /// Queues a client access of several blocks as the pieces the policy
    /// decides at once.
    #[inline(never)]
    fn queue_pieces(&mut self, tag: u64, access: Access) {
        assert!(access.blocks >= 1, "an access covers at least one block");
        let mut done = 0;
        while done < access.blocks {
            let n = (access.blocks - done).min(self.max_access_blocks);
            let piece = Access::range(access.block + done as u64, n, access.op)
                .continuing(access.continues || done > 0);
            self.incoming.push_back(Work::Client {
                tag: tag + done as u64,
                access: piece,
            });
            done += n;
        }
    }

    /// Submits a client's discard of `block`, tagged by the driver: under
    /// the block's exclusive lock the policy drops the copies it keeps of
    /// it ([`Policy::trim`]). No operation runs; the driver learns that it
    /// is done from the plan's [`Finished`] event.
    pub fn submit_trim(&mut self, tag: u64, block: u64) {
        self.incoming.push_back(Work::Trim { tag, block });
        self.pump();
    }

    /// Begins a client's discard of blocks `first..end`: tells the policy
    /// ([`Policy::discarded`]) and returns, ascending, the blocks the map
    /// places away from their default, each of which the driver then
    /// submits with [`Dispatcher::submit_trim`]; the others hold nothing
    /// to release.
    pub fn discard(&mut self, first: u64, end: u64) -> Vec<u64> {
        assert!(first <= end, "a discard of blocks {first}..{end}");
        self.policy.discarded(first, end);
        if !self.map.is_dense() && self.map.len() as u64 <= end - first {
            let mut v: Vec<u64> = self
                .map
                .iter()
                .map(|(b, _)| b)
                .filter(|b| (first..end).contains(b))
                .collect();
            v.sort_unstable();
            v
        } else {
            (first..end).filter(|&b| self.map.has_entry(b)).collect()
        }
    }

    /// Submits background work directly (normally the policy queues jobs).
    pub fn submit_job(&mut self, job: Job) {
        assert!(job.blocks >= 1, "a job covers at least one block");
        self.incoming.push_back(Work::Job(job));
        self.pump();
    }

    /// Feeds the policy's controller and queues the jobs it asks for.
    pub fn tick(&mut self, obs: &Observation) {
        self.run_controller(|policy, ctx| policy.on_tick(obs, ctx));
        self.pump();
    }

    /// Hands the policy a changed parameter table (see
    /// [`Policy::reconfigure`]) and queues the jobs it asks for.
    pub fn reconfigure(&mut self, params: &crate::params::Params) -> Result<(), PolicyError> {
        let mut result = Ok(());
        self.run_controller(|policy, ctx| result = policy.reconfigure(params, ctx));
        self.pump();
        result
    }

    /// Runs `f` on the policy with a controller's context (the map, the
    /// locks, room for jobs), then records the map changes and queues the
    /// jobs it asked for.
    fn run_controller(&mut self, f: impl FnOnce(&mut dyn Policy, &mut TickCtx<'_>)) {
        self.jobs.clear();
        let mut ctx = TickCtx {
            map: &mut self.map,
            locks: &self.locks,
            jobs: &mut self.jobs,
        };
        f(self.policy.as_mut(), &mut ctx);
        self.note_changes(None, 0);
        self.queue_jobs();
    }

    /// Queues the jobs the policy just asked for.
    #[inline]
    fn queue_jobs(&mut self) {
        // Most decisions ask for none, and extending by nothing is not
        // free.
        if !self.jobs.is_empty() {
            self.incoming.extend(self.jobs.drain(..).map(Work::Job));
        }
    }

    /// The next operation ready to be performed.
    #[inline]
    pub fn pop_ready(&mut self) -> Option<Ready> {
        self.ready.pop_front()
    }

    /// The next client acknowledgement that is due.
    #[inline]
    pub fn pop_acked(&mut self) -> Option<Acked> {
        self.acked.pop_front()
    }

    /// Reports that operation `index` of plan `flight` completed; `payload`
    /// is the driver's handle on the data it read (ignored for writes).
    #[inline]
    pub fn complete(&mut self, flight: u32, index: PlanIndex, payload: u64) {
        self.settle(flight, index, payload, true);
    }

    /// Reports that operation `index` of plan `flight` failed. The writes
    /// that copy a failed read are skipped (never handed out); the client
    /// access fails if the operation served it; when the plan finishes,
    /// the blocks' entries are repaired (see [`crate::safe::after_failure`]).
    pub fn fail(&mut self, flight: u32, index: PlanIndex) {
        self.settle(flight, index, 0, false);
    }

    fn settle(&mut self, flight: u32, index: PlanIndex, payload: u64, ok: bool) {
        self.account(flight, index, payload, ok);
        let f = &mut self.flights[flight as usize];
        if !f.acked && f.acks_remaining == 0 {
            Self::ack(f, &mut self.acked);
        }
        if f.remaining == 0 {
            self.to_finish.push(flight);
            self.pump();
        }
    }

    fn pump(&mut self) {
        loop {
            if let Some(fid) = self.to_finish.pop() {
                self.finish(fid);
            } else if let Some(work) = self.resumed.pop_front() {
                self.start(work, true);
            } else if let Some(work) = self.incoming.pop_front() {
                self.start(work, false);
            } else {
                break;
            }
        }
    }

    /// Runs `work` once it holds its blocks' locks: at once when it
    /// already does (`held`) or gets them all now, else when granted the
    /// last ([`Dispatcher::release`]).
    #[inline(never)]
    fn start(&mut self, work: Work, held: bool) {
        if held || self.acquire(work) {
            self.run(work, work.exclusive());
        }
    }

    fn run(&mut self, work: Work, mut exclusive: bool) {
        let block = work.block();
        self.plan.clear();
        self.jobs.clear();
        self.pre.clear();
        match work.end() - block {
            1 => self.pre.push(self.map.get(block)),
            _ => self
                .pre
                .extend((block..work.end()).map(|b| self.map.get(b))),
        }
        let may_write = exclusive || self.reads_alone(&work);
        let mut ctx = Ctx {
            map: &mut self.map,
            locks: &self.locks,
            plan: &mut self.plan,
            jobs: &mut self.jobs,
            may_write,
        };
        let outcome = match work {
            Work::Client { access, .. } => {
                let outcome = self.policy.decide(access, &mut ctx);
                if access.blocks > 1 {
                    self.check_parts(access);
                }
                outcome
            }
            Work::Job(job) => {
                self.stats.jobs_started += 1;
                self.policy.start_job(job, &mut ctx);
                Outcome::NotApplicable
            }
            Work::Trim { block, .. } => {
                self.policy.trim(block, &mut ctx);
                assert!(
                    ctx.plan.ios.is_empty(),
                    "policy '{}' planned I/O for a trim",
                    self.policy.name()
                );
                Outcome::NotApplicable
            }
        };
        if !exclusive && self.plan.writes() {
            assert!(
                may_write,
                "policy '{}' wrote block {block} while sharing its lock",
                self.policy.name()
            );
            for b in block..work.end() {
                let st = self.locks.0.get_mut(&b).expect("lock held");
                st.readers -= 1;
                st.writer = true;
            }
            exclusive = true;
        }
        if self.tracking {
            let written = self
                .plan
                .ios
                .iter()
                .filter(|io| io.dir == Op::Write)
                .fold(0u8, |m, io| m | 1 << io.device);
            self.note_changes(Some(block..work.end()), written);
        }
        self.launch(work, exclusive, outcome);
        self.queue_jobs();
    }

    /// Checks the plan of a client access of several blocks: every client
    /// operation serves one of its blocks, and every block has one that the
    /// acknowledgement waits for.
    fn check_parts(&self, access: Access) {
        let mut served = vec![false; access.blocks as usize];
        for io in self
            .plan
            .ios
            .iter()
            .filter(|io| io.purpose == Purpose::Client)
        {
            assert!(
                (io.part as u32) < access.blocks,
                "policy '{}' planned a client operation for block {} of a {}-block access",
                self.policy.name(),
                io.part,
                access.blocks
            );
            served[io.part as usize] |= io.acks;
        }
        if let Some(i) = served.iter().position(|&s| !s) {
            panic!(
                "policy '{}' planned no client operation for block {i} of a {}-block access",
                self.policy.name(),
                access.blocks
            );
        }
    }

    /// Turns the decided plan into a flight: hands out the operations that
    /// depend on nothing, and acknowledges or finishes at once what waits
    /// for nothing.
    fn launch(&mut self, work: Work, exclusive: bool, outcome: Outcome) {
        let fid = match self.free_flights.pop() {
            Some(f) => f,
            None => {
                self.flights.push(Flight {
                    work,
                    exclusive,
                    ios: Vec::new(),
                    payloads: Vec::new(),
                    remaining: 0,
                    acks_remaining: 0,
                    acked: false,
                    outcome,
                    client_payload: 0,
                    pre: Vec::new(),
                    failures: Failures::default(),
                    client_failed: false,
                    gather: false,
                    has_deps: false,
                    reads_waiting: 0,
                    failed_reads: Vec::new(),
                    fed: Vec::new(),
                    failed_parts: Vec::new(),
                });
                (self.flights.len() - 1) as u32
            }
        };
        let f = &mut self.flights[fid as usize];
        f.work = work;
        f.exclusive = exclusive;
        // Hand the plan's buffer to the flight (no copy); the flight's old
        // buffer becomes the next plan's.
        std::mem::swap(&mut f.ios, &mut self.plan.ios);
        std::mem::swap(&mut f.pre, &mut self.pre);
        f.failures = Failures::default();
        f.client_failed = false;
        f.payloads.clear();
        f.payloads.resize(f.ios.len(), 0);
        f.remaining = f.ios.len() as u32;
        f.acked = false;
        f.outcome = outcome;
        f.client_payload = 0;
        if !f.failed_parts.is_empty() {
            f.failed_parts.clear();
        }
        f.gather = self.plan.gather;
        f.failed_reads.clear();
        f.fed.clear();
        // One pass over the plan: what the flight counts, and the
        // operations that wait for nothing, handed out in plan order.
        let (mut acks, mut reads, mut has_deps) = (0u32, 0u32, false);
        for (i, io) in f.ios.iter().enumerate() {
            acks += io.acks as u32;
            reads += (io.dir == Op::Read) as u32;
            if io.after == NO_DEP {
                self.ready.push_back(Ready {
                    flight: fid,
                    index: i as PlanIndex,
                    io: *io,
                    src_payload: 0,
                    tag: work.block_tag(io.part as u64),
                });
            } else {
                has_deps = true;
            }
        }
        f.acks_remaining = acks;
        f.has_deps = has_deps;
        f.reads_waiting = if f.gather { reads } else { 0 };
        if f.acks_remaining == 0 {
            Self::ack(f, &mut self.acked);
        }
        if f.remaining == 0 {
            self.to_finish.push(fid);
        }
    }

    // Out of line: inlined, its setup ran on every pass of `pump`.
    #[inline(never)]
    fn finish(&mut self, fid: u32) {
        let (work, exclusive, client_failed) = {
            let f = &self.flights[fid as usize];
            (f.work, f.exclusive, f.client_failed)
        };
        let failures = !self.flights[fid as usize].failures.is_empty();
        if failures {
            self.repair(fid);
        }
        if let Work::Job(job) = work {
            self.run_controller(|policy, ctx| policy.finish_job(job, ctx));
        }
        for block in work.block()..work.end() {
            if self.tracking {
                let failed = match failures {
                    true => self.write_failed(fid, block),
                    false => client_failed,
                };
                self.events.push_back(MapEvent::Finished(Finished {
                    tag: work.block_tag(block - work.block()),
                    block,
                    entry: self.map.get(block),
                    failed,
                }));
            }
            self.release(block, exclusive);
        }
        self.free_flights.push(fid);
    }
}

#[cfg(test)]
mod tests;
