//! The crate's integration tests, built as one binary: each file in this
//! directory is a module of it. One binary links once, and its tests run
//! side by side on the machine's cores.

mod array;
mod common;
mod consistency;
mod device_failure;
mod fig7_grid;
mod kv_cache;
mod kv_flash_size;
mod kv_prefill_share;
mod kv_store;
mod log_discards;
mod merged_requests;
mod model;
mod most_bursts;
mod most_cleaning;
mod most_figures;
mod most_host_time;
mod most_subpages;
mod most_swaps;
mod nhc_write_back;
mod orthus;
mod orthus_figures;
mod sample_load;
mod segment_move;
mod trace_run;
mod wear;
mod write_back;
