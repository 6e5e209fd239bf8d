//! The NBD server: a bounded pool runs handshakes (`handshakes.rs`); the engine's event loop
//! ([`Runtime`]) runs the volume, and the server is its front end, owning
//! every connection in the transmission phase.
//!
//! Connection sockets are non-blocking. The loop polls them for readability
//! through the reactor, reads every complete request (many in flight per
//! connection), and sends replies directly, falling back to a writability
//! poll when the socket's buffer is full, so a slow client never blocks the
//! loop. A client that breaks framing (bad magic) is disconnected with a log
//! line; a bad request (range, size, command, flags) gets an error reply.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tiermux_engine::buf::AlignedBuf;
use tiermux_engine::config::Listen;
use tiermux_engine::device::DeviceCounters;
use tiermux_engine::reactor::Waker;
use tiermux_engine::runtime::{Flow, Frontend, Io, Runtime};
use tiermux_engine::slab::Slab;
use tiermux_engine::volume::{Done, Request, VolumeStats, MAX_REQUEST_BYTES};
use tiermux_engine::Volume;

use crate::handshakes::{HandshakePool, Handshaken};
use crate::proto::{self, errno, Export, RequestHeader, REQUEST_BYTES};
use crate::read_ahead::{self, Ahead};
pub use crate::sock::Stream;
use crate::sock::{ConnTable, Connection, Wire, READ_CHUNK};
use memory::RequestMemory;
pub use memory::DEFAULT_REQUEST_MEMORY_BYTES;
use reads::{client_read, last_piece, queue_read_chunk, ReadChunk};
pub use reads::{read_piece_bytes, MAX_READ_PIECES, READ_PIECE_BYTES};

mod memory;
mod reads;

/// Handle to stop a running server from another thread (or a signal).
#[derive(Clone)]
pub struct Shutdown {
    flag: Arc<AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl Shutdown {
    /// Asks the server to finish in-flight requests, checkpoint and return.
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().expect("waker").as_ref() {
            w.wake();
        }
    }
}

/// Counters of a server run.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerStats {
    /// Connections that entered transmission.
    pub connections: u64,
    /// Requests answered with an error because they were malformed.
    pub bad_requests: u64,
    /// Connections closed for breaking the protocol.
    pub protocol_violations: u64,
    /// Connections closed before their handshake because too many waited
    /// for one.
    pub handshakes_refused: u64,
    /// Connections closed at once because the most the server holds were
    /// open ([`crate::listener`]).
    pub connections_refused: u64,
    /// Reads started ahead of sequential reads ([`read_ahead`]).
    pub reads_ahead: u64,
    /// Client reads answered from a read ahead.
    pub reads_ahead_used: u64,
}

/// A snapshot of a running server and its volume, which the loop publishes
/// every [`LIVE_INTERVAL_NS`] (and once more when it stops), for callers
/// that measure while it serves (`tiermux bench`).
#[derive(Clone, Debug, Default)]
pub struct LiveStats {
    /// Server counters.
    pub server: ServerStats,
    /// Volume counters.
    pub volume: VolumeStats,
    /// Per-device counters, in the volume's device order.
    pub devices: Vec<DeviceCounters>,
    /// The policy's controller variables (for NHC, `load_admit` and others).
    pub controller: Vec<(String, f64)>,
    /// Connections open now.
    pub open_connections: u64,
    /// Metadata journal records written since the volume opened.
    pub journal_records: u64,
    /// Metadata checkpoints written since the volume opened.
    pub checkpoints: u64,
}

/// Replies queued on a connection of at least this many bytes are sent
/// after the loop started the device I/O queued so far ([`Flow::StartThen`]):
/// copying them into the socket takes long enough (about 100 µs a MiB)
/// that reads started first overlap it.
pub const LONG_SEND_BYTES: u64 = 128 << 10;

/// How often the loop publishes [`LiveStats`].
pub const LIVE_INTERVAL_NS: u64 = 20_000_000;

