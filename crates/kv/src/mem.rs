//! A storage driver over a byte vector, for tests: it holds the requests a
//! machine issues and completes them in a seeded random order, performing
//! each when it completes, and fails a chosen share of them. It asserts
//! the machines' own rule that no read overlaps a write in flight.

use tiermux_core::rng::Rng;

use crate::io::{IoId, IoKind, IoRequest};

/// What a discarded byte reads as.
const TRIMMED_FILLER: u8 = 0xdb;

/// A finished request: its id and the bytes read (empty for a write) or an errno.
pub type MemCompletion = (IoId, Result<Vec<u8>, i32>);

/// An in-memory volume with requests in flight.
pub struct MemStorage {
    bytes: Vec<u8>,
    in_flight: Vec<IoRequest>,
    rng: Rng,
    fail_per_million: u32,
    /// Requests failed so far.
    pub failed: u64,
}

/// The errno of an injected failure.
pub const EIO: i32 = 5;

impl MemStorage {
    /// A zeroed volume of `len_bytes`; `seed` picks the completion order.
    pub fn new(len_bytes: u64, seed: u64) -> MemStorage {
        MemStorage {
            bytes: vec![0; len_bytes as usize],
            in_flight: Vec::new(),
            rng: Rng::new(seed),
            fail_per_million: 0,
            failed: 0,
        }
    }

    /// Fails this share of requests (per million) from now on; a failed
    /// write may have written any prefix of its blocks.
    pub fn fail_per_million(&mut self, n: u32) {
        self.fail_per_million = n;
    }

    /// The share of requests failed (per million).
    pub fn fail_per_million_now(&self) -> u32 {
        self.fail_per_million
    }

    /// Takes a request.
    pub fn submit(&mut self, req: IoRequest) {
        let end = req.offset + req.len_bytes();
        assert!(
            end <= self.bytes.len() as u64,
            "request past the volume's end: {req:?}"
        );
        for other in &self.in_flight {
            let o_end = other.offset + other.len_bytes();
            let overlap = req.offset < o_end && other.offset < end;
            let changes = |k: &IoKind| !matches!(k, IoKind::Read { .. });
            assert!(
                !(overlap && (changes(&req.kind) || changes(&other.kind))),
                "requests {} and {} overlap and one writes or discards",
                req.id,
                other.id
            );
        }
        self.in_flight.push(req);
    }

    /// Ends the run as `kill -9` would: every request in flight is
    /// dropped, and each write in flight lands on a random subset of its
    /// blocks (the kernel may have taken any of them).
    pub fn crash(&mut self) {
        let mut rng = self.rng.fork(7);
        self.crash_landing(|_| rng.below(2) == 0);
    }

    /// Ends the run as a crash would, landing exactly the blocks of writes
    /// in flight for which `land` (given the block's volume offset) says so.
    pub fn crash_landing(&mut self, land: impl FnMut(u64) -> bool) {
        self.fail_landing(land);
    }

    /// Fails every request in flight, landing exactly the blocks of writes
    /// for which `land` (given the block's volume offset) says so; returns
    /// the failures for the machine.
    pub fn fail_landing(&mut self, mut land: impl FnMut(u64) -> bool) -> Vec<MemCompletion> {
        let mut failed = Vec::new();
        for req in std::mem::take(&mut self.in_flight) {
            failed.push((req.id, Err(EIO)));
            if let IoKind::Write { data, .. } = req.kind {
                let block = crate::BLOCK_BYTES as usize;
                for (i, chunk) in data.chunks(block).enumerate() {
                    if land(req.offset + (i * block) as u64) {
                        let at = req.offset as usize + i * block;
                        self.bytes[at..at + chunk.len()].copy_from_slice(chunk);
                    }
                }
            }
        }
        self.failed += failed.len() as u64;
        failed
    }

    /// The volume's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Completes one request in flight, chosen at random.
    pub fn complete_one(&mut self) -> Option<MemCompletion> {
        if self.in_flight.is_empty() {
            return None;
        }
        let i = self.rng.below(self.in_flight.len() as u64) as usize;
        let req = self.in_flight.swap_remove(i);
        let fail =
            self.fail_per_million > 0 && self.rng.below(1_000_000) < self.fail_per_million as u64;
        let at = req.offset as usize;
        let result = match req.kind {
            IoKind::Read { len_bytes } if !fail => {
                Ok(self.bytes[at..at + len_bytes as usize].to_vec())
            }
            IoKind::Write { data, .. } => {
                let blocks = data.len() / crate::BLOCK_BYTES as usize;
                let done = if fail {
                    self.rng.below(blocks as u64 + 1) as usize
                } else {
                    blocks
                };
                let n = done * crate::BLOCK_BYTES as usize;
                self.bytes[at..at + n].copy_from_slice(&data[..n]);
                if fail {
                    Err(EIO)
                } else {
                    Ok(Vec::new())
                }
            }
            IoKind::Trim { len_bytes } => {
                // A discarded range reads as anything: here, a filler no
                // item decodes from.
                self.bytes[at..at + len_bytes as usize].fill(TRIMMED_FILLER);
                if fail {
                    Err(EIO)
                } else {
                    Ok(Vec::new())
                }
            }
            IoKind::Read { .. } => Err(EIO),
        };
        self.failed += result.is_err() as u64;
        Some((req.id, result))
    }
}
