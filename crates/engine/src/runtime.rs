//! The engine's event loop: one [`Volume`], one [`Reactor`] and a
//! [`Frontend`] that brings requests in and takes replies out.
//!
//! Each iteration of [`Runtime::run`]:
//! 1. feeds the policy's controller if a tick is due ([`Volume::on_time`]);
//! 2. ends the batch ([`Volume::end_batch`]: commits the journal, starts
//!    marks for flushes and FUA) and hands every finished request to
//!    [`Frontend::on_done`];
//! 3. asks the front end whether to go on ([`Frontend::before_wait`]) and
//!    stops once it says stop and the volume is idle, closing the volume;
//!    otherwise commits the metadata journal, so that no operation reaches
//!    the kernel before the records that must precede it;
//! 4. waits on the reactor (until a completion, the next tick or a wake)
//!    and routes each completion: the volume's own operations to the
//!    volume, the front end's polls to [`Frontend::on_ready`], wakes to
//!    [`Frontend::on_wake`].
//!
//! The front end never sees the volume's tokens, and the volume never sees
//! the front end's: the runtime keeps them apart.

use std::io;
use std::os::fd::RawFd;

use crate::reactor::{Completion, Reactor, Waker, WAKE_TOKEN};
use crate::volume::{Done, Request, Volume, VOLUME_TOKEN_LIMIT};

/// Front-end tokens are below this value.
pub const FRONTEND_TOKEN_LIMIT: u64 = 1 << 56;

/// Where front-end tokens start in the reactor's token space.
const FRONTEND_TOKEN_BASE: u64 = VOLUME_TOKEN_LIMIT;

const _: () = assert!(FRONTEND_TOKEN_BASE
    .checked_add(FRONTEND_TOKEN_LIMIT)
    .is_some());
const _: () = assert!(FRONTEND_TOKEN_BASE + FRONTEND_TOKEN_LIMIT < WAKE_TOKEN);

/// Whether the loop should keep serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep going: wait for the next event.
    Continue,
    /// Skip this iteration's wait: [`Runtime::step`] returns at once (for
    /// a caller that steps the loop itself and has nothing to wait for).
    Yield,
    /// Stop once the volume is idle (in-flight requests finish first).
    Stop,
    /// Keep going, but first start the I/O queued so far and then call
    /// [`Frontend::after_start`], before the wait: for long work (large
    /// replies to send) that should overlap that I/O.
    StartThen,
}

/// What a front end may do from its callbacks.
pub struct Io<'a> {
    vol: &'a mut Volume,
    r: &'a mut dyn Reactor,
}

impl Io<'_> {
    /// Starts a client request; its [`Done`] comes back through
    /// [`Frontend::on_done`] with the same `id`.
    pub fn submit(&mut self, id: u64, req: Request) {
        self.vol.submit(id, req, self.r);
    }

    /// Asks to be told (through [`Frontend::on_ready`] with `token`) once
    /// `fd` is readable, or writable when `writable`.
    pub fn poll(&mut self, fd: RawFd, writable: bool, token: u64) {
        assert!(
            token < FRONTEND_TOKEN_LIMIT,
            "front-end token {token:#x} is too large"
        );
        self.r.poll(fd, writable, FRONTEND_TOKEN_BASE + token);
    }

    /// Changes the running policy's parameters (see
    /// [`Volume::reconfigure`]).
    pub fn reconfigure(
        &mut self,
        changes: &tiermux_core::Params,
    ) -> Result<Vec<String>, crate::volume::ReconfigureError> {
        self.vol.reconfigure(changes, self.r)
    }

    /// The volume (size, counters, policy).
    pub fn volume(&self) -> &Volume {
        self.vol
    }

    /// The loop's clock, ns (virtual under a simulated reactor).
    pub fn now_ns(&self) -> u64 {
        self.r.now_ns()
    }
}

