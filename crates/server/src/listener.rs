//! The accept thread of a listener and the admission of its connections.
//!
//! A server holds at most [`Admission::max`] client connections open at
//! once: enough to stay clear of the process's file-descriptor limit, so
//! that a flood of clients cannot leave the server unable to open a file
//! or accept anyone. A connection beyond it is told so where the protocol
//! allows (Redis: `-ERR max number of clients reached`, as Redis says it)
//! and closed. An accept that fails anyway (descriptors or memory short
//! elsewhere in the system) is retried after a pause that doubles up to a
//! second, not at once: the connection waiting in the backlog would make
//! it fail again at once, and the thread would spin and flood the log.

use std::io::{self, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tiermux_engine::config::Listen;

use crate::sock::{Socket, Stream};

/// The most client connections a server holds open, whatever the
/// descriptor limit (Redis's default `maxclients`).
pub const MAX_CONNECTIONS: usize = 10_000;

/// Descriptors kept back beyond those open when the server binds, for what
/// it opens later: control and metrics connections, files of a restart
/// (a quarter of the limit where that is less).
pub const FD_RESERVE: usize = 64;

/// The first pause after a failed accept; it doubles to [`ACCEPT_RETRY_MAX`].
pub const ACCEPT_RETRY_MIN: Duration = Duration::from_millis(5);

/// The longest pause after failed accepts.
pub const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(1);

/// Holds one connection's place among the open ones; the place is given
/// back when the connection (its [`Stream`]) is dropped, wherever that is.
#[derive(Debug)]
pub struct Permit(Arc<AtomicUsize>);

impl Drop for Permit {
    fn drop(&mut self) {
        let before = self.0.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "a permit given back twice");
    }
}

/// How a listener admits connections: how many may be open, what a
/// refused one is told, and the counts.
#[derive(Clone, Debug)]
pub struct Admission {
    /// Connections that may be open at once.
    pub max: usize,
    /// What a refused connection is sent before it is closed (empty: nothing).
    pub refusal: &'static [u8],
    /// Connections open (holding a [`Permit`]).
    pub open: Arc<AtomicUsize>,
    /// Connections refused for being over `max`.
    pub refused: Arc<AtomicU64>,
    /// Accepts that failed.
    pub accept_errors: Arc<AtomicU64>,
}

impl Admission {
    /// Admission of at most `max` connections (at least one).
    pub fn new(max: usize, refusal: &'static [u8]) -> Admission {
        Admission {
            max: max.max(1),
            refusal,
            open: Arc::default(),
            refused: Arc::default(),
            accept_errors: Arc::default(),
        }
    }

    /// Admission of as many connections as the process's descriptors
    /// allow ([`max_connections`]).
    pub fn for_this_process(refusal: &'static [u8]) -> Admission {
        Admission::new(max_connections(), refusal)
    }

    /// A permit for one more connection, or `None` when `max` are open.
    pub fn admit(&self) -> Option<Permit> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            });
        taken.ok().map(|_| Permit(self.open.clone()))
    }

    /// Tells `s` it was refused (best effort, without waiting) and counts it.
    fn refuse(&self, s: Stream) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            eprintln!(
                "tiermux: the most connections this server holds ({}) are open; closing new ones ({n} so far)",
                self.max
            );
        }
        if !self.refusal.is_empty() {
            let mut s = s;
            if s.set_nonblocking(true).is_ok() {
                let _ = s.write(self.refusal);
            }
        }
    }
}

/// The connections this process can hold open: its descriptor limit
/// (raised to the hard limit first, where allowed), less the descriptors
/// open now and [`FD_RESERVE`], at least one and at most [`MAX_CONNECTIONS`].
pub fn max_connections() -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            limit = raised;
        }
    }
    let soft = limit.current.map_or(usize::MAX, |v| v as usize);
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    soft.saturating_sub(open_now + FD_RESERVE.min(soft / 4))
        .clamp(1, MAX_CONNECTIONS)
}

