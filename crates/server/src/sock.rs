//! Client sockets shared by the servers: the [`Stream`] type, and
//! [`Wire`], a non-blocking connection's receive buffer and queue of
//! replies driven by the event loop's polls. Listening is
//! [`crate::listener`]'s.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use tiermux_engine::buf::AlignedBuf;
use tiermux_engine::runtime::Io;

use crate::listener::Permit;

/// A client socket as accepted, before admission.
pub(crate) enum Socket {
    /// Unix domain.
    Unix(UnixStream),
    /// TCP.
    Tcp(TcpStream),
}

/// A connected client socket, holding its place among the server's open
/// connections ([`Permit`]) until it is dropped.
pub struct Stream {
    socket: Socket,
    _permit: Option<Permit>,
}

impl Stream {
    /// A connection admitted under `permit`.
    pub(crate) fn admitted(socket: Socket, permit: Permit) -> Stream {
        Stream {
            socket,
            _permit: Some(permit),
        }
    }

    /// A connection about to be refused, which holds no place.
    pub(crate) fn unadmitted(socket: Socket) -> Stream {
        Stream {
            socket,
            _permit: None,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        match &self.socket {
            Socket::Unix(s) => s.as_raw_fd(),
            Socket::Tcp(s) => s.as_raw_fd(),
        }
    }
    /// Asks for a send buffer of [`SEND_BUFFER_BYTES`] (the kernel caps
    /// it at `net.core.wmem_max`), so that a long reply goes to the socket
    /// in fewer writes, each waiting less for the client to read. A
    /// refusal leaves the default.
    pub(crate) fn grow_send_buffer(&self) {
        use std::os::fd::AsFd;
        let fd = match &self.socket {
            Socket::Unix(s) => s.as_fd(),
            Socket::Tcp(s) => s.as_fd(),
        };
        let now = rustix::net::sockopt::get_socket_send_buffer_size(fd).unwrap_or(0);
        if now < SEND_BUFFER_BYTES {
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(fd, SEND_BUFFER_BYTES);
        }
    }
    pub(crate) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match &self.socket {
            Socket::Unix(s) => s.set_nonblocking(on),
            Socket::Tcp(s) => s.set_nonblocking(on),
        }
    }
    pub(crate) fn set_timeouts(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        match &self.socket {
            Socket::Unix(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
            Socket::Tcp(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match &mut self.socket {
            Socket::Unix(s) => s.read(b),
            Socket::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match &mut self.socket {
            Socket::Unix(s) => s.write(b),
            Socket::Tcp(s) => s.write(b),
        }
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match &mut self.socket {
            Socket::Unix(s) => s.write_vectored(bufs),
            Socket::Tcp(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A queued reply: a head, and a body sent from the buffer that holds it
/// (a read's data, sent without a copy into the head).
struct Reply {
    head: Vec<u8>,
    body: Option<(AlignedBuf, Range<usize>)>,
}

impl Reply {
    fn len(&self) -> usize {
        self.head.len() + self.body.as_ref().map_or(0, |(_, r)| r.len())
    }

    /// The bytes from `pos` on, as at most two slices.
    fn from(&self, pos: usize) -> [io::IoSlice<'_>; 2] {
        let body: &[u8] = match &self.body {
            Some((buf, r)) => &buf[r.clone()],
            None => &[],
        };
        let h = pos.min(self.head.len());
        [
            io::IoSlice::new(&self.head[h..]),
            io::IoSlice::new(&body[pos - h..]),
        ]
    }
}

/// A connection kept in a [`ConnTable`]: the server's own state around
/// its [`Wire`].
pub trait Connection {
    /// The connection's socket and buffers.
    fn wire(&self) -> &Wire;
    /// The connection's socket and buffers, to change.
    fn wire_mut(&mut self) -> &mut Wire;
}

/// A server's connections, each in a slot found again by index and
/// generation, so that a poll that outlives its connection finds nothing.
///
/// It also keeps a list of the *active* connections, those a server has
/// marked since they were last found at rest ([`ConnTable::mark_active`],
/// [`ConnTable::close_finished`]): a server's walks between waits visit
/// those only, so that idle connections cost nothing per request.
pub struct ConnTable<C> {
    slots: Vec<Option<C>>,
    /// Empty slots below `slots.len()`, reused before the table grows.
    free: Vec<usize>,
    /// Connections open: the slots in use.
    open: usize,
    next_gen: u32,
    /// Slots marked active, each once.
    active: Vec<usize>,
    /// Per slot: listed in `active`.
    listed: Vec<bool>,
}

impl<C: Connection> Default for ConnTable<C> {
    fn default() -> Self {
        ConnTable {
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            next_gen: 1,
            active: Vec::new(),
            listed: Vec::new(),
        }
    }
}

impl<C: Connection> ConnTable<C> {
    /// Adds a connection on `stream` (`make` puts the server's state
    /// around its wire), arms its read poll and returns its slot.
    pub fn insert(
        &mut self,
        stream: Stream,
        make: impl FnOnce(Wire) -> C,
        io: &mut Io<'_>,
    ) -> usize {
        let idx = self.place(|idx, gen| make(Wire::new(stream, idx, gen)));
        let c = self.slots[idx]
            .as_mut()
            .expect("the connection just placed");
        c.wire_mut().arm_read(io);
        idx
    }

    /// Puts the connection `make` builds for its slot and generation in
    /// an empty slot, and returns the slot.
    fn place(&mut self, make: impl FnOnce(usize, u32) -> C) -> usize {
        let idx = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.listed.push(false);
            self.slots.len() - 1
        });
        assert!(self.slots[idx].is_none(), "slot {idx} listed free is used");
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        self.slots[idx] = Some(make(idx, gen));
        self.open += 1;
        idx
    }

    /// Shuts down and forgets the connection in slot `idx`, if any.
    fn close_slot(&mut self, idx: usize) {
        if let Some(c) = self.slots[idx].take() {
            c.wire().shutdown();
            self.free.push(idx);
            self.open -= 1;
        }
    }

    /// The connection in slot `idx` if it is still generation `gen`.
    pub fn get(&mut self, idx: usize, gen: u32) -> Option<&mut C> {
        self.at(idx).filter(|c| c.wire().gen == gen)
    }

    /// The connection in slot `idx`, if any.
    pub fn at(&mut self, idx: usize) -> Option<&mut C> {
        self.slots.get_mut(idx).and_then(|c| c.as_mut())
    }

    /// Connections open.
    pub fn len(&self) -> usize {
        self.open
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.open == 0
    }

    /// Shuts down and forgets the connections `done` says are finished:
    /// every one when `all` (a server stopping), else the active ones.
    /// Then stops listing as active those `at_rest` says need no walks.
    pub fn close_finished(
        &mut self,
        all: bool,
        done: impl Fn(&C) -> bool,
        at_rest: impl Fn(&C) -> bool,
    ) {
        let walked = if all {
            self.slots.len()
        } else {
            self.active.len()
        };
        for i in 0..walked {
            let idx = if all { i } else { self.active[i] };
            if self.slots[idx].as_ref().is_some_and(&done) {
                self.close_slot(idx);
            }
        }
        self.retain_active(|c| !at_rest(c));
    }

    /// Lists the connection in slot `idx` as active: the server's walks
    /// visit it until [`ConnTable::close_finished`] finds it at rest. A
    /// server marks every connection it reads from or answers for.
    pub fn mark_active(&mut self, idx: usize) {
        if !self.listed[idx] {
            self.listed[idx] = true;
            self.active.push(idx);
        }
    }

    /// How many connections are listed active; the list may grow while a
    /// walk over it (`0..active_len()`, [`ConnTable::active_slot`]) marks
    /// more, which the walk then visits too.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// The slot of the `i`-th active connection (which may have closed).
    pub fn active_slot(&self, i: usize) -> usize {
        self.active[i]
    }

    /// Keeps listed the active connections `busy` says still need the
    /// server's walks; drops those at rest and closed slots.
    fn retain_active(&mut self, busy: impl Fn(&C) -> bool) {
        let (slots, listed) = (&self.slots, &mut self.listed);
        self.active.retain(|&idx| {
            let keep = slots[idx].as_ref().is_some_and(&busy);
            listed[idx] = keep;
            keep
        });
    }

    /// A poll with `token` completed: on writability the connection sends
    /// what it can; on readability its read poll is disarmed and its slot
    /// returned, for the server to read. `None` when there is nothing to read.
    pub fn polled(&mut self, token: u64, io: &mut Io<'_>) -> Option<usize> {
        let (idx, gen, writable) = split_conn_token(token);
        let w = self.get(idx, gen)?.wire_mut();
        if writable {
            w.write_armed = false;
            w.flush(io);
            None
        } else {
            w.read_armed = false;
            Some(idx)
        }
    }
}

/// The poll token of connection `idx` (of generation `gen`, so that a
/// stale poll of a closed connection is told from its successor's), for
/// readability or writability.
fn conn_token(idx: usize, gen: u32, writable: bool) -> u64 {
    assert!(idx < 1 << 22, "too many connections");
    (idx as u64) << 33 | (gen as u64) << 1 | writable as u64
}

/// The connection, generation and direction of a poll token.
fn split_conn_token(t: u64) -> (usize, u32, bool) {
    ((t >> 33) as usize, (t >> 1) as u32, t & 1 == 1)
}

/// The most bytes read from a socket at a time: a receive buffer grows to
/// this while its client streams requests, and past it only to hold one
/// larger message.
pub const READ_CHUNK: usize = 256 << 10;

/// The receive buffer a connection starts with, and goes back to when it
/// is idle (a few 4 KiB writes): an idle connection holds no more.
pub const RECEIVE_MIN_BYTES: usize = 16 << 10;

/// What a receive buffer grows by at a time, as a factor.
const RECEIVE_GROWTH: usize = 4;

/// How long a connection with nothing in flight and nothing unparsed keeps
/// a grown receive buffer: longer than a streaming client's pause between
/// batches, so that it is not shrunk and grown again for every batch.
pub const SHRINK_AFTER_IDLE_NS: u64 = 1_000_000_000;

/// The send buffer a connection asks for: two 1 MiB replies.
pub const SEND_BUFFER_BYTES: usize = 2 << 20;

/// The most queued replies one vectored write sends (two slices each, a
/// head and a body; the kernel takes up to 1,024 slices).
pub const REPLIES_PER_WRITE: usize = 64;

/// A non-blocking connection's buffers: bytes received and not yet parsed
/// (`rbuf[rpos..rend]`) and replies not yet sent.
pub struct Wire {
    /// The socket.
    pub stream: Stream,
    /// The connection's slot in its [`ConnTable`].
    pub idx: usize,
    /// The connection's generation (its slot's users are told apart by it).
    pub gen: u32,
    /// Receive buffer (grown for a large message, then given back to the
    /// thread's spare buffers for the next).
    pub rbuf: AlignedBuf,
    /// Where unparsed bytes start.
    pub rpos: usize,
    /// Where received bytes end.
    pub rend: usize,
    /// Since when the server has seen the connection idle with a grown
    /// receive buffer ([`Wire::shrink_when_idle`]).
    idle_since_ns: Option<u64>,
    out: VecDeque<Reply>,
    out_pos: usize,
    /// Bytes of replies queued and not yet sent.
    pub out_bytes: u64,
    /// A readability poll is armed.
    pub read_armed: bool,
    /// A writability poll is armed.
    pub write_armed: bool,
    /// The connection ends once its work is done.
    pub closing: bool,
}

impl Wire {
    /// Buffers for a new connection (made non-blocking) in slot `idx`.
    fn new(stream: Stream, idx: usize, gen: u32) -> Wire {
        let _ = stream.set_nonblocking(true);
        stream.grow_send_buffer();
        Wire {
            stream,
            idx,
            gen,
            rbuf: AlignedBuf::scratch(RECEIVE_MIN_BYTES),
            rpos: 0,
            rend: 0,
            idle_since_ns: None,
            out: VecDeque::new(),
            out_pos: 0,
            out_bytes: 0,
            read_armed: false,
            write_armed: false,
            closing: false,
        }
    }

    /// The bytes received and not yet parsed.
    pub fn unparsed(&self) -> &[u8] {
        &self.rbuf[self.rpos..self.rend]
    }

    /// Whether replies wait to be sent.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    fn token(&self, writable: bool) -> u64 {
        conn_token(self.idx, self.gen, writable)
    }

    /// Asks the loop to report readability.
    pub fn arm_read(&mut self, io: &mut Io<'_>) {
        if !self.read_armed && !self.closing {
            self.read_armed = true;
            io.poll(self.stream.fd(), false, self.token(false));
        }
    }

    /// Compacts the receive buffer, then reads until the socket would block
    /// or a short read shows that it is drained (the re-armed poll catches
    /// anything that arrives after); returns true at end of stream or error.
    /// A read that fills the buffer grows it fourfold, up to `max_len`
    /// bytes, and reading goes on: a client that streams requests is read
    /// in large pieces. A buffer that was more than half full of unparsed
    /// bytes to begin with (a connection paused at its limits) does not
    /// grow. An empty buffer that a large message grew past four times
    /// [`READ_CHUNK`] goes back to that first.
    pub fn receive(&mut self, max_len: usize) -> bool {
        if self.rpos > 0 {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
        }
        if self.rend == 0 && self.rbuf.len() > 4 * READ_CHUNK {
            self.rbuf = AlignedBuf::scratch(READ_CHUNK);
        }
        let may_grow = self.rend < self.rbuf.len() / 2;
        loop {
            if self.rend == self.rbuf.len() {
                if !may_grow || self.rbuf.len() >= max_len {
                    return false; // parse this much; the re-armed poll fires for the rest
                }
                let mut grown =
                    AlignedBuf::scratch((self.rbuf.len() * RECEIVE_GROWTH).min(max_len));
                grown[..self.rend].copy_from_slice(&self.rbuf[..self.rend]);
                self.rbuf = grown;
            }
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => return true,
                Ok(n) => {
                    self.rend += n;
                    self.idle_since_ns = None;
                    if self.rend < self.rbuf.len() {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }

    /// Bytes the receive buffer holds past [`RECEIVE_MIN_BYTES`] (grown for
    /// a streaming client or a large message).
    pub fn grown_bytes(&self) -> usize {
        self.rbuf.len().saturating_sub(RECEIVE_MIN_BYTES)
    }

    /// Gives a grown receive buffer back once it has held nothing for
    /// [`SHRINK_AFTER_IDLE_NS`]: the server calls this, with its clock, for
    /// connections with no request in flight, so that an idle connection
    /// comes down to [`RECEIVE_MIN_BYTES`] however much it sent before.
    pub fn shrink_when_idle(&mut self, now_ns: u64) {
        if self.rpos != self.rend || self.rbuf.len() <= RECEIVE_MIN_BYTES {
            self.idle_since_ns = None;
            return;
        }
        match self.idle_since_ns {
            None => self.idle_since_ns = Some(now_ns),
            Some(since_ns) if now_ns.saturating_sub(since_ns) >= SHRINK_AFTER_IDLE_NS => {
                self.rbuf = AlignedBuf::scratch(RECEIVE_MIN_BYTES);
                self.rpos = 0;
                self.rend = 0;
                self.idle_since_ns = None;
            }
            Some(_) => {}
        }
    }

    /// Reads from the socket straight into `dst` (a large message's body)
    /// until it is full, the socket would block, or a short read shows
    /// that it is drained (the re-armed poll catches what arrives after);
    /// returns the bytes read and whether the stream ended (or failed).
    pub fn receive_into(&mut self, dst: &mut [u8]) -> (usize, bool) {
        let mut done = 0;
        while done < dst.len() {
            match self.stream.read(&mut dst[done..]) {
                Ok(0) => return (done, true),
                Ok(n) if done + n < dst.len() => return (done + n, false),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return (done, true),
            }
        }
        (done, false)
    }

    /// Makes room for a message of `need` bytes starting at `rpos`.
    pub fn reserve_message(&mut self, need: usize) {
        if self.rbuf.len() - self.rpos < need {
            if need > self.rbuf.len() {
                let mut grown = AlignedBuf::scratch(need);
                grown[..self.rend - self.rpos].copy_from_slice(&self.rbuf[self.rpos..self.rend]);
                self.rbuf = grown;
            } else {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
            }
            self.rend -= self.rpos;
            self.rpos = 0;
        }
    }

    /// Queues a reply and sends what the socket takes (polling for
    /// writability if it would block).
    pub fn send(&mut self, msg: Vec<u8>, io: &mut Io<'_>) {
        self.queue(msg);
        self.send_queued(io);
    }

    /// Queues a reply without sending it: [`Wire::send_queued`] sends it,
    /// with the others queued by then, in as few system calls as the
    /// socket takes.
    pub fn queue(&mut self, msg: Vec<u8>) {
        self.push(Reply {
            head: msg,
            body: None,
        });
    }

    /// Queues a reply of `head` followed by `body[range]`, sent later from
    /// `body` itself (no copy) by [`Wire::send_queued`].
    pub fn queue_with_body(&mut self, head: Vec<u8>, body: AlignedBuf, range: Range<usize>) {
        assert!(range.end <= body.len(), "a reply body past its buffer");
        self.push(Reply {
            head,
            body: Some((body, range)),
        });
    }

    fn push(&mut self, reply: Reply) {
        assert!(reply.len() > 0, "an empty reply");
        self.out_bytes += reply.len() as u64;
        self.out.push_back(reply);
    }

    /// Sends what the socket takes of the queued replies, unless a
    /// writability poll is armed (it sends them once the socket has room).
    pub fn send_queued(&mut self, io: &mut Io<'_>) {
        if !self.write_armed && !self.out.is_empty() {
            self.flush(io);
        }
    }

    /// Sends queued replies until the socket would block (then polls for
    /// writability) or the queue is empty.
    fn flush(&mut self, io: &mut Io<'_>) {
        while !self.out.is_empty() {
            match self.write_front() {
                // A socket that takes nothing of a non-empty write is
                // closed for writing: as an error below.
                Ok(0) => {
                    self.drop_output();
                    return;
                }
                Ok(n) => self.consume(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.write_armed = true;
                    io.poll(self.stream.fd(), true, self.token(true));
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.drop_output();
                    return;
                }
            }
        }
    }

    /// The client is gone: drops the replies it will never read and marks
    /// the connection closing.
    fn drop_output(&mut self) {
        self.out.clear();
        self.out_bytes = 0;
        self.out_pos = 0;
        self.closing = true;
    }

    /// Writes the front of the queue, up to [`REPLIES_PER_WRITE`] replies
    /// in one vectored write (the first from where the last write left
    /// it); returns the bytes the socket took.
    fn write_front(&mut self) -> io::Result<usize> {
        let mut slices = [io::IoSlice::new(&[]); 2 * REPLIES_PER_WRITE];
        let mut count = 0;
        for (i, reply) in self.out.iter().take(REPLIES_PER_WRITE).enumerate() {
            let [head, body] = reply.from(if i == 0 { self.out_pos } else { 0 });
            for part in [head, body].into_iter().filter(|p| !p.is_empty()) {
                slices[count] = part;
                count += 1;
            }
        }
        match count {
            1 => self.stream.write(&slices[0]),
            _ => self.stream.write_vectored(&slices[..count]),
        }
    }

    /// Drops `n` sent bytes from the front of the queue of replies.
    fn consume(&mut self, mut n: usize) {
        while n > 0 {
            let front = self
                .out
                .front()
                .expect("bytes sent past the queued replies");
            let left = front.len() - self.out_pos;
            if n < left {
                self.out_pos += n;
                return;
            }
            n -= left;
            self.out_bytes -= front.len() as u64;
            self.out.pop_front();
            self.out_pos = 0;
        }
    }

    /// Shuts the socket down (an armed poll holds a reference that would
    /// otherwise keep it open).
    fn shutdown(&self) {
        let _ = match &self.stream.socket {
            Socket::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Socket::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wire on one end of a socket pair, and the other end.
    fn pair() -> (Wire, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let stream = Stream::unadmitted(Socket::Unix(ours));
        (Wire::new(stream, 0, 0), theirs)
    }

    #[test]
    fn a_streaming_client_grows_the_buffer_and_an_idle_one_shrinks_it() {
        let (mut w, mut client) = pair();
        assert_eq!(w.rbuf.len(), RECEIVE_MIN_BYTES);
        let sent: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        client.write_all(&sent).unwrap();
        assert!(!w.receive(READ_CHUNK));
        // Grown fourfold twice (16 KiB, 64 KiB, 256 KiB) within one receive.
        assert_eq!(w.rbuf.len(), READ_CHUNK);
        assert_eq!(w.unparsed(), &sent[..]);
        assert_eq!(w.grown_bytes(), READ_CHUNK - RECEIVE_MIN_BYTES);
        // Not while bytes wait unparsed, and not before a second idle.
        w.shrink_when_idle(0);
        assert_eq!(w.rbuf.len(), READ_CHUNK);
        w.rpos = w.rend;
        w.shrink_when_idle(1_000);
        w.shrink_when_idle(1_000 + SHRINK_AFTER_IDLE_NS - 1);
        assert_eq!(w.rbuf.len(), READ_CHUNK);
        // Bytes received start the wait again.
        client.write_all(b"x").unwrap();
        assert!(!w.receive(READ_CHUNK));
        w.rpos = w.rend;
        w.shrink_when_idle(1_000 + SHRINK_AFTER_IDLE_NS);
        assert_eq!(w.rbuf.len(), READ_CHUNK);
        w.shrink_when_idle(1_000 + 2 * SHRINK_AFTER_IDLE_NS);
        assert_eq!((w.rbuf.len(), w.unparsed().len()), (RECEIVE_MIN_BYTES, 0));
    }

    struct TestConn {
        wire: Wire,
        busy: bool,
    }

    impl Connection for TestConn {
        fn wire(&self) -> &Wire {
            &self.wire
        }
        fn wire_mut(&mut self) -> &mut Wire {
            &mut self.wire
        }
    }

    /// A table of `n` connections (their clients' ends kept open).
    fn table(n: usize) -> (ConnTable<TestConn>, Vec<UnixStream>) {
        let mut t = ConnTable::default();
        let mut clients = Vec::new();
        for _ in 0..n {
            let (wire, client) = pair();
            t.place(|_, _| TestConn { wire, busy: false });
            clients.push(client);
        }
        (t, clients)
    }

    fn active(t: &ConnTable<TestConn>) -> Vec<usize> {
        (0..t.active_len()).map(|i| t.active_slot(i)).collect()
    }

    #[test]
    fn walks_visit_the_marked_connections_until_they_rest() {
        let (mut t, _clients) = table(5);
        assert!(active(&t).is_empty(), "a new connection rests");
        t.mark_active(3);
        t.mark_active(1);
        t.mark_active(3);
        assert_eq!(active(&t), vec![3, 1], "each once, in marking order");
        t.at(1).unwrap().busy = true;
        t.retain_active(|c| c.busy);
        assert_eq!(active(&t), vec![1]);
        // Resting again, a connection is marked anew.
        t.mark_active(3);
        assert_eq!(active(&t), vec![1, 3]);
        // Closing among the active ones leaves the others open.
        t.close_finished(false, |c| !c.busy, |_| false);
        assert!(t.at(3).is_none() && t.at(0).is_some() && t.at(1).is_some());
        assert_eq!(active(&t), vec![1], "a closed slot leaves the list");
        assert_eq!(t.len(), 4);
        // The next connection takes the closed slot.
        let (wire, _client) = pair();
        assert_eq!(t.place(|_, _| TestConn { wire, busy: false }), 3);
        assert_eq!((t.len(), t.slots.len()), (5, 5));
        // Stopping closes every connection, active or not.
        t.close_finished(true, |_| true, |_| false);
        assert!(t.is_empty());
        assert!(active(&t).is_empty());
    }

    #[test]
    fn a_buffer_grows_only_to_its_limit_and_not_when_paused_full() {
        let (mut w, mut client) = pair();
        client.write_all(&[7u8; 40_000]).unwrap();
        // Held to its size (the server's memory is full): one buffer's worth.
        assert!(!w.receive(RECEIVE_MIN_BYTES));
        assert_eq!(
            (w.rbuf.len(), w.unparsed().len()),
            (RECEIVE_MIN_BYTES, RECEIVE_MIN_BYTES)
        );
        // Full of unparsed bytes (a paused connection): no growth, no read.
        assert!(!w.receive(READ_CHUNK));
        assert_eq!(
            (w.rbuf.len(), w.unparsed().len()),
            (RECEIVE_MIN_BYTES, RECEIVE_MIN_BYTES)
        );
        // Once parsed, the rest comes in a buffer grown to hold it.
        w.rpos = w.rend;
        assert!(!w.receive(READ_CHUNK));
        assert_eq!(w.unparsed().len(), 40_000 - RECEIVE_MIN_BYTES);
        assert_eq!(w.rbuf.len(), 4 * RECEIVE_MIN_BYTES);
        drop(client);
        w.rpos = w.rend;
        assert!(w.receive(READ_CHUNK), "end of stream");
    }
}
