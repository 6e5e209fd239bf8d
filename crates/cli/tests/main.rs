//! The crate's integration tests, built as one binary: each file in this
//! directory is a module of it. One binary links once, and its tests run
//! side by side on the machine's cores.

mod common;
mod control;
mod examples;
mod kv;
mod kv_bench;
mod kv_store;
mod metrics;
mod nbd;
mod nbd_large;
mod nbd_memory;
mod nbd_read_ahead;
mod profiles;
mod report;
mod sim_memory;
mod test_files;
mod trace_info;
mod trace_sweep;
