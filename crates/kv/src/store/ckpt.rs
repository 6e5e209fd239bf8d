//! Checkpoints of the key index: a snapshot of the index (the state after
//! every record before the head) is written to the slot the superblock does
//! not name, then a superblock naming it and the head goes to the block the
//! older copy holds. A failed write leaves the previous checkpoint and
//! superblock whole; the next checkpoint tries again.
//!
//! A superblock write that fails may still have landed, naming the slot the
//! next checkpoint would overwrite: a crash during that overwrite would
//! leave the newest superblock naming a torn checkpoint. So after such a
//! failure the next checkpoint first writes a superblock that names the
//! current checkpoint again, under a sequence number above every one tried,
//! and writes the other slot only once one of those has succeeded.

use super::index::Index;
use super::meta::{block_ceil, encode_entry, Layout, Superblock};
use crate::io::{IoId, IoKind, IoQueue};

#[derive(Clone)]
enum State {
    Idle,
    Data {
        ids: Vec<IoId>,
        failed: bool,
        next: Superblock,
    },
    Super {
        id: IoId,
        next: Superblock,
        /// Whether `next` names the current checkpoint again (after a
        /// failed superblock write) rather than a new one.
        confirming: bool,
    },
}

/// Writes checkpoints and keeps the superblock on the volume.
#[derive(Clone)]
pub(crate) struct Checkpointer {
    state: State,
    /// The superblock on the volume.
    pub sb: Superblock,
    /// The sequence of a superblock write that failed and may have landed,
    /// naming the slot beside `sb`'s; until a later superblock write
    /// succeeds, that slot may hold the newest superblock's checkpoint.
    maybe_landed_seq: Option<u64>,
}

/// Bytes of one checkpoint write.
const PIECE_BYTES: u64 = 1 << 20;

impl Checkpointer {
    /// A checkpointer over the superblock found or written at open.
    pub fn new(sb: Superblock) -> Checkpointer {
        Checkpointer {
            state: State::Idle,
            sb,
            maybe_landed_seq: None,
        }
    }

    /// Whether a checkpoint is being written.
    pub fn busy(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    /// Whether `id` is one of the checkpoint's writes.
    pub fn owns(&self, id: IoId) -> bool {
        match &self.state {
            State::Idle => false,
            State::Data { ids, .. } => ids.contains(&id),
            State::Super { id: s, .. } => *s == id,
        }
    }

    /// Writes a checkpoint of `index`, the state of the log up to `head`;
    /// after a failed superblock write, first a superblock that names the
    /// current checkpoint again (the caller asks again later).
    pub fn start(&mut self, index: &Index, head: u64, layout: &Layout, io: &mut IoQueue) {
        assert!(!self.busy(), "a checkpoint while one is written");
        if let Some(tried) = self.maybe_landed_seq {
            let again = Superblock {
                seq: tried + 1,
                ..self.sb
            };
            self.write_super(again, true, io);
            return;
        }
        assert!(
            index.checkpoint_bytes() <= layout.slot_bytes,
            "the index outgrew its slot"
        );
        let mut bytes = Vec::with_capacity(index.checkpoint_bytes() as usize);
        for (key, ptr) in index.iter() {
            encode_entry(key, *ptr, &mut bytes);
        }
        assert_eq!(bytes.len() as u64, index.checkpoint_bytes());
        let slot = 1 - self.sb.ckpt_slot;
        let next = Superblock {
            seq: self.sb.seq + 1,
            ckpt_slot: slot,
            ckpt_len: bytes.len() as u64,
            ckpt_crc: crc32fast::hash(&bytes),
            ckpt_entries: index.len() as u64,
            ckpt_head: head,
            ..self.sb
        };
        bytes.resize(block_ceil(bytes.len() as u64) as usize, 0);
        let base = layout.slot_offset(slot);
        let ids = bytes
            .chunks(PIECE_BYTES as usize)
            .enumerate()
            .map(|(i, piece)| {
                let data = bytes::Bytes::copy_from_slice(piece);
                io.push(
                    base + i as u64 * PIECE_BYTES,
                    IoKind::Write {
                        data,
                        durable: true,
                    },
                )
            })
            .collect::<Vec<_>>();
        if ids.is_empty() {
            self.write_super(next, false, io);
        } else {
            self.state = State::Data {
                ids,
                failed: false,
                next,
            };
        }
    }

    fn write_super(&mut self, next: Superblock, confirming: bool, io: &mut IoQueue) {
        assert!(next.seq > self.sb.seq);
        assert!(self.maybe_landed_seq.is_none_or(|s| next.seq > s));
        assert_eq!(
            confirming,
            next.ckpt_slot == self.sb.ckpt_slot,
            "a new checkpoint goes to the other slot"
        );
        let id = io.push(
            next.offset(),
            IoKind::Write {
                data: next.encode().into(),
                durable: true,
            },
        );
        self.state = State::Super {
            id,
            next,
            confirming,
        };
    }

    /// One of the checkpoint's writes finished; returns whether a new
    /// checkpoint is now on the volume.
    pub fn complete(&mut self, id: IoId, ok: bool, io: &mut IoQueue) -> bool {
        match &mut self.state {
            State::Data { ids, failed, next } => {
                ids.retain(|i| *i != id);
                *failed |= !ok;
                if !ids.is_empty() {
                    return false;
                }
                let (failed, next) = (*failed, *next);
                self.state = State::Idle;
                if !failed {
                    self.write_super(next, false, io);
                }
                false
            }
            State::Super {
                next, confirming, ..
            } => {
                let (next, confirming) = (*next, *confirming);
                self.state = State::Idle;
                if ok {
                    self.sb = next;
                    self.maybe_landed_seq = None;
                } else {
                    self.maybe_landed_seq = Some(next.seq);
                }
                ok && !confirming
            }
            State::Idle => unreachable!("a checkpoint completion with none in flight"),
        }
    }
}
