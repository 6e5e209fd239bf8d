//! Operations whose transfer is done and that wait for the time their
//! emulated device would finish them, in deadline order.
//!
//! The loop waits once for the earliest deadline (through
//! [`super::Volume::next_deadline_ns`]) and then finishes every operation
//! that is due ([`super::Volume::on_time`]). One timer per operation (a ring
//! timeout each) cost the loop about a third of its CPU on a virtual
//! machine, where arming a timer exits to the hypervisor
//! (`docs/performance.md`, "Emulated devices' timers").

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Waiting operations: (deadline ns, volume token), earliest first.
#[derive(Default)]
pub(super) struct EmuWaits {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
}

impl EmuWaits {
    /// The operation `token` may finish at `deadline_ns`.
    pub(super) fn push(&mut self, deadline_ns: u64, token: u64) {
        assert_ne!(
            deadline_ns,
            crate::emulate::NOT_YET,
            "a held operation waits for its release, not for a time"
        );
        self.heap.push(Reverse((deadline_ns, token)));
    }

    /// The earliest deadline, if any operation waits.
    pub(super) fn next_ns(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((d, _))| *d)
    }

    /// The token of an operation due at `now_ns`, earliest first.
    pub(super) fn pop_due(&mut self, now_ns: u64) -> Option<u64> {
        match self.heap.peek() {
            Some(Reverse((d, _))) if *d <= now_ns => self.heap.pop().map(|Reverse((_, t))| t),
            _ => None,
        }
    }

    /// Operations waiting.
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_operations_come_out_earliest_first() {
        let mut w = EmuWaits::default();
        assert_eq!(w.next_ns(), None);
        w.push(30, 3);
        w.push(10, 1);
        w.push(20, 2);
        w.push(20, 4);
        assert_eq!(w.next_ns(), Some(10));
        assert_eq!(w.pop_due(9), None);
        assert_eq!(w.pop_due(20), Some(1));
        assert_eq!(w.pop_due(20), Some(2));
        assert_eq!(w.pop_due(20), Some(4));
        assert_eq!(w.pop_due(20), None);
        assert_eq!(w.len(), 1);
        assert_eq!(w.next_ns(), Some(30));
        assert_eq!(w.pop_due(u64::MAX - 1), Some(3));
        assert_eq!(w.len(), 0);
    }

    #[test]
    #[should_panic(expected = "a held operation")]
    fn a_held_operation_has_no_time() {
        EmuWaits::default().push(crate::emulate::NOT_YET, 1);
    }
}
