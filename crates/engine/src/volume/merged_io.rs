//! Merged device operations: the operations the dispatcher hands out
//! together that go to consecutive addresses of one device, in one
//! direction, become one vectored operation (`preadv`/`pwritev`), up to
//! [`MERGE_MAX_BLOCKS`] blocks. A large sequential request then costs one
//! system call per device and direction instead of one per block.
//!
//! Plans keep their per-block meaning: each block's operation stays a
//! [`DevOp`] and is settled on its own (completed, or failed with the fault
//! layers consulted per block) when the merged operation completes. A
//! merged operation that fails or transfers less than all of its bytes is
//! tried again block by block, so that an error lands on the blocks it
//! belongs to.

use tiermux_core::dispatch::merge::{merge_key, runs, MERGE_MAX_BLOCKS};
use tiermux_core::{Op, Ready};

use super::{token, DevOp, Volume, KIND_DEV_IO, KIND_MERGED_IO, KIND_MERGED_WAIT};
use crate::emulate::NOT_YET;
use crate::reactor::Reactor;

/// A vectored operation in flight over consecutive blocks of one device.
pub(super) struct MergedOp {
    /// The blocks' operations (slots in `Volume::ops`), in address order.
    parts: Vec<usize>,
    /// One buffer per block, in the same order (for retrying block by
    /// block).
    iov: Vec<libc::iovec>,
    /// The same buffers with neighbours in memory joined (blocks read in
    /// place into one request's buffer); handed to the kernel.
    joined: Vec<libc::iovec>,
    device: u8,
    dir: Op,
    first_addr: u64,
    /// Why the first block's operation exists (for emulation's counters).
    purpose: usize,
    submitted_ns: u64,
    /// As [`DevOp`]'s.
    deadline_ns: u64,
    result: i32,
    /// Its transfer has completed (it may still wait for its deadline).
    transferred: bool,
}

// SAFETY: the raw pointers in `iov` point into buffers the volume owns (pool
// buffers referenced by the parts, or request buffers kept until the
// request's flights finish); the merged operation moves between threads
// only together with the volume that owns those buffers.
unsafe impl Send for MergedOp {}

impl MergedOp {
    fn bytes(&self) -> u64 {
        self.iov.iter().map(|v| v.iov_len as u64).sum()
    }
}

/// `iov` with buffers that follow each other in memory joined into one.
fn join_neighbours(iov: &[libc::iovec]) -> Vec<libc::iovec> {
    let mut joined: Vec<libc::iovec> = Vec::with_capacity(iov.len());
    for v in iov {
        match joined.last_mut() {
            Some(last) if last.iov_base as usize + last.iov_len == v.iov_base as usize => {
                last.iov_len += v.iov_len;
            }
            _ => joined.push(*v),
        }
    }
    joined
}

impl Volume {
    /// Performs the operations the dispatcher handed out together, merging
    /// those on consecutive addresses.
    pub(super) fn issue_batch(&mut self, batch: &mut Vec<Ready>, r: &mut dyn Reactor) {
        if batch.len() == 1 {
            self.issue(batch[0], r);
            batch.clear();
            return;
        }
        batch.retain(|ready| {
            let held = self.must_hold(ready);
            if held {
                self.hold(*ready);
            }
            !held
        });
        batch.sort_by_key(merge_key);
        let mut at = 0;
        for len in runs(batch, MERGE_MAX_BLOCKS) {
            match len {
                1 => self.issue(batch[at], r),
                _ => self.issue_merged(&batch[at..at + len], r),
            }
            at += len;
        }
        batch.clear();
    }

    fn issue_merged(&mut self, run: &[Ready], r: &mut dyn Reactor) {
        let first = run[0].io;
        let bs = self.cfg.block_size;
        let now = r.now_ns();
        let mut parts = Vec::with_capacity(run.len());
        let mut iov = Vec::with_capacity(run.len());
        for (k, ready) in run.iter().enumerate() {
            assert_eq!(
                ready.io.addr,
                first.addr + k as u64,
                "a merged run has a gap"
            );
            let (ptr, buf) = self.buffer_of(ready);
            iov.push(libc::iovec {
                iov_base: ptr.cast(),
                iov_len: bs as usize,
            });
            parts.push(self.ops.insert(DevOp {
                flight: ready.flight,
                index: ready.index,
                device: first.device,
                dir: first.dir,
                buf,
                submitted_ns: now,
                deadline_ns: 0,
                result: 0,
                transferred: false,
            }));
        }
        let bytes = run.len() as u64 * bs as u64;
        self.stats.merged_ops += 1;
        self.stats.merged_blocks += run.len() as u64;
        let joined = join_neighbours(&iov);
        let slot = self.merged.insert(MergedOp {
            parts,
            iov,
            joined,
            device: first.device,
            dir: first.dir,
            first_addr: first.addr,
            purpose: first.purpose.index(),
            submitted_ns: now,
            deadline_ns: 0,
            result: 0,
            transferred: false,
        });
        let dev = &mut self.devices[first.device as usize];
        let t = token(KIND_MERGED_IO, slot);
        let deadline_ns =
            dev.submitted(now, first.dir, bytes, first.addr, first.purpose.index(), t);
        let fd = dev.fd();
        if dev.memory_backed {
            r.serve_inline(fd);
        }
        self.merged
            .get_mut(slot)
            .expect("merged op just inserted")
            .deadline_ns = deadline_ns;
        self.collect_released(first.device as usize);
        let m = self.merged.get_mut(slot).expect("merged op just inserted");
        let (iov, count) = (m.joined.as_ptr(), m.joined.len() as u32);
        let offset = first.addr * bs as u64;
        // SAFETY: every listed buffer outlives the operation (as in
        // `issue`), and the list lives in `self.merged`, from which it is
        // removed only when the completion arrives; a `Vec`'s heap buffer
        // does not move when the slab does.
        unsafe { r.vectored(fd, first.dir, iov, count, offset, t) }
    }

