//! The crate's integration tests, built as one binary: each file in this
//! directory is a module of it. One binary links once, and its tests run
//! side by side on the machine's cores.

mod common;
mod first_write;
mod idle_devices;
mod most_migration;
mod most_mirror_growth;
mod tracking;
mod tracking_world;
