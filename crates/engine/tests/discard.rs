//! Discards on real files through io_uring: the space a volume stops using
//! on a `discard = true` device is punched out of its file once a mark
//! makes the release durable, and the data the volume still names reads
//! back. (The power-cut test checks, over every policy, that no discard
//! ever hits space in use.)

use crate::common;

use std::os::unix::fs::MetadataExt;

use common::{check_reads_after_trim, config, data_dir, stamp, Backend, Harness, BS};
use tiermux_engine::buf::AlignedBuf;
use tiermux_engine::Request;

/// Sectors (512 bytes) the file at `path` has allocated.
fn allocated_sectors(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks()
}

/// Writes blocks 0..32 (dirty in the cache), trims blocks 8..24, flushes,
/// and returns the volume's discarded blocks and the cache file's
/// allocated sectors before and after the flush.
fn write_trim_flush(tag: &str, discard: bool) -> (u64, u64, u64) {
    let dir = data_dir(tag, false);
    let mut cfg = config(&dir, "classic", "write_mode = \"wb\"");
    cfg.devices[0].discard = discard;
    let fast = dir.join("fast.img");
    let mut h = Harness::open(&cfg, Backend::Uring);
    for b in 0..32u64 {
        let data = AlignedBuf::from_slice(&stamp(b as usize, 1));
        let offset = b * BS as u64;
        h.submit(
            b,
            Request::Write {
                offset,
                data,
                fua: false,
            },
        );
    }
    h.idle();
    let (offset, len) = (8 * BS as u64, 16 * BS as u32);
    h.submit(100, Request::Trim { offset, len });
    h.idle();
    let before = allocated_sectors(&fast);
    h.submit(101, Request::Flush);
    h.idle();
    let after = allocated_sectors(&fast);
    let errors: Vec<_> = h.client.done.iter().filter(|d| d.error != 0).collect();
    assert!(errors.is_empty(), "requests failed: {errors:?}");
    h.client.done.clear();
    let discarded = h.vol().stats().discarded_blocks;
    check_reads_after_trim(&mut h, 32, 8..24);
    h.close();
    std::fs::remove_dir_all(&dir).ok();
    (discarded, before, after)
}

#[test]
fn trimmed_copies_are_discarded_from_the_cache_file_after_a_flush() {
    let (discarded, before, after) = write_trim_flush("discard-on", true);
    assert_eq!(discarded, 16, "the 16 trimmed blocks' cache slots");
    let sectors = 16 * BS as u64 / 512;
    assert!(
        before >= after + sectors,
        "the cache file's allocation went from {before} to {after} sectors"
    );
}

#[test]
fn without_discard_the_cache_file_keeps_its_space() {
    let (discarded, before, after) = write_trim_flush("discard-off", false);
    assert_eq!(discarded, 0);
    assert_eq!(before, after);
}
