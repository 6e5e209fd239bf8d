//! Power loss on real files: a wrapper around a real reactor that keeps
//! the volume's writes not yet synced apart (the [`Machine`] model of
//! `power.rs`) and, when asked, performs a power cut on the real files and
//! ends the process, as `tiermux serve --simulate-power-loss` does on
//! `SIGUSR1`.
//!
//! Every write handed to the reactor (devices and journal) is remembered
//! as pending until a sync of its file that was submitted after it
//! completes. At the cut each file goes back to its content as of its last
//! sync, and each pending write is lost, kept or torn, independently and in
//! a random order; then the process exits at once (status
//! [`POWER_CUT_EXIT_STATUS`]). Reads, writes and syncs still in flight are
//! waited for first (for at most [`DRAIN_LIMIT_NS`]): a write the kernel
//! finished after the process's exit could land on a file the next run
//! has already recovered and written, which no power cut does; completing
//! is not being durable, so the model may still lose such a write. The boot id it reports
//! is a counter kept in a state file and bumped at each cut, so the next
//! run recovers as after a reboot. Checkpoints, which the journal writes
//! with `fsync` and `rename` outside the reactor, count as durable.

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tiermux_core::rng::Rng;
use tiermux_core::Op;

use super::power::Machine;
use super::{Completion, FileOp, Reactor, Waker};

/// The exit status of a process that simulated a power cut.
pub const POWER_CUT_EXIT_STATUS: i32 = 86;

/// Longest the wrapper blocks in the inner reactor before looking at the
/// cut flag again, ns.
const CHECK_INTERVAL_NS: u64 = 5_000_000;

/// Longest a cut waits for the operations in flight, ns.
pub const DRAIN_LIMIT_NS: u64 = 10_000_000_000;

/// A real reactor whose files lose unsynced writes at a simulated power
/// cut (see the module documentation).
pub struct PowerLossReactor {
    inner: Box<dyn Reactor>,
    machine: Machine,
    /// Syncs in flight: the file and how many of its writes they cover.
    syncs: HashMap<u64, (RawFd, usize)>,
    /// Reads, writes and syncs in flight, by token (a count per token).
    in_flight: HashMap<u64, u32>,
    cut: Arc<AtomicBool>,
    state_file: PathBuf,
    boot: u64,
    seed: u64,
}

