//! The key-value server: a key-value [`Machine`] (cache or store) on the
//! engine's volume behind the Redis protocol, as the event loop's front end. Commands: GET, SET (with
//! EX/PX in cache mode), DEL, EXISTS, MGET, PING, ECHO, INFO, CONFIG GET,
//! QUIT, and SCAN in store mode (`kv_scan.rs`).
//!
//! Each connection's replies go out in the order of its commands, however
//! their storage requests finish; a command of many keys (MGET, DEL k1 k2)
//! is one cache command per key, gathered into one reply. Malformed
//! protocol gets an error reply and closes that connection only; a bad
//! command gets an error reply and the connection goes on.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tiermux_engine::config::Listen;
use tiermux_engine::reactor::Waker;
use tiermux_engine::runtime::{Flow, Frontend, Io, Runtime};
use tiermux_engine::slab::Slab;
use tiermux_engine::volume::{Done, Request};
use tiermux_kv::{Command, IoKind, Machine, Reply, Summary};

use crate::kv_scan::{glob_match, Cursors};
use crate::listener::{spawn_listener, Admission};
use crate::resp;
use crate::sock::{ConnTable, Connection, Stream, Wire, READ_CHUNK};

/// Commands one connection may have in flight before the server stops
/// reading from it.
pub const MAX_COMMANDS_PER_CONN: usize = 1024;
/// Reply bytes one connection may hold unsent before the server stops
/// reading from it.
pub const MAX_OUT_BYTES_PER_CONN: u64 = 64 << 20;
/// Cache commands (a command's keys) one connection may have in the
/// machine at once; the rest wait, in order. It bounds what one
/// connection's reads hold: an MGET of many keys stored on flash reads them
/// this many at a time.
pub const MAX_PARTS_IN_FLIGHT_PER_CONN: usize = 64;
/// Values one reply may gather (an MGET's): a command whose reply would
/// pass this gets an error, so that no command makes the server hold more.
pub const MAX_REPLY_BYTES: u64 = 256 << 20;
/// Bytes of replies (values gathered and replies unsent) the server holds
/// for all its connections together by default: past it, a connection
/// works only on its oldest reply, and only once its client has read the
/// ones before, so that clients that read go on, one reply at a time.
pub const DEFAULT_REPLY_MEMORY_BYTES: u64 = 1 << 30;
/// What a connection over the server's limit is told before it is closed
/// ([`crate::listener`]), in Redis's words.
pub const MAX_CLIENTS_REPLY: &[u8] = b"-ERR max number of clients reached\r\n";

/// Counters of a key-value server run.
#[derive(Clone, Copy, Debug, Default)]
pub struct KvServerStats {
    /// Connections accepted.
    pub connections: u64,
    /// Commands answered.
    pub commands: u64,
    /// Commands answered with an error (unknown, wrong arguments, too large).
    pub bad_commands: u64,
    /// Connections closed for breaking the protocol.
    pub protocol_errors: u64,
    /// Connections refused because the most the server holds were open
    /// ([`crate::listener`]).
    pub connections_refused: u64,
    /// Storage requests that failed.
    pub io_errors: u64,
    /// The machine's counters.
    pub summary: Summary,
}

/// A listening key-value server for one machine.
pub struct KvServer {
    listen: Listen,
    stop: Arc<AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
    inbox: Arc<Mutex<Vec<Stream>>>,
    machine: Machine,
    cursors: Cursors,
    stats: KvServerStats,
    control: crate::control::Inbox,
    /// Which connections the listener admits, and their counts.
    admission: Admission,
    reply_memory_bytes: u64,
}

/// Handle to stop a running key-value server from another thread.
#[derive(Clone)]
pub struct KvShutdown {
    stop: Arc<AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl KvShutdown {
    /// Asks the server to answer what is in flight and return.
    pub fn trigger(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().expect("waker").as_ref() {
            w.wake();
        }
    }
}

impl KvServer {
    /// A server for `machine` on `listen`.
    pub fn new(listen: Listen, machine: Machine) -> KvServer {
        KvServer {
            listen,
            stop: Arc::new(AtomicBool::new(false)),
            waker: Arc::new(Mutex::new(None)),
            inbox: Arc::new(Mutex::new(Vec::new())),
            machine,
            cursors: Cursors::default(),
            stats: KvServerStats::default(),
            control: Default::default(),
            admission: Admission::for_this_process(MAX_CLIENTS_REPLY),
            reply_memory_bytes: DEFAULT_REPLY_MEMORY_BYTES,
        }
    }

