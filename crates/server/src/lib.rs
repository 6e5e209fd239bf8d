//! tiermux network front ends: the engine's [`tiermux_engine::Volume`]
//! behind the NBD protocol, and the key-value layer's cache on a volume
//! behind the Redis protocol.
//!
//! - [`proto`]: the newstyle fixed handshake and request parsing;
//! - [`fuzzing`], [`kv_fuzzing`]: entry points for the fuzz targets in
//!   `fuzz/` (the NBD server, the key-value server);
//! - [`handshakes`]: the bounded pool of threads that run handshakes;
//! - [`server`]: the NBD server as the event loop's front end;
//!   [`read_ahead`]: its reading ahead of sequential reads;
//! - [`listener`]: accept threads, and how many connections a server
//!   admits; [`sock`]: client sockets and connection buffers;
//! - [`metrics`]: the Prometheus endpoint; [`control`]: the control
//!   socket (`tiermux ctl`);
//! - [`resp`]: the Redis protocol; [`kv`]: the key-value server.
#![warn(missing_docs)]

pub mod control;
pub mod fuzzing;
pub mod handshakes;
pub mod kv;
mod kv_commands;
pub mod kv_fuzzing;
mod kv_scan;
pub mod listener;
pub mod metrics;
pub mod proto;
pub mod read_ahead;
pub mod resp;
pub mod resp_client;
pub mod server;
pub mod sock;

pub use server::{Server, Shutdown};
