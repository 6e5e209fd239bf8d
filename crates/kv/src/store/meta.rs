//! The store's metadata on the volume: where things lie (`Layout`), the
//! superblock (two copies in blocks 0 and 1, written alternately, the
//! higher valid sequence wins), and the checkpoint of the key index (a
//! sorted list of keys and record places in one of two slots, the one
//! the superblock does not name).

use bytes::Bytes;

use crate::io::BLOCK_BYTES;

/// Where a key's newest record lies in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ptr {
    /// The record's log position.
    pub pos: u64,
    /// The record's bytes.
    pub len: u32,
}

/// The store's regions on the volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of each checkpoint slot.
    pub slot_bytes: u64,
    /// Volume offset of the value log.
    pub log_start: u64,
    /// Bytes of the value log (whole blocks); positions wrap around it.
    pub log_bytes: u64,
}

/// Blocks 0 and 1 hold the superblocks.
pub const SUPER_BYTES: u64 = 2 * BLOCK_BYTES;

impl Layout {
    /// The layout of a volume of `volume_bytes` with checkpoint slots of
    /// `slot_bytes` (a multiple of the block).
    pub fn new(volume_bytes: u64, slot_bytes: u64) -> Layout {
        let log_start = SUPER_BYTES + 2 * slot_bytes;
        let log_bytes = volume_bytes.saturating_sub(log_start) / BLOCK_BYTES * BLOCK_BYTES;
        Layout {
            slot_bytes,
            log_start,
            log_bytes,
        }
    }

    /// Volume offset of checkpoint slot `slot` (0 or 1).
    pub fn slot_offset(&self, slot: u8) -> u64 {
        SUPER_BYTES + slot as u64 * self.slot_bytes
    }

    /// Volume offset of log position `pos`.
    pub fn phys(&self, pos: u64) -> u64 {
        self.log_start + pos % self.log_bytes
    }

    /// The position where the lap holding `pos` ends.
    pub fn lap_end(&self, pos: u64) -> u64 {
        (pos / self.log_bytes + 1) * self.log_bytes
    }
}

/// The start of the block holding `pos`.
pub fn block_floor(pos: u64) -> u64 {
    pos / BLOCK_BYTES * BLOCK_BYTES
}

/// `pos` rounded up to a block boundary.
pub fn block_ceil(pos: u64) -> u64 {
    pos.div_ceil(BLOCK_BYTES) * BLOCK_BYTES
}

const MAGIC: &[u8; 8] = b"TMXKVST1";
const SUPER_LEN: usize = 84;

/// The superblock: what a restart needs to find everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// Higher is newer; a copy goes to block `seq % 2`.
    pub seq: u64,
    /// Seeds every record's checksum, new at each format.
    pub generation: u64,
    /// Raised at every start, before the store writes: records of an
    /// older boot found after a newer one are leftovers of a write a
    /// crash cut short.
    pub boot: u32,
    /// The volume's size at format.
    pub volume_bytes: u64,
    /// Bytes of a checkpoint slot at format.
    pub slot_bytes: u64,
    /// The slot holding the checkpoint.
    pub ckpt_slot: u8,
    /// Bytes of the checkpoint (0: none yet).
    pub ckpt_len: u64,
    /// The checkpoint's CRC32.
    pub ckpt_crc: u32,
    /// Keys in the checkpoint.
    pub ckpt_entries: u64,
    /// The log position the checkpoint covers: every record before it is
    /// in the checkpoint; recovery reads the log from here.
    pub ckpt_head: u64,
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().expect("4 bytes"))
}

impl Superblock {
    /// The block of the volume this copy goes to.
    pub fn offset(&self) -> u64 {
        (self.seq % 2) * BLOCK_BYTES
    }

    /// One block holding this superblock.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOCK_BYTES as usize);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.generation.to_le_bytes());
        b.extend_from_slice(&self.boot.to_le_bytes());
        b.extend_from_slice(&self.volume_bytes.to_le_bytes());
        b.extend_from_slice(&self.slot_bytes.to_le_bytes());
        b.extend_from_slice(&[self.ckpt_slot, 0, 0, 0]);
        b.extend_from_slice(&self.ckpt_len.to_le_bytes());
        b.extend_from_slice(&self.ckpt_crc.to_le_bytes());
        b.extend_from_slice(&self.ckpt_entries.to_le_bytes());
        b.extend_from_slice(&self.ckpt_head.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        assert_eq!(b.len(), SUPER_LEN);
        let crc = crc32fast::hash(&b[12..]);
        b[8..12].copy_from_slice(&crc.to_le_bytes());
        b.resize(BLOCK_BYTES as usize, 0);
        b
    }

