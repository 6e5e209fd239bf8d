//! The simulated volume's bytes, for the key-value front, whose machine
//! reads back what it wrote: one mapping as large as the volume, and which
//! stretches of it were ever written, so that a prefilled front's copy
//! copies those alone.

/// The volume's bytes: an anonymous mapping the kernel may back with huge
/// pages, so that a prefill that writes the whole hierarchy takes a page
/// fault per 2 MiB, not per 4 KiB; and which stretches of it were ever
/// written, so that a copy copies those alone.
pub(super) struct Contents {
    map: memmap2::MmapMut,
    /// Whether each [`CHUNK_BYTES`] stretch was written (else it is all
    /// zero, and untouched).
    written: Vec<bool>,
}

/// The stretch [`Contents`] notes as written: a huge page.
const CHUNK_BYTES: usize = 2 << 20;

impl Contents {
    /// `len` zero bytes.
    pub(super) fn zeroed(len: usize) -> Contents {
        let map = memmap2::MmapMut::map_anon(len.max(1)).expect("mapping the simulated store");
        // Advice only: without huge pages the store is the same, only slower.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let written = vec![false; map.len().div_ceil(CHUNK_BYTES)];
        Contents { map, written }
    }

    /// Bytes of the stretches ever written.
    pub(super) fn written_bytes(&self) -> u64 {
        self.written.iter().filter(|w| **w).count() as u64 * CHUNK_BYTES as u64
    }

    /// Notes bytes `at..at + len` as written.
    fn note(&mut self, at: usize, len: usize) {
        if len > 0 {
            let chunks = at / CHUNK_BYTES..=(at + len - 1) / CHUNK_BYTES;
            self.written[chunks].fill(true);
        }
    }

    /// Writes `data` at byte `at`.
    pub(super) fn write(&mut self, at: usize, data: &[u8]) {
        self.note(at, data.len());
        self.map[at..at + data.len()].copy_from_slice(data);
    }

    /// Zeroes `len` bytes from byte `at`.
    pub(super) fn zero(&mut self, at: usize, len: usize) {
        self.note(at, len);
        self.map[at..at + len].fill(0);
    }
}

impl Clone for Contents {
    /// A copy that copies the stretches ever written alone: the others are
    /// zero in both, and take no memory in the copy either.
    fn clone(&self) -> Contents {
        let mut copy = Contents::zeroed(self.map.len());
        for (i, _) in self.written.iter().enumerate().filter(|(_, w)| **w) {
            let at = i * CHUNK_BYTES;
            let end = (at + CHUNK_BYTES).min(self.map.len());
            copy.map[at..end].copy_from_slice(&self.map[at..end]);
        }
        copy.written.clone_from(&self.written);
        copy
    }
}

impl std::ops::Deref for Contents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_holds_every_byte_written_and_zero_elsewhere() {
        let mut c = Contents::zeroed(3 * CHUNK_BYTES + 100);
        // Across the first two stretches, and in the short last one.
        c.write(CHUNK_BYTES - 2, &[1, 2, 3, 4]);
        c.write(3 * CHUNK_BYTES + 50, &[9]);
        c.zero(CHUNK_BYTES - 1, 1);
        assert_eq!(c.written_bytes(), 3 * CHUNK_BYTES as u64);
        assert_eq!(&c[CHUNK_BYTES - 2..CHUNK_BYTES + 2], &[1, 0, 3, 4]);
        let copy = c.clone();
        assert!(copy[..] == c[..]);
        assert_eq!(copy.written_bytes(), c.written_bytes());
        assert!(copy[2 * CHUNK_BYTES..3 * CHUNK_BYTES]
            .iter()
            .all(|&b| b == 0));
    }
}
