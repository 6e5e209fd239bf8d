//! Run configurations shared by the randomized consistency tests: every
//! registered policy with settings that make its machinery busy in short
//! runs (small caches, fast controllers, low thresholds).

use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{ClientSpec, SimConfig};

pub fn pattern(kind: u8, theta: f64) -> Pattern {
    match kind {
        0 => Pattern::Uniform,
        1 => Pattern::Zipf { theta },
        2 => Pattern::Hotset {
            hot_fraction: 0.1,
            hot_access_fraction: 0.9,
        },
        3 => Pattern::Latest { theta },
        4 => Pattern::Recent {
            hot_fraction: 0.2,
            hot_access_fraction: 0.9,
        },
        _ => Pattern::Sequential { streams: 1 },
    }
}

#[allow(clippy::too_many_arguments)]
pub fn config(
    policy: &str,
    write_mode: &str,
    replacement: &str,
    fill: &str,
    pat: u8,
    write_ratio: f64,
    write_set: f64,
    request_blocks: u32,
    workers: u32,
    cache_blocks: u64,
    seed: u64,
) -> SimConfig {
    let mut c = SimConfig {
        devices: vec!["optane-905p".into(), "flash-970pro".into()],
        policy: policy.into(),
        cache_blocks,
        workload: WorkloadSpec {
            pattern: pattern(pat, 0.9),
            working_set_blocks: Some(cache_blocks * 3),
            write_ratio,
            write_set_fraction: write_set,
            request_blocks,
            scramble: seed.is_multiple_of(2),
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(workers),
            ..ClientSpec::default()
        },
        duration_s: 0.02,
        warmup_s: 0.0,
        seed,
        prefill: !seed.is_multiple_of(3),
        volume_blocks: Some(cache_blocks * 3 + 64 + 20_000),
        ..SimConfig::default()
    };
    if policy == "passthrough" {
        return c;
    }
    if tiermux_core::policies::tica::on_dram_and_two_ssds(policy) {
        // DRAM, a read- and a write-optimized SSD over a slower SSD: a
        // small DRAM, so that its partitions and the mover are busy.
        c.devices = ["dram", "optane-905p", "flash-970pro", "sata-870"]
            .map(String::from)
            .to_vec();
        c.middle_device_blocks = vec![cache_blocks, cache_blocks];
        c.cache_blocks = (cache_blocks / 8).max(3);
        return c;
    }
    if policy == "split" {
        c.params
            .insert("split_rate".into(), toml::Value::Float(0.5));
        return c;
    }
    if policy == "stripe" {
        c.params
            .insert("stripe_blocks".into(), toml::Value::Integer(4));
        return c;
    }
    if matches!(policy, "hybrid-lru" | "hybrid-arc") {
        return c;
    }
    if policy == "hibachi" {
        c.params
            .insert("run_threshold".into(), toml::Value::Integer(2));
        return c;
    }
    if matches!(
        policy,
        "hemem" | "most" | "batman" | "colloid" | "colloid+" | "colloid++"
    ) {
        // Small segments, fast quanta and low thresholds, so that
        // promotions, swaps, mirroring and cleaning happen in short runs.
        for (k, v) in tiering_params(policy) {
            c.params.insert(k.into(), v);
        }
        return c;
    }
    let s = |v: &str| toml::Value::String(v.into());
    c.params.insert("write_mode".into(), s(write_mode));
    c.params.insert("replacement".into(), s(replacement));
    c.params.insert("fill".into(), s(fill));
    c.params
        .insert("dirty_high_ratio".into(), toml::Value::Float(0.3));
    c.params
        .insert("dirty_low_ratio".into(), toml::Value::Float(0.2));
    c.params
        .insert("flush_max_inflight".into(), toml::Value::Integer(2));
    if write_mode == "wa" && !seed.is_multiple_of(2) {
        c.params.insert("wa_write_hit".into(), s("invalidate"));
    }
    // Tune fast so that the controllers act within the short run.
    if policy != "classic" && policy != "stacked" {
        c.params.insert("window_ms".into(), toml::Value::Float(0.2));
    }
    if policy == "nhc" {
        c.params
            .insert("stable_window_ms".into(), toml::Value::Float(0.5));
    }
    if policy == "nhc" || policy.starts_with("sib") {
        c.params
            .insert("min_window_ops".into(), toml::Value::Integer(4));
    }
    c
}

/// Parameters that make a tiering policy move segments in short runs.
pub fn tiering_params(policy: &str) -> Vec<(&'static str, toml::Value)> {
    let mut v = vec![
        ("segment_blocks", toml::Value::Integer(4)),
        ("quantum_ms", toml::Value::Float(0.2)),
        ("hot_threshold", toml::Value::Integer(2)),
        ("cooling_threshold", toml::Value::Integer(6)),
    ];
    if policy == "batman" {
        v.push(("perf_access_share", toml::Value::Float(0.5)));
    }
    if policy.starts_with("colloid") {
        v.push(("latency_alpha", toml::Value::Float(1.0)));
    }
    if policy == "most" {
        v.push(("mirror_step_mb", toml::Value::Float(0.05)));
        v.push(("ratio_step", toml::Value::Float(0.25)));
        v.push(("latency_alpha", toml::Value::Float(1.0)));
        v.push(("clean_min_rewrite_distance", toml::Value::Float(1.0)));
    }
    v
}

/// Every registered policy: a new one is checked without editing this file.
pub fn policies() -> Vec<&'static str> {
    tiermux_core::REGISTRY.iter().map(|r| r.name).collect()
}

/// A key-value run of `policy`: `keys` keys over a volume of three caches
/// and 8 MiB, for 30 ms.
#[allow(clippy::too_many_arguments, dead_code)]
pub fn kv_config(
    policy: &str,
    pat: u8,
    write_ratio: f64,
    workers: u32,
    cache_blocks: u64,
    kv: tiermux_sim::kvconfig::KvSpec,
    keys: u64,
    seed: u64,
) -> SimConfig {
    let mut c = config(
        policy,
        ["wa", "wt", "wb"][seed as usize % 3],
        "lru",
        "sync",
        pat,
        write_ratio,
        1.0,
        1,
        workers,
        cache_blocks,
        seed,
    );
    c.workload.working_set_blocks = Some(keys);
    c.volume_blocks = Some(cache_blocks * 3 + 2048);
    c.duration_s = 0.03;
    c.kv = Some(kv);
    c
}
