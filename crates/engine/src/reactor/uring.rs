//! The io_uring reactor: one ring carries file I/O, socket polls, timers
//! and the wake-up eventfd, so the loop blocks in a single `io_uring_enter`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use tiermux_core::Op;

use io_uring::{opcode, squeue, types, IoUring};

use super::{
    new_eventfd, now_ns, Completion, FileJob, FileOp, InlineFiles, Reactor, Waker, WAKE_TOKEN,
};

/// Internal token of the standing eventfd read.
const EVENTFD_TOKEN: u64 = u64::MAX - 1;
/// Internal tokens of deadline timers: this base plus a 16-bit generation.
const DEADLINE_TOKEN_BASE: u64 = u64::MAX - 2 - 0xFFFF;

/// A wait polls (see [`Reactor::set_spin_ns`]) only when the last
/// completion came at most this long ago: an idle loop, woken only by its
/// timers, sleeps at once.
pub const SPIN_WINDOW_NS: u64 = 1_000_000;

/// A reactor over one io_uring instance.
pub struct UringReactor {
    ring: IoUring,
    backlog: Vec<squeue::Entry>,
    /// Timeout specifications referenced by queued timer entries; the kernel
    /// copies them when the entry is submitted, so they are dropped after
    /// each submission. Boxed so that their addresses survive the vector
    /// growing.
    #[allow(clippy::vec_box)]
    timespecs: Vec<Box<types::Timespec>>,
    eventfd: Arc<OwnedFd>,
    eventfd_buf: Box<[u8; 8]>,
    eventfd_armed: bool,
    inline: InlineFiles,
    /// The deadline timer on the ring: (deadline, token). A wait whose
    /// deadline is not earlier reuses it instead of passing a timeout to
    /// `io_uring_enter`, which costs microseconds on every wait.
    deadline_armed: Option<(u64, u64)>,
    deadline_gen: u64,
    /// How long a wait polls before it sleeps, ns (0: never).
    spin_ns: u64,
    /// When the last wait returned completions, ns.
    last_completion_ns: u64,
    /// The ring raises a flag while completions' task work is pending.
    taskrun_flag: bool,
}

impl UringReactor {
    /// A ring with `entries` submission slots.
    pub fn new(entries: u32) -> io::Result<Self> {
        // Cooperative task running: completions' task work waits for the
        // loop's next system call instead of interrupting it (kernels
        // before 5.19 refuse the flag; then a plain ring).
        // The task-run flag tells a wait whether completions' task work is
        // pending (see `wait`).
        let (ring, taskrun_flag) = match IoUring::builder()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(entries)
        {
            Ok(ring) => (ring, true),
            Err(_) => (IoUring::new(entries)?, false),
        };
        Ok(UringReactor {
            ring,
            backlog: Vec::new(),
            timespecs: Vec::new(),
            // Blocking: io_uring returns EAGAIN for a non-blocking file instead
            // of waiting for it.
            eventfd: new_eventfd(false)?,
            eventfd_buf: Box::new([0; 8]),
            eventfd_armed: false,
            inline: InlineFiles::default(),
            deadline_armed: None,
            deadline_gen: 0,
            spin_ns: 0,
            last_completion_ns: 0,
            taskrun_flag,
        })
    }

    fn push_backlog(&mut self) -> io::Result<()> {
        let mut i = 0;
        while i < self.backlog.len() {
            // SAFETY: every entry's buffers are kept alive by the callers'
            // contracts (`read`/`write`), by `self.eventfd_buf`, or by
            // `self.timespecs` until the submission below.
            let pushed = unsafe { self.ring.submission().push(&self.backlog[i]) };
            if pushed.is_err() {
                self.ring.submit()?;
                continue;
            }
            i += 1;
        }
        self.backlog.clear();
        Ok(())
    }
}

impl UringReactor {
    /// Queues `job`: inline when its file is served inline, else as the
    /// ring entry `entry` builds (tagged with the job's token).
    fn queue_file(&mut self, job: FileJob, entry: impl FnOnce() -> squeue::Entry) {
        let token = job.token;
        if self.inline.offer(job).is_some() {
            self.backlog.push(entry().user_data(token));
        }
    }

    /// Whether entering the kernel would do anything but wait: entries to
    /// submit, or completions' task work pending (known only on a ring
    /// that raises the task-run flag; on another, always).
    fn must_enter(&mut self) -> bool {
        let mut sq = self.ring.submission();
        sq.sync();
        !self.taskrun_flag || !sq.is_empty() || sq.taskrun()
    }

    /// Submits what is queued and polls the ring for up to `spin_ns`,
    /// stopping at `deadline_ns`, when completions have been coming;
    /// returns whether one arrived. It enters the kernel only when that
    /// does something ([`UringReactor::must_enter`]): completions whose
    /// task work is pending are posted only once the loop enters.
    fn poll_briefly(&mut self, deadline_ns: Option<u64>) -> io::Result<bool> {
        let now = now_ns();
        if self.spin_ns == 0 || now.saturating_sub(self.last_completion_ns) > SPIN_WINDOW_NS {
            return Ok(false);
        }
        let until = deadline_ns.map_or(now + self.spin_ns, |d| d.min(now + self.spin_ns));
        loop {
            if self.must_enter() {
                match self.ring.submit_and_wait(0) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if !self.ring.completion().is_empty() {
                return Ok(true);
            }
            if now_ns() >= until {
                return Ok(false);
            }
            std::hint::spin_loop();
        }
    }
}

impl Reactor for UringReactor {
    fn kind(&self) -> &'static str {
        "io_uring"
    }