    /// Listens for control commands (`tiermux ctl`: `get` and `set` of the
    /// volume policy's parameters) on the Unix socket `path`;
    /// [`KvServer::run`] carries them out. Call after [`KvServer::bind`].
    pub fn start_control(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<crate::control::ControlEndpoint> {
        let waker = self.waker.lock().expect("waker").clone();
        let waker = waker.ok_or_else(|| std::io::Error::other("the server is not bound yet"))?;
        crate::control::ControlEndpoint::start(path, self.control.clone(), waker, None)
    }

    /// Sets the bytes of replies the server holds for all its connections
    /// together ([`DEFAULT_REPLY_MEMORY_BYTES`] until set).
    pub fn set_reply_memory_bytes(&mut self, bytes: u64) {
        assert!(bytes > 0, "a reply memory of zero bytes");
        self.reply_memory_bytes = bytes;
    }

    /// The most clients the server holds at once ([`crate::listener`]).
    pub fn max_clients(&self) -> usize {
        self.admission.max
    }

    /// A handle that stops the server.
    pub fn shutdown_handle(&self) -> KvShutdown {
        KvShutdown {
            stop: self.stop.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Binds the listener; returns the address bound.
    pub fn bind(&mut self, waker: Waker) -> std::io::Result<String> {
        *self.waker.lock().expect("waker") = Some(waker.clone());
        let inbox = self.inbox.clone();
        let accept = move |s: Stream| {
            inbox.lock().expect("inbox").push(s);
            waker.wake();
        };
        spawn_listener(
            &self.listen,
            self.stop.clone(),
            self.admission.clone(),
            accept,
        )
    }

    /// Serves until shut down.
    pub fn run(&mut self, rt: &mut Runtime) -> anyhow::Result<KvServerStats> {
        let size = rt.volume().size_bytes();
        anyhow::ensure!(
            self.machine.volume_bytes() <= size,
            "the key-value {} needs {} bytes and the volume has {size}",
            self.machine.mode(),
            self.machine.volume_bytes()
        );
        let mut f = Front {
            server: self,
            conns: ConnTable::default(),
            routes: Slab::new(),
            stopping: false,
            held_bytes: 0,
        };
        rt.run(&mut f)?;
        if let Listen::Unix(p) = &self.listen {
            let _ = std::fs::remove_file(p);
        }
        self.stats.summary = self.machine.summary();
        self.stats.connections_refused = self.admission.refused.load(Ordering::Relaxed);
        Ok(self.stats)
    }
}

/// A reply being gathered from the answers of its cache commands.
pub(crate) enum ReplyShape {
    /// Written already (errors, PING, SET's +OK).
    Ready(Vec<u8>),
    /// One bulk string (GET).
    Value(Option<Bytes>),
    /// An array of bulk strings (MGET), `left` answers still to come.
    Values(Vec<Option<Bytes>>),
    /// A sum of counts (DEL, EXISTS).
    Count(i64),
    /// +OK once done (SET).
    Ok,
    /// A SCAN step: the keys found (filtered by `pattern`) and the cursor
    /// that resumes after them (0 when the walk is done).
    Scan {
        count: u32,
        pattern: Option<Bytes>,
        keys: Vec<Bytes>,
        cursor: u64,
    },
}

/// Why a connection's parsing stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ParseStop {
    /// The receive buffer holds no complete command.
    NeedBytes,
    /// The connection is at its limits (`MAX_COMMANDS_PER_CONN`,
    /// `MAX_OUT_BYTES_PER_CONN`); commands may wait in the buffer.
    AtLimit,
    /// The connection takes no more commands (QUIT, a broken protocol).
    Closing,
}

struct Pending {
    gather: ReplyShape,
    left: usize,
    error: Option<String>,
    /// Bytes of the values gathered so far.
    value_bytes: u64,
}

struct Conn {
    wire: Wire,
    /// Replies in command order; the front one goes out when complete.
    replies: VecDeque<Pending>,
    /// Sequence number of `replies[0]`.
    first_seq: u64,
    /// Cache commands not yet handed to the machine, in command order:
    /// the reply's sequence number, the part of it, the command.
    parts: VecDeque<(u64, usize, Command)>,
    /// Cache commands in the machine.
    parts_in_flight: usize,
    /// Bytes of values gathered into `replies` and not yet sent.
    gathered_bytes: u64,
}

impl Connection for Conn {
    fn wire(&self) -> &Wire {
        &self.wire
    }
    fn wire_mut(&mut self) -> &mut Wire {
        &mut self.wire
    }
}

impl Pending {
    /// Whether the values gathered passed [`MAX_REPLY_BYTES`] (the reply
    /// is then an error, and the command's other keys are not looked up).
    fn too_large(&self) -> bool {
        self.value_bytes > MAX_REPLY_BYTES
    }
}

impl Conn {
    /// Whether the part of reply `seq` may go to the machine now: not
    /// while the replies held unsent pass [`MAX_OUT_BYTES_PER_CONN`], nor,
    /// but for the oldest reply (which must finish for any to go), while
    /// the values gathered for later ones do. While the server as a whole
    /// holds its reply memory (`server_full`), only the oldest reply of a
    /// connection with nothing unsent.
    fn may_submit(&self, seq: u64, server_full: bool) -> bool {
        let oldest = seq == self.first_seq;
        self.parts_in_flight < MAX_PARTS_IN_FLIGHT_PER_CONN
            && self.wire.out_bytes < MAX_OUT_BYTES_PER_CONN
            && (oldest || self.gathered_bytes < MAX_OUT_BYTES_PER_CONN)
            && (!server_full || (oldest && self.wire.out_bytes == 0))
    }

    /// Bytes of replies the connection holds: values gathered, replies
    /// unsent.
    fn held_bytes(&self) -> u64 {
        self.gathered_bytes + self.wire.out_bytes
    }

    /// Whether the connection needs nothing of the loop's walks between
    /// waits: no command unanswered or unsent, nothing held, its read poll
    /// armed (the poll brings it back) and its receive buffer not grown.
    fn at_rest(&self) -> bool {
        self.replies.is_empty()
            && self.parts.is_empty()
            && self.parts_in_flight == 0
            && self.gathered_bytes == 0
            && !self.wire.has_output()
            && self.wire.read_armed
            && !self.wire.closing
            && self.wire.grown_bytes() == 0
    }

    fn can_take(&self) -> bool {
        self.replies.len() < MAX_COMMANDS_PER_CONN && self.wire.out_bytes < MAX_OUT_BYTES_PER_CONN
    }
}

/// Where a cache command's answer goes: connection, its generation, the
/// reply's sequence number and the part (key index) within it.
#[derive(Clone, Copy)]
struct Route {
    conn: usize,
    gen: u32,
    seq: u64,
    part: usize,
}

struct Front<'a> {
    server: &'a mut KvServer,
    conns: ConnTable<Conn>,
    routes: Slab<Route>,
    stopping: bool,
    /// Bytes of replies all connections hold: summed before every wait,
    /// raised as values are gathered, and lowered only by the next sum
    /// (sending them lowers it), so never below the truth.
    held_bytes: u64,
}

fn now_ms(io: &Io<'_>) -> u64 {
    io.now_ns() / 1_000_000 + 1
}

impl Frontend for Front<'_> {
    fn on_done(&mut self, d: Done, io: &mut Io<'_>) {
        let result = match (&d.data, d.error) {
            (_, e) if e != 0 => Err(e),
            (Some(buf), _) => Ok(&buf[d.data_offset..d.data_offset + d.len as usize]),
            (None, _) => Ok(&[][..]),
        };
        self.server.stats.io_errors += result.is_err() as u64;
        self.server.machine.complete(d.id, result);
        self.pump(io);
    }

