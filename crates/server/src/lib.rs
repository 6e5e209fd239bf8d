//! tiermux NBD server: the engine's [`tiermux_engine::Volume`] behind the
//! NBD protocol.
//!
//! - [`proto`]: the newstyle fixed handshake and request parsing;
//! - [`fuzzing`]: entry points for the fuzz targets in `fuzz/`;
//! - [`handshakes`]: the bounded pool of threads that run handshakes;
//! - [`server`]: listeners and the event loop.
#![warn(missing_docs)]

pub mod fuzzing;
pub mod handshakes;
pub mod proto;
pub mod server;

pub use server::{Server, Shutdown};
