//! A value-log record as it lies on the volume: a 32-byte header (CRC32,
//! kind, key length, value length, the boot that wrote it, its own log
//! position, and for a move the position it was copied from), then the key,
//! then the value. The CRC covers the header, key and value and is seeded
//! with the store's generation, so a record of another store, a record
//! left from an earlier lap of the log (its position differs) or a torn
//! one reads as the end of the log, never as a value.

/// Bytes of a record's header.
pub const HEADER_BYTES: usize = 32;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The key now holds the value.
    Put = 1,
    /// The key is gone.
    Del = 2,
    /// The cleaner copied a live value: the key holds it only if its
    /// newest record is still the one at `from`.
    Move = 3,
    /// Nothing: skip `value_len` more bytes (the rest of a lap, or space
    /// a failed write left).
    Pad = 4,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Put),
            2 => Some(Kind::Del),
            3 => Some(Kind::Move),
            4 => Some(Kind::Pad),
            _ => None,
        }
    }
}

/// A record read back, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// What it says.
    pub kind: Kind,
    /// The key (empty for a pad).
    pub key: &'a [u8],
    /// The value (empty for a delete or a pad).
    pub value: &'a [u8],
    /// The boot of the store that wrote it.
    pub boot: u32,
    /// Its position in the log.
    pub pos: u64,
    /// For a move, the position of the record it copies.
    pub from: u64,
    /// Bytes it takes in the log (for a pad, the bytes skipped).
    pub len: u64,
}

/// What the bytes at a position hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// An intact record.
    Record(RecordRef<'a>),
    /// A header that claims `len` bytes, more than were given (or fewer
    /// bytes than a header); read that many and decode again (the header
    /// is not yet checked).
    Short {
        /// Bytes the record claims.
        len: u64,
    },
    /// No record: the end of the log, or damage.
    Invalid,
}

/// Bytes a record of this key and value takes.
pub fn encoded_len(key_len: usize, value_len: usize) -> u64 {
    (HEADER_BYTES + key_len + value_len) as u64
}

/// The record fields that are not bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The boot writing it.
    pub boot: u32,
    /// Its position in the log.
    pub pos: u64,
    /// For a move, where the copied record lies; else 0.
    pub from: u64,
}

/// Appends a record to `out`.
pub fn encode(kind: Kind, key: &[u8], value: &[u8], s: Stamp, generation: u64, out: &mut Vec<u8>) {
    assert!(kind != Kind::Pad, "a pad is written by encode_pad");
    let key_len = u16::try_from(key.len()).expect("a key under 64 KiB");
    let value_len = u32::try_from(value.len()).expect("a value under 4 GiB");
    let start = out.len();
    header(kind, key_len, value_len, s, out);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    seal(generation, &mut out[start..]);
}

/// Appends a pad header that skips `len` bytes from `pos` (the header
/// included); the bytes after the header are not read.
pub fn encode_pad(len: u64, boot: u32, pos: u64, generation: u64, out: &mut Vec<u8>) {
    assert!(len >= HEADER_BYTES as u64, "a pad of {len} bytes");
    let body = u32::try_from(len - HEADER_BYTES as u64).expect("a pad under 4 GiB");
    let start = out.len();
    let s = Stamp { boot, pos, from: 0 };
    header(Kind::Pad, 0, body, s, out);
    seal(generation, &mut out[start..]);
}

fn header(kind: Kind, key_len: u16, value_len: u32, s: Stamp, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0; 4]);
    out.push(kind as u8);
    out.push(0);
    out.extend_from_slice(&key_len.to_le_bytes());
    out.extend_from_slice(&value_len.to_le_bytes());
    out.extend_from_slice(&s.boot.to_le_bytes());
    out.extend_from_slice(&s.pos.to_le_bytes());
    out.extend_from_slice(&s.from.to_le_bytes());
}

fn checksum(generation: u64, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(generation as u32 ^ (generation >> 32) as u32);
    h.update(bytes);
    h.finalize()
}

fn seal(generation: u64, rec: &mut [u8]) {
    let crc = checksum(generation, &rec[4..]);
    rec[0..4].copy_from_slice(&crc.to_le_bytes());
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().expect("4 bytes"))
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

/// Reads the record at the start of `buf`, written by a store of
/// `generation`.
pub fn decode(buf: &[u8], generation: u64) -> Decoded<'_> {
    if buf.len() < HEADER_BYTES {
        return Decoded::Short {
            len: HEADER_BYTES as u64,
        };
    }
    let Some(kind) = Kind::from_u8(buf[4]) else {
        return Decoded::Invalid;
    };
    let key_len = u16::from_le_bytes([buf[6], buf[7]]) as usize;
    let value_len = le_u32(&buf[8..12]) as u64;
    let s = Stamp {
        boot: le_u32(&buf[12..16]),
        pos: le_u64(&buf[16..24]),
        from: le_u64(&buf[24..32]),
    };
    let (len, covered) = match kind {
        Kind::Pad if key_len == 0 => (HEADER_BYTES as u64 + value_len, HEADER_BYTES),
        Kind::Pad => return Decoded::Invalid,
        _ => {
            let len = encoded_len(key_len, value_len as usize);
            if len > buf.len() as u64 {
                return Decoded::Short { len };
            }
            (len, len as usize)
        }
    };
    if checksum(generation, &buf[4..covered]) != le_u32(&buf[0..4]) {
        return Decoded::Invalid;
    }
    let key = &buf[HEADER_BYTES..HEADER_BYTES + key_len];
    let value = &buf[HEADER_BYTES + key_len..covered];
    Decoded::Record(RecordRef {
        kind,
        key,
        value,
        boot: s.boot,
        pos: s.pos,
        from: s.from,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEN: u64 = 0xfeed_beef_1234;

    fn stamp(pos: u64) -> Stamp {
        Stamp {
            boot: 3,
            pos,
            from: 9,
        }
    }

    #[test]
    fn a_record_reads_back_and_any_flipped_bit_is_refused() {
        let mut buf = Vec::new();
        encode(Kind::Move, b"key", b"value", stamp(4096), GEN, &mut buf);
        assert_eq!(buf.len() as u64, encoded_len(3, 5));
        let Decoded::Record(r) = decode(&buf, GEN) else {
            panic!("intact record refused");
        };
        assert_eq!(
            (r.kind, r.key, r.value, r.boot, r.pos, r.from, r.len),
            (Kind::Move, &b"key"[..], &b"value"[..], 3, 4096, 9, 40)
        );
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !matches!(decode(&bad, GEN), Decoded::Record(_)),
                "bit {bit} flipped and still read"
            );
        }
        assert_eq!(decode(&buf[..39], GEN), Decoded::Short { len: 40 });
        assert_eq!(decode(&buf, GEN + 1), Decoded::Invalid, "another store's");
        assert_eq!(decode(&[0u8; 64], GEN), Decoded::Invalid, "zeros");
        assert_eq!(decode(&buf[..20], GEN), Decoded::Short { len: 32 });
    }

    #[test]
    fn a_pad_skips_bytes_it_does_not_carry() {
        let mut buf = Vec::new();
        encode_pad(5000, 2, 8192, GEN, &mut buf);
        assert_eq!(buf.len(), HEADER_BYTES);
        let Decoded::Record(r) = decode(&buf, GEN) else {
            panic!("pad refused");
        };
        assert_eq!((r.kind, r.len, r.pos, r.boot), (Kind::Pad, 5000, 8192, 2));
    }
}
