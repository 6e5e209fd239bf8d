//! The synchronous fallback reactor, for systems without io_uring.
//!
//! File operations run as blocking `pread`/`pwrite`/`fdatasync` calls on a
//! small pool of worker threads, which post their results and wake the loop
//! through an eventfd. Socket readiness uses one-shot epoll registrations;
//! timers use one absolute CLOCK_MONOTONIC timerfd armed for the earliest
//! deadline. The loop blocks in `epoll_wait`.

use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex};

use tiermux_core::Op;

use rustix::event::epoll;
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};

use super::{
    new_eventfd, now_ns, run_job, Completion, FileJob as Job, FileOp, InlineFiles, Reactor, Waker,
    WAKE_TOKEN,
};

const EV_WAKE: u64 = u64::MAX;
const EV_TIMER: u64 = u64::MAX - 1;

#[derive(Default)]
struct Shared {
    jobs: VecDeque<Job>,
    done: Vec<Completion>,
    stop: bool,
}

struct Pool {
    shared: Mutex<Shared>,
    work: Condvar,
    wake: Arc<OwnedFd>,
}

/// The thread-pool and epoll reactor.
pub struct ThreadReactor {
    pool: Arc<Pool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    queued: Vec<Job>,
    epoll: OwnedFd,
    timerfd: OwnedFd,
    timers: BinaryHeap<std::cmp::Reverse<(u64, u64)>>,
    armed_ns: Option<u64>,
    /// Tokens of one-shot polls by file descriptor: (readable, writable).
    polls: HashMap<RawFd, (Option<u64>, Option<u64>)>,
    registered: HashSet<RawFd>,
    inline: InlineFiles,
}

