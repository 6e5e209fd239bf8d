//! tiermux's key-value layer. The machines here sit above a tiermux volume
//! and, like the core's policies, do no I/O and read no clock: they take
//! commands and storage completions and give storage requests and replies
//! (`io.rs`). So one machine runs in the simulator's virtual time and on
//! the engine's real volume.
//!
//! - **Cache mode** (`cache.rs`): CacheLib's shape, as Cerberus uses it: a
//!   DRAM cache (`dram.rs`), a Small Object Cache of 4 KiB buckets
//!   (`soc.rs`) and a Large Object Cache of logged regions with a DRAM
//!   index (`loc.rs`). Items have one layout on the volume (`item.rs`).
//! - **Store mode** (`store/`): Orthus-KV's Wisckey shape: values in a log
//!   on the volume, keys in an index in DRAM, checkpointed and recovered.
//! - `machine.rs` puts either behind one face for the drivers.
//! - `mem.rs` is a driver over a byte vector that completes requests in a
//!   seeded random order and can fail them, for tests.

pub mod cache;
pub mod command;
pub mod dram;
pub mod io;
pub mod item;
pub mod loc;
pub mod machine;
pub mod mem;
pub mod soc;
pub mod store;

pub use cache::{Cache, CacheConfig, CacheStats};
pub use command::{Command, Reply};
pub use io::{IoId, IoKind, IoRequest, BLOCK_BYTES};
pub use loc::RegionEviction;
pub use machine::{Machine, MachineConfig, Summary};
pub use store::{Store, StoreConfig, StoreStats};

/// The hash the layer places keys by (XXH3, 64 bits; fixed, so placement
/// is the same in every run).
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}
