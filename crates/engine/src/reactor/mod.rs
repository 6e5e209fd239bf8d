//! Reactors: where the engine's event loop submits I/O and waits.
//!
//! One thread runs the event loop. It queues file reads and writes, syncs,
//! socket readiness polls and absolute timers on a [`Reactor`], then calls
//! [`Reactor::wait`], which submits everything queued and blocks (never
//! spins) until something completes, a deadline passes or another thread
//! calls [`Waker::wake`]. Nothing queued reaches the kernel before `wait`,
//! so the loop can make metadata durable between queueing a write and
//! submitting it.
//!
//! - [`uring::UringReactor`]: one io_uring for files, sockets and timers.
//! - [`fallback::ThreadReactor`]: when io_uring is unavailable: epoll for
//!   sockets, a timerfd for timers and a small thread pool doing blocking
//!   `pread`/`pwrite`/`fdatasync`.
//! - [`sim::SimReactor`]: virtual time for tests: file operations complete
//!   after seeded random delays, in any order, and a crash decides which of
//!   those in flight happened; the same seed gives the same run.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use tiermux_core::Op;

pub mod fallback;
pub mod faults;
pub mod power;
pub mod power_loss;
pub mod sim;
pub mod uring;

/// Token reported when a [`Waker`] woke the loop.
pub const WAKE_TOKEN: u64 = u64::MAX;

/// A finished operation: its token and result (bytes transferred, 0, or a
/// negative errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The token the operation was queued with.
    pub token: u64,
    /// Bytes read or written, 0 for syncs, polls and timers, or `-errno`.
    pub result: i32,
}

/// What a reactor does. Operations complete in any order.
pub trait Reactor: Send {
    /// Short name for logs ("io_uring", "threads" or "simulated").
    fn kind(&self) -> &'static str;

    /// The loop's clock, ns: CLOCK_MONOTONIC ([`now_ns`]) for real reactors,
    /// a virtual clock for the simulated one. Deadlines and timers use it.
    fn now_ns(&self) -> u64 {
        now_ns()
    }

    /// Queues a read of `len` bytes at `offset` of `fd` into `buf`.
    ///
    /// # Safety
    /// `buf` must stay valid for writes of `len` bytes, and must not be
    /// accessed otherwise, until `wait` returns this token's completion;
    /// `fd` must stay open until then.
    unsafe fn read(&mut self, fd: RawFd, buf: *mut u8, len: u32, offset: u64, token: u64);

    /// Queues a write of `len` bytes from `buf` at `offset` of `fd`.
    ///
    /// # Safety
    /// `buf` must stay valid for reads of `len` bytes and unmodified until
    /// `wait` returns this token's completion; `fd` must stay open.
    unsafe fn write(&mut self, fd: RawFd, buf: *const u8, len: u32, offset: u64, token: u64);

    /// Queues a vectored operation at `offset` of `fd`: a read of
    /// consecutive bytes into the `count` buffers that `iov` lists, each
    /// filled in turn (`preadv`), or a write of those buffers one after
    /// another (`pwritev`).
    ///
    /// # Safety
    /// As for [`Reactor::read`] or [`Reactor::write`], for every listed
    /// buffer; and the list itself stays valid and unmodified until the
    /// completion is returned.
    unsafe fn vectored(
        &mut self,
        fd: RawFd,
        dir: Op,
        iov: *const libc::iovec,
        count: u32,
        offset: u64,
        token: u64,
    );

    /// Queues an `fdatasync` of `fd` (which must stay open until it completes).
    fn fsync(&mut self, fd: RawFd, token: u64);

