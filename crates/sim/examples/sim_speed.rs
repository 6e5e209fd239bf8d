//! Simulator speed: simulated client requests per second of wall-clock time
//! for classic caching over two queueing devices (Optane SSD + Flash SSD),
//! 32 closed-loop workers, a 1,000,000-block working set (4 KiB blocks,
//! 95 % hits with a 950,000-block cache), read-only and 30 % writes; and
//! MOST on the same devices and workload (the 950,000 blocks its fast
//! device), side by side.
//!
//! Run: `cargo run --release -p tiermux-sim --example sim_speed`
//!
//! Environment, for looking closer: `SIM_SPEED_BLOCKS` sets the working
//! set (the cache stays 95 % of it; 10,000 blocks fit in the CPU's caches,
//! which separates compute from memory stalls), `SIM_SPEED_CASE` runs only
//! the cases whose label starts with it, and `SIM_SPEED_DURATION_S` sets
//! the simulated time (0.5 s of it warm-up).

use std::time::Instant;

use tiermux_sim::workload::WorkloadSpec;
use tiermux_sim::{run, ClientSpec, SimConfig};

fn main() {
    let target = 1_000_000.0;
    let blocks: u64 = env_or("SIM_SPEED_BLOCKS", 1_000_000);
    let duration_s: f64 = env_or("SIM_SPEED_DURATION_S", 4.0);
    let only = std::env::var("SIM_SPEED_CASE").unwrap_or_default();
    println!(
        "{:<28} {:>12} {:>10} {:>16} {:>8}",
        "case", "requests", "wall s", "requests/s", "vs 1M/s"
    );
    for (label, policy, write_ratio, mode) in [
        ("classic lru wa, read-only", "classic", 0.0, "wa"),
        ("classic lru wb, 30 % writes", "classic", 0.3, "wb"),
        ("most, read-only", "most", 0.0, ""),
        ("most, 30 % writes", "most", 0.3, ""),
    ] {
        if !label.starts_with(only.as_str()) {
            continue;
        }
        let mut cfg = SimConfig {
            devices: vec!["optane-905p".into(), "flash-970pro".into()],
            policy: policy.into(),
            cache_blocks: blocks * 95 / 100,
            workload: WorkloadSpec {
                working_set_blocks: Some(blocks),
                write_ratio,
                ..WorkloadSpec::default()
            },
            client: ClientSpec {
                workers: Some(32),
                ..ClientSpec::default()
            },
            duration_s,
            warmup_s: 0.5,
            ..SimConfig::default()
        };
        if !mode.is_empty() {
            cfg.params
                .insert("write_mode".into(), toml::Value::String(mode.into()));
        }
        let start = Instant::now();
        let r = run(&cfg).expect("run");
        let wall = start.elapsed().as_secs_f64();
        // Every request of the run counts (warm-up included): the wall time
        // covers them all.
        let total = r.requests as f64 * cfg.duration_s / (cfg.duration_s - cfg.warmup_s);
        let rate = total / wall;
        println!(
            "{label:<28} {:>12.0} {:>10.2} {:>16.0} {:>7.2}x",
            total,
            wall,
            rate,
            rate / target
        );
    }
}

/// The environment variable `name` parsed, or `default` when it is unset.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a valid value")),
        Err(_) => default,
    }
}
