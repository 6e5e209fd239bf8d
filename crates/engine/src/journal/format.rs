//! The byte layouts of the metadata formats: journal records, checkpoint
//! entries and mark records.

use super::*;

/// The byte layout of one metadata format.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) format: u32,
    pub(super) record_bytes: usize,
    pub(super) entry_bytes: usize,
    pub(super) checkpoint_magic: &'static [u8; 8],
}

pub(super) const V1: Layout = Layout {
    format: 1,
    record_bytes: 32,
    entry_bytes: 16,
    checkpoint_magic: b"TMXCKPT1",
};

pub(super) const V2: Layout = Layout {
    format: 2,
    record_bytes: 40,
    entry_bytes: 24,
    checkpoint_magic: b"TMXCKPT2",
};

pub(super) const CURRENT: &Layout = &V2;
const _: () = assert!(CURRENT.format == FORMAT);

impl Layout {
    pub(super) fn of(format: u32) -> Option<&'static Layout> {
        [&V1, &V2].into_iter().find(|l| l.format == format)
    }

    pub(super) fn of_checkpoint(magic: &[u8]) -> Option<&'static Layout> {
        [&V1, &V2]
            .into_iter()
            .find(|l| &l.checkpoint_magic[..] == magic)
    }

    /// Encodes `(block, e)` into `out` (`entry_bytes` long).
    pub(super) fn encode_entry(&self, block: u64, e: &Entry, out: &mut [u8]) {
        assert_eq!(out.len(), self.entry_bytes);
        assert_eq!(self.format, FORMAT, "only the current format is written");
        out[0..8].copy_from_slice(&block.to_le_bytes());
        out[8] = e.present;
        out[9] = e.dirty;
        out[10] = e.stale;
        out[11] = FORMAT as u8;
        for (i, loc) in e.loc.iter().enumerate() {
            out[12 + 4 * i..16 + 4 * i].copy_from_slice(&loc.to_le_bytes());
        }
    }

    /// Decodes an entry, or `None` when it does not carry this format's
    /// mark.
    pub(super) fn decode_entry(&self, b: &[u8]) -> Option<(u64, Entry)> {
        let word = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let block = u64::from_le_bytes(b[0..8].try_into().expect("8 bytes"));
        let mut e = Entry {
            present: b[8],
            dirty: b[9],
            stale: b[10],
            ..Entry::default()
        };
        match self.format {
            1 if b[11] == 0 => e.loc[0] = word(12),
            2 if b[11] == 2 => {
                for i in 0..e.loc.len() {
                    e.loc[i] = word(12 + 4 * i);
                }
            }
            _ => return None,
        }
        Some((block, e))
    }

    /// Decodes a journal record expecting sequence number `seq`; `None`
    /// when it is torn, damaged or out of sequence.
    pub(super) fn decode_record(&self, r: &[u8], seq: u64) -> Option<(u64, Entry)> {
        let n = self.record_bytes;
        let crc = u32::from_le_bytes(r[n - 4..n].try_into().expect("4 bytes"));
        let got_seq = u64::from_le_bytes(r[0..8].try_into().expect("8 bytes"));
        if crc32fast::hash(&r[..n - 4]) != crc || got_seq != seq {
            return None;
        }
        self.decode_entry(&r[8..8 + self.entry_bytes])
    }
}

/// The block number of a mark record (no block has it).
pub(super) const MARK_BLOCK: u64 = u64::MAX;

/// The entry of a mark record covering records below `seq`.
pub(super) fn mark_entry(seq: u64) -> Entry {
    Entry {
        loc: [seq as u32, (seq >> 32) as u32, 0],
        ..Entry::default()
    }
}

/// The sequence number a mark record covers up to.
pub(super) fn mark_seq(e: &Entry) -> u64 {
    e.loc[0] as u64 | (e.loc[1] as u64) << 32
}
