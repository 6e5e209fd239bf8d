//! How an item is laid out on the volume, in a small-object bucket and in
//! a large-object region alike: a 20-byte header (CRC32 of everything after
//! it, key length, value length, expiry), then the key, then the value.
//! The checksum turns a torn or foreign item into "not found", never into
//! a wrong value.

/// Bytes of an item's header.
pub const HEADER_BYTES: usize = 20;

/// The longest key the layer stores, bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// An item read back from storage, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemRef<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Milliseconds since the epoch after which the item is gone; 0 never.
    pub expires_at_ms: u64,
}

impl ItemRef<'_> {
    /// Whether the item has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        expired(self.expires_at_ms, now_ms)
    }
}

/// Whether an item expiring at `expires_at_ms` (0: never) is gone at `now_ms`.
pub fn expired(expires_at_ms: u64, now_ms: u64) -> bool {
    expires_at_ms != 0 && now_ms >= expires_at_ms
}

/// Bytes an item of this key and value takes.
pub fn encoded_len(key_len: usize, value_len: usize) -> usize {
    HEADER_BYTES + key_len + value_len
}

/// Appends the encoding of an item to `out`.
pub fn encode(key: &[u8], value: &[u8], expires_at_ms: u64, out: &mut Vec<u8>) {
    assert!(key.len() <= MAX_KEY_BYTES, "key of {} bytes", key.len());
    let value_len = u32::try_from(value.len()).expect("a value under 4 GiB");
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&value_len.to_le_bytes());
    out.extend_from_slice(&expires_at_ms.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32fast::hash(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Reads the item at the start of `buf`: the item and the bytes it takes,
/// or `None` when the bytes are not a whole, intact item.
pub fn decode(buf: &[u8]) -> Option<(ItemRef<'_>, usize)> {
    let (item, len) = decode_covered(buf)?;
    let crc = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes"));
    (crc32fast::hash(&buf[4..len]) == crc).then_some((item, len))
}

/// Reads the item at the start of `buf` without checking its own CRC:
/// for bytes that an outer checksum has already covered (a small-object
/// bucket's). `None` when the lengths do not describe a whole item.
pub fn decode_covered(buf: &[u8]) -> Option<(ItemRef<'_>, usize)> {
    if buf.len() < HEADER_BYTES {
        return None;
    }
    let key_len = u16::from_le_bytes(buf[4..6].try_into().expect("2 bytes")) as usize;
    let value_len = u32::from_le_bytes(buf[8..12].try_into().expect("4 bytes")) as usize;
    let expires_at_ms = u64::from_le_bytes(buf[12..20].try_into().expect("8 bytes"));
    if key_len > MAX_KEY_BYTES {
        return None;
    }
    let len = HEADER_BYTES.checked_add(key_len)?.checked_add(value_len)?;
    if len > buf.len() {
        return None;
    }
    let key = &buf[HEADER_BYTES..HEADER_BYTES + key_len];
    let value = &buf[HEADER_BYTES + key_len..len];
    Some((
        ItemRef {
            key,
            value,
            expires_at_ms,
        },
        len,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_reads_back_and_any_flipped_bit_is_refused() {
        let mut buf = Vec::new();
        encode(b"key", b"value", 77, &mut buf);
        assert_eq!(buf.len(), encoded_len(3, 5));
        let (item, len) = decode(&buf).expect("intact");
        assert_eq!(
            (item.key, item.value, item.expires_at_ms, len),
            (&b"key"[..], &b"value"[..], 77, buf.len())
        );
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad).is_none(), "bit {bit} flipped and still read");
        }
        assert!(decode(&buf[..buf.len() - 1]).is_none());
        assert!(decode(&[0u8; 40]).is_none(), "zeros are not an item");
        let (covered, covered_len) = decode_covered(&buf).expect("whole");
        assert_eq!((covered, covered_len), (item, len));
        let mut bad_crc = buf.clone();
        bad_crc[0] ^= 1;
        assert!(decode(&bad_crc).is_none());
        assert!(
            decode_covered(&bad_crc).is_some(),
            "the outer checksum's job"
        );
        assert!(decode_covered(&buf[..buf.len() - 1]).is_none(), "cut short");
    }

    #[test]
    fn expiry_zero_means_never() {
        assert!(!expired(0, u64::MAX));
        assert!(expired(10, 10));
        assert!(!expired(10, 9));
    }
}