struct Conn {
    wire: Wire,
    /// Payload bytes of an oversized write still to skip.
    discard: u64,
    /// A large write whose payload is being read straight into its own
    /// buffer (no copy through the receive buffer).
    body: Option<Body>,
    inflight: u32,
    /// Bytes of the data of requests in flight.
    data_bytes: u64,
    /// Reads are answered with structured replies, in chunks.
    structured_replies: bool,
    /// Sequential reads are read ahead ([`read_ahead`]).
    reads_ahead: bool,
    /// Where the connection's reads have been going.
    stream: read_ahead::Stream,
    /// Its read ahead, running or done; while it runs it counts in
    /// `inflight`, and its bytes count in `data_bytes` until a client read
    /// takes them or it is dropped.
    ahead: Option<Ahead>,
    /// The data bytes of the next request, parsed and waiting for the
    /// server's request memory ([`RequestMemory::admits`]).
    waiting_bytes: Option<u64>,
}

/// A write's payload being received.
struct Body {
    header: RequestHeader,
    payload: AlignedBuf,
    filled: usize,
}

struct Pending {
    conn: usize,
    gen: u32,
    handle: u64,
    /// Data bytes the request holds (its read length or write payload).
    bytes: u64,
    /// A read on a connection with structured replies: what its chunk says.
    chunk: Option<ReadChunk>,
    /// The connection's read ahead (no client waits for this request
    /// itself).
    ahead: bool,
}

impl Connection for Conn {
    fn wire(&self) -> &Wire {
        &self.wire
    }
    fn wire_mut(&mut self) -> &mut Wire {
        &mut self.wire
    }
}

impl Conn {
    /// Whether the connection may start another request.
    fn can_take(&self) -> bool {
        self.inflight < MAX_INFLIGHT_PER_CONN && self.held_bytes() < MAX_HELD_BYTES_PER_CONN
    }

    /// Bytes the connection holds: replies not yet sent and the data of
    /// its requests in flight.
    fn held_bytes(&self) -> u64 {
        self.wire.out_bytes + self.data_bytes
    }

    /// Whether the connection may read and start requests again: below its
    /// own limits, and with room in the server's request memory for the
    /// request it waits with, if any.
    fn may_go_on(&self, memory: &RequestMemory) -> bool {
        self.can_take()
            && self
                .waiting_bytes
                .is_none_or(|bytes| memory.admits(self.held_bytes(), bytes))
    }

    /// Whether the connection needs nothing of the loop's walks between
    /// waits: nothing in flight, held, read ahead or unsent, and its read
    /// poll armed (the poll brings it back).
    fn at_rest(&self) -> bool {
        self.inflight == 0
            && self.ahead.is_none()
            && !self.wire.has_output()
            && self.wire.read_armed
            && !self.wire.closing
            && self.memory_bytes() == 0
    }

    /// Bytes the connection holds against the server's request memory:
    /// [`Conn::held_bytes`], the payload of a write being received, and its
    /// receive buffer past the size every connection has
    /// ([`Wire::grown_bytes`]).
    fn memory_bytes(&self) -> u64 {
        self.held_bytes()
            + self.body.as_ref().map_or(0, |b| b.payload.len() as u64)
            + self.wire.grown_bytes() as u64
    }
}

/// A listening NBD server for one volume.
pub struct Server {
    listen: Listen,
    export: Export,
    shutdown: Shutdown,
    inbox: Arc<Mutex<Vec<Handshaken>>>,
    stats: ServerStats,
    live: Arc<Mutex<LiveStats>>,
    /// Control calls (`tiermux ctl`) waiting for the loop.
    control: crate::control::Inbox,
    /// Connections the handshake pool closed for want of room.
    handshakes_refused: Arc<std::sync::atomic::AtomicU64>,
    /// Connections the listener closed because the most were open.
    connections_refused: Arc<std::sync::atomic::AtomicU64>,
    /// Bytes all connections together may hold before new requests wait
    /// ([`RequestMemory`]).
    request_memory_bytes: u64,
}