    /// The superblock in `b`, if intact.
    pub fn decode(b: &[u8]) -> Option<Superblock> {
        if b.len() < SUPER_LEN || &b[..8] != MAGIC {
            return None;
        }
        if crc32fast::hash(&b[12..SUPER_LEN]) != le_u32(&b[8..12]) {
            return None;
        }
        Some(Superblock {
            seq: le_u64(&b[12..20]),
            generation: le_u64(&b[20..28]),
            boot: le_u32(&b[28..32]),
            volume_bytes: le_u64(&b[32..40]),
            slot_bytes: le_u64(&b[40..48]),
            ckpt_slot: b[48],
            ckpt_len: le_u64(&b[52..60]),
            ckpt_crc: le_u32(&b[60..64]),
            ckpt_entries: le_u64(&b[64..72]),
            ckpt_head: le_u64(&b[72..80]),
        })
        .filter(|s| s.ckpt_slot < 2)
    }

    /// The newer intact superblock of the two copies in `blocks` (blocks 0
    /// and 1 of the volume).
    pub fn newest(blocks: &[u8]) -> Option<Superblock> {
        let a = Superblock::decode(&blocks[..BLOCK_BYTES as usize]);
        let b = Superblock::decode(&blocks[BLOCK_BYTES as usize..]);
        match (a, b) {
            (Some(a), Some(b)) => Some(if a.seq > b.seq { a } else { b }),
            (a, b) => a.or(b),
        }
    }
}

/// Bytes a key's entry takes in a checkpoint.
pub fn entry_bytes(key_len: usize) -> u64 {
    14 + key_len as u64
}

/// Appends a key's entry to a checkpoint.
pub fn encode_entry(key: &[u8], p: Ptr, out: &mut Vec<u8>) {
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&p.pos.to_le_bytes());
    out.extend_from_slice(&p.len.to_le_bytes());
}

/// The entries of a checkpoint, or `None` if the bytes do not parse as
/// exactly `entries` entries.
pub fn decode_entries(mut b: &[u8], entries: u64) -> Option<Vec<(Bytes, Ptr)>> {
    let mut out = Vec::with_capacity(entries.min(1 << 24) as usize);
    for _ in 0..entries {
        let key_len = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
        let rest = b.get(2..2 + key_len + 12)?;
        let key = Bytes::copy_from_slice(&rest[..key_len]);
        let pos = le_u64(&rest[key_len..key_len + 8]);
        let len = le_u32(&rest[key_len + 8..]);
        out.push((key, Ptr { pos, len }));
        b = &b[2 + key_len + 12..];
    }
    b.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(seq: u64) -> Superblock {
        Superblock {
            seq,
            generation: 77,
            boot: 4,
            volume_bytes: 1 << 30,
            slot_bytes: 1 << 20,
            ckpt_slot: 1,
            ckpt_len: 123,
            ckpt_crc: 0xabcd,
            ckpt_entries: 5,
            ckpt_head: 99_999,
        }
    }

    #[test]
    fn the_newer_intact_superblock_wins() {
        let mut blocks = vec![0u8; 2 * BLOCK_BYTES as usize];
        assert_eq!(Superblock::newest(&blocks), None);
        for seq in [6, 7] {
            let at = sb(seq).offset() as usize;
            blocks[at..at + BLOCK_BYTES as usize].copy_from_slice(&sb(seq).encode());
        }
        assert_eq!(Superblock::newest(&blocks), Some(sb(7)));
        blocks[BLOCK_BYTES as usize + 30] ^= 1;
        assert_eq!(Superblock::newest(&blocks), Some(sb(6)), "a torn copy");
    }

    #[test]
    fn checkpoint_entries_read_back_exactly() {
        let mut b = Vec::new();
        encode_entry(b"alpha", Ptr { pos: 1, len: 2 }, &mut b);
        encode_entry(b"", Ptr { pos: 3, len: 4 }, &mut b);
        assert_eq!(b.len() as u64, entry_bytes(5) + entry_bytes(0));
        let e = decode_entries(&b, 2).expect("parses");
        assert_eq!(e[0], (Bytes::from_static(b"alpha"), Ptr { pos: 1, len: 2 }));
        assert_eq!(e[1].1, Ptr { pos: 3, len: 4 });
        assert!(decode_entries(&b, 1).is_none(), "bytes left over");
        assert!(decode_entries(&b, 3).is_none(), "too few bytes");
    }

    #[test]
    fn positions_wrap_around_the_log() {
        let l = Layout::new(10 * BLOCK_BYTES + 100, BLOCK_BYTES);
        assert_eq!(
            (l.log_start, l.log_bytes),
            (4 * BLOCK_BYTES, 6 * BLOCK_BYTES)
        );
        assert_eq!(l.phys(6 * BLOCK_BYTES + 5), 4 * BLOCK_BYTES + 5);
        assert_eq!(l.lap_end(6 * BLOCK_BYTES), 12 * BLOCK_BYTES);
    }
}