    fn on_ready(&mut self, t: u64, _result: i32, io: &mut Io<'_>) {
        if let Some(idx) = self.conns.polled(t, io) {
            self.conns.mark_active(idx);
            self.read(idx, io);
        }
    }

    fn on_wake(&mut self, io: &mut Io<'_>) {
        crate::control::serve_calls(&self.server.control, io);
        let new: Vec<Stream> = std::mem::take(&mut *self.server.inbox.lock().expect("inbox"));
        for s in new {
            if self.stopping {
                continue;
            }
            self.server.stats.connections += 1;
            let conn = |wire| Conn {
                wire,
                replies: VecDeque::new(),
                first_seq: 0,
                parts: VecDeque::new(),
                parts_in_flight: 0,
                gathered_bytes: 0,
            };
            self.conns.insert(s, conn, io);
        }
    }

    fn before_wait(&mut self, io: &mut Io<'_>) -> Flow {
        // Connections held back by their unsent replies take more to the
        // machine once the client has read some. Long idle connections give
        // their grown receive buffers back. Like every walk here, this one
        // visits the active connections only (`Conn::at_rest`).
        let now_ns = io.now_ns();
        let mut held_bytes = 0;
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            if let Some(c) = self.conns.at(idx) {
                if c.replies.is_empty() {
                    c.wire.shrink_when_idle(now_ns);
                }
                held_bytes += c.held_bytes();
            }
        }
        self.held_bytes = held_bytes;
        let now = now_ms(io);
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            if self.conns.at(idx).is_some_and(|c| !c.parts.is_empty()) {
                self.submit_parts(idx, now);
            }
        }
        // Never wait with storage requests queued in the machine: a store
        // opening its volume queues them before any command arrives.
        self.pump(io);
        // Resume connections paused at their limits that are below them now.
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            let resume = self
                .conns
                .at(idx)
                .is_some_and(|c| !c.wire.read_armed && !c.wire.closing && c.can_take());
            if resume {
                self.read(idx, io);
            }
        }
        // Before closing: a stop asked for since the last wait closes the
        // idle connections now (nothing else may wake the loop again).
        if self.server.stop.load(Ordering::SeqCst) {
            self.stopping = true;
        }
        let stopping = self.stopping;
        self.conns.close_finished(
            stopping,
            |c| (c.wire.closing || stopping) && c.replies.is_empty() && !c.wire.has_output(),
            Conn::at_rest,
        );
        let idle = self.server.machine.io_in_flight() == 0;
        if self.stopping && idle && self.conns.is_empty() {
            Flow::Stop
        } else {
            Flow::Continue
        }
    }
}