    unsafe fn read(&mut self, fd: RawFd, buf: *mut u8, len: u32, offset: u64, token: u64) {
        let op = FileOp::Read {
            ptr: buf as usize,
            len,
            offset,
        };
        self.queue_file(FileJob { fd, op, token }, || {
            opcode::Read::new(types::Fd(fd), buf, len)
                .offset(offset)
                .build()
        });
    }

    unsafe fn write(&mut self, fd: RawFd, buf: *const u8, len: u32, offset: u64, token: u64) {
        let op = FileOp::Write {
            ptr: buf as usize,
            len,
            offset,
        };
        self.queue_file(FileJob { fd, op, token }, || {
            opcode::Write::new(types::Fd(fd), buf, len)
                .offset(offset)
                .build()
        });
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
        let op = FileOp::vectored(dir, iov, count, offset);
        self.queue_file(FileJob { fd, op, token }, || match dir {
            Op::Read => opcode::Readv::new(types::Fd(fd), iov, count)
                .offset(offset)
                .build(),
            Op::Write => opcode::Writev::new(types::Fd(fd), iov, count)
                .offset(offset)
                .build(),
        });
    }

    fn fsync(&mut self, fd: RawFd, token: u64) {
        let op = FileOp::Sync;
        if self.inline.offer(FileJob { fd, op, token }).is_none() {
            return;
        }
        self.backlog.push(
            opcode::Fsync::new(types::Fd(fd))
                .flags(types::FsyncFlags::DATASYNC)
                .build()
                .user_data(token),
        );
    }

    fn discard(&mut self, fd: RawFd, offset: u64, len: u64, token: u64) {
        let op = FileOp::Discard { offset, len };
        self.queue_file(FileJob { fd, op, token }, || {
            opcode::Fallocate::new(types::Fd(fd), len)
                .offset(offset)
                .mode(super::DISCARD_MODE.bits() as i32)
                .build()
        });
    }

    fn poll(&mut self, fd: RawFd, writable: bool, token: u64) {
        let mask = if writable {
            rustix::event::PollFlags::OUT.bits()
        } else {
            rustix::event::PollFlags::IN.bits()
        } as u32;
        self.backlog.push(
            opcode::PollAdd::new(types::Fd(fd), mask)
                .build()
                .user_data(token),
        );
    }

    fn timer_at(&mut self, deadline_ns: u64, token: u64) {
        let ts = Box::new(
            types::Timespec::new()
                .sec(deadline_ns / 1_000_000_000)
                .nsec((deadline_ns % 1_000_000_000) as u32),
        );
        let entry = opcode::Timeout::new(&*ts as *const types::Timespec)
            .flags(types::TimeoutFlags::ABS)
            .build()
            .user_data(token);
        self.timespecs.push(ts);
        self.backlog.push(entry);
    }

    fn wait(&mut self, deadline_ns: Option<u64>, out: &mut Vec<Completion>) -> io::Result<()> {
        if !self.eventfd_armed {
            let e = opcode::Read::new(
                types::Fd(self.eventfd.as_raw_fd()),
                self.eventfd_buf.as_mut_ptr(),
                8,
            )
            .build()
            .user_data(EVENTFD_TOKEN);
            self.backlog.push(e);
            self.eventfd_armed = true;
        }
        let inline_done = out.len();
        self.inline.run(out);
        let mut due = false;
        if let Some(d) = deadline_ns {
            if d <= now_ns() {
                due = true;
            } else if self.deadline_armed.is_none_or(|(armed, _)| d < armed) {
                // A later deadline keeps the earlier timer: its expiry only
                // ends one wait early.
                self.deadline_gen = (self.deadline_gen + 1) & 0xFFFF;
                let token = DEADLINE_TOKEN_BASE + self.deadline_gen;
                self.timer_at(d, token);
                self.deadline_armed = Some((d, token));
            }
        }
        self.push_backlog()?;
        let mut ready = due || out.len() > inline_done || !self.ring.completion().is_empty();
        if !ready {
            ready = self.poll_briefly(deadline_ns)?;
        }
        // A wait with completions already in hand enters the kernel only
        // to submit entries or to run completions' task work (the flag is
        // set only by a ring that raises it; a plain ring always enters).
        let res = if !ready || self.must_enter() {
            self.ring.submit_and_wait(if ready { 0 } else { 1 })
        } else {
            Ok(0)
        };
        self.timespecs.clear();
        match res {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        for cqe in self.ring.completion() {
            let token = cqe.user_data();
            if (DEADLINE_TOKEN_BASE..EVENTFD_TOKEN).contains(&token) {
                if self.deadline_armed.is_some_and(|(_, t)| t == token) {
                    self.deadline_armed = None;
                }
                continue;
            }
            if token == EVENTFD_TOKEN {
                self.eventfd_armed = false;
                out.push(Completion {
                    token: WAKE_TOKEN,
                    result: 0,
                });
                continue;
            }
            let mut result = cqe.result();
            if result == -rustix::io::Errno::TIME.raw_os_error() {
                // An expired timer is its normal completion.
                result = 0;
            }
            out.push(Completion { token, result });
        }
        if out.len() > inline_done {
            self.last_completion_ns = now_ns();
        }
        Ok(())
    }

    fn waker(&self) -> Waker {
        Waker::new(self.eventfd.clone())
    }

    fn set_spin_ns(&mut self, spin_ns: u64) {
        self.spin_ns = spin_ns;
    }

    fn start_queued(&mut self) -> io::Result<()> {
        if self.backlog.is_empty() {
            return Ok(());
        }
        self.push_backlog()?;
        match self.ring.submit() {
            // Entries the kernel did not take now are submitted by `wait`.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(()),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    }

    fn serve_inline(&mut self, fd: RawFd) {
        self.inline.add(fd);
    }
}
