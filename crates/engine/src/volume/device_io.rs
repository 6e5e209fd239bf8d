//! Device operations: performing the operations the dispatcher hands out
//! (reads into pooled buffers or straight into the client's buffer, client
//! writes, copies), waiting out an emulated device's time, and feeding
//! completions back.

use tiermux_core::Op;

use super::{
    split_tag, split_token, token, DevOp, Volume, IN_PLACE, KIND_DEV_IO, KIND_DISCARD,
    KIND_EMU_WAIT, KIND_MARK, KIND_MERGED_IO, KIND_MERGED_WAIT,
};
use crate::emulate::{Released, NOT_YET};
use crate::reactor::{Completion, Reactor};

impl Volume {
    pub(super) fn issue(&mut self, ready: tiermux_core::Ready, r: &mut dyn Reactor) {
        if self.must_hold(&ready) {
            self.hold(ready);
            return;
        }
        let io = ready.io;
        let bs = self.cfg.block_size;
        let now = r.now_ns();
        let (ptr, buf) = self.buffer_of(&ready);
        let slot = self.ops.insert(DevOp {
            flight: ready.flight,
            index: ready.index,
            device: io.device,
            dir: io.dir,
            buf,
            submitted_ns: now,
            deadline_ns: 0,
            result: 0,
            transferred: false,
        });
        let dev = &mut self.devices[io.device as usize];
        let t = token(KIND_DEV_IO, slot);
        let deadline_ns = dev.submitted(now, io.dir, bs as u64, io.addr, io.purpose.index(), t);
        let fd = dev.fd();
        if dev.memory_backed {
            r.serve_inline(fd);
        }
        self.ops
            .get_mut(slot)
            .expect("device op just inserted")
            .deadline_ns = deadline_ns;
        self.collect_released(io.device as usize);
        let offset = io.addr * bs as u64;
        match io.dir {
            // SAFETY: the buffer (a pool buffer with a reference held by this
            // operation, or the request's buffer kept until the request
            // finishes) outlives the operation, which is removed from `ops`
            // only when its completion arrives.
            Op::Read => unsafe { r.read(fd, ptr, bs, offset, token(KIND_DEV_IO, slot)) },
            // SAFETY: as above.
            Op::Write => unsafe { r.write(fd, ptr, bs, offset, token(KIND_DEV_IO, slot)) },
        }
    }

    /// The buffer an operation reads into or writes from, and the pool
    /// buffer it holds a reference to (none for a client write, which
    /// writes from its request's buffer, nor for a client read that reads
    /// in place). Checks the address and the buffer's alignment.
    pub(super) fn buffer_of(&mut self, ready: &tiermux_core::Ready) -> (*mut u8, Option<u32>) {
        let io = ready.io;
        let (ptr, buf): (*mut u8, Option<u32>) = match (io.dir, io.purpose) {
            (Op::Read, tiermux_core::Purpose::Client) if self.reads_in_place(ready) => {
                (self.block_of_request(ready.tag), None)
            }
            (Op::Write, tiermux_core::Purpose::Client) => (self.block_of_request(ready.tag), None),
            (Op::Write, _) => {
                // The reference its source read handed it (`settle`).
                assert_ne!(ready.src_payload, IN_PLACE, "a copy of data read in place");
                let id = ready.src_payload as u32;
                (self.pool.bufs[id as usize].as_mut_ptr(), Some(id))
            }
            (Op::Read, _) => {
                let id = self.pool.alloc();
                (self.pool.bufs[id as usize].as_mut_ptr(), Some(id))
            }
        };
        let space = self.address_spaces[io.device as usize];
        assert!(
            io.addr < space,
            "policy '{}' addressed block {} of device {}, which has {space}",
            self.dispatcher.policy().name(),
            io.addr,
            io.device
        );
        assert_eq!(
            ptr as usize % crate::buf::ALIGN,
            0,
            "device I/O buffer unaligned"
        );
        (ptr, buf)
    }

