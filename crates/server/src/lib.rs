//! tiermux NBD server: the engine's [`tiermux_engine::Volume`] behind the
//! NBD protocol.
//!
//! - [`proto`]: the newstyle fixed handshake and request parsing.
#![warn(missing_docs)]

pub mod proto;
