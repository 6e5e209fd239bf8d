//! The key-value store over every registered policy in virtual time:
//! randomized runs of GETs, SETs, DELs, read-modify-writes and SCANs on
//! volumes small enough that the store's log wraps and its cleaner moves
//! records. The simulator checks every block read (the version checker)
//! and every value a GET or SCAN returns (key, version not older than the
//! last acknowledged SET, length and bytes).

use proptest::prelude::*;
use tiermux_sim::kvconfig::KvSpec;
use tiermux_sim::{run, SimConfig};

#[path = "common/configs.rs"]
mod configs;
use configs::{kv_config, policies};

fn store_spec(value_max: u32, del: f64, scan: f64, rmw: bool) -> KvSpec {
    KvSpec {
        mode: "store".into(),
        index_bytes: 256 << 10,
        max_write_bytes: 64 << 10,
        value_bytes_min: 16,
        value_bytes_max: value_max,
        key_bytes_max: 40,
        del,
        scan,
        scan_length: 8,
        read_modify_write: rmw,
        ..KvSpec::default()
    }
}

/// A store run: as a cache run, over a volume of the cache and 8 MiB.
#[allow(clippy::too_many_arguments)]
fn store_config(
    policy: &str,
    pat: u8,
    write_ratio: f64,
    workers: u32,
    cache_blocks: u64,
    kv: KvSpec,
    keys: u64,
    seed: u64,
) -> SimConfig {
    let mut c = kv_config(
        policy,
        pat,
        write_ratio,
        workers,
        cache_blocks,
        kv,
        keys,
        seed,
    );
    c.volume_blocks = Some(2048 + cache_blocks);
    c.duration_s = 0.08;
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn gets_and_scans_return_the_last_acknowledged_set(
        policy in prop::sample::select(policies()),
        pat in 0u8..5,
        write_ratio in 0.1f64..0.9,
        workers in 1u32..48,
        cache_blocks in 64u64..600,
        value_max in 16u32..2000,
        del in 0.0f64..0.1,
        scan in 0.0f64..0.1,
        rmw in any::<bool>(),
        keys in 200u64..1200,
        seed in 0u64..1_000_000,
    ) {
        let kv = store_spec(value_max, del, scan, rmw);
        let c = store_config(policy, pat, write_ratio, workers, cache_blocks, kv, keys, seed);
        let r = run(&c).map_err(|e| TestCaseError::fail(format!("{policy}: {e}")))?;
        let k = r.kv.as_ref().expect("key-value figures");
        prop_assert!(k.gets > 0 && k.sets > 0, "{policy}: {k:?}");
    }
}

/// Every policy: the log goes round the volume several times, and reads
/// come from the volume and are checked.
#[test]
fn every_policy_runs_the_store_through_several_laps_of_its_log() {
    for policy in policies() {
        let kv = store_spec(1500, 0.02, 0.02, false);
        let mut c = store_config(policy, 1, 0.7, 32, 256, kv, 1000, 7);
        c.duration_s = 0.3;
        let r = run(&c).unwrap_or_else(|e| panic!("{policy}: {e}"));
        let k = r.kv.as_ref().unwrap();
        let written_bytes = r.devices.iter().map(|d| d.written_bytes).sum::<u64>();
        assert!(
            written_bytes > 3 * (2048 << 12) && r.reads_checked > 1000 && k.flash_hits > 1000,
            "{policy}: {written_bytes} bytes written, {} block reads, {k:?}",
            r.reads_checked
        );
        // Only deleted keys miss (until the lookaside SET puts them back).
        assert!(r.hit_ratio > 0.95, "{policy}: {}", r.hit_ratio);
    }
}

/// Scans need a store; a cache refuses them by name.
#[test]
fn a_cache_refuses_scans_by_name() {
    let mut kv = store_spec(100, 0.0, 0.1, false);
    kv.mode = "cache".into();
    let c = store_config("classic", 0, 0.1, 4, 256, kv, 100, 1);
    let e = c.resolve().unwrap_err().to_string();
    assert!(e.starts_with("kv.scan:"), "{e}");
}
