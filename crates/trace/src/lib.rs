//! tiermux block traces.
//!
//! Trace formats ([`formats`], read through [`source`] into
//! [`request::Request`]s), trace statistics ([`info`], and [`arrivals`]:
//! gaps and bursts, fitted as the generator's parameters), and a zero-time
//! driver ([`replay`]) that runs any registered policy of `tiermux-core`
//! on a trace through the same dispatcher the simulator and the engine
//! use, and counts where each access was served. Pure replacement (LRU,
//! ARC) has a fast path that needs no dispatcher. [`mrc`] computes the
//! exact LRU hit ratio at every cache size in one pass. [`spec`] names a
//! trace as files do (a preset or a file) and [`timed`] lays one out for
//! the timed simulator.
#![warn(missing_docs)]

pub mod arrivals;
pub mod formats;
pub mod fuzzing;
pub mod info;
pub mod mrc;
pub mod permute;
pub mod replay;
pub mod request;
pub mod source;
pub mod spec;
pub mod synth;
pub mod tica_table2;
pub mod timed;

pub use formats::{read, read_pages, Format};
pub use mrc::{MissRatioCurve, SampledCurve};
pub use request::{BlockTrace, PageRun, PageTrace, Request};
pub use spec::TraceSource;
pub use timed::{TimedRequest, TimedTrace};
