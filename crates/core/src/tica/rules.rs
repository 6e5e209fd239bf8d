//! What a baseline decides inside the three-level machine: the caches
//! the TICA paper compares against (uCache, S-RAC) differ from each other
//! only in which DRAM victims enter the SSDs, which client writes are
//! cached at all, and whether an SSD victim gets a second round. Each
//! baseline's [`Rules`] live in its own policy file.

use crate::types::Op;

/// A baseline's decisions; the machine does everything else (slots,
/// copies, flushes, failures).
pub trait Rules: Send + std::fmt::Debug {
    /// Sees every client access of `block`, before the machine decides
    /// how to serve it.
    fn note(&mut self, block: u64, op: Op);

    /// Whether a clean page leaving DRAM is copied to the SSDs (else it is
    /// dropped). `reused`: the page was read again while in DRAM.
    fn admit_victim(&mut self, block: u64, reused: bool) -> bool;

    /// Whether a client write of `block` is cached on the SSDs (else it
    /// goes home, and older copies are dropped).
    fn cache_write(&mut self, block: u64) -> bool {
        let _ = block;
        true
    }

    /// Whether an SSD victim that was read on the SSDs since it arrived
    /// goes back to the most recent end once, instead of leaving.
    fn readds(&self) -> bool {
        false
    }

    /// Counters for reports and time series, as (name, value) pairs.
    fn state(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}
