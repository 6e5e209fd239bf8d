//! Helpers shared by the test modules.

pub mod cli;
pub mod kv_server;
pub mod nbd_served;
pub mod nbd_wire;

/// A number no other call in this process returns: the test directories
/// carry it, so that tests of different files, which share the process,
/// never share a directory.
pub fn next_dir_number() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