/// The part of a server that speaks to clients.
pub trait Frontend {
    /// A request finished.
    fn on_done(&mut self, done: Done, io: &mut Io<'_>);

    /// A poll asked for with [`Io::poll`] completed with `result`.
    fn on_ready(&mut self, token: u64, result: i32, io: &mut Io<'_>);

    /// Another thread woke the loop (see [`Runtime::waker`]).
    fn on_wake(&mut self, io: &mut Io<'_>) {
        let _ = io;
    }

    /// Called before every wait, after replies were handed out.
    fn before_wait(&mut self, io: &mut Io<'_>) -> Flow;

    /// Called when [`Frontend::before_wait`] returned [`Flow::StartThen`],
    /// once the I/O queued so far has started, before the wait; it must not
    /// start requests (their metadata would not be committed before the
    /// wait submits their I/O). True asks
    /// the loop not to sleep in that wait (for work, such as closing
    /// connections, that this call made possible and that nothing else
    /// would wake the loop for).
    fn after_start(&mut self, io: &mut Io<'_>) -> bool {
        let _ = io;
        false
    }
}

/// Why the loop stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The reactor failed.
    #[error("reactor: {0}")]
    Reactor(#[from] io::Error),
    /// The metadata journal failed.
    #[error(transparent)]
    Meta(#[from] crate::journal::MetaError),
}

/// A volume and the reactor its event loop runs on.
pub struct Runtime {
    // Dropped before the volume: a reactor's drop waits for the operations
    // it is running, whose buffers the volume owns.
    reactor: Box<dyn Reactor>,
    vol: Volume,
    done: Vec<Done>,
    completions: Vec<Completion>,
}

impl Runtime {
    /// A loop for `vol` on `reactor`.
    pub fn new(vol: Volume, reactor: Box<dyn Reactor>) -> Runtime {
        Runtime {
            vol,
            reactor,
            done: Vec::new(),
            completions: Vec::new(),
        }
    }

    /// The volume.
    pub fn volume(&self) -> &Volume {
        &self.vol
    }

    /// The reactor's kind ("io_uring", "threads", "simulated").
    pub fn reactor_kind(&self) -> &'static str {
        self.reactor.kind()
    }

    /// A handle other threads use to wake the loop.
    pub fn waker(&self) -> Waker {
        self.reactor.waker()
    }

    /// Runs until the front end says stop and the volume is idle, then
    /// closes the volume (a final checkpoint).
    pub fn run(&mut self, f: &mut dyn Frontend) -> Result<(), RuntimeError> {
        while self.step(f)? != Flow::Stop {}
        self.vol.close(self.reactor.as_mut())?;
        Ok(())
    }

    /// One iteration of the loop: `Flow::Stop` once the front end said stop
    /// and the volume is idle (the volume is left open), `Flow::Yield` when
    /// the front end skipped the wait, else `Flow::Continue`.
    pub fn step(&mut self, f: &mut dyn Frontend) -> Result<Flow, RuntimeError> {
        let r = self.reactor.as_mut();
        self.vol.on_time(r);
        self.vol.end_batch(r, &mut self.done)?;
        let mut io = Io {
            vol: &mut self.vol,
            r,
        };
        for d in self.done.drain(..) {
            f.on_done(d, &mut io);
        }
        let flow = f.before_wait(&mut io);
        match flow {
            Flow::Stop if self.vol.is_idle() => return Ok(Flow::Stop),
            Flow::Yield => return Ok(Flow::Yield),
            _ => {}
        }
        // Decisions made since `end_batch` (requests the front end started
        // in `before_wait`) recorded metadata their I/O must not overtake:
        // commit it before the wait submits that I/O.
        self.vol.commit_metadata(self.reactor.as_mut())?;
        self.completions.clear();
        let r = self.reactor.as_mut();
        // Requests that finished without I/O (errors, or submitted by the
        // front end just now) are handed out without blocking.
        let mut deadline = if self.vol.has_finished() {
            Some(r.now_ns())
        } else {
            self.vol.next_deadline_ns()
        };
        if flow == Flow::StartThen {
            // The metadata the queued I/O depends on is committed, so the
            // I/O may start now, as the wait would start it.
            r.start_queued()?;
            let mut io = Io {
                vol: &mut self.vol,
                r,
            };
            if f.after_start(&mut io) {
                deadline = Some(r.now_ns());
            }
        }
        r.wait(deadline, &mut self.completions)?;
        for c in self.completions.drain(..) {
            let mut io = Io {
                vol: &mut self.vol,
                r,
            };
            if c.token == WAKE_TOKEN {
                f.on_wake(&mut io);
            } else if c.token >= FRONTEND_TOKEN_BASE {
                f.on_ready(c.token - FRONTEND_TOKEN_BASE, c.result, &mut io);
            } else {
                self.vol.on_completion(c, r);
            }
        }
        Ok(Flow::Continue)
    }

    /// Ends the loop as a killed process would (for tests): the reactor
    /// decides which operations in flight happened ([`Reactor::crash`]),
    /// is dropped (finishing what it was running), and then the volume is
    /// dropped without committing or closing anything.
    pub fn crash(self) {
        self.end(|r| r.crash());
    }

    /// For tests: the power fails now ([`Reactor::power_cut`]): as a crash,
    /// and writes not yet synced are lost, kept or torn.
    pub fn power_cut(self) {
        self.end(|r| r.power_cut());
    }

    /// Ends the loop as `how` says (a crash or a power cut), then drops
    /// the reactor and the volume without closing anything.
    fn end(self, how: impl FnOnce(&mut dyn Reactor)) {
        let Runtime {
            vol, mut reactor, ..
        } = self;
        how(reactor.as_mut());
        drop(reactor);
        drop(vol);
    }
}