    /// Queues a discard of `len` bytes at `offset` of `fd` (which must stay
    /// open until it completes): the space holds nothing the caller needs,
    /// and the device may forget it (TRIM on an SSD). Performed as
    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`, which frees a file's blocks
    /// and discards (or zeroes) a block device's range; completes with 0 or
    /// `-errno` (`-EOPNOTSUPP` where the file system or device cannot).
    /// What the range reads afterwards is undefined to the caller.
    fn discard(&mut self, fd: RawFd, offset: u64, len: u64, token: u64);

    /// Queues a one-shot readiness poll: completes once `fd` is readable (or
    /// writable when `writable`), or has an error or hang-up.
    fn poll(&mut self, fd: RawFd, writable: bool, token: u64);

    /// Queues a timer that completes at `deadline_ns` on [`Reactor::now_ns`]'s
    /// clock.
    fn timer_at(&mut self, deadline_ns: u64, token: u64);

    /// Submits everything queued and blocks until at least one completion,
    /// until `deadline_ns` passes, or until a wake; appends completions to
    /// `out` (a wake appears as [`WAKE_TOKEN`]).
    fn wait(&mut self, deadline_ns: Option<u64>, out: &mut Vec<Completion>) -> io::Result<()>;

    /// A handle other threads use to wake [`Reactor::wait`].
    fn waker(&self) -> Waker;

    /// For tests: the process is killed now. Operations in flight have
    /// happened or not, as the reactor models it, and nothing completes
    /// afterwards. Real reactors leave this to the kernel (their drop
    /// waits for what is running) and do nothing here.
    fn crash(&mut self) {}

    /// For tests: the power fails now. Like [`Reactor::crash`], and
    /// besides, writes not yet made durable by a sync of their file are
    /// lost, kept or torn, as the reactor models it. Real reactors cannot
    /// do this and panic.
    fn power_cut(&mut self) {
        panic!("the {} reactor cannot simulate a power cut", self.kind());
    }

    /// Writes `buf` at `offset` of `fd` now, blocking (the journal's
    /// appends, which must be in the kernel before a reply). Going through
    /// the reactor lets the simulated one model what a power cut keeps.
    fn write_now(&mut self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<()> {
        // SAFETY: `fd` is open for the duration of this call (the caller
        // holds its file).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        write_full(fd, buf, offset)
            .map(|_| ())
            .map_err(io::Error::from)
    }

    /// `fdatasync`s `fd` now, blocking.
    fn sync_now(&mut self, fd: RawFd) -> io::Result<()> {
        // SAFETY: as in `write_now`.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::fs::fdatasync(fd).map_err(io::Error::from)
    }

    /// Identifies the current boot of the machine: recovery tells a crash
    /// of the process (same boot: the kernel kept every write it was
    /// handed) from a power cut or reboot. Real reactors read the kernel's
    /// boot id; the simulated one counts its power cuts.
    fn boot_id(&self) -> String {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| format!("unknown-{}-{}", std::process::id(), now_ns()))
    }

    /// Lets [`Reactor::wait`] poll for completions for up to `spin_ns`
    /// before it sleeps, while completions keep coming (see
    /// [`uring::SPIN_WINDOW_NS`]): on a virtual machine a sleeping loop is
    /// woken tens of microseconds late. 0 never polls. Reactors that cannot
    /// poll ignore it.
    fn set_spin_ns(&mut self, spin_ns: u64) {
        let _ = spin_ns;
    }

    /// Starts the operations queued so far without waiting for any (the
    /// next `wait` reports their completions), so that they run while the
    /// loop does other long work. The caller makes sure the ordering
    /// promise above holds at this point, as before a `wait` (the event
    /// loop calls it only after committing metadata). Reactors that start
    /// operations only when they wait ignore it.
    fn start_queued(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Asks the reactor to perform file operations on `fd` (reads and
    /// writes up to [`INLINE_MAX_BYTES`], and syncs) itself, synchronously,
    /// at the start of the next `wait`, instead of handing them to the
    /// kernel or a worker thread.
    ///
    /// For files in memory (tmpfs), where an operation is a copy of a few
    /// microseconds: io_uring cannot complete such a read without blocking
    /// and passes it to a kernel worker thread, and the hand-off and wake-up
    /// cost several times the copy. Queued operations still do not happen
    /// before `wait`, so the ordering promise above holds.
    fn serve_inline(&mut self, fd: RawFd);
}

/// Largest read or write [`Reactor::serve_inline`] performs on the loop's
/// thread; larger ones go the usual way, so that one big copy does not stall
/// every other request.
pub const INLINE_MAX_BYTES: u32 = 1 << 20;

/// A file operation to run with blocking system calls.
#[derive(Clone, Copy)]
pub(crate) enum FileOp {
    Read {
        ptr: usize,
        len: u32,
        offset: u64,
    },
    Write {
        ptr: usize,
        len: u32,
        offset: u64,
    },
    /// A vectored read: `count` buffers listed at `iov`.
    ReadV {
        iov: usize,
        count: u32,
        offset: u64,
    },
    /// A vectored write: `count` buffers listed at `iov`.
    WriteV {
        iov: usize,
        count: u32,
        offset: u64,
    },
    Sync,
    /// A discard of `len` bytes at `offset` (see [`Reactor::discard`]).
    Discard {
        offset: u64,
        len: u64,
    },
}

impl FileOp {
    /// The vectored operation of direction `dir` over the `count` buffers
    /// listed at `iov`.
    pub(crate) fn vectored(dir: Op, iov: *const libc::iovec, count: u32, offset: u64) -> Self {
        let iov = iov as usize;
        match dir {
            Op::Read => FileOp::ReadV { iov, count, offset },
            Op::Write => FileOp::WriteV { iov, count, offset },
        }
    }

    /// True for the operations that change the file.
    pub(crate) fn is_write(&self) -> bool {
        matches!(
            self,
            FileOp::Write { .. } | FileOp::WriteV { .. } | FileOp::Discard { .. }
        )
    }

    /// The buffers a vectored operation lists (empty for the others).
    ///
    /// # Safety
    /// The list must be valid, as the reactor's `vectored` contract
    /// promises until the operation's completion is returned.
    pub(crate) unsafe fn iovecs(&self) -> &[libc::iovec] {
        match *self {
            // SAFETY: by this function's contract.
            FileOp::ReadV { iov, count, .. } | FileOp::WriteV { iov, count, .. } => unsafe {
                std::slice::from_raw_parts(iov as *const libc::iovec, count as usize)
            },
            _ => &[],
        }
    }

    /// Bytes the operation transfers (0 for a sync or a discard).
    pub(crate) fn len_bytes(&self) -> u64 {
        match *self {
            FileOp::Read { len, .. } | FileOp::Write { len, .. } => len as u64,
            // SAFETY: a queued operation's list is valid (see `iovecs`).
            FileOp::ReadV { .. } | FileOp::WriteV { .. } => unsafe { self.iovecs() }
                .iter()
                .map(|v| v.iov_len as u64)
                .sum(),
            FileOp::Sync | FileOp::Discard { .. } => 0,
        }
    }
}

/// The `fallocate` mode of a discard: free the range, keep the size.
pub(crate) const DISCARD_MODE: rustix::fs::FallocateFlags =
    rustix::fs::FallocateFlags::PUNCH_HOLE.union(rustix::fs::FallocateFlags::KEEP_SIZE);

/// A file operation and the token its completion carries.
pub(crate) struct FileJob {
    pub(crate) fd: RawFd,
    pub(crate) op: FileOp,
    pub(crate) token: u64,
}

/// Runs one job with blocking system calls; returns the completion result.
pub(crate) fn run_job(job: &FileJob) -> i32 {
    // SAFETY: the reactor's `read`/`write` contracts keep `fd` open and the
    // buffer valid and otherwise unused until this job's completion is
    // returned by `wait`, which happens after this function returns.
    let fd = unsafe { BorrowedFd::borrow_raw(job.fd) };
    let r = match job.op {
        FileOp::Read { ptr, len, offset } => {
            // SAFETY: see above; the buffer is valid for writes of `len`.
            let buf = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len as usize) };
            read_full(fd, buf, offset)
        }
        FileOp::Write { ptr, len, offset } => {
            // SAFETY: see above; the buffer is valid for reads of `len`.
            let buf = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
            write_full(fd, buf, offset)
        }
        FileOp::ReadV { offset, .. } => {
            // SAFETY: see above; every listed buffer is valid for writes.
            vectored_full(fd, unsafe { job.op.iovecs() }, offset, false)
        }
        FileOp::WriteV { offset, .. } => {
            // SAFETY: see above; every listed buffer is valid for reads.
            vectored_full(fd, unsafe { job.op.iovecs() }, offset, true)
        }
        FileOp::Sync => rustix::fs::fdatasync(fd).map(|_| 0),
        FileOp::Discard { offset, len } => {
            rustix::fs::fallocate(fd, DISCARD_MODE, offset, len).map(|_| 0)
        }
    };
    match r {
        Ok(n) => n as i32,
        Err(e) => -e.raw_os_error(),
    }
}

fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> rustix::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// A `preadv`/`pwritev` of the buffers `iov` lists; a short transfer (rare:
/// a signal, the end of the file) continues buffer by buffer.
fn vectored_full(
    fd: BorrowedFd<'_>,
    iov: &[libc::iovec],
    offset: u64,
    write: bool,
) -> rustix::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let total: usize = iov.iter().map(|v| v.iov_len).sum();
    let count = iov.len().min(libc::c_int::MAX as usize) as libc::c_int;
    let first = loop {
        // SAFETY: the caller's buffers are valid for the transfer (the
        // reactor's contract) and `iov` lists `count` of them.
        let n = unsafe {
            if write {
                libc::pwritev(fd.as_raw_fd(), iov.as_ptr(), count, offset as libc::off_t)
            } else {
                libc::preadv(fd.as_raw_fd(), iov.as_ptr(), count, offset as libc::off_t)
            }
        };
        if n >= 0 {
            break n as usize;
        }
        let errno = rustix::io::Errno::from_raw_os_error(
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        );
        if errno != rustix::io::Errno::INTR {
            return Err(errno);
        }
    };
    if first == total || (first == 0 && !write) {
        return Ok(first);
    }
    // Finish buffer by buffer from where the vectored call stopped.
    let mut done = first;
    let mut start = 0;
    for v in iov {
        let end = start + v.iov_len;
        if end > done {
            let skip = done - start;
            let n = if write {
                // SAFETY: as above, for the rest of this buffer.
                let b = unsafe {
                    std::slice::from_raw_parts(
                        (v.iov_base as *const u8).add(skip),
                        v.iov_len - skip,
                    )
                };
                write_full(fd, b, offset + done as u64)?
            } else {
                // SAFETY: as above, for the rest of this buffer.
                let b = unsafe {
                    std::slice::from_raw_parts_mut(
                        (v.iov_base as *mut u8).add(skip),
                        v.iov_len - skip,
                    )
                };
                read_full(fd, b, offset + done as u64)?
            };
            done += n;
            if n < v.iov_len - skip {
                break;
            }
        }
        start = end;
    }
    Ok(done)
}

fn write_full(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> rustix::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pwrite(fd, &buf[done..], offset + done as u64) {
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The files a reactor serves inline ([`Reactor::serve_inline`]) and the
/// operations queued on them.
#[derive(Default)]
pub(crate) struct InlineFiles {
    fds: Vec<RawFd>,
    queued: Vec<FileJob>,
}

impl InlineFiles {
    /// Serves `fd` inline from now on.
    pub(crate) fn add(&mut self, fd: RawFd) {
        if !self.fds.contains(&fd) {
            self.fds.push(fd);
        }
    }

    /// Keeps `job` if it is to run inline, else gives it back.
    pub(crate) fn offer(&mut self, job: FileJob) -> Option<FileJob> {
        let small = job.op.len_bytes() <= INLINE_MAX_BYTES as u64;
        if small && self.fds.contains(&job.fd) {
            self.queued.push(job);
            None
        } else {
            Some(job)
        }
    }

    /// Runs the queued jobs in order and appends their completions.
    pub(crate) fn run(&mut self, out: &mut Vec<Completion>) {
        for job in self.queued.drain(..) {
            out.push(Completion {
                token: job.token,
                result: run_job(&job),
            });
        }
    }
}

/// Wakes a reactor's loop from another thread.
#[derive(Clone, Debug)]
pub struct Waker {
    fd: Arc<OwnedFd>,
}

impl Waker {
    fn new(fd: Arc<OwnedFd>) -> Self {
        Waker { fd }
    }

    /// Wakes the loop (cheap; coalesces with wakes not yet consumed).
    pub fn wake(&self) {
        // An eventfd write only fails when the counter would overflow,
        // which means wakes are pending anyway.
        let _ = rustix::io::write(self.fd.as_fd(), &1u64.to_ne_bytes());
    }
}

/// The loop's clock: CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Sets the calling thread's timer slack to 1 ns, so that its timed waits
/// (futex, epoll, nanosleep) wake when asked instead of up to 50 µs late.
pub fn precise_timers() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}

fn new_eventfd(nonblocking: bool) -> io::Result<Arc<OwnedFd>> {
    let mut flags = rustix::event::EventfdFlags::CLOEXEC;
    if nonblocking {
        flags |= rustix::event::EventfdFlags::NONBLOCK;
    }
    Ok(Arc::new(rustix::event::eventfd(0, flags)?))
}

/// Which reactor to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReactorKind {
    /// io_uring when the kernel allows it, else threads.
    Auto,
    /// io_uring or an error.
    Uring,
    /// The thread-pool fallback.
    Threads,
}

/// Builds a reactor of `kind`; `Auto` falls back to threads when io_uring
/// cannot be set up (old kernel, seccomp, `io_uring_disabled`).
pub fn build_reactor(kind: ReactorKind) -> io::Result<Box<dyn Reactor>> {
    match kind {
        ReactorKind::Uring => Ok(Box::new(uring::UringReactor::new(1024)?)),
        ReactorKind::Threads => Ok(Box::new(fallback::ThreadReactor::new(4)?)),
        ReactorKind::Auto => match uring::UringReactor::new(1024) {
            Ok(r) => Ok(Box::new(r)),
            Err(_) => Ok(Box::new(fallback::ThreadReactor::new(4)?)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::AlignedBuf;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[track_caller]
    fn wait_for(r: &mut dyn Reactor, tokens: &[u64]) -> Vec<Completion> {
        let mut got = Vec::new();
        let deadline = now_ns() + 5_000_000_000;
        while !tokens
            .iter()
            .all(|t| got.iter().any(|c: &Completion| c.token == *t))
        {
            assert!(now_ns() < deadline, "timed out; got {got:?}");
            r.wait(Some(now_ns() + 100_000_000), &mut got).unwrap();
        }
        got
    }

    /// The list of `bufs` for a vectored operation.
    fn iovecs(bufs: &mut [AlignedBuf]) -> Vec<libc::iovec> {
        bufs.iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect()
    }

    fn exercise(mut r: Box<dyn Reactor>, tag: &str) {
        let dir = std::env::temp_dir().join(format!(
            "tiermux-reactor-{}-{tag}-{}",
            r.kind(),
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![0u8; 8192]).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let fd = f.as_raw_fd();
        let mut w = AlignedBuf::zeroed(4096);
        w.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        // SAFETY: `w` lives until its completion is waited for below.
        unsafe { r.write(fd, w.as_mut_ptr(), 4096, 4096, 1) };
        let got = wait_for(r.as_mut(), &[1]);
        assert_eq!(got.iter().find(|c| c.token == 1).unwrap().result, 4096);
        let mut rd = AlignedBuf::zeroed(4096);
        // SAFETY: `rd` lives until its completion is waited for below.
        unsafe { r.read(fd, rd.as_mut_ptr(), 4096, 4096, 2) };
        r.fsync(fd, 3);
        let got = wait_for(r.as_mut(), &[2, 3]);
        assert!(got.iter().all(|c| c.result >= 0), "{got:?}");
        assert_eq!(&rd[..], &w[..]);
        // Vectored: two buffers written one after the other, read back
        // into two others.
        let mut parts = [AlignedBuf::zeroed(4096), AlignedBuf::zeroed(4096)];
        parts[0].fill(0x11);
        parts[1].fill(0x22);
        let iov = iovecs(&mut parts);
        // SAFETY: `parts` and `iov` live until the completion below.
        unsafe { r.vectored(fd, Op::Write, iov.as_ptr(), 2, 4096, 4) };
        let got = wait_for(r.as_mut(), &[4]);
        assert_eq!(got.iter().find(|c| c.token == 4).unwrap().result, 8192);
        let mut back = [AlignedBuf::zeroed(4096), AlignedBuf::zeroed(4096)];
        let iov = iovecs(&mut back);
        // SAFETY: `back` and `iov` live until the completion below.
        unsafe { r.vectored(fd, Op::Read, iov.as_ptr(), 2, 4096, 5) };
        let got = wait_for(r.as_mut(), &[5]);
        assert_eq!(got.iter().find(|c| c.token == 5).unwrap().result, 8192);
        assert!(back[0].iter().all(|&b| b == 0x11) && back[1].iter().all(|&b| b == 0x22));
        // A discard frees the file's space (every file system the tests
        // run on punches holes), and the range reads as zeros.
        let allocated =
            |f: &std::fs::File| std::os::unix::fs::MetadataExt::blocks(&f.metadata().unwrap());
        let before = allocated(&f);
        r.discard(fd, 4096, 8192, 6);
        let got = wait_for(r.as_mut(), &[6]);
        assert_eq!(
            got.iter().find(|c| c.token == 6).unwrap().result,
            0,
            "discard"
        );
        assert!(
            allocated(&f) < before,
            "{} -> {} sectors",
            before,
            allocated(&f)
        );
        let iov = iovecs(&mut back);
        // SAFETY: `back` and `iov` live until the completion below.
        unsafe { r.vectored(fd, Op::Read, iov.as_ptr(), 2, 4096, 7) };
        let got = wait_for(r.as_mut(), &[7]);
        assert_eq!(got.iter().find(|c| c.token == 7).unwrap().result, 8192);
        assert!(back.iter().all(|b| b.iter().all(|&x| x == 0)));
        // Timers complete in deadline order and not early.
        let t0 = now_ns();
        r.timer_at(t0 + 3_000_000, 11);
        r.timer_at(t0 + 1_000_000, 10);
        let mut got: Vec<Completion> = Vec::new();
        while got.iter().filter(|c| c.token != WAKE_TOKEN).count() < 2 {
            r.wait(None, &mut got).unwrap();
        }
        let order: Vec<u64> = got
            .iter()
            .map(|c| c.token)
            .filter(|&t| t != WAKE_TOKEN)
            .collect();
        assert_eq!(order, vec![10, 11]);
        assert!(now_ns() >= t0 + 3_000_000);
        // A wake from another thread ends a wait with no deadline.
        let waker = r.waker();
        let h = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            waker.wake();
        });
        let mut got = Vec::new();
        r.wait(None, &mut got).unwrap();
        assert!(got.iter().any(|c| c.token == WAKE_TOKEN));
        h.join().unwrap();
        // Socket readiness.
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        r.poll(a.as_raw_fd(), false, 20);
        r.poll(a.as_raw_fd(), true, 21);
        let got = wait_for(r.as_mut(), &[21]);
        assert!(!got.iter().any(|c| c.token == 20), "not readable yet");
        (&b).write_all(b"x").unwrap();
        wait_for(r.as_mut(), &[20]);
        // Inline files: nothing happens before `wait`, then the operations
        // complete in that same call, large ones through the usual path.
        r.serve_inline(fd);
        let mut big = AlignedBuf::zeroed(INLINE_MAX_BYTES as usize + 4096);
        big.iter_mut().for_each(|b| *b = 7);
        w.iter_mut().for_each(|b| *b = 0xab);
        // SAFETY: `w` and `big` live until their completions are waited for.
        unsafe {
            r.write(fd, w.as_mut_ptr(), 4096, 0, 30);
            r.write(fd, big.as_mut_ptr(), big.len() as u32, 8192, 31);
        }
        r.fsync(fd, 32);
        use std::os::unix::fs::FileExt;
        let mut before = [0u8; 1];
        f.read_exact_at(&mut before, 0).unwrap();
        assert_eq!(before[0], 0, "an inline write ran before wait");
        let mut got = Vec::new();
        r.wait(None, &mut got).unwrap();
        let inline: Vec<_> = got
            .iter()
            .filter(|c| c.token == 30 || c.token == 32)
            .collect();
        assert_eq!(
            inline.len(),
            2,
            "inline operations complete in the first wait: {got:?}"
        );
        assert!(inline.iter().all(|c| c.result >= 0) && inline[0].result == 4096);
        // The large write may have finished in that wait too.
        if !got.iter().any(|c| c.token == 31) {
            got = wait_for(r.as_mut(), &[31]);
        }
        assert_eq!(
            got.iter().find(|c| c.token == 31).unwrap().result,
            big.len() as i32
        );
        let mut rd = AlignedBuf::zeroed(4096);
        // SAFETY: `rd` lives until its completion is waited for below.
        unsafe { r.read(fd, rd.as_mut_ptr(), 4096, 0, 33) };
        wait_for(r.as_mut(), &[33]);
        assert!(rd.iter().all(|&b| b == 0xab));
        let mut tail = [0u8; 1];
        f.read_exact_at(&mut tail, 8192 + INLINE_MAX_BYTES as u64)
            .unwrap();
        assert_eq!(tail[0], 7);
        // A deadline alone ends the wait.
        let t0 = now_ns();
        let mut got = Vec::new();
        r.wait(Some(t0 + 2_000_000), &mut got).unwrap();
        assert!(now_ns() >= t0 + 2_000_000 || !got.is_empty());
        // A far deadline left armed (a wake ended that wait) does not delay
        // a nearer one, and a past deadline does not block.
        r.waker().wake();
        let mut got = Vec::new();
        r.wait(Some(now_ns() + 2_000_000_000), &mut got).unwrap();
        assert!(got.iter().any(|c| c.token == WAKE_TOKEN));
        for _ in 0..3 {
            let t0 = now_ns();
            let mut got = Vec::new();
            while now_ns() < t0 + 3_000_000 {
                r.wait(Some(t0 + 3_000_000), &mut got).unwrap();
            }
            assert!(
                now_ns() < t0 + 500_000_000,
                "a 3 ms deadline took {} ms",
                (now_ns() - t0) / 1_000_000
            );
            let t1 = now_ns();
            r.wait(Some(t1 - 1), &mut got).unwrap();
            assert!(now_ns() < t1 + 500_000_000, "a past deadline blocked");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn uring_reactor_works() {
        match uring::UringReactor::new(64) {
            Ok(r) => exercise(Box::new(r), "plain"),
            Err(e) => panic!("io_uring is unavailable here: {e}"),
        }
    }

    #[test]
    fn a_vectored_read_past_the_end_of_the_file_is_short() {
        let dir = std::env::temp_dir().join(format!("tiermux-readv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![9u8; 4096 + 100]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let mut bufs = [AlignedBuf::zeroed(4096), AlignedBuf::zeroed(4096)];
        let iov = iovecs(&mut bufs);
        let job = FileJob {
            fd: f.as_raw_fd(),
            op: FileOp::ReadV {
                iov: iov.as_ptr() as usize,
                count: 2,
                offset: 0,
            },
            token: 0,
        };
        assert_eq!(job.op.len_bytes(), 8192);
        assert_eq!(run_job(&job), 4096 + 100);
        assert!(bufs[0].iter().all(|&b| b == 9));
        assert!(bufs[1][..100].iter().all(|&b| b == 9) && bufs[1][100..].iter().all(|&b| b == 0));
        // From an offset inside the second buffer's range: one buffer's
        // worth is left, and the rest of the list is not touched.
        let job = FileJob {
            fd: f.as_raw_fd(),
            op: FileOp::ReadV {
                iov: iov.as_ptr() as usize,
                count: 2,
                offset: 4096,
            },
            token: 0,
        };
        assert_eq!(run_job(&job), 100);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn uring_reactor_works_while_polling() {
        match uring::UringReactor::new(64) {
            Ok(mut r) => {
                r.set_spin_ns(200_000);
                exercise(Box::new(r), "polling")
            }
            Err(e) => panic!("io_uring is unavailable here: {e}"),
        }
    }

    #[test]
    fn thread_reactor_works() {
        exercise(Box::new(fallback::ThreadReactor::new(2).unwrap()), "plain");
    }
}
