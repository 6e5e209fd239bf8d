//! Hints to the CPU to start loading memory that will be read soon.
//!
//! A simulated volume of a million blocks keeps per-block state (the
//! placement map, replacement nodes, the version checker) in arrays far
//! larger than the CPU's caches, and each request touches several of them
//! at random places. A driver that knows its next requests (the simulator's
//! generated workload) hints their state ahead, so that the memory accesses
//! of several requests overlap instead of following one another. Hints
//! never change state or results.

/// How far ahead of its use a hint is given, so that state reached through
/// other state can be hinted once the first load has arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The first loads: state addressed by the block alone or by its map
    /// entry (for example a cache slot's replacement node).
    First,
    /// The loads that follow pointers in state hinted at [`Stage::First`]
    /// (for example the neighbours of a replacement list node).
    Second,
}

/// Starts loading the cache line that holds `value`.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which is part of the x86_64
    // baseline and enabled for every x86_64 target. A prefetch is a hint:
    // it reads and writes no memory architecturally and never faults, and
    // the pointer comes from a live reference in any case.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Starts loading `items[index]`, when the index is in range.
#[inline(always)]
pub fn prefetch_at<T>(items: &[T], index: usize) {
    if let Some(v) = items.get(index) {
        prefetch(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_change_no_value_and_ignore_indices_out_of_range() {
        let items: Vec<u64> = (0..100_000).map(|i| i * 3).collect();
        for i in (0..items.len() + 1000).step_by(97) {
            prefetch_at(&items, i);
        }
        prefetch(&items);
        assert!(items.iter().enumerate().all(|(i, &v)| v == i as u64 * 3));
    }
}
