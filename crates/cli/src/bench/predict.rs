//! The simulator's prediction for the bench's profiles, policies,
//! workloads and concurrency levels.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use tiermux_core::Op;
use tiermux_device::calibrate::closed_loop_throughput;
use tiermux_device::lookup_profile;
use tiermux_sim::config::ClientSpec;
use tiermux_sim::experiment::run_all;
use tiermux_sim::workload::WorkloadSpec;
use tiermux_sim::SimConfig;

use super::config::{BenchConfig, BenchWorkload};

/// The simulator's prediction per (workload, policy label, level): (ops/s,
/// mean latency µs); and its physical limit per workload.
#[allow(clippy::type_complexity)]
pub(super) fn predict(
    cfg: &BenchConfig,
) -> Result<(
    BTreeMap<(String, String, u32), (f64, f64)>,
    BTreeMap<String, f64>,
)> {
    let bs = cfg.block_size;
    let base = |w: &BenchWorkload, level: u32| SimConfig {
        devices: vec![cfg.fast_profile.clone(), cfg.slow_profile.clone()],
        profiles: cfg.profile.clone(),
        block_size: bs,
        cache_blocks: cfg.cache_blocks(),
        volume_blocks: Some(cfg.volume_bytes() / bs as u64),
        workload: WorkloadSpec {
            hit_ratio: Some(cfg.hit_ratio),
            write_ratio: (100 - w.read_percent) as f64 / 100.0,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(level),
            ..ClientSpec::default()
        },
        duration_s: cfg.sim_duration_s,
        warmup_s: cfg.sim_warmup_s,
        ..SimConfig::default()
    };
    let mut keys = Vec::new();
    let mut configs = Vec::new();
    for w in &cfg.workload {
        for p in &cfg.policy {
            for &level in &cfg.levels {
                let mut c = base(w, level);
                // The measured span stays the bench's; a policy with a
                // longer ramp is predicted after as long a start.
                c.warmup_s = p.sim_warmup_s(cfg);
                c.duration_s = c.warmup_s + (cfg.sim_duration_s - cfg.sim_warmup_s);
                c.policy = p.name.clone();
                c.params = p.params.clone();
                keys.push((w.name.clone(), p.label.clone(), level));
                configs.push(c);
            }
        }
    }
    // Each device alone at the highest level: its closed-loop read and
    // write throughput, mixed in the workload's proportion (time per
    // request adds up).
    let top = *cfg.levels.iter().max().unwrap_or(&1);
    let mut limits: BTreeMap<String, f64> = BTreeMap::new();
    for w in &cfg.workload {
        let r = w.read_percent as f64 / 100.0;
        let mut sum = 0.0;
        for dev in [&cfg.fast_profile, &cfg.slow_profile] {
            let m = lookup_profile(dev, &cfg.profile)
                .with_context(|| format!("no profile '{dev}'"))?
                .model()?;
            let reads = closed_loop_throughput(&m, Op::Read, bs as u64, top);
            let writes = closed_loop_throughput(&m, Op::Write, bs as u64, top);
            sum += 1.0 / (r / reads + (1.0 - r) / writes);
        }
        limits.insert(w.name.clone(), sum);
    }
    let results = run_all(&configs, crate::threads(None), &|_| {});
    let mut out = BTreeMap::new();
    for (k, r) in keys.into_iter().zip(results) {
        let r = r.with_context(|| format!("simulating {k:?}"))?;
        out.insert(k, (r.throughput_ops_per_s, r.mean_latency_us));
    }
    Ok((out, limits))
}
