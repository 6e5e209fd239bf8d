//! The NBD server's reads: structured replies in pieces, and reading
//! ahead of a connection's sequential reads ([`crate::read_ahead`]): when
//! a read is answered from a read ahead, when the next range is read, and
//! which writes make a read ahead stale.

use tiermux_engine::runtime::Io;
use tiermux_engine::slab::Slab;
use tiermux_engine::volume::{Done, Request};

use super::{track, Conn, Connections, Ctx, Pending};
use crate::proto::{self, RequestHeader};
use crate::read_ahead::{Ahead, State as AheadState};

/// A read's part of a structured reply.
#[derive(Clone, Copy)]
pub(super) struct ReadChunk {
    /// Where the part starts in the export, bytes.
    pub(super) offset: u64,
    /// For a read split into pieces, its entry in `Connections::split_reads`
    /// (the pieces still running); `None` when the read is one piece.
    pub(super) split: Option<usize>,
}

/// Reads longer than this, on a connection with structured replies, are
/// split into pieces of this size (or a multiple of it, see
/// [`MAX_READ_PIECES`]) at offsets that are multiples of the piece size.
/// Each piece's chunk goes to the client as soon as its device reads
/// complete, so sending the first overlaps reading the rest.
pub const READ_PIECE_BYTES: u64 = 256 << 10;

/// The most pieces a read is split into: a longer read gets longer pieces.
/// Each piece holds a buffer of its own, and more than a few of one size
/// at once outgrow the thread's spare buffers, so that every piece's
/// buffer is fresh memory that faults page by page (a 32 MiB read in 128
/// pieces took twice the CPU of one in 8).
pub const MAX_READ_PIECES: u64 = 8;

/// The piece size of a read of `len` bytes: [`READ_PIECE_BYTES`], or the
/// multiple of it that keeps the read within [`MAX_READ_PIECES`] pieces
/// (one more when the read is not aligned to it).
pub fn read_piece_bytes(len: u64) -> u64 {
    READ_PIECE_BYTES * len.div_ceil(READ_PIECE_BYTES * MAX_READ_PIECES).max(1)
}

/// Counts a finished piece of a read; true when it was the read's last
/// (always for a read in one piece).
pub(super) fn last_piece(split_reads: &mut Slab<u32>, ch: ReadChunk) -> bool {
    let Some(i) = ch.split else {
        return true;
    };
    let left = split_reads.get_mut(i).expect("a running split read");
    assert!(*left > 0, "a split read finished more pieces than it had");
    *left -= 1;
    if *left > 0 {
        return false;
    }
    split_reads.remove(i);
    true
}

/// Queues a read's (or a piece's) structured reply chunk: its data, or an
/// error at its offset; `last` marks the request's final chunk.
pub(super) fn queue_read_chunk(c: &mut Conn, p: &Pending, ch: ReadChunk, d: Done, last: bool) {
    let err = proto::protocol_errno(d.error);
    match d.data {
        Some(data) if err == 0 && d.len > 0 => {
            let head = proto::data_chunk_head(p.handle, ch.offset, d.len, last);
            let range = d.data_offset..d.data_offset + d.len as usize;
            c.wire.queue_with_body(head, data, range);
        }
        _ if err == 0 => {
            // Nothing to carry (a read of no bytes): this piece only ends
            // the reply.
            if last {
                c.wire.queue(proto::done_chunk(p.handle).to_vec());
            }
        }
        _ => {
            let why = format!("reading {} bytes at offset {} failed", d.len, ch.offset);
            let at = ch.split.map(|_| ch.offset);
            c.wire
                .queue(proto::error_chunk(p.handle, err, &why, at, last));
        }
    }
}

