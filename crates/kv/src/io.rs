//! The storage vocabulary of the key-value layer: the machines ask for
//! block-aligned byte-range reads and writes on a volume and are told when
//! each finishes. They do no I/O themselves; a driver performs the requests
//! (the engine on a real volume, the simulator in virtual time, or the
//! in-memory store of the tests) and hands back completions in any order.

use std::collections::VecDeque;

use bytes::Bytes;

/// Every offset and length the layer asks for is a multiple of this.
pub const BLOCK_BYTES: u64 = 4096;

/// Names one storage request, unique among those in flight.
pub type IoId = u64;

/// What a storage request does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoKind {
    /// Read `len_bytes` bytes.
    Read {
        /// Bytes to read, a multiple of [`BLOCK_BYTES`].
        len_bytes: u32,
    },
    /// Write `data` (its length a multiple of [`BLOCK_BYTES`]).
    Write {
        /// The bytes to write (shared with the machine that asked, which
        /// may still read them, as a region being written answers lookups).
        data: Bytes,
        /// The write must be on stable storage when it completes (a FUA
        /// write): the store's log, checkpoints and superblocks, whose
        /// completion acknowledges puts or lets later writes reuse space.
        /// A cache's writes need not be (a restarted cache ignores them).
        durable: bool,
    },
    /// Discard `len_bytes` bytes (a TRIM): the layer no longer needs them,
    /// and a later read may return anything. Lets the volume free the
    /// space, so that the next write there is a new allocation.
    Trim {
        /// Bytes to discard, a multiple of [`BLOCK_BYTES`].
        len_bytes: u32,
    },
}

/// A storage request for the driver to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoRequest {
    /// Hand back with the completion.
    pub id: IoId,
    /// Byte offset on the volume, a multiple of [`BLOCK_BYTES`].
    pub offset: u64,
    /// Read, write or discard.
    pub kind: IoKind,
}

impl IoRequest {
    /// The request's length in bytes.
    pub fn len_bytes(&self) -> u64 {
        match &self.kind {
            IoKind::Read { len_bytes } | IoKind::Trim { len_bytes } => *len_bytes as u64,
            IoKind::Write { data, .. } => data.len() as u64,
        }
    }
}

/// The storage requests a machine has issued: queued for its driver, and
/// counted until they complete.
#[derive(Clone, Debug, Default)]
pub struct IoQueue {
    next_id: IoId,
    ready: VecDeque<IoRequest>,
    in_flight: u64,
}

impl IoQueue {
    /// Queues a request and returns its id.
    pub fn push(&mut self, offset: u64, kind: IoKind) -> IoId {
        let id = self.next_id;
        self.next_id += 1;
        let req = IoRequest { id, offset, kind };
        assert!(
            offset.is_multiple_of(BLOCK_BYTES)
                && req.len_bytes().is_multiple_of(BLOCK_BYTES)
                && req.len_bytes() > 0,
            "storage request at {offset} of {} bytes is not block-aligned",
            req.len_bytes()
        );
        self.ready.push_back(req);
        self.in_flight += 1;
        id
    }

    /// The next request for the driver.
    pub fn pop(&mut self) -> Option<IoRequest> {
        self.ready.pop_front()
    }

    /// Counts a completion.
    pub fn completed(&mut self) {
        self.in_flight = self
            .in_flight
            .checked_sub(1)
            .expect("a completion for a request that was not issued");
    }

    /// Requests issued and not yet completed (handed out or not).
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }
}

/// Rounds `bytes` up to a whole number of blocks.
pub fn round_up_blocks(bytes: u64) -> u64 {
    bytes.div_ceil(BLOCK_BYTES) * BLOCK_BYTES
}
