//! Simulator speed: simulated client requests per second of wall-clock time
//! for classic caching over two queueing devices (Optane SSD + Flash SSD),
//! 32 closed-loop workers, a 1,000,000-block working set (4 KiB blocks,
//! 95 % hits with a 950,000-block cache), read-only and 30 % writes; and
//! MOST on the same devices and workload (the 950,000 blocks its fast
//! device), side by side.
//!
//! Run: `cargo run --release -p tiermux-sim --example sim_speed`

use std::time::Instant;

use tiermux_sim::workload::WorkloadSpec;
use tiermux_sim::{run, ClientSpec, SimConfig};

fn main() {
    let target = 1_000_000.0;
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
        let mut cfg = SimConfig {
            devices: vec!["optane-905p".into(), "flash-970pro".into()],
            policy: policy.into(),
            cache_blocks: 950_000,
            workload: WorkloadSpec {
                working_set_blocks: Some(1_000_000),
                write_ratio,
                ..WorkloadSpec::default()
            },
            client: ClientSpec {
                workers: Some(32),
                ..ClientSpec::default()
            },
            duration_s: 4.0,
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