/// Requests one connection may have in flight; beyond it the server stops
/// reading that connection until replies go out (back-pressure through the
/// socket).
pub const MAX_INFLIGHT_PER_CONN: u32 = 256;

/// Bytes one connection may hold in the server: replies queued and not yet
/// sent, plus the data of its requests in flight. A request is taken while
/// the connection is below this, so its memory stays under this plus one
/// request (32 MiB) plus the receive buffer (32 MiB).
pub const MAX_HELD_BYTES_PER_CONN: u64 = 64 << 20;

impl Server {
    /// A server for `export` on `listen`.
    pub fn new(listen: Listen, export: Export) -> Server {
        Server {
            listen,
            export,
            shutdown: Shutdown {
                flag: Arc::new(AtomicBool::new(false)),
                waker: Arc::new(Mutex::new(None)),
            },
            inbox: Arc::new(Mutex::new(Vec::new())),
            stats: ServerStats::default(),
            live: Arc::new(Mutex::new(LiveStats::default())),
            control: Default::default(),
            handshakes_refused: Default::default(),
            connections_refused: Default::default(),
            request_memory_bytes: DEFAULT_REQUEST_MEMORY_BYTES,
        }
    }

    /// Sets the bytes all connections together may hold (request data in
    /// flight and replies not yet sent) before new requests wait; at least
    /// one byte.
    pub fn set_request_memory_bytes(&mut self, bytes: u64) {
        assert!(bytes > 0, "a request memory of zero bytes");
        self.request_memory_bytes = bytes;
    }

    /// The handle that stops [`Server::run`].
    pub fn shutdown_handle(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// The snapshot [`Server::run`] keeps up to date.
    pub fn live_stats(&self) -> Arc<Mutex<LiveStats>> {
        self.live.clone()
    }

    fn publish(&self, vol: &Volume, open_connections: usize) {
        let mut l = self.live.lock().expect("live stats");
        l.server = self.stats;
        l.server.handshakes_refused = self.handshakes_refused.load(Ordering::Relaxed);
        l.server.connections_refused = self.connections_refused.load(Ordering::Relaxed);
        l.open_connections = open_connections as u64;
        (l.journal_records, l.checkpoints) = vol.metadata_counters();
        l.volume = vol.stats();
        l.devices.clear();
        l.devices.extend(vol.devices().iter().map(|d| d.counters));
        l.controller.clear();
        l.controller.extend(
            vol.policy()
                .controller_state()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v)),
        );
    }

    /// Listens for control commands (`tiermux ctl`) on the Unix socket
    /// `path`; [`Server::run`] carries them out. Call after
    /// [`Server::bind`].
    pub fn start_control(
        &self,
        path: &std::path::Path,
        info: crate::metrics::VolumeInfo,
    ) -> io::Result<crate::control::ControlEndpoint> {
        let waker = self.shutdown.waker.lock().expect("waker").clone();
        let waker = waker.ok_or_else(|| io::Error::other("the server is not bound yet"))?;
        crate::control::ControlEndpoint::start(
            path,
            self.control.clone(),
            waker,
            Some((self.live.clone(), info)),
        )
    }

    /// Binds the socket (removing a stale Unix socket file) and starts the
    /// accept thread; returns the address actually bound.
    pub fn bind(&mut self, waker: Waker) -> io::Result<String> {
        *self.shutdown.waker.lock().expect("waker") = Some(waker.clone());
        let flag = self.shutdown.flag.clone();
        let pool = HandshakePool::start(self.export.clone(), self.inbox.clone(), waker);
        self.handshakes_refused = pool.refused.clone();
        let accept = move |s: Stream| pool.offer(s);
        // NBD has no way to refuse before its handshake: a connection
        // over the limit is closed.
        let admission = crate::listener::Admission::for_this_process(b"");
        self.connections_refused = admission.refused.clone();
        crate::listener::spawn_listener(&self.listen, flag, admission, accept)
    }

    /// Serves until shut down; then finishes in-flight requests, closes the
    /// connections and checkpoints the volume.
    pub fn run(&mut self, rt: &mut Runtime) -> anyhow::Result<ServerStats> {
        let limit_bytes = self.request_memory_bytes;
        let mut f = Connections {
            server: self,
            conns: ConnTable::default(),
            pending: Slab::new(),
            split_reads: Slab::new(),
            writes_started: Vec::new(),
            memory: RequestMemory {
                held_bytes: 0,
                limit_bytes,
            },
            stopping: false,
            published_ns: 0,
        };
        rt.run(&mut f)?;
        self.publish(rt.volume(), 0);
        if let Listen::Unix(p) = &self.listen {
            let _ = std::fs::remove_file(p);
        }
        self.stats.handshakes_refused = self.handshakes_refused.load(Ordering::Relaxed);
        self.stats.connections_refused = self.connections_refused.load(Ordering::Relaxed);
        Ok(self.stats)
    }
}

