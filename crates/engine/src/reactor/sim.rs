//! A reactor in virtual time, for deterministic tests of the real volume.
//!
//! File operations queued before [`Reactor::wait`] are submitted there,
//! each completing after a seeded random delay (so completions arrive out
//! of order, as on a real device), and are performed on the real file
//! (with `pread`/`pwrite`/`fdatasync`) at the moment they complete. Timers
//! complete at their deadlines. `wait` advances the virtual clock straight
//! to the next event instead of sleeping, so a test runs as fast as the
//! volume's own code allows, and the same seed gives the same run.
//!
//! [`Reactor::crash`] models the process being killed: every file operation
//! submitted and not yet completed has happened or not, by a seeded coin
//! flip each (as the kernel finishes some of a killed process's I/O and
//! not other), operations not yet submitted never happen, and nothing
//! completes afterwards. [`Reactor::power_cut`] does the same, and then
//! the reactor's [`Machine`] loses, keeps or tears each write not yet made
//! durable by a sync of its file (`power.rs`). Sockets do not exist here;
//! a front end under this reactor submits requests directly.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

use tiermux_core::rng::Rng;
use tiermux_core::Op;

use super::faults::FaultOp;
use super::power::Machine;
use super::{new_eventfd, run_job, Completion, FileJob, FileOp, Reactor, Waker};

/// The byte a simulated discard leaves in every byte of its range.
pub const DISCARDED_BYTE: u8 = 0xD5;

/// What an event does when its time comes.
enum Event {
    File(FileJob),
    Timer { deadline_ns: u64, token: u64 },
}

/// An event at its time; ordered by (time, submission order) only.
struct Scheduled {
    t: u64,
    seq: u64,
    ev: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

/// Counters of a simulated reactor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimReactorStats {
    /// File operations completed.
    pub file_ops: u64,
    /// Timers completed.
    pub timers: u64,
    /// At a crash: writes in flight that happened.
    pub crash_writes_kept: u64,
    /// At a crash: writes in flight or queued that never happened.
    pub crash_writes_lost: u64,
}

/// A reactor in virtual time (see the module documentation).
pub struct SimReactor {
    now_ns: u64,
    rng: Rng,
    max_delay_ns: u64,
    queued: Vec<Event>,
    /// Submitted events by (completion time, submission order).
    heap: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    crashed: bool,
    wake: Arc<OwnedFd>,
    machine: Machine,
    /// Counters.
    pub stats: SimReactorStats,
}

impl SimReactor {
    /// A reactor whose file operations take 1 ns to `max_delay_ns` each,
    /// drawn from `seed`; its clock starts at `start_ns`.
    pub fn new(seed: u64, max_delay_ns: u64, start_ns: u64) -> io::Result<SimReactor> {
        SimReactor::on_machine(seed, max_delay_ns, start_ns, Machine::new())
    }

    /// Like [`SimReactor::new`], on `machine`, which successive reactors
    /// share so that a power cut loses what every run left unsynced.
    pub fn on_machine(
        seed: u64,
        max_delay_ns: u64,
        start_ns: u64,
        machine: Machine,
    ) -> io::Result<SimReactor> {
        assert!(max_delay_ns >= 1, "a file operation takes some time");
        Ok(SimReactor {
            now_ns: start_ns,
            rng: Rng::new(seed),
            max_delay_ns,
            queued: Vec::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            crashed: false,
            wake: new_eventfd(true)?,
            machine,
            stats: SimReactorStats::default(),
        })
    }

    fn file(&mut self, fd: RawFd, op: FileOp, token: u64) {
        assert!(!self.crashed, "the simulated process has crashed");
        self.queued.push(Event::File(FileJob { fd, op, token }));
    }

    fn submit_queued(&mut self) {
        for ev in std::mem::take(&mut self.queued) {
            let t = match &ev {
                Event::File(_) => self.now_ns + 1 + self.rng.below(self.max_delay_ns),
                Event::Timer { deadline_ns, .. } => (*deadline_ns).max(self.now_ns),
            };
            self.seq += 1;
            self.heap.push(Reverse(Scheduled {
                t,
                seq: self.seq,
                ev,
            }));
        }
    }
}

impl SimReactor {
    /// Performs `job` on the real file, telling the machine about writes
    /// and syncs.
    fn perform(&mut self, job: &FileJob) -> i32 {
        let kind = match job.op {
            FileOp::Read { .. } | FileOp::ReadV { .. } => FaultOp::Read,
            FileOp::Write { .. } | FileOp::WriteV { .. } | FileOp::Discard { .. } => FaultOp::Write,
            FileOp::Sync => FaultOp::Sync,
        };
        if self.machine.fails(job.fd, kind, &mut self.rng) {
            // A failed write may have reached the file.
            if kind == FaultOp::Write && self.rng.below(2) == 0 {
                self.perform_unfailing(job);
            }
            return -rustix::io::Errno::IO.raw_os_error();
        }
        self.perform_unfailing(job)
    }

    fn perform_unfailing(&mut self, job: &FileJob) -> i32 {
        if let FileOp::Discard { offset, len } = job.op {
            return self.discard_now(job.fd, offset, len);
        }
        if let FileOp::Write { ptr, len, offset } = job.op {
            // SAFETY: the reactor's `write` contract keeps the buffer valid
            // and unmodified until the job's completion is returned, which
            // is after this.
            let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
            self.machine.wrote(job.fd, offset, bytes);
        }
        if let FileOp::WriteV { mut offset, .. } = job.op {
            // SAFETY: the `vectored` contract keeps the list and its buffers
            // valid and unmodified until the completion is returned.
            for v in unsafe { job.op.iovecs() } {
                // SAFETY: as above.
                let bytes =
                    unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
                self.machine.wrote(job.fd, offset, bytes);
                offset += v.iov_len as u64;
            }
        }
        let r = run_job(job);
        if matches!(job.op, FileOp::Sync) && r >= 0 {
            self.machine.synced(job.fd);
        }
        r
    }

