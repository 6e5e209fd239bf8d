//! `kv.flash_bytes`: a key-value cache whose flash caches use only the
//! start of the volume (CacheLib's `nvmCacheSizeMB` below the device's
//! size) leaves the rest free for the hierarchy policy. Checked through
//! MOST's free capacity, which counts every segment the cache has written
//! and every second copy of the mirrored class: with the whole volume
//! the cache's prefill writes every segment; with a quarter of it, at
//! least the untouched three quarters less the mirrored class's maximum
//! (a fifth of the volume) stay free.

use tiermux_sim::kvconfig::KvSpec;
use tiermux_sim::run;
use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{ClientSpec, SimConfig};

const BLOCK_BYTES: u64 = 4096;
const SEGMENT_BLOCKS: u64 = 512;
const VOLUME_SEGMENTS: u64 = 40;

fn most_kv_run(flash_bytes: u64) -> tiermux_sim::RunResult {
    let volume_blocks = VOLUME_SEGMENTS * SEGMENT_BLOCKS;
    let kv = KvSpec {
        flash_bytes,
        dram_bytes: 256 << 10,
        soc_share: 0.25,
        region_bytes: 1 << 20,
        value_bytes_min: 1000,
        value_bytes_max: 6000,
        ..KvSpec::default()
    };
    let c = SimConfig {
        devices: vec!["optane-p4800x".into(), "nvme-pcie3".into()],
        policy: "most".into(),
        cache_blocks: volume_blocks / 4,
        volume_blocks: Some(volume_blocks),
        workload: WorkloadSpec {
            pattern: Pattern::Zipf { theta: 0.9 },
            // Keys of about 3.5 KB: several times the volume.
            working_set_blocks: Some(volume_blocks * 2),
            write_ratio: 0.2,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(32),
            ..ClientSpec::default()
        },
        duration_s: 0.3,
        warmup_s: 0.0,
        seed: 7,
        kv: Some(kv),
        ..SimConfig::default()
    };
    run(&c).unwrap()
}

fn free_segments(r: &tiermux_sim::RunResult) -> f64 {
    r.controller
        .iter()
        .find(|(k, _)| k == "free_segments")
        .expect("MOST reports its free capacity")
        .1
}

#[test]
fn a_flash_cache_smaller_than_the_volume_leaves_the_rest_free() {
    let whole = most_kv_run(0);
    let quarter_bytes = VOLUME_SEGMENTS / 4 * SEGMENT_BLOCKS * BLOCK_BYTES;
    let quarter = most_kv_run(quarter_bytes);
    let mirror_max = (VOLUME_SEGMENTS / 5) as f64;
    let untouched = (VOLUME_SEGMENTS - VOLUME_SEGMENTS / 4) as f64;
    assert!(
        free_segments(&whole) <= mirror_max,
        "the whole volume as cache: {} segments free",
        free_segments(&whole)
    );
    assert!(
        free_segments(&quarter) >= untouched - mirror_max,
        "a quarter of the volume as cache: {} segments free, expected at least {}",
        free_segments(&quarter),
        untouched - mirror_max
    );
    assert!(whole.kv.as_ref().unwrap().gets > 0 && quarter.kv.as_ref().unwrap().gets > 0);
}

#[test]
fn a_flash_size_the_volume_cannot_hold_is_refused_by_name() {
    for (flash_bytes, store) in [(1u64 << 40, false), (4097, false), (1 << 20, true)] {
        let mut c = SimConfig {
            devices: vec!["optane-p4800x".into(), "nvme-pcie3".into()],
            policy: "hemem".into(),
            cache_blocks: 1024,
            volume_blocks: Some(8192),
            workload: WorkloadSpec {
                working_set_blocks: Some(1000),
                ..WorkloadSpec::default()
            },
            kv: Some(KvSpec {
                flash_bytes,
                ..KvSpec::default()
            }),
            ..SimConfig::default()
        };
        if store {
            c.kv.as_mut().unwrap().mode = "store".into();
        }
        let e = c.resolve().unwrap_err().to_string();
        assert!(e.starts_with("kv.flash_bytes:"), "{flash_bytes}: {e}");
    }
}