/// The server as the event loop's front end: its connections and the
/// requests they have in flight.
struct Connections<'a> {
    server: &'a mut Server,
    conns: ConnTable<Conn>,
    pending: Slab<Pending>,
    /// Reads split into pieces: the pieces of each still running.
    split_reads: Slab<u32>,
    /// The byte ranges of writes started since the read aheads were last
    /// checked against them ([`Connections::stale_reads_ahead`]).
    writes_started: Vec<(u64, u64)>,
    /// What the connections hold together, against the server's limit.
    memory: RequestMemory,
    stopping: bool,
    published_ns: u64,
}

impl Connections<'_> {
    fn accept(&mut self, h: Handshaken, io: &mut Io<'_>) {
        self.server.stats.connections += 1;
        let conn = |wire| Conn {
            wire,
            discard: 0,
            body: None,
            inflight: 0,
            data_bytes: 0,
            structured_replies: h.structured_replies,
            reads_ahead: self.server.export.read_ahead,
            stream: read_ahead::Stream::default(),
            ahead: None,
            waiting_bytes: None,
        };
        self.conns.insert(h.stream, conn, io);
    }

    /// Closes the connections that are done (all of them once stopping),
    /// then stops walking those at rest.
    fn close_finished(&mut self) {
        let stopping = self.stopping;
        self.conns.close_finished(
            stopping,
            |c| (c.wire.closing || stopping) && c.inflight == 0 && !c.wire.has_output(),
            Conn::at_rest,
        );
    }
}