    pub(super) fn on_merged_completion(&mut self, slot: usize, result: i32, r: &mut dyn Reactor) {
        let now = r.now_ns();
        let m = self.merged.get_mut(slot).expect("merged op");
        m.result = result;
        m.transferred = true;
        if m.deadline_ns > now {
            // A held operation waits to be released (`release_merged`).
            if m.deadline_ns != NOT_YET {
                let d = m.deadline_ns;
                self.emu_waits.push(d, token(KIND_MERGED_WAIT, slot));
            }
            return;
        }
        self.finish_merged(slot, now, r);
    }

    /// The held merged operation in `slot` may complete at `deadline_ns`.
    pub(super) fn release_merged(&mut self, slot: usize, deadline_ns: u64) {
        let m = self.merged.get_mut(slot).expect("a held merged op");
        assert_eq!(m.deadline_ns, NOT_YET, "a released op was held");
        m.deadline_ns = deadline_ns;
        if m.transferred {
            self.emu_waits
                .push(deadline_ns, token(KIND_MERGED_WAIT, slot));
        }
    }

    pub(super) fn finish_merged(&mut self, slot: usize, now: u64, r: &mut dyn Reactor) {
        let m = self.merged.remove(slot).expect("merged op");
        let bytes = m.bytes();
        let latency_ns = now - m.submitted_ns;
        self.devices[m.device as usize].completed(m.dir, bytes, latency_ns);
        self.obs
            .device_op(m.device as usize, m.dir, bytes, latency_ns);
        if m.result < 0 || m.result as u64 != bytes {
            self.stats.merged_retries += 1;
            self.retry_parts(&m, now, r);
            return;
        }
        let bs = self.cfg.block_size as i32;
        let mut bufs = Vec::with_capacity(m.parts.len());
        for &p in &m.parts {
            let mut op = self.ops.remove(p).expect("part of a merged op");
            op.result = bs;
            self.settle(&op);
            bufs.extend(op.buf);
        }
        self.drain(r);
        for id in bufs {
            self.pool.release(id);
        }
    }

    /// Issues each block of a failed merged operation on its own.
    fn retry_parts(&mut self, m: &MergedOp, now: u64, r: &mut dyn Reactor) {
        let bs = self.cfg.block_size;
        for (k, (&p, v)) in m.parts.iter().zip(&m.iov).enumerate() {
            let addr = m.first_addr + k as u64;
            let dev = &mut self.devices[m.device as usize];
            let t = token(KIND_DEV_IO, p);
            let deadline_ns = dev.submitted(now, m.dir, bs as u64, addr, m.purpose, t);
            let fd = dev.fd();
            let op = self.ops.get_mut(p).expect("part of a merged op");
            op.submitted_ns = now;
            op.deadline_ns = deadline_ns;
            self.collect_released(m.device as usize);
            let (ptr, offset) = (v.iov_base.cast::<u8>(), addr * bs as u64);
            match m.dir {
                // SAFETY: as in `issue_merged`: the part's buffer lives until
                // its own completion now.
                Op::Read => unsafe { r.read(fd, ptr, bs, offset, t) },
                // SAFETY: as above.
                Op::Write => unsafe { r.write(fd, ptr, bs, offset, t) },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_next_to_each_other_are_joined() {
        let mut mem = vec![0u8; 5 * 4096];
        let base = mem.as_mut_ptr();
        let v = |block: usize| libc::iovec {
            iov_base: base.wrapping_add(block * 4096).cast(),
            iov_len: 4096,
        };
        let joined = join_neighbours(&[v(0), v(1), v(2), v(4), v(3)]);
        let spans: Vec<(usize, usize)> = joined
            .iter()
            .map(|j| {
                (
                    (j.iov_base as usize - base as usize) / 4096,
                    j.iov_len / 4096,
                )
            })
            .collect();
        assert_eq!(spans, vec![(0, 3), (4, 1), (3, 1)]);
        assert!(join_neighbours(&[]).is_empty());
    }
}
