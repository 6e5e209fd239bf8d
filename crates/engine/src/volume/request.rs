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

/// The tag of block `index` of the request in `slot`; the tags of a
/// request's blocks are consecutive, as the dispatcher numbers the blocks
/// of one access.
pub(super) fn client_tag(slot: usize, rmw: bool, index: u64) -> u64 {
    assert!(index < RMW_BIT, "block {index} of a request");
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
        /// The bytes to write. A write of whole blocks writes the devices
        /// from this buffer itself; others are copied into a block-aligned
        /// one.
        data: AlignedBuf,
        /// Force unit access.
        fua: bool,
    },
    /// Write `len` zero bytes at `offset` (any length within the volume:
    /// done in parts of at most [`super::MAX_REQUEST_BYTES`], one after
    /// another).
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
    /// Discard a range, of any length within the volume: the copies the
    /// policy keeps of each whole block in it (cached, dirty too) are
    /// released, and the block reads as its home copy holds it (some
    /// earlier content of that block, or zeros).
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
    /// For a write-zeroes larger than [`super::MAX_REQUEST_BYTES`]: bytes
    /// still to zero after this part (each part starts when the one before
    /// finishes, so one part's buffer is held at a time).
    pub(super) zero_rest: u64,
    /// For such a write-zeroes: whether the whole request asked for FUA.
    pub(super) fua_rest: bool,
    /// Block reads tried a second time after failing, as `index << 1 |
    /// rmw` (each is tried again once).
    pub(super) retried: Vec<u32>,
}

impl Req {
    /// A read or write of `len` bytes at `offset` (within the volume, and
    /// not empty), with the write's `data` (none: zeros) in a block-aligned
    /// buffer (`data` itself when it covers whole blocks); partial blocks
    /// at either end are noted for read-modify-write.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        id: u64,
        op: Op,
        offset: u64,
        len: u32,
        data: Option<AlignedBuf>,
        fua: bool,
        block_size: u64,
        now_ns: u64,
    ) -> Req {
        assert!(len > 0, "empty requests finish without a Req");
        let bs = block_size;
        let first_block = offset / bs;
        let nblocks = ((offset + len as u64).div_ceil(bs) - first_block) as u32;
        let whole_blocks = offset.is_multiple_of(bs) && (len as u64).is_multiple_of(bs);
        let buf = match data {
            Some(d) if whole_blocks => {
                assert_eq!(d.len(), len as usize, "a write's data is its length");
                d
            }
            Some(d) => {
                let mut buf = AlignedBuf::zeroed(nblocks as usize * bs as usize);
                let start = (offset - first_block * bs) as usize;
                buf[start..start + d.len()].copy_from_slice(&d);
                buf
            }
            // A read's buffer needs no zeroing: each of its blocks is read
            // into it (in place, or copied from the block's own read)
            // before the reply carries it, and a failed read carries none
            // (`Volume::reply`).
            None if op == Op::Read => AlignedBuf::scratch(nblocks as usize * bs as usize),
            // A write of zeros.
            None => AlignedBuf::zeroed(nblocks as usize * bs as usize),
        };
        assert_eq!(buf.len(), nblocks as usize * bs as usize);
        let mut rmw_blocks = [None, None];
        if op == Op::Write {
            if !offset.is_multiple_of(bs) {
                rmw_blocks[0] = Some(first_block);
            }
            let end = offset + len as u64;
            let last = first_block + nblocks as u64 - 1;
            if !end.is_multiple_of(bs) && rmw_blocks[0] != Some(last) {
                rmw_blocks[1] = Some(last);
            }
        }
        Req {
            id,
            op,
            kind_flush: false,
            offset,
            len,
            first_block,
            nblocks,
            buf,
            pending: 0,
            phase: Phase::Blocked,
            error: 0,
            fua,
            rmw_blocks,
            started_ns: now_ns,
            open_flights: 0,
            replied: false,
            zero_rest: 0,
            fua_rest: false,
            retried: Vec::new(),
        }
    }

    /// A flush: no blocks, and a sync of every device and the journal.
    pub(super) fn flush(id: u64, now_ns: u64) -> Req {
        Req {
            id,
            op: Op::Write,
            kind_flush: true,
            offset: 0,
            len: 0,
            first_block: 0,
            nblocks: 0,
            buf: AlignedBuf::zeroed(0),
            pending: 0,
            phase: Phase::Blocked,
            error: 0,
            fua: true,
            rmw_blocks: [None, None],
            started_ns: now_ns,
            open_flights: 0,
            replied: false,
            zero_rest: 0,
            fua_rest: false,
            retried: Vec::new(),
        }
    }
}
