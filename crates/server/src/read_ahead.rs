//! Reading ahead of a connection's sequential reads.
//!
//! A client that reads a long range one request at a time (fio at one
//! request in flight, `dd`, a copy tool) waits for each reply before it
//! asks for the next, so the device idles while a reply travels. When a
//! connection's read starts where its previous read ended and has the same
//! length (at least [`MIN_BYTES`]), the server also reads the next range of
//! that length, as a volume read of its own. If the client then asks for
//! exactly that range, it is answered from that read (once it finishes, if
//! it still runs), and the range after it is read ahead in turn.
//!
//! Coherence. NBD promises a read the data of every write whose reply the
//! client saw before sending the read; a write still in flight may or may
//! not be seen. A read ahead is a volume read like any other, so it sees
//! every write submitted before it (the volume orders the operations on a
//! block in arrival order). Every write (a write, write-zeroes or trim,
//! from any connection) started after it that touches its range marks it
//! stale (`Ahead::overlaps`), and a stale read ahead answers no client.
//! The marks are made before any reply goes out and before another
//! connection's requests are read, so every write acknowledged before the
//! client's read was sent is seen, and so is a write its own connection
//! sent before the read, acknowledged or not. A client read that attached
//! to the running read ahead before a write started is answered from it:
//! that read and that write were in flight together.

use tiermux_engine::volume::Done;

use crate::proto::RequestHeader;

/// Reads shorter than this never start a read ahead: a short read's reply
/// takes little longer than its request, so there is little to overlap.
pub const MIN_BYTES: u32 = 64 << 10;

/// Where a connection's reads have been going.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stream {
    /// Where the last read ended, bytes.
    next_offset: u64,
    /// The last read's length, bytes (0 before the first).
    len: u32,
}

impl Stream {
    /// Notes a read of `len` bytes at `offset`; true when it continues the
    /// stream (it starts where the last read ended, with the same length)
    /// and is long enough to read ahead of.
    pub fn continues(&mut self, offset: u64, len: u32) -> bool {
        let sequential = self.len == len && self.next_offset == offset;
        *self = Stream {
            next_offset: offset + len as u64,
            len,
        };
        sequential && len >= MIN_BYTES
    }

    /// The range a read ahead of the stream covers: the last read's length,
    /// from where it ended.
    pub fn next_range(&self) -> (u64, u32) {
        (self.next_offset, self.len)
    }
}

/// A connection's read ahead.
pub(crate) struct Ahead {
    /// Its range in the export, bytes.
    pub offset: u64,
    /// Its length, bytes.
    pub len: u32,
    /// A write touching the range started after it: it answers no client.
    pub stale: bool,
    /// Running or done.
    pub state: State,
}

/// Where a read ahead is.
pub(crate) enum State {
    /// The volume read runs; a client read of its range may wait for it.
    Running {
        /// The client read it answers when it finishes.
        waiter: Option<RequestHeader>,
    },
    /// The volume read succeeded: its data, for the client read to come.
    Ready(Done),
}

impl Ahead {
    /// A read ahead of `len` bytes at `offset`, just started.
    pub fn start(offset: u64, len: u32) -> Ahead {
        Ahead {
            offset,
            len,
            stale: false,
            state: State::Running { waiter: None },
        }
    }

    /// Whether it may answer a client read of `len` bytes at `offset`.
    pub fn serves(&self, offset: u64, len: u32) -> bool {
        !self.stale && self.offset == offset && self.len == len
    }

    /// Whether it shares a byte with `offset..end`.
    pub fn overlaps(&self, offset: u64, end: u64) -> bool {
        self.offset < end && offset < self.offset + self.len as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_continues_only_where_it_ended_with_the_same_length() {
        let mut s = Stream::default();
        let mib = 1u32 << 20;
        assert!(!s.continues(0, mib), "the first read continues nothing");
        assert!(s.continues(1 << 20, mib));
        assert_eq!(s.next_range(), (2 << 20, mib));
        assert!(!s.continues(2 << 20, mib / 2), "another length");
        assert!(s.continues((5 << 20) / 2, mib / 2));
        assert!(!s.continues(0, mib / 2), "a jump back");
        assert!(s.continues(512 << 10, mib / 2), "a stream from the jump");
        let small = MIN_BYTES / 2;
        let mut t = Stream::default();
        t.continues(0, small);
        assert!(!t.continues(small as u64, small), "too short to read ahead");
    }

    #[test]
    fn a_read_ahead_serves_its_exact_range_until_a_write_touches_it() {
        let mut a = Ahead::start(4096, 8192);
        assert!(a.serves(4096, 8192));
        assert!(!a.serves(4096, 4096) && !a.serves(0, 8192));
        assert!(a.overlaps(0, 4097) && a.overlaps(12_287, 20_000));
        assert!(!a.overlaps(0, 4096) && !a.overlaps(12_288, 20_000));
        a.stale = true;
        assert!(!a.serves(4096, 8192));
    }
}