    /// Where the block of the client request that `tag` names lies in the
    /// request's buffer (a client write's data, or a read in place).
    fn block_of_request(&mut self, tag: u64) -> *mut u8 {
        let bs = self.cfg.block_size as usize;
        let (idx, _, i) = split_tag(tag);
        let req = self
            .reqs
            .get_mut(idx)
            .expect("request of a client operation");
        assert!(i < req.nblocks as usize, "block {i} is outside its request");
        // SAFETY: the offset stays within the request's buffer (block `i` <
        // nblocks, asserted), which lives until the request finishes, after
        // all its flights (and so this operation) did.
        unsafe { req.buf.as_mut_ptr().add(i * bs) }
    }

    /// Whether client read `ready` may read straight into its request's
    /// buffer: it reads for a client read request (not for the merge of
    /// a partial write), and no later operation of its plan copies the
    /// data it returns (a cache fill does, from a pooled buffer).
    fn reads_in_place(&self, ready: &tiermux_core::Ready) -> bool {
        if ready.tag == tiermux_core::NO_TAG {
            return false;
        }
        let (idx, rmw, _) = split_tag(ready.tag);
        !rmw && self.reqs.get(idx).is_some_and(|req| req.op == Op::Read)
            && !self.dispatcher.feeds_copy(ready.flight, ready.index)
    }

    /// Handles a completion whose token belongs to the volume.
    pub fn on_completion(&mut self, c: Completion, r: &mut dyn Reactor) {
        let (kind, index) = split_token(c.token);
        match kind {
            KIND_DEV_IO => {
                let now = r.now_ns();
                let op = self.ops.get_mut(index).expect("device op");
                op.result = c.result;
                op.transferred = true;
                if op.deadline_ns > now {
                    // A held operation waits to be released
                    // (`release`), which queues its wait.
                    if op.deadline_ns != NOT_YET {
                        let d = op.deadline_ns;
                        self.emu_waits.push(d, token(KIND_EMU_WAIT, index));
                    }
                    return;
                }
                self.finish_op(index, now, r);
            }
            KIND_MERGED_IO => self.on_merged_completion(index, c.result, r),
            KIND_MARK => {
                if let Err(e) = self.on_mark_sync(index, c.result, r) {
                    self.meta_error.get_or_insert(e);
                }
            }
            KIND_DISCARD => self.on_discard(index, c.result, r),
            _ => panic!("token {:#x} is not the volume's", c.token),
        }
    }

    /// Finishes every operation whose emulated device is done with it at
    /// `now`, earliest first.
    pub(super) fn finish_due_waits(&mut self, now: u64, r: &mut dyn Reactor) {
        while let Some(t) = self.emu_waits.pop_due(now) {
            let (kind, index) = split_token(t);
            match kind {
                KIND_EMU_WAIT => self.finish_op(index, now, r),
                KIND_MERGED_WAIT => self.finish_merged(index, now, r),
                kind => panic!("a waiting operation of kind {kind}"),
            }
        }
    }

    fn finish_op(&mut self, slot: usize, now: u64, r: &mut dyn Reactor) {
        let op = self.ops.remove(slot).expect("device op");
        let bs = self.cfg.block_size as u64;
        let dev = &mut self.devices[op.device as usize];
        let latency_ns = now - op.submitted_ns;
        dev.completed(op.dir, bs, latency_ns);
        self.obs
            .device_op(op.device as usize, op.dir, bs, latency_ns);
        self.settle(&op);
        self.drain(r);
        if let Some(id) = op.buf {
            self.pool.release(id);
        }
    }

    /// Lets go the operations that device `d`'s emulated timing held (a
    /// disk array's queues) and now gives deadlines.
    pub(super) fn collect_released(&mut self, d: usize) {
        let mut released = Vec::new();
        self.devices[d].take_released(&mut released);
        for r in released {
            self.release(r);
        }
    }

