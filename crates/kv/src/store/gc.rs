//! The cleaner: Wisckey's value-log garbage collection. When the log's
//! free space falls below a share, it reads records from the tail, and
//! appends a move of each that the index still names; once every move has
//! landed, the tail passes them and the space is free. It only cleans
//! records the newest checkpoint covers (before its head), so recovery,
//! which reads the log from that head, never meets reused space; when the
//! tail reaches that head it asks for a checkpoint.

use super::log::{Entry, LogWriter};
use super::meta::{block_ceil, block_floor, Layout, Ptr};
use super::record::{self, Decoded, Kind, HEADER_BYTES};
use super::{Purpose, Read, Store};
use crate::io::IoKind;

#[derive(Clone, Debug)]
enum State {
    Idle,
    Reading,
    Moving {
        waiting: u64,
        failed: bool,
        new_tail: u64,
    },
    /// A record between the tail and the checkpoint's head did not read
    /// back intact: cleaning stops rather than lose it.
    Broken,
}

/// The cleaner's state.
#[derive(Clone, Debug)]
pub(crate) struct Cleaner {
    state: State,
    chunk_bytes: u64,
    need_bytes: u64,
    /// Live records copied.
    pub moved: u64,
    /// Log bytes freed.
    pub freed_bytes: u64,
}

impl Cleaner {
    /// A cleaner that reads `chunk_bytes` of log at a time.
    pub fn new(chunk_bytes: u64) -> Cleaner {
        Cleaner {
            state: State::Idle,
            chunk_bytes,
            need_bytes: 0,
            moved: 0,
            freed_bytes: 0,
        }
    }

    fn short_of_space(log: &LogWriter, share: f64, layout: &Layout) -> bool {
        (log.free_bytes() as f64) < share * layout.log_bytes as f64
    }

    /// Whether the log needs cleaning and only a checkpoint would let it.
    pub fn starved(&self, log: &LogWriter, ckpt_head: u64, share: f64, layout: &Layout) -> bool {
        matches!(self.state, State::Idle)
            && log.tail >= ckpt_head
            && Self::short_of_space(log, share, layout)
    }

    /// A move landed (or its write failed).
    pub fn move_done(&mut self, ok: bool, log: &mut LogWriter) {
        let State::Moving {
            waiting,
            failed,
            new_tail,
        } = &mut self.state
        else {
            unreachable!("a move with no cleaning under way");
        };
        *waiting -= 1;
        *failed |= !ok;
        if *waiting == 0 {
            if !*failed {
                self.freed_bytes += *new_tail - log.tail;
                log.tail = *new_tail;
            }
            self.state = State::Idle;
        }
    }
}

impl Store {
    /// Starts cleaning if the log is short of space and there is
    /// checkpointed log to clean.
    pub(super) fn clean(&mut self) {
        let ckpt_head = self.ckpt.as_ref().expect("an open store").sb.ckpt_head;
        let c = &self.cleaner;
        if !matches!(c.state, State::Idle)
            || !Cleaner::short_of_space(&self.log, self.cfg.gc_free_share, &self.layout)
            || self.log.tail >= ckpt_head
        {
            return;
        }
        let tail = self.log.tail;
        let want = c.chunk_bytes.max(c.need_bytes);
        let limit = ckpt_head.min(self.layout.lap_end(tail)).min(tail + want);
        if !self.log.clear_of_writes(limit) {
            return;
        }
        let base = block_floor(tail);
        let len = block_ceil(limit) - base;
        let phys = self.layout.phys(base);
        let id = self.io.push(
            phys,
            IoKind::Read {
                len_bytes: len as u32,
            },
        );
        let ptr = Ptr {
            pos: tail,
            len: (limit - tail) as u32,
        };
        let purpose = Purpose::Clean { base };
        let read = Read {
            key: Default::default(),
            ptr,
            phys,
            len,
            purpose,
        };
        self.reads.insert(id, read);
        self.cleaner.state = State::Reading;
    }

    /// The cleaner's read finished: queue moves of the live records.
    pub(super) fn cleaned(&mut self, base: u64, result: Result<&[u8], i32>) {
        let Ok(data) = result else {
            self.cleaner.state = State::Idle;
            return;
        };
        let ckpt_head = self.ckpt.as_ref().expect("an open store").sb.ckpt_head;
        let generation = self.ckpt.as_ref().expect("an open store").sb.generation;
        let limit = ckpt_head.min(base + data.len() as u64);
        let mut p = self.log.tail;
        let mut moves = Vec::new();
        self.cleaner.need_bytes = 0;
        while p < limit {
            let lap_end = self.layout.lap_end(p);
            if lap_end - p < HEADER_BYTES as u64 {
                p = lap_end;
                continue;
            }
            let at = (p - base) as usize;
            let end = (limit - base) as usize;
            match record::decode(&data[at..end], generation) {
                Decoded::Record(r) if r.pos == p => {
                    let ptr = Ptr {
                        pos: p,
                        len: r.len as u32,
                    };
                    let live = matches!(r.kind, Kind::Put | Kind::Move)
                        && self.index.get(r.key) == Some(ptr);
                    if live {
                        moves.push(Entry {
                            kind: Kind::Move,
                            key: bytes::Bytes::copy_from_slice(r.key),
                            value: bytes::Bytes::copy_from_slice(r.value),
                            from: p,
                            tag: None,
                        });
                    }
                    p += r.len;
                }
                Decoded::Short { len } => {
                    self.cleaner.need_bytes = p + len - self.log.tail;
                    break;
                }
                _ => {
                    self.cleaner.state = State::Broken;
                    return;
                }
            }
        }
        let n = moves.len() as u64;
        self.cleaner.moved += n;
        self.log.moves.extend(moves);
        self.cleaner.state = if n == 0 {
            self.cleaner.freed_bytes += p - self.log.tail;
            self.log.tail = p;
            State::Idle
        } else {
            State::Moving {
                waiting: n,
                failed: false,
                new_tail: p,
            }
        };
    }
}
