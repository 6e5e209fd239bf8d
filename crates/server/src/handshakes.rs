//! The handshake pool: a fixed number of threads run the blocking NBD
//! handshakes of new connections, taken from a bounded queue. A connection
//! that arrives while the queue is full is closed at once (and counted), so
//! a flood of connections that never finish their handshake costs a fixed
//! number of threads and queued sockets, not one thread each. A stalled
//! client holds its thread for at most [`HANDSHAKE_TIMEOUT`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tiermux_engine::reactor::Waker;

use crate::proto::{self, Export, HandshakeEnd};
use crate::server::Stream;

/// Threads that run handshakes.
pub const HANDSHAKE_THREADS: usize = 8;

/// Connections that may wait for a handshake thread.
pub const MAX_QUEUED_HANDSHAKES: usize = 128;

/// How long a handshake may take (each read and write of it).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The pool (see the module documentation).
pub(crate) struct HandshakePool {
    queue: SyncSender<Stream>,
    /// Connections closed because the queue was full.
    pub(crate) refused: Arc<AtomicU64>,
}

impl HandshakePool {
    /// Starts the threads; connections that finish their handshake go to
    /// `inbox`, and `waker` tells the event loop.
    pub(crate) fn start(
        export: Export,
        inbox: Arc<Mutex<Vec<Handshaken>>>,
        waker: Waker,
    ) -> HandshakePool {
        let (queue, rx) = sync_channel::<Stream>(MAX_QUEUED_HANDSHAKES);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..HANDSHAKE_THREADS {
            let (rx, export, inbox, waker) =
                (rx.clone(), export.clone(), inbox.clone(), waker.clone());
            std::thread::spawn(move || worker(&rx, &export, &inbox, &waker));
        }
        HandshakePool {
            queue,
            refused: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Queues a new connection's handshake, or closes it when the queue is
    /// full.
    pub(crate) fn offer(&self, s: Stream) {
        match self.queue.try_send(s) {
            Ok(()) => {}
            Err(TrySendError::Full(s)) => {
                let n = self.refused.fetch_add(1, Ordering::Relaxed);
                if n.is_power_of_two() || n == 0 {
                    eprintln!(
                        "tiermux: {MAX_QUEUED_HANDSHAKES} connections wait for a handshake; closing new ones ({} so far)",
                        n + 1
                    );
                }
                drop(s);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn worker(
    rx: &Mutex<Receiver<Stream>>,
    export: &Export,
    inbox: &Mutex<Vec<Handshaken>>,
    waker: &Waker,
) {
    loop {
        let next = rx.lock().expect("handshake queue").recv();
        match next {
            Ok(s) => run_handshake(s, export, inbox, waker),
            Err(_) => return,
        }
    }
}

/// A connection whose handshake is done, and what it agreed.
pub(crate) struct Handshaken {
    /// The socket.
    pub(crate) stream: Stream,
    /// Reads are answered with structured replies.
    pub(crate) structured_replies: bool,
}

fn run_handshake(mut s: Stream, export: &Export, inbox: &Mutex<Vec<Handshaken>>, waker: &Waker) {
    let _ = s.set_timeouts(Some(HANDSHAKE_TIMEOUT));
    match proto::handshake(&mut s, export) {
        Ok(HandshakeEnd::Transmission { structured_replies }) => {
            if s.set_timeouts(None)
                .and_then(|_| s.set_nonblocking(true))
                .is_ok()
            {
                inbox.lock().expect("inbox").push(Handshaken {
                    stream: s,
                    structured_replies,
                });
                waker.wake();
            }
        }
        Ok(HandshakeEnd::Aborted) => {}
        Err(e) => eprintln!("tiermux: handshake failed: {e}"),
    }
}
