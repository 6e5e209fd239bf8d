//! Every read returns the last acknowledged write: randomized runs over
//! every policy, write mode, replacement and fill mode, with small caches
//! and low dirty watermarks so that evictions, flushes and lock contention
//! are frequent. The simulator's version checker fails a run on any stale
//! read; a deliberately broken policy shows that it does.

use proptest::prelude::*;
use tiermux_core::policy::Ctx;
use tiermux_core::{Access, Op, Outcome, Policy};
use tiermux_sim::sim::{SimError, Simulator};
use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{run, ClientSpec, SimConfig};

/// The broken test policy's cache and home devices.
const PERF: u8 = 0;
const CAP: u8 = 1;

fn pattern(kind: u8, theta: f64) -> Pattern {
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
        _ => Pattern::Sequential,
    }
}

#[allow(clippy::too_many_arguments)]
fn config(
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
fn tiering_params(policy: &str) -> Vec<(&'static str, toml::Value)> {
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
fn policies() -> Vec<&'static str> {
    tiermux_core::REGISTRY.iter().map(|r| r.name).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn reads_return_last_acknowledged_write(
        policy in prop::sample::select(policies()),
        write_mode in prop::sample::select(vec!["wa", "wt", "wb"]),
        replacement in prop::sample::select(vec!["lru", "arc"]),
        fill in prop::sample::select(vec!["sync", "async"]),
        pat in 0u8..6,
        write_ratio in 0.0f64..0.9,
        write_set in 0.05f64..1.0,
        request_blocks in 1u32..4,
        workers in 1u32..48,
        cache_blocks in 8u64..400,
        seed in 0u64..1_000_000,
    ) {
        let c = config(policy, write_mode, replacement, fill, pat, write_ratio, write_set,
                       request_blocks, workers, cache_blocks, seed);
        let r = run(&c).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(r.reads_checked > 0 || write_ratio > 0.85);
        prop_assert!(r.requests > 0);
    }
}

/// Every combination at least once, with heavy writes and contention.
#[test]
fn every_policy_and_write_mode() {
    for policy in policies() {
        for wm in ["wa", "wt", "wb"] {
            for repl in ["lru", "arc"] {
                for fill in ["sync", "async"] {
                    for seed in 0..3 {
                        let c = config(
                            policy,
                            wm,
                            repl,
                            fill,
                            (seed % 4) as u8,
                            0.5,
                            0.3,
                            2,
                            32,
                            64,
                            seed,
                        );
                        let r = run(&c)
                            .unwrap_or_else(|e| panic!("{policy}/{wm}/{repl}/{fill}/{seed}: {e}"));
                        assert!(r.reads_checked > 1000, "{policy}/{wm}: {}", r.reads_checked);
                    }
                }
            }
        }
    }
}

/// Two stacked caches (DRAM over NVM) over a Flash home device, every write
/// mode and replacement: the checker finds no stale read, and both levels
/// serve hits.
#[test]
fn stacked_caches_over_three_devices() {
    for wm in ["wa", "wt", "wb"] {
        for repl in ["lru", "arc"] {
            for seed in 0..3 {
                let mut c = config(
                    "stacked",
                    wm,
                    repl,
                    "async",
                    (seed % 4) as u8,
                    0.4,
                    0.3,
                    2,
                    32,
                    48,
                    seed,
                );
                c.devices = vec!["dram".into(), "nvm".into(), "flash-970pro".into()];
                c.middle_device_blocks = vec![160];
                let r = run(&c).unwrap_or_else(|e| panic!("stacked/{wm}/{repl}/{seed}: {e}"));
                assert!(r.reads_checked > 1000, "stacked/{wm}: {}", r.reads_checked);
                let ops = |d: usize| r.devices[d].ops_per_s;
                assert!(
                    ops(0) > 0.0 && ops(1) > 0.0 && ops(2) > 0.0,
                    "{:?}",
                    r.devices
                );
                let state = |n: &str| r.controller.iter().find(|(k, _)| k == n).unwrap().1;
                assert!(
                    state("cached_blocks_1") > 0.0,
                    "the middle level holds nothing"
                );
            }
        }
    }
}

/// Write-back that forgets its cached copy is dirty: a later read is sent
/// to the stale home copy. The checker must catch it.
struct ForgetfulWriteBack {
    cached: std::collections::HashSet<u64>,
    vol: u64,
}

impl Policy for ForgetfulWriteBack {
    fn name(&self) -> &str {
        "forgetful"
    }
    fn address_space(&self, _device: usize) -> u64 {
        self.vol
    }
    fn decide(&mut self, a: Access, ctx: &mut Ctx<'_>) -> Outcome {
        match a.op {
            Op::Write => {
                self.cached.insert(a.block);
                ctx.plan.client(PERF, Op::Write, a.block);
                Outcome::Hit(PERF)
            }
            Op::Read => {
                // Bug: serves every other read from home, ignoring dirtiness.
                let dev = if a.block.is_multiple_of(2) { CAP } else { PERF };
                let dev = if self.cached.contains(&a.block) {
                    dev
                } else {
                    CAP
                };
                ctx.plan.client(dev, Op::Read, a.block);
                Outcome::Hit(dev)
            }
        }
    }
}

#[test]
fn checker_catches_stale_reads() {
    let c = config("classic", "wb", "lru", "sync", 0, 0.5, 1.0, 1, 8, 64, 7);
    let r = c.resolve().unwrap();
    let vol = r.volume_blocks;
    let sim = Simulator::with_policy(
        r,
        Box::new(ForgetfulWriteBack {
            cached: Default::default(),
            vol,
        }),
    )
    .unwrap();
    match sim.run() {
        Err(SimError::Consistency(msg)) => assert!(msg.contains("forgetful"), "{msg}"),
        other => panic!(
            "stale reads went unnoticed: {:?}",
            other.map(|r| r.reads_checked)
        ),
    }
}