impl Front<'_> {
    /// Reads what connection `idx` sent and starts its complete commands.
    fn read(&mut self, idx: usize, io: &mut Io<'_>) {
        let stopping = self.stopping;
        let Some(c) = self.conns.at(idx) else {
            return;
        };
        // A connection's receive buffer grows to at most `READ_CHUNK`.
        let eof = c.wire.receive(READ_CHUNK);
        // Replies the cache answers at once (DRAM hits, sets, errors) free
        // the places of their commands within this call, and no poll fires
        // for bytes already read: parse on while the buffer holds commands
        // the connection can take.
        let stop = loop {
            let stop = self.parse(idx, io);
            self.pump(io);
            self.send_ready(idx, io);
            let c = self.conns.at(idx).expect("the connection read");
            if stop != ParseStop::AtLimit || !c.can_take() {
                break stop;
            }
        };
        let c = self.conns.at(idx).expect("the connection read");
        if stopping || (eof && stop != ParseStop::AtLimit) {
            c.wire.closing = true;
        } else if !eof && c.can_take() {
            c.wire.arm_read(io);
        }
        // Otherwise the connection pauses at its limits: `before_wait`
        // resumes it once its replies have gone out (after an end of
        // stream, to parse the commands sent before it).
    }

    /// Starts the complete commands in connection `idx`'s receive buffer
    /// while it can take them; says why it stopped.
    fn parse(&mut self, idx: usize, io: &mut Io<'_>) -> ParseStop {
        let now = now_ms(io);
        loop {
            let c = self.conns.at(idx).expect("a connection");
            if c.wire.closing {
                return ParseStop::Closing;
            }
            if !c.can_take() {
                return ParseStop::AtLimit;
            }
            let buf = c.wire.unparsed();
            let parsed = match resp::parse_command(buf) {
                Ok(None) if buf.len() >= resp::MAX_COMMAND_BYTES => Err(resp::ProtocolError(
                    format!("command longer than {} bytes", resp::MAX_COMMAND_BYTES),
                )),
                other => other,
            };
            match parsed {
                Ok(None) => {
                    if buf.len() == c.wire.rbuf.len() - c.wire.rpos {
                        // A message larger than the buffer: make room.
                        let need = c.wire.rbuf.len() * 2;
                        c.wire.reserve_message(need);
                    }
                    return ParseStop::NeedBytes;
                }
                Ok(Some(resp::Parsed { args: ranges, used })) => {
                    let base = c.wire.rpos;
                    let args: Vec<Bytes> = ranges
                        .into_iter()
                        .map(|r| Bytes::copy_from_slice(&c.wire.rbuf[base + r.start..base + r.end]))
                        .collect();
                    c.wire.rpos += used;
                    if !args.is_empty() {
                        self.command(idx, args, now);
                    }
                }
                Err(e) => {
                    eprintln!("tiermux kv: client broke the protocol ({e}); disconnecting");
                    self.server.stats.protocol_errors += 1;
                    let mut out = Vec::new();
                    resp::error(&mut out, &format!("ERR {e}"));
                    let c = self.conns.at(idx).expect("a connection");
                    c.replies.push_back(Pending {
                        gather: ReplyShape::Ready(out),
                        left: 0,
                        error: None,
                        value_bytes: 0,
                    });
                    c.wire.closing = true;
                    c.wire.rpos = c.wire.rend;
                    return ParseStop::Closing;
                }
            }
        }
    }

    /// Starts one command of connection `idx`.
    fn command(&mut self, idx: usize, args: Vec<Bytes>, now: u64) {
        let c = self.conns.at(idx).expect("a connection");
        let seq = c.first_seq + c.replies.len() as u64;
        let (gather, cmds) = match crate::kv_commands::decode(
            &args,
            now,
            &self.server.machine,
            &self.server.cursors,
            &self.server.admission,
        ) {
            Ok(d) => d,
            Err(msg) => {
                self.server.stats.bad_commands += 1;
                let mut out = Vec::new();
                resp::error(&mut out, &msg);
                (ReplyShape::Ready(out), Vec::new())
            }
        };
        if matches!(gather, ReplyShape::Ready(_)) && args[0].eq_ignore_ascii_case(b"QUIT") {
            c.wire.closing = true;
        }
        let left = cmds.len();
        c.replies.push_back(Pending {
            gather,
            left,
            error: None,
            value_bytes: 0,
        });
        self.server.stats.commands += 1;
        c.parts.extend(
            cmds.into_iter()
                .enumerate()
                .map(|(part, cmd)| (seq, part, cmd)),
        );
        self.submit_parts(idx, now);
    }

    /// Hands connection `idx`'s waiting cache commands to the machine, in
    /// order, as far as [`Conn::may_submit`] lets them go; drops those of
    /// a reply already too large.
    fn submit_parts(&mut self, idx: usize, now: u64) {
        let server_full = self.held_bytes >= self.server.reply_memory_bytes;
        let c = self.conns.at(idx).expect("a connection");
        let gen = c.wire.gen;
        while c
            .parts
            .front()
            .is_some_and(|(seq, _, _)| c.may_submit(*seq, server_full))
        {
            let (seq, part, cmd) = c.parts.pop_front().expect("a waiting part");
            let p = &mut c.replies[(seq - c.first_seq) as usize];
            if p.too_large() {
                p.left -= 1;
                continue;
            }
            let route = Route {
                conn: idx,
                gen,
                seq,
                part,
            };
            let tag = self.routes.insert(route) as u64;
            c.parts_in_flight += 1;
            self.server.machine.submit(tag, cmd, now);
        }
    }

    /// Hands the cache's storage requests to the volume, routes its
    /// replies, and sends every connection's completed replies in order;
    /// connections whose commands were answered hand the machine more,
    /// until nothing moves.
    fn pump(&mut self, io: &mut Io<'_>) {
        loop {
            let touched = self.pump_once(io);
            if touched.is_empty() {
                return;
            }
            let now = now_ms(io);
            for &idx in &touched {
                if self.conns.at(idx).is_some() {
                    self.submit_parts(idx, now);
                }
            }
            for idx in touched {
                self.send_ready(idx, io);
            }
        }
    }

    /// One pass of [`Front::pump`]: submits the machine's storage requests
    /// and routes its replies; returns the connections they reached.
    fn pump_once(&mut self, io: &mut Io<'_>) -> Vec<usize> {
        while let Some(req) = self.server.machine.pop_io() {
            let r = match req.kind {
                IoKind::Read { len_bytes } => Request::Read {
                    offset: req.offset,
                    len: len_bytes,
                },
                IoKind::Write { data, durable } => Request::Write {
                    offset: req.offset,
                    data: tiermux_engine::buf::AlignedBuf::from_slice(&data),
                    fua: durable,
                },
                IoKind::Trim { len_bytes } => Request::Trim {
                    offset: req.offset,
                    len: len_bytes,
                },
            };
            io.submit(req.id, r);
        }
        let mut touched = Vec::new();
        while let Some((tag, reply)) = self.server.machine.pop_reply() {
            let r = self
                .routes
                .remove(tag as usize)
                .expect("a route for every cache command");
            self.conns.mark_active(r.conn);
            let Some(c) = self.conns.get(r.conn, r.gen) else {
                continue;
            };
            c.parts_in_flight -= 1;
            let p = &mut c.replies[(r.seq - c.first_seq) as usize];
            p.left -= 1;
            let before = p.value_bytes;
            absorb(p, r.part, reply, &mut self.server.cursors);
            c.gathered_bytes += p.value_bytes - before;
            self.held_bytes += p.value_bytes - before;
            touched.push(r.conn);
        }
        touched.sort_unstable();
        touched.dedup();
        touched
    }

    fn send_ready(&mut self, idx: usize, io: &mut Io<'_>) {
        let Some(c) = self.conns.at(idx) else {
            return;
        };
        let mut out = Vec::new();
        while c.replies.front().is_some_and(|p| p.left == 0) {
            let p = c.replies.pop_front().expect("a reply");
            c.first_seq += 1;
            c.gathered_bytes -= p.value_bytes;
            encode(p, &mut out);
        }
        if !out.is_empty() {
            c.wire.send(out, io);
        }
    }
}

