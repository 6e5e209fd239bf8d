//! The key-value cache over every registered policy in virtual time:
//! randomized runs with small volumes, so that DRAM, the small-object
//! buckets and the large-object regions all evict, and with SETs, DELs,
//! read-modify-writes and keys never set. The simulator checks every block
//! read (the version checker) and every value a GET returns (key, version
//! not older than the last acknowledged SET, length and bytes).

use proptest::prelude::*;
use tiermux_sim::kvconfig::KvSpec;
use tiermux_sim::run;

use crate::common::configs;
use configs::{kv_config, policies};

fn spec(soc_share: f64, value_max: u32, dram_kib: u64, mix: [f64; 3], rmw: bool) -> KvSpec {
    queued(soc_share, value_max, dram_kib, mix, rmw, 256 << 20)
}

fn queued(
    soc_share: f64,
    value_max: u32,
    dram_kib: u64,
    mix: [f64; 3],
    rmw: bool,
    insert_queue_bytes: u64,
) -> KvSpec {
    KvSpec {
        dram_bytes: dram_kib << 10,
        soc_share,
        region_bytes: 64 << 10,
        region_buffers: 2,
        value_bytes_min: 16,
        value_bytes_max: value_max,
        key_bytes_max: 40,
        lone_get: mix[0],
        lone_set: mix[1],
        del: mix[2],
        read_modify_write: rmw,
        backing_latency_us: 30.0,
        insert_queue_bytes,
        ..KvSpec::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn gets_return_the_last_acknowledged_set(
        policy in prop::sample::select(policies()),
        pat in 0u8..5,
        write_ratio in 0.0f64..0.6,
        workers in 1u32..64,
        cache_blocks in 64u64..600,
        soc_share in prop::sample::select(vec![0.0, 0.3, 0.7, 1.0]),
        value_max in 16u32..9000,
        dram_kib in 16u64..512,
        lone_get in 0.0f64..0.1,
        lone_set in 0.0f64..0.1,
        del in 0.0f64..0.1,
        rmw in any::<bool>(),
        keys in 500u64..30_000,
        seed in 0u64..1_000_000,
        queue in prop::sample::select(vec![0u64, 16 << 10, 256 << 20]),
    ) {
        let value_max = if soc_share == 1.0 { value_max.min(1900) } else { value_max };
        let kv = queued(soc_share, value_max, dram_kib, [lone_get, lone_set, del], rmw, queue);
        let c = kv_config(policy, pat, write_ratio, workers, cache_blocks, kv, keys, seed);
        let r = run(&c).map_err(|e| TestCaseError::fail(format!("{policy}: {e}")))?;
        let k = r.kv.as_ref().expect("key-value figures");
        prop_assert!(k.gets > 0, "{policy}: no GETs");
        // Flash hits may all come from region buffers; the check counts
        // only when the volume was read.
        prop_assert!(r.reads_checked > 0 || k.volume_reads == 0);
        // A queue larger than every value set drops nothing.
        prop_assert!(queue < 256 << 20 || k.dropped == 0, "{} dropped", k.dropped);
    }
}

/// Every policy, with both flash caches evicting and all command kinds:
/// flash serves hits, and the volume's reads are checked.
#[test]
fn every_policy_serves_flash_hits() {
    for policy in policies() {
        let kv = spec(0.5, 6000, 64, [0.02, 0.02, 0.02], false);
        let c = kv_config(policy, 1, 0.2, 32, 256, kv, 20_000, 7);
        let r = run(&c).unwrap_or_else(|e| panic!("{policy}: {e}"));
        let k = r.kv.as_ref().unwrap();
        assert!(
            k.flash_hits > 100 && k.volume_reads > 100 && r.reads_checked >= k.volume_reads,
            "{policy}: {} flash hits, {} volume reads, {} block reads",
            k.flash_hits,
            k.volume_reads,
            r.reads_checked
        );
        assert!(
            r.hit_ratio > 0.0 && r.hit_ratio < 1.0,
            "{policy}: {}",
            r.hit_ratio
        );
    }
}

/// The same seed gives the same run.
#[test]
fn a_key_value_run_is_deterministic() {
    let kv = spec(0.4, 5000, 128, [0.01, 0.01, 0.01], true);
    let c = kv_config("most", 2, 0.3, 16, 300, kv, 10_000, 3);
    assert_eq!(run(&c).unwrap(), run(&c).unwrap());
}

/// A lookaside miss costs the backing store's latency; with every key
/// cached in DRAM and no misses, GETs take only the command's CPU time.
#[test]
fn lookaside_misses_wait_for_the_backing_store() {
    let mut kv = spec(0.5, 64, 1 << 14, [0.0, 0.0, 0.0], false);
    kv.op_cpu_us = 3.0;
    let c = kv_config("classic", 0, 0.0, 4, 256, kv.clone(), 1000, 1);
    let all_dram = run(&c).unwrap();
    assert_eq!(all_dram.hit_ratio, 1.0);
    assert!(
        (all_dram.mean_latency_us - 3.0).abs() < 0.01,
        "{}",
        all_dram.mean_latency_us
    );
    kv.prefill = false;
    kv.backing_latency_us = 500.0;
    let c = kv_config("classic", 0, 0.0, 4, 256, kv, 1000, 1);
    let cold = run(&c).unwrap();
    assert!(cold.hit_ratio < 1.0);
    // Each miss holds its client for the backing store's 500 µs.
    let misses = cold.kv.as_ref().unwrap().gets as f64 * (1.0 - cold.hit_ratio);
    assert!(misses > 0.0);
    assert!(cold.throughput_ops_per_s < all_dram.throughput_ops_per_s / 10.0);
}

/// Commands' CPU time on a limited number of cores: four clients whose
/// GETs all hit DRAM after 3 µs of CPU each run 4 / 3 µs commands a
/// second on a core each, and queue for one core (each then waits for the
/// other three: 12 µs), so a quarter of that.
#[test]
fn commands_share_the_cpu_cores() {
    let mut kv = spec(0.5, 64, 1 << 14, [0.0, 0.0, 0.0], false);
    kv.op_cpu_us = 3.0;
    let own_cores = run(&kv_config("classic", 0, 0.0, 4, 256, kv.clone(), 1000, 1)).unwrap();
    kv.cpu_cores = Some(1);
    let one_core = run(&kv_config("classic", 0, 0.0, 4, 256, kv.clone(), 1000, 1)).unwrap();
    assert_eq!(one_core.hit_ratio, 1.0);
    let rate = |r: &tiermux_sim::RunResult| r.throughput_ops_per_s;
    assert!(
        (rate(&own_cores) / (4.0 / 3e-6) - 1.0).abs() < 0.01,
        "{}",
        rate(&own_cores)
    );
    assert!(
        (rate(&one_core) / (1.0 / 3e-6) - 1.0).abs() < 0.01,
        "{}",
        rate(&one_core)
    );
    assert!(
        (one_core.mean_latency_us - 12.0).abs() < 0.05,
        "{}",
        one_core.mean_latency_us
    );
    kv.cpu_cores = Some(0);
    let e = kv_config("classic", 0, 0.0, 4, 256, kv, 1000, 1)
        .resolve()
        .unwrap_err()
        .to_string();
    assert!(e.contains("cpu_cores"), "{e}");
}

/// Sizes the cache cannot hold and a missing volume size are refused by name.
#[test]
fn bad_key_value_configs_name_the_field() {
    let mut c = kv_config(
        "classic",
        0,
        0.0,
        4,
        256,
        spec(0.5, 64, 64, [0.0; 3], false),
        100,
        1,
    );
    c.volume_blocks = None;
    let e = c.resolve().unwrap_err().to_string();
    assert!(e.starts_with("volume_blocks:"), "{e}");
    let c = kv_config(
        "classic",
        0,
        0.0,
        4,
        256,
        spec(0.5, 70_000, 64, [0.0; 3], false),
        100,
        1,
    );
    let e = c.resolve().unwrap_err().to_string();
    assert!(e.starts_with("kv.value_bytes_max:"), "{e}");
    let c = kv_config(
        "classic",
        0,
        0.0,
        4,
        256,
        spec(0.5, 64, 64, [0.6, 0.6, 0.0], false),
        100,
        1,
    );
    let e = c.resolve().unwrap_err().to_string();
    assert!(e.starts_with("kv.lone_get:"), "{e}");
    let mut kv = spec(0.5, 64, 64, [0.0; 3], false);
    kv.op_cpu_us = 0.0;
    let e = kv_config("classic", 0, 0.0, 4, 256, kv, 100, 1)
        .resolve()
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("kv.op_cpu_us:"), "{e}");
    let mut kv = spec(0.5, 64, 64, [0.0; 3], false);
    kv.region_eviction = "lfu".into();
    let e = kv_config("classic", 0, 0.0, 4, 256, kv, 100, 1)
        .resolve()
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("kv.region_eviction: 'lfu'"), "{e}");
}

