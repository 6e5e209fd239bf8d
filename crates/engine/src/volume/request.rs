//! Client requests as the volume keeps them: the public [`Request`] and
//! [`Done`], the volume's record of a request in progress, and the tags
//! that tie each block access back to its request.

use tiermux_core::Op;

use crate::buf::AlignedBuf;

/// A client access's tag: request slot, an RMW-read flag and the block's
/// index within the request.
const BLOCK_BITS: u32 = 20;
const RMW_BIT: u64 = 1 << BLOCK_BITS;
const SLOT_SHIFT: u32 = BLOCK_BITS + 1;

pub(super) fn client_tag(slot: usize, rmw: bool, index: u64) -> u64 {
    (slot as u64) << SLOT_SHIFT | if rmw { RMW_BIT } else { 0 } | index
}

pub(super) fn split_tag(tag: u64) -> (usize, bool, usize) {
    (
        (tag >> SLOT_SHIFT) as usize,
        tag & RMW_BIT != 0,
        (tag & (RMW_BIT - 1)) as usize,
    )
}

/// A client request.
#[derive(Debug)]
pub enum Request {
    /// Read `len` bytes at `offset`.
    Read {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
    },
    /// Write `data` at `offset`; `fua` makes it durable before the reply.
    Write {
        /// Byte offset.
        offset: u64,
        /// The bytes to write.
        data: Vec<u8>,
        /// Force unit access.
        fua: bool,
    },
    /// Write `len` zero bytes at `offset`.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Force unit access.
        fua: bool,
    },
    /// Make every acknowledged write durable.
    Flush,
    /// Discard a range (advisory: accepted, the data stays readable).
    Trim {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
    },
}

/// A finished request.
#[derive(Debug)]
pub struct Done {
    /// The caller's id for the request.
    pub id: u64,
    /// 0, or the errno of a failure.
    pub error: i32,
    /// For a successful read: the buffer holding the data at `data_offset`.
    pub data: Option<AlignedBuf>,
    /// Where the read data starts in `data`.
    pub data_offset: usize,
    /// Read length, bytes.
    pub len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for other requests' read-modify-writes on its blocks.
    Blocked,
    /// Reading partial blocks before writing them.
    Rmw,
    /// Block accesses in flight.
    Access,
    /// Syncing devices and the journal (flush, FUA).
    Sync,
}

pub(super) struct Req {
    pub(super) id: u64,
    pub(super) op: Op,
    pub(super) kind_flush: bool,
    pub(super) offset: u64,
    pub(super) len: u32,
    pub(super) first_block: u64,
    pub(super) nblocks: u32,
    pub(super) buf: AlignedBuf,
    pub(super) pending: u32,
    pub(super) phase: Phase,
    pub(super) error: i32,
    pub(super) fua: bool,
    pub(super) rmw_blocks: [Option<u64>; 2],
    pub(super) started_ns: u64,
    /// Block accesses submitted whose plans have not finished; the slot
    /// (and so the tag) stays reserved until they have.
    pub(super) open_flights: u32,
    /// The reply was handed out.
    pub(super) replied: bool,
}