fn absorb(p: &mut Pending, part: usize, reply: Reply, cursors: &mut Cursors) {
    match (reply, &mut p.gather) {
        (
            Reply::Entries(es),
            ReplyShape::Scan {
                count,
                pattern,
                keys,
                cursor,
            },
        ) => {
            if es.len() == *count as usize {
                *cursor = cursors.after(&es.last().expect("a full step").0);
            }
            let wanted = |k: &Bytes| pattern.as_ref().is_none_or(|p| glob_match(p, k));
            *keys = es.into_iter().map(|(k, _)| k).filter(wanted).collect();
        }
        (Reply::Error(e), _) => p.error = Some(e),
        (Reply::Value(v), ReplyShape::Value(slot)) => {
            p.value_bytes = v.as_ref().map_or(0, |v| v.len() as u64);
            *slot = v;
        }
        (Reply::Value(v), ReplyShape::Values(vs)) => {
            let was_too_large = p.value_bytes > MAX_REPLY_BYTES;
            p.value_bytes += v.as_ref().map_or(0, |v| v.len() as u64);
            if p.value_bytes <= MAX_REPLY_BYTES {
                vs[part] = v;
            } else if !was_too_large {
                // Drop what was gathered; the reply is the error.
                let mb = MAX_REPLY_BYTES >> 20;
                p.error = Some(format!("the reply would pass {mb} MiB; ask for fewer keys"));
                *vs = Vec::new();
            }
        }
        (Reply::Count(n), ReplyShape::Count(sum)) => *sum += n as i64,
        (Reply::Stored, ReplyShape::Ok) => {}
        (reply, _) => unreachable!("reply {reply:?} to a command that does not expect it"),
    }
}

fn encode(p: Pending, out: &mut Vec<u8>) {
    if let Some(e) = p.error {
        resp::error(out, &format!("ERR {e}"));
        return;
    }
    match p.gather {
        ReplyShape::Ready(bytes) => out.extend_from_slice(&bytes),
        ReplyShape::Value(v) => resp::bulk(out, v.as_deref()),
        ReplyShape::Values(vs) => {
            resp::array_header(out, vs.len());
            for v in vs {
                resp::bulk(out, v.as_deref());
            }
        }
        ReplyShape::Count(n) => resp::integer(out, n),
        ReplyShape::Ok => resp::simple(out, "OK"),
        ReplyShape::Scan { keys, cursor, .. } => {
            resp::array_header(out, 2);
            resp::bulk(out, Some(cursor.to_string().as_bytes()));
            resp::array_header(out, keys.len());
            for k in keys {
                resp::bulk(out, Some(&k));
            }
        }
    }
}
