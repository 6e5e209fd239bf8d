//! Opening a store: read the superblocks; on a volume whose superblock
//! blocks are all zeros, format; else load the checkpoint the newer
//! superblock names, read the log forward from the position it covers and
//! apply every record until the first that is not intact, not at its own
//! position, or of an older boot than the one before it (the rest of a
//! write a crash cut short); then write the superblock with the boot
//! raised, before the store writes anything.

use bytes::Bytes;

use super::index::Index;
use super::meta::{block_ceil, block_floor, decode_entries, Layout, Ptr, Superblock, SUPER_BYTES};
use super::record::{self, Decoded, Kind, HEADER_BYTES};
use crate::io::{IoId, IoKind, IoQueue};

/// What a store found when it opened.
#[derive(Clone)]
pub(crate) struct Recovered {
    pub sb: Superblock,
    pub index: Index,
    pub head: u64,
    pub image: Vec<u8>,
    /// Records read from the log after the checkpoint.
    pub records: u64,
}

/// How an open is going.
#[derive(Clone)]
pub(crate) enum Progress {
    Busy,
    Done(Box<Recovered>),
    Failed(String),
}

#[derive(Clone)]
enum Stage {
    Super,
    Checkpoint { buf: Vec<u8>, outstanding: u32 },
    Scan { base: u64 },
    WriteSuper,
}

/// An open in progress: one stage's requests at a time.
#[derive(Clone)]
pub(crate) struct Recovery {
    layout: Layout,
    volume_bytes: u64,
    generation: u64,
    read_bytes: u64,
    max_record_bytes: u64,
    stage: Stage,
    ids: Vec<(IoId, u64)>,
    sb: Option<Superblock>,
    index: Index,
    pos: u64,
    last_boot: u32,
    records: u64,
    image: Vec<u8>,
}

impl Recovery {
    /// Starts opening: reads the superblocks.
    pub fn start(
        layout: Layout,
        volume_bytes: u64,
        generation: u64,
        max_record_bytes: u64,
        io: &mut IoQueue,
    ) -> Recovery {
        let id = io.push(
            0,
            IoKind::Read {
                len_bytes: SUPER_BYTES as u32,
            },
        );
        Recovery {
            layout,
            volume_bytes,
            generation,
            read_bytes: max_record_bytes.max(1 << 20),
            max_record_bytes,
            stage: Stage::Super,
            ids: vec![(id, 0)],
            sb: None,
            index: Index::default(),
            pos: 0,
            last_boot: 0,
            records: 0,
            image: Vec::new(),
        }
    }

    /// One of this open's requests finished.
    pub fn complete(&mut self, id: IoId, result: Result<&[u8], i32>, io: &mut IoQueue) -> Progress {
        let at = self
            .ids
            .iter()
            .position(|(i, _)| *i == id)
            .expect("an open's request");
        let (_, offset) = self.ids.swap_remove(at);
        let data = match result {
            Ok(d) => d,
            Err(errno) => {
                return Progress::Failed(format!(
                    "reading the store at byte {offset} failed (errno {errno})"
                ))
            }
        };
        match &mut self.stage {
            Stage::Super => self.on_super(data, io),
            Stage::Checkpoint { buf, outstanding } => {
                let at = (offset
                    - self
                        .layout
                        .slot_offset(self.sb.expect("a superblock").ckpt_slot))
                    as usize;
                buf[at..at + data.len()].copy_from_slice(data);
                *outstanding -= 1;
                if *outstanding > 0 {
                    return Progress::Busy;
                }
                let buf = std::mem::take(buf);
                self.on_checkpoint(&buf, io)
            }
            Stage::Scan { base } => {
                let base = *base;
                self.on_scan(base, data, io)
            }
            Stage::WriteSuper => Progress::Done(Box::new(Recovered {
                sb: self.sb.expect("the superblock written"),
                index: std::mem::take(&mut self.index),
                head: self.pos,
                image: std::mem::take(&mut self.image),
                records: self.records,
            })),
        }
    }

