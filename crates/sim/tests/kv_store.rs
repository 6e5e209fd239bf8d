//! The key-value store over every registered policy in virtual time:
//! randomized runs of GETs, SETs, DELs, read-modify-writes and SCANs on
//! volumes small enough that the store's log wraps and its cleaner moves
//! records. The simulator checks every block read (the version checker)
//! and every value a GET or SCAN returns (key, version not older than the
//! last acknowledged SET, length and bytes).

use proptest::prelude::*;
use tiermux_sim::kvconfig::KvSpec;
use tiermux_sim::{run, SimConfig};

use crate::common::configs;
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

/// A store too small for its keys is refused before the run, with the
/// volume they need; that volume is enough.
#[test]
fn a_store_too_small_for_its_keys_is_refused_with_the_size_it_needs() {
    let mut kv = store_spec(2000, 0.0, 0.0, false);
    kv.index_bytes = 1 << 20;
    let mut c = store_config("classic", 0, 0.1, 4, 256, kv, 20_000, 1);
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.starts_with("volume_blocks:") && e.contains("give it at least"),
        "{e}"
    );
    let mib: u64 = e
        .rsplit("at least ")
        .next()
        .unwrap()
        .trim_end_matches(" MiB")
        .parse()
        .unwrap();
    c.volume_blocks = Some(mib << 8);
    c.resolve().unwrap_or_else(|e| panic!("{mib} MiB: {e}"));
    c.volume_blocks = Some((mib - 1) << 8);
    assert!(c.resolve().is_err(), "{} MiB is enough too", mib - 1);
}

/// Inserts fill a store to the brim: the SETs it refuses are counted, the
/// run goes on, and every key keeps its acknowledged value.
#[test]
fn a_full_store_refuses_sets_and_keeps_every_acknowledged_value() {
    let mut kv = store_spec(1000, 0.0, 0.0, false);
    kv.lone_set = 0.3;
    let mut c = store_config("nhc", 0, 0.3, 16, 256, kv, 1000, 3);
    c.volume_blocks = Some(1024);
    c.duration_s = 0.3;
    let r = run(&c).unwrap();
    let k = r.kv.unwrap();
    assert!(k.refused > 100 && k.sets > 100 && k.gets > 1000, "{k:?}");
}

/// A store whose key index cannot hold its keys is refused with the
/// index they need, named as the field to change; with that index it
/// runs.
#[test]
fn a_store_index_too_small_for_its_keys_is_refused_with_the_size_it_needs() {
    let kv = store_spec(1000, 0.0, 0.0, false);
    let mut c = store_config("classic", 0, 0.0, 16, 400, kv, 20_000, 7);
    c.volume_blocks = Some(8192);
    let e = c.resolve().unwrap_err().to_string();
    assert!(e.starts_with("kv.index_bytes:"), "{e}");
    let need: u64 = e
        .rsplit("at least ")
        .next()
        .unwrap()
        .trim_end_matches(')')
        .parse()
        .unwrap();
    // 20,000 keys of 28 bytes on average (16 to 40), an entry of 14
    // bytes and the key each.
    assert_eq!(need, (20_000 * 42u64).div_ceil(4096) * 4096, "{e}");
    c.kv.as_mut().unwrap().index_bytes = need;
    let r = run(&c).unwrap_or_else(|e| panic!("{e}"));
    let k = r.kv.unwrap();
    assert!(k.gets > 1000);
    assert_eq!((k.prefill_refused, r.hit_ratio), (0, 1.0));
}

/// A store answers a GET of a key it never held with nothing, and does
/// not SET it (lookaside is a cache's); a hot spot that moves to keys
/// never set then misses.
#[test]
fn a_store_does_not_set_the_keys_its_gets_miss() {
    let kv = store_spec(500, 0.0, 0.0, false);
    let mut c = store_config("classic", 0, 0.0, 8, 256, kv, 1000, 5);
    c.workload.shift_at_s = Some(0.04);
    let r = run(&c).unwrap();
    let k = r.kv.unwrap();
    assert_eq!(k.sets, 0, "{k:?}");
    assert!(r.hit_ratio > 0.0 && r.hit_ratio < 0.5, "{}", r.hit_ratio);
    // The same shift reversed keeps to the keys the store holds.
    c.workload.shift_reverses = true;
    let r = run(&c).unwrap();
    assert_eq!(r.hit_ratio, 1.0);
}