/// Starts a client read: answered from the connection's read ahead when
/// that covers it, else read from the volume; then, when the read
/// continues a sequential stream, the range after it is read ahead.
pub(super) fn client_read(
    c: &mut Conn,
    h: &RequestHeader,
    offset: u64,
    len: u32,
    io: &mut Io<'_>,
    ctx: &mut Ctx<'_>,
) {
    let continues = c.stream.continues(offset, len);
    if !take_from_ahead(c, h, ctx) {
        start_read(c, h, offset, len, io, ctx);
    }
    if continues && c.ahead.is_none() {
        read_ahead_next(c, io, ctx);
    }
}

/// Answers a client read from the connection's read ahead when it is of
/// exactly that range and no write touched it since: at once when the
/// read ahead is done, else when it finishes. True when it will be
/// answered so. A read ahead that cannot answer this read is dropped (a
/// running one when it finishes).
fn take_from_ahead(c: &mut Conn, h: &RequestHeader, ctx: &mut Ctx<'_>) -> bool {
    let Some(a) = c.ahead.as_mut() else {
        return false;
    };
    let serves = a.serves(h.offset, h.length);
    match &mut a.state {
        AheadState::Running { waiter } if serves && waiter.is_none() => {
            *waiter = Some(*h);
            true
        }
        AheadState::Running { .. } => {
            a.stale = true;
            false
        }
        AheadState::Ready(_) => {
            let a = c.ahead.take().expect("the read ahead just seen");
            c.data_bytes -= a.len as u64;
            let AheadState::Ready(d) = a.state else {
                unreachable!("a read ahead that was done")
            };
            if serves {
                answer_from_ahead(c, h, d, ctx);
            }
            serves
        }
    }
}

/// Queues the reply to client read `h` with the data of the read ahead of
/// its range (`d`, a successful read of exactly that range).
fn answer_from_ahead(c: &mut Conn, h: &RequestHeader, d: Done, ctx: &mut Ctx<'_>) {
    assert_eq!(d.len, h.length, "a read ahead answers a read of its length");
    let data = d.data.expect("a successful read ahead holds its data");
    let range = d.data_offset..d.data_offset + d.len as usize;
    let head = if c.structured_replies {
        proto::data_chunk_head(h.handle, h.offset, d.len, true)
    } else {
        proto::simple_reply(h.handle, 0).to_vec()
    };
    c.wire.queue_with_body(head, data, range);
    ctx.stats.reads_ahead_used += 1;
}

/// Reads ahead the range after the connection's last read
/// ([`crate::read_ahead::Stream::next_range`]), unless reading ahead is off, the
/// connection is closing, one runs already, the range passes the export's
/// end, or the server's request memory has no room for it.
fn read_ahead_next(c: &mut Conn, io: &mut Io<'_>, ctx: &mut Ctx<'_>) {
    let (offset, len) = c.stream.next_range();
    let end = offset + len as u64;
    if !c.reads_ahead || c.wire.closing || c.ahead.is_some() || end > io.volume().size_bytes() {
        return;
    }
    // A read ahead is a guess: it waits for room in the server's request
    // memory, where a client's request may go past it.
    if ctx.memory.held_bytes + len as u64 > ctx.memory.limit_bytes {
        return;
    }
    let id = track(c, ctx, 0, len as u64, None, true);
    c.ahead = Some(Ahead::start(offset, len));
    ctx.stats.reads_ahead += 1;
    io.submit(id, Request::Read { offset, len });
}

/// Reads `len` bytes at `offset` from the volume for client read `h`.
pub(super) fn start_read(
    c: &mut Conn,
    h: &RequestHeader,
    offset: u64,
    len: u32,
    io: &mut Io<'_>,
    ctx: &mut Ctx<'_>,
) {
    if c.structured_replies {
        return start_read_in_chunks(c, h, offset, len, io, ctx);
    }
    let id = track(c, ctx, h.handle, len as u64, None, false);
    io.submit(id, Request::Read { offset, len });
}

