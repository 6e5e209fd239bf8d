//! Reference-counted block buffers for device reads and copies: a read
//! fills one and, when it completes, takes a reference for each copy
//! that depends on it (fills, flushes), which that copy's write hands
//! back when done; the buffer returns to the pool when the read and the
//! last of them are done. A gathering plan's copies are handed out after
//! all its reads, so a read's buffer must outlive the read.

use crate::buf::AlignedBuf;

/// Reference-counted block buffers for device reads and copies.
pub(super) struct BufPool {
    pub(super) bufs: Vec<AlignedBuf>,
    refs: Vec<u32>,
    free: Vec<u32>,
    block_size: usize,
}

impl BufPool {
    pub(super) fn new(block_size: usize) -> BufPool {
        BufPool {
            bufs: Vec::new(),
            refs: Vec::new(),
            free: Vec::new(),
            block_size,
        }
    }

    pub(super) fn alloc(&mut self) -> u32 {
        if let Some(id) = self.free.pop() {
            self.refs[id as usize] = 1;
            return id;
        }
        self.bufs.push(AlignedBuf::zeroed(self.block_size));
        self.refs.push(1);
        (self.bufs.len() - 1) as u32
    }
    /// Adds `n` references to a held buffer.
    pub(super) fn retain_n(&mut self, id: u32, n: u32) {
        let r = &mut self.refs[id as usize];
        assert!(*r > 0, "buffer {id} retained while free");
        *r += n;
    }
    /// Buffers some operation still holds.
    pub(super) fn held(&self) -> usize {
        self.bufs.len() - self.free.len()
    }

    pub(super) fn release(&mut self, id: u32) {
        let r = &mut self.refs[id as usize];
        assert!(*r > 0, "buffer {id} released more often than held");
        *r -= 1;
        if *r == 0 {
            self.free.push(id);
        }
    }
}