/// A small volume whose large-object cache keeps every item in its region
/// buffers: GETs hit flash without reading the volume, so no block read is
/// checked, and none is expected.
#[test]
fn flash_hits_from_region_buffers_read_no_block() {
    let kv = spec(0.0, 372, 90, [0.0598, 0.0109, 0.0], false);
    let c = kv_config("tica-ef", 3, 0.3194, 41, 64, kv, 500, 0);
    let r = run(&c).unwrap();
    let k = r.kv.as_ref().unwrap();
    assert!(k.flash_hits > 1000, "{k:?}");
    assert_eq!((k.volume_reads, r.reads_checked), (0, 0), "{k:?}");
}

/// A key-value run keeps every byte of its volume: one whose bytes alone
/// fill this machine's memory is refused before it starts, by name.
#[test]
fn a_volume_whose_bytes_exceed_the_memory_is_refused_by_name() {
    let memory_bytes = tiermux_sim::memory::machine_memory_bytes().expect("/proc/meminfo");
    let kv = spec(0.3, 3000, 64, [0.0, 0.0, 0.0], false);
    let mut c = kv_config("classic", 0, 0.1, 4, 256, kv, 1000, 1);
    c.volume_blocks = Some(memory_bytes / 4096);
    let e = c.resolve().unwrap_err().to_string();
    assert!(
        e.starts_with("volume_blocks:") && e.contains("use a smaller volume"),
        "{e}"
    );
    // The same volume for a block run keeps its per-block state alone.
    c.kv = None;
    c.resolve().unwrap_or_else(|e| panic!("{e}"));
}