impl Frontend for Connections<'_> {
    fn on_done(&mut self, d: Done, io: &mut Io<'_>) {
        // Replies are queued here and sent in `before_wait`.
        let Some(p) = self.pending.remove(d.id as usize) else {
            return;
        };
        if p.ahead {
            return self.ahead_done(p, d, io);
        }
        // A split read's last piece ends its reply, even when its
        // connection is gone.
        let last = p
            .chunk
            .is_none_or(|ch| last_piece(&mut self.split_reads, ch));
        self.conns.mark_active(p.conn);
        let Some(c) = self.conns.get(p.conn, p.gen) else {
            return;
        };
        c.inflight -= 1;
        c.data_bytes -= p.bytes;
        if let Some(ch) = p.chunk {
            return queue_read_chunk(c, &p, ch, d, last);
        }
        let header = proto::simple_reply(p.handle, proto::protocol_errno(d.error)).to_vec();
        match d.data {
            Some(data) => {
                let range = d.data_offset..d.data_offset + d.len as usize;
                c.wire.queue_with_body(header, data, range);
            }
            None => c.wire.queue(header),
        }
    }

    fn on_ready(&mut self, token: u64, _result: i32, io: &mut Io<'_>) {
        let Some(idx) = self.conns.polled(token, io) else {
            return;
        };
        self.conns.mark_active(idx);
        self.read_from(idx, io);
    }

    fn on_wake(&mut self, io: &mut Io<'_>) {
        crate::control::serve_calls(&self.server.control, io);
        let new: Vec<Handshaken> = std::mem::take(&mut *self.server.inbox.lock().expect("inbox"));
        for s in new {
            if !self.stopping {
                self.accept(s, io);
            }
        }
    }

    fn before_wait(&mut self, io: &mut Io<'_>) -> Flow {
        let now = io.now_ns();
        if now >= self.published_ns + LIVE_INTERVAL_NS {
            self.server.publish(io.volume(), self.conns.len());
            self.published_ns = now;
        }
        // Replies of requests finished since the last wait (`on_done`
        // queues them) go out together: one write per connection. Long
        // ones wait until the device reads queued by now have started
        // (`after_start`), so that the two overlap.
        let mut long_sends = false;
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            if let Some(c) = self.conns.at(idx) {
                if c.wire.out_bytes >= LONG_SEND_BYTES {
                    long_sends = true;
                } else {
                    c.wire.send_queued(io);
                }
            }
        }
        // Resuming may read the end of a paused connection's stream, which
        // closes it right away: nothing else would wake the loop for it.
        self.sum_held_bytes(io.now_ns());
        self.resume_paused(io);
        // Before closing: a stop asked for since the last wait closes the
        // idle connections now (nothing else may wake the loop again).
        if self.server.shutdown.flag.load(Ordering::SeqCst) {
            self.stopping = true;
        }
        self.close_finished();
        if self.stopping && self.conns.is_empty() {
            Flow::Stop
        } else if long_sends {
            Flow::StartThen
        } else {
            Flow::Continue
        }
    }

    fn after_start(&mut self, io: &mut Io<'_>) -> bool {
        let mut again = self.stopping;
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            if let Some(c) = self.conns.at(idx) {
                c.wire.send_queued(io);
            }
        }
        self.sum_held_bytes(io.now_ns());
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            if let Some(c) = self.conns.at(idx) {
                // A connection these sends finished may close now, and one
                // paused at its limits may read again: the next pass does
                // that without sleeping first (nothing else would wake it).
                again |= c.wire.closing || (!c.wire.read_armed && c.may_go_on(&self.memory));
            }
        }
        again
    }
}

impl Connections<'_> {
    /// Reads again from connections paused at their limits
    /// ([`MAX_INFLIGHT_PER_CONN`], [`MAX_HELD_BYTES_PER_CONN`], the
    /// server's request memory) that are below them now.
    fn resume_paused(&mut self, io: &mut Io<'_>) {
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            let Some(c) = self.conns.at(idx) else {
                continue;
            };
            if c.wire.read_armed || c.wire.closing || !c.may_go_on(&self.memory) {
                continue;
            }
            self.read_from(idx, io);
        }
    }

    /// Gives back the grown receive buffers of connections long idle (no
    /// request in flight or being received), and sums what the connections
    /// hold into the request memory's count.
    fn sum_held_bytes(&mut self, now_ns: u64) {
        let mut held_bytes = 0;
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            if let Some(c) = self.conns.at(idx) {
                if c.inflight == 0 && c.body.is_none() {
                    c.wire.shrink_when_idle(now_ns);
                }
                held_bytes += c.memory_bytes();
            }
        }
        self.memory.held_bytes = held_bytes;
    }

    /// Reads what connection `idx` has sent and starts its complete
    /// requests; then marks the read aheads its writes touched stale.
    fn read_from(&mut self, idx: usize, io: &mut Io<'_>) {
        let stopping = self.stopping;
        let conn = self.conns.at(idx).expect("a live connection");
        let mut ctx = Ctx {
            pending: &mut self.pending,
            split_reads: &mut self.split_reads,
            writes_started: &mut self.writes_started,
            memory: &mut self.memory,
            stats: &mut self.server.stats,
        };
        read_requests(conn, io, &mut ctx, stopping);
        self.stale_reads_ahead();
    }
}

struct Ctx<'a> {
    pending: &'a mut Slab<Pending>,
    split_reads: &'a mut Slab<u32>,
    writes_started: &'a mut Vec<(u64, u64)>,
    memory: &'a mut RequestMemory,
    stats: &'a mut ServerStats,
}

fn reply_now(c: &mut Conn, handle: u64, err: u32, io: &mut Io<'_>) {
    c.wire.send(proto::simple_reply(handle, err).to_vec(), io);
}