impl ThreadReactor {
    /// A reactor with `workers` I/O threads.
    pub fn new(workers: usize) -> io::Result<Self> {
        let wake = new_eventfd(true)?;
        let pool = Arc::new(Pool {
            shared: Mutex::new(Shared::default()),
            work: Condvar::new(),
            wake: wake.clone(),
        });
        let threads = (0..workers.max(1))
            .map(|i| {
                let pool = pool.clone();
                std::thread::Builder::new()
                    .name(format!("tiermux-io-{i}"))
                    .spawn(move || worker(&pool))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &epoll,
            wake.as_fd(),
            epoll::EventData::new_u64(EV_WAKE),
            epoll::EventFlags::IN,
        )?;
        let timerfd = rustix::time::timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        epoll::add(
            &epoll,
            timerfd.as_fd(),
            epoll::EventData::new_u64(EV_TIMER),
            epoll::EventFlags::IN,
        )?;
        Ok(ThreadReactor {
            pool,
            threads,
            queued: Vec::new(),
            epoll,
            timerfd,
            timers: BinaryHeap::new(),
            armed_ns: None,
            polls: HashMap::new(),
            registered: HashSet::new(),
            inline: InlineFiles::default(),
        })
    }

    /// Queues a file job for the pool, unless it runs inline.
    fn queue(&mut self, job: Job) {
        if let Some(job) = self.inline.offer(job) {
            self.queued.push(job);
        }
    }

    /// Re-arms every socket poll; a closed descriptor's polls complete with
    /// the error.
    fn rearm_polls(&mut self, out: &mut Vec<Completion>) {
        let fds: Vec<RawFd> = self.polls.keys().copied().collect();
        for fd in fds {
            if let Err(e) = self.rearm_poll(fd) {
                // A closed descriptor: its polls complete with the error.
                let errno = -e.raw_os_error().unwrap_or(9);
                let (r, w) = self.polls.remove(&fd).unwrap_or((None, None));
                self.registered.remove(&fd);
                for t in [r, w].into_iter().flatten() {
                    out.push(Completion {
                        token: t,
                        result: errno,
                    });
                }
            }
        }
    }

    /// Handles one epoll event: a wake, the timer, or a socket's readiness.
    fn on_event(&mut self, data: u64, flags: epoll::EventFlags, out: &mut Vec<Completion>) {
        match data {
            EV_WAKE => {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(self.pool.wake.as_fd(), &mut b);
                out.push(Completion {
                    token: WAKE_TOKEN,
                    result: 0,
                });
            }
            EV_TIMER => {
                let mut b = [0u8; 8];
                let _ = rustix::io::read(self.timerfd.as_fd(), &mut b);
            }
            fd => {
                let fd = fd as RawFd;
                let (r, w) = self.polls.remove(&fd).unwrap_or((None, None));
                let hup = flags.intersects(epoll::EventFlags::ERR | epoll::EventFlags::HUP);
                let mut keep = (None, None);
                match r {
                    Some(t) if hup || flags.contains(epoll::EventFlags::IN) => {
                        out.push(Completion {
                            token: t,
                            result: 0,
                        })
                    }
                    other => keep.0 = other,
                }
                match w {
                    Some(t) if hup || flags.contains(epoll::EventFlags::OUT) => {
                        out.push(Completion {
                            token: t,
                            result: 0,
                        })
                    }
                    other => keep.1 = other,
                }
                if keep.0.is_some() || keep.1.is_some() {
                    self.polls.insert(fd, keep);
                }
            }
        }
    }

    /// Arms the timerfd for the earliest of the timers and `deadline_ns`.
    fn arm_timerfd(&mut self, deadline_ns: Option<u64>) -> io::Result<()> {
        let next = match (self.timers.peek().map(|r| r.0 .0), deadline_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if next == self.armed_ns {
            return Ok(());
        }
        let ts = |ns: u64| Timespec {
            tv_sec: (ns / 1_000_000_000) as _,
            tv_nsec: (ns % 1_000_000_000) as _,
        };
        let value = match next {
            // A zero it_value disarms, so a deadline of 0 becomes 1 ns.
            Some(ns) => ts(ns.max(1)),
            None => ts(0),
        };
        rustix::time::timerfd_settime(
            &self.timerfd,
            TimerfdTimerFlags::ABSTIME,
            &Itimerspec {
                it_interval: ts(0),
                it_value: value,
            },
        )?;
        self.armed_ns = next;
        Ok(())
    }

    fn rearm_poll(&mut self, fd: RawFd) -> io::Result<()> {
        let (r, w) = self.polls.get(&fd).copied().unwrap_or((None, None));
        let mut flags = epoll::EventFlags::ONESHOT;
        if r.is_some() {
            flags |= epoll::EventFlags::IN;
        }
        if w.is_some() {
            flags |= epoll::EventFlags::OUT;
        }
        if r.is_none() && w.is_none() {
            return Ok(());
        }
        // SAFETY: the caller of `poll` keeps `fd` open while its poll is
        // outstanding.
        let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
        let data = epoll::EventData::new_u64(fd as u64);
        if self.registered.contains(&fd) {
            match epoll::modify(&self.epoll, bfd, data, flags) {
                Err(rustix::io::Errno::NOENT) => epoll::add(&self.epoll, bfd, data, flags)?,
                other => other?,
            }
        } else {
            epoll::add(&self.epoll, bfd, data, flags)?;
            self.registered.insert(fd);
        }
        Ok(())
    }
}

fn worker(pool: &Pool) {
    let mut guard = pool.shared.lock().expect("pool lock");
    loop {
        if guard.stop {
            return;
        }
        if let Some(job) = guard.jobs.pop_front() {
            drop(guard);
            let result = run_job(&job);
            guard = pool.shared.lock().expect("pool lock");
            guard.done.push(Completion {
                token: job.token,
                result,
            });
            let _ = rustix::io::write(pool.wake.as_fd(), &1u64.to_ne_bytes());
        } else {
            guard = pool.work.wait(guard).expect("pool lock");
        }
    }
}

impl Drop for ThreadReactor {
    fn drop(&mut self) {
        self.pool.shared.lock().expect("pool lock").stop = true;
        self.pool.work.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Reactor for ThreadReactor {
    fn kind(&self) -> &'static str {
        "threads"
    }

    unsafe fn read(&mut self, fd: RawFd, buf: *mut u8, len: u32, offset: u64, token: u64) {
        let job = Job {
            fd,
            op: FileOp::Read {
                ptr: buf as usize,
                len,
                offset,
            },
            token,
        };
        self.queue(job);
    }

    unsafe fn write(&mut self, fd: RawFd, buf: *const u8, len: u32, offset: u64, token: u64) {
        let job = Job {
            fd,
            op: FileOp::Write {
                ptr: buf as usize,
                len,
                offset,
            },
            token,
        };
        self.queue(job);
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
        self.queue(Job { fd, op, token });
    }

    fn fsync(&mut self, fd: RawFd, token: u64) {
        let job = Job {
            fd,
            op: FileOp::Sync,
            token,
        };
        self.queue(job);
    }

    fn discard(&mut self, fd: RawFd, offset: u64, len: u64, token: u64) {
        let op = FileOp::Discard { offset, len };
        self.queue(Job { fd, op, token });
    }

    fn serve_inline(&mut self, fd: RawFd) {
        self.inline.add(fd);
    }

    fn poll(&mut self, fd: RawFd, writable: bool, token: u64) {
        let e = self.polls.entry(fd).or_insert((None, None));
        if writable {
            e.1 = Some(token);
        } else {
            e.0 = Some(token);
        }
        // Registered at the next wait, like every other queued operation.
    }

    fn timer_at(&mut self, deadline_ns: u64, token: u64) {
        self.timers.push(std::cmp::Reverse((deadline_ns, token)));
    }

    fn wait(&mut self, deadline_ns: Option<u64>, out: &mut Vec<Completion>) -> io::Result<()> {
        let start_len = out.len();
        self.inline.run(out);
        if !self.queued.is_empty() {
            let mut s = self.pool.shared.lock().expect("pool lock");
            s.jobs.extend(self.queued.drain(..));
            drop(s);
            self.pool.work.notify_all();
        }
        self.rearm_polls(out);
        loop {
            self.arm_timerfd(deadline_ns)?;
            // A deadline or timer already due does not wait for the timerfd,
            // which fires only once per arming.
            let now = now_ns();
            let due = deadline_ns.is_some_and(|d| d <= now)
                || self.timers.peek().is_some_and(|t| t.0 .0 <= now);
            let immediate = due
                || out.len() > start_len
                || !self.pool.shared.lock().expect("pool lock").done.is_empty();
            let timeout = if immediate { 0 } else { -1 };
            let mut events = epoll::EventVec::with_capacity(64);
            match epoll::wait(&self.epoll, &mut events, timeout) {
                Ok(()) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            let events: Vec<(u64, epoll::EventFlags)> = events
                .iter()
                .map(|ev| (ev.data.u64(), { ev.flags }))
                .collect();
            for (data, flags) in events {
                self.on_event(data, flags, out);
            }
            let now = now_ns();
            while let Some(std::cmp::Reverse((d, t))) = self.timers.peek().copied() {
                if d > now {
                    break;
                }
                self.timers.pop();
                out.push(Completion {
                    token: t,
                    result: 0,
                });
            }
            let deadline_hit = deadline_ns.is_some_and(|d| d <= now);
            out.append(&mut self.pool.shared.lock().expect("pool lock").done);
            // Drop the WAKE entries that only reported pool completions.
            if out.len() > start_len || deadline_hit {
                break;
            }
        }
        Ok(())
    }

    fn waker(&self) -> Waker {
        Waker::new(self.pool.wake.clone())
    }
}
