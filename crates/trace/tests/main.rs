//! The crate's integration tests, built as one binary: each file in this
//! directory is a module of it. One binary links once, and its tests run
//! side by side on the machine's cores.

mod arc_oltp;
mod common;
mod formats;
mod hybrid;
mod msr_golden;
mod tica;
mod tica_baselines;