/// Answers a request that is not carried out with `err`: a read on a
/// connection with structured replies gets an error chunk that says `why`.
fn refuse(c: &mut Conn, h: &RequestHeader, err: u32, why: &str, io: &mut Io<'_>) {
    if c.structured_replies && h.kind == proto::CMD_READ {
        c.wire
            .send(proto::error_chunk(h.handle, err, why, None, true), io);
    } else {
        reply_now(c, h.handle, err, io);
    }
}

/// Reads what the socket has and starts every complete request.
fn read_requests(c: &mut Conn, io: &mut Io<'_>, ctx: &mut Ctx<'_>, stopping: bool) {
    let eof = loop {
        if let Some(mut b) = c.body.take() {
            let (n, eof) = c.wire.receive_into(&mut b.payload[b.filled..]);
            b.filled += n;
            if b.filled < b.payload.len() {
                c.body = Some(b);
                if eof {
                    c.wire.closing = true;
                } else {
                    c.wire.arm_read(io);
                }
                return;
            }
            // Its bytes count as the request's from here (`track`).
            ctx.memory.held_bytes -= b.payload.len() as u64;
            start_or_refuse(c, b.header, Some(b.payload), io, ctx, stopping);
        }
        // A receive buffer grows only while the server's memory has room.
        let (len, grown_bytes) = (c.wire.rbuf.len(), c.wire.grown_bytes());
        let growth = READ_CHUNK.saturating_sub(len) as u64;
        let max_len = if ctx.memory.has_room(growth) {
            READ_CHUNK
        } else {
            len
        };
        let eof = c.wire.receive(max_len);
        ctx.memory.held_bytes = (ctx.memory.held_bytes + c.wire.grown_bytes() as u64)
            .saturating_sub(grown_bytes as u64);
        parse_requests(c, io, ctx, stopping);
        // A large write's payload follows its header: read it now rather
        // than after another poll.
        if eof || c.body.is_none() {
            break eof;
        }
    };
    if eof {
        c.wire.closing = true;
    } else if c.may_go_on(ctx.memory) {
        c.wire.arm_read(io); // nothing when closing
    }
    // Otherwise the connection pauses: `before_wait` resumes it once
    // replies have gone out.
}

/// Starts every complete request in the receive buffer; skips the payload
/// of an oversized write; closes the connection on broken framing.
fn parse_requests(c: &mut Conn, io: &mut Io<'_>, ctx: &mut Ctx<'_>, stopping: bool) {
    loop {
        if !c.can_take() {
            break;
        }
        if c.discard > 0 {
            let skip = (c.discard as usize).min(c.wire.rend - c.wire.rpos);
            c.wire.rpos += skip;
            c.discard -= skip as u64;
            if c.discard > 0 {
                break;
            }
        }
        if c.wire.rend - c.wire.rpos < REQUEST_BYTES {
            break;
        }
        let hb: [u8; REQUEST_BYTES] = c.wire.rbuf[c.wire.rpos..c.wire.rpos + REQUEST_BYTES]
            .try_into()
            .expect("header");
        let h = match proto::parse_request(&hb) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("tiermux: client broke the protocol ({e}); disconnecting");
                ctx.stats.protocol_violations += 1;
                c.wire.closing = true;
                c.wire.rpos = 0;
                c.wire.rend = 0;
                return;
            }
        };
        // The request waits, unparsed, while the server's connections
        // hold too much together.
        let bytes = request_data_bytes(&h);
        if !ctx.memory.admits(c.held_bytes(), bytes) {
            c.waiting_bytes = Some(bytes);
            break;
        }
        c.waiting_bytes = None;
        if h.kind == proto::CMD_WRITE {
            match write_payload(c, h, io, ctx) {
                Payload::InBuffer => {}
                Payload::Refused => continue,
                Payload::Awaited => break,
            }
        }
        c.wire.rpos += REQUEST_BYTES;
        let payload = if h.kind == proto::CMD_WRITE {
            let p =
                AlignedBuf::from_slice(&c.wire.rbuf[c.wire.rpos..c.wire.rpos + h.length as usize]);
            c.wire.rpos += h.length as usize;
            Some(p)
        } else {
            None
        };
        start_or_refuse(c, h, payload, io, ctx, stopping);
        if c.wire.closing {
            break;
        }
    }
}

