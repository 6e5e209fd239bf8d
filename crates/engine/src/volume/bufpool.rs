//! Reference-counted block buffers for device reads and copies: a read
//! fills one, the copies that depend on it (fills, flushes) write from it,
//! and it returns to the pool when the last of them is done.

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
    pub(super) fn retain(&mut self, id: u32) {
        self.refs[id as usize] += 1;
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
