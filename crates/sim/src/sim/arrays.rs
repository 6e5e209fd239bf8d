//! Devices that are disk arrays: their queues ([`ArrayTiming`], in the
//! device crate) time the operations instead of the devices' models. An
//! array's member disks complete operations at times of their own; the
//! simulator wakes the array at each ([`Ev::ArrayWake`]) and pushes each
//! request's completion once the array knows it.

use tiermux_core::Op;
use tiermux_device::array::{ArrayTiming, Started};

use super::{Ev, Simulator};
use crate::config::Resolved;

/// A device's disk array, and when the simulator will wake it next.
pub(super) struct SimArray {
    timing: ArrayTiming<Ev>,
    /// The earliest wake queued, ns.
    wake_ns: Option<u64>,
    /// Requests whose completion the last call made known.
    out: Vec<Started<Ev>>,
}

/// Per device of `r`: its disk array, if it is one.
pub(super) fn arrays_of(r: &Resolved) -> Vec<Option<SimArray>> {
    r.devices
        .iter()
        .map(|(name, _)| {
            let array = name.strip_prefix(crate::config::ARRAY_PREFIX)?;
            let timing = ArrayTiming::named(array, r.cfg.block_size as u64)
                .expect("the configuration names a known array");
            Some(SimArray {
                timing,
                wake_ns: None,
                out: Vec::new(),
            })
        })
        .collect()
}

impl Simulator {
    /// Submits a request to array device `d`; `ev` is its completion.
    pub(super) fn submit_to_array(&mut self, d: usize, dir: Op, bytes: u64, addr: u64, ev: Ev) {
        let now = self.now;
        let a = self.arrays[d].as_mut().expect("an array device");
        a.timing.submit(now, dir, bytes, addr, ev, &mut a.out);
        self.array_settle(d);
    }

    /// Array device `d`'s wake: its member disks' operations due now
    /// complete, and what waits behind them starts.
    pub(super) fn array_wake(&mut self, d: usize) {
        let now = self.now;
        let a = self.arrays[d].as_mut().expect("an array device");
        if a.wake_ns == Some(now) {
            a.wake_ns = None;
        }
        a.timing.advance(now, &mut a.out);
        self.array_settle(d);
    }

    /// Pushes the completions array `d` made known, counts its busy time
    /// and queues its next wake.
    fn array_settle(&mut self, d: usize) {
        let a = self.arrays[d].as_mut().expect("an array device");
        let busy_ns = a.timing.take_busy_ns();
        let next = a.timing.next_event_ns();
        let wake = next.filter(|&t| a.wake_ns.is_none_or(|w| t < w));
        if wake.is_some() {
            a.wake_ns = wake;
        }
        let mut out = std::mem::take(&mut a.out);
        self.devices[d].note_service(busy_ns);
        for s in out.drain(..) {
            self.push(s.done_ns, s.tag);
        }
        if let Some(t) = wake {
            self.push(t, Ev::ArrayWake { device: d as u8 });
        }
        self.arrays[d].as_mut().expect("an array device").out = out;
    }
}