/// Where a write request's payload stands once its header is parsed.
enum Payload {
    /// The whole payload follows the header in the receive buffer.
    InBuffer,
    /// Over the size limit: refused, and its payload is being skipped.
    Refused,
    /// Not all here yet: the connection reads the rest first.
    Awaited,
}

/// Checks a write request's size and makes room for its payload: a
/// payload larger than a read chunk is read straight into its own buffer,
/// a smaller one waits in the receive buffer.
fn write_payload(c: &mut Conn, h: RequestHeader, io: &mut Io<'_>, ctx: &mut Ctx<'_>) -> Payload {
    if h.length > MAX_REQUEST_BYTES {
        c.wire.rpos += REQUEST_BYTES;
        c.discard = h.length as u64;
        ctx.stats.bad_requests += 1;
        eprintln!(
            "tiermux: write of {} bytes exceeds the {MAX_REQUEST_BYTES}-byte limit",
            h.length
        );
        reply_now(c, h.handle, errno::EOVERFLOW, io);
        return Payload::Refused;
    }
    let need = REQUEST_BYTES + h.length as usize;
    let have = c.wire.rend - c.wire.rpos;
    if have >= need {
        return Payload::InBuffer;
    }
    if need > READ_CHUNK {
        ctx.memory.held_bytes += h.length as u64;
        let mut payload = AlignedBuf::scratch(h.length as usize);
        let start = c.wire.rpos + REQUEST_BYTES;
        let got = have - REQUEST_BYTES;
        payload[..got].copy_from_slice(&c.wire.rbuf[start..start + got]);
        c.wire.rpos = c.wire.rend;
        c.body = Some(Body {
            header: h,
            payload,
            filled: got,
        });
    } else {
        c.wire.reserve_message(need);
    }
    Payload::Awaited
}

/// Starts a request, or refuses it while the server stops.
fn start_or_refuse(
    c: &mut Conn,
    h: RequestHeader,
    payload: Option<AlignedBuf>,
    io: &mut Io<'_>,
    ctx: &mut Ctx<'_>,
    stopping: bool,
) {
    if stopping {
        refuse(c, &h, errno::ESHUTDOWN, "the server is shutting down", io);
    } else {
        start_request(c, h, payload, io, ctx);
    }
}

/// What a request header asks for.
enum Decoded {
    /// A volume request.
    Request(Request),
    /// The client disconnects.
    Disconnect,
    /// A bad request: the NBD error and why.
    Bad(u32, String),
}

