//! Which ready operations a driver performs as one device operation.
//!
//! The operations the dispatcher hands out together that go to
//! consecutive addresses of one device, in one direction, are one
//! transfer for the device: the engine issues them as one vectored call,
//! and the simulator as one request to its device model, so that both
//! worlds present the same requests to a device. Plans keep their
//! per-block meaning: each operation is still completed on its own.

use super::Ready;
use crate::types::Op;

/// The most blocks one merged operation covers (1 MiB of 4 KiB blocks;
/// below the kernel's limit of 1,024 buffers per vectored call).
pub const MERGE_MAX_BLOCKS: usize = 256;

/// The order in which operations are grouped: by device, direction and
/// address.
#[inline]
pub fn merge_key(ready: &Ready) -> (u8, bool, u64) {
    (ready.io.device, ready.io.dir == Op::Write, ready.io.addr)
}

/// Splits `batch`, sorted by [`merge_key`], into runs of operations on
/// consecutive addresses of one device in one direction, at most
/// `max_blocks` long; returns each run's length, in order. Two operations
/// on the same address are never in one run.
pub fn runs(batch: &[Ready], max_blocks: usize) -> Vec<usize> {
    assert!(max_blocks >= 1, "a run holds at least one operation");
    let mut lens = Vec::new();
    let mut i = 0;
    while i < batch.len() {
        let (d, dir) = (batch[i].io.device, batch[i].io.dir);
        let mut j = i + 1;
        while j < batch.len()
            && j - i < max_blocks
            && batch[j].io.device == d
            && batch[j].io.dir == dir
            && batch[j].io.addr == batch[j - 1].io.addr + 1
        {
            j += 1;
        }
        lens.push(j - i);
        i = j;
    }
    lens
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Io, Purpose, NO_DEP};

    fn ready(device: u8, dir: Op, addr: u64) -> Ready {
        Ready {
            flight: 0,
            index: 0,
            io: Io {
                device,
                dir,
                addr,
                purpose: Purpose::Client,
                after: NO_DEP,
                acks: true,
                part: 0,
            },
            src_payload: 0,
            tag: 0,
        }
    }

    #[test]
    fn runs_break_at_gaps_devices_directions_and_the_limit() {
        let batch = [
            ready(0, Op::Read, 4),
            ready(0, Op::Read, 5),
            ready(0, Op::Read, 6),
            ready(0, Op::Read, 8),  // gap
            ready(0, Op::Write, 9), // direction
            ready(0, Op::Write, 10),
            ready(1, Op::Write, 11), // device
            ready(1, Op::Write, 11), // same address twice: never merged
        ];
        assert_eq!(runs(&batch, 256), vec![3, 1, 2, 1, 1]);
        assert_eq!(runs(&batch, 2), vec![2, 1, 1, 2, 1, 1]);
        assert_eq!(runs(&[], 4), Vec::<usize>::new());
    }

    #[test]
    fn the_key_sorts_reads_before_writes_within_a_device() {
        let mut batch = [
            ready(1, Op::Read, 0),
            ready(0, Op::Write, 1),
            ready(0, Op::Read, 7),
            ready(0, Op::Read, 6),
        ];
        batch.sort_by_key(merge_key);
        let order: Vec<(u8, Op, u64)> = batch
            .iter()
            .map(|r| (r.io.device, r.io.dir, r.io.addr))
            .collect();
        assert_eq!(
            order,
            vec![
                (0, Op::Read, 6),
                (0, Op::Read, 7),
                (0, Op::Write, 1),
                (1, Op::Read, 0)
            ]
        );
    }
}
