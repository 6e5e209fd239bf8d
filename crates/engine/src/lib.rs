//! tiermux engine: the policy core on real devices.
//!
//! The engine runs the same [`tiermux_core`] policies the simulator runs,
//! in wall-clock time, on files and block devices:
//! - [`reactor`]: io_uring (or a thread-pool fallback, or virtual time for
//!   tests) under one event loop, and the power-loss model that wraps a
//!   real reactor or runs inside the virtual one;
//! - [`runtime`]: that event loop, which runs a volume for a front end (the
//!   NBD server, or a test);
//! - [`buf`]: aligned buffers for O_DIRECT;
//! - [`device`]: files and block devices, and the layers around them;
//! - [`emulate`]: those layers: emulated timing from a device profile;
//! - [`faults`]: injected device errors (a layer, and the spec the
//!   simulated reactor's machine shares);
//! - [`journal`]: the crash-safe placement map (journal and checkpoints);
//! - [`config`]: volume configuration files;
//! - [`volume`]: the block address space served by a policy.
#![warn(missing_docs)]

pub mod buf;
pub mod config;
pub mod device;
pub mod emulate;
pub mod faults;
pub mod journal;
pub mod reactor;
pub mod runtime;
pub mod slab;
pub mod volume;

pub use config::VolumeConfig;
pub use runtime::{Flow, Frontend, Io, Runtime};
pub use volume::{Done, Request, Volume};