/// Turns a header (and a write's payload) into a volume request, checking
/// its flags and its range.
fn decode(
    h: &RequestHeader,
    payload: Option<AlignedBuf>,
    vol: &Volume,
    structured_replies: bool,
) -> Decoded {
    let fua = h.flags & proto::CMD_FLAG_FUA != 0;
    // FUA is valid on every command (a read, flush or trim has nothing
    // more to make durable).
    let allowed = match h.kind {
        proto::CMD_WRITE_ZEROES => {
            proto::CMD_FLAG_FUA | proto::CMD_FLAG_NO_HOLE | proto::CMD_FLAG_FAST_ZERO
        }
        proto::CMD_READ if structured_replies => proto::CMD_FLAG_FUA | proto::CMD_FLAG_DF,
        _ => proto::CMD_FLAG_FUA,
    };
    if h.flags & !allowed != 0 {
        let why = format!("flags {:#x} not valid for command {}", h.flags, h.kind);
        return Decoded::Bad(errno::EINVAL, why);
    }
    if h.flags & proto::CMD_FLAG_FAST_ZERO != 0 {
        // Zeroing writes zeros like any write: never faster, so a client
        // asking for fast zeroing is told at once to write them itself.
        let why = "write-zeroes is no faster than writing zeros here".to_string();
        return Decoded::Bad(errno::ENOTSUP, why);
    }
    let (offset, len) = (h.offset, h.length);
    let req = match h.kind {
        proto::CMD_READ => Request::Read { offset, len },
        proto::CMD_WRITE => Request::Write {
            offset,
            data: payload.unwrap_or_else(|| AlignedBuf::zeroed(0)),
            fua,
        },
        proto::CMD_WRITE_ZEROES => Request::WriteZeroes { offset, len, fua },
        proto::CMD_FLUSH => return Decoded::Request(Request::Flush),
        proto::CMD_TRIM => Request::Trim { offset, len },
        proto::CMD_DISC => return Decoded::Disconnect,
        other => return Decoded::Bad(errno::EINVAL, format!("unknown command {other}")),
    };
    let checked = match h.kind {
        proto::CMD_WRITE_ZEROES | proto::CMD_TRIM => vol.check_extent(offset, len as u64),
        _ => vol.check_range(offset, len as u64),
    };
    match checked {
        Ok(()) => Decoded::Request(req),
        Err(e) => Decoded::Bad(
            proto::protocol_errno(e),
            format!(
                "offset {offset} length {len} outside the {}-byte export or too large",
                vol.size_bytes()
            ),
        ),
    }
}

fn start_request(
    c: &mut Conn,
    h: RequestHeader,
    payload: Option<AlignedBuf>,
    io: &mut Io<'_>,
    ctx: &mut Ctx<'_>,
) {
    match decode(&h, payload, io.volume(), c.structured_replies) {
        Decoded::Request(Request::Read { offset, len }) => {
            client_read(c, &h, offset, len, io, ctx);
        }
        Decoded::Request(req) => {
            let bytes = request_data_bytes(&h);
            if matches!(
                h.kind,
                proto::CMD_WRITE | proto::CMD_WRITE_ZEROES | proto::CMD_TRIM
            ) {
                let (o, e) = (h.offset, h.offset + h.length as u64);
                if let Some(a) = c.ahead.as_mut().filter(|a| a.overlaps(o, e)) {
                    a.stale = true;
                }
                ctx.writes_started.push((o, e));
            }
            let id = track(c, ctx, h.handle, bytes, None, false);
            io.submit(id, req);
        }
        Decoded::Disconnect => c.wire.closing = true,
        Decoded::Bad(err, why) => {
            ctx.stats.bad_requests += 1;
            eprintln!("tiermux: bad request (handle {:#x}): {why}", h.handle);
            refuse(c, &h, err, &why, io);
        }
    }
}

/// Notes a volume request of connection `c` about to start: its entry in
/// `ctx.pending` (the client's `handle`, its reply chunk, or whether it is
/// the connection's read ahead), one more in flight, and `bytes` of data
/// held against the connection's limit. Returns the request's id.
fn track(
    c: &mut Conn,
    ctx: &mut Ctx<'_>,
    handle: u64,
    bytes: u64,
    chunk: Option<ReadChunk>,
    ahead: bool,
) -> u64 {
    let id = ctx.pending.insert(Pending {
        conn: c.wire.idx,
        gen: c.wire.gen,
        handle,
        // A read ahead's bytes are released when a client read takes them
        // or it is dropped, not when it finishes (`ahead_done`).
        bytes: if ahead { 0 } else { bytes },
        chunk,
        ahead,
    });
    c.inflight += 1;
    c.data_bytes += bytes;
    ctx.memory.held_bytes += bytes;
    id as u64
}

/// The data a request holds in the server while it runs: a read's or a
/// write's length, a write-zeroes' part buffer, nothing for a flush or a
/// trim; at most [`MAX_REQUEST_BYTES`] (a longer read or write is refused).
fn request_data_bytes(h: &RequestHeader) -> u64 {
    match h.kind {
        proto::CMD_READ | proto::CMD_WRITE | proto::CMD_WRITE_ZEROES => {
            h.length.min(MAX_REQUEST_BYTES) as u64
        }
        _ => 0,
    }
}
