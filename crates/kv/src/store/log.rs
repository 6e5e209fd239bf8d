//! The value log's writer: group commit with one write in flight.
//!
//! Records wait in two queues (the cleaner's moves first, then clients'
//! puts and deletes). When no write is in flight, the writer packs as many
//! as fit into one write that starts at the block holding the head: the
//! block's bytes before the head are rewritten unchanged from a DRAM image,
//! so a torn write cannot damage records already acknowledged, and since
//! only one write is in flight, the log on the volume is always a prefix of
//! what was written. A record never crosses the end of the log; a pad (or,
//! with less room than a header, zeros) fills the lap's end. After a failed
//! write the head stays, and the next write zeroes everything the failed one
//! touched, so its records are never read back.

use std::collections::VecDeque;

use bytes::Bytes;

use super::meta::{block_ceil, block_floor, Layout, Ptr};
use super::record::{self, Kind, Stamp, HEADER_BYTES};
use crate::io::{IoId, IoKind, IoQueue};

/// A record waiting to be written.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub kind: Kind,
    pub key: Bytes,
    pub value: Bytes,
    /// For a move, the position of the record it copies.
    pub from: u64,
    /// The client command waiting for it (none for a move).
    pub tag: Option<u64>,
}

impl Entry {
    pub fn len(&self) -> u64 {
        record::encoded_len(self.key.len(), self.value.len())
    }
}

/// A write built and not yet finished.
#[derive(Clone, Debug)]
pub(crate) struct Flight {
    pub id: Option<IoId>,
    /// Volume offset and bytes of the write.
    pub phys: u64,
    pub len: u64,
    data: Vec<u8>,
    start: u64,
    new_head: u64,
    /// The bytes of the new head's block before it.
    new_image: Vec<u8>,
    landed: Vec<(Entry, Ptr)>,
}

/// The log's writer and its positions.
#[derive(Clone)]
pub(crate) struct LogWriter {
    layout: Layout,
    generation: u64,
    boot: u32,
    max_write_bytes: u64,
    /// Bytes kept free for the cleaner's moves.
    reserve_bytes: u64,
    /// The end of the last record on the volume.
    pub head: u64,
    /// Every record before this is dead; the log may reuse its space.
    pub tail: u64,
    image: Vec<u8>,
    pub user: VecDeque<Entry>,
    pub moves: VecDeque<Entry>,
    flight: Option<Flight>,
    must_cover: u64,
}

impl LogWriter {
    /// A writer whose log ends at `head`, `image` holding the bytes of
    /// head's block before it.
    pub fn new(
        layout: Layout,
        generation: u64,
        boot: u32,
        max_write_bytes: u64,
        reserve_bytes: u64,
    ) -> LogWriter {
        LogWriter {
            layout,
            generation,
            boot,
            max_write_bytes,
            reserve_bytes,
            head: 0,
            tail: 0,
            image: Vec::new(),
            user: VecDeque::new(),
            moves: VecDeque::new(),
            flight: None,
            must_cover: 0,
        }
    }

    /// Sets the positions found at start: the log ends at `head`, `image`
    /// holding the bytes of head's block before it, and `tail` is the
    /// oldest live record.
    pub fn resume(&mut self, head: u64, tail: u64, image: Vec<u8>) {
        assert_eq!(image.len() as u64, head - block_floor(head));
        assert!(tail <= head && head - tail <= self.layout.log_bytes);
        (self.head, self.tail, self.image) = (head, tail, image);
    }

    /// Bytes of the log not holding records that may be live.
    pub fn free_bytes(&self) -> u64 {
        self.layout.log_bytes - (self.head - self.tail)
    }

    /// Whether a write is built or in flight: reads of head's block wait.
    pub fn writing(&self) -> bool {
        self.flight.is_some()
    }

    /// The write built and not yet issued, if any.
    pub fn unissued(&self) -> Option<(u64, u64)> {
        match &self.flight {
            Some(f) if f.id.is_none() => Some((f.phys, f.len)),
            _ => None,
        }
    }

    /// Whether a record ending before log position `end` is clear of any
    /// write: the writer only rewrites head's block and what follows it.
    pub fn clear_of_writes(&self, end: u64) -> bool {
        self.flight.is_none() || end <= block_floor(self.head)
    }

    fn fits(&self, end: u64, reserve: u64) -> bool {
        block_ceil(end) + reserve <= block_floor(self.tail) + self.layout.log_bytes
    }

    /// Builds the next write, if none is in flight and there is something
    /// to write and room for it. Returns whether one was built.
    pub fn build(&mut self) -> bool {
        if self.flight.is_some() {
            return false;
        }
        let start = block_floor(self.head);
        let mut data = self.image.clone();
        let mut p = self.head;
        let mut landed = Vec::new();
        let lap_end = self.layout.lap_end(self.head);
        loop {
            let from_moves = !self.moves.is_empty();
            let reserve = if from_moves { 0 } else { self.reserve_bytes };
            let Some(e) = self.moves.front().or(self.user.front()) else {
                break;
            };
            let len = e.len();
            if p + len > lap_end {
                if self.fits(lap_end.min(p + HEADER_BYTES as u64), 0) {
                    if lap_end - p >= HEADER_BYTES as u64 {
                        record::encode_pad(lap_end - p, self.boot, p, self.generation, &mut data);
                    }
                    p = lap_end;
                }
                break;
            }
            if !self.fits(p + len, reserve)
                || (!landed.is_empty() && data.len() as u64 + len > self.max_write_bytes)
            {
                break;
            }
            let e = if from_moves {
                self.moves.pop_front()
            } else {
                self.user.pop_front()
            }
            .expect("the front entry");
            let stamp = Stamp {
                boot: self.boot,
                pos: p,
                from: e.from,
            };
            record::encode(e.kind, &e.key, &e.value, stamp, self.generation, &mut data);
            landed.push((
                e,
                Ptr {
                    pos: p,
                    len: len as u32,
                },
            ));
            p += len;
        }
        let end = block_ceil(p).max(self.must_cover);
        if p == self.head && self.must_cover <= self.head {
            return false;
        }
        let b = block_floor(p);
        let new_image = if p == b {
            Vec::new()
        } else {
            data[(b - start) as usize..(p - start) as usize].to_vec()
        };
        data.resize((end - start) as usize, 0);
        assert!(end <= lap_end, "a write crosses the end of the log");
        self.flight = Some(Flight {
            id: None,
            phys: self.layout.phys(start),
            len: end - start,
            data,
            start,
            new_head: p,
            new_image,
            landed,
        });
        true
    }

    /// Issues the built write.
    pub fn issue(&mut self, io: &mut IoQueue) {
        let f = self.flight.as_mut().expect("a built write");
        assert!(f.id.is_none(), "a write issued twice");
        let data = std::mem::take(&mut f.data).into();
        f.id = Some(io.push(
            f.phys,
            IoKind::Write {
                data,
                durable: true,
            },
        ));
    }

    /// Whether `id` is the write in flight.
    pub fn owns(&self, id: IoId) -> bool {
        matches!(&self.flight, Some(f) if f.id == Some(id))
    }

    /// The write in flight finished; its records and where they lie.
    pub fn complete(&mut self, ok: bool) -> Vec<(Entry, Ptr)> {
        let f = self.flight.take().expect("a write in flight");
        if ok {
            self.image = f.new_image;
            self.head = f.new_head;
            if self.must_cover <= f.start + f.len {
                self.must_cover = 0;
            }
        } else {
            self.must_cover = self.must_cover.max(f.start + f.len);
        }
        f.landed
    }
}
