//! A device failing during a run ([`crate::failure`]): the failure itself,
//! operations that meet the dead device, and client accesses that fail.
//!
//! The simulator treats a failure as the engine treats a device that
//! keeps failing, at once rather than after a run of errors: the policy
//! is asked to take the device out of service, operations on it fail when
//! they complete, and a client read that fails is tried once more (the
//! repair after a failed plan may have dropped the copy it could not
//! read). The version checker goes on as before: a read that does not
//! fail must return a version at least as new as the last acknowledged
//! write, so a policy that answers a lost block with an older copy fails
//! the run.

use tiermux_core::safe::current_copies;
use tiermux_core::{Acked, Op};

use super::{Ev, Simulator};
use crate::failure::FailureResult;

impl Simulator {
    /// Schedules the configured failure, if any.
    pub(super) fn schedule_failure(&mut self) {
        if let Some(f) = self.r.cfg.failure.clone() {
            let device = u8::try_from(f.device).expect("a checked device index");
            self.push((f.at_s * 1e9) as u64, Ev::DeviceFails { device });
        }
    }

    /// `device` fails now: what only it held is lost, and the policy stops
    /// using it where it can.
    pub(super) fn device_fails(&mut self, device: u8) {
        let map = self.dispatcher.map();
        let only_there = 1u8 << device;
        let lost_blocks = self
            .versions
            .iter()
            .enumerate()
            .filter(|(b, v)| v.acked > 0 && current_copies(&map.get(*b as u64)) == only_there)
            .count() as u64;
        self.dead_devices |= only_there;
        self.content[device as usize].fill(0);
        let out_of_service = self.dispatcher.take_out_of_service(device);
        self.failure = Some(FailureResult {
            device: device as usize,
            out_of_service,
            lost_blocks,
            ..FailureResult::default()
        });
        self.drain();
    }

    /// Whether `device` has failed.
    #[inline]
    pub(super) fn is_dead(&self, device: u8) -> bool {
        self.dead_devices & (1 << device) != 0
    }

    /// A client access failed: a read is tried once more, then counted
    /// with a write as failed; the request goes on with its other blocks.
    pub(super) fn failed_sub(&mut self, a: Acked) {
        let sid = self.sub_of(a.tag);
        let f = self
            .failure
            .as_mut()
            .expect("client accesses fail only after a device failed");
        let s = &mut self.subs[sid as usize];
        assert!(!s.kv, "key-value runs have no device failures");
        match a.access.op {
            Op::Read if !s.retried => {
                s.retried = true;
                f.read_retries += 1;
                self.dispatcher.submit(a.tag, a.access);
                return;
            }
            Op::Read => f.failed_reads += 1,
            Op::Write => f.failed_writes += 1,
        }
        let req = s.req;
        self.free_subs.push(sid);
        self.block_done(req);
    }
}