    /// A discard leaves the range holding what a device may return after a
    /// TRIM: here, [`DISCARDED_BYTE`] everywhere, which matches no data a
    /// test writes, so a discard of space still in use shows up as wrong
    /// data. Like a write, it is pending until a sync.
    fn discard_now(&mut self, fd: RawFd, offset: u64, len: u64) -> i32 {
        let junk = vec![DISCARDED_BYTE; len as usize];
        self.machine.wrote(fd, offset, &junk);
        // SAFETY: the reactor's contract keeps `fd` open until the
        // discard's completion is returned, which is after this.
        let file = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        match rustix::io::pwrite(file, &junk, offset) {
            Ok(n) if n == junk.len() => 0,
            Ok(_) => -rustix::io::Errno::IO.raw_os_error(),
            Err(e) => -e.raw_os_error(),
        }
    }

    /// Performs `op` on `fd` at once (the blocking operations of
    /// [`Reactor::write_now`] and [`Reactor::sync_now`]).
    fn perform_now(&mut self, fd: RawFd, op: FileOp) -> io::Result<()> {
        assert!(!self.crashed, "the simulated process has crashed");
        match self.perform(&FileJob { fd, op, token: 0 }) {
            r if r < 0 => Err(io::Error::from_raw_os_error(-r)),
            _ => Ok(()),
        }
    }

    /// Ends the process: writes in flight happened or not by a coin flip.
    fn end_in_flight(&mut self) {
        self.crashed = true;
        for ev in std::mem::take(&mut self.queued) {
            if matches!(&ev, Event::File(job) if job.op.is_write()) {
                self.stats.crash_writes_lost += 1;
            }
        }
        while let Some(Reverse(Scheduled { ev, .. })) = self.heap.pop() {
            if let Event::File(job) = ev {
                if job.op.is_write() {
                    if self.rng.below(2) == 0 {
                        self.perform(&job);
                        self.stats.crash_writes_kept += 1;
                    } else {
                        self.stats.crash_writes_lost += 1;
                    }
                }
            }
        }
    }
}

impl Reactor for SimReactor {
    fn kind(&self) -> &'static str {
        "simulated"
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    unsafe fn read(&mut self, fd: RawFd, buf: *mut u8, len: u32, offset: u64, token: u64) {
        let op = FileOp::Read {
            ptr: buf as usize,
            len,
            offset,
        };
        self.file(fd, op, token);
    }

    unsafe fn write(&mut self, fd: RawFd, buf: *const u8, len: u32, offset: u64, token: u64) {
        let op = FileOp::Write {
            ptr: buf as usize,
            len,
            offset,
        };
        self.file(fd, op, token);
    }

    unsafe fn vectored(
        &mut self,
        fd: RawFd,
        dir: Op,
        iov: *const libc::iovec,
        count: u32,
        offset: u64,
        token: u64,
    ) {
        self.file(fd, FileOp::vectored(dir, iov, count, offset), token);
    }

    fn fsync(&mut self, fd: RawFd, token: u64) {
        self.file(fd, FileOp::Sync, token);
    }

    fn discard(&mut self, fd: RawFd, offset: u64, len: u64, token: u64) {
        self.file(fd, FileOp::Discard { offset, len }, token);
    }

    fn poll(&mut self, _fd: RawFd, _writable: bool, _token: u64) {
        panic!("the simulated reactor has no sockets; submit requests to the volume directly");
    }

    fn timer_at(&mut self, deadline_ns: u64, token: u64) {
        assert!(!self.crashed, "the simulated process has crashed");
        self.queued.push(Event::Timer { deadline_ns, token });
    }

    fn wait(&mut self, deadline_ns: Option<u64>, out: &mut Vec<Completion>) -> io::Result<()> {
        assert!(!self.crashed, "the simulated process has crashed");
        self.submit_queued();
        let Some(t) = self.heap.peek().map(|e| e.0.t) else {
            return match deadline_ns {
                Some(d) => {
                    self.now_ns = self.now_ns.max(d);
                    Ok(())
                }
                None => Err(io::Error::other(
                    "simulated reactor: nothing in flight and no deadline (the loop would block forever)",
                )),
            };
        };
        if let Some(d) = deadline_ns {
            if t > d {
                self.now_ns = self.now_ns.max(d);
                return Ok(());
            }
        }
        let ev = self.heap.pop().expect("peeked").0.ev;
        self.now_ns = self.now_ns.max(t);
        match ev {
            Event::File(job) => {
                self.stats.file_ops += 1;
                let result = self.perform(&job);
                out.push(Completion {
                    token: job.token,
                    result,
                });
            }
            Event::Timer { token, .. } => {
                self.stats.timers += 1;
                out.push(Completion { token, result: 0 });
            }
        }
        Ok(())
    }

    fn waker(&self) -> Waker {
        Waker::new(self.wake.clone())
    }

    fn serve_inline(&mut self, _fd: RawFd) {}

    fn crash(&mut self) {
        self.end_in_flight();
    }

    fn power_cut(&mut self) {
        self.end_in_flight();
        self.machine.power_cut(&mut self.rng);
    }

    fn write_now(&mut self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<()> {
        let op = FileOp::Write {
            ptr: buf.as_ptr() as usize,
            len: buf.len() as u32,
            offset,
        };
        self.perform_now(fd, op)
    }

    fn sync_now(&mut self, fd: RawFd) -> io::Result<()> {
        self.perform_now(fd, FileOp::Sync)
    }

    fn boot_id(&self) -> String {
        self.machine.boot_id()
    }
}
