//! tiermux block traces.
//!
//! Trace formats ([`arc`]) and a zero-time driver ([`replay`]) that runs
//! any registered policy of `tiermux-core` on a trace through the same
//! dispatcher the simulator and the engine use, and counts where each
//! access was served. Pure replacement (LRU, ARC) has a fast path that
//! needs no dispatcher. [`mrc`] computes the exact LRU hit ratio at every
//! cache size in one pass.
#![warn(missing_docs)]

pub mod arc;
pub mod mrc;
pub mod replay;

pub use arc::{read_trace, Trace};
pub use mrc::{MissRatioCurve, SampledCurve};