    fn on_super(&mut self, data: &[u8], io: &mut IoQueue) -> Progress {
        let Some(sb) = Superblock::newest(data) else {
            if data.iter().any(|&b| b != 0) {
                return Progress::Failed(
                    "the volume holds no intact store superblock, and its superblock blocks are not empty: not a store, or a damaged one".into(),
                );
            }
            let sb = Superblock {
                seq: 0,
                generation: self.generation,
                boot: 0,
                volume_bytes: self.volume_bytes,
                slot_bytes: self.layout.slot_bytes,
                ckpt_slot: 0,
                ckpt_len: 0,
                ckpt_crc: 0,
                ckpt_entries: 0,
                ckpt_head: 0,
            };
            self.sb = Some(sb);
            return self.write_super(io);
        };
        if (sb.volume_bytes, sb.slot_bytes) != (self.volume_bytes, self.layout.slot_bytes) {
            return Progress::Failed(format!(
                "the store was made for a volume of {} bytes with index slots of {} bytes; this one has {} and {}",
                sb.volume_bytes, sb.slot_bytes, self.volume_bytes, self.layout.slot_bytes
            ));
        }
        self.sb = Some(sb);
        if sb.ckpt_len == 0 {
            return self.start_scan(sb.ckpt_head, io);
        }
        if sb.ckpt_len > self.layout.slot_bytes {
            return Progress::Failed(format!(
                "the checkpoint claims {} bytes, more than its slot",
                sb.ckpt_len
            ));
        }
        let base = self.layout.slot_offset(sb.ckpt_slot);
        let total = block_ceil(sb.ckpt_len);
        let mut off = 0;
        while off < total {
            let len = (total - off).min(1 << 20);
            let id = io.push(
                base + off,
                IoKind::Read {
                    len_bytes: len as u32,
                },
            );
            self.ids.push((id, base + off));
            off += len;
        }
        self.stage = Stage::Checkpoint {
            buf: vec![0; total as usize],
            outstanding: self.ids.len() as u32,
        };
        Progress::Busy
    }

    fn on_checkpoint(&mut self, buf: &[u8], io: &mut IoQueue) -> Progress {
        let sb = self.sb.expect("a superblock");
        let bytes = &buf[..sb.ckpt_len as usize];
        if crc32fast::hash(bytes) != sb.ckpt_crc {
            return Progress::Failed("the checkpoint of the key index fails its checksum".into());
        }
        let Some(entries) = decode_entries(bytes, sb.ckpt_entries) else {
            return Progress::Failed("the checkpoint of the key index does not parse".into());
        };
        for (key, ptr) in entries {
            self.index.apply(Kind::Put, &key, ptr, 0);
        }
        self.start_scan(sb.ckpt_head, io)
    }

    fn start_scan(&mut self, from: u64, io: &mut IoQueue) -> Progress {
        self.pos = from;
        self.read_at(self.read_bytes, io)
    }

    /// Reads from the block holding the scan position, `want` bytes or to
    /// the lap's end.
    fn read_at(&mut self, want: u64, io: &mut IoQueue) -> Progress {
        let base = block_floor(self.pos);
        let end = (base + block_ceil(want)).min(self.layout.lap_end(self.pos));
        let phys = self.layout.phys(base);
        let id = io.push(
            phys,
            IoKind::Read {
                len_bytes: (end - base) as u32,
            },
        );
        self.ids.push((id, phys));
        self.stage = Stage::Scan { base };
        Progress::Busy
    }

    fn on_scan(&mut self, base: u64, data: &[u8], io: &mut IoQueue) -> Progress {
        let generation = self.sb.expect("a superblock").generation;
        let buf_end = base + data.len() as u64;
        loop {
            let lap_end = self.layout.lap_end(self.pos);
            if lap_end - self.pos < HEADER_BYTES as u64 {
                self.pos = lap_end;
                return self.read_at(self.read_bytes, io);
            }
            if self.pos >= buf_end {
                return self.read_at(self.read_bytes, io);
            }
            let at = (self.pos - base) as usize;
            match record::decode(&data[at..], generation) {
                Decoded::Record(r)
                    if r.pos == self.pos
                        && r.boot >= self.last_boot
                        && r.len <= lap_end - self.pos =>
                {
                    self.last_boot = r.boot;
                    self.records += 1;
                    let key = Bytes::copy_from_slice(r.key);
                    let ptr = Ptr {
                        pos: r.pos,
                        len: r.len as u32,
                    };
                    self.index.apply(r.kind, &key, ptr, r.from);
                    self.pos += r.len;
                }
                Decoded::Short { len }
                    if len <= self.max_record_bytes && self.pos + len <= lap_end =>
                {
                    return self.read_at(self.pos - block_floor(self.pos) + len, io);
                }
                _ => {
                    let b = block_floor(self.pos);
                    self.image = if b >= base {
                        data[(b - base) as usize..at].to_vec()
                    } else {
                        Vec::new()
                    };
                    return self.write_super(io);
                }
            }
        }
    }

    /// Writes the superblock with the boot raised.
    fn write_super(&mut self, io: &mut IoQueue) -> Progress {
        let mut sb = self.sb.expect("a superblock");
        sb.seq += 1;
        sb.boot += 1;
        self.sb = Some(sb);
        let id = io.push(
            sb.offset(),
            IoKind::Write {
                data: sb.encode().into(),
                durable: true,
            },
        );
        self.ids.push((id, sb.offset()));
        self.stage = Stage::WriteSuper;
        Progress::Busy
    }
}
