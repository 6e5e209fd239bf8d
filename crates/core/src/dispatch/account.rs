//! A completed or failed device operation's accounting within its plan:
//! the operations that waited for it, the client's acknowledgement, and
//! what a failure skips.

use std::collections::VecDeque;

use super::{Acked, Dispatcher, Flight, Ready, Work};
use crate::types::{Access, Op, PlanIndex, Purpose, NO_DEP};

impl Dispatcher {
    /// Counts operation `index` of `flight` done, and hands out the
    /// operations that waited for it, or (when it failed) skips them.
    pub(super) fn account(&mut self, flight: u32, index: PlanIndex, payload: u64, ok: bool) {
        let f = &mut self.flights[flight as usize];
        let io = f.ios[index as usize];
        f.payloads[index as usize] = payload;
        assert!(
            f.remaining > 0,
            "plan {flight} completed more operations than it has"
        );
        f.remaining -= 1;
        if io.acks {
            assert!(f.acks_remaining > 0, "plan {flight} acknowledged twice");
            f.acks_remaining -= 1;
        }
        if io.purpose == Purpose::Client && io.dir == Op::Read {
            f.client_payload = payload;
        }
        if ok && f.gather && io.dir == Op::Read {
            self.gathered_read(flight);
            return;
        }
        if ok {
            if !f.has_deps {
                return;
            }
            // Dependents come later in the plan (checked by `Plan::push`).
            for (j, dep) in f.ios.iter().enumerate().skip(index as usize + 1) {
                if dep.after == index {
                    self.ready.push_back(Ready {
                        flight,
                        index: j as PlanIndex,
                        io: *dep,
                        src_payload: payload,
                        tag: f.work.block_tag(dep.part as u64),
                    });
                }
            }
            return;
        }
        self.stats.failed_ops += 1;
        match io.dir {
            Op::Write => f.failures.writes |= 1 << io.device,
            Op::Read if io.purpose == Purpose::Client => f.failures.client_reads |= 1 << io.device,
            Op::Read => {}
        }
        if io.acks && io.purpose == Purpose::Client {
            f.client_failed = true;
            if f.work.end() - f.work.block() > 1 && !f.failed_parts.contains(&io.part) {
                f.failed_parts.push(io.part);
            }
        }
        let skipped: Vec<PlanIndex> = (index as usize + 1..f.ios.len())
            .filter(|&j| f.ios[j].after == index)
            .map(|j| j as PlanIndex)
            .collect();
        for j in skipped {
            self.account(flight, j, 0, false);
        }
        if self.flights[flight as usize].gather && io.dir == Op::Read {
            self.flights[flight as usize].failed_reads.push(index);
            self.gathered_read(flight);
        }
    }

    /// A read of a gathering plan completed or failed; after its last
    /// read, hands out every operation that waited for a read that
    /// succeeded, in plan order.
    fn gathered_read(&mut self, flight: u32) {
        let f = &mut self.flights[flight as usize];
        assert!(
            f.reads_waiting > 0,
            "plan {flight} completed more reads than it has"
        );
        f.reads_waiting -= 1;
        if f.reads_waiting > 0 {
            return;
        }
        for (j, dep) in f.ios.iter().enumerate() {
            let src = dep.after;
            if src == NO_DEP || f.ios[src as usize].dir != Op::Read || f.failed_reads.contains(&src)
            {
                continue;
            }
            self.ready.push_back(Ready {
                flight,
                index: j as PlanIndex,
                io: *dep,
                src_payload: f.payloads[src as usize],
                tag: f.work.block_tag(dep.part as u64),
            });
        }
    }

    #[inline]
    pub(super) fn ack(f: &mut Flight, acked: &mut VecDeque<Acked>) {
        f.acked = true;
        let Work::Client { tag, access } = f.work else {
            return;
        };
        if access.blocks == 1 {
            acked.push_back(Acked {
                tag,
                access,
                outcome: f.outcome,
                payload: f.client_payload,
                failed: f.client_failed,
            });
        } else {
            Self::ack_blocks(f, tag, access, acked);
        }
    }

    /// Acknowledges the blocks of a client access of several blocks, each
    /// with the payload of its client read.
    #[inline(never)]
    fn ack_blocks(f: &Flight, tag: u64, access: Access, acked: &mut VecDeque<Acked>) {
        let mut payloads = vec![0; access.blocks as usize];
        for (io, &payload) in f.ios.iter().zip(&f.payloads) {
            if io.purpose == Purpose::Client && io.dir == Op::Read {
                payloads[io.part as usize] = payload;
            }
        }
        for (i, payload) in payloads.into_iter().enumerate() {
            acked.push_back(Acked {
                tag: tag + i as u64,
                access: Access::one(access.block + i as u64, access.op),
                outcome: f.outcome,
                payload,
                failed: f.failed_parts.contains(&(i as u16)),
            });
        }
    }
}