    /// An operation that emulated timing held now has its deadline; one
    /// whose transfer is done waits for it (`emu_waits`).
    fn release(&mut self, released: Released) {
        let Released {
            token: t,
            deadline_ns,
        } = released;
        assert_ne!(deadline_ns, NOT_YET, "a released operation has a deadline");
        let (kind, index) = split_token(t);
        match kind {
            KIND_DEV_IO => {
                let op = self.ops.get_mut(index).expect("a held device op");
                assert_eq!(op.deadline_ns, NOT_YET, "a released op was held");
                op.deadline_ns = deadline_ns;
                if op.transferred {
                    self.emu_waits
                        .push(deadline_ns, token(KIND_EMU_WAIT, index));
                }
            }
            KIND_MERGED_IO => self.release_merged(index, deadline_ns),
            kind => panic!("a held operation of kind {kind}"),
        }
    }

    /// Tells the dispatcher how block operation `op` (transferred, or not,
    /// as its `result` says) ended, after the device's fault layers had
    /// their say.
    pub(super) fn settle(&mut self, op: &DevOp) {
        let bs = self.cfg.block_size as u64;
        let dev = &mut self.devices[op.device as usize];
        let injected = dev.fails(crate::faults::FaultOp::of(op.dir));
        let ok = op.result == bs as i32 && !injected;
        if ok {
            self.health.succeeded(op.device);
            let payload = match (op.dir, op.buf) {
                (Op::Read, Some(id)) => {
                    // One reference for each copy that writes from the
                    // buffer, whenever the dispatcher hands it out.
                    let copies = self.dispatcher.copies_fed(op.flight, op.index);
                    self.pool.retain_n(id, copies);
                    id as u64
                }
                (Op::Read, None) => IN_PLACE,
                (Op::Write, _) => 0,
            };
            self.dispatcher.complete(op.flight, op.index, payload);
        } else {
            let what = if op.dir == Op::Read { "read" } else { "write" };
            let why = if injected {
                "injected error".to_string()
            } else if op.result < 0 {
                rustix::io::Errno::from_raw_os_error(-op.result).to_string()
            } else {
                format!("short transfer of {} bytes", op.result)
            };
            self.device_failed(op.device, what, &why, 1);
            // The dispatcher skips the copies of a failed read and repairs
            // the map when the plan finishes; a client access it served
            // fails (`on_acked`, `durable`).
            self.dispatcher.fail(op.flight, op.index);
        }
    }

    /// Counts a failed operation (`weight` failures: a failed sync counts
    /// as the device failing) and takes the device out of service when it
    /// keeps failing.
    pub(super) fn device_failed(&mut self, device: u8, what: &str, why: &str, weight: u32) {
        self.stats.device_errors += 1;
        let name = &self.devices[device as usize].name;
        let h = &mut self.health;
        if h.should_log(device) {
            eprintln!("tiermux: {what} on device '{name}' failed: {why}");
        }
        if !h.failed(device, weight) {
            return;
        }
        let errors = h.errors(device);
        if self.dispatcher.take_out_of_service(device) {
            self.health.out_of_service(device);
            // Checkpoints no longer sync it.
            let out = self.health.out_of_service_mask();
            let fds = self
                .devices
                .iter()
                .enumerate()
                .filter(|(i, _)| out & (1 << i) == 0)
                .map(|(_, d)| d.fd())
                .collect();
            self.meta.set_data_fds(fds);
            let at_risk = self.at_risk_blocks(device);
            eprintln!(
                "tiermux: device '{name}' keeps failing ({errors} errors); taken out of service. \
                 Reads of clean data go to the other devices.{}",
                if at_risk > 0 {
                    format!(" AT RISK: {at_risk} blocks whose newest data is only on it (their reads fail while it fails)")
                } else {
                    String::new()
                }
            );
        } else {
            eprintln!(
                "tiermux: device '{name}' keeps failing ({errors} errors); policy '{}' cannot do without it: requests it serves fail",
                self.dispatcher.policy().name()
            );
        }
    }
}