/// MOST Table 4's mixes as CacheBench generates them: keys by the
/// config's popularity and values by its size table. Every value a GET
/// returns is checked against the size its SET drew; values of C and D
/// reach hundreds of KiB. Unknown mixes are refused by field.
#[test]
fn cachebench_mixes_draw_keys_and_values_from_their_tables() {
    use tiermux_sim::workload::Pattern;
    for mix in tiermux_sim::cachebench::MIXES {
        let mut kv = spec(0.3, 64, 256, [0.01, 0.01, 0.0], false);
        kv.value_sizes = Some(mix.into());
        kv.region_bytes = 1 << 20;
        let mut c = kv_config("hemem", 0, 0.1, 16, 2048, kv, 3000, 5);
        c.workload.pattern = Pattern::Cachebench { mix: mix.into() };
        c.volume_blocks = Some(16_384);
        let r = run(&c).unwrap_or_else(|e| panic!("{mix}: {e}"));
        let k = r.kv.as_ref().unwrap();
        assert!(
            k.gets > 100 && k.dram_hits + k.flash_hits > 0,
            "{mix}: {k:?}"
        );
    }
    // The error a config with this pattern and value table gets.
    let refusal = |pattern: &str, values: &str| {
        let mut kv = spec(0.5, 64, 64, [0.0; 3], false);
        kv.value_sizes = Some(values.into());
        let mut c = kv_config("hemem", 0, 0.1, 4, 256, kv, 100, 1);
        c.workload.pattern = Pattern::Cachebench {
            mix: pattern.into(),
        };
        c.resolve().unwrap_err().to_string()
    };
    let e = refusal("tao", "flat-kvcache");
    assert!(
        e.starts_with("workload.pattern.mix: unknown CacheBench mix 'tao'"),
        "{e}"
    );
    let e = refusal("flat-kvcache", "tao");
    assert!(
        e.starts_with("kv.value_sizes: unknown CacheBench mix 'tao'"),
        "{e}"
    );
    // kvcache-reg's largest values do not fit 64 KiB regions.
    let e = refusal("kvcache-reg", "kvcache-reg");
    assert!(
        e.starts_with("kv.value_sizes: 523458-byte values do not fit"),
        "{e}"
    );
}

/// A large-object region write is one request: with heat counted per
/// request, it adds one count to each segment it covers, where counting
/// every block adds one per block and halves every segment's counts over
/// and over (`heat_unit`).
#[test]
fn a_region_write_counts_once_per_segment_in_the_tiering_heat() {
    let coolings = |unit: &str| {
        let kv = spec(0.0, 9000, 16, [0.0, 0.0, 0.0], false);
        let mut c = kv_config("hemem", 1, 0.5, 16, 256, kv, 5_000, 5);
        c.params
            .insert("heat_unit".into(), toml::Value::String(unit.into()));
        // One 64 KiB region per segment.
        c.params
            .insert("segment_blocks".into(), toml::Value::Integer(16));
        let r = run(&c).unwrap_or_else(|e| panic!("{unit}: {e}"));
        let k = r.kv.as_ref().expect("key-value figures");
        assert!(
            k.volume_reads > 100,
            "{unit}: {} volume reads",
            k.volume_reads
        );
        r.controller
            .iter()
            .find(|(name, _)| name == "heat_coolings")
            .map(|(_, v)| *v)
            .expect("heat_coolings in the controller state")
    };
    let (per_request, per_block) = (coolings("request"), coolings("block"));
    assert!(
        per_block > 10.0 * per_request,
        "{per_request} coolings per request, {per_block} per block"
    );
}