impl PowerLossReactor {
    /// Wraps `inner`; the boot counter lives in `state_file` (created at
    /// 0). Setting `cut` makes the next wait perform the cut.
    pub fn new(
        inner: Box<dyn Reactor>,
        state_file: PathBuf,
        cut: Arc<AtomicBool>,
    ) -> io::Result<PowerLossReactor> {
        let boot = match std::fs::read_to_string(&state_file) {
            Ok(s) => s.trim().parse().map_err(|_| {
                io::Error::other(format!(
                    "{}: not a boot counter: {s:?}",
                    state_file.display()
                ))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(PowerLossReactor {
            inner,
            machine: Machine::new(),
            syncs: HashMap::new(),
            in_flight: HashMap::new(),
            cut,
            state_file,
            boot,
            seed: super::now_ns(),
        })
    }

    /// Notes an operation that will complete with `token`.
    fn started(&mut self, token: u64) {
        *self.in_flight.entry(token).or_default() += 1;
    }

    /// Takes completions in: syncs make writes durable, finished
    /// operations leave the in-flight set.
    fn completed(&mut self, done: &[Completion]) {
        for c in done {
            if let Some((fd, n)) = self.syncs.remove(&c.token) {
                if c.result >= 0 {
                    self.machine.synced_first(fd, n);
                }
            }
            if let Some(n) = self.in_flight.get_mut(&c.token) {
                *n -= 1;
                if *n == 0 {
                    self.in_flight.remove(&c.token);
                }
            }
        }
    }

    /// Waits until no read, write or sync is in flight (or the limit).
    fn drain(&mut self) {
        let limit = self.inner.now_ns() + DRAIN_LIMIT_NS;
        let mut done = Vec::new();
        while !self.in_flight.is_empty() && self.inner.now_ns() < limit {
            done.clear();
            let until = self.inner.now_ns() + CHECK_INTERVAL_NS;
            if self.inner.wait(Some(until), &mut done).is_err() {
                break;
            }
            self.completed(&done);
        }
        if !self.in_flight.is_empty() {
            eprintln!(
                "tiermux: {} operations still in flight at the simulated power cut",
                self.in_flight.len()
            );
        }
    }

    /// The power fails: files lose what was not synced; the process ends.
    fn cut_now(&mut self) -> ! {
        self.drain();
        let mut rng = Rng::new(self.seed);
        self.machine.power_cut(&mut rng);
        let next = (self.boot + 1).to_string();
        let written = std::fs::write(&self.state_file, next)
            .and_then(|_| std::fs::File::open(&self.state_file)?.sync_all());
        if let Err(e) = written {
            eprintln!("tiermux: cannot record the simulated reboot: {e}");
        }
        let st = self.machine.stats();
        eprintln!(
            "tiermux: simulated power cut: {} unsynced writes lost, {} kept, {} torn",
            st.lost, st.kept, st.torn
        );
        std::process::exit(POWER_CUT_EXIT_STATUS);
    }
}

impl Reactor for PowerLossReactor {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    unsafe fn read(&mut self, fd: RawFd, buf: *mut u8, len: u32, offset: u64, token: u64) {
        self.started(token);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { self.inner.read(fd, buf, len, offset, token) }
    }

    unsafe fn write(&mut self, fd: RawFd, buf: *const u8, len: u32, offset: u64, token: u64) {
        // SAFETY: the caller keeps `buf` valid and unmodified for `len`
        // bytes until this write completes, which is after this call.
        let bytes = unsafe { std::slice::from_raw_parts(buf, len as usize) };
        self.machine.wrote(fd, offset, bytes);
        self.started(token);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { self.inner.write(fd, buf, len, offset, token) }
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
        if dir == Op::Write {
            let op = FileOp::vectored(dir, iov, count, offset);
            let mut at = offset;
            // SAFETY: the caller keeps the list and every listed buffer
            // valid and unmodified until this write completes, after this
            // call.
            for v in unsafe { op.iovecs() } {
                // SAFETY: as above.
                let bytes =
                    unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
                self.machine.wrote(fd, at, bytes);
                at += v.iov_len as u64;
            }
        }
        self.started(token);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { self.inner.vectored(fd, dir, iov, count, offset, token) }
    }

    fn fsync(&mut self, fd: RawFd, token: u64) {
        self.syncs
            .insert(token, (fd, self.machine.pending_writes(fd)));
        self.started(token);
        self.inner.fsync(fd, token);
    }

    fn discard(&mut self, fd: RawFd, offset: u64, len: u64, token: u64) {
        // A hole reads as zeroes; the machine keeps or loses it like a
        // write of zeroes.
        self.machine.wrote(fd, offset, &vec![0; len as usize]);
        self.started(token);
        self.inner.discard(fd, offset, len, token);
    }

    fn poll(&mut self, fd: RawFd, writable: bool, token: u64) {
        self.inner.poll(fd, writable, token);
    }

    fn timer_at(&mut self, deadline_ns: u64, token: u64) {
        self.inner.timer_at(deadline_ns, token);
    }

    fn wait(&mut self, deadline_ns: Option<u64>, out: &mut Vec<Completion>) -> io::Result<()> {
        if self.cut.load(Ordering::SeqCst) {
            self.cut_now();
        }
        let check = self.inner.now_ns() + CHECK_INTERVAL_NS;
        let start = out.len();
        self.inner
            .wait(Some(deadline_ns.map_or(check, |d| d.min(check))), out)?;
        self.completed(&out[start..]);
        Ok(())
    }

    fn waker(&self) -> Waker {
        self.inner.waker()
    }

    fn crash(&mut self) {
        self.inner.crash();
    }

    fn write_now(&mut self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<()> {
        self.machine.wrote(fd, offset, buf);
        self.inner.write_now(fd, buf, offset)
    }

    fn sync_now(&mut self, fd: RawFd) -> io::Result<()> {
        let n = self.machine.pending_writes(fd);
        self.inner.sync_now(fd)?;
        self.machine.synced_first(fd, n);
        Ok(())
    }

    fn boot_id(&self) -> String {
        format!("simulated-power-loss-boot-{}", self.boot)
    }

    fn serve_inline(&mut self, fd: RawFd) {
        self.inner.serve_inline(fd);
    }

    fn set_spin_ns(&mut self, spin_ns: u64) {
        self.inner.set_spin_ns(spin_ns);
    }

    fn start_queued(&mut self) -> io::Result<()> {
        self.inner.start_queued()
    }
}