/// Starts a read whose reply is structured: in one piece when it is short
/// or the client asked for one chunk ("don't fragment"), else in pieces
/// of [`read_piece_bytes`], each answered by its own chunk.
fn start_read_in_chunks(
    c: &mut Conn,
    h: &RequestHeader,
    offset: u64,
    len: u32,
    io: &mut Io<'_>,
    ctx: &mut Ctx<'_>,
) {
    let end = offset + len as u64;
    let piece = read_piece_bytes(len as u64);
    let whole = h.flags & proto::CMD_FLAG_DF != 0 || len as u64 <= piece;
    let pieces = if whole {
        1
    } else {
        end.div_ceil(piece) - offset / piece
    };
    assert!(pieces <= MAX_READ_PIECES + 1, "{pieces} pieces");
    let split = (pieces > 1).then(|| ctx.split_reads.insert(pieces as u32));
    let mut at = offset;
    loop {
        let piece_end = if whole {
            end
        } else {
            ((at / piece + 1) * piece).min(end)
        };
        let piece_len = piece_end - at;
        let chunk = Some(ReadChunk { offset: at, split });
        let id = track(c, ctx, h.handle, piece_len, chunk, false);
        let len = piece_len as u32;
        io.submit(id, Request::Read { offset: at, len });
        at = piece_end;
        if at >= end {
            break;
        }
    }
}

impl Connections<'_> {
    /// Marks stale every read ahead that a write started since the last
    /// call touches (a connection's own writes marked its read ahead when
    /// they started). Runs before any reply goes out and before another
    /// connection's requests are read, so no client is answered from a
    /// read ahead that a write acknowledged to it may have overtaken.
    pub(super) fn stale_reads_ahead(&mut self) {
        if self.writes_started.is_empty() {
            return;
        }
        // A connection with a read ahead is active (`Conn::at_rest`).
        for i in 0..self.conns.active_len() {
            let idx = self.conns.active_slot(i);
            let Some(a) = self.conns.at(idx).and_then(|c| c.ahead.as_mut()) else {
                continue;
            };
            if self.writes_started.iter().any(|&(o, e)| a.overlaps(o, e)) {
                a.stale = true;
            }
        }
        self.writes_started.clear();
    }

    /// A connection's read ahead finished: it answers the client read
    /// waiting for it and the next range is read ahead, or it waits for
    /// that read, or it is dropped (stale or failed). A client read it
    /// cannot answer starts as any read does.
    pub(super) fn ahead_done(&mut self, p: Pending, d: Done, io: &mut Io<'_>) {
        self.conns.mark_active(p.conn);
        let c = self
            .conns
            .get(p.conn, p.gen)
            .expect("a connection stays open while its read ahead runs");
        c.inflight -= 1;
        let mut a = c.ahead.take().expect("the read ahead of a connection");
        let AheadState::Running { waiter } = a.state else {
            panic!("a read ahead finished twice");
        };
        let ok = d.error == 0 && d.data.is_some();
        match waiter {
            Some(h) => {
                c.data_bytes -= a.len as u64;
                let mut ctx = Ctx {
                    pending: &mut self.pending,
                    split_reads: &mut self.split_reads,
                    writes_started: &mut self.writes_started,
                    memory: &mut self.memory,
                    stats: &mut self.server.stats,
                };
                if ok {
                    answer_from_ahead(c, &h, d, &mut ctx);
                    if !self.stopping {
                        read_ahead_next(c, io, &mut ctx);
                    }
                } else {
                    start_read(c, &h, h.offset, h.length, io, &mut ctx);
                }
            }
            None if ok && !a.stale => {
                a.state = AheadState::Ready(d);
                c.ahead = Some(a);
            }
            None => c.data_bytes -= a.len as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_reads_get_longer_pieces() {
        let kib = 1u64 << 10;
        assert_eq!(read_piece_bytes(4 * kib), 256 * kib);
        assert_eq!(read_piece_bytes(2048 * kib), 256 * kib);
        assert_eq!(read_piece_bytes(2048 * kib + 1), 512 * kib);
        assert_eq!(read_piece_bytes(32 << 20), 4 << 20);
    }
}