/// Binds `listen` (removing a stale Unix socket file) and starts a thread
/// that hands every connection `admission` admits to `accept` until `stop`
/// is set; returns the address bound ("unix:PATH" or "tcp:ADDR").
pub fn spawn_listener(
    listen: &Listen,
    stop: Arc<AtomicBool>,
    admission: Admission,
    accept: impl Fn(Stream) + Send + 'static,
) -> io::Result<String> {
    match listen {
        Listen::Unix(path) => {
            if path.exists() {
                std::fs::remove_file(path)?;
            }
            let l = UnixListener::bind(path)?;
            let next = move || l.accept().map(|(s, _)| Socket::Unix(s));
            spawn_accept_loop(next, stop, admission, accept);
            Ok(format!("unix:{}", path.display()))
        }
        Listen::Tcp(addr) => {
            let l = TcpListener::bind(addr)?;
            let shown = format!("tcp:{}", l.local_addr()?);
            let next = move || l.accept().map(|(s, _)| Socket::Tcp(s));
            spawn_accept_loop(next, stop, admission, accept);
            Ok(shown)
        }
    }
}

fn spawn_accept_loop(
    mut next: impl FnMut() -> io::Result<Socket> + Send + 'static,
    stop: Arc<AtomicBool>,
    admission: Admission,
    accept: impl Fn(Stream) + Send + 'static,
) {
    std::thread::spawn(move || {
        let mut pacing = AcceptPacing::new(admission.accept_errors.clone());
        loop {
            let got = next();
            if stop.load(Ordering::SeqCst) {
                break;
            }
            match got {
                Ok(socket) => {
                    pacing.accepted();
                    match admission.admit() {
                        Some(permit) => accept(Stream::admitted(socket, permit)),
                        None => admission.refuse(Stream::unadmitted(socket)),
                    }
                }
                Err(e) => pacing.failed(&e),
            }
        }
    });
}

/// Paces an accept loop after failed accepts: each failure is counted,
/// logged at powers of two, and followed by a pause that doubles from
/// [`ACCEPT_RETRY_MIN`] to [`ACCEPT_RETRY_MAX`] until an accept succeeds.
pub(crate) struct AcceptPacing {
    pause: Duration,
    failures: Arc<AtomicU64>,
}

impl AcceptPacing {
    /// Pacing that counts its failures in `failures`.
    pub(crate) fn new(failures: Arc<AtomicU64>) -> AcceptPacing {
        AcceptPacing {
            pause: ACCEPT_RETRY_MIN,
            failures,
        }
    }

    /// An accept succeeded: the next failure pauses briefly again.
    pub(crate) fn accepted(&mut self) {
        self.pause = ACCEPT_RETRY_MIN;
    }

    /// An accept failed with `e`: counts and perhaps logs it, then waits.
    pub(crate) fn failed(&mut self, e: &io::Error) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            eprintln!(
                "tiermux: accept: {e}; retrying after {} ms ({n} failures so far)",
                self.pause.as_millis()
            );
        }
        std::thread::sleep(self.pause);
        self.pause = (self.pause * 2).min(ACCEPT_RETRY_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Permits are counted while held and given back when dropped; none
    /// is given past the limit.
    #[test]
    fn permits_hold_places_until_dropped() {
        let a = Admission::new(2, b"");
        let p1 = a.admit().expect("first");
        let p2 = a.admit().expect("second");
        assert!(a.admit().is_none());
        assert_eq!(a.open.load(Ordering::Acquire), 2);
        drop(p1);
        let p3 = a.admit().expect("a place given back");
        drop((p2, p3));
        assert_eq!(a.open.load(Ordering::Acquire), 0);
    }

    /// The limit leaves the reserve free under the descriptor limit.
    #[test]
    fn the_limit_stays_under_the_descriptor_limit() {
        let max = max_connections();
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        assert!((1..=MAX_CONNECTIONS).contains(&max));
        if let Some(soft) = soft {
            let soft = soft as usize;
            assert!(max <= soft.saturating_sub(FD_RESERVE.min(soft / 4)).max(1));
        }
    }

    /// Accepts that keep failing (as when descriptors run out, and the
    /// connection waiting in the backlog makes every accept fail at once)
    /// are retried after pauses that double, not in a loop that spins.
    #[test]
    fn failing_accepts_back_off() {
        let calls = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let counted = calls.clone();
        let next = move || {
            counted.fetch_add(1, Ordering::Relaxed);
            Err(io::Error::from_raw_os_error(24))
        };
        let admission = Admission::new(1, b"");
        let errors = admission.accept_errors.clone();
        spawn_accept_loop(next, stop.clone(), admission, |_| {
            panic!("nothing accepted")
        });
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::SeqCst);
        // Pauses of 5, 10, 20, 40, 80 and 160 ms: at most 7 calls in 300 ms.
        let n = calls.load(Ordering::Relaxed);
        assert!((2..=7).contains(&n), "{n} accepts in 300 ms");
        assert!(errors.load(Ordering::Relaxed) >= 2);
    }
}
