//! tiermux simulator.
//!
//! A deterministic discrete-event simulator that runs the policies of
//! `tiermux-core` over the calibrated device models of `tiermux-device`,
//! clients and workloads ([`workload`]), and measures throughput, latency,
//! hit ratio and per-device load ([`sim`]). [`model`] holds the Orthus
//! paper's analytical model for validation; [`experiment`] runs sweeps
//! described in TOML files.
#![warn(missing_docs)]

pub mod cachebench;
pub mod config;
pub mod energy;
pub mod experiment;
pub mod failure;
pub mod kvconfig;
pub mod kvworkloads;
pub mod memory;
pub mod presets;
pub mod sim;
pub mod spikes;
pub mod trace_run;
pub mod wear;
pub mod workload;

pub use config::{ClientSpec, ConfigError, SimConfig};
pub use sim::{run, RunResult, SimError};
